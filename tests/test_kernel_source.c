// test_kernel_source.c: the seeds' kernel-file rules, without a GPU:
// splitting at markers, the shared-preamble rule, composing and line mapping.
#include "test_util.h"

#include "gpu/kernel_source.h"

static void splits_at_markers(void **state) {
    (void)state;
    const char *text =
        "// file preamble\n"
        "const TM: u32 = 64u;\n"
        "// --- KERNEL: first ---\n"
        "fn first() {}\n"
        "\n"
        "// --- KERNEL: second_2 ---\n"
        "fn second_2() {}\n";
    wgpt_ksrc_file f;
    char err[256];
    assert_int_equal(wgpt_ksrc_parse(&f, "x.wgsl", text, err, sizeof err), 0);
    assert_int_equal(f.nkernels, 2);
    assert_string_equal(f.kernels[0].name, "first");
    assert_string_equal(f.kernels[1].name, "second_2");
    assert_int_equal(f.preamble_end, strlen("// file preamble\nconst TM: u32 = 64u;\n"));
    assert_int_equal(f.kernels[0].body_line, 4);
    assert_int_equal(f.kernels[1].body_line, 7);
    assert_memory_equal(f.text + f.kernels[0].body_start, "fn first() {}\n\n",
                        f.kernels[0].body_end - f.kernels[0].body_start);
    assert_int_equal(f.kernels[0].body_end - f.kernels[0].body_start, strlen("fn first() {}\n\n"));
    assert_string_equal(f.text + f.kernels[1].body_start, "fn second_2() {}\n");
    wgpt_ksrc_free(&f);
}

static void file_without_marker_is_an_error(void **state) {
    (void)state;
    wgpt_ksrc_file f;
    char err[256];
    assert_int_equal(wgpt_ksrc_parse(&f, "empty.wgsl", "fn a() {}\n", err, sizeof err), -1);
    assert_non_null(strstr(err, "empty.wgsl"));
    assert_non_null(strstr(err, "no kernel markers"));
}

static void malformed_and_duplicate_markers(void **state) {
    (void)state;
    wgpt_ksrc_file f;
    char err[256];
    const char *bad[] = {
        "// --- KERNEL: has space ---\n",
        "// --- KERNEL: name --\n",
        "// --- KERNEL: 9starts_with_digit ---\n",
        "// --- KERNEL:name ---\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "// ok\n%s", bad[i]);
        assert_int_equal(wgpt_ksrc_parse(&f, "bad.wgsl", text, err, sizeof err), -1);
        assert_non_null(strstr(err, "bad.wgsl:2"));
        assert_non_null(strstr(err, "malformed"));
    }
    assert_int_equal(wgpt_ksrc_parse(&f, "dup.wgsl", "// --- KERNEL: a ---\n\n// --- KERNEL: a ---\n", err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "dup.wgsl:3"));
    assert_non_null(strstr(err, "twice"));
    // A marker-looking text that is not at the start of a line is just a comment.
    assert_int_equal(wgpt_ksrc_parse(&f, "ok.wgsl", "  // --- KERNEL: x ---\n// --- KERNEL: y ---\n", err, sizeof err),
                     0);
    assert_int_equal(f.nkernels, 1);
    assert_string_equal(f.kernels[0].name, "y");
    wgpt_ksrc_free(&f);
    // Windows line endings are accepted.
    assert_int_equal(wgpt_ksrc_parse(&f, "crlf.wgsl", "// --- KERNEL: z ---\r\nfn z() {}\r\n", err, sizeof err), 0);
    assert_string_equal(f.kernels[0].name, "z");
    wgpt_ksrc_free(&f);
}

static void shared_preamble_refuses_markers(void **state) {
    (void)state;
    char err[256];
    assert_int_equal(wgpt_ksrc_check_shared("00_shared.wgsl", "const WG: u32 = 256u;\n", err, sizeof err), 0);
    assert_int_equal(
        wgpt_ksrc_check_shared("00_shared.wgsl", "const WG: u32 = 256u;\n\n// --- KERNEL: x ---\n", err, sizeof err), -1);
    assert_non_null(strstr(err, "00_shared.wgsl:3"));
    assert_non_null(strstr(err, "must not contain a kernel marker"));
}

