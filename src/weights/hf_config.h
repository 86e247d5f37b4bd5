// hf_config.h: a Hugging Face GPT-2 config.json, read and written.
//
// Read: n_layer, n_head, n_embd, n_positions (or n_ctx) and vocab_size, each
// defaulting as transformers' GPT2Config does (12, 12, 768, 1024, 50257).
// Settings that change the math away from wgpt's model are refused by name:
// a model_type other than gpt2, an activation other than GELU's tanh form
// (gelu_new, gelu_pytorch_tanh, gelu_fast), layer_norm_epsilon other than
// 1e-5, n_inner other than 4 * n_embd, scale_attn_weights false,
// scale_attn_by_inverse_layer_idx or add_cross_attention true. What
// transformers would read otherwise than wgpt is refused too: a UTF-8
// byte-order mark, bytes after the object, a key given twice (in any object),
// and those three flags as anything but true or false.
#ifndef WGPT_HF_CONFIG_H
#define WGPT_HF_CONFIG_H

#include <stddef.h>

#include "model/gpt2.h"

// Fills cfg (the padded vocabulary too) from the text of a config.json
// (label names it in messages). Returns 0, or -1 with err.
int wgpt_hf_config_parse(const char *text, size_t len, const char *label, wgpt_gpt2_config *cfg, char *err,
                         size_t errlen);

// A config.json that transformers' GPT2LMHeadModel loads as cfg (tied
// embeddings, fp32). tokenizer "gpt2" adds GPT-2's end-of-text as bos/eos;
// export_id (unless NULL) is kept as "wgpt_export_id", which the weights
// written with it carry too. Returns malloc'ed text, or NULL (out of memory).
char *wgpt_hf_config_format(const wgpt_gpt2_config *cfg, const char *tokenizer, const char *export_id);

// The "wgpt_export_id" string of a config.json's text into out, or "" if it has none.
void wgpt_hf_config_export_id(const char *text, size_t len, char *out, size_t outlen);

#endif
