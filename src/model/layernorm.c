// layernorm.c: host side of kernels/02_layernorm.wgsl (see layernorm.h).
#include "model/layernorm.h"

#include "model/variant.h"

// Rows per workgroup of the flat (CPU) twins: LN_FLAT_WG in the kernel file.
#define LN_FLAT_WG 64u
// The vec4 GPU kernels: rows per workgroup and widest row (LN_ROWS_PER_WG,
// LN_V4_MAX_C in the kernel file).
#define LN_ROWS_PER_WG 4u
#define LN_V4_MAX_C 1024u
// The params kernels: columns (or vec4 columns) per workgroup, and rows per
// block of the two-phase kernels (LN_COLS, LN_PART_ROWS in the kernel file).
#define LN_COLS 32u
#define LN_PART_ROWS 64u

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
enum { LN_GPU, LN_GPU_VEC4, LN_CPU, LN_CPU_VEC4 };

// Every kernel this file dispatches, by full name (a grep finds each use):
// the two row kernels in each kind above (and the forward's stats-only
// variants), then the column sums of the parameter gradients (two-phase,
// scalar or vec4 first phase; or one pass).
static const char *const LN_FORWARD[] = {"layernorm_forward", "layernorm_forward_vec4", "layernorm_forward_flat",
                                         "layernorm_forward_flat4"};
static const char *const LN_STATS[] = {"layernorm_stats", "layernorm_stats_vec4", "layernorm_stats_flat",
                                       "layernorm_stats_flat4"};
static const char *const LN_BACKWARD_INPUT[] = {"layernorm_backward_input", "layernorm_backward_input_vec4",
                                                "layernorm_backward_input_flat", "layernorm_backward_input_flat4"};
static const char *const LN_PARAMS_PART[] = {"layernorm_params_part", "layernorm_params_part_vec4"};
static const char LN_PARAMS_REDUCE[] = "layernorm_params_reduce";
static const char LN_BACKWARD_PARAMS[] = "layernorm_backward_params";

// The vec4 kernels bind the (N, C) and (C) views as vec4s: C % 4 == 0 (row
// chunks then start on 16 bytes too), offsets on 16 bytes, C held in registers
// (the GPU ones; the CPU ones, flat4, walk a row 4 columns a step).
static int ln_pick(const wgpt_gpu *g, uint32_t C, const wgpt_view *vc, int nvc) {
    if (wgpt_kernel_variant_cpu(g)) return C % 4 == 0 && wgpt_views_vec4(vc, nvc) ? LN_CPU_VEC4 : LN_CPU;
    if (C % 4 || C > LN_V4_MAX_C || !wgpt_views_vec4(vc, nvc)) return LN_GPU;
    return LN_GPU_VEC4;
}

// Workgroups of a row kernel: one per row, per LN_ROWS_PER_WG rows (vec4) or
// per LN_FLAT_WG rows (CPU twins).
static uint64_t ln_groups(int kind, uint64_t rows) {
    if (kind == LN_CPU || kind == LN_CPU_VEC4) return (rows + LN_FLAT_WG - 1) / LN_FLAT_WG;
    if (kind == LN_GPU_VEC4) return (rows + LN_ROWS_PER_WG - 1) / LN_ROWS_PER_WG;
    return rows;
}

int wgpt_layernorm_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view mean, wgpt_view rstd, wgpt_view inp,
                           wgpt_view weight, wgpt_view bias, uint32_t N, uint32_t C) {
    uint64_t NC = (uint64_t)N * C;
    if (N == 0 || C == 0) return 0;
    int stats = !out.buf;
    if ((!stats && !ln_covers(out, NC)) || !ln_covers(inp, NC) || !ln_covers(mean, N) || !ln_covers(rstd, N) ||
        !ln_covers(weight, C) || !ln_covers(bias, C))
        return wgpt_gpu_fail(g, "layernorm_forward: a view is missing or smaller than its tensor (N=%u, C=%u)", N, C);
    // the stats-only kernels declare out but never write it: the device's
    // unused binding stands in (writable, so no other binding may)
    if (stats) out = wgpt_gpu_unused_binding(g);
    if (!out.buf) return -1;
    uint64_t chunk = ln_chunk(g, N, C);
    const wgpt_view vc[4] = {out, inp, weight, bias};
    int kind = ln_pick(g, C, vc, 4);
    for (uint64_t r0 = 0; r0 < N; r0 += chunk) {
        uint64_t rows = N - r0 < chunk ? N - r0 : chunk;
        wgpt_view v[6] = {
            stats ? out : ln_rows(out, r0, rows, C), ln_rows(mean, r0, rows, 1), ln_rows(rstd, r0, rows, 1),
            ln_rows(inp, r0, rows, C),               ln_vec(weight, C),          ln_vec(bias, C),
        };
        ln_params p = {(uint32_t)rows, C};
        const char *kernel = (stats ? LN_STATS : LN_FORWARD)[kind];
        if (!wgpt_op_add1d(g, op, kernel, v, 6, &p, sizeof p, ln_groups(kind, rows))) return -1;
    }
    return 0;
}

