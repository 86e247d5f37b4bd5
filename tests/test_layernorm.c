// test_layernorm.c: the special cases of kernels/02_layernorm.wgsl through
// src/model/layernorm.h (the run-and-compare cases are the "layernorm" family
// of the op registry, tests/ops/layernorm.c, run by test_ops; these reuse its
// cases): a binding too small to split, the kernels' own bounds checks
// (bound directly), the fused dinp against the input-only kernel's, the
// stats-only forward, the fused residual + stats, and bit-identical results
// run to run. Most run twice: with the GPU kernels and with their flat CPU
// twins (model/variant.h).
//
// Tolerance (f32 on the GPU against double in tests/ref). The GPU kernels sum
// a row of K terms as per-thread runs of ceil(K/256), then a tree of depth
// log2(256) = 8; their vec4 versions (C % 4 == 0, C <= 1024) as per-thread
// runs of ceil(K/64), then the row's 64 / sg subgroup sums in order after a
// subgroup tree (at most 16 + 2 more for subgroups of 4 to 64 lanes); the CPU
// twins in one chain of K; a column of dweight/dbias by the one-pass kernel
// as runs of ceil(rows/8), then 8 lanes in order, then one add per row chunk;
// by the two-phase kernels as runs of 64/8 = 8 rows, 8 lanes, then runs of
// ceil(blocks/8) block partials (blocks of 64 rows in a chunk), 8 lanes, then
// one add per row chunk: a shorter chain for N past ~200; by the fused vec4
// backward as runs of 16/4 = 4 rows, 4 row groups, then ceil(blocks/8)
// partials (blocks of 16 rows), 8 lanes, one add per row chunk. A reordered f32 sum
// whose longest chain is K additions errs by at most K * 2^-24 * sum|terms|
// (first order; terms rounded themselves count in the 4 below). The row outputs
// inherit the mean's error (|x| <= 5) times rstd (xhat = (x - mean) * rstd), so
// each row's atol is chain * 2^-24 * 5 * 4 * (1 + rstd), squared for dinp (its
// formula multiplies xhat by rstd again); each column's atol is 4 * 2^-24 *
// (chain * sum|terms| + row chain * sum over rows of |dout| * (5 * rstd +
// |xhat|)), the second term each term's xhat error. 4 covers the few
// roundings around each sum; rtol 8 ulp the element-wise arithmetic. Observed
// errors are 3x to 30x below these bounds (30x to 100x for the two-phase
// column sums, whose xhat term dominates); the tests fail on a wrong eps
// (1e-6), a one-pass variance, a lane left out of the column fold, the 2D row
// index, dinp or dweight overwritten instead of accumulated, a row block or
// a block partial left out of the two-phase sums, a row's dbias term left
// out of the fused kernel's partials.
#include "test_util.h"

#include "gpu/internal.h"  // a step's kernel, for its name
#include "model/elementwise.h"  // wgpt_residual_forward: one of the two kernels the fused one stands for
#include "model/layernorm.h"
#include "model/variant.h"
#include "ops/layernorm.h"
#include "ref/gpt2_ref.h"

static wgpt_gpu *G;      // the default device, with the twin in force
static wgpt_gpu *SPLIT;  // the same adapter with 64 KiB bindings: row chunks
// Both opened with each twin (wgpt_gpu_options.kernels); the setups pick.
static wgpt_gpu *G_GPU, *G_CPU, *SPLIT_GPU, *SPLIT_CPU;

static const float EPS32 = 5.9604645e-8f;  // 2^-24
static const float RTOL = 8 * 5.9604645e-8f;

static int group_setup(void **state) {
    (void)state;
    wgpt_gpu_options o = {.adapter_index = -1, .kernels = WGPT_KERNELS_GPU};
    G = G_GPU = tu_gpu_open(&o);
    o.kernels = WGPT_KERNELS_CPU;
    G_CPU = tu_gpu_open(&o);
    o.max_binding = 64 * 1024;
    SPLIT_CPU = tu_gpu_open(&o);
    o.kernels = WGPT_KERNELS_GPU;
    SPLIT = SPLIT_GPU = tu_gpu_open(&o);
    return 0;
}
// Per-test setups: which twin the wrappers pick (see BOTH in main).
static int CPU;  // 1 while the CPU twins are in force
static int VEC4_(uint32_t C) { return ln_vec4(G, C); }

static int use_gpu_kernels_(void **state) {
    (void)state;
    G = G_GPU, SPLIT = SPLIT_GPU;
    CPU = 0;
    return 0;
}
static int use_cpu_kernels_(void **state) {
    (void)state;
    G = G_CPU, SPLIT = SPLIT_CPU;
    CPU = 1;
    return 0;
}

