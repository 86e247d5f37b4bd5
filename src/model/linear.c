// linear.c: the linear layer's dispatches (see linear.h), split into row
// chunks where a tensor exceeds the device's binding limit.
#include "model/linear.h"
#include "model/kernel_params.h"  // the kernels' params structs

#include "model/linear_split.h"
#include "model/elementwise.h"  // wgpt_gelu_backward_f16
#include "model/precision.h"  // wgpt_cast_f16
#include "model/variant.h"

// The kernels' tile edges (kernels/03_linear.wgsl: TILE, BB_COLS).
#define TILE 64u
#define BB_COLS 32u
#define BB_FLAT_WG 8u  // columns a workgroup of matmul_backward_bias_flat (BB_FLAT_WG)
// The flat (CPU) twins' output block per workgroup: FLAT_ROWS rows of
// FLAT_WG * FLAT_COLS = 32 columns.
#define FLAT_ROWS 32u
#define FLAT_N 32u
#define FLAT8_ROWS 64u  // rows a workgroup of the flat8 twins (FLAT8_ROWS), FLAT_N columns

// Every kernel this file dispatches, by full name (a grep finds each use):
// per pass the 64 x 64 tiled kernel of 03_linear.wgsl, its flat CPU twin and
// the register-tiled kernel of 03_linear_vec4.wgsl; then the bias column sums
// and the reduce of split partials.
typedef enum mm_pass { MM_FORWARD, MM_BACKWARD_INPUT, MM_BACKWARD_WEIGHT, MM_NPASSES } mm_pass;
static const char *const MM_TILED[MM_NPASSES] = {"matmul_forward", "matmul_backward_input", "matmul_backward_weight"};
static const char *const MM_FLAT[MM_NPASSES] = {"matmul_forward_flat", "matmul_backward_input_flat",
                                                "matmul_backward_weight_flat"};
static const char *const MM_FLAT8[MM_NPASSES] = {"matmul_forward_flat8", "matmul_backward_input_flat8",
                                                 "matmul_backward_weight_flat8"};
static const char *const MM_VEC4[MM_NPASSES] = {"matmul_forward_vec4", "matmul_backward_input_vec4",
                                                "matmul_backward_weight_vec4"};
static const char MM_BACKWARD_BIAS[] = "matmul_backward_bias";
static const char MM_BACKWARD_BIAS_FLAT[] = "matmul_backward_bias_flat";
static const char MM_BACKWARD_BIAS_FLAT4[] = "matmul_backward_bias_flat4";
static const char MM_SPLIT_REDUCE[] = "matmul_split_reduce";
static const char MM_BIAS_PART[] = "matmul_backward_bias_part";
static const char MM_BIAS_PART_F16[] = "matmul_backward_bias_part_f16";
static const char MM_BIAS_PART_GELU_F16[] = "matmul_backward_bias_part_gelu_f16";

static uint32_t tiles_(uint64_t n, uint32_t tile) { return (uint32_t)((n + tile - 1) / tile); }
static uint64_t min_(uint64_t a, uint64_t b) { return a < b ? a : b; }

// A range of v: `bytes` bytes from byte `at` of the view.
static wgpt_view sub_(wgpt_view v, uint64_t at, uint64_t bytes) {
    return (wgpt_view){v.buf, v.offset + at, bytes};
}

