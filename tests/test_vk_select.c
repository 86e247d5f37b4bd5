// test_vk_select.c: identical GPUs one by one. Dawn offers identical GPUs as
// one adapter; wgpt lists the host's Vulkan devices itself (src/gpu/vk_devices.c)
// and opens one of them through VK_LAYER_WGPT_select (src/gpu/vk_select/), which
// shows Dawn only the device of one deviceUUID. Here: the layer's filter through
// the Vulkan API, the numbering of identical GPUs on a made-up host, and a
// device opened by its UUID.
#include <dlfcn.h>
#include <limits.h>
#include <vulkan/vulkan.h>

#include "test_util.h"
#include "gpu/dawn_loader.h"
#include "gpu/vk_devices.h"

static PFN_vkGetInstanceProcAddr gipa_;

// How many devices and device groups an instance created with the layer on
// (WGPT_VK_SELECT_UUID = uuid, NULL: unset) shows; the UUID of the first device.
static void count_through_layer_(const char *uuid, uint32_t *ndev, uint32_t *ngroups, char first[33]) {
    char dir[PATH_MAX - 8], layers[PATH_MAX];
    assert_int_equal(wgpt_exe_dir_(dir, sizeof dir), 0);
    snprintf(layers, sizeof layers, "%s/vk", dir);
    setenv("VK_ADD_LAYER_PATH", layers, 1);
    setenv("VK_INSTANCE_LAYERS", "VK_LAYER_WGPT_select", 1);
    setenv("NODEVICE_SELECT", "1", 1);  // Mesa's device-select layer overruns its array when shown no device
    if (uuid) setenv("WGPT_VK_SELECT_UUID", uuid, 1);
    else unsetenv("WGPT_VK_SELECT_UUID");
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa_(NULL, "vkCreateInstance");
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst;
    assert_int_equal(create(&ci, NULL, &inst), VK_SUCCESS);
    unsetenv("VK_ADD_LAYER_PATH");
    unsetenv("VK_INSTANCE_LAYERS");
    unsetenv("WGPT_VK_SELECT_UUID");
    unsetenv("NODEVICE_SELECT");
    PFN_vkEnumeratePhysicalDevices enumerate = (PFN_vkEnumeratePhysicalDevices)gipa_(inst, "vkEnumeratePhysicalDevices");
    PFN_vkEnumeratePhysicalDeviceGroups groups =
        (PFN_vkEnumeratePhysicalDeviceGroups)gipa_(inst, "vkEnumeratePhysicalDeviceGroups");
    PFN_vkGetPhysicalDeviceProperties2 props2 =
        (PFN_vkGetPhysicalDeviceProperties2)gipa_(inst, "vkGetPhysicalDeviceProperties2");
    VkPhysicalDevice pd[16];
    *ndev = 16;
    assert_int_equal(enumerate(inst, ndev, pd), VK_SUCCESS);
    first[0] = 0;
    if (*ndev) {
        VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
        VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id};
        props2(pd[0], &p);
        wgpt_vk_uuid_hex_(id.deviceUUID, first);
    }
    VkPhysicalDeviceGroupProperties g[16];
    for (int i = 0; i < 16; i++) g[i] = (VkPhysicalDeviceGroupProperties){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GROUP_PROPERTIES};
    *ngroups = 16;
    assert_int_equal(groups(inst, ngroups, g), VK_SUCCESS);
    for (uint32_t i = 0; i < *ngroups; i++) {
        assert_int_equal(g[i].physicalDeviceCount, 1);
        assert_ptr_equal(g[i].physicalDevices[0], pd[0]);
    }
    ((PFN_vkDestroyInstance)gipa_(inst, "vkDestroyInstance"))(inst, NULL);
}

