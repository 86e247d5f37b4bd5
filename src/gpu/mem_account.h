// mem_account.h: the bytes of storage buffers a device holds, now and at its
// peak, split by the caller's tag (gpu.h: wgpt_gpu_mem_tag). Shared by the
// Dawn backend and the browser's (src/gpu/web/).
#ifndef WGPT_GPU_MEM_ACCOUNT_H
#define WGPT_GPU_MEM_ACCOUNT_H

#include <stdint.h>

#include "gpu/gpu.h"

typedef struct wgpt_mem_account {
    uint64_t live, peak;                                   // bytes of storage buffers
    int tag;                                               // the tag new buffers count under
    uint64_t tag_live[WGPT_MEM_TAGS], tag_at_peak[WGPT_MEM_TAGS];  // by tag: now, and at peak's time
} wgpt_mem_account;

// Counts a new buffer of size bytes; returns the tag it counts under (give it back to _remove).
int wgpt_mem_account_add(wgpt_mem_account *a, uint64_t size);
void wgpt_mem_account_remove(wgpt_mem_account *a, uint64_t size, int tag);
// Sets the tag later buffers count under (out of range: 0); returns the one before.
int wgpt_mem_account_set_tag(wgpt_mem_account *a, int tag);

#endif
