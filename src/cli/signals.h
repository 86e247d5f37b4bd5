// signals.h: Ctrl-C, SIGTERM and SIGUSR1 (what mpirun forwards to its ranks
// without killing them) for the commands that stop cleanly (train,
// tokenize). The first signal sets wgpt_cli_stop and prints a line saying
// what happens now; the second sets wgpt_cli_stop_now (it ends a wait for a
// stuck GPU, see gpu.h) and gives both signals their default action back, so
// that a third ends the process whatever it is doing. Blocking reads are not
// restarted, so that a command reading a pipe sees the stop at once.
#ifndef WGPT_CLI_SIGNALS_H
#define WGPT_CLI_SIGNALS_H

#include <signal.h>

extern volatile sig_atomic_t wgpt_cli_stop, wgpt_cli_stop_now;

// first_msg: printed on stderr at the first signal (a static string).
void wgpt_cli_signals_install(const char *first_msg);
// term_msg: printed instead of first_msg when the first signal is SIGTERM
// (a static string; NULL: first_msg). Call after install.
void wgpt_cli_signals_term_msg(const char *term_msg);
// The default actions again.
void wgpt_cli_signals_restore(void);

#endif
