// test_options.c: the command-line parser (cli/options.h) without a GPU:
// one rule for numbers (decimal only; a number past its type is out of
// range, naming the allowed values) and empty values refused by name.
#include <unistd.h>

#include "test_util.h"

#include "cli/options.h"

static char msg_[4096];

// Parses the NULL-terminated args (after the command's name "t") against
// opts/ranges; returns the parser's status with its stderr in msg_.
static int parse_(const wgpt_opt *opts, int nopts, const wgpt_opt_range *ranges, int nranges,
                  const char *const *args) {
    char *argv[32] = {"t"};
    int argc = 1;
    while (args[argc - 1] && argc < 31) argv[argc] = (char *)args[argc - 1], argc++;
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    char *pos[4];
    int npos;
    int rc = wgpt_opts_parse_ranged(argc, argv, opts, nopts, ranges, nranges, "usage: t", pos, 4, &npos);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(msg_, 1, sizeof msg_ - 1, tmp);
    msg_[n] = 0;
    fclose(tmp);
    return rc;
}
#define PARSE(...) parse_(opts, (int)(sizeof opts / sizeof opts[0]), ranges, \
                          (int)(sizeof ranges / sizeof ranges[0]), (const char *const[]){__VA_ARGS__, NULL})

static void expect_(int rc, int want, const char *needle) {
    if (rc != want || (needle && !strstr(msg_, needle)))
        fail_msg("status %d (wanted %d), message lacks \"%s\": %s", rc, want, needle ? needle : "", msg_);
}

// L4: 2^32 for a 32-bit option is out of range (with or without a range of
// its own), not "not a whole number"; hex is refused by every numeric type.
static void numbers_past_their_type_are_out_of_range(void **st) {
    (void)st;
    uint32_t u = 7, steps = 5;
    uint64_t seed = 1, count = 2;
    float f = 1.0f;
    const wgpt_opt opts[] = {
        {"u", WGPT_OPT_U32, &u, "a u32 without a range"},   {"steps", WGPT_OPT_U32, &steps, "a u32 with one"},
        {"seed", WGPT_OPT_U64, &seed, "a u64"},             {"count", WGPT_OPT_COUNT, &count, "a count"},
        {"f", WGPT_OPT_F32, &f, "a float"},
    };
    const wgpt_opt_range ranges[] = {{"steps", 1, 2147483647.0, 0}};
    expect_(PARSE("--u", "4294967296"), 2, "--u 4294967296: out of range: allowed 0 to 4294967295");
    expect_(PARSE("--steps", "4294967296"), 2, "out of range: allowed 1 to 2147483647");
    expect_(PARSE("--seed", "18446744073709551616"), 2, "out of range: allowed 0 to 18446744073709551615");
    expect_(PARSE("--count", "20G0"), 2, "is not");  // junk stays junk
    expect_(PARSE("--count", "1e30"), 2, "out of range: allowed 0 to 18446744073709551615");
    expect_(PARSE("--f", "1e39"), 2, "--f 1e39: out of range");
    assert_int_equal(u, 7);
    assert_int_equal(steps, 5);
    // The largest values still pass.
    expect_(PARSE("--u", "4294967295", "--seed", "18446744073709551615"), 0, NULL);
    assert_true(u == 4294967295u && seed == UINT64_MAX);
    // Hex: one rule for every numeric type (it used to pass for counts and floats).
    const char *const hex[][2] = {{"--u", "0x10"}, {"--seed", "0x10"}, {"--count", "0x10"}, {"--f", "0x1p-3"},
                                  {"--f", "-0X2"}};
    for (size_t i = 0; i < sizeof hex / sizeof hex[0]; i++) {
        int rc = PARSE(hex[i][0], hex[i][1]);
        if (rc != 2 || !strstr(msg_, "decimal")) fail_msg("%s %s: status %d: %s", hex[i][0], hex[i][1], rc, msg_);
    }
    assert_int_equal(count, 2);
    assert_true(f == 1.0f);
    expect_(PARSE("--count", "16", "--f", "3e-4"), 0, NULL);
    assert_int_equal(count, 16);
    assert_true(f == 3e-4f);
}

// L5: an empty value of a name or path is refused naming the option; where
// the default is itself "" (a prompt) an empty value is that default.
static void empty_values_are_refused_by_name(void **st) {
    (void)st;
    const char *out = "runs/demo", *resume = NULL, *prompt = "";
    const wgpt_opt opts[] = {
        {"out", WGPT_OPT_STR, &out, "a folder"},
        {"resume", WGPT_OPT_STR, &resume, "a file"},
        {"prompt", WGPT_OPT_STR, &prompt, "text"},
    };
    const wgpt_opt_range ranges[] = {{"none", 0, 0, 0}};
    expect_(PARSE("--out", ""), 2, "--out: an empty value");
    expect_(PARSE("--resume="), 2, "--resume: an empty value");
    assert_string_equal(out, "runs/demo");
    assert_null(resume);
    expect_(PARSE("--prompt", ""), 0, NULL);
    assert_string_equal(prompt, "");
    expect_(PARSE("--out", "r", "--resume=x"), 0, NULL);
    assert_string_equal(out, "r");
    assert_string_equal(resume, "x");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(numbers_past_their_type_are_out_of_range),
        cmocka_unit_test(empty_values_are_refused_by_name),
    };
    return cmocka_run_group_tests_name("options", tests, NULL, NULL);
}
