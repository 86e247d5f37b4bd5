// layernorm.c: host side of kernels/02_layernorm.wgsl (see layernorm.h).
#include "model/layernorm.h"
#include "model/kernel_params.h"  // the kernels' params structs

#include "model/elementwise.h"
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
// layernorm_backward_vec4: rows per workgroup, a partial row each (LN_BWD_ROWS).
#define LN_BWD_ROWS 16u

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
// variants, the vec4 one also with the residual add before it; the vec4
// backward input is the fused kernel's input-only variant), the fused vec4
// backward (dinp and phase 1 in one pass), then the column sums of the
// parameter gradients (two-phase, scalar or vec4 first phase; or one pass).
static const char *const LN_FORWARD[] = {"layernorm_forward", "layernorm_forward_vec4", "layernorm_forward_flat",
                                         "layernorm_forward_flat4"};
static const char *const LN_STATS[] = {"layernorm_stats", "layernorm_stats_vec4", "layernorm_stats_flat",
                                       "layernorm_stats_flat4"};
static const char LN_RESIDUAL_STATS[] = "layernorm_residual_stats_vec4";
static const char *const LN_BACKWARD_INPUT[] = {"layernorm_backward_input", "layernorm_backward_input_vec4",
                                                "layernorm_backward_input_flat", "layernorm_backward_input_flat4"};
static const char LN_BACKWARD_FUSED[] = "layernorm_backward_vec4";
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

// Appends a forward kernel of `kind` once per row chunk of N rows: its six
// views, each either (N, width[i]) narrowed to the chunk's rows or (width 0)
// bound as given.
static int ln_forward_chunks_(wgpt_gpu *g, wgpt_op *op, const char *kernel, int kind, const wgpt_view *v,
                              const uint32_t *width, uint32_t N, uint32_t C) {
    uint64_t chunk = ln_chunk(g, N, C);
    for (uint64_t r0 = 0; r0 < N; r0 += chunk) {
        uint64_t rows = N - r0 < chunk ? N - r0 : chunk;
        wgpt_view vr[6];
        for (int i = 0; i < 6; i++) vr[i] = width[i] ? ln_rows(v[i], r0, rows, width[i]) : v[i];
        ln_params p = {(uint32_t)rows, C};
        if (!wgpt_op_add1d(g, op, kernel, vr, 6, &p, sizeof p, ln_groups(kind, rows))) return -1;
    }
    return 0;
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
    const wgpt_view vc[4] = {out, inp, weight, bias};
    int kind = ln_pick(g, C, vc, 4);
    const wgpt_view v[6] = {out, mean, rstd, inp, ln_vec(weight, C), ln_vec(bias, C)};
    const uint32_t width[6] = {stats ? 0 : C, 1, 1, C, 0, 0};
    return ln_forward_chunks_(g, op, (stats ? LN_STATS : LN_FORWARD)[kind], kind, v, width, N, C);
}

int wgpt_layernorm_residual_stats(wgpt_gpu *g, wgpt_op *op, wgpt_view res, wgpt_view mean, wgpt_view rstd,
                                  wgpt_view a, wgpt_view b, uint32_t N, uint32_t C) {
    uint64_t NC = (uint64_t)N * C;
    if (N == 0 || C == 0) return 0;
    if (!ln_covers(res, NC) || !ln_covers(a, NC) || !ln_covers(b, NC) || !ln_covers(mean, N) || !ln_covers(rstd, N))
        return wgpt_gpu_fail(g, "layernorm_residual_stats: a view is missing or smaller than its tensor (N=%u, C=%u)",
                             N, C);
    const wgpt_view vc[3] = {res, a, b};
    if (ln_pick(g, C, vc, 3) != LN_GPU_VEC4) {
        // Rows the fused kernel does not take: the two kernels it stands for
        // (res stands in for the weight and bias the stats kernels never read).
        wgpt_view none = {NULL, 0, 0};
        if (wgpt_residual_forward(g, op, res, a, b, NC) < 0) return -1;
        return wgpt_layernorm_forward(g, op, none, mean, rstd, res, res, res, N, C);
    }
    // weight is declared but never read: the device's unused binding stands in
    wgpt_view unused = wgpt_gpu_unused_binding(g);
    if (!unused.buf) return -1;
    const wgpt_view v[6] = {res, mean, rstd, a, unused, b};
    const uint32_t width[6] = {C, 1, 1, C, 0, C};
    return ln_forward_chunks_(g, op, LN_RESIDUAL_STATS, LN_GPU_VEC4, v, width, N, C);
}

