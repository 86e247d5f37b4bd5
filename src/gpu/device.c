// device.c: instance, adapter and device; errors, device loss and waiting.
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dawn_loader.h"
#include "internal.h"
#include "sgm_emulate.h"
#include "vk_devices.h"
#include "util/clock.h"
#include "util/err.h"

WGPUStringView wgpt_sv_(const char *s) { return (WGPUStringView){s, s ? WGPU_STRLEN : 0}; }

static void copy_sv_(char *dst, size_t cap, WGPUStringView v) {
    size_t n = 0;
    if (v.data) n = v.length == WGPU_STRLEN ? strlen(v.data) : v.length;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, v.data, n);
    dst[n] = 0;
}

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

// Waits on an instance alone (before a device exists).
static int wait_instance_(WGPUInstance inst, volatile int *done) {
    double t0 = wgpt_clock_s(), lim = wgpt_gpu_timeout_s_();
    long sleep_ns = 1000;
    while (!*done) {
        wgpuInstanceProcessEvents(inst);
        if (*done) break;
        if (wgpt_clock_s() - t0 > lim) return -1;
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000) sleep_ns *= 2;
    }
    return 0;
}

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
    double t0 = wgpt_clock_s(), lim = wgpt_gpu_timeout_s_();
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
    copy_sv_(r->msg, sizeof r->msg, message);
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
    copy_sv_(msg, sizeof msg, message);
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
    copy_sv_(msg, sizeof msg, message);
    g->failed = 1;
    snprintf(g->err, sizeof g->err, "GPU error (%s): %s",
             type == WGPUErrorType_OutOfMemory ? "out of memory"
             : type == WGPUErrorType_Validation ? "validation"
                                                 : "internal",
             msg);
}

// --- adapters -------------------------------------------------------------------
typedef struct {
    int done;
    WGPUAdapter adapter;
    char msg[512];
} adapter_result_;

static void on_adapter_(WGPURequestAdapterStatus status, WGPUAdapter adapter, WGPUStringView message, void *u1,
                        void *u2) {
    (void)u2;
    adapter_result_ *r = u1;
    r->adapter = status == WGPURequestAdapterStatus_Success ? adapter : NULL;
    copy_sv_(r->msg, sizeof r->msg, message);
    r->done = 1;
}

static const char *backend_name_(WGPUBackendType b) {
    switch (b) {
    case WGPUBackendType_Null: return "Null";
    case WGPUBackendType_WebGPU: return "WebGPU";
    case WGPUBackendType_D3D11: return "D3D11";
    case WGPUBackendType_D3D12: return "D3D12";
    case WGPUBackendType_Metal: return "Metal";
    case WGPUBackendType_Vulkan: return "Vulkan";
    case WGPUBackendType_OpenGL: return "OpenGL";
    case WGPUBackendType_OpenGLES: return "OpenGLES";
    default: return "unknown";
    }
}

