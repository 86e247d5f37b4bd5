// embedding.c: host side of the token/position embedding (embedding.h).
#include "model/embedding.h"
#include "model/kernel_params.h"  // the kernels' params structs

#include <stdlib.h>
#include <string.h>

#include "model/variant.h"

// Lanes a workgroup of encoder_backward_wte_flat4 (ENC_FLAT_WG in the kernel).
#define ENC_FLAT_WG 8u


static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int wgpt_embedding_bucket(uint32_t *idx, const uint32_t *tokens, uint32_t N, uint32_t V, uint32_t *bad) {
    for (uint32_t n = 0; n < N; n++) {
        if (tokens[n] >= V) {
            if (bad) *bad = tokens[n];
            return -1;
        }
    }
    // Sorting (token, position) pairs groups the positions of a token in
    // increasing order: the order the kernel sums them in.
    uint64_t *key = malloc((N ? N : 1) * sizeof *key);
    if (!key) return -1;
    for (uint32_t n = 0; n < N; n++) key[n] = (uint64_t)tokens[n] << 32 | n;
    qsort(key, N, sizeof *key, cmp_u64);
    memset(idx, 0, wgpt_embedding_bucket_words(N) * sizeof *idx);
    uint32_t *ids = idx + 1, *starts = idx + 1 + N, *pos = idx + 2 + 2 * (uint64_t)N;
    uint32_t U = 0;
    for (uint32_t j = 0; j < N; j++) {
        uint32_t tok = (uint32_t)(key[j] >> 32);
        if (U == 0 || ids[U - 1] != tok) {
            ids[U] = tok;
            starts[U++] = j;
        }
        pos[j] = (uint32_t)key[j];
    }
    starts[U] = N;
    idx[0] = U;
    free(key);
    return 0;
}

int wgpt_encoder_bucket_upload(wgpt_gpu *g, wgpt_view bucket, const uint32_t *tokens, uint32_t N, uint32_t V,
                               uint32_t *bad) {
    uint64_t words = wgpt_embedding_bucket_words(N);
    if (!bucket.buf || (bucket.size && bucket.size < words * 4))
        return wgpt_gpu_fail(g, "encoder bucket: the view %s; it needs %llu bytes for %u tokens",
                             bucket.buf ? "is too small" : "has no buffer", (unsigned long long)(words * 4), N);
    uint32_t *idx = malloc(words * sizeof *idx);
    if (!idx) return wgpt_gpu_fail(g, "encoder bucket: out of host memory for %u tokens", N);
    uint32_t b = 0;  // >= V after -1: a bad token; else out of memory
    int rc = wgpt_embedding_bucket(idx, tokens, N, V, &b);
    if (rc < 0 && bad) *bad = b;
    if (rc < 0 && V && b >= V) wgpt_gpu_fail(g, "encoder bucket: token id %u is out of range [0, %u)", b, V);
    else if (rc < 0) wgpt_gpu_fail(g, "encoder bucket: out of host memory for %u tokens", N);
    else rc = wgpt_buf_upload(g, bucket.buf, bucket.offset, idx, words * 4);
    free(idx);
    return rc;
}