// 0 if v holds at least `floats` floats, else -1 naming the argument.
static int check_view_(wgpt_gpu *g, const char *what, wgpt_view v, uint64_t floats) {
    if (!v.buf) return wgpt_gpu_fail(g, "linear: %s has no buffer", what);
    uint64_t size = wgpt_buf_size(v.buf), bytes = wgpt_view_bytes(v);
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

// The kernel of a pass (tiled, or its flat CPU twin, see variant.h) and
// grid for an (m, n) output. The flat grid needs ceil(m / FLAT_ROWS) <= 65535
// rows of workgroups, which every size check_sizes_ accepts meets (FLAT_ROWS
// >= BB_COLS); the tiled kernel stays the fallback should that change. The
// flat8 twins (8 k a step, vec4 reads and writes, 64 rows a workgroup: the same sums)
// need subgroups of at least 8 lanes, C and OC multiples of 4 (vec4_ok: every
// row, column block and chunk then starts on a vec4) and 16-byte aligned views.
typedef struct mm_pick {
    const char *kernel;
    uint32_t x, y;
} mm_pick;

static mm_pick pick_(wgpt_gpu *g, mm_pass pass, uint64_t m, uint64_t n, int vec4_ok) {
    if (wgpt_kernel_variant_cpu(g) && tiles_(m, FLAT_ROWS) <= WGPT_MAX_WG_DIM) {
        if (vec4_ok && wgpt_gpu_get_info(g)->subgroup_min >= 8)
            return (mm_pick){MM_FLAT8[pass], tiles_(n, FLAT_N), tiles_(m, FLAT8_ROWS)};
        return (mm_pick){MM_FLAT[pass], tiles_(n, FLAT_N), tiles_(m, FLAT_ROWS)};
    }
    return (mm_pick){MM_TILED[pass], tiles_(n, TILE), tiles_(m, TILE)};
}

// 1 if a flat8 twin may read and write its nv views as vec4s (see pick_).
static int flat8_ok_(uint32_t C, uint32_t OC, const wgpt_view *v, int nv) {
    return C % 4 == 0 && OC % 4 == 0 && wgpt_views_vec4(v, nv);
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

// ---- The vec4 kernels (03_linear_vec4.wgsl): GPUs, whole-vec4 rows, one binding ----

// The split of an (m, n) output's sum over k (linear_split.h) on g's device
// (wgpt_gpu_options.matmul_splits: 0, or the split count every vec4 matmul asks for).
static wgpt_split v4_split_(wgpt_gpu *g, uint64_t m, uint64_t n, uint32_t k, int with_bias, uint64_t scratch_bytes) {
    const wgpt_gpu_info *in = wgpt_gpu_get_info(g);
    return wgpt_split_pick(in->compute_units, m, n, k, with_bias, scratch_bytes, in->matmul_splits);
}

uint64_t wgpt_linear_scratch_bytes(const wgpt_gpu *g, uint32_t N, uint32_t C, uint32_t OC) {
    uint32_t u = wgpt_gpu_get_info(g)->compute_units, f = wgpt_gpu_get_info(g)->matmul_splits;
    uint64_t b = 256;  // the stand-in binding when nothing splits
    uint64_t fw = wgpt_split_bytes(u, N, OC, C, 0, f), in = wgpt_split_bytes(u, N, C, OC, 0, f);
    uint64_t w = wgpt_split_bytes(u, OC, C, N, 1, f);
    if (fw > b) b = fw;
    if (in > b) b = in;
    if (w > b) b = w;
    return b;
}

// The vec4 kernels take every row as whole vec4s (C, OC multiples of 4), the
// tensors in one binding each (no row chunks), and a scratch of >= 256 bytes.
static int v4_ok_(wgpt_gpu *g, wgpt_view scratch, uint32_t C, uint32_t OC, uint64_t rows_n, uint64_t rows_o,
                  uint32_t N) {
    if (wgpt_kernel_variant_cpu(g) || !scratch.buf || wgpt_view_bytes(scratch) < 256) return 0;
    return C % 4 == 0 && OC % 4 == 0 && rows_n >= N && rows_o >= OC;
}

// Appends the reduce of `splits` partials (m, n) at part into dst (row stride
// ld, first column off), adding bias (n) if bias.buf and dst's values if add.
static int v4_reduce_(wgpt_gpu *g, wgpt_op *op, wgpt_view part, wgpt_view bias, wgpt_view dst, uint32_t m, uint32_t n,
                      uint32_t splits, uint32_t ld, uint32_t off, int add) {
    wgpt_view v[3] = {part, bias.buf ? bias : part, dst};
    linear_params p = {m, n, splits, ld, off, (add ? 1u : 0u) | (bias.buf ? 2u : 0u), 0, 0};
    uint64_t threads = (uint64_t)m * (n / 4);
    return wgpt_op_add1d(g, op, MM_SPLIT_REDUCE, v, 3, &p, sizeof p, (threads + 255) / 256) ? 0 : -1;
}

static int v4_forward_(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp, wgpt_view weight, wgpt_view bias,
                       uint32_t N, uint32_t C, uint32_t OC, wgpt_view scratch) {
    wgpt_split sp = v4_split_(g, N, OC, C, 0, wgpt_view_bytes(scratch));
    int split = sp.n > 1;
    wgpt_view part = sub_(scratch, 0, (uint64_t)sp.n * N * OC * 4);
    inp = sub_(inp, 0, (uint64_t)N * C * 4), weight = sub_(weight, 0, (uint64_t)OC * C * 4);
    out = sub_(out, 0, (uint64_t)N * OC * 4);
    if (bias.buf) bias = sub_(bias, 0, (uint64_t)OC * 4);
    wgpt_view v[4] = {inp, weight, bias.buf ? bias : weight, split ? part : out};
    linear_params p = {N, OC, C, OC, 0, bias.buf ? 2u : 0u, sp.ks, (uint32_t)split};
    if (!wgpt_op_add(g, op, MM_VEC4[MM_FORWARD], v, 4, &p, sizeof p, tiles_(OC, WGPT_V4_TILE),
                     tiles_(N, WGPT_V4_TILE), sp.n))
        return -1;
    return split ? v4_reduce_(g, op, part, bias, out, N, OC, sp.n, OC, 0, 0) : 0;
}

static int v4_backward_input_(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dout, wgpt_view weight, uint32_t N,
                              uint32_t C, uint32_t OC, int accumulate, wgpt_view scratch) {
    wgpt_split sp = v4_split_(g, N, C, OC, 0, wgpt_view_bytes(scratch));
    int split = sp.n > 1;
    wgpt_view part = sub_(scratch, 0, (uint64_t)sp.n * N * C * 4), none = {0};
    dout = sub_(dout, 0, (uint64_t)N * OC * 4), weight = sub_(weight, 0, (uint64_t)OC * C * 4);
    dinp = sub_(dinp, 0, (uint64_t)N * C * 4);
    wgpt_view v[3] = {dout, weight, split ? part : dinp};
    linear_params p = {N, C, OC, OC, 0, accumulate ? 1u : 0u, sp.ks, (uint32_t)split};
    if (!wgpt_op_add(g, op, MM_VEC4[MM_BACKWARD_INPUT], v, 3, &p, sizeof p, tiles_(C, WGPT_V4_TILE),
                     tiles_(N, WGPT_V4_TILE), sp.n))
        return -1;
    return split ? v4_reduce_(g, op, part, none, dinp, N, C, sp.n, C, 0, accumulate) : 0;
}

// dweight (and dbias, fused: its row sums of dout^T ride along).
static int v4_backward_weight_(wgpt_gpu *g, wgpt_op *op, wgpt_view dweight, wgpt_view dbias, wgpt_view dout,
                               wgpt_view inp, uint32_t N, uint32_t C, uint32_t OC, wgpt_view scratch) {
    int with_bias = dbias.buf != NULL;
    wgpt_split sp = v4_split_(g, OC, C, N, with_bias, wgpt_view_bytes(scratch));
    int split = sp.n > 1;
    uint64_t wbytes = wgpt_split_weight_bytes(sp.n, OC, C);
    wgpt_view part = sub_(scratch, 0, (uint64_t)sp.n * OC * C * 4);
    wgpt_view bpart = sub_(scratch, split ? wbytes : 0, split ? (uint64_t)sp.n * OC * 4 : 256);
    dout = sub_(dout, 0, (uint64_t)N * OC * 4), inp = sub_(inp, 0, (uint64_t)N * C * 4);
    dweight = sub_(dweight, 0, (uint64_t)OC * C * 4);  // exact: dbias may share its buffer
    if (with_bias) dbias = sub_(dbias, 0, (uint64_t)OC * 4);
    // without a bias the kernel never writes binding 3: a scratch piece stands in
    wgpt_view v[4] = {dout, inp, split ? part : dweight, split || !with_bias ? bpart : dbias};
    linear_params p = {OC, C, N, OC, 0, with_bias ? 2u : 0u, sp.ks, (uint32_t)split};
    if (!wgpt_op_add(g, op, MM_VEC4[MM_BACKWARD_WEIGHT], v, 4, &p, sizeof p, tiles_(C, WGPT_V4_TILE),
                     tiles_(OC, WGPT_V4_TILE), sp.n))
        return -1;
    if (!split) return 0;
    wgpt_view none = {0};
    if (v4_reduce_(g, op, part, none, dweight, OC, C, sp.n, C, 0, 1) < 0) return -1;
    return with_bias ? v4_reduce_(g, op, bpart, none, dbias, 1, OC, sp.n, OC, 0, 1) : 0;
}

int wgpt_linear_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp, wgpt_view weight, wgpt_view bias,
                        uint32_t N, uint32_t C, uint32_t OC, wgpt_view scratch) {
    if (check_sizes_(g, N, C, OC) < 0 || check_view_(g, "out", out, (uint64_t)N * OC) < 0 ||
        check_view_(g, "inp", inp, (uint64_t)N * C) < 0 || check_view_(g, "weight", weight, (uint64_t)OC * C) < 0 ||
        (bias.buf && check_view_(g, "bias", bias, OC) < 0))
        return -1;
    // inp and out are split over the same rows; weight (and bias) over output
    // channels, each chunk writing its column block of out (ld = OC, off = o0).
    uint64_t rows_n = chunk_(g, "inp/out", N, C > OC ? C : OC);
    uint64_t rows_o = chunk_(g, "weight", OC, C);
    if (!rows_n || !rows_o) return -1;
    if (v4_ok_(g, scratch, C, OC, rows_n, rows_o, N)) return v4_forward_(g, op, out, inp, weight, bias, N, C, OC, scratch);
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
            linear_params p = {(uint32_t)nr, (uint32_t)orr, C, OC, (uint32_t)o0, bias.buf != NULL, 0, 0};
            mm_pick k = pick_(g, MM_FORWARD, nr, orr, flat8_ok_(C, OC, v, 4));
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
            linear_params p = {(uint32_t)nr, C, (uint32_t)orr, OC, (uint32_t)o0, o0 > 0 || accumulate, 0, 0};
            mm_pick k = pick_(g, MM_BACKWARD_INPUT, nr, C, flat8_ok_(C, OC, v, 3));
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
            linear_params p = {(uint32_t)orr, C, (uint32_t)nr, OC, (uint32_t)o0, 0, 0, 0};
            mm_pick k = pick_(g, MM_BACKWARD_WEIGHT, orr, C, flat8_ok_(C, OC, v, 3));
            if (!wgpt_op_add(g, op, k.kernel, v, 3, &p, sizeof p, k.x, k.y, 1)) return -1;
        }
    }
    return 0;
}

