// model_file.h: a model's weights from any file wgpt reads: its own
// checkpoints, Hugging Face GPT-2 (a folder with config.json and
// model.safetensors, or a .safetensors file) and llm.c model files. The kind
// is told by the content (a folder; the checkpoint magic "WGPTCKPT"; llm.c's
// int32 20240326), never by the name.
#ifndef WGPT_MODEL_FILE_H
#define WGPT_MODEL_FILE_H

#include <stddef.h>

#include "weights/weights.h"  // defines: wgpt_weights, wgpt_weights_free

// Reads path's config (and with with_params its parameters, converted to
// fp32 in the reference layout). Returns 0 with w filled (free it with
// wgpt_weights_free), or -1 with err naming the file and w zeroed.
int wgpt_model_file_read(const char *path, int with_params, wgpt_weights *w, char *err, size_t errlen);

#endif
