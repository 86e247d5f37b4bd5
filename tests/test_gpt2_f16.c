// test_gpt2_f16.c: the f16 precision of the GPT-2 model (model/gpt2.h:
// wgpt_precision) against the same model in fp32, on a configuration whose
// sizes are multiples of 8 but of no block: L=2, NH=4, C=64 (head size 16),
// T=24 < maxT=32, V=97 padded to 128, B=2 (48 positions); and, for the
// tensor-core attention (head size 64 only), one at NH=2, C=128, T=96 (on
// lavapipe also with emulated subgroup matrices, where it has the workgroup
// memory: wgpt's tuned build).
//
// What f16 changes is known: every matmul operand is rounded to 11
// significant bits (relative error <= 2^-12 = 2.4e-4 each, random in sign),
// sums stay f32. Through the model's 9 chained matmuls that gives a loss
// within about 1e-3 relative of fp32's (measured on lavapipe: 0 at
// initialisation, where the logits are tiny, and <= 1e-5 over 10 steps), and
// gradients 3.7e-4..6.4e-4 relative L2 per tensor (measured on lavapipe,
// printed); the bounds (5e-3 loss, 1e-2 over 10 steps, 3e-3 gradients) sit
// about 5x above that, so a wrong term (an O(1) relative error) fails by far.
#include "test_util.h"

#include "model/attention.h"   // wgpt_attention_uses_sgm
#include "model/gpt2.h"
#include "model/linear_f16.h"  // wgpt_linear_f16_uses_sgm
#include "ref/gpt2_ref.h"

static wgpt_gpu *G;
static const wgpt_gpt2_config CFG = {.max_seq_len = 32, .vocab_size = 97, .padded_vocab_size = 128,
                                     .num_layers = 2, .num_heads = 4, .channels = 64};
enum { B = 2, T = 24 };
static int tokens[B * T], targets[B * T];
static float *params;
static size_t np;

static int group_setup(void **state) {
    (void)state;
    G = tu_gpu_open(NULL);
    ref_rng r;
    ref_rng_seed(&r, 11);
    for (int i = 0; i < B * T; i++) tokens[i] = (int)(ref_rng_u64(&r) % 97);
    for (int i = 0; i < B * T; i++) targets[i] = i + 1 < B * T ? tokens[i + 1] : 5;
    np = wgpt_gpt2_num_params(&CFG);
    params = malloc(np * sizeof *params);
    wgpt_gpt2_init_params(&CFG, params, 3);
    return params ? 0 : -1;
}
static int group_teardown(void **state) {
    (void)state;
    free(params);
    wgpt_gpu_close(G);
    return 0;
}

static wgpt_gpt2 *model_cfg_(const wgpt_gpt2_config *cfg, int b, int t, const float *prm, wgpt_precision p) {
    char err[2048];
    wgpt_gpt2 *m = wgpt_gpt2_create_precision(G, cfg, (uint32_t)b, (uint32_t)t, 1, p, err, sizeof err);
    if (!m) fail_msg("model (%s): %s", wgpt_precision_name(p), err);
    if (wgpt_gpt2_set_params(m, prm) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    return m;
}

static wgpt_gpt2 *model_(wgpt_precision p) { return model_cfg_(&CFG, B, T, params, p); }

static const wgpt_adamw_config OPT = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                                      .max_grad_norm = 1.0f};