static int backward_bias_(wgpt_gpu *g, wgpt_op *op, wgpt_view dbias, wgpt_view dout, uint32_t N, uint32_t OC,
                          uint64_t rows_n) {
    int flat = wgpt_kernel_variant_cpu(g) && tiles_(OC, BB_FLAT_WG) <= WGPT_MAX_WG_DIM;
    // flat4: 4 columns an invocation, vec4 rows (OC % 4 == 0, 16-byte views).
    const wgpt_view whole[2] = {dout, dbias};
    int flat4 = flat && OC % 4 == 0 && wgpt_views_vec4(whole, 2);
    const char *k = flat4 ? MM_BACKWARD_BIAS_FLAT4 : flat ? MM_BACKWARD_BIAS_FLAT : MM_BACKWARD_BIAS;
    uint32_t groups = flat4 ? tiles_(OC / 4, BB_FLAT_WG) : tiles_(OC, flat ? BB_FLAT_WG : BB_COLS);
    for (uint64_t n0 = 0; n0 < N; n0 += rows_n) {
        uint64_t nr = min_(rows_n, N - n0);
        wgpt_view v[2] = {sub_(dout, n0 * OC * 4, nr * OC * 4), sub_(dbias, 0, (uint64_t)OC * 4)};
        linear_params p = {0, OC, (uint32_t)nr, OC, 0, 0, 0, 0};
        if (!wgpt_op_add(g, op, k, v, 2, &p, sizeof p, groups, 1, 1)) return -1;
    }
    return 0;
}

