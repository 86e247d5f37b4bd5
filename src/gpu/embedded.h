// embedded.h: the kernels/*.wgsl files, built into the binary by
// tools/embed_kernels.c (generated build/kernels_embedded.c).
#ifndef WGPT_EMBEDDED_H
#define WGPT_EMBEDDED_H

typedef struct wgpt_embedded_file {
    const char *name;  // file name, e.g. "00_shared.wgsl"
    const char *text;
} wgpt_embedded_file;

extern const wgpt_embedded_file wgpt_embedded_kernels[];
extern const int wgpt_embedded_kernel_count;

#endif