// Bytes of the partials of `rows` rows in blocks of `block`: (2, blocks, C) floats.
static uint64_t ln_part_bytes(uint64_t rows, uint32_t C, uint32_t block) {
    return 2 * ((rows + block - 1) / block) * C * 4;
}

// The fused kernel's blocks are the smaller, so its partials the more.
uint64_t wgpt_layernorm_scratch_bytes(uint32_t N, uint32_t C) {
    uint64_t b = (ln_part_bytes(N, C, LN_BWD_ROWS) + 255) / 256 * 256;
    return b < 256 ? 256 : b;
}

// How a chunk's column sums run: one pass over its rows; two phases (the
// input kernel, then partials, then their reduce); or fused (the vec4
// backward writes the partials with dinp, then the reduce).
enum { LN_SUMS_ONE_PASS, LN_SUMS_TWO_PHASE, LN_SUMS_FUSED };

static int ln_scratch_holds(wgpt_gpu *g, wgpt_view scratch, uint64_t need) {
    return wgpt_view_bytes(scratch) >= need && need <= wgpt_gpu_get_info(g)->max_storage_binding;
}

// Partials on GPUs with a scratch that holds a chunk's (fused where the vec4
// row kernels serve and the scratch can be bound as vec4s), else one pass.
static int ln_sums(wgpt_gpu *g, int kind, wgpt_view scratch, uint64_t chunk, uint32_t C) {
    if (wgpt_kernel_variant_cpu(g) || !scratch.buf) return LN_SUMS_ONE_PASS;
    if (kind == LN_GPU_VEC4 && scratch.offset % 16 == 0 &&
        ln_scratch_holds(g, scratch, ln_part_bytes(chunk, C, LN_BWD_ROWS)))
        return LN_SUMS_FUSED;
    if (ln_scratch_holds(g, scratch, ln_part_bytes(chunk, C, LN_PART_ROWS))) return LN_SUMS_TWO_PHASE;
    return LN_SUMS_ONE_PASS;
}

// One backward: its whole tensors and the kernels picked for them.
typedef struct ln_bwd {
    wgpt_view dinp, dweight, dbias, dout, inp, weight, mean, rstd;
    uint32_t C;
    int kind;       // the row kernels (LN_GPU, ...)
    int sums;       // LN_SUMS_*
    int part_vec4;  // two phases: the vec4 phase 1
} ln_bwd;

// dinp of rows [r0, r0 + rows): the row kernel of b->kind; on the vec4 ones
// LN_BWD_ROWS rows a workgroup, fused (the rows' partials into part too) or
// input-only (part declared, never touched: the device's unused binding).
static int ln_backward_input_(wgpt_gpu *g, wgpt_op *op, const ln_bwd *b, uint64_t r0, uint64_t rows,
                              wgpt_view part) {
    uint32_t C = b->C;
    ln_params p = {(uint32_t)rows, C};
    wgpt_view v[7] = {
        ln_rows(b->dinp, r0, rows, C), ln_rows(b->dout, r0, rows, C), ln_rows(b->inp, r0, rows, C),
        ln_vec(b->weight, C),          ln_rows(b->mean, r0, rows, 1), ln_rows(b->rstd, r0, rows, 1),
        part,
    };
    if (b->kind != LN_GPU_VEC4)
        return wgpt_op_add1d(g, op, LN_BACKWARD_INPUT[b->kind], v, 6, &p, sizeof p, ln_groups(b->kind, rows)) ? 0 : -1;
    int fused = b->sums == LN_SUMS_FUSED;
    if (!fused) v[6] = wgpt_gpu_unused_binding(g);
    if (!v[6].buf) return -1;
    const char *kernel = fused ? LN_BACKWARD_FUSED : LN_BACKWARD_INPUT[LN_GPU_VEC4];
    uint64_t groups = (rows + LN_BWD_ROWS - 1) / LN_BWD_ROWS;
    return wgpt_op_add1d(g, op, kernel, v, 7, &p, sizeof p, groups) ? 0 : -1;
}

