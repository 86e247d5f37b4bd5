// load.h: opens the GPU, a checkpoint's (or an imported model's) tokenizer and weights as a
// forward-only model, for `wgpt sample` and `wgpt eval`.
#ifndef WGPT_MODEL_LOAD_H
#define WGPT_MODEL_LOAD_H

#include "data/tokenizer.h"
#include "gpu/gpu.h"
#include "model/gpt2.h"

typedef struct wgpt_loaded {
    wgpt_gpu *g;
    wgpt_tokenizer *tok;
    wgpt_gpt2 *model;
    wgpt_gpt2_config cfg;
    unsigned long long step;
} wgpt_loaded;

// Returns 0, or -1 after printing "<cmd>: <what went wrong>" to stderr.
int wgpt_load_for_inference(wgpt_loaded *l, const char *cmd, const char *checkpoint, const char *bpe_dir,
                            const wgpt_gpu_options *gpu, uint32_t B, uint32_t T);
void wgpt_loaded_free(wgpt_loaded *l);

#endif
