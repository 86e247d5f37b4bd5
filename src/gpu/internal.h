// internal.h: the GPU layer's private state, shared by src/gpu/*.c only.
#ifndef WGPT_GPU_INTERNAL_H
#define WGPT_GPU_INTERNAL_H

#include "dawn_api.h"
#include "gpu.h"
#include "mem_account.h"
#include "kernel_source.h"
#include "pipeline_cache.h"
#include "backend_shared.h"

struct wgpt_kernel {
    wgpt_kernel_id id;  // first: kernel_table.c makes and names kernels through it
    WGPUComputePipeline pipeline;  // NULL until first use
    WGPUBindGroupLayout layout;
};

struct wgpt_buf {
    wgpt_gpu *gpu;
    WGPUBuffer buffer;
    uint64_t size;
    int counted;  // its size is in gpu->mem
    int tag;      // the memory tag it counts under (wgpt_gpu_mem_tag)
    char label[64];
};

struct wgpt_bind {
    wgpt_gpu *gpu;
    wgpt_kernel *kernel;
    WGPUBindGroup group;
    WGPUBuffer uniform;  // NULL without params
    size_t params_size;
    uint64_t used_in_batch;  // batch id of the last dispatch recorded with it
};

struct wgpt_gpu {
    WGPUInstance instance;
    WGPUAdapter adapter;
    WGPUDevice device;
    WGPUQueue queue;
    WGPULimits limits;
    wgpt_gpu_info info;
    int closing;

    char err[4096];
    int failed;  // sticky: the device was lost or reported an error no call caught
    // sticky: a wait gave up on work the GPU still runs (timeout, interrupt);
    // tearing the device down would wait for that work, so close skips it
    int hung;
    volatile sig_atomic_t *interrupt;  // from wgpt_gpu_options
    double timeout_s;                  // the longest wait (wgpt_gpu_timeout_of_)
    char *kernel_stats;                // a copy of options.kernel_stats, or NULL
    wgpt_mem_account mem;              // bytes of storage buffers, by tag (wgpt_gpu_memory, wgpt_gpu_mem_tag)
    struct wgpt_buf *unused;           // wgpt_gpu_unused_binding's buffer, once asked for
    wgpt_pcache *pcache;               // Dawn's blob cache on disk (options.cache_dir), or NULL

    wgpt_ktable kt;  // kernel files: the shared preamble, then every other file split at markers

    // recording
    WGPUCommandEncoder encoder;
    WGPUComputePassEncoder pass;
    uint64_t batch;  // id of the batch being recorded
    int recorded;    // commands in the current batch

    // host copies
    WGPUBuffer readback;
    uint64_t readback_size;
    WGPUBuffer fence_src;  // 16 bytes copied to wait for the queue

    // profiling
    int profile;
    WGPUQuerySet queries;
    uint32_t query_cap, query_used;
    WGPUBuffer query_resolve, query_read;
    const char **query_names;
};

// Dispatches recorded before wgpt_dispatch submits them on its own (not
// while profiling).
#ifndef WGPT_SUBMIT_EVERY
#define WGPT_SUBMIT_EVERY 64
#endif

// 0 if the device is usable, else -1 with the sticky error (device lost, etc.).
int wgpt_gpu_check_(wgpt_gpu *g);
// Processes Dawn events until *done, the GPU timeout or an interrupt; -1 with
// an error naming `what` (after a timeout or an interrupt the device is hung).
int wgpt_gpu_wait_(wgpt_gpu *g, volatile int *done, const char *what);
// Runs `push` ... `pop` as an error scope: returns 0, or -1 with Dawn's message after `what`.
void wgpt_gpu_scope_push_(wgpt_gpu *g);
int wgpt_gpu_scope_pop_(wgpt_gpu *g, const char *what);
WGPUStringView wgpt_sv_(const char *s);

// adapters.c: the wait before a device exists (-1 after timeout_s);
// Dawn's string views.
int wgpt_wait_instance_(WGPUInstance inst, volatile int *done, double timeout_s);
void wgpt_copy_sv_(char *dst, size_t cap, WGPUStringView v);
// An instance that allows the experimental features (subgroup matrices).
WGPUInstance wgpt_instance_create_(void);
// Up to WGPT_MAX_ADAPTERS_ adapters, as opt asks (its index, name or
// select_uuid) and timeout_s bounds: on g->instance, or on a new one that
// sees the one device asked for (made where g->instance is NULL or must be
// replaced); ad[*pick] is the one to open, the others are to be released.
// The count, or -1 (*pick -1) with err filled.
#define WGPT_MAX_ADAPTERS_ 8
int wgpt_adapters_open_(wgpt_gpu *g, const wgpt_gpu_options *opt, WGPUAdapter *ad, wgpt_gpu_info *infos, int *pick,
                        char *err, size_t errlen);

// vk_env.c: the Vulkan loader's environment (wgpt's layers, src/gpu/vk_*/).
// The folder of wgpt's layers' manifests, 0; -1 if missing.
int wgpt_vk_layer_dir_(char *out, size_t cap);
// Sets an environment variable to a value, or to `value:old` when append and
// it was set; *saved gets the old value (NULL if unset) for wgpt_vk_env_restore_.
int wgpt_vk_env_set_(const char *name, const char *value, int append, char **saved);
void wgpt_vk_env_restore_(const char *name, char *saved);
// file (options.kernel_stats) not NULL: VK_LAYER_WGPT_stats on for every
// later Vulkan instance of the process, writing after the kernels' names
// (kernel.c) to file. -1 with err filled if file or the layer is missing.
int wgpt_vk_stats_layer_(const char *file, char *err, size_t errlen);

// kernel.c
int wgpt_kernels_load_(wgpt_gpu *g, const char *dir, char *err, size_t errlen);
void wgpt_kernels_free_(wgpt_gpu *g);
// dispatch.c
int wgpt_batch_end_pass_(wgpt_gpu *g);
WGPUCommandEncoder wgpt_batch_encoder_(wgpt_gpu *g);
// Submits what is recorded, if anything, before a buffer it may use is
// destroyed (wgpt_buf_free, wgpt_bind_free).
void wgpt_gpu_submit_pending_(wgpt_gpu *g);
void wgpt_batch_release_(wgpt_gpu *g);
int wgpt_profile_init_(wgpt_gpu *g);
void wgpt_profile_free_(wgpt_gpu *g);

#endif
