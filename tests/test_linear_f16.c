// test_linear_f16.c: the special cases of the f16 transposes
// (kernels/08_precision.wgsl) and the f16 matmuls (the run-and-compare cases
// are the "linear-f16" and "precision" families of the op registry,
// tests/ops/linear_f16.c and precision.c, run by test_ops; these reuse their
// cases): the wide, persistent and stream-K blocks, the accumulate order, the
// epilogues, the block and split choice. The subgroup-matrix kernels
// (03_linear_sgm.wgsl) run where the device has them (the H100/H200), on
// emulated ones where it has f16 but none (lavapipe: src/gpu/sgm_emulate.h,
// the same kernel code), and are a cmocka skip elsewhere.
#include "gpu/internal.h"  // wgpt_sgm_pick_config_
#include "model/linear.h"
#include "model/linear_f16.h"
#include "model/elementwise.h"  // wgpt_gelu_forward
#include "model/layernorm.h"    // wgpt_layernorm_forward
#include "model/precision.h"
#include "model/variant.h"
#include "ops/linear_f16.h"
#include "ref/gpt2_ref.h"
#include "test_util.h"

static wgpt_gpu *G;  // the device under test (switched to a plain one by a test)
static wgpt_gpu *G0;  // the default device
// 1 where the default device has f16 but no subgroup matrices (lavapipe): the
// tensor-core kernels' tests run on emulated ones (wgpt_gpu_options.emulate_sgm,
// src/gpu/sgm_emulate.h), every device these tests open asks for them.
static int EMU;

static int group_setup(void **state) {
    (void)state;
    G = G0 = tu_gpu_open(NULL);
    const wgpt_gpu_info *i = wgpt_gpu_get_info(G0);
    EMU = !wgpt_linear_f16_uses_sgm(G0) && i->has_f16;
    if (EMU) {
        printf("'%s' has no subgroup matrices: the tensor-core kernels run on emulated ones (subgroup broadcasts)\n",
               i->name);
        wgpt_gpu_close(G0);  // (the group teardown closes G0 only)
        wgpt_gpu_options o = {.adapter_index = -1, .emulate_sgm = 1};
        G = G0 = tu_gpu_open(&o);
    }
    return 0;
}
static int group_teardown(void **state) {
    (void)state;
    wgpt_gpu_close(G0);
    return 0;
}

static void run_(wgpt_op *op) { lf16_run(G, op); }

static wgpt_buf *f16_of_(const float *x, uint64_t n, const char *label) { return lf16_of(G, x, n, label); }

// The halves gelu_f16_transpose must write, row-major, into x: g's own
// gelu_forward_f16 of the n floats f (padded to whole vec4s with zeros),
// each checked against the C reference's GELU (ref_gelu_forward): within
// test_gelu_residual's bound for the f32 GELU (WGSL's tanh: 0.5 |x| 2.7e-6,
// and 16 ulp of the value) plus half an f16 ulp of the value and f16's
// smallest subnormal.
static void gelu_halves_(wgpt_gpu *g, uint16_t *x, const float *f, size_t n) {
    size_t n8 = (n + 7) / 8 * 8;
    float *fp = calloc(n8, 4);
    uint16_t *h = malloc(n8 * 2);
    memcpy(fp, f, n * 4);
    wgpt_buf *src = tu_upload_f32(g, fp, n8, "gelu src"), *dst = wgpt_buf_create(g, n8 * 2, "gelu f16");
    TU_NONNULL(g, dst);
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(g, wgpt_gelu_forward_f16(g, &op, (wgpt_view){dst, 0, n8 * 2}, (wgpt_view){src, 0, n8 * 4}, n8));
    TU_OK(g, wgpt_op_record(g, &op));
    wgpt_op_free(&op);
    TU_OK(g, wgpt_buf_download(g, dst, 0, h, n8 * 2));
    memcpy(x, h, n * 2);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(f[i])) continue;
        float y;
        ref_gelu_forward(&y, &f[i], 1);
        double got = ref_f32_from_f16(x[i]), err = fabs(got - y);
        if (err > 0.5 * fabs(f[i]) * 2 * 23 * 0x1p-24 + fabs(y) * (0x1p-11 + 16 * 0x1p-24) + 0x1p-24)
            fail_msg("gelu_forward_f16 of %.9g is %.9g, the C reference %.9g", f[i], got, y);
    }
    wgpt_buf_free(src), wgpt_buf_free(dst);
    free(fp), free(h);
}

// transpose_f16 moves every half bit for bit (random bit patterns, NaNs
// included), cast_f16_transpose rounds as the reference does (floats over
// 40 binades, infinities and NaN among them; an f16 subnormal flushed to zero
// by the driver is allowed, as for the cast), and gelu_f16_transpose writes
// gelu_forward_f16's halves on the same device bit for bit (those within
// gelu_halves_'s bound of the C reference), at whole tiles, edge tiles in
// both dimensions and 2-wide matrices; on the default kernels and the GPU
// ones (on lavapipe the default is the CPU twin, the u32 kernels): sizes
// that are multiples of 8 take the 16-byte kernels (transpose_f16_v8) there,
// the others the u32 ones.
static void transposes_are_exact(void **st) {
    (void)st;
    const uint32_t shapes[][2] = {{128, 64}, {130, 72}, {2, 66}, {66, 2}, {1000, 194}, {136, 200}, {8, 72}, {72, 8}};
    wgpt_gpu_options gpu_kernels = {.adapter_index = -1, .kernels = WGPT_KERNELS_GPU, .emulate_sgm = EMU};
    wgpt_gpu *gk = tu_gpu_open(&gpu_kernels);
    wgpt_gpu *devices[2] = {G0, gk};
    tu_rng_state = 11;
    for (int dv = 0; dv < 2; dv++)
        for (int from = 0; from < 3; from++)  // halves, floats, floats to GELU
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                wgpt_gpu *g = devices[dv];
                uint32_t R = shapes[s][0], Cc = shapes[s][1];
                size_t n = (size_t)R * Cc;
                int from_f32 = from != 0, gelu = from == 2;
                uint16_t *x = malloc(n * 2), *got = malloc(n * 2);
                float *f = malloc(n * 4);
                for (size_t i = 0; i < n; i++) {
                    f[i] = gelu ? tu_randf(-8, 8) : tu_randf(-1, 1) * powf(2.0f, tu_randf(-26, 14));
                    if (i % 97 == 5) f[i] = i % 3 ? INFINITY : NAN;
                    x[i] = from_f32 ? ref_f16_from_f32(f[i]) : (uint16_t)tu_randf(0, 65536);
                }
                wgpt_buf *src = wgpt_buf_create(g, n * 4, "transpose src"), *dst = wgpt_buf_create(g, n * 2 + 256, "dst");
                TU_NONNULL(g, src);
                TU_NONNULL(g, dst);
                TU_OK(g, wgpt_buf_upload(g, src, 0, from_f32 ? (const void *)f : (const void *)x, n * (from_f32 ? 4 : 2)));
                if (gelu) gelu_halves_(g, x, f, n);
                wgpt_op op;
                wgpt_op_init(&op);
                wgpt_view d = {dst, 0, n * 2}, sv = {src, 0, 0};
                TU_OK(g, gelu       ? wgpt_gelu_f16_transpose(g, &op, d, sv, R, Cc)
                         : from_f32 ? wgpt_cast_f16_transpose(g, &op, d, sv, R, Cc)
                                    : wgpt_transpose_f16(g, &op, d, sv, R, Cc));
                const char *want = gelu ? "gelu_f16_transpose" : from_f32 ? "cast_f16_transpose" : "transpose_f16";
                int v8 = dv == 1 && R % 8 == 0 && Cc % 8 == 0;
                char name[64];
                snprintf(name, sizeof name, "%s%s", want, v8 ? "_v8" : "");
                assert_int_equal(op.n, 1);
                if (dv == 1) assert_string_equal(wgpt_kernel_name(op.steps[0].bind->kernel), name);
                G = g;
                run_(&op);  // (frees op)
                G = G0;
                TU_OK(g, wgpt_buf_download(g, dst, 0, got, n * 2));
                for (uint32_t r = 0; r < R; r++)
                    for (uint32_t c = 0; c < Cc; c++) {
                        uint16_t w = x[(size_t)r * Cc + c], h = got[(size_t)c * R + r];
                        if (h == w || (from_f32 && !gelu && (w & 0x7c00u) == 0 && (h & 0x7fffu) == 0)) continue;
                        fail_msg("%s of %u x %u: element (%u, %u) came out 0x%04x, it should be 0x%04x", name, R, Cc,
                                 r, c, h, w);
                    }
                wgpt_buf_free(src), wgpt_buf_free(dst);
                free(x), free(got), free(f);
            }
    wgpt_gpu_close(gk);
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_buf *b = wgpt_buf_create(G, 1024, "x");
    wgpt_view v = {b, 0, 0};
    assert_int_equal(wgpt_transpose_f16(G, &op, v, v, 3, 8), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "3 x 8"));
    assert_int_equal(wgpt_transpose_f16(G, &op, v, v, 64, 64), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "8192 bytes"));
    assert_int_equal(wgpt_cast_f16_transpose(G, &op, v, v, 32, 16), -1);  // dst fits, src does not
    assert_non_null(strstr(wgpt_gpu_error(G), "2048 of src"));
    assert_int_equal(wgpt_gelu_f16_transpose(G, &op, v, v, 32, 16), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "gelu_f16_transpose: 32 x 16 needs"));
    assert_int_equal(op.n, 0);
    wgpt_buf_free(b);
    wgpt_op_free(&op);
}

