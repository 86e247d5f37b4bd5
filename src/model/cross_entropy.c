// cross_entropy.c: host side of the softmax cross-entropy (cross_entropy.h).
#include "model/cross_entropy.h"
#include "model/kernel_params.h"  // the kernels' params structs

#include "model/variant.h"

// The kernels, by full name: [vec4] the twin that binds the logits as vec4s
// (every row and the view must start on a 16-byte boundary; row chunks start
// at multiples of 64 rows).
// [flat] the CPU twin of the vec4 kernel (model/variant.h).
static const char *const CE_FORWARD[] = {"crossentropy_forward", "crossentropy_forward_vec4",
                                         "crossentropy_forward_flat"};
static const char *const CE_BACKWARD[] = {"crossentropy_backward", "crossentropy_backward_vec4",
                                          "crossentropy_backward_flat"};
static int ce_vec4(wgpt_view logits, uint32_t Vp) { return Vp % 4 == 0 && wgpt_views_vec4(&logits, 1); }
// The forward's CPU twin: an 8-lane workgroup a row, its subgroup the whole workgroup.
static int ce_flat_forward(wgpt_gpu *g) {
    return wgpt_kernel_variant_cpu(g) && wgpt_gpu_get_info(g)->subgroup_min >= 8;
}

// The per-row outputs and the targets the forward and the fused kernel bind
// (v[0..2] and v[4]; v[3] is the logits' chunk); -1 naming fn if one is short.
static int ce_row_views(wgpt_gpu *g, const char *fn, wgpt_view losses, wgpt_view lse, wgpt_view status,
                        wgpt_view targets, uint32_t BT, wgpt_view *v) {
    if (!wgpt_view_part(losses, 0, (uint64_t)BT * 4, &v[0]) || !wgpt_view_part(lse, 0, (uint64_t)BT * 4, &v[1]) ||
        !wgpt_view_part(status, 0, WGPT_STATUS_BYTES, &v[2]) || !wgpt_view_part(targets, 0, (uint64_t)BT * 4, &v[4]))
        return wgpt_gpu_fail(g, "%s: a view is missing or smaller than its tensor", fn);
    return 0;
}

int wgpt_crossentropy_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view losses, wgpt_view lse, wgpt_view status,
                              wgpt_view logits, wgpt_view targets, uint32_t BT, uint32_t V, uint32_t Vp) {
    if (!BT || !V || V > Vp) return wgpt_gpu_fail(g, "cross-entropy: bad shape BT=%u V=%u Vp=%u (V <= Vp)", BT, V, Vp);
    uint64_t chunk = wgpt_op_chunk_rows(g, BT, Vp);  // rows per logits binding
    if (!chunk) return -1;
    int flat = ce_flat_forward(g);
    wgpt_view v[5];
    if (ce_row_views(g, "crossentropy_forward", losses, lse, status, targets, BT, v) < 0) return -1;
    for (uint64_t r0 = 0; r0 < BT; r0 += chunk) {
        uint64_t rows = BT - r0 < chunk ? BT - r0 : chunk;
        if (!wgpt_view_part(logits, r0 * Vp * 4, rows * Vp * 4, &v[3]))
            return wgpt_gpu_fail(g, "crossentropy_forward: logits are smaller than (%u, %u)", BT, Vp);
        ce_params p = {(uint32_t)rows, (uint32_t)r0, V, Vp, 0.0f};
        const char *k = CE_FORWARD[ce_vec4(logits, Vp) ? 1 + flat : 0];
        if (!wgpt_op_add1d(g, op, k, v, 5, &p, sizeof p, rows)) return -1;
    }
    return 0;
}

int wgpt_crossentropy_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view logits, wgpt_view lse, wgpt_view targets,
                               uint32_t BT, uint32_t V, uint32_t Vp, float dloss) {
    if (!BT || !V || V > Vp) return wgpt_gpu_fail(g, "cross-entropy: bad shape BT=%u V=%u Vp=%u (V <= Vp)", BT, V, Vp);
    uint64_t chunk = wgpt_op_chunk_rows(g, BT, Vp);
    if (!chunk) return -1;
    int flat = wgpt_kernel_variant_cpu(g);  // 8 lanes a row; no subgroup operations
    wgpt_view v[3];
    if (!wgpt_view_part(lse, 0, (uint64_t)BT * 4, &v[1]) || !wgpt_view_part(targets, 0, (uint64_t)BT * 4, &v[2]))
        return wgpt_gpu_fail(g, "crossentropy_backward: lse or targets is missing or smaller than (%u)", BT);
    for (uint64_t r0 = 0; r0 < BT; r0 += chunk) {
        uint64_t rows = BT - r0 < chunk ? BT - r0 : chunk;
        if (!wgpt_view_part(logits, r0 * Vp * 4, rows * Vp * 4, &v[0]))
            return wgpt_gpu_fail(g, "crossentropy_backward: logits are smaller than (%u, %u)", BT, Vp);
        ce_params p = {(uint32_t)rows, (uint32_t)r0, V, Vp, dloss};
        const char *k = CE_BACKWARD[ce_vec4(logits, Vp) ? 1 + flat : 0];
        if (!wgpt_op_add1d(g, op, k, v, 3, &p, sizeof p, rows)) return -1;
    }
    return 0;
}

