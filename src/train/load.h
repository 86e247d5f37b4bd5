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
    // seconds each phase of the load took (for `wgpt sample --verbose`); the
    // device and the model are made on a second thread while the file is read
    double read_s, tokenizer_s, gpu_s, model_s, params_s;
} wgpt_loaded;

// Opens the checkpoint's tokenizer (GPT-2's files from bpe_dir), a device and
// a forward-only model of batch B and context T (0 or more than the
// checkpoint's context: the checkpoint's) in the given precision (auto:
// model/gpt2.h), with the checkpoint's weights. The device and the model are
// made from the file's config while its weights are read (a second thread,
// where there are threads).
// Returns 0, or -1 with err (l is then empty).
int wgpt_load_for_inference(wgpt_loaded *l, const char *checkpoint, const char *bpe_dir,
                            const wgpt_gpu_options *gpu, uint32_t B, uint32_t T, wgpt_precision precision,
                            char *err, size_t errlen);
void wgpt_loaded_free(wgpt_loaded *l);

// Matmul weights of a model of config c (params: the reference layout) that
// f16 cannot hold: precision f16 multiplies f16 copies of wte, qkvw,
// attprojw, fcw and fcprojw, which would be Inf, and every loss NaN. Returns
// 0 if every one has |w| <= 65504 (f16's largest), else -1 with err naming
// `what`, the tensor, the element and its value, and --precision fp32.
int wgpt_check_f16_range(const wgpt_gpt2_config *c, const float *params, const char *what, char *err,
                         size_t errlen);

#endif
