// device.c: the device (opened on the adapter adapters.c picks); errors,
// device loss and waiting.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dawn_loader.h"
#include "internal.h"
#include "sgm_emulate.h"
#include "util/clock.h"
#include "util/err.h"

int wgpt_gpu_fail(wgpt_gpu *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wgpt_verrf(g->err, sizeof g->err, fmt, ap);
    va_end(ap);
    return -1;
}

int wgpt_gpu_check_(wgpt_gpu *g) {
    if (!g->failed) return 0;
    return -1;  // g->err holds the sticky message
}

const char *wgpt_gpu_error(const wgpt_gpu *g) { return g->err; }
const wgpt_gpu_info *wgpt_gpu_get_info(const wgpt_gpu *g) { return &g->info; }

// The longest sleep between two looks at Dawn's events while waiting. A GPU
// training step ends with a wait for its results, and a sleep of up to 1 ms
// overshoots it: GPT-2 124M f16 on the H200 took 35.1-38.4 ms a step with 1 ms,
// 34.3-34.6 with 64 us. On a CPU adapter the
// waiting thread shares the cores that run the kernels: the demo's model took
// 172-177 ms a step with 1 ms there and 187-203 with 64 us (one slow period of
// a 2-core machine, alternated), so it keeps 1 ms.
#define WAIT_CAP_GPU_NS 64000L
#define WAIT_CAP_CPU_NS 1000000L

int wgpt_gpu_wait_(wgpt_gpu *g, volatile int *done, const char *what) {
    double t0 = wgpt_clock_s(), lim = g->timeout_s;
    long sleep_ns = 1000;
    long cap = g->info.type && strcmp(g->info.type, "CPU") == 0 ? WAIT_CAP_CPU_NS : WAIT_CAP_GPU_NS;
    while (!*done) {
        wgpuInstanceProcessEvents(g->instance);
        if (*done) break;
        if (g->failed) return -1;
        int interrupted = g->interrupt && *g->interrupt;
        if (interrupted || wgpt_clock_s() - t0 > lim) {
            g->hung = g->failed = 1;  // the work is still queued: nothing after it can be trusted
            if (interrupted) return wgpt_gpu_fail(g, "interrupted while waiting for the GPU to finish %s", what);
            return wgpt_gpu_fail(g, "GPU did not finish %s within %g s (set WGPT_GPU_TIMEOUT_S to wait longer)",
                                  what, lim);
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < cap) sleep_ns = sleep_ns * 2 < cap ? sleep_ns * 2 : cap;
    }
    return g->failed ? -1 : 0;
}

// --- error scopes -------------------------------------------------------------
typedef struct {
    int done;
    WGPUErrorType type;
    char msg[3072];
} scope_result_;

static void on_pop_(WGPUPopErrorScopeStatus status, WGPUErrorType type, WGPUStringView message, void *u1,
                    void *u2) {
    (void)u2;
    scope_result_ *r = u1;
    r->type = status == WGPUPopErrorScopeStatus_Success ? type : WGPUErrorType_Unknown;
    wgpt_copy_sv_(r->msg, sizeof r->msg, message);
    r->done = 1;
}

void wgpt_gpu_scope_push_(wgpt_gpu *g) {
    wgpuDevicePushErrorScope(g->device, WGPUErrorFilter_OutOfMemory);
    wgpuDevicePushErrorScope(g->device, WGPUErrorFilter_Validation);
}

int wgpt_gpu_scope_pop_(wgpt_gpu *g, const char *what) {
    scope_result_ r[2];
    for (int i = 0; i < 2; i++) {  // validation, then out-of-memory
        memset(&r[i], 0, sizeof r[i]);
        WGPUPopErrorScopeCallbackInfo cb = {NULL, WGPUCallbackMode_AllowProcessEvents, on_pop_, &r[i], NULL};
        wgpuDevicePopErrorScope(g->device, cb);
        if (wgpt_gpu_wait_(g, &r[i].done, what) < 0) return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (r[i].type == WGPUErrorType_NoError) continue;
        const char *kind = r[i].type == WGPUErrorType_OutOfMemory ? "out of GPU memory"
                           : r[i].type == WGPUErrorType_Validation ? "rejected by WebGPU validation"
                                                                     : "GPU error";
        return wgpt_gpu_fail(g, "%s: %s: %s", what, kind, r[i].msg);
    }
    return 0;
}

// --- callbacks from Dawn --------------------------------------------------------
static void on_lost_(WGPUDevice const *device, WGPUDeviceLostReason reason, WGPUStringView message, void *u1,
                     void *u2) {
    (void)device, (void)u2;
    wgpt_gpu *g = u1;
    if (g->closing || reason == WGPUDeviceLostReason_CallbackCancelled) return;
    char msg[2048];
    wgpt_copy_sv_(msg, sizeof msg, message);
    g->failed = 1;
    snprintf(g->err, sizeof g->err, "GPU device lost (%s): %s",
             reason == WGPUDeviceLostReason_Destroyed ? "destroyed" : "reason unknown", msg);
}

