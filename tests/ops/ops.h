// ops.h: the op-test registry (after ggml's test-backend-ops). One row per
// kernel family: its name, the model-layer wrappers it tests, its variants
// (which twin the wrappers pick, which device each can run on), its C
// reference in tests/ref, its tolerance (the justification is at the top of
// the family's file, tests/ops/FAMILY.c) and its test shapes. tests/test_ops.c
// runs every row x variant x shape on the default device against the
// reference; a case the device cannot run is a cmocka skip with the reason.
// docs/testing.md says how to add a family.
#ifndef WGPT_TEST_OPS_H
#define WGPT_TEST_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"

// What a variant needs of the device (checked before the case runs; a device
// without it skips the case).
enum {
    OP_NEEDS_F16 = 1u,   // shader-f16
    OP_NEEDS_SGM = 2u,   // f16 subgroup matrices, real or emulated (see op_variant.emulate_sgm)
    OP_NEEDS_SGM_ATTENTION = 4u,  // the f16 attention kernels' subgroup matrices (wgpt_attention_uses_sgm)
};

// One way of running a family: the device options the harness opens the
// device with (so the model-layer wrappers pick this variant themselves) and
// a switch of the family's own (arg: what else the case does differently,
// e.g. the scratch it hands the wrapper).
typedef struct op_variant {
    const char *name;
    wgpt_kernels kernels;  // the twin the wrappers dispatch (wgpt_gpu_options.kernels)
    int emulate_sgm;       // 1: emulated subgroup matrices where the device has f16 but none (real ones elsewhere)
    unsigned needs;        // OP_NEEDS_* bits
    int arg;
    uint32_t matmul_splits;  // wgpt_gpu_options.matmul_splits (0: as the shape asks)
    int disable_f16;         // wgpt_gpu_options.disable_f16: as if the device had no shader-f16
    wgpt_sgm_block sgm_block;  // wgpt_gpu_options.sgm_block: one tensor-core block for every shape (0: per shape)
    wgpt_streamk streamk;      // wgpt_gpu_options.streamk (0: the plan's choice)
    uint32_t compute_units;    // wgpt_gpu_options.compute_units: said to have this many (0: the device's)
} op_variant;

// One test shape: up to 8 sizes (their meaning is the family's), the binding
// limit of the device it runs on (0: the device's; else smaller, so that the
// wrappers split tensors into chunks), and which variants run it (bit i:
// variant i; 0: all).
typedef struct op_shape {
    uint32_t d[8];
    uint64_t max_binding;
    unsigned variants;
} op_shape;

typedef struct op_family {
    const char *name;
    const char *wrappers;   // what the family tests (src/model/*.h)
    const char *reference;  // its C reference (tests/ref)
    const char *tolerance;  // one line; the derivation heads tests/ops/FAMILY.c
    const op_variant *variants;
    size_t nvariants;
    const op_shape *shapes;
    size_t nshapes;
    // Runs shape s of variant v on g (opened for v) and compares it with
    // the reference; fails the cmocka test on a mismatch.
    void (*check)(wgpt_gpu *g, const op_variant *v, const op_shape *s);
} op_family;

#define OP_COUNT(a) (sizeof(a) / sizeof((a)[0]))

// The registry (tests/ops/registry.c), in the order the harness runs it.
extern const op_family *const op_families[];
extern const size_t op_nfamilies;

// The families (one file each in tests/ops/).
extern const op_family op_layernorm;
extern const op_family op_gelu_residual;
extern const op_family op_cross_entropy;
extern const op_family op_embedding;
extern const op_family op_linear;
extern const op_family op_attention;
extern const op_family op_optimizer;
extern const op_family op_decode;
extern const op_family op_infrastructure;
extern const op_family op_linear_f16;
extern const op_family op_precision;

#endif