// The loss and every parameter gradient of cfg (b x t positions) in f16
// against fp32 (unscaled: the raw f16 gradients divided by the loss scale):
// the loss within 5e-3 relative, each tensor's gradient within `bound`
// relative L2.
static void near_fp32_(const wgpt_gpt2_config *cfg, int b, int t, const int *tok, const int *tgt, const float *prm,
                       double bound) {
    wgpt_gpt2 *a = model_cfg_(cfg, b, t, prm, WGPT_PRECISION_FP32), *h = model_cfg_(cfg, b, t, prm, WGPT_PRECISION_F16);
    float la, lh;
    if (wgpt_gpt2_forward_backward(a, tok, tgt, &la) < 0) fail_msg("%s", wgpt_gpt2_error(a));
    if (wgpt_gpt2_forward_backward(h, tok, tgt, &lh) < 0) fail_msg("%s", wgpt_gpt2_error(h));
    printf("loss fp32 %.7f, f16 %.7f (relative %.2e)\n", la, lh, fabs(lh - la) / la);
    assert_true(fabs(lh - la) <= 5e-3 * la);
    size_t n = wgpt_gpt2_num_params(cfg);
    float *ga = malloc(n * 4), *gh = malloc(n * 4);
    if (wgpt_gpt2_get_grads(a, ga) < 0 || wgpt_gpt2_get_grads(h, gh) < 0) fail_msg("reading gradients");
    float s = wgpt_gpt2_loss_scale(h);
    assert_true(s == WGPT_LOSS_SCALE_INIT);
    size_t sizes[WGPT_GPT2_NUM_TENSORS], off = 0;
    wgpt_gpt2_param_sizes(cfg, sizes);
    double worst = 0;
    for (int k = 0; k < WGPT_GPT2_NUM_TENSORS; k++) {
        double d2 = 0, r2 = 0;
        for (size_t i = 0; i < sizes[k]; i++) {
            double d = gh[off + i] / s - ga[off + i];
            d2 += d * d, r2 += (double)ga[off + i] * ga[off + i];
        }
        double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
        printf("tensor %2d: relative L2 gradient difference %.2e\n", k, rel);
        if (rel > worst) worst = rel;
        off += sizes[k];
    }
    printf("worst tensor: %.2e (bound %.0e)\n", worst, bound);
    assert_true(worst < bound);
    assert_true(worst > 0);  // it really ran in f16
    free(ga), free(gh);
    wgpt_gpt2_free(a), wgpt_gpt2_free(h);
}

static void loss_and_gradients_near_fp32(void **st) {
    (void)st;
    near_fp32_(&CFG, B, T, tokens, targets, params, 3e-3);
}

// Head size 64, the size the tensor-core attention kernels take
// (04_attention_sgm.wgsl: where the device has them, the f16 model runs its
// attention there; elsewhere in f32), over two blocks of 64 positions, the
// second partial: T = 96. At initialisation the logits are tiny and the loss
// is near ln V whatever attention computes, so the gradients are the check:
// P and dS rounded to f16 add about 2^-11 relative per product to the
// matmuls' rounding; 1e-2 relative L2 a tensor is ~5x the f32-attention
// figures printed on lavapipe and far below the O(1) of a wrong output.
static const wgpt_gpt2_config CFG64 = {.max_seq_len = 128, .vocab_size = 97, .padded_vocab_size = 128,
                                       .num_layers = 2, .num_heads = 2, .channels = 128};
enum { B64 = 2, T64 = 96 };

// CFG64's tokens, targets and parameters (malloc'd).
static float *inputs64_(int *tok, int *tgt) {
    ref_rng r;
    ref_rng_seed(&r, 12);
    for (int i = 0; i < B64 * T64; i++) tok[i] = (int)(ref_rng_u64(&r) % 97);
    for (int i = 0; i < B64 * T64; i++) tgt[i] = i + 1 < B64 * T64 ? tok[i + 1] : 5;
    float *prm = malloc(wgpt_gpt2_num_params(&CFG64) * sizeof *prm);
    assert_non_null(prm);
    wgpt_gpt2_init_params(&CFG64, prm, 4);
    return prm;
}

static void head_size_64_near_fp32(void **st) {
    (void)st;
    int tok[B64 * T64], tgt[B64 * T64];
    float *prm = inputs64_(tok, tgt);
    near_fp32_(&CFG64, B64, T64, tok, tgt, prm, 1e-2);
    free(prm);
}

// The f16 model on the tensor-core matmuls where the device has f16 but no
// subgroup matrices (lavapipe): on emulated ones (src/gpu/sgm_emulate.h, the
// kernels' own code), so the path that only tensor cores take (transposed f16
// inputs, fcproj's input pass with GELU' in its epilogue, split weight passes
// on the GPU twins) is checked against fp32 here too, with the same bound.
// Where the device has real ones the tests above ran on them.
// The emulated devices' tests run with G swapped for a device with emulated
// subgroup matrices (the helpers use G); their teardown puts G back, also
// after a failure.
static wgpt_gpu *G_SAVED;
static int restore_g_(void **st) {
    (void)st;
    if (G_SAVED && G != G_SAVED) wgpt_gpu_close(G);
    if (G_SAVED) G = G_SAVED;
    G_SAVED = NULL;
    return 0;
}