int wgpt_encoder_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view status, wgpt_view tokens, wgpt_view wte,
                         wgpt_view wpe, uint32_t B, uint32_t T, uint32_t C, uint32_t V, uint32_t Vp) {
    uint64_t N = (uint64_t)B * T;
    if (!N || !C || !V || V > Vp || N * C > UINT32_MAX)
        return wgpt_gpu_fail(g, "encoder_forward: bad shape N=%llu C=%u V=%u Vp=%u (V <= Vp, N*C < 2^32)",
                             (unsigned long long)N, C, V, Vp);
    uint64_t chunk = wgpt_op_chunk_rows(g, Vp, C);  // wte rows per binding
    if (!chunk) return -1;
    wgpt_view v[5];
    if (!wgpt_view_part(out, 0, N * C * 4, &v[0]) || !wgpt_view_part(tokens, 0, N * 4, &v[1]) ||
        !wgpt_view_part(wpe, 0, (uint64_t)T * C * 4, &v[3]) || !wgpt_view_part(status, 0, WGPT_STATUS_BYTES, &v[4]))
        return wgpt_gpu_fail(g, "encoder_forward: a view is missing or smaller than its tensor");
    for (uint64_t v0 = 0; v0 < Vp; v0 += chunk) {
        uint64_t nv = Vp - v0 < chunk ? Vp - v0 : chunk;
        if (!wgpt_view_part(wte, v0 * C * 4, nv * C * 4, &v[2]))
            return wgpt_gpu_fail(g, "encoder_forward: wte is smaller than (%u, %u)", Vp, C);
        enc_params p = {(uint32_t)N, T, C, V, (uint32_t)v0, (uint32_t)nv, v0 == 0, 0};
        if (!wgpt_op_add1d(g, op, "encoder_forward", v, 5, &p, sizeof p, wgpt_groups(N * C))) return -1;
    }
    return 0;
}

int wgpt_encoder_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dwte, wgpt_view dwpe, wgpt_view dout,
                          wgpt_view bucket, uint32_t B, uint32_t T, uint32_t C, uint32_t Vp) {
    uint64_t N = (uint64_t)B * T;
    if (!N || !C || !Vp || N * C > UINT32_MAX)
        return wgpt_gpu_fail(g, "encoder_backward: bad shape N=%llu C=%u Vp=%u", (unsigned long long)N, C, Vp);
    uint64_t chunk = wgpt_op_chunk_rows(g, Vp, C);
    if (!chunk) return -1;
    wgpt_view v[3];
    if (!wgpt_view_part(dout, 0, N * C * 4, &v[1]) || !wgpt_view_part(bucket, 0, wgpt_embedding_bucket_words((uint32_t)N) * 4, &v[2]))
        return wgpt_gpu_fail(g, "encoder_backward: dout or bucket is missing or smaller than its tensor");
    // The grid covers the most distinct ids a step can have (N); the kernel
    // reads this step's count from the index, so the op never changes. CPU
    // devices take the flat4 twin (ENC_FLAT_WG lanes of 4 channels a
    // workgroup) where C % 4 == 0 and the views are 16-byte aligned.
    int flat4 = wgpt_kernel_variant_cpu(g) && C % 4 == 0 && wgpt_views_vec4((const wgpt_view[]){dwte, v[1]}, 2);
    uint64_t per_wg = flat4 ? 4 * ENC_FLAT_WG : WGPT_WG;
    uint64_t groups = N * ((C + per_wg - 1) / per_wg);
    for (uint64_t v0 = 0; v0 < Vp; v0 += chunk) {
        uint64_t nv = Vp - v0 < chunk ? Vp - v0 : chunk;
        if (!wgpt_view_part(dwte, v0 * C * 4, nv * C * 4, &v[0]))
            return wgpt_gpu_fail(g, "encoder_backward: dwte is smaller than (%u, %u)", Vp, C);
        enc_params p = {(uint32_t)N, T, C, Vp, (uint32_t)v0, (uint32_t)nv, 0, 0};
        if (!wgpt_op_add1d(g, op, flat4 ? "encoder_backward_wte_flat4" : "encoder_backward_wte", v, 3, &p, sizeof p,
                           groups))
            return -1;
    }
    wgpt_view w[2];
    if (!wgpt_view_part(dwpe, 0, (uint64_t)T * C * 4, &w[0]))
        return wgpt_gpu_fail(g, "encoder_backward: dwpe is smaller than (%u, %u)", T, C);
    w[1] = v[1];
    enc_params p = {(uint32_t)N, T, C, Vp, 0, 0, 0, 0};
    if (!wgpt_op_add1d(g, op, "encoder_backward_wpe", w, 2, &p, sizeof p, wgpt_groups((uint64_t)T * C))) return -1;
    return 0;
}
