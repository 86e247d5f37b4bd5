// load.c: checkpoint or imported model -> forward-only model (see load.h).
#include "train/load.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#ifndef __wasi__
#include <pthread.h>
#endif

#include "train/model_file.h"
#include "util/clock.h"
#include "util/err.h"

// The device and the model (its config read first), made beside the model
// file's read (a second thread where there are threads): Dawn's and the
// driver's start-up and the model's allocations overlap the read.
typedef struct gpu_open_ {
    const wgpt_gpu_options *opt;
    wgpt_gpt2_config cfg;
    uint32_t B, T;
    wgpt_precision precision;
    wgpt_gpu *g;
    wgpt_gpt2 *model;
    double s, model_s;  // seconds they took
    char err[2048];        // why g is NULL
    char model_err[2048];  // why model is NULL
} gpu_open_;

// The model of go's config on go->g, or NULL with err (a shape the device cannot take, named).
static wgpt_gpt2 *model_(gpu_open_ *o, char *err, size_t errlen) {
    const wgpt_gpt2_config *c = &o->cfg;
    uint32_t B = o->B, ctx = o->T && o->T < c->max_seq_len ? o->T : c->max_seq_len;
    const wgpt_gpu_info *in = wgpt_gpu_get_info(o->g);
    if ((wgpt_gpt2_check_shape(c, B, ctx, in->max_buffer, err, errlen) & WGPT_GPT2_DIM_B) && B > 1) {
        size_t n = strlen(err);  // the shape is the checkpoint's but for the batch
        snprintf(err + n, errlen - n, " on '%s': lower --batch", in->name);
        return NULL;
    }
    // Attention binds its input, qkv (B, T, 3C), whole: a batch past that is refused by its option.
    uint64_t per_seq = (uint64_t)ctx * 3 * c->channels * 4;
    if (B > 1 && per_seq && (uint64_t)B * per_seq > in->max_storage_binding && in->max_storage_binding >= per_seq) {
        wgpt_errf(err, errlen,
                  "--batch %u: attention binds its input (B x T x 3C floats) whole, %llu bytes for B x T = %u x "
                  "%u; '%s' binds at most %llu bytes (maxStorageBufferBindingSize): at most --batch %llu",
                  B, (unsigned long long)(B * per_seq), B, ctx, in->name, (unsigned long long)in->max_storage_binding,
                  (unsigned long long)(in->max_storage_binding / per_seq));
        return NULL;
    }
    return wgpt_gpt2_create_precision(o->g, c, B, ctx, 0, o->precision, err, errlen);
}

static void *open_gpu_(void *arg) {
    gpu_open_ *o = arg;
    double t = wgpt_clock_s();
    o->g = wgpt_gpu_open(o->opt, o->err, sizeof o->err);
    o->s = wgpt_clock_s() - t, t = wgpt_clock_s();
    if (o->g) o->model = model_(o, o->model_err, sizeof o->model_err);
    o->model_s = wgpt_clock_s() - t;
    return NULL;
}

// Everything but the model file, the device and the model (go's, taken
// over); -1 with err, l holding what was opened.
static int open_(wgpt_loaded *l, const wgpt_weights *ck, const char *path, const char *bpe_dir, gpu_open_ *go,
                 char *err, size_t errlen) {
    l->g = go->g, l->model = go->model;
    l->gpu_s = go->s, l->model_s = go->model_s;
    if (!ck->tokenizer[0])
        return wgpt_errf(err, errlen, "%s: its vocabulary of %u ids fits neither GPT-2's tokenizer (50257) nor bytes (256)",
                         path, ck->config.vocab_size);
    if (!wgpt_tokenizer_known(ck->tokenizer))
        return wgpt_errf(err, errlen, "%s: unknown tokenizer '%s'", path, ck->tokenizer);
    double t = wgpt_clock_s();
    if (!(l->tok = wgpt_tokenizer_open(ck->tokenizer, bpe_dir, err, errlen))) return -1;
    l->tokenizer_s = wgpt_clock_s() - t;
    if (wgpt_tokenizer_vocab_size(l->tok) != ck->config.vocab_size)
        return wgpt_errf(err, errlen, "%s has a vocabulary of %u but the %s tokenizer has %u", path,
                         ck->config.vocab_size, ck->tokenizer, wgpt_tokenizer_vocab_size(l->tok));
    if (!l->g) return wgpt_errf(err, errlen, "%s", go->err);
    if (!l->model) return wgpt_errf(err, errlen, "%s", go->model_err);
    t = wgpt_clock_s();
    if (wgpt_gpt2_precision(l->model) == WGPT_PRECISION_F16 &&
        wgpt_check_f16_range(&ck->config, ck->params, path, err, errlen) < 0)
        return -1;
    if (wgpt_gpt2_set_params(l->model, ck->params) < 0) return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(l->model));
    l->params_s = wgpt_clock_s() - t;
    return 0;
}

