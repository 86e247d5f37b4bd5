// layernorm.c: the layernorm family of the op registry (tests/ops/ops.h):
// kernels/02_layernorm.wgsl through src/model/layernorm.h against tests/ref
// (ref_layernorm_forward/backward, double accumulators), forward then
// backward on its mean and rstd as the model runs them, on random rows with
// an offset (so a one-pass variance would cancel), sizes that are multiples
// of nothing, gradients pre-filled to check that they accumulate, rows split
// over bindings (a device with a 64 KiB binding limit) and the 2D grid past
// 65535 rows. Variants: the GPU kernels (a workgroup per row, or for
// C % 4 == 0 and C <= 1024 the vec4 ones; dweight/dbias through a scratch:
// partials of row blocks, then the blocks in order, the vec4 backward writing
// its partials with dinp in one pass) and their flat CPU twins (an invocation
// per row; model/variant.h; dweight/dbias by the one-pass column kernel); the
// GPU kernels also without a scratch or with one too small (the one-pass
// kernel), and with one that holds 64-row blocks' partials but not the fused
// kernel's 16-row ones (the separate phase 1). Each case checks which
// kernels the wrapper appended. tests/test_layernorm.c keeps the special
// cases (bounds checks, determinism, the stats-only forward) on these helpers.
//
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
#include "ops/layernorm.h"

#include "gpu/internal.h"  // a step's kernel, for its name
#include "model/layernorm.h"
#include "model/variant.h"
#include "ops/ops.h"
#include "ref/gpt2_ref.h"
#include "test_util.h"

static const float EPS32 = 5.9604645e-8f;  // 2^-24
static const float RTOL = 8 * 5.9604645e-8f;
// The case in hand (set by ln_run): 1 while the CPU twins are in force, and
// the scratch (LN_SCRATCH_*) the backward gets.
static int CPU, SCRATCH = LN_SCRATCH_FULL;

// 1 if the GPU row kernels run as their vec4 versions for rows of C (the
// views here all start at 16-byte multiples): LN_V4_MAX_C in the kernel file.
int ln_vec4(const wgpt_gpu *g, uint32_t C) { return !wgpt_kernel_variant_cpu(g) && C % 4 == 0 && C <= 1024; }
static int VEC4_(uint32_t C) { return !CPU && C % 4 == 0 && C <= 1024; }

static int sums_(uint32_t C) {
    if (CPU || SCRATCH == LN_SCRATCH_NONE || SCRATCH == LN_SCRATCH_SHORT) return LN_SUMS_ONE_PASS;
    return VEC4_(C) && SCRATCH == LN_SCRATCH_FULL ? LN_SUMS_FUSED : LN_SUMS_TWO_PHASE;
}

// The kernels one row chunk's backward appends, in order (sums_ picks).
static int backward_kernels_(uint32_t C, const char **k) {
    int sums = sums_(C), n = 0;
    if (sums == LN_SUMS_FUSED) {
        k[n++] = "layernorm_backward_vec4";
    } else if (CPU) {
        k[n++] = C % 4 ? "layernorm_backward_input_flat" : "layernorm_backward_input_flat4";
    } else {
        k[n++] = VEC4_(C) ? "layernorm_backward_input_vec4" : "layernorm_backward_input";
    }
    if (sums == LN_SUMS_TWO_PHASE) k[n++] = C % 4 ? "layernorm_params_part" : "layernorm_params_part_vec4";
    k[n++] = sums == LN_SUMS_ONE_PASS ? "layernorm_backward_params" : "layernorm_params_reduce";
    return n;
}

