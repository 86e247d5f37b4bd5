// linear_split.c: the split-k choice of the vec4 matmuls (linear_split.h).
//
// With the device's compute units known (wgpt_gpu_info.compute_units) it
// estimates the time of each split count and takes the fastest:
//   - s parts give tiles * s workgroups of ceil(k / s) / MK stages each;
//   - a unit runs V4_RESIDENT of them side by side at full speed, and one
//     alone at LONE_RATE of that (nothing to hide its latencies behind);
//     workgroups go round the units, so the busiest unit sets the time;
//   - a split writes s partials and the reduce reads them back: 2 s m n
//     floats of memory traffic, plus a dispatch.
// The constants fit the H200 (docs/kernels/03_linear_vec4.md has the
// measurements); without the unit count it falls back to aiming at
// V4_TARGET_WGS workgroups.
#include "model/linear_split.h"

#define V4_RESIDENT 2u        // 256-thread workgroups of <= 128 registers a thread an SM holds
#define LONE_RATE 0.8         // a lone workgroup's speed relative to one of a full unit
#define EPILOGUE_STAGES 2.0   // writing a 128 x 128 tile, in stage times
#define UNIT_BYTES 28000.0    // memory traffic a unit's share of bandwidth moves in one stage time
#define REDUCE_STAGES 6.0     // the reduce dispatch's fixed cost, in stage times
#define V4_TARGET_WGS 512u    // unknown units: split until about this many workgroups
#define V4_MIN_KS 256u        // k a part keeps at least
#define V4_MAX_SPLITS 16u

static uint64_t tiles_(uint64_t n) { return (n + WGPT_V4_TILE - 1) / WGPT_V4_TILE; }

uint64_t wgpt_split_weight_bytes(uint32_t parts, uint64_t m, uint64_t n) {
    return ((uint64_t)parts * m * n * 4 + 255) & ~(uint64_t)255;
}

static uint64_t part_bytes_(uint32_t s, uint64_t m, uint64_t n, int with_bias) {
    return wgpt_split_weight_bytes(s, m, n) + (with_bias ? (uint64_t)s * m * 4 : 0);
}

// Estimated time of s parts, in stage times of a full unit.
static double cost_(uint32_t units, uint64_t tiles, uint64_t m, uint64_t n, uint32_t k, uint32_t s) {
    uint64_t ks = ((uint64_t)k + s - 1) / s;
    double stages = (double)((ks + WGPT_V4_MK - 1) / WGPT_V4_MK) + EPILOGUE_STAGES;
    uint64_t per_unit = (tiles * s + units - 1) / units;  // workgroups of the busiest unit
    double t = (double)(per_unit / V4_RESIDENT) * V4_RESIDENT * stages;
    if (per_unit % V4_RESIDENT) t += stages / LONE_RATE;
    if (s > 1) t += REDUCE_STAGES + 2.0 * s * (double)m * (double)n * 4.0 / (units * UNIT_BYTES);
    return t;
}

static uint32_t want_(uint32_t units, uint64_t m, uint64_t n, uint32_t k) {
    uint64_t tiles = tiles_(m) * tiles_(n);
    uint32_t most = k / V4_MIN_KS;
    if (most > V4_MAX_SPLITS) most = V4_MAX_SPLITS;
    if (most <= 1) return 1;
    if (!units) {
        uint64_t want = (V4_TARGET_WGS + tiles - 1) / tiles;
        return want < most ? (uint32_t)want : most;
    }
    uint32_t best = 1;
    double best_t = cost_(units, tiles, m, n, k, 1);
    for (uint32_t s = 2; s <= most; s++) {
        double t = cost_(units, tiles, m, n, k, s);
        if (t < best_t * 0.99) best = s, best_t = t;  // a clear gain only: fewer partials
    }
    return best;
}

wgpt_split wgpt_split_pick(uint32_t units, uint64_t m, uint64_t n, uint32_t k, int with_bias,
                           uint64_t scratch_bytes, uint32_t forced) {
    uint32_t s = forced ? forced : want_(units, m, n, k);
    if (s > k / WGPT_V4_MK) s = k / WGPT_V4_MK;
    while (s > 1 && part_bytes_(s, m, n, with_bias) > scratch_bytes) s--;
    if (s <= 1) return (wgpt_split){1, k};
    uint32_t ks = (k + s - 1) / s;
    ks = (ks + WGPT_V4_MK - 1) / WGPT_V4_MK * WGPT_V4_MK;
    return (wgpt_split){(k + ks - 1) / ks, ks};
}

uint64_t wgpt_split_bytes(uint32_t units, uint64_t m, uint64_t n, uint32_t k, int with_bias, uint32_t forced) {
    wgpt_split sp = wgpt_split_pick(units, m, n, k, with_bias, UINT64_MAX, forced);
    return sp.n > 1 ? part_bytes_(sp.n, m, n, with_bias) : 0;
}
