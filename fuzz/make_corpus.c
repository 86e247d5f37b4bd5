// make_corpus.c: writes the binary seed inputs of the shard and checkpoint
// fuzz targets with wgpt's own writers (`make fuzz-corpus`; the output is
// checked in under fuzz/corpus/). Valid files plus the classic damaged ones:
// truncated, bad magic/version, a wrong count, a bad checksum, a NaN.
// Usage: make_corpus DIR   (writes DIR/shard/* and DIR/checkpoint/*)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/shard.h"
#include "train/checkpoint.h"

static const char *dir_;

static void die_(const char *what, const char *err) {
    fprintf(stderr, "make_corpus: %s: %s\n", what, err);
    exit(1);
}

static unsigned char *slurp_(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) die_(path, "cannot open");
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    if (!b || fread(b, 1, (size_t)len, f) != (size_t)len) die_(path, "cannot read");
    fclose(f);
    *n = (size_t)len;
    return b;
}

// Writes DIR/sub/name: an optional one-byte prefix, then data[0, n).
static void put_(const char *sub, const char *name, int prefix, const unsigned char *data, size_t n) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir_, sub);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/%s/%s", dir_, sub, name);
    FILE *f = fopen(p, "wb");
    if (!f) die_(p, "cannot create");
    if (prefix >= 0) fputc(prefix, f);
    if (fwrite(data, 1, n, f) != n || fclose(f) != 0) die_(p, "cannot write");
}

