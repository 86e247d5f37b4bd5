// checks.c: the kernels in the browser against the plain C reference
// (tests/ref, compiled to WebAssembly with them: make web builds
// build-web/wgpt_checks.wasm). tests/browser/kernels.test.mjs runs it in
// headless chromium, where the adapter is SwiftShader (subgroups of 4, no
// shader-f16): every kernel family runs there in fp32, the KV-cache decoder's too.
//
// The shape is tests/test_gpt2.c's, whose sizes are multiples of no tile size:
// L=2, NH=3, C=48 (head size 16), T=37 < maxT=40, V=97 padded to 128, B=2.
// Each family is checked through the model, by the tensors whose forward or
// gradient only it computes, with test_gpt2.c's tolerances (reasoned there):
// loss within 2e-5 relative; each gradient tensor within 2e-4 relative L2 and
// every element within 1e-3 * max|ref| + 1e-7; three AdamW steps with clipping:
// losses 1e-4, norms 1e-3, parameters 1e-3 relative L2 / 1e-2 * max|ref|.
//
// Usage: checks [FAMILY...] (none: all). Prints "check NAME: ok: ...",
// "check NAME: skip: why" (the adapter cannot run it) or "check NAME: FAIL:
// why" per check, and exits with the number that failed. WGPT_KERNELS=gpu
// picks the GPU kernels where the device would take the CPU twins.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/gpu_env.h"
#include "gpu/gpu.h"
#include "model/gpt2.h"
#include "model/gpt2_decode.h"
#include "ref/gpt2_ref.h"

static const wgpt_gpt2_config CFG = {.max_seq_len = 40, .vocab_size = 97, .padded_vocab_size = 128,
                                     .num_layers = 2, .num_heads = 3, .channels = 48};
static const ref_gpt2_config RCFG = {40, 97, 128, 2, 3, 48};
enum { B = 2, T = 37 };
static int tokens[B * T], targets[B * T];
static wgpt_gpu *G;
static char why[1024];

#define FAIL(...) (snprintf(why, sizeof why, __VA_ARGS__), -1)

static wgpt_gpt2 *model_(ref_gpt2 *ref, uint64_t seed) {
    if (ref_gpt2_init(ref, &RCFG, B, T) != 0) return FAIL("reference: out of memory"), NULL;
    ref_gpt2_init_params(ref, seed);
    char err[2048];
    wgpt_gpt2 *m = wgpt_gpt2_create(G, &CFG, B, T, err, sizeof err);
    if (!m) return FAIL("model: %s", err), NULL;
    if (wgpt_gpt2_set_params(m, ref->params) < 0) {
        FAIL("%s", wgpt_gpt2_error(m));
        wgpt_gpt2_free(m);
        return NULL;
    }
    return m;
}

// Tensor t of got against want: relative L2 and per-element bounds.
static int compare_(const char *what, int t, const float *got, const float *want, const ref_gpt2 *ref, double rel_l2,
                    double rel_max) {
    size_t off = (size_t)(ref->param_ptr[t] - ref->params), n = ref->param_sizes[t];
    double d2 = 0, r2 = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[off + i] - want[off + i];
        d2 += d * d;
        r2 += (double)want[off + i] * want[off + i];
        if (fabs(want[off + i]) > mx) mx = fabs(want[off + i]);
    }
    double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    if (!(rel <= rel_l2)) return FAIL("%s %s: relative L2 error %.3g > %.3g", what, ref_gpt2_param_names[t], rel, rel_l2);
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[off + i] - want[off + i]) <= rel_max * mx + 1e-7))
            return FAIL("%s %s[%zu]: %.9g, expected %.9g (max|ref| %.3g)", what, ref_gpt2_param_names[t], i,
                        got[off + i], want[off + i], mx);
    return 0;
}

// Families and the gradient tensors that depend on each (test_gpt2.c's layout).
typedef struct family {
    const char *name, *kernels;
    int tensors[6];
    int n;
} family;
static const family FAMILIES[] = {
    {"embedding", "01_embedding.wgsl", {REF_WTE, REF_WPE}, 2},
    {"layernorm", "02_layernorm.wgsl", {REF_LN1W, REF_LN1B, REF_LN2W, REF_LN2B, REF_LNFW, REF_LNFB}, 6},
    {"linear", "03_linear*.wgsl", {REF_QKVW, REF_QKVB, REF_ATTPROJW, REF_ATTPROJB, REF_FCPROJW, REF_FCPROJB}, 6},
    {"attention", "04_attention.wgsl", {REF_QKVW, REF_QKVB}, 2},
    {"gelu_residual", "05_gelu.wgsl, 05_residual.wgsl", {REF_FCW, REF_FCB, REF_LN2W}, 3},
    {"cross_entropy", "06_cross_entropy.wgsl", {REF_WTE, REF_LNFW, REF_LNFB}, 3},
};

