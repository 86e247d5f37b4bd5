// model.c: the reference GPT-2: parameter layout, init, forward and backward.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/gpt2_ref.h"

// ---------------------------------------------------------------------------
// Random numbers: xorshift64* (Vigna) and Box-Muller

void ref_rng_seed(ref_rng *r, uint64_t seed) { r->s = seed ? seed : 0x9E3779B97F4A7C15ull; }

uint64_t ref_rng_u64(ref_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

double ref_rng_uniform(ref_rng *r) { return (double)(ref_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

double ref_rng_normal(ref_rng *r) {
    double u1 = 1.0 - ref_rng_uniform(r);  // (0, 1]: the log stays finite
    double u2 = ref_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586477 * u2);
}

// ---------------------------------------------------------------------------
// Parameter layout

const char *const ref_gpt2_param_names[REF_NUM_PARAM_TENSORS] = {
    "wte",  "wpe",  "ln1w", "ln1b",    "qkvw",    "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw",  "fcb",     "fcprojw", "fcprojb", "lnfw",  "lnfb",
};

void ref_gpt2_param_sizes(const ref_gpt2_config *cfg, size_t s[REF_NUM_PARAM_TENSORS]) {
    size_t Vp = (size_t)cfg->padded_vocab_size, maxT = (size_t)cfg->max_seq_len;
    size_t L = (size_t)cfg->num_layers, C = (size_t)cfg->channels;
    s[REF_WTE] = Vp * C;
    s[REF_WPE] = maxT * C;
    s[REF_LN1W] = L * C;
    s[REF_LN1B] = L * C;
    s[REF_QKVW] = L * 3 * C * C;
    s[REF_QKVB] = L * 3 * C;
    s[REF_ATTPROJW] = L * C * C;
    s[REF_ATTPROJB] = L * C;
    s[REF_LN2W] = L * C;
    s[REF_LN2B] = L * C;
    s[REF_FCW] = L * 4 * C * C;
    s[REF_FCB] = L * 4 * C;
    s[REF_FCPROJW] = L * C * 4 * C;
    s[REF_FCPROJB] = L * C;
    s[REF_LNFW] = C;
    s[REF_LNFB] = C;
}

size_t ref_gpt2_num_params(const ref_gpt2_config *cfg) {
    size_t s[REF_NUM_PARAM_TENSORS], n = 0;
    ref_gpt2_param_sizes(cfg, s);
    for (int i = 0; i < REF_NUM_PARAM_TENSORS; i++) n += s[i];
    return n;
}

// The activation tensors, sizes in the order of the ref_gpt2_acts fields.
static void act_sizes(const ref_gpt2_config *cfg, int B, int T, size_t s[REF_NUM_ACT_TENSORS]) {
    size_t L = (size_t)cfg->num_layers, C = (size_t)cfg->channels, NH = (size_t)cfg->num_heads;
    size_t Vp = (size_t)cfg->padded_vocab_size, BT = (size_t)B * T;
    size_t sizes[REF_NUM_ACT_TENSORS] = {
        BT * C,              // encoded
        L * BT * C,          // ln1
        L * BT,              // ln1_mean
        L * BT,              // ln1_rstd
        L * BT * 3 * C,      // qkv
        L * BT * C,          // atty
        L * BT * NH * T,     // preatt (L, B, NH, T, T)
        L * BT * NH * T,     // att
        L * BT * C,          // attproj
        L * BT * C,          // residual2
        L * BT * C,          // ln2
        L * BT,              // ln2_mean
        L * BT,              // ln2_rstd
        L * BT * 4 * C,      // fch
        L * BT * 4 * C,      // fch_gelu
        L * BT * C,          // fcproj
        L * BT * C,          // residual3
        BT * C,              // lnf
        BT,                  // lnf_mean
        BT,                  // lnf_rstd
        BT * Vp,             // logits
        BT * Vp,             // probs
        BT,                  // losses
    };
    memcpy(s, sizes, sizeof sizes);
}

// Points the fields of a at consecutive pieces of memory.
static void act_point(ref_gpt2_acts *a, float *memory, const size_t s[REF_NUM_ACT_TENSORS]) {
    float **slots[REF_NUM_ACT_TENSORS] = {
        &a->encoded,  &a->ln1,      &a->ln1_mean,  &a->ln1_rstd, &a->qkv,       &a->atty,
        &a->preatt,   &a->att,      &a->attproj,   &a->residual2, &a->ln2,      &a->ln2_mean,
        &a->ln2_rstd, &a->fch,      &a->fch_gelu,  &a->fcproj,   &a->residual3, &a->lnf,
        &a->lnf_mean, &a->lnf_rstd, &a->logits,    &a->probs,    &a->losses,
    };
    for (int i = 0; i < REF_NUM_ACT_TENSORS; i++) {
        *slots[i] = memory;
        memory += s[i];
    }
}

// ---------------------------------------------------------------------------
// Lifetime

int ref_gpt2_init(ref_gpt2 *model, const ref_gpt2_config *config, int B, int T) {
    return ref_gpt2_init_with_params(model, config, B, T, NULL);
}

int ref_gpt2_init_with_params(ref_gpt2 *model, const ref_gpt2_config *cfg, int B, int T, float *params) {
    memset(model, 0, sizeof *model);
    if (cfg->max_seq_len <= 0 || cfg->vocab_size <= 0 || cfg->padded_vocab_size < cfg->vocab_size ||
        cfg->num_layers <= 0 || cfg->num_heads <= 0 || cfg->channels <= 0 || cfg->channels % cfg->num_heads ||
        B <= 0 || T <= 0 || T > cfg->max_seq_len)
        return -1;
    model->config = *cfg;
    model->B = B;
    model->T = T;
    ref_gpt2_param_sizes(cfg, model->param_sizes);
    model->num_params = ref_gpt2_num_params(cfg);
    model->owns_params = params == NULL;
    model->params = params ? params : calloc(model->num_params, sizeof(float));
    model->grads = calloc(model->num_params, sizeof(float));
    size_t as[REF_NUM_ACT_TENSORS];
    act_sizes(cfg, B, T, as);
    for (int i = 0; i < REF_NUM_ACT_TENSORS; i++) model->num_acts += as[i];
    model->acts_memory = calloc(model->num_acts, sizeof(float));
    model->grad_acts_memory = calloc(model->num_acts, sizeof(float));
    model->tokens = calloc((size_t)B * T, sizeof(int));
    model->targets = calloc((size_t)B * T, sizeof(int));
    if (!model->params || !model->grads || !model->acts_memory || !model->grad_acts_memory || !model->tokens ||
        !model->targets) {
        ref_gpt2_free(model);
        return -1;
    }
    size_t off = 0;
    for (int i = 0; i < REF_NUM_PARAM_TENSORS; i++) {
        model->param_ptr[i] = model->params + off;
        model->grad_ptr[i] = model->grads + off;
        off += model->param_sizes[i];
    }
    act_point(&model->acts, model->acts_memory, as);
    act_point(&model->grad_acts, model->grad_acts_memory, as);
    model->mean_loss = -1.0f;
    return 0;
}

void ref_gpt2_free(ref_gpt2 *model) {
    if (model->owns_params) free(model->params);
    free(model->grads);
    free(model->acts_memory);
    free(model->grad_acts_memory);
    free(model->tokens);
    free(model->targets);
    memset(model, 0, sizeof *model);
}

void ref_gpt2_init_params(ref_gpt2 *model, uint64_t seed) {
    ref_rng rng;
    ref_rng_seed(&rng, seed);
    // Residual projections add into the stream 2L times; shrinking them keeps
    // its variance independent of depth (GPT-2 paper, section 2.3).
    double proj_std = 0.02 / sqrt(2.0 * model->config.num_layers);
    for (int i = 0; i < REF_NUM_PARAM_TENSORS; i++) {
        float *p = model->param_ptr[i];
        size_t n = model->param_sizes[i];
        double std = 0.0;
        float fill = 0.0f;
        switch (i) {
        case REF_WTE: case REF_WPE: case REF_QKVW: case REF_FCW: std = 0.02; break;
        case REF_ATTPROJW: case REF_FCPROJW: std = proj_std; break;
        case REF_LN1W: case REF_LN2W: case REF_LNFW: fill = 1.0f; break;
        default: break;  // biases: 0
        }
        for (size_t j = 0; j < n; j++) p[j] = std > 0.0 ? (float)(std * ref_rng_normal(&rng)) : fill;
    }
}

// ---------------------------------------------------------------------------
// Forward

// The pieces of layer l inside the (L, ...) activation tensors.
#define LAYER(ptr, l, per_layer) ((ptr) + (size_t)(l) * (per_layer))

float ref_gpt2_forward(ref_gpt2 *model, const int *tokens, const int *targets) {
    const ref_gpt2_config *cfg = &model->config;
    int B = model->B, T = model->T, C = cfg->channels, NH = cfg->num_heads, V = cfg->vocab_size;
    int Vp = cfg->padded_vocab_size, N = B * T;
    model->has_targets = 0;
    // Bad ids would index wte (or probs) out of bounds: refuse them first.
    for (int i = 0; i < N; i++) {
        if (tokens[i] < 0 || tokens[i] >= V || (targets && (targets[i] < 0 || targets[i] >= V))) {
            model->mean_loss = NAN;
            return NAN;
        }
    }
    memcpy(model->tokens, tokens, sizeof(int) * (size_t)N);
    if (targets) memcpy(model->targets, targets, sizeof(int) * (size_t)N);

    float **p = model->param_ptr;
    ref_gpt2_acts *a = &model->acts;
    size_t NC = (size_t)N * C, NN = (size_t)B * NH * T * T;
    ref_encoder_forward(a->encoded, tokens, p[REF_WTE], p[REF_WPE], B, T, C);
    for (int l = 0; l < cfg->num_layers; l++) {
        const float *x = l == 0 ? a->encoded : LAYER(a->residual3, l - 1, NC);  // (N, C)
        float *ln1 = LAYER(a->ln1, l, NC), *qkv = LAYER(a->qkv, l, 3 * NC);
        float *atty = LAYER(a->atty, l, NC), *attproj = LAYER(a->attproj, l, NC);
        float *res2 = LAYER(a->residual2, l, NC), *ln2 = LAYER(a->ln2, l, NC);
        float *fch = LAYER(a->fch, l, 4 * NC), *fch_gelu = LAYER(a->fch_gelu, l, 4 * NC);
        float *fcproj = LAYER(a->fcproj, l, NC), *res3 = LAYER(a->residual3, l, NC);
        size_t c1 = (size_t)l * C;
        // x = x + attproj(attention(ln1(x)))
        ref_layernorm_forward(ln1, LAYER(a->ln1_mean, l, N), LAYER(a->ln1_rstd, l, N), x, p[REF_LN1W] + c1,
                              p[REF_LN1B] + c1, N, C);
        ref_matmul_forward(qkv, ln1, p[REF_QKVW] + c1 * 3 * C, p[REF_QKVB] + 3 * c1, N, C, 3 * C);
        ref_attention_forward(atty, LAYER(a->preatt, l, NN), LAYER(a->att, l, NN), qkv, B, T, C, NH);
        ref_matmul_forward(attproj, atty, p[REF_ATTPROJW] + c1 * C, p[REF_ATTPROJB] + c1, N, C, C);
        ref_residual_forward(res2, x, attproj, NC);
        // x = x + fcproj(gelu(fc(ln2(x))))
        ref_layernorm_forward(ln2, LAYER(a->ln2_mean, l, N), LAYER(a->ln2_rstd, l, N), res2, p[REF_LN2W] + c1,
                              p[REF_LN2B] + c1, N, C);
        ref_matmul_forward(fch, ln2, p[REF_FCW] + c1 * 4 * C, p[REF_FCB] + 4 * c1, N, C, 4 * C);
        ref_gelu_forward(fch_gelu, fch, 4 * NC);
        ref_matmul_forward(fcproj, fch_gelu, p[REF_FCPROJW] + c1 * 4 * C, p[REF_FCPROJB] + c1, N, 4 * C, C);
        ref_residual_forward(res3, res2, fcproj, NC);
    }
    const float *xL = LAYER(a->residual3, cfg->num_layers - 1, NC);
    ref_layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, xL, p[REF_LNFW], p[REF_LNFB], N, C);
    // Tied embedding: logits = lnf @ wte^T over all Vp rows; the loss reads only V.
    ref_matmul_forward(a->logits, a->lnf, p[REF_WTE], NULL, N, C, Vp);
    ref_softmax_crossentropy_forward(targets ? a->losses : NULL, a->probs, a->logits, targets, B, T, V, Vp);
    if (!targets) {
        model->mean_loss = -1.0f;
        return -1.0f;
    }
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += a->losses[i];
    model->mean_loss = (float)(sum / N);
    model->has_targets = 1;
    return model->mean_loss;
}

// ---------------------------------------------------------------------------
// Backward

void ref_gpt2_zero_grad(ref_gpt2 *model) { memset(model->grads, 0, sizeof(float) * model->num_params); }

int ref_gpt2_backward(ref_gpt2 *model) {
    if (!model->has_targets) return -1;
    const ref_gpt2_config *cfg = &model->config;
    int B = model->B, T = model->T, C = cfg->channels, NH = cfg->num_heads, V = cfg->vocab_size;
    int Vp = cfg->padded_vocab_size, N = B * T, L = cfg->num_layers;
    size_t NC = (size_t)N * C, NN = (size_t)B * NH * T * T;
    float **p = model->param_ptr, **g = model->grad_ptr;
    ref_gpt2_acts *a = &model->acts, *d = &model->grad_acts;
    // Activation gradients are scratch of this pass; parameter gradients accumulate.
    memset(model->grad_acts_memory, 0, sizeof(float) * model->num_acts);

    // The loss is the mean over N positions.
    for (int i = 0; i < N; i++) d->losses[i] = 1.0f / (float)N;
    ref_crossentropy_softmax_backward(d->logits, d->losses, a->probs, model->targets, B, T, V, Vp);
    ref_matmul_backward(d->lnf, g[REF_WTE], NULL, d->logits, a->lnf, p[REF_WTE], N, C, Vp);
    ref_layernorm_backward(LAYER(d->residual3, L - 1, NC), g[REF_LNFW], g[REF_LNFB], d->lnf,
                           LAYER(a->residual3, L - 1, NC), p[REF_LNFW], a->lnf_mean, a->lnf_rstd, N, C);
    for (int l = L - 1; l >= 0; l--) {
        const float *x = l == 0 ? a->encoded : LAYER(a->residual3, l - 1, NC);
        float *dx = l == 0 ? d->encoded : LAYER(d->residual3, l - 1, NC);
        size_t c1 = (size_t)l * C;
        // x3 = x2 + fcproj(gelu(fc(ln2(x2))))
        ref_residual_backward(LAYER(d->residual2, l, NC), LAYER(d->fcproj, l, NC), LAYER(d->residual3, l, NC), NC);
        ref_matmul_backward(LAYER(d->fch_gelu, l, 4 * NC), g[REF_FCPROJW] + c1 * 4 * C, g[REF_FCPROJB] + c1,
                            LAYER(d->fcproj, l, NC), LAYER(a->fch_gelu, l, 4 * NC), p[REF_FCPROJW] + c1 * 4 * C, N,
                            4 * C, C);
        ref_gelu_backward(LAYER(d->fch, l, 4 * NC), LAYER(a->fch, l, 4 * NC), LAYER(d->fch_gelu, l, 4 * NC), 4 * NC);
        ref_matmul_backward(LAYER(d->ln2, l, NC), g[REF_FCW] + c1 * 4 * C, g[REF_FCB] + 4 * c1,
                            LAYER(d->fch, l, 4 * NC), LAYER(a->ln2, l, NC), p[REF_FCW] + c1 * 4 * C, N, C, 4 * C);
        ref_layernorm_backward(LAYER(d->residual2, l, NC), g[REF_LN2W] + c1, g[REF_LN2B] + c1, LAYER(d->ln2, l, NC),
                               LAYER(a->residual2, l, NC), p[REF_LN2W] + c1, LAYER(a->ln2_mean, l, N),
                               LAYER(a->ln2_rstd, l, N), N, C);
        // x2 = x + attproj(attention(ln1(x)))
        ref_residual_backward(dx, LAYER(d->attproj, l, NC), LAYER(d->residual2, l, NC), NC);
        ref_matmul_backward(LAYER(d->atty, l, NC), g[REF_ATTPROJW] + c1 * C, g[REF_ATTPROJB] + c1,
                            LAYER(d->attproj, l, NC), LAYER(a->atty, l, NC), p[REF_ATTPROJW] + c1 * C, N, C, C);
        ref_attention_backward(LAYER(d->qkv, l, 3 * NC), LAYER(d->preatt, l, NN), LAYER(d->att, l, NN),
                               LAYER(d->atty, l, NC), LAYER(a->qkv, l, 3 * NC), LAYER(a->att, l, NN), B, T, C, NH);
        ref_matmul_backward(LAYER(d->ln1, l, NC), g[REF_QKVW] + c1 * 3 * C, g[REF_QKVB] + 3 * c1,
                            LAYER(d->qkv, l, 3 * NC), LAYER(a->ln1, l, NC), p[REF_QKVW] + c1 * 3 * C, N, C, 3 * C);
        ref_layernorm_backward(dx, g[REF_LN1W] + c1, g[REF_LN1B] + c1, LAYER(d->ln1, l, NC), x, p[REF_LN1W] + c1,
                               LAYER(a->ln1_mean, l, N), LAYER(a->ln1_rstd, l, N), N, C);
    }
    ref_encoder_backward(g[REF_WTE], g[REF_WPE], d->encoded, model->tokens, B, T, C);
    return 0;
}