// Bytes of the two-phase partials of `rows` rows: (2, blocks, C) floats.
static uint64_t ln_part_bytes(uint64_t rows, uint32_t C) {
    return 2 * ((rows + LN_PART_ROWS - 1) / LN_PART_ROWS) * C * 4;
}

uint64_t wgpt_layernorm_scratch_bytes(uint32_t N, uint32_t C) {
    uint64_t b = (ln_part_bytes(N, C) + 255) / 256 * 256;
    return b < 256 ? 256 : b;
}

// The column sums of a chunk: the two-phase kernels (into scratch, then into
// dweight/dbias) on GPUs with a scratch that holds a chunk's partials, else
// the one-pass kernel.
static int ln_two_phase(wgpt_gpu *g, wgpt_view scratch, uint64_t chunk, uint32_t C) {
    if (wgpt_kernel_variant_cpu(g) || !scratch.buf) return 0;
    uint64_t need = ln_part_bytes(chunk, C);
    return wgpt_view_bytes(scratch) >= need && need <= wgpt_gpu_get_info(g)->max_storage_binding;
}

int wgpt_layernorm_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dweight, wgpt_view dbias,
                            wgpt_view dout, wgpt_view inp, wgpt_view weight, wgpt_view mean, wgpt_view rstd,
                            uint32_t N, uint32_t C, wgpt_view scratch) {
    uint64_t NC = (uint64_t)N * C;
    if (N == 0 || C == 0) return 0;
    if (!ln_covers(dinp, NC) || !ln_covers(dout, NC) || !ln_covers(inp, NC) || !ln_covers(dweight, C) ||
        !ln_covers(dbias, C) || !ln_covers(weight, C) || !ln_covers(mean, N) || !ln_covers(rstd, N))
        return wgpt_gpu_fail(g, "layernorm_backward: a view is missing or smaller than its tensor (N=%u, C=%u)", N, C);
    uint64_t chunk = ln_chunk(g, N, C);
    uint64_t col_groups = ((uint64_t)C + LN_COLS - 1) / LN_COLS;
    const wgpt_view vc[4] = {dinp, dout, inp, weight};
    int kind = ln_pick(g, C, vc, 4);
    int two_phase = ln_two_phase(g, scratch, chunk, C);
    // The vec4 phase 1 binds dout, inp and the partials as vec4s (row chunks
    // then start on 16 bytes too).
    const wgpt_view vp4[3] = {dout, inp, scratch};
    int part_vec4 = two_phase && C % 4 == 0 && wgpt_views_vec4(vp4, 3);
    uint64_t part_cols = part_vec4 ? C / 4 : C;
    for (uint64_t r0 = 0; r0 < N; r0 += chunk) {
        uint64_t rows = N - r0 < chunk ? N - r0 : chunk;
        ln_params p = {(uint32_t)rows, C};
        wgpt_view vi[6] = {
            ln_rows(dinp, r0, rows, C), ln_rows(dout, r0, rows, C),  ln_rows(inp, r0, rows, C),
            ln_vec(weight, C),          ln_rows(mean, r0, rows, 1),  ln_rows(rstd, r0, rows, 1),
        };
        if (!wgpt_op_add1d(g, op, LN_BACKWARD_INPUT[kind], vi, 6, &p, sizeof p, ln_groups(kind, rows))) return -1;
        // Chunks add their column sums into dweight/dbias one after another: a
        // fixed order, so the result is still the same on every run.
        if (two_phase) {
            // Phase 1: (column groups) x (row blocks) workgroups write the
            // blocks' partials; phase 2 adds them in block order. The next
            // chunk's phase 1 reuses the scratch after this phase 2 (the
            // dispatches of a pass run in order).
            wgpt_view part = {scratch.buf, scratch.offset, ln_part_bytes(rows, C)};
            wgpt_view v1[5] = {part, ln_rows(dout, r0, rows, C), ln_rows(inp, r0, rows, C),
                               ln_rows(mean, r0, rows, 1), ln_rows(rstd, r0, rows, 1)};
            uint64_t blocks = (rows + LN_PART_ROWS - 1) / LN_PART_ROWS;
            uint64_t groups1 = (part_cols + LN_COLS - 1) / LN_COLS * blocks;
            if (!wgpt_op_add1d(g, op, LN_PARAMS_PART[part_vec4], v1, 5, &p, sizeof p, groups1)) return -1;
            wgpt_view v2[3] = {ln_vec(dweight, C), ln_vec(dbias, C), part};
            if (!wgpt_op_add1d(g, op, LN_PARAMS_REDUCE, v2, 3, &p, sizeof p, col_groups)) return -1;
            continue;
        }
        wgpt_view vp[6] = {
            ln_vec(dweight, C),         ln_vec(dbias, C),            ln_rows(dout, r0, rows, C),
            ln_rows(inp, r0, rows, C),  ln_rows(mean, r0, rows, 1),  ln_rows(rstd, r0, rows, 1),
        };
        if (!wgpt_op_add1d(g, op, LN_BACKWARD_PARAMS, vp, 6, &p, sizeof p, col_groups)) return -1;
    }
    return 0;
}
