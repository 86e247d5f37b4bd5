// llmc.h: llm.c's GPT-2 model files (train_gpt2.py's write_model, read by
// train_gpt2.c / train_gpt2.cu).
//
// A 256 x int32 little-endian header: [0] magic 20240326, [1] version (3: all
// tensors fp32, 5: all bf16), [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp
// (the padded vocabulary), the rest 0; then every parameter in wgpt's
// reference order and layout (llm.c's own: wte (Vp, C) ... lnfb (C), linear
// weights (out, in)), 4 or 2 bytes each. The file is exactly that long.
#ifndef WGPT_LLMC_H
#define WGPT_LLMC_H

#include <stddef.h>

#include "weights/weights.h"

#define WGPT_LLMC_MAGIC 20240326
#define WGPT_LLMC_HEADER_BYTES 1024

// Reads path's header (and with with_params the tensors, bf16 widened
// exactly). Refuses another magic or version, a bad config, a size other than
// the header's, NaN/Inf. Returns 0, or -1 with err naming the file; w zeroed.
int wgpt_llmc_read(const char *path, int with_params, wgpt_weights *w, char *err, size_t errlen);

// Writes a version-3 (fp32) file, crash-safely. Returns 0, or -1 with err.
int wgpt_llmc_write(const char *path, const wgpt_weights *w, char *err, size_t errlen);

#endif
