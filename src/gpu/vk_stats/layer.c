// layer.c: VK_LAYER_WGPT_stats, a Vulkan layer that reports what the driver
// made of each compute pipeline: the statistics of
// VK_KHR_pipeline_executable_properties (registers, shared and local memory,
// spills, instruction counts: whatever the driver offers; NVIDIA, RADV and
// lavapipe each name their own). WebGPU shows none of this, and it is what
// decides how many workgroups a compute unit holds at once.
//
// wgpt turns it on for its instance when $WGPT_KERNEL_STATS names a file
// (src/gpu/device.c); the layer then enables the extension on every device
// whose driver has it, asks for statistics at each vkCreateComputePipelines,
// and appends one line a pipeline executable to that file:
//   <n> <entry point> <executable name> | <statistic>=<value> | ...
// (wgpt writes the kernel's name before each pipeline it makes: Dawn names
// every entry point dawn_entry_point).
// Nothing changes for a device whose driver lacks the extension.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/vk_layer.h"

#define MAX_OBJ 64
#define EXT_NAME VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME

typedef struct {
    VkInstance instance;
    PFN_vkGetInstanceProcAddr gipa;
    PFN_vkDestroyInstance destroy;
    PFN_vkEnumerateDeviceExtensionProperties extensions;
} instance_;

typedef struct {
    VkDevice device;
    PFN_vkGetDeviceProcAddr gdpa;
    PFN_vkDestroyDevice destroy;
    PFN_vkCreateComputePipelines create_compute;
    PFN_vkGetPipelineExecutablePropertiesKHR exec_props;  // NULL: the driver lacks the extension
    PFN_vkGetPipelineExecutableStatisticsKHR exec_stats;
} device_;

static instance_ instances_[MAX_OBJ];
static device_ devices_[MAX_OBJ];
static pthread_mutex_t lock_ = PTHREAD_MUTEX_INITIALIZER;
static const wgpt_layer_table instance_table_ = {instances_, sizeof instances_[0], MAX_OBJ, &lock_};
static const wgpt_layer_table device_table_ = {devices_, sizeof devices_[0], MAX_OBJ, &lock_};
static unsigned long count_;  // pipelines reported, under lock_

static instance_ *find_instance_(VkInstance inst) { return wgpt_layer_find_(&instance_table_, inst); }

static device_ *find_device_(VkDevice dev) { return wgpt_layer_find_(&device_table_, dev); }

