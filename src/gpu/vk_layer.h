// vk_layer.h: the plumbing wgpt's Vulkan layers share (vk_select/layer.c,
// vk_stats/layer.c, each its own shared library): the loader's chain links,
// and tables of the instances or devices a layer has seen, each entry a
// struct whose first member is the Vulkan handle it belongs to.
#ifndef WGPT_VK_LAYER_H
#define WGPT_VK_LAYER_H

#include <pthread.h>
#include <string.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#define WGPT_LAYER_EXPORT __attribute__((visibility("default")))

// The next layer's vkGetInstanceProcAddr from vkCreateInstance's chain, the
// link moved on for the layer after this one; NULL if the loader gave none.
static inline PFN_vkGetInstanceProcAddr wgpt_layer_next_instance_(const VkInstanceCreateInfo *ci) {
    VkLayerInstanceCreateInfo *link = (VkLayerInstanceCreateInfo *)ci->pNext;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO && link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerInstanceCreateInfo *)link->pNext;
    if (!link || !link->u.pLayerInfo) return NULL;
    PFN_vkGetInstanceProcAddr next = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    return next;
}

// vkCreateInstance down the chain: the next layer's vkGetInstanceProcAddr,
// or NULL with *r saying why (the instance is then not made).
static inline PFN_vkGetInstanceProcAddr wgpt_layer_create_instance_(const VkInstanceCreateInfo *ci,
                                                                    const VkAllocationCallbacks *alloc,
                                                                    VkInstance *out, VkResult *r) {
    PFN_vkGetInstanceProcAddr next = wgpt_layer_next_instance_(ci);
    PFN_vkCreateInstance create = next ? (PFN_vkCreateInstance)next(VK_NULL_HANDLE, "vkCreateInstance") : NULL;
    *r = create ? create(ci, alloc, out) : VK_ERROR_INITIALIZATION_FAILED;
    return *r == VK_SUCCESS ? next : NULL;
}

// The same for vkCreateDevice: the next layer's two lookups; -1 if none.
static inline int wgpt_layer_next_device_(const VkDeviceCreateInfo *ci, PFN_vkGetInstanceProcAddr *gipa,
                                          PFN_vkGetDeviceProcAddr *gdpa) {
    VkLayerDeviceCreateInfo *link = (VkLayerDeviceCreateInfo *)ci->pNext;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO && link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerDeviceCreateInfo *)link->pNext;
    if (!link || !link->u.pLayerInfo) return -1;
    *gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    *gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    return 0;
}

// A table of n entries of `size` bytes, each starting with its handle (a
// pointer-sized Vulkan handle; 0: free), guarded by lock.
typedef struct wgpt_layer_table {
    void *entries;
    size_t size;
    int n;
    pthread_mutex_t *lock;
} wgpt_layer_table;

static inline void *wgpt_layer_entry_(const wgpt_layer_table *t, int i) { return (char *)t->entries + (size_t)i * t->size; }

// The entry of handle h (h != 0), or NULL.
static inline void *wgpt_layer_find_(const wgpt_layer_table *t, const void *h) {
    void *found = NULL;
    pthread_mutex_lock(t->lock);
    for (int i = 0; i < t->n && !found; i++) {
        void *e = wgpt_layer_entry_(t, i);
        if (h && memcmp(e, &h, sizeof h) == 0) found = e;
    }
    pthread_mutex_unlock(t->lock);
    return found;
}

// The first entry in use, or NULL.
static inline void *wgpt_layer_any_(const wgpt_layer_table *t) {
    static const void *const none = NULL;
    void *found = NULL;
    pthread_mutex_lock(t->lock);
    for (int i = 0; i < t->n && !found; i++) {
        void *e = wgpt_layer_entry_(t, i);
        if (memcmp(e, &none, sizeof none) != 0) found = e;
    }
    pthread_mutex_unlock(t->lock);
    return found;
}

// Copies entry (whose handle is set) into a free slot; -1 if the table is full.
static inline int wgpt_layer_put_(const wgpt_layer_table *t, const void *entry) {
    static const void *const none = NULL;
    int done = -1;
    pthread_mutex_lock(t->lock);
    for (int i = 0; i < t->n && done < 0; i++) {
        void *e = wgpt_layer_entry_(t, i);
        if (memcmp(e, &none, sizeof none) == 0) {
            memcpy(e, entry, t->size);
            done = 0;
        }
    }
    pthread_mutex_unlock(t->lock);
    return done;
}

// Frees an entry the table holds.
static inline void wgpt_layer_drop_(const wgpt_layer_table *t, void *e) {
    pthread_mutex_lock(t->lock);
    memset(e, 0, t->size);
    pthread_mutex_unlock(t->lock);
}

// The negotiation every layer answers the same way, with its own lookups
// (gdpa NULL: the layer takes no part in devices).
static inline VkResult wgpt_layer_negotiate_(VkNegotiateLayerInterface *v, PFN_vkGetInstanceProcAddr gipa,
                                             PFN_vkGetDeviceProcAddr gdpa) {
    if (!v || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT || v->loaderLayerInterfaceVersion < 2)
        return VK_ERROR_INITIALIZATION_FAILED;
    v->loaderLayerInterfaceVersion = 2;
    v->pfnGetInstanceProcAddr = gipa;
    v->pfnGetDeviceProcAddr = gdpa;
    v->pfnGetPhysicalDeviceProcAddr = NULL;
    return VK_SUCCESS;
}

#endif
