// test_serve_host.c: the host side of `wgpt serve` without a GPU or a socket:
// request parsing and its refusals (serve/request.c), JSON strings of any
// bytes and safe cut points of growing text (serve/text.c), a job's text
// with stop strings across tokens (serve/job.c over train/stop_text.h).
#include "test_util.h"

#include "serve/job.h"
#include "serve/request.h"
#include "serve/text.h"

static wgpt_completion_req parse_ok_(const char *json) {
    wgpt_completion_req r;
    char msg[512], param[64];
    if (wgpt_completion_req_parse(&r, json, strlen(json), msg, sizeof msg, param, sizeof param) < 0)
        fail_msg("%s refused: %s", json, msg);
    return r;
}

// Refused, naming param.
static void refused_(const char *json, const char *param) {
    wgpt_completion_req r;
    char msg[512], got[64];
    if (wgpt_completion_req_parse(&r, json, strlen(json), msg, sizeof msg, got, sizeof got) == 0)
        fail_msg("%s was taken", json);
    if (strcmp(got, param) != 0) fail_msg("%s: param '%s', wanted '%s' (%s)", json, got, param, msg);
    assert_true(strlen(msg) > 10);
    wgpt_completion_req_free(&r);
}

static void request_defaults_and_fields(void **st) {
    (void)st;
    wgpt_completion_req r = parse_ok_("{}");
    assert_string_equal(r.prompt, "");
    assert_int_equal(r.max_tokens, 16);
    assert_true(r.temperature == 1 && r.top_p == 1 && r.top_k == 0 && r.n == 1 && !r.stream && !r.seed_given);
    wgpt_completion_req_free(&r);
    r = parse_ok_("{\"model\": \"m\", \"prompt\": [\"hi\"], \"max_tokens\": 5.0, \"temperature\": 0, \"top_p\": 0.5, "
                  "\"top_k\": 3, \"stop\": [\"a\", \"bc\"], \"seed\": -2, \"n\": 2, \"stream\": true, \"user\": \"u\"}");
    assert_string_equal(r.prompt, "hi");
    assert_int_equal(r.max_tokens, 5);
    assert_true(r.temperature == 0 && r.top_p == 0.5f && r.top_k == 3 && r.n == 2 && r.stream);
    assert_true(r.seed_given && r.seed == (uint64_t)-2);
    assert_int_equal(r.nstops, 2);
    assert_string_equal(r.stops[1], "bc");
    wgpt_completion_req_free(&r);
    r = parse_ok_("{\"stop\": \"\\n\", \"max_tokens\": null}");
    assert_int_equal(r.nstops, 1);
    assert_int_equal(r.max_tokens, 16);
    wgpt_completion_req_free(&r);
}

static void request_refusals(void **st) {
    (void)st;
    refused_("", "");
    refused_("{\"prompt\": ", "");
    refused_("[]", "");
    refused_("{\"max_tokens\": \"5\"}", "max_tokens");
    refused_("{\"max_tokens\": 0}", "max_tokens");
    refused_("{\"max_tokens\": 2.5}", "max_tokens");
    refused_("{\"temperature\": 2.5}", "temperature");
    refused_("{\"temperature\": true}", "temperature");
    refused_("{\"top_p\": 0}", "top_p");
    refused_("{\"top_k\": -1}", "top_k");
    refused_("{\"n\": 17}", "n");
    refused_("{\"stream\": 1}", "stream");
    refused_("{\"stop\": 5}", "stop");
    refused_("{\"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", "stop");
    refused_("{\"stop\": [\"\"]}", "stop");
    refused_("{\"stop\": [1]}", "stop");
    refused_("{\"prompt\": [\"a\", \"b\"]}", "prompt");
    refused_("{\"prompt\": 3}", "prompt");
    refused_("{\"model\": 3}", "model");
    refused_("{\"echo\": false}", "echo");
    refused_("{\"n\": 1, \"n\": 2}", "n");
    refused_("{\"stop\": [\"a\",\"b\",\"c\",\"d\"], \"stop\": [\"a\",\"b\",\"c\",\"d\"]}", "stop");
}

