// linear_sgm.c: the subgroup-matrix matmuls' dispatches (see linear_sgm.h).
#include "model/linear_sgm.h"

// SgmParams of 03_linear_sgm.wgsl.
typedef struct sgm_params {
    uint32_t m, n, k;
    uint32_t flag;  // bit 0: add to the output; bit 1: bias
} sgm_params;

int wgpt_linear_sgm_available(const wgpt_gpu *g) {
    const wgpt_gpu_info *i = wgpt_gpu_get_info(g);
    return i->has_subgroup_matrix && i->sgm_config >= 0;
}

// 0 if v covers `elems` elements of `bytes_each` inside one binding, else -1 naming it.
static int check_(wgpt_gpu *g, const char *what, wgpt_view v, uint64_t elems, uint64_t bytes_each) {
    if (!v.buf) return wgpt_gpu_fail(g, "linear (subgroup matrices): %s has no buffer", what);
    uint64_t need = elems * bytes_each, have = wgpt_view_bytes(v), size = wgpt_buf_size(v.buf);
    if (v.offset + have > size || have < need)
        return wgpt_gpu_fail(g, "linear (subgroup matrices): %s covers %llu bytes from byte %llu of a %llu-byte "
                             "buffer; it needs %llu", what, (unsigned long long)have, (unsigned long long)v.offset,
                             (unsigned long long)size, (unsigned long long)need);
    if (need > wgpt_gpu_get_info(g)->max_storage_binding)
        return wgpt_gpu_fail(g, "linear (subgroup matrices): %s needs %llu bytes in one binding; the device allows "
                             "%llu", what, (unsigned long long)need,
                             (unsigned long long)wgpt_gpu_get_info(g)->max_storage_binding);
    return 0;
}

// Appends one dispatch over an (m, n) output of the device's BM x BN blocks.
static int add_(wgpt_gpu *g, wgpt_op *op, const char *kernel, wgpt_view a, wgpt_view b, wgpt_view bias, wgpt_view out,
                uint32_t m, uint32_t n, uint32_t k, uint32_t flag) {
    if (!wgpt_linear_sgm_available(g))
        return wgpt_gpu_fail(g, "linear: '%s' has no f16 subgroup matrices for %s", wgpt_gpu_get_info(g)->name, kernel);
    if (!m || !n || !k || m % 8 || n % 8 || k % 8)
        return wgpt_gpu_fail(g, "%s: m=%u, n=%u, k=%u: each must be a positive multiple of 8", kernel, m, n, k);
    const wgpt_gpu_info *i = wgpt_gpu_get_info(g);
    const wgpt_matrix_config *c = &i->matrix_configs[i->sgm_config];
    uint32_t bm = 8 * c->m, bn = 8 * c->n;  // BM, BN of the kernel file
    uint32_t gx = (n + bn - 1) / bn, gy = (m + bm - 1) / bm;
    if (gx > WGPT_MAX_WG_DIM || gy > WGPT_MAX_WG_DIM)
        return wgpt_gpu_fail(g, "%s: %u x %u blocks exceed %u a dimension", kernel, gx, gy, WGPT_MAX_WG_DIM);
    wgpt_view v[4] = {a, b, bias.buf ? bias : out, out};
    sgm_params p = {m, n, k, flag};
    return wgpt_op_add(g, op, kernel, v, 4, &p, sizeof p, gx, gy, 1) ? 0 : -1;
}

int wgpt_linear_sgm_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp16, wgpt_view weight16,
                            wgpt_view bias, uint32_t N, uint32_t C, uint32_t OC) {
    if (check_(g, "out", out, (uint64_t)N * OC, 4) < 0 || check_(g, "inp", inp16, (uint64_t)N * C, 2) < 0 ||
        check_(g, "weight", weight16, (uint64_t)OC * C, 2) < 0 || (bias.buf && check_(g, "bias", bias, OC, 4) < 0))
        return -1;
    return add_(g, op, "matmul_sgm_forward", inp16, weight16, bias, out, N, OC, C, bias.buf ? 2u : 0u);
}

int wgpt_linear_sgm_backward_input(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dout16, wgpt_view weight16,
                                   uint32_t N, uint32_t C, uint32_t OC, int accumulate) {
    wgpt_view none = {0};
    if (check_(g, "dinp", dinp, (uint64_t)N * C, 4) < 0 || check_(g, "dout", dout16, (uint64_t)N * OC, 2) < 0 ||
        check_(g, "weight", weight16, (uint64_t)OC * C, 2) < 0)
        return -1;
    return add_(g, op, "matmul_sgm_backward_input", dout16, weight16, none, dinp, N, C, OC, accumulate ? 1u : 0u);
}

int wgpt_linear_sgm_backward_weight(wgpt_gpu *g, wgpt_op *op, wgpt_view dweight, wgpt_view dout16, wgpt_view inp16,
                                    uint32_t N, uint32_t C, uint32_t OC) {
    wgpt_view none = {0};
    if (check_(g, "dweight", dweight, (uint64_t)OC * C, 4) < 0 || check_(g, "dout", dout16, (uint64_t)N * OC, 2) < 0 ||
        check_(g, "inp", inp16, (uint64_t)N * C, 2) < 0)
        return -1;
    return add_(g, op, "matmul_sgm_backward_weight", dout16, inp16, none, dweight, OC, C, N, 1u);
}
