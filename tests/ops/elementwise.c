// elementwise.c: the element-wise family of the op registry
// (tests/ops/ops.h): kernels/05_gelu.wgsl and 05_residual.wgsl through
// src/model/elementwise.h against tests/ref (ref_gelu_*, ref_residual_forward):
// sizes around the workgroup edges and (B,T,4C) for B=2, T=37, C=48; dinp
// overwritten, not accumulated (outputs start as garbage); views with
// offsets, whose buffer tails must stay untouched; flat ranges split over
// bindings (a device with a 64 KiB binding limit); the 2D grid past 65535
// workgroups. Sizes that are multiples of 4 run the vec4 twins, the others
// the scalar kernels (the wrapper picks). tests/test_gelu_residual.c keeps
// the special cases (inputs past the tanh clamp, the kernels' own bounds
// checks, the f16 outputs).
//
// Tolerance. residual_forward is one f32 add per element, as in C: exact.
// GELU: the kernels' tanh is 1 - 2 / (e^2u + 1) (00_shared.wgsl's gelu_tanh),
// one exp; the bound is the looser one of WGSL's own tanh, only as accurate
// as sinh/cosh built from exp, whose
// error is (3 + 2|u|) ulp; over two exps for |u| <= 10 that is at most
// E = 2 * 23 * 2^-24 = 2.7e-6 absolute on tanh. The forward 0.5 x (1 + tanh)
// turns it into 0.5 |x| E (|x| <= 6 for the random inputs: 8.2e-6); the
// backward 0.5 (1 + th) + 0.5 x (1 - th^2) u' into (0.5 + |x| u') E with
// u' = K (1 + 3 A x^2) <= 4.7 (|x| <= 6): 7.8e-5 * |dout| (|dout| <= 1). Past
// the clamp (|u| = 10) both are exact: tanh is +-1 in f32 there. rtol 16 ulp
// covers the few f32 products around tanh.
#include "ops/elementwise.h"

#include "model/elementwise.h"
#include "ops/ops.h"
#include "ref/gpt2_ref.h"
#include "test_util.h"

static const float TANH_E = 2.0f * 23.0f * 5.9604645e-8f;
static const float X_MAX = 6.0f;  // random inputs in [-X_MAX, X_MAX)
static const float RTOL = 16 * 5.9604645e-8f;

