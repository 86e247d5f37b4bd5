// hf_config.c: config.json of a Hugging Face GPT-2 (see hf_config.h).
#include "weights/hf_config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>  // defines: cJSON_ParseWithLength, cJSON_GetObjectItemCaseSensitive, cJSON_Print

#include "weights/weights.h"
#include "util/err.h"

// A size field: absent gives the default; present it must be a whole number in [1, 2^31).
static int size_(const cJSON *root, const char *key, uint32_t dflt, uint32_t *out, const char *label, char *err,
                 size_t errlen) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!x) {
        *out = dflt;
        return 0;
    }
    double d = cJSON_IsNumber(x) ? x->valuedouble : -1;
    if (!(d >= 1 && d < 2147483648.0 && d == floor(d)))
        return wgpt_errf(err, errlen, "%s: %s is not a whole number >= 1", label, key);
    *out = (uint32_t)d;
    return 0;
}

static int is_(const cJSON *root, const char *key, int want_true) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, key);
    return x && (want_true ? cJSON_IsTrue(x) : cJSON_IsFalse(x));
}

// A key given twice in any object of the file: transformers (Python's json)
// keeps the last, cJSON the first. NULL if none.
static const char *duplicate_key_(const cJSON *o) {
    for (const cJSON *c = o ? o->child : NULL; c; c = c->next) {
        if (cJSON_IsObject(o))
            for (const cJSON *d = c->next; d; d = d->next)
                if (strcmp(c->string, d->string) == 0) return c->string;
        const char *in = duplicate_key_(c);
        if (in) return in;
    }
    return NULL;
}

// What transformers would read otherwise than cJSON does: a byte-order mark
// (json.loads refuses it), bytes after the object (refused as "Extra data"),
// a key given twice. Returns the parsed root, or NULL with err.
static cJSON *parse_strict_(const char *text, size_t len, const char *label, char *err, size_t errlen) {
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        wgpt_errf(err, errlen, "%s: starts with a UTF-8 byte-order mark, which transformers' JSON reader refuses: "
                  "save it without one", label);
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        wgpt_errf(err, errlen, "%s: not a JSON object", label);
        return NULL;
    }
    while (end && end < text + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    const char *dup = NULL;
    if (end != text + len)
        wgpt_errf(err, errlen, "%s: bytes after the JSON object (at byte %zu), which transformers refuses", label,
                  end ? (size_t)(end - text) : 0);
    else if ((dup = duplicate_key_(root)))
        wgpt_errf(err, errlen, "%s: the key '%s' is given twice (transformers would take the last, wgpt the first): "
                  "keep one", label, dup);
    else
        return root;
    cJSON_Delete(root);
    return NULL;
}

// Flags wgpt reads must be JSON booleans: Python takes 0, 1 or null as false or true.
static int booleans_(const cJSON *root, const char *label, char *err, size_t errlen) {
    static const char *const keys[] = {"scale_attn_weights", "scale_attn_by_inverse_layer_idx", "add_cross_attention"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, keys[i]);
        if (x && !cJSON_IsBool(x))
            return wgpt_errf(err, errlen, "%s: %s is not true or false (transformers would take %s by its truth): "
                             "write true or false", label, keys[i], cJSON_IsNumber(x) ? "a number" : "it");
    }
    return 0;
}

static int check_math_(const cJSON *root, uint32_t C, const char *label, char *err, size_t errlen) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (x && (!cJSON_IsString(x) || strcmp(x->valuestring, "gpt2") != 0))
        return wgpt_errf(err, errlen, "%s: model_type is %s, not gpt2", label, cJSON_IsString(x) ? x->valuestring : "?");
    x = cJSON_GetObjectItemCaseSensitive(root, "activation_function");
    if (x && (!cJSON_IsString(x) || (strcmp(x->valuestring, "gelu_new") != 0 &&
                                     strcmp(x->valuestring, "gelu_pytorch_tanh") != 0 &&
                                     strcmp(x->valuestring, "gelu_fast") != 0)))
        return wgpt_errf(err, errlen,
                     "%s: activation_function %s: wgpt's GPT-2 uses GELU's tanh form (gelu_new, gelu_pytorch_tanh)",
                     label, cJSON_IsString(x) ? x->valuestring : "(not a string)");
    x = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_epsilon");
    if (x && (!cJSON_IsNumber(x) || fabs(x->valuedouble - 1e-5) > 1e-12))
        return wgpt_errf(err, errlen, "%s: layer_norm_epsilon %g: wgpt's LayerNorm uses 1e-5", label,
                     cJSON_IsNumber(x) ? x->valuedouble : NAN);
    x = cJSON_GetObjectItemCaseSensitive(root, "n_inner");
    if (x && !cJSON_IsNull(x) && (!cJSON_IsNumber(x) || x->valuedouble != 4.0 * C))
        return wgpt_errf(err, errlen, "%s: n_inner is not 4 * n_embd (%u): wgpt's MLP is 4C wide", label, 4 * C);
    if (is_(root, "scale_attn_weights", 0))
        return wgpt_errf(err, errlen, "%s: scale_attn_weights is false: wgpt scales attention by 1/sqrt(head size)", label);
    if (is_(root, "scale_attn_by_inverse_layer_idx", 1))
        return wgpt_errf(err, errlen, "%s: scale_attn_by_inverse_layer_idx is true: wgpt's attention does not", label);
    if (is_(root, "add_cross_attention", 1))
        return wgpt_errf(err, errlen, "%s: add_cross_attention is true: wgpt's GPT-2 has no cross-attention", label);
    return 0;
}

