// test_source_shape.c: every file of src/ within 800 lines and every function
// within 120 (HELPERS: small files, one job each), naming the file and the
// function that is not. Reads src/**/*.[ch]; no GPU.
//
// A function is found the way this code base writes them: its signature
// starts at column 0 (continued on indented lines) and ends in "{", and its
// body ends at the first "}" at column 0. Its length counts the signature's
// first line to that "}".
#include "test_util.h"

#include <ctype.h>
#include <dirent.h>
#include <sys/stat.h>

#define MAX_FILE_LINES 800
#define MAX_FUNCTION_LINES 120


// The name of the function whose signature is sig ("static int foo_(int a) {"):
// the identifier before the first "(", in name; 0, or -1 if sig is none
// (an initializer, a struct, a prototype).
static int function_name_(const char *sig, char *name, size_t cap) {
    const char *paren = strchr(sig, '(');
    if (!paren || strchr(sig, '=') || strchr(sig, ';')) return -1;
    const char *end = paren;
    while (end > sig && end[-1] == ' ') end--;
    const char *start = end;
    while (start > sig && (isalnum((unsigned char)start[-1]) || start[-1] == '_')) start--;
    if (start == end) return -1;
    snprintf(name, cap, "%.*s", (int)(end - start), start);
    return 0;
}

// Counts the file's lines and reports each function over the limit; returns
// how many limits it breaks. rel names the file in the messages.
static int check_file_(const char *path, const char *rel, int *functions) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[4096], sig[8192] = "", name[256] = "";
    int lineno = 0, bad = 0, sig_start = 0, body_start = 0, in_sig = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == ' ' || line[n - 1] == '\r')) line[--n] = 0;
        if (body_start) {  // inside a function: until "}" at column 0
            if (line[0] == '}') {
                int len = lineno - body_start + 1;
                if (len > MAX_FUNCTION_LINES) {
                    print_error("%s:%d: function %s is %d lines (at most %d)\n", rel, body_start, name, len,
                                MAX_FUNCTION_LINES);
                    bad++;
                }
                body_start = 0;
            }
            continue;
        }
        int col0 = isalpha((unsigned char)line[0]) || line[0] == '_';
        if (!in_sig && col0) in_sig = 1, sig_start = lineno, sig[0] = 0;
        if (!in_sig) continue;
        if (in_sig && !col0 && line[0] != ' ' && line[0] != '\t') in_sig = 0;  // a blank line, a comment
        if (!in_sig) continue;
        size_t have = strlen(sig);
        snprintf(sig + have, sizeof sig - have, "%s ", line);
        if (n && line[n - 1] == '{') {
            in_sig = 0;
            if (function_name_(sig, name, sizeof name) == 0) body_start = sig_start, ++*functions;
        } else if (n && line[n - 1] == ';') {
            in_sig = 0;
        }
    }
    fclose(f);
    if (lineno > MAX_FILE_LINES) {
        print_error("%s is %d lines (at most %d)\n", rel, lineno, MAX_FILE_LINES);
        bad++;
    }
    return bad;
}

// check_file_ as tu_c_files' callback: ctx holds the files and functions read.
static int check_one_(const char *path, const char *rel, void *ctx) {
    int *counts = ctx;
    counts[0]++;
    return check_file_(path, rel, &counts[1]);
}

// The checker itself on made-up files: a function of 121 lines and a file of
// 801 are caught and named; 120 lines, a long initializer and a long
// comment are not.
static void the_checker_names_what_is_too_long(void **state) {
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/wgpt_shape_probe_%ld.c", (long)getpid());
    for (int len = MAX_FUNCTION_LINES; len <= MAX_FUNCTION_LINES + 1; len++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "// a comment\nstatic const int table_[] = {\n");
        for (int i = 0; i < 200; i++) fprintf(f, "    %d,\n", i);
        fprintf(f, "};\n\nstatic int long_one_(int a,\n                    int b) {\n");
        for (int i = 0; i < len - 4; i++) fprintf(f, "    a += b;\n");  // + 2 signature lines, return, }
        fprintf(f, "    return a;\n}\n");
        fclose(f);
        int functions = 0;
        int bad = check_file_(path, "(probe of 121 lines, expected)", &functions);
        assert_int_equal(functions, 1);
        assert_int_equal(bad, len > MAX_FUNCTION_LINES);
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < MAX_FILE_LINES + 1; i++) fprintf(f, "// line %d\n", i);
    fclose(f);
    int functions = 0;
    assert_int_equal(check_file_(path, "(probe: 801 lines, expected)", &functions), 1);
    unlink(path);
}

static void src_files_and_functions_are_short(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/src", WGPT_SOURCE_DIR);
    int counts[2] = {0, 0}, bad = tu_c_files(dir, "src", NULL, check_one_, counts);
    int files = counts[0], functions = counts[1];
    printf("%d files, %d functions checked\n", files, functions);
    assert_true(files > 100 && functions > 500);  // the walk found the tree
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_checker_names_what_is_too_long),
        cmocka_unit_test(src_files_and_functions_are_short),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
