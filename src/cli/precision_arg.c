// precision_arg.c: --precision's value into wgpt_precision (see precision_arg.h).
#include "cli/precision_arg.h"

#include <stdio.h>

int wgpt_precision_arg(const char *cmd, const char *s, wgpt_precision *out) {
    if (s && wgpt_precision_parse(s, out) == 0) return 0;
    fprintf(stderr, "wgpt %s: --precision '%s': unknown (auto, fp32 or f16)\n", cmd, s ? s : "");
    return -1;
}