static float *alloc_(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

// Rows so wide that not even 64 fit one binding cannot be split: the wrapper
// fails with the GPU layer's message; a view smaller than its tensor fails too.
static void unsplittable_rows_fail(void **st) {
    (void)st;
    const uint32_t N = 100, C = 300;  // 64 rows = 76,800 bytes > 64 KiB
    wgpt_buf *x = wgpt_buf_create(SPLIT, (uint64_t)N * C * 4, "x"), *s = wgpt_buf_create(SPLIT, N * 4, "s");
    wgpt_buf *w = wgpt_buf_create(SPLIT, C * 4, "w");
    wgpt_view vx = {x, 0, 0}, vs = {s, 0, 0}, vw = {w, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    assert_int_equal(wgpt_layernorm_forward(SPLIT, &op, vx, vs, vs, vx, vw, vw, N, C), -1);
    assert_non_null(strstr(wgpt_gpu_error(SPLIT), "maxStorageBufferBindingSize"));
    wgpt_view short_w = {w, 0, (C - 1) * 4};
    assert_int_equal(wgpt_layernorm_forward(SPLIT, &op, vx, vs, vs, vx, short_w, vw, 10, C), -1);
    assert_int_equal(op.n, 0);
    wgpt_op_free(&op);
    wgpt_buf_free(x), wgpt_buf_free(s), wgpt_buf_free(w);
}

// The kernels' own bounds checks, bypassing the wrapper's exact views (which
// would hide a missing check behind robust buffer access): bindings hold 64
// rows (or columns) more than the params say, the row grid is 2D with idle
// workgroups, the column grid has idle columns; outputs there keep their
// sentinel. Inputs there hold 1.0. The CPU twins' rows get a 2D grid too,
// (550, 2) workgroups of 64 rows (70400 >= N), as the host would give past
// 65535 workgroups; the means of all N rows are checked against the reference.
static void kernels_stop_at_N_and_C(void **st) {
    (void)st;
    const float SENT = 12345.5f;
    const uint32_t N = 70001, C = 3, NX = N + 64, CX = C + 64;
    float *rows = alloc_((size_t)NX * C), *vec = alloc_(NX), *sent_rows = alloc_((size_t)NX * C);
    float *sent_n = alloc_(NX);
    for (size_t i = 0; i < (size_t)NX * C; i++) {
        rows[i] = i < (size_t)N * C ? tu_randf(-1.0f, 1.0f) : 1.0f;
        sent_rows[i] = i < (size_t)N * C ? 0.0f : SENT;
    }
    for (uint32_t i = 0; i < NX; i++) {
        vec[i] = i < N ? tu_randf(0.5f, 1.5f) : 1.0f;
        sent_n[i] = i < N ? 0.0f : SENT;
    }
    float sent_vec[64 + 64];
    for (int i = 0; i < 128; i++) sent_vec[i] = i < (int)C ? 0.0f : SENT;
    wgpt_buf *x = tu_upload_f32(G, rows, (size_t)NX * C, "x"), *v = tu_upload_f32(G, vec, NX, "v");
    wgpt_buf *o = tu_upload_f32(G, sent_rows, (size_t)NX * C, "o");
    wgpt_buf *o2 = tu_upload_f32(G, sent_rows, (size_t)NX * C, "o2");
    wgpt_buf *s1 = tu_upload_f32(G, sent_n, NX, "s1"), *s2 = tu_upload_f32(G, sent_n, NX, "s2");
    wgpt_buf *c1 = tu_upload_f32(G, sent_vec, CX, "c1"), *c2 = tu_upload_f32(G, sent_vec, CX, "c2");
    wgpt_view vx = {x, 0, 0}, vv = {v, 0, 0};
    struct { uint32_t N, C; } p = {N, C};  // LnParams
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_view f[6] = {{o, 0, 0}, {s1, 0, 0}, {s2, 0, 0}, vx, vv, vv};
    wgpt_view bi[6] = {{o2, 0, 0}, vx, vx, vv, vv, vv};
    wgpt_view bp[6] = {{c1, 0, 0}, {c2, 0, 0}, vx, vx, vv, vv};
    if (CPU) {
        TU_NONNULL(G, wgpt_op_add(G, &op, "layernorm_forward_flat", f, 6, &p, sizeof p, 550, 2, 1));
        TU_NONNULL(G, wgpt_op_add(G, &op, "layernorm_backward_input_flat", bi, 6, &p, sizeof p, 550, 2, 1));
    } else {
        TU_NONNULL(G, wgpt_op_add1d(G, &op, "layernorm_forward", f, 6, &p, sizeof p, N));
        TU_NONNULL(G, wgpt_op_add1d(G, &op, "layernorm_backward_input", bi, 6, &p, sizeof p, N));
    }
    TU_NONNULL(G, wgpt_op_add1d(G, &op, "layernorm_backward_params", bp, 6, &p, sizeof p, 1));
    TU_OK(G, wgpt_op_record(G, &op));
    float *got = alloc_((size_t)NX * C);
    wgpt_buf *outs[6] = {o, o2, s1, s2, c1, c2};
    const uint64_t used[6] = {(uint64_t)N * C, (uint64_t)N * C, N, N, C, C};
    const uint64_t len[6] = {(uint64_t)NX * C, (uint64_t)NX * C, NX, NX, CX, CX};
    for (int b = 0; b < 6; b++) {
        TU_OK(G, wgpt_buf_download(G, outs[b], 0, got, len[b] * 4));
        for (uint64_t i = used[b]; i < len[b]; i++)
            if (got[i] != SENT) fail_msg("output %d: element %llu written, past %llu", b, (unsigned long long)i,
                                         (unsigned long long)used[b]);
    }
    // Every row reached by the grid: the means against the reference (a
    // missed or doubled row would differ by O(1); C = 3 terms err by ~1e-7).
    float *want = alloc_((size_t)N * C), *wmean = alloc_(N), *wrstd = alloc_(N);
    ref_layernorm_forward(want, wmean, wrstd, rows, vec, vec, (int)N, (int)C);
    TU_OK(G, wgpt_buf_download(G, s1, 0, got, (uint64_t)N * 4));
    tu_assert_close(CPU ? "cpu kernels: mean on the 2D grid" : "gpu kernels: mean on the 2D grid", got, wmean, N,
                    1e-6f, RTOL);
    free(want), free(wmean), free(wrstd);
    wgpt_op_free(&op);
    wgpt_buf_free(x), wgpt_buf_free(v), wgpt_buf_free(o), wgpt_buf_free(o2), wgpt_buf_free(s1);
    wgpt_buf_free(s2), wgpt_buf_free(c1), wgpt_buf_free(c2);
    free(rows), free(vec), free(sent_rows), free(sent_n), free(got);
}

// The vec4 kernels' own bounds checks and 2D row index: bindings 64 rows
// longer than N, a (126, 2) grid of 4-row workgroups for the forward (1008
// rows >= N) and a (32, 2) grid of 16-row ones for the backward (63 blocks,
// one idle workgroup), as the host's 2D fallback would give; rows past N
// (inputs 1.0, mean and rstd the sentinel: they would swamp any sum) keep
// their sentinel, the means and outputs of all N rows match the reference.
// The backward twice: input-only (part the device's unused binding) and
// fused, the same dinp bit for bit; the fused partials (a binding 64 floats
// longer) reduced on a (2, 2) grid (columns 8..127 idle) into dweight/dbias
// (64 floats longer too) match the N rows' sums. The fused residual and
// stats forward on the forward's grid with a = b = the rows: res is 2x the
// rows exactly and its mean 2x theirs, bit for bit. GPU kernels only.
static void vec4_kernels_stop_at_N(void **st) {
    (void)st;
    const float SENT = 12345.5f;
    const uint32_t N = 1001, C = 8, NX = N + 64, NB = 63, NP = 2 * NB * C + 64, CX = C + 64;
    const size_t NC = (size_t)N * C, NXC = (size_t)NX * C;
    float *rows = alloc_(NXC), *sent_rows = alloc_(NXC), *sent_n = alloc_(NX), *vec = alloc_(C);
    float *sent_p = alloc_(NP), *g0 = alloc_(CX);
    for (size_t i = 0; i < NXC; i++) {
        rows[i] = i < NC ? tu_randf(-1.0f, 1.0f) : 1.0f;
        sent_rows[i] = i < NC ? 0.0f : SENT;
    }
    for (uint32_t i = 0; i < NX; i++) sent_n[i] = i < N ? 0.5f : SENT;
    for (uint32_t i = 0; i < C; i++) vec[i] = tu_randf(0.5f, 1.5f);
    for (uint32_t i = 0; i < NP; i++) sent_p[i] = SENT;
    for (uint32_t i = 0; i < CX; i++) g0[i] = i < C ? 0.0f : SENT;
    wgpt_buf *x = tu_upload_f32(G, rows, NXC, "x"), *v = tu_upload_f32(G, vec, C, "v");
    wgpt_buf *o = tu_upload_f32(G, sent_rows, NXC, "o"), *o2 = tu_upload_f32(G, sent_rows, NXC, "o2");
    wgpt_buf *o3 = tu_upload_f32(G, sent_rows, NXC, "o3"), *o4 = tu_upload_f32(G, sent_rows, NXC, "res");
    wgpt_buf *s1 = tu_upload_f32(G, sent_n, NX, "s1"), *s2 = tu_upload_f32(G, sent_n, NX, "s2");
    wgpt_buf *s3 = tu_upload_f32(G, sent_n, NX, "s3"), *s4 = tu_upload_f32(G, sent_n, NX, "s4");
    wgpt_buf *pt = tu_upload_f32(G, sent_p, NP, "part");
    wgpt_buf *dw = tu_upload_f32(G, g0, CX, "dw"), *db = tu_upload_f32(G, g0, CX, "db");
    struct { uint32_t N, C; } p = {N, C}, pr = {NB, C};  // LnParams; the reduce's N: its partials
    wgpt_view f[6] = {{o, 0, 0}, {s1, 0, 0}, {s2, 0, 0}, {x, 0, 0}, {v, 0, 0}, {v, 0, 0}};
    wgpt_view bi[7] = {{o2, 0, 0}, {x, 0, 0}, {x, 0, 0}, {v, 0, 0}, {s1, 0, 0}, {s2, 0, 0}, wgpt_gpu_unused_binding(G)};
    wgpt_view bf[7] = {{o3, 0, 0}, {x, 0, 0}, {x, 0, 0}, {v, 0, 0}, {s1, 0, 0}, {s2, 0, 0}, {pt, 0, 0}};
    wgpt_view rd[3] = {{dw, 0, 0}, {db, 0, 0}, {pt, 0, 0}};
    wgpt_view rs[6] = {{o4, 0, 0}, {s3, 0, 0}, {s4, 0, 0}, {x, 0, 0}, wgpt_gpu_unused_binding(G), {x, 0, 0}};
    wgpt_op op;
    wgpt_op_init(&op);
    TU_NONNULL(G, wgpt_op_add(G, &op, "layernorm_forward_vec4", f, 6, &p, sizeof p, 126, 2, 1));
    TU_NONNULL(G, wgpt_op_add(G, &op, "layernorm_backward_input_vec4", bi, 7, &p, sizeof p, 32, 2, 1));
    TU_NONNULL(G, wgpt_op_add(G, &op, "layernorm_backward_vec4", bf, 7, &p, sizeof p, 32, 2, 1));
    TU_NONNULL(G, wgpt_op_add(G, &op, "layernorm_params_reduce", rd, 3, &pr, sizeof pr, 2, 2, 1));
    TU_NONNULL(G, wgpt_op_add(G, &op, "layernorm_residual_stats_vec4", rs, 6, &p, sizeof p, 126, 2, 1));
    TU_OK(G, wgpt_op_record(G, &op));
    float *got = alloc_(NXC), *got3 = alloc_(NXC);
    wgpt_buf *outs[10] = {o, o2, o3, s1, s2, dw, db, o4, s3, s4};
    const uint64_t used[10] = {NC, NC, NC, N, N, C, C, NC, N, N};
    const uint64_t len[10] = {NXC, NXC, NXC, NX, NX, CX, CX, NXC, NX, NX};
    for (int b = 0; b < 10; b++) {
        TU_OK(G, wgpt_buf_download(G, outs[b], 0, got, len[b] * 4));
        for (uint64_t i = used[b]; i < len[b]; i++)
            if (got[i] != SENT) fail_msg("output %d: element %llu written, past %llu", b, (unsigned long long)i,
                                         (unsigned long long)used[b]);
    }
    TU_OK(G, wgpt_buf_download(G, pt, 0, got, (uint64_t)NP * 4));
    for (uint32_t i = 2 * NB * C; i < NP; i++)
        if (got[i] != SENT) fail_msg("fused: partial %u written, past %u", i, 2 * NB * C);
    float *want = alloc_(NC), *wmean = alloc_(N), *wrstd = alloc_(N);
    ref_layernorm_forward(want, wmean, wrstd, rows, vec, vec, (int)N, (int)C);
    TU_OK(G, wgpt_buf_download(G, s1, 0, got, (uint64_t)N * 4));
    tu_assert_close("vec4 kernels: mean on the 2D grid", got, wmean, N, 1e-6f, RTOL);
    TU_OK(G, wgpt_buf_download(G, o, 0, got, NC * 4));
    tu_assert_close("vec4 kernels: out on the 2D grid", got, want, NC, 1e-4f, 1e-5f);
    TU_OK(G, wgpt_buf_download(G, o2, 0, got, NC * 4));
    TU_OK(G, wgpt_buf_download(G, o3, 0, got3, NC * 4));
    assert_memory_equal(got, got3, NC * 4);
    TU_OK(G, wgpt_buf_download(G, o4, 0, got, NC * 4));
    for (size_t i = 0; i < NC; i++) got3[i] = 2 * rows[i];
    assert_memory_equal(got, got3, NC * 4);
    TU_OK(G, wgpt_buf_download(G, s1, 0, got3, (uint64_t)N * 4));
    for (uint32_t n = 0; n < N; n++) got3[n] *= 2;
    TU_OK(G, wgpt_buf_download(G, s3, 0, got, (uint64_t)N * 4));
    assert_memory_equal(got, got3, N * 4);
    // dweight = sum of dout * xhat, dbias = sum of dout (dout = inp = rows
    // here), from the mean and rstd the forward saved; chain 4 + 4 +
    // ceil(63 / 8) + 8 (see the top).
    float *m = alloc_(N), *r = alloc_(N), *ww = alloc_(C), *wb = alloc_(C), *tw = alloc_(C), *tb = alloc_(C);
    TU_OK(G, wgpt_buf_download(G, s1, 0, m, (uint64_t)N * 4));
    TU_OK(G, wgpt_buf_download(G, s2, 0, r, (uint64_t)N * 4));
    for (uint32_t c = 0; c < C; c++) {
        double sw = 0, sb = 0, aw = 0, ab = 0;
        for (uint32_t n = 0; n < N; n++) {
            double d = rows[(size_t)n * C + c], t = d * (d - m[n]) * r[n];
            sw += t, sb += d, aw += fabs(t), ab += fabs(d);
        }
        ww[c] = (float)sw, wb[c] = (float)sb;
        tw[c] = (float)(4.0 * EPS32 * 24 * aw), tb[c] = (float)(4.0 * EPS32 * 24 * ab);
    }
    TU_OK(G, wgpt_buf_download(G, dw, 0, got, (uint64_t)C * 4));
    ln_assert_rows_close("fused + reduce: dweight", got, ww, C, 1, 1.0f, tw);
    TU_OK(G, wgpt_buf_download(G, db, 0, got, (uint64_t)C * 4));
    ln_assert_rows_close("fused + reduce: dbias", got, wb, C, 1, 1.0f, tb);
    free(want), free(wmean), free(wrstd), free(m), free(r), free(ww), free(wb), free(tw), free(tb);
    wgpt_op_free(&op);
    wgpt_buf_free(x), wgpt_buf_free(v), wgpt_buf_free(o), wgpt_buf_free(o2), wgpt_buf_free(o3);
    wgpt_buf_free(s1), wgpt_buf_free(s2), wgpt_buf_free(pt), wgpt_buf_free(dw), wgpt_buf_free(db);
    wgpt_buf_free(o4), wgpt_buf_free(s3), wgpt_buf_free(s4);
    free(rows), free(sent_rows), free(sent_n), free(vec), free(sent_p), free(g0), free(got), free(got3);
}

// The fused kernel's dinp is the input-only kernel's bit for bit (the same
// row sums in the same order; the partials ride along): with the scratch,
// then without, on vec4 shapes with rows not a multiple of 16 (and chunks).
static void fused_dinp_is_input_kernels(void **st) {
    (void)st;
    const uint32_t shapes[][2] = {{9, 768}, {74, 48}, {1037, 776}, {333, 200}};
    const size_t ns = sizeof shapes / sizeof shapes[0];
    for (size_t s = 0; s < ns; s++) {
        wgpt_gpu *g = s + 1 == ns ? SPLIT : G;
        ln_case k = ln_case_make(shapes[s][0], shapes[s][1]);
        ln_got a = ln_run(g, &k, 1, LN_SCRATCH_FULL);
        ln_got b = ln_run(g, &k, 1, LN_SCRATCH_NONE);
        assert_int_equal(a.sums, LN_SUMS_FUSED);
        assert_memory_equal(a.dinp, b.dinp, (size_t)k.N * k.C * 4);
        ln_got_free(&a), ln_got_free(&b), ln_case_free(&k);
    }
}

// The two-phase kernels' own bounds checks, bound directly (not through the
// wrapper's exact views): N = 1001 rows (16 blocks of 64, the last of 41),
// C = 8 (one column group, 24 idle columns; 2 vec4 columns, 30 idle);
// inputs 64 rows longer than N (rows past N hold 1.0, mean 0, rstd 1: they
// would add to every sum); phase 1 on a (5, 4) grid (16 blocks: 4 idle
// workgroups), phase 2 on a (2, 2) grid (columns 8..127 idle). The partials
// and dweight/dbias bindings are 64 floats longer, holding a sentinel that
// must stay; the sums of both phase-1 kernels, reduced, match the N rows'.
static void two_phase_kernels_stop_at_N_and_C(void **st) {
    (void)st;
    const float SENT = 12345.5f;
    const uint32_t N = 1001, C = 8, NX = N + 64, NB = 16, NP = 2 * NB * C + 64, CX = C + 64;
    const size_t NC = (size_t)N * C, NXC = (size_t)NX * C;
    float *x = alloc_(NXC), *d = alloc_(NXC), *m = alloc_(NX), *r = alloc_(NX), *sp = alloc_(NP);
    float *w0 = alloc_(CX), *b0 = alloc_(CX);
    for (size_t i = 0; i < NXC; i++) {
        x[i] = i < NC ? tu_randf(-1.0f, 1.0f) : 1.0f;
        d[i] = i < NC ? tu_randf(-1.0f, 1.0f) : 1.0f;
    }
    for (uint32_t n = 0; n < NX; n++) {
        m[n] = n < N ? tu_randf(-0.5f, 0.5f) : 0.0f;
        r[n] = n < N ? tu_randf(0.5f, 1.5f) : 1.0f;
    }
    for (uint32_t i = 0; i < NP; i++) sp[i] = SENT;
    for (uint32_t i = 0; i < CX; i++) {
        w0[i] = i < C ? tu_randf(-1.0f, 1.0f) : SENT;
        b0[i] = i < C ? tu_randf(-1.0f, 1.0f) : SENT;
    }
    wgpt_buf *bx = tu_upload_f32(G, x, NXC, "x");
    wgpt_buf *bd = tu_upload_f32(G, d, NXC, "dout");
    wgpt_buf *bm = tu_upload_f32(G, m, NX, "mean");
    wgpt_buf *br = tu_upload_f32(G, r, NX, "rstd");
    wgpt_buf *p1 = tu_upload_f32(G, sp, NP, "part");
    wgpt_buf *p4 = tu_upload_f32(G, sp, NP, "part4");
    wgpt_buf *dw1 = tu_upload_f32(G, w0, CX, "dw1"), *db1 = tu_upload_f32(G, b0, CX, "db1");
    wgpt_buf *dw4 = tu_upload_f32(G, w0, CX, "dw4"), *db4 = tu_upload_f32(G, b0, CX, "db4");
    struct { uint32_t N, C; } p = {N, C}, pr = {NB, C};  // LnParams; the reduce's N: its partials
    wgpt_view v1[5] = {{p1, 0, 0}, {bd, 0, 0}, {bx, 0, 0}, {bm, 0, 0}, {br, 0, 0}};
    wgpt_view v4[5] = {{p4, 0, 0}, {bd, 0, 0}, {bx, 0, 0}, {bm, 0, 0}, {br, 0, 0}};
    wgpt_view r1[3] = {{dw1, 0, 0}, {db1, 0, 0}, {p1, 0, 0}}, r4[3] = {{dw4, 0, 0}, {db4, 0, 0}, {p4, 0, 0}};
    wgpt_op op;
    wgpt_op_init(&op);
    TU_NONNULL(G, wgpt_op_add(G, &op, "layernorm_params_part", v1, 5, &p, sizeof p, 5, 4, 1));
    TU_NONNULL(G, wgpt_op_add(G, &op, "layernorm_params_part_vec4", v4, 5, &p, sizeof p, 5, 4, 1));
    TU_NONNULL(G, wgpt_op_add(G, &op, "layernorm_params_reduce", r1, 3, &pr, sizeof pr, 2, 2, 1));
    TU_NONNULL(G, wgpt_op_add(G, &op, "layernorm_params_reduce", r4, 3, &pr, sizeof pr, 2, 2, 1));
    TU_OK(G, wgpt_op_record(G, &op));
    // The reference in double, and each column's sum of |terms| for the bound.
    float *ww = alloc_(C), *wb = alloc_(C), *tw = alloc_(C), *tb = alloc_(C), *got = alloc_(NP);
    for (uint32_t c = 0; c < C; c++) {
        double sw = 0, sb = 0, aw = 0, ab = 0;
        for (uint32_t n = 0; n < N; n++) {
            double dd = d[(size_t)n * C + c], t = dd * ((double)x[(size_t)n * C + c] - m[n]) * r[n];
            sw += t, sb += dd, aw += fabs(t), ab += fabs(dd);
        }
        ww[c] = (float)(w0[c] + sw), wb[c] = (float)(b0[c] + sb);
        // chain 8 + 8 + ceil(16 / 8) + 8 + 1 (see the top)
        tw[c] = (float)(4.0 * EPS32 * 27 * (aw + fabs(w0[c])));
        tb[c] = (float)(4.0 * EPS32 * 27 * (ab + fabs(b0[c])));
    }
    wgpt_buf *parts[2] = {p1, p4}, *dws[2] = {dw1, dw4}, *dbs[2] = {db1, db4};
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "part_vec4" : "part";
        char what[96];
        TU_OK(G, wgpt_buf_download(G, parts[k], 0, got, (uint64_t)NP * 4));
        for (uint32_t i = 2 * NB * C; i < NP; i++)
            if (got[i] != SENT) fail_msg("%s: partial %u written, past %u", name, i, 2 * NB * C);
        TU_OK(G, wgpt_buf_download(G, dws[k], 0, got, (uint64_t)CX * 4));
        for (uint32_t i = C; i < CX; i++)
            if (got[i] != SENT) fail_msg("%s: dweight %u written, past %u", name, i, C);
        snprintf(what, sizeof what, "%s + reduce: dweight", name);
        ln_assert_rows_close(what, got, ww, C, 1, 1.0f, tw);
        TU_OK(G, wgpt_buf_download(G, dbs[k], 0, got, (uint64_t)CX * 4));
        for (uint32_t i = C; i < CX; i++)
            if (got[i] != SENT) fail_msg("%s: dbias %u written, past %u", name, i, C);
        snprintf(what, sizeof what, "%s + reduce: dbias", name);
        ln_assert_rows_close(what, got, wb, C, 1, 1.0f, tb);
    }
    wgpt_op_free(&op);
    wgpt_buf_free(bx), wgpt_buf_free(bd), wgpt_buf_free(bm), wgpt_buf_free(br), wgpt_buf_free(p1);
    wgpt_buf_free(p4), wgpt_buf_free(dw1), wgpt_buf_free(db1), wgpt_buf_free(dw4), wgpt_buf_free(db4);
    free(x), free(d), free(m), free(r), free(sp), free(w0), free(b0);
    free(ww), free(wb), free(tw), free(tb), free(got);
}

// The forward without out (for layernorm_f16_transpose, 08_precision.wgsl):
// the stats-only twin of the forward in force (layernorm_stats*, by name),
// one dispatch a row chunk, mean and rstd into 2N floats of stats.
static void stats_only_(wgpt_gpu *g, const ln_case *k, float *stats) {
    uint32_t N = k->N, C = k->C;
    wgpt_buf *inp = tu_upload_f32(g, k->inp, (size_t)N * C, "inp");
    wgpt_buf *w = tu_upload_f32(g, k->w, C, "w"), *b = tu_upload_f32(g, k->b, C, "b");
    uint64_t rstd_off = ((uint64_t)N * 4 + 255) / 256 * 256;
    wgpt_buf *bs = wgpt_buf_create(g, rstd_off + N * 4, "stats");
    TU_NONNULL(g, bs);
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_view none = {NULL, 0, 0}, vm = {bs, 0, (uint64_t)N * 4}, vr = {bs, rstd_off, (uint64_t)N * 4};
    TU_OK(g, wgpt_layernorm_forward(g, &op, none, vm, vr, (wgpt_view){inp, 0, 0}, (wgpt_view){w, 0, 0},
                                    (wgpt_view){b, 0, 0}, N, C));
    uint64_t rows0 = wgpt_op_chunk_rows(g, N, C);
    assert_int_equal(op.n, (int)((N + rows0 - 1) / rows0));
    const char *want = CPU ? (C % 4 ? "layernorm_stats_flat" : "layernorm_stats_flat4")
                           : VEC4_(C) ? "layernorm_stats_vec4" : "layernorm_stats";
    for (int i = 0; i < op.n; i++) assert_string_equal(wgpt_kernel_name(op.steps[i].bind->kernel), want);
    TU_OK(g, wgpt_op_record(g, &op));
    wgpt_op_free(&op);
    TU_OK(g, wgpt_buf_download(g, bs, 0, stats, (uint64_t)N * 4));
    TU_OK(g, wgpt_buf_download(g, bs, rstd_off, stats + N, (uint64_t)N * 4));
    wgpt_buf_free(inp), wgpt_buf_free(w), wgpt_buf_free(b), wgpt_buf_free(bs);
}

// The forward without out saves the same mean and rstd as with it, bit for
// bit (the same kernel body, only the output pass left out): rows of every
// width class (scalar, vec4, past LN_V4_MAX_C, a single channel) and, on the
// 64 KiB device, in row chunks.
static void stats_only_forward(void **st) {
    (void)st;
    const uint32_t shapes[][2] = {{74, 48}, {5, 771}, {13, 1}, {9, 768}, {5, 1028}, {333, 200}};
    const size_t ns = sizeof shapes / sizeof shapes[0];
    for (size_t s = 0; s < ns; s++) {
        wgpt_gpu *g = s + 1 == ns ? SPLIT : G;
        ln_case k = ln_case_make(shapes[s][0], shapes[s][1]);
        ln_got a = ln_run(g, &k, 0, LN_SCRATCH_FULL);
        float *stats = alloc_(2 * (size_t)k.N);
        stats_only_(g, &k, stats);
        assert_memory_equal(stats, a.mean, k.N * 4);
        assert_memory_equal(stats + k.N, a.rstd, k.N * 4);
        free(stats);
        ln_got_free(&a), ln_case_free(&k);
    }
}

// Which kernels wgpt_layernorm_residual_stats appends, op's steps [from, n),
// chunk by chunk: the fused layernorm_residual_stats_vec4 on a workgroup per
// 4 rows where the vec4 GPU kernels serve; else the residual kernel's chunks,
// then the stats-only forward's, as the two calls of `two` appended them.
static void assert_residual_stats_kernels_(wgpt_gpu *g, const wgpt_op *op, const wgpt_op *two, uint32_t N,
                                           uint32_t C) {
    if (!VEC4_(C)) {
        assert_int_equal(op->n, two->n);
        for (int i = 0; i < op->n; i++)
            assert_string_equal(wgpt_kernel_name(op->steps[i].bind->kernel),
                                wgpt_kernel_name(two->steps[i].bind->kernel));
        return;
    }
    uint64_t rows0 = wgpt_op_chunk_rows(g, N, C), groups = (rows0 + 3) / 4;
    assert_int_equal(op->n, (int)((N + rows0 - 1) / rows0));
    for (int i = 0; i < op->n; i++)
        assert_string_equal(wgpt_kernel_name(op->steps[i].bind->kernel), "layernorm_residual_stats_vec4");
    assert_int_equal(op->steps[0].x, groups < 65535 ? groups : 65535);
}

// res = a + b and mean, rstd of res: wgpt_layernorm_residual_stats against
// wgpt_residual_forward, then the stats-only forward on its result. Rows of
// a: off + U(-1, 1) as case_make_; b: U(-1, 1). mean and rstd share a buffer
// (rstd at a 256-byte offset), res starts as a sentinel.
static void residual_stats_case_(wgpt_gpu *g, uint32_t N, uint32_t C) {
    size_t NC = (size_t)N * C;
    uint64_t rstd_off = ((uint64_t)N * 4 + 255) / 256 * 256, sbytes = rstd_off + (uint64_t)N * 4;
    ln_case k = ln_case_make(N, C);
    float *b = alloc_(NC), *got = alloc_(NC), *want = alloc_(NC), *s1 = alloc_(sbytes / 4), *s2 = alloc_(sbytes / 4);
    tu_fill(b, NC, -1.0f, 1.0f);
    for (size_t i = 0; i < NC; i++) got[i] = 1e30f;
    wgpt_buf *va = tu_upload_f32(g, k.inp, NC, "a"), *vb = tu_upload_f32(g, b, NC, "b");
    wgpt_buf *w = tu_upload_f32(g, k.w, C, "w"), *bias = tu_upload_f32(g, k.b, C, "bias");
    wgpt_buf *r1 = tu_upload_f32(g, got, NC, "res two"), *r2 = tu_upload_f32(g, got, NC, "res fused");
    wgpt_buf *st1 = wgpt_buf_create(g, sbytes, "stats two"), *st2 = wgpt_buf_create(g, sbytes, "stats fused");
    TU_NONNULL(g, st1);
    TU_NONNULL(g, st2);
    wgpt_view none = {NULL, 0, 0}, a = {va, 0, 0}, vbv = {vb, 0, 0};
    wgpt_view m1 = {st1, 0, (uint64_t)N * 4}, rs1 = {st1, rstd_off, (uint64_t)N * 4};
    wgpt_view m2 = {st2, 0, (uint64_t)N * 4}, rs2 = {st2, rstd_off, (uint64_t)N * 4};
    wgpt_op two, fused;
    wgpt_op_init(&two), wgpt_op_init(&fused);
    TU_OK(g, wgpt_residual_forward(g, &two, (wgpt_view){r1, 0, 0}, a, vbv, NC));
    TU_OK(g, wgpt_layernorm_forward(g, &two, none, m1, rs1, (wgpt_view){r1, 0, 0}, (wgpt_view){w, 0, 0},
                                    (wgpt_view){bias, 0, 0}, N, C));
    TU_OK(g, wgpt_layernorm_residual_stats(g, &fused, (wgpt_view){r2, 0, 0}, m2, rs2, a, vbv, N, C));
    assert_residual_stats_kernels_(g, &fused, &two, N, C);
    TU_OK(g, wgpt_op_record(g, &two));
    TU_OK(g, wgpt_op_record(g, &fused));
    for (size_t i = 0; i < NC; i++) want[i] = k.inp[i] + b[i];
    TU_OK(g, wgpt_buf_download(g, r1, 0, got, NC * 4));
    assert_memory_equal(got, want, NC * 4);
    TU_OK(g, wgpt_buf_download(g, r2, 0, got, NC * 4));
    assert_memory_equal(got, want, NC * 4);
    TU_OK(g, wgpt_buf_download(g, st1, 0, s1, sbytes));
    TU_OK(g, wgpt_buf_download(g, st2, 0, s2, sbytes));
    assert_memory_equal(s1, s2, N * 4);
    assert_memory_equal(s1 + rstd_off / 4, s2 + rstd_off / 4, N * 4);
    wgpt_op_free(&two), wgpt_op_free(&fused);
    wgpt_buf_free(va), wgpt_buf_free(vb), wgpt_buf_free(w), wgpt_buf_free(bias);
    wgpt_buf_free(r1), wgpt_buf_free(r2), wgpt_buf_free(st1), wgpt_buf_free(st2);
    free(b), free(got), free(want), free(s1), free(s2);
    ln_case_free(&k);
}

// The residual add with the stats-only forward after it (the f16 mode's
// res -> ln pairs) gives the floats of the two kernels, bit for bit: the
// fused vec4 kernel on rows not a multiple of its 4 rows a workgroup, widths
// not a multiple of a row's 256 floats a step, GPT-2's 768 and, on the 64 KiB
// device, in chunks of 64 rows (the last of 13); the two kernels where it
// does not serve (the CPU twins; C % 4 != 0; C > 1024). A view smaller than
// its tensor fails with the wrapper's name and appends nothing.
static void residual_stats_forward(void **st) {
    (void)st;
    const uint32_t shapes[][2] = {{9, 768}, {74, 48}, {1037, 776}, {5, 771}, {13, 1}, {5, 1028}, {333, 200}};
    const size_t ns = sizeof shapes / sizeof shapes[0];
    for (size_t s = 0; s < ns; s++) residual_stats_case_(s + 1 == ns ? SPLIT : G, shapes[s][0], shapes[s][1]);
    wgpt_buf *x = wgpt_buf_create(G, 10 * 48 * 4, "x");
    TU_NONNULL(G, x);
    wgpt_view vx = {x, 0, 0}, short_x = {x, 0, 10 * 48 * 4 - 4}, vs = {x, 0, 40};
    wgpt_op op;
    wgpt_op_init(&op);
    assert_int_equal(wgpt_layernorm_residual_stats(G, &op, short_x, vs, vs, vx, vx, 10, 48), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "layernorm_residual_stats"));
    assert_int_equal(op.n, 0);
    wgpt_op_free(&op);
    wgpt_buf_free(x);
}

