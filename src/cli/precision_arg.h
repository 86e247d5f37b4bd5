// precision_arg.h: the one parser of --precision for every command: its
// value into the enum the library takes (model/gpt2.h).
#ifndef WGPT_PRECISION_ARG_H
#define WGPT_PRECISION_ARG_H

#include "model/gpt2.h"

// s ("auto", "fp32" or "f16") into *out. Anything else: a message naming
// the command and the value on stderr, and -1.
int wgpt_precision_arg(const char *cmd, const char *s, wgpt_precision *out);

#endif
