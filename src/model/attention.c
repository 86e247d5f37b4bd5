// attention.c: host side of kernels/04_attention.wgsl (see attention.h and
// docs/kernels/04_attention.md).
#include "model/attention.h"
#include "model/kernel_params.h"  // the kernels' params structs

#include <math.h>
#include <stdio.h>

#include "model/variant.h"

// Query (and key) rows per workgroup: the fast kernels (ATTN_FAST_BLOCK, head
// sizes up to ATTN_FAST_MAX_HS that are multiples of 4: they read vec4s), the
// generic ones (ATTN_BLOCK, any head size) and the flat CPU twins
// (ATTN_FLAT_BLOCK). Must match FB, FHS, BQ and AF_WG in the kernels.
#define ATTN_FAST_BLOCK 64u
#define ATTN_FAST_MAX_HS 64u
#define ATTN_BLOCK 32u
#define ATTN_FLAT_BLOCK 16u
// The subgroup-matrix kernels (04_attention_sgm.wgsl): head size, rows a
// workgroup and the workgroup memory they declare. Must match HS, RB and
// the tiles there.
#define ATTN_SGM_HS 64u
#define ATTN_SGM_BLOCK 64u
#define ATTN_SGM_STORAGE WGPT_ATTENTION_SGM_STORAGE

// The kernel sets, all with the same bindings and params: the fast flash
// kernels, their 48 KiB twins (one more 16 KiB tile of workgroup memory,
// where the device has it: the H200; WebGPU guarantees only 16 KiB, lavapipe
// offers 32 KiB), the generic ones (other head sizes) and the flat CPU twins.
typedef enum attn_set {
    ATTN_FAST,
    ATTN_FAST_48K,
    ATTN_GENERIC,
    ATTN_FLAT,
    ATTN_FLAT4,
    ATTN_FLATH,
    ATTN_SGM,
    ATTN_NSETS
} attn_set;
typedef enum attn_pass { ATTN_FORWARD, ATTN_DQ, ATTN_DKDV, ATTN_NPASSES } attn_pass;

// Every kernel of a set, by full name (a grep for a kernel finds its use here).
static const char *const ATTN_KERNEL[ATTN_NSETS][ATTN_NPASSES] = {
    [ATTN_FAST] = {"attention_forward", "attention_backward_dq", "attention_backward_dkdv"},
    [ATTN_FAST_48K] = {"attention_forward_48k", "attention_backward_dq_48k", "attention_backward_dkdv_48k"},
    [ATTN_GENERIC] = {"attention_forward_generic", "attention_backward_dq_generic",
                      "attention_backward_dkdv_generic"},
    [ATTN_FLAT] = {"attention_forward_flat", "attention_backward_dq_flat", "attention_backward_dkdv_flat"},
    [ATTN_FLAT4] = {"attention_forward_flat4", "attention_backward_dq_flat4", "attention_backward_dkdv_flat4"},
    // + "_hs<head size>" (attn_kernel): one pipeline a head size.
    [ATTN_FLATH] = {"attention_forward_flath", "attention_backward_dq_flath", "attention_backward_dkdv_flath"},
    [ATTN_SGM] = {"attention_sgm_forward", "attention_sgm_backward_dq", "attention_sgm_backward_dkdv"},
};

// Workgroup memory the 48 KiB twins use (three 16 KiB tiles).
#define ATTN_48K_STORAGE 49152u

int wgpt_attention_uses_sgm(const wgpt_gpu *g, uint32_t hs) {
    const wgpt_gpu_info *i = wgpt_gpu_get_info(g);
    if (!i->has_subgroup_matrix || i->sgm_config < 0 || hs != ATTN_SGM_HS ||
        i->max_workgroup_storage < ATTN_SGM_STORAGE)
        return 0;
    // The kernel is written for one fragment shape (its const_asserts): 16 x 16
    // by 16 x 8, in subgroups of 32 (4 or 8 threads a score row), or of 8 or 16
    // where the matrices are emulated (sgm_emulate.h: lavapipe's 8 lanes, for
    // the tests). Another shape keeps the f32 kernels instead of failing to compile.
    const wgpt_matrix_config *c = &i->matrix_configs[i->sgm_config];
    int sg_ok = c->sg_max == 32 || (i->sgm_emulated && (c->sg_max == 8 || c->sg_max == 16));
    return c->m == 16 && c->k == 16 && c->n == 8 && sg_ok;
}

// Head sizes with a *_flath_hs<hs> variant in the kernel file (at most
// AF_MAX_HS4 = 16 vec4s: their private arrays).
static int attn_flath_hs(uint32_t hs) { return hs == 16 || hs == 24 || hs == 32 || hs == 48 || hs == 64; }

