// registry.c: the op families tests/test_ops.c runs (tests/ops/ops.h), in
// this order. A new family: its file in tests/ops/, its extern in ops.h, its
// row here (docs/testing.md).
#include "ops/ops.h"

const op_family *const op_families[] = {
    &op_embedding,
    &op_layernorm,
    &op_linear,
    &op_gelu_residual,
    &op_attention,
    &op_optimizer,
    &op_decode,
    &op_infrastructure,
    &op_linear_f16,
    &op_precision,
    &op_cross_entropy,
};
const size_t op_nfamilies = OP_COUNT(op_families);
