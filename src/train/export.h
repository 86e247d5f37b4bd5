// export.h: `wgpt export`: a model in another program's format.
#ifndef WGPT_EXPORT_H
#define WGPT_EXPORT_H

#include <stddef.h>

// Reads any model file (train/model_file.h) and writes it as format "hf"
// (out: a folder with config.json and model.safetensors for transformers'
// GPT2LMHeadModel.from_pretrained) or "llmc" (out: llm.c's version-3 fp32
// model file). Importing what it wrote gives back the same parameters bit
// for bit. What out would replace is checked first: never the input itself
// (by device and inode: symlinks and hard links too), never anything but a
// regular file (a FIFO, a device: refused), and for llmc an existing file
// that is not an llm.c model file only with force. Returns 0, or -1 with err.
int wgpt_export(const char *in, const char *format, const char *out, int force, char *err, size_t errlen);

#endif
