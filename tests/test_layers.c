// test_layers.c: no layer includes one above it (docs/ARCHITECTURE.md's
// table), no Dawn declaration leaves src/gpu, and nothing below src/cli reads
// the environment. Reads the #include lines of src/*/*.[ch] and the code of
// src/**/*.[ch]; no GPU.
#include "test_util.h"

#include <dirent.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>

// Each layer and the folders of src/ it may include ("gpu/gpu.h" is the only
// GPU header above src/gpu: checked apart).
static const struct {
    const char *layer, *may[12];
} RULES[] = {
    {"util", {"util"}},
    {"gpu", {"util", "gpu"}},
    {"model", {"util", "gpu", "model"}},
    {"data", {"util", "data"}},
    {"dist", {"util", "dist"}},
    {"weights", {"util", "model", "weights"}},
    {"train", {"util", "gpu", "model", "data", "weights", "dist", "train"}},
    {"bench", {"util", "gpu", "model", "bench"}},
    {"serve", {"util", "model", "data", "train", "serve"}},
    {"cli", {"util", "gpu", "model", "data", "weights", "dist", "train", "bench", "serve", "cli"}},
};

static int allowed_(size_t r, const char *inc) {
    for (size_t i = 0; i < 12 && RULES[r].may[i]; i++) {
        size_t n = strlen(RULES[r].may[i]);
        if (!strncmp(inc, RULES[r].may[i], n) && inc[n] == '/') return 1;
    }
    return !strchr(inc, '/');  // a header of the same folder
}

static int check_file_(size_t r, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    int bad = 0;
    while (fgets(line, sizeof line, f)) {
        char inc[256];
        if (sscanf(line, "#include \"%255[^\"]\"", inc) != 1) continue;
        int gpu_private = strcmp(RULES[r].layer, "gpu") && !strncmp(inc, "gpu/", 4) && strcmp(inc, "gpu/gpu.h");
        if (!allowed_(r, inc) || gpu_private) {
            print_error("%s includes \"%s\"\n", path, inc);
            bad++;
        }
    }
    fclose(f);
    return bad;
}

static void no_layer_includes_an_upper_one(void **state) {
    (void)state;
    int bad = 0, files = 0;
    for (size_t r = 0; r < sizeof RULES / sizeof RULES[0]; r++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/src/%s", WGPT_SOURCE_DIR, RULES[r].layer);
        DIR *d = opendir(dir);
        assert_non_null(d);
        for (struct dirent *e; (e = readdir(d));) {
            size_t n = strlen(e->d_name);
            if (n < 3 || e->d_name[n - 2] != '.' || (e->d_name[n - 1] != 'c' && e->d_name[n - 1] != 'h')) continue;
            char path[2048];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            bad += check_file_(r, path);
            files++;
        }
        closedir(d);
    }
    assert_true(files > 50);
    assert_int_equal(bad, 0);
}

// A folder of src/ not in RULES would go unchecked.
static void every_layer_has_a_rule(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/src", WGPT_SOURCE_DIR);
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        char path[2048];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &st) || !S_ISDIR(st.st_mode)) continue;
        int known = 0;
        for (size_t r = 0; r < sizeof RULES / sizeof RULES[0]; r++) known |= !strcmp(RULES[r].layer, e->d_name);
        if (!known) fail_msg("src/%s has no rule in test_layers.c", e->d_name);
    }
    closedir(d);
}

// The files below src/cli that may call getenv, and why: the Vulkan layers
// are loaded by the Vulkan loader under Dawn's instance, with no channel to
// wgpt but the process's variables; vk_env.c adds wgpt's layers to the
// loader's own variables (VK_ADD_LAYER_PATH, VK_INSTANCE_LAYERS) and must
// read a user's value to keep it. None of them reads a setting of wgpt.
static const char *const GETENV_OK[] = {"src/gpu/vk_select/layer.c", "src/gpu/vk_stats/layer.c", "src/gpu/vk_env.c"};

// Lines of the file that call getenv outside a comment, each printed.
static int getenv_calls_(const char *path, const char *rel) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int bad = 0, lineno = 0, in_block = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *code = line;
        if (in_block) {
            char *end = strstr(code, "*/");
            if (!end) continue;
            code = end + 2, in_block = 0;
        }
        char *c = strstr(code, "//");
        if (c) *c = 0;
        char *b = strstr(code, "/*");
        if (b && !strstr(b, "*/")) *b = 0, in_block = 1;
        if (strstr(code, "getenv(")) {
            print_error("%s:%d reads the environment (only src/cli may: the layers take options)\n", rel, lineno);
            bad++;
        }
    }
    fclose(f);
    return bad;
}

// A file's getenv calls, unless GETENV_OK names it (tu_c_files' callback;
// ctx counts the files read).
static int getenv_in_(const char *path, const char *rel, void *ctx) {
    for (size_t i = 0; i < sizeof GETENV_OK / sizeof GETENV_OK[0]; i++)
        if (!strcmp(rel, GETENV_OK[i])) return 0;
    ++*(int *)ctx;
    return getenv_calls_(path, rel);
}

// The layers take their settings as options; src/cli reads the environment
// into them (cli/gpu_env.h). The scanner is first shown a file that calls it.
static void only_the_cli_reads_the_environment(void **state) {
    (void)state;
    char probe[64];
    snprintf(probe, sizeof probe, "/tmp/wgpt_getenv_probe_%ld.c", (long)getpid());
    FILE *f = fopen(probe, "w");
    assert_non_null(f);
    fputs("// getenv(\"IN_A_COMMENT\")\n/* getenv(\"IN_A_BLOCK\")\n */ int x;\nconst char *s = getenv(\"HOME\");\n", f);
    fclose(f);
    int seen = getenv_calls_(probe, "(the scanner's own check, expected)");
    unlink(probe);
    assert_int_equal(seen, 1);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/src", WGPT_SOURCE_DIR);
    int files = 0, bad = tu_c_files(dir, "src", "src/cli", getenv_in_, &files);
    assert_true(files > 100);
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_layer_includes_an_upper_one),
        cmocka_unit_test(every_layer_has_a_rule),
        cmocka_unit_test(only_the_cli_reads_the_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
