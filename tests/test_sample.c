// test_sample.c: `wgpt sample` as a user runs it, on checkpoints built here
// whose greedy output is known: every position's logits are wte . lnf_b (the
// blocks and ln_f's weight are zero, so ln_f's output is its bias whatever
// the input), and one row of wte is set, so one byte always wins.
// - the NUL byte (token 0 of the bytes tokenizer) is printed: 20 of them
//   after the prompt, none lost (issue 52's M7: "%s" stopped at the first);
// - --stop: the text before it, never the stop string; one that never
//   matches changes nothing;
// - --count 3: three samples, each complete;
// - Ctrl-C (SIGINT) mid-stream: exit 0, the text printed so far kept, the
//   interruption said on stderr (sent once 10 bytes are out: the text streams);
// - `wgpt bench --generate` on a tiny model: both batches, the reference, a result line.
#include "test_util.h"

#include <fcntl.h>
#include <time.h>
#include <signal.h>
#include <sys/wait.h>

#include "model/gpt2.h"
#include "train/checkpoint.h"

static char dir_[] = "/tmp/wgpt_test_sample_XXXXXX";
static char wgpt_[1024];

static int group_setup(void **state) {
    (void)state;
    if (!mkdtemp(dir_)) return -1;
    if (tu_build_dir(wgpt_, sizeof wgpt_ - 8) < 0) return -1;
    strcat(wgpt_, "/wgpt");
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir_);
    return system(cmd) == 0 ? 0 : -1;
}

// A bytes-tokenizer checkpoint (context T) whose greedy output is always byte `win`.
static void write_ckpt_(const char *path, int win, uint32_t T) {
    wgpt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ck.config = (wgpt_gpt2_config){.max_seq_len = T, .vocab_size = 256, .padded_vocab_size = 256,
                                   .num_layers = 1, .num_heads = 2, .channels = 16};
    snprintf(ck.tokenizer, sizeof ck.tokenizer, "bytes");
    size_t sizes[WGPT_GPT2_NUM_TENSORS], n = wgpt_gpt2_num_params(&ck.config);
    wgpt_gpt2_param_sizes(&ck.config, sizes);
    ck.params = calloc(n, sizeof *ck.params);
    size_t off = 0, lnfb = 0;
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
        if (t == WGPT_GPT2_NUM_TENSORS - 1) lnfb = off;
        if (t == 2 || t == 8) for (size_t i = 0; i < sizes[t]; i++) ck.params[off + i] = 1;  // ln_1, ln_2 weights
        off += sizes[t];
    }
    ck.params[lnfb] = 1;                   // ln_f's output: (1, 0, ..., 0)
    ck.params[(size_t)win * 16] = 4;       // wte[win] . it = 4, every other logit 0
    char err[512];
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) < 0) fail_msg("%s", err);
    free(ck.params);
}

typedef struct result_ {
    int code;
    char out[65536];  // stdout
    size_t nout;
    char errs[8192];  // stderr
} result_;

