// adapters.c: Dawn's adapters: asking for them, what they are (wgpt_gpu_info),
// wgpt_gpu_list's numbering, and the one that wgpt_gpu_open's options name.
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dawn_loader.h"
#include "internal.h"
#include "vk_devices.h"
#include "util/clock.h"

WGPUStringView wgpt_sv_(const char *s) { return (WGPUStringView){s, s ? WGPU_STRLEN : 0}; }

void wgpt_copy_sv_(char *dst, size_t cap, WGPUStringView v) {
    size_t n = 0;
    if (v.data) n = v.length == WGPU_STRLEN ? strlen(v.data) : v.length;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, v.data, n);
    dst[n] = 0;
}

// Waits on an instance alone (before a device exists).
int wgpt_wait_instance_(WGPUInstance inst, volatile int *done, double lim) {
    double t0 = wgpt_clock_s();
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
    wgpt_copy_sv_(r->msg, sizeof r->msg, message);
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
        wgpt_copy_sv_(out->name, sizeof out->name, ai.s.device);
        wgpt_copy_sv_(out->vendor, sizeof out->vendor, ai.s.vendor);
        wgpt_copy_sv_(out->driver, sizeof out->driver, ai.s.description);
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

#define MAX_ADAPTERS WGPT_MAX_ADAPTERS_
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
static int request_each_(WGPUInstance inst, WGPUAdapter *out, wgpt_gpu_info *infos, int *null_only, double timeout_s,
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
        if (wgpt_wait_instance_(inst, &r.done, timeout_s) < 0) {
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

// The same, with what Dawn prints meanwhile filtered (filter_begin_).
static int request_adapters_(WGPUInstance inst, WGPUAdapter *out, wgpt_gpu_info *infos, double timeout_s, char *err,
                             size_t errlen) {
    stderr_filter_ quiet;
    filter_begin_(&quiet);
    int null_only = 0, n = request_each_(inst, out, infos, &null_only, timeout_s, err, errlen);
    filter_end_(&quiet);
    return n;
}

WGPUInstance wgpt_instance_create_(void) {
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

int wgpt_gpu_list(const wgpt_gpu_options *opt, wgpt_gpu_info *out, int max, char *err, size_t errlen) {
    wgpt_gpu_options defaults = {.adapter_index = -1};
    if (!opt) opt = &defaults;
    if (wgpt_gpu_options_check_(opt, err, errlen) < 0 || wgpt_vk_stats_layer_(opt->kernel_stats, err, errlen) < 0 ||
        wgpt_dawn_load_(opt->dawn_lib, err, errlen) < 0)
        return -1;
    WGPUInstance inst = wgpt_instance_create_();
    if (!inst) {
        snprintf(err, errlen, "Dawn could not create a WebGPU instance");
        return -1;
    }
    WGPUAdapter ad[MAX_ADAPTERS];
    wgpt_gpu_info infos[MAX_ADAPTERS];
    int n = request_adapters_(inst, ad, infos, wgpt_gpu_timeout_of_(opt), err, errlen);
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

// Dawn's adapters on an instance whose Vulkan instances show only the device
// of that UUID: VK_LAYER_WGPT_select, turned on for this instance alone (the
// loader reads these variables when Dawn creates its Vulkan instance, during
// the adapter requests).
static int request_selected_(wgpt_gpu *g, const wgpt_gpu_info *want, WGPUAdapter *ad, wgpt_gpu_info *infos,
                             char *err, size_t errlen) {
    char dir[PATH_MAX];
    if (wgpt_vk_layer_dir_(dir, sizeof dir) < 0) {
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
    for (int i = 0; i < 4; i++) bad |= wgpt_vk_env_set_(vars[i], values[i], i < 2, &saved[i]);
    int n = -1;
    if (bad) {
        snprintf(err, errlen, "cannot set the environment for wgpt's device layer (VK_ADD_LAYER_PATH or "
                 "VK_INSTANCE_LAYERS too long, or out of memory)");
    } else if (!(g->instance = wgpt_instance_create_())) {
        snprintf(err, errlen, "Dawn could not create a WebGPU instance");
    } else {
        n = request_adapters_(g->instance, ad, infos, g->timeout_s, err, errlen);
    }
    for (int i = 0; i < 4; i++) wgpt_vk_env_restore_(vars[i], saved[i]);
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

int wgpt_adapters_open_(wgpt_gpu *g, const wgpt_gpu_options *opt, WGPUAdapter *ad, wgpt_gpu_info *infos, int *pick,
                        char *err, size_t errlen) {
    *pick = -1;
    if (opt->select_uuid) {
        int n = open_uuid_(g, opt->select_uuid, ad, infos, err, errlen);
        if (n > 0) *pick = 0;
        return n;
    }
    if (!(g->instance = wgpt_instance_create_())) {
        snprintf(err, errlen, "Dawn could not create a WebGPU instance");
        return -1;
    }
    int n = request_adapters_(g->instance, ad, infos, g->timeout_s, err, errlen);
    if (n > 0) *pick = pick_adapter_(g, opt, ad, infos, &n, err, errlen);
    return n;
}