static const char *type_name_(WGPUAdapterType t) {
    switch (t) {
    case WGPUAdapterType_DiscreteGPU: return "discrete GPU";
    case WGPUAdapterType_IntegratedGPU: return "integrated GPU";
    case WGPUAdapterType_CPU: return "CPU";
    default: return "unknown";
    }
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

// How many leading bytes of raw differ from the fill pattern: what Dawn wrote.
static size_t written_(const unsigned char *raw, size_t n) {
    size_t last = 0;
    for (size_t i = 0; i < n; i++)
        if (raw[i] != 0xA5) last = i + 1;
    return last;
}

// Our struct must end where Dawn's does: Dawn writing past it would overwrite our
// stack; ending well short of it would leave our trailing fields unwritten.
static int check_written_(const char *what, size_t wrote, size_t ours, char *err, size_t errlen) {
    if (wrote <= ours && wrote + 8 > ours) return 0;
    snprintf(err, errlen, "Dawn wrote %zu bytes of %s, but src/gpu/dawn_api.h declares %zu: the declarations do "
             "not fit this Dawn (%s)", wrote, what, ours, wgpt_dawn_loaded_());
    return -1;
}

// A config is trusted only if every field is plausible (our 28-byte layout was read off the build).
static int copy_matrix_configs_(const WGPUAdapterPropertiesSubgroupMatrixConfigs *p, const WGPUAdapterInfo *ai,
                                wgpt_gpu_info *out, char *err, size_t errlen) {
    out->n_matrix_configs = 0;
    for (size_t i = 0; i < p->configCount; i++) {
        const WGPUSubgroupMatrixConfig *c = &p->configs[i];
        int dim_ok = c->M >= 1 && c->M <= 256 && c->N >= 1 && c->N <= 256 && c->K >= 1 && c->K <= 256;
        int type_ok = c->componentType >= 1 && c->componentType <= 6 && c->resultComponentType >= 1 &&
                      c->resultComponentType <= 6;
        int sg_ok = c->subgroupMinSize >= ai->subgroupMinSize && c->subgroupMinSize <= c->subgroupMaxSize &&
                    c->subgroupMaxSize <= ai->subgroupMaxSize;
        if (!dim_ok || !type_ok || !sg_ok) {
            snprintf(err, errlen, "subgroup-matrix config %zu of %zu reads as types %u->%u, %ux%ux%u, subgroups "
                     "%u-%u: WGPUSubgroupMatrixConfig in src/gpu/dawn_api.h does not fit this Dawn (%s)",
                     i, p->configCount, (unsigned)c->componentType, (unsigned)c->resultComponentType, c->M, c->N,
                     c->K, c->subgroupMinSize, c->subgroupMaxSize, wgpt_dawn_loaded_());
            return -1;
        }
        if (out->n_matrix_configs == WGPT_MAX_MATRIX_CONFIGS) continue;
        out->matrix_configs[out->n_matrix_configs++] = (wgpt_matrix_config){
            (wgpt_matrix_type)c->componentType, (wgpt_matrix_type)c->resultComponentType, c->M, c->N, c->K,
            c->subgroupMinSize, c->subgroupMaxSize};
    }
    return 0;
}

static int fill_info_(WGPUAdapter a, wgpt_gpu_info *out, WGPUBackendType *backend, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->robust = 1;  // until wgpt_gpu_open decides
    out->has_f16 = wgpuAdapterHasFeature(a, WGPUFeatureName_ShaderF16) != 0;
    out->has_timestamps = wgpuAdapterHasFeature(a, WGPUFeatureName_TimestampQuery) != 0;
    out->has_subgroup_size_control = wgpuAdapterHasFeature(a, WGPUFeatureName_SubgroupSizeControl) != 0;
    out->has_subgroup_matrix = wgpuAdapterHasFeature(a, WGPUFeatureName_ChromiumExperimentalSubgroupMatrix) != 0;

    union {
        WGPUAdapterInfo s;
        unsigned char raw[sizeof(WGPUAdapterInfo) + 64];
    } ai;
    WGPUAdapterPropertiesSubgroupMatrixConfigs mc;
    memset(&mc, 0, sizeof mc);
    mc.chain.sType = WGPUSType_AdapterPropertiesSubgroupMatrixConfigs;
    memset(ai.raw, 0xA5, sizeof ai.raw);
    ai.s.nextInChain = out->has_subgroup_matrix ? &mc.chain : NULL;
    int rc = 0;
    if (wgpuAdapterGetInfo(a, &ai.s) == WGPUStatus_Success) {
        rc = check_written_("WGPUAdapterInfo", written_(ai.raw, sizeof ai.raw), sizeof ai.s, err, errlen);
        copy_sv_(out->name, sizeof out->name, ai.s.device);
        copy_sv_(out->vendor, sizeof out->vendor, ai.s.vendor);
        copy_sv_(out->driver, sizeof out->driver, ai.s.description);
        out->backend = backend_name_(ai.s.backendType);
        out->type = type_name_(ai.s.adapterType);
        out->vendor_id = ai.s.vendorID;
        out->device_id = ai.s.deviceID;
        out->subgroup_min = ai.s.subgroupMinSize;
        out->subgroup_max = ai.s.subgroupMaxSize;
        *backend = ai.s.backendType;
        if (rc == 0 && out->has_subgroup_matrix) rc = copy_matrix_configs_(&mc, &ai.s, out, err, errlen);
        if (out->has_subgroup_matrix) wgpuAdapterPropertiesSubgroupMatrixConfigsFreeMembers(mc);
        ai.s.nextInChain = NULL;
        wgpuAdapterInfoFreeMembers(ai.s);
    } else {
        snprintf(out->name, sizeof out->name, "(no adapter info)");
        out->backend = "unknown";
        out->type = "unknown";
        *backend = WGPUBackendType_Undefined;
    }
    union {
        WGPULimits s;
        unsigned char raw[sizeof(WGPULimits) + 64];
    } lim;
    memset(lim.raw, 0xA5, sizeof lim.raw);
    lim.s.nextInChain = NULL;
    if (wgpuAdapterGetLimits(a, &lim.s) == WGPUStatus_Success) {
        if (rc == 0) rc = check_written_("WGPULimits", written_(lim.raw, sizeof lim.raw), sizeof lim.s, err, errlen);
        out->max_storage_binding = lim.s.maxStorageBufferBindingSize;
        out->max_buffer = lim.s.maxBufferSize;
        out->max_workgroup_storage = lim.s.maxComputeWorkgroupStorageSize;
        out->max_invocations = lim.s.maxComputeInvocationsPerWorkgroup;
        out->max_workgroups_per_dim = lim.s.maxComputeWorkgroupsPerDimension;
        out->storage_offset_align = lim.s.minStorageBufferOffsetAlignment;
    }
    return rc;
}

#define MAX_ADAPTERS 8
#define MAX_LISTED 16  // entries of wgpt_gpu_list: adapters, identical GPUs one by one

// Dawn prints to stderr, with no callback to route it, when it trims an adapter
// limit to fit its own tables (lavapipe's 1000000 dynamic buffers become 16) —
// on every run, and harmless. Adapter discovery runs with stderr sent to a
// temporary file; what Dawn wrote there, less those lines, is passed on.
typedef struct {
    int saved;
    FILE *tmp;
} stderr_filter_;

static void filter_begin_(stderr_filter_ *f) {
    fflush(stderr);
    f->tmp = tmpfile();
    f->saved = f->tmp ? dup(STDERR_FILENO) : -1;
    if (f->saved >= 0 && dup2(fileno(f->tmp), STDERR_FILENO) < 0) {
        close(f->saved);
        f->saved = -1;
    }
}

static void filter_end_(stderr_filter_ *f) {
    if (f->saved >= 0) {
        fflush(stderr);
        dup2(f->saved, STDERR_FILENO);
        close(f->saved);
        rewind(f->tmp);
        char line[1024];
        while (fgets(line, sizeof line, f->tmp))
            if (!strstr(line, "artificially reduced")) fputs(line, stderr);
    }
    if (f->tmp) fclose(f->tmp);
}

// Every distinct real adapter Dawn offers: one request per power preference.
// *null_only is set when Dawn answered with nothing but its Null backend.
static int request_adapters_(WGPUInstance inst, WGPUAdapter *out, wgpt_gpu_info *infos, int *null_only,
                             char *err, size_t errlen) {
    static const WGPUPowerPreference prefs[] = {WGPUPowerPreference_HighPerformance, WGPUPowerPreference_LowPower,
                                                WGPUPowerPreference_Undefined};
    int n = 0, nulls = 0;
    char last_msg[512] = "";
    // Adapter-stage toggles: f16 on NVIDIA's Vulkan driver (Dawn gates it on drivers
    // >= 615.71 without this), the Vulkan memory model that subgroup matrices need,
    // and the experimental features (subgroup matrices) themselves.
    static const char *const adapter_on[] = {"allow_unsafe_apis", "vulkan_enable_f16_on_nvidia",
                                             "use_vulkan_memory_model"};
    WGPUDawnTogglesDescriptor toggles = {{NULL, WGPUSType_DawnTogglesDescriptor}, 3, adapter_on, 0, NULL};
    for (size_t p = 0; p < sizeof prefs / sizeof prefs[0]; p++) {
        WGPURequestAdapterOptions o;
        memset(&o, 0, sizeof o);
        o.nextInChain = &toggles.chain;
        o.featureLevel = WGPUFeatureLevel_Core;
        o.powerPreference = prefs[p];
        adapter_result_ r;
        memset(&r, 0, sizeof r);
        WGPURequestAdapterCallbackInfo cb = {NULL, WGPUCallbackMode_AllowProcessEvents, on_adapter_, &r, NULL};
        wgpuInstanceRequestAdapter(inst, &o, cb);
        if (wait_instance_(inst, &r.done) < 0) {
            snprintf(err, errlen, "Dawn did not answer the adapter request in time");
            for (int i = 0; i < n; i++) wgpuAdapterRelease(out[i]);
            return -1;
        }
        if (!r.adapter) {
            snprintf(last_msg, sizeof last_msg, "%s", r.msg);
            continue;
        }
        wgpt_gpu_info info;
        WGPUBackendType backend;
        if (fill_info_(r.adapter, &info, &backend, err, errlen) < 0) {
            wgpuAdapterRelease(r.adapter);
            for (int i = 0; i < n; i++) wgpuAdapterRelease(out[i]);
            return -1;
        }
        int dup = backend == WGPUBackendType_Null;
        nulls += dup;
        for (int i = 0; i < n && !dup; i++)
            dup = infos[i].device_id == info.device_id && infos[i].vendor_id == info.vendor_id &&
                  strcmp(infos[i].name, info.name) == 0 && strcmp(infos[i].backend, info.backend) == 0;
        if (dup || n == MAX_ADAPTERS) {
            wgpuAdapterRelease(r.adapter);
            continue;
        }
        out[n] = r.adapter;
        infos[n] = info;
        n++;
    }
    *null_only = n == 0 && nulls > 0;
    if (n == 0)
        snprintf(err, errlen,
                 "no GPU adapter found%s%s%s. wgpt needs a Vulkan, Metal or D3D12 driver; on a machine "
                 "without a GPU, Mesa >= 25 lavapipe (Debian 12: apt-get install -t bookworm-backports "
                 "mesa-vulkan-drivers; scripts/ensure-driver.sh does it)",
                 *null_only ? " (Dawn offered only its Null backend, which computes nothing)" : "",
                 last_msg[0] ? ": " : "", last_msg);
    return n;
}

static int stats_layer_(char *err, size_t errlen);

// An instance that allows the experimental features (subgroup matrices).
static WGPUInstance create_instance_(void) {
    static const char *const on[] = {"allow_unsafe_apis"};
    WGPUDawnTogglesDescriptor toggles = {{NULL, WGPUSType_DawnTogglesDescriptor}, 1, on, 0, NULL};
    WGPUInstanceDescriptor d = {&toggles.chain, 0, NULL, NULL};
    return wgpuCreateInstance(&d);
}

// Dawn's adapters as wgpt_gpu_list numbers them (vk_devices.h).
static int expand_(const wgpt_gpu_info *in, int n, wgpt_gpu_info *out, int *from, int max) {
    wgpt_vk_device_ vk[WGPT_VK_MAX_DEVICES_];
    int nvk = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(in[i].backend, "Vulkan") == 0) {
            nvk = wgpt_vk_devices_(vk, WGPT_VK_MAX_DEVICES_);
            break;
        }
    return wgpt_vk_expand_(in, n, vk, nvk, out, from, max);
}

