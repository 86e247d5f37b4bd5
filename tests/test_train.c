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

#include <glob.h>

#include "test_util.h"

#include "cli/train_run.h"
#include "data/corpus.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/generate.h"
#include "train/generate_stream.h"
#include "train/load.h"
#include "train/sampler.h"
#include "train/trainer.h"
#include "util/clock.h"
#include "util/dir_lock.h"

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
}

// A run as `wgpt train --quiet` makes it (cli/train_run.h): its exit status
// (0, 1 failed, 2 options refused), its errors on stderr.
static int train_(const wgpt_train_opts *o) { return wgpt_cli_train_run(o, 1); }

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
    assert_int_equal(train_(&o), 0);
    opts_(&o, b);
    o.stop_at = 4;
    assert_int_equal(train_(&o), 0);
    wgpt_checkpoint half;
    read_ckpt_(b, &half);
    assert_int_equal(half.step, 4);
    wgpt_checkpoint_free(&half);
    opts_(&o, b);  // resumes b/latest.ckpt by default
    assert_int_equal(train_(&o), 0);

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
    assert_int_equal(train_(&o), 1);
    opts_(&o, a);
    o.channels = 64;
    assert_int_equal(train_(&o), 1);
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
    char lerr[2048];
    assert_int_equal(wgpt_load_for_inference(&l, path, "third_party/gpt2-bpe", &gpu, 1, 0, WGPT_PRECISION_FP32, lerr, sizeof lerr), 0);
    char *x = sample_(&l, 7), *y = sample_(&l, 7), *z = sample_(&l, 8);
    printf("  seed 7: %s\n  seed 8: %s\n", x, z);
    assert_string_equal(x, y);
    assert_string_not_equal(x, z);
    assert_int_equal(strncmp(x, "the ", 4), 0);  // the prompt comes back first
    free(x), free(y), free(z);
    wgpt_loaded_free(&l);
}

typedef struct said_ {
    char text[8192];
} said_;

static void keep_sample_(void *ctx, wgpt_train_say_kind kind, const char *line) {
    said_ *s = ctx;
    const char *at = strstr(line, "--- sample at step 40 ---\n");
    (void)kind;
    if (!at) return;
    snprintf(s->text, sizeof s->text, "%s", at + strlen("--- sample at step 40 ---\n"));
    char *end = strstr(s->text, "\n---\n");
    if (end) *end = 0;
}

static void emit_bytes_(void *user, uint32_t sample, const char *bytes, size_t len) {
    said_ *s = user;
    size_t n = strlen(s->text);
    (void)sample;
    if (n + len < sizeof s->text) memcpy(s->text + n, bytes, len), s->text[n + len] = 0;
}

// The trainer's --sample-every samples as `wgpt sample` does, through the KV
// cache: with the trainer's sampler and seed, past a full context (40 tokens,
// context 16: the window slides by half, not by one token as the full
// recompute's did), the same text as the stream decoder gives from the
// checkpoint of that step.
static void trainer_samples_by_kv_cache(void **st) {
    (void)st;
    char a[650], path[700], err[2048];
    snprintf(a, sizeof a, "%s/kvsample", dir);
    wgpt_train_opts o;
    opts_(&o, a);
    o.steps = 40, o.sample_every = 40, o.sample_tokens = 40, o.warmup = 4;
    o.precision = WGPT_PRECISION_FP32;  // as the stream below (auto is f16 where the GPU has tensor cores)
    said_ got = {{0}}, want = {{0}};
    o.say = keep_sample_, o.say_ctx = &got;
    int trc = wgpt_train_run(&o, err, sizeof err);
    if (trc != 0) fprintf(stderr, "train: %d: %s\n", trc, err), fail();
    assert_true(got.text[0] != 0);
    snprintf(path, sizeof path, "%s/latest.ckpt", a);
    wgpt_gpu_options gpu = {.adapter_index = -1};
    wgpt_loaded l;
    assert_int_equal(wgpt_load_for_inference(&l, path, "third_party/gpt2-bpe", &gpu, 1, 0, WGPT_PRECISION_FP32, err,
                                             sizeof err), 0);
    wgpt_decoder *d = wgpt_decoder_create(l.model, 1, err, sizeof err);
    assert_non_null(d);
    wgpt_sampler s;
    wgpt_sampler_init(&s, o.temperature, o.top_k, o.seed ^ 0x5DEECE66Dull);  // the trainer's sampler (run_open.c)
    wgpt_stream_opts so = {.n_new = 40, .stop_at_eot = 1, .on_full = WGPT_FULL_SLIDE, .emit = emit_bytes_,
                           .user = &want};
    wgpt_stream_stats ss;
    assert_int_equal(wgpt_generate_stream(d, l.tok, &s, NULL, 0, 1, &so, &ss, err, sizeof err), 0);
    assert_true(ss.slides >= 1);  // it went past the context
    printf("  trainer: %s\n  stream:  %s\n", got.text, want.text);
    assert_string_equal(got.text, want.text);
    wgpt_decoder_free(d);
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
    assert_int_equal(train_(&o), 0);
    opts_(&o, b);
    o.stop_at = 3;
    o.inject_nan = "3";
    assert_int_equal(train_(&o), 0);
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
    assert_int_equal(train_(&o), 0);
}

