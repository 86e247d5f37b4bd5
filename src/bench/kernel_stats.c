// kernel_stats.c: the $WGPT_KERNEL_STATS file read back (see kernel_stats.h).
#include "bench/kernel_stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The number after "name=" in line, or -1.
static long stat_(const char *line, const char *name) {
    const char *at = strstr(line, name);
    if (!at) return -1;
    char *end;
    long v = strtol(at + strlen(name), &end, 10);
    return end != at + strlen(name) ? v : -1;
}

int wgpt_kernel_stats_read(const char *path, wgpt_kernel_stat *out, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    int n = 0;
    wgpt_kernel_stat *cur = NULL;  // the kernel whose pipeline line may follow
    while (fgets(line, sizeof line, f)) {
        char name[64];
        if (sscanf(line, "kernel %63s", name) == 1) {
            cur = (wgpt_kernel_stat *)wgpt_kernel_stats_find(out, n, name);
            if (!cur && n < max) {
                cur = &out[n++];
                snprintf(cur->kernel, sizeof cur->kernel, "%s", name);
                cur->registers = cur->shared_bytes = -1;
            }
            continue;
        }
        if (cur && strstr(line, " | ")) {
            long r = stat_(line, "Register Count="), s = stat_(line, "Shared Memory Size=");
            if (r >= 0) cur->registers = r;
            if (s >= 0) cur->shared_bytes = s;
            cur = NULL;  // one pipeline a kernel name
        }
    }
    fclose(f);
    return n;
}

const wgpt_kernel_stat *wgpt_kernel_stats_find(const wgpt_kernel_stat *stats, int n, const char *kernel) {
    for (int i = 0; i < n; i++)
        if (strcmp(stats[i].kernel, kernel) == 0) return &stats[i];
    return NULL;
}
