// shard_set.h: the record `wgpt tokenize` keeps of the shard set it wrote in a
// folder, DIR/shard_set.txt. It says which files wgpt wrote (so that --force
// removes only those), which tokenizer made them, and whether the set is
// complete: while a set is being replaced the record says "replacing", and
// readers of the folder refuse it until a run finishes the replacement.
//
// Text, one item a line:
//   wgpt shard set 1
//   state complete              (or: replacing)
//   tokenizer gpt2              (absent if unknown)
//   file train_000000.bin 200001024     (name in DIR, size in bytes)
//   ...
#ifndef WGPT_SHARD_SET_H
#define WGPT_SHARD_SET_H

#include <stddef.h>
#include <stdint.h>

#define WGPT_SHARD_SET_FILE "shard_set.txt"

typedef struct wgpt_shard_set_file {
    char *name;      // in the folder, no '/'
    uint64_t bytes;  // 0 while replacing (not checked)
} wgpt_shard_set_file;

typedef struct wgpt_shard_set {
    int complete;       // 0: "replacing"
    char tokenizer[16]; // "" if unknown
    wgpt_shard_set_file *files;
    size_t n, cap;
} wgpt_shard_set;

// Reads DIR's record. Returns 1 with *s filled (free it), 0 if DIR has none
// (*s empty), or -1 with err (unreadable or malformed: names the line).
int wgpt_shard_set_read(const char *dir, wgpt_shard_set *s, char *err, size_t errlen);
// Writes DIR's record crash-safely (a temporary file, fsync, rename, folder fsync).
int wgpt_shard_set_write(const char *dir, const wgpt_shard_set *s, char *err, size_t errlen);
// Appends a file. Returns 0, or -1 on out of memory.
int wgpt_shard_set_add(wgpt_shard_set *s, const char *name, uint64_t bytes);
// The entry named name, or NULL.
const wgpt_shard_set_file *wgpt_shard_set_find(const wgpt_shard_set *s, const char *name);
void wgpt_shard_set_free(wgpt_shard_set *s);

// Whether name is one wgpt tokenize gives its shards: train_NNNNNN.bin or
// val_NNNNNN.bin (six digits).
int wgpt_shard_set_is_shard_name(const char *name);

// For readers: checks paths (shard files about to be read) against the record
// of each folder they are in. A folder without a record passes. Refused: a
// record saying "replacing"; a listed file whose size differs; a file named
// like a shard of the set that the record does not list. Returns 0, or -1
// with err naming the folder, the file and what to do.
int wgpt_shard_set_check(const char *const *paths, size_t npaths, char *err, size_t errlen);

#endif
