// test_finetune.c: imported weights through the training system on the GPU
// (lavapipe in CI): `wgpt train --init-from` starts from a Hugging Face
// GPT-2 folder's weights and sizes with a fresh optimizer and schedule, and
// resumes its own checkpoint afterwards; a vocabulary, context or file that
// does not fit is refused before any step runs; `wgpt sample` / `wgpt eval`
// (train/load.c) take an imported model directly.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

#include "cli/train_run.h"
#include "data/shard.h"
#include "train/checkpoint.h"
#include "train/load.h"
#include "train/trainer.h"
#include "weights/hf_gpt2.h"
#include "weights/llmc.h"

static char dir[] = "/tmp/wgpt_finetune_XXXXXX";
static char shards[600], hf[600];
// A small model of bytes: maxT 32 is longer than the runs' T = 16
static const wgpt_gpt2_config CFG = {.max_seq_len = 32, .vocab_size = 256, .padded_vocab_size = 256,
                                     .num_layers = 2, .num_heads = 2, .channels = 32};
static float *params;

static const char *path_(const char *name) {
    static char p[4][700];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void write_hf_(const char *d, const wgpt_gpt2_config *c, const float *p) {
    wgpt_weights w = {.config = *c, .params = (float *)p};
    char err[1024];
    if (wgpt_hf_gpt2_write(d, &w, err, sizeof err) < 0) fail_msg("%s", err);
}

static int group_setup(void **state) {
    (void)state;
    if (!mkdtemp(dir)) return -1;
    const char *words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat. ", "dogs ", "run ", "far ", "away.\n"};
    uint16_t *tok = malloc(12000 * sizeof *tok);
    uint64_t s = 3;
    size_t n = 0;
    while (n < 11000) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        for (const char *c = words[(s >> 33) % 10]; *c; c++) tok[n++] = (uint8_t)*c;
    }
    char err[512];
    if (wgpt_shard_write(path_("train_000000.bin"), tok, 9000, err, sizeof err) < 0) return -1;
    if (wgpt_shard_write(path_("val_000000.bin"), tok + 9000, n - 9000, err, sizeof err) < 0) return -1;
    free(tok);
    snprintf(shards, sizeof shards, "%s/*.bin", dir);
    // weights whose every value is at least 1e-3 away from 0 (see init_from_starts_from_its_weights)
    size_t np = wgpt_gpt2_num_params(&CFG);
    params = malloc(np * sizeof *params);
    tu_fill(params, np, -0.1f, 0.1f);
    for (size_t i = 0; i < np; i++) params[i] += params[i] < 0 ? -1e-3f : 1e-3f;
    snprintf(hf, sizeof hf, "%s/hf", dir);
    write_hf_(hf, &CFG, params);
    wgpt_gpt2_config c300 = CFG;  // 300 ids: not the byte tokenizer's 256
    c300.vocab_size = 300, c300.padded_vocab_size = 384;
    float *p = calloc(wgpt_gpt2_num_params(&c300), sizeof *p);
    write_hf_(path_("v300"), &c300, p);
    free(p);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    free(params);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

// A run as `wgpt train --quiet` makes it (cli/train_run.h): its exit status, its errors on stderr.
static int train_(const wgpt_train_opts *o) { return wgpt_cli_train_run(o, 1); }

static void opts_(wgpt_train_opts *o, const char *out) {
    wgpt_train_defaults(o);
    o->data = shards;
    o->out_dir = out;
    o->tokenizer = "bytes";
    o->init_from = hf;
    o->batch = 4, o->seq = 16, o->total_batch = 0;
    o->steps = 2, o->warmup = 0, o->val_every = 0, o->checkpoint_every = 0;
}

static void read_ckpt_(const char *out, wgpt_checkpoint *ck) {
    char p[800], err[1024];
    snprintf(p, sizeof p, "%s/latest.ckpt", out);
    if (wgpt_checkpoint_read(p, ck, err, sizeof err) < 0) fail_msg("%s", err);
}

// With a learning rate of 1e-30 a step changes no weight of magnitude >= 1e-3
// (the update is ~1e-30, far below half an ulp): the checkpoint after one
// step holds the imported weights exactly, the file's sizes (maxT 32, not
// --seq 16) and nonzero AdamW moments of step 1.
static void init_from_starts_from_its_weights(void **st) {
    (void)st;
    wgpt_train_opts o;
    opts_(&o, path_("run1"));
    o.steps = 1;
    o.lr = 1e-30f;
    o.layers = 7, o.channels = 96, o.heads = 3;  // ignored: the sizes are the file's
    assert_int_equal(train_(&o), 0);
    wgpt_checkpoint ck;
    read_ckpt_(path_("run1"), &ck);
    assert_memory_equal(&ck.config, &CFG, sizeof CFG);
    assert_int_equal(ck.step, 1);
    assert_string_equal(ck.tokenizer, "bytes");
    size_t np = wgpt_gpt2_num_params(&CFG), moved = 0;
    assert_memory_equal(ck.params, params, np * sizeof(float));
    for (size_t i = 0; i < np; i++) moved += ck.adam_m[i] != 0;
    assert_true(moved > np / 2);  // a real step ran from a fresh (zero) optimizer state
    wgpt_checkpoint_free(&ck);
}

// A fine-tuning run stops and resumes like any other (its own checkpoint, the
// file's sizes on both sides).
static void init_from_then_resume(void **st) {
    (void)st;
    wgpt_train_opts o;
    opts_(&o, path_("run2"));
    o.stop_at = 1;
    assert_int_equal(train_(&o), 0);
    opts_(&o, path_("run2"));
    assert_int_equal(train_(&o), 0);
    wgpt_checkpoint ck;
    read_ckpt_(path_("run2"), &ck);
    assert_int_equal(ck.step, 2);
    assert_memory_equal(&ck.config, &CFG, sizeof CFG);
    assert_true(memcmp(ck.params, params, wgpt_gpt2_num_params(&CFG) * sizeof(float)) != 0);  // it trained
    wgpt_checkpoint_free(&ck);
}

// Runs train_ with stderr into a file; returns its exit code and the text.
static int run_captured_(const wgpt_train_opts *o, char *text, size_t n) {
    fflush(stderr);
    int saved = dup(2), fd = open(path_("stderr.txt"), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    dup2(fd, 2);
    int rc = train_(o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved), close(fd);
    FILE *f = fopen(path_("stderr.txt"), "r");
    size_t k = fread(text, 1, n - 1, f);
    text[k] = 0;
    fclose(f);
    return rc;
}

static void refused_before_step_1_(wgpt_train_opts *o, const char *out, const char *needle) {
    char text[4096];
    int rc = run_captured_(o, text, sizeof text);
    printf("refused: %s", text);
    assert_int_not_equal(rc, 0);
    if (!strstr(text, needle)) fail_msg("stderr '%s' does not say '%s'", text, needle);
    char p[800];
    snprintf(p, sizeof p, "%s/latest.ckpt", out);
    assert_int_not_equal(access(p, F_OK), 0);  // no step ran, nothing was written
}

static void init_from_refuses_what_does_not_fit(void **st) {
    (void)st;
    wgpt_train_opts o;
    opts_(&o, path_("bad1"));
    o.init_from = path_("v300");
    refused_before_step_1_(&o, path_("bad1"), "has a vocabulary of 300 ids but the 'bytes' tokenizer has 256");
    opts_(&o, path_("bad2"));
    o.seq = 64;
    refused_before_step_1_(&o, path_("bad2"), "--seq 64 is longer than the context of");
    opts_(&o, path_("bad3"));
    o.init_from = path_("no_such_model");
    refused_before_step_1_(&o, path_("bad3"), "no_such_model: No such file or directory");
    opts_(&o, path_("bad4"));
    o.init_from = path_("train_000000.bin");  // a shard is no model
    refused_before_step_1_(&o, path_("bad4"), "not a model file wgpt reads");
}

// L6: a model of GPT-2's vocabulary on shards made with bytes: the message
// says the shards must be tokenized again with gpt2, not "--tokenizer gpt2"
// (which the shards' recorded tokenizer then refuses: a circle).
static void init_from_gpt2_on_byte_shards_says_retokenize(void **st) {
    (void)st;
    wgpt_gpt2_config cg = {.max_seq_len = 32, .vocab_size = 50257, .padded_vocab_size = 50304, .num_layers = 1,
                           .num_heads = 2, .channels = 32};
    float *p = calloc(wgpt_gpt2_num_params(&cg), sizeof *p);
    write_hf_(path_("gpt2_vocab"), &cg, p);
    free(p);
    assert_int_equal(mkdir(path_("byte_shards"), 0777), 0);
    uint16_t tok[4096];
    for (int i = 0; i < 4096; i++) tok[i] = (uint16_t)("the cat sat on a mat. "[i % 22]);
    const char *names[2] = {"byte_shards/train_000000.bin", "byte_shards/val_000000.bin"};
    char err[512], data[700];
    for (int i = 0; i < 2; i++) {
        wgpt_shard_writer w;
        if (wgpt_shard_writer_begin(&w, path_(names[i]), "bytes", err, sizeof err) < 0 ||
            wgpt_shard_writer_append(&w, tok, 4096, err, sizeof err) < 0 || wgpt_shard_writer_finish(&w, err, sizeof err) < 0)
            fail_msg("%s", err);
    }
    snprintf(data, sizeof data, "%s/*.bin", path_("byte_shards"));
    wgpt_train_opts o;
    opts_(&o, path_("l6"));
    o.data = data;
    o.tokenizer = NULL;  // taken from the shards: bytes
    o.init_from = path_("gpt2_vocab");
    char text[4096];
    assert_int_not_equal(run_captured_(&o, text, sizeof text), 0);
    printf("  %s", text);
    assert_non_null(strstr(text, "wgpt tokenize --tokenizer gpt2"));
    assert_null(strstr(text, "(pass --tokenizer gpt2)"));
}

// L7: a head size the kernels cannot take, under --init-from: the message
// names the file's sizes, not --channels/--heads (which --init-from ignores).
static void init_from_head_size_names_the_file(void **st) {
    (void)st;
    wgpt_gpt2_config c = CFG;
    c.channels = 256, c.num_heads = 1;  // head size 256 > 128
    float *p = calloc(wgpt_gpt2_num_params(&c), sizeof *p);
    write_hf_(path_("hs256"), &c, p);
    free(p);
    wgpt_train_opts o;
    char data[700];
    snprintf(data, sizeof data, "%s/*_000000.bin", dir);  // not m.bin, inference_takes_imported_models' model
    opts_(&o, path_("l7"));
    o.data = data;
    o.init_from = path_("hs256");
    char text[4096];
    assert_int_not_equal(run_captured_(&o, text, sizeof text), 0);
    printf("  %s", text);
    assert_null(strstr(text, "--channels"));
    assert_null(strstr(text, "--heads"));
    assert_non_null(strstr(text, path_("hs256")));
    assert_non_null(strstr(text, "256 channels"));
}

// `wgpt sample` and `wgpt eval` load through wgpt_load_for_inference: an
// imported folder and an llm.c file give the same model as its weights.
static void inference_takes_imported_models(void **st) {
    (void)st;
    wgpt_weights w = {.config = CFG, .params = params};
    char err[1024];
    if (wgpt_llmc_write(path_("m.bin"), &w, err, sizeof err) < 0) fail_msg("%s", err);
    wgpt_gpu_options gpu = {.adapter_index = -1};
    int tokens[16], targets[16];
    for (int i = 0; i < 16; i++) tokens[i] = "the cat sat on a"[i], targets[i] = "he cat sat on a "[i];
    float loss[2];
    const char *models[2] = {hf, path_("m.bin")};
    for (int k = 0; k < 2; k++) {
        wgpt_loaded l;
        assert_int_equal(wgpt_load_for_inference(&l, models[k], "third_party/gpt2-bpe", &gpu, 1, 16, WGPT_PRECISION_FP32, err, sizeof err), 0);
        assert_memory_equal(&l.cfg, &CFG, sizeof CFG);
        assert_int_equal(wgpt_tokenizer_vocab_size(l.tok), 256);
        if (wgpt_gpt2_forward(l.model, tokens, targets, &loss[k]) < 0) fail_msg("%s", wgpt_gpt2_error(l.model));
        wgpt_loaded_free(&l);
    }
    printf("loss of the imported model: %.6f (HF folder), %.6f (llm.c file)\n", loss[0], loss[1]);
    assert_true(loss[0] == loss[1] && isfinite(loss[0]));
    wgpt_loaded l;  // a vocabulary that fits no tokenizer
    assert_int_equal(wgpt_load_for_inference(&l, path_("v300"), "third_party/gpt2-bpe", &gpu, 1, 16, WGPT_PRECISION_FP32, err, sizeof err), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(init_from_starts_from_its_weights),
        cmocka_unit_test(init_from_then_resume),
        cmocka_unit_test(init_from_refuses_what_does_not_fit),
        cmocka_unit_test(inference_takes_imported_models),
        cmocka_unit_test(init_from_gpt2_on_byte_shards_says_retokenize),
        cmocka_unit_test(init_from_head_size_names_the_file),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
