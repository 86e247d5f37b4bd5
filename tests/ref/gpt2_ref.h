// gpt2_ref.h: the plain C reference of the GPT-2 math that the GPU kernels are
// tested against. No GPU code; float32 storage, double accumulators wherever a
// sum runs over a long axis, so the reference is the more accurate side of every
// comparison.
//
// Conventions (as in llm.c):
//  - Shapes are given in comments, row-major, last index fastest: (B, T, C).
//  - N = B*T is the number of token positions; C the channels; OC output channels.
//  - Every backward ACCUMULATES (+=) into its gradient buffers, so callers zero
//    them first (ref_gpt2_backward does this for the activation gradients).
//  - Layer functions assume valid input (token ids in range, C % NH == 0);
//    only ref_gpt2_forward checks its token ids.
#ifndef WGPT_REF_GPT2_REF_H
#define WGPT_REF_GPT2_REF_H

#include <stddef.h>
#include <stdint.h>

#define REF_LAYERNORM_EPS 1e-5

// ---------------------------------------------------------------------------
// Layers (layers.c, attention.c)

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
// out (B,T,C), tokens (B,T), wte (Vp,C), wpe (>=T,C)
void ref_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C);
// dwte (Vp,C) and dwpe (>=T,C) += ; dout (B,T,C)
void ref_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C);

// out = (inp - mean) * rstd * weight + bias over each row of C, eps REF_LAYERNORM_EPS
// (biased variance). out, inp (N,C); mean, rstd (N) are saved for the backward.
void ref_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                           const float *bias, int N, int C);
// dinp (N,C), dweight (C), dbias (C) += ; dout, inp (N,C); mean, rstd (N) from the forward
void ref_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, const float *mean, const float *rstd, int N, int C);

// IEEE binary16 (f16.c): round to nearest even, +-inf past the range, NaN kept.
uint16_t ref_f16_from_f32(float f);
float ref_f32_from_f16(uint16_t h);

// out = inp @ weight^T + bias: out (N,OC), inp (N,C), weight (OC,C), bias (OC) or NULL
void ref_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);
// dinp (N,C), dweight (OC,C), dbias (OC, or NULL: skipped) += ; dout (N,OC)
void ref_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                         const float *weight, int N, int C, int OC);

// The KV-cache decoder (decode.c). out (rows, n) = inp (rows, k) @ w (n, k)^T
// (+ bias), inp rounded to f16 first where round16.
void ref_decode_matvec(float *out, const float *inp, const float *w, const float *bias, int rows, int k, int n,
                       int round16);
// out (rows, C): row r (q in qkv (rows, 3C) at [0, C)) attends to positions
// 0..pos[r] of slot slot[r] of the caches kc, vc (slots, T, C); pos < 4096.
void ref_decode_attention(float *out, const float *qkv, const float *kc, const float *vc, const int *slot,
                          const int *pos, int rows, int C, int NH, int T);

// Causal multi-head self-attention, scale 1/sqrt(hs), hs = C/NH.
// qkv (B,T,3C) holds [q | k | v] along the last axis; head h uses columns
// h*hs..(h+1)*hs of each of the three. out (B,T,C) has head h at h*hs..(h+1)*hs.
// preatt (B,NH,T,T) = scale * q.k, att (B,NH,T,T) = its softmax over t2 <= t;
// masked entries (t2 > t) are written as 0 in both.
void ref_attention_forward(float *out, float *preatt, float *att, const float *qkv, int B, int T, int C, int NH);
// dqkv (B,T,3C) += ; dpreatt, datt (B,NH,T,T) += the gradients of preatt and att
// (outputs for inspection only: their previous contents do not affect dqkv).
// dout (B,T,C); qkv, att from the forward.
void ref_attention_backward(float *dqkv, float *dpreatt, float *datt, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH);

// GELU, tanh approximation: 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))). out, inp (n)
void ref_gelu_forward(float *out, const float *inp, size_t n);
// dinp (n) += gelu'(inp) * dout
void ref_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);

// out = a + b (n); the backward: da += dout, db += dout
void ref_residual_forward(float *out, const float *a, const float *b, size_t n);
void ref_residual_backward(float *da, float *db, const float *dout, size_t n);