static void on_uncaptured_(WGPUDevice const *device, WGPUErrorType type, WGPUStringView message, void *u1,
                           void *u2) {
    (void)device, (void)u2;
    wgpt_gpu *g = u1;
    if (g->failed) return;  // keep the first error: later ones usually follow from it
    char msg[3072];
    wgpt_copy_sv_(msg, sizeof msg, message);
    g->failed = 1;
    snprintf(g->err, sizeof g->err, "GPU error (%s): %s",
             type == WGPUErrorType_OutOfMemory ? "out of memory"
             : type == WGPUErrorType_Validation ? "validation"
                                                 : "internal",
             msg);
}

const char *wgpt_matrix_type_name(wgpt_matrix_type t) {
    switch (t) {
    case WGPT_MATRIX_F32: return "f32";
    case WGPT_MATRIX_F16: return "f16";
    case WGPT_MATRIX_U32: return "u32";
    case WGPT_MATRIX_I32: return "i32";
    case WGPT_MATRIX_U8: return "u8";
    case WGPT_MATRIX_I8: return "i8";
    default: return "?";
    }
}

const char *wgpt_gpu_dawn(void) { return wgpt_dawn_loaded_(); }

// --- device ---------------------------------------------------------------------
typedef struct {
    int done;
    WGPUDevice device;
    char msg[1024];
} device_result_;

static void on_device_(WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView message, void *u1,
                       void *u2) {
    (void)u2;
    device_result_ *r = u1;
    r->device = status == WGPURequestDeviceStatus_Success ? device : NULL;
    wgpt_copy_sv_(r->msg, sizeof r->msg, message);
    r->done = 1;
}

// A comma-separated list of toggles (options.dawn_toggles), for experiments;
// the option check bounded its length and count.
static int split_toggles_(const char *s, char *buf, size_t cap, const char **list, int max) {
    int n = 0;
    if (!s || !*s) return 0;
    snprintf(buf, cap, "%s", s);
    for (char *t = strtok(buf, ","); t && n < max; t = strtok(NULL, ",")) list[n++] = t;
    return n;
}

// The adapter opt asks for, in g->adapter and g->info: 0, or -1 with err filled.
static int open_adapter_(wgpt_gpu *g, const wgpt_gpu_options *opt, char *err, size_t errlen) {
    WGPUAdapter ad[WGPT_MAX_ADAPTERS_];
    wgpt_gpu_info infos[WGPT_MAX_ADAPTERS_];
    int pick, n = wgpt_adapters_open_(g, opt, ad, infos, &pick, err, errlen);
    for (int i = 0; i < n; i++)
        if (i != pick) wgpuAdapterRelease(ad[i]);
    if (pick < 0) return -1;
    g->adapter = ad[pick];
    g->info = infos[pick];
    if (!wgpuAdapterHasFeature(g->adapter, WGPUFeatureName_Subgroups)) {
        snprintf(err, errlen, "adapter '%s' (%s) has no subgroup operations, which wgpt's kernels need",
                 g->info.name, g->info.backend);
        return -1;
    }
    return 0;
}

