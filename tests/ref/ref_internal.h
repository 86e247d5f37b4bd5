// ref_internal.h: helpers private to the reference implementation.
#ifndef WGPT_REF_INTERNAL_H
#define WGPT_REF_INTERNAL_H

#include <stdio.h>
#include <stdlib.h>

// Zeroed scratch of n doubles. The reference is test code: running out of
// memory for a few rows of scratch is not worth an error path, so it aborts.
static inline double *ref_scratch(size_t n) {
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p) {
        fprintf(stderr, "ref: out of memory for %zu doubles of scratch\n", n);
        abort();
    }
    return p;
}

#endif