// What the kernels that write the f16 gradient need of their shape and views.
static int ce_f16_check(wgpt_gpu *g, const char *k, wgpt_view dlogits16, wgpt_view logits, uint32_t BT, uint32_t V,
                        uint32_t Vp) {
    if (!BT || !V || V > Vp || Vp % 8)
        return wgpt_gpu_fail(g, "cross-entropy (f16 gradient): bad shape BT=%u V=%u Vp=%u (V <= Vp, Vp a multiple of 8)",
                             BT, V, Vp);
    if (!wgpt_views_vec4(&logits, 1) || !wgpt_views_vec4(&dlogits16, 1))
        return wgpt_gpu_fail(g, "%s: the logits and dlogits views must start on 16-byte boundaries", k);
    if (dlogits16.buf == logits.buf)
        return wgpt_gpu_fail(g, "%s: dlogits16 must be in another buffer than the logits it reads", k);
    return 0;
}

// Rows r0 .. r0 + rows of the logits (*vl) and of their f16 gradient (*vd);
// -1 naming fn if either is short.
static int ce_f16_chunk(wgpt_gpu *g, const char *fn, wgpt_view logits, wgpt_view dlogits16, uint32_t BT, uint32_t Vp,
                        uint64_t r0, uint64_t rows, wgpt_view *vl, wgpt_view *vd) {
    if (!wgpt_view_part(dlogits16, r0 * Vp * 2, rows * Vp * 2, vd) ||
        !wgpt_view_part(logits, r0 * Vp * 4, rows * Vp * 4, vl))
        return wgpt_gpu_fail(g, "%s: logits or dlogits16 are smaller than (%u, %u)", fn, BT, Vp);
    return 0;
}

int wgpt_crossentropy_backward_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view dlogits16, wgpt_view logits, wgpt_view lse,
                                   wgpt_view targets, uint32_t BT, uint32_t V, uint32_t Vp, float dloss) {
    if (ce_f16_check(g, "crossentropy_backward_f16", dlogits16, logits, BT, V, Vp) < 0) return -1;
    uint64_t chunk = wgpt_op_chunk_rows(g, BT, Vp);
    if (!chunk) return -1;
    wgpt_view v[4];
    if (!wgpt_view_part(lse, 0, (uint64_t)BT * 4, &v[2]) || !wgpt_view_part(targets, 0, (uint64_t)BT * 4, &v[3]))
        return wgpt_gpu_fail(g, "crossentropy_backward_f16: lse or targets is missing or smaller than (%u)", BT);
    for (uint64_t r0 = 0; r0 < BT; r0 += chunk) {
        uint64_t rows = BT - r0 < chunk ? BT - r0 : chunk;
        if (ce_f16_chunk(g, "crossentropy_backward_f16", logits, dlogits16, BT, Vp, r0, rows, &v[1], &v[0]) < 0)
            return -1;
        ce_params p = {(uint32_t)rows, (uint32_t)r0, V, Vp, dloss};
        if (!wgpt_op_add1d(g, op, "crossentropy_backward_f16", v, 4, &p, sizeof p, rows)) return -1;
    }
    return 0;
}

int wgpt_crossentropy_fused_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view losses, wgpt_view lse, wgpt_view status,
                                wgpt_view dlogits16, wgpt_view logits, wgpt_view targets, uint32_t BT, uint32_t V,
                                uint32_t Vp, float dloss) {
    if (ce_f16_check(g, "crossentropy_fused_f16", dlogits16, logits, BT, V, Vp) < 0) return -1;
    uint64_t chunk = wgpt_op_chunk_rows(g, BT, Vp);  // the forward's and the backward's chunks
    if (!chunk) return -1;
    const char *k = ce_flat_forward(g) ? "crossentropy_fused_f16_flat" : "crossentropy_fused_f16";
    wgpt_view v[6];
    if (ce_row_views(g, "crossentropy_fused_f16", losses, lse, status, targets, BT, v) < 0) return -1;
    for (uint64_t r0 = 0; r0 < BT; r0 += chunk) {
        uint64_t rows = BT - r0 < chunk ? BT - r0 : chunk;
        if (ce_f16_chunk(g, "crossentropy_fused_f16", logits, dlogits16, BT, Vp, r0, rows, &v[3], &v[5]) < 0) return -1;
        ce_params p = {(uint32_t)rows, (uint32_t)r0, V, Vp, dloss};
        if (!wgpt_op_add1d(g, op, k, v, 6, &p, sizeof p, rows)) return -1;
    }
    return 0;
}

int wgpt_loss_mean(wgpt_gpu *g, wgpt_op *op, wgpt_view out1, wgpt_view losses, uint32_t BT) {
    if (!BT) return wgpt_gpu_fail(g, "loss_mean: no positions");
    wgpt_view v[2];
    if (!wgpt_view_part(out1, 0, 4, &v[0]) || !wgpt_view_part(losses, 0, (uint64_t)BT * 4, &v[1]))
        return wgpt_gpu_fail(g, "loss_mean: out or losses is missing or smaller than its tensor");
    ce_params p = {BT, 0, 0, 0, 0.0f};
    return wgpt_op_add(g, op, "crossentropy_loss_mean", v, 2, &p, sizeof p, 1, 1, 1) ? 0 : -1;
}
