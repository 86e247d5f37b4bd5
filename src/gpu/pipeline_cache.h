// pipeline_cache.h: Dawn's blob cache kept on disk (wgpt_gpu_options.cache_dir).
// Dawn hands us opaque keys and values (its compiled shaders, the driver's
// VkPipelineCache data); each entry is one file in the folder, named by the
// SHA-256 of its key and holding the key and a SHA-256 of key and value, so a
// truncated, damaged or colliding file is a miss, never data handed to Dawn.
// Writes go to a temporary file renamed into place: processes may share a folder.
#ifndef WGPT_PIPELINE_CACHE_H
#define WGPT_PIPELINE_CACHE_H

#include "dawn_api.h"
#include "gpu.h"

typedef struct wgpt_pcache wgpt_pcache;

// A cache over folder dir (made if missing). NULL when dir is NULL or the
// folder cannot be made: then Dawn simply compiles (the cache is an optimisation).
wgpt_pcache *wgpt_pcache_open_(const char *dir);
// Fills d (to chain on a device descriptor) with c's callbacks.
void wgpt_pcache_describe_(wgpt_pcache *c, WGPUDawnCacheDeviceDescriptor *d);
void wgpt_pcache_stats_(const wgpt_pcache *c, wgpt_gpu_cache_stats *out);
// Only once the device that calls it is gone. NULL is fine.
void wgpt_pcache_free_(wgpt_pcache *c);

#endif
