// loader.h: training and validation batches from token shards (shard.h).
//
// A window is T+1 consecutive tokens of one shard starting at a multiple of T
// (windows overlap by the one token that is the last target of one and the
// first input of the next), so a region of N tokens holds (N-1)/T windows. A
// batch is B windows: inputs are tokens [0, T) of each, targets [1, T+1), as in
// llm.c. Batches are int32 arrays (B, T).
//
// Train/val split: every shard whose file name (not directory) contains "val"
// is validation and the rest are train. When no shard is named so, the last
// val_fraction of the tokens of the last shard are validation (with one shard:
// its tail), and the rest train.
//
// Order: each epoch visits every train window of every train shard exactly
// once, in an order that is a keyed permutation of the global window indices
// (a 6-round Feistel network over the next power of 4 with cycle-walking; round
// keys from splitmix64 of the seed and the epoch number). Nothing per window is
// stored, so memory stays constant however large the corpus: the shards are
// memory-mapped and only touched pages are read. A batch that runs past the end
// of an epoch continues with the next epoch's first windows. Validation is read
// in order, in whole batches (a last partial batch is left out).
#ifndef WGPT_LOADER_H
#define WGPT_LOADER_H

#include <stddef.h>
#include <stdint.h>

typedef struct wgpt_loader wgpt_loader;

// Opens every file that matches `pattern`: one or more glob(3) patterns
// separated by commas, where a directory stands for DIR/*.bin; the union is
// sorted by path. B sequences of T tokens per batch; val_fraction in [0, 1) is
// only used when no shard is named "val". Every token is checked once against
// vocab_size (1..65536; 65536 checks nothing, see wgpt_loader_check_vocab):
// an id outside it is an error naming the file and the position. A folder's
// shard set record (shard_set.h) must agree with its files, and shards that
// record their tokenizer must record the same one. Returns the loader (free
// with wgpt_loader_free), or NULL with a message in err (a missing match, a
// bad shard, too few tokens for one train window or for one validation batch,
// ...).
wgpt_loader *wgpt_loader_open(const char *pattern, uint32_t B, uint32_t T, uint64_t seed, float val_fraction,
                              uint32_t vocab_size, char *err, size_t errlen);
// The same for evaluation (`wgpt eval`): only the validation split must hold
// a batch. Shards all named "val" are all validation; the train part may be
// missing or too small for a window (next_train must not be called then).
wgpt_loader *wgpt_loader_open_val(const char *pattern, uint32_t B, uint32_t T, float val_fraction,
                                  uint32_t vocab_size, char *err, size_t errlen);
// The same as wgpt_loader_open for an explicit list of shard paths (sorted the same way; copied).
wgpt_loader *wgpt_loader_open_files(const char *const *paths, size_t npaths, uint32_t B, uint32_t T, uint64_t seed,
                                    float val_fraction, uint32_t vocab_size, char *err, size_t errlen);
// Unmaps the shards and frees the loader; safe on NULL.
void wgpt_loader_free(wgpt_loader *l);

// Fills inputs and targets (B*T ints each) with the next train batch and
// advances. Returns 0 (it cannot run out: epochs follow one another), or -1
// if a shard shrank under the map (another process truncated it): then the
// batch is partial, the position is somewhere inside it (restore a saved
// state to retry), and wgpt_loader_error names the file.
int wgpt_loader_next_train(wgpt_loader *l, int *inputs, int *targets);
// Fills the next validation batch, in order. Returns 1 with a batch, 0
// (buffers untouched) once all wgpt_loader_val_batches of the pass have been
// read or when there is no validation data (wgpt_loader_reset_val restarts),
// or -1 as next_train does.
int wgpt_loader_next_val(wgpt_loader *l, int *inputs, int *targets);
void wgpt_loader_reset_val(wgpt_loader *l);
// Why the last next_train or next_val returned -1.
const char *wgpt_loader_error(const wgpt_loader *l);

// The tokenizer the shards record ("gpt2", "bytes"; see shard.h), or NULL if
// none of them records one.
const char *wgpt_loader_tokenizer(const wgpt_loader *l);
// Checks every token of every shard against vocab_size, as open does.
// Returns 0, or -1 with err naming the file and the position of the first bad id.
// From then on every batch checks its ids against it too: a shard rewritten
// in place under the run makes next_train / next_val return -1, their error
// naming the file and the position of the bad id.
int wgpt_loader_check_vocab(wgpt_loader *l, uint32_t vocab_size, char *err, size_t errlen);

uint64_t wgpt_loader_val_batches(const wgpt_loader *l);  // 0 when there is no validation
uint64_t wgpt_loader_train_tokens(const wgpt_loader *l);  // tokens in the train regions
uint64_t wgpt_loader_train_windows(const wgpt_loader *l);  // windows (sequences) per epoch
uint64_t wgpt_loader_epoch(const wgpt_loader *l);  // epoch of the next train window, from 0
// One line for logs: shards, tokens, windows and batches of train and val.
void wgpt_loader_describe(const wgpt_loader *l, char *buf, size_t len);

// Checkpointing. The state (a fixed-size, little-endian byte string) holds the
// seed, the epoch, the next window of the epoch and the validation position,
// plus T and a fingerprint of the shards (names, sizes, split) so that it is
// not loaded over different data. B may differ on load: the stream of windows
// continues where it stopped. A resumed loader gives exactly the batches the
// saved one would have given next.
size_t wgpt_loader_state_size(void);
// Writes wgpt_loader_state_size() bytes to buf.
void wgpt_loader_save_state(const wgpt_loader *l, void *buf);
// Returns 0 and moves l to the saved position (its seed becomes the saved
// seed), or -1 with a message if buf is not a state for this T and these shards
// (l unchanged).
int wgpt_loader_load_state(wgpt_loader *l, const void *buf, size_t len, char *err, size_t errlen);

#endif
