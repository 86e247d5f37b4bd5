// test_kernel_params.c: every kernel params struct (a `var<uniform>` binding's
// struct in the embedded kernel files) has a C twin in model/kernel_params.h
// with the same fields at the same offsets, of the same type (u32 / f32) and,
// but for pads, the same names; the WGSL struct is the C struct or a prefix
// of it. A field added, dropped, reordered or retyped on one side alone fails
// here, instead of as wrong numbers on the GPU. No GPU.
#include "test_util.h"

#include <ctype.h>
#include <stddef.h>

#include "gpu/embedded.h"
#include "model/kernel_params.h"

typedef struct cfield {
    const char *name;
    size_t offset;
    char kind;  // 'u' uint32_t, 'f' float, 'i' int32_t
} cfield;

#define KIND_(x) _Generic((x), uint32_t: 'u', float: 'f', int32_t: 'i', default: '?')
#define F_(T, f) {#f, offsetof(T, f), KIND_(((T *)0)->f)}
#define MAXF 16

typedef struct twin {
    const char *file, *wgsl;  // kernel file and its struct
    const char *ctype;
    size_t csize;
    cfield f[MAXF];
} twin;

#define TWIN_(file, wgsl, T, ...) {file, wgsl, #T, sizeof(T), {__VA_ARGS__}}

static const twin TWINS[] = {
    TWIN_("00_infrastructure.wgsl", "Scalar", ew_params, F_(ew_params, n), F_(ew_params, c)),
    TWIN_("05_gelu.wgsl", "GeluParams", ew_params, F_(ew_params, n), F_(ew_params, c)),
    TWIN_("05_residual.wgsl", "ResidualParams", ew_params, F_(ew_params, n), F_(ew_params, c)),
    TWIN_("08_precision.wgsl", "CastParams", cast_params, F_(cast_params, n)),
    TWIN_("08_precision.wgsl", "TransposeParams", transpose_params, F_(transpose_params, rows),
          F_(transpose_params, cols)),
    TWIN_("01_embedding.wgsl", "EncParams", enc_params, F_(enc_params, N), F_(enc_params, T), F_(enc_params, C),
          F_(enc_params, V), F_(enc_params, v0), F_(enc_params, nv), F_(enc_params, first), F_(enc_params, pad)),
    TWIN_("02_layernorm.wgsl", "LnParams", ln_params, F_(ln_params, N), F_(ln_params, C)),
#define LP_ F_(linear_params, m), F_(linear_params, n), F_(linear_params, k), F_(linear_params, ld), \
            F_(linear_params, off), F_(linear_params, flag), F_(linear_params, ks), F_(linear_params, split)
    TWIN_("03_linear.wgsl", "LinearParams", linear_params, LP_),
    TWIN_("03_linear_vec4.wgsl", "MatmulParams", linear_params, LP_),
#define SP_ F_(sgm_params, m), F_(sgm_params, n), F_(sgm_params, k), F_(sgm_params, flag), F_(sgm_params, ks), \
            F_(sgm_params, sk), F_(sgm_params, group), F_(sgm_params, pad)
    TWIN_("03_linear_sgm.wgsl", "SgmParams", sgm_params, SP_),
    TWIN_("03_linear_f16.wgsl", "F16Params", sgm_params, SP_),
    TWIN_("03_linear_vec4.wgsl", "StreamkParams", streamk_params, F_(streamk_params, m), F_(streamk_params, n),
          F_(streamk_params, flag), F_(streamk_params, bm), F_(streamk_params, bn), F_(streamk_params, per),
          F_(streamk_params, sk), F_(streamk_params, pad)),
#define AP_ F_(attn_params, B), F_(attn_params, T), F_(attn_params, C), F_(attn_params, NH), F_(attn_params, hs), \
            F_(attn_params, scale)
    TWIN_("04_attention.wgsl", "AttnParams", attn_params, AP_),
    TWIN_("04_attention_sgm.wgsl", "AttnParams", attn_params, AP_),
    TWIN_("06_cross_entropy.wgsl", "CeParams", ce_params, F_(ce_params, rows), F_(ce_params, row0),
          F_(ce_params, V), F_(ce_params, Vp), F_(ce_params, dloss)),
    TWIN_("07_optimizer.wgsl", "NormPartialParams", norm_partial_params, F_(norm_partial_params, n),
          F_(norm_partial_params, start), F_(norm_partial_params, part_base), F_(norm_partial_params, n_groups)),
    TWIN_("07_optimizer.wgsl", "NormFinishParams", norm_finish_params, F_(norm_finish_params, n_parts),
          F_(norm_finish_params, max_norm), F_(norm_finish_params, skip_norm), F_(norm_finish_params, grad_scale)),
    TWIN_("07_optimizer.wgsl", "AdamwParams", adamw_params, F_(adamw_params, n), F_(adamw_params, start),
          F_(adamw_params, lr), F_(adamw_params, beta1), F_(adamw_params, beta2), F_(adamw_params, one_minus_beta1),
          F_(adamw_params, one_minus_beta2), F_(adamw_params, bc1), F_(adamw_params, bc2), F_(adamw_params, eps),
          F_(adamw_params, weight_decay), F_(adamw_params, pad)),
    TWIN_("09_decode.wgsl", "RowParams", decode_row_params, F_(decode_row_params, rows), F_(decode_row_params, c),
          F_(decode_row_params, t), F_(decode_row_params, v), F_(decode_row_params, v0), F_(decode_row_params, nv),
          F_(decode_row_params, pad0), F_(decode_row_params, pad1)),
    TWIN_("09_decode.wgsl", "MatvecParams", decode_matvec_params, F_(decode_matvec_params, rows),
          F_(decode_matvec_params, k), F_(decode_matvec_params, n), F_(decode_matvec_params, flag),
          F_(decode_matvec_params, ldo), F_(decode_matvec_params, o0), F_(decode_matvec_params, pad0),
          F_(decode_matvec_params, pad1)),
    TWIN_("09_decode.wgsl", "LnParams", decode_ln_params, F_(decode_ln_params, rows), F_(decode_ln_params, c),
          F_(decode_ln_params, flag), F_(decode_ln_params, pad0)),
    TWIN_("09_decode_attention.wgsl", "DecodeAttnParams", decode_attn_params, F_(decode_attn_params, rows),
          F_(decode_attn_params, c), F_(decode_attn_params, nh), F_(decode_attn_params, t),
          F_(decode_attn_params, scale), F_(decode_attn_params, flag), F_(decode_attn_params, pad0),
          F_(decode_attn_params, pad1)),
};
#define NTWINS (sizeof TWINS / sizeof TWINS[0])