static void json_of(const char *s, size_t n, const char *want) {
    wgpt_sbuf b = {0};
    assert_int_equal(wgpt_json_string(&b, s, n), 0);
    if (strcmp(b.p, want) != 0) fail_msg("got %s, wanted %s", b.p, want);
    wgpt_sbuf_free(&b);
}

// Invalid UTF-8 as Python's decode(errors="replace"): one U+FFFD per maximal subpart.
static void json_strings_of_any_bytes(void **st) {
    (void)st;
    json_of("a\"b\\c\n\x01", 7, "\"a\\\"b\\\\c\\n\\u0001\"");
    json_of("x\0y", 3, "\"x\\u0000y\"");
    json_of("\xc3\xa9\xf0\x9f\x98\x80", 6, "\"\xc3\xa9\xf0\x9f\x98\x80\"");
    json_of("\xc3 ", 2, "\"\\ufffd \"");
    json_of("\xe2\x82", 2, "\"\\ufffd\"");
    json_of("\xe2\x82x", 3, "\"\\ufffdx\"");
    json_of("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate: not UTF-8
    json_of("\xff\x80", 2, "\"\\ufffd\\ufffd\"");
    json_of("\xf0\x9f\x98", 3, "\"\\ufffd\"");
}

static void cut_points(void **st) {
    (void)st;
    assert_int_equal(wgpt_utf8_safe_len("ab\xe2\x82", 4), 2);
    assert_int_equal(wgpt_utf8_safe_len("ab\xe2\x82\xac", 5), 5);
    assert_int_equal(wgpt_utf8_safe_len("a\xc3", 2), 1);
    assert_int_equal(wgpt_utf8_safe_len("a\x80", 2), 2);      // invalid, not unfinished
    assert_int_equal(wgpt_utf8_safe_len("a\xe2\x28", 3), 3);  // can no longer become a character
}

// A stop string across tokens: the text ends before it; what may still turn
// into it is held back from a stream.
static void job_stop_strings_across_tokens(void **st) {
    (void)st;
    wgpt_tokenizer *tok = wgpt_tokenizer_open_bytes();
    wgpt_completion_req r = parse_ok_("{\"prompt\": \"p\", \"stop\": [\"ab\"], \"max_tokens\": 10}");
    wgpt_serve_job *j = wgpt_serve_job_new(&r, tok, 1);
    assert_non_null(j);
    assert_int_equal(j->nids, 2);  // '\n' (the bytes tokenizer's document start), 'p'
    assert_int_equal(j->ids[0], '\n');
    assert_int_equal(wgpt_serve_job_add_token(j, 0, tok, 'x'), 0);
    assert_int_equal(j->choice[0].ready, 1);
    assert_int_equal(wgpt_serve_job_add_token(j, 0, tok, 'a'), 0);
    assert_int_equal(j->choice[0].ready, 1);  // 'a' may start "ab"
    assert_int_equal(wgpt_serve_job_add_token(j, 0, tok, 'b'), 1);
    assert_string_equal(j->choice[0].finish, "stop");
    assert_int_equal(j->choice[0].text.len, 1);
    assert_int_equal(j->choice[0].ready, 1);
    assert_int_equal(j->choice[0].tokens, 3);
    assert_int_equal(j->finished, 1);
    wgpt_serve_job_free(j);
    // max_tokens, and half a UTF-8 character held back
    r = parse_ok_("{\"max_tokens\": 3}");
    j = wgpt_serve_job_new(&r, tok, 1);
    assert_int_equal(wgpt_serve_job_add_token(j, 0, tok, 'x'), 0);
    assert_int_equal(wgpt_serve_job_add_token(j, 0, tok, 0xc3), 0);
    assert_int_equal(j->choice[0].ready, 1);
    assert_int_equal(wgpt_serve_job_add_token(j, 0, tok, 0xa9), 1);
    assert_string_equal(j->choice[0].finish, "length");
    assert_int_equal(j->choice[0].ready, 3);
    wgpt_serve_job_free(j);
    wgpt_tokenizer_free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_defaults_and_fields),
        cmocka_unit_test(request_refusals),
        cmocka_unit_test(json_strings_of_any_bytes),
        cmocka_unit_test(cut_points),
        cmocka_unit_test(job_stop_strings_across_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
