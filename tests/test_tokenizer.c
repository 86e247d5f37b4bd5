// test_tokenizer.c: src/data/tokenizer.h, no GPU.
//   - GPT-2: every case of tests/data/gpt2_fixtures.jsonl (ids from the
//     reference encoder, see tests/data/gen_gpt2_fixtures.js) encodes to the
//     same ids and decodes back; words JavaScript ports of encoder.py can get
//     wrong ("constructor", "toString", ...) against hand-verified ids;
//   - the pre-tokenization regex: its \s is Unicode White_Space (not PCRE2's
//     or JavaScript's), invalid UTF-8 becomes pieces of its own;
//   - BPE merges every occurrence of the lowest-ranked pair before looking
//     again (a made-up merge list where the order matters);
//   - decode(encode(x)) == x on random bytes, invalid UTF-8, random Unicode;
//   - the byte tokenizer;
//   - bad files: missing, truncated JSON, wrong entry count, bad ids, malformed
//     or unknown merges, each with a message naming the file;
//   - speed (printed): mixed text and single pieces of a megabyte.
#include "test_util.h"

#include <cjson/cJSON.h>
#include <time.h>
#include <unistd.h>

#include "data/tokenizer.h"
#include "data/tokenizer_internal.h"
#include "util/clock.h"

#define ENCODER_JSON WGPT_SOURCE_DIR "/third_party/gpt2-bpe/encoder.json"
#define VOCAB_BPE WGPT_SOURCE_DIR "/third_party/gpt2-bpe/vocab.bpe"

static wgpt_tokenizer *GPT2;
static char TMP[64];  // a private folder for the bad files

static int group_setup(void **state) {
    (void)state;
    char err[512];
    GPT2 = wgpt_tokenizer_open_gpt2(ENCODER_JSON, VOCAB_BPE, err, sizeof err);
    if (!GPT2) {
        fprintf(stderr, "cannot open GPT-2's tokenizer: %s\n", err);
        return -1;
    }
    snprintf(TMP, sizeof TMP, "/tmp/wgpt_test_tokenizer_XXXXXX");
    if (!mkdtemp(TMP)) return -1;
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    wgpt_tokenizer_free(GPT2);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", TMP);
    return system(cmd) == 0 ? 0 : -1;
}

static uint64_t rng_ = 0x243F6A8885A308D3ull;
static uint32_t rand_u32_(void) {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return (uint32_t)(rng_ >> 32);
}

// Encodes text[0, len) into a fresh array (*n ids).
static uint32_t *encode_(const wgpt_tokenizer *t, const char *text, size_t len, size_t *n) {
    uint32_t *ids = NULL;
    size_t cap = 0;
    *n = 0;
    assert_int_equal(wgpt_tokenizer_encode(t, text, len, &ids, n, &cap), 0);
    assert_true(*n <= cap);
    return ids;
}

// decode(encode(text)) must give text back, byte for byte; every id in range.
static void assert_round_trip_(const wgpt_tokenizer *t, const char *text, size_t len) {
    size_t n = 0, back_len = 0;
    uint32_t *ids = encode_(t, text, len, &n);
    for (size_t i = 0; i < n; i++) assert_true(ids[i] < wgpt_tokenizer_vocab_size(t));
    char *back = wgpt_tokenizer_decode_all_len(t, ids, n, &back_len);
    assert_non_null(back);
    if (back_len != len || memcmp(back, text, len) != 0)
        fail_msg("%s: %zu bytes come back as %zu different bytes", wgpt_tokenizer_name(t), len, back_len);
    assert_int_equal(back[back_len], 0);
    free(back);
    free(ids);
}

static void assert_ids_(const char *what, const uint32_t *got, size_t n, const uint32_t *want, size_t wn) {
    for (size_t i = 0; i < n && i < wn; i++)
        if (got[i] != want[i]) fail_msg("%s: id %zu is %u, expected %u", what, i, got[i], want[i]);
    if (n != wn) fail_msg("%s: %zu ids, expected %zu", what, n, wn);
}

// --- GPT-2 against the reference ---------------------------------------------

static void gpt2_matches_reference_fixtures(void **state) {
    (void)state;
    char *text = tu_read_source("tests/data/gpt2_fixtures.jsonl");
    int cases = 0;
    uint32_t want[4096];
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        cJSON *c = cJSON_Parse(line);
        if (!c) fail_msg("gpt2_fixtures.jsonl: case %d is not JSON", cases + 1);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
        const cJSON *txt = cJSON_GetObjectItemCaseSensitive(c, "text");
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "ids");
        assert_true(cJSON_IsString(name) && cJSON_IsString(txt) && cJSON_IsArray(ids));
        size_t wn = 0;
        const cJSON *id;
        cJSON_ArrayForEach(id, ids) {
            assert_true(wn < sizeof want / sizeof want[0]);
            want[wn++] = (uint32_t)id->valueint;
        }
        size_t n = 0;
        uint32_t *got = encode_(GPT2, txt->valuestring, strlen(txt->valuestring), &n);
        char what[128];
        snprintf(what, sizeof what, "gpt2_fixtures.jsonl case \"%.80s\"", name->valuestring);
        assert_ids_(what, got, n, want, wn);
        char *back = wgpt_tokenizer_decode_all(GPT2, got, n);
        assert_non_null(back);
        assert_string_equal(back, txt->valuestring);
        free(back);
        free(got);
        cJSON_Delete(c);
        cases++;
    }
    free(text);
    assert_true(cases >= 250);  // an emptied fixture file must not pass
}