static const char *kernel_file_(const char *name) {
    for (int i = 0; i < wgpt_embedded_kernel_count; i++)
        if (!strcmp(wgpt_embedded_kernels[i].name, name)) return wgpt_embedded_kernels[i].text;
    return NULL;
}

typedef struct wfield {
    char name[64];
    char kind;  // 'u', 'f', 'i'; '?' for any other type (not allowed in a params struct)
} wfield;

// The fields of `struct name {` in text, in order: 0..MAXF, or -1 if absent.
static int wgsl_struct_(const char *text, const char *name, wfield *out) {
    char head[96];
    snprintf(head, sizeof head, "struct %s {", name);
    const char *s = text;
    while ((s = strstr(s, head)) && s != text && s[-1] != '\n') s++;
    if (!s) return -1;
    int n = 0;
    for (const char *l = strchr(s, '\n'); l && *++l && *l != '}'; l = strchr(l, '\n')) {
        while (*l == ' ') l++;
        if (!strncmp(l, "//", 2) || *l == '\n') continue;
        size_t k = 0;
        while (isalnum((unsigned char)l[k]) || l[k] == '_') k++;
        if (!k || l[k] != ':' || n == MAXF || k >= sizeof out[n].name) return -1;
        memcpy(out[n].name, l, k);
        out[n].name[k] = 0;
        const char *t = l + k + 1;
        while (*t == ' ') t++;
        out[n].kind = !strncmp(t, "u32,", 4) ? 'u' : !strncmp(t, "f32,", 4) ? 'f' : !strncmp(t, "i32,", 4) ? 'i' : '?';
        n++;
    }
    return n;
}