// Runs wgpt sample with args; with sigint, SIGINT once stdout holds 10 bytes.
static void run_(result_ *r, int sigint, const char *const *args) {
    char out[700], errp[700];
    snprintf(out, sizeof out, "%s/.out", dir_);
    snprintf(errp, sizeof errp, "%s/.err", dir_);
    const char *argv[32] = {wgpt_};
    int n = 1;
    while (args[n - 1] && n < 31) argv[n] = args[n - 1], n++;
    argv[n] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1), dup2(e, 2);
        execv(wgpt_, (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; sigint && i < 6000; i++) {  // at most 60 s
        struct stat sb;
        if (stat(out, &sb) == 0 && sb.st_size >= 10) {
            kill(pid, SIGINT);
            break;
        }
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    r->code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    FILE *f = fopen(out, "rb");
    r->nout = f ? fread(r->out, 1, sizeof r->out - 1, f) : 0;
    r->out[r->nout] = 0;
    if (f) fclose(f);
    f = fopen(errp, "rb");
    size_t k = f ? fread(r->errs, 1, sizeof r->errs - 1, f) : 0;
    r->errs[k] = 0;
    if (f) fclose(f);
}
#define SAMPLE(r, ...) run_((r), 0, (const char *const[]){"sample", __VA_ARGS__, NULL})

static void expect_bytes_(const result_ *r, const char *want, size_t n) {
    if (r->code != 0) fail_msg("exit %d: %s", r->code, r->errs);
    if (r->nout != n || memcmp(r->out, want, n) != 0) {
        fprintf(stderr, "got %zu bytes:", r->nout);
        for (size_t i = 0; i < r->nout && i < 80; i++) fprintf(stderr, " %02x", (unsigned char)r->out[i]);
        fail_msg("\nwanted %zu bytes (stderr: %s)", n, r->errs);
    }
}

static void test_nul_bytes(void **state) {
    (void)state;
    char ck[700];
    snprintf(ck, sizeof ck, "%s/nul.ckpt", dir_);
    write_ckpt_(ck, 0, 32);
    result_ r;
    SAMPLE(&r, "--checkpoint", ck, "--prompt", "hi", "--tokens", "20", "--temperature", "0");
    char want[23] = "hi";
    want[22] = '\n';
    expect_bytes_(&r, want, 23);
    // past the context of 32: the window slides and the text goes on
    SAMPLE(&r, "--checkpoint", ck, "--prompt", "hi", "--tokens", "100", "--temperature", "0");
    assert_int_equal(r.code, 0);
    assert_int_equal(r.nout, 103);
    SAMPLE(&r, "--checkpoint", ck, "--prompt", "hi", "--tokens", "100", "--temperature", "0", "--on-full", "stop");
    assert_int_equal(r.code, 0);
    assert_true(r.nout < 40);
    assert_non_null(strstr(r.errs, "full context of 32"));
}

static void test_stop_and_count(void **state) {
    (void)state;
    char ck[700];
    snprintf(ck, sizeof ck, "%s/x.ckpt", dir_);
    write_ckpt_(ck, 'x', 64);
    result_ r;
    SAMPLE(&r, "--checkpoint", ck, "--prompt", "ab", "--tokens", "10", "--temperature", "0");
    expect_bytes_(&r, "abxxxxxxxxxx\n", 13);
    SAMPLE(&r, "--checkpoint", ck, "--prompt", "ab", "--tokens", "10", "--temperature", "0", "--stop", "xxx");
    expect_bytes_(&r, "ab\n", 3);
    SAMPLE(&r, "--checkpoint", ck, "--prompt", "ab", "--tokens", "10", "--temperature", "0", "--stop", "y",
           "--stop=xxxxx");
    expect_bytes_(&r, "ab\n", 3);
    SAMPLE(&r, "--checkpoint", ck, "--prompt", "ab", "--tokens", "4", "--temperature", "0", "--stop", "xy");
    expect_bytes_(&r, "abxxxx\n", 7);  // held back while "x" could begin "xy", then printed
    SAMPLE(&r, "--checkpoint", ck, "--prompt", "ab", "--tokens", "3", "--count", "3", "--temperature", "0.5",
           "--top-k", "1");
    const char *three = "--- sample 1 ---\nabxxx\n--- sample 2 ---\nabxxx\n--- sample 3 ---\nabxxx\n";
    expect_bytes_(&r, three, strlen(three));
    // --verbose: the start-up phases on stderr, the text unchanged
    SAMPLE(&r, "--checkpoint", ck, "--prompt", "ab", "--tokens", "10", "--temperature", "0", "--verbose");
    expect_bytes_(&r, "abxxxxxxxxxx\n", 13);
    const char *phases[] = {"read checkpoint ", "GPU open ", "model create ", "tokenizer ", "weights upload ",
                            "first token (prefill + step) ", "to first token ", "9 tokens after the first in "};
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++)
        if (!strstr(r.errs, phases[i])) fail_msg("--verbose: no '%s' in: %s", phases[i], r.errs);
    SAMPLE(&r, "--checkpoint", ck, "--stop", "");
    assert_int_equal(r.code, 2);
    SAMPLE(&r, "--checkpoint", ck, "--top-p", "0");
    assert_int_equal(r.code, 2);
}

static void test_interrupt_keeps_text(void **state) {
    (void)state;
    char ck[700];
    snprintf(ck, sizeof ck, "%s/int.ckpt", dir_);
    write_ckpt_(ck, 'x', 64);
    result_ r;
    run_(&r, 1, (const char *const[]){"sample", "--checkpoint", ck, "--prompt", "ab", "--tokens", "1000000",
                                        "--temperature", "0", NULL});
    if (r.code != 0) fail_msg("exit %d after SIGINT: %s", r.code, r.errs);
    assert_non_null(strstr(r.errs, "interrupted after"));
    assert_true(r.nout > 3 && r.nout < 1000000);
    assert_memory_equal(r.out, "abx", 3);
    assert_int_equal(r.out[r.nout - 1], '\n');
    for (size_t i = 2; i + 1 < r.nout; i++) assert_int_equal(r.out[i], 'x');
}

static void test_bench_generate(void **state) {
    (void)state;
    result_ r;
    run_(&r, 0, (const char *const[]){"bench", "--generate", "--layers", "1", "--heads", "2", "--channels", "32",
                                      "--vocab", "64", "--seq", "32", "--gen-prompt", "4", "--gen-tokens", "8",
                                      "--gen-batch", "3", "--gen-recompute", NULL});
    if (r.code != 0) fail_msg("exit %d: %s%s", r.code, r.out, r.errs);
    assert_non_null(strstr(r.out, "batch 1: prefill"));
    assert_non_null(strstr(r.out, "batch 3: prefill"));
    assert_non_null(strstr(r.out, "the KV cache is"));
    assert_non_null(strstr(r.out, "result: decode"));
    // --profile: every kernel of a step (a device without timestamps: refused, naming them)
    run_(&r, 0, (const char *const[]){"bench", "--generate", "--layers", "1", "--heads", "2", "--channels", "32",
                                      "--vocab", "64", "--seq", "32", "--gen-prompt", "4", "--gen-tokens", "2",
                                      "--gen-batch", "1", "--profile", NULL});
    if (r.code == 0) {
        assert_non_null(strstr(r.out, "profile: one decoding step at batch 1"));
        assert_non_null(strstr(r.out, "decode_attention"));
        assert_non_null(strstr(r.out, "by kind: matmuls"));
    } else {
        assert_non_null(strstr(r.errs, "timestamp"));
    }
    run_(&r, 0, (const char *const[]){"bench", "--generate", "--seq", "32", "--gen-prompt", "30", "--gen-tokens", "8",
                                      "--layers", "1", "--heads", "2", "--channels", "32", NULL});
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.errs, "exceed the context of 32"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nul_bytes),
        cmocka_unit_test(test_stop_and_count),
        cmocka_unit_test(test_interrupt_keeps_text),
        cmocka_unit_test(test_bench_generate),
    };
    return cmocka_run_group_tests_name("sample", tests, group_setup, group_teardown);
}