int wgpt_linear_backward_passes(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dweight, wgpt_view dbias,
                                wgpt_view dout, wgpt_view inp, wgpt_view weight, uint32_t N, uint32_t C, uint32_t OC,
                                int accumulate_dinp, wgpt_view scratch, unsigned passes) {
    if (check_sizes_(g, N, C, OC) < 0 || check_view_(g, "dinp", dinp, (uint64_t)N * C) < 0 ||
        check_view_(g, "dweight", dweight, (uint64_t)OC * C) < 0 ||
        (dbias.buf && check_view_(g, "dbias", dbias, OC) < 0) ||
        check_view_(g, "dout", dout, (uint64_t)N * OC) < 0 || check_view_(g, "inp", inp, (uint64_t)N * C) < 0 ||
        check_view_(g, "weight", weight, (uint64_t)OC * C) < 0)
        return -1;
    uint64_t rows_n = chunk_(g, "dout/inp/dinp", N, C > OC ? C : OC);
    uint64_t rows_o = chunk_(g, "weight/dweight", OC, C);
    if (!rows_n || !rows_o) return -1;
    int in = (passes & WGPT_LINEAR_PASS_INPUT) != 0, w = (passes & WGPT_LINEAR_PASS_WEIGHT) != 0;
    if (v4_ok_(g, scratch, C, OC, rows_n, rows_o, N)) {
        if (in && v4_backward_input_(g, op, dinp, dout, weight, N, C, OC, accumulate_dinp, scratch) < 0) return -1;
        return w ? v4_backward_weight_(g, op, dweight, dbias, dout, inp, N, C, OC, scratch) : 0;
    }
    if (in && backward_input_(g, op, dinp, dout, weight, N, C, OC, accumulate_dinp, rows_n, rows_o) < 0) return -1;
    if (w && backward_weight_(g, op, dweight, dout, inp, N, C, OC, rows_n, rows_o) < 0) return -1;
    if (w && dbias.buf && backward_bias_(g, op, dbias, dout, N, OC, rows_n) < 0) return -1;
    return 0;
}