// A LayerNorm's transposed f16 copy as the model makes it where its linears
// take their inputs transposed, on g: the stats-only forward then
// layernorm_f16_transpose (fused), or as it made it before, the forward then
// cast_f16_transpose. x (R x Cc floats), w and b (Cc): into h (Cc x R
// halves), mean and rstd into stats (2 R floats), the two kernels' names
// into kernels.
static void ln_halves_(wgpt_gpu *g, int fused, const float *x, const float *w, const float *b, uint32_t R, uint32_t Cc,
                       uint16_t *h, float *stats, char kernels[2][64]) {
    size_t n = (size_t)R * Cc;
    uint64_t rstd_off = ((uint64_t)R * 4 + 255) / 256 * 256;  // both in one buffer: a view with an offset
    wgpt_buf *bx = tu_upload_f32(g, x, n, "ln x"), *bw = tu_upload_f32(g, w, Cc, "ln w");
    wgpt_buf *bb = tu_upload_f32(g, b, Cc, "ln b"), *bs = wgpt_buf_create(g, rstd_off + R * 4, "ln stats");
    wgpt_buf *out = fused ? NULL : wgpt_buf_create(g, n * 4, "ln out"), *dst = wgpt_buf_create(g, n * 2, "ln f16");
    TU_NONNULL(g, bs);
    TU_NONNULL(g, dst);
    wgpt_view vx = {bx, 0, 0}, vw = {bw, 0, 0}, vb = {bb, 0, 0}, vo = {out, 0, 0}, vd = {dst, 0, 0};
    wgpt_view vm = {bs, 0, (uint64_t)R * 4}, vr = {bs, rstd_off, (uint64_t)R * 4};
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(g, wgpt_layernorm_forward(g, &op, vo, vm, vr, vx, vw, vb, R, Cc));  // (no out buffer: the stats only)
    TU_OK(g, fused ? wgpt_layernorm_f16_transpose(g, &op, vd, vx, vm, vr, vw, vb, R, Cc)
                   : wgpt_cast_f16_transpose(g, &op, vd, vo, R, Cc));
    assert_int_equal(op.n, 2);
    for (int i = 0; i < 2; i++) snprintf(kernels[i], 64, "%s", wgpt_kernel_name(op.steps[i].bind->kernel));
    TU_OK(g, wgpt_op_record(g, &op));
    wgpt_op_free(&op);
    TU_OK(g, wgpt_buf_download(g, dst, 0, h, n * 2));
    TU_OK(g, wgpt_buf_download(g, bs, 0, stats, (uint64_t)R * 4));
    TU_OK(g, wgpt_buf_download(g, bs, rstd_off, stats + R, (uint64_t)R * 4));
    wgpt_buf_free(bx), wgpt_buf_free(bw), wgpt_buf_free(bb), wgpt_buf_free(bs), wgpt_buf_free(out);
    wgpt_buf_free(dst);
}

// The halves h (Cc x R) against the C reference's LayerNorm (ref_layernorm_forward)
// of x: within test_layernorm's bound for the f32 output with its longest row
// chain (the CPU twins' Cc adds: Cc 2^-24 5 4 1.5 (1 + rstd), and 8 ulp of
// the value) plus half an f16 ulp (2^-11 of the value, 2^-25 for
// subnormals). Returns the worst error as a fraction of its bound.
static double ln_halves_near_ref_(const uint16_t *h, const float *x, const float *w, const float *b, uint32_t R,
                                  uint32_t Cc) {
    size_t n = (size_t)R * Cc;
    float *y = malloc(n * 4), *mean = malloc(R * 4), *rstd = malloc(R * 4);
    ref_layernorm_forward(y, mean, rstd, x, w, b, (int)R, (int)Cc);
    double worst = 0;
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t c = 0; c < Cc; c++) {
            double want = y[(size_t)r * Cc + c], got = ref_f32_from_f16(h[(size_t)c * R + r]);
            double bound = Cc * 0x1p-24 * 5 * 4 * 1.5 * (1 + rstd[r]) + fabs(want) * (8 * 0x1p-24 + 0x1p-11) + 0x1p-25;
            double e = fabs(got - want) / bound;
            if (!(e <= 1))
                fail_msg("layernorm_f16_transpose of %u x %u: (%u, %u) is %.9g, the C reference %.9g (bound %.3g)", R,
                         Cc, r, c, got, want, bound);
            if (e > worst) worst = e;
        }
    free(y), free(mean), free(rstd);
    return worst;
}

// layernorm_f16_transpose after the stats-only forward writes the halves and
// statistics of the forward then cast_f16_transpose on the same device, bit
// for bit (the same expression on the same floats), those within
// ln_halves_near_ref_'s bound of the C reference; at whole tiles, edge tiles
// in both dimensions (rows not a multiple of 64, nor of 8), a 2-wide matrix,
// GPT-2 124M's width and one past the vec4 LayerNorm's 1024; on the default
// kernels and the GPU ones, which pair the _v8 transpose with each
// forward's stats-only variant (checked by name). Rows off + U(-1, 1), off in
// [2, 4), w in [0.5, 1.5), b in [-0.5, 0.5) (test_layernorm's).
static void layernorm_f16_transpose_is_exact(void **st) {
    (void)st;
    const uint32_t shapes[][2] = {{128, 64}, {130, 72}, {1000, 194}, {136, 200}, {8, 72},
                                  {72, 8},   {66, 2},   {72, 768},   {24, 1032}};
    wgpt_gpu_options gpu_kernels = {.adapter_index = -1, .kernels = WGPT_KERNELS_GPU, .emulate_sgm = EMU};
    wgpt_gpu *gk = tu_gpu_open(&gpu_kernels);
    wgpt_gpu *devices[2] = {G0, gk};
    tu_rng_state = 13;
    double worst = 0;
    for (int dv = 0; dv < 2; dv++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            wgpt_gpu *g = devices[dv];
            uint32_t R = shapes[s][0], Cc = shapes[s][1];
            size_t n = (size_t)R * Cc;
            float *x = malloc(n * 4), *w = malloc(Cc * 4), *b = malloc(Cc * 4), *sa = malloc(R * 8), *sf = malloc(R * 8);
            uint16_t *ha = malloc(n * 2), *hf = malloc(n * 2);
            for (uint32_t r = 0; r < R; r++) {
                float off = tu_randf(2, 4);
                for (uint32_t c = 0; c < Cc; c++) x[(size_t)r * Cc + c] = off + tu_randf(-1, 1);
            }
            tu_fill(w, Cc, 0.5f, 1.5f);
            tu_fill(b, Cc, -0.5f, 0.5f);
            char ka[2][64], kf[2][64];
            ln_halves_(g, 0, x, w, b, R, Cc, ha, sa, ka);
            ln_halves_(g, 1, x, w, b, R, Cc, hf, sf, kf);
            if (dv == 1) {  // the forward's stats-only twin, the transpose's LN twin (_v8 for multiples of 8)
                const char *v8 = R % 8 == 0 && Cc % 8 == 0 ? "_v8" : "";
                char want[2][64];
                snprintf(want[0], 64, "cast_f16_transpose%s", v8);
                snprintf(want[1], 64, "layernorm_f16_transpose%s", v8);
                assert_int_equal(strncmp(kf[0], "layernorm_stats", strlen("layernorm_stats")), 0);
                assert_string_equal(kf[0] + strlen("layernorm_stats"), ka[0] + strlen("layernorm_forward"));
                assert_string_equal(ka[1], want[0]);
                assert_string_equal(kf[1], want[1]);
            }
            assert_memory_equal(sf, sa, R * 8);
            for (uint32_t c = 0; c < Cc; c++)
                for (uint32_t r = 0; r < R; r++) {
                    size_t i = (size_t)c * R + r;
                    if (hf[i] != ha[i])
                        fail_msg("%s of %u x %u: element (%u, %u) came out 0x%04x, %s then %s gave 0x%04x", kf[1], R,
                                 Cc, r, c, hf[i], ka[0], ka[1], ha[i]);
                }
            double e = ln_halves_near_ref_(hf, x, w, b, R, Cc);
            if (e > worst) worst = e;
            free(x), free(w), free(b), free(sa), free(sf), free(ha), free(hf);
        }
    printf("layernorm_f16_transpose: bit for bit the forward then cast_f16_transpose; worst error %.3f of the bound "
           "against the C reference\n", worst);
    wgpt_gpu_close(gk);
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_buf *bf = wgpt_buf_create(G, 1 << 16, "x");
    wgpt_view v = {bf, 0, 0}, short4 = {bf, 0, 4 * 4}, none = {NULL, 0, 0};
    assert_int_equal(wgpt_layernorm_f16_transpose(G, &op, v, v, v, short4, v, v, 8, 16), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "layernorm_f16_transpose: 8 x 16 needs 32 bytes of rstd (has 16)"));
    assert_int_equal(wgpt_layernorm_f16_transpose(G, &op, v, v, v, v, v, none, 8, 16), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "64 bytes of bias (has 0)"));
    assert_int_equal(wgpt_layernorm_f16_transpose(G, &op, v, v, v, v, v, v, 8, 15), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "layernorm_f16_transpose: 8 x 15"));
    assert_int_equal(op.n, 0);
    wgpt_buf_free(bf);
    wgpt_op_free(&op);
}

