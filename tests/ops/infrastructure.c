// infrastructure.c: the infrastructure family of the op registry
// (tests/ops/ops.h): the flat glue kernels of 00_infrastructure.wgsl through
// the model layer's wgpt_infra_add (model/elementwise.h), which picks the
// vec4 twin where n % 4 == 0 and the views sit on 16 bytes, the scalar
// kernel elsewhere, against plain C, at multiples of 4 and not. Every buffer
// is one element longer than n, with a sentinel there that no kernel may
// touch. tests/test_infrastructure.c binds each twin directly.
//
// Tolerance: fill and copy must be exact. scale and axpy do one f32 multiply
// (and one add) per element, exactly as the C reference; only a fused
// multiply-add on the device can differ, by at most one rounding: 1 ulp of the
// result, so rtol 2^-23 * 2 plus a tiny atol for results near zero.
#include "model/elementwise.h"
#include "ops/ops.h"
#include "test_util.h"

static const float RTOL = 2.4e-7f, ATOL = 1e-30f;
static const float SENTINEL = 12345.5f;

static void ref_(int kind, float *d, const float *s, size_t n, float c) {
    for (size_t i = 0; i < n; i++) switch (kind) {
        case 0: d[i] = 0.0f; break;
        case 1: d[i] = c; break;
        case 2: d[i] = c * d[i]; break;
        case 3: d[i] = d[i] + c * s[i]; break;
        default: d[i] = s[i]; break;
        }
}

static const char *const NAMES[] = {"fill_zero", "fill_const", "scale", "axpy", "copy"};
static const float CONSTS[] = {0.0f, -0.625f, 0.37f, -1.73f, 0.0f};

// n elements of kind (v->arg: NAMES) through wgpt_infra_add, dst (and src
// for axpy and copy) uploaded, against ref_.
static void check_(wgpt_gpu *g, const op_variant *v, const op_shape *s) {
    tu_rng_state = 0x9E3779B97F4A7C15ull;
    const int kind = v->arg, with_src = kind >= 3;
    const uint32_t n = s->d[0];
    const float c = CONSTS[kind];
    float *dst = malloc(((size_t)n + 1) * sizeof *dst), *src = malloc((size_t)n * sizeof *src);
    float *want = malloc((size_t)n * sizeof *want);
    assert_true(dst && src && want);
    tu_fill(dst, n, -3.0f, 3.0f);
    tu_fill(src, n, -3.0f, 3.0f);
    memcpy(want, dst, (size_t)n * sizeof *want);
    ref_(kind, want, src, n, c);
    dst[n] = SENTINEL;
    wgpt_buf *bd = tu_upload_f32(g, dst, (uint64_t)n + 1, "dst"), *bs = NULL;
    wgpt_view views[2] = {{bd, 0, (uint64_t)n * 4}, {NULL, 0, 0}};
    if (with_src) bs = tu_upload_f32(g, src, n, "src"), views[1] = (wgpt_view){bs, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(g, wgpt_infra_add(g, &op, NAMES[kind], views, with_src ? 2 : 1, n, c));
    TU_OK(g, wgpt_op_record(g, &op));
    wgpt_op_free(&op);
    TU_OK(g, wgpt_buf_download(g, bd, 0, dst, ((uint64_t)n + 1) * 4));
    if (dst[n] != SENTINEL) fail_msg("%s with n=%u wrote past the end", NAMES[kind], n);
    char what[64];
    snprintf(what, sizeof what, "%s (wgpt_infra_add) n=%u", NAMES[kind], n);
    int exact = kind != 2 && kind != 3;
    tu_assert_close(what, dst, want, n, exact ? 0 : kind == 3 ? 1e-6f : ATOL, exact ? 0 : RTOL);
    wgpt_buf_free(bd), wgpt_buf_free(bs);
    free(dst), free(src), free(want);
}

static const op_variant variants_[] = {
    {.name = "fill_zero", .kernels = WGPT_KERNELS_AUTO},
    {.name = "fill_const", .kernels = WGPT_KERNELS_AUTO, .arg = 1},
    {.name = "scale", .kernels = WGPT_KERNELS_AUTO, .arg = 2},
    {.name = "axpy", .kernels = WGPT_KERNELS_AUTO, .arg = 3},
    {.name = "copy", .kernels = WGPT_KERNELS_AUTO, .arg = 4},
};

// (n): multiples of 4 and not, around a vec4 workgroup's 4096 floats and a
// scalar one's 256.
static const op_shape shapes_[] = {
    {{3}, 0, 0}, {{4}, 0, 0}, {{1027}, 0, 0}, {{4100}, 0, 0}, {{65539}, 0, 0},
};

const op_family op_infrastructure = {
    .name = "infrastructure",
    .wrappers = "wgpt_infra_add: fill_zero, fill_const, scale, axpy, copy (model/elementwise.h)",
    .reference = "plain C in tests/ops/infrastructure.c (one f32 operation per element)",
    .tolerance = "fill and copy exact; scale and axpy 1 ulp (a fused multiply-add's one rounding)",
    .variants = variants_,
    .nvariants = OP_COUNT(variants_),
    .shapes = shapes_,
    .nshapes = OP_COUNT(shapes_),
    .check = check_,
};