static void composes_in_order_and_maps_lines(void **state) {
    (void)state;
    const char *shared = "const WG: u32 = 256u;\nfn helper() {}";  // no final newline
    const char *text =
        "const A: u32 = 1u;\n"        // file line 1
        "// --- KERNEL: k1 ---\n"     // 2
        "fn k1() {}\n"                // 3
        "// --- KERNEL: k2 ---\n"     // 4
        "fn k2() {\n"                 // 5
        "  let bad = ;\n"             // 6
        "}\n";                        // 7
    wgpt_ksrc_file f;
    char err[256];
    assert_int_equal(wgpt_ksrc_parse(&f, "t.wgsl", text, err, sizeof err), 0);
    wgpt_ksrc_composed c;
    assert_int_equal(wgpt_ksrc_compose(&c, "enable f16;\nenable subgroups;\n", "00_shared.wgsl", shared, &f, 1), 0);
    assert_string_equal(c.code,
                        "enable f16;\nenable subgroups;\n"
                        "const WG: u32 = 256u;\nfn helper() {}\n"
                        "const A: u32 = 1u;\n"
                        "fn k2() {\n  let bad = ;\n}\n");
    const char *file;
    uint32_t line;
    assert_int_equal(wgpt_ksrc_map_line(&c, 1, &file, &line), 0);  // enable f16
    assert_null(file);
    assert_int_equal(wgpt_ksrc_map_line(&c, 4, &file, &line), 0);  // fn helper
    assert_string_equal(file, "00_shared.wgsl");
    assert_int_equal(line, 2);
    assert_int_equal(wgpt_ksrc_map_line(&c, 5, &file, &line), 0);  // const A
    assert_string_equal(file, "t.wgsl");
    assert_int_equal(line, 1);
    assert_int_equal(wgpt_ksrc_map_line(&c, 7, &file, &line), 0);  // let bad
    assert_string_equal(file, "t.wgsl");
    assert_int_equal(line, 6);
    assert_int_equal(wgpt_ksrc_map_line(&c, 9, &file, &line), -1);
    assert_int_equal(wgpt_ksrc_map_line(&c, 0, &file, &line), -1);
    wgpt_ksrc_composed_free(&c);
    wgpt_ksrc_free(&f);
}