// The weight pass (always) and an accumulating input pass add the product to
// the output's present value after the whole sum, prior + (a b), one f32
// rounding: bit for bit the host's sum of the two, the order in which the
// ranks' gradients are added (so N ranks train what one process of N
// micro-batches does: tests/test_dist.c). Run with prior 0, then with a
// random prior, on the default kernels and on a device that splits every pass
// in 3 (the split's reduce adds the prior likewise); shapes with whole and
// edge blocks.
static void accumulate_adds_after_the_sum_(uint32_t N, uint32_t C, uint32_t OC) {
    size_t ni = (size_t)N * C, nw = (size_t)OC * C, nd = (size_t)N * OC;
    float *inp = malloc(ni * 4), *w = malloc(nw * 4), *dout = malloc(nd * 4), *zero = calloc(ni > nw ? ni : nw, 4);
    float *pi = malloc(ni * 4), *pw = malloc(nw * 4), *gi[2], *gw[2];
    tu_fill(inp, ni, -1, 1), tu_fill(w, nw, -0.5f, 0.5f), tu_fill(dout, nd, -1, 1);
    tu_fill(pi, ni, -1, 1), tu_fill(pw, nw, -1, 1);
    wgpt_buf *i16 = f16_of_(inp, ni, "inp16"), *w16 = f16_of_(w, nw, "w16"), *d16 = f16_of_(dout, nd, "dout16");
    wgpt_buf *dinp = wgpt_buf_create(G, ni * 4, "dinp"), *dw = wgpt_buf_create(G, nw * 4, "dw");
    uint64_t sb = wgpt_linear_f16_scratch_bytes(G, N, C, OC), tb = wgpt_linear_f16_transposed_bytes(G, N, C, OC);
    wgpt_buf *scr = wgpt_buf_create(G, sb + 256, "scratch"), *tbuf = wgpt_buf_create(G, tb > 256 ? tb : 256, "inp_t");
    TU_NONNULL(G, dinp);
    TU_NONNULL(G, dw);
    TU_NONNULL(G, scr);
    TU_NONNULL(G, tbuf);
    wgpt_view vi = {i16, 0, 0}, vw = {w16, 0, 0}, vd = {d16, 0, 0}, vdi = {dinp, 0, 0}, vdw = {dw, 0, 0};
    wgpt_view vscr = {scr, 0, 0}, vt = {tbuf, 0, 0};
    for (int r = 0; r < 2; r++) {  // prior 0, then the random prior
        TU_OK(G, wgpt_buf_upload(G, dinp, 0, r ? pi : zero, ni * 4));
        TU_OK(G, wgpt_buf_upload(G, dw, 0, r ? pw : zero, nw * 4));
        wgpt_op op;
        wgpt_op_init(&op);
        TU_OK(G, wgpt_linear_f16_backward_input(G, &op, vdi, vd, vw, N, C, OC, 1, vscr));
        TU_OK(G, wgpt_linear_f16_backward_weight(G, &op, vdw, vd, vi, N, C, OC, vt, vscr));
        run_(&op);
        gi[r] = malloc(ni * 4), gw[r] = malloc(nw * 4);
        TU_OK(G, wgpt_buf_download(G, dinp, 0, gi[r], ni * 4));
        TU_OK(G, wgpt_buf_download(G, dw, 0, gw[r], nw * 4));
    }
    for (size_t i = 0; i < ni; i++) {
        float want = pi[i] + gi[0][i];
        if (memcmp(&want, &gi[1][i], 4)) fail_msg("input pass %ux%ux%u, element %zu: %.9g, want prior %.9g + product %.9g = %.9g",
                                                  N, C, OC, i, gi[1][i], pi[i], gi[0][i], want);
    }
    for (size_t i = 0; i < nw; i++) {
        float want = pw[i] + gw[0][i];
        if (memcmp(&want, &gw[1][i], 4)) fail_msg("weight pass %ux%ux%u, element %zu: %.9g, want prior %.9g + product %.9g = %.9g",
                                                  N, C, OC, i, gw[1][i], pw[i], gw[0][i], want);
    }
    printf("accumulate %ux%ux%u on '%s'%s: prior + product bit for bit\n", N, C, OC, wgpt_gpu_get_info(G)->name,
           wgpt_gpu_get_info(G)->matmul_splits ? " (every pass split)" : "");
    wgpt_buf_free(i16), wgpt_buf_free(w16), wgpt_buf_free(d16), wgpt_buf_free(dinp), wgpt_buf_free(dw);
    wgpt_buf_free(scr), wgpt_buf_free(tbuf);
    free(inp), free(w), free(dout), free(zero), free(pi), free(pw);
    for (int r = 0; r < 2; r++) free(gi[r]), free(gw[r]);
}

static void accumulate_adds_after_the_sum(void **st) {
    (void)st;
    wgpt_gpu_options o = {.adapter_index = -1, .matmul_splits = 3, .kernels = WGPT_KERNELS_GPU, .emulate_sgm = EMU};
    wgpt_gpu *split = tu_gpu_open(&o);
    wgpt_gpu *devices[2] = {G0, split};
    tu_rng_state = 13;
    for (int d = 0; d < 2; d++) {
        G = devices[d];
        accumulate_adds_after_the_sum_(256, 128, 128);
        accumulate_adds_after_the_sum_(136, 72, 200);
    }
    G = G0;
    wgpt_gpu_close(split);
}

// The 128 x 256 block (matmul_sgm_wide: 16 subgroups, its out area used in
// two rounds, stages of 32), unsplit and split in 3: the accumulate order on
// it (its shapes against the reference: test_ops linear-f16/sgm-wide*).
static void wide_block_accumulates_in_order(void **st) {
    (void)st;
    if (!wgpt_linear_f16_uses_sgm(G0)) {
        printf("skipped: needs f16 subgroup matrices, real or emulated; '%s' has neither\n", wgpt_gpu_get_info(G0)->name);
        skip();
    }
    for (uint32_t splits = 0; splits <= 3; splits += 3) {
        wgpt_gpu_options o = {.adapter_index = -1, .sgm_block = WGPT_SGM_WIDE, .matmul_splits = splits,
                              .kernels = WGPT_KERNELS_GPU, .emulate_sgm = EMU};
        G = tu_gpu_open(&o);
        const wgpt_gpu_info *i = wgpt_gpu_get_info(G);
        printf("128 x 256 blocks%s on '%s'\n", splits ? ", every pass in 3 parts," : "", i->name);
        tu_rng_state = 17;
        accumulate_adds_after_the_sum_(256, 128, 128);
        accumulate_adds_after_the_sum_(136, 72, 200);
        wgpt_gpu_close(G);
        G = G0;
    }
}

static void epilogue_shape_(uint32_t N, uint32_t C, uint32_t OC);

