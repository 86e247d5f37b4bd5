// gpu_args.h: turns an --adapter value (an index or part of a name) into GPU
// options, with the pipeline cache's folder (cache_dir.h).
#ifndef WGPT_GPU_ARGS_H
#define WGPT_GPU_ARGS_H

#include <stdlib.h>

#include "cli/cache_dir.h"
#include "gpu/gpu.h"

static inline void wgpt_gpu_args_apply(wgpt_gpu_options *o, const char *adapter) {
    o->cache_dir = wgpt_cli_cache_dir();
    if (!adapter) return;
    char *end;
    long v = strtol(adapter, &end, 10);
    if (*adapter && *end == 0 && v >= 0) o->adapter_index = (int)v;
    else o->adapter_name = adapter;
}

#endif
