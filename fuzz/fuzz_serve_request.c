// fuzz_serve_request.c: libFuzzer target for what `wgpt serve` reads from and
// writes to a client (src/serve/request.c, src/serve/text.c).
//
// Input: a request body. Parsed: a refusal names a message; a request taken
// has every field in its documented range. The same bytes as model text: the
// JSON string written for them is valid UTF-8 with no raw control byte, its
// quotes and escapes balanced; the safe cut of a growing text falls at most 3
// bytes before its end.
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "serve/request.h"
#include "serve/text.h"

// 1 if s[0, n) is valid UTF-8 (RFC 3629) with no byte below 0x20.
static int clean_utf8_(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (c < 0x20 || len == 0 || i + len > n) return 0;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F) || (c == 0xF0 && s[i + 1] < 0x90) ||
            (c == 0xF4 && s[i + 1] > 0x8F))
            return 0;
        i += len;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wgpt_completion_req r;
    char msg[512], param[64];
    if (wgpt_completion_req_parse(&r, (const char *)data, size, msg, sizeof msg, param, sizeof param) < 0) {
        FUZZ_CHECK(msg[0] != 0, "a refusal without a message");
    } else {
        FUZZ_CHECK(r.prompt && strlen(r.prompt) == r.prompt_len, "prompt");
        FUZZ_CHECK(r.max_tokens >= 1 && r.n >= 1 && r.n <= WGPT_SERVE_MAX_N, "max_tokens %u n %u", r.max_tokens, r.n);
        FUZZ_CHECK(r.temperature >= 0 && r.temperature <= 2 && r.top_p > 0 && r.top_p <= 1, "temperature, top_p");
        FUZZ_CHECK(r.nstops >= 0 && r.nstops <= WGPT_SERVE_MAX_STOPS, "nstops %d", r.nstops);
        for (int i = 0; i < r.nstops; i++)
            FUZZ_CHECK(r.stop_lens[i] >= 1 && r.stop_lens[i] <= WGPT_SERVE_MAX_STOP_BYTES &&
                           strlen(r.stops[i]) == r.stop_lens[i],
                       "stop %d", i);
    }
    wgpt_completion_req_free(&r);

    const char *s = (const char *)data;
    wgpt_sbuf b = {0};
    FUZZ_CHECK(wgpt_json_string(&b, s, size) == 0, "out of memory");
    FUZZ_CHECK(b.len >= 2 && b.p[0] == '"' && b.p[b.len - 1] == '"', "not a quoted string");
    FUZZ_CHECK(clean_utf8_((const unsigned char *)b.p, b.len), "not clean UTF-8");
    for (size_t i = 1; i + 1 < b.len; i++) {  // every quote and backslash inside is escaped
        if (b.p[i] == '\\') {
            FUZZ_CHECK(i + 2 < b.len && strchr("\"\\nu", b.p[i + 1]), "a stray escape at %zu", i);
            i++;
        } else {
            FUZZ_CHECK(b.p[i] != '"', "a raw quote at %zu", i);
        }
    }
    wgpt_sbuf_free(&b);

    size_t safe = wgpt_utf8_safe_len(s, size);
    FUZZ_CHECK(safe <= size && size - safe <= 3, "safe cut %zu of %zu", safe, size);
    return 0;
}
