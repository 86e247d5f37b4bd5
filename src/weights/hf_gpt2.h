// hf_gpt2.h: Hugging Face GPT-2 weights (transformers' GPT2LMHeadModel as
// save_pretrained writes it) <-> wgpt's reference layout.
//
// Name mapping (each name with or without the "transformer." prefix; i is the
// layer; HF's Conv1D stores a linear's weight as (in, out), ours is (out, in),
// so the four matmul weights are transposed):
//   wte.weight               (V, C)      -> wte (Vp, C), rows V..Vp zero
//   wpe.weight               (maxT, C)   -> wpe
//   h.i.ln_1.weight / .bias  (C)         -> ln1w / ln1b [i]
//   h.i.attn.c_attn.weight   (C, 3C)     -> qkvw [i] (3C, C), transposed
//   h.i.attn.c_attn.bias     (3C)        -> qkvb [i]
//   h.i.attn.c_proj.weight   (C, C)      -> attprojw [i], transposed
//   h.i.attn.c_proj.bias     (C)         -> attprojb [i]
//   h.i.ln_2.weight / .bias  (C)         -> ln2w / ln2b [i]
//   h.i.mlp.c_fc.weight      (C, 4C)     -> fcw [i] (4C, C), transposed
//   h.i.mlp.c_fc.bias        (4C)        -> fcb [i]
//   h.i.mlp.c_proj.weight    (4C, C)     -> fcprojw [i] (C, 4C), transposed
//   h.i.mlp.c_proj.bias      (C)         -> fcprojb [i]
//   ln_f.weight / .bias      (C)         -> lnfw / lnfb
//   lm_head.weight           (V, C)      optional; must equal wte (wgpt ties them)
//   h.i.attn.bias, h.i.attn.masked_bias  ignored (causal-mask buffers)
// Any other tensor, a missing one, a wrong shape, a dtype other than F32, F16
// or BF16, or a NaN/Inf is refused, naming the tensor.
#ifndef WGPT_HF_GPT2_H
#define WGPT_HF_GPT2_H

#include <stddef.h>

#include "weights/safetensors.h"
#include "weights/weights.h"

// Sizes come from config_json (the text of a config.json; see hf_config.h)
// or, when it is NULL, from the shapes: L from the h.i blocks, V and C from
// wte, maxT from wpe, and NH = C / 64 (GPT-2's head size in all four sizes).
// with_params: also convert the tensors into w->params. label names the
// source in messages. Returns 0, or -1 with err and w zeroed.
int wgpt_hf_gpt2_from_safetensors(const wgpt_safetensors *st, const char *config_json, size_t config_len,
                                  const char *label, int with_params, wgpt_weights *w, char *err, size_t errlen);

// path: a folder with model.safetensors (and config.json, if it has one), or
// a .safetensors file (a config.json beside it is used if present).
int wgpt_hf_gpt2_read(const char *path, int with_params, wgpt_weights *w, char *err, size_t errlen);

// Writes DIR/config.json and DIR/model.safetensors (F32, "transformer."
// names, no lm_head.weight: tied, as save_pretrained writes GPT-2) from w,
// each crash-safely; DIR is created if missing. w's padded vocabulary rows
// are left out. Returns 0, or -1 with err.
int wgpt_hf_gpt2_write(const char *dir, const wgpt_weights *w, char *err, size_t errlen);

#endif