// The layer shows the device of the UUID asked for and nothing else; a UUID
// no device has, a malformed one or none at all show no device (never another).
static void layer_shows_only_the_selected_device(void **st) {
    (void)st;
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    *(void **)&gipa_ = dlsym(lib, "vkGetInstanceProcAddr");
    assert_non_null(gipa_);
    wgpt_vk_device_ vk[WGPT_VK_MAX_DEVICES_];
    int nvk = wgpt_vk_devices_(vk, WGPT_VK_MAX_DEVICES_);
    assert_true(nvk >= 1);
    for (int i = 0; i < nvk; i++) {
        char hex[33], first[33];
        wgpt_vk_uuid_hex_(vk[i].uuid, hex);
        printf("[%d] %s %s %s\n", i, vk[i].name, vk[i].has_pci ? vk[i].pci : "(no PCI address)", hex);
        uint32_t nd, ng;
        count_through_layer_(hex, &nd, &ng, first);
        assert_int_equal(nd, 1);
        assert_int_equal(ng, 1);
        assert_string_equal(first, hex);
    }
    char none[33] = "0123456789abcdef0123456789abcdef", first[33];
    int taken = 0;
    for (int i = 0; i < nvk; i++) {
        char hex[33];
        wgpt_vk_uuid_hex_(vk[i].uuid, hex);
        taken |= strcmp(hex, none) == 0;
    }
    assert_false(taken);
    const char *const hidden[] = {none, "0123", "zz23456789abcdef0123456789abcdef", NULL};
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++) {
        uint32_t nd, ng;
        count_through_layer_(hidden[i], &nd, &ng, first);
        assert_int_equal(nd, 0);
        assert_int_equal(ng, 0);
    }
}

static wgpt_vk_device_ vkdev_(const char *name, uint32_t vendor, uint32_t device, int cpu, const char *pci,
                              unsigned char tag) {
    wgpt_vk_device_ d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "%s", name);
    d.vendor_id = vendor;
    d.device_id = device;
    d.cpu = cpu;
    d.has_pci = pci != NULL;
    if (pci) snprintf(d.pci, sizeof d.pci, "%s", pci);
    memset(d.uuid, tag, sizeof d.uuid);
    return d;
}

static wgpt_gpu_info adapter_(const char *name, const char *backend, uint32_t vendor, uint32_t device) {
    wgpt_gpu_info a;
    memset(&a, 0, sizeof a);
    snprintf(a.name, sizeof a.name, "%s", name);
    a.backend = backend;
    a.vendor_id = vendor;
    a.device_id = device;
    return a;
}

// A made-up host: two H200s (one adapter to Dawn), another NVIDIA GPU, lavapipe.
static void identical_gpus_are_listed_one_by_one(void **st) {
    (void)st;
    wgpt_vk_device_ vk[] = {
        vkdev_("llvmpipe", 0x10005, 0, 1, NULL, 0xcc),
        vkdev_("NVIDIA H200", 0x10de, 0x2335, 0, "0000:3b:00.0", 0xbb),
        vkdev_("NVIDIA L4", 0x10de, 0x27b8, 0, "0000:5e:00.0", 0xdd),
        vkdev_("NVIDIA H200", 0x10de, 0x2335, 0, "0000:19:00.0", 0xaa),
    };
    wgpt_vk_sort_(vk, 4);  // GPUs by PCI address, the CPU last
    assert_string_equal(vk[0].pci, "0000:19:00.0");
    assert_string_equal(vk[1].pci, "0000:3b:00.0");
    assert_string_equal(vk[2].name, "NVIDIA L4");
    assert_true(vk[3].cpu);
    wgpt_gpu_info dawn[] = {adapter_("NVIDIA H200", "Vulkan", 0x10de, 0x2335),
                            adapter_("NVIDIA L4", "Vulkan", 0x10de, 0x27b8),
                            adapter_("llvmpipe", "Vulkan", 0x10005, 0), adapter_("Other", "Metal", 0x10de, 0x2335)};
    wgpt_gpu_info out[8];
    int from[8];
    int m = wgpt_vk_expand_(dawn, 4, vk, 4, out, from, 8);
    assert_int_equal(m, 5);
    static const char *const names[] = {"NVIDIA H200", "NVIDIA H200", "NVIDIA L4", "llvmpipe", "Other"};
    static const int froms[] = {0, 0, 1, 2, 3};
    static const char *const pcis[] = {"0000:19:00.0", "0000:3b:00.0", "0000:5e:00.0", "", ""};
    static const char *const uuids[] = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "", "", ""};
    for (int i = 0; i < m; i++) {
        assert_string_equal(out[i].name, names[i]);
        assert_int_equal(from[i], froms[i]);
        assert_string_equal(out[i].pci, pcis[i]);
        assert_string_equal(out[i].select_uuid, uuids[i]);  // only identical GPUs need the layer
    }
    // Ranks of this host take its GPUs in turn, the CPU adapter never.
    for (int i = 0; i < m; i++) out[i].type = strcmp(out[i].name, "llvmpipe") ? "discrete GPU" : "CPU";
    static const int rank_entry[] = {0, 1, 2, 4, 0, 1};
    for (int rank = 0; rank < 6; rank++) {
        int ng;
        assert_int_equal(wgpt_gpu_list_nth_gpu(out, m, rank, &ng), rank_entry[rank]);
        assert_int_equal(ng, 4);
    }
    out[0].type = out[1].type = out[2].type = out[4].type = "CPU";  // a host without a GPU: no pick
    int ng = -1;
    assert_int_equal(wgpt_gpu_list_nth_gpu(out, m, 1, &ng), -1);
    assert_int_equal(ng, 0);
    assert_int_equal(wgpt_vk_expand_(dawn, 4, vk, 4, out, from, 2), 2);  // max holds
    assert_int_equal(wgpt_vk_find_uuid_(vk, 4, "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"), 1);
    assert_int_equal(wgpt_vk_find_uuid_(vk, 4, "ab"), -1);
}