// The persistent twins (matmul_sgm_p, matmul_sgm_wide_p, ...: one workgroup
// a compute unit, each through its share of the blocks, the next block's first
// stage fetched during the last stage of the one before) on a device said to
// have 2 compute units (WGPT_COMPUTE_UNITS), so that every workgroup takes
// several blocks, edge blocks and split parts among them, on both blocks,
// unsplit and split in 3: the grid is the units', the accumulate order, and
// the f16 epilogues (the _epi_p twins). Their shapes against the reference:
// test_ops linear-f16/sgm-*persistent*.
static void persistent_blocks_plan_accumulate_and_epilogues(void **st) {
    (void)st;
    if (!wgpt_linear_f16_uses_sgm(G0)) {
        printf("skipped: needs f16 subgroup matrices, real or emulated; '%s' has neither\n", wgpt_gpu_get_info(G0)->name);
        skip();
    }
    setenv("WGPT_COMPUTE_UNITS", "2", 1);
    for (int b = WGPT_SGM_BASE; b <= WGPT_SGM_WIDE; b++)
        for (uint32_t splits = 0; splits <= 3; splits += 3) {
            wgpt_gpu_options o = {.adapter_index = -1, .sgm_block = (wgpt_sgm_block)b, .matmul_splits = splits,
                                  .kernels = WGPT_KERNELS_GPU, .emulate_sgm = EMU};
            G = tu_gpu_open(&o);
            assert_int_equal(wgpt_gpu_get_info(G)->compute_units, 2);
            printf("%s blocks%s, 2 workgroups, on '%s'\n", b == WGPT_SGM_WIDE ? "128 x 256" : "128 x 128",
                   splits ? ", every pass in 3 parts" : "", wgpt_gpu_get_info(G)->name);
            // 8 blocks of the 128 x 128 block or 4 of the wide one (each in 3 parts where split): one
            // persistent dispatch of 2 workgroups (recorded only)
            wgpt_buf *t = wgpt_buf_create(G, 3u * 512 * 256 * 4, "t");
            wgpt_view x = {t, 0, 0}, none = {0};
            wgpt_op op;
            wgpt_op_init(&op);
            TU_OK(G, wgpt_linear_f16_backward_input(G, &op, x, x, x, 256, 512, 512, 0, splits ? x : none));
            assert_true(op.n >= 1);
            assert_int_equal(op.steps[0].x, 2), assert_int_equal(op.steps[0].y, 1), assert_int_equal(op.steps[0].z, 1);
            wgpt_op_free(&op);
            wgpt_buf_free(t);
            tu_rng_state = 17;
            accumulate_adds_after_the_sum_(256, 128, 128);
            if (!splits) {  // the epilogue passes run in one part
                epilogue_shape_(256, 128, 384);  // the forward's 6 or 3 blocks
                epilogue_shape_(520, 64, 136);   // every pass of more than 2 blocks, edges both ways
            }
            wgpt_gpu_close(G);
            G = G0;
        }
    unsetenv("WGPT_COMPUTE_UNITS");
}

// Stream-K (WGPT_STREAMK_ON): the blocks' stages end to end, an equal share
// for each of a device's compute units (said to be 3, then 5, so that the
// shares end inside blocks, a block shared by 2 or 3 workgroups), each
// piece into its slot of the partials, matmul_streamk_reduce adding every
// block's slots in order with the bias and the prior, on both blocks: the
// plan's dispatches (wgs workgroups in one row, then the reduce) and the
// accumulate order. Their shapes against the reference: test_ops
// linear-f16/sgm-*streamk*.
static void streamk_plan_and_accumulate(void **st) {
    (void)st;
    if (!wgpt_linear_f16_uses_sgm(G0)) {
        printf("skipped: needs f16 subgroup matrices, real or emulated; '%s' has neither\n", wgpt_gpu_get_info(G0)->name);
        skip();
    }
    const char *units[2] = {"3", "5"};
    for (int u = 0; u < 2; u++)
        for (int b = WGPT_SGM_BASE; b <= WGPT_SGM_WIDE; b++) {
            setenv("WGPT_COMPUTE_UNITS", units[u], 1);
            wgpt_gpu_options o = {.adapter_index = -1, .sgm_block = (wgpt_sgm_block)b, .streamk = WGPT_STREAMK_ON,
                                  .kernels = WGPT_KERNELS_GPU, .emulate_sgm = EMU};
            G = tu_gpu_open(&o);
            unsetenv("WGPT_COMPUTE_UNITS");
            const wgpt_gpu_info *in = wgpt_gpu_get_info(G);
            printf("stream-K, %s blocks, %u compute units, on '%s'\n", b == WGPT_SGM_WIDE ? "128 x 256" : "128 x 128",
                   in->compute_units, in->name);
            // the input pass of 256 x 512 (k 512): 8 or 4 blocks of 8 or 16 stages, shared out
            wgpt_sgm_plan pl = wgpt_linear_f16_plan(in, 256, 512, 512, UINT64_MAX);
            assert_true(pl.sk > 0 && pl.s == 1 && pl.slots >= 2 && pl.wgs <= in->compute_units);
            assert_int_equal(pl.wide, b == WGPT_SGM_WIDE);
            assert_int_equal(pl.sk, (256 / 128 * 512 / (pl.wide ? 256 : 128) * 512 / pl.bk + in->compute_units - 1) /
                                        in->compute_units);
            wgpt_buf *t = wgpt_buf_create(G, (uint64_t)pl.slots * 256 * 512 * 4, "t");
            wgpt_view x = {t, 0, 0};
            wgpt_op op;
            wgpt_op_init(&op);
            TU_OK(G, wgpt_linear_f16_backward_input(G, &op, x, x, x, 256, 512, 512, 0, x));
            assert_int_equal(op.n, 2);
            assert_int_equal(op.steps[0].x, pl.wgs), assert_int_equal(op.steps[0].y, 1);
            assert_string_equal(wgpt_kernel_name(op.steps[1].bind->kernel), "matmul_streamk_reduce");
            wgpt_op_free(&op);
            wgpt_buf_free(t);
            tu_rng_state = 19;
            accumulate_adds_after_the_sum_(256, 128, 512);
            wgpt_gpu_close(G);
            G = G0;
        }
}

// Two halves equal or neighbours (one ulp apart, same sign: their bits differ by 1).
static int halves_within_ulp_(uint16_t got, uint16_t want) {
    int d = (int)got - (int)want;
    return got == want || (abs(d) == 1 && !((got ^ want) & 0x8000));
}

// The input pass with the GELU's backward (wgpt_linear_f16_backward_input_gelu)
// on G against the plain input pass followed by wgpt_gelu_backward_f16 on the
// same device: the f32 gradient within 2^-22 of its size (the same sums; GELU'
// compiled in two kernels may differ by an ulp or so), its f16 copy within one
// f16 ulp. w16: the (OC, C) weight's f16 copy.
static void gelu_grad_shape_(wgpt_buf *w16, uint32_t N, uint32_t C, uint32_t OC) {
    size_t ni = (size_t)N * C;
    float *dout = malloc((size_t)N * OC * 4), *x = malloc(ni * 4);
    tu_fill(dout, (size_t)N * OC, -1, 1), tu_fill(x, ni, -4, 4);
    x[0] = 12.0f, x[1] = -12.0f;  // past GELU's clamp
    wgpt_buf *d16 = f16_of_(dout, (uint64_t)N * OC, "dout16"), *xb = wgpt_buf_create(G, ni * 4, "gelu in");
    wgpt_buf *pre = wgpt_buf_create(G, ni * 4, "input pass"), *r32 = wgpt_buf_create(G, ni * 4, "gelu bwd");
    wgpt_buf *r16 = wgpt_buf_create(G, ni * 2, "gelu bwd f16"), *f32b = wgpt_buf_create(G, ni * 4, "fused");
    wgpt_buf *f16b = wgpt_buf_create(G, ni * 2, "fused f16");
    TU_NONNULL(G, f16b);
    TU_OK(G, wgpt_buf_upload(G, xb, 0, x, ni * 4));
    wgpt_view vd = {d16, 0, 0}, vw = {w16, 0, 0}, vx = {xb, 0, 0}, vp = {pre, 0, 0}, vr32 = {r32, 0, 0};
    wgpt_view vr16 = {r16, 0, 0}, vf32 = {f32b, 0, 0}, vf16 = {f16b, 0, 0}, none = {0};
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(G, wgpt_linear_f16_backward_input(G, &op, vp, vd, vw, N, C, OC, 0, none));
    TU_OK(G, wgpt_gelu_backward_f16(G, &op, vr32, vr16, vx, vp, ni));
    TU_OK(G, wgpt_linear_f16_backward_input_gelu(G, &op, vf32, vf16, vx, vd, vw, N, C, OC));
    run_(&op);
    float *want = malloc(ni * 4), *got = malloc(ni * 4);
    uint16_t *want16 = malloc(ni * 2), *got16 = malloc(ni * 2);
    TU_OK(G, wgpt_buf_download(G, r32, 0, want, ni * 4));
    TU_OK(G, wgpt_buf_download(G, f32b, 0, got, ni * 4));
    TU_OK(G, wgpt_buf_download(G, r16, 0, want16, ni * 2));
    TU_OK(G, wgpt_buf_download(G, f16b, 0, got16, ni * 2));
    size_t exact = 0, exact16 = 0;
    for (size_t i = 0; i < ni; i++) {
        if (!(fabsf(got[i] - want[i]) <= 0x1p-22f * fabsf(want[i])))
            fail_msg("input pass + GELU' %ux%ux%u [%zu]: %.9g, the two passes give %.9g", N, C, OC, i, got[i], want[i]);
        if (!halves_within_ulp_(got16[i], want16[i]))
            fail_msg("input pass + GELU' f16 %ux%ux%u [%zu]: 0x%04x, the two passes give 0x%04x", N, C, OC, i, got16[i],
                     want16[i]);
        exact += got[i] == want[i], exact16 += got16[i] == want16[i];
    }
    printf("input pass + GELU' N=%u C=%u OC=%u: %zu of %zu f32 and %zu f16 values bit for bit\n", N, C, OC, exact, ni,
           exact16);
    wgpt_buf_free(d16), wgpt_buf_free(xb), wgpt_buf_free(pre), wgpt_buf_free(r32), wgpt_buf_free(r16);
    wgpt_buf_free(f32b), wgpt_buf_free(f16b);
    free(dout), free(x), free(want), free(got), free(want16), free(got16);
}

