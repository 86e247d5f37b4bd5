// input_status.h: the small u32 "status" buffer that kernels set when an
// input id is out of range (a token in encoder_forward, a target in
// crossentropy_forward), so the host can name the bad id when it reads the
// loss instead of training on garbage. Flags are sticky until cleared.
#ifndef WGPT_INPUT_STATUS_H
#define WGPT_INPUT_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"

// Layout (u32 words), written by kernels/01_embedding.wgsl and 06_cross_entropy.wgsl:
// [0] flags, [1] largest invalid token id, [2] largest invalid target id, [3] 0.
#define WGPT_STATUS_WORDS 4u
#define WGPT_STATUS_BYTES (WGPT_STATUS_WORDS * 4u)
#define WGPT_STATUS_BAD_TOKEN 1u
#define WGPT_STATUS_BAD_TARGET 2u

// Formats the status words: returns 0 if no flag is set (msg ""), else 1 with
// e.g. "token id 50300 out of range [0, 50257)" in msg.
int wgpt_input_status_message(const uint32_t st[WGPT_STATUS_WORDS], uint32_t V, char *msg, size_t len);

// Downloads the status (waits for the work recorded so far); if a flag is
// set, records a zero fill of it (so the next step starts clean) and returns 1
// with the message. 0: clean. -1: GPU error (wgpt_gpu_error).
int wgpt_input_status_check(wgpt_gpu *g, wgpt_view status, uint32_t V, char *msg, size_t len);

#endif
