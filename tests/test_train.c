// test_train.c: the training system end to end on the GPU (lavapipe in CI):
// shards -> training -> checkpoint -> exact resume -> seeded sampling.
//
// Exact resume: N steps straight, or N/2 steps, checkpoint, a new process
// state, resume, N/2 more, must give the same losses and the same final
// parameters and AdamW moments bit for bit on the same device: everything a
// step depends on (parameters, moments, step number, batch order, schedule)
// is restored exactly, and every kernel is deterministic.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>

#include "test_util.h"

#include "data/shard.h"
#include "data/tokenizer.h"
#include "train/checkpoint.h"
#include "train/generate.h"
#include "train/load.h"
#include "train/sampler.h"
#include "train/trainer.h"

static char dir[] = "/tmp/wgpt_train_XXXXXX";
static char shards[600];

static int group_setup(void **state) {
    (void)state;
    if (!mkdtemp(dir)) return -1;
    // a small English-like corpus, as bytes: two shards, one of them validation
    const char *words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat. ", "dogs ", "run ", "far ", "away.\n"};
    uint16_t *tok = malloc(40000 * sizeof *tok);
    uint64_t s = 5;
    size_t n = 0;
    while (n < 39000) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        for (const char *c = words[(s >> 33) % 10]; *c; c++) tok[n++] = (uint8_t)*c;
    }
    char path[700], err[512];
    snprintf(path, sizeof path, "%s/train_000000.bin", dir);
    if (wgpt_shard_write(path, tok, 32000, err, sizeof err) < 0) return -1;
    snprintf(path, sizeof path, "%s/val_000000.bin", dir);
    if (wgpt_shard_write(path, tok + 32000, n - 32000, err, sizeof err) < 0) return -1;
    free(tok);
    snprintf(shards, sizeof shards, "%s/*.bin", dir);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void opts_(wgpt_train_opts *o, const char *out) {
    wgpt_train_defaults(o);
    o->data = shards;
    o->out_dir = out;
    o->tokenizer = "bytes";
    o->layers = 2, o->heads = 2, o->channels = 32;
    o->batch = 4, o->seq = 16, o->total_batch = 128;  // 2 micro-batches a step
    o->steps = 8, o->warmup = 2, o->lr = 1e-2f;
    o->val_every = 4, o->val_batches = 2, o->checkpoint_every = 0;
    o->quiet = 1;
}

// The "loss" values of one kind from a metrics log, in order.
static int losses_(const char *out, const char *kind, double *v, int max) {
    char path[700], line[1024], key[64];
    snprintf(path, sizeof path, "%s/metrics.jsonl", out);
    snprintf(key, sizeof key, "\"kind\":\"%s\"", kind);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        const char *l = strstr(line, "\"loss\":");
        if (strstr(line, key) && l) v[n++] = strtod(l + 7, NULL);
    }
    fclose(f);
    return n;
}

static void read_ckpt_(const char *out, wgpt_checkpoint *ck) {
    char path[700], err[512];
    snprintf(path, sizeof path, "%s/latest.ckpt", out);
    if (wgpt_checkpoint_read(path, ck, err, sizeof err) < 0) fail_msg("%s", err);
}