int wgpt_linear_reduce_parts(wgpt_gpu *g, wgpt_op *op, wgpt_view parts, wgpt_view bias, wgpt_view dst, uint32_t m,
                             uint32_t n, uint32_t nparts, int accumulate) {
    if (n % 4) return wgpt_gpu_fail(g, "linear: reducing partials of %u columns: a multiple of 4 is needed", n);
    return v4_reduce_(g, op, parts, bias, dst, m, n, nparts, n, 0, accumulate);
}

#define BIAS_PART_COLS 256u  // columns a workgroup of matmul_backward_bias_part
#define BIAS_MIN_ROWS 64u    // rows a part keeps at least

// Parts of rows for matmul_backward_bias_part: about 4 workgroups a compute unit.
static uint32_t bias_parts_(const wgpt_gpu *g, uint32_t N, uint32_t OC) {
    uint32_t units = wgpt_gpu_get_info(g)->compute_units;
    uint64_t want = 4ull * (units ? units : 128), gx = tiles_(OC, BIAS_PART_COLS);
    uint64_t parts = (want + gx - 1) / gx, most = (N + BIAS_MIN_ROWS - 1) / BIAS_MIN_ROWS;
    if (parts > most) parts = most;
    if (parts > 1024) parts = 1024;
    return parts ? (uint32_t)parts : 1;
}

uint64_t wgpt_linear_bias_scratch_bytes(const wgpt_gpu *g, uint32_t N, uint32_t OC) {
    return (uint64_t)bias_parts_(g, N, OC) * OC * 4;
}

int wgpt_linear_bias_on_gpu(const wgpt_gpu *g, uint32_t N, uint32_t OC, uint64_t scratch_bytes) {
    const wgpt_gpu_info *in = wgpt_gpu_get_info(g);
    return !in->cpu_kernels && OC % 4 == 0 && (uint64_t)N * OC * 4 <= in->max_storage_binding &&
           scratch_bytes >= wgpt_linear_bias_scratch_bytes(g, N, OC);
}