// Words kept out of the fixtures: JavaScript ports of encoder.py keep the
// vocabulary in plain objects, where "constructor" and friends are also
// Object.prototype members. The splits are those of OpenAI's encoder.py, and
// the test checks each id against its text in encoder.json, so both can be
// read here by eye. "hello world" is tiktoken's own gpt2 test case.
static void gpt2_hand_verified_ids(void **state) {
    (void)state;
    static const struct {
        const char *text;
        int n;
        uint32_t ids[8];
        const char *pieces[8];
    } cases[] = {
        {"Hello world", 2, {15496, 995}, {"Hello", " world"}},
        {"hello world", 2, {31373, 995}, {"hello", " world"}},
        {"constructor", 2, {41571, 273}, {"construct", "or"}},
        {" constructor", 1, {23772}, {" constructor"}},
        {"toString", 2, {1462, 10100}, {"to", "String"}},
        {"__proto__", 4, {834, 1676, 1462, 834}, {"__", "pro", "to", "__"}},
        {"hasOwnProperty", 3, {10134, 23858, 21746}, {"has", "Own", "Property"}},
        {"valueOf", 2, {8367, 5189}, {"value", "Of"}},
        {"x.constructor.prototype", 6, {87, 13, 41571, 273, 13, 38124},
         {"x", ".", "construct", "or", ".", "prototype"}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int i = 0; i < cases[k].n; i++) {
            size_t len = 0;
            const char *s = wgpt_tokenizer_decode(GPT2, cases[k].ids[i], &len);
            assert_non_null(s);
            if (len != strlen(cases[k].pieces[i]) || memcmp(s, cases[k].pieces[i], len) != 0)
                fail_msg("id %u is \"%.*s\", expected \"%s\"", cases[k].ids[i], (int)len, s, cases[k].pieces[i]);
        }
        size_t n = 0;
        uint32_t *got = encode_(GPT2, cases[k].text, strlen(cases[k].text), &n);
        assert_ids_(cases[k].text, got, n, cases[k].ids, (size_t)cases[k].n);
        free(got);
    }
}

static void gpt2_metadata_and_eot(void **state) {
    (void)state;
    assert_string_equal(wgpt_tokenizer_name(GPT2), "gpt2");
    assert_int_equal(wgpt_tokenizer_vocab_size(GPT2), 50257);
    assert_int_equal(wgpt_tokenizer_eot(GPT2), 50256);
    size_t len = 0;
    const char *s = wgpt_tokenizer_decode(GPT2, 50256, &len);
    assert_int_equal(len, 13);
    assert_memory_equal(s, "<|endoftext|>", 13);
    assert_null(wgpt_tokenizer_decode(GPT2, 50257, &len));
    assert_null(wgpt_tokenizer_decode(GPT2, UINT32_MAX, &len));
    uint32_t bad[] = {15496, 50257};
    assert_null(wgpt_tokenizer_decode_all(GPT2, bad, 2));
    char *empty = wgpt_tokenizer_decode_all(GPT2, NULL, 0);
    assert_string_equal(empty, "");
    free(empty);
    // Ids of single bytes decode to those bytes (the byte-to-unicode map inverted).
    s = wgpt_tokenizer_decode(GPT2, 198, &len);  // "Ċ" in encoder.json
    assert_int_equal(len, 1);
    assert_int_equal(s[0], '\n');
    s = wgpt_tokenizer_decode(GPT2, 220, &len);  // "Ġ"
    assert_int_equal(len, 1);
    assert_int_equal(s[0], ' ');
}

static void encode_appends(void **state) {
    (void)state;
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    assert_int_equal(wgpt_tokenizer_encode(GPT2, "", 0, &ids, &n, &cap), 0);
    assert_int_equal(n, 0);
    assert_int_equal(wgpt_tokenizer_encode(GPT2, "Hello world", 11, &ids, &n, &cap), 0);
    assert_int_equal(wgpt_tokenizer_encode(GPT2, "Hello world", 11, &ids, &n, &cap), 0);
    // Two calls give two separate texts: no piece spans the boundary.
    static const uint32_t want[] = {15496, 995, 15496, 995};
    assert_ids_("two appends", ids, n, want, 4);
    // Many appends grow the array past its first allocation.
    for (int i = 0; i < 1000; i++) assert_int_equal(wgpt_tokenizer_encode(GPT2, " world", 6, &ids, &n, &cap), 0);
    assert_int_equal(n, 1004);
    for (size_t i = 4; i < n; i++) assert_int_equal(ids[i], 995);
    free(ids);
}

