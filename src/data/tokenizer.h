// tokenizer.h: text <-> token ids. Two tokenizers behind one handle:
//   "gpt2"  GPT-2's byte-level BPE (encoder.json + vocab.bpe), equal to OpenAI's
//           encoder.py / tiktoken "gpt2" on UTF-8 text; 50257 ids, 50256 is
//           <|endoftext|>.
//   "bytes" one id per byte (0..255), no end-of-text token.
// Any bytes encode, invalid UTF-8 included, and decode back to the same bytes.
// A tokenizer is read-only once opened: encode and decode may run on several
// threads at once.
#ifndef WGPT_TOKENIZER_H
#define WGPT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct wgpt_tokenizer wgpt_tokenizer;

// GPT-2's tokenizer from its encoder.json (token -> id) and vocab.bpe (merges
// in rank order). Returns NULL with err naming the file and the problem
// (missing, not JSON, wrong entry count, a merge line that does not parse, ...).
// The caller frees the result with wgpt_tokenizer_free.
wgpt_tokenizer *wgpt_tokenizer_open_gpt2(const char *encoder_json, const char *vocab_bpe, char *err, size_t errlen);
// The byte tokenizer: id b is the byte b. Returns NULL only on out of memory.
wgpt_tokenizer *wgpt_tokenizer_open_bytes(void);
// 1 if wgpt knows a tokenizer of this name ("gpt2", "bytes"), else 0.
int wgpt_tokenizer_known(const char *name);
// A tokenizer by its name, as options and checkpoints give it: "bytes", or
// "gpt2" from bpe_dir/encoder.json and bpe_dir/vocab.bpe. NULL with err on an
// unknown name, a missing or bad file, or out of memory.
wgpt_tokenizer *wgpt_tokenizer_open(const char *name, const char *bpe_dir, char *err, size_t errlen);
void wgpt_tokenizer_free(wgpt_tokenizer *t);  // NULL is fine

const char *wgpt_tokenizer_name(const wgpt_tokenizer *t);    // "gpt2" or "bytes" (static string)
uint32_t wgpt_tokenizer_vocab_size(const wgpt_tokenizer *t);  // 50257 or 256
int64_t wgpt_tokenizer_eot(const wgpt_tokenizer *t);          // 50256 for gpt2, -1 for bytes (none)

// Appends the ids of text[0, len) to *ids, a growable array the caller owns
// (*n used, *cap allocated; start with NULL, 0, 0; realloc'ed as needed; free
// it with free()). The text "<|endoftext|>" is encoded as ordinary text: a
// caller that wants the end-of-text token appends wgpt_tokenizer_eot() itself.
// Returns 0, or -1 on out of memory (or if PCRE2 gives up on the text); on -1
// *n is as it was before the call and *ids stays valid.
int wgpt_tokenizer_encode(const wgpt_tokenizer *t, const char *text, size_t len, uint32_t **ids, size_t *n,
                          size_t *cap);

// Where text[0, len), the start of a longer text, may be cut: the ids of
// text[0, k) followed by those of the rest (whatever follows) are the ids of
// the whole. Returns len for bytes; for gpt2 the end of the last
// pre-tokenization piece that ends 4 or more bytes before len, or 0 if there
// is none (a single word of len bytes: no exact cut).
size_t wgpt_tokenizer_cut_point(const wgpt_tokenizer *t, const char *text, size_t len);

// The bytes of one id, *len of them (not nul-terminated; may be part of a
// UTF-8 character). The pointer is valid while t lives. NULL if id >= vocab size.
const char *wgpt_tokenizer_decode(const wgpt_tokenizer *t, uint32_t id, size_t *len);
// The bytes of ids[0, n) in a malloc'ed, nul-terminated string the caller
// frees (the bytes may be invalid UTF-8 and may hold nul bytes: see _len).
// NULL on out of memory or if an id is >= vocab size.
char *wgpt_tokenizer_decode_all(const wgpt_tokenizer *t, const uint32_t *ids, size_t n);
// The same, also giving the number of bytes before the terminating nul.
char *wgpt_tokenizer_decode_all_len(const wgpt_tokenizer *t, const uint32_t *ids, size_t n, size_t *len);

#endif
