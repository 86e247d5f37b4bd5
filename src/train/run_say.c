// run_say.c: a training run's messages: lines for the user (rank 0 only),
// the error message one line per failure, and what a failure keeps.
#include "train/run_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

// A line for the user, handed to the caller's o->say (the library prints nothing).
void wgpt_run_say_(const run_ *r, wgpt_train_say_kind kind, const char *fmt, ...) {
    if (!r->o->say || r->rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;  // a sample may be megabytes
    if (!text) return;
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
    r->o->say(r->o->say_ctx, kind, text);
    free(text);
}

// Adds a line to the run's error message (what failed, then what is kept)
// and returns 1, so that a failing step reads `return wgpt_run_fail_(r, ...)`.
int wgpt_run_fail_(run_ *r, const char *fmt, ...) {
    size_t n = strlen(r->err);
    if (n && n + 1 < sizeof r->err) r->err[n++] = '\n', r->err[n] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, sizeof r->err - n, fmt, ap);
    va_end(ap);
    return 1;
}

int wgpt_run_stop_requested_(const run_ *r) { return r->o->stop && *r->o->stop; }

// What survives a failure: the checkpoint this run can resume from, if any.
const char *wgpt_run_kept_(const run_ *r, char *buf, size_t n) {
    if (r->saved_step >= 0)
        snprintf(buf, n, "the last checkpoint (%s, step %lld) is kept: run the same command again to resume from it",
                 r->path_ckpt, (long long)r->saved_step);
    else
        snprintf(buf, n, "no checkpoint had been written yet (--checkpoint-every %u): the steps of this run are lost",
                 r->o->checkpoint_every);
    return buf;
}