// --- the pre-tokenization regex ------------------------------------------------

typedef struct pieces {
    char buf[256];
    size_t len;
} pieces;

static int collect_(void *ctx, const char *piece, size_t len) {
    pieces *p = ctx;
    assert_true(p->len + len + 1 < sizeof p->buf);
    memcpy(p->buf + p->len, piece, len);
    p->len += len;
    p->buf[p->len++] = '|';
    return 0;
}

struct lens_ctx {
    size_t *lens, *n;  // (8) the length of each piece
};
static int piece_len_(void *ctx, const char *piece, size_t len) {
    (void)piece;
    struct lens_ctx *c = ctx;
    assert_true(*c->n < 8);
    c->lens[(*c->n)++] = len;
    return 0;
}

// Each expected split is worked out by hand from the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with \s = White_Space ('|' ends each piece).
static void pretokenize_splits(void **state) {
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"don't", "don|'t|"},
        {"DON'T", "DON|'|T|"},  // GPT-2's contractions are lowercase only
        {"a  b", "a| | b|"},
        {"   x", "  | x|"},
        {"x   ", "x|   |"},
        {"\n\n\n", "\n\n\n|"},
        {"a\n\n b", "a|\n\n| b|"},
        {"3.14", "3|.|14|"},
        {" !!x", " !!|x|"},
        // White_Space: U+0085 and U+2003 are spaces (a run before "b" leaves
        // its last one to \s+); U+FEFF, U+180E and U+001C are not (they join
        // the punctuation class). PCRE2's own \s would take U+180E, JS's U+FEFF.
        {"a\xc2\x85\xc2\x85" "b", "a|\xc2\x85|\xc2\x85|b|"},
        {"a\xe2\x80\x83\xe2\x80\x83" "b", "a|\xe2\x80\x83|\xe2\x80\x83|b|"},
        {"a\xef\xbb\xbf\xef\xbb\xbf" "b", "a|\xef\xbb\xbf\xef\xbb\xbf|b|"},
        {"a\xe1\xa0\x8e\xe1\xa0\x8e" "b", "a|\xe1\xa0\x8e\xe1\xa0\x8e|b|"},
        {"a\x1c\x1c" "b", "a|\x1c\x1c|b|"},
        // Bytes that are not UTF-8 are pieces of their own, and end a match
        // like the end of the text does.
        {"ab\xff\xfe" "cd  ", "ab|\xff\xfe|cd|  |"},
        {"a \xff b", "a| |\xff| b|"},
        {"\xe4\xb8", "\xe4\xb8|"},                            // truncated 3-byte sequence
        {"x\xe4\xb8\xad\xe4\xb8", "x\xe4\xb8\xad|\xe4\xb8|"},  // a valid CJK letter, then half of one
        {"\xc0\xaf\xed\xa0\x80" "z", "\xc0\xaf\xed\xa0\x80|z|"},  // overlong, surrogate
    };
    char err[256];
    pcre2_code *re = wgpt_pretok_compile(err, sizeof err);
    if (!re) fail_msg("%s", err);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        pieces p = {.len = 0};
        assert_int_equal(wgpt_pretok_split(re, cases[k].text, strlen(cases[k].text), collect_, &p), 0);
        p.buf[p.len] = 0;
        if (strcmp(p.buf, cases[k].want) != 0)
            fail_msg("case %zu splits as \"%s\", expected \"%s\"", k, p.buf, cases[k].want);
    }
    // Long pieces, and pieces across the 256-byte windows PCRE2 sees at a time
    // (tokenizer_pretokenize.c): none may be cut at a window's end.
    static const struct {
        const char *head, *unit;
        int reps;
        const char *tail;
        size_t want[3];  // the lengths of the pieces
    } longs[] = {
        {"", "\xe4\xb8\xad", 300, "", {900}},           // one run of 300 CJK letters
        {"x", " ", 300, "y", {1, 299, 2}},                // "x", 299 spaces, " y"
        {"", "a", 253, "'re", {253, 3}},                  // "'re" across the first window's end
        {"", "a", 254, "'ll", {254, 3}},
        {"", "1", 1000, "!", {1000, 1}},
        {"!!!", "\xf0\x9f\x98\x80!", 150, "z", {753, 1}},  // a 4-byte character at bytes 253..256
        {"a", "\n", 600, "", {1, 600}},
    };
    char buf[1024];
    for (size_t k = 0; k < sizeof longs / sizeof longs[0]; k++) {
        size_t len = 0, ul = strlen(longs[k].unit);
        memcpy(buf, longs[k].head, strlen(longs[k].head));
        len += strlen(longs[k].head);
        for (int r = 0; r < longs[k].reps; r++, len += ul) memcpy(buf + len, longs[k].unit, ul);
        memcpy(buf + len, longs[k].tail, strlen(longs[k].tail));
        len += strlen(longs[k].tail);
        size_t lens[8], np = 0;
        assert_int_equal(wgpt_pretok_split(re, buf, len, piece_len_, &(struct lens_ctx){lens, &np}), 0);
        size_t wn = 0;
        while (wn < 3 && longs[k].want[wn]) wn++;
        for (size_t i = 0; i < np && i < wn; i++)
            if (lens[i] != longs[k].want[i])
                fail_msg("long case %zu: piece %zu has %zu bytes, expected %zu", k, i, lens[i], longs[k].want[i]);
        if (np != wn) fail_msg("long case %zu: %zu pieces, expected %zu", k, np, wn);
    }
    pcre2_code_free(re);
}