// G swapped for the same adapter with emulated subgroup matrices (profiled
// where `profile`), or a skip where G has real ones (`real`: what ran on
// them instead) or no f16. Returns G's info from before.
static const wgpt_gpu_info *emulated_g_(const char *real, int profile) {
    const wgpt_gpu_info *i = wgpt_gpu_get_info(G);
    if (wgpt_linear_f16_uses_sgm(G) || !i->has_f16) {
        if (i->has_f16) printf("skipped: '%s' has real subgroup matrices: %s\n", i->name, real);
        else printf("skipped: '%s' has no f16, so no emulated subgroup matrices\n", i->name);
        skip();
    }
    wgpt_gpu_options o = {.adapter_index = -1, .emulate_sgm = 1, .kernels = WGPT_KERNELS_GPU, .profile = profile};
    G_SAVED = G;
    G = tu_gpu_open(&o);
    assert_true(wgpt_linear_f16_uses_sgm(G));
    return i;
}

static void emulated_tensor_cores_near_fp32(void **st) {
    (void)st;
    const wgpt_gpu_info *i = emulated_g_("the tests above ran on them", 0);
    printf("'%s' with emulated subgroup matrices:\n", i->name);
    near_fp32_(&CFG, B, T, tokens, targets, params, 3e-3);
}