// A variant marker names a kernel compiled from a section with override
// constants: it opens no section (the body around it stays the section's),
// shares its section's body and entry point, and may come before it.
static void variant_markers(void **state) {
    (void)state;
    const char *text =
        "override W: bool = false;\n"                                   // 1
        "// --- KERNEL: k_early = k with W=1 ---\n"                     // 2
        "// --- KERNEL: k ---\n"                                        // 3
        "// --- KERNEL: k_two = k with W=1, S=-2.5e1, T=0x10 ---\r\n"  // 4
        "fn k() {}\n"                                                   // 5
        "// --- KERNEL: other ---\n"                                    // 6
        "fn other() {}\n";
    wgpt_ksrc_file f;
    char err[512];
    assert_int_equal(wgpt_ksrc_parse(&f, "v.wgsl", text, err, sizeof err), 0);
    assert_int_equal(f.nkernels, 4);
    assert_string_equal(f.kernels[0].name, "k_early");
    assert_string_equal(f.kernels[1].name, "k");
    assert_string_equal(f.kernels[2].name, "k_two");
    assert_int_equal(f.kernels[0].base, 1);
    assert_int_equal(f.kernels[1].base, -1);
    assert_int_equal(f.kernels[2].base, 1);
    assert_int_equal(f.kernels[3].base, -1);
    assert_int_equal(f.preamble_end, strlen("override W: bool = false;\n// --- KERNEL: k_early = k with W=1 ---\n"));
    assert_string_equal(wgpt_ksrc_entry(&f, 2), "k");
    assert_string_equal(wgpt_ksrc_entry(&f, 3), "other");
    assert_int_equal(f.kernels[2].nconsts, 3);
    assert_string_equal(f.kernels[2].consts[0].name, "W");
    assert_true(f.kernels[2].consts[0].value == 1.0);
    assert_string_equal(f.kernels[2].consts[1].name, "S");
    assert_true(f.kernels[2].consts[1].value == -25.0);
    assert_true(f.kernels[2].consts[2].value == 16.0);
    // k's body runs to the next section, over the variant line; the variants share it
    for (int i = 0; i < 3; i++) {
        assert_int_equal(f.kernels[i].body_start, f.kernels[1].body_start);
        assert_int_equal(f.kernels[i].body_end, f.kernels[1].body_end);
        assert_int_equal(f.kernels[i].body_line, 4);
    }
    assert_memory_equal(f.text + f.kernels[1].body_start, "// --- KERNEL: k_two", 20);
    wgpt_ksrc_composed c;
    assert_int_equal(wgpt_ksrc_compose(&c, "", "s.wgsl", "const X: u32 = 1u;\n", &f, 2), 0);
    assert_non_null(strstr(c.code, "fn k() {}"));
    assert_null(strstr(c.code, "fn other"));
    wgpt_ksrc_composed_free(&c);
    wgpt_ksrc_free(&f);

    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"// --- KERNEL: a ---\n// --- KERNEL: b = nothere with X=1 ---\n", "v.wgsl:2: kernel 'b' is a variant of 'nothere'"},
        {"// --- KERNEL: a ---\n// --- KERNEL: b = a with X=1 ---\n// --- KERNEL: c = b with X=2 ---\n",
         "v.wgsl:3: kernel 'c' is a variant of 'b'"},
        {"// --- KERNEL: a ---\n// --- KERNEL: a = a with X=1 ---\n", "v.wgsl:2: kernel 'a' is defined twice"},
        {"// --- KERNEL: a ---\n// --- KERNEL: b = a with X=one ---\n", "v.wgsl:2: malformed"},
        {"// --- KERNEL: a ---\n// --- KERNEL: b = a with X= ---\n", "v.wgsl:2: malformed"},
        {"// --- KERNEL: a ---\n// --- KERNEL: b = a ---\n", "v.wgsl:2: malformed"},
        {"// --- KERNEL: a ---\n// --- KERNEL: b=a with X=1 ---\n", "v.wgsl:2: malformed"},
        {"// --- KERNEL: a ---\n// --- KERNEL: b = a with A=1, B=2, C=3, D=4, E=5 ---\n", "v.wgsl:2: malformed"},
        {"// --- KERNEL: b = a with X=1 ---\n", "no kernel markers"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(wgpt_ksrc_parse(&f, "v.wgsl", bad[i].text, err, sizeof err), -1);
        if (!strstr(err, bad[i].needle)) fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].needle);
    }
}