int wgpt_gpu_list(wgpt_gpu_info *out, int max, char *err, size_t errlen) {
    if (wgpt_gpu_env_check_(err, errlen) < 0 || stats_layer_(err, errlen) < 0 || wgpt_dawn_load_(err, errlen) < 0)
        return -1;
    WGPUInstance inst = create_instance_();
    if (!inst) {
        snprintf(err, errlen, "Dawn could not create a WebGPU instance");
        return -1;
    }
    WGPUAdapter ad[MAX_ADAPTERS];
    wgpt_gpu_info infos[MAX_ADAPTERS];
    int null_only = 0;
    stderr_filter_ quiet;
    filter_begin_(&quiet);
    int n = request_adapters_(inst, ad, infos, &null_only, err, errlen);
    filter_end_(&quiet);
    for (int i = 0; i < n; i++) wgpuAdapterRelease(ad[i]);
    wgpuInstanceRelease(inst);
    if (n <= 0) return -1;
    int from[MAX_LISTED];
    return expand_(infos, n, out, from, max < MAX_LISTED ? max : MAX_LISTED);
}

int wgpt_gpu_list_nth_gpu(const wgpt_gpu_info *list, int n, int i, int *ngpus) {
    int ng = 0;
    for (int j = 0; j < n; j++) ng += strcmp(list[j].type, "CPU") != 0;
    if (ngpus) *ngpus = ng;
    if (ng == 0 || i < 0) return -1;
    for (int j = 0, seen = 0; j < n; j++)
        if (strcmp(list[j].type, "CPU") != 0 && seen++ == i % ng) return j;
    return -1;
}

