// checkpoint.h: everything needed to resume training exactly (model config,
// step, parameters, AdamW moments, training options, data loader state, RNG,
// tokenizer name) in one checksummed file, written crash-safely.
//
// File format, version 1. Every integer is little-endian and fixed width;
// floats are IEEE-754 binary32, little-endian.
//
//   offset  size  field
//   0       8     magic "WGPTCKPT"
//   8       4     u32 format version (1)
//   12      4     u32 header size in bytes (144)
//   16      24    u32 x6 config: max_seq_len, vocab_size, padded_vocab_size,
//                 num_layers, num_heads, channels
//   40      8     u64 step
//   48      16    tokenizer name, NUL-terminated and NUL-padded ("gpt2", "bytes")
//   64      32    u64 x4 RNG state
//   96      8     u64 bytes of section 0, train_opts (opaque)
//   104     8     u64 bytes of section 1, loader_state (opaque)
//   112     8     u64 bytes of section 2, params: 4 * wgpt_gpt2_num_params(config)
//   120     8     u64 bytes of section 3, adam_m: 0 or the params size
//   128     8     u64 bytes of section 4, adam_v: equal to adam_m's
//   136     4     u32 flags, 0 (reserved)
//   140     4     u32 header CRC-32 of bytes [0, 140)
//   144     ...   the five sections, in order, back to back (no padding)
//   E       20    u32 x5 CRC-32 of each section's bytes (0 for an empty one)
//   E+20    4     u32 file CRC-32 of bytes [0, E+20): everything before it
//   E+24    8     end marker "WGPTEND\0"
//
// The file is exactly E + 32 bytes. CRC-32 is zlib's crc32() (the
// ISO-HDLC/PNG polynomial). The header CRC lets `peek` trust a header without
// reading the tensors; the per-section CRCs name the damaged section; the file
// CRC is the authority. params, adam_m and adam_v are in the reference layout
// (see model/gpt2.h).
#ifndef WGPT_CHECKPOINT_H
#define WGPT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpt2.h"  // defines: wgpt_gpt2_config, wgpt_gpt2_num_params, wgpt_gpt2_param_sizes

#define WGPT_CHECKPOINT_VERSION 1u
#define WGPT_CHECKPOINT_TOKENIZER_MAX 16  // bytes of the name field, NUL included

typedef struct wgpt_checkpoint {
    wgpt_gpt2_config config;
    uint64_t step;
    char tokenizer[WGPT_CHECKPOINT_TOKENIZER_MAX];  // "gpt2" or "bytes"; 1..15 printable characters
    uint64_t rng[4];
    void *train_opts;  // opaque bytes from the training loop
    size_t train_opts_len;
    void *loader_state;  // opaque bytes from the data loader
    size_t loader_state_len;
    float *params;  // (wgpt_gpt2_num_params(&config),) reference layout
    float *adam_m;  // same size, or NULL with adam_v NULL: a params-only export
    float *adam_v;
} wgpt_checkpoint;

// Writes ck to path crash-safely: path.tmp in the same folder (a stale one is
// replaced), written, flushed, fsync'ed, closed, renamed over path, then the
// folder is fsync'ed. An existing checkpoint at path is never damaged: on any
// failure (bad config, NaN/Inf in a tensor, disk full, I/O error) it stays as
// it was (the message says whether there was one) and path.tmp is removed. The caller keeps ownership of ck.
// Returns 0, or -1 with err naming the file, the value and the limit. One -1
// leaves the new file in place: the folder fsync after the rename failed (the
// message says so; the replacement may not survive a power loss).
int wgpt_checkpoint_write(const char *path, const wgpt_checkpoint *ck, char *err, size_t errlen);

// Reads and validates all of path: magic, version, header, config sanity,
// section sizes against the config and the file size, every checksum, and no
// NaN/Inf in params/adam_m/adam_v (the message names tensor and offset).
// Returns 0 with ck owning malloc'ed arrays (free with wgpt_checkpoint_free;
// empty blobs and absent moments are NULL), or -1 with err and ck zeroed
// (nothing to free).
int wgpt_checkpoint_read(const char *path, wgpt_checkpoint *ck, char *err, size_t errlen);

// Checks all of path as _read does (every checksum, no NaN/Inf) reading the
// tensors in pieces, without holding them. Returns 0, or -1 with err.
int wgpt_checkpoint_verify(const char *path, char *err, size_t errlen);

// Removes path.tmp, a write's temporary file that a killed writer left
// (call it where no other writer can be at work: a run holding the folder's
// lock). A folder there is left alone. Returns 0, or -1 with err.
int wgpt_checkpoint_remove_stale_tmp(const char *path, char *err, size_t errlen);

// Frees what wgpt_checkpoint_read allocated and zeroes ck. Safe on a zeroed
// or peeked struct; not for a struct whose arrays the caller owns.
void wgpt_checkpoint_free(wgpt_checkpoint *ck);

// Reads and validates only the header (magic, version, header CRC, config,
// section sizes against the file size): config, step, tokenizer, rng and the
// blob lengths are filled; every pointer is NULL, so there is nothing to free.
// Tensor bytes are not read, so damage there is found only by _read.
// Returns 0, or -1 with err and ck_header_only zeroed.
int wgpt_checkpoint_peek(const char *path, wgpt_checkpoint *ck_header_only, char *err, size_t errlen);

#endif
