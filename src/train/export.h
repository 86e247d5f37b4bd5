// export.h: `wgpt export`: a model in another program's format.
#ifndef WGPT_EXPORT_H
#define WGPT_EXPORT_H

#include <stddef.h>

// Reads any model file (train/model_file.h) and writes it as format "hf"
// (out: a folder with config.json and model.safetensors for transformers'
// GPT2LMHeadModel.from_pretrained) or "llmc" (out: llm.c's version-3 fp32
// model file). Importing what it wrote gives back the same parameters bit
// for bit. Returns 0, or -1 with err.
int wgpt_export(const char *in, const char *format, const char *out, char *err, size_t errlen);

#endif