// The folder of wgpt's Vulkan layers (VkLayer_wgpt_select.json and
// VkLayer_wgpt_stats.json): next to the executable (the build tree's vk/),
// else where `make install` puts it (PREFIX/lib/wgpt/vk).
static int layer_dir_(char *out, size_t cap) {
    char dir[PATH_MAX - 64], path[PATH_MAX];
    if (wgpt_exe_dir_(dir, sizeof dir) < 0) return -1;
    static const char *const rel[] = {"vk", "../lib/wgpt/vk"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(path, sizeof path, "%s/%s/VkLayer_wgpt_stats.json", dir, rel[i]);
        if (access(path, R_OK) != 0) continue;
        snprintf(path, sizeof path, "%s/%s/VkLayer_wgpt_select.json", dir, rel[i]);
        if (access(path, R_OK) == 0) return snprintf(out, cap, "%s/%s", dir, rel[i]) < (int)cap ? 0 : -1;
    }
    return -1;
}

// Sets an environment variable to a value, or to `value:old` when append and
// it was set; *saved gets the old value (NULL if unset) for restore_env_.
static int set_env_(const char *name, const char *value, int append, char **saved) {
    const char *old = getenv(name);
    *saved = old ? strdup(old) : NULL;
    if (old && !*saved) return -1;
    char buf[PATH_MAX * 2];
    int n = append && old && *old ? snprintf(buf, sizeof buf, "%s:%s", value, old)
                                  : snprintf(buf, sizeof buf, "%s", value);
    if (n < 0 || (size_t)n >= sizeof buf) return -1;  // a cut list would name another path or layer
    return setenv(name, buf, 1);
}