static int check_forward_(void) {
    ref_gpt2 ref;
    wgpt_gpt2 *m = model_(&ref, 42);
    if (!m) return ref_gpt2_free(&ref), -1;
    float want = ref_gpt2_forward(&ref, tokens, targets), got = 0;
    int rc = 0;
    if (wgpt_gpt2_forward(m, tokens, targets, &got) < 0) rc = FAIL("%s", wgpt_gpt2_error(m));
    else if (!(fabsf(got - want) < 2e-5f * want)) rc = FAIL("loss %.7g, reference %.7g", got, want);
    else snprintf(why, sizeof why, "loss %.6f, reference %.6f", got, want);
    wgpt_gpt2_free(m);
    ref_gpt2_free(&ref);
    return rc;
}

// One forward and backward on both sides, shared by the family checks.
static ref_gpt2 GREF;
static float *GRADS;
static int grads_rc_ = 1;  // 1: not computed yet

static int gradients_(void) {
    if (grads_rc_ != 1) return grads_rc_;
    wgpt_gpt2 *m = model_(&GREF, 43);
    if (!m) return grads_rc_ = -1;
    ref_gpt2_forward(&GREF, tokens, targets);
    ref_gpt2_zero_grad(&GREF);
    int rc = ref_gpt2_backward(&GREF) == 0 ? 0 : FAIL("reference backward failed");
    float loss;
    GRADS = malloc(GREF.num_params * sizeof *GRADS);
    if (!rc && !GRADS) rc = FAIL("out of memory");
    if (!rc && (wgpt_gpt2_forward_backward(m, tokens, targets, &loss) < 0 || wgpt_gpt2_get_grads(m, GRADS) < 0))
        rc = FAIL("%s", wgpt_gpt2_error(m));
    wgpt_gpt2_free(m);
    return grads_rc_ = rc;
}

static int check_family_(const family *f) {
    int rc = gradients_();
    for (int i = 0; !rc && i < f->n; i++) rc = compare_("gradient", f->tensors[i], GRADS, GREF.grads, &GREF, 2e-4, 1e-3);
    if (!rc) snprintf(why, sizeof why, "%s: %d gradient tensors match", f->kernels, f->n);
    return rc;
}

static void ref_step_(ref_gpt2 *ref, float *mm, float *vv, const wgpt_adamw_config *o, int t, float *norm) {
    ref_gpt2_zero_grad(ref);
    ref_gpt2_backward(ref);
    *norm = ref_gpt2_clip_grads(ref, o->max_grad_norm);
    static const int decayed[] = {REF_WTE, REF_WPE, REF_QKVW, REF_ATTPROJW, REF_FCW, REF_FCPROJW};
    for (int k = 0; k < REF_NUM_PARAM_TENSORS; k++) {
        float wd = 0;
        for (size_t i = 0; i < 6; i++)
            if (decayed[i] == k) wd = o->weight_decay;
        size_t off = (size_t)(ref->param_ptr[k] - ref->params);
        ref_adamw_update(ref->param_ptr[k], ref->grad_ptr[k], mm + off, vv + off, ref->param_sizes[k], o->lr,
                         o->beta1, o->beta2, o->eps, wd, t);
    }
}

static int check_optimizer_(void) {
    ref_gpt2 ref;
    wgpt_gpt2 *m = model_(&ref, 45);
    if (!m) return ref_gpt2_free(&ref), -1;
    float *mm = calloc(ref.num_params, sizeof *mm), *vv = calloc(ref.num_params, sizeof *vv);
    float *p = malloc(ref.num_params * sizeof *p);
    int rc = mm && vv && p ? 0 : FAIL("out of memory");
    wgpt_adamw_config o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                           .max_grad_norm = 1.0f};
    for (int step = 1; !rc && step <= 3; step++) {
        float rl = ref_gpt2_forward(&ref, tokens, targets), rn;
        ref_step_(&ref, mm, vv, &o, step, &rn);
        wgpt_step_result r;
        if (wgpt_gpt2_train_step(m, tokens, targets, &o, step, &r) < 0) rc = FAIL("%s", wgpt_gpt2_error(m));
        else if (!(fabsf(r.loss - rl) <= 1e-4f * rl)) rc = FAIL("step %d: loss %.7g vs %.7g", step, r.loss, rl);
        else if (!(fabsf(r.grad_norm - rn) <= 1e-3f * rn)) rc = FAIL("step %d: norm %.7g vs %.7g", step, r.grad_norm, rn);
    }
    if (!rc && wgpt_gpt2_get_params(m, p) < 0) rc = FAIL("%s", wgpt_gpt2_error(m));
    for (int k = 0; !rc && k < REF_NUM_PARAM_TENSORS; k++)
        rc = compare_("parameters after 3 steps", k, p, ref.params, &ref, 1e-3, 1e-2);
    if (!rc) snprintf(why, sizeof why, "07_optimizer.wgsl: 3 AdamW steps, losses, norms and parameters match");
    free(mm), free(vv), free(p);
    wgpt_gpt2_free(m);
    ref_gpt2_free(&ref);
    return rc;
}