static void resume_is_exact(void **st) {
    (void)st;
    char a[650], b[650];
    snprintf(a, sizeof a, "%s/straight", dir);
    snprintf(b, sizeof b, "%s/resumed", dir);
    wgpt_train_opts o;
    opts_(&o, a);
    assert_int_equal(wgpt_train_run(&o), 0);
    opts_(&o, b);
    o.stop_at = 4;
    assert_int_equal(wgpt_train_run(&o), 0);
    wgpt_checkpoint half;
    read_ckpt_(b, &half);
    assert_int_equal(half.step, 4);
    wgpt_checkpoint_free(&half);
    opts_(&o, b);  // resumes b/latest.ckpt by default
    assert_int_equal(wgpt_train_run(&o), 0);

    double la[16], lb[16], va[8], vb[8];
    int na = losses_(a, "train", la, 16), nb = losses_(b, "train", lb, 16);
    assert_int_equal(na, 8);
    assert_int_equal(nb, 8);
    for (int i = 0; i < 8; i++) {
        printf("  step %d: loss %.9g straight, %.9g resumed\n", i + 1, la[i], lb[i]);
        if (la[i] != lb[i]) fail_msg("step %d: loss %.9g straight but %.9g after resume", i + 1, la[i], lb[i]);
    }
    assert_true(la[7] < la[0] - 0.5);  // it learns: bytes of 10 words are easy
    int nva = losses_(a, "val", va, 8), nvb = losses_(b, "val", vb, 8);
    assert_int_equal(nva, 3);  // steps 0, 4, 8
    assert_int_equal(nvb, 3);
    for (int i = 0; i < 3; i++) assert_true(va[i] == vb[i]);
    assert_true(va[2] < va[0]);

    wgpt_checkpoint ca, cb;
    read_ckpt_(a, &ca);
    read_ckpt_(b, &cb);
    size_t np = wgpt_gpt2_num_params(&ca.config);
    assert_int_equal(ca.step, 8);
    assert_int_equal(cb.step, 8);
    assert_memory_equal(ca.params, cb.params, np * sizeof(float));
    assert_memory_equal(ca.adam_m, cb.adam_m, np * sizeof(float));
    assert_memory_equal(ca.adam_v, cb.adam_v, np * sizeof(float));
    wgpt_checkpoint_free(&ca);
    wgpt_checkpoint_free(&cb);
    // the plot exists
    char svg[700];
    snprintf(svg, sizeof svg, "%s/loss.svg", a);
    struct stat sb;
    assert_int_equal(stat(svg, &sb), 0);
    assert_true(sb.st_size > 500);
}

// A resume with a different batch shape would not continue the same run: refused, naming it.
static void resume_with_other_shape_is_refused(void **st) {
    (void)st;
    char a[650];
    snprintf(a, sizeof a, "%s/straight", dir);
    wgpt_train_opts o;
    opts_(&o, a);
    o.batch = 8;  // total_batch 128 = 1 micro-batch of 8 x 16
    o.steps = 9;
    assert_int_equal(wgpt_train_run(&o), 1);
    opts_(&o, a);
    o.channels = 64;
    assert_int_equal(wgpt_train_run(&o), 1);
}

static char *sample_(wgpt_loaded *l, uint64_t seed) {
    wgpt_sampler s;
    wgpt_sampler_init(&s, 1.0f, 0, seed);
    int ids[64] = {'t', 'h', 'e', ' '};
    size_t n = 4;
    char err[1024];
    if (wgpt_generate(l->model, l->cfg.max_seq_len, l->cfg.vocab_size, &s, ids, &n, 64, 40, -1, err, sizeof err) < 0)
        fail_msg("%s", err);
    uint32_t u[64];
    for (size_t i = 0; i < n; i++) u[i] = (uint32_t)ids[i];
    return wgpt_tokenizer_decode_all(l->tok, u, n);
}

static void seeded_sampling(void **st) {
    (void)st;
    char a[650], path[700];
    snprintf(a, sizeof a, "%s/straight", dir);
    snprintf(path, sizeof path, "%s/latest.ckpt", a);
    wgpt_gpu_options gpu = {.adapter_index = -1};
    wgpt_loaded l;
    assert_int_equal(wgpt_load_for_inference(&l, "test", path, "third_party/gpt2-bpe", &gpu, 1, 0), 0);
    char *x = sample_(&l, 7), *y = sample_(&l, 7), *z = sample_(&l, 8);
    printf("  seed 7: %s\n  seed 8: %s\n", x, z);
    assert_string_equal(x, y);
    assert_string_not_equal(x, z);
    assert_int_equal(strncmp(x, "the ", 4), 0);  // the prompt comes back first
    free(x), free(y), free(z);
    wgpt_loaded_free(&l);
}