// The device on g->adapter with the features and toggles opt asks for: 0, or -1 with err filled.
static int request_device_(wgpt_gpu *g, const wgpt_gpu_options *opt, char *err, size_t errlen) {
    WGPUFeatureName feats[5];
    size_t nf = 0;
    feats[nf++] = WGPUFeatureName_Subgroups;
    if (g->info.has_f16 && !opt->disable_f16) feats[nf++] = WGPUFeatureName_ShaderF16;
    if (g->info.has_timestamps) feats[nf++] = WGPUFeatureName_TimestampQuery;
    if (g->info.has_subgroup_size_control) feats[nf++] = WGPUFeatureName_SubgroupSizeControl;
    // Every configuration NVIDIA and AMD report takes f16 or 8-bit inputs; without f16 there is no use for it.
    if (g->info.has_subgroup_matrix && !opt->disable_f16) feats[nf++] = WGPUFeatureName_ChromiumExperimentalSubgroupMatrix;

    WGPULimits want;
    memset(&want, 0, sizeof want);
    wgpuAdapterGetLimits(g->adapter, &want);
    want.nextInChain = NULL;

    // Timestamps are quantised by default; profiling wants them as measured.
    const char *on[16], *off[16];
    char onbuf[WGPT_GPU_TOGGLES_MAX_CHARS], offbuf[WGPT_GPU_TOGGLES_MAX_CHARS];
    int non = split_toggles_(opt->dawn_toggles, onbuf, sizeof onbuf, on, WGPT_GPU_TOGGLES_ON_MAX);
    int noff = split_toggles_(opt->dawn_toggles_off, offbuf, sizeof offbuf, off, WGPT_GPU_TOGGLES_OFF_MAX);
    off[noff++] = "timestamp_quantization";
    g->info.robust = opt->robust || strcmp(g->info.type, "CPU") == 0;
    if (!g->info.robust) {  // see gpu.h
        on[non++] = "allow_unsafe_apis";
        on[non++] = "disable_robustness";
    }
    WGPUDawnTogglesDescriptor toggles = {{NULL, WGPUSType_DawnTogglesDescriptor}, (size_t)non, on, (size_t)noff, off};
    WGPUDawnCacheDeviceDescriptor cache;
    g->pcache = wgpt_pcache_open_(opt->cache_dir);
    if (g->pcache) {
        wgpt_pcache_describe_(g->pcache, &cache);
        toggles.chain.next = &cache.chain;
    }

    WGPUDeviceDescriptor dd;
    memset(&dd, 0, sizeof dd);
    dd.nextInChain = &toggles.chain;
    dd.label = wgpt_sv_("wgpt");
    dd.requiredFeatureCount = nf;
    dd.requiredFeatures = feats;
    dd.requiredLimits = &want;
    dd.deviceLostCallbackInfo = (WGPUDeviceLostCallbackInfo){NULL, WGPUCallbackMode_AllowProcessEvents, on_lost_, g, NULL};
    dd.uncapturedErrorCallbackInfo = (WGPUUncapturedErrorCallbackInfo){NULL, on_uncaptured_, g, NULL};
    device_result_ r;
    memset(&r, 0, sizeof r);
    WGPURequestDeviceCallbackInfo cb = {NULL, WGPUCallbackMode_AllowProcessEvents, on_device_, &r, NULL};
    wgpuAdapterRequestDevice(g->adapter, &dd, cb);
    if (wgpt_wait_instance_(g->instance, &r.done, g->timeout_s) < 0 || !r.device) {
        snprintf(err, errlen, "could not open a device on '%s': %s", g->info.name, r.done ? r.msg : "timed out");
        return -1;
    }
    g->device = r.device;
    return 0;
}

// What the device has (features, limits, subgroup matrices) and the settings
// it keeps, in g->info: 0, or -1 with err filled.
static int fill_device_info_(wgpt_gpu *g, const wgpt_gpu_options *opt, char *err, size_t errlen) {
    g->queue = wgpuDeviceGetQueue(g->device);
    memset(&g->limits, 0, sizeof g->limits);
    wgpuDeviceGetLimits(g->device, &g->limits);
    g->info.has_f16 = wgpuDeviceHasFeature(g->device, WGPUFeatureName_ShaderF16) != 0;
    g->info.has_timestamps = wgpuDeviceHasFeature(g->device, WGPUFeatureName_TimestampQuery) != 0;
    g->info.has_subgroup_size_control = wgpuDeviceHasFeature(g->device, WGPUFeatureName_SubgroupSizeControl) != 0;
    g->info.has_subgroup_matrix =
        wgpuDeviceHasFeature(g->device, WGPUFeatureName_ChromiumExperimentalSubgroupMatrix) != 0;
    if (!g->info.has_subgroup_matrix) g->info.n_matrix_configs = 0;
    // Emulated subgroup matrices where asked (WGPT_SGM_EMULATE_IF_F16 only where
    // the device has f16, so that a suite run with it keeps its f16-less devices).
    int emulate = opt->emulate_sgm == 1 || (opt->emulate_sgm == WGPT_SGM_EMULATE_IF_F16 && g->info.has_f16);
    if (!g->info.has_subgroup_matrix && emulate && wgpt_sgm_emulate_info(&g->info, err, errlen) < 0) return -1;
    if (wgpt_sgm_choose_config_(&g->info, opt->sgm_config, err, errlen) < 0) return -1;
    g->info.max_storage_binding = g->limits.maxStorageBufferBindingSize;
    g->info.max_buffer = g->limits.maxBufferSize;
    g->info.max_workgroup_storage = g->limits.maxComputeWorkgroupStorageSize;
    g->info.max_invocations = g->limits.maxComputeInvocationsPerWorkgroup;
    g->info.max_workgroups_per_dim = g->limits.maxComputeWorkgroupsPerDimension;
    g->info.storage_offset_align = g->limits.minStorageBufferOffsetAlignment;
    wgpt_gpu_keep_settings_(&g->info, opt);
    wgpt_chip_fill_(&g->info, opt->compute_units);
    return 0;
}