static float *alloc_(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

// A buffer holding x (n floats) at byte offset `off`, zeros before it and a
// sentinel float after it; the view covers exactly x.
wgpt_view ew_place(wgpt_gpu *g, const float *x, size_t n, uint64_t off, const char *label) {
    wgpt_buf *b = wgpt_buf_create(g, off + (n + 1) * 4, label);
    TU_NONNULL(g, b);
    TU_OK(g, wgpt_buf_upload(g, b, off, x, n * 4));
    TU_OK(g, wgpt_buf_upload(g, b, off + n * 4, &(float){EW_SENTINEL}, 4));
    return (wgpt_view){b, off, n * 4};
}

// Downloads what the view covers and checks that the sentinel after it survived.
float *ew_fetch(wgpt_gpu *g, wgpt_view v, size_t n, const char *what) {
    float *h = alloc_(n + 1);
    TU_OK(g, wgpt_buf_download(g, v.buf, v.offset, h, (n + 1) * 4));
    if (h[n] != EW_SENTINEL) fail_msg("%s: wrote past the end of its %zu floats", what, n);
    return h;
}

// Runs one op kind over n floats: x (and y) as inputs, the output prefilled
// with `prefill`; every view at byte offset `off`. Returns the output.
float *ew_run(wgpt_gpu *g, int kind, const float *x, const float *y, float prefill, size_t n, uint64_t off) {
    float *init = alloc_(n);
    for (size_t i = 0; i < n; i++) init[i] = prefill;
    wgpt_view out = ew_place(g, init, n, off, "out"), vx = ew_place(g, x, n, off, "x"), vy = {NULL, 0, 0};
    if (y) vy = ew_place(g, y, n, off, "y");
    wgpt_op op;
    wgpt_op_init(&op);
    if (kind == EW_GELU_FWD) TU_OK(g, wgpt_gelu_forward(g, &op, out, vx, n));
    if (kind == EW_GELU_BWD) TU_OK(g, wgpt_gelu_backward(g, &op, out, vx, vy, n));
    if (kind == EW_RESIDUAL) TU_OK(g, wgpt_residual_forward(g, &op, out, vx, vy, n));
    TU_OK(g, wgpt_op_record(g, &op));
    float *got = ew_fetch(g, out, n, kind == EW_RESIDUAL ? "residual_forward" : "gelu");
    wgpt_op_free(&op);
    wgpt_buf_free(out.buf), wgpt_buf_free(vx.buf), wgpt_buf_free(vy.buf);
    free(init);
    return got;
}

// The references, with the GELU backward's += turned into = (from zero).
void ew_ref(int kind, float *want, const float *x, const float *y, size_t n) {
    if (kind == EW_GELU_FWD) ref_gelu_forward(want, x, n);
    if (kind == EW_GELU_BWD) {
        memset(want, 0, n * sizeof *want);
        ref_gelu_backward(want, x, y, n);
    }
    if (kind == EW_RESIDUAL) ref_residual_forward(want, x, y, n);
}

static void check_(wgpt_gpu *g, const op_variant *v, const op_shape *s) {
    const int kind = v->arg;
    const size_t n = s->d[0];
    const uint64_t off = s->d[1];
    tu_rng_state = 0x9E3779B97F4A7C15ull;
    float *x = alloc_(n), *y = alloc_(n), *want = alloc_(n);
    tu_fill(x, n, -X_MAX, X_MAX);
    tu_fill(y, n, -1.0f, 1.0f);
    ew_ref(kind, want, x, y, n);
    // Prefill the output with garbage: every kernel here overwrites.
    float *got = ew_run(g, kind, x, kind == EW_GELU_FWD ? NULL : y, 1e30f, n, off);
    char what[96];
    snprintf(what, sizeof what, "%s n=%zu offset=%llu",
             kind == EW_GELU_FWD ? "gelu_forward" : kind == EW_GELU_BWD ? "gelu_backward" : "residual_forward", n,
             (unsigned long long)off);
    if (kind == EW_RESIDUAL) tu_assert_close(what, got, want, n, 0, 0);
    if (kind == EW_GELU_FWD) tu_assert_close(what, got, want, n, 0.5f * X_MAX * TANH_E, RTOL);
    if (kind == EW_GELU_BWD) {
        float du = 0.7978845608f * (1.0f + 3.0f * 0.044715f * X_MAX * X_MAX);
        tu_assert_close(what, got, want, n, (0.5f + X_MAX * du) * TANH_E, RTOL);
    }
    free(x), free(y), free(want), free(got);
}

static const op_variant variants_[] = {
    {.name = "gelu-forward", .kernels = WGPT_KERNELS_AUTO, .arg = EW_GELU_FWD},
    {.name = "gelu-backward", .kernels = WGPT_KERNELS_AUTO, .arg = EW_GELU_BWD},
    {.name = "residual-forward", .kernels = WGPT_KERNELS_AUTO, .arg = EW_RESIDUAL},
};
#define GF_ (1u << 0)
#define GB_ (1u << 1)
#define RF_ (1u << 2)

// (n, byte offset of every view). Around a workgroup's 256 threads, (B,T,4C)
// for B=2, T=37, C=48, a prime past 100,000; views 256 bytes into their
// buffers; 64 KiB bindings: 50,000 floats in chunks of 16,384 (the last
// partial), each chunk offset from the caller's own offset; past 65535
// workgroups of 256 (the 2D grid, every element checked).
static const op_shape shapes_[] = {
    {{1, 0}, 0, 0},
    {{7, 0}, 0, 0},
    {{255, 0}, 0, 0},
    {{256, 0}, 0, 0},
    {{257, 0}, 0, 0},
    {{2 * 37 * 4 * 48, 0}, 0, 0},
    {{100003, 0}, 0, 0},
    {{1000, 256}, 0, 0},
    {{50000, 0}, 64 * 1024, 0},
    {{50000, 512}, 64 * 1024, 0},
    {{65535u * 256u + 777u, 0}, 0, GF_ | RF_},
};

const op_family op_gelu_residual = {
    .name = "elementwise",
    .wrappers = "wgpt_gelu_forward, wgpt_gelu_backward, wgpt_residual_forward (model/elementwise.h)",
    .reference = "ref_gelu_forward, ref_gelu_backward, ref_residual_forward (tests/ref/layers.c)",
    .tolerance = "residual exact; GELU 0.5 |x| E forward, (0.5 + |x| u') E backward, E = 46 ulp of tanh; rtol 16 ulp",
    .variants = variants_,
    .nvariants = OP_COUNT(variants_),
    .shapes = shapes_,
    .nshapes = OP_COUNT(shapes_),
    .check = check_,
};
