// internal.h: the GPU layer's private state, shared by src/gpu/*.c only.
#ifndef WGPT_GPU_INTERNAL_H
#define WGPT_GPU_INTERNAL_H

#include "dawn_api.h"
#include "gpu.h"
#include "mem_account.h"
#include "kernel_source.h"
#include "pipeline_cache.h"

struct wgpt_kernel {
    wgpt_gpu *gpu;
    char name[64];
    int file;   // index into gpu->files
    int index;  // kernel index in that file
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
    wgpt_mem_account mem;              // bytes of storage buffers, by tag (wgpt_gpu_memory, wgpt_gpu_mem_tag)
    struct wgpt_buf *unused;           // wgpt_gpu_unused_binding's buffer, once asked for
    wgpt_pcache *pcache;               // Dawn's blob cache on disk (options.cache_dir), or NULL

    // kernel files: the shared preamble, then every other file split at markers
    char *shared_label, *shared_text;
    wgpt_ksrc_file *files;
    int nfiles;
    wgpt_kernel **kernels;
    int nkernels, kernels_cap;

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

// Fills info's compute_units and fp32_peak_tflops from the table of known
// chips (chips.c) and WGPT_COMPUTE_UNITS; -1 with err filled if that is malformed.
int wgpt_chip_fill_(wgpt_gpu_info *info, char *err, size_t errlen);
// Sets info->sgm_config from info's matrix configurations and subgroup sizes
// (and WGPT_SGM_CONFIG): the f16 x f16 -> f32 one 03_linear_sgm.wgsl takes
// (M 16, N 8 or 16, K 8, 16 or 32, the adapter's one subgroup size), the
// largest K first, or -1. -1 with err filled for a WGPT_SGM_CONFIG it cannot take.
int wgpt_sgm_pick_config_(wgpt_gpu_info *info, char *err, size_t errlen);
// The lines every kernel's source begins with: `enable f16;`, `enable subgroups;`
// and, with subgroup matrices, `enable chromium_experimental_subgroup_matrix;`
// and the chosen configuration's fragment shape (SGM_TM, SGM_TN, SGM_TK, SGM_SG).
void wgpt_gpu_enables_(const wgpt_gpu_info *info, char *out, size_t cap);
// 0 if the device is usable, else -1 with the sticky error (device lost, etc.).
int wgpt_gpu_check_(wgpt_gpu *g);
// Processes Dawn events until *done, the GPU timeout or an interrupt; -1 with
// an error naming `what` (after a timeout or an interrupt the device is hung).
int wgpt_gpu_wait_(wgpt_gpu *g, volatile int *done, const char *what);
// env.c: WGPT_GPU_TIMEOUT_S (seconds; 600 unless set), and a check of every
// GPU variable's value: 0, or -1 with err naming the variable.
double wgpt_gpu_timeout_s_(void);
int wgpt_gpu_env_check_(char *err, size_t errlen);
// WGPT_KERNELS=gpu|cpu, else by the device type: the CPU twins on a "CPU".
wgpt_kernels wgpt_gpu_env_kernels_(const char *type);
// WGPT_MATMUL_EPILOGUE's WGPT_EPI_* bits (0 unset; a bad value is refused
// by wgpt_gpu_env_check_ before a device opens).
uint32_t wgpt_gpu_env_epilogues_(void);
// WGPT_MATMUL_STREAMK as a wgpt_streamk (AUTO when unset; a bad value is
// refused by wgpt_gpu_env_check_).
wgpt_streamk wgpt_gpu_env_streamk_(void);
// Room for the WGPT_DAWN_TOGGLES(_OFF) lists (device.c adds its own toggles).
#define WGPT_GPU_TOGGLES_MAX_CHARS 512
#define WGPT_GPU_TOGGLES_ON_MAX 13
#define WGPT_GPU_TOGGLES_OFF_MAX 15
// Runs `push` ... `pop` as an error scope: returns 0, or -1 with Dawn's message after `what`.
void wgpt_gpu_scope_push_(wgpt_gpu *g);
int wgpt_gpu_scope_pop_(wgpt_gpu *g, const char *what);
WGPUStringView wgpt_sv_(const char *s);

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