// The flat CPU twins (variant.h) pass rows between the lanes of groups of 8
// with subgroup shuffles: they need subgroups of a multiple of 8 lanes. Their
// flat4 twins read the head as vec4s: head sizes that are multiples of 4; the
// flath ones fix the head size in the pipeline, for the sizes listed above.
static attn_set attn_pick(const wgpt_gpu *g, uint32_t hs, int f16) {
    if (f16 && wgpt_attention_uses_sgm(g, hs)) return ATTN_SGM;
    if (wgpt_kernel_variant_cpu(g) && wgpt_gpu_get_info(g)->subgroup_min >= 8)
        return attn_flath_hs(hs) ? ATTN_FLATH : hs % 4 ? ATTN_FLAT : ATTN_FLAT4;
    if (hs > ATTN_FAST_MAX_HS || hs % 4) return ATTN_GENERIC;
    return wgpt_gpu_get_info(g)->max_workgroup_storage >= ATTN_48K_STORAGE ? ATTN_FAST_48K : ATTN_FAST;
}

// Workgroups along T: query (key) blocks of the kernels in use.
static uint32_t attn_blocks(attn_set set, uint32_t T) {
    uint32_t rows = set == ATTN_FAST || set == ATTN_FAST_48K ? ATTN_FAST_BLOCK
                    : set == ATTN_SGM                        ? ATTN_SGM_BLOCK
                    : set == ATTN_FLAT || set == ATTN_FLAT4 || set == ATTN_FLATH ? ATTN_FLAT_BLOCK
                                                                                 : ATTN_BLOCK;
    return (T + rows - 1) / rows;
}

// The kernel of a set and pass for head size hs, in buf.
static const char *attn_kernel(attn_set set, attn_pass pass, uint32_t hs, char *buf, size_t cap) {
    if (set != ATTN_FLATH) return ATTN_KERNEL[set][pass];
    snprintf(buf, cap, "%s_hs%u", ATTN_KERNEL[set][pass], hs);
    return buf;
}

// Checks the shape and the grid the kernels need; fills the params.
static int attn_setup(wgpt_gpu *g, const char *fn, attn_params *p, uint32_t B, uint32_t T, uint32_t C, uint32_t NH,
                      int f16) {
    if (!B || !T || !C || !NH || C % NH)
        return wgpt_gpu_fail(g, "%s: bad shape B=%u T=%u C=%u NH=%u (all > 0, C a multiple of NH)", fn, B, T, C, NH);
    uint32_t hs = C / NH;
    if (hs > WGPT_ATTENTION_MAX_HS)
        return wgpt_gpu_fail(g, "%s: head size C/NH = %u; the kernels handle at most %u", fn, hs,
                              WGPT_ATTENTION_MAX_HS);
    if (f16 && !wgpt_attention_uses_sgm(g, hs))
        return wgpt_gpu_fail(g, "%s: the f16 kernels need head size %u, %u bytes of workgroup memory and f16 "
                                 "subgroup matrices of 16x16x8 in subgroups of 32 (8 or 16 emulated) (hs = %u on "
                                 "'%s'; see wgpt_attention_uses_sgm)",
                              fn, ATTN_SGM_HS, ATTN_SGM_STORAGE, hs, wgpt_gpu_get_info(g)->name);
    uint32_t blocks = attn_blocks(attn_pick(g, hs, f16), T);
    if (blocks > WGPT_MAX_WG_DIM || NH > WGPT_MAX_WG_DIM || B > WGPT_MAX_WG_DIM)
        return wgpt_gpu_fail(g, "%s: grid (%u, %u, %u) exceeds %u workgroups a dimension", fn, blocks, NH, B,
                              WGPT_MAX_WG_DIM);
    // Every index the kernels form is a u32: the largest tensor must stay below 2^32 floats.
    if ((uint64_t)B * T * 3u * C >= (1ull << 32))
        return wgpt_gpu_fail(g, "%s: qkv of %llu floats is past u32 indexing", fn,
                              (unsigned long long)B * T * 3u * C);
    *p = (attn_params){B, T, C, NH, hs, (float)(1.0 / sqrt((double)hs))};
    return 0;
}