// The bias gradient of wgpt_linear_backward_bias; with dout16.buf, the f16
// copy of dout too, in the same pass where the GPU path runs (else the cast
// first, then the bias). With pre.buf, of g = GELU'(pre) * dout instead of
// dout (the GPU path makes g on the way in; else gelu_backward_f16 writes it
// to dg and its f16 copy, then the bias of dg).
static int bias_(wgpt_gpu *g, wgpt_op *op, wgpt_view dbias, wgpt_view dout16, wgpt_view dout, wgpt_view pre,
                 wgpt_view dg, uint32_t N, uint32_t OC, wgpt_view scratch) {
    if (check_sizes_(g, N, 1, OC) < 0 || check_view_(g, "dbias", dbias, OC) < 0 ||
        check_view_(g, "dout", dout, (uint64_t)N * OC) < 0 ||
        (pre.buf && check_view_(g, "pre (the GELU's input)", pre, (uint64_t)N * OC) < 0))
        return -1;
    uint32_t parts = bias_parts_(g, N, OC);
    uint32_t ks = (N + parts - 1) / parts;
    parts = (N + ks - 1) / ks;  // no empty part
    uint64_t half_bytes = (uint64_t)N * OC * 2;
    int cast = dout16.buf != NULL;
    if (cast && wgpt_view_bytes(dout16) < half_bytes)
        return wgpt_gpu_fail(g, "linear: dout16 covers %llu bytes; the f16 copy of a %u x %u gradient needs %llu",
                             (unsigned long long)wgpt_view_bytes(dout16), N, OC, (unsigned long long)half_bytes);
    if (scratch.buf && wgpt_linear_bias_on_gpu(g, N, OC, wgpt_view_bytes(scratch))) {
        wgpt_view pv = sub_(scratch, 0, (uint64_t)parts * OC * 4);
        wgpt_view din = sub_(dout, 0, (uint64_t)N * OC * 4);  // (also pre's stand-in in the plain f16 variant)
        wgpt_view v[4] = {din, pv, sub_(dout16, 0, half_bytes), pre.buf ? sub_(pre, 0, (uint64_t)N * OC * 4) : din};
        linear_params p = {N, OC, 0, 0, 0, 0, ks, 0};
        const char *kernel = pre.buf ? MM_BIAS_PART_GELU_F16 : cast ? MM_BIAS_PART_F16 : MM_BIAS_PART;
        if (!wgpt_op_add(g, op, kernel, v, cast ? 4 : 2, &p, sizeof p, tiles_(OC, BIAS_PART_COLS), parts, 1))
            return -1;
        return wgpt_linear_reduce_parts(g, op, pv, (wgpt_view){0}, sub_(dbias, 0, (uint64_t)OC * 4), 1, OC, parts, 1);
    }
    if (pre.buf) {  // (only this path writes dg)
        if (check_view_(g, "dg (the GELU's input gradient)", dg, (uint64_t)N * OC) < 0 ||
            wgpt_gelu_backward_f16(g, op, dg, dout16, pre, dout, (uint64_t)N * OC) < 0)
            return -1;
        dout = dg;
    } else if (cast && wgpt_cast_f16(g, op, dout16, dout, (uint64_t)N * OC) < 0) {
        return -1;
    }
    uint64_t rows_n = chunk_(g, "dout", N, OC);
    return rows_n ? backward_bias_(g, op, dbias, dout, N, OC, rows_n) : -1;
}

int wgpt_linear_backward_bias(wgpt_gpu *g, wgpt_op *op, wgpt_view dbias, wgpt_view dout, uint32_t N, uint32_t OC,
                              wgpt_view scratch) {
    return bias_(g, op, dbias, (wgpt_view){0}, dout, (wgpt_view){0}, (wgpt_view){0}, N, OC, scratch);
}

int wgpt_linear_backward_bias_cast(wgpt_gpu *g, wgpt_op *op, wgpt_view dbias, wgpt_view dout16, wgpt_view dout,
                                   uint32_t N, uint32_t OC, wgpt_view scratch) {
    if (!dout16.buf) return wgpt_gpu_fail(g, "linear: the bias and cast pass needs a dout16 buffer");
    return bias_(g, op, dbias, dout16, dout, (wgpt_view){0}, (wgpt_view){0}, N, OC, scratch);
}

int wgpt_linear_backward_bias_gelu_cast(wgpt_gpu *g, wgpt_op *op, wgpt_view dbias, wgpt_view dg16, wgpt_view dg,
                                        wgpt_view dout, wgpt_view pre, uint32_t N, uint32_t OC, wgpt_view scratch) {
    if (!dg16.buf || !pre.buf)
        return wgpt_gpu_fail(g, "linear: the GELU's bias and cast pass needs dg16 and pre buffers");
    return bias_(g, op, dbias, dg16, dout, pre, dg, N, OC, scratch);
}

int wgpt_linear_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dweight, wgpt_view dbias,
                         wgpt_view dout, wgpt_view inp, wgpt_view weight, uint32_t N, uint32_t C, uint32_t OC,
                         int accumulate_dinp, wgpt_view scratch) {
    return wgpt_linear_backward_passes(g, op, dinp, dweight, dbias, dout, inp, weight, N, C, OC, accumulate_dinp,
                                       scratch, WGPT_LINEAR_PASS_INPUT | WGPT_LINEAR_PASS_WEIGHT);
}