// The kernels a forward and backward of m on tok, tgt ran, as the profiler
// saw them (its device opened with .profile): 1 if one whose name contains
// `part` did, 0 if none, -1 without timestamps.
static int ran_on_(wgpt_gpt2 *m, wgpt_gpu *g, const char *part, const int *tok, const int *tgt) {
    enum { MAXT = 4096 };
    static wgpt_timing t[MAXT];
    float loss;
    wgpt_gpu_timings(g, t, MAXT);  // (what came before)
    if (wgpt_gpt2_forward_backward(m, tok, tgt, &loss) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    int n = wgpt_gpu_timings(g, t, MAXT);
    if (n < 0) return -1;
    for (int i = 0; i < n; i++)
        if (strstr(t[i].kernel, part)) return 1;
    return 0;
}

// ran_on_ with the CFG model's tokens and targets.
static int ran_(wgpt_gpt2 *m, wgpt_gpu *g, const char *part) { return ran_on_(m, g, part, tokens, targets); }

// head_size_64_near_fp32 on emulated subgroup matrices where the device has
// f16 but none (lavapipe): the model's f16 attention on the tensor-core
// kernels (04_attention_sgm.wgsl, in the device's subgroups), fed by and
// feeding the tensor-core matmuls, against fp32 with the same bound; the
// profiler shows the kernels ran. They need 45,568 bytes of workgroup
// memory: a device with less (Debian's lavapipe: 32 KiB; wgpt's tuned one
// has 64) is a skip that says so.
static void emulated_attention_near_fp32(void **st) {
    (void)st;
    const wgpt_gpu_info *i = emulated_g_("head_size_64 ran on them", 1);
    if (i->max_workgroup_storage < WGPT_ATTENTION_SGM_STORAGE) {
        printf("skipped: '%s' has %u bytes of workgroup memory; the f16 attention needs %u\n", i->name,
               (unsigned)i->max_workgroup_storage, WGPT_ATTENTION_SGM_STORAGE);
        skip();
    }
    assert_true(wgpt_attention_uses_sgm(G, 64));
    int tok[B64 * T64], tgt[B64 * T64];
    float *prm = inputs64_(tok, tgt);
    printf("'%s' with emulated subgroup matrices:\n", i->name);
    near_fp32_(&CFG64, B64, T64, tok, tgt, prm, 1e-2);
    wgpt_gpt2 *m = model_cfg_(&CFG64, B64, T64, prm, WGPT_PRECISION_F16);
    int fwd = ran_on_(m, G, "attention_sgm_forward", tok, tgt);
    int dq = ran_on_(m, G, "attention_sgm_backward_dq", tok, tgt);
    wgpt_gpt2_free(m);
    printf("attention_sgm_forward ran %d, attention_sgm_backward_dq* ran %d\n", fwd, dq);
    free(prm);
    if (fwd >= 0) assert_int_equal(fwd, 1), assert_int_equal(dq, 1);
}

// The f16 model with every matmul epilogue on (wgpt_gpu_options.matmul_epilogues,
// off by default: model/gpt2_plan.c wgpt_gpt2_plan_) against fp32, on the tensor cores or
// emulated ones: the same bound as without them. The epilogue kernels ran
// (the _epi variants) and the plain model's fused GELU' bias pass did not;
// without them, that pass ran instead. Each keeps one f32 gradient of fc's
// output (BT x 4C): the GELU' epilogue writes d fch (no d fch gelu), the
// fused pass reads d fch gelu (no d fch), so their activations match. The
// plain model's train step ran the fused cross-entropy (crossentropy_fused_f16),
// not the forward and backward kernels it replaces. Both
// make the LayerNorms' transposed f16 copies with layernorm_f16_transpose
// straight from the residual stream, and cast_f16_transpose never runs; every
// residual add but the last runs fused with the statistics of the LayerNorm
// after it (layernorm_residual_stats_vec4); the last one's LayerNorm (lnf)
// is kept row-major for the chunked classifier (residual_forward runs there).
static void epilogues_near_fp32(void **st) {
    (void)st;
    const wgpt_gpu_info *i = wgpt_gpu_get_info(G);
    if (!i->has_f16) {
        printf("skipped: needs f16; '%s' has none\n", i->name);
        skip();
    }
    int real = wgpt_linear_f16_uses_sgm(G);
    wgpt_gpu_options o = {.adapter_index = -1, .emulate_sgm = !real, .kernels = WGPT_KERNELS_GPU,
                          .matmul_epilogues = WGPT_EPI_ALL, .profile = 1};
    wgpt_gpu *g0 = G, *ge = tu_gpu_open(&o);
    o.matmul_epilogues = 0;  // the same model without them, on a device of its own
    G = tu_gpu_open(&o);
    wgpt_gpt2 *plain = model_(WGPT_PRECISION_F16);
    wgpt_gpu *gp = G;
    G = ge;
    assert_true(wgpt_linear_f16_uses_sgm(G) && wgpt_gpu_get_info(G)->matmul_epilogues == WGPT_EPI_ALL);
    wgpt_gpt2 *epi = model_(WGPT_PRECISION_F16);
    wgpt_gpt2_memory_kinds k0, k1;
    wgpt_gpt2_memory_split(plain, &k0);
    wgpt_gpt2_memory_split(epi, &k1);
    int epi_ran = ran_(epi, ge, "_epi"), epi_fused = ran_(epi, ge, "bias_part_gelu");
    int plain_epi = ran_(plain, gp, "_epi"), plain_fused = ran_(plain, gp, "bias_part_gelu");
    int ln_ran[2] = {ran_(epi, ge, "layernorm_f16_transpose"), ran_(plain, gp, "layernorm_f16_transpose")};
    int cast_ran[2] = {ran_(epi, ge, "cast_f16_transpose"), ran_(plain, gp, "cast_f16_transpose")};
    // the train step's cross-entropy: the fused kernel, neither of the two it replaces
    int ce_ran[3] = {ran_(plain, gp, "crossentropy_fused_f16"), ran_(plain, gp, "crossentropy_forward"),
                     ran_(plain, gp, "crossentropy_backward")};
    int res_ln_ran[2] = {ran_(epi, ge, "layernorm_residual_stats"), ran_(plain, gp, "layernorm_residual_stats")};
    int res_ran[2] = {ran_(epi, ge, "residual_forward"), ran_(plain, gp, "residual_forward")};
    wgpt_gpt2_free(epi);
    wgpt_gpt2_free(plain);
    printf("'%s'%s, every epilogue: activations %llu bytes, without them %llu; epilogue kernels ran %d / %d, "
           "the fused GELU' bias pass %d / %d, layernorm_f16_transpose %d / %d, cast_f16_transpose %d / %d, "
           "layernorm_residual_stats %d / %d, residual_forward %d / %d, crossentropy fused / forward / backward "
           "%d %d %d\n",
           i->name, real ? "" : " with emulated subgroup matrices", (unsigned long long)k1.activations,
           (unsigned long long)k0.activations, epi_ran, plain_epi, epi_fused, plain_fused, ln_ran[0], ln_ran[1],
           cast_ran[0], cast_ran[1], res_ln_ran[0], res_ln_ran[1], res_ran[0], res_ran[1], ce_ran[0], ce_ran[1],
           ce_ran[2]);
    if (epi_ran < 0) {
        printf("skipped the kernel check: '%s' has no timestamps\n", i->name);
    } else {
        assert_int_equal(epi_ran, 1), assert_int_equal(epi_fused, 0);
        assert_int_equal(plain_epi, 0), assert_int_equal(plain_fused, 1);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(ln_ran[k], 1), assert_int_equal(cast_ran[k], 0);
            assert_int_equal(res_ln_ran[k], 1), assert_int_equal(res_ran[k], 1);
        }
        assert_int_equal(ce_ran[0], 1), assert_int_equal(ce_ran[1], 0), assert_int_equal(ce_ran[2], 0);
    }
    uint64_t gap = k0.activations > k1.activations ? k0.activations - k1.activations : k1.activations - k0.activations;
    assert_true(gap <= 1024);
    near_fp32_(&CFG, B, T, tokens, targets, params, 3e-3);
    wgpt_gpu_close(ge);
    wgpt_gpu_close(gp);
    G = g0;
}