int wgpt_check_f16_range(const wgpt_gpt2_config *c, const float *params, const char *what, char *err,
                         size_t errlen) {
    // the matmuls' weights, whose f16 copies the matmuls multiply: wte (the logits), qkvw, attprojw, fcw, fcprojw
    static const int matmul[] = {0, 4, 6, 10, 12};
    size_t s[WGPT_GPT2_NUM_TENSORS], base[WGPT_GPT2_NUM_TENSORS + 1] = {0};
    wgpt_gpt2_param_sizes(c, s);
    for (int k = 0; k < WGPT_GPT2_NUM_TENSORS; k++) base[k + 1] = base[k] + s[k];
    for (size_t m = 0; m < sizeof matmul / sizeof matmul[0]; m++) {
        int k = matmul[m];
        for (size_t i = base[k]; i < base[k + 1]; i++)
            if (fabsf(params[i]) > 65504.0f)  // (a NaN is another problem)
                return wgpt_errf(err, errlen,
                                 "%s: %s element %zu is %g, beyond f16's range (+-65504): in precision f16 the "
                                 "matmuls multiply an f16 copy of it, which would be Inf and every loss NaN (no "
                                 "learning rate helps); use --precision fp32",
                                 what, wgpt_weights_tensor_names[k], i - base[k], (double)params[i]);
    }
    return 0;
}
int wgpt_load_for_inference(wgpt_loaded *l, const char *path, const char *bpe_dir, const wgpt_gpu_options *gpu,
                            uint32_t B, uint32_t T, wgpt_precision precision, char *err, size_t errlen) {
    memset(l, 0, sizeof *l);
    wgpt_weights ck;  // a checkpoint, or weights from another program (model_file.h)
    double t = wgpt_clock_s();
    if (wgpt_model_file_read(path, 0, &ck, err, errlen) < 0) return -1;  // the config: the model's shape
    gpu_open_ go = {.opt = gpu, .cfg = ck.config, .B = B, .T = T, .precision = precision};
    wgpt_weights_free(&ck);
    int threaded = 0;
#ifndef __wasi__
    pthread_t th;
    threaded = pthread_create(&th, NULL, open_gpu_, &go) == 0;
#endif
    int read = wgpt_model_file_read(path, 1, &ck, err, errlen);
    double read_s = wgpt_clock_s() - t;
#ifndef __wasi__
    if (threaded) pthread_join(th, NULL);
#endif
    if (read == 0 && memcmp(&ck.config, &go.cfg, sizeof go.cfg) != 0) {  // the file changed between the reads
        read = wgpt_errf(err, errlen, "%s changed while it was read", path);
        wgpt_weights_free(&ck);
    }
    if (read < 0) {
        wgpt_gpt2_free(go.model);
        if (go.g) wgpt_gpu_close(go.g);
        return -1;
    }
    if (!threaded) open_gpu_(&go);
    l->cfg = ck.config;
    l->step = (unsigned long long)ck.step;
    int rc = open_(l, &ck, path, bpe_dir, &go, err, errlen);
    wgpt_weights_free(&ck);
    if (rc < 0) wgpt_loaded_free(l);
    else l->read_s = read_s;
    return rc;
}

void wgpt_loaded_free(wgpt_loaded *l) {
    wgpt_gpt2_free(l->model);
    wgpt_gpu_close(l->g);
    wgpt_tokenizer_free(l->tok);
    memset(l, 0, sizeof *l);
}