// --- BPE order ----------------------------------------------------------------

// encoder.py merges every occurrence of the lowest-ranked pair, left to
// right, before it looks for the next pair. In a made-up merge list where
// "aa"+"a" ranks before "a"+"a", "aaaa" must become [aa, aa]: taking the
// merges one at a time by rank would give [aaa, a]. Token "ab" has no merge,
// so "ab" stays two bytes although it is in the vocabulary.
static void bpe_merges_by_rank_like_encoder_py(void **state) {
    (void)state;
    enum { AA = 256, AAA = 257, AB = 258, N = 259 };
    char bytes[256 + 2 + 3 + 2];
    uint32_t off[N + 1];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        off[i] = (uint32_t)i;
    }
    memcpy(bytes + 256, "aaaaaab", 7);
    off[AA] = 256;
    off[AAA] = 258;
    off[AB] = 261;
    off[N] = 263;
    uint32_t da, db, rank;
    wgpt_bpe *b = wgpt_bpe_create(bytes, off, N, &da, &db);
    assert_non_null(b);
    assert_int_equal(wgpt_bpe_add_merge(b, AA, 'a', &rank), WGPT_BPE_OK);
    assert_int_equal(rank, 0);
    assert_int_equal(wgpt_bpe_add_merge(b, 'a', 'a', &rank), WGPT_BPE_OK);
    assert_int_equal(rank, 1);
    assert_int_equal(wgpt_bpe_add_merge(b, 'a', 'a', &rank), WGPT_BPE_REPEATED);
    assert_int_equal(rank, 1);
    assert_int_equal(wgpt_bpe_add_merge(b, 'b', 'b', &rank), WGPT_BPE_NO_RESULT);
    int missing = 0;
    assert_int_equal(wgpt_bpe_finish(b, &missing), 0);
    static const struct {
        const char *text;
        int n;
        uint32_t ids[4];
    } cases[] = {
        {"a", 1, {'a'}},
        {"aa", 1, {AA}},
        {"aaa", 1, {AAA}},           // [aa, a], then aa+a
        {"aaaa", 2, {AA, AA}},       // [aa, aa]: no pair left
        {"aaaaa", 2, {AA, AAA}},     // [aa, aa, a], then aa+a at the end
        {"ab", 2, {'a', 'b'}},       // a vocabulary entry BPE cannot build
        {"baab", 3, {'b', AA, 'b'}},
    };
    wgpt_bpe_scratch w = {0};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint32_t *ids = NULL;
        size_t n = 0, cap = 0;
        assert_int_equal(wgpt_bpe_encode(b, &w, cases[k].text, strlen(cases[k].text), &ids, &n, &cap), 0);
        assert_ids_(cases[k].text, ids, n, cases[k].ids, (size_t)cases[k].n);
        free(ids);
    }
    wgpt_bpe_scratch_free(&w);
    wgpt_bpe_free(b);
    // Two tokens with the same bytes are refused: token 256 is "a" again.
    bytes[256] = 'a';
    off[257] = 257;
    assert_null(wgpt_bpe_create(bytes, off, 257, &da, &db));
    assert_int_equal(da, 'a');
    assert_int_equal(db, 256);
}

// --- round trips -------------------------------------------------------------------

static void gpt2_round_trips_random_bytes(void **state) {
    (void)state;
    char buf[4096];
    for (int k = 0; k < 1500; k++) {
        size_t len = 1 + rand_u32_() % sizeof buf;
        // Some texts mostly ASCII (with invalid bytes here and there), some any bytes.
        int ascii = k % 2;
        for (size_t i = 0; i < len; i++) {
            uint32_t r = rand_u32_();
            buf[i] = ascii && r % 16 ? " eatnoi\n'sd1.,T"[r % 15] : (char)r;
        }
        assert_round_trip_(GPT2, buf, len);
    }
}

