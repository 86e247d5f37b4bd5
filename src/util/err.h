// err.h: the library's one error contract, and its helper.
//
// A library function that can fail returns -1 (or NULL) and leaves a message
// a user can act on: in the caller's buffer (err, errlen) where it takes one,
// else in the object it was called on (wgpt_gpu_error, wgpt_gpt2_error,
// wgpt_loader_error). Every failure leaves a message. Nothing below src/cli
// prints or picks an exit code: the commands print the message and choose
// the exit status. (The benchmarks, src/bench beside src/cli, print their
// own reports.) (One exception to "no signal handlers in the library":
// util/bus_guard.h catches SIGBUS for the length of one file read.)
//
// Where a caller must tell causes apart, the causes are named: the enum below
// for a whole job (wgpt_train_run, wgpt_bench_step_run), else an enum beside
// the function (e.g. WGPT_BPE_* in data/tokenizer_internal.h).
#ifndef WGPT_UTIL_ERR_H
#define WGPT_UTIL_ERR_H

#include <stdarg.h>
#include <stddef.h>

// A job's result: it failed (the commands exit 1), or what the user asked for
// was refused before any work: options out of range, a model shape the device
// cannot take (the commands exit 2). The message is in err either way.
enum { WGPT_FAILED = -1, WGPT_REFUSED = -2 };

// Formats the message into err[0, errlen) (nothing when err is NULL or errlen
// is 0) and returns -1, so that a failure reads `return wgpt_errf(err, errlen, ...)`.
int wgpt_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// The same with a va_list (for helpers that add a prefix or keep the message in an object).
int wgpt_verrf(char *err, size_t errlen, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

#endif
