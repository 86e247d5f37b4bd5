// test_kernel_docs.c: every kernel file has its chapter (kernels/NAME.wgsl,
// docs/kernels/NAME.md), and every kernel section written out in the file
// (a `// --- KERNEL: name ---` marker; not a variant `name = base with ...`,
// whose base is named, unless its base is a template), and every template
// (`// --- TEMPLATE: name ---`) is named in its chapter, so a kernel added, renamed or
// removed without its chapter fails here. No GPU.
#include "test_util.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// 1 if `name` occurs in text as a whole word (not inside a longer identifier).
static int has_word_(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = strstr(text, name); p; p = strstr(p + 1, name)) {
        int before = p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int after = isalnum((unsigned char)p[n]) || p[n] == '_';
        if (!before && !after) return 1;
    }
    return 0;
}

// The names of kernel's written-out sections not in chapter, appended to
// missing (a list of "file: name" lines); returns how many sections it saw.
static int check_file_(const char *wgsl, const char *kernel, const char *chapter, char *missing, size_t cap) {
    static const char MARK[] = "// --- KERNEL: ", TMARK[] = "// --- TEMPLATE: ";
    int seen = 0;
    for (int pass = 0; pass < 2; pass++) {
        const char *mark = pass ? TMARK : MARK;
        size_t ml = strlen(mark);
        for (const char *p = strstr(kernel, mark); p; p = strstr(p + 1, mark)) {
            const char *s = p + ml, *e = s;
            while (isalnum((unsigned char)*e) || *e == '_') e++;
            if (strncmp(e, " = ", 3) == 0) {  // a variant (its base is named), unless it instantiates a template
                const char *b = e + 3, *be = b;
                while (isalnum((unsigned char)*be) || *be == '_') be++;
                char tline[160];
                snprintf(tline, sizeof tline, "%s%.*s ---", TMARK, (int)(be - b), b);
                if (!strstr(kernel, tline)) continue;
            }
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(e - s), s);
            seen++;
            if (!has_word_(chapter, name)) {
                size_t len = strlen(missing);
                snprintf(missing + len, cap - len, "  %s: %s\n", wgsl, name);
            }
        }
    }
    return seen;
}

static void every_kernel_section_is_in_its_chapter(void **state) {
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/kernels", WGPT_SOURCE_DIR);
    DIR *d = opendir(dir);
    assert_non_null(d);
    static char missing[16384];
    missing[0] = 0;
    int files = 0, sections = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 6 || strcmp(de->d_name + n - 5, ".wgsl") != 0) continue;
        char wgsl[512], md[512];
        snprintf(wgsl, sizeof wgsl, "kernels/%s", de->d_name);
        snprintf(md, sizeof md, "docs/kernels/%.*s.md", (int)(n - 5), de->d_name);
        char *kernel = tu_read_source(wgsl), *chapter = tu_read_source(md);  // fails naming a missing chapter
        sections += check_file_(wgsl, kernel, chapter, missing, sizeof missing);
        files++;
        free(kernel);
        free(chapter);
    }
    closedir(d);
    printf("%d kernel files, %d written-out sections\n", files, sections);
    assert_true(files >= 10 && sections >= 10);  // the folder was read, not an empty one
    if (missing[0]) fail_msg("kernel sections that their chapter in docs/kernels/ does not name:\n%s", missing);
}

// The check itself: a name only inside a longer identifier does not count.
static void whole_words_only(void **state) {
    (void)state;
    assert_true(has_word_("runs `matmul_f16_forward` here", "matmul_f16_forward"));
    assert_false(has_word_("runs matmul_f16_forward_t here", "matmul_f16_forward"));
    assert_false(has_word_("x_matmul_f16_forward", "matmul_f16_forward"));
    char missing[256] = "";
    const char *k = "// --- KERNEL: a_kernel ---\n// --- KERNEL: a_kernel_v = a_kernel with X=1 ---\n"
                    "// --- KERNEL: b_kernel ---\n";
    assert_int_equal(check_file_("k.wgsl", k, "only a_kernel here", missing, sizeof missing), 2);
    assert_string_equal(missing, "  k.wgsl: b_kernel\n");
    // A template and its instances are named; a variant of a section is not.
    missing[0] = 0;
    const char *t = "// --- TEMPLATE: t_w ---\n// --- KERNEL: t_1 = t_w with V=f32 ---\n"
                    "// --- KERNEL: c_kernel ---\n// --- KERNEL: c_v = c_kernel with X=1 ---\n";
    assert_int_equal(check_file_("k.wgsl", t, "names c_kernel", missing, sizeof missing), 3);
    assert_string_equal(missing, "  k.wgsl: t_1\n  k.wgsl: t_w\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_words_only),
        cmocka_unit_test(every_kernel_section_is_in_its_chapter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