static void restore_env_(const char *name, char *saved) {
    if (saved) setenv(name, saved, 1);
    else unsetenv(name);
    free(saved);
}

// $WGPT_KERNEL_STATS (a file): VK_LAYER_WGPT_stats on for every Vulkan
// instance of this process, so that each pipeline's driver statistics
// (registers, shared memory) land in that file after the kernel's name
// (kernel.c writes the names). Set once, before Dawn's first instance.
static pthread_once_t stats_once_ = PTHREAD_ONCE_INIT;
static int stats_failed_;

static void stats_layer_on_(void) {
    char dir[PATH_MAX], *saved[2];
    if (layer_dir_(dir, sizeof dir) < 0) {
        stats_failed_ = 1;
        return;
    }
    stats_failed_ = set_env_("VK_ADD_LAYER_PATH", dir, 1, &saved[0]) < 0 ||
                    set_env_("VK_INSTANCE_LAYERS", "VK_LAYER_WGPT_stats", 1, &saved[1]) < 0;
    free(saved[0]);
    free(saved[1]);
}

static int stats_layer_(char *err, size_t errlen) {
    const char *f = getenv("WGPT_KERNEL_STATS");
    if (!f || !*f) return 0;
    FILE *probe = fopen(f, "a");
    if (!probe) {
        snprintf(err, errlen, "WGPT_KERNEL_STATS=%s: cannot open that file to append to: %s", f, strerror(errno));
        return -1;
    }
    fclose(probe);
    pthread_once(&stats_once_, stats_layer_on_);
    if (!stats_failed_) return 0;
    snprintf(err, errlen, "WGPT_KERNEL_STATS=%s asks for the kernels' driver statistics, and wgpt's Vulkan layer "
             "(vk/VkLayer_wgpt_stats.json beside the wgpt executable) is missing or the environment could not "
             "name it: run make", f);
    return -1;
}

