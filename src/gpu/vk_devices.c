// vk_devices.c: the host's Vulkan physical devices one by one, straight from
// the Vulkan loader. Dawn's C API offers one adapter per power preference, so
// identical GPUs are one adapter to it; this list tells them apart (PCI
// address, deviceUUID) for wgpt_gpu_list and VK_LAYER_WGPT_select.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <vulkan/vulkan.h>

#include "vk_devices.h"

static int cmp_(const void *a, const void *b) {
    const wgpt_vk_device_ *x = a, *y = b;
    if (x->cpu != y->cpu) return x->cpu - y->cpu;
    if (x->has_pci != y->has_pci) return y->has_pci - x->has_pci;
    int c = strcmp(x->pci, y->pci);
    return c ? c : memcmp(x->uuid, y->uuid, sizeof x->uuid);
}

void wgpt_vk_sort_(wgpt_vk_device_ *d, int n) { qsort(d, (size_t)n, sizeof *d, cmp_); }

static int has_extension_(PFN_vkEnumerateDeviceExtensionProperties f, VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0;
    if (f(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkExtensionProperties *e = calloc(n, sizeof *e);
    int found = 0;
    if (e && f(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

// The list itself: one Vulkan instance of its own.
static int list_devices_(wgpt_vk_device_ *out, int max) {
    // Left loaded: Dawn loads the same library, and unloading drivers is where they misbehave.
    static void *lib;
    if (!lib) lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;  // no Vulkan loader: nothing to tell apart
    PFN_vkGetInstanceProcAddr gipa;
    *(void **)&gipa = dlsym(lib, "vkGetInstanceProcAddr");
    PFN_vkCreateInstance create = gipa ? (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance") : NULL;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "wgpt",
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst = NULL;
    if (!create || create(&ci, NULL, &inst) != VK_SUCCESS) return 0;
#define GET_(type, name) type name = (type)gipa(inst, "vk" #name)
    GET_(PFN_vkDestroyInstance, DestroyInstance);
    GET_(PFN_vkEnumeratePhysicalDevices, EnumeratePhysicalDevices);
    GET_(PFN_vkGetPhysicalDeviceProperties, GetPhysicalDeviceProperties);
    GET_(PFN_vkGetPhysicalDeviceProperties2, GetPhysicalDeviceProperties2);
    GET_(PFN_vkEnumerateDeviceExtensionProperties, EnumerateDeviceExtensionProperties);
#undef GET_
    int n = 0;
    uint32_t count = 0;
    VkPhysicalDevice pds[WGPT_VK_MAX_DEVICES_];
    if (EnumeratePhysicalDevices && GetPhysicalDeviceProperties && GetPhysicalDeviceProperties2 &&
        EnumerateDeviceExtensionProperties && EnumeratePhysicalDevices(inst, &count, NULL) == VK_SUCCESS) {
        if (count > WGPT_VK_MAX_DEVICES_) count = WGPT_VK_MAX_DEVICES_;
        VkResult r = EnumeratePhysicalDevices(inst, &count, pds);
        for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < count && n < max; i++) {
            VkPhysicalDeviceProperties p;
            GetPhysicalDeviceProperties(pds[i], &p);
            if (p.apiVersion < VK_API_VERSION_1_1) continue;  // no deviceUUID: cannot be selected
            int pci = has_extension_(EnumerateDeviceExtensionProperties, pds[i], VK_EXT_PCI_BUS_INFO_EXTENSION_NAME);
            VkPhysicalDevicePCIBusInfoPropertiesEXT bus = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT};
            VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
                                               .pNext = pci ? &bus : NULL};
            VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id};
            GetPhysicalDeviceProperties2(pds[i], &p2);
            wgpt_vk_device_ *d = &out[n++];
            memset(d, 0, sizeof *d);
            snprintf(d->name, sizeof d->name, "%s", p.deviceName);
            d->vendor_id = p.vendorID;
            d->device_id = p.deviceID;
            d->cpu = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
            d->has_pci = pci;
            if (pci)
                snprintf(d->pci, sizeof d->pci, "%04x:%02x:%02x.%x", bus.pciDomain & 0xffff, bus.pciBus & 0xff,
                         bus.pciDevice & 0x1f, bus.pciFunction & 0x7);
            memcpy(d->uuid, id.deviceUUID, sizeof d->uuid);
        }
    }
    if (DestroyInstance) DestroyInstance(inst, NULL);
    wgpt_vk_sort_(out, n);
    return n;
}

void wgpt_vk_uuid_hex_(const unsigned char uuid[16], char hex[33]) {
    for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", uuid[i]);
}

int wgpt_vk_expand_(const wgpt_gpu_info *in, int n, const wgpt_vk_device_ *vk, int nvk, wgpt_gpu_info *out,
                    int *from, int max) {
    int m = 0;
    for (int i = 0; i < n && m < max; i++) {
        int same = 0;
        if (strcmp(in[i].backend, "Vulkan") == 0)
            for (int j = 0; j < nvk; j++) same += vk[j].vendor_id == in[i].vendor_id && vk[j].device_id == in[i].device_id;
        for (int j = 0; j < nvk && same > 0 && m < max; j++) {
            if (vk[j].vendor_id != in[i].vendor_id || vk[j].device_id != in[i].device_id) continue;
            out[m] = in[i];
            snprintf(out[m].pci, sizeof out[m].pci, "%s", vk[j].pci);
            if (same > 1) wgpt_vk_uuid_hex_(vk[j].uuid, out[m].select_uuid);
            from[m++] = i;
            if (same == 1) break;
        }
        if (same == 0) {
            out[m] = in[i];
            from[m++] = i;
        }
    }
    return m;
}

int wgpt_vk_find_uuid_(const wgpt_vk_device_ *vk, int nvk, const char *hex) {
    char h[33];
    for (int i = 0; i < nvk; i++) {
        wgpt_vk_uuid_hex_(vk[i].uuid, h);
        if (strcasecmp(h, hex) == 0) return i;
    }
    return -1;
}

// Listed once a process (an instance costs up to 0.1 s on NVIDIA, and the
// list is read by wgpt_gpu_list and again by each open of a numbered entry).
static wgpt_vk_device_ cached_[WGPT_VK_MAX_DEVICES_];
static int ncached_;
static pthread_once_t once_ = PTHREAD_ONCE_INIT;
static void list_once_(void) { ncached_ = list_devices_(cached_, WGPT_VK_MAX_DEVICES_); }

int wgpt_vk_devices_(wgpt_vk_device_ *out, int max) {
    pthread_once(&once_, list_once_);
    int n = ncached_ < max ? ncached_ : max;
    memcpy(out, cached_, (size_t)(n > 0 ? n : 0) * sizeof *out);
    return n;
}