// The train step's loss comes from crossentropy_fused_f16 (the training
// forward stops at the logits), the forward's from crossentropy_forward: the
// same fold of the same logits, so the same loss bit for bit, and the
// segmented backward (accumulate_begin, segments, end) gives it too.
static void train_loss_is_the_forward_loss(void **st) {
    (void)st;
    wgpt_gpt2 *h = model_(WGPT_PRECISION_F16);
    float fwd, fb, seg;
    if (wgpt_gpt2_forward(h, tokens, targets, &fwd) < 0 || wgpt_gpt2_forward_backward(h, tokens, targets, &fb) < 0 ||
        wgpt_gpt2_accumulate_begin(h, tokens, targets, 1) < 0)
        fail_msg("%s", wgpt_gpt2_error(h));
    for (uint32_t i = 0; i < wgpt_gpt2_grad_segments(h); i++)
        if (wgpt_gpt2_backward_segment(h, i) < 0) fail_msg("%s", wgpt_gpt2_error(h));
    if (wgpt_gpt2_accumulate_end(h, &seg) < 0) fail_msg("%s", wgpt_gpt2_error(h));
    printf("loss: forward %.9g, forward and backward %.9g, in segments %.9g\n", fwd, fb, seg);
    assert_memory_equal(&fb, &fwd, 4);
    assert_memory_equal(&seg, &fwd, 4);
    wgpt_gpt2_free(h);
}

// 10 AdamW steps: the f16 run's losses stay within 1% of fp32's.
static void ten_steps_near_fp32(void **st) {
    (void)st;
    wgpt_gpt2 *a = model_(WGPT_PRECISION_FP32), *h = model_(WGPT_PRECISION_F16);
    for (int t = 1; t <= 10; t++) {
        wgpt_step_result ra, rh;
        if (wgpt_gpt2_train_step(a, tokens, targets, &OPT, t, &ra) < 0) fail_msg("%s", wgpt_gpt2_error(a));
        if (wgpt_gpt2_train_step(h, tokens, targets, &OPT, t, &rh) < 0) fail_msg("%s", wgpt_gpt2_error(h));
        printf("step %2d: fp32 %.6f f16 %.6f (scale %g)\n", t, ra.loss, rh.loss, rh.loss_scale);
        assert_false(rh.skipped);
        assert_true(fabs(rh.loss - ra.loss) <= 1e-2 * ra.loss);
    }
    wgpt_gpt2_free(a), wgpt_gpt2_free(h);
}