// Trims v to `n` values of `width` bytes (4: f32, 2: f16), refusing one too
// small or past one binding.
static int attn_view_w(wgpt_gpu *g, const char *fn, const char *name, const char *shape, wgpt_view *v, uint64_t n,
                       uint64_t width) {
    uint64_t need = n * width;
    if (!v->buf) return wgpt_gpu_fail(g, "%s: %s %s has no buffer", fn, name, shape);
    uint64_t have = wgpt_view_bytes(*v);
    if (have < need)
        return wgpt_gpu_fail(g, "%s: %s %s needs %llu bytes; the view has %llu", fn, name, shape,
                              (unsigned long long)need, (unsigned long long)have);
    uint64_t max = wgpt_gpu_get_info(g)->max_storage_binding;
    if (need > max)
        return wgpt_gpu_fail(g, "%s: %s %s is %llu bytes; this device binds at most %llu "
                                 "(maxStorageBufferBindingSize) and attention does not split",
                              fn, name, shape, (unsigned long long)need, (unsigned long long)max);
    v->size = need;
    return 0;
}

static int attn_view(wgpt_gpu *g, const char *fn, const char *name, const char *shape, wgpt_view *v,
                     uint64_t floats) {
    return attn_view_w(g, fn, name, shape, v, floats, 4);
}

// WebGPU validates usage per buffer, not per range: a buffer bound writable in
// a dispatch may not be bound read-only in it too, even at disjoint bytes.
static int attn_apart(wgpt_gpu *g, const char *fn, const char *wname, wgpt_view w, const char *rname, wgpt_view r) {
    if (w.buf != r.buf) return 0;
    return wgpt_gpu_fail(g, "%s: %s and %s are in the same buffer; a written tensor needs a buffer that the "
                             "same dispatch does not read (WebGPU usage rule)",
                          fn, wname, rname);
}

// Drops the steps appended since n0 (a failed call leaves the op as it was).
static int attn_undo(wgpt_op *op, int n0) {
    for (int i = n0; i < op->n; i++) wgpt_bind_free(op->steps[i].bind);
    op->n = n0;
    return -1;
}

// f16: out in f16 and its transpose out_t (C, B T) in f16 as well.
static int forward_(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view out_t, wgpt_view lse, wgpt_view qkv,
                    uint32_t B, uint32_t T, uint32_t C, uint32_t NH, int f16) {
    static const char fn[] = "attention forward";
    attn_params p;
    if (attn_setup(g, fn, &p, B, T, C, NH, f16) < 0) return -1;
    if (f16 && T % 2)
        return wgpt_gpu_fail(g, "%s: T = %u; the f16 kernel writes its transposed output a pair of tokens at a "
                                 "time and needs T even", fn, T);
    uint64_t BT = (uint64_t)B * T;
    if (attn_view_w(g, fn, "out", "(B, T, C)", &out, BT * C, f16 ? 2 : 4) < 0 ||
        (f16 && attn_view_w(g, fn, "out_t", "(C, B T)", &out_t, BT * C, 2) < 0) ||
        attn_view(g, fn, "lse", "(B, NH, T)", &lse, BT * NH) < 0 ||
        attn_view_w(g, fn, "qkv", "(B, T, 3C)", &qkv, BT * 3 * C, f16 ? 2 : 4) < 0)
        return -1;
    if (attn_apart(g, fn, "out", out, "qkv", qkv) < 0 || attn_apart(g, fn, "lse", lse, "qkv", qkv) < 0 ||
        (f16 && attn_apart(g, fn, "out_t", out_t, "qkv", qkv) < 0))
        return -1;
    wgpt_view v[4] = {out, lse, qkv, out_t};
    attn_set set = attn_pick(g, p.hs, f16);
    char name[64];
    if (!wgpt_op_add(g, op, attn_kernel(set, ATTN_FORWARD, p.hs, name, sizeof name), v, f16 ? 4 : 3, &p, sizeof p,
                     attn_blocks(set, T), NH, B))
        return -1;
    return 0;
}

uint64_t wgpt_attention_ds_bytes(uint32_t B, uint32_t T, uint32_t NH) {
    uint64_t nb = (T + ATTN_SGM_BLOCK - 1) / ATTN_SGM_BLOCK;
    return (uint64_t)B * NH * (nb * (nb + 1) / 2) * ATTN_SGM_BLOCK * ATTN_SGM_BLOCK * 2;
}

