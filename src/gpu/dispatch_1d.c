// dispatch_1d.c: a 1D grid of workgroups as (x, y) within the device's
// per-dimension limit (gpu.h: wgpt_dims1d, wgpt_dispatch1d). Backend-
// independent: the Dawn backend and the browser's (src/gpu/web/) share it.
#include "gpu/gpu.h"

int wgpt_dims1d(wgpt_gpu *g, uint64_t n, uint32_t *x, uint32_t *y) {
    uint64_t max = wgpt_gpu_get_info(g)->max_workgroups_per_dim;
    uint64_t dim = max < WGPT_MAX_WG_DIM ? max : WGPT_MAX_WG_DIM;
    uint64_t rows = n <= dim ? 1 : (n + dim - 1) / dim;
    if (rows > dim)
        return wgpt_gpu_fail(g, "%llu workgroups exceed even a 2D dispatch (%llu x %llu)", (unsigned long long)n,
                             (unsigned long long)dim, (unsigned long long)dim);
    *x = (uint32_t)(n <= dim ? n : dim);
    *y = (uint32_t)rows;
    return 0;
}

int wgpt_dispatch1d(wgpt_gpu *g, wgpt_bind *b, uint64_t n) {
    uint32_t x = 0, y = 0;
    if (wgpt_dims1d(g, n, &x, &y) < 0) return -1;
    return wgpt_dispatch(g, b, x, y, 1);
}
