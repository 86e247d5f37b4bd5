// vk_env.c: the Vulkan loader's environment, wgpt's one way to put its own
// layers (VK_LAYER_WGPT_select, VK_LAYER_WGPT_stats) under Dawn's Vulkan
// instances and to hand them their settings: the loader reads
// VK_ADD_LAYER_PATH and VK_INSTANCE_LAYERS, the layers their WGPT_VK_ and
// WGPT_KERNEL_STATS variables, when Dawn creates an instance. These are no
// settings of wgpt (the options carry those): the file reads the loader's
// variables only to add to a user's value and to put it back after.
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dawn_loader.h"
#include "internal.h"


// The folder of wgpt's Vulkan layers (VkLayer_wgpt_select.json and
// VkLayer_wgpt_stats.json): next to the executable (the build tree's vk/),
// else where `make install` puts it (PREFIX/lib/wgpt/vk).
int wgpt_vk_layer_dir_(char *out, size_t cap) {
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

int wgpt_vk_env_set_(const char *name, const char *value, int append, char **saved) {
    const char *old = getenv(name);
    *saved = old ? strdup(old) : NULL;
    if (old && !*saved) return -1;
    char buf[PATH_MAX * 2];
    int n = append && old && *old ? snprintf(buf, sizeof buf, "%s:%s", value, old)
                                  : snprintf(buf, sizeof buf, "%s", value);
    if (n < 0 || (size_t)n >= sizeof buf) return -1;  // a cut list would name another path or layer
    return setenv(name, buf, 1);
}

void wgpt_vk_env_restore_(const char *name, char *saved) {
    if (saved) setenv(name, saved, 1);
    else unsetenv(name);
    free(saved);
}

// VK_LAYER_WGPT_stats on for every Vulkan instance of this process (set once,
// before Dawn's first instance).
static pthread_once_t stats_once_ = PTHREAD_ONCE_INIT;
static int stats_failed_;

static void stats_layer_on_(void) {
    char dir[PATH_MAX], *saved[2];
    if (wgpt_vk_layer_dir_(dir, sizeof dir) < 0) {
        stats_failed_ = 1;
        return;
    }
    stats_failed_ = wgpt_vk_env_set_("VK_ADD_LAYER_PATH", dir, 1, &saved[0]) < 0 ||
                    wgpt_vk_env_set_("VK_INSTANCE_LAYERS", "VK_LAYER_WGPT_stats", 1, &saved[1]) < 0;
    free(saved[0]);
    free(saved[1]);
}

int wgpt_vk_stats_layer_(const char *f, char *err, size_t errlen) {
    if (!f || !*f) return 0;
    FILE *probe = fopen(f, "a");
    if (!probe) {
        snprintf(err, errlen, "WGPT_KERNEL_STATS=%s: cannot open that file to append to: %s", f, strerror(errno));
        return -1;
    }
    fclose(probe);
    pthread_once(&stats_once_, stats_layer_on_);
    // (the layer reads the file's name when it writes: vk_stats/layer.c)
    const char *now = getenv("WGPT_KERNEL_STATS");
    if (!stats_failed_ && ((now && strcmp(now, f) == 0) || setenv("WGPT_KERNEL_STATS", f, 1) == 0)) return 0;
    snprintf(err, errlen, "WGPT_KERNEL_STATS=%s asks for the kernels' driver statistics, and wgpt's Vulkan layer "
             "(vk/VkLayer_wgpt_stats.json beside the wgpt executable) is missing or the environment could not "
             "name it: run make", f);
    return -1;
}
