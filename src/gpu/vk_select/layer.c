// layer.c: VK_LAYER_WGPT_select, a Vulkan layer that shows an instance one
// physical device: the one whose deviceUUID was $WGPT_VK_SELECT_UUID (32 hex
// digits) when the instance was created. Dawn's C API offers one adapter per power preference, so two
// identical GPUs are one adapter to it; this layer is how wgpt opens the
// second. wgpt_gpu_open (src/gpu/device.c) turns it on for one instance
// through VK_ADD_LAYER_PATH and VK_INSTANCE_LAYERS. Without the variable, or
// with one that is not 32 hex digits, it hides every device: a caller that
// asked for a device gets none rather than another one.
//
// Only instance functions are hooked; the layer takes no part in devices
// (negotiated without vkGetDeviceProcAddr, so the loader leaves it out of
// every device chain).
#include <stdlib.h>
#include <string.h>

#include "gpu/vk_layer.h"

#define MAX_INSTANCES 64

typedef struct {
    VkInstance instance;
    PFN_vkGetInstanceProcAddr next_gipa;
    PFN_vkDestroyInstance destroy;
    PFN_vkEnumeratePhysicalDevices enumerate;
    PFN_vkEnumeratePhysicalDeviceGroups groups;
    PFN_vkGetPhysicalDeviceProperties props;
    PFN_vkGetPhysicalDeviceProperties2 props2;
    int has_uuid;  // $WGPT_VK_SELECT_UUID at vkCreateInstance: the instance keeps its choice
    uint8_t uuid[VK_UUID_SIZE];
} instance_;

static instance_ instances_[MAX_INSTANCES];
static pthread_mutex_t lock_ = PTHREAD_MUTEX_INITIALIZER;
static const wgpt_layer_table table_ = {instances_, sizeof instances_[0], MAX_INSTANCES, &lock_};

static instance_ *find_(VkInstance inst) { return wgpt_layer_find_(&table_, inst); }

static int hex_(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// The UUID asked for; 0 when there is none to be had (then nothing matches).
// From the environment: the Vulkan loader loads this layer into the driver's
// side of Dawn's instance, and calls it with no channel to wgpt but the
// process's variables (src/gpu/vk_env.c sets this one around the request).
static int read_uuid_(uint8_t uuid[VK_UUID_SIZE]) {
    const char *s = getenv("WGPT_VK_SELECT_UUID");
    if (!s || strlen(s) != 2 * VK_UUID_SIZE) return 0;
    for (unsigned i = 0; i < VK_UUID_SIZE; i++) {
        int hi = hex_(s[2 * i]), lo = hex_(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return 0;
        uuid[i] = (uint8_t)(hi * 16 + lo);
    }
    return 1;
}

static int selected_(const instance_ *t, VkPhysicalDevice pd) {
    if (!t->has_uuid || !t->props2) return 0;
    VkPhysicalDeviceProperties p;
    t->props(pd, &p);
    if (p.apiVersion < VK_API_VERSION_1_1) return 0;  // no deviceUUID before Vulkan 1.1
    VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id};
    t->props2(pd, &p2);
    return memcmp(id.deviceUUID, t->uuid, VK_UUID_SIZE) == 0;
}

static VKAPI_ATTR VkResult VKAPI_CALL create_instance_(const VkInstanceCreateInfo *ci,
                                                       const VkAllocationCallbacks *alloc, VkInstance *out) {
    VkResult r;
    PFN_vkGetInstanceProcAddr next = wgpt_layer_create_instance_(ci, alloc, out, &r);
    if (!next) return r;
    instance_ t = {
        .instance = *out,
        .next_gipa = next,
        .destroy = (PFN_vkDestroyInstance)next(*out, "vkDestroyInstance"),
        .enumerate = (PFN_vkEnumeratePhysicalDevices)next(*out, "vkEnumeratePhysicalDevices"),
        .groups = (PFN_vkEnumeratePhysicalDeviceGroups)next(*out, "vkEnumeratePhysicalDeviceGroups"),
        .props = (PFN_vkGetPhysicalDeviceProperties)next(*out, "vkGetPhysicalDeviceProperties"),
        .props2 = (PFN_vkGetPhysicalDeviceProperties2)next(*out, "vkGetPhysicalDeviceProperties2"),
    };
    if (!t.props2) t.props2 = (PFN_vkGetPhysicalDeviceProperties2)next(*out, "vkGetPhysicalDeviceProperties2KHR");
    t.has_uuid = read_uuid_(t.uuid);
    if (!t.destroy || !t.enumerate || !t.props || wgpt_layer_put_(&table_, &t) < 0) {
        if (t.destroy) t.destroy(*out, alloc);
        return VK_ERROR_INITIALIZATION_FAILED;
    }
    return VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL destroy_instance_(VkInstance inst, const VkAllocationCallbacks *alloc) {
    instance_ *t = find_(inst);
    if (!t) return;
    PFN_vkDestroyInstance destroy = t->destroy;
    wgpt_layer_drop_(&table_, t);
    destroy(inst, alloc);
}

static VKAPI_ATTR VkResult VKAPI_CALL enumerate_(VkInstance inst, uint32_t *count, VkPhysicalDevice *out) {
    instance_ *t = find_(inst);
    if (!t) return VK_ERROR_INITIALIZATION_FAILED;
    uint32_t n = 0;
    VkResult r = t->enumerate(inst, &n, NULL);
    if (r != VK_SUCCESS) return r;
    VkPhysicalDevice *all = calloc(n ? n : 1, sizeof *all);
    if (!all) return VK_ERROR_OUT_OF_HOST_MEMORY;
    r = t->enumerate(inst, &n, all);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(all);
        return r;
    }
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; i++)
        if (selected_(t, all[i])) all[kept++] = all[i];
    r = VK_SUCCESS;
    if (!out) {
        *count = kept;
    } else {
        if (*count < kept) r = VK_INCOMPLETE;
        else *count = kept;
        memcpy(out, all, *count * sizeof *out);
    }
    free(all);
    return r;
}