static void params_of_(const char *out, float **p, size_t *n, uint64_t *step) {
    wgpt_checkpoint ck;
    read_ckpt_(out, &ck);
    *n = wgpt_gpt2_num_params(&ck.config);
    *p = malloc(*n * sizeof **p);
    memcpy(*p, ck.params, *n * sizeof **p);
    *step = ck.step;
    wgpt_checkpoint_free(&ck);
}

// A NaN in the gradients of step 3: the step is skipped with the parameters
// untouched (equal to those after step 2), it is reported, and training goes on.
static void nan_gradient_step_is_skipped(void **st) {
    (void)st;
    char a[650], b[650];
    snprintf(a, sizeof a, "%s/upto2", dir);
    snprintf(b, sizeof b, "%s/nan3", dir);
    wgpt_train_opts o;
    opts_(&o, a);
    o.stop_at = 2;
    assert_int_equal(wgpt_train_run(&o), 0);
    opts_(&o, b);
    o.stop_at = 3;
    o.inject_nan = "3";
    assert_int_equal(wgpt_train_run(&o), 0);
    float *p2, *p3;
    size_t n;
    uint64_t s2, s3;
    params_of_(a, &p2, &n, &s2);
    params_of_(b, &p3, &n, &s3);
    assert_int_equal(s2, 2);
    assert_int_equal(s3, 3);
    assert_memory_equal(p2, p3, n * sizeof *p2);
    free(p2), free(p3);
    char path[700], line[1024];
    snprintf(path, sizeof path, "%s/metrics.jsonl", b);
    FILE *f = fopen(path, "r");
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "\"step\":3,") && strstr(line, "\"skipped\":1")) found = 1;
    fclose(f);
    assert_true(found);
    opts_(&o, b);  // and it continues from there to the end
    assert_int_equal(wgpt_train_run(&o), 0);
}

// Faults in a row stop the run (exit 1) and keep the last good checkpoint.
static void repeated_faults_stop_the_run(void **st) {
    (void)st;
    char a[650], b[650];
    snprintf(a, sizeof a, "%s/upto1", dir);
    snprintf(b, sizeof b, "%s/faults", dir);
    wgpt_train_opts o;
    opts_(&o, a);
    o.stop_at = 1;
    assert_int_equal(wgpt_train_run(&o), 0);
    opts_(&o, b);
    o.checkpoint_every = 1;
    o.inject_nan = "2,3,4,5,6";
    o.max_skips = 3;
    assert_int_equal(wgpt_train_run(&o), 1);
    float *p1, *pb;
    size_t n;
    uint64_t s1, sb;
    params_of_(a, &p1, &n, &s1);
    params_of_(b, &pb, &n, &sb);
    assert_int_equal(sb, 3);  // steps 2 and 3 were skipped and saved; step 4 stopped the run
    assert_memory_equal(p1, pb, n * sizeof *p1);  // so the saved parameters are still step 1's
    free(p1), free(pb);
}

// The device is lost during step 3: a clear error, exit 1, and the checkpoint
// of step 2 is still there, valid, and resumes.
static void device_loss_keeps_the_last_checkpoint(void **st) {
    (void)st;
    char b[650];
    snprintf(b, sizeof b, "%s/lost", dir);
    wgpt_train_opts o;
    opts_(&o, b);
    o.checkpoint_every = 1;
    o.inject_loss_at = 3;
    assert_int_equal(wgpt_train_run(&o), 1);
    float *p;
    size_t n;
    uint64_t step;
    params_of_(b, &p, &n, &step);
    assert_int_equal(step, 2);
    free(p);
    opts_(&o, b);
    o.stop_at = 4;
    assert_int_equal(wgpt_train_run(&o), 0);  // resumes on a fresh device
    params_of_(b, &p, &n, &step);
    assert_int_equal(step, 4);
    free(p);
}

static void wgpt_path_(char *buf, size_t n) {
    char self[600];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(k > 0);
    self[k] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    snprintf(buf, n, "%s/wgpt", self);
}

