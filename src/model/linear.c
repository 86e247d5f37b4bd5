// linear.c: the linear layer's dispatches (see linear.h), split into row
// chunks where a tensor exceeds the device's binding limit.
#include "model/linear.h"

#include "model/variant.h"

// The kernels' tile edges (kernels/03_linear.wgsl: TILE, BB_COLS).
#define TILE 64u
#define BB_COLS 32u
// The flat (CPU) twins' output block per workgroup: FLAT_ROWS rows of
// FLAT_WG * FLAT_COLS = 128 columns.
#define FLAT_ROWS 16u
#define FLAT_N 128u

// LinearParams of 03_linear.wgsl: the meaning of each field per kernel is in
// docs/kernels/03_linear.md.
typedef struct linear_params {
    uint32_t m, n, k;  // output rows, output columns, reduction length
    uint32_t ld, off;  // row stride and first column of out / dout
    uint32_t flag;     // forward: has bias; backward_input: accumulate
} linear_params;

static uint32_t tiles_(uint64_t n, uint32_t tile) { return (uint32_t)((n + tile - 1) / tile); }
static uint64_t min_(uint64_t a, uint64_t b) { return a < b ? a : b; }

// A range of v: `bytes` bytes from byte `at` of the view.
static wgpt_view sub_(wgpt_view v, uint64_t at, uint64_t bytes) {
    return (wgpt_view){v.buf, v.offset + at, bytes};
}

// 0 if v holds at least `floats` floats, else -1 naming the argument.
static int check_view_(wgpt_gpu *g, const char *what, wgpt_view v, uint64_t floats) {
    if (!v.buf) return wgpt_gpu_fail(g, "linear: %s has no buffer", what);
    uint64_t size = wgpt_buf_size(v.buf);
    uint64_t bytes = v.size ? v.size : (v.offset < size ? size - v.offset : 0);
    if (v.offset + bytes > size || bytes < floats * 4)
        return wgpt_gpu_fail(g, "linear: %s covers %llu bytes from byte %llu of a %llu-byte buffer; it needs %llu",
                              what, (unsigned long long)bytes, (unsigned long long)v.offset,
                              (unsigned long long)size, (unsigned long long)(floats * 4));
    return 0;
}

// Rows per chunk of a (rows, row_floats) tensor; 0 (error set) if not even 64 fit.
static uint64_t chunk_(wgpt_gpu *g, const char *what, uint64_t rows, uint64_t row_floats) {
    uint64_t r = wgpt_op_chunk_rows(g, rows, row_floats);
    if (!r)
        wgpt_gpu_fail(g, "linear: 64 rows of %s (%llu floats each) exceed the device's binding limit of %llu bytes",
                       what, (unsigned long long)row_floats,
                       (unsigned long long)wgpt_gpu_get_info(g)->max_storage_binding);
    return r;
}

// The kernel (tiled, or its flat CPU twin `<tiled>_flat`, see variant.h) and
// grid for an (m, n) output. The flat grid needs ceil(m / 16) <= 65535 rows
// of workgroups; past that the tiled kernel serves on every device.
typedef struct mm_pick {
    const char *kernel;
    uint32_t x, y;
} mm_pick;

static mm_pick pick_(wgpt_gpu *g, const char *tiled, const char *flat, uint64_t m, uint64_t n) {
    if (wgpt_kernel_variant_cpu(g) && tiles_(m, FLAT_ROWS) <= WGPT_MAX_WG_DIM)
        return (mm_pick){flat, tiles_(n, FLAT_N), tiles_(m, FLAT_ROWS)};
    return (mm_pick){tiled, tiles_(n, TILE), tiles_(m, TILE)};
}

static int check_sizes_(wgpt_gpu *g, uint32_t N, uint32_t C, uint32_t OC) {
    if (!N || !C || !OC) return wgpt_gpu_fail(g, "linear: N=%u, C=%u, OC=%u: all must be > 0", N, C, OC);
    // One dispatch covers at most 65535 tiles a dimension; the bias kernel 65535 * 32 columns.
    uint64_t most = (uint64_t)WGPT_MAX_WG_DIM * BB_COLS;
    if (N > most || C > most || OC > most)
        return wgpt_gpu_fail(g, "linear: N=%u, C=%u, OC=%u: each must be at most %llu", N, C, OC,
                              (unsigned long long)most);
    return 0;
}

int wgpt_linear_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp, wgpt_view weight, wgpt_view bias,
                        uint32_t N, uint32_t C, uint32_t OC) {
    if (check_sizes_(g, N, C, OC) < 0 || check_view_(g, "out", out, (uint64_t)N * OC) < 0 ||
        check_view_(g, "inp", inp, (uint64_t)N * C) < 0 || check_view_(g, "weight", weight, (uint64_t)OC * C) < 0 ||
        (bias.buf && check_view_(g, "bias", bias, OC) < 0))
        return -1;
    // inp and out are split over the same rows; weight (and bias) over output
    // channels, each chunk writing its column block of out (ld = OC, off = o0).
    uint64_t rows_n = chunk_(g, "inp/out", N, C > OC ? C : OC);
    uint64_t rows_o = chunk_(g, "weight", OC, C);
    if (!rows_n || !rows_o) return -1;
    for (uint64_t n0 = 0; n0 < N; n0 += rows_n) {
        uint64_t nr = min_(rows_n, N - n0);
        for (uint64_t o0 = 0; o0 < OC; o0 += rows_o) {
            uint64_t orr = min_(rows_o, OC - o0);
            wgpt_view w = sub_(weight, o0 * C * 4, orr * C * 4);
            wgpt_view v[4] = {
                sub_(inp, n0 * C * 4, nr * C * 4),
                w,
                // without a bias the kernel never reads binding 2: the weight chunk stands in
                bias.buf ? sub_(bias, o0 * 4, orr * 4) : w,
                sub_(out, n0 * OC * 4, nr * OC * 4),
            };
            linear_params p = {(uint32_t)nr, (uint32_t)orr, C, OC, (uint32_t)o0, bias.buf != NULL};
            mm_pick k = pick_(g, "matmul_forward", "matmul_forward_flat", nr, orr);
            if (!wgpt_op_add(g, op, k.kernel, v, 4, &p, sizeof p, k.x, k.y, 1)) return -1;
        }
    }
    return 0;
}