// dweight/dbias += the column sums of rows [r0, r0 + rows), once their input
// kernel is appended (fused, it wrote their partials into part).
static int ln_backward_params_(wgpt_gpu *g, wgpt_op *op, const ln_bwd *b, uint64_t r0, uint64_t rows,
                               wgpt_view part) {
    uint32_t C = b->C;
    ln_params p = {(uint32_t)rows, C};
    uint64_t col_groups = ((uint64_t)C + LN_COLS - 1) / LN_COLS;
    wgpt_view dout = ln_rows(b->dout, r0, rows, C), inp = ln_rows(b->inp, r0, rows, C);
    wgpt_view mean = ln_rows(b->mean, r0, rows, 1), rstd = ln_rows(b->rstd, r0, rows, 1);
    if (b->sums == LN_SUMS_ONE_PASS) {
        wgpt_view v[6] = {ln_vec(b->dweight, C), ln_vec(b->dbias, C), dout, inp, mean, rstd};
        return wgpt_op_add1d(g, op, LN_BACKWARD_PARAMS, v, 6, &p, sizeof p, col_groups) ? 0 : -1;
    }
    uint32_t block = LN_BWD_ROWS;
    if (b->sums == LN_SUMS_TWO_PHASE) {
        // Phase 1: (column groups) x (row blocks) workgroups write the partials.
        block = LN_PART_ROWS;
        wgpt_view v1[5] = {part, dout, inp, mean, rstd};
        uint64_t cols = b->part_vec4 ? C / 4 : C;
        uint64_t groups = (cols + LN_COLS - 1) / LN_COLS * ((rows + block - 1) / block);
        if (!wgpt_op_add1d(g, op, LN_PARAMS_PART[b->part_vec4], v1, 5, &p, sizeof p, groups)) return -1;
    }
    // Phase 2 adds the partials in block order; its N is their count.
    ln_params p2 = {(uint32_t)((rows + block - 1) / block), C};
    wgpt_view v2[3] = {ln_vec(b->dweight, C), ln_vec(b->dbias, C), part};
    return wgpt_op_add1d(g, op, LN_PARAMS_REDUCE, v2, 3, &p2, sizeof p2, col_groups) ? 0 : -1;
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
    const wgpt_view vc[4] = {dinp, dout, inp, weight};
    ln_bwd b = {dinp, dweight, dbias, dout, inp, weight, mean, rstd, C, ln_pick(g, C, vc, 4), 0, 0};
    b.sums = ln_sums(g, b.kind, scratch, chunk, C);
    // The vec4 phase 1 binds dout, inp and the partials as vec4s (row chunks
    // then start on 16 bytes too).
    const wgpt_view vp4[3] = {dout, inp, scratch};
    b.part_vec4 = C % 4 == 0 && wgpt_views_vec4(vp4, 3);
    uint32_t block = b.sums == LN_SUMS_FUSED ? LN_BWD_ROWS : LN_PART_ROWS;
    for (uint64_t r0 = 0; r0 < N; r0 += chunk) {
        uint64_t rows = N - r0 < chunk ? N - r0 : chunk;
        // Every chunk's partials start the scratch: the next chunk overwrites
        // them after this chunk's reduce has read them (the dispatches of a
        // pass run in order). Chunks add into dweight/dbias one after another:
        // a fixed order, so the result is still the same on every run.
        wgpt_view part = {scratch.buf, scratch.offset, ln_part_bytes(rows, C, block)};
        if (ln_backward_input_(g, op, &b, r0, rows, part) || ln_backward_params_(g, op, &b, r0, rows, part)) return -1;
    }
    return 0;
}