// The loss_scale values of the train records of a metrics log, in order.
static int loss_scales_(const char *out, double *v, int max) {
    char path[700], line[1024];
    snprintf(path, sizeof path, "%s/metrics.jsonl", out);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        const char *l = strstr(line, "\"loss_scale\":");
        if (strstr(line, "\"kind\":\"train\"") && l) v[n++] = strtod(l + 13, NULL);
    }
    fclose(f);
    return n;
}

// An f16 run's checkpoint keeps its dynamic loss scale: a NaN at step 2 halves
// it, and the run resumed at step 4 goes on with the halved scale (not the
// initial one), losses and parameters bit for bit as the straight run's.
static void f16_resume_keeps_the_loss_scale(void **st) {
    (void)st;
    char a[650], b[650];
    snprintf(a, sizeof a, "%s/f16straight", dir);
    snprintf(b, sizeof b, "%s/f16resumed", dir);
    wgpt_train_opts o;
    opts_(&o, a);
    o.precision = WGPT_PRECISION_F16, o.inject_nan = "2";
    assert_int_equal(train_(&o), 0);
    opts_(&o, b);
    o.precision = WGPT_PRECISION_F16, o.inject_nan = "2", o.stop_at = 4;
    assert_int_equal(train_(&o), 0);
    opts_(&o, b);
    o.precision = WGPT_PRECISION_F16, o.inject_nan = "2";
    assert_int_equal(train_(&o), 0);
    double sa[16], sb[16], la[16], lb[16];
    assert_int_equal(loss_scales_(a, sa, 16), 8);
    assert_int_equal(loss_scales_(b, sb, 16), 8);
    assert_int_equal(losses_(a, "train", la, 16), 8);
    assert_int_equal(losses_(b, "train", lb, 16), 8);
    for (int i = 0; i < 8; i++) {
        printf("  step %d: loss scale %g straight, %g resumed; loss %.9g, %.9g\n", i + 1, sa[i], sb[i], la[i], lb[i]);
        assert_true(sa[i] == (i < 2 ? WGPT_LOSS_SCALE_INIT : WGPT_LOSS_SCALE_INIT / 2));
        assert_true(sb[i] == sa[i]);
        if (la[i] != lb[i]) fail_msg("step %d: loss %.9g straight but %.9g after resume", i + 1, la[i], lb[i]);
    }
    float *pa, *pb;
    size_t n;
    uint64_t s1, s2;
    params_of_(a, &pa, &n, &s1);
    params_of_(b, &pb, &n, &s2);
    assert_memory_equal(pa, pb, n * sizeof *pa);
    free(pa), free(pb);
}

