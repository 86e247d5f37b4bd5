// decode_kernels.c: host side of kernels/09_decode.wgsl and
// kernels/09_decode_attention.wgsl (see decode_kernels.h).
#include "model/decode_kernels.h"

#include <math.h>

#include "model/kernel_params.h"

#define MV_OUTS 8u  // outputs a workgroup of decode_matvec
#define MV_ROWS 8u  // rows a workgroup (1 for the _r1 variants)
#define ATT_MAX_HS 128u

static int added_(wgpt_bind *b) { return b ? 0 : -1; }

int wgpt_decode_embed(wgpt_gpu *g, wgpt_op *op, wgpt_view x, wgpt_view wte, wgpt_view wpe, wgpt_view meta,
                      uint32_t R, uint32_t C, uint32_t T, uint32_t V) {
    // wte's rows in pieces of one binding each (fp32 GPT-2's 154 MB is more than lavapipe binds)
    uint64_t rows = wgpt_view_bytes(wte) / (4ull * C), chunk = wgpt_op_chunk_rows(g, rows, C);
    if (!chunk) return -1;
    for (uint64_t v0 = 0; v0 < rows; v0 += chunk) {
        uint64_t nv = rows - v0 < chunk ? rows - v0 : chunk;
        decode_row_params p = {R, C, T, V, (uint32_t)v0, (uint32_t)nv, 0, 0};
        wgpt_view w = {wte.buf, wte.offset + v0 * C * 4, nv * C * 4};
        wgpt_view v[4] = {x, w, wpe, meta};
        if (!wgpt_op_add1d(g, op, "decode_embed", v, 4, &p, sizeof p, wgpt_groups((uint64_t)R * C))) return -1;
    }
    return 0;
}

int wgpt_decode_take_row(wgpt_gpu *g, wgpt_op *op, wgpt_view dst, wgpt_view src, wgpt_view meta, uint32_t R,
                         uint32_t C) {
    decode_row_params p = {R, C, 0, 0, 0, 0, 0, 0};
    wgpt_view v[3] = {dst, src, meta};
    return added_(wgpt_op_add(g, op, "decode_take_row", v, 3, &p, sizeof p, (uint32_t)wgpt_groups(C), 1, 1));
}

int wgpt_decode_kv_write(wgpt_gpu *g, wgpt_op *op, wgpt_view kc, wgpt_view vc, wgpt_view qkv, wgpt_view meta,
                         uint32_t R, uint32_t C, uint32_t T, int f16) {
    if (f16 && C % 2) return wgpt_gpu_fail(g, "decode_kv_write_f16: C = %u is odd", C);
    decode_row_params p = {R, C, T, 0, 0, 0, 0, 0};
    wgpt_view v[4] = {kc, vc, qkv, meta};
    uint64_t threads = (uint64_t)R * (f16 ? C / 2 : C);
    return added_(wgpt_op_add1d(g, op, f16 ? "decode_kv_write_f16" : "decode_kv_write", v, 4, &p, sizeof p,
                                wgpt_groups(threads)));
}

int wgpt_decode_attention(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view qkv, wgpt_view kc, wgpt_view vc,
                          wgpt_view meta, uint32_t R, uint32_t C, uint32_t NH, uint32_t T, int f16, int write_kv) {
    if (!NH || C % NH || C / NH > ATT_MAX_HS)
        return wgpt_gpu_fail(g, "decode_attention: head size C/NH = %u/%u must be whole and at most %u", C, NH,
                             ATT_MAX_HS);
    if (write_kv && f16 && (C / NH) % 2)
        return wgpt_gpu_fail(g, "decode_attention_f16: storing keys and values needs an even head size, not %u",
                             C / NH);
    decode_attn_params p = {R, C, NH, T, 1.0f / sqrtf((float)(C / NH)), write_kv ? 1u : 0u, 0, 0};
    wgpt_view v[5] = {qkv, kc, vc, out, meta};
    return added_(wgpt_op_add(g, op, f16 ? "decode_attention_f16" : "decode_attention", v, 5, &p, sizeof p, R, NH, 1));
}

int wgpt_decode_residual_layernorm(wgpt_gpu *g, wgpt_op *op, wgpt_view res, wgpt_view out, wgpt_view a, wgpt_view b,
                                   wgpt_view weight, wgpt_view bias, wgpt_view meta, uint32_t R, uint32_t C) {
    decode_ln_params p = {R, C, b.buf ? 1u : 0u, 0};
    if (!b.buf) {
        res = wgpt_gpu_unused_binding(g);
        b = a;
    }
    if (!res.buf) return -1;
    wgpt_view v[7] = {res, out, a, b, weight, bias, meta};
    return added_(wgpt_op_add(g, op, "decode_residual_layernorm", v, 7, &p, sizeof p, R, 1, 1));
}

int wgpt_decode_matvec(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp, wgpt_view w, wgpt_view bias,
                       wgpt_view meta, uint32_t rows, uint32_t k, uint32_t n, int live, int f16, int gelu) {
    if (k % 4) return wgpt_gpu_fail(g, "decode_matvec: k = %u is not a multiple of 4", k);
    int has_bias = bias.buf != NULL;
    if (!has_bias) bias = wgpt_gpu_unused_binding(g);
    if (!bias.buf) return -1;
    uint32_t per = rows == 1 ? 1 : MV_ROWS;
    const char *name = f16 ? (rows == 1 ? "decode_matvec_f16_r1" : "decode_matvec_f16")
                           : (rows == 1 ? "decode_matvec_r1" : "decode_matvec");
    // w's rows (the outputs) in pieces of one binding each
    uint64_t wrow = (uint64_t)k * (f16 ? 2 : 4), chunk = wgpt_op_chunk_rows(g, n, wrow / 4);
    if (!chunk) return -1;
    for (uint64_t o0 = 0; o0 < n; o0 += chunk) {
        uint32_t cn = (uint32_t)(n - o0 < chunk ? n - o0 : chunk);
        decode_matvec_params p = {rows, k, cn, (has_bias ? 1u : 0u) | (live ? 2u : 0u) | (gelu ? 4u : 0u), n, (uint32_t)o0,
                           0, 0};
        wgpt_view wv = {w.buf, w.offset + o0 * wrow, cn * wrow}, bv = bias;
        if (has_bias) bv = (wgpt_view){bias.buf, bias.offset + o0 * 4, cn * 4ull};
        wgpt_view v[5] = {inp, wv, bv, out, meta};
        if (!wgpt_op_add(g, op, name, v, 5, &p, sizeof p, (cn + MV_OUTS - 1) / MV_OUTS, (rows + per - 1) / per, 1))
            return -1;
    }
    return 0;
}