static void gpt2_round_trips_invalid_utf8(void **state) {
    (void)state;
    static const char *cases[] = {
        "\x80",           "\xbf\x80",         "\xc0\xaf",     "\xc1\xbf",  "\xe0\x80\xaf", "\xed\xa0\x80",
        "\xed\xbf\xbf",   "\xf4\x90\x80\x80", "\xf5\x80",     "\xfe\xff",  "\xff",         "\xe4\xb8",
        "abc\xe4\xb8",    "\xe4\xb8" "abc",   "I'm\x80 here", "a  \xff  ", "\xff'\xffs",   "\xc3",
        "\xf0\x9f\x98",   "\xf0\x9f\x98\x80\xf0\x9f\x98", " \xcc\x81", "\xcc\x81\xcc\x81 \xff\xfe\xfd",
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) assert_round_trip_(GPT2, cases[k], strlen(cases[k]));
    // Nul bytes are text like any other.
    assert_round_trip_(GPT2, "a\0b\0\0 c\0", 8);
    // Invalid bytes split the text: the valid parts encode as they would alone.
    size_t n1, n2, n3, n;
    uint32_t *a = encode_(GPT2, "hello", 5, &n1), *b = encode_(GPT2, "\xff\xfe", 2, &n2),
             *c = encode_(GPT2, " world's", 8, &n3), *all = encode_(GPT2, "hello\xff\xfe world's", 15, &n);
    uint32_t want[64];
    assert_true(n1 + n2 + n3 <= 64);
    memcpy(want, a, n1 * 4);
    memcpy(want + n1, b, n2 * 4);
    memcpy(want + n1 + n2, c, n3 * 4);
    assert_ids_("hello\\xff\\xfe world's", all, n, want, n1 + n2 + n3);
    free(a);
    free(b);
    free(c);
    free(all);
}

