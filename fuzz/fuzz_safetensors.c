// fuzz_safetensors.c: libFuzzer target for the safetensors reader
// (wgpt_safetensors_parse) and the Hugging Face GPT-2 mapping over it
// (wgpt_hf_gpt2_from_safetensors, with hf_config.c when a config is given).
//
// Input: one mode byte, then the file. With bit 0 of the mode set, the bytes
// up to the first NUL are a config.json and the file follows the NUL (so that
// small models, which need a config for their head count, can be accepted).
//
// Invariants: a refusal returns -1, leaves the struct zeroed and a message
// starting with the file's name; an accepted container's tensors lie inside
// the file, tile its data exactly, have shape x dtype = byte length and
// unique names that find() returns; an accepted model holds only finite
// floats, its padded vocabulary rows are zero, and exporting it then
// importing the export gives the same config and the same bits.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "weights/hf_gpt2.h"
#include "weights/safetensors.h"

static const char *LABEL = "fuzz.safetensors";

static int is_zero_(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

static void check_container_(const wgpt_safetensors *st, const uint8_t *file, size_t size) {
    uint64_t hlen = fuzz_le64(file), covered = 0;
    FUZZ_CHECK(st->bytes == file && st->size == size, "the parsed view is not the file");
    for (size_t i = 0; i < st->count; i++) {
        const wgpt_st_tensor *t = &st->tensors[i];
        FUZZ_CHECK(t->data >= file + 8 + hlen && t->nbytes <= size && t->data + t->nbytes <= file + size,
                   "tensor '%s' lies outside the data", t->name);
        FUZZ_CHECK(t->dtype < WGPT_ST_NUM_DTYPES && t->nbytes == t->count * wgpt_st_dtype_size(t->dtype),
                   "tensor '%s': %llu bytes for %llu elements", t->name, (unsigned long long)t->nbytes,
                   (unsigned long long)t->count);
        uint64_t n = 1;
        for (uint32_t k = 0; k < t->ndim; k++) n *= t->shape[k];
        FUZZ_CHECK(t->ndim <= WGPT_ST_MAX_DIMS && n == t->count, "tensor '%s': the shape's product is not its count",
                   t->name);
        FUZZ_CHECK(i == 0 || strcmp(st->tensors[i - 1].name, t->name) < 0, "names not sorted or not unique at '%s'",
                   t->name);
        FUZZ_CHECK(wgpt_safetensors_find(st, t->name) == t, "find('%s') misses it", t->name);
        covered += t->nbytes;
    }
    // no overlap and no hole: the byte lengths add up to the data's size exactly
    FUZZ_CHECK(covered == size - 8 - hlen, "tensors cover %llu of %llu data bytes", (unsigned long long)covered,
               (unsigned long long)(size - 8 - hlen));
}

static void check_model_(const wgpt_weights *w) {
    const wgpt_gpt2_config *c = &w->config;
    size_t n = wgpt_gpt2_num_params(c);
    for (size_t i = 0; i < n; i++) FUZZ_CHECK(isfinite(w->params[i]), "parameter %zu is not finite", i);
    for (size_t i = (size_t)c->vocab_size * c->channels; i < (size_t)c->padded_vocab_size * c->channels; i++)
        FUZZ_CHECK(w->params[i] == 0, "padded vocabulary element %zu is not zero", i);
    // export, import: the same bits. The folder is the scratch folder itself, so its cleanup removes both files.
    const char *cfg_path = fuzz_path("config.json");
    fuzz_path("model.safetensors");
    char folder[320], err[1024] = "";
    snprintf(folder, sizeof folder, "%.*s", (int)(strrchr(cfg_path, '/') - cfg_path), cfg_path);
    FUZZ_CHECK(wgpt_hf_gpt2_write(folder, w, err, sizeof err) == 0, "cannot export what was imported: %s", err);
    wgpt_weights back;
    FUZZ_CHECK(wgpt_hf_gpt2_read(folder, 1, &back, err, sizeof err) == 0, "cannot import the export: %s", err);
    FUZZ_CHECK(memcmp(&back.config, c, sizeof *c) == 0, "the export's config differs");
    FUZZ_CHECK(memcmp(back.params, w->params, n * sizeof(float)) == 0, "the export's parameters differ");
    wgpt_weights_free(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *file = data + 1;
    size_t fsize = size - 1, cfg_len = 0;
    const char *cfg = NULL;
    if (data[0] & 1) {
        const uint8_t *nul = memchr(file, 0, fsize);
        if (!nul) return 0;
        cfg = (const char *)file;
        cfg_len = (size_t)(nul - file);
        file = nul + 1;
        fsize -= cfg_len + 1;
    }
    uint8_t *copy = malloc(fsize ? fsize : 1);  // its own allocation: AddressSanitizer sees a read past its end
    FUZZ_CHECK(copy, "out of memory");
    memcpy(copy, file, fsize);

    wgpt_safetensors st;
    char err[1024] = "";
    memset(&st, 0xA5, sizeof st);  // a refusal must zero it, whatever was there
    int rc = wgpt_safetensors_parse(&st, copy, fsize, LABEL, err, sizeof err);
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && is_zero_(&st, sizeof st), "parse refused with %d but left the struct filled", rc);
        FUZZ_CHECK(strncmp(err, LABEL, strlen(LABEL)) == 0, "the message does not name the file: %s", err);
        free(copy);
        return 0;
    }
    check_container_(&st, copy, fsize);
    wgpt_weights w;
    memset(&w, 0xA5, sizeof w);
    rc = wgpt_hf_gpt2_from_safetensors(&st, cfg, cfg_len, LABEL, 1, &w, err, sizeof err);
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && is_zero_(&w, sizeof w), "the mapping refused with %d but left the weights filled", rc);
        FUZZ_CHECK(strncmp(err, LABEL, strlen(LABEL)) == 0, "the message does not name the file: %s", err);
    } else {
        check_model_(&w);
        wgpt_weights_free(&w);
    }
    wgpt_safetensors_close(&st);
    wgpt_safetensors_close(&st);  // twice is safe
    free(copy);
    return 0;
}