wgpt_gpu *wgpt_gpu_open(const wgpt_gpu_options *opt, char *err, size_t errlen) {
    wgpt_gpu_options defaults = {.adapter_index = -1};
    if (!opt) opt = &defaults;
    if (wgpt_gpu_options_check_(opt, err, errlen) < 0) return NULL;
    wgpt_gpu *g = calloc(1, sizeof *g);
    if (!g || (opt->kernel_stats && *opt->kernel_stats && !(g->kernel_stats = strdup(opt->kernel_stats)))) {
        if (g) free(g);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    // (the copy: setting the layer's variable may replace the string opt points to)
    if (wgpt_vk_stats_layer_(g->kernel_stats, err, errlen) < 0 || wgpt_dawn_load_(opt->dawn_lib, err, errlen) < 0) {
        free(g->kernel_stats);
        free(g);
        return NULL;
    }
    g->interrupt = opt->interrupt;
    g->timeout_s = wgpt_gpu_timeout_of_(opt);
    g->batch = 1;
    if (open_adapter_(g, opt, err, errlen) < 0 || request_device_(g, opt, err, errlen) < 0 ||
        fill_device_info_(g, opt, err, errlen) < 0) {
        wgpt_gpu_close(g);
        return NULL;
    }
    const char *dir = opt->kernel_dir && *opt->kernel_dir ? opt->kernel_dir : NULL;
    if (wgpt_kernels_load_(g, dir, err, errlen) < 0) {
        wgpt_gpu_close(g);
        return NULL;
    }
    if (opt->profile) {
        if (!g->info.has_timestamps) {
            snprintf(err, errlen, "profiling needs timestamp queries, which '%s' does not offer", g->info.name);
            wgpt_gpu_close(g);
            return NULL;
        }
        if (wgpt_profile_init_(g) < 0) {
            snprintf(err, errlen, "%s", g->err);
            wgpt_gpu_close(g);
            return NULL;
        }
    }
    return g;
}

// Devices closed while hung, in this process (see wgpt_gpu_left_hung).
static int left_hung_;

int wgpt_gpu_left_hung(void) { return left_hung_; }

void wgpt_gpu_close(wgpt_gpu *g) {
    if (!g) return;
    g->closing = 1;
    wgpt_batch_release_(g);
    wgpt_profile_free_(g);
    wgpt_kernels_free_(g);
    wgpt_buf_free(g->unused);
    if (g->readback) wgpuBufferRelease(g->readback);
    if (g->fence_src) wgpuBufferRelease(g->fence_src);
    if (g->queue) wgpuQueueRelease(g->queue);
    free(g->kernel_stats);
    if (g->hung) {  // see gpu.h: the device, adapter and instance are left to the process's exit
        // (and g->pcache, whose callbacks that device may still call)
        left_hung_++;
        free(g);
        return;
    }
    if (g->device) {
        wgpuDeviceDestroy(g->device);
        wgpuDeviceRelease(g->device);
    }
    wgpt_pcache_free_(g->pcache);  // (after the device: Dawn may store while it goes)
    if (g->adapter) wgpuAdapterRelease(g->adapter);
    if (g->instance) {
        wgpuInstanceProcessEvents(g->instance);
        wgpuInstanceRelease(g->instance);
    }
    free(g);
}

void wgpt_gpu_cache_stats_get(const wgpt_gpu *g, wgpt_gpu_cache_stats *out) { wgpt_pcache_stats_(g->pcache, out); }

void wgpt_gpu_force_loss(wgpt_gpu *g) {
    wgpuDeviceForceLoss(g->device, WGPUDeviceLostReason_Unknown, wgpt_sv_("forced by wgpt_gpu_force_loss"));
    wgpuInstanceProcessEvents(g->instance);
}

void wgpt_gpu_describe(const wgpt_gpu_info *i, char *out, size_t outlen) {
    char sg[32];
    if (i->subgroup_min == i->subgroup_max) snprintf(sg, sizeof sg, "%u", i->subgroup_min);
    else snprintf(sg, sizeof sg, "%u-%u", i->subgroup_min, i->subgroup_max);
    char at[24] = "";
    if (i->pci[0]) snprintf(at, sizeof at, " (%s)", i->pci);
    snprintf(out, outlen, "%s%s | %s | %s | subgroup %s | f16 %s | subgroup matrices %s | timestamps %s%s", i->name,
             at, i->backend, i->type, sg, i->has_f16 ? "yes" : "no",
             i->sgm_emulated ? "emulated" : i->has_subgroup_matrix ? "yes" : "no", i->has_timestamps ? "yes" : "no",
             i->robust ? "" : " | robustness off");
}