// Checks one twin; returns the number of mismatches, each printed.
static int check_twin_(const twin *t) {
    const char *text = kernel_file_(t->file);
    if (!text) {
        print_error("%s: no such embedded kernel file\n", t->file);
        return 1;
    }
    wfield w[MAXF];
    int n = wgsl_struct_(text, t->wgsl, w), bad = 0, nc = 0;
    while (nc < MAXF && t->f[nc].name) nc++;
    if (n < 0) {
        print_error("%s: struct %s not found or not one `name: type,` a line\n", t->file, t->wgsl);
        return 1;
    }
    if (n > nc || (size_t)n * 4 > t->csize) {
        print_error("%s: struct %s has %d fields (%d bytes); %s has %d (%zu bytes)\n", t->file, t->wgsl, n, n * 4,
                    t->ctype, nc, t->csize);
        bad++;
    }
    for (int i = 0; i < n && i < nc; i++) {
        const cfield *c = &t->f[i];
        int pad = !strncmp(w[i].name, "pad", 3) || !strncmp(c->name, "pad", 3);
        if (w[i].kind == '?' || w[i].kind != c->kind || c->offset != (size_t)i * 4 || (!pad && strcmp(w[i].name, c->name))) {
            print_error("%s: %s field %d is `%s` (%c32 at byte %d); %s has `%s` (%c32 at byte %zu)\n", t->file, t->wgsl,
                        i, w[i].name, w[i].kind, i * 4, t->ctype, c->name, c->kind, c->offset);
            bad++;
        }
    }
    return bad;
}

static void test_twins_match(void **state) {
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < NTWINS; i++) bad += check_twin_(&TWINS[i]);
    assert_int_equal(bad, 0);
}

// Every `var<uniform> p: Name;` of every kernel file names a struct with a twin.
static void test_every_params_struct_has_a_twin(void **state) {
    (void)state;
    int missing = 0, seen = 0;
    for (int i = 0; i < wgpt_embedded_kernel_count; i++) {
        const char *file = wgpt_embedded_kernels[i].name;
        for (const char *u = wgpt_embedded_kernels[i].text; (u = strstr(u, "var<uniform>")); u++) {
            const char *c = strchr(u, ':');
            if (!c) break;
            c++;
            while (*c == ' ') c++;
            size_t k = 0;
            while (isalnum((unsigned char)c[k]) || c[k] == '_') k++;
            int found = 0;
            for (size_t j = 0; j < NTWINS; j++)
                if (!strcmp(TWINS[j].file, file) && strlen(TWINS[j].wgsl) == k && !strncmp(TWINS[j].wgsl, c, k)) found = 1;
            if (!found) {
                print_error("%s: uniform struct %.*s has no C twin in tests/test_kernel_params.c\n", file, (int)k, c);
                missing++;
            }
            seen++;
        }
    }
    assert_true(seen >= (int)NTWINS);
    assert_int_equal(missing, 0);
}

// The parser itself: a struct with a moved field, a retyped one and one
// more than its twin each fail.
static void test_mismatches_are_found(void **state) {
    (void)state;
    wfield w[MAXF];
    assert_int_equal(wgsl_struct_("struct P {\n    a: u32,  // x\n    b: f32,\n}\n", "P", w), 2);
    assert_string_equal(w[1].name, "b");
    assert_int_equal(w[1].kind, 'f');
    assert_int_equal(wgsl_struct_("struct P {\n    a: vec4<f32>,\n}\n", "P", w), 1);
    assert_int_equal(w[0].kind, '?');
    assert_int_equal(wgsl_struct_("struct Q {\n}\n", "P", w), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_twins_match),
        cmocka_unit_test(test_every_params_struct_has_a_twin),
        cmocka_unit_test(test_mismatches_are_found),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