// A loss scale so large that the scaled loss gradient overflows f16: the step
// is skipped with the parameters untouched, the scale halves, and with a
// sane scale the next step trains.
static void overflow_skips_and_lowers_the_scale(void **st) {
    (void)st;
    wgpt_gpt2 *h = model_(WGPT_PRECISION_F16);
    assert_int_equal(wgpt_gpt2_set_loss_scale(h, 3.0f), -1);  // not a power of two
    assert_non_null(strstr(wgpt_gpt2_error(h), "power of two"));
    assert_int_equal(wgpt_gpt2_set_loss_scale(h, 16777216.0f), 0);
    wgpt_step_result r;
    if (wgpt_gpt2_train_step(h, tokens, targets, &OPT, 1, &r) < 0) fail_msg("%s", wgpt_gpt2_error(h));
    printf("scale 2^24: skipped %d, next scale %g\n", r.skipped, wgpt_gpt2_loss_scale(h));
    assert_int_equal(r.skipped, 1);
    assert_true(r.loss_scale == 16777216.0f);
    assert_true(wgpt_gpt2_loss_scale(h) == 8388608.0f);
    float *p = malloc(np * 4);
    assert_int_equal(wgpt_gpt2_get_params(h, p), 0);
    assert_memory_equal(p, params, np * 4);  // untouched
    assert_int_equal(wgpt_gpt2_set_loss_scale(h, 1024.0f), 0);
    if (wgpt_gpt2_train_step(h, tokens, targets, &OPT, 1, &r) < 0) fail_msg("%s", wgpt_gpt2_error(h));
    assert_int_equal(r.skipped, 0);
    assert_int_equal(wgpt_gpt2_get_params(h, p), 0);
    assert_true(memcmp(p, params, np * 4) != 0);
    free(p);
    wgpt_gpt2_free(h);
}

// Shapes the f16 matmuls cannot take are refused at creation, naming them.
static void f16_refuses_odd_shapes(void **st) {
    (void)st;
    wgpt_gpt2_config c = CFG;
    c.channels = 60, c.num_heads = 4;  // C not a multiple of 8
    char err[2048];
    assert_null(wgpt_gpt2_create_precision(G, &c, B, T, 1, WGPT_PRECISION_F16, err, sizeof err));
    assert_non_null(strstr(err, "multiples of 8"));
    assert_non_null(strstr(err, "60"));
    wgpt_precision p;
    assert_int_equal(wgpt_precision_parse("bf16", &p), -1);
}

// auto is f16 where the device has f16 subgroup matrices and the shape allows
// it, fp32 elsewhere (lavapipe, an odd shape): never an error.
static void auto_precision_follows_the_device(void **st) {
    (void)st;
    wgpt_precision p;
    assert_int_equal(wgpt_precision_parse("auto", &p), 0);
    assert_int_equal(p, WGPT_PRECISION_AUTO);
    wgpt_precision want = wgpt_precision_auto(wgpt_gpu_get_info(G));
    const wgpt_gpu_info *i = wgpt_gpu_get_info(G);
    assert_int_equal(want, i->has_f16 && i->has_subgroup_matrix ? WGPT_PRECISION_F16 : WGPT_PRECISION_FP32);
    char err[2048];
    wgpt_gpt2 *m = wgpt_gpt2_create_precision(G, &CFG, B, T, 1, WGPT_PRECISION_AUTO, err, sizeof err);
    if (!m) fail_msg("%s", err);
    printf("'%s': auto is %s\n", i->name, wgpt_precision_name(wgpt_gpt2_precision(m)));
    assert_int_equal(wgpt_gpt2_precision(m), want);
    assert_true(wgpt_gpt2_loss_scale(m) == (want == WGPT_PRECISION_F16 ? WGPT_LOSS_SCALE_INIT : 1.0f));
    wgpt_gpt2_free(m);
    wgpt_gpt2_config c = CFG;
    c.channels = 60, c.num_heads = 4;  // f16 cannot take it: auto is fp32
    m = wgpt_gpt2_create_precision(G, &c, B, T, 1, WGPT_PRECISION_AUTO, err, sizeof err);
    if (!m) fail_msg("%s", err);
    assert_int_equal(wgpt_gpt2_precision(m), WGPT_PRECISION_FP32);
    wgpt_gpt2_free(m);
}

