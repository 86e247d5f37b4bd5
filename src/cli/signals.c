// signals.c: SIGINT/SIGTERM handling of the commands (see signals.h).
#include "cli/signals.h"

#include <string.h>
#include <unistd.h>

volatile sig_atomic_t wgpt_cli_stop = 0, wgpt_cli_stop_now = 0;
static const char *first_msg_ = "", *term_msg_ = NULL;

static void on_signal_(int sig) {
    if (!wgpt_cli_stop) {
        wgpt_cli_stop = 1;
        const char *m = sig == SIGTERM && term_msg_ ? term_msg_ : first_msg_;
        ssize_t w = write(STDERR_FILENO, m, strlen(m));  // async-signal-safe, unlike stdio
        (void)w;
        return;
    }
    wgpt_cli_stop_now = 1;
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
}

void wgpt_cli_signals_term_msg(const char *term_msg) { term_msg_ = term_msg; }

#ifdef __wasi__
// WebAssembly (make web) has no signals: the page's Stop button calls this
// export (web/wgpt.js: control.stop) while the command waits for the GPU, as Ctrl-C would.
__attribute__((export_name("wgpt_web_stop"))) void wgpt_web_stop(void) { on_signal_(SIGINT); }
#endif

void wgpt_cli_signals_install(const char *first_msg) {
    first_msg_ = first_msg;
    term_msg_ = NULL;
    wgpt_cli_stop = wgpt_cli_stop_now = 0;
#ifndef __wasi__  // no signals in WebAssembly
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal_;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a read of a pipe returns EINTR
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
#endif
}

void wgpt_cli_signals_restore(void) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
}