// An entry marker names a second entry point of a section: the section's
// body (its bindings declared once), compiled with the marker's own name as
// entry point; it opens no section, and a variant may compile it.
static void entry_markers(void **state) {
    (void)state;
    const char *text =
        "override W: bool = false;\n"                 // 1
        "// --- KERNEL: k ---\n"                      // 2
        "// --- KERNEL: k_back in k ---\n"            // 3
        "// --- KERNEL: k_back_w = k_back with W=1 ---\n"  // 4
        "fn k() {}\n"                                 // 5
        "fn k_back() {}\n"                            // 6
        "// --- KERNEL: other ---\n"                  // 7
        "fn other() {}\n";
    wgpt_ksrc_file f;
    char err[512];
    assert_int_equal(wgpt_ksrc_parse(&f, "e.wgsl", text, err, sizeof err), 0);
    assert_int_equal(f.nkernels, 4);
    assert_string_equal(f.kernels[1].name, "k_back");
    assert_int_equal(f.kernels[1].base, -1);
    assert_int_equal(f.kernels[1].host, 0);
    assert_int_equal(f.kernels[0].host, -1);
    assert_int_equal(f.kernels[2].base, 1);
    assert_string_equal(wgpt_ksrc_entry(&f, 1), "k_back");
    assert_string_equal(wgpt_ksrc_entry(&f, 2), "k_back");
    for (int i = 1; i < 3; i++) {
        assert_int_equal(f.kernels[i].body_start, f.kernels[0].body_start);
        assert_int_equal(f.kernels[i].body_end, f.kernels[0].body_end);
        assert_int_equal(f.kernels[i].body_line, 3);
    }
    wgpt_ksrc_composed c;
    assert_int_equal(wgpt_ksrc_compose(&c, "", "s.wgsl", "", &f, 2), 0);
    assert_non_null(strstr(c.code, "fn k_back() {}"));
    assert_null(strstr(c.code, "fn other"));
    wgpt_ksrc_composed_free(&c);
    wgpt_ksrc_free(&f);

    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"// --- KERNEL: a ---\n// --- KERNEL: b in nothere ---\n", "e.wgsl:2: kernel 'b' is an entry in 'nothere'"},
        {"// --- KERNEL: a ---\n// --- KERNEL: b in a ---\n// --- KERNEL: c in b ---\n",
         "e.wgsl:3: kernel 'c' is an entry in 'b'"},
        {"// --- KERNEL: a ---\n// --- KERNEL: b = a with X=1 ---\n// --- KERNEL: c in b ---\n",
         "e.wgsl:3: kernel 'c' is an entry in 'b'"},
        {"// --- KERNEL: a ---\n// --- KERNEL: b on a ---\n", "e.wgsl:2: malformed"},
        {"// --- KERNEL: a ---\n// --- KERNEL: b in a b ---\n", "e.wgsl:2: malformed"},
        {"// --- KERNEL: a ---\n// --- KERNEL: b in  ---\n", "e.wgsl:2: malformed"},
        {"// --- KERNEL: a ---\n// --- KERNEL: a in a ---\n", "e.wgsl:2: kernel 'a' is defined twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(wgpt_ksrc_parse(&f, "e.wgsl", bad[i].text, err, sizeof err), -1);
        if (!strstr(err, bad[i].needle)) fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].needle);
    }
}