// The loss scale's state restores whole (checkpoints), and a state that
// cannot be is refused naming it.
static void loss_scale_state_restores(void **st) {
    (void)st;
    wgpt_gpt2 *h = model_(WGPT_PRECISION_F16);
    assert_int_equal(wgpt_gpt2_restore_loss_scale(h, 4096.0f, 999), 0);
    assert_true(wgpt_gpt2_loss_scale(h) == 4096.0f);
    assert_int_equal(wgpt_gpt2_loss_scale_clean_steps(h), 999);
    wgpt_step_result r;
    assert_int_equal(wgpt_gpt2_train_step(h, tokens, targets, &OPT, 1, &r), 0);
    assert_int_equal(r.skipped, 0);
    assert_true(r.loss_scale == 4096.0f);               // the step ran with it
    assert_true(wgpt_gpt2_loss_scale(h) == 8192.0f);    // its 1000th clean step doubled it
    assert_int_equal(wgpt_gpt2_loss_scale_clean_steps(h), 0);
    assert_int_equal(wgpt_gpt2_restore_loss_scale(h, 4096.0f, WGPT_LOSS_SCALE_INTERVAL), -1);
    assert_non_null(strstr(wgpt_gpt2_error(h), "clean steps"));
    wgpt_gpt2_free(h);
    wgpt_gpt2 *f = model_(WGPT_PRECISION_FP32);
    assert_int_equal(wgpt_gpt2_loss_scale_clean_steps(f), 0);
    assert_int_equal(wgpt_gpt2_restore_loss_scale(f, 4096.0f, 0), -1);
    wgpt_gpt2_free(f);
}

