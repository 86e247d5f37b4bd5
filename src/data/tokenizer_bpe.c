// tokenizer_bpe.c: byte-level BPE by merge rank, as OpenAI's encoder.py does
// it (repeatedly take the adjacent pair of lowest rank and merge all its
// occurrences left to right), with hash maps and a heap instead of rescans.
#include <string.h>

#include "data/tokenizer_internal.h"

#define NONE UINT32_MAX

typedef struct pair_slot {
    uint64_t key;  // left << 32 | right; UINT64_MAX: empty
    uint32_t rank, merged;
} pair_slot;

struct wgpt_bpe {
    const char *bytes;
    const uint32_t *off;
    uint32_t n;
    uint32_t *tok;  // (tok_mask + 1) open addressing: id + 1, 0 empty
    size_t tok_mask;
    pair_slot *pair;  // (pair_mask + 1)
    size_t pair_mask;
    uint32_t npairs;
    uint32_t byte_id[256];
    uint8_t *whole;  // (n) 1 if BPE of id's own bytes gives exactly [id]
};

// A possible merge of the symbol at `pos` with the next one, valid while the
// two still hold `left` and `right`.
typedef struct wgpt_bpe_cand {
    uint32_t rank, pos, left, right;
} cand;

static uint64_t hash_bytes_(const char *s, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static uint64_t hash_pair_(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static size_t table_size_(size_t n) {
    size_t s = 16;
    while (s < 2 * n) s *= 2;
    return s;
}

wgpt_bpe *wgpt_bpe_create(const char *bytes, const uint32_t *off, uint32_t n, uint32_t *dup_a, uint32_t *dup_b) {
    *dup_a = *dup_b = NONE;
    wgpt_bpe *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->bytes = bytes;
    b->off = off;
    b->n = n;
    size_t ts = table_size_(n);
    b->tok = calloc(ts, sizeof *b->tok);
    b->tok_mask = ts - 1;
    // Every merge makes one token, so n pairs at most (checked in add_merge).
    size_t ps = table_size_(n);
    b->pair = malloc(ps * sizeof *b->pair);
    b->pair_mask = ps - 1;
    b->whole = calloc(n ? n : 1, 1);
    if (!b->tok || !b->pair || !b->whole) {
        wgpt_bpe_free(b);
        return NULL;
    }
    for (size_t i = 0; i < ps; i++) b->pair[i].key = UINT64_MAX;
    for (uint32_t id = 0; id < n; id++) {
        const char *s = bytes + off[id];
        size_t len = off[id + 1] - off[id];
        size_t h = hash_bytes_(s, len) & b->tok_mask;
        for (;; h = (h + 1) & b->tok_mask) {
            uint32_t o = b->tok[h];
            if (!o) {
                b->tok[h] = id + 1;
                break;
            }
            o--;
            if (off[o + 1] - off[o] == len && memcmp(bytes + off[o], s, len) == 0) {
                *dup_a = o;
                *dup_b = id;
                wgpt_bpe_free(b);
                return NULL;
            }
        }
    }
    for (int c = 0; c < 256; c++) {
        char ch = (char)c;
        int64_t id = wgpt_bpe_find(b, &ch, 1);
        b->byte_id[c] = id < 0 ? NONE : (uint32_t)id;
    }
    return b;
}

void wgpt_bpe_free(wgpt_bpe *b) {
    if (!b) return;
    free(b->tok);
    free(b->pair);
    free(b->whole);
    free(b);
}

int64_t wgpt_bpe_find(const wgpt_bpe *b, const char *s, size_t len) {
    for (size_t h = hash_bytes_(s, len) & b->tok_mask;; h = (h + 1) & b->tok_mask) {
        uint32_t o = b->tok[h];
        if (!o) return -1;
        o--;
        if (b->off[o + 1] - b->off[o] == len && memcmp(b->bytes + b->off[o], s, len) == 0) return o;
    }
}

// The slot of pair (left, right): the one holding it, or the empty one where it would go.
static pair_slot *pair_slot_(const wgpt_bpe *b, uint32_t left, uint32_t right) {
    uint64_t key = (uint64_t)left << 32 | right;
    for (size_t h = hash_pair_(key) & b->pair_mask;; h = (h + 1) & b->pair_mask) {
        pair_slot *p = &b->pair[h];
        if (p->key == key || p->key == UINT64_MAX) return p;
    }
}

int wgpt_bpe_add_merge(wgpt_bpe *b, uint32_t left, uint32_t right, uint32_t *rank) {
    if (b->npairs >= b->n) return WGPT_BPE_NO_RESULT;  // more merges than tokens: keeps the table sparse
    pair_slot *p = pair_slot_(b, left, right);
    if (p->key != UINT64_MAX) {
        *rank = p->rank;
        return WGPT_BPE_REPEATED;
    }
    size_t ll = b->off[left + 1] - b->off[left], rl = b->off[right + 1] - b->off[right];
    char stackbuf[256];
    char *cat = ll + rl <= sizeof stackbuf ? stackbuf : malloc(ll + rl);
    if (!cat) return WGPT_BPE_OOM;
    memcpy(cat, b->bytes + b->off[left], ll);
    memcpy(cat + ll, b->bytes + b->off[right], rl);
    int64_t merged = wgpt_bpe_find(b, cat, ll + rl);
    if (cat != stackbuf) free(cat);
    if (merged < 0) return WGPT_BPE_NO_RESULT;
    *p = (pair_slot){(uint64_t)left << 32 | right, b->npairs++, (uint32_t)merged};
    *rank = p->rank;
    return WGPT_BPE_OK;
}

// --- the merge loop ------------------------------------------------------------

static int grow_cands_(cand **p, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    cand *q = realloc(*p, c * sizeof *q);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

void wgpt_bpe_scratch_free(wgpt_bpe_scratch *w) {
    free(w->sym);  // prev and next live in the same block
    free(w->heap);
    free(w->pend);
    memset(w, 0, sizeof *w);
}

static int cand_less_(const cand *a, const cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push_(wgpt_bpe_scratch *w, cand c) {  // room was reserved
    size_t i = w->nheap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less_(&c, &w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = c;
}

static cand heap_pop_(wgpt_bpe_scratch *w) {
    cand top = w->heap[0], last = w->heap[--w->nheap];
    size_t i = 0, n = w->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && cand_less_(&w->heap[c + 1], &w->heap[c])) c++;
        if (!cand_less_(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

// The candidate merge of the symbol at pos with its successor, if ranked.
static int cand_at_(const wgpt_bpe *b, const wgpt_bpe_scratch *w, uint32_t pos, uint32_t len, cand *c) {
    if (pos == NONE || w->next[pos] >= len) return 0;
    uint32_t nx = w->next[pos];
    const pair_slot *p = pair_slot_(b, w->sym[pos], w->sym[nx]);
    if (p->key == UINT64_MAX) return 0;
    *c = (cand){p->rank, pos, w->sym[pos], w->sym[nx]};
    return 1;
}

// Merges the symbols of s[0, len) (len >= 1) and leaves them in w's list from 0.
// encoder.py merges every occurrence of the lowest-ranked pair before it looks
// again; the heap gives the occurrences of one rank in left-to-right order, and
// the pairs those merges create wait in `pend` until that rank is done, so the
// result is the same even for merge lists where a new pair ranks lower.
static int merge_word_(const wgpt_bpe *b, wgpt_bpe_scratch *w, const char *s, uint32_t len) {
    if (len > w->cap) {
        size_t c = w->cap ? w->cap : 64;
        while (c < len) c *= 2;
        uint32_t *buf = realloc(w->sym, 3 * c * sizeof *buf);
        if (!buf) return -1;
        w->sym = buf;
        w->prev = buf + c;
        w->next = buf + 2 * c;
        w->cap = c;
    }
    // Each merge removes a symbol and adds at most two candidates.
    if (grow_cands_(&w->heap, &w->heap_cap, 3 * (size_t)len) < 0) return -1;
    if (grow_cands_(&w->pend, &w->pend_cap, 2 * (size_t)len) < 0) return -1;
    for (uint32_t i = 0; i < len; i++) {
        w->sym[i] = b->byte_id[(unsigned char)s[i]];
        w->prev[i] = i ? i - 1 : NONE;
        w->next[i] = i + 1;
    }
    w->nheap = w->npend = 0;
    cand c;
    for (uint32_t i = 0; i + 1 < len; i++)
        if (cand_at_(b, w, i, len, &c)) heap_push_(w, c);
    uint32_t phase = NONE;
    for (;;) {
        if (w->npend && (!w->nheap || w->heap[0].rank != phase)) {
            for (size_t i = 0; i < w->npend; i++) heap_push_(w, w->pend[i]);
            w->npend = 0;
        }
        if (!w->nheap) break;
        c = heap_pop_(w);
        uint32_t l = c.pos, r = w->next[l];
        if (w->sym[l] != c.left || r >= len || w->sym[r] != c.right) continue;  // stale
        phase = c.rank;
        w->sym[l] = pair_slot_(b, c.left, c.right)->merged;
        w->sym[r] = NONE;
        w->next[l] = w->next[r];
        if (w->next[l] < len) w->prev[w->next[l]] = l;
        if (cand_at_(b, w, w->prev[l], len, &c)) w->pend[w->npend++] = c;
        if (cand_at_(b, w, l, len, &c)) w->pend[w->npend++] = c;
    }
    return 0;
}

int wgpt_bpe_encode(const wgpt_bpe *b, wgpt_bpe_scratch *w, const char *s, size_t len, uint32_t **ids, size_t *n,
                    size_t *cap) {
    int64_t id = wgpt_bpe_find(b, s, len);
    if (id >= 0 && b->whole[id]) return wgpt_tokenizer_push_(ids, n, cap, (uint32_t)id);
    if (len >= NONE) return -1;
    if (merge_word_(b, w, s, (uint32_t)len) < 0) return -1;
    for (uint32_t i = 0; i < len; i = w->next[i])
        if (wgpt_tokenizer_push_(ids, n, cap, w->sym[i]) < 0) return -1;
    return 0;
}

int wgpt_bpe_finish(wgpt_bpe *b, int *missing_byte) {
    *missing_byte = -1;
    for (int c = 0; c < 256; c++)
        if (b->byte_id[c] == NONE) {
            *missing_byte = c;
            return WGPT_BPE_MISSING_BYTE;
        }
    // A token found whole in the text is that one id only if BPE would build it
    // from its bytes; record which do, so encoding skips BPE for them.
    wgpt_bpe_scratch w = {0};
    for (uint32_t id = 0; id < b->n; id++) {
        uint32_t len = b->off[id + 1] - b->off[id];
        if (len == 0) continue;
        if (merge_word_(b, &w, b->bytes + b->off[id], len) < 0) {
            wgpt_bpe_scratch_free(&w);
            return WGPT_BPE_OOM;
        }
        b->whole[id] = w.sym[0] == id && w.next[0] >= len;
    }
    wgpt_bpe_scratch_free(&w);
    return 0;
}
