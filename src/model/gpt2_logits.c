// gpt2_logits.c: the logits back on the host: one position's of a forward,
// or every position's of the last one (a training model keeps one chunk of
// rows: an inference instance on its parameters computes them all).
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_views.h"

// A training model keeps one chunk of the logits (cls_chunked): an
// inference instance on its parameters computes them all.
static wgpt_gpt2 *logits_model_(wgpt_gpt2 *m) {
    char err[1024];
    wgpt_gpt2 *inf = wgpt_gpt2_create_inference(m, m->B, m->T, err, sizeof err);
    if (!inf) wgpt_gpt2_fail_(m, "the logits of a training model: %s", err);
    return inf;
}

int wgpt_gpt2_logits(wgpt_gpt2 *m, const int *tokens, uint32_t b, uint32_t t, float *out) {
    if (b >= m->B || t >= m->T) return wgpt_gpt2_fail_(m, "logits row (%u, %u) outside the batch (%u, %u)", b, t, m->B, m->T);
    if (m->cls_chunked) {
        wgpt_gpt2 *inf = logits_model_(m);
        if (!inf) return -1;
        int rc = wgpt_gpt2_logits(inf, tokens, b, t, out);
        if (rc < 0) wgpt_gpt2_fail_(m, "%s", wgpt_gpt2_error(inf));
        wgpt_gpt2_free(inf);
        return rc;
    }
    int *zeros = calloc((size_t)m->B * m->T, sizeof *zeros);
    if (!zeros) return wgpt_gpt2_fail_(m, "out of host memory");
    float loss;
    int rc = wgpt_gpt2_forward(m, tokens, zeros, &loss);
    free(zeros);
    if (rc < 0) return -1;
    uint64_t row = (uint64_t)b * m->T + t;
    GPU_OK(m, wgpt_buf_download(m->g, m->logits.buf, row * m->c.padded_vocab_size * 4, out,
                                (uint64_t)m->c.vocab_size * 4));
    return 0;
}

// A training model's: the forward of the last batch again, on an inference instance.
static int read_logits_chunked_(wgpt_gpt2 *m, float *out) {
    uint64_t n = (uint64_t)m->B * m->T;
    uint32_t *ids = malloc(n * 4);
    int *tok = malloc(n * sizeof *tok), *tgt = malloc(n * sizeof *tgt);
    int rc = ids && tok && tgt ? 0 : wgpt_gpt2_fail_(m, "out of host memory");
    if (rc == 0 && wgpt_buf_download(m->g, m->tokens.buf, 0, ids, n * 4) < 0) rc = wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    if (rc == 0 && wgpt_buf_download(m->g, m->targets.buf, 0, tgt, n * 4) < 0) rc = wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    for (uint64_t i = 0; rc == 0 && i < n; i++) tok[i] = (int)ids[i];
    wgpt_gpt2 *inf = rc == 0 ? logits_model_(m) : NULL;
    if (rc == 0 && !inf) rc = -1;
    float loss;
    if (rc == 0 && (wgpt_gpt2_forward(inf, tok, tgt, &loss) < 0 || wgpt_gpt2_read_logits(inf, out) < 0))
        rc = wgpt_gpt2_fail_(m, "%s", wgpt_gpt2_error(inf));
    wgpt_gpt2_free(inf);
    free(ids), free(tok), free(tgt);
    return rc;
}

int wgpt_gpt2_read_logits(wgpt_gpt2 *m, float *out) {
    if (m->cls_chunked) return read_logits_chunked_(m, out);
    uint64_t rows = (uint64_t)m->B * m->T, Vp = m->c.padded_vocab_size, V = m->c.vocab_size;
    float *all = malloc(rows * Vp * sizeof *all);
    if (!all) return wgpt_gpt2_fail_(m, "out of host memory");
    int rc = wgpt_buf_download(m->g, m->logits.buf, 0, all, rows * Vp * 4);
    for (uint64_t r = 0; rc == 0 && r < rows; r++) memcpy(out + r * V, all + r * Vp, V * sizeof *out);
    free(all);
    if (rc < 0) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    return 0;
}