// The f16 matmuls (03_linear_f16.wgsl, 08_precision.wgsl), where the adapter
// has shader-f16: test_gpt2_f16.c's shape (sizes multiples of 8: L=2, NH=4,
// C=64, T=24, B=2) against the reference in fp32 with its bounds: loss 5e-3
// relative, each gradient tensor 3e-3 relative L2 (f16 operands: 2^-12 each).
// 1: skipped (no shader-f16).
static int check_f16_(void) {
    if (!wgpt_gpu_get_info(G)->has_f16) return snprintf(why, sizeof why, "the adapter has no shader-f16"), 1;
    static const wgpt_gpt2_config c = {.max_seq_len = 32, .vocab_size = 97, .padded_vocab_size = 128,
                                       .num_layers = 2, .num_heads = 4, .channels = 64};
    static const ref_gpt2_config rc = {32, 97, 128, 2, 4, 64};
    enum { B16 = 2, T16 = 24 };
    int tok[B16 * T16], tgt[B16 * T16];
    for (int i = 0; i < B16 * T16; i++) tok[i] = (i * 37 + 11) % 97, tgt[i] = (i * 53 + 5) % 97;
    ref_gpt2 ref;
    if (ref_gpt2_init(&ref, &rc, B16, T16) != 0) return FAIL("reference: out of memory");
    ref_gpt2_init_params(&ref, 3);
    char err[2048];
    int rc16 = 0;
    float *grads = malloc(ref.num_params * sizeof *grads);
    wgpt_gpt2 *m = wgpt_gpt2_create_precision(G, &c, B16, T16, 1, WGPT_PRECISION_F16, err, sizeof err);
    if (!m || !grads) rc16 = FAIL("f16 model: %s", m ? "out of memory" : err);
    float want = ref_gpt2_forward(&ref, tok, tgt), got = 0;
    ref_gpt2_zero_grad(&ref);
    ref_gpt2_backward(&ref);
    if (!rc16 && (wgpt_gpt2_set_params(m, ref.params) < 0 || wgpt_gpt2_forward_backward(m, tok, tgt, &got) < 0 ||
                  wgpt_gpt2_get_grads(m, grads) < 0))
        rc16 = FAIL("%s", wgpt_gpt2_error(m));
    if (!rc16 && !(fabsf(got - want) <= 5e-3f * want)) rc16 = FAIL("f16 loss %.7g, reference %.7g", got, want);
    for (int k = 0; !rc16 && k < REF_NUM_PARAM_TENSORS; k++) rc16 = compare_("f16 gradient", k, grads, ref.grads, &ref, 3e-3, 1.0);
    if (!rc16) snprintf(why, sizeof why, "f16 loss %.6f, reference %.6f; gradients within 3e-3", got, want);
    free(grads);
    wgpt_gpt2_free(m);
    ref_gpt2_free(&ref);
    return rc16;
}

// The same f16 model on the tensor-core kernels (03_linear_sgm.wgsl), where
// the browser offers chromium-experimental-subgroup-matrix with a configuration
// wgpt takes: the device then picks them for the f16 matmuls by itself.
// 1: skipped (none offered, as on SwiftShader).
static int check_f16_sgm_(void) {
    const wgpt_gpu_info *i = wgpt_gpu_get_info(G);
    if (!i->has_subgroup_matrix || i->sgm_config < 0)
        return snprintf(why, sizeof why, "the browser's adapter offers no subgroup matrices%s",
                        i->has_subgroup_matrix ? " of a shape wgpt's kernels take" : ""), 1;
    int rc = check_f16_();
    if (rc == 0) {
        const wgpt_matrix_config *c = &i->matrix_configs[i->sgm_config];
        char done[sizeof why];
        snprintf(done, sizeof done, "%s (subgroup matrices %ux%ux%u)", why, c->m, c->n, c->k);
        snprintf(why, sizeof why, "%s", done);
    }
    return rc;
}

