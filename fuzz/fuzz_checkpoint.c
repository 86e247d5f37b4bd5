// fuzz_checkpoint.c: libFuzzer target for the checkpoint reader
// (wgpt_checkpoint_read and wgpt_checkpoint_peek).
//
// Input: one mode byte, then the file. Random bytes rarely carry the right
// CRC-32s, so the mode lets the fuzzer get past them to the checks behind:
//   bit 0  recompute the header CRC (bytes [140, 144))
//   bit 1  recompute the five section CRCs and the file CRC, when the
//          header's section sizes add up to the file's size
// Mode 0 keeps the file as it is, which fuzzes the checksum checks themselves.
//
// Invariants: a refused file leaves the struct zeroed with a message naming
// the file; a file that _read accepts is accepted by _peek with the same
// header, holds only finite floats, and is byte for byte what
// wgpt_checkpoint_write makes of what was read (the format has one encoding).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>  // defines: crc32

#include "fuzz_util.h"
#include "train/checkpoint.h"

enum { HDR = 144, TRAILER = 32, NSECT = 5 };

static uint32_t crc_(const uint8_t *p, uint64_t n) { return (uint32_t)crc32(0, p, (uInt)n); }

// Recomputes the checksums the mode asks for (file: the bytes after the mode byte).
static void fix_crcs_(uint8_t mode, uint8_t *file, size_t size) {
    if ((mode & 1) && size >= HDR) fuzz_put_le32(file + 140, crc_(file, 140));
    if (!(mode & 2) || size < HDR + TRAILER) return;
    uint64_t len[NSECT], total = HDR + TRAILER;
    for (int i = 0; i < NSECT; i++) {
        len[i] = fuzz_le64(file + 96 + 8 * i);
        if (len[i] > size) return;  // also keeps the sum below from wrapping
        total += len[i];
    }
    if (total != size) return;
    uint64_t at = HDR, e = size - TRAILER;
    for (int i = 0; i < NSECT; at += len[i], i++) fuzz_put_le32(file + e + 4 * i, len[i] ? crc_(file + at, len[i]) : 0);
    fuzz_put_le32(file + e + 20, crc_(file, e + 20));
}

static int is_zero_(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

static void check_refused_(const char *what, const char *path, int rc, const wgpt_checkpoint *ck, const char *err) {
    if (rc == 0) return;
    FUZZ_CHECK(rc == -1, "%s returned %d", what, rc);
    FUZZ_CHECK(is_zero_(ck, sizeof *ck), "%s refused the file but left the struct filled", what);
    FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0, "%s: the message does not start with the path: %s", what, err);
}

// The checkpoint that _read accepted, against its header (peek) and the file.
static void check_accepted_(const char *path, const wgpt_checkpoint *ck, const wgpt_checkpoint *hp, int peek_rc,
                            const uint8_t *file, size_t size) {
    FUZZ_CHECK(peek_rc == 0, "read accepted what peek refused");
    FUZZ_CHECK(memcmp(&ck->config, &hp->config, sizeof ck->config) == 0 && ck->step == hp->step &&
                   memcmp(ck->tokenizer, hp->tokenizer, sizeof ck->tokenizer) == 0 &&
                   memcmp(ck->rng, hp->rng, sizeof ck->rng) == 0 && ck->train_opts_len == hp->train_opts_len &&
                   ck->loader_state_len == hp->loader_state_len,
               "peek and read disagree about the header");
    FUZZ_CHECK(hp->params == NULL && hp->adam_m == NULL && hp->train_opts == NULL, "peek returned data");
    FUZZ_CHECK(ck->params && !ck->adam_m == !ck->adam_v, "read gave params %p, adam_m %p, adam_v %p",
               (void *)ck->params, (void *)ck->adam_m, (void *)ck->adam_v);
    FUZZ_CHECK(!ck->train_opts_len == !ck->train_opts && !ck->loader_state_len == !ck->loader_state,
               "a blob pointer disagrees with its length");
    size_t n = wgpt_gpt2_num_params(&ck->config);
    uint64_t want = HDR + TRAILER + ck->train_opts_len + ck->loader_state_len + (uint64_t)n * 4 * (ck->adam_m ? 3 : 1);
    FUZZ_CHECK(want == size, "the sections add up to %llu bytes, the file holds %zu", (unsigned long long)want, size);
    const float *t[3] = {ck->params, ck->adam_m, ck->adam_v};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; t[k] && i < n; i++)
            FUZZ_CHECK(isfinite(t[k][i]), "tensor %d element %zu is not finite", k, i);

    // Writing what was read gives the same bytes back.
    const char *again = fuzz_path("rewritten.ckpt");
    char err[1024] = "";
    FUZZ_CHECK(wgpt_checkpoint_write(again, ck, err, sizeof err) == 0, "cannot write back what was read: %s", err);
    size_t n2;
    unsigned char *b = fuzz_read_file(again, &n2);
    size_t diff = 0;
    while (diff < n2 && diff < size && b[diff] == file[diff]) diff++;
    FUZZ_CHECK(n2 == size && diff == size, "%s read then written back differs at byte %zu (%zu vs %zu bytes)", path,
               diff, n2, size);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0];
    size_t fsize = size - 1;
    uint8_t *file = malloc(fsize ? fsize : 1);
    FUZZ_CHECK(file, "out of memory");
    memcpy(file, data + 1, fsize);
    fix_crcs_(mode, file, fsize);
    const char *path = fuzz_path("fuzz.ckpt");
    fuzz_write_file(path, file, fsize);

    wgpt_checkpoint hp, ck;
    char perr[1024] = "", rerr[1024] = "";
    memset(&hp, 0xA5, sizeof hp);  // both must zero what they refuse, whatever was there
    memset(&ck, 0xA5, sizeof ck);
    int prc = wgpt_checkpoint_peek(path, &hp, perr, sizeof perr);
    int rrc = wgpt_checkpoint_read(path, &ck, rerr, sizeof rerr);
    check_refused_("peek", path, prc, &hp, perr);
    check_refused_("read", path, rrc, &ck, rerr);
    if (prc == 0) {  // the header's sizes fit the file: with both moments or with none
        uint64_t n = wgpt_gpt2_num_params(&hp.config);
        FUZZ_CHECK(n <= fsize / 4 && hp.train_opts_len <= fsize && hp.loader_state_len <= fsize,
                   "peek accepted sections larger than the file (%zu bytes)", fsize);
        uint64_t base = HDR + TRAILER + hp.train_opts_len + hp.loader_state_len + 4 * n;
        FUZZ_CHECK(fsize == base || fsize == base + 8 * n,
                   "peek accepted a header whose sections do not add up to the file's %zu bytes", fsize);
    }
    if (rrc == 0) check_accepted_(path, &ck, &hp, prc, file, fsize);
    wgpt_checkpoint_free(&ck);
    wgpt_checkpoint_free(&ck);  // twice is safe
    free(file);
    return 0;
}
