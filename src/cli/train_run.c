// train_run.c: prints a training run and picks its exit status (see train_run.h).
#include "cli/train_run.h"

#include <stdio.h>
#include <unistd.h>

#include "dist/comm.h"
#include "train/trainer.h"

static void say_(void *ctx, wgpt_train_say_kind kind, const char *text) {
    const int *quiet = ctx;
    if (kind == WGPT_TRAIN_WARN) {
        fprintf(stderr, "\nwgpt train: %s\n", text);  // the newline ends a live step line
        return;
    }
    if (*quiet) return;
    fputs(text, stdout);
    fflush(stdout);
}

int wgpt_cli_train_run(const wgpt_train_opts *o, int quiet) {
    wgpt_train_opts run = *o;
    run.say = say_;
    run.say_ctx = &quiet;
    // Under mpirun a rank's stdout is mpirun's (a pty where it has one), not the user's terminal, and
    // rank 0's output may well go to a file: progress lines every --log-every steps, never a live line.
    double kill_after_s;
    int launched = o->comm && wgpt_comm_launched(o->comm, &kill_after_s);
    run.live = !quiet && !launched && isatty(STDOUT_FILENO);
    char err[16384];
    int rc = wgpt_train_run(&run, err, sizeof err);
    if (rc == 0) return 0;
    // Options refused come before any progress line; a failure may end a
    // live one. The lines after the first say what followed (what is kept).
    fprintf(stderr, "%swgpt train: %s\n", rc == WGPT_REFUSED ? "" : "\n", err);
    return rc == WGPT_REFUSED ? 2 : 1;
}