static void le32_(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

// ---- shards: the fuzz target's knobs live in header bytes [12, 1024) ----

// A shard written by wgpt_shard_write, then its header knobs set.
static unsigned char *shard_(const uint16_t *tok, size_t n, uint8_t b_vf, uint8_t t_name, uint16_t vocab, size_t *len) {
    char tmp[] = "/tmp/wgpt_make_corpus_XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) die_("mkstemp", "failed");
    close(fd);
    char err[512];
    if (wgpt_shard_write(tmp, tok, n, err, sizeof err) < 0) die_("wgpt_shard_write", err);
    unsigned char *b = slurp_(tmp, len);
    unlink(tmp);
    b[12] = b_vf;
    b[13] = t_name;
    b[14] = (unsigned char)vocab;
    b[15] = (unsigned char)(vocab >> 8);
    return b;
}

static void shards_(void) {
    uint16_t tok[600];
    for (size_t i = 0; i < 600; i++) tok[i] = (uint16_t)((i * 7 + i / 13) % 50);
    size_t n;
    unsigned char *b;

    b = shard_(tok, 16, 0, 0, 0, &n);  // B=1 T=1, every knob at its default
    put_("shard", "valid_16_tokens", -1, b, n);
    free(b);
    b = shard_(tok, 300, 0x41, 0x03, 50, &n);  // B=2 T=4, val 4/16, vocab 50
    put_("shard", "valid_split_B2_T4", -1, b, n);
    b[16] = 5, b[20] = 200;  // check_vocab over [5, 200)
    b[24 + 40] = 3;          // loader state: epoch += 3
    put_("shard", "valid_range_and_state", -1, b, n);
    b[24 + 48] = 0xff;  // loader state: next window past the end
    put_("shard", "bad_state_position", -1, b, n);
    free(b);
    b = shard_(tok, 600, 0x83, 0x0f, 50, &n);  // B=4 T=16, val 8/16
    put_("shard", "valid_600_B4_T16", -1, b, n);
    free(b);
    b = shard_(tok, 40, 0x00, 0x11, 0, &n);  // named val_000.bin: no train shard
    put_("shard", "named_val", -1, b, n);
    free(b);
    tok[20] = 60000;
    b = shard_(tok, 40, 0x00, 0x01, 0xC451, &n);  // vocab 50257; id 60000 at position 20
    put_("shard", "id_past_vocab", -1, b, n);
    free(b);
    tok[20] = 20;
    b = shard_(tok, 0, 0, 0, 0, &n);
    put_("shard", "empty", -1, b, n);
    free(b);

    b = shard_(tok, 100, 0, 0, 0, &n);
    put_("shard", "truncated_stray_byte", -1, b, n - 1);
    put_("shard", "header_only_part", -1, b, 500);
    le32_(b + 8, 0x80000000u);
    put_("shard", "negative_count", -1, b, n);
    le32_(b + 8, 100);
    le32_(b + 4, 2);
    put_("shard", "version_2", -1, b, n);
    le32_(b + 4, 1);
    le32_(b, 20240521);
    put_("shard", "bad_magic", -1, b, n);
    free(b);
}

// ---- checkpoints: one mode byte, then the file (see fuzz_checkpoint.c) ----

static unsigned char *checkpoint_(int with_adam, size_t opts_len, size_t *len) {
    static const wgpt_gpt2_config c = {.max_seq_len = 2, .vocab_size = 3, .padded_vocab_size = 4,
                                       .num_layers = 1, .num_heads = 1, .channels = 2};
    wgpt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ck.config = c;
    ck.step = 7;
    strcpy(ck.tokenizer, with_adam ? "bytes" : "gpt2");
    for (int i = 0; i < 4; i++) ck.rng[i] = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
    unsigned char opts[8] = {1, 2, 3, 4, 5, 6, 7, 8}, loader[72] = {'W', 'G', 'P', 'T', 'L', 'D', 'R', 0, 1};
    ck.train_opts = opts;
    ck.train_opts_len = opts_len;
    ck.loader_state = loader;
    ck.loader_state_len = sizeof loader;
    size_t n = wgpt_gpt2_num_params(&c);
    float *p = malloc(3 * n * sizeof *p);
    for (size_t i = 0; i < 3 * n; i++) p[i] = (float)((int)(i % 17) - 8) / 16.0f;
    ck.params = p;
    ck.adam_m = with_adam ? p + n : NULL;
    ck.adam_v = with_adam ? p + 2 * n : NULL;
    char tmp[] = "/tmp/wgpt_make_corpus_XXXXXX", err[1024];
    int fd = mkstemp(tmp);
    if (fd < 0) die_("mkstemp", "failed");
    close(fd);
    if (wgpt_checkpoint_write(tmp, &ck, err, sizeof err) < 0) die_("wgpt_checkpoint_write", err);
    free(p);
    unsigned char *b = slurp_(tmp, len);
    unlink(tmp);
    return b;
}

static void checkpoints_(void) {
    size_t n;
    unsigned char *b = checkpoint_(1, 8, &n);
    put_("checkpoint", "valid_with_adam", 0, b, n);
    put_("checkpoint", "valid_with_adam_fix_crcs", 3, b, n);
    put_("checkpoint", "truncated", 0, b, n - 9);
    put_("checkpoint", "header_only", 0, b, 144);
    b[8] = 2;  // format version
    put_("checkpoint", "version_2", 1, b, n);
    b[8] = 1;
    b[200] ^= 0x10;  // a loader_state byte: section CRC mismatch
    put_("checkpoint", "bad_section_crc", 0, b, n);
    b[200] ^= 0x10;
    size_t nan_at = 144 + 8 + 72 + 4 * 3;  // params element 3
    memcpy(b + nan_at, (const unsigned char[]){0, 0, 0xc0, 0x7f}, 4);
    put_("checkpoint", "nan_in_params_fix_crcs", 3, b, n);
    free(b);
    b = checkpoint_(0, 0, &n);
    put_("checkpoint", "valid_params_only", 0, b, n);
    b[16 + 4 * 4] = 3;  // num_heads 3: channels 2 is not a multiple
    put_("checkpoint", "heads_not_dividing_fix_crcs", 3, b, n);
    free(b);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_corpus DIR\n");
        return 2;
    }
    dir_ = argv[1];
    mkdir(dir_, 0755);
    shards_();
    checkpoints_();
    return 0;
}
