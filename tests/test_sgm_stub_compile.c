// test_sgm_stub_compile.c: the subgroup-matrix kernel files compile, on any
// device. Only a device with f16 subgroup matrices (the H200) compiles
// 03_linear_sgm.wgsl and 04_attention_sgm.wgsl as they are; everywhere else
// (CI, lavapipe) this test compiles a copy in which the matrix types are
// vec4<f32> and the matrix calls plain vector arithmetic on the same arrays:
// WGSL syntax, types, override expressions and the uniformity of every
// barrier are checked; nothing about the results (test_linear_f16 and
// test_attention check those where the real kernels run). A kernel that
// compiles but needs more workgroup memory than the device has passes.
#include <ctype.h>
#include <errno.h>

#include "gpu/kernel_source.h"
#include "test_util.h"

static const char *const FILES[] = {"03_linear_sgm.wgsl", "04_attention_sgm.wgsl"};

typedef struct str {
    char *s;
    size_t n, cap;
} str;

static void put_(str *o, const char *s, size_t n) {
    if (o->n + n + 1 > o->cap) {
        o->cap = (o->n + n + 1) * 2;
        o->s = realloc(o->s, o->cap);
        assert_non_null(o->s);
    }
    memcpy(o->s + o->n, s, n);
    o->n += n;
    o->s[o->n] = 0;
}

static void putf_(str *o, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof buf);
    put_(o, buf, (size_t)n);
}

// The arguments of a call whose '(' is at p: at most 4, split at commas
// outside brackets, trimmed, into args; returns the character after the ')'.
static const char *args_(const char *p, char args[4][256], int *nargs) {
    assert_int_equal(*p, '(');
    int depth = 0, n = 0;
    const char *start = p + 1;
    for (const char *q = p; *q; q++) {
        if (*q == '(' || *q == '[') {
            depth++;
            continue;
        }
        int end = (*q == ')' || *q == ']') && --depth == 0;
        if (!end && !(*q == ',' && depth == 1)) continue;
        assert_true(n < 4);
        while (isspace((unsigned char)*start)) start++;
        size_t len = (size_t)(q - start);
        while (len && isspace((unsigned char)start[len - 1])) len--;
        assert_true(len < 256);
        memcpy(args[n], start, len);
        args[n++][len] = 0;
        start = q + 1;
        if (end) {
            *nargs = n;
            return q + 1;
        }
    }
    fail_msg("unbalanced call at: %.60s", p);
    return NULL;
}

// 1 if the file declares `name` as an array of f32 (else: of vec4<u32>).
static int f32_array_(const char *text, const char *name) {
    char pat[320];
    snprintf(pat, sizeof pat, " %.200s: array<f32", name);
    return strstr(text, pat) != NULL;
}

// The stand-in: SGM_* as the H200's shape, the matrix types vec4<f32>,
// subgroupMatrixLoad/Store a read/write of one element of the array,
// subgroupMatrixMultiplyAccumulate(a, b, c) = a * b + c.
static char *stub_(const char *text) {
    str o = {0};
    // (on the first line, in front of it, so that error lines stay the file's)
    putf_(&o, "const SGM_TM: u32 = 16u; const SGM_TN: u32 = 8u; const SGM_TK: u32 = 16u; const SGM_SG: u32 = 32u; "
              "fn smma_(a: vec4<f32>, b: vec4<f32>, c: vec4<f32>) -> vec4<f32> { return a * b + c; } ");
    const char *p = text;
    while (*p) {
        const char *line_end = strchr(p, '\n');
        size_t line = line_end ? (size_t)(line_end - p + 1) : strlen(p);
        const char *eq = strncmp(p, "alias ", 6) == 0 ? strchr(p, '=') : NULL;
        if (eq && eq < p + line && strncmp(eq, "= subgroup_matrix_", 18) == 0) {
            put_(&o, p, (size_t)(eq - p));
            put_(&o, "= vec4<f32>;", 12);
            p = strchr(eq, ';') + 1;
            continue;
        }
        if (strncmp(p, "@diagnostic(off, subgroup_uniformity)", 37) == 0) {
            p += 37;
            continue;
        }
        if (strncmp(p, "//", 2) == 0) {  // a comment: to the end of the line as it is
            put_(&o, p, line);
            p += line;
            continue;
        }
        char a[4][256];
        int n;
        if (strncmp(p, "subgroupMatrixLoad<", 19) == 0) {
            const char *call = strchr(p, '>') + 1;
            p = args_(call, a, &n);
            assert_int_equal(n, 3);
            assert_int_equal(a[0][0], '&');
            if (f32_array_(text, a[0] + 1)) putf_(&o, "vec4<f32>(%s[%s] + f32(%s))", a[0] + 1, a[1], a[2]);
            else putf_(&o, "(bitcast<vec4<f32>>(%s[%s]) + f32(%s))", a[0] + 1, a[1], a[2]);
            continue;
        }
        if (strncmp(p, "subgroupMatrixStore<", 20) == 0) {
            const char *call = strchr(p, '>') + 1;
            p = args_(call, a, &n);
            assert_int_equal(n, 4);
            assert_int_equal(a[0][0], '&');
            if (f32_array_(text, a[0] + 1)) putf_(&o, "%s[%s] = (%s).x + f32(%s)", a[0] + 1, a[1], a[2], a[3]);
            else putf_(&o, "%s[%s] = bitcast<vec4<u32>>(%s) + vec4<u32>(%s)", a[0] + 1, a[1], a[2], a[3]);
            continue;
        }
        if (strncmp(p, "subgroupMatrixMultiplyAccumulate(", 33) == 0) {
            put_(&o, "smma_(", 6);
            p += 33;
            continue;
        }
        put_(&o, p, 1);
        p++;
    }
    return o.s;
}