// Dawn's adapters on an instance whose Vulkan instances show only the device
// of that UUID: VK_LAYER_WGPT_select, turned on for this instance alone (the
// loader reads these variables when Dawn creates its Vulkan instance, during
// the adapter requests).
static int request_selected_(wgpt_gpu *g, const wgpt_gpu_info *want, WGPUAdapter *ad, wgpt_gpu_info *infos,
                             char *err, size_t errlen) {
    char dir[PATH_MAX];
    if (layer_dir_(dir, sizeof dir) < 0) {
        snprintf(err, errlen, "'%s' at %s is one of several identical GPUs, and wgpt's device layer "
                 "(vk/VkLayer_wgpt_select.json beside the wgpt executable) is missing: run make", want->name,
                 want->pci);
        return -1;
    }
    // NODEVICE_SELECT: Mesa's device-select layer (an implicit layer where Mesa
    // is installed) only reorders devices, and overruns its array when shown none.
    static const char *const vars[] = {"VK_ADD_LAYER_PATH", "VK_INSTANCE_LAYERS", "WGPT_VK_SELECT_UUID",
                                       "NODEVICE_SELECT"};
    const char *values[] = {dir, "VK_LAYER_WGPT_select", want->select_uuid, "1"};
    char *saved[4];
    int bad = 0;
    for (int i = 0; i < 4; i++) bad |= set_env_(vars[i], values[i], i < 2, &saved[i]);
    int n = -1, null_only = 0;
    if (bad) {
        snprintf(err, errlen, "cannot set the environment for wgpt's device layer (VK_ADD_LAYER_PATH or "
                 "VK_INSTANCE_LAYERS too long, or out of memory)");
    } else if (!(g->instance = create_instance_())) {
        snprintf(err, errlen, "Dawn could not create a WebGPU instance");
    } else {
        stderr_filter_ quiet;
        filter_begin_(&quiet);
        n = request_adapters_(g->instance, ad, infos, &null_only, err, errlen);
        filter_end_(&quiet);
    }
    for (int i = 0; i < 4; i++) restore_env_(vars[i], saved[i]);
    if (n <= 0) {
        size_t l = strlen(err);
        snprintf(err + l, errlen - l, " (opening '%s' at %s through wgpt's device layer, %s)", want->name, want->pci,
                 dir);
        return -1;
    }
    for (int i = 1; i < n; i++) wgpuAdapterRelease(ad[i]);
    if (infos[0].vendor_id != want->vendor_id || infos[0].device_id != want->device_id) {
        snprintf(err, errlen, "wgpt's device layer was asked for '%s' at %s, and Dawn offered '%s': is another "
                 "Vulkan layer reordering devices?", want->name, want->pci, infos[0].name);
        wgpuAdapterRelease(ad[0]);
        return -1;
    }
    snprintf(infos[0].pci, sizeof infos[0].pci, "%s", want->pci);
    snprintf(infos[0].select_uuid, sizeof infos[0].select_uuid, "%s", want->select_uuid);
    return 1;
}

