// make_corpus.c: writes the binary seed inputs of the shard, checkpoint and
// safetensors fuzz targets with wgpt's own writers (`make fuzz-corpus`; the
// output is checked in under fuzz/corpus/). Valid files plus the classic
// damaged ones: truncated, bad magic/version, a wrong count, a bad checksum,
// a NaN; for safetensors overlaps, holes, bad dtypes and names.
// Usage: make_corpus DIR   (writes DIR/shard/*, DIR/checkpoint/*, DIR/safetensors/*)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/shard.h"
#include "train/checkpoint.h"
#include "weights/hf_config.h"
#include "weights/hf_gpt2.h"
#include "weights/safetensors.h"

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

// ---- safetensors: a mode byte (bit 0: a config.json and a NUL come first), then the file ----

// A tiny GPT-2 (L=1, NH=2, C=4, maxT=3, V=5) exported by wgpt_hf_gpt2_write: its model.safetensors.
static unsigned char *tiny_gpt2_(size_t *len, char **config) {
    static const wgpt_gpt2_config c = {.max_seq_len = 3, .vocab_size = 5, .padded_vocab_size = 128,
                                       .num_layers = 1, .num_heads = 2, .channels = 4};
    size_t n = wgpt_gpt2_num_params(&c);
    float *p = calloc(n, sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = i < 5 * 4 || i >= 128 * 4 ? (float)((int)(i % 13) - 6) / 8.0f : 0.0f;
    wgpt_weights w = {.config = c, .params = p};
    char tmp[] = "/tmp/wgpt_make_corpus_XXXXXX", err[1024], path[64];
    if (!mkdtemp(tmp)) die_("mkdtemp", "failed");
    if (wgpt_hf_gpt2_write(tmp, &w, err, sizeof err) < 0) die_("wgpt_hf_gpt2_write", err);
    snprintf(path, sizeof path, "%s/model.safetensors", tmp);
    unsigned char *b = slurp_(path, len);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", tmp);
    unlink(path);
    rmdir(tmp);
    *config = wgpt_hf_config_format(&c, "", NULL);
    free(p);
    return b;
}

// The same tensors as BF16 (each float's top half), names without the prefix.
static unsigned char *to_bf16_(const unsigned char *f32, size_t n, size_t *len) {
    wgpt_safetensors st;
    char err[512];
    if (wgpt_safetensors_parse(&st, f32, n, "tiny", err, sizeof err) < 0) die_("parse", err);
    char *json = malloc(1 << 16);
    size_t at = (size_t)sprintf(json, "{"), data = 0;
    for (size_t i = 0; i < st.count; i++) {
        const wgpt_st_tensor *t = &st.tensors[i];
        at += (size_t)sprintf(json + at, "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[", i ? "," : "",
                              t->name + strlen("transformer."));
        for (uint32_t k = 0; k < t->ndim; k++)
            at += (size_t)sprintf(json + at, "%s%llu", k ? "," : "", (unsigned long long)t->shape[k]);
        at += (size_t)sprintf(json + at, "],\"data_offsets\":[%zu,%zu]}", data, data + 2 * t->count);
        data += 2 * t->count;
    }
    at += (size_t)sprintf(json + at, "}");
    unsigned char *b = malloc(8 + at + data), *d = b + 8 + at;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)at >> (8 * i));
    memcpy(b + 8, json, at);
    for (size_t i = 0; i < st.count; i++) {  // the same order as the offsets above
        const wgpt_st_tensor *t = &st.tensors[i];
        for (uint64_t e = 0; e < t->count; e++, d += 2) d[0] = t->data[4 * e + 2], d[1] = t->data[4 * e + 3];
    }
    *len = 8 + at + data;
    free(json);
    wgpt_safetensors_close(&st);
    return b;
}

// A container from its JSON header and `data` bytes (values i % 7).
static void put_json_(const char *name, const char *json, size_t data) {
    size_t h = strlen(json);
    unsigned char *b = malloc(8 + h + data);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, json, h);
    for (size_t i = 0; i < data; i++) b[8 + h + i] = (unsigned char)(i % 7);
    put_("safetensors", name, 0, b, 8 + h + data);
    free(b);
}

static void safetensors_(void) {
    size_t n, nb;
    char *config;
    unsigned char *b = tiny_gpt2_(&n, &config);
    size_t cl = strlen(config);
    unsigned char *with = malloc(cl + 1 + n);
    memcpy(with, config, cl + 1);  // the NUL separates them
    memcpy(with + cl + 1, b, n);
    put_("safetensors", "gpt2_tiny_with_config", 1, with, cl + 1 + n);
    put_("safetensors", "gpt2_tiny_no_config", 0, b, n);  // C=4: no head count from the shapes, refused
    unsigned char *bf = to_bf16_(b, n, &nb);
    memcpy(with + cl + 1, bf, nb);
    put_("safetensors", "gpt2_tiny_bf16_with_config", 1, with, cl + 1 + nb);
    free(bf), free(with), free(b), free(config);
    put_json_("container_valid", "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
              "\"data_offsets\":[0,24]},\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[24,28]},"
              "\"e\":{\"dtype\":\"I64\",\"shape\":[0],\"data_offsets\":[28,28]}}  ", 28);
    put_json_("overlap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
    put_json_("hole", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}", 4);
    put_json_("unknown_dtype", "{\"a\":{\"dtype\":\"Q4_0\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
    put_json_("nul_escape_in_name", "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
    put_json_("duplicate_name", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
              "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2);
    put_json_("past_the_end", "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4);
    put_json_("huge_shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[9007199254740992,4],\"data_offsets\":[0,4]}}", 4);
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
    safetensors_();
    return 0;
}