// The KV-cache decoder (09_decode.wgsl, 09_decode_attention.wgsl): a prefill
// of 8 tokens, then one token a step to T, two slots at once (the second a
// step behind); each step's logits against the reference's full forward at
// that position (causal: position p sees tokens 0..p only). Tolerance: the
// decoder sums in another order than the reference (one query row, chunked
// online softmax), so each row within 1e-4 * max|ref row| + 1e-5; measured
// natively against the recompute path at 6e-7 (test_decode.c).
static int check_decode_(void) {
    ref_gpt2 ref;
    wgpt_gpt2 *m = model_(&ref, 11);
    if (!m) return ref_gpt2_free(&ref), -1;
    ref_gpt2_forward(&ref, tokens, NULL);
    char err[2048];
    int rc = 0;
    enum { P = 8 };
    float *lg = malloc(2 * 97 * sizeof *lg);
    wgpt_decoder *d = wgpt_decoder_create(m, 2, err, sizeof err);
    if (!d || !lg) rc = FAIL("decoder: %s", d ? "out of memory" : err);
    int32_t ids[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = tokens[i];
    double worst = 0;
    // slot s decodes sequence s of the batch; slot 1 starts one token later
    for (uint32_t s = 0; !rc && s < 2; s++)
        if (wgpt_decoder_prefill(d, s, ids + s * T, P + s, lg, err, sizeof err) < 0) rc = FAIL("prefill: %s", err);
    for (int p = P; !rc && p < T - 1; p++) {
        uint32_t slots[2] = {0, 1};
        int32_t next[2] = {ids[p], ids[T + p + 1]};
        if (wgpt_decoder_step(d, slots, next, 2, lg, err, sizeof err) < 0) {
            rc = FAIL("step at %d: %s", p, err);
            break;
        }
        for (int s = 0; !rc && s < 2; s++) {
            const float *want = ref.acts.logits + ((size_t)s * T + (size_t)(p + s)) * 128;
            double mx = 0, e = 0;
            for (int v = 0; v < 97; v++) mx = fmax(mx, fabs(want[v]));
            for (int v = 0; v < 97; v++) e = fmax(e, fabs((double)lg[s * 97 + v] - want[v]));
            worst = fmax(worst, e / (mx > 0 ? mx : 1));
            if (e > 1e-4 * mx + 1e-5) rc = FAIL("slot %d position %d: logits differ by %.3g (max |logit| %.3g)", s, p + s, e, mx);
        }
    }
    if (!rc) snprintf(why, sizeof why, "KV-cache logits of 2 slots, positions %d-%d: within %.2g of the reference", P, T - 1, worst);
    wgpt_decoder_free(d);
    free(lg);
    wgpt_gpt2_free(m);
    ref_gpt2_free(&ref);
    return rc;
}

static int wanted_(int argc, char **argv, const char *name) {
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return 1;
    return 0;
}

static double now_(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double t0_;

// rc: 0 ok, 1 skipped, else failed.
static int report_(const char *name, int rc, int *failed) {
    double t = now_();
    printf("check %s: %s%s (%.1f s)\n", name, rc == 1 ? "skip: " : rc ? "FAIL: " : "ok: ", why, t - t0_);
    t0_ = t;
    fflush(stdout);
    *failed += rc != 0 && rc != 1;
    return rc;
}

int main(int argc, char **argv) {
    char err[2048];
    wgpt_gpu_options o = {.adapter_index = -1};
    if (wgpt_cli_gpu_env(&o, err, sizeof err) == 0) G = wgpt_gpu_open(&o, err, sizeof err);  // WGPT_KERNELS=gpu
    if (!G) {
        printf("check open: FAIL: %s\n", err);
        return 1;
    }
    char desc[512];
    wgpt_gpu_describe(wgpt_gpu_get_info(G), desc, sizeof desc);
    printf("device: %s | kernels: %s\n", desc, wgpt_gpu_get_info(G)->cpu_kernels ? "CPU twins where they fit" : "GPU");
    ref_rng r;
    ref_rng_seed(&r, 7);
    for (int i = 0; i < B * T; i++) tokens[i] = (int)(ref_rng_u64(&r) % 97);
    for (int i = 0; i < B * T; i++) targets[i] = i + 1 < B * T ? tokens[i + 1] : 3;
    int failed = 0;
    t0_ = now_();
    if (wanted_(argc, argv, "forward")) report_("forward", check_forward_(), &failed);
    for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++)
        if (wanted_(argc, argv, FAMILIES[i].name)) report_(FAMILIES[i].name, check_family_(&FAMILIES[i]), &failed);
    if (wanted_(argc, argv, "optimizer")) report_("optimizer", check_optimizer_(), &failed);
    if (wanted_(argc, argv, "decode")) report_("decode", check_decode_(), &failed);
    if (wanted_(argc, argv, "f16")) report_("f16", check_f16_(), &failed);
    if (wanted_(argc, argv, "f16_sgm")) report_("f16_sgm", check_f16_sgm_(), &failed);
    if (grads_rc_ != 1) ref_gpt2_free(&GREF);
    free(GRADS);
    wgpt_gpu_close(G);
    return failed;
}
