// kernel_stats.h: reads back the file $WGPT_KERNEL_STATS names (written by
// wgpt's kernel loader and VK_LAYER_WGPT_stats, see src/gpu/vk_stats/): each
// kernel's registers a thread and shared memory, where the driver reported
// them, for `wgpt bench --profile` to print beside the kernel's time.
#ifndef WGPT_KERNEL_STATS_H
#define WGPT_KERNEL_STATS_H

#include <stddef.h>

typedef struct wgpt_kernel_stat {
    char kernel[64];
    long registers;      // -1: not reported
    long shared_bytes;   // -1: not reported
} wgpt_kernel_stat;

// Fills out (at most max) from the file at path: a "kernel NAME (FILE)" line,
// then the driver's line of that pipeline if there is one ("... | Register
// Count=N | ... | Shared Memory Size=M"); a kernel named again keeps its last
// report. Returns how many kernels it read, 0 for a file with none, -1 if it
// cannot be read.
int wgpt_kernel_stats_read(const char *path, wgpt_kernel_stat *out, int max);

// The entry for kernel in stats[0..n), or NULL.
const wgpt_kernel_stat *wgpt_kernel_stats_find(const wgpt_kernel_stat *stats, int n, const char *kernel);

#endif
