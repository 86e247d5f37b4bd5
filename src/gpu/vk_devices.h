// vk_devices.h: the host's Vulkan physical devices (vk_devices.c), private to src/gpu.
#ifndef WGPT_GPU_VK_DEVICES_H
#define WGPT_GPU_VK_DEVICES_H

#include <stdint.h>

#include "gpu.h"

#define WGPT_VK_MAX_DEVICES_ 16

typedef struct {
    char name[256];
    uint32_t vendor_id, device_id;
    int cpu;                  // a CPU device (lavapipe)
    int has_pci;              // VK_EXT_pci_bus_info: pci holds "dddd:bb:dd.f"
    char pci[16];
    unsigned char uuid[16];   // deviceUUID: what VK_LAYER_WGPT_select matches
} wgpt_vk_device_;

// The devices that report Vulkan 1.1 or later (a deviceUUID), GPUs first, in
// PCI address order, so that every process of a host sees the same order.
// Returns how many (at most max); 0 where there is no Vulkan loader or instance.
// Listed on the first call; later calls return that list.
int wgpt_vk_devices_(wgpt_vk_device_ *out, int max);

// That order: GPUs before CPU devices, devices with a PCI address before those
// without, then by PCI address, then by UUID.
void wgpt_vk_sort_(wgpt_vk_device_ *d, int n);

void wgpt_vk_uuid_hex_(const unsigned char uuid[16], char hex[33]);

// The index in vk of the device whose UUID is hex (32 hex digits), or -1.
int wgpt_vk_find_uuid_(const wgpt_vk_device_ *vk, int nvk, const char *hex);

// Dawn's n adapters (in) as wgpt_gpu_list numbers them: a Vulkan adapter that
// stands for several devices of vk with its vendor and device id (identical
// GPUs) becomes one entry per device, in vk's order, each with its PCI address
// and its UUID in select_uuid; an adapter that stands for one device gets its
// PCI address. from[k] is the adapter entry k came from. Returns the number of
// entries written (at most max).
int wgpt_vk_expand_(const wgpt_gpu_info *in, int n, const wgpt_vk_device_ *vk, int nvk, wgpt_gpu_info *out,
                    int *from, int max);

#endif
