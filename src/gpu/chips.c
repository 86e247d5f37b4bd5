// chips.c: what WebGPU does not say about a GPU but wgpt's heuristics want:
// its compute units (SMs, CUs), fp32 peak and dense f16 tensor-core peak, for
// the chips named below.
#include <string.h>

#include "gpu/backend_shared.h"

// By a part of the adapter's name, most specific first: the vendors'
// figures (SMs; fp32 TFLOP/s without tensor cores; f16 inputs with f32
// accumulation on tensor cores, dense (no sparsity); both at boost clock).
static const struct {
    const char *name;
    uint32_t units;
    double tflops, f16_tflops;
} CHIPS_[] = {
    {"H200", 132, 67.0, 989.4},
    {"H100 PCIe", 114, 51.2, 756.5},
    {"H100", 132, 67.0, 989.4},
    {"A100", 108, 19.5, 312.0},
};

void wgpt_chip_fill_(wgpt_gpu_info *info, uint32_t compute_units) {
    info->compute_units = 0;
    info->fp32_peak_tflops = 0;
    info->f16_peak_tflops = 0;
    for (size_t i = 0; i < sizeof CHIPS_ / sizeof CHIPS_[0]; i++)
        if (strstr(info->name, CHIPS_[i].name)) {
            info->compute_units = CHIPS_[i].units;
            info->fp32_peak_tflops = CHIPS_[i].tflops;
            info->f16_peak_tflops = CHIPS_[i].f16_tflops;
            break;
        }
    // A chip not in the table, or a part with fewer units enabled (options.compute_units).
    if (compute_units) info->compute_units = compute_units;
}
