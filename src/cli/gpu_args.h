// gpu_args.h: turns an --adapter value (an index or part of a name) into GPU
// options, with the pipeline cache's folder (cache_dir.h) and the settings of
// the environment (gpu_env.h).
#ifndef WGPT_GPU_ARGS_H
#define WGPT_GPU_ARGS_H

#include <stdlib.h>

#include "cli/cache_dir.h"
#include "cli/gpu_env.h"
#include "gpu/gpu.h"

// 0, or -1 with err naming a variable whose value is bad.
static inline int wgpt_gpu_args_apply(wgpt_gpu_options *o, const char *adapter, char *err, size_t errlen) {
    o->cache_dir = wgpt_cli_cache_dir();
    if (adapter) {
        char *end;
        long v = strtol(adapter, &end, 10);
        if (*adapter && *end == 0 && v >= 0) o->adapter_index = (int)v;
        else o->adapter_name = adapter;
    }
    return wgpt_cli_gpu_env(o, err, errlen);
}

#endif
