// test_torch_parity.c: wgpt against PyTorch on the same weights. The
// PyTorch side (tests/torch_parity.py, Debian's python3-torch on the CPU)
// builds a small GPT-2 (L=2, NH=4, C=64, maxT=32, V=97 padded to 128 here;
// B=2, T=24), writes it in Hugging Face's layout as safetensors by hand, and
// records its logits, loss and gradients on batch 0 and the losses of 10
// AdamW steps (lr 3e-3, betas 0.9/0.95, weight decay 0.1 on the 2D weights,
// clipping at norm 1.0, which every step hits: norms 2.2-3.7). wgpt imports
// the file through the same code as `wgpt train --init-from` and must match.
//
// Tolerances. Both sides compute in f32 but sum in different orders, so each
// value carries a few ulp of its sum of |terms|, grown through the layers.
// How large that is, the same script measures: it runs the model in float64
// too, and "torch32 vs torch64" (printed) is what f32 alone costs PyTorch.
// wgpt's distance to torch32 must be within a small multiple of it (figures
// measured on lavapipe at the commit adding this test):
//   logits: max |diff| <= 5e-6 * max |logit| (measured 2.0e-6 of 2.94, i.e.
//           6.7e-7 relative; torch32 vs torch64 1.9e-6: the same size). 5e-6
//           is 60 ulp at the largest logit: room for other sum orders (split-k
//           on a GPU), far below what a wrong term, scale or mask moves (1e-2+)
//   loss:   |diff| <= 2e-6 * loss (20 ulp at 4.9; measured 0)
//   grads:  each tensor's ||diff|| / ||torch|| <= 1e-5 and every element within
//           1e-5 * max |torch| of its tensor (measured at most 6.9e-7 and 4.8e-7;
//           torch32 vs torch64 7.2e-7); a transposed weight or a missing
//           residual path is off by order 1
//   AdamW:  each of the 10 losses within 1e-5 (20 ulp; measured at most 4.8e-7,
//           one ulp). The steps clip (norms 2.2-3.7 > 1.0) and decay, so a
//           wrong clip scale, decay set or bias correction shows at step 2
//           (lr 3e-3 moves the loss by ~0.1 a step)
// F16 and BF16 weights must widen to exactly PyTorch's floats (bit for bit).
// wgpt's HF export of the imported model must have GPT2LMHeadModel's names
// and shapes and give PyTorch the same logits bit for bit (the script checks).
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

#include "model/gpt2.h"
#include "train/export.h"
#include "train/model_file.h"
#include "weights/hf_gpt2.h"
#include "weights/safetensors.h"

enum { B = 2, T = 24, STEPS = 10, V = 97 };

static char dir[] = "/tmp/wgpt_torch_XXXXXX";
static wgpt_gpu *G;
static wgpt_safetensors expected;

// WGPT_PYTHON, else the python3 on the PATH if it has torch (a GPU machine's
// own), else Debian's, which python3-torch installs into (a python3 earlier
// on the PATH, pyenv's say, may not see it).
static const char *python_(void) {
    const char *p = getenv("WGPT_PYTHON");
    if (p && *p) return p;
    if (system("python3 -c 'import torch' >/dev/null 2>&1") == 0) return "python3";
    return "/usr/bin/python3";
}