// 1 if name is one of FILES.
static int is_sgm_file_(const char *name) {
    for (size_t f = 0; f < sizeof FILES / sizeof FILES[0]; f++)
        if (strcmp(name, FILES[f]) == 0) return 1;
    return 0;
}

// Copies every kernel file into dir, the subgroup-matrix ones stubbed;
// returns how many files it wrote.
static int write_folder_(const char *dir) {
    char src[4096];
    snprintf(src, sizeof src, "%s/kernels", WGPT_SOURCE_DIR);
    DIR *d = opendir(src);
    if (!d) fail_msg("cannot list %s: %s", src, strerror(errno));
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".wgsl") != 0) continue;
        char rel[512], path[4096];
        snprintf(rel, sizeof rel, "kernels/%s", e->d_name);
        char *text = tu_read_source(rel), *out = text;
        if (is_sgm_file_(e->d_name)) {
            out = stub_(text);
            // every matrix call and type replaced (comments aside)
            for (const char *q = out; (q = strstr(q, "subgroupMatrix")) != NULL; q++) {
                const char *bol = q;
                while (bol > out && bol[-1] != '\n') bol--;
                const char *c = strstr(bol, "//");
                if (!c || c > q) fail_msg("%s: a matrix call left as it was: %.80s", e->d_name, bol);
            }
        }
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *fo = fopen(path, "wb");
        if (!fo) fail_msg("cannot write %s: %s", path, strerror(errno));
        fputs(out, fo);
        fclose(fo);
        if (out != text) free(out);
        free(text);
        n++;
    }
    closedir(d);
    return n;
}

// The stubbed folder; removed by the teardown even when the test fails.
static char dir[] = "/tmp/wgpt-sgm-stub-XXXXXX";
static int made_;

static int teardown_(void **state) {
    if (made_) tu_rm_rf(dir);
    return tu_group_teardown(state);
}

static void sgm_files_compile_with_stubs(void **st) {
    (void)st;
    assert_non_null(mkdtemp(dir));
    made_ = 1;
    assert_true(write_folder_(dir) >= 3);
    wgpt_gpu_options opt = {.adapter_index = -1, .kernel_dir = dir};
    wgpt_gpu *g = tu_gpu_open(&opt);
    const wgpt_gpu_info *info = wgpt_gpu_get_info(g);
    if (info->has_subgroup_matrix && info->sgm_config >= 0) {
        // the engine writes SGM_* itself here, and test_linear_f16 and
        // test_attention compile and run the real files
        printf("skipped: '%s' compiles the subgroup-matrix files as they are\n", info->name);
        skip();
    }
    int kernels = 0;
    for (size_t f = 0; f < sizeof FILES / sizeof FILES[0]; f++) {
        char rel[256], err[512];
        snprintf(rel, sizeof rel, "kernels/%s", FILES[f]);
        char *text = tu_read_source(rel);
        wgpt_ksrc_file kf;
        if (wgpt_ksrc_parse(&kf, FILES[f], text, err, sizeof err) < 0) fail_msg("%s", err);
        for (int i = 0; i < kf.nkernels; i++) {
            const char *name = kf.kernels[i].name;
            wgpt_kernel *k = wgpt_kernel_get(g, name);
            const char *e = k ? "" : wgpt_gpu_error(g);
            int too_big = !k && !strstr(e, "failed to compile") && strstr(e, "workgroup storage");
            printf("%-36s %s\n", name, k ? "compiled" : too_big ? "compiled (needs more workgroup memory than this device)" : e);
            if (!k && !too_big) fail_msg("%s (%s, stubbed): %s", name, FILES[f], e);
            kernels++;
        }
        wgpt_ksrc_free(&kf);
        free(text);
    }
    assert_true(kernels >= 6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sgm_files_compile_with_stubs),
    };
    return cmocka_run_group_tests_name("sgm_stub_compile", tests, NULL, teardown_);
}
