// corpus.h: text files -> a shard set for `wgpt train`: the pipeline of `wgpt
// tokenize`. Documents end at a blank line (as llm.c splits its text corpora
// at "\n\n") or with their file; whole documents are held out for
// validation; shards hold a fixed number of tokens. Memory stays at a few
// encoding chunks of text and their ids however large the corpus and however
// long its lines.
//
// The new set is written into a temporary folder inside out_dir and moved in
// only once every input has been read and every shard is on disk, so that a
// failure, a missing input or Ctrl-C leaves out_dir as it was. The swap is
// recorded in out_dir's shard set record (shard_set.h) before it starts and
// after it ends: a crash in between leaves a record that readers refuse and
// that the next run with --force repairs. Only files wgpt wrote are removed.
#ifndef WGPT_CORPUS_H
#define WGPT_CORPUS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "data/shard_set.h"
#include "data/tokenizer.h"

typedef struct wgpt_corpus_opts {
    const wgpt_tokenizer *tok;    // its vocabulary must fit uint16 ids (<= 65536)
    const char *out_dir;          // created if missing
    uint64_t shard_tokens;        // tokens per shard, 1..WGPT_SHARD_MAX_TOKENS
    double val_fraction;          // [0, 1): a document goes to validation while it holds less than this share
    int split_files;              // 1: each file is one document; 0: a blank line ends one
    int force;                    // replace the shard set wgpt wrote in out_dir
    volatile sig_atomic_t *stop;  // NULL, or set by a signal handler: stop, out_dir left as it was
    size_t chunk;                 // bytes of text encoded at a time (0: 1 MiB); small in tests
} wgpt_corpus_opts;

typedef struct wgpt_corpus_result {
    uint64_t files, bytes, docs;
    uint64_t train_tokens, val_tokens;
    uint32_t train_shards, val_shards;
    // Places where no cut was exact within 4 chunks (one "word" of megabytes:
    // not text); the ids there may differ from what one encode would give.
    uint64_t forced_cuts;
    wgpt_shard_set set;  // the set now in out_dir (names and sizes); free with wgpt_shard_set_free
    char note[1024];     // "" or a remark for the user (other .bin files in out_dir)
} wgpt_corpus_result;

// Tokenizes inputs[0, n) ("-" is standard input) into out_dir. Returns 0 with
// *res filled, or -1 with err naming the file, the value or the limit (*res
// then holds nothing to free). out_dir already holding shards is an error
// unless o->force; a file there named like a shard that wgpt did not write is
// an error even then. Interrupted through o->stop: -1, "interrupted".
int wgpt_corpus_tokenize(const wgpt_corpus_opts *o, char *const *inputs, size_t n, wgpt_corpus_result *res,
                         char *err, size_t errlen);

#endif