static int group_setup(void **state) {
    (void)state;
    if (!mkdtemp(dir)) return -1;
    char cmd[2048], err[1024];
    snprintf(cmd, sizeof cmd, "%s %s/tests/torch_parity.py --out %s", python_(), WGPT_SOURCE_DIR, dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "test_torch_parity: `%s` failed: PyTorch is needed (scripts/setup.sh installs "
                        "python3-torch; WGPT_PYTHON picks another python)\n", cmd);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "%s/expected.safetensors", dir);
    if (wgpt_safetensors_open(&expected, cmd, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    G = tu_gpu_open(NULL);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    wgpt_gpu_close(G);
    wgpt_safetensors_close(&expected);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const wgpt_st_tensor *want_(const char *name) {
    const wgpt_st_tensor *t = wgpt_safetensors_find(&expected, name);
    if (!t) fail_msg("expected.safetensors has no '%s'", name);
    return t;
}

// An I32 tensor's element i (little-endian bytes).
static int i32_(const wgpt_st_tensor *t, size_t i) {
    const unsigned char *p = t->data + 4 * i;
    return (int)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

// An F64 tensor's element i (the file need not align it to 8 bytes).
static double f64_(const wgpt_st_tensor *t, size_t i) {
    double d;
    memcpy(&d, t->data + 8 * i, 8);
    return d;
}

static float *floats_(const char *name, size_t n) {
    const wgpt_st_tensor *t = want_(name);
    assert_int_equal(t->count, n);
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = t->dtype == WGPT_ST_F64 ? (float)f64_(t, i) : wgpt_st_get_f32(t, i);
    return x;
}

static void batch_(int step, int *tokens, int *targets) {
    const wgpt_st_tensor *tk = want_("tokens"), *tg = want_("targets");
    for (size_t i = 0; i < (size_t)B * T; i++) {
        tokens[i] = i32_(tk, (size_t)step * B * T + i);
        targets[i] = i32_(tg, (size_t)step * B * T + i);
    }
}

static void read_weights_(const char *name, wgpt_weights *w) {
    char path[700], err[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (wgpt_model_file_read(path, 1, w, err, sizeof err) < 0) fail_msg("%s", err);
}

static wgpt_gpt2 *model_(wgpt_weights *w) {
    read_weights_("model", w);
    const wgpt_gpt2_config want = {.max_seq_len = 32, .vocab_size = V, .padded_vocab_size = 128, .num_layers = 2,
                                   .num_heads = 4, .channels = 64};
    assert_memory_equal(&w->config, &want, sizeof want);
    char err[2048];
    wgpt_gpt2 *m = wgpt_gpt2_create(G, &w->config, B, T, err, sizeof err);
    if (!m) fail_msg("%s", err);
    if (wgpt_gpt2_set_params(m, w->params) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    return m;
}

// max |a - b| and max |b|
static void max_diff_(const float *a, const float *b, size_t n, double *diff, double *scale) {
    *diff = 0, *scale = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > *diff) *diff = d;
        if (fabs(b[i]) > *scale) *scale = fabs(b[i]);
    }
}

static void logits_and_loss_match(void **st) {
    (void)st;
    wgpt_weights w;
    wgpt_gpt2 *m = model_(&w);
    int tokens[B * T], targets[B * T];
    batch_(0, tokens, targets);
    float loss;
    if (wgpt_gpt2_forward(m, tokens, targets, &loss) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    size_t n = (size_t)B * T * V;
    float *got = malloc(n * sizeof *got), *want = floats_("logits", n), *want64 = floats_("logits64", n);
    if (wgpt_gpt2_read_logits(m, got) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    double d, scale, d32, s64, dw64;
    max_diff_(got, want, n, &d, &scale);
    max_diff_(want, want64, n, &d32, &s64);
    max_diff_(got, want64, n, &dw64, &s64);
    float lt = wgpt_st_get_f32(want_("loss"), 0);
    double l64 = f64_(want_("loss64"), 0);
    printf("logits: max |wgpt - torch32| %.3g (bound %.3g), |torch32 - torch64| %.3g, |wgpt - torch64| %.3g; "
           "max |logit| %.3g\n", d, 5e-6 * scale, d32, dw64, scale);
    printf("loss: wgpt %.9g torch32 %.9g torch64 %.9g: |wgpt - torch32| %.3g (bound %.3g)\n", loss, lt, l64,
           fabs(loss - lt), 2e-6 * lt);
    if (d > 5e-6 * scale) fail_msg("logits differ from PyTorch's by %.3g", d);
    assert_true(fabs(loss - lt) <= 2e-6 * lt);
    free(got), free(want), free(want64);
    wgpt_gpt2_free(m);
    wgpt_weights_free(&w);
}

static void gradients_match(void **st) {
    (void)st;
    wgpt_weights w, gw, gw64;
    wgpt_gpt2 *m = model_(&w);
    int tokens[B * T], targets[B * T];
    batch_(0, tokens, targets);
    float loss;
    if (wgpt_gpt2_forward_backward(m, tokens, targets, &loss) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    size_t np = wgpt_gpt2_num_params(&w.config), sizes[WGPT_GPT2_NUM_TENSORS], off = 0;
    float *got = malloc(np * sizeof *got);
    if (wgpt_gpt2_get_grads(m, got) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    read_weights_("grads", &gw);  // PyTorch's gradients, through the same name mapping and transposes
    read_weights_("grads64", &gw64);
    wgpt_gpt2_param_sizes(&w.config, sizes);
    double worst = 0, worst32 = 0;
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; off += sizes[t], t++) {
        double d2 = 0, r2 = 0, e2 = 0, mx = 0, dmax;
        for (size_t i = off; i < off + sizes[t]; i++) {
            d2 += ((double)got[i] - gw.params[i]) * ((double)got[i] - gw.params[i]);
            e2 += ((double)gw.params[i] - gw64.params[i]) * ((double)gw.params[i] - gw64.params[i]);
            r2 += (double)gw.params[i] * gw.params[i];
        }
        max_diff_(got + off, gw.params + off, sizes[t], &dmax, &mx);
        double rel = sqrt(d2 / r2), rel32 = sqrt(e2 / r2);
        printf("grad %-9s ||wgpt - torch32|| / ||torch|| %.3g (torch32 vs torch64 %.3g), max |diff| %.3g of "
               "max |g| %.3g\n", wgpt_weights_tensor_names[t], rel, rel32, dmax, mx);
        if (rel > worst) worst = rel;
        if (rel32 > worst32) worst32 = rel32;
        if (rel > 1e-5) fail_msg("grad %s: relative L2 error %.3g > 1e-5", wgpt_weights_tensor_names[t], rel);
        if (dmax > 1e-5 * mx) fail_msg("grad %s: an element is %.3g off (max |g| %.3g)", wgpt_weights_tensor_names[t], dmax, mx);
    }
    printf("grads: worst relative L2 error %.3g (bound 1e-5; torch32 vs torch64 worst %.3g)\n", worst, worst32);
    free(got);
    wgpt_weights_free(&gw), wgpt_weights_free(&gw64), wgpt_weights_free(&w);
    wgpt_gpt2_free(m);
}

static void adamw_losses_match(void **st) {
    (void)st;
    wgpt_weights w;
    wgpt_gpt2 *m = model_(&w);
    float *hp = floats_("adamw", 6), *want = floats_("losses", STEPS), *want64 = floats_("losses64", STEPS);
    wgpt_adamw_config oc = {hp[0], hp[1], hp[2], hp[3], hp[4], hp[5], 0.0f};
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        int tokens[B * T], targets[B * T];
        batch_(s, tokens, targets);
        wgpt_step_result r;
        if (wgpt_gpt2_train_step(m, tokens, targets, &oc, s + 1, &r) < 0) fail_msg("%s", wgpt_gpt2_error(m));
        double d = fabs((double)r.loss - want[s]);
        printf("step %2d: loss wgpt %.7f torch32 %.7f torch64 %.7f |diff| %.2g (norm %.4f)\n", s + 1, r.loss, want[s],
               want64[s], d, r.grad_norm);
        if (d > worst) worst = d;
        assert_int_equal(r.skipped, 0);
        if (d > 1e-5) fail_msg("step %d: loss %.7f, PyTorch's %.7f", s + 1, r.loss, want[s]);
    }
    printf("AdamW: worst loss difference over %d steps %.3g (bound 1e-5)\n", STEPS, worst);
    free(hp), free(want), free(want64);
    wgpt_gpt2_free(m);
    wgpt_weights_free(&w);
}

// F16/BF16 files: each weight widens to exactly the float PyTorch's .float() gives.
static void half_precisions_widen_like_torch(void **st) {
    (void)st;
    const char *kinds[2] = {"f16", "bf16"};
    for (int k = 0; k < 2; k++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "model_%s.safetensors", kinds[k]);
        snprintf(b, sizeof b, "model_%s_as_f32.safetensors", kinds[k]);
        wgpt_weights lo, hi;
        read_weights_(a, &lo);
        read_weights_(b, &hi);
        assert_memory_equal(&lo.config, &hi.config, sizeof lo.config);
        size_t n = wgpt_gpt2_num_params(&lo.config);
        assert_memory_equal(lo.params, hi.params, n * sizeof(float));
        printf("%s: %s, %zu parameters equal to PyTorch's widening bit for bit\n", kinds[k], lo.format, n);
        wgpt_weights_free(&lo), wgpt_weights_free(&hi);
    }
}

static void export_loads_back_into_torch(void **st) {
    (void)st;
    char in[700], out[700], err[2048], cmd[2400];
    snprintf(in, sizeof in, "%s/model", dir);
    snprintf(out, sizeof out, "%s/exported", dir);
    if (wgpt_export(in, "hf", out, 0, err, sizeof err) < 0) fail_msg("%s", err);
    snprintf(cmd, sizeof cmd, "%s %s/tests/torch_parity.py --out %s --check-export %s", python_(), WGPT_SOURCE_DIR,
             dir, out);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(logits_and_loss_match),
        cmocka_unit_test(gradients_match),
        cmocka_unit_test(adamw_losses_match),
        cmocka_unit_test(half_precisions_widen_like_torch),
        cmocka_unit_test(export_loads_back_into_torch),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
