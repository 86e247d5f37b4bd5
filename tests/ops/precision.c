// precision.c: the precision family of the op registry (tests/ops/ops.h):
// the f32 -> f16 cast (08_precision.wgsl's cast_f16 through
// src/model/precision.h) against tests/ref's ref_f16_from_f32, bit for bit:
// the default kernels and the GPU ones (on lavapipe the CPU twin is the
// default: one pair a thread; GPUs take cast_f16_vec4 for n % 8 == 0), at n a
// multiple of 8 (the vec4 kernel, several workgroups: 40,000 steps of 8 over
// 512 a workgroup) and n % 8 == 6 (the pair kernel everywhere). Tolerance:
// none (a driver that flushes f16 subnormals to zero is reported as such).
// tests/test_linear_f16.c keeps the transposes (exact, special layouts).
#include "model/precision.h"
#include "model/variant.h"
#include "ops/linear_f16.h"
#include "ops/ops.h"
#include "ref/gpt2_ref.h"
#include "test_util.h"

// Every rounding case of f32 -> f16 against the reference, bit for bit: ties to
// even, the largest finite values and what rounds past them, infinities, NaN,
// subnormals (a driver that flushes f16 subnormals to zero is reported as such).
// n elements, on G, whose kernels pick the variant.
static void cast_rounds_as_ieee_(wgpt_gpu *G, int n) {
    enum { NS = 32 };
    float *x = malloc((size_t)n * sizeof *x);
    uint16_t *got = malloc((size_t)n * sizeof *got);
    const float special[NS] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, -65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e6f,
                               INFINITY, -INFINITY, NAN, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 1.0f + 1.0f / 4096,
                               6.103515625e-05f, 6.0e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.98e-08f, 1e-9f,
                               3.14159265f, -2.71828f, 0.1f, 1000.1f, 0.33333334f, 1234.5677f, 2048.5f, 2049.5f,
                               -3e-6f, 7e-7f};
    memcpy(x, special, sizeof special);
    tu_rng_state = 42;
    for (int i = NS; i < n; i++) x[i] = tu_randf(-1, 1) * powf(2.0f, tu_randf(-20, 17));
    for (int i = 0; i < NS; i++) x[n - 1 - i] = special[i];  // the last vec4s too
    uint32_t last_cast_groups_ = 0;
    wgpt_buf *b = lf16_of_groups(G, x, (uint64_t)n, "cast", &last_cast_groups_);
    // the variant by its grid: 8 x 2 elements a thread (vec4) or 2
    int vec4 = !wgpt_kernel_variant_cpu(G) && n % 8 == 0;
    assert_int_equal(last_cast_groups_, vec4 ? (n / 8 + 511) / 512 : (n / 2 + 255) / 256);
    TU_OK(G, wgpt_buf_download(G, b, 0, got, (uint64_t)n * 2));
    int flushed = 0;
    for (int i = 0; i < n; i++) {
        uint16_t want = ref_f16_from_f32(x[i]);
        if (got[i] == want) continue;
        if ((want & 0x7c00u) == 0 && (got[i] & 0x7fffu) == 0) {  // a subnormal flushed to zero
            flushed++;
            continue;
        }
        fail_msg("cast of %d (element %d): f16(%.9g) = 0x%04x, IEEE gives 0x%04x", n, i, x[i], got[i], want);
    }
    printf("cast of %d on '%s': %d values bit-exact, %d f16 subnormals flushed to zero by the driver\n", n,
           wgpt_gpu_get_info(G)->name, n - flushed, flushed);
    wgpt_buf_free(b);
    free(x), free(got);
}

static void check_(wgpt_gpu *g, const op_variant *v, const op_shape *s) {
    (void)v;
    cast_rounds_as_ieee_(g, (int)s->d[0]);
}

static const op_variant variants_[] = {
    {.name = "cast-f16", .kernels = WGPT_KERNELS_AUTO},
    {.name = "cast-f16-gpu", .kernels = WGPT_KERNELS_GPU},
};

static const op_shape shapes_[] = {{{4128}, 0, 0}, {{4126}, 0, 0}, {{320000}, 0, 0}};

const op_family op_precision = {
    .name = "precision",
    .wrappers = "wgpt_cast_f16 (model/precision.h)",
    .reference = "ref_f16_from_f32 (tests/ref/f16.c)",
    .tolerance = "bit for bit (round to nearest even; f16 subnormals flushed to zero by a driver are reported)",
    .variants = variants_,
    .nvariants = OP_COUNT(variants_),
    .shapes = shapes_,
    .nshapes = OP_COUNT(shapes_),
    .check = check_,
};