// Two runs of the same inputs give the same bits: no atomics, fixed order.
static void deterministic(void **st) {
    (void)st;
    ln_case k = ln_case_make(1000, 200);
    ln_got a = ln_run(G, &k, 1, LN_SCRATCH_FULL), b = ln_run(G, &k, 1, LN_SCRATCH_FULL);
    size_t NC = (size_t)k.N * k.C;
    assert_memory_equal(a.out, b.out, NC * 4);
    assert_memory_equal(a.mean, b.mean, k.N * 4);
    assert_memory_equal(a.rstd, b.rstd, k.N * 4);
    assert_memory_equal(a.dinp, b.dinp, NC * 4);
    assert_memory_equal(a.dw, b.dw, k.C * 4);
    assert_memory_equal(a.db, b.db, k.C * 4);
    ln_got_free(&a), ln_got_free(&b), ln_case_free(&k);
}

// Each test twice: with the GPU row kernels, then with their CPU twins.
#define BOTH(f) {#f " [gpu kernels]", f, use_gpu_kernels_, NULL, NULL}, {#f " [cpu kernels]", f, use_cpu_kernels_, NULL, NULL}

int main(void) {
    const struct CMUnitTest tests[] = {
        BOTH(unsplittable_rows_fail),
        BOTH(kernels_stop_at_N_and_C),
        BOTH(deterministic),
        BOTH(stats_only_forward),
        BOTH(residual_stats_forward),
        {"vec4_kernels_stop_at_N [gpu kernels]", vec4_kernels_stop_at_N, use_gpu_kernels_, NULL, NULL},
        {"fused_dinp_is_input_kernels [gpu kernels]", fused_dinp_is_input_kernels, use_gpu_kernels_, NULL, NULL},
        {"two_phase_kernels_stop_at_N_and_C [gpu kernels]", two_phase_kernels_stop_at_N_and_C, use_gpu_kernels_,
         NULL, NULL},
    };
    return cmocka_run_group_tests_name("layernorm", tests, group_setup, tu_group_teardown);
}