// ZeRO-1 in f16: three models that keep the fp32 matmul weights (qkvw,
// attprojw, fcw, fcprojw) of their shard only, exchanging their updates
// after every step (the shard's f16 copy and the fp32 values of the tensors
// kept whole), train bit for bit as one whole f16 model: the same losses
// every step, and at the end the fp32 masters gathered from the shards are
// the whole model's (the true masters: f16-rounded values would differ).
// Each holds what the layout says (computed here from the tensor sizes:
// this config's slices are all multiples of 64 floats, so the padded layout
// is the reference one): its shard's matmul floats plus the 12032 floats of
// the other tensors. An inference instance reads the masters where they are,
// and one that would run in fp32 (positions not a multiple of 8) is refused.
static void split_masters_equal_whole(void **st) {
    (void)st;
    enum { NS = 3 };
    char err[2048];
    wgpt_gpt2 *whole = model_(WGPT_PRECISION_F16), *sh[NS];
    for (int i = 0; i < NS; i++) {
        sh[i] = wgpt_gpt2_create_sharded(G, &CFG, B, T, WGPT_PRECISION_F16, (uint32_t)i, NS, err, sizeof err);
        if (!sh[i]) fail_msg("shard %d: %s", i, err);
        if (wgpt_gpt2_set_params(sh[i], params) < 0) fail_msg("%s", wgpt_gpt2_error(sh[i]));
    }
    uint64_t P = wgpt_gpt2_padded_params(whole);
    assert_int_equal(P, np);  // every slice a multiple of 64 floats
    // The layout: tensor t covers [at, at + sizes[t]); the matmul weights are 4, 6, 10, 12.
    size_t sizes[WGPT_GPT2_NUM_TENSORS];
    wgpt_gpt2_param_sizes(&CFG, sizes);
    uint64_t whole_floats = 0, matmul_in[NS] = {0};
    for (size_t t = 0, at = 0; t < WGPT_GPT2_NUM_TENSORS; at += sizes[t], t++) {
        int matmul = t == 4 || t == 6 || t == 10 || t == 12;
        if (!matmul) whole_floats += sizes[t];
        for (int i = 0; matmul && i < NS; i++) {
            uint64_t off, n;
            wgpt_gpt2_shard_range(sh[i], (uint32_t)i, &off, &n);
            uint64_t b = at > off ? at : off, e = at + sizes[t] < off + n ? at + sizes[t] : off + n;
            if (b < e) matmul_in[i] += e - b;
        }
    }
    assert_int_equal(whole_floats, 12032);
    wgpt_gpt2_memory_kinds mw, ms;
    wgpt_gpt2_memory_split(whole, &mw);
    assert_int_equal(mw.masters, P * 4);
    assert_int_equal(mw.split_masters, 0);
    for (int i = 0; i < NS; i++) {
        wgpt_gpt2_memory_split(sh[i], &ms);
        printf("shard %d: fp32 masters %llu bytes (whole model %llu)\n", i, (unsigned long long)ms.masters,
               (unsigned long long)mw.masters);
        assert_int_equal(ms.split_masters, 1);
        assert_int_equal(ms.masters, (whole_floats + matmul_in[i]) * 4);
        assert_int_equal(ms.weights16, mw.weights16);  // the f16 copy stays whole
        assert_int_equal(ms.grads, mw.grads);
    }
    uint64_t words[NS], total = 0, at[NS];
    for (int i = 0; i < NS; i++) at[i] = total, total += words[i] = wgpt_gpt2_shard_update_words(sh[0], (uint32_t)i);
    uint32_t *upd = malloc(total * sizeof *upd);
    for (int t = 1; t <= 3; t++) {
        wgpt_step_result r, rs;
        if (wgpt_gpt2_train_step(whole, tokens, targets, &OPT, t, &r) < 0) fail_msg("%s", wgpt_gpt2_error(whole));
        for (int i = 0; i < NS; i++) {
            if (wgpt_gpt2_train_step(sh[i], tokens, targets, &OPT, t, &rs) < 0) fail_msg("%s", wgpt_gpt2_error(sh[i]));
            if (memcmp(&rs.loss, &r.loss, sizeof r.loss) != 0)
                fail_msg("step %d shard %d: loss %.9g, whole %.9g", t, i, rs.loss, r.loss);
            if (wgpt_gpt2_get_shard_update(sh[i], upd + at[i]) < 0) fail_msg("%s", wgpt_gpt2_error(sh[i]));
        }
        for (int i = 0; i < NS; i++)
            if (wgpt_gpt2_set_shard_updates(sh[i], upd) < 0) fail_msg("%s", wgpt_gpt2_error(sh[i]));
    }
    float *pad = malloc(P * sizeof *pad), *a = malloc(np * sizeof *a), *b = malloc(np * sizeof *b);
    for (int i = 0; i < NS; i++) {
        uint64_t off, n;
        wgpt_gpt2_shard_range(sh[i], (uint32_t)i, &off, &n);
        assert_int_equal(wgpt_gpt2_get_param_shard(sh[i], pad + off), 0);
    }
    wgpt_gpt2_unpad(whole, pad, b);
    assert_int_equal(wgpt_gpt2_get_params(whole, a), 0);
    assert_memory_equal(a, b, np * sizeof *a);
    assert_true(memcmp(a, params, np * sizeof *a) != 0);  // it trained
    assert_int_equal(wgpt_gpt2_get_params(sh[1], b), -1);  // a shard has not the whole
    assert_non_null(strstr(wgpt_gpt2_error(sh[1]), "shard 1 of 3"));
    // Inference on the shards' parameters: the whole model's logits bit for bit.
    wgpt_gpt2 *iw = wgpt_gpt2_create_inference(whole, 1, 24, err, sizeof err);
    wgpt_gpt2 *is = iw ? wgpt_gpt2_create_inference(sh[2], 1, 24, err, sizeof err) : NULL;
    if (!is) fail_msg("%s", err);
    float lw[97], ls[97];
    if (wgpt_gpt2_logits(iw, tokens, 0, 20, lw) < 0 || wgpt_gpt2_logits(is, tokens, 0, 20, ls) < 0)
        fail_msg("logits: %s %s", wgpt_gpt2_error(iw), wgpt_gpt2_error(is));
    assert_memory_equal(lw, ls, sizeof lw);
    wgpt_gpt2_free(is), wgpt_gpt2_free(iw);
    assert_null(wgpt_gpt2_create_inference(sh[0], 1, 7, err, sizeof err));
    assert_non_null(strstr(err, "ZeRO-1"));
    for (int i = 0; i < NS; i++) wgpt_gpt2_free(sh[i]);
    wgpt_gpt2_free(whole);
    free(upd), free(pad), free(a), free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(loss_and_gradients_near_fp32),
        cmocka_unit_test(head_size_64_near_fp32),
        cmocka_unit_test_teardown(emulated_tensor_cores_near_fp32, restore_g_),
        cmocka_unit_test_teardown(emulated_attention_near_fp32, restore_g_),
        cmocka_unit_test(epilogues_near_fp32),
        cmocka_unit_test(train_loss_is_the_forward_loss),
        cmocka_unit_test(ten_steps_near_fp32),
        cmocka_unit_test(overflow_skips_and_lowers_the_scale),
        cmocka_unit_test(f16_refuses_odd_shapes),
        cmocka_unit_test(auto_precision_follows_the_device),
        cmocka_unit_test(loss_scale_state_restores),
        cmocka_unit_test(split_masters_equal_whole),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
