// bus_guard.c: SIGBUS caught around reads of mapped files (see bus_guard.h).
#include "util/bus_guard.h"

#ifdef __wasi__
// WebAssembly (make web) has no signals and its mmap is a copy: nothing can fault.
int wgpt_bus_guard_run(void (*fn)(void *arg), void *arg) {
    fn(arg);
    return 0;
}
int wgpt_bus_guard_run_within(void (*fn)(void *arg), void *arg) { return wgpt_bus_guard_run(fn, arg); }
#else
#include <setjmp.h>
#include <signal.h>
#include <string.h>

// The jump of the guarded call running on this thread. SIGBUS from a memory
// access is delivered to the thread that made it.
static _Thread_local sigjmp_buf *jump_;

static void on_bus_(int sig) {
    (void)sig;
    if (jump_) siglongjmp(*jump_, 1);
    signal(SIGBUS, SIG_DFL);  // not ours: die as the fault would have
    raise(SIGBUS);
}

int wgpt_bus_guard_run(void (*fn)(void *arg), void *arg) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_bus_;
    sigemptyset(&sa.sa_mask);
    sigjmp_buf env;
    if (sigaction(SIGBUS, &sa, &old) != 0) {  // cannot happen for SIGBUS; read unguarded then
        fn(arg);
        return 0;
    }
    int faulted = 0;
    jump_ = &env;
    // savemask 1: the jump out of the handler unblocks SIGBUS again.
    if (sigsetjmp(env, 1) == 0) fn(arg);
    else faulted = 1;
    jump_ = NULL;
    sigaction(SIGBUS, &old, NULL);
    return faulted ? -1 : 0;
}

int wgpt_bus_guard_run_within(void (*fn)(void *arg), void *arg) {
    sigjmp_buf env, *outer = jump_;  // (on the outer call's own thread: its jump, back after)
    int faulted = 0;
    jump_ = &env;
    if (sigsetjmp(env, 1) == 0) fn(arg);
    else faulted = 1;
    jump_ = outer;
    return faulted ? -1 : 0;
}
#endif