// On real text (the license texts every Debian system has in
// /usr/share/common-licenses, from the essential package base-files, as
// bytes; whole files held out for validation) the f16 run's validation loss
// after 60 steps is within 1% of the fp32 run's (the bar), and `wgpt
// eval` of the f16 run's checkpoint in f16 and in fp32 agree within 1% too
// (only the matmuls' operand rounding differs). Not this repository's docs,
// as it was: they change every session, and with them the run; one corpus
// put the f16 run 1.03% under the fp32 one on the tuned lavapipe (a step
// skipped for overflow at step 26 of 60) and 0.53% on Debian's, the next
// edit of the docs 7e-5. On the licenses (Debian 12): 1.6e-3 on the tuned
// lavapipe, 6.4e-4 on Debian's.
static void f16_validation_loss_within_1pct_of_fp32(void **st) {
    (void)st;
    char text[650], err[2048];
    snprintf(text, sizeof text, "%s/text", dir);
    glob_t gl;
    if (glob("/usr/share/common-licenses/*", 0, NULL, &gl) != 0) fail_msg("no /usr/share/common-licenses/* (Debian's base-files)");
    char *files[64];  // the files themselves: GPL, LGPL, GFDL are links to one of the versioned texts
    size_t nf = 0;
    for (size_t i = 0; i < gl.gl_pathc && nf < 64; i++) {
        struct stat sb;
        if (lstat(gl.gl_pathv[i], &sb) == 0 && S_ISREG(sb.st_mode)) files[nf++] = gl.gl_pathv[i];
    }
    assert_true(nf >= 5);
    wgpt_tokenizer *tok = wgpt_tokenizer_open_bytes();
    wgpt_corpus_opts co = {.tok = tok, .out_dir = text, .shard_tokens = 1u << 20, .val_fraction = 0.1,
                           .split_files = 1};
    wgpt_corpus_result cr;
    if (wgpt_corpus_tokenize(&co, files, nf, &cr, err, sizeof err) < 0) fail_msg("%s", err);
    printf("  corpus: %llu files, %llu training and %llu validation tokens\n", (unsigned long long)cr.files,
           (unsigned long long)cr.train_tokens, (unsigned long long)cr.val_tokens);
    wgpt_shard_set_free(&cr.set);
    globfree(&gl);
    wgpt_tokenizer_free(tok);
    char data[700];
    snprintf(data, sizeof data, "%s/*.bin", text);
    const wgpt_precision prec[2] = {WGPT_PRECISION_FP32, WGPT_PRECISION_F16};
    double val[2];
    for (int i = 0; i < 2; i++) {
        char out[700];
        snprintf(out, sizeof out, "%s/text_%s", dir, wgpt_precision_name(prec[i]));
        wgpt_train_opts o;
        opts_(&o, out);
        o.data = data, o.precision = prec[i];
        o.layers = 2, o.heads = 4, o.channels = 64, o.batch = 8, o.seq = 64, o.total_batch = 0;
        o.steps = 60, o.warmup = 5, o.lr = 3e-3f, o.val_every = 60, o.val_batches = 8;
        assert_int_equal(train_(&o), 0);
        double v[4];
        assert_int_equal(losses_(out, "val", v, 4), 2);  // steps 0 and 60
        val[i] = v[1];
        assert_true(v[1] < v[0] - 1.0);  // it learned something: bytes of English
    }
    double rel = fabs(val[1] - val[0]) / val[0];
    printf("  validation loss after 60 steps: fp32 %.5f, f16 %.5f (%.2e relative)\n", val[0], val[1], rel);
    assert_true(rel < 0.01);
    char ck[700];
    snprintf(ck, sizeof ck, "%s/text_f16/latest.ckpt", dir);
    double ev[2];
    for (int i = 0; i < 2; i++) {
        wgpt_eval_opts eo = {.checkpoint = ck, .data = data, .bpe_dir = "third_party/gpt2-bpe", .batch = 8,
                             .batches = 8, .precision = i ? WGPT_PRECISION_F16 : WGPT_PRECISION_FP32,
                             .gpu = {.adapter_index = -1}};
        wgpt_eval_result er;
        if (wgpt_eval_checkpoint(&eo, &er, err, sizeof err) < 0) fail_msg("%s", err);
        assert_int_equal(er.precision, eo.precision);
        ev[i] = er.loss;
    }
    printf("  wgpt eval of the f16 run: fp32 %.5f, f16 %.5f\n", ev[0], ev[1]);
    assert_true(fabs(ev[1] - ev[0]) / ev[0] < 0.01);
    assert_true(fabs(ev[1] - val[1]) / val[1] < 0.01);  // the trainer's own validation of the same batches
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
    assert_int_equal(train_(&o), 0);
    opts_(&o, b);
    o.checkpoint_every = 1;
    o.inject_nan = "2,3,4,5,6";
    o.max_skips = 3;
    assert_int_equal(train_(&o), 1);
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
    assert_int_equal(train_(&o), 1);
    float *p;
    size_t n;
    uint64_t step;
    params_of_(b, &p, &n, &step);
    assert_int_equal(step, 2);
    free(p);
    opts_(&o, b);
    o.stop_at = 4;
    assert_int_equal(train_(&o), 0);  // resumes on a fresh device
    params_of_(b, &p, &n, &step);
    assert_int_equal(step, 4);
    free(p);
}

