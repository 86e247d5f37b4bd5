// test_kernel_consts.c: the host's copies of kernel constants (tile edges,
// rows per workgroup) equal the `const NAME: u32 = Nu;` they copy, read from
// both source files, so editing one side alone fails here and not as wrong
// results on one device. No GPU.
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// host file's `#define MACRO Nu` == kernel file's const A (times const B, or
// times mul, where the host counts in other units).
typedef struct pair {
    const char *host, *macro, *kernel, *a, *b;
    unsigned mul;
} pair;

static const pair PAIRS[] = {
    {"src/model/attention.c", "ATTN_FAST_BLOCK", "kernels/04_attention.wgsl", "FB", NULL, 1},
    {"src/model/attention.c", "ATTN_FAST_MAX_HS", "kernels/04_attention.wgsl", "FHS", NULL, 1},
    {"src/model/attention.c", "ATTN_BLOCK", "kernels/04_attention.wgsl", "BQ", NULL, 1},
    {"src/model/attention.c", "ATTN_FLAT_BLOCK", "kernels/04_attention.wgsl", "AF_WG", NULL, 1},
    {"src/model/attention.c", "ATTN_SGM_HS", "kernels/04_attention_sgm.wgsl", "HS", NULL, 1},
    {"src/model/attention.c", "ATTN_SGM_BLOCK", "kernels/04_attention_sgm.wgsl", "RB", NULL, 1},
    {"src/model/layernorm.c", "LN_FLAT_WG", "kernels/02_layernorm.wgsl", "LN_FLAT_WG", NULL, 1},
    {"src/model/layernorm.c", "LN_ROWS_PER_WG", "kernels/02_layernorm.wgsl", "LN_ROWS_PER_WG", NULL, 1},
    {"src/model/layernorm.c", "LN_V4_MAX_C", "kernels/02_layernorm.wgsl", "LN_V4_MAX_C", NULL, 1},
    {"src/model/layernorm.c", "LN_COLS", "kernels/02_layernorm.wgsl", "LN_COLS", NULL, 1},
    {"src/model/layernorm.c", "LN_PART_ROWS", "kernels/02_layernorm.wgsl", "LN_PART_ROWS", NULL, 1},
    {"src/model/linear.c", "TILE", "kernels/03_linear.wgsl", "TILE", NULL, 1},
    {"src/model/linear.c", "BB_COLS", "kernels/03_linear.wgsl", "BB_COLS", NULL, 1},
    {"src/model/linear.c", "FLAT_ROWS", "kernels/03_linear.wgsl", "FLAT_ROWS", NULL, 1},
    {"src/model/linear.c", "FLAT8_ROWS", "kernels/03_linear.wgsl", "FLAT8_ROWS", NULL, 1},
    {"src/model/linear.c", "BB_FLAT_WG", "kernels/03_linear.wgsl", "BB_FLAT_WG", NULL, 1},
    {"src/model/embedding.c", "ENC_FLAT_WG", "kernels/01_embedding.wgsl", "ENC_FLAT_WG", NULL, 1},
    {"src/model/linear.c", "FLAT_N", "kernels/03_linear.wgsl", "FLAT_WG", "FLAT_COLS", 1},
    {"src/model/linear.c", "BIAS_PART_COLS", "kernels/03_linear_vec4.wgsl", "BP_V", NULL, 4},  // vec4 columns
    {"src/model/linear_f16.c", "SGM_BM", "kernels/03_linear_sgm.wgsl", "BM", NULL, 1},
    {"src/model/linear_f16.c", "SGM_BN", "kernels/03_linear_sgm.wgsl", "BN", NULL, 1},
    {"src/model/linear_f16.c", "SGM_BK", "kernels/03_linear_sgm.wgsl", "BK", NULL, 1},
    {"src/model/elementwise.c", "GF16_STEPS", "kernels/05_gelu.wgsl", "GF16_STEPS", NULL, 1},
    {"src/model/precision.c", "CAST_V8", "kernels/08_precision.wgsl", "CAST_V8", NULL, 1},
    {"src/model/linear_f16.c", "F16_ROWS", "kernels/03_linear_f16.wgsl", "F16_ROWS", NULL, 1},
    {"src/model/linear_f16.c", "F16_COLS", "kernels/03_linear_f16.wgsl", "F16_COLS", NULL, 1},
};