// The forward's f16 epilogue (wgpt_linear_f16_forward_t16) on G: its f32
// output is forward_t's bit for bit (same kernel, same sums), checked against
// the reference as check_shape_ does; WGPT_OUT16_COPY's halves are that output
// rounded (ref_f16_from_f32), bit for bit; WGPT_OUT16_GELU_T's are the GELU
// kernel's f32 result on it, rounded and transposed, within one f16 ulp (the
// two kernels' tanh may be compiled with different contractions, one f32 ulp
// apart, which can round to neighbouring halves); the count of halves off by
// one is printed. Then gelu_grad_shape_ at the same shape.
static void epilogue_shape_(uint32_t N, uint32_t C, uint32_t OC) {
    size_t no = (size_t)N * OC;
    float *inp = malloc((size_t)N * C * 4), *w = malloc((size_t)OC * C * 4), *bias = malloc((size_t)OC * 4);
    tu_fill(inp, (size_t)N * C, -1, 1), tu_fill(w, (size_t)OC * C, -0.5f, 0.5f), tu_fill(bias, OC, -1, 1);
    float *ri = malloc((size_t)N * C * 4), *rw = malloc((size_t)OC * C * 4);
    for (size_t i = 0; i < (size_t)N * C; i++) ri[i] = ref_f32_from_f16(ref_f16_from_f32(inp[i]));
    for (size_t i = 0; i < (size_t)OC * C; i++) rw[i] = ref_f32_from_f16(ref_f16_from_f32(w[i]));
    wgpt_buf *i16 = f16_of_(inp, (uint64_t)N * C, "inp16"), *w16 = f16_of_(w, (uint64_t)OC * C, "w16");
    wgpt_buf *it = wgpt_buf_create(G, (uint64_t)N * C * 2, "inp_t"), *bb = wgpt_buf_create(G, OC * 4, "bias");
    wgpt_buf *o32 = wgpt_buf_create(G, no * 4, "out"), *g32 = wgpt_buf_create(G, no * 4, "out gelu side");
    wgpt_buf *gel = wgpt_buf_create(G, no * 4, "gelu"), *c16 = wgpt_buf_create(G, no * 2, "copy16");
    wgpt_buf *g16 = wgpt_buf_create(G, no * 2, "gelu16 t");
    TU_NONNULL(G, g16);
    TU_OK(G, wgpt_buf_upload(G, bb, 0, bias, OC * 4));
    wgpt_view vi = {i16, 0, 0}, vt = {it, 0, 0}, vw = {w16, 0, 0}, vb = {bb, 0, 0}, vo = {o32, 0, 0};
    wgpt_view vg32 = {g32, 0, 0}, vgel = {gel, 0, 0}, vc16 = {c16, 0, 0}, vg16 = {g16, 0, 0}, none = {0};
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(G, wgpt_transpose_f16(G, &op, vt, vi, N, C));
    TU_OK(G, wgpt_linear_f16_forward_t(G, &op, vo, vt, vw, vb, N, C, OC, none));
    TU_OK(G, wgpt_linear_f16_forward_t16(G, &op, none, vc16, WGPT_OUT16_COPY, vt, vw, vb, N, C, OC));
    TU_OK(G, wgpt_linear_f16_forward_t16(G, &op, vg32, vg16, WGPT_OUT16_GELU_T, vt, vw, vb, N, C, OC));
    TU_OK(G, wgpt_gelu_forward(G, &op, vgel, vo, no));
    run_(&op);
    float *out = malloc(no * 4), *side = malloc(no * 4), *gl = malloc(no * 4);
    uint16_t *copy = malloc(no * 2), *gt = malloc(no * 2);
    TU_OK(G, wgpt_buf_download(G, o32, 0, out, no * 4));
    TU_OK(G, wgpt_buf_download(G, g32, 0, side, no * 4));
    TU_OK(G, wgpt_buf_download(G, gel, 0, gl, no * 4));
    TU_OK(G, wgpt_buf_download(G, c16, 0, copy, no * 2));
    TU_OK(G, wgpt_buf_download(G, g16, 0, gt, no * 2));
    size_t off_by_one = 0;
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t o = 0; o < OC; o++) {
            size_t i = (size_t)n * OC + o;
            double s = bias[o], a = fabs(bias[o]);
            for (uint32_t c = 0; c < C; c++) s += (double)ri[n * C + c] * rw[o * C + c], a += fabs(ri[n * C + c] * rw[o * C + c]);
            if (!(fabs(out[i] - s) <= (C + 1) * 0x1p-24 * a + 1e-30))
                fail_msg("forward_t %ux%ux%u [%u,%u]: %.9g, want %.9g", N, C, OC, n, o, out[i], s);
            if (memcmp(&side[i], &out[i], 4))
                fail_msg("GELU_T's f32 output %ux%ux%u [%u,%u]: %.9g, forward_t's %.9g", N, C, OC, n, o, side[i], out[i]);
            if (copy[i] != ref_f16_from_f32(out[i]))
                fail_msg("COPY %ux%ux%u [%u,%u]: 0x%04x, f16(%.9g) = 0x%04x", N, C, OC, n, o, copy[i], out[i],
                         ref_f16_from_f32(out[i]));
            uint16_t want = ref_f16_from_f32(gl[i]), got = gt[(size_t)o * N + n];
            if (!halves_within_ulp_(got, want))
                fail_msg("GELU_T %ux%ux%u [%u,%u] (stored at [%u,%u]): 0x%04x, f16(gelu %.9g) = 0x%04x", N, C, OC, n,
                         o, o, n, got, gl[i], want);
            off_by_one += got != want;
        }
    printf("f16 epilogue N=%u C=%u OC=%u: COPY bit for bit, GELU_T %zu of %zu halves one ulp off\n", N, C, OC,
           off_by_one, no);
    gelu_grad_shape_(w16, N, C, OC);
    wgpt_buf_free(i16), wgpt_buf_free(w16), wgpt_buf_free(it), wgpt_buf_free(bb), wgpt_buf_free(o32);
    wgpt_buf_free(g32), wgpt_buf_free(gel), wgpt_buf_free(c16), wgpt_buf_free(g16);
    free(inp), free(w), free(bias), free(ri), free(rw), free(out), free(side), free(gl), free(copy), free(gt);
}