// Each group that holds the selected device, cut down to that device alone.
static VKAPI_ATTR VkResult VKAPI_CALL groups_(VkInstance inst, uint32_t *count, VkPhysicalDeviceGroupProperties *out) {
    instance_ *t = find_(inst);
    if (!t || !t->groups) return VK_ERROR_INITIALIZATION_FAILED;
    uint32_t n = 0;
    VkResult r = t->groups(inst, &n, NULL);
    if (r != VK_SUCCESS) return r;
    VkPhysicalDeviceGroupProperties *all = calloc(n ? n : 1, sizeof *all);
    if (!all) return VK_ERROR_OUT_OF_HOST_MEMORY;
    for (uint32_t i = 0; i < n; i++) all[i].sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GROUP_PROPERTIES;
    r = t->groups(inst, &n, all);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(all);
        return r;
    }
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < all[i].physicalDeviceCount; j++) {
            if (!selected_(t, all[i].physicalDevices[j])) continue;
            all[kept].physicalDevices[0] = all[i].physicalDevices[j];
            all[kept].physicalDeviceCount = 1;
            all[kept].subsetAllocation = VK_FALSE;
            kept++;
            break;
        }
    }
    r = VK_SUCCESS;
    if (!out) {
        *count = kept;
    } else {
        if (*count < kept) r = VK_INCOMPLETE;
        else *count = kept;
        for (uint32_t i = 0; i < *count; i++) {  // the caller's sType and pNext stay
            out[i].physicalDeviceCount = all[i].physicalDeviceCount;
            memcpy(out[i].physicalDevices, all[i].physicalDevices, sizeof out[i].physicalDevices);
            out[i].subsetAllocation = all[i].subsetAllocation;
        }
    }
    free(all);
    return r;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL get_instance_proc_addr_(VkInstance inst, const char *name) {
    if (!strcmp(name, "vkGetInstanceProcAddr")) return (PFN_vkVoidFunction)get_instance_proc_addr_;
    if (!strcmp(name, "vkCreateInstance")) return (PFN_vkVoidFunction)create_instance_;
    if (!strcmp(name, "vkDestroyInstance")) return (PFN_vkVoidFunction)destroy_instance_;
    if (!strcmp(name, "vkEnumeratePhysicalDevices")) return (PFN_vkVoidFunction)enumerate_;
    if (!strcmp(name, "vkEnumeratePhysicalDeviceGroups") || !strcmp(name, "vkEnumeratePhysicalDeviceGroupsKHR"))
        return (PFN_vkVoidFunction)groups_;
    instance_ *t = inst ? find_(inst) : NULL;
    return t ? t->next_gipa(inst, name) : NULL;
}

WGPT_LAYER_EXPORT VKAPI_ATTR VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v) {
    return wgpt_layer_negotiate_(v, get_instance_proc_addr_, NULL);
}