static float *alloc_(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

ln_case ln_case_make(uint32_t N, uint32_t C) {
    ln_case k = {.N = N, .C = C};
    size_t NC = (size_t)N * C;
    k.inp = alloc_(NC), k.dout = alloc_(NC), k.dinp0 = alloc_(NC), k.out = alloc_(NC), k.dinp = alloc_(NC);
    k.w = alloc_(C), k.b = alloc_(C), k.dw0 = alloc_(C), k.db0 = alloc_(C), k.dw = alloc_(C), k.db = alloc_(C);
    k.mean = alloc_(N), k.rstd = alloc_(N);
    // Rows off +- 1 with off in [2, 4): a one-pass E[x^2] - mean^2 would lose ~4 bits.
    for (uint32_t n = 0; n < N; n++) {
        float off = tu_randf(2.0f, 4.0f);
        for (uint32_t c = 0; c < C; c++) k.inp[(size_t)n * C + c] = off + tu_randf(-1.0f, 1.0f);
    }
    tu_fill(k.w, C, 0.5f, 1.5f);
    tu_fill(k.b, C, -0.5f, 0.5f);
    tu_fill(k.dout, NC, -1.0f, 1.0f);
    tu_fill(k.dinp0, NC, -1.0f, 1.0f);
    tu_fill(k.dw0, C, -1.0f, 1.0f);
    tu_fill(k.db0, C, -1.0f, 1.0f);
    ref_layernorm_forward(k.out, k.mean, k.rstd, k.inp, k.w, k.b, (int)N, (int)C);
    memcpy(k.dinp, k.dinp0, NC * sizeof *k.dinp);
    memcpy(k.dw, k.dw0, C * sizeof *k.dw);
    memcpy(k.db, k.db0, C * sizeof *k.db);
    ref_layernorm_backward(k.dinp, k.dw, k.db, k.dout, k.inp, k.w, k.mean, k.rstd, (int)N, (int)C);
    return k;
}

void ln_case_free(ln_case *k) {
    free(k->inp), free(k->w), free(k->b), free(k->dout), free(k->dinp0), free(k->dw0), free(k->db0);
    free(k->out), free(k->mean), free(k->rstd), free(k->dinp), free(k->dw), free(k->db);
}

void ln_got_free(ln_got *r) {
    free(r->out), free(r->mean), free(r->rstd), free(r->dinp), free(r->dw), free(r->db);
}

// Runs the forward, then the backward on its mean/rstd, as the model does.
// mean and rstd share one buffer (rstd at a 256-byte aligned offset), so the
// (N) views with an offset are exercised too.
ln_got ln_run(wgpt_gpu *g, const ln_case *k, int backward, int scratch_mode) {
    CPU = wgpt_kernel_variant_cpu(g), SCRATCH = scratch_mode;
    uint32_t N = k->N, C = k->C;
    size_t NC = (size_t)N * C;
    uint64_t rstd_off = ((uint64_t)N * 4 + 255) / 256 * 256;
    wgpt_buf *inp = tu_upload_f32(g, k->inp, NC, "inp");
    wgpt_buf *w = tu_upload_f32(g, k->w, C, "w");
    wgpt_buf *b = tu_upload_f32(g, k->b, C, "b");
    wgpt_buf *out = wgpt_buf_create(g, NC * 4, "out"), *stats = wgpt_buf_create(g, rstd_off + N * 4, "stats");
    TU_NONNULL(g, out);
    TU_NONNULL(g, stats);
    wgpt_view vmean = {stats, 0, (uint64_t)N * 4}, vrstd = {stats, rstd_off, (uint64_t)N * 4};
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(g, wgpt_layernorm_forward(g, &op, (wgpt_view){out, 0, 0}, vmean, vrstd, (wgpt_view){inp, 0, 0},
                                    (wgpt_view){w, 0, 0}, (wgpt_view){b, 0, 0}, N, C));
    // The twin in force: a workgroup per row, per 4 rows (vec4 kernels) or
    // per 64 rows (CPU twins; first chunk).
    uint64_t rows0 = wgpt_op_chunk_rows(g, N, C);
    uint64_t groups = CPU ? (rows0 + 63) / 64 : VEC4_(C) ? (rows0 + 3) / 4 : rows0;
    assert_int_equal(op.steps[0].x, groups < 65535 ? groups : 65535);
    wgpt_buf *dout = NULL, *dinp = NULL, *dw = NULL, *db = NULL, *scratch = NULL;
    // Blocks of 64 rows (LN_PART_ROWS) or, fused, 16 (LN_BWD_ROWS) in the
    // first chunk: two partials of C floats each.
    int sums = sums_(C);
    uint64_t chunks = (N + rows0 - 1) / rows0, block = sums == LN_SUMS_FUSED ? 16 : 64;
    uint64_t blocks0 = (rows0 + block - 1) / block;
    if (backward) {
        dout = tu_upload_f32(g, k->dout, NC, "dout"), dinp = tu_upload_f32(g, k->dinp0, NC, "dinp");
        dw = tu_upload_f32(g, k->dw0, C, "dweight"), db = tu_upload_f32(g, k->db0, C, "dbias");
        // The scratch at a 256-byte offset, every float 1e30 beforehand: a
        // partial left unwritten would show in dweight/dbias.
        uint64_t sbytes = SCRATCH == LN_SCRATCH_SHORT    ? 256
                          : SCRATCH == LN_SCRATCH_PART64 ? 2 * ((rows0 + 63) / 64) * C * 4
                                                      : wgpt_layernorm_scratch_bytes(N, C);
        assert_true(sbytes >= 2 * blocks0 * C * 4 || SCRATCH == LN_SCRATCH_SHORT);
        assert_true(SCRATCH != LN_SCRATCH_SHORT || 2 * blocks0 * C * 4 > sbytes);
        // (a case for the separate phase 1 on the vec4 kernels must be too
        // small for the fused kernel's partials)
        assert_true(SCRATCH != LN_SCRATCH_PART64 || !VEC4_(C) || 2 * ((rows0 + 15) / 16) * C * 4 > sbytes);
        float *junk = alloc_((256 + sbytes) / 4);
        for (uint64_t i = 0; i < (256 + sbytes) / 4; i++) junk[i] = 1e30f;
        scratch = tu_upload_f32(g, junk, (256 + sbytes) / 4, "ln scratch");
        free(junk);
        wgpt_view vs = {SCRATCH == LN_SCRATCH_NONE ? NULL : scratch, 256, sbytes};
        int before = op.n;
        TU_OK(g, wgpt_layernorm_backward(g, &op, (wgpt_view){dinp, 0, 0}, (wgpt_view){dw, 0, 0},
                                         (wgpt_view){db, 0, 0}, (wgpt_view){dout, 0, 0}, (wgpt_view){inp, 0, 0},
                                         (wgpt_view){w, 0, 0}, vmean, vrstd, N, C, vs));
        // The kernels in force, chunk by chunk (backward_kernels_); the
        // fused kernel on a workgroup per block, phase 1 on ceil(cols / 32)
        // x blocks workgroups (cols the vec4 columns when C % 4 == 0).
        const char *want[3];
        int per = backward_kernels_(C, want);
        assert_int_equal(op.n - before, (int)chunks * per);
        for (int i = before; i < op.n; i++)
            assert_string_equal(wgpt_kernel_name(op.steps[i].bind->kernel), want[(i - before) % per]);
        if (sums == LN_SUMS_FUSED) assert_int_equal(op.steps[before].x, blocks0 < 65535 ? blocks0 : 65535);
        if (sums == LN_SUMS_TWO_PHASE) {
            uint64_t cols = C % 4 == 0 ? C / 4 : C, groups1 = (cols + 31) / 32 * blocks0;
            assert_int_equal(op.steps[before + 1].x, groups1 < 65535 ? groups1 : 65535);
        }
    }
    TU_OK(g, wgpt_op_record(g, &op));
    ln_got r = {alloc_(NC), alloc_(N), alloc_(N), NULL, NULL, NULL, sums, rows0};
    TU_OK(g, wgpt_buf_download(g, out, 0, r.out, NC * 4));
    TU_OK(g, wgpt_buf_download(g, stats, 0, r.mean, (uint64_t)N * 4));
    TU_OK(g, wgpt_buf_download(g, stats, rstd_off, r.rstd, (uint64_t)N * 4));
    if (backward) {
        r.dinp = alloc_(NC), r.dw = alloc_(C), r.db = alloc_(C);
        TU_OK(g, wgpt_buf_download(g, dinp, 0, r.dinp, NC * 4));
        TU_OK(g, wgpt_buf_download(g, dw, 0, r.dw, (uint64_t)C * 4));
        TU_OK(g, wgpt_buf_download(g, db, 0, r.db, (uint64_t)C * 4));
    }
    wgpt_op_free(&op);
    wgpt_buf_free(inp), wgpt_buf_free(w), wgpt_buf_free(b), wgpt_buf_free(out), wgpt_buf_free(stats);
    wgpt_buf_free(dout), wgpt_buf_free(dinp), wgpt_buf_free(dw), wgpt_buf_free(db), wgpt_buf_free(scratch);
    return r;
}

// Longest chain of additions in a row sum of K terms (see the top).
static float row_chain_(uint32_t K) {
    if (CPU) return (float)K;
    if (VEC4_(K)) return (float)((K + 63) / 64 + 18);
    return (float)((K + 255) / 256 + 8);
}

// Like tu_assert_close over rows of `width`, with row n's atol scaled by
// scale[n] (the row's error amplification).
void ln_assert_rows_close(const char *what, const float *got, const float *want, uint32_t N, uint32_t width,
                               float atol, const float *scale) {
    char w2[128];
    for (uint32_t n = 0; n < N; n++) {
        snprintf(w2, sizeof w2, "%s row %u", what, n);
        tu_assert_close(w2, got + (size_t)n * width, want + (size_t)n * width, width, atol * scale[n], RTOL);
    }
}

static void check_(wgpt_gpu *g, const op_variant *v, const op_shape *s) {
    const uint32_t N = s->d[0], C = s->d[1];
    const int backward = 1;
    tu_rng_state = 0x9E3779B97F4A7C15ull;
    ln_case k = ln_case_make(N, C);
    ln_got r = ln_run(g, &k, backward, v->arg);
    char what[96];
    // An error d in mean, or a rounding of x - mean (|x| <= 5), moves xhat by
    // d * rstd: rows with a small spread (large rstd) amplify it. So the row
    // atol scales with a1 = 1 + rstd for the forward and a2 = a1^2 for dinp
    // (rstd * (g - mean(g) - xhat * mean(g xhat)) holds xhat times rstd).
    float *a1 = alloc_(N), *a2 = alloc_(N);
    for (uint32_t n = 0; n < N; n++) {
        a1[n] = 1.0f + k.rstd[n];
        a2[n] = a1[n] * a1[n];
    }
    float row_tol = row_chain_(C) * EPS32 * 5.0f * 4.0f;
    const char *vn = v->name;
    snprintf(what, sizeof what, "%s: forward out N=%u C=%u", vn, N, C);
    ln_assert_rows_close(what, r.out, k.out, N, C, row_tol * 1.5f, a1);  // |w| <= 1.5
    snprintf(what, sizeof what, "%s: forward mean N=%u C=%u", vn, N, C);
    tu_assert_close(what, r.mean, k.mean, N, row_tol, RTOL);
    snprintf(what, sizeof what, "%s: forward rstd N=%u C=%u", vn, N, C);
    ln_assert_rows_close(what, r.rstd, k.rstd, N, 1, row_tol, a2);  // relative to rstd: rstd * a1
    if (backward) {
        // Row sums of g = dout*w (<= 1.5) and g*xhat (<= 1.5 |xhat|).
        snprintf(what, sizeof what, "%s: backward dinp N=%u C=%u", vn, N, C);
        ln_assert_rows_close(what, r.dinp, k.dinp, N, C, row_tol * 1.5f * 4.0f, a2);
        // Column sums over N rows of dout*xhat and dout: chain ccol (one
        // pass: runs of ceil(rows/8) per chunk, then 8 lanes, then one add
        // per chunk; two phases: 8 rows, 8 lanes, ceil(blocks/8) partials, 8
        // lanes, one add per chunk; fused: 4 rows, 4 row groups, then as two
        // phases over blocks of 16 rows). Bound per column: ccol * 2^-24 *
        // sum|terms|, plus each term's own xhat error, times 4: the row's
        // mean and rstd come from sums of
        // row_chain additions, so xhat errs by row_chain * 2^-24 * (5 * rstd
        // + |xhat|) (the mean's error times rstd, rstd's relative error
        // times xhat); for the CPU twins' chains of C that term dominates.
        uint64_t chunks = (N + r.chunk - 1) / r.chunk;
        uint64_t blocks = r.sums == LN_SUMS_FUSED ? (r.chunk + 15) / 16 : (r.chunk + 63) / 64;
        float ccol = r.sums == LN_SUMS_FUSED       ? (float)(4 + 4 + (blocks + 7) / 8 + 8 + chunks)
                     : r.sums == LN_SUMS_TWO_PHASE ? (float)(8 + 8 + (blocks + 7) / 8 + 8 + chunks)
                                                : (float)((N + 7) / 8 + 8 + 8);
        float *tw = alloc_(C), *tb = alloc_(C);
        for (uint32_t c = 0; c < C; c++) {
            double sw = 0, sb = 0, ex = 0;
            for (uint32_t n = 0; n < N; n++) {
                double d = fabs(k.dout[(size_t)n * C + c]);
                sw += d * fabs((k.inp[(size_t)n * C + c] - k.mean[n]) * k.rstd[n]);
                sb += d;
                double xhat = fabs((k.inp[(size_t)n * C + c] - k.mean[n]) * k.rstd[n]);
                ex += d * (5.0 * k.rstd[n] + xhat) * row_chain_(C);
            }
            tw[c] = (float)(4.0 * EPS32 * (ccol * sw + ex));
            tb[c] = (float)(4.0 * EPS32 * ccol * sb);
        }
        snprintf(what, sizeof what, "%s: backward dweight N=%u C=%u", vn, N, C);
        ln_assert_rows_close(what, r.dw, k.dw, C, 1, 1.0f, tw);
        snprintf(what, sizeof what, "%s: backward dbias N=%u C=%u", vn, N, C);
        ln_assert_rows_close(what, r.db, k.db, C, 1, 1.0f, tb);
        free(tw), free(tb);
    }
    free(a1), free(a2);
    ln_got_free(&r);
    ln_case_free(&k);
}

// GPT-2's rows of 768 and the widest rows the vec4 kernels hold (1024), then
// one vec4 more (1028: the GPU kernels' scalar versions); GPT-2's 4096 rows
// and 3 more (the fused backward's last block of 3 rows); 194 vec4 columns
// Variant bits of the shapes below.
#define GPU_ (1u << 0)
#define CPU_ (1u << 1)
#define BOTH_ (GPU_ | CPU_)
#define NOSCRATCH_ (1u << 2)
#define SHORT_ (1u << 3)
#define PART64_ (1u << 4)

static const op_variant variants_[] = {
    {.name = "gpu", .kernels = WGPT_KERNELS_GPU, .arg = LN_SCRATCH_FULL},
    {.name = "cpu", .kernels = WGPT_KERNELS_CPU, .arg = LN_SCRATCH_FULL},
    {.name = "gpu-no-scratch", .kernels = WGPT_KERNELS_GPU, .arg = LN_SCRATCH_NONE},
    {.name = "gpu-short-scratch", .kernels = WGPT_KERNELS_GPU, .arg = LN_SCRATCH_SHORT},
    {.name = "gpu-scratch-part64", .kernels = WGPT_KERNELS_GPU, .arg = LN_SCRATCH_PART64},
};

// (N, C). GPT-2's rows of 768 and the widest rows the vec4 kernels hold
// (1024), then one vec4 more (1028: the GPU kernels' scalar versions);
// GPT-2's 4096 rows and 3 more (the fused backward's last block of 3 rows);
// 194 vec4 columns (a thread's fourth vec4 on 2 of 64 lanes). B=2, T=37,
// C=48 (fewer channels than threads, rows a multiple of nothing). More
// channels than threads (the last thread partly idle), a single channel
// (variance 0: out = bias), a single row. 64 KiB bindings: 300 rows of 100
// floats in chunks of 128 rows, 333 of 200 in chunks of 64 (5 full, one of
// 13), so every (N,C) and (N) view gets an offset and dweight/dbias add chunk
// by chunk. Past 65535 rows: one workgroup a row on the 2D grid. Without a
// scratch or with one too small (256 bytes; (74, 48) needs 768): the one-pass
// kernel; with the 64-row blocks' partials only: the separate phase 1.
static const op_shape shapes_[] = {
    {{9, 768}, 0, BOTH_},
    {{6, 1024}, 0, BOTH_},
    {{5, 1028}, 0, BOTH_},
    {{4099, 768}, 0, BOTH_},
    {{1037, 776}, 0, BOTH_},
    {{74, 48}, 0, BOTH_ | NOSCRATCH_ | SHORT_ | PART64_},
    {{5, 771}, 0, BOTH_ | NOSCRATCH_},
    {{200, 771}, 0, BOTH_},  // 4 blocks of 64 rows (the last of 8) x 25 column groups (the last of 3)
    {{9, 256}, 0, BOTH_},
    {{13, 1}, 0, BOTH_},
    {{1, 300}, 0, BOTH_},
    {{200, 768}, 0, PART64_},
    {{300, 100}, 64 * 1024, BOTH_ | NOSCRATCH_},
    {{333, 200}, 64 * 1024, BOTH_ | PART64_},
    {{70001, 5}, 0, BOTH_},
};

const op_family op_layernorm = {
    .name = "layernorm",
    .wrappers = "wgpt_layernorm_forward, wgpt_layernorm_backward (model/layernorm.h)",
    .reference = "ref_layernorm_forward, ref_layernorm_backward (tests/ref/layers.c)",
    .tolerance = "per row chain x 2^-24 x |x| bound x 4 x (1 + rstd) (squared for dinp); per column the sum's chain "
                 "and each term's xhat error; rtol 8 ulp",
    .variants = variants_,
    .nvariants = OP_COUNT(variants_),
    .shapes = shapes_,
    .nshapes = OP_COUNT(shapes_),
    .check = check_,
};
