// load.c: checkpoint or imported model -> forward-only model (see load.h).
#include "train/load.h"

#include <stdio.h>
#include <string.h>

#include "train/model_file.h"

int wgpt_load_for_inference(wgpt_loaded *l, const char *cmd, const char *path, const char *bpe_dir,
                            const wgpt_gpu_options *gpu, uint32_t B, uint32_t T) {
    memset(l, 0, sizeof *l);
    char err[2048];
    wgpt_weights ck;  // a checkpoint, or weights from another program (model_file.h)
    if (wgpt_model_file_read(path, 1, &ck, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return -1;
    }
    l->cfg = ck.config;
    l->step = (unsigned long long)ck.step;
    int rc = -1;
    if (wgpt_tokenizer_known(ck.tokenizer))
        l->tok = wgpt_tokenizer_open(ck.tokenizer, bpe_dir, err, sizeof err);
    else if (!ck.tokenizer[0])
        snprintf(err, sizeof err, "%s: its vocabulary of %u ids fits neither GPT-2's tokenizer (50257) nor bytes (256)",
                 path, ck.config.vocab_size);
    else
        snprintf(err, sizeof err, "%s: unknown tokenizer '%s'", path, ck.tokenizer);
    if (!l->tok) {
        fprintf(stderr, "%s: %s\n", cmd, err);
    } else if (wgpt_tokenizer_vocab_size(l->tok) != ck.config.vocab_size) {
        fprintf(stderr, "%s: %s has a vocabulary of %u but the %s tokenizer has %u\n", cmd, path,
                ck.config.vocab_size, ck.tokenizer, wgpt_tokenizer_vocab_size(l->tok));
    } else if (!(l->g = wgpt_gpu_open(gpu, err, sizeof err))) {
        fprintf(stderr, "%s: %s\n", cmd, err);
    } else if ((wgpt_gpt2_check_shape(&ck.config, B, T ? T : ck.config.max_seq_len,
                                      wgpt_gpu_get_info(l->g)->max_buffer, err, sizeof err) & WGPT_GPT2_DIM_B) &&
               B > 1) {  // the shape is the checkpoint's but for the batch
        fprintf(stderr, "%s: %s on '%s': lower --batch\n", cmd, err, wgpt_gpu_get_info(l->g)->name);
    } else if (!(l->model = wgpt_gpt2_create_forward_only(l->g, &ck.config, B, T ? T : ck.config.max_seq_len, err,
                                                          sizeof err))) {
        fprintf(stderr, "%s: %s\n", cmd, err);
    } else if (wgpt_gpt2_set_params(l->model, ck.params) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, wgpt_gpt2_error(l->model));
    } else {
        rc = 0;
    }
    wgpt_weights_free(&ck);
    if (rc < 0) wgpt_loaded_free(l);
    return rc;
}

void wgpt_loaded_free(wgpt_loaded *l) {
    wgpt_gpt2_free(l->model);
    wgpt_gpu_close(l->g);
    wgpt_tokenizer_free(l->tok);
    memset(l, 0, sizeof *l);
}