static pid_t spawn_train_(const char *wgpt, const char *out, const char *steps) {
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", 1);
        dup2(devnull, 1), dup2(devnull, 2);
        execl(wgpt, wgpt, "train", "--data", shards, "--out", out, "--tokenizer", "bytes", "--layers", "2", "--heads",
              "2", "--channels", "32", "--batch", "4", "--seq", "16", "--total-batch", "128", "--steps", steps,
              "--warmup", "2", "--lr", "0.01", "--val-every", "0", "--checkpoint-every", "1", (char *)NULL);
        _exit(127);
    }
    return pid;
}

// SIGKILL at random moments never leaves a corrupt checkpoint, and resuming
// from whatever is there until the end gives the parameters of a run that
// was never killed, bit for bit.
static void sigkill_never_loses_a_run(void **st) {
    (void)st;
    char wgpt[700], a[650], b[650];
    wgpt_path_(wgpt, sizeof wgpt);
    snprintf(a, sizeof a, "%s/kill_straight", dir);
    snprintf(b, sizeof b, "%s/kill_resumed", dir);
    int status;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = spawn_train_(wgpt, a, "12");
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    // Kill moments are fractions of how long a whole run takes on this
    // machine, so the test kills on fast and slow machines alike; the first
    // one lands at 40% of a run that starts from nothing, before it can end.
    double run_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    srand((unsigned)time(NULL));
    int kills = 0;
    for (int round = 0; round < 30; round++) {
        pid = spawn_train_(wgpt, b, "12");
        double frac = round == 0 ? 0.4 : 0.05 + 0.85 * (double)rand() / RAND_MAX;
        double wait_s = frac * run_s;
        struct timespec ts = {(time_t)wait_s, (long)((wait_s - (double)(time_t)wait_s) * 1e9)};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) break;  // it finished before the kill
        kills++;
        char path[700], err[512];
        snprintf(path, sizeof path, "%s/latest.ckpt", b);
        wgpt_checkpoint ck;
        if (access(path, F_OK) == 0) {  // absent only before the first checkpoint
            if (wgpt_checkpoint_read(path, &ck, err, sizeof err) < 0) fail_msg("after a kill: %s", err);
            wgpt_checkpoint_free(&ck);
        }
    }
    printf("  killed %d times\n", kills);
    assert_true(kills > 0);
    pid = spawn_train_(wgpt, b, "12");  // finish the run
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    float *pa, *pb;
    size_t n;
    uint64_t sa, sb;
    params_of_(a, &pa, &n, &sa);
    params_of_(b, &pb, &n, &sb);
    assert_int_equal(sa, 12);
    assert_int_equal(sb, 12);
    assert_memory_equal(pa, pb, n * sizeof *pa);
    free(pa), free(pb);
}

// SIGTERM: the current step finishes, a checkpoint is written, exit 0.
static void sigterm_checkpoints_and_exits(void **st) {
    (void)st;
    char wgpt[700], c[650], path[700];
    wgpt_path_(wgpt, sizeof wgpt);
    snprintf(c, sizeof c, "%s/term", dir);
    snprintf(path, sizeof path, "%s/metrics.jsonl", c);
    pid_t pid = spawn_train_(wgpt, c, "100000");
    for (int i = 0; i < 600; i++) {  // until it has trained a few steps
        struct stat sb;
        if (stat(path, &sb) == 0 && sb.st_size > 400) break;
        struct timespec ts = {0, 50000000L};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGTERM);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    float *p;
    size_t n;
    uint64_t step;
    params_of_(c, &p, &n, &step);
    assert_true(step >= 2 && step < 100000);
    free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resume_is_exact),
        cmocka_unit_test(resume_with_other_shape_is_refused),
        cmocka_unit_test(seeded_sampling),
        cmocka_unit_test(nan_gradient_step_is_skipped),
        cmocka_unit_test(repeated_faults_stop_the_run),
        cmocka_unit_test(device_loss_keeps_the_last_checkpoint),
        cmocka_unit_test(sigkill_never_loses_a_run),
        cmocka_unit_test(sigterm_checkpoints_and_exits),
    };
    return cmocka_run_group_tests_name("train", tests, group_setup, group_teardown);
}