// f16 with ds: dkdv writes dS^T to ds, and dq multiplies it (the _ds kernels,
// dkdv first); else each recomputes the scores (ds a stand-in).
static int backward_(wgpt_gpu *g, wgpt_op *op, wgpt_view dqkv, wgpt_view D, wgpt_view dout, wgpt_view qkv,
                     wgpt_view out, wgpt_view lse, wgpt_view ds, uint32_t B, uint32_t T, uint32_t C, uint32_t NH,
                     int f16) {
    static const char fn[] = "attention backward";
    attn_params p;
    if (attn_setup(g, fn, &p, B, T, C, NH, f16) < 0) return -1;
    uint64_t BT = (uint64_t)B * T;
    if (attn_view(g, fn, "dqkv", "(B, T, 3C)", &dqkv, BT * 3 * C) < 0 ||
        attn_view(g, fn, "D", "(B, NH, T)", &D, BT * NH) < 0 ||
        attn_view(g, fn, "dout", "(B, T, C)", &dout, BT * C) < 0 ||
        attn_view_w(g, fn, "qkv", "(B, T, 3C)", &qkv, BT * 3 * C, f16 ? 2 : 4) < 0 ||
        attn_view_w(g, fn, "out", "(B, T, C)", &out, BT * C, f16 ? 2 : 4) < 0 ||
        attn_view(g, fn, "lse", "(B, NH, T)", &lse, BT * NH) < 0)
        return -1;
    if (attn_apart(g, fn, "D", D, "dout", dout) < 0 || attn_apart(g, fn, "D", D, "out", out) < 0 ||
        attn_apart(g, fn, "dqkv", dqkv, "qkv", qkv) < 0 || attn_apart(g, fn, "dqkv", dqkv, "dout", dout) < 0 ||
        attn_apart(g, fn, "dqkv", dqkv, "lse", lse) < 0 || attn_apart(g, fn, "dqkv", dqkv, "D", D) < 0)
        return -1;
    if (ds.buf) {
        if (attn_view_w(g, fn, "ds", "(the dS^T tiles: wgpt_attention_ds_bytes)", &ds,
                        wgpt_attention_ds_bytes(B, T, NH) / 2, 2) < 0)
            return -1;
        const char *rn[5] = {"dqkv", "qkv", "dout", "lse", "D"};
        wgpt_view rv[5] = {dqkv, qkv, dout, lse, D};
        for (int i = 0; i < 5; i++)
            if (attn_apart(g, fn, "ds", ds, rn[i], rv[i]) < 0) return -1;
    }
    attn_set set = attn_pick(g, p.hs, f16);
    uint32_t blocks = attn_blocks(set, T);
    int n0 = op->n;
    wgpt_view pre[3] = {D, dout, out};
    if (!wgpt_op_add1d(g, op, f16 ? "attention_sgm_backward_preprocess" : "attention_backward_preprocess", pre, 3,
                       &p, sizeof p, wgpt_groups(BT * NH)))
        return attn_undo(op, n0);
    // dq and dk/dv write disjoint columns of dqkv: no order between them is
    // needed, except with ds (dkdv writes it, dq reads it).
    wgpt_view grads[6] = {dqkv, qkv, dout, lse, D, ds.buf ? ds : wgpt_gpu_unused_binding(g)};
    int nv = set == ATTN_SGM ? 6 : 5;
    char b1[64], b2[64];
    const char *first = ds.buf ? "attention_sgm_backward_dkdv_ds" : attn_kernel(set, ATTN_DQ, p.hs, b1, sizeof b1);
    const char *then = ds.buf ? "attention_sgm_backward_dq_ds" : attn_kernel(set, ATTN_DKDV, p.hs, b2, sizeof b2);
    if (!wgpt_op_add(g, op, first, grads, nv, &p, sizeof p, blocks, NH, B) ||
        !wgpt_op_add(g, op, then, grads, nv, &p, sizeof p, blocks, NH, B))
        return attn_undo(op, n0);
    return 0;
}

int wgpt_attention_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view lse, wgpt_view qkv, uint32_t B,
                           uint32_t T, uint32_t C, uint32_t NH) {
    wgpt_view none = {0};
    return forward_(g, op, out, none, lse, qkv, B, T, C, NH, 0);
}

int wgpt_attention_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dqkv, wgpt_view D, wgpt_view dout, wgpt_view qkv,
                            wgpt_view out, wgpt_view lse, uint32_t B, uint32_t T, uint32_t C, uint32_t NH) {
    wgpt_view none = {0};
    return backward_(g, op, dqkv, D, dout, qkv, out, lse, none, B, T, C, NH, 0);
}

int wgpt_attention_forward_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view out16, wgpt_view out16_t, wgpt_view lse,
                               wgpt_view qkv, uint32_t B, uint32_t T, uint32_t C, uint32_t NH) {
    return forward_(g, op, out16, out16_t, lse, qkv, B, T, C, NH, 1);
}

int wgpt_attention_backward_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view dqkv, wgpt_view D, wgpt_view dout, wgpt_view qkv,
                                wgpt_view out, wgpt_view lse, wgpt_view ds, uint32_t B, uint32_t T, uint32_t C,
                                uint32_t NH) {
    return backward_(g, op, dqkv, D, dout, qkv, out, lse, ds, B, T, C, NH, 1);
}
