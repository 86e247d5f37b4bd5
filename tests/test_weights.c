// test_weights.c: the weight formats on the host (no GPU): the safetensors
// reader's refusals, one per rule of safetensors.h, each naming the file and
// the tensor; Hugging Face GPT-2's name mapping (prefix or none, Conv1D
// transposes, lm_head tied present or absent, mask buffers ignored, sizes
// from config.json or from the shapes, F16/BF16); llm.c's version 3 and 5
// files; export then import giving back the same parameters bit for bit; and
// what a hostile or careless user found (issue 52): export onto odd targets,
// a config.json unreadable or read otherwise than transformers reads it, a
// half-finished HF export, a file truncated while read, a huge config.json.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

#include "cli/commands.h"

#include "train/checkpoint.h"
#include "train/export.h"
#include "train/model_file.h"
#include "weights/hf_config.h"
#include "weights/hf_gpt2.h"
#include "weights/llmc.h"
#include "weights/safetensors.h"

static char dir[] = "/tmp/wgpt_weights_XXXXXX";

static int group_setup(void **state) {
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

// A whole file, NUL-terminated (*len bytes before the NUL).
static char *read_all_(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    b[n] = 0;
    *len = (size_t)n;
    return b;
}

static const char *path_(const char *name) {
    static char p[8][700];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

// ---- safetensors: hand-made files ----

typedef struct blob_ {
    unsigned char *b;
    size_t n;
} blob_;

// The 8-byte length, the JSON as given, then `data` bytes of value i % 251.
static blob_ st_(const char *json, size_t data) {
    size_t h = strlen(json);
    blob_ r = {malloc(8 + h + data + 1), 8 + h + data};
    for (int i = 0; i < 8; i++) r.b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(r.b + 8, json, h);
    for (size_t i = 0; i < data; i++) r.b[8 + h + i] = (unsigned char)(i % 251);
    return r;
}

// Parses b; expects a refusal whose message starts with the label and holds `needle`.
static void refused_(blob_ b, const char *needle) {
    wgpt_safetensors st;
    char err[1024] = "";
    int rc = wgpt_safetensors_parse(&st, b.b, b.n, "f.safetensors", err, sizeof err);
    if (rc == 0) fail_msg("accepted, expected a refusal mentioning '%s'", needle);
    if (strncmp(err, "f.safetensors: ", 15) != 0) fail_msg("message does not name the file: %s", err);
    if (!strstr(err, needle)) fail_msg("message '%s' does not mention '%s'", err, needle);
    assert_null(st.tensors);
    free(b.b);
}

static void safetensors_reads_a_valid_file(void **s) {
    (void)s;
    blob_ b = st_("{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[24,28]},"
                  "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                  "\"e\":{\"dtype\":\"I64\",\"shape\":[0,5],\"data_offsets\":[28,28]},"
                  "\"s\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[28,30]}}   ",
                  30);
    wgpt_safetensors st;
    char err[512];
    if (wgpt_safetensors_parse(&st, b.b, b.n, "ok", err, sizeof err) < 0) fail_msg("%s", err);
    assert_int_equal(st.count, 4);
    const wgpt_st_tensor *a = wgpt_safetensors_find(&st, "a"), *sc = wgpt_safetensors_find(&st, "s");
    assert_non_null(a);
    assert_int_equal(a->ndim, 2);
    assert_int_equal(a->count, 6);
    assert_int_equal(a->dtype, WGPT_ST_F32);
    assert_ptr_equal(a->data, b.b + b.n - 30);
    assert_int_equal(wgpt_safetensors_find(&st, "e")->count, 0);
    assert_int_equal(sc->ndim, 0);
    assert_int_equal(sc->count, 1);
    assert_null(wgpt_safetensors_find(&st, "zz"));
    wgpt_safetensors_close(&st);
    free(b.b);
}

static void safetensors_refuses_bad_headers(void **s) {
    (void)s;
    blob_ b = st_("{}", 0);
    b.n = 5;
    refused_(b, "too short");
    b = st_("{}", 0);
    b.b[0] = 200;  // length past the end
    refused_(b, "header length 200");
    b = st_("{}", 0);
    b.b[0] = 1;
    refused_(b, "header length 1");
    b = st_("{}", 0);
    b.b[5] = 1;  // 2^40 + 2
    refused_(b, "outside [2, 100000000]");
    refused_(st_("[1,2]   ", 0), "does not start with '{'");
    b = st_("{\"a\" :{}}", 0);
    b.b[8 + 4] = 0;
    refused_(b, "NUL byte at byte 4");
    refused_(st_("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4), "\\u0000");
    refused_(st_("{\"\xc3\x28\":{}}", 0), "not UTF-8");
    refused_(st_("{\"\xed\xa0\x80\":{}}", 0), "not UTF-8");  // a surrogate
    refused_(st_("{\"a\":", 0), "not valid JSON");
    refused_(st_("{} x", 0), "after the JSON header");
    refused_(st_("{\"__metadata__\":{\"k\":1}}", 0), "__metadata__");
}

static void safetensors_refuses_bad_tensors(void **s) {
    (void)s;
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8), "'t' appears twice");
    refused_(st_("{\"t\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), "'t': unknown dtype 'Q4'");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4), "'t': a shape entry");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4), "'t': a shape entry");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", 4), "'t': a shape entry");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4),
             "'t': shape is not an array of at most 8");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,4]}}", 4),
             "'t': shape overflows");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4), "'t': data_offsets [0, 4] do not hold");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4), "'t': data_offsets [4, 0]");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4), "'t': data_offsets is not");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 4), "'t': data_offsets [4, 8] run past");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"u\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8), "'u' overlaps tensor 't'");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8), "bytes [0, 4) of the data");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6), "bytes [4, 6) at the end");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"shape\":[1],\"data_offsets\":[0,4]}}", 4), "'shape' given twice");
    refused_(st_("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4), "unknown field 'x'");
    refused_(st_("{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4), "'t': missing 'dtype'");
    refused_(st_("{\"t\":[1]}", 4), "'t': not a JSON object");
}

static void safetensors_open_refuses_what_is_no_file(void **s) {
    (void)s;
    wgpt_safetensors st;
    char err[1024];
    assert_int_equal(wgpt_safetensors_open(&st, path_("none.safetensors"), err, sizeof err), -1);
    assert_non_null(strstr(err, "none.safetensors: cannot open"));
    mkfifo(path_("fifo"), 0600);  // must not hang
    assert_int_equal(wgpt_safetensors_open(&st, path_("fifo"), err, sizeof err), -1);
    assert_non_null(strstr(err, "not a regular file"));
    FILE *f = fopen(path_("empty.safetensors"), "wb");
    fclose(f);
    assert_int_equal(wgpt_safetensors_open(&st, path_("empty.safetensors"), err, sizeof err), -1);
    assert_non_null(strstr(err, "too short"));
}

static void half_floats_widen_exactly(void **s) {
    (void)s;
    // F16 bits -> value: 1, -2, 65504 (largest), 2^-14 (smallest normal), 2^-24 (smallest subnormal), -0, Inf
    const uint16_t h[] = {0x3c00, 0xc000, 0x7bff, 0x0400, 0x0001, 0x8000, 0x7c00, 0x03ff};
    const float want[] = {1.0f, -2.0f, 65504.0f, 0x1p-14f, 0x1p-24f, -0.0f, INFINITY, 0x3ffp-24f};
    unsigned char raw[16];
    for (int i = 0; i < 8; i++) raw[2 * i] = (unsigned char)h[i], raw[2 * i + 1] = (unsigned char)(h[i] >> 8);
    wgpt_st_tensor t = {.name = "x", .dtype = WGPT_ST_F16, .ndim = 1, .shape = {8}, .count = 8, .data = raw, .nbytes = 16};
    for (int i = 0; i < 8; i++) {
        float v = wgpt_st_get_f32(&t, (uint64_t)i);
        if (memcmp(&v, &want[i], 4) != 0) fail_msg("f16 %04x -> %a, expected %a", h[i], v, want[i]);
    }
    const uint16_t bf[] = {0x3f80, 0xc040, 0x0001};  // 1, -3, the smallest subnormal 2^-133
    t.dtype = WGPT_ST_BF16;
    for (int i = 0; i < 3; i++) raw[2 * i] = (unsigned char)bf[i], raw[2 * i + 1] = (unsigned char)(bf[i] >> 8);
    assert_true(wgpt_st_get_f32(&t, 0) == 1.0f);
    assert_true(wgpt_st_get_f32(&t, 1) == -3.0f);
    assert_true(wgpt_st_get_f32(&t, 2) == 0x1p-133f);
}

// The bulk conversion (a model's read) gives what the element one does, for
// all 65536 halves and bf16s, and says whether any was NaN or Inf.
static void bulk_conversion_matches_elements(void **s) {
    (void)s;
    unsigned char *raw = malloc(2 * 65536);
    float *got = malloc(65536 * sizeof *got);
    assert_non_null(raw), assert_non_null(got);
    for (uint32_t i = 0; i < 65536; i++) raw[2 * i] = (unsigned char)i, raw[2 * i + 1] = (unsigned char)(i >> 8);
    wgpt_st_tensor t = {.name = "x", .dtype = WGPT_ST_F16, .ndim = 1, .shape = {65536}, .count = 65536, .data = raw,
                        .nbytes = 2 * 65536};
    for (int d = 0; d < 2; d++) {
        t.dtype = d ? WGPT_ST_BF16 : WGPT_ST_F16;
        assert_int_equal(wgpt_st_get_f32_run(&t, 0, 65536, got), 0);  // holds Inf and NaN
        for (uint32_t i = 0; i < 65536; i++) {
            float v = wgpt_st_get_f32(&t, i);
            if (memcmp(&v, &got[i], 4) != 0) fail_msg("%s %04x: bulk %a, element %a", d ? "bf16" : "f16", i, got[i], v);
        }
        uint32_t fin = d ? 0x7f7f : 0x7bff;  // the largest finite: the run below it is all finite
        assert_int_equal(wgpt_st_get_f32_run(&t, 0, fin + 1, got), 1);
        assert_int_equal(wgpt_st_get_f32_run(&t, fin, 2, got), 0);
    }
    float f[3] = {1.0f, -0.0f, 3.5f};
    t.dtype = WGPT_ST_F32, t.data = (const unsigned char *)f, t.count = 3, t.shape[0] = 3, t.nbytes = 12;
    assert_int_equal(wgpt_st_get_f32_run(&t, 0, 3, got), 1);
    assert_memory_equal(got, f, sizeof f);
    f[1] = NAN;
    assert_int_equal(wgpt_st_get_f32_run(&t, 0, 3, got), 0);
    free(raw), free(got);
}

// ---- Hugging Face GPT-2 ----

static const wgpt_gpt2_config CFG = {.max_seq_len = 16, .vocab_size = 50, .padded_vocab_size = 128,
                                     .num_layers = 2, .num_heads = 2, .channels = 128};  // C % 64 == 0: shapes suffice

static float *random_params_(const wgpt_gpt2_config *c) {
    size_t n = wgpt_gpt2_num_params(c);
    float *p = malloc(n * sizeof *p);
    tu_fill(p, n, -1.0f, 1.0f);
    for (size_t i = (size_t)c->vocab_size * c->channels; i < (size_t)c->padded_vocab_size * c->channels; i++) p[i] = 0;
    return p;
}

static void write_hf_(const char *d, const float *params) {
    wgpt_weights w = {.config = CFG, .params = (float *)params};
    char err[1024];
    if (wgpt_hf_gpt2_write(d, &w, err, sizeof err) < 0) fail_msg("%s", err);
}

static void hf_export_then_import_is_bit_identical(void **s) {
    (void)s;
    float *p = random_params_(&CFG);
    write_hf_(path_("hf"), p);
    wgpt_weights w;
    char err[1024];
    if (wgpt_model_file_read(path_("hf"), 1, &w, err, sizeof err) < 0) fail_msg("%s", err);
    assert_memory_equal(&w.config, &CFG, sizeof CFG);
    assert_memory_equal(w.params, p, wgpt_gpt2_num_params(&CFG) * sizeof(float));
    assert_string_equal(w.format, "Hugging Face GPT-2 safetensors (F32)");
    assert_string_equal(w.tokenizer, "");  // 50 ids: neither gpt2 nor bytes
    wgpt_weights_free(&w);
    free(p);
}

// The names, shapes and order of what export writes: GPT2LMHeadModel's
// state_dict (transformers) less lm_head.weight, which is tied to wte and
// which save_pretrained leaves out, and the causal-mask buffers (not
// persistent). The Conv1D weights are (in, out).
static void hf_export_has_gpt2lmheadmodel_keys(void **s) {
    (void)s;
    float *p = random_params_(&CFG);
    write_hf_(path_("keys"), p);
    wgpt_safetensors st;
    char err[1024];
    if (wgpt_safetensors_open(&st, path_("keys/model.safetensors"), err, sizeof err) < 0) fail_msg("%s", err);
    const uint64_t C = CFG.channels;
    struct { const char *name; uint64_t d0, d1; } want[] = {
        {"transformer.wte.weight", 50, C}, {"transformer.wpe.weight", 16, C},
        {"transformer.ln_f.weight", C, 0}, {"transformer.ln_f.bias", C, 0}};
    for (size_t i = 0; i < 4; i++) {
        const wgpt_st_tensor *t = wgpt_safetensors_find(&st, want[i].name);
        if (!t) fail_msg("no %s", want[i].name);
        assert_int_equal(t->shape[0], want[i].d0);
        if (want[i].d1) assert_int_equal(t->shape[1], want[i].d1);
        assert_int_equal(t->dtype, WGPT_ST_F32);
    }
    const char *block[] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                           "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                           "mlp.c_proj.weight", "mlp.c_proj.bias"};
    const uint64_t shape[12][2] = {{C, 0}, {C, 0}, {C, 3 * C}, {3 * C, 0}, {C, C}, {C, 0}, {C, 0}, {C, 0},
                                   {C, 4 * C}, {4 * C, 0}, {4 * C, C}, {C, 0}};
    for (uint32_t l = 0; l < 2; l++)
        for (int k = 0; k < 12; k++) {
            char name[96];
            snprintf(name, sizeof name, "transformer.h.%u.%s", l, block[k]);
            const wgpt_st_tensor *t = wgpt_safetensors_find(&st, name);
            if (!t) fail_msg("no %s", name);
            assert_int_equal(t->ndim, shape[k][1] ? 2 : 1);
            assert_int_equal(t->shape[0], shape[k][0]);
            if (shape[k][1]) assert_int_equal(t->shape[1], shape[k][1]);
        }
    assert_int_equal(st.count, 4 + 2 * 12);  // nothing else: from_pretrained reports no unexpected key
    // c_attn is the transpose of qkvw: HF [in][out] = ours [out][in]
    const wgpt_st_tensor *qkv = wgpt_safetensors_find(&st, "transformer.h.1.attn.c_attn.weight");
    size_t sizes[WGPT_GPT2_NUM_TENSORS], off = 0;
    wgpt_gpt2_param_sizes(&CFG, sizes);
    for (int t = 0; t < 4; t++) off += sizes[t];
    off += sizes[4] / 2;  // layer 1
    assert_true(wgpt_st_get_f32(qkv, 5 * 3 * C + 7) == p[off + 7 * C + 5]);
    wgpt_safetensors_close(&st);
    // config.json: what GPT2Config needs
    size_t len = 0;
    char *text = read_all_(path_("keys/config.json"), &len);
    wgpt_gpt2_config back;
    if (wgpt_hf_config_parse(text, len, "config.json", &back, err, sizeof err) < 0) fail_msg("%s", err);
    assert_memory_equal(&back, &CFG, sizeof CFG);
    assert_non_null(strstr(text, "\"architectures\":\t[\"GPT2LMHeadModel\"]"));
    assert_non_null(strstr(text, "\"model_type\":\t\"gpt2\""));
    assert_non_null(strstr(text, "\"tie_word_embeddings\":\ttrue"));
    free(text);
    free(p);
}

// ---- HF variants, written by the test's own mapping ----

typedef struct tt_ {
    char name[96];
    uint32_t ndim;
    uint64_t shape[4];
    float *data;  // owned
} tt_;

enum { MAXT = 64 };
static tt_ list_[MAXT];
static int nlist_;

static void add_(const char *name, uint32_t ndim, uint64_t d0, uint64_t d1, const float *src, int transpose) {
    tt_ *t = &list_[nlist_++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0, t->shape[1] = d1;
    size_t n = ndim == 2 ? d0 * d1 : d0;
    t->data = malloc(n * sizeof *t->data);
    for (size_t i = 0; i < n; i++)  // transpose: src is (d1, d0), ours (out, in); the file holds (in, out)
        t->data[i] = transpose ? src[(i % d1) * d0 + i / d1] : src[i];
}

// The HF tensors of params, with the prefix given, in list_.
static void hf_list_(const float *p, const char *prefix) {
    for (int i = 0; i < nlist_; i++) free(list_[i].data);
    nlist_ = 0;
    const uint64_t C = CFG.channels, V = CFG.vocab_size, L = CFG.num_layers;
    size_t sizes[WGPT_GPT2_NUM_TENSORS], base[WGPT_GPT2_NUM_TENSORS];
    wgpt_gpt2_param_sizes(&CFG, sizes);
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) base[t] = t ? base[t - 1] + sizes[t - 1] : 0;
    char n[96];
    snprintf(n, sizeof n, "%swte.weight", prefix);
    add_(n, 2, V, C, p + base[0], 0);
    snprintf(n, sizeof n, "%swpe.weight", prefix);
    add_(n, 2, CFG.max_seq_len, C, p + base[1], 0);
    const char *names[12] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                             "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                             "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
    const uint64_t in[12] = {C, C, C, 3 * C, C, C, C, C, C, 4 * C, 4 * C, C}, out[12] = {0, 0, 3 * C, 0, C, 0, 0, 0, 4 * C, 0, C, 0};
    for (uint64_t l = 0; l < L; l++)
        for (int k = 0; k < 12; k++) {
            snprintf(n, sizeof n, "%sh.%llu.%s", prefix, (unsigned long long)l, names[k]);
            const float *src = p + base[2 + k] + l * (sizes[2 + k] / L);
            add_(n, out[k] ? 2 : 1, in[k], out[k], src, out[k] != 0);
        }
    snprintf(n, sizeof n, "%sln_f.weight", prefix);
    add_(n, 1, C, 0, p + base[14], 0);
    snprintf(n, sizeof n, "%sln_f.bias", prefix);
    add_(n, 1, C, 0, p + base[15], 0);
}

static void write_list_(const char *path) {
    wgpt_st_spec spec[MAXT];
    for (int i = 0; i < nlist_; i++) {
        spec[i] = (wgpt_st_spec){.name = list_[i].name, .ndim = list_[i].ndim};
        memcpy(spec[i].shape, list_[i].shape, sizeof list_[i].shape);
    }
    size_t hl;
    char err[256];
    unsigned char *h = wgpt_safetensors_header(spec, (size_t)nlist_, NULL, NULL, &hl, err, sizeof err);
    assert_non_null(h);
    FILE *f = fopen(path, "wb");
    fwrite(h, 1, hl, f);
    for (int i = 0; i < nlist_; i++)
        fwrite(list_[i].data, 4, list_[i].ndim == 2 ? list_[i].shape[0] * list_[i].shape[1] : list_[i].shape[0], f);
    fclose(f);
    free(h);
}

static void read_ok_(const char *path, const float *want) {
    wgpt_weights w;
    char err[1024];
    if (wgpt_model_file_read(path, 1, &w, err, sizeof err) < 0) fail_msg("%s: %s", path, err);
    assert_memory_equal(&w.config, &CFG, sizeof CFG);
    assert_memory_equal(w.params, want, wgpt_gpt2_num_params(&CFG) * sizeof(float));
    wgpt_weights_free(&w);
}

static void read_refused_(const char *path, const char *needle) {
    wgpt_weights w;
    char err[2048] = "";
    if (wgpt_model_file_read(path, 1, &w, err, sizeof err) == 0) fail_msg("%s accepted; expected '%s'", path, needle);
    if (!strstr(err, needle)) fail_msg("message '%s' does not mention '%s'", err, needle);
    assert_null(w.params);
}

static void hf_names_with_or_without_prefix_and_extras(void **s) {
    (void)s;
    float *p = random_params_(&CFG);
    hf_list_(p, "");  // as the hub's gpt2 files: no prefix, with the mask buffers
    float mask[16 * 16];
    tu_fill(mask, 256, 0, 1);
    add_("h.0.attn.bias", 1, 256, 0, mask, 0);
    add_("h.1.attn.masked_bias", 1, 1, 0, mask, 0);
    write_list_(path_("bare.safetensors"));  // no config.json beside it: sizes from the shapes
    read_ok_(path_("bare.safetensors"), p);
    hf_list_(p, "transformer.");
    add_("lm_head.weight", 2, CFG.vocab_size, CFG.channels, p, 0);  // tied: equal to wte
    write_list_(path_("prefixed.safetensors"));
    read_ok_(path_("prefixed.safetensors"), p);

    list_[nlist_ - 1].data[3] += 1.0f;  // an untied lm_head
    write_list_(path_("untied.safetensors"));
    read_refused_(path_("untied.safetensors"), "lm_head.weight differs from wte.weight at element 3");
    hf_list_(p, "transformer.");
    add_("transformer.h.0.attn.extra", 1, 4, 0, p, 0);
    write_list_(path_("extra.safetensors"));
    read_refused_(path_("extra.safetensors"), "unexpected tensor 'transformer.h.0.attn.extra'");
    hf_list_(p, "");
    add_("transformer.wpe.weight", 2, CFG.max_seq_len, CFG.channels, p, 0);
    write_list_(path_("both.safetensors"));
    read_refused_(path_("both.safetensors"), "both 'wpe.weight' and 'transformer.wpe.weight'");
    hf_list_(p, "");
    snprintf(list_[5].name, sizeof list_[5].name, "h.0.attn.c_attn.wrong");
    write_list_(path_("missing.safetensors"));
    read_refused_(path_("missing.safetensors"), "tensor 'h.0.attn.c_attn.bias' is missing");
    hf_list_(p, "");
    list_[4].shape[0] = 3 * CFG.channels, list_[4].shape[1] = CFG.channels;  // c_attn in nn.Linear's layout
    write_list_(path_("linear.safetensors"));
    read_refused_(path_("linear.safetensors"), "'h.0.attn.c_attn.weight' has shape (384, 128); the model's sizes need (128, 384)");
    hf_list_(p, "");
    list_[8].data[17] = NAN;
    write_list_(path_("nan.safetensors"));
    read_refused_(path_("nan.safetensors"), "tensor 'h.0.ln_2.weight' element 17 is NaN");
    free(p);
}

static void write_text_(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

// config.json text of a folder wgpt exported, with the export id its weights
// carry added (without it the pair is refused: see hf_export_onto_a_folder_is_all_or_nothing).
static void write_config_(const char *folder, const char *json) {
    char cfg[800], id[64], text[2048];
    snprintf(cfg, sizeof cfg, "%s/config.json", folder);
    size_t n;
    char *old = read_all_(cfg, &n);
    wgpt_hf_config_export_id(old, n, id, sizeof id);
    free(old);
    assert_true(id[0] != 0);
    snprintf(text, sizeof text, "%.*s, \"wgpt_export_id\": \"%s\"}", (int)(strrchr(json, '}') - json), json, id);
    write_text_(cfg, text);
}

static void hf_config_json_sizes_and_refusals(void **s) {
    (void)s;
    wgpt_gpt2_config c;
    char err[1024];
    const char *ok = "{\"n_layer\": 3, \"n_head\": 5, \"n_embd\": 80, \"n_ctx\": 40, \"vocab_size\": 300, "
                     "\"activation_function\": \"gelu_pytorch_tanh\", \"n_inner\": null}";
    if (wgpt_hf_config_parse(ok, strlen(ok), "c.json", &c, err, sizeof err) < 0) fail_msg("%s", err);
    const wgpt_gpt2_config want = {.max_seq_len = 40, .vocab_size = 300, .padded_vocab_size = 384, .num_layers = 3,
                                   .num_heads = 5, .channels = 80};
    assert_memory_equal(&c, &want, sizeof c);
    assert_int_equal(wgpt_hf_config_parse("{}", 2, "c.json", &c, err, sizeof err), 0);  // GPT2Config's defaults: 124M
    assert_int_equal(c.num_layers, 12);
    assert_int_equal(c.channels, 768);
    assert_int_equal(c.padded_vocab_size, 50304);
    const char *bad[][2] = {
        {"{\"activation_function\": \"relu\"}", "activation_function relu"},
        {"{\"layer_norm_epsilon\": 1e-6}", "layer_norm_epsilon"},
        {"{\"n_inner\": 1000}", "n_inner"},
        {"{\"model_type\": \"llama\"}", "model_type is llama"},
        {"{\"scale_attn_by_inverse_layer_idx\": true}", "scale_attn_by_inverse_layer_idx"},
        {"{\"n_head\": 7}", "768 channels are not a multiple of 7 heads"},
        {"{\"n_layer\": 0}", "n_layer is not a whole number"},
        {"{\"n_layer\": 2.5}", "n_layer is not a whole number"},
        {"[1]", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (wgpt_hf_config_parse(bad[i][0], strlen(bad[i][0]), "c.json", &c, err, sizeof err) == 0)
            fail_msg("accepted %s", bad[i][0]);
        if (strncmp(err, "c.json: ", 8) != 0 || !strstr(err, bad[i][1])) fail_msg("'%s' for %s", err, bad[i][0]);
    }
    // a folder: config.json's sizes must agree with the shapes
    float *p = random_params_(&CFG);
    write_hf_(path_("cfg"), p);
    write_config_(path_("cfg"), "{\"n_layer\": 3, \"n_head\": 2, \"n_embd\": 128, \"n_positions\": 16, \"vocab_size\": 50}");
    read_refused_(path_("cfg"), "tensor 'h.2.ln_1.weight' is missing");
    write_config_(path_("cfg"), "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 128, \"n_positions\": 16, \"vocab_size\": 50}");
    read_refused_(path_("cfg"), "unexpected tensor 'transformer.h.1.attn.c_attn.bias': not part of a 1-layer GPT-2");
    write_config_(path_("cfg"), "{\"n_layer\": 2, \"n_head\": 4, \"n_embd\": 128, \"n_positions\": 16, \"vocab_size\": 50}");
    wgpt_weights w;  // heads come from config.json, not the shapes
    if (wgpt_model_file_read(path_("cfg"), 0, &w, err, sizeof err) < 0) fail_msg("%s", err);
    assert_int_equal(w.config.num_heads, 4);
    assert_null(w.params);
    // the same model file named directly picks up config.json beside it
    if (wgpt_model_file_read(path_("cfg/model.safetensors"), 0, &w, err, sizeof err) < 0) fail_msg("%s", err);
    assert_int_equal(w.config.num_heads, 4);
    mkdir(path_("sharded"), 0777);
    write_text_(path_("sharded/model.safetensors.index.json"), "{}");
    read_refused_(path_("sharded"), "sharded checkpoint");
    mkdir(path_("pickle"), 0777);
    write_text_(path_("pickle/pytorch_model.bin"), "x");
    read_refused_(path_("pickle"), "only pytorch_model.bin");
    write_text_(path_("junk.bin"), "just some text, no model");
    read_refused_(path_("junk.bin"), "not a model file wgpt reads");
    free(p);
}

// ---- llm.c ----

static void put32_(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

// An llm.c file as train_gpt2.py writes it: header, then params (bf16: the top halves).
static void write_llmc_(const char *path, uint32_t version, const wgpt_gpt2_config *c, const float *p, size_t cut) {
    unsigned char h[1024] = {0};
    uint32_t f[8] = {20240326, version, c->max_seq_len, c->vocab_size, c->num_layers, c->num_heads, c->channels,
                     c->padded_vocab_size};
    for (int i = 0; i < 8; i++) put32_(h + 4 * i, f[i]);
    FILE *o = fopen(path, "wb");
    fwrite(h, 1, sizeof h, o);
    size_t n = wgpt_gpt2_num_params(c) - cut;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &p[i], 4);
        if (version == 5) {
            uint16_t b = (uint16_t)(u >> 16);
            fwrite(&b, 2, 1, o);
        } else {
            fwrite(&u, 4, 1, o);
        }
    }
    fclose(o);
}

static void llmc_files_in_and_out(void **s) {
    (void)s;
    float *p = random_params_(&CFG);
    wgpt_weights w = {.config = CFG, .params = p}, r;
    char err[1024];
    if (wgpt_llmc_write(path_("m.bin"), &w, err, sizeof err) < 0) fail_msg("%s", err);
    read_ok_(path_("m.bin"), p);
    assert_int_equal(wgpt_model_file_read(path_("m.bin"), 0, &r, err, sizeof err), 0);
    assert_string_equal(r.format, "llm.c model file, version 3 (fp32)");
    write_llmc_(path_("m5.bin"), 5, &CFG, p, 0);
    size_t n = wgpt_gpt2_num_params(&CFG);
    float *bf = malloc(n * sizeof *bf);
    for (size_t i = 0; i < n; i++) {  // what bf16 keeps of each float: its top 16 bits
        uint32_t u;
        memcpy(&u, &p[i], 4);
        u &= 0xffff0000u;
        memcpy(&bf[i], &u, 4);
    }
    read_ok_(path_("m5.bin"), bf);
    write_llmc_(path_("m4.bin"), 4, &CFG, p, 0);
    read_refused_(path_("m4.bin"), "version 4; wgpt reads version 3 (fp32) and 5 (bf16)");
    write_llmc_(path_("cut.bin"), 3, &CFG, p, 1);
    read_refused_(path_("cut.bin"), "needs");
    wgpt_gpt2_config odd = CFG;
    odd.num_heads = 3;
    write_llmc_(path_("odd.bin"), 3, &odd, p, 0);
    read_refused_(path_("odd.bin"), "128 channels are not a multiple of 3 heads");
    p[5] = INFINITY;
    write_llmc_(path_("inf.bin"), 3, &CFG, p, 0);
    read_refused_(path_("inf.bin"), "wte element 5 is Inf");
    free(bf);
    free(p);
}

// ---- export from a wgpt checkpoint ----

static void export_from_a_checkpoint_round_trips(void **s) {
    (void)s;
    const wgpt_gpt2_config c = {.max_seq_len = 32, .vocab_size = 256, .padded_vocab_size = 256, .num_layers = 2,
                                .num_heads = 4, .channels = 48};
    size_t n = wgpt_gpt2_num_params(&c);
    float *p = malloc(n * sizeof *p);
    tu_fill(p, n, -0.5f, 0.5f);
    wgpt_checkpoint ck = {.config = c, .step = 7, .tokenizer = "bytes", .params = p};
    char err[1024];
    if (wgpt_checkpoint_write(path_("x.ckpt"), &ck, err, sizeof err) < 0) fail_msg("%s", err);
    if (wgpt_export(path_("x.ckpt"), "hf", path_("x_hf"), 0, err, sizeof err) < 0) fail_msg("%s", err);
    if (wgpt_export(path_("x.ckpt"), "llmc", path_("x.bin"), 0, err, sizeof err) < 0) fail_msg("%s", err);
    if (wgpt_export(path_("x_hf"), "llmc", path_("x2.bin"), 0, err, sizeof err) < 0) fail_msg("%s", err);
    const char *back[3] = {"x_hf", "x.bin", "x2.bin"};
    for (int i = 0; i < 3; i++) {
        wgpt_weights w;
        if (wgpt_model_file_read(path_(back[i]), 1, &w, err, sizeof err) < 0) fail_msg("%s", err);
        assert_memory_equal(&w.config, &c, sizeof c);
        assert_memory_equal(w.params, p, n * sizeof(float));  // bit for bit
        assert_string_equal(w.tokenizer, "bytes");           // 256 ids
        wgpt_weights_free(&w);
    }
    assert_int_equal(wgpt_export(path_("x.ckpt"), "onnx", path_("y"), 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown export format 'onnx' (hf or llmc)"));
    p[(size_t)200 * 48] = 0;  // padded rows must be zero for hf: V=200 < Vp=256
    wgpt_checkpoint ck2 = ck;
    ck2.config.vocab_size = 200;
    p[(size_t)210 * 48 + 1] = 0.5f;
    if (wgpt_checkpoint_write(path_("pad.ckpt"), &ck2, err, sizeof err) < 0) fail_msg("%s", err);
    assert_int_equal(wgpt_export(path_("pad.ckpt"), "hf", path_("pad_hf"), 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "padding rows (200..256) are not zero"));
    free(p);
}


// ---- reliability round 3 (issue 52) ----

static wgpt_gpt2_config cfg_heads_(uint32_t C, uint32_t NH) {
    return (wgpt_gpt2_config){.max_seq_len = 16, .vocab_size = 50, .padded_vocab_size = 128, .num_layers = 1,
                              .num_heads = NH, .channels = C};
}

static void write_hf_cfg_(const char *d, const wgpt_gpt2_config *c, const float *p) {
    wgpt_weights w = {.config = *c, .params = (float *)p};
    char err[1024];
    if (wgpt_hf_gpt2_write(d, &w, err, sizeof err) < 0) fail_msg("%s", err);
}

// `wgpt export ARGS...` as the command runs it; its exit status.
static int export_(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5, const char *a6,
                   const char *a7) {
    char *argv[9] = {"export", (char *)a1, (char *)a2, (char *)a3, (char *)a4, (char *)a5, (char *)a6, (char *)a7, NULL};
    int argc = 1;
    while (argc < 8 && argv[argc]) argc++;
    fflush(stdout), fflush(stderr);
    return wgpt_cmd_export(argc, argv);
}

static void write_ckpt_(const char *path, const wgpt_gpt2_config *c, const float *p) {
    wgpt_checkpoint ck = {.config = *c, .step = 3, .tokenizer = "bytes", .params = (float *)p};
    char err[1024];
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) < 0) fail_msg("%s", err);
}

static int reads_as_checkpoint_(const char *path) {
    wgpt_checkpoint ck;
    char err[1024];
    if (wgpt_checkpoint_read(path, &ck, err, sizeof err) < 0) return 0;
    wgpt_checkpoint_free(&ck);
    return 1;
}

// H1: an --out that exists and is no regular file (a FIFO; as root /dev/null)
// is refused and left as it is, for both formats.
static void export_refuses_an_out_that_is_no_regular_file(void **s) {
    (void)s;
    float *p = random_params_(&CFG);
    write_ckpt_(path_("h1.ckpt"), &CFG, p);
    assert_int_equal(mkfifo(path_("h1.fifo"), 0600), 0);
    assert_int_equal(export_(path_("h1.ckpt"), "--format", "llmc", "--out", path_("h1.fifo"), NULL, NULL), 1);
    struct stat sb;
    assert_int_equal(stat(path_("h1.fifo"), &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));
    // hf: a FIFO where model.safetensors goes
    assert_int_equal(mkdir(path_("h1_hf"), 0777), 0);
    assert_int_equal(mkfifo(path_("h1_hf/model.safetensors"), 0600), 0);
    assert_int_equal(export_(path_("h1.ckpt"), "--format", "hf", "--out", path_("h1_hf"), NULL, NULL), 1);
    assert_int_equal(stat(path_("h1_hf/model.safetensors"), &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));
    assert_int_equal(access(path_("h1_hf/config.json"), F_OK), -1);  // nothing half written
    free(p);
}

// M3: --out equal to the input (by name, by a symlink, by a hard link) is
// refused; an existing file of another kind is replaced only with --force;
// an earlier export of the same kind is simply replaced.
static void export_refuses_its_input_and_other_kinds_without_force(void **s) {
    (void)s;
    float *p = random_params_(&CFG);
    write_ckpt_(path_("m3.ckpt"), &CFG, p);
    assert_int_equal(symlink(path_("m3.ckpt"), path_("m3_link.ckpt")), 0);
    assert_int_equal(link(path_("m3.ckpt"), path_("m3_hard.ckpt")), 0);
    const char *same[3] = {"m3.ckpt", "m3_link.ckpt", "m3_hard.ckpt"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(export_(path_("m3.ckpt"), "--format", "llmc", "--out", path_(same[i]), NULL, NULL), 1);
        assert_int_equal(export_(path_("m3.ckpt"), "--format", "llmc", "--out", path_(same[i]), "--force", NULL), 1);
        assert_true(reads_as_checkpoint_(path_("m3.ckpt")));  // still a checkpoint: train can resume
    }
    write_hf_(path_("m3_hf"), p);
    assert_int_equal(export_(path_("m3_hf"), "--format", "hf", "--out", path_("m3_hf"), NULL, NULL), 1);
    assert_int_equal(export_(path_("m3_hf/model.safetensors"), "--format", "hf", "--out", path_("m3_hf"), NULL, NULL), 1);
    // another kind: a checkpoint where the llm.c file would go
    write_ckpt_(path_("m3_other.ckpt"), &CFG, p);
    assert_int_equal(export_(path_("m3.ckpt"), "--format", "llmc", "--out", path_("m3_other.ckpt"), NULL, NULL), 1);
    assert_true(reads_as_checkpoint_(path_("m3_other.ckpt")));
    assert_int_equal(export_(path_("m3.ckpt"), "--format", "llmc", "--out", path_("m3_other.ckpt"), "--force", NULL), 0);
    assert_false(reads_as_checkpoint_(path_("m3_other.ckpt")));
    // the same kind: replaced without --force
    assert_int_equal(export_(path_("m3.ckpt"), "--format", "llmc", "--out", path_("m3_other.ckpt"), NULL, NULL), 0);
    wgpt_weights w;
    char err[1024];
    if (wgpt_model_file_read(path_("m3_other.ckpt"), 1, &w, err, sizeof err) < 0) fail_msg("%s", err);
    assert_memory_equal(w.params, p, wgpt_gpt2_num_params(&CFG) * sizeof(float));
    wgpt_weights_free(&w);
    free(p);
}

// M1: a config.json that is there but cannot be read (a dangling symlink as an
// interrupted Hugging Face download leaves, a folder, a FIFO, a symlink loop)
// is an error naming it: the heads are never guessed from the shapes.
static void config_json_there_but_unreadable_is_an_error(void **s) {
    (void)s;
    wgpt_gpt2_config c4 = cfg_heads_(128, 4);  // the shapes alone would say 2 heads
    float *p = random_params_(&c4);
    const char *kinds[4] = {"dangling", "folder", "fifo", "loop"};
    char err[1024], d[64], cfg[700];
    for (int i = 0; i < 4; i++) {
        snprintf(d, sizeof d, "m1_%s", kinds[i]);
        write_hf_cfg_(path_(d), &c4, p);
        snprintf(cfg, sizeof cfg, "%s/config.json", path_(d));
        assert_int_equal(unlink(cfg), 0);
        if (i == 0) assert_int_equal(symlink(path_("m1_nowhere/config.json"), cfg), 0);
        if (i == 1) assert_int_equal(mkdir(cfg, 0777), 0);
        if (i == 2) assert_int_equal(mkfifo(cfg, 0600), 0);
        if (i == 3) assert_int_equal(symlink(cfg, cfg), 0);
        wgpt_weights w;
        if (wgpt_model_file_read(path_(d), 0, &w, err, sizeof err) == 0)
            fail_msg("%s: read with %u heads", kinds[i], w.config.num_heads);
        printf("  %s: %s\n", kinds[i], err);
        if (!strstr(err, cfg)) fail_msg("'%s' does not name %s", err, cfg);
    }
    free(p);
    // C = 96, not a multiple of 64: the message does not ask for the config.json that is there
    wgpt_gpt2_config c96 = cfg_heads_(96, 2);
    p = random_params_(&c96);
    write_hf_cfg_(path_("m1_96"), &c96, p);
    assert_int_equal(unlink(path_("m1_96/config.json")), 0);
    assert_int_equal(symlink(path_("m1_nowhere/config.json"), path_("m1_96/config.json")), 0);
    wgpt_weights w;
    assert_int_equal(wgpt_model_file_read(path_("m1_96"), 0, &w, err, sizeof err), -1);
    printf("  C=96: %s\n", err);
    assert_non_null(strstr(err, "m1_96/config.json"));
    assert_null(strstr(err, "put the model's config.json beside"));
    free(p);
}

// Runs wgpt_export in a child with files limited to `limit` bytes (a disk that
// fills up); returns the child's exit status (its export's return, 0 or 1).
static int export_with_size_limit_(const char *in, const char *format, const char *out, rlim_t limit) {
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit lim;
        getrlimit(RLIMIT_FSIZE, &lim);
        lim.rlim_cur = limit;
        signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of death
        setrlimit(RLIMIT_FSIZE, &lim);
        char err[1024];
        int rc = wgpt_export(in, format, out, 0, err, sizeof err);
        if (rc < 0) printf("  export failed as the disk filled: %s\n", err);
        fflush(stdout);
        _exit(rc < 0 ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

// M2: export --format hf onto an existing folder changes config.json and
// model.safetensors together or not at all: a disk that fills up while the
// weights are written leaves the old pair, and a mixture (new weights beside
// the old config.json, as a crash between the two renames could leave) is
// refused by every reader.
static void hf_export_onto_a_folder_is_all_or_nothing(void **s) {
    (void)s;
    wgpt_gpt2_config a = cfg_heads_(128, 4), b = cfg_heads_(128, 2);  // the same shapes, other heads
    float *pa = random_params_(&a), *pb = random_params_(&b);
    write_hf_cfg_(path_("m2"), &a, pa);
    write_ckpt_(path_("m2_b.ckpt"), &b, pb);
    assert_int_equal(export_with_size_limit_(path_("m2_b.ckpt"), "hf", path_("m2"), 65536), 1);
    wgpt_weights w;
    char err[1024];
    if (wgpt_model_file_read(path_("m2"), 1, &w, err, sizeof err) < 0) fail_msg("%s", err);
    assert_int_equal(w.config.num_heads, 4);  // the old config.json ...
    assert_memory_equal(w.params, pa, wgpt_gpt2_num_params(&a) * sizeof(float));  // ... with the old weights
    wgpt_weights_free(&w);
    DIR *dd = opendir(path_("m2"));  // and nothing else left there
    struct dirent *e;
    int files = 0;
    while ((e = readdir(dd)))
        if (e->d_name[0] != '.') files++;
    closedir(dd);
    assert_int_equal(files, 2);
    // new weights beside the old config.json: refused, naming both
    if (wgpt_export(path_("m2_b.ckpt"), "hf", path_("m2_b"), 0, err, sizeof err) < 0) fail_msg("%s", err);
    size_t n;
    char *st = read_all_(path_("m2_b/model.safetensors"), &n);
    FILE *f = fopen(path_("m2/model.safetensors"), "wb");
    assert_int_equal(fwrite(st, 1, n, f), n);
    fclose(f);
    free(st);
    assert_int_equal(wgpt_model_file_read(path_("m2"), 0, &w, err, sizeof err), -1);
    printf("  mixture: %s\n", err);
    assert_non_null(strstr(err, "config.json"));
    assert_non_null(strstr(err, "model.safetensors"));
    write_text_(path_("m2/config.json"), "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 128, \"n_positions\": 16, \"vocab_size\": 50}");
    assert_int_equal(wgpt_model_file_read(path_("m2"), 0, &w, err, sizeof err), -1);
    printf("  config.json without the id: %s\n", err);
    assert_non_null(strstr(err, "wgpt_export_id"));
    // a completed export replaces both
    if (wgpt_export(path_("m2_b.ckpt"), "hf", path_("m2"), 0, err, sizeof err) < 0) fail_msg("%s", err);
    if (wgpt_model_file_read(path_("m2"), 1, &w, err, sizeof err) < 0) fail_msg("%s", err);
    assert_int_equal(w.config.num_heads, 2);
    assert_memory_equal(w.params, pb, wgpt_gpt2_num_params(&b) * sizeof(float));
    wgpt_weights_free(&w);
    free(pa), free(pb);
}

// M6: a .safetensors file truncated while wgpt reads it is an error naming
// the file, not a SIGBUS (run in a child: without the guard it dies).
static void safetensors_truncated_while_read_is_an_error(void **s) {
    (void)s;
    float *p = random_params_(&CFG);
    write_hf_(path_("m6"), p);
    free(p);
    const char *file = path_("m6/model.safetensors");
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGBUS, SIG_DFL);  // cmocka's handler would carry on with the next tests in this child
        wgpt_safetensors st;
        char err[1024];
        if (wgpt_safetensors_open(&st, file, err, sizeof err) < 0) _exit(2);
        if (truncate(file, 4096) != 0) _exit(3);  // another program cuts it short
        wgpt_weights w;
        int rc = wgpt_hf_gpt2_from_safetensors(&st, NULL, 0, file, 1, &w, err, sizeof err);
        wgpt_safetensors_close(&st);
        printf("  truncated while read: %s\n", rc < 0 ? err : "(read!)");
        fflush(stdout);
        _exit(rc < 0 && strstr(err, file) && strstr(err, "shrank") ? 0 : 4);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) fail_msg("the reader died of signal %d", WTERMSIG(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

// L2: config.json is read as transformers reads it, or refused: duplicate
// keys (Python keeps the last, cJSON the first), 0/1 for booleans, bytes
// after the object, a byte-order mark (json.loads refuses it).
static void config_json_read_as_transformers_reads_it(void **s) {
    (void)s;
    wgpt_gpt2_config c;
    char err[1024];
    const char *bad[][2] = {
        {"{\"n_head\": 4, \"n_embd\": 128, \"n_head\": 2}", "n_head"},
        {"{\"scale_attn_weights\": 0}", "scale_attn_weights"},
        {"{\"add_cross_attention\": 1}", "add_cross_attention"},
        {"{\"n_head\": 4} x", "after"},
        {"{\"n_head\": 4}{}", "after"},
        {"\xEF\xBB\xBF{\"n_head\": 4}", "byte-order mark"},
        {"{\"task_specific_params\": {\"a\": 1, \"a\": 2}}", "'a'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (wgpt_hf_config_parse(bad[i][0], strlen(bad[i][0]), "c.json", &c, err, sizeof err) == 0)
            fail_msg("accepted %s", bad[i][0]);
        printf("  %s\n", err);
        if (strncmp(err, "c.json: ", 8) != 0 || !strstr(err, bad[i][1])) fail_msg("'%s' for %s", err, bad[i][0]);
    }
    const char *ok = "{\"n_head\": 4, \"scale_attn_weights\": true, \"add_cross_attention\": false}\n \n";
    if (wgpt_hf_config_parse(ok, strlen(ok), "c.json", &c, err, sizeof err) < 0) fail_msg("%s", err);
    assert_int_equal(c.num_heads, 4);
}

// L3: a config.json claiming a huge model is checked against the tensors'
// shapes before anything is allocated for it.
static void huge_config_is_checked_against_the_shapes_first(void **s) {
    (void)s;
    float *p = random_params_(&CFG);
    write_hf_(path_("l3"), p);
    free(p);
    write_config_(path_("l3"),
                "{\"n_layer\": 100000, \"n_head\": 64, \"n_embd\": 8192, \"n_positions\": 16, \"vocab_size\": 50}");
    wgpt_weights w;
    char err[1024];
    assert_int_equal(wgpt_model_file_read(path_("l3"), 1, &w, err, sizeof err), -1);
    printf("  %s\n", err);
    assert_non_null(strstr(err, "tensor 'transformer.wte.weight' has shape (50, 128)"));
    assert_null(strstr(err, "memory"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(safetensors_reads_a_valid_file),
        cmocka_unit_test(safetensors_refuses_bad_headers),
        cmocka_unit_test(safetensors_refuses_bad_tensors),
        cmocka_unit_test(safetensors_open_refuses_what_is_no_file),
        cmocka_unit_test(half_floats_widen_exactly),
        cmocka_unit_test(bulk_conversion_matches_elements),
        cmocka_unit_test(hf_export_then_import_is_bit_identical),
        cmocka_unit_test(hf_export_has_gpt2lmheadmodel_keys),
        cmocka_unit_test(hf_names_with_or_without_prefix_and_extras),
        cmocka_unit_test(hf_config_json_sizes_and_refusals),
        cmocka_unit_test(llmc_files_in_and_out),
        cmocka_unit_test(export_from_a_checkpoint_round_trips),
        cmocka_unit_test(export_refuses_an_out_that_is_no_regular_file),
        cmocka_unit_test(export_refuses_its_input_and_other_kinds_without_force),
        cmocka_unit_test(config_json_there_but_unreadable_is_an_error),
        cmocka_unit_test(hf_export_onto_a_folder_is_all_or_nothing),
        cmocka_unit_test(safetensors_truncated_while_read_is_an_error),
        cmocka_unit_test(config_json_read_as_transformers_reads_it),
        cmocka_unit_test(huge_config_is_checked_against_the_shapes_first),
    };
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    for (int i = 0; i < nlist_; i++) free(list_[i].data);
    return rc;
}