// A template is no kernel; each instance compiles its body with the `{{X}}`
// replaced (an empty value allowed), entry point the instance's own name,
// lines mapped to the template's.
static void template_instances(void **state) {
    (void)state;
    const char *text =
        "const K = 1;\n"                                                  // 1
        "// --- TEMPLATE: tw ---\n"                                       // 2
        "// --- KERNEL: t1 = tw with V=f32, N= ---\n"                      // 3
        "// --- KERNEL: t4 = tw with V=vec4<f32>, N=4 ---\n"               // 4
        "var<storage> x: array<{{V}}>;\n"                                 // 5
        "fn t{{N}}() { let a = {{V}}(); }\n"                              // 6
        "// --- KERNEL: after ---\n"                                      // 7
        "fn after() {}\n"                                                 // 8
        "// --- KERNEL: t4_s = t4 with S=1 ---\n";                        // 9: a variant of an instance
    wgpt_ksrc_file f;
    char err[512];
    assert_int_equal(wgpt_ksrc_parse(&f, "t.wgsl", text, err, sizeof err), 0);
    assert_int_equal(f.ntemplates, 1);
    assert_string_equal(f.templates[0].name, "tw");
    assert_int_equal(f.nkernels, 4);  // t1, t4, after, t4_s: the template is no kernel
    assert_string_equal(f.kernels[1].name, "t4");
    assert_int_equal(f.kernels[1].tmpl, 0);
    assert_int_equal(f.kernels[1].nconsts, 0);
    assert_string_equal(wgpt_ksrc_entry(&f, 1), "t4");
    assert_int_equal(f.kernels[2].tmpl, -1);
    wgpt_ksrc_composed c;
    assert_int_equal(wgpt_ksrc_compose(&c, "", "s.wgsl", "", &f, 0), 0);
    assert_non_null(strstr(c.code, "const K = 1;\n// --- KERNEL: t1"));
    assert_non_null(strstr(c.code, "\nvar<storage> x: array<f32>;\nfn t() { let a = f32(); }\n"));
    assert_null(strstr(c.code, "{{"));
    assert_null(strstr(c.code, "after"));
    const char *file;
    uint32_t line;
    assert_int_equal(wgpt_ksrc_map_line(&c, 5, &file, &line), 0);  // fn t() ...
    assert_int_equal(line, 6);
    wgpt_ksrc_composed_free(&c);
    assert_int_equal(wgpt_ksrc_compose(&c, "", "s.wgsl", "", &f, 1), 0);
    assert_non_null(strstr(c.code, "var<storage> x: array<vec4<f32>>;\nfn t4() { let a = vec4<f32>(); }\n"));
    wgpt_ksrc_composed_free(&c);
    assert_int_equal(wgpt_ksrc_compose(&c, "", "s.wgsl", "", &f, 2), 0);
    assert_non_null(strstr(c.code, "fn after() {}"));
    assert_null(strstr(c.code, "{{"));
    wgpt_ksrc_composed_free(&c);
    assert_int_equal(f.kernels[3].base, 1);  // t4's text and entry point, its own constant
    assert_int_equal(f.kernels[3].nconsts, 1);
    assert_string_equal(f.kernels[3].consts[0].name, "S");
    assert_string_equal(wgpt_ksrc_entry(&f, 3), "t4");
    assert_int_equal(wgpt_ksrc_compose(&c, "", "s.wgsl", "", &f, 3), 0);
    assert_non_null(strstr(c.code, "fn t4() { let a = vec4<f32>(); }\n"));
    wgpt_ksrc_composed_free(&c);
    wgpt_ksrc_free(&f);

    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"// --- TEMPLATE: tw ---\n// --- KERNEL: a = tw with V=f32 ---\nfn a() -> {{V}} {}\nfn b({{W}}) {}\n",
         "t.wgsl:2: kernel 'a': template 'tw' holds `{{W}}`, which it does not set"},
        {"// --- TEMPLATE: tw ---\n// --- KERNEL: a = tw with V=f32, X=1 ---\nfn a() -> {{V}} {}\n",
         "t.wgsl:2: kernel 'a' sets X, which template 'tw' does not use"},
        {"// --- TEMPLATE: tw ---\n// --- KERNEL: tw = tw with V=f32 ---\n", "t.wgsl:2: 'tw' is already a template"},
        {"// --- KERNEL: a ---\n// --- TEMPLATE: a ---\n", "t.wgsl:2: kernel 'a' is defined twice"},
        {"// --- TEMPLATE: tw ---\n// --- KERNEL: b in tw ---\n", "t.wgsl:2: kernel 'b' is an entry in 'tw'"},
        {"// --- TEMPLATE: t w ---\n", "t.wgsl:1: malformed"},
        {"// --- TEMPLATE: tw ---\n// --- KERNEL: a = tw with V=a b ---\n", "t.wgsl:2: malformed"},
        {"// --- TEMPLATE: tw ---\n// --- KERNEL: a = tw with V=f32 ---\nfn a({{V}}) {}\n// --- KERNEL: b = a with V=x ---\n",
         "t.wgsl:4: malformed variant 'b'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(wgpt_ksrc_parse(&f, "t.wgsl", bad[i].text, err, sizeof err), -1);
        if (!strstr(err, bad[i].needle)) fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].needle);
    }
    // A switch: `{{?X}}` keeps the rest of its line where X is 1, else
    // empties it (the newline stays, so lines still map).
    const char *sw = "// --- TEMPLATE: tw ---\n"                                 // 1
                     "// --- KERNEL: on = tw with N=on, F=1 ---\n"               // 2
                     "// --- KERNEL: off = tw with N=off, F=0 ---\n"             // 3
                     "fn {{N}}() {\n"                                           // 4
                     "    {{?F}}let a = 1;\n"                                   // 5
                     "    let b = 2; {{?F}}let c = 3;\n"                        // 6
                     "}\n";                                                     // 7
    assert_int_equal(wgpt_ksrc_parse(&f, "t.wgsl", sw, err, sizeof err), 0);
    assert_int_equal(wgpt_ksrc_compose(&c, "", "s.wgsl", "", &f, 0), 0);
    assert_non_null(strstr(c.code, "fn on() {\n    let a = 1;\n    let b = 2; let c = 3;\n}\n"));
    wgpt_ksrc_composed_free(&c);
    assert_int_equal(wgpt_ksrc_compose(&c, "", "s.wgsl", "", &f, 1), 0);
    assert_non_null(strstr(c.code, "fn off() {\n    \n    let b = 2; \n}\n"));
    assert_int_equal(wgpt_ksrc_map_line(&c, 5, &file, &line), 0);  // let b = 2; ... (the markers are lines 1, 2)
    assert_int_equal(line, 6);
    wgpt_ksrc_composed_free(&c);
    wgpt_ksrc_free(&f);
    static const struct {
        const char *text, *needle;
    } bad_sw[] = {
        {"// --- TEMPLATE: tw ---\n// --- KERNEL: a = tw with F=yes ---\n{{?F}}fn a() {}\n",
         "t.wgsl:2: kernel 'a' sets F=yes, but template 'tw' uses it as a switch ({{?F}}): 0 or 1"},
        {"// --- TEMPLATE: tw ---\n// --- KERNEL: a = tw with F=1 ---\nfn a() {}\n{{?G}}\n",
         "t.wgsl:2: kernel 'a': template 'tw' holds `{{?G}}`, which it does not set"},
    };
    for (size_t i = 0; i < sizeof bad_sw / sizeof bad_sw[0]; i++) {
        assert_int_equal(wgpt_ksrc_parse(&f, "t.wgsl", bad_sw[i].text, err, sizeof err), -1);
        if (!strstr(err, bad_sw[i].needle)) fail_msg("switch case %zu: \"%s\" lacks \"%s\"", i, err, bad_sw[i].needle);
    }
    // The shared preamble holds no template either.
    assert_int_equal(wgpt_ksrc_check_shared("00_shared.wgsl", "\n// --- TEMPLATE: x ---\n", err, sizeof err), -1);
}

