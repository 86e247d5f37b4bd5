// train_run.h: `wgpt train`'s side of a training run: prints what the run
// says (progress on stdout, warnings and errors on stderr after "wgpt train: ")
// and turns its result into the command's exit status.
#ifndef WGPT_CLI_TRAIN_RUN_H
#define WGPT_CLI_TRAIN_RUN_H

#include "train/train_opts.h"

// Runs wgpt_train_run(o) with its say hook and live line set here (live when
// stdout is a terminal, not quiet and not a rank of mpirun; quiet prints
// errors and warnings only).
// Returns the exit status: 0 (finished or stopped), 1 (failed), 2 (options refused).
int wgpt_cli_train_run(const wgpt_train_opts *o, int quiet);

#endif
