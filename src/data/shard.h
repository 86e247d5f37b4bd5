// shard.h: token shards in llm.c's format. A shard is a 256 x int32
// little-endian header ([0] magic 20240520, [1] version 1, [2] token count N,
// the rest zero) followed by N uint16 little-endian tokens, so the file is
// exactly 1024 + 2*N bytes and a vocabulary holds at most 65536 ids.
// Shards are read through a read-only memory map: opening costs no copy and
// corpora larger than memory stay on disk until their pages are touched.
//
// wgpt also records the tokenizer in header fields llm.c leaves zero (and
// ignores): [3] the tag WGPT_SHARD_TAG, [4..7] the tokenizer's name, 16
// bytes NUL-padded ("gpt2", "bytes"). A shard without the tag records none.
#ifndef WGPT_SHARD_H
#define WGPT_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define WGPT_SHARD_MAGIC 20240520
#define WGPT_SHARD_VERSION 1
#define WGPT_SHARD_HEADER_BYTES 1024
// The header stores the count as an int32.
#define WGPT_SHARD_MAX_TOKENS ((uint64_t)INT32_MAX)
#define WGPT_SHARD_TAG 0x4B544757  // "WGTK", little-endian
#define WGPT_SHARD_TOKENIZER_MAX 16  // bytes of the name field, NUL included

typedef struct wgpt_shard {
    const uint16_t *tokens;  // (n) inside the map; valid until wgpt_shard_close
    uint64_t n;
    char *path;  // owned copy, for messages
    void *map;
    size_t map_len;
    char tokenizer[WGPT_SHARD_TOKENIZER_MAX];  // recorded by wgpt; "" if none
} wgpt_shard;

// Maps `path` and checks the magic, the version, the tokenizer field (when
// tagged) and that the file holds exactly 1024 + 2*N bytes for the header's N.
// Anything but a regular file (a FIFO, a folder) is refused without blocking.
// Returns 0 and fills *s (close it with wgpt_shard_close), or -1 with a
// message naming the file in err and *s left closed (safe to pass to
// wgpt_shard_close).
int wgpt_shard_open(const char *path, wgpt_shard *s, char *err, size_t errlen);
// Unmaps and frees; s->tokens becomes invalid. Safe on a zeroed or closed shard.
void wgpt_shard_close(wgpt_shard *s);

// Checks tokens [begin, end) against vocab_size. Returns 0 if every id is
// below it, or -1 with the file, the first bad id and its position in err
// (or that the file shrank while being read: the scan is SIGBUS-guarded).
int wgpt_shard_check_vocab(const wgpt_shard *s, uint64_t begin, uint64_t end, uint32_t vocab_size, char *err,
                           size_t errlen);

// Writes a whole shard crash-safely: `path`.tmp is written, fsynced and renamed
// over `path`, so a crash leaves the old file or the new one, never half of one.
// It records no tokenizer (the writer below can). Returns 0, or -1 with a
// message naming the file (the .tmp is removed).
int wgpt_shard_write(const char *path, const uint16_t *tokens, size_t n, char *err, size_t errlen);

// A shard written in pieces, for corpora that should not sit in memory whole:
// begin, append any number of times, then finish (or abort). Same crash safety
// as wgpt_shard_write: nothing appears at `path` before finish succeeds.
typedef struct wgpt_shard_writer {
    FILE *f;
    char *path, *tmp;  // owned
    uint64_t n;        // tokens appended so far
} wgpt_shard_writer;

// tokenizer: the name to record (1..15 printable characters), or NULL for
// none. Returns 0 with w ready for appends, or -1 with a message (w left closed).
int wgpt_shard_writer_begin(wgpt_shard_writer *w, const char *path, const char *tokenizer, char *err,
                            size_t errlen);
// Appends n tokens. Returns 0, or -1 (past WGPT_SHARD_MAX_TOKENS or a write
// error); after -1 the caller must still call wgpt_shard_writer_abort.
int wgpt_shard_writer_append(wgpt_shard_writer *w, const uint16_t *tokens, size_t n, char *err, size_t errlen);
// Writes the count into the header, fsyncs, renames .tmp to the path. Returns 0
// or -1 with a message; either way w is closed afterwards (the .tmp removed on -1).
int wgpt_shard_writer_finish(wgpt_shard_writer *w, char *err, size_t errlen);
// Closes w and removes its .tmp; safe on a closed writer.
void wgpt_shard_writer_abort(wgpt_shard_writer *w);

#endif
