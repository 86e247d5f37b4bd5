// corpus_internal.h: the pieces of the tokenize pipeline shared by corpus.c
// (text -> shards) and corpus_swap.c (the folder the set goes to).
#ifndef WGPT_CORPUS_INTERNAL_H
#define WGPT_CORPUS_INTERNAL_H

#include <stddef.h>

#include "data/shard_set.h"

// The output folder of a run: locked, its existing set inspected, and a
// temporary folder inside it for the new shards.
typedef struct wgpt_corpus_dest {
    const char *dir;
    char tmp_dir[4200];
    int lock;
    int had_set;          // the folder held a set (or its record) before
    wgpt_shard_set old;   // the files of that set that wgpt wrote, names in dir
    char note[1024];
} wgpt_corpus_dest;

// Creates dir, locks it against a second tokenize, removes temporary folders
// that killed runs left, checks the set already there (refused without force;
// a file named like a shard that wgpt did not write is refused always), and
// makes the temporary folder. Returns 0, or -1 with err (nothing to close).
int wgpt_corpus_dest_open_(wgpt_corpus_dest *d, const char *dir, int force, char *err, size_t errlen);
// Replaces the old set by `written` (complete shards in tmp_dir), recording
// the swap in dir's shard set record before and after. *now: the new record.
int wgpt_corpus_dest_swap_(wgpt_corpus_dest *d, const wgpt_shard_set *written, const char *tokenizer,
                           wgpt_shard_set *now, char *err, size_t errlen);
// Removes the temporary folder (and the shards left in it) and unlocks.
void wgpt_corpus_dest_close_(wgpt_corpus_dest *d);

#endif
