// test_cli.c: the `wgpt` command as a user runs it (the binary next to this
// program), for what only shows at that level: option values and ranges,
// FIFOs given where files belong, Ctrl-C and SIGKILL during `wgpt tokenize`,
// memory on endless input, data files found from any folder, and
// `make install`. Every run is bounded in time: a hang is a failure.
#define _DEFAULT_SOURCE  // wait4
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

#include "data/loader.h"
#include "util/clock.h"

static char dir_[] = "/tmp/wgpt_test_cli_XXXXXX";
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

static const char *path_(const char *name) {
    static char p[8][600];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir_, name);
    return p[k];
}

static void write_file_(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

typedef struct run_ {
    int code;             // exit status, or -signal
    char out[16384];      // stdout and stderr
    long maxrss_kb;
} run_;

// Runs wgpt with args (NULL-terminated) in cwd (NULL: here), stdin from
// stdin_path (NULL: /dev/null); kills it and fails after limit_s seconds.
static void run_in_(run_ *r, const char *cwd, const char *stdin_path, double limit_s, const char *const *args) {
    char out[700];
    snprintf(out, sizeof out, "%s/.out", dir_);
    const char *argv[32] = {wgpt_};
    int n = 1;
    while (args[n - 1] && n < 31) argv[n] = args[n - 1], n++;
    argv[n] = NULL;
    fflush(stdout);
    double t0 = wgpt_clock_s();
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), in = open(stdin_path ? stdin_path : "/dev/null", O_RDONLY);
        dup2(o, 1), dup2(o, 2), dup2(in, 0);
        if (cwd && chdir(cwd) != 0) _exit(126);
        execv(wgpt_, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    pid_t got;
    while ((got = wait4(pid, &status, WNOHANG, &ru)) == 0 && wgpt_clock_s() - t0 < limit_s) {
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("wgpt %s %s: no exit within %.0f s (blocked?)", args[0], args[1] ? args[1] : "", limit_s);
    }
    r->code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    r->maxrss_kb = ru.ru_maxrss;
    FILE *f = fopen(out, "r");
    size_t k = f ? fread(r->out, 1, sizeof r->out - 1, f) : 0;
    r->out[k] = 0;
    if (f) fclose(f);
}
#define RUN(r, ...) run_in_((r), NULL, NULL, 120, (const char *const[]){__VA_ARGS__, NULL})

static void expect_(const run_ *r, int code, const char *needle) {
    if (r->code != code || (needle && !strstr(r->out, needle)))
        fail_msg("exit %d (wanted %d), output lacks \"%s\":\n%s", r->code, code, needle ? needle : "", r->out);
}

// `wgpt bench --profile`'s sums by kind (what docs/performance.md sets beside
// bench/pytorch_gpt2.py --profile's): every dispatch counted once, in one kind.
static void bench_profile_sums_by_kind(void **st) {
    (void)st;
    run_ r;
    RUN(&r, "bench", "--profile", "--layers", "1", "--heads", "2", "--channels", "32", "--seq", "16", "--batch", "1",
        "--vocab", "64", "--steps", "1");
    expect_(&r, 0, "by kind: matmuls ");
    const char *h = strstr(r.out, "GPU time per kernel over the last step (");
    const char *k = strstr(r.out, "by kind: ");
    assert_non_null(h);
    double total, mm, at, rest;
    int n, cm, ca, cr;
    assert_int_equal(sscanf(h, "GPU time per kernel over the last step (%d dispatches, %lf ms", &n, &total), 2);
    assert_int_equal(sscanf(k, "by kind: matmuls %lf ms (%d calls), attention %lf ms (%d calls), the rest %lf ms (%d calls)",
                            &mm, &cm, &at, &ca, &rest, &cr),
                     6);
    if (cm + ca + cr != n || cm <= 0 || ca <= 0 || cr <= 0) fail_msg("calls %d + %d + %d, dispatches %d:\n%s", cm, ca, cr, n, r.out);
    // the parts printed to 0.01 ms, the total to 0.1
    if (fabs(mm + at + rest - total) > 0.05 + 0.015) fail_msg("%.2f + %.2f + %.2f != %.1f:\n%s", mm, at, rest, total, r.out);
}

// Values out of range, values that are options, and options after files.
static void option_values_and_ranges(void **st) {
    (void)st;
    run_ r;
    run_in_(&r, dir_, NULL, 60, (const char *const[]){"train", "--out", "--quiet", NULL});
    expect_(&r, 2, "--out=--quiet");  // a forgotten value, not a folder named --quiet
    struct stat sb;
    assert_int_equal(stat(path_("--quiet"), &sb), -1);
    RUN(&r, "train", "--lr", "-1");
    expect_(&r, 2, "(0, 10]");
    RUN(&r, "train", "--beta1", "1");
    expect_(&r, 2, "--beta1");
    RUN(&r, "train", "--sample-tokens", "4294967295");
    expect_(&r, 2, "--sample-tokens");
    RUN(&r, "train", "--steps", "0");
    expect_(&r, 2, "1 to 2147483647");
    RUN(&r, "sample", "--tokens", "0");
    expect_(&r, 2, "--tokens");
    RUN(&r, "sample", "--temperature", "-1");
    expect_(&r, 2, "--temperature");
    RUN(&r, "eval", "--batch", "0");
    expect_(&r, 2, "--batch");
    RUN(&r, "bench", "--layers", "0");
    expect_(&r, 2, "--layers");
    RUN(&r, "info", "--adapter");
    expect_(&r, 2, "--adapter");
    RUN(&r, "info", "a.ckpt", "b.ckpt");
    expect_(&r, 2, "b.ckpt");
    static const char *const bad[][4] = {{"tokenize", "--tokenizer", "llama", "x"}, {"tokenize", "--val-fraction", "1", "x"},
                                         {"tokenize", "--shard-tokens", "-3", "x"}, {"tokenize", "--shard-tokens", "1.5", "x"},
                                         {"tokenize", "--split", "lines", "x"},     {"tokenize", "--nope", "1", "x"},
                                         {"tokenize", "--out", "d", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_in_(&r, dir_, NULL, 60, bad[i]);
        if (r.code != 2) fail_msg("%s %s %s: exit %d, expected 2:\n%s", bad[i][1], bad[i][2], bad[i][3], r.code, r.out);
    }
    // Options may follow the files; "--" ends the options.
    write_file_(path_("late.txt"), "options after the file\n");
    RUN(&r, "tokenize", "--tokenizer", "bytes", path_("late.txt"), "--out", path_("late"), "--split", "file");
    expect_(&r, 0, "1 file");
}

static void on_alarm_(int sig) {
    (void)sig;
    _exit(3);
}

// A FIFO (or a folder) where a shard, a checkpoint or a log belongs is refused
// at once; a FIFO as a text input of tokenize is read.
static void fifos_are_refused_without_blocking(void **st) {
    (void)st;
    run_ r;
    const char *fifo = path_("fifo.ckpt");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    RUN(&r, "info", fifo);
    expect_(&r, 1, "FIFO");
    RUN(&r, "sample", "--checkpoint", fifo);
    expect_(&r, 1, "FIFO");
    RUN(&r, "eval", "--checkpoint", fifo);
    expect_(&r, 1, "FIFO");
    RUN(&r, "info", dir_);
    expect_(&r, 1, "folder");
    const char *shards = path_("fifo_shards");
    assert_int_equal(mkdir(shards, 0777), 0);
    char p[700];
    snprintf(p, sizeof p, "%s/train_000000.bin", shards);
    assert_int_equal(mkfifo(p, 0600), 0);
    RUN(&r, "train", "--data", shards, "--out", path_("fifo_run1"));
    expect_(&r, 1, "FIFO");
    // OUT/latest.ckpt and OUT/metrics.jsonl as FIFOs (real shards this time).
    write_file_(path_("text.txt"), "some text to train on, long enough for one window and more of it\n");
    RUN(&r, "tokenize", "--tokenizer", "bytes", "--val-fraction", "0", "--out", path_("fifo_data"), path_("text.txt"));
    expect_(&r, 0, NULL);
    const char *out = path_("fifo_run2");
    assert_int_equal(mkdir(out, 0777), 0);
    snprintf(p, sizeof p, "%s/latest.ckpt", out);
    assert_int_equal(mkfifo(p, 0600), 0);
    RUN(&r, "train", "--data", path_("fifo_data"), "--out", out, "--seq", "8", "--batch", "1", "--steps", "1",
        "--val-fraction", "0");
    expect_(&r, 1, "FIFO");
    unlink(p);
    snprintf(p, sizeof p, "%s/metrics.jsonl", out);
    assert_int_equal(mkfifo(p, 0600), 0);
    RUN(&r, "train", "--data", path_("fifo_data"), "--out", out, "--seq", "8", "--batch", "1", "--steps", "1",
        "--resume", "none", "--val-every", "0", "--val-fraction", "0");
    expect_(&r, 1, "metrics.jsonl");
    struct stat sb;
    assert_int_equal(lstat(p, &sb), 0);  // not removed
    assert_true(S_ISFIFO(sb.st_mode));
    // GPT-2's files as FIFOs.
    const char *bpe = path_("fifo_bpe");
    assert_int_equal(mkdir(bpe, 0777), 0);
    snprintf(p, sizeof p, "%s/encoder.json", bpe);
    assert_int_equal(mkfifo(p, 0600), 0);
    RUN(&r, "tokenize", "--bpe-dir", bpe, "--out", path_("fifo_gpt2"), path_("text.txt"));
    expect_(&r, 1, "FIFO");
    // A FIFO as an input (as `<(command)` gives) is text to read.
    const char *in = path_("input.fifo");
    assert_int_equal(mkfifo(in, 0600), 0);
    pid_t writer = fork();
    if (writer == 0) {
        signal(SIGALRM, on_alarm_);
        alarm(30);
        int fd = open(in, O_WRONLY);
        const char msg[] = "text through a pipe\n";
        ssize_t w = write(fd, msg, sizeof msg - 1);
        _exit(w == (ssize_t)sizeof msg - 1 ? 0 : 1);
    }
    RUN(&r, "tokenize", "--tokenizer", "bytes", "--out", path_("fifo_in"), in);
    expect_(&r, 0, "20 tokens");
    int status;
    waitpid(writer, &status, 0);
}

// Every file of a shard folder (names and contents), for comparisons.
static void folder_digest_(const char *dir, char *buf, size_t n) {
    char cmd[800];
    snprintf(cmd, sizeof cmd, "cd '%s' && ls -A && cat *.bin 2>/dev/null | md5sum", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t k = fread(buf, 1, n - 1, p);
    buf[k] = 0;
    pclose(p);
}

static int count_(const char *pattern) {
    glob_t g;
    if (glob(pattern, GLOB_PERIOD, NULL, &g) != 0) return 0;
    int n = (int)g.gl_pathc;
    globfree(&g);
    return n;
}

// Starts `wgpt tokenize --force` reading a pipe, feeds it enough text for
// many shards, waits until its temporary folder holds some, then sends sig.
static int tokenize_then_signal_(const char *out, int sig, char *log, size_t loglen) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    char errpath[700];
    snprintf(errpath, sizeof errpath, "%s/.tokenize_err", dir_);
    pid_t pid = fork();
    if (pid == 0) {
        int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fds[0], 0), dup2(e, 2), dup2(e, 1);
        close(fds[1]);
        execl(wgpt_, wgpt_, "tokenize", "--force", "--tokenizer", "bytes", "--shard-tokens", "1000", "--out", out,
              "-", (char *)NULL);
        _exit(127);
    }
    close(fds[0]);
    static char text[100001];
    for (int i = 0; i < 5000; i++) memcpy(text + 20 * i, "one short document\n\n", 20);  // ends each at once
    FILE *w = fdopen(fds[1], "w");
    fwrite(text, 1, 100000, w);
    fflush(w);  // the pipe stays open: tokenize waits for more
    char pat[700];
    snprintf(pat, sizeof pat, "%s/.wgpt-tokenize-*/train_*.bin", out);
    double t0 = wgpt_clock_s();
    while (count_(pat) < 5 && wgpt_clock_s() - t0 < 60) {
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
    assert_true(count_(pat) >= 5);
    kill(pid, sig);
    int status;
    t0 = wgpt_clock_s();
    pid_t got;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 && wgpt_clock_s() - t0 < 30) {
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fclose(w);
        fail_msg("tokenize did not stop within 30 s of signal %d", sig);
    }
    fclose(w);
    FILE *f = fopen(errpath, "r");
    size_t k = f ? fread(log, 1, loglen - 1, f) : 0;
    log[k] = 0;
    if (f) fclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// Ctrl-C during `wgpt tokenize --force` leaves the folder's old set as it was
// (it used to delete it first, then leave part of the new one); so does
// SIGKILL, whose temporary folder the next run removes.
static void tokenize_interrupted_leaves_the_old_set(void **st) {
    (void)st;
    static char text[40001];
    for (int i = 0; i < 2000; i++) memcpy(text + 20 * i, "ABCDEFGHIJKLMNOPQRS\n", 20);
    write_file_(path_("old.txt"), text);
    const char *out = path_("swap");
    run_ r;
    RUN(&r, "tokenize", "--tokenizer", "bytes", "--shard-tokens", "1000", "--out", out, path_("old.txt"));
    expect_(&r, 0, NULL);
    char before[4096], after[4096], log[4096];
    folder_digest_(out, before, sizeof before);

    int code = tokenize_then_signal_(out, SIGINT, log, sizeof log);
    printf("  after SIGINT: exit %d: %s", code, log);
    assert_int_equal(code, 1);
    assert_non_null(strstr(log, "interrupted"));
    folder_digest_(out, after, sizeof after);
    assert_string_equal(before, after);
    char pat[700];
    snprintf(pat, sizeof pat, "%s/.wgpt-tokenize-*", out);
    assert_int_equal(count_(pat), 0);

    code = tokenize_then_signal_(out, SIGKILL, log, sizeof log);
    assert_int_equal(code, -SIGKILL);
    char err[1024];
    wgpt_loader *l = wgpt_loader_open(out, 1, 8, 1, 0, 256, err, sizeof err);  // the old set, whole
    if (!l) fail_msg("%s", err);
    assert_int_equal(wgpt_loader_train_tokens(l), 40000);
    wgpt_loader_free(l);
    write_file_(path_("new.txt"), "new\n");
    RUN(&r, "tokenize", "--force", "--tokenizer", "bytes", "--out", out, path_("new.txt"));
    expect_(&r, 0, NULL);
    assert_int_equal(count_(pat), 0);  // the killed run's temporary folder is gone
}

// One endless line (here 64 MB of /dev/zero) does not grow memory with it.
static void endless_line_keeps_memory_bounded(void **st) {
    (void)st;
    const char *zeros = path_("zeros");
    char cmd[800];
    snprintf(cmd, sizeof cmd, "head -c 64000000 /dev/zero > '%s'", zeros);
    assert_int_equal(system(cmd), 0);
    run_ r;
    run_in_(&r, NULL, zeros, 300, (const char *const[]){"tokenize", "--tokenizer", "bytes", "--out", path_("zeros_out"), "-", NULL});
    expect_(&r, 0, "64000000 tokens");
    printf("  peak memory: %ld MB for a 64 MB line\n", r.maxrss_kb / 1024);
    assert_true(r.maxrss_kb < 150 * 1024);  // the line, its text and its ids would be 300 MB and more
    unlink(zeros);
}

// GPT-2's files are found next to the executable, from any folder; and
// `make install` gives a wgpt that runs from anywhere, with its Dawn.
static void data_files_found_from_any_folder(void **st) {
    (void)st;
    write_file_(path_("gpt2.txt"), "Hello world.\n\nAnother document.\n");
    run_ r;
    run_in_(&r, "/", NULL, 120, (const char *const[]){"tokenize", "--out", path_("anywhere"), path_("gpt2.txt"), NULL});
    expect_(&r, 0, "(gpt2, 50257 ids");

    char build[1024], cmd[3000];
    snprintf(build, sizeof build, "%s", wgpt_);
    *strrchr(build, '/') = 0;
    const char *prefix = path_("prefix");
    snprintf(cmd, sizeof cmd, "make -s -C '%s' install PREFIX='%s' BUILD='%s' >/dev/null", WGPT_SOURCE_DIR, prefix,
             build);
    assert_int_equal(system(cmd), 0);
    char installed[700], out[700];
    snprintf(installed, sizeof installed, "%s/bin/wgpt", prefix);
    snprintf(out, sizeof out, "%s/installed_out", dir_);
    snprintf(cmd, sizeof cmd, "cd / && '%s' tokenize --out '%s' '%s' >/dev/null && '%s' info >/dev/null", installed,
             out, path_("gpt2.txt"), installed);
    assert_int_equal(system(cmd), 0);
}

// README's sequence: tokenize with GPT-2's tokenizer, train without saying
// which: the shards tell. Training them as bytes is refused, naming both.
static void train_takes_the_tokenizer_from_the_shards(void **st) {
    (void)st;
    static char text[20001];
    for (int i = 0; i < 500; i++) memcpy(text + 40 * i, "The quick brown fox jumps over the dog. ", 40);
    write_file_(path_("fox.txt"), text);
    run_ r;
    RUN(&r, "tokenize", "--val-fraction", "0", "--out", path_("fox"), path_("fox.txt"));
    expect_(&r, 0, NULL);
    RUN(&r, "train", "--data", path_("fox"), "--out", path_("fox_run"), "--tokenizer", "bytes", "--steps", "1",
        "--seq", "16", "--batch", "2", "--val-fraction", "0.2");
    expect_(&r, 1, "gpt2");
    RUN(&r, "train", "--data", path_("fox"), "--out", path_("fox_run"), "--layers", "1", "--heads", "2", "--channels",
        "32", "--seq", "16", "--batch", "2", "--steps", "1", "--warmup", "0", "--val-every", "0", "--val-fraction", "0.2",
        "--quiet");
    expect_(&r, 0, NULL);
    RUN(&r, "info", path_("fox_run/latest.ckpt"));
    expect_(&r, 0, "tokenizer gpt2");
    // eval of that checkpoint on shards made with bytes: refused, naming both.
    RUN(&r, "tokenize", "--tokenizer", "bytes", "--val-fraction", "0", "--out", path_("fox_bytes"), path_("fox.txt"));
    expect_(&r, 0, NULL);
    RUN(&r, "eval", "--checkpoint", path_("fox_run/latest.ckpt"), "--data", path_("fox_bytes"), "--batch", "1");
    expect_(&r, 1, "made with the bytes tokenizer");
}

// A folder that cannot be made and a log that cannot be written say why,
// with the path; a full disk stops the run rather than lose its log.
static void failed_writes_name_the_path_and_the_reason(void **st) {
    (void)st;
    run_ r;
    write_file_(path_("a_file"), "not a folder\n");
    char out[700];
    snprintf(out, sizeof out, "%s/sub", path_("a_file"));
    RUN(&r, "tokenize", "--tokenizer", "bytes", "--out", out, path_("a_file"));
    expect_(&r, 1, "not a folder");
    RUN(&r, "train", "--out", out);
    expect_(&r, 1, "a_file");
    static char text[20001];
    for (int i = 0; i < 1000; i++) memcpy(text + 20 * i, "abcdefghijklmnopqrs\n", 20);
    write_file_(path_("full.txt"), text);
    RUN(&r, "tokenize", "--tokenizer", "bytes", "--val-fraction", "0", "--out", path_("full_data"), path_("full.txt"));
    expect_(&r, 0, NULL);
    // A full disk: a small tmpfs, mounted in a private namespace (skipped where that is not allowed).
    const char *mnt = path_("full_mnt");
    assert_int_equal(mkdir(mnt, 0777), 0);
    char cmd[3000], log[700];
    snprintf(log, sizeof log, "%s/full.log", dir_);
    snprintf(cmd, sizeof cmd, "unshare -rm sh -c 'mount -t tmpfs -o size=32k tmpfs %s' 2>/dev/null", mnt);
    if (system(cmd) != 0) {
        printf("skipped: the full-disk case needs a private tmpfs (unshare -rm), not allowed here; "
               "the cases before it passed\n");
        skip();
    }
    snprintf(cmd, sizeof cmd,
             "unshare -rm sh -c 'mount -t tmpfs -o size=32k tmpfs %s && exec %s train --data %s --out %s/run "
             "--layers 1 --heads 2 --channels 16 --seq 8 --batch 1 --steps 100000 --val-every 0 --val-fraction 0 "
             "--checkpoint-every 0 --quiet' >%s 2>&1",
             mnt, wgpt_, path_("full_data"), mnt, log);
    int status = system(cmd);
    FILE *f = fopen(log, "r");
    size_t k = f ? fread(r.out, 1, sizeof r.out - 1, f) : 0;
    r.out[k] = 0;
    if (f) fclose(f);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    expect_(&r, 1, "metrics.jsonl: cannot write: No space left on device");
    assert_null(strstr(r.out, "is kept"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(option_values_and_ranges),
        cmocka_unit_test(bench_profile_sums_by_kind),
        cmocka_unit_test(fifos_are_refused_without_blocking),
        cmocka_unit_test(tokenize_interrupted_leaves_the_old_set),
        cmocka_unit_test(endless_line_keeps_memory_bounded),
        cmocka_unit_test(data_files_found_from_any_folder),
        cmocka_unit_test(train_takes_the_tokenizer_from_the_shards),
        cmocka_unit_test(failed_writes_name_the_path_and_the_reason),
    };
    return cmocka_run_group_tests_name("cli", tests, group_setup, group_teardown);
}