static int icase_contains_(const char *hay, const char *needle) {
    size_t nl = strlen(needle);
    for (const char *h = hay; *h; h++) {
        size_t i = 0;
        while (i < nl && h[i] && tolower((unsigned char)h[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == nl) return 1;
    }
    return nl == 0;
}

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
    copy_sv_(r->msg, sizeof r->msg, message);
    r->done = 1;
}

// Comma-separated toggles from an environment variable, for experiments.
static int env_toggles_(const char *var, char *buf, size_t cap, const char **list, int max) {
    const char *s = getenv(var);
    int n = 0;
    if (!s || !*s) return 0;
    snprintf(buf, cap, "%s", s);
    for (char *t = strtok(buf, ","); t && n < max; t = strtok(NULL, ",")) list[n++] = t;
    return n;
}

// The Vulkan device of that deviceUUID alone, through VK_LAYER_WGPT_select.
static int open_uuid_(wgpt_gpu *g, const char *uuid, WGPUAdapter *ad, wgpt_gpu_info *infos, char *err,
                      size_t errlen) {
    wgpt_vk_device_ vk[WGPT_VK_MAX_DEVICES_];
    int nvk = wgpt_vk_devices_(vk, WGPT_VK_MAX_DEVICES_);
    int k = wgpt_vk_find_uuid_(vk, nvk, uuid);
    if (k < 0) {
        snprintf(err, errlen, "no Vulkan device has deviceUUID '%s' (%d Vulkan device(s) found)", uuid, nvk);
        return -1;
    }
    wgpt_gpu_info want;
    memset(&want, 0, sizeof want);
    snprintf(want.name, sizeof want.name, "%s", vk[k].name);
    snprintf(want.pci, sizeof want.pci, "%s", vk[k].has_pci ? vk[k].pci : "no PCI address");
    wgpt_vk_uuid_hex_(vk[k].uuid, want.select_uuid);
    want.vendor_id = vk[k].vendor_id;
    want.device_id = vk[k].device_id;
    return request_selected_(g, &want, ad, infos, err, errlen);
}

// The adapter the options ask for, an index into ad (-1 with err filled).
// *np, Dawn's adapters, changes where one of several identical GPUs is asked
// for: then ad holds that device alone, from a new instance.
static int pick_adapter_(wgpt_gpu *g, const wgpt_gpu_options *opt, WGPUAdapter *ad, wgpt_gpu_info *infos, int *np,
                         char *err, size_t errlen) {
    int pick = -1, n = *np;
    if (opt->adapter_index >= 0) {
        wgpt_gpu_info listed[MAX_LISTED];
        int from[MAX_LISTED];
        int nl = expand_(infos, n, listed, from, MAX_LISTED);
        if (opt->adapter_index < nl && listed[opt->adapter_index].select_uuid[0]) {
            // One of several identical GPUs: a new instance that sees only it.
            for (int i = 0; i < n; i++) wgpuAdapterRelease(ad[i]);
            wgpuInstanceRelease(g->instance);
            g->instance = NULL;
            n = *np = request_selected_(g, &listed[opt->adapter_index], ad, infos, err, errlen);
            pick = n > 0 ? 0 : -1;
        } else if (opt->adapter_index < nl) {
            pick = from[opt->adapter_index];
            snprintf(infos[pick].pci, sizeof infos[pick].pci, "%s", listed[opt->adapter_index].pci);
        } else {
            snprintf(err, errlen, "adapter index %d does not exist: %d adapter(s) found (see `wgpt info --list`)",
                     opt->adapter_index, nl);
        }
    } else if (opt->adapter_name && *opt->adapter_name) {
        for (int i = 0; i < n && pick < 0; i++)
            if (icase_contains_(infos[i].name, opt->adapter_name)) pick = i;
        if (pick < 0) {
            int off = snprintf(err, errlen, "no adapter's name contains '%s'; found:", opt->adapter_name);
            for (int i = 0; i < n && off > 0 && (size_t)off < errlen; i++)
                off += snprintf(err + off, errlen - off, " [%d] %s;", i, infos[i].name);
        }
    } else {
        pick = 0;
    }
    return pick;
}

wgpt_gpu *wgpt_gpu_open(const wgpt_gpu_options *opt, char *err, size_t errlen) {
    wgpt_gpu_options defaults = {.adapter_index = -1};
    if (!opt) opt = &defaults;
    if (wgpt_gpu_env_check_(err, errlen) < 0 || stats_layer_(err, errlen) < 0) return NULL;
    wgpt_gpu *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (wgpt_dawn_load_(err, errlen) < 0) {
        free(g);
        return NULL;
    }
    g->interrupt = opt->interrupt;
    if (!opt->select_uuid && !(g->instance = create_instance_())) {
        snprintf(err, errlen, "Dawn could not create a WebGPU instance");
        free(g);
        return NULL;
    }
    WGPUAdapter ad[MAX_ADAPTERS];
    wgpt_gpu_info infos[MAX_ADAPTERS];
    int null_only = 0, n = -1, pick = -1;
    if (opt->select_uuid) {
        n = open_uuid_(g, opt->select_uuid, ad, infos, err, errlen);
        pick = 0;
    } else {
        stderr_filter_ quiet;
        filter_begin_(&quiet);
        n = request_adapters_(g->instance, ad, infos, &null_only, err, errlen);
        filter_end_(&quiet);
        if (n > 0) pick = pick_adapter_(g, opt, ad, infos, &n, err, errlen);
    }
    if (n <= 0) {
        wgpt_gpu_close(g);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (i != pick) wgpuAdapterRelease(ad[i]);
    if (pick < 0) {
        wgpt_gpu_close(g);
        return NULL;
    }
    g->adapter = ad[pick];
    g->info = infos[pick];

    if (!wgpuAdapterHasFeature(g->adapter, WGPUFeatureName_Subgroups)) {
        snprintf(err, errlen, "adapter '%s' (%s) has no subgroup operations, which wgpt's kernels need",
                 g->info.name, g->info.backend);
        wgpt_gpu_close(g);
        return NULL;
    }
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
    int non = env_toggles_("WGPT_DAWN_TOGGLES", onbuf, sizeof onbuf, on, WGPT_GPU_TOGGLES_ON_MAX);
    int noff = env_toggles_("WGPT_DAWN_TOGGLES_OFF", offbuf, sizeof offbuf, off, WGPT_GPU_TOGGLES_OFF_MAX);
    off[noff++] = "timestamp_quantization";
    const char *rs = getenv("WGPT_ROBUST");
    g->info.robust = opt->robust || (rs && strcmp(rs, "1") == 0) || strcmp(g->info.type, "CPU") == 0;
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
    if (wait_instance_(g->instance, &r.done) < 0 || !r.device) {
        snprintf(err, errlen, "could not open a device on '%s': %s", g->info.name, r.done ? r.msg : "timed out");
        wgpt_gpu_close(g);
        return NULL;
    }
    g->device = r.device;
    g->queue = wgpuDeviceGetQueue(g->device);
    memset(&g->limits, 0, sizeof g->limits);
    wgpuDeviceGetLimits(g->device, &g->limits);
    g->info.has_f16 = wgpuDeviceHasFeature(g->device, WGPUFeatureName_ShaderF16) != 0;
    g->info.has_timestamps = wgpuDeviceHasFeature(g->device, WGPUFeatureName_TimestampQuery) != 0;
    g->info.has_subgroup_size_control = wgpuDeviceHasFeature(g->device, WGPUFeatureName_SubgroupSizeControl) != 0;
    g->info.has_subgroup_matrix =
        wgpuDeviceHasFeature(g->device, WGPUFeatureName_ChromiumExperimentalSubgroupMatrix) != 0;
    if (!g->info.has_subgroup_matrix) g->info.n_matrix_configs = 0;
    // Emulated subgroup matrices where asked (WGPT_SGM_EMULATE only where the
    // device has f16, so that a suite run with it keeps its f16-less devices).
    const char *emu = getenv("WGPT_SGM_EMULATE");
    int emulate = opt->emulate_sgm || (emu && strcmp(emu, "1") == 0 && g->info.has_f16);
    if (!g->info.has_subgroup_matrix && emulate && wgpt_sgm_emulate_info(&g->info, err, errlen) < 0) {
        wgpt_gpu_close(g);
        return NULL;
    }
    if (wgpt_sgm_pick_config_(&g->info, err, errlen) < 0) {
        wgpt_gpu_close(g);
        return NULL;
    }
    g->info.max_storage_binding = g->limits.maxStorageBufferBindingSize;
    g->info.max_buffer = g->limits.maxBufferSize;
    g->info.max_workgroup_storage = g->limits.maxComputeWorkgroupStorageSize;
    g->info.max_invocations = g->limits.maxComputeInvocationsPerWorkgroup;
    g->info.max_workgroups_per_dim = g->limits.maxComputeWorkgroupsPerDimension;
    g->info.storage_offset_align = g->limits.minStorageBufferOffsetAlignment;
    if (opt->max_binding && opt->max_binding < g->info.max_storage_binding) g->info.max_storage_binding = opt->max_binding;
    g->info.cpu_kernels = opt->kernels == WGPT_KERNELS_CPU ||
                          (opt->kernels != WGPT_KERNELS_GPU && wgpt_gpu_env_kernels_(g->info.type) == WGPT_KERNELS_CPU);
    g->info.matmul_splits = opt->matmul_splits;
    g->info.sgm_block = opt->sgm_block;
    g->info.matmul_epilogues = opt->matmul_epilogues | wgpt_gpu_env_epilogues_();
    g->info.streamk = opt->streamk ? opt->streamk : wgpt_gpu_env_streamk_();
    g->batch = 1;
    if (wgpt_chip_fill_(&g->info, err, errlen) < 0) {
        wgpt_gpu_close(g);
        return NULL;
    }

    const char *dir = opt->kernel_dir ? opt->kernel_dir : getenv("WGPT_KERNEL_DIR");
    if (dir && !*dir) dir = NULL;
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