int wgpt_hf_config_parse(const char *text, size_t len, const char *label, wgpt_gpt2_config *cfg, char *err,
                         size_t errlen) {
    memset(cfg, 0, sizeof *cfg);
    cJSON *root = parse_strict_(text, len, label, err, errlen);
    if (!root) return -1;
    uint32_t L, NH, C, T, V;
    int rc = -1;
    // n_positions is the context; some old files spell it n_ctx
    const char *ctx = cJSON_GetObjectItemCaseSensitive(root, "n_positions") ? "n_positions" : "n_ctx";
    if (size_(root, "n_layer", 12, &L, label, err, errlen) == 0 &&
        size_(root, "n_head", 12, &NH, label, err, errlen) == 0 &&
        size_(root, "n_embd", 768, &C, label, err, errlen) == 0 &&
        size_(root, ctx, 1024, &T, label, err, errlen) == 0 &&
        size_(root, "vocab_size", 50257, &V, label, err, errlen) == 0 && booleans_(root, label, err, errlen) == 0 &&
        check_math_(root, C, label, err, errlen) == 0) {
        *cfg = (wgpt_gpt2_config){.max_seq_len = T, .vocab_size = V, .padded_vocab_size = wgpt_weights_padded_vocab(V),
                                  .num_layers = L, .num_heads = NH, .channels = C};
        rc = wgpt_weights_check_config(cfg, label, err, errlen);
    }
    cJSON_Delete(root);
    if (rc < 0) memset(cfg, 0, sizeof *cfg);
    return rc;
}

void wgpt_hf_config_export_id(const char *text, size_t len, char *out, size_t outlen) {
    out[0] = 0;
    cJSON *root = cJSON_ParseWithLength(text, len);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, "wgpt_export_id");
    if (cJSON_IsString(x)) snprintf(out, outlen, "%s", x->valuestring);
    cJSON_Delete(root);
}

char *wgpt_hf_config_format(const wgpt_gpt2_config *c, const char *tokenizer, const char *export_id) {
    cJSON *r = cJSON_CreateObject(), *arch = cJSON_CreateArray();
    char *text = NULL;
    if (!r || !arch) goto done;
    cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
    cJSON_AddStringToObject(r, "activation_function", "gelu_new");
    cJSON_AddItemToObject(r, "architectures", arch);
    arch = NULL;
    cJSON_AddNumberToObject(r, "attn_pdrop", 0.1);
    if (strcmp(tokenizer, "gpt2") == 0) {  // <|endoftext|>
        cJSON_AddNumberToObject(r, "bos_token_id", 50256);
        cJSON_AddNumberToObject(r, "eos_token_id", 50256);
    }
    cJSON_AddNumberToObject(r, "embd_pdrop", 0.1);
    cJSON_AddNumberToObject(r, "initializer_range", 0.02);
    cJSON_AddNumberToObject(r, "layer_norm_epsilon", 1e-5);
    cJSON_AddStringToObject(r, "model_type", "gpt2");
    cJSON_AddNumberToObject(r, "n_ctx", c->max_seq_len);
    cJSON_AddNumberToObject(r, "n_embd", c->channels);
    cJSON_AddNumberToObject(r, "n_head", c->num_heads);
    cJSON_AddNullToObject(r, "n_inner");
    cJSON_AddNumberToObject(r, "n_layer", c->num_layers);
    cJSON_AddNumberToObject(r, "n_positions", c->max_seq_len);
    cJSON_AddNumberToObject(r, "resid_pdrop", 0.1);
    cJSON_AddTrueToObject(r, "scale_attn_weights");
    cJSON_AddTrueToObject(r, "tie_word_embeddings");
    cJSON_AddStringToObject(r, "torch_dtype", "float32");
    cJSON_AddTrueToObject(r, "use_cache");
    cJSON_AddNumberToObject(r, "vocab_size", c->vocab_size);
    if (export_id) cJSON_AddStringToObject(r, "wgpt_export_id", export_id);
    text = cJSON_Print(r);
done:
    cJSON_Delete(arch);
    cJSON_Delete(r);
    return text;
}