static void wgpt_path_(char *buf, size_t n) {
    char self[600];
    assert_int_equal(tu_build_dir(self, sizeof self), 0);
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
    double t0 = wgpt_clock_s();
    pid_t pid = spawn_train_(wgpt, a, "12");
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    double run_s = wgpt_clock_s() - t0;
    // The first run may pay for compiling shaders that later runs find in
    // the driver's cache (NVIDIA's: on the H200 the second run took under 40%
    // of the first, and no kill landed): time a second one too, take the shorter.
    char warm[700];
    snprintf(warm, sizeof warm, "%s/kill_warm", dir);
    t0 = wgpt_clock_s();
    pid = spawn_train_(wgpt, warm, "12");
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (wgpt_clock_s() - t0 < run_s) run_s = wgpt_clock_s() - t0;
    // Kill moments are fractions of how long a whole run takes on this
    // machine, so the test kills on fast and slow machines alike; the first
    // one lands at 40% of a run that starts from nothing, before it can end.
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

// Runs a training run with its stderr captured into buf.
static int run_captured_(const wgpt_train_opts *o, char *buf, size_t n) {
    fflush(stderr);
    char path[] = "/tmp/wgpt_train_err_XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    assert_true(fd >= 0 && saved >= 0);
    dup2(fd, 2);
    int rc = train_(o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t k = read(fd, buf, n - 1);
    buf[k > 0 ? k : 0] = 0;
    close(fd);
    unlink(path);
    fprintf(stderr, "%s", buf);  // still shown in the test's log
    return rc;
}

// Options that make no sense are refused before anything is opened, naming
// the option and what is allowed (a negative learning rate used to train
// uphill; --sample-tokens 4294967295 wrapped a buffer size to 0).
static void bad_options_are_refused_up_front(void **st) {
    (void)st;
    char a[650], buf[8192];
    snprintf(a, sizeof a, "%s/badopts", dir);
    static const struct {
        const char *what, *needle;
    } cases[] = {
        {"lr", "--lr"},       {"beta1", "--beta1"},     {"beta2", "--beta2"},   {"sample", "--sample-tokens"},
        {"stop", "--stop-at"},  {"heads", "--heads"},   {"spike", "--spike-factor"},
        {"total", "--total-batch"}, {"nan", "--inject-nan"}, {"tok", "--tokenizer"}, {"steps", "--steps"},
        {"vf", "--val-fraction"}, {"wd", "--weight-decay"}, {"temp", "--temperature"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wgpt_train_opts o;
        opts_(&o, a);
        const char *w = cases[i].what;
        if (!strcmp(w, "lr")) o.lr = -1e-3f;
        if (!strcmp(w, "beta1")) o.beta1 = 1.0f;
        if (!strcmp(w, "beta2")) o.beta2 = 1.5f;
        if (!strcmp(w, "sample")) o.sample_every = 1, o.sample_tokens = 4294967295u;
        if (!strcmp(w, "stop")) o.stop_at = 9;
        if (!strcmp(w, "heads")) o.heads = 3;
        if (!strcmp(w, "spike")) o.spike_factor = 0.5f;
        if (!strcmp(w, "total")) o.total_batch = 100;
        if (!strcmp(w, "nan")) o.inject_nan = "3,x";
        if (!strcmp(w, "tok")) o.tokenizer = "llama";
        if (!strcmp(w, "steps")) o.steps = 0;
        if (!strcmp(w, "vf")) o.val_fraction = 1.0f;
        if (!strcmp(w, "wd")) o.weight_decay = -0.1f;
        if (!strcmp(w, "temp")) o.temperature = -1.0f;
        int rc = run_captured_(&o, buf, sizeof buf);
        if (rc != 2 || !strstr(buf, cases[i].needle))
            fail_msg("%s: exit %d, message \"%s\" (wanted 2 and %s)", w, rc, buf, cases[i].needle);
    }
    struct stat sb;
    assert_int_equal(stat(a, &sb), -1);  // nothing was created
}

// A shape the kernels or the device cannot take names the options to change.
static void impossible_shapes_name_the_options(void **st) {
    (void)st;
    char a[650], buf[8192];
    snprintf(a, sizeof a, "%s/shapes", dir);
    wgpt_train_opts o;
    opts_(&o, a);
    o.channels = 260, o.heads = 2;  // head size 130
    assert_int_equal(run_captured_(&o, buf, sizeof buf), 2);
    assert_non_null(strstr(buf, "--channels"));
    assert_non_null(strstr(buf, "--heads"));
    assert_null(strstr(buf, "attention forward"));  // not a kernel's name
    opts_(&o, a);
    o.layers = 1, o.channels = 65536, o.heads = 512;  // 200 GB of parameters
    assert_int_equal(run_captured_(&o, buf, sizeof buf), 2);
    assert_non_null(strstr(buf, "--channels"));
    assert_non_null(strstr(buf, "--layers"));
}

// L13: a latest.ckpt.tmp left by a writer killed mid-checkpoint is removed
// when the next run in the folder starts (here one refused for its shape
// right after it takes the folder).
static void stale_checkpoint_tmp_is_removed_at_the_start(void **st) {
    (void)st;
    char a[650], tmp[700], buf[8192];
    snprintf(a, sizeof a, "%s/stale", dir);
    assert_int_equal(mkdir(a, 0777), 0);
    snprintf(tmp, sizeof tmp, "%s/latest.ckpt.tmp", a);
    FILE *f = fopen(tmp, "wb");
    fputs("half a checkpoint", f);
    fclose(f);
    wgpt_train_opts o;
    opts_(&o, a);
    o.channels = 260, o.heads = 2;  // head size 130: refused before any step
    assert_int_equal(run_captured_(&o, buf, sizeof buf), 2);
    assert_int_equal(access(tmp, F_OK), -1);
}

// A second run in the same folder is refused while the first holds its lock.
static void second_run_in_a_folder_is_refused(void **st) {
    (void)st;
    char a[650], err[1024], buf[8192];
    snprintf(a, sizeof a, "%s/locked", dir);
    assert_int_equal(mkdir(a, 0777), 0);
    int lock = wgpt_dir_lock(a, ".wgpt-train.lock", "the test", err, sizeof err);  // as a running train holds it
    assert_true(lock >= 0);
    wgpt_train_opts o;
    opts_(&o, a);
    assert_int_equal(run_captured_(&o, buf, sizeof buf), 1);
    assert_non_null(strstr(buf, "in use"));
    char path[700];
    snprintf(path, sizeof path, "%s/metrics.jsonl", a);
    assert_int_equal(access(path, F_OK), -1);  // nothing of the first run touched
    wgpt_dir_unlock(lock);
    o.stop_at = 1;
    assert_int_equal(train_(&o), 0);  // free again once it ends
}

// A failure before the first checkpoint says that nothing is kept.
static void no_checkpoint_is_promised_that_does_not_exist(void **st) {
    (void)st;
    char a[650], buf[8192];
    snprintf(a, sizeof a, "%s/nockpt", dir);
    wgpt_train_opts o;
    opts_(&o, a);
    o.inject_loss_at = 1;
    assert_int_equal(run_captured_(&o, buf, sizeof buf), 1);
    assert_null(strstr(buf, "is kept"));
    assert_non_null(strstr(buf, "no checkpoint"));
    char path[700];
    snprintf(path, sizeof path, "%s/latest.ckpt", a);
    assert_int_equal(access(path, F_OK), -1);
}

static void copy_file_(const char *from, const char *to) {
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

// Steps logged after the checkpoint that a crash lost are dropped from
// metrics.jsonl on resume: every step appears once.
static void resume_drops_the_lost_steps_from_the_log(void **st) {
    (void)st;
    char a[650], ck[700], saved[700], path[700], line[1024];
    snprintf(a, sizeof a, "%s/relog", dir);
    snprintf(ck, sizeof ck, "%s/latest.ckpt", a);
    snprintf(saved, sizeof saved, "%s/step2.ckpt", a);
    wgpt_train_opts o;
    opts_(&o, a);
    o.stop_at = 2;
    assert_int_equal(train_(&o), 0);
    copy_file_(ck, saved);
    opts_(&o, a);
    o.stop_at = 4;
    assert_int_equal(train_(&o), 0);
    copy_file_(saved, ck);  // as if steps 3 and 4 were logged but the process died before their checkpoint
    opts_(&o, a);
    assert_int_equal(train_(&o), 0);
    snprintf(path, sizeof path, "%s/metrics.jsonl", a);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int train_seen[16] = {0}, val_seen[16] = {0};
    while (fgets(line, sizeof line, f)) {
        const char *s = strstr(line, "\"step\":");
        assert_non_null(s);
        int step = atoi(s + 7);
        assert_true(step >= 0 && step < 16);
        if (strstr(line, "\"kind\":\"train\"")) train_seen[step]++;
        else val_seen[step]++;
    }
    fclose(f);
    for (int t = 1; t <= 8; t++)
        if (train_seen[t] != 1) fail_msg("step %d appears %d times in metrics.jsonl", t, train_seen[t]);
    for (int t = 0; t <= 8; t += 4)
        if (val_seen[t] != 1) fail_msg("validation of step %d appears %d times", t, val_seen[t]);
}

// Shards that record another tokenizer than --tokenizer are refused; without
// --tokenizer the recorded one is used.
static void recorded_tokenizer_is_checked_and_inferred(void **st) {
    (void)st;
    char d[650], a[650], pat[700], path[700], err[1024], buf[8192];
    snprintf(d, sizeof d, "%s/gpt2shards", dir);
    snprintf(a, sizeof a, "%s/gpt2run", dir);
    assert_int_equal(mkdir(d, 0777), 0);
    uint16_t tok[4000];
    for (int i = 0; i < 4000; i++) tok[i] = (uint16_t)(i * 7919 % 50257);
    const char *names[2] = {"train_000000.bin", "val_000000.bin"};
    for (int k = 0; k < 2; k++) {
        wgpt_shard_writer w;
        snprintf(path, sizeof path, "%s/%s", d, names[k]);
        assert_int_equal(wgpt_shard_writer_begin(&w, path, "gpt2", err, sizeof err), 0);
        assert_int_equal(wgpt_shard_writer_append(&w, tok, k ? 1000 : 4000, err, sizeof err), 0);
        assert_int_equal(wgpt_shard_writer_finish(&w, err, sizeof err), 0);
    }
    snprintf(pat, sizeof pat, "%s/*.bin", d);
    wgpt_train_opts o;
    opts_(&o, a);
    o.data = pat;
    o.tokenizer = "bytes";
    assert_int_equal(run_captured_(&o, buf, sizeof buf), 1);
    assert_non_null(strstr(buf, "gpt2"));
    assert_non_null(strstr(buf, "--tokenizer"));
    opts_(&o, a);
    o.data = pat;
    o.tokenizer = NULL;
    char bpe[600];
    snprintf(bpe, sizeof bpe, "%s/third_party/gpt2-bpe", WGPT_SOURCE_DIR);
    o.bpe_dir = bpe;
    o.stop_at = 1;
    assert_int_equal(train_(&o), 0);
    wgpt_checkpoint ck;
    read_ckpt_(a, &ck);
    assert_string_equal(ck.tokenizer, "gpt2");
    assert_int_equal(ck.config.vocab_size, 50257);
    wgpt_checkpoint_free(&ck);
}

// Weights that overflow give a NaN validation loss: an error, not a logged
// number; eval and sample refuse such a checkpoint the same way.
static void non_finite_results_are_errors(void **st) {
    (void)st;
    char a[650], ck[700], err[1024], buf[8192];
    snprintf(a, sizeof a, "%s/overflow", dir);
    snprintf(ck, sizeof ck, "%s/latest.ckpt", a);
    wgpt_train_opts o;
    opts_(&o, a);
    o.stop_at = 1;
    assert_int_equal(train_(&o), 0);
    wgpt_checkpoint c;
    read_ckpt_(a, &c);
    size_t np = wgpt_gpt2_num_params(&c.config);
    for (size_t i = 0; i < np; i++) c.params[i] = c.params[i] * 1e30f + 1e30f;  // finite, but no float sum survives them
    assert_int_equal(wgpt_checkpoint_write(ck, &c, err, sizeof err), 0);
    wgpt_checkpoint_free(&c);
    opts_(&o, a);
    o.val_every = 1;
    o.max_skips = 0;
    o.precision = WGPT_PRECISION_FP32;  // f16 refuses these weights at load (test_cli_errors), before any loss
    int rc = run_captured_(&o, buf, sizeof buf);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(buf, "validation loss"));
    assert_non_null(strstr(buf, "is kept"));  // step 1's checkpoint, as written above

    char wgpt[700], cmd[2400];
    wgpt_path_(wgpt, sizeof wgpt);
    snprintf(cmd, sizeof cmd, "'%s' eval --checkpoint '%s' --data '%s' --batch 2 >/dev/null 2>&1", wgpt, ck, shards);
    int status = system(cmd);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    snprintf(cmd, sizeof cmd, "'%s' sample --checkpoint '%s' --tokens 5 >/dev/null 2>&1", wgpt, ck);
    status = system(cmd);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

// A shard truncated by another process while training reads it: a clear
// error, exit 1, and a checkpoint of the last whole step (it was SIGBUS with
// no message, and every step since the last checkpoint lost).
static void shard_truncated_during_training_is_an_error_with_a_checkpoint(void **st) {
    (void)st;
    char d[650], a[650], path[700], data[700], wgpt[700], errpath[700], buf[8192];
    snprintf(d, sizeof d, "%s/shrinking", dir);
    snprintf(a, sizeof a, "%s/shrinking_run", dir);
    assert_int_equal(mkdir(d, 0777), 0);
    snprintf(path, sizeof path, "%s/train_000000.bin", dir);
    snprintf(data, sizeof data, "%s/train_000000.bin", d);
    copy_file_(path, data);
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", d);
    wgpt_path_(wgpt, sizeof wgpt);
    pid_t pid = fork();
    if (pid == 0) {
        int out = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644), devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1), dup2(out, 2);
        execl(wgpt, wgpt, "train", "--data", data, "--out", a, "--tokenizer", "bytes", "--layers", "2", "--heads", "2",
              "--channels", "32", "--batch", "4", "--seq", "16", "--steps", "100000", "--warmup", "2", "--lr", "0.01",
              "--val-every", "0", "--checkpoint-every", "0", (char *)NULL);
        _exit(127);
    }
    char metrics[700];
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", a);
    for (int i = 0; i < 1200; i++) {  // until it has trained a few steps
        struct stat sb;
        if (stat(metrics, &sb) == 0 && sb.st_size > 600) break;
        struct timespec ts = {0, 50000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(truncate(data, 1024 + 2 * 64), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    FILE *f = fopen(errpath, "r");
    size_t k = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[k] = 0;
    if (f) fclose(f);
    printf("  stderr: %s\n", buf);
    if (!WIFEXITED(status)) fail_msg("killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    assert_int_equal(WEXITSTATUS(status), 1);
    assert_non_null(strstr(buf, "shrank"));
    assert_non_null(strstr(buf, "checkpoint of step"));
    wgpt_checkpoint c;
    read_ckpt_(a, &c);
    assert_true(c.step >= 1);
    wgpt_checkpoint_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resume_is_exact),
        cmocka_unit_test(resume_with_other_shape_is_refused),
        cmocka_unit_test(seeded_sampling),
        cmocka_unit_test(trainer_samples_by_kv_cache),
        cmocka_unit_test(nan_gradient_step_is_skipped),
        cmocka_unit_test(f16_resume_keeps_the_loss_scale),
        cmocka_unit_test(f16_validation_loss_within_1pct_of_fp32),
        cmocka_unit_test(repeated_faults_stop_the_run),
        cmocka_unit_test(device_loss_keeps_the_last_checkpoint),
        cmocka_unit_test(sigkill_never_loses_a_run),
        cmocka_unit_test(sigterm_checkpoints_and_exits),
        cmocka_unit_test(bad_options_are_refused_up_front),
        cmocka_unit_test(impossible_shapes_name_the_options),
        cmocka_unit_test(stale_checkpoint_tmp_is_removed_at_the_start),
        cmocka_unit_test(second_run_in_a_folder_is_refused),
        cmocka_unit_test(no_checkpoint_is_promised_that_does_not_exist),
        cmocka_unit_test(resume_drops_the_lost_steps_from_the_log),
        cmocka_unit_test(recorded_tokenizer_is_checked_and_inferred),
        cmocka_unit_test(non_finite_results_are_errors),
        cmocka_unit_test(shard_truncated_during_training_is_an_error_with_a_checkpoint),
    };
    return cmocka_run_group_tests_name("train", tests, group_setup, group_teardown);
}
