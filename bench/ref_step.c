// ref_step.c: `wgpt bench`'s training step in the plain C reference (tests/ref),
// on the CPU, single-threaded: the peer that bench/cpu_compare.sh sets beside
// wgpt on lavapipe. Same options and defaults as `wgpt bench`, the same
// parameters (wgpt_gpt2_init_params, seed 1337), the same random tokens and
// the same step: forward, cross-entropy, backward, global-norm clipping at 1.0,
// AdamW (lr 6e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the 2D weights,
// the step number for bias correction). Prints its lines in wgpt bench's format.
//
// Built by `make` as build/bench_ref_step from libref.a (compiled with the
// flags it prints) and src/model/gpt2_init.c; no GPU code, no Dawn.
#include <stdio.h>
#include <stdlib.h>

#include "cli/options.h"
#include "model/gpt2.h"    // defines: wgpt_gpt2_config, wgpt_gpt2_init_params (gpt2_init.c)
#include "ref/gpt2_ref.h"  // defines: ref_gpt2_*, ref_adamw_update
#include "util/clock.h"

#ifndef REF_STEP_CFLAGS
#define REF_STEP_CFLAGS "(unknown)"
#endif

// gpt2_init.c asks for the tensor sizes through the GPU model's layout file,
// which would pull in Dawn; the reference's layout is the same (test_gpt2
// checks the counts agree), so it answers here.
void wgpt_gpt2_param_sizes(const wgpt_gpt2_config *c, size_t sizes[WGPT_GPT2_NUM_TENSORS]) {
    ref_gpt2_config rc = {(int)c->max_seq_len, (int)c->vocab_size, (int)c->padded_vocab_size,
                          (int)c->num_layers,  (int)c->num_heads,  (int)c->channels};
    ref_gpt2_param_sizes(&rc, sizes);
}

static const char USAGE_[] =
    "usage: bench_ref_step [--batch B] [--seq T] [--steps N] [--layers L] [--heads H] [--channels C]\n"
    "                      [--vocab V]\n\n"
    "Times `wgpt bench`'s training step (same options, defaults, parameters and tokens)\n"
    "in the plain C reference of tests/ref on one CPU thread: 2 warm-up steps, then the\n"
    "mean of N timed steps (default 10).\n";

int main(int argc, char **argv) {
    wgpt_gpt2_config c = wgpt_gpt2_124m_config();
    uint32_t B = 4, T = 1024, steps = 10;
    const wgpt_opt opts[] = {
        {"batch", WGPT_OPT_U32, &B, "sequences a step"},
        {"seq", WGPT_OPT_U32, &T, "tokens a sequence"},
        {"steps", WGPT_OPT_U32, &steps, "timed steps"},
        {"layers", WGPT_OPT_U32, &c.num_layers, "transformer blocks"},
        {"heads", WGPT_OPT_U32, &c.num_heads, "attention heads"},
        {"channels", WGPT_OPT_U32, &c.channels, "width"},
        {"vocab", WGPT_OPT_U32, &c.vocab_size, "vocabulary size"},
    };
    int nopts = (int)(sizeof opts / sizeof opts[0]), npos = 0;
    int prc = wgpt_opts_parse(argc, argv, opts, nopts, USAGE_, NULL, 0, &npos);
    if (prc) return prc == 1 ? 0 : 2;
    for (int i = 0; i < nopts; i++)
        if (*(uint32_t *)opts[i].dst == 0) {
            fprintf(stderr, "bench_ref_step: --%s needs a positive number\n", opts[i].name);
            return 2;
        }
    c.padded_vocab_size = (c.vocab_size + 127) / 128 * 128;
    if (T > c.max_seq_len) c.max_seq_len = T;

    printf("device: CPU, the plain C reference (tests/ref), single-threaded\n");
    printf("compiled with: %s\n", REF_STEP_CFLAGS);
    ref_gpt2_config rc = {(int)c.max_seq_len, (int)c.vocab_size, (int)c.padded_vocab_size,
                          (int)c.num_layers,  (int)c.num_heads,  (int)c.channels};
    ref_gpt2 m;
    if (ref_gpt2_init(&m, &rc, (int)B, (int)T) < 0) {
        fprintf(stderr, "bench_ref_step: bad config or out of memory\n");
        return 1;
    }
    size_t np = m.num_params, bt = (size_t)B * T;
    float *mm = calloc(np, sizeof *mm), *vv = calloc(np, sizeof *vv);
    int *tok = malloc(bt * sizeof *tok), *tgt = malloc(bt * sizeof *tgt);
    int rc_exit = 1;
    if (!mm || !vv || !tok || !tgt) {
        fprintf(stderr, "bench_ref_step: out of memory\n");
        goto done;
    }
    wgpt_gpt2_init_params(&c, m.params, 1337);
    wgpt_gpt2_bench_tokens(&c, tok, tgt, bt);  // wgpt bench's tokens
    printf("model: L=%u H=%u C=%u V=%u (padded %u), %zu parameters; batch %u x %u tokens\n", c.num_layers,
           c.num_heads, c.channels, c.vocab_size, c.padded_vocab_size, np, B, T);
    printf("host memory: %.1f MiB parameters+gradients+AdamW, %.1f MiB activations and their gradients\n",
           4.0 * np * sizeof(float) / 1048576.0, 2.0 * m.num_acts * sizeof(float) / 1048576.0);

    const float lr = 6e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f, max_norm = 1.0f;
    static const int decayed[] = {REF_WTE, REF_WPE, REF_QKVW, REF_ATTPROJW, REF_FCW, REF_FCPROJW};
    double t0 = 0;
    for (uint32_t step = 1; step <= steps + 2; step++) {
        if (step == 3) t0 = wgpt_clock_s();
        double ts = wgpt_clock_s();
        float loss = ref_gpt2_forward(&m, tok, tgt);
        ref_gpt2_zero_grad(&m);
        if (ref_gpt2_backward(&m) < 0) {
            fprintf(stderr, "bench_ref_step: step %u: backward refused (loss %g)\n", step, loss);
            goto done;
        }
        float norm = ref_gpt2_clip_grads(&m, max_norm);
        for (int k = 0; k < REF_NUM_PARAM_TENSORS; k++) {
            float w = 0;
            for (size_t i = 0; i < sizeof decayed / sizeof *decayed; i++)
                if (decayed[i] == k) w = wd;
            size_t off = (size_t)(m.param_ptr[k] - m.params);
            ref_adamw_update(m.param_ptr[k], m.grad_ptr[k], mm + off, vv + off, m.param_sizes[k], lr, beta1, beta2,
                             eps, w, (int)step);
        }
        printf("step %3u%s: loss %.4f, grad norm %.3f, %.1f ms\n", step, step <= 2 ? " (warm-up)" : "", loss, norm,
               (wgpt_clock_s() - ts) * 1e3);
        fflush(stdout);
    }
    double ms = (wgpt_clock_s() - t0) * 1e3 / steps;
    double tps = (double)bt / (ms * 1e-3);
    double flops = wgpt_gpt2_flops_per_token(&c, T);
    printf("result: %.1f ms/step, %.0f tokens/s, %.2f TFLOP/s (batch %u, T %u)\n", ms, tps, flops * tps * 1e-12, B,
           T);
    rc_exit = 0;
done:
    free(mm), free(vv), free(tok), free(tgt);
    ref_gpt2_free(&m);
    return rc_exit;
}