static VKAPI_ATTR VkResult VKAPI_CALL create_instance_(const VkInstanceCreateInfo *ci,
                                                       const VkAllocationCallbacks *alloc, VkInstance *out) {
    VkResult r;
    PFN_vkGetInstanceProcAddr next = wgpt_layer_create_instance_(ci, alloc, out, &r);
    if (!next) return r;
    instance_ t = {
        .instance = *out,
        .gipa = next,
        .destroy = (PFN_vkDestroyInstance)next(*out, "vkDestroyInstance"),
        .extensions = (PFN_vkEnumerateDeviceExtensionProperties)next(*out, "vkEnumerateDeviceExtensionProperties"),
    };
    if (!t.destroy || !t.extensions || wgpt_layer_put_(&instance_table_, &t) < 0) {
        if (t.destroy) t.destroy(*out, alloc);
        return VK_ERROR_INITIALIZATION_FAILED;
    }
    return VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL destroy_instance_(VkInstance inst, const VkAllocationCallbacks *alloc) {
    instance_ *t = find_instance_(inst);
    if (!t) return;
    PFN_vkDestroyInstance destroy = t->destroy;
    wgpt_layer_drop_(&instance_table_, t);
    destroy(inst, alloc);
}

static int has_extension_(const instance_ *t, VkPhysicalDevice pd) {
    uint32_t n = 0;
    if (t->extensions(pd, NULL, &n, NULL) != VK_SUCCESS) return 0;
    VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
    if (!e) return 0;
    int found = 0;
    if (t->extensions(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(e[i].extensionName, EXT_NAME);
    free(e);
    return found;
}

// The device as asked for, plus the extension and its feature where the
// driver has them (and the caller did not already ask).
static VKAPI_ATTR VkResult VKAPI_CALL create_device_(VkPhysicalDevice pd, const VkDeviceCreateInfo *ci,
                                                     const VkAllocationCallbacks *alloc, VkDevice *out) {
    PFN_vkGetInstanceProcAddr gipa;
    PFN_vkGetDeviceProcAddr gdpa;
    if (wgpt_layer_next_device_(ci, &gipa, &gdpa) < 0) return VK_ERROR_INITIALIZATION_FAILED;
    instance_ *inst = wgpt_layer_any_(&instance_table_);  // any of ours answers for the physical device
    if (!inst) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(inst->instance, "vkCreateDevice");
    if (!create) return VK_ERROR_INITIALIZATION_FAILED;

    int want = has_extension_(inst, pd), asked = 0, feature = 0;
    for (uint32_t i = 0; i < ci->enabledExtensionCount; i++) asked |= !strcmp(ci->ppEnabledExtensionNames[i], EXT_NAME);
    for (const VkBaseInStructure *s = ci->pNext; s; s = s->pNext)
        feature |= s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
    VkDeviceCreateInfo mine = *ci;
    const char **names = NULL;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR f = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pipelineExecutableInfo = VK_TRUE,
    };
    if (want && !feature) {
        f.pNext = (void *)mine.pNext;
        mine.pNext = &f;
    }
    if (want && !asked) {
        names = malloc((ci->enabledExtensionCount + 1) * sizeof *names);
        if (!names) return VK_ERROR_OUT_OF_HOST_MEMORY;
        for (uint32_t i = 0; i < ci->enabledExtensionCount; i++) names[i] = ci->ppEnabledExtensionNames[i];
        names[ci->enabledExtensionCount] = EXT_NAME;
        mine.enabledExtensionCount = ci->enabledExtensionCount + 1;
        mine.ppEnabledExtensionNames = names;
    }
    VkResult r = create(pd, &mine, alloc, out);
    free(names);
    if (r != VK_SUCCESS) return r;
    device_ d = {
        .device = *out,
        .gdpa = gdpa,
        .destroy = (PFN_vkDestroyDevice)gdpa(*out, "vkDestroyDevice"),
        .create_compute = (PFN_vkCreateComputePipelines)gdpa(*out, "vkCreateComputePipelines"),
    };
    if (want) {
        d.exec_props = (PFN_vkGetPipelineExecutablePropertiesKHR)gdpa(*out, "vkGetPipelineExecutablePropertiesKHR");
        d.exec_stats = (PFN_vkGetPipelineExecutableStatisticsKHR)gdpa(*out, "vkGetPipelineExecutableStatisticsKHR");
    }
    if (!d.destroy || !d.create_compute || wgpt_layer_put_(&device_table_, &d) < 0) {
        if (d.destroy) d.destroy(*out, alloc);
        return VK_ERROR_INITIALIZATION_FAILED;
    }
    return VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL destroy_device_(VkDevice dev, const VkAllocationCallbacks *alloc) {
    device_ *d = find_device_(dev);
    if (!d) return;
    PFN_vkDestroyDevice destroy = d->destroy;
    wgpt_layer_drop_(&device_table_, d);
    destroy(dev, alloc);
}

// Appends " | name=value" for one statistic.
static void put_stat_(char *buf, size_t cap, const VkPipelineExecutableStatisticKHR *s) {
    size_t l = strlen(buf);
    if (l >= cap) return;
    switch (s->format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        snprintf(buf + l, cap - l, " | %s=%s", s->name, s->value.b32 ? "yes" : "no");
        break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        snprintf(buf + l, cap - l, " | %s=%" PRId64, s->name, s->value.i64);
        break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        snprintf(buf + l, cap - l, " | %s=%" PRIu64, s->name, s->value.u64);
        break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
        snprintf(buf + l, cap - l, " | %s=%g", s->name, s->value.f64);
        break;
    default:
        break;
    }
}

// One line an executable of the pipeline, to $WGPT_KERNEL_STATS: the Vulkan
// loader loads this layer under Dawn's instance, with no channel to wgpt but
// the process's variables (src/gpu/vk_env.c sets this one from
// options.kernel_stats when it turns the layer on).
static void report_(const device_ *d, VkPipeline pl, const char *entry) {
    VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = pl};
    uint32_t ne = 0;
    if (d->exec_props(d->device, &pi, &ne, NULL) != VK_SUCCESS || ne == 0) return;
    VkPipelineExecutablePropertiesKHR *ep = calloc(ne, sizeof *ep);
    if (!ep) return;
    for (uint32_t i = 0; i < ne; i++) ep[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR;
    if (d->exec_props(d->device, &pi, &ne, ep) != VK_SUCCESS) ne = 0;
    pthread_mutex_lock(&lock_);
    unsigned long n = ++count_;
    pthread_mutex_unlock(&lock_);
    const char *path = getenv("WGPT_KERNEL_STATS");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    for (uint32_t i = 0; i < ne; i++) {
        char line[2048];
        snprintf(line, sizeof line, "%lu %s %s", n, entry ? entry : "?", ep[i].name);
        VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                          .pipeline = pl, .executableIndex = i};
        uint32_t ns = 0;
        if (d->exec_stats(d->device, &ei, &ns, NULL) == VK_SUCCESS && ns) {
            VkPipelineExecutableStatisticKHR *st = calloc(ns, sizeof *st);
            if (st) {
                for (uint32_t j = 0; j < ns; j++) st[j].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
                if (d->exec_stats(d->device, &ei, &ns, st) == VK_SUCCESS)
                    for (uint32_t j = 0; j < ns; j++) put_stat_(line, sizeof line, &st[j]);
                free(st);
            }
        }
        if (f) fprintf(f, "%s\n", line);
    }
    if (f) fclose(f);
    free(ep);
}

static VKAPI_ATTR VkResult VKAPI_CALL create_compute_(VkDevice dev, VkPipelineCache cache, uint32_t n,
                                                      const VkComputePipelineCreateInfo *ci,
                                                      const VkAllocationCallbacks *alloc, VkPipeline *out) {
    device_ *d = find_device_(dev);
    if (!d) return VK_ERROR_INITIALIZATION_FAILED;
    if (!d->exec_props || !d->exec_stats || n == 0) return d->create_compute(dev, cache, n, ci, alloc, out);
    VkComputePipelineCreateInfo *mine = malloc(n * sizeof *mine);
    if (!mine) return VK_ERROR_OUT_OF_HOST_MEMORY;
    for (uint32_t i = 0; i < n; i++) {
        mine[i] = ci[i];
        mine[i].flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    }
    VkResult r = d->create_compute(dev, cache, n, mine, alloc, out);
    if (r == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++) report_(d, out[i], ci[i].stage.pName);
    free(mine);
    return r;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL get_device_proc_addr_(VkDevice dev, const char *name) {
    if (!strcmp(name, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)get_device_proc_addr_;
    if (!strcmp(name, "vkDestroyDevice")) return (PFN_vkVoidFunction)destroy_device_;
    if (!strcmp(name, "vkCreateComputePipelines")) return (PFN_vkVoidFunction)create_compute_;
    device_ *d = dev ? find_device_(dev) : NULL;
    return d ? d->gdpa(dev, name) : NULL;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL get_instance_proc_addr_(VkInstance inst, const char *name) {
    if (!strcmp(name, "vkGetInstanceProcAddr")) return (PFN_vkVoidFunction)get_instance_proc_addr_;
    if (!strcmp(name, "vkCreateInstance")) return (PFN_vkVoidFunction)create_instance_;
    if (!strcmp(name, "vkDestroyInstance")) return (PFN_vkVoidFunction)destroy_instance_;
    if (!strcmp(name, "vkCreateDevice")) return (PFN_vkVoidFunction)create_device_;
    if (!strcmp(name, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)get_device_proc_addr_;
    if (!strcmp(name, "vkDestroyDevice")) return (PFN_vkVoidFunction)destroy_device_;
    if (!strcmp(name, "vkCreateComputePipelines")) return (PFN_vkVoidFunction)create_compute_;
    instance_ *t = inst ? find_instance_(inst) : NULL;
    return t ? t->gipa(inst, name) : NULL;
}

WGPT_LAYER_EXPORT VKAPI_ATTR VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v) {
    return wgpt_layer_negotiate_(v, get_instance_proc_addr_, get_device_proc_addr_);
}