// dinp = dout @ weight: a sum over output channels, so the weight chunks are
// added one after another in ascending order (the first per `accumulate`).
static int backward_input_(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dout, wgpt_view weight, uint32_t N,
                           uint32_t C, uint32_t OC, int accumulate, uint64_t rows_n, uint64_t rows_o) {
    for (uint64_t n0 = 0; n0 < N; n0 += rows_n) {
        uint64_t nr = min_(rows_n, N - n0);
        for (uint64_t o0 = 0; o0 < OC; o0 += rows_o) {
            uint64_t orr = min_(rows_o, OC - o0);
            wgpt_view v[3] = {
                sub_(dout, n0 * OC * 4, nr * OC * 4),
                sub_(weight, o0 * C * 4, orr * C * 4),
                sub_(dinp, n0 * C * 4, nr * C * 4),
            };
            linear_params p = {(uint32_t)nr, C, (uint32_t)orr, OC, (uint32_t)o0, o0 > 0 || accumulate};
            mm_pick k = pick_(g, "matmul_backward_input", "matmul_backward_input_flat", nr, C);
            if (!wgpt_op_add(g, op, k.kernel, v, 3, &p, sizeof p, k.x, k.y, 1)) return -1;
        }
    }
    return 0;
}

// dweight += dout^T @ inp: a sum over token rows; the row chunks are added in
// ascending order into each output-channel chunk of dweight.
static int backward_weight_(wgpt_gpu *g, wgpt_op *op, wgpt_view dweight, wgpt_view dout, wgpt_view inp, uint32_t N,
                            uint32_t C, uint32_t OC, uint64_t rows_n, uint64_t rows_o) {
    for (uint64_t o0 = 0; o0 < OC; o0 += rows_o) {
        uint64_t orr = min_(rows_o, OC - o0);
        for (uint64_t n0 = 0; n0 < N; n0 += rows_n) {
            uint64_t nr = min_(rows_n, N - n0);
            wgpt_view v[3] = {
                sub_(dout, n0 * OC * 4, nr * OC * 4),
                sub_(inp, n0 * C * 4, nr * C * 4),
                sub_(dweight, o0 * C * 4, orr * C * 4),
            };
            linear_params p = {(uint32_t)orr, C, (uint32_t)nr, OC, (uint32_t)o0, 0};
            mm_pick k = pick_(g, "matmul_backward_weight", "matmul_backward_weight_flat", orr, C);
            if (!wgpt_op_add(g, op, k.kernel, v, 3, &p, sizeof p, k.x, k.y, 1)) return -1;
        }
    }
    return 0;
}

static int backward_bias_(wgpt_gpu *g, wgpt_op *op, wgpt_view dbias, wgpt_view dout, uint32_t N, uint32_t OC,
                          uint64_t rows_n) {
    for (uint64_t n0 = 0; n0 < N; n0 += rows_n) {
        uint64_t nr = min_(rows_n, N - n0);
        wgpt_view v[2] = {sub_(dout, n0 * OC * 4, nr * OC * 4), sub_(dbias, 0, (uint64_t)OC * 4)};
        linear_params p = {0, OC, (uint32_t)nr, OC, 0, 0};
        if (!wgpt_op_add(g, op, "matmul_backward_bias", v, 2, &p, sizeof p, tiles_(OC, BB_COLS), 1, 1)) return -1;
    }
    return 0;
}

int wgpt_linear_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dweight, wgpt_view dbias,
                         wgpt_view dout, wgpt_view inp, wgpt_view weight, uint32_t N, uint32_t C, uint32_t OC,
                         int accumulate_dinp) {
    if (check_sizes_(g, N, C, OC) < 0 || check_view_(g, "dinp", dinp, (uint64_t)N * C) < 0 ||
        check_view_(g, "dweight", dweight, (uint64_t)OC * C) < 0 ||
        (dbias.buf && check_view_(g, "dbias", dbias, OC) < 0) ||
        check_view_(g, "dout", dout, (uint64_t)N * OC) < 0 || check_view_(g, "inp", inp, (uint64_t)N * C) < 0 ||
        check_view_(g, "weight", weight, (uint64_t)OC * C) < 0)
        return -1;
    uint64_t rows_n = chunk_(g, "dout/inp/dinp", N, C > OC ? C : OC);
    uint64_t rows_o = chunk_(g, "weight/dweight", OC, C);
    if (!rows_n || !rows_o) return -1;
    if (backward_input_(g, op, dinp, dout, weight, N, C, OC, accumulate_dinp, rows_n, rows_o) < 0) return -1;
    if (backward_weight_(g, op, dweight, dout, inp, N, C, OC, rows_n, rows_o) < 0) return -1;
    if (dbias.buf && backward_bias_(g, op, dbias, dout, N, OC, rows_n) < 0) return -1;
    return 0;
}