// The f16 epilogue on both blocks, inner and edge blocks alike, and its refusals.
static void f16_epilogue_matches_reference(void **st) {
    (void)st;
    if (!wgpt_linear_f16_uses_sgm(G0)) {
        // the refusals are checked; the epilogues are skipped
        printf("skipped: needs f16 subgroup matrices, real or emulated; '%s' has neither (its refusals passed)\n",
               wgpt_gpu_get_info(G0)->name);
        wgpt_view v = {NULL, 0, 0};
        assert_int_equal(wgpt_linear_f16_forward_t16(G0, NULL, v, v, WGPT_OUT16_COPY, v, v, v, 8, 8, 8), -1);
        wgpt_buf *t = wgpt_buf_create(G0, 4096, "t");
        wgpt_view x = {t, 0, 0};
        wgpt_op op;
        wgpt_op_init(&op);  // refused by name where no subgroup-matrix kernel runs, nothing recorded
        assert_int_equal(wgpt_linear_f16_backward_input_gelu(G0, &op, x, x, x, x, x, 8, 8, 8), -1);
        assert_non_null(strstr(wgpt_gpu_error(G0), "needs the subgroup-matrix kernels"));
        assert_int_equal(op.n, 0);
        wgpt_buf_free(t);
        skip();
    }
    for (int b = WGPT_SGM_BASE; b <= WGPT_SGM_WIDE; b++) {
        wgpt_gpu_options o = {.adapter_index = -1, .sgm_block = (wgpt_sgm_block)b, .kernels = WGPT_KERNELS_GPU,
                              .emulate_sgm = EMU};
        G = tu_gpu_open(&o);
        printf("%s blocks on '%s'\n", b == WGPT_SGM_WIDE ? "128 x 256" : "128 x 128", wgpt_gpu_get_info(G)->name);
        epilogue_shape_(256, 128, 384);  // whole blocks of both (OC 384 = 3 x 128, N 256)
        epilogue_shape_(136, 72, 200);   // edge blocks both ways
        epilogue_shape_(520, 64, 136);
        wgpt_view v = {NULL, 0, 0}, x = {NULL, 0, 0};
        wgpt_buf *t = wgpt_buf_create(G, 4096, "t");
        x.buf = t;
        wgpt_op op;
        wgpt_op_init(&op);
        // COPY takes no f32 output; an unknown kind is refused; shapes as the other passes
        assert_int_equal(wgpt_linear_f16_forward_t16(G, &op, x, x, WGPT_OUT16_COPY, x, x, v, 8, 8, 8), -1);
        assert_non_null(strstr(wgpt_gpu_error(G), "no f32 output"));
        assert_int_equal(wgpt_linear_f16_forward_t16(G, &op, x, x, (wgpt_out16)7, x, x, v, 8, 8, 8), -1);
        assert_int_equal(wgpt_linear_f16_forward_t16(G, &op, v, x, WGPT_OUT16_COPY, x, x, v, 8, 12, 8), -1);
        assert_int_equal(op.n, 0);
        wgpt_op_free(&op);
        wgpt_buf_free(t);
        wgpt_gpu_close(G);
        G = G0;
    }
}

// Runs op a, then op b (the same work fused: one dispatch fewer where the
// bias's GPU path runs on g), and checks that both wrote the same n halves
// (h[0] by a, h[1] by b); `ref` names a's for the message.
static void run_pair_same_halves_(wgpt_gpu *g, wgpt_op *a, wgpt_op *b, wgpt_buf *const h[2], size_t n, uint32_t N,
                                  uint32_t OC, const char *ref) {
    if (!wgpt_gpu_get_info(g)->cpu_kernels && OC % 4 == 0) assert_int_equal(b->n, a->n - 1);
    wgpt_gpu *keep = G;
    G = g;
    run_(a);
    run_(b);
    G = keep;
    wgpt_op_free(a);
    wgpt_op_free(b);
    uint16_t *ha = tu_download(g, h[0], n * 2), *hb = tu_download(g, h[1], n * 2);
    for (size_t i = 0; i < n; i++)
        if (ha[i] != hb[i]) fail_msg("%ux%u on '%s': half %zu is 0x%04x, %s gives 0x%04x", N, OC,
                                     wgpt_gpu_get_info(g)->name, i, hb[i], ref, ha[i]);
    free(ha), free(hb);
}

// wgpt_linear_backward_bias_cast: the bias gradient and the gradient's f16
// copy in one pass (matmul_backward_bias_part_f16 where the bias's GPU path
// runs) give bit for bit what the cast and the bias give one after the other,
// onto the same prior dbias; on the GPU kernels it is one dispatch and the
// reduce (two ops, against the three of cast, part and reduce). On the
// default device and on one that runs the GPU kernels even on a CPU.
static void bias_and_cast_in_one_pass(void **st) {
    (void)st;
    wgpt_gpu_options o = {.adapter_index = -1, .kernels = WGPT_KERNELS_GPU, .emulate_sgm = EMU};
    wgpt_gpu *gk = tu_gpu_open(&o);
    const uint32_t shapes[][2] = {{256, 128}, {300, 136}, {37, 12}, {4096, 64}};
    tu_rng_state = 23;
    for (int d = 0; d < 2; d++) {
        wgpt_gpu *g = d ? gk : G0;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            uint32_t N = shapes[si][0], OC = shapes[si][1];
            size_t n = (size_t)N * OC;
            float *dout = malloc(n * 4), *prior = malloc(OC * 4);
            tu_fill(dout, n, -3, 3), tu_fill(prior, OC, -1, 1);
            dout[n / 2] = 1e6f, dout[n / 3] = -70000.0f;  // past f16's largest: both round to infinity
            wgpt_buf *src = tu_upload_f32(g, dout, n, "dout");
            wgpt_buf *h[2] = {wgpt_buf_create(g, n * 2 + 256, "d16 a"), wgpt_buf_create(g, n * 2 + 256, "d16 b")};
            wgpt_buf *db[2] = {tu_upload_f32(g, prior, OC, "db a"), tu_upload_f32(g, prior, OC, "db b")};
            wgpt_buf *scr = wgpt_buf_create(g, wgpt_linear_bias_scratch_bytes(g, N, OC) + 256, "scratch");
            TU_NONNULL(g, h[0]);
            TU_NONNULL(g, h[1]);
            TU_NONNULL(g, scr);
            wgpt_view vs = {src, 0, 0}, vscr = {scr, 0, 0};
            wgpt_view vh[2] = {{h[0], 0, n * 2}, {h[1], 0, n * 2}}, vdb[2] = {{db[0], 0, 0}, {db[1], 0, 0}};
            wgpt_op a, b;
            wgpt_op_init(&a);
            wgpt_op_init(&b);
            TU_OK(g, wgpt_cast_f16(g, &a, vh[0], vs, n));
            TU_OK(g, wgpt_linear_backward_bias(g, &a, vdb[0], vs, N, OC, vscr));
            TU_OK(g, wgpt_linear_backward_bias_cast(g, &b, vdb[1], vh[1], vs, N, OC, vscr));
            int fused = wgpt_linear_bias_on_gpu(g, N, OC, wgpt_buf_size(scr));
            run_pair_same_halves_(g, &a, &b, h, n, N, OC, "the cast");
            float *da = tu_download_f32(g, db[0], OC), *dbb = tu_download_f32(g, db[1], OC);
            if (memcmp(da, dbb, OC * 4)) fail_msg("%ux%u on '%s': the bias gradients differ", N, OC, wgpt_gpu_get_info(g)->name);
            printf("bias and cast %ux%u on '%s'%s: bit for bit\n", N, OC, wgpt_gpu_get_info(g)->name,
                   fused ? " (one pass)" : " (one after the other)");
            free(da), free(dbb), free(dout), free(prior);
            wgpt_buf_free(src), wgpt_buf_free(h[0]), wgpt_buf_free(h[1]), wgpt_buf_free(db[0]), wgpt_buf_free(db[1]);
            wgpt_buf_free(scr);
        }
    }
    wgpt_gpu_close(gk);
}

