// layernorm.c: host side of kernels/02_layernorm.wgsl (see layernorm.h).
#include "model/layernorm.h"

#include "model/variant.h"

// Rows per workgroup of the flat (CPU) twins: LN_FLAT_WG in the kernel file.
#define LN_FLAT_WG 64u
// The vec4 GPU kernels: rows per workgroup and widest row (LN_ROWS_PER_WG,
// LN_V4_MAX_C in the kernel file).
#define LN_ROWS_PER_WG 4u
#define LN_V4_MAX_C 1024u

// The kernels' LnParams.
typedef struct ln_params {
    uint32_t N, C;
} ln_params;

// v narrowed to rows [r0, r0 + rows) of a (rows, width) tensor.
static wgpt_view ln_rows(wgpt_view v, uint64_t r0, uint64_t rows, uint64_t width) {
    return (wgpt_view){v.buf, v.offset + r0 * width * 4, rows * width * 4};
}

// The whole of a (C) tensor.
static wgpt_view ln_vec(wgpt_view v, uint32_t C) { return (wgpt_view){v.buf, v.offset, (uint64_t)C * 4}; }

static int ln_covers(wgpt_view v, uint64_t floats) { return v.buf && (v.size == 0 || v.size >= floats * 4); }

// Rows per dispatch so that every (rows, C) binding fits the device. If not
// even 64 rows fit, all rows: creating the bind group then fails and says why.
static uint64_t ln_chunk(wgpt_gpu *g, uint32_t N, uint32_t C) {
    uint64_t rows = wgpt_op_chunk_rows(g, N, C);
    return rows ? rows : N;
}

// Which row kernels a layer dispatches: the GPU ones (a workgroup per row),
// their vec4 versions (LN_ROWS_PER_WG rows a workgroup) or the CPU twins.
enum { LN_GPU, LN_GPU_VEC4, LN_CPU };

// The vec4 kernels bind the (N, C) and (C) views as vec4s: C % 4 == 0 (row
// chunks then start on 16 bytes too), offsets on 16 bytes, C held in registers.
static int ln_pick(const wgpt_gpu *g, uint32_t C, const wgpt_view *vc, int nvc) {
    if (wgpt_kernel_variant_cpu(g)) return LN_CPU;
    if (C % 4 || C > LN_V4_MAX_C || !wgpt_views_vec4(vc, nvc)) return LN_GPU;
    return LN_GPU_VEC4;
}

// Workgroups of a row kernel: one per row, per LN_ROWS_PER_WG rows (vec4) or
// per LN_FLAT_WG rows (CPU twins).
static uint64_t ln_groups(int kind, uint64_t rows) {
    if (kind == LN_CPU) return (rows + LN_FLAT_WG - 1) / LN_FLAT_WG;
    if (kind == LN_GPU_VEC4) return (rows + LN_ROWS_PER_WG - 1) / LN_ROWS_PER_WG;
    return rows;
}

int wgpt_layernorm_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view mean, wgpt_view rstd, wgpt_view inp,
                           wgpt_view weight, wgpt_view bias, uint32_t N, uint32_t C) {
    uint64_t NC = (uint64_t)N * C;
    if (N == 0 || C == 0) return 0;
    if (!ln_covers(out, NC) || !ln_covers(inp, NC) || !ln_covers(mean, N) || !ln_covers(rstd, N) ||
        !ln_covers(weight, C) || !ln_covers(bias, C))
        return wgpt_gpu_fail(g, "layernorm_forward: a view is missing or smaller than its tensor (N=%u, C=%u)", N, C);
    uint64_t chunk = ln_chunk(g, N, C);
    const wgpt_view vc[4] = {out, inp, weight, bias};
    int kind = ln_pick(g, C, vc, 4);
    static const char *const NAME[] = {"layernorm_forward", "layernorm_forward_vec4", "layernorm_forward_flat"};
    for (uint64_t r0 = 0; r0 < N; r0 += chunk) {
        uint64_t rows = N - r0 < chunk ? N - r0 : chunk;
        wgpt_view v[6] = {
            ln_rows(out, r0, rows, C),  ln_rows(mean, r0, rows, 1),   ln_rows(rstd, r0, rows, 1),
            ln_rows(inp, r0, rows, C),  ln_vec(weight, C),            ln_vec(bias, C),
        };
        ln_params p = {(uint32_t)rows, C};
        if (!wgpt_op_add1d(g, op, NAME[kind], v, 6, &p, sizeof p, ln_groups(kind, rows))) return -1;
    }
    return 0;
}

int wgpt_layernorm_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dweight, wgpt_view dbias,
                            wgpt_view dout, wgpt_view inp, wgpt_view weight, wgpt_view mean, wgpt_view rstd,
                            uint32_t N, uint32_t C) {
    uint64_t NC = (uint64_t)N * C;
    if (N == 0 || C == 0) return 0;
    if (!ln_covers(dinp, NC) || !ln_covers(dout, NC) || !ln_covers(inp, NC) || !ln_covers(dweight, C) ||
        !ln_covers(dbias, C) || !ln_covers(weight, C) || !ln_covers(mean, N) || !ln_covers(rstd, N))
        return wgpt_gpu_fail(g, "layernorm_backward: a view is missing or smaller than its tensor (N=%u, C=%u)", N, C);
    uint64_t chunk = ln_chunk(g, N, C);
    // 32 columns per workgroup: LN_COLS in the kernel file.
    uint64_t col_groups = ((uint64_t)C + 31) / 32;
    const wgpt_view vc[4] = {dinp, dout, inp, weight};
    int kind = ln_pick(g, C, vc, 4);
    static const char *const NAME[] = {"layernorm_backward_input", "layernorm_backward_input_vec4",
                                       "layernorm_backward_input_flat"};
    for (uint64_t r0 = 0; r0 < N; r0 += chunk) {
        uint64_t rows = N - r0 < chunk ? N - r0 : chunk;
        ln_params p = {(uint32_t)rows, C};
        wgpt_view vi[6] = {
            ln_rows(dinp, r0, rows, C), ln_rows(dout, r0, rows, C),  ln_rows(inp, r0, rows, C),
            ln_vec(weight, C),          ln_rows(mean, r0, rows, 1),  ln_rows(rstd, r0, rows, 1),
        };
        if (!wgpt_op_add1d(g, op, NAME[kind], vi, 6, &p, sizeof p, ln_groups(kind, rows))) return -1;
        // Chunks add their column sums into dweight/dbias one after another: a
        // fixed order, so the result is still the same on every run.
        wgpt_view vp[6] = {
            ln_vec(dweight, C),         ln_vec(dbias, C),            ln_rows(dout, r0, rows, C),
            ln_rows(inp, r0, rows, C),  ln_rows(mean, r0, rows, 1),  ln_rows(rstd, r0, rows, 1),
        };
        if (!wgpt_op_add1d(g, op, "layernorm_backward_params", vp, 6, &p, sizeof p, col_groups)) return -1;
    }
    return 0;
}
