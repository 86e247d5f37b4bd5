// web_internal.h: the browser backend's private state, shared by
// src/gpu/web/*.c only. The backend implements gpu/gpu.h in a web page: the
// same interface as the Dawn backend (src/gpu/device.c ...), its work done by
// the page's navigator.gpu through functions web/wgpt_gpu.js gives the
// WebAssembly module (imports of module "wgpt_gpu", declared below). Built
// only for wasm32 (make web); the layers above cannot tell which backend they
// run on.
//
// Waits (opening the device, compiling a kernel, reading a buffer back,
// finishing the queue) are JavaScript promises: the imports that await one
// are wrapped in WebAssembly.Suspending, so the C code blocks on them as it
// does natively while the page's event loop runs (JSPI).
#ifndef WGPT_GPU_WEB_INTERNAL_H
#define WGPT_GPU_WEB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "gpu/kernel_source.h"
#include "gpu/mem_account.h"
#include "gpu/backend_shared.h"

#define IMPORT(name) __attribute__((import_module("wgpt_gpu"), import_name(#name)))

// What the page's adapter and device offer; written by js_open (web/wgpt_gpu.js
// knows this layout: keep the two in step).
typedef struct web_info {
    uint32_t sg_min, sg_max, has_f16, has_timestamps;
    uint32_t max_storage_binding, max_buffer, max_workgroup_storage, max_invocations;
    uint32_t max_workgroups_per_dim, storage_offset_align, is_fallback, reserved;
    char name[128], vendor[64], driver[128];
    // chromium-experimental-subgroup-matrix enabled on the device, and the
    // adapter's configurations (web/wgpt_gpu.js matrixConfigs), at most
    // WGPT_MAX_MATRIX_CONFIGS: input, result (wgpt_matrix_type), M, N, K, sg_min, sg_max.
    uint32_t has_sgm, n_configs;
    uint32_t configs[WGPT_MAX_MATRIX_CONFIGS][7];
} web_info;
_Static_assert(offsetof(web_info, has_sgm) == 368, "web/wgpt_gpu.js writes has_sgm at 368");

// 0, or -1 with the reason in err (no WebGPU, no adapter, no subgroups).
IMPORT(open) int js_open(int disable_f16, web_info *info, char *err, int errlen);
IMPORT(close) void js_close(void);
// 1 and the message in msg if the device was lost or reported an error no call caught.
IMPORT(error) int js_error(char *msg, int len);
IMPORT(force_loss) void js_force_loss(void);
IMPORT(buf_create) int js_buf_create(double bytes);
IMPORT(buf_free) void js_buf_free(int id);
IMPORT(buf_write) int js_buf_write(int id, double offset, const void *src, double bytes);
IMPORT(buf_read) int js_buf_read(int id, double offset, void *dst, double bytes);
IMPORT(buf_zero) int js_buf_zero(int id, double offset, double bytes);
// A pipeline id, or 0 with compile errors in err, one "LINE\tCOLUMN\tMESSAGE\n" each
// (LINE 0: no line), or a message with no tab.
IMPORT(kernel_create) int js_kernel_create(const char *code, const char *entry, const char *label,
                                           const char *const_names, const double *const_values, int nconsts,
                                           char *err, int errlen);
IMPORT(bind_create) int js_bind_create(int pipeline, const int *bufs, const double *offsets, const double *sizes,
                                       int n, const void *params, int params_size);
IMPORT(bind_set_params) int js_bind_set_params(int bind, const void *params, int params_size);
IMPORT(bind_free) void js_bind_free(int bind);
IMPORT(dispatch) int js_dispatch(int bind, uint32_t x, uint32_t y, uint32_t z);
IMPORT(submit) int js_submit(void);
IMPORT(finish) int js_finish(void);

struct wgpt_kernel {
    wgpt_kernel_id id;  // first: kernel_table.c makes and names kernels through it
    int pipeline;  // 0 until first use
};

struct wgpt_buf {
    wgpt_gpu *gpu;
    int id;
    uint64_t size;
    int tag;  // the memory tag it counts under (wgpt_gpu_mem_tag)
    char label[64];
};

struct wgpt_bind {
    wgpt_gpu *gpu;
    wgpt_kernel *kernel;
    int id;
    size_t params_size;
};

struct wgpt_readback {
    uint8_t *host;
    uint64_t size, bytes;
    int busy;
    char label[64];
};

struct wgpt_gpu {
    wgpt_gpu_info info;
    char err[4096];
    int failed;
    wgpt_mem_account mem;  // bytes of storage buffers, by tag
    wgpt_buf *unused;
    wgpt_ktable kt;  // kernel files: the shared preamble, then every other file split at markers
};

// 0 if the device is usable, else -1 with the sticky error (a lost device, an
// error no call caught: the browser's message).
int wgpt_web_check_(wgpt_gpu *g);
// kernel.c: the built-in kernel files (embedded at build time), and their release.
int wgpt_web_kernels_load_(wgpt_gpu *g, char *err, size_t errlen);
void wgpt_web_kernels_free_(wgpt_gpu *g);

#endif