// wgpt_gpu_open by UUID: the device of that UUID, or an error naming it.
static void device_opens_by_uuid(void **st) {
    (void)st;
    wgpt_vk_device_ vk[WGPT_VK_MAX_DEVICES_];
    int nvk = wgpt_vk_devices_(vk, WGPT_VK_MAX_DEVICES_);
    assert_true(nvk >= 1);
    char hex[33], err[2048];
    wgpt_vk_uuid_hex_(vk[nvk - 1].uuid, hex);
    wgpt_gpu_options o = {.adapter_index = -1, .select_uuid = hex};
    wgpt_gpu *g = wgpt_gpu_open(&o, err, sizeof err);
    if (!g) fail_msg("%s", err);
    const wgpt_gpu_info *in = wgpt_gpu_get_info(g);
    assert_string_equal(in->name, vk[nvk - 1].name);
    assert_string_equal(in->select_uuid, hex);
    float x[4] = {1, 2, 3, 4}, y[4];  // the device works
    wgpt_buf *b = wgpt_buf_create(g, sizeof x, "x");
    TU_NONNULL(g, b);
    TU_OK(g, wgpt_buf_upload(g, b, 0, x, sizeof x));
    TU_OK(g, wgpt_buf_download(g, b, 0, y, sizeof y));
    assert_memory_equal(x, y, sizeof x);
    wgpt_buf_free(b);
    wgpt_gpu_close(g);
    o.select_uuid = "0123456789abcdef0123456789abcdef";
    assert_null(wgpt_gpu_open(&o, err, sizeof err));
    printf("expected: %s\n", err);
    assert_non_null(strstr(err, "no Vulkan device has deviceUUID '0123456789abcdef0123456789abcdef'"));
    // wgpt_gpu_list's numbering: the default adapter's entry opens by index too.
    wgpt_gpu_info list[16];
    int n = wgpt_gpu_list(NULL, list, 16, err, sizeof err);
    assert_true(n >= 1);
    o.select_uuid = NULL;
    o.adapter_index = n - 1;
    g = wgpt_gpu_open(&o, err, sizeof err);
    if (!g) fail_msg("%s", err);
    assert_string_equal(wgpt_gpu_get_info(g)->name, list[n - 1].name);
    assert_string_equal(wgpt_gpu_get_info(g)->pci, list[n - 1].pci);
    wgpt_gpu_close(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(identical_gpus_are_listed_one_by_one),
        cmocka_unit_test(layer_shows_only_the_selected_device),
        cmocka_unit_test(device_opens_by_uuid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