// probs (B,T,Vp) = softmax of logits (B,T,Vp) over the first V entries of each
// row; probs[V..Vp-1] = 0 and logits[V..Vp-1] are never read (they may hold
// anything, NaN included). losses (B,T) = -log probs[target]; targets and
// losses may both be NULL, then only probs are computed.
void ref_softmax_crossentropy_forward(float *losses, float *probs, const float *logits, const int *targets, int B,
                                      int T, int V, int Vp);
// dlogits (B,T,Vp) += (probs - onehot(target)) * dlosses for the first V columns;
// columns V..Vp-1 are not touched. dlosses (B,T).
void ref_crossentropy_softmax_backward(float *dlogits, const float *dlosses, const float *probs, const int *targets,
                                       int B, int T, int V, int Vp);

// ---------------------------------------------------------------------------
// AdamW and gradient clipping (adamw.c)

// One AdamW step over n elements, t the 1-based step number:
//   m = beta1*m + (1-beta1)*g;  v = beta2*v + (1-beta2)*g^2
//   mhat = m/(1-beta1^t);  vhat = v/(1-beta2^t)
//   param -= lr * (mhat/(sqrt(vhat)+eps) + weight_decay*param)   (decoupled decay)
// Pass weight_decay 0 for the tensors that should not decay.
void ref_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int t);

// sqrt(sum of squares) of x (n), accumulated in double.
double ref_l2_norm(const float *x, size_t n);

// ---------------------------------------------------------------------------
// Random numbers (model.c): xorshift64* for bits, Box-Muller for normals.
// Documented so a test can reproduce it; the GPU side need not use it (tests
// upload the same parameter array to both sides).
typedef struct {
    uint64_t s;
} ref_rng;
// seed 0 is replaced by a fixed odd constant (xorshift must not start at 0).
void ref_rng_seed(ref_rng *r, uint64_t seed);
// s ^= s>>12; s ^= s<<25; s ^= s>>27; return s * 0x2545F4914F6CDD1D
uint64_t ref_rng_u64(ref_rng *r);
// uniform in [0,1) with 53 random bits: (u64 >> 11) * 2^-53
double ref_rng_uniform(ref_rng *r);
// standard normal: z = sqrt(-2 ln(1-u1)) * cos(2 pi u2), two uniforms per normal
// (the sine half is dropped, so every draw costs exactly two uniforms).
double ref_rng_normal(ref_rng *r);

// ---------------------------------------------------------------------------
// The GPT-2 model (model.c)

typedef struct {
    int max_seq_len;        // maxT: rows of wpe
    int vocab_size;         // V: valid token ids are [0, V)
    int padded_vocab_size;  // Vp >= V: rows of wte and columns of the logits
    int num_layers;         // L
    int num_heads;          // NH, must divide C
    int channels;           // C
} ref_gpt2_config;

// The parameter tensors, in their fixed order inside the one parameter array.
enum {
    REF_WTE,       // (Vp, C)
    REF_WPE,       // (maxT, C)
    REF_LN1W,      // (L, C)
    REF_LN1B,      // (L, C)
    REF_QKVW,      // (L, 3C, C)
    REF_QKVB,      // (L, 3C)
    REF_ATTPROJW,  // (L, C, C)
    REF_ATTPROJB,  // (L, C)
    REF_LN2W,      // (L, C)
    REF_LN2B,      // (L, C)
    REF_FCW,       // (L, 4C, C)
    REF_FCB,       // (L, 4C)
    REF_FCPROJW,   // (L, C, 4C)
    REF_FCPROJB,   // (L, C)
    REF_LNFW,      // (C)
    REF_LNFB,      // (C)
};
#define REF_NUM_PARAM_TENSORS 16
extern const char *const ref_gpt2_param_names[REF_NUM_PARAM_TENSORS];  // "wte", "wpe", "ln1w", ...

void ref_gpt2_param_sizes(const ref_gpt2_config *config, size_t sizes[REF_NUM_PARAM_TENSORS]);
size_t ref_gpt2_num_params(const ref_gpt2_config *config);

