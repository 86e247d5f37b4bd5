// err.c: the formatted-error helper (see err.h).
#include "util/err.h"

#include <stdio.h>

int wgpt_verrf(char *err, size_t errlen, const char *fmt, va_list ap) {
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    return -1;
}

int wgpt_errf(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wgpt_verrf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}