// The number after the first line that starts with `prefix` followed by
// `name` and a space-like end (so TILE does not match TILE_X); -1 if none.
static long value_after_(const char *text, const char *prefix, const char *name, const char *sep) {
    size_t lp = strlen(prefix), ln = strlen(name), ls = strlen(sep);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, prefix, lp) || strncmp(l + lp, name, ln) || strncmp(l + lp + ln, sep, ls)) continue;
        const char *v = l + lp + ln + ls;
        while (*v == ' ') v++;
        char *end;
        long x = strtol(v, &end, 10);
        return end != v && *end == 'u' ? x : -1;
    }
    return -1;
}

// A kernel file's `const NAME: u32 = Nu;`, or the default of `override NAME: u32 = Nu;`.
static long const_(const char *text, const char *name) {
    long v = value_after_(text, "const ", name, ": u32 =");
    return v >= 0 ? v : value_after_(text, "override ", name, ": u32 =");
}

// The value a variant marker `// --- KERNEL: variant = base with A=1,NAME=2 ---`
// gives NAME; -1 if the marker or the name is missing.
static long variant_value_(const char *text, const char *variant, const char *name) {
    char head[128];
    snprintf(head, sizeof head, "// --- KERNEL: %s = ", variant);
    const char *l = strstr(text, head);
    if (!l) return -1;
    const char *end = strchr(l, '\n'), *w = strstr(l, " with ");
    if (!w || (end && w > end)) return -1;
    for (const char *c = w + 6; c && (!end || c < end); c = strchr(c, ',') ? strchr(c, ',') + 1 : NULL) {
        size_t n = strlen(name);
        if (!strncmp(c, name, n) && c[n] == '=') return strtol(c + n + 1, NULL, 10);
    }
    return -1;
}

// Variants whose override constants the host copies.
typedef struct variant_pair {
    const char *host, *macro, *kernel, *variant, *name;
} variant_pair;

static const variant_pair VARIANT_PAIRS[] = {
    {"src/model/linear_f16.c", "SGM_WIDE_BN", "kernels/03_linear_sgm.wgsl", "matmul_sgm_wide", "BN"},
    {"src/model/linear_f16.c", "SGM_WIDE_BK", "kernels/03_linear_sgm.wgsl", "matmul_sgm_wide", "BK"},
};

static void host_copies_match_variants(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof VARIANT_PAIRS / sizeof VARIANT_PAIRS[0]; i++) {
        const variant_pair *p = &VARIANT_PAIRS[i];
        char *h = tu_read_source(p->host), *k = tu_read_source(p->kernel);
        long host = value_after_(h, "#define ", p->macro, " ");
        long v = variant_value_(k, p->variant, p->name);
        if (host < 0 || v < 0 || host != v)
            fail_msg("%s: %s = %ld, but %s's variant %s sets %s=%ld", p->host, p->macro, host, p->kernel, p->variant,
                     p->name, v);
        free(h);
        free(k);
    }
}

static void host_copies_match_kernels(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof PAIRS / sizeof PAIRS[0]; i++) {
        const pair *p = &PAIRS[i];
        char *h = tu_read_source(p->host), *k = tu_read_source(p->kernel);
        long host = value_after_(h, "#define ", p->macro, " ");
        long a = const_(k, p->a);
        long b = p->b ? const_(k, p->b) : 1;
        if (host < 0 || a < 0 || b < 0 || host != a * b * (long)p->mul)
            fail_msg("%s: %s = %ld, but %s gives %s%s%s = %ld (x%u)", p->host, p->macro, host, p->kernel, p->a,
                     p->b ? " * " : "", p->b ? p->b : "", a * b, p->mul);
        free(h);
        free(k);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(host_copies_match_kernels),
        cmocka_unit_test(host_copies_match_variants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
