// gpt2_step.c: a batch through the model's prepared ops: its ids checked
// and uploaded, the forward (built at first use by a forward-only model),
// the forward and backward of a training step, the loss read back.
#include <stdlib.h>

#include "model/embedding.h"
#include "model/gpt2_views.h"
#include "model/input_status.h"

// The backward in segments (gpt2.h; recorded in gpt2_segments.c): a
// training step records all of them at once.
uint32_t wgpt_gpt2_grad_segments(const wgpt_gpt2 *m) { return m->training ? m->c.num_layers + 2 : 0; }

// Checks ids on the host (names the first bad one) and uploads them as u32.
static int upload_ids_(wgpt_gpt2 *m, wgpt_gpt2_act *dst, const int *ids, const char *what) {
    uint32_t n = m->B * m->T;
    uint32_t *u = malloc(n * sizeof *u);
    if (!u) return wgpt_gpt2_fail_(m, "out of host memory");
    for (uint32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= m->c.vocab_size) {
            free(u);
            return wgpt_gpt2_fail_(m, "%s id %d at position %u is out of range [0, %u)", what, ids[i], i,
                                   m->c.vocab_size);
        }
        u[i] = (uint32_t)ids[i];
    }
    int rc = wgpt_buf_upload(m->g, dst->buf, 0, u, (uint64_t)n * 4);
    free(u);
    if (rc < 0) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    return 0;
}

static int upload_batch_(wgpt_gpt2 *m, const int *tokens, const int *targets) {
    if (!targets) return wgpt_gpt2_fail_(m, "targets are required");
    if (upload_ids_(m, &m->tokens, tokens, "token") < 0 || upload_ids_(m, &m->targets, targets, "target") < 0)
        return -1;
    return 0;
}

// Waits for the recorded work and reads the loss; a kernel-reported bad id is an error.
int wgpt_gpt2_read_loss_(wgpt_gpt2 *m, float *loss) {
    char msg[256];
    int st = wgpt_input_status_check(m->g, A(status, 0), m->c.vocab_size, msg, sizeof msg);
    if (st < 0) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    if (st > 0) return wgpt_gpt2_fail_(m, "%s", msg);
    GPU_OK(m, wgpt_buf_download(m->g, m->loss.buf, 0, loss, 4));
    return 0;
}


int wgpt_gpt2_forward(wgpt_gpt2 *m, const int *tokens, const int *targets, float *loss) {
    if (m->fwd.n == 0 && wgpt_gpt2_build_forward_(m) < 0) return -1;  // (forward-only models: see gpt2.c create_)
    if (upload_batch_(m, tokens, targets) < 0) return -1;
    GPU_OK(m, wgpt_op_record(m->g, &m->fwd));
    return wgpt_gpt2_read_loss_(m, loss);
}

// Records the forward of one batch before a backward; zero_grads first
// clears the gradients (the first micro-batch of a step), else they accumulate.
int wgpt_gpt2_record_forward_(wgpt_gpt2 *m, const int *tokens, const int *targets, int zero_grads) {
    if (!m->training) return wgpt_gpt2_fail_(m, "this model was created for inference only");
    if (upload_batch_(m, tokens, targets) < 0) return -1;
    uint32_t bad = 0;
    uint32_t *u = malloc((size_t)m->B * m->T * sizeof *u);
    if (!u) return wgpt_gpt2_fail_(m, "out of host memory");
    for (uint32_t i = 0; i < m->B * m->T; i++) u[i] = (uint32_t)tokens[i];
    int rc = wgpt_encoder_bucket_upload(m->g, A(bucket, 0), u, m->B * m->T, m->c.vocab_size, &bad);
    free(u);
    if (rc < 0) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    GPU_OK(m, wgpt_op_record_range(m->g, &m->fwd, 0, m->fwd_train_n));
    if (zero_grads) GPU_OK(m, wgpt_buf_zero(m->g, m->grads, 0, m->padded_params * 4));
    GPU_OK(m, wgpt_buf_zero(m->g, m->dres.buf, 0, wgpt_buf_size(m->dres.buf)));
    m->seg_next = 0;
    return 0;
}

// The forward and the whole backward of one batch.
int wgpt_gpt2_record_step_(wgpt_gpt2 *m, const int *tokens, const int *targets, int zero_grads) {
    if (wgpt_gpt2_record_forward_(m, tokens, targets, zero_grads) < 0) return -1;
    GPU_OK(m, wgpt_op_record(m->g, &m->bwd));
    m->seg_next = wgpt_gpt2_grad_segments(m);
    return 0;
}

int wgpt_gpt2_forward_backward(wgpt_gpt2 *m, const int *tokens, const int *targets, float *loss) {
    if (wgpt_gpt2_record_step_(m, tokens, targets, 1) < 0) return -1;
    return wgpt_gpt2_read_loss_(m, loss);
}

int wgpt_gpt2_accumulate(wgpt_gpt2 *m, const int *tokens, const int *targets, int first, float *loss) {
    if (wgpt_gpt2_record_step_(m, tokens, targets, first) < 0) return -1;
    return wgpt_gpt2_read_loss_(m, loss);
}