// Activations of one forward pass for (B, T); also used for their gradients.
#define REF_NUM_ACT_TENSORS 23
typedef struct {
    float *encoded;    // (B, T, C)
    float *ln1;        // (L, B, T, C)
    float *ln1_mean;   // (L, B, T)
    float *ln1_rstd;   // (L, B, T)
    float *qkv;        // (L, B, T, 3C)
    float *atty;       // (L, B, T, C)   attention output, before the projection
    float *preatt;     // (L, B, NH, T, T)
    float *att;        // (L, B, NH, T, T)
    float *attproj;    // (L, B, T, C)
    float *residual2;  // (L, B, T, C)   x + attproj
    float *ln2;        // (L, B, T, C)
    float *ln2_mean;   // (L, B, T)
    float *ln2_rstd;   // (L, B, T)
    float *fch;        // (L, B, T, 4C)
    float *fch_gelu;   // (L, B, T, 4C)
    float *fcproj;     // (L, B, T, C)
    float *residual3;  // (L, B, T, C)   block output
    float *lnf;        // (B, T, C)
    float *lnf_mean;   // (B, T)
    float *lnf_rstd;   // (B, T)
    float *logits;     // (B, T, Vp)
    float *probs;      // (B, T, Vp)
    float *losses;     // (B, T)
} ref_gpt2_acts;

typedef struct {
    ref_gpt2_config config;
    int B, T;  // the batch shape the activations are sized for
    size_t param_sizes[REF_NUM_PARAM_TENSORS];
    size_t num_params;
    float *params;                             // (num_params), tensors in enum order
    float *param_ptr[REF_NUM_PARAM_TENSORS];   // views into params
    float *grads;                              // (num_params), same layout
    float *grad_ptr[REF_NUM_PARAM_TENSORS];
    size_t num_acts;
    float *acts_memory, *grad_acts_memory;     // (num_acts) each
    ref_gpt2_acts acts;                        // views into acts_memory
    ref_gpt2_acts grad_acts;                   // views into grad_acts_memory
    int *tokens, *targets;                     // (B, T) copies of the last forward's input
    float mean_loss;  // last forward: the loss, -1 without targets, NAN for bad token ids
    int has_targets;  // the last forward had valid targets, so a backward may follow
    int owns_params;
} ref_gpt2;

// Allocates params (zeroed), grads (zeroed) and activations for batches of
// (B, T), T <= max_seq_len. Returns 0, or -1 for a bad config or no memory
// (then the model holds nothing and ref_gpt2_free is harmless).
int ref_gpt2_init(ref_gpt2 *model, const ref_gpt2_config *config, int B, int T);
// The same, using the caller's parameter array of ref_gpt2_num_params floats,
// which the model neither copies nor frees.
int ref_gpt2_init_with_params(ref_gpt2 *model, const ref_gpt2_config *config, int B, int T, float *params);
void ref_gpt2_free(ref_gpt2 *model);

// GPT-2-style init from ref_rng(seed): tensors in enum order, elements in
// memory order, one normal draw per element of the random tensors only:
// wte, wpe, qkvw, fcw ~ N(0, 0.02); attprojw, fcprojw ~ N(0, 0.02/sqrt(2L))
// (residual projections); layernorm weights 1; all biases 0.
void ref_gpt2_init_params(ref_gpt2 *model, uint64_t seed);

// Forward pass over tokens (B,T). With targets (B,T) returns the mean
// cross-entropy over all B*T positions; with targets NULL computes logits and
// probs only and returns -1. Any token or target outside [0, V) returns NAN
// before anything is read through it.
float ref_gpt2_forward(ref_gpt2 *model, const int *tokens, const int *targets);
void ref_gpt2_zero_grad(ref_gpt2 *model);
// Gradients of the mean loss of the last forward, ADDED to model->grads.
// Returns 0, or -1 if the last forward had no (valid) targets.
int ref_gpt2_backward(ref_gpt2 *model);
// Global L2 norm of all gradients (double accumulation).
float ref_gpt2_grad_norm(const ref_gpt2 *model);
// If the norm exceeds max_norm, scales every gradient by max_norm/norm.
// Returns the norm before clipping.
float ref_gpt2_clip_grads(ref_gpt2 *model, float max_norm);

#endif