// wgpt_linear_backward_bias_gelu_cast: the bias gradient and f16 copy of g =
// GELU'(pre) * dout in one pass (matmul_backward_bias_part_gelu_f16) give the
// halves gelu_backward_f16 gives, bit for bit, and the bias gradient
// matmul_backward_bias gives of its f32 output, to within one f32 rounding a
// term (the product is the same; a compiler may fuse it into the sum's add);
// both against the C reference too: g to within 1e-4 of |g|'s sum (GELU''s
// tanh is the device's, not libm's). On the default device and on one that
// runs the GPU kernels even on a CPU (one dispatch fewer there).
static void bias_gelu_and_cast_in_one_pass(void **st) {
    (void)st;
    wgpt_gpu_options o = {.adapter_index = -1, .kernels = WGPT_KERNELS_GPU, .emulate_sgm = EMU};
    wgpt_gpu *gk = tu_gpu_open(&o);
    const uint32_t shapes[][2] = {{256, 128}, {300, 136}, {4096, 64}};
    tu_rng_state = 29;
    for (int d = 0; d < 2; d++) {
        wgpt_gpu *g = d ? gk : G0;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            uint32_t N = shapes[si][0], OC = shapes[si][1];
            size_t n = (size_t)N * OC;
            float *dout = malloc(n * 4), *pre = malloc(n * 4), *prior = malloc(OC * 4), *ref = calloc(n, 4);
            tu_fill(dout, n, -3, 3), tu_fill(pre, n, -6, 6), tu_fill(prior, OC, -1, 1);
            ref_gelu_backward(ref, pre, dout, n);
            wgpt_buf *bd = tu_upload_f32(g, dout, n, "dout"), *bp = tu_upload_f32(g, pre, n, "pre");
            wgpt_buf *h[2] = {wgpt_buf_create(g, n * 2 + 256, "g16 a"), wgpt_buf_create(g, n * 2 + 256, "g16 b")};
            wgpt_buf *dg[2] = {wgpt_buf_create(g, n * 4, "g a"), wgpt_buf_create(g, n * 4, "g b")};
            wgpt_buf *db[2] = {tu_upload_f32(g, prior, OC, "db a"), tu_upload_f32(g, prior, OC, "db b")};
            wgpt_buf *scr = wgpt_buf_create(g, wgpt_linear_bias_scratch_bytes(g, N, OC) + 256, "scratch");
            TU_NONNULL(g, h[0]);
            TU_NONNULL(g, h[1]);
            TU_NONNULL(g, dg[0]);
            TU_NONNULL(g, dg[1]);
            TU_NONNULL(g, scr);
            wgpt_view vd = {bd, 0, 0}, vp = {bp, 0, 0}, vscr = {scr, 0, 0};
            wgpt_view vh[2] = {{h[0], 0, n * 2}, {h[1], 0, n * 2}}, vdb[2] = {{db[0], 0, 0}, {db[1], 0, 0}};
            wgpt_view vg[2] = {{dg[0], 0, 0}, {dg[1], 0, 0}};
            wgpt_op a, b;
            wgpt_op_init(&a);
            wgpt_op_init(&b);
            TU_OK(g, wgpt_gelu_backward_f16(g, &a, vg[0], vh[0], vp, vd, n));
            TU_OK(g, wgpt_linear_backward_bias(g, &a, vdb[0], vg[0], N, OC, vscr));
            // the one pass leaves dg alone: it gets no buffer there; the
            // other path, without one, is refused naming it
            int fused = wgpt_linear_bias_on_gpu(g, N, OC, wgpt_buf_size(scr));
            assert_int_equal(fused, !wgpt_gpu_get_info(g)->cpu_kernels && OC % 4 == 0);
            wgpt_view none = {0};
            TU_OK(g, wgpt_linear_backward_bias_gelu_cast(g, &b, vdb[1], vh[1], fused ? none : vg[1], vd, vp, N, OC,
                                                         vscr));
            wgpt_op refused;
            wgpt_op_init(&refused);
            assert_int_equal(
                wgpt_linear_backward_bias_gelu_cast(g, &refused, vdb[1], vh[1], none, vd, vp, N, OC, none), -1);
            assert_non_null(strstr(wgpt_gpu_error(g), "dg (the GELU's input gradient)"));
            assert_int_equal(refused.n, 0);
            wgpt_op_free(&refused);
            run_pair_same_halves_(g, &a, &b, h, n, N, OC, "gelu_backward_f16");
            float *da = tu_download_f32(g, db[0], OC), *dbb = tu_download_f32(g, db[1], OC);
            double worst = 0, worst_ref = 0;
            for (uint32_t c = 0; c < OC; c++) {
                double sum = prior[c], mag = fabs(prior[c]);
                for (uint32_t r = 0; r < N; r++) sum += ref[(size_t)r * OC + c], mag += fabs(ref[(size_t)r * OC + c]);
                double e = fabs((double)dbb[c] - da[c]) / (mag * 0x1p-23 + 1e-30);
                double er = fabs((double)dbb[c] - sum) / (mag * 1e-4);
                if (e > 1.0) fail_msg("%ux%u on '%s': dbias[%u] %.9g, the two passes give %.9g", N, OC,
                                      wgpt_gpu_get_info(g)->name, c, dbb[c], da[c]);
                if (er > 1.0) fail_msg("%ux%u on '%s': dbias[%u] %.9g, the C reference %.9g", N, OC,
                                       wgpt_gpu_get_info(g)->name, c, dbb[c], sum);
                if (e > worst) worst = e;
                if (er > worst_ref) worst_ref = er;
            }
            printf("bias and cast of GELU' x dout %ux%u on '%s'%s: halves bit for bit; bias %.3g of one rounding "
                   "a term from the two passes, %.3g of the bound from C\n", N, OC, wgpt_gpu_get_info(g)->name,
                   fused ? " (one pass)" : " (one after the other)", worst, worst_ref);
            free(da), free(dbb), free(dout), free(pre), free(prior), free(ref);
            wgpt_buf_free(bd), wgpt_buf_free(bp), wgpt_buf_free(h[0]), wgpt_buf_free(h[1]);
            wgpt_buf_free(dg[0]), wgpt_buf_free(dg[1]), wgpt_buf_free(db[0]), wgpt_buf_free(db[1]), wgpt_buf_free(scr);
        }
    }
    wgpt_gpu_close(gk);
}