// Appends the UTF-8 of code point cp.
static size_t put_utf8_(char *s, uint32_t cp) {
    if (cp < 0x80) return s[0] = (char)cp, 1;
    if (cp < 0x800) return s[0] = (char)(0xC0 | cp >> 6), s[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        s[0] = (char)(0xE0 | cp >> 12);
        s[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        s[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    s[0] = (char)(0xF0 | cp >> 18);
    s[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    s[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    s[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static void gpt2_round_trips_random_unicode(void **state) {
    (void)state;
    static const uint32_t ranges[][2] = {{0x20, 0x7F},     {0x80, 0x800},     {0x3000, 0x30FF}, {0x4E00, 0x9FFF},
                                         {0x600, 0x6FF},    {0x900, 0x97F},    {0x1F300, 0x1FAFF}, {0x2000, 0x206F},
                                         {0xE000, 0xF8FF},  {0x10000, 0x10FFFF}};
    char buf[4 * 600];
    for (int k = 0; k < 600; k++) {
        size_t len = 0, nch = 1 + rand_u32_() % 600;
        for (size_t i = 0; i < nch; i++) {
            const uint32_t *r = ranges[rand_u32_() % 10];
            uint32_t cp = r[0] + rand_u32_() % (r[1] - r[0]);
            if (cp >= 0xD800 && cp < 0xE000) cp = ' ';
            len += put_utf8_(buf + len, cp);
        }
        assert_round_trip_(GPT2, buf, len);
    }
}

// wgpt_tokenizer_cut_point: a prefix cut there and the rest encode to the
// ids of the whole, for any continuation (what lets `wgpt tokenize` bound its
// memory on long lines without changing a single id); one long word has none.
static void cut_point_keeps_the_ids(void **state) {
    (void)state;
    static const char *const alphabet[] = {"a", "bc", " ", "  ", "\n", "\n\n", "'s", "'re", "12", " 3", "!!", ".", "\t",
                                           "\xc3\xa9", "\xe4\xb8\xad", "\xff", "\r\n", "word"};
    char text[1200];
    for (int k = 0; k < 400; k++) {
        size_t len = 0;
        while (len < 1000) {
            const char *p = alphabet[rand_u32_() % (sizeof alphabet / sizeof alphabet[0])];
            memcpy(text + len, p, strlen(p));
            len += strlen(p);
        }
        size_t cut = 1 + rand_u32_() % (len - 1);  // the prefix the pipeline holds
        size_t at = wgpt_tokenizer_cut_point(GPT2, text, cut);
        assert_true(at <= cut);
        size_t nw, na, nb;
        uint32_t *whole = encode_(GPT2, text, len, &nw), *a = encode_(GPT2, text, at, &na),
                 *b = encode_(GPT2, text + at, len - at, &nb);
        // (an empty part encodes to a NULL array: memcmp may not see it)
        if (na + nb != nw || (na && memcmp(whole, a, na * 4) != 0) || (nb && memcmp(whole + na, b, nb * 4) != 0))
            fail_msg("case %d: cutting at %zu of a %zu-byte prefix changes the ids", k, at, cut);
        free(whole), free(a), free(b);
    }
    memset(text, 'x', 1000);  // one word: no exact cut
    assert_int_equal(wgpt_tokenizer_cut_point(GPT2, text, 1000), 0);
    wgpt_tokenizer *bytes = wgpt_tokenizer_open_bytes();
    assert_int_equal(wgpt_tokenizer_cut_point(bytes, text, 1000), 1000);
    wgpt_tokenizer_free(bytes);
}

// --- the byte tokenizer ----------------------------------------------------------------

static void bytes_tokenizer(void **state) {
    (void)state;
    wgpt_tokenizer *t = wgpt_tokenizer_open_bytes();
    assert_non_null(t);
    assert_string_equal(wgpt_tokenizer_name(t), "bytes");
    assert_int_equal(wgpt_tokenizer_vocab_size(t), 256);
    assert_int_equal(wgpt_tokenizer_eot(t), -1);
    for (uint32_t id = 0; id < 256; id++) {
        size_t len = 0;
        const char *s = wgpt_tokenizer_decode(t, id, &len);
        assert_int_equal(len, 1);
        assert_int_equal((unsigned char)s[0], id);
    }
    assert_null(wgpt_tokenizer_decode(t, 256, NULL));
    size_t n = 0;
    uint32_t *ids = encode_(t, "A\0\xff\n", 4, &n);
    static const uint32_t want[] = {65, 0, 255, 10};
    assert_ids_("bytes", ids, n, want, 4);
    free(ids);
    // Appending grows the array in one step per call.
    ids = NULL;
    size_t cap = 0;
    n = 0;
    char big[3000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)(i * 7);
    for (int k = 0; k < 3; k++) assert_int_equal(wgpt_tokenizer_encode(t, big, sizeof big, &ids, &n, &cap), 0);
    assert_int_equal(n, 3 * sizeof big);
    for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], (unsigned char)big[i % sizeof big]);
    free(ids);
    assert_round_trip_(t, big, sizeof big);
    wgpt_tokenizer_free(t);
}

// --- bad files ------------------------------------------------------------------------

static char *tmp_path_(const char *name) {
    static char path[2][256];
    static int which;
    which ^= 1;
    snprintf(path[which], sizeof path[which], "%s/%s", TMP, name);
    return path[which];
}

static const char *write_tmp_(const char *name, const char *text, size_t len) {
    char *path = tmp_path_(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

// Opening must fail with a message holding every one of the fragments.
static void assert_open_fails_(const char *enc, const char *bpe, const char *f1, const char *f2, const char *f3) {
    char err[512] = "";
    wgpt_tokenizer *t = wgpt_tokenizer_open_gpt2(enc, bpe, err, sizeof err);
    if (t) {
        wgpt_tokenizer_free(t);
        fail_msg("opened %s + %s, expected an error with \"%s\"", enc, bpe, f1);
    }
    const char *frag[] = {f1, f2, f3};
    for (int i = 0; i < 3; i++)
        if (frag[i] && !strstr(err, frag[i])) fail_msg("error \"%s\" does not say \"%s\"", err, frag[i]);
}

static void bad_encoder_json(void **state) {
    (void)state;
    assert_open_fails_(WGPT_SOURCE_DIR "/no/such/encoder.json", VOCAB_BPE, "no/such/encoder.json", "cannot open",
                       "No such file");
    char *real = tu_read_source("third_party/gpt2-bpe/encoder.json");
    const char *p = write_tmp_("truncated.json", real, 100000);
    assert_open_fails_(p, VOCAB_BPE, p, "not valid JSON", "truncated?");
    p = write_tmp_("array.json", "[1, 2]", 6);
    assert_open_fails_(p, VOCAB_BPE, p, "expected a JSON object", NULL);
    const char *small = "{\"a\": 0, \"b\": 1, \"c\": 2}";
    p = write_tmp_("small.json", small, strlen(small));
    assert_open_fails_(p, VOCAB_BPE, p, "has 3 entries", "50257");

    // Changes to the real file, one at a time.
    cJSON *root = cJSON_Parse(real);
    assert_non_null(root);
    cJSON *item = cJSON_DetachItemFromObjectCaseSensitive(root, "Hello");
    char *s = cJSON_PrintUnformatted(root);
    p = write_tmp_("missing_one.json", s, strlen(s));
    assert_open_fails_(p, VOCAB_BPE, p, "has 50256 entries", "50257");
    free(s);
    cJSON_AddItemToObject(root, "Hello", item);
    struct {
        const char *key;
        cJSON *value;
        const char *f1, *f2;
    } edits[] = {
        {"Hello", cJSON_CreateNumber(995), "id 995 is given twice", "\"Hello\""},
        {"Hello", cJSON_CreateNumber(50257), "token \"Hello\" has id 50257", "0..50256"},
        {"Hello", cJSON_CreateNumber(1.5), "token \"Hello\" has id 1.5", NULL},
        {"Hello", cJSON_CreateString("15496"), "token \"Hello\" has id \"15496\"", NULL},
        {"<|endoftext|>", cJSON_CreateNumber(0), "id 0 is given twice", NULL},
    };
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        cJSON *old = cJSON_GetObjectItemCaseSensitive(root, edits[k].key);
        cJSON *keep = cJSON_Duplicate(old, 1);
        cJSON_ReplaceItemInObjectCaseSensitive(root, edits[k].key, edits[k].value);
        s = cJSON_PrintUnformatted(root);
        p = write_tmp_("edited.json", s, strlen(s));
        assert_open_fails_(p, VOCAB_BPE, p, edits[k].f1, edits[k].f2);
        free(s);
        cJSON_ReplaceItemInObjectCaseSensitive(root, edits[k].key, keep);
    }
    // A token spelled with a character the byte map does not use (U+4E2D),
    // and the end-of-text token renamed.
    cJSON *hello = cJSON_DetachItemFromObjectCaseSensitive(root, "Hello");
    cJSON_AddItemToObject(root, "\xe4\xb8\xad", hello);
    s = cJSON_PrintUnformatted(root);
    p = write_tmp_("unmapped.json", s, strlen(s));
    assert_open_fails_(p, VOCAB_BPE, p, "(id 15496)", "outside GPT-2's byte-to-unicode map");
    free(s);
    cJSON_DeleteItemFromObjectCaseSensitive(root, "\xe4\xb8\xad");
    cJSON_AddItemToObject(root, "Hello", cJSON_CreateNumber(15496));
    cJSON *eot = cJSON_DetachItemFromObjectCaseSensitive(root, "<|endoftext|>");
    cJSON_AddItemToObject(root, "<|end|>", eot);
    s = cJSON_PrintUnformatted(root);
    p = write_tmp_("eot.json", s, strlen(s));
    assert_open_fails_(p, VOCAB_BPE, p, "id 50256 is \"<|end|>\"", "<|endoftext|>");
    free(s);
    cJSON_Delete(root);
    // "Hello\u0000": cJSON cuts the key to "Hello", which was accepted unseen (found writing fuzz_tokenizer_files).
    const char *hello_at = strstr(real, "\"Hello\": 15496");
    assert_non_null(hello_at);
    size_t n = strlen(real), head = (size_t)(hello_at - real) + strlen("\"Hello");
    char *nul = malloc(n + 7);
    assert_non_null(nul);
    memcpy(nul, real, head);
    memcpy(nul + head, "\\u0000", 6);
    memcpy(nul + head + 6, real + head, n - head + 1);
    p = write_tmp_("nul.json", nul, n + 6);
    assert_open_fails_(p, VOCAB_BPE, p, "line 1, column", "holds \\u0000");
    free(nul);
    free(real);
}

static void bad_vocab_bpe(void **state) {
    (void)state;
    assert_open_fails_(ENCODER_JSON, WGPT_SOURCE_DIR "/no/such/vocab.bpe", "no/such/vocab.bpe", "cannot open", NULL);
    static const struct {
        const char *text, *f1, *f2;
    } cases[] = {
        {"", "has 0 merges", "50000"},
        {"\xc4\xa0 t\n", ":1: expected a header", NULL},
        {"#version: 0.2\n\xc4\xa0 t\nno_space_here\n", ":3: cannot parse merge \"no_space_here\"", "one space"},
        {"#version: 0.2\n\xc4\xa0 t\na  b\n", ":3: cannot parse merge", NULL},
        {"#version: 0.2\n\xc4\xa0 t\na \n", ":3: cannot parse merge", NULL},
        {"#version: 0.2\n\n", ":2: cannot parse merge \"\"", NULL},
        {"#version: 0.2\n\xc4\xa0 t\n\xc4\xa0 t\n", ":3: merge \"\xc4\xa0 t\" repeats line 2", NULL},
        {"#version: 0.2\n\xe4\xb8\xad t\n", ":2: symbol \"\xe4\xb8\xad\"", "outside GPT-2's byte-to-unicode map"},
        {"#version: 0.2\nqqqqzz t\n", ":2: symbol \"qqqqzz\" is not a token of encoder.json", NULL},
        {"#version: 0.2\n\xc4\xa0t \xc4\xa0t\n", ":2: merge", "which is not a token of encoder.json"},
        {"#version: 0.2\n\xc4\xa0 t\n", "has 1 merges; GPT-2 has 50000", NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *p = write_tmp_("vocab.bpe", cases[k].text, strlen(cases[k].text));
        assert_open_fails_(ENCODER_JSON, p, p, cases[k].f1, cases[k].f2);
    }
    // A NUL byte: "Ġ t\0x" was read as the merge "Ġ t" (found writing fuzz_tokenizer_files).
    static const char nul_bpe[] = "#version: 0.2\n\xc4\xa0 t\0x\n";
    const char *np = write_tmp_("nul.bpe", nul_bpe, sizeof nul_bpe - 1);
    assert_open_fails_(ENCODER_JSON, np, np, ":2: a NUL byte at byte 5", NULL);
    // The real file less its last merge, and with one merge too many.
    char *real = tu_read_source("third_party/gpt2-bpe/vocab.bpe");
    size_t len = strlen(real);
    assert_true(len > 2 && real[len - 1] == '\n');
    size_t cut = len - 1;
    while (real[cut - 1] != '\n') cut--;
    const char *p = write_tmp_("short.bpe", real, cut);
    assert_open_fails_(ENCODER_JSON, p, p, "has 49999 merges", "50000");
    char *more = malloc(len + 8);
    memcpy(more, real, len);
    memcpy(more + len, "a b\n", 4);
    p = write_tmp_("long.bpe", more, len + 4);
    assert_open_fails_(ENCODER_JSON, p, p, ":50002: one merge too many", NULL);
    // Windows line endings and no final newline are fine.
    char *crlf = malloc(2 * len + 1);
    size_t m = 0;
    for (size_t i = 0; i < len - 1; i++) {
        if (real[i] == '\n') crlf[m++] = '\r';
        crlf[m++] = real[i];
    }
    p = write_tmp_("crlf.bpe", crlf, m);
    char err[512];
    wgpt_tokenizer *t = wgpt_tokenizer_open_gpt2(ENCODER_JSON, p, err, sizeof err);
    if (!t) fail_msg("%s", err);
    wgpt_tokenizer_free(t);
    free(crlf);
    free(more);
    free(real);
}

// --- speed ------------------------------------------------------------------------------

static void encode_speed(void **state) {
    (void)state;
    if (getenv("WGPT_TEST_QUICK")) {  // under valgrind: 50x slower, and it measures nothing
        printf("skipped: a speed measurement (WGPT_TEST_QUICK is set)\n");
        skip();
    }
    // 4 MB of the fixture texts, prose, code and scripts, over and over.
    char *fix = tu_read_source("tests/data/gpt2_fixtures.jsonl");
    size_t cap = 4u << 20, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t flen = strlen(fix);
    while (len < cap) {
        size_t k = flen < cap - len ? flen : cap - len;
        memcpy(text + len, fix, k);
        len += k;
    }
    free(fix);
    double t0 = wgpt_clock_s();
    size_t n = 0;
    uint32_t *ids = encode_(GPT2, text, len, &n);
    double dt = wgpt_clock_s() - t0;
    printf("    gpt2 encode: %.1f MB of mixed text in %.3f s: %.1f MB/s, %.2f bytes/token\n", len / 1e6, dt,
           len / 1e6 / dt, (double)len / (double)n);
    free(ids);
    // Single pieces of a megabyte (one word, one number, one run of spaces):
    // BPE must not be quadratic in the length of a piece.
    size_t big = 1u << 20;
    const char *fill[] = {"abcdefghijklmnopqrstuvwxyz", "1234567890", " "};
    for (int k = 0; k < 3; k++) {
        size_t fl = strlen(fill[k]);
        for (size_t i = 0; i < big; i++) text[i] = fill[k][i % fl];
        t0 = wgpt_clock_s();
        assert_round_trip_(GPT2, text, big);
        printf("    gpt2 one piece of 1 MB (\"%.5s...\"): %.3f s\n", fill[k], wgpt_clock_s() - t0);
    }
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt2_matches_reference_fixtures),
        cmocka_unit_test(gpt2_hand_verified_ids),
        cmocka_unit_test(gpt2_metadata_and_eot),
        cmocka_unit_test(encode_appends),
        cmocka_unit_test(pretokenize_splits),
        cmocka_unit_test(bpe_merges_by_rank_like_encoder_py),
        cmocka_unit_test(gpt2_round_trips_random_bytes),
        cmocka_unit_test(gpt2_round_trips_invalid_utf8),
        cmocka_unit_test(gpt2_round_trips_random_unicode),
        cmocka_unit_test(cut_point_keeps_the_ids),
        cmocka_unit_test(bytes_tokenizer),
        cmocka_unit_test(bad_encoder_json),
        cmocka_unit_test(bad_vocab_bpe),
        cmocka_unit_test(encode_speed),
    };
    return cmocka_run_group_tests_name("tokenizer", tests, group_setup, group_teardown);
}