static void real_kernel_files_follow_the_rules(void **state) {
    (void)state;
    char err[256];
    char *shared = tu_read_source("kernels/00_shared.wgsl");
    assert_int_equal(wgpt_ksrc_check_shared("00_shared.wgsl", shared, err, sizeof err), 0);
    assert_null(strstr(shared, "\nenable "));  // the engine writes the enables
    assert_int_not_equal(strncmp(shared, "enable ", 7), 0);
    free(shared);
    char *infra = tu_read_source("kernels/00_infrastructure.wgsl");
    wgpt_ksrc_file f;
    assert_int_equal(wgpt_ksrc_parse(&f, "00_infrastructure.wgsl", infra, err, sizeof err), 0);
    const char *names[] = {"ew_dst",         "fill_zero",      "fill_const",      "scale",      "clamp_inplace",
                           "ew_src",         "axpy",           "copy",            "ew_dst_vec4", "fill_zero_vec4",
                           "fill_const_vec4", "scale_vec4",    "ew_src_vec4",     "axpy_vec4",  "copy_vec4"};
    assert_int_equal(f.nkernels, 15);
    for (int i = 0; i < 15; i++) assert_string_equal(f.kernels[i].name, names[i]);
    wgpt_ksrc_free(&f);
    free(infra);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(splits_at_markers),
        cmocka_unit_test(file_without_marker_is_an_error),
        cmocka_unit_test(malformed_and_duplicate_markers),
        cmocka_unit_test(shared_preamble_refuses_markers),
        cmocka_unit_test(composes_in_order_and_maps_lines),
        cmocka_unit_test(variant_markers),
        cmocka_unit_test(entry_markers),
        cmocka_unit_test(template_instances),
        cmocka_unit_test(real_kernel_files_follow_the_rules),
    };
    return cmocka_run_group_tests_name("kernel_source", tests, NULL, NULL);
}
