// check.c (bench/next/stub_check): compiles the named kernels from a kernel folder on
// the default adapter; exit 1 on a compile error (limits are reported, not failed).
#include <stdio.h>
#include <string.h>
#include "gpu/gpu.h"
int main(int argc, char **argv) {
    wgpt_gpu_options opt = {.adapter_index = -1, .kernel_dir = argv[1]};
    char err[512];
    wgpt_gpu *g = wgpt_gpu_open(&opt, err, sizeof err);
    if (!g) { printf("open: %s\n", err); return 1; }
    int bad = 0;
    for (int i = 2; i < argc; i++) {
        wgpt_kernel *k = wgpt_kernel_get(g, argv[i]);
        const char *e = k ? "" : wgpt_gpu_error(g);
        int compile_err = !k && strstr(e, "failed to compile");
        printf("%-36s %s %.300s\n", argv[i], k ? "ok" : compile_err ? "COMPILE ERROR" : "not compiled (limits):", e);
        bad |= compile_err;
    }
    wgpt_gpu_close(g);
    return bad;
}
