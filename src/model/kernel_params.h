// kernel_params.h: the host side of every kernel's params struct (bound as
// `var<uniform> p: Name` after the storage buffers), declared once for all
// src/model files. tests/test_kernel_params.c reads each WGSL declaration
// from the embedded kernel files and fails if a field's name, offset or type
// differs here, or if a params struct has no entry there.
// A C struct may serve several WGSL structs that are a prefix of it (it is
// bound with the size its kernel declares).
#ifndef WGPT_MODEL_KERNEL_PARAMS_H
#define WGPT_MODEL_KERNEL_PARAMS_H

#include <stdint.h>

// Scalar (00_infrastructure), GeluParams (05_gelu), ResidualParams
// (05_residual): n, and the constant c where the kernel takes one.
typedef struct ew_params {
    uint32_t n;
    float c;
} ew_params;

// CastParams (08_precision).
typedef struct cast_params {
    uint32_t n;
} cast_params;

// TransposeParams (08_precision).
typedef struct transpose_params {
    uint32_t rows, cols;
} transpose_params;

// EncParams (01_embedding).
typedef struct enc_params {
    uint32_t N, T, C, V, v0, nv, first, pad;
} enc_params;

// LnParams (02_layernorm).
typedef struct ln_params {
    uint32_t N, C;
} ln_params;

// LinearParams (03_linear; its first six fields) and MatmulParams
// (03_linear_vec4): the meaning of each field per kernel is in
// docs/kernels/03_linear.md.
typedef struct linear_params {
    uint32_t m, n, k;  // output rows, output columns, reduction length
    uint32_t ld, off;  // row stride and first column of out / dout
    uint32_t flag;     // forward: has bias; backward_input: accumulate
    // MatmulParams of 03_linear_vec4.wgsl only (its flag: bit 0 add, bit 1 bias):
    uint32_t ks;     // k per split
    uint32_t split;  // 1: partials to the scratch
} linear_params;

// SgmParams (03_linear_sgm) and F16Params (03_linear_f16, whose sk is a pad).
typedef struct sgm_params {
    uint32_t m, n, k;
    uint32_t flag;  // bit 0: add to the output; bit 1: bias; bit 2: store it transposed (sgm only); bits 3-7:
                    // the f16 epilogue (sgm only; SGM_F16*, SGM_GELU_GRAD)
    uint32_t ks;    // k per split (sgm only; a multiple of the kernel's BK), 0: none
    uint32_t sk;    // stream-K: stages a workgroup (persistent sgm only), 0: none
    uint32_t group; // persistent sgm: block rows a group of the blocks' order, 0: x fastest
    uint32_t pad;
} sgm_params;

// StreamkParams (03_linear_vec4's matmul_streamk_reduce).
typedef struct streamk_params {
    uint32_t m, n, flag, bm, bn, per, sk, pad;
} streamk_params;

// AttnParams (04_attention, 04_attention_sgm).
typedef struct attn_params {
    uint32_t B, T, C, NH;
    uint32_t hs;
    float scale;
} attn_params;

// CeParams (06_cross_entropy).
typedef struct ce_params {
    uint32_t rows, row0, V, Vp;
    float dloss;
} ce_params;

// NormPartialParams, NormFinishParams, AdamwParams (07_optimizer).
typedef struct norm_partial_params {
    uint32_t n, start, part_base, n_groups;
} norm_partial_params;

typedef struct norm_finish_params {
    uint32_t n_parts;
    float max_norm, skip_norm;
    float grad_scale;  // the gradients are the buffer's times this
} norm_finish_params;

typedef struct adamw_params {
    uint32_t n, start;
    float lr, beta1, beta2, one_minus_beta1, one_minus_beta2, bc1, bc2, eps, weight_decay;
    uint32_t pad;
} adamw_params;

// RowParams, MatvecParams, LnParams (09_decode), DecodeAttnParams (09_decode_attention).
typedef struct decode_row_params {
    uint32_t rows, c, t, v, v0, nv, pad0, pad1;
} decode_row_params;

typedef struct decode_matvec_params {
    uint32_t rows, k, n, flag, ldo, o0, pad0, pad1;
} decode_matvec_params;

typedef struct decode_ln_params {
    uint32_t rows, c, flag, pad0;
} decode_ln_params;

typedef struct decode_attn_params {
    uint32_t rows, c, nh, t;
    float scale;
    uint32_t flag;  // bit 0: each row stores its own key and value first (a step: one row a slot)
    uint32_t pad0, pad1;
} decode_attn_params;

#endif