// The block and split choice (wgpt_linear_f16_plan) on a made-up H200: 132
// compute units, 16 x 8 x 16 fragments in subgroups of 32, 1024 invocations
// a workgroup. At GPT-2 124M's shapes (4 x 1024 tokens) the wide block takes
// the passes whose outputs fill the units, the 128 x 128 one the weight
// passes of few blocks, and stream-K the weight passes that split k and
// leave a quarter of the units idle or more (fc's, fcproj's and attproj's:
// the choices measured fastest on an H100 and H200); forced blocks, split counts and
// stream-K, a device without 16 subgroups a workgroup, scratch too small for
// partials and CPU kernels are followed.
static void block_and_split_choice(void **st) {
    (void)st;
    wgpt_gpu_info h = {0};
    h.has_subgroup_matrix = 1, h.n_matrix_configs = 1, h.sgm_config = 0;
    h.matrix_configs[0] = (wgpt_matrix_config){WGPT_MATRIX_F16, WGPT_MATRIX_F32, 16, 8, 16, 32, 32};
    h.compute_units = 132, h.max_invocations = 1024, h.max_workgroup_storage = 49152;
    h.max_storage_binding = 2147483648u;
    // sk: stream-K's stages a workgroup (0: none), in `slots` partials
    const struct { uint32_t m, n, k; int wide; uint32_t s, ks, sk, slots; const char *what; } want[] = {
        {2304, 4096, 768, 0, 1, 0, 0, 0, "qkv forward (stored transposed)"},
        {4096, 768, 2304, 1, 1, 0, 0, 0, "qkv input pass"},
        {768, 2304, 4096, 1, 2, 2048, 0, 0, "qkv weight pass"},
        {768, 4096, 768, 1, 1, 0, 0, 0, "attproj forward"},
        {768, 768, 4096, 0, 2, 2048, 0, 0, "attproj weight pass"},  // streamed, 8 workgroups would share a block
        {768, 3072, 4096, 1, 1, 0, 70, 3, "fc weight pass"},      // 72 x 128
        {3072, 768, 4096, 1, 1, 0, 70, 3, "fcproj weight pass"},
        {4096, 768, 3072, 1, 1, 0, 0, 0, "fc input pass"},
        {4096, 768, 50304, 1, 4, 12576, 0, 0, "logits input pass"},
        {768, 50304, 4096, 1, 1, 0, 0, 0, "logits weight pass"},
        {4096, 4096, 4096, 1, 1, 0, 0, 0, "4096^3"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        wgpt_sgm_plan p = wgpt_linear_f16_plan(&h, want[i].m, want[i].n, want[i].k, UINT64_MAX);
        printf("%-32s %5u x %5u x %5u: %s, %u part(s) of %u, stream-K %u stages a workgroup (%u partials)\n",
               want[i].what, want[i].m, want[i].n, want[i].k, p.wide ? "128 x 256" : "128 x 128", p.s,
               p.ks ? p.ks : want[i].k, p.sk, p.slots);
        if (p.wide != want[i].wide || p.s != want[i].s || p.ks != want[i].ks || p.sk != want[i].sk ||
            p.slots != want[i].slots || (p.sk && p.wgs != (want[i].m / 128 * (want[i].n / 256) * (want[i].k / 32) +
                                                           p.sk - 1) / p.sk))
            fail_msg("%s: wide %d, %u parts of %u, stream-K %u (%u); want wide %d, %u parts of %u, stream-K %u (%u)",
                     want[i].what, p.wide, p.s, p.ks, p.sk, p.slots, want[i].wide, want[i].s, want[i].ks, want[i].sk,
                     want[i].slots);
    }
    // stream-K never: fc's weight pass split in 2; always: the qkv forward too
    h.streamk = WGPT_STREAMK_OFF;
    wgpt_sgm_plan p = wgpt_linear_f16_plan(&h, 768, 3072, 4096, UINT64_MAX);
    assert_int_equal(p.s, 2), assert_int_equal(p.sk, 0);
    h.streamk = WGPT_STREAMK_ON;
    assert_true(wgpt_linear_f16_plan(&h, 2304, 4096, 768, UINT64_MAX).sk > 0);
    p = wgpt_linear_f16_plan(&h, 768, 768, 4096, UINT64_MAX);  // attproj's weight pass: 18 blocks x 128 stages of 32
    assert_int_equal(p.wide, 1), assert_int_equal(p.sk, 18), assert_int_equal(p.slots, 8);
    h.streamk = WGPT_STREAMK_AUTO;
    // room (then a binding) for 2 partials, not the wide block's 3: the 128 x 128 block's stream-K in 2
    p = wgpt_linear_f16_plan(&h, 768, 3072, 4096, 2ull * 768 * 3072 * 4);
    assert_int_equal(p.wide, 0), assert_true(p.sk > 0), assert_int_equal(p.slots, 2);
    h.max_storage_binding = 2ull * 768 * 3072 * 4;
    p = wgpt_linear_f16_plan(&h, 768, 3072, 4096, UINT64_MAX);
    assert_int_equal(p.wide, 0), assert_true(p.sk > 0), assert_int_equal(p.slots, 2);
    // room for 1 partial: the split plan's parts do not fit either
    p = wgpt_linear_f16_plan(&h, 768, 3072, 4096, 768ull * 3072 * 4);
    assert_int_equal(p.s, 1), assert_int_equal(p.sk, 0);
    h.max_storage_binding = 2147483648u;
    // partials that do not fit: no split, and then the 128 x 128 block has more workgroups
    p = wgpt_linear_f16_plan(&h, 768, 2304, 4096, 0);
    assert_int_equal(p.wide, 0), assert_int_equal(p.s, 1), assert_int_equal(p.ks, 0);
    // forced blocks
    h.sgm_block = WGPT_SGM_BASE;
    assert_int_equal(wgpt_linear_f16_plan(&h, 4096, 4096, 4096, UINT64_MAX).wide, 0);
    h.sgm_block = WGPT_SGM_WIDE;
    assert_int_equal(wgpt_linear_f16_plan(&h, 768, 768, 4096, UINT64_MAX).wide, 1);
    h.max_invocations = 256;  // 16 subgroups of 32 do not fit a workgroup: never the wide block
    assert_int_equal(wgpt_linear_f16_plan(&h, 4096, 4096, 4096, UINT64_MAX).wide, 0);
    h.max_invocations = 1024;
    // 32 KiB of workgroup memory: the wide block's twin has stages of 16, which a K of 32 does not divide
    h.max_workgroup_storage = 32768;
    assert_int_equal(wgpt_linear_f16_plan(&h, 768, 768, 4096, UINT64_MAX).wide, 1);
    h.matrix_configs[0].k = 32;
    assert_int_equal(wgpt_linear_f16_plan(&h, 768, 768, 4096, UINT64_MAX).wide, 0);
    h.matrix_configs[0].k = 16, h.max_workgroup_storage = 49152, h.sgm_block = WGPT_SGM_AUTO;
    // a forced split count: 3 parts of whole 64-deep stages, no stream-K
    h.matmul_splits = 3;
    p = wgpt_linear_f16_plan(&h, 768, 768, 4096, UINT64_MAX);
    assert_int_equal(p.wide, 0), assert_int_equal(p.s, 3), assert_int_equal(p.ks, 1408), assert_int_equal(p.sk, 0);
    h.matmul_splits = 0;
    h.cpu_kernels = 1;
    p = wgpt_linear_f16_plan(&h, 4096, 4096, 4096, UINT64_MAX);
    assert_int_equal(p.wide, 0), assert_int_equal(p.s, 1);
}

// The fragment configuration the engine compiles these kernels for, from
// made-up adapters' lists: the H200's (16 x 8 x 16 among others of other
// types, subgroups of 32), an AMD-like 16 x 16 x 16 in waves of 64, a K of 24
// (stages of 32 would cut its fragments) and an M of 8 (not taken), and the
// subgroup size that must be the adapter's one.
static void fragment_choice(void **st) {
    (void)st;
    char err[256];
    unsetenv("WGPT_SGM_CONFIG");  // the choice itself, not an override
    wgpt_gpu_info h = {0};
    h.subgroup_min = h.subgroup_max = 32;
    const wgpt_matrix_config h200[] = {
        {WGPT_MATRIX_F16, WGPT_MATRIX_F16, 16, 8, 16, 32, 32}, {WGPT_MATRIX_F16, WGPT_MATRIX_F32, 16, 8, 16, 32, 32},
        {WGPT_MATRIX_U8, WGPT_MATRIX_U32, 16, 8, 32, 32, 32}, {WGPT_MATRIX_F16, WGPT_MATRIX_F32, 16, 16, 16, 32, 32},
    };
    h.n_matrix_configs = 4;
    memcpy(h.matrix_configs, h200, sizeof h200);
    assert_int_equal(wgpt_sgm_pick_config_(&h, err, sizeof err), 0);
    assert_int_equal(h.sgm_config, 1);  // the smaller fragment of the largest K
    h.n_matrix_configs = 2;
    h.matrix_configs[0] = (wgpt_matrix_config){WGPT_MATRIX_F16, WGPT_MATRIX_F32, 16, 8, 24, 32, 32};
    h.matrix_configs[1] = (wgpt_matrix_config){WGPT_MATRIX_F16, WGPT_MATRIX_F32, 16, 16, 16, 32, 32};
    assert_int_equal(wgpt_sgm_pick_config_(&h, err, sizeof err), 0);
    assert_int_equal(h.sgm_config, 1);  // K 24 is skipped
    h.n_matrix_configs = 1;
    h.matrix_configs[0] = (wgpt_matrix_config){WGPT_MATRIX_F16, WGPT_MATRIX_F32, 8, 8, 8, 32, 32};
    assert_int_equal(wgpt_sgm_pick_config_(&h, err, sizeof err), 0);
    assert_int_equal(h.sgm_config, -1);  // M 8: the plain f16 kernels
    h.subgroup_min = h.subgroup_max = 64;
    h.matrix_configs[0] = (wgpt_matrix_config){WGPT_MATRIX_F16, WGPT_MATRIX_F32, 16, 16, 16, 64, 64};
    assert_int_equal(wgpt_sgm_pick_config_(&h, err, sizeof err), 0);
    assert_int_equal(h.sgm_config, 0);
    h.subgroup_min = 32;  // an adapter of several subgroup sizes: none fixed
    assert_int_equal(wgpt_sgm_pick_config_(&h, err, sizeof err), 0);
    assert_int_equal(h.sgm_config, -1);
}

// The kernels refuse shapes they cannot take, naming the shape.
static void refuses_bad_shapes(void **st) {
    (void)st;
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_buf *b = wgpt_buf_create(G, 1 << 20, "x");
    wgpt_view v = {b, 0, 0}, none = {0};
    assert_int_equal(wgpt_linear_f16_forward(G, &op, v, v, v, none, 12, 8, 8, v, none), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "N=12"));
    assert_int_equal(wgpt_linear_f16_backward_weight(G, &op, v, v, v, 8, 8, 1 << 20, none, none), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "dweight"));
    // a transposed input where the shape does not run on subgroup matrices
    // (every shape on a device without them; 8 x 8 outputs, under a fragment, on the H200)
    assert_int_equal(wgpt_linear_f16_forward_t(G, &op, v, v, v, none, 8, 8, 8, none), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "a transposed input needs the subgroup-matrix kernels"));
    assert_int_equal(wgpt_linear_f16_backward_weight_t(G, &op, v, v, v, 8, 8, 8, none), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "N=8, C=8, OC=8"));
    wgpt_buf_free(b);
    wgpt_op_free(&op);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transposes_are_exact),
        cmocka_unit_test(layernorm_f16_transpose_is_exact),
        cmocka_unit_test(accumulate_adds_after_the_sum),
        cmocka_unit_test(wide_block_accumulates_in_order),
        cmocka_unit_test(persistent_blocks_plan_accumulate_and_epilogues),
        cmocka_unit_test(streamk_plan_and_accumulate),
        cmocka_unit_test(f16_epilogue_matches_reference),
        cmocka_unit_test(bias_and_cast_in_one_pass),
        cmocka_unit_test(bias_gelu_and_cast_in_one_pass),
        cmocka_unit_test(block_and_split_choice),
        cmocka_unit_test(fragment_choice),
        cmocka_unit_test(refuses_bad_shapes),
    };
    // WGPT_TEST_FILTER=NAME (cmocka's pattern, * and ?): those cases alone (the
    // emulated tensor cores make the whole program minutes long on lavapipe)
    const char *only = getenv("WGPT_TEST_FILTER");
    if (only && *only) cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
