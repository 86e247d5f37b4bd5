// trainer.h: the training loop: data, model, AdamW with warmup and cosine
// decay, gradient accumulation, validation, sampling, metrics, checkpoints
// and exact resume. Its options are in train_opts.h.
#ifndef WGPT_TRAINER_H
#define WGPT_TRAINER_H

#include "train/train_opts.h"
#include "util/err.h"

// Runs (or resumes) a training run in o->out_dir, which it locks for the
// run's length (a second run there is refused); progress goes to o->say.
// Returns 0 when it finished or stopped on request (a checkpoint is written
// either way); WGPT_FAILED (-1) on an error, WGPT_REFUSED (util/err.h) when
// the options are refused (checked before anything is opened). On
// either, err holds the message, one line per problem, the last saying which
// checkpoint is kept, if any.
int wgpt_train_run(const wgpt_train_opts *o, char *err, size_t errlen);

#endif
