// gpt2_shape.c: whether the kernels and a device can take a model shape (see
// wgpt_gpt2_check_shape in gpt2.h): checked before any buffer is made, so
// that a shape too large is refused in the model's terms, not a buffer's.
#include <stdarg.h>
#include <stdio.h>

#include "model/attention.h"  // defines: WGPT_ATTENTION_MAX_HS
#include "model/gpt2.h"
#include "util/err.h"

static int fail_(char *err, size_t errlen, int dims, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_(char *err, size_t errlen, int dims, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wgpt_verrf(err, errlen, fmt, ap);
    va_end(ap);
    return dims;
}

static uint64_t aligned_(uint64_t floats) { return (floats + 63) & ~(uint64_t)63; }

int wgpt_gpt2_check_shape(const wgpt_gpt2_config *c, uint32_t B, uint32_t T, uint64_t max_buffer, char *err,
                          size_t errlen) {
    uint64_t L = c->num_layers, C = c->channels, NH = c->num_heads, Vp = c->padded_vocab_size, BT = (uint64_t)B * T;
    if (!L || !NH || !C || C % NH || !c->vocab_size || Vp < c->vocab_size || !B || !T)
        return fail_(err, errlen, WGPT_GPT2_DIM_L | WGPT_GPT2_DIM_C | WGPT_GPT2_DIM_NH | WGPT_GPT2_DIM_B | WGPT_GPT2_DIM_T,
                     "invalid model: L=%llu NH=%llu C=%llu V=%u Vp=%llu with B=%u T=%u (every one >= 1, C a "
                     "multiple of NH, Vp >= V)",
                     (unsigned long long)L, (unsigned long long)NH, (unsigned long long)C, c->vocab_size,
                     (unsigned long long)Vp, B, T);
    if (C / NH > WGPT_ATTENTION_MAX_HS)
        return fail_(err, errlen, WGPT_GPT2_DIM_C | WGPT_GPT2_DIM_NH,
                     "head size C/NH = %llu/%llu = %llu: the attention kernels take at most %u",
                     (unsigned long long)C, (unsigned long long)NH, (unsigned long long)(C / NH),
                     WGPT_ATTENTION_MAX_HS);
    if (T > c->max_seq_len)
        return fail_(err, errlen, WGPT_GPT2_DIM_T, "sequences of T = %u tokens exceed the model's context of %u", T,
                     c->max_seq_len);
    // The kernels index one tensor with u32s.
    if (BT * 4 * C >= (1ull << 32))
        return fail_(err, errlen, WGPT_GPT2_DIM_B | WGPT_GPT2_DIM_T | WGPT_GPT2_DIM_C,
                     "the MLP activations (B x T x 4C = %u x %u x %llu floats) reach 2^32 elements, past the "
                     "kernels' 32-bit indices",
                     B, T, (unsigned long long)(4 * C));
    if (BT * Vp >= (1ull << 32))
        return fail_(err, errlen, WGPT_GPT2_DIM_B | WGPT_GPT2_DIM_T | WGPT_GPT2_DIM_V,
                     "the logits (B x T x Vp = %u x %u x %llu floats) reach 2^32 elements, past the kernels' 32-bit "
                     "indices",
                     B, T, (unsigned long long)Vp);
    if (!max_buffer) return 0;
    // The largest buffers (in exact bytes: a limit and a size a few bytes past it
    // must not both read "4.29 GB"): the parameters (each of 4 copies in training),
    // the logits, and the MLP activations of every layer in one buffer.
    uint64_t params = ((uint64_t)wgpt_gpt2_num_params(c) + 64 * (2 + 12 * L)) * 4;
    if (params > max_buffer)  // mostly the layers' C x C matrices: the vocabulary's share is small
        return fail_(err, errlen, WGPT_GPT2_DIM_L | WGPT_GPT2_DIM_C,
                     "the parameters (%zu floats, %llu bytes padded) exceed the largest buffer the device allows "
                     "(%llu bytes)",
                     wgpt_gpt2_num_params(c), (unsigned long long)params, (unsigned long long)max_buffer);
    // (the logits: a training model holds a chunk of rows, an inference
    // model all of them, checked where it is made: wgpt_gpt2_check_logits)
    uint64_t fch = L * aligned_(BT * 4 * C) * 4;
    if (fch > max_buffer)
        return fail_(err, errlen, WGPT_GPT2_DIM_L | WGPT_GPT2_DIM_B | WGPT_GPT2_DIM_T | WGPT_GPT2_DIM_C,
                     "the MLP activations of all layers (L x B x T x 4C = %llu x %u x %u x %llu floats, %llu "
                     "bytes) exceed the largest buffer the device allows (%llu bytes)",
                     (unsigned long long)L, B, T, (unsigned long long)(4 * C), (unsigned long long)fch,
                     (unsigned long long)max_buffer);
    return 0;
}

int wgpt_gpt2_check_logits(const wgpt_gpt2_config *c, uint32_t B, uint32_t T, uint64_t max_buffer, char *err,
                           size_t errlen) {
    uint64_t Vp = c->padded_vocab_size, logits = aligned_((uint64_t)B * T * Vp) * 4;
    if (max_buffer && logits > max_buffer)
        return fail_(err, errlen, WGPT_GPT2_DIM_B | WGPT_GPT2_DIM_T | WGPT_GPT2_DIM_V,
                     "the logits of an inference model (B x T x Vp = %u x %u x %llu floats, %llu bytes) exceed the "
                     "largest buffer the device allows (%llu bytes)",
                     B, T, (unsigned long long)Vp, (unsigned long long)logits, (unsigned long long)max_buffer);
    return 0;
}
