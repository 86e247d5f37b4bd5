// gpt2_init.c: GPT-2's initialisation on the host, in the reference layout:
// wte, wpe, qkvw, fcw ~ N(0, 0.02); the residual projections attprojw and
// fcprojw ~ N(0, 0.02 / sqrt(2L)); layernorm weights 1; biases 0.
#include <math.h>
#include <stdint.h>

#include "model/gpt2.h"
#include "util/splitmix64.h"


static double normal_(uint64_t *s) {
    double u1 = ((wgpt_splitmix64_next(s) >> 11) + 1) * 0x1p-53, u2 = (wgpt_splitmix64_next(s) >> 11) * 0x1p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void wgpt_gpt2_init_params(const wgpt_gpt2_config *c, float *params, uint64_t seed) {
    size_t sizes[WGPT_GPT2_NUM_TENSORS];
    wgpt_gpt2_param_sizes(c, sizes);
    double resid = 0.02 / sqrt(2.0 * c->num_layers);
    // tensor order: wte wpe ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b fcw fcb fcprojw fcprojb lnfw lnfb
    const double stdev[WGPT_GPT2_NUM_TENSORS] = {0.02, 0.02, -1, 0, 0.02, 0, resid, 0, -1, 0, 0.02, 0, resid, 0, -1, 0};
    uint64_t s = seed;
    float *p = params;
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
        for (size_t i = 0; i < sizes[t]; i++)
            p[i] = stdev[t] > 0 ? (float)(stdev[t] * normal_(&s)) : stdev[t] < 0 ? 1.0f : 0.0f;
        // padded vocabulary rows stay zero: they never receive a gradient
        if (t == 0)
            for (size_t i = (size_t)c->vocab_size * c->channels; i < sizes[t]; i++) p[i] = 0.0f;
        p += sizes[t];
    }
}

wgpt_gpt2_config wgpt_gpt2_124m_config(void) {
    return (wgpt_gpt2_config){.max_seq_len = 1024, .vocab_size = 50257, .padded_vocab_size = 50304,
                              .num_layers = 12, .num_heads = 12, .channels = 768};
}

void wgpt_gpt2_bench_tokens(const wgpt_gpt2_config *c, int *tokens, int *targets, size_t n) {
    uint64_t s = 42;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int)((s >> 33) % c->vocab_size);
    }
    for (size_t i = 0; i < n; i++) targets[i] = tokens[(i + 1) % n];
}

double wgpt_gpt2_flops_per_token(const wgpt_gpt2_config *c, uint32_t T) {
    size_t sizes[WGPT_GPT2_NUM_TENSORS], n = 0;
    wgpt_gpt2_param_sizes(c, sizes);
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) n += sizes[t];
    return 6.0 * (double)n + 6.0 * c->num_layers * c->channels * T;
}
