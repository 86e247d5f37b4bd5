// test_generate_host.c: the host side of generation, no GPU: top-k and
// top-p (train/sampler.h) and stop strings over a byte stream
// (train/stop_text.h).
#include "test_util.h"

#include "train/sampler.h"
#include "train/stop_text.h"

// Which ids come out of 4000 draws; counts in seen (n).
static void draws_(wgpt_sampler *s, const float *logits, size_t n, int *seen) {
    float pf[16];
    uint32_t pi[16];
    memset(seen, 0, n * sizeof *seen);
    for (int i = 0; i < 4000; i++) seen[wgpt_sampler_pick(s, logits, n, pf, pi)]++;
}

static void test_top_k(void **state) {
    (void)state;
    // ids 3 and 6 tie at 2.0: top-k 2 keeps both, top-k 1 the lower id
    float logits[8] = {0.5f, 1.0f, -1.0f, 2.0f, 1.5f, 0.0f, 2.0f, 1.9f};
    int seen[8];
    wgpt_sampler s;
    wgpt_sampler_init(&s, 1.0f, 3, 1);
    draws_(&s, logits, 8, seen);
    assert_int_equal(seen[0] + seen[1] + seen[2] + seen[4] + seen[5], 0);
    assert_true(seen[3] > 1000 && seen[6] > 1000 && seen[7] > 1000);
    wgpt_sampler_init(&s, 1.0f, 1, 1);
    draws_(&s, logits, 8, seen);
    assert_int_equal(seen[3], 4000);
}

static void test_top_p(void **state) {
    (void)state;
    // probabilities (temperature 1) about 0.5, 0.25, 0.125, 0.0625, ... (logits ln 2 apart)
    float logits[6];
    for (int i = 0; i < 6; i++) logits[i] = -0.69314718f * (float)i;
    int seen[6];
    wgpt_sampler s;
    wgpt_sampler_init(&s, 1.0f, 0, 5);
    wgpt_sampler_set_top_p(&s, 0.7f);  // 0.5 < 0.7 <= 0.75: ids 0 and 1, in 2:1
    draws_(&s, logits, 6, seen);
    assert_int_equal(seen[2] + seen[3] + seen[4] + seen[5], 0);
    assert_true(seen[0] > 2400 && seen[0] < 2933 && seen[1] > 1067);
    wgpt_sampler_set_top_p(&s, 0.3f);  // the first alone holds 0.5
    draws_(&s, logits, 6, seen);
    assert_int_equal(seen[0], 4000);
    wgpt_sampler_set_top_p(&s, 0.8f);  // 0.75 < 0.8: three; with top-k 2 only two are candidates
    draws_(&s, logits, 6, seen);
    assert_true(seen[2] > 0 && seen[3] + seen[4] + seen[5] == 0);
    wgpt_sampler_init(&s, 1.0f, 2, 5);
    wgpt_sampler_set_top_p(&s, 0.8f);
    draws_(&s, logits, 6, seen);
    assert_true(seen[1] > 0 && seen[2] + seen[3] == 0);
    wgpt_sampler_set_top_p(&s, 1.0f);  // off: all six can come out
    wgpt_sampler_init(&s, 1.0f, 0, 5);
    draws_(&s, logits, 6, seen);
    assert_true(seen[4] > 0);
}

typedef struct sink_ {
    char buf[256];
    size_t n;
    int calls;
} sink_;

static void sink_emit_(void *user, const char *b, size_t len) {
    sink_ *s = user;
    memcpy(s->buf + s->n, b, len);
    s->n += len;
    s->calls++;
}

static void test_stop_text(void **state) {
    (void)state;
    const char *stops[] = {"END", "\n\n", ""};
    wgpt_stop_text st;
    sink_ k = {0};
    wgpt_stop_text_init(&st, stops, 3);
    assert_int_equal(wgpt_stop_text_feed(&st, "ab\0c", 4, sink_emit_, &k), 0);
    assert_int_equal(k.n, 4);  // nothing could begin a stop string: out at once, the NUL included
    assert_memory_equal(k.buf, "ab\0c", 4);
    assert_int_equal(wgpt_stop_text_feed(&st, "E", 1, sink_emit_, &k), 0);
    assert_int_equal(k.n, 4);  // "E" may begin "END": held
    assert_int_equal(wgpt_stop_text_feed(&st, "X", 1, sink_emit_, &k), 0);
    assert_int_equal(k.n, 6);  // "EX" cannot: out
    assert_int_equal(wgpt_stop_text_feed(&st, "zE", 2, sink_emit_, &k), 0);
    assert_int_equal(wgpt_stop_text_feed(&st, "NDmore", 6, sink_emit_, &k), 1);
    assert_int_equal(k.n, 7);
    assert_memory_equal(k.buf, "ab\0cEXz", 7);
    assert_int_equal(wgpt_stop_text_feed(&st, "x", 1, sink_emit_, &k), 1);  // stopped for good
    wgpt_stop_text_flush(&st, sink_emit_, &k);
    assert_int_equal(k.n, 7);
    wgpt_stop_text_free(&st);
    // the earliest of two matches wins; a held tail comes out at the end
    sink_ k2 = {0};
    wgpt_stop_text_init(&st, stops, 2);
    assert_int_equal(wgpt_stop_text_feed(&st, "a\n\nbEND", 7, sink_emit_, &k2), 1);
    assert_int_equal(k2.n, 1);
    wgpt_stop_text_free(&st);
    sink_ k3 = {0};
    wgpt_stop_text_init(&st, stops, 2);
    assert_int_equal(wgpt_stop_text_feed(&st, "xyEN", 4, sink_emit_, &k3), 0);
    assert_int_equal(k3.n, 2);
    wgpt_stop_text_flush(&st, sink_emit_, &k3);
    assert_int_equal(k3.n, 4);
    assert_memory_equal(k3.buf, "xyEN", 4);
    wgpt_stop_text_free(&st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_top_p),
        cmocka_unit_test(test_stop_text),
    };
    return cmocka_run_group_tests_name("generate_host", tests, NULL, NULL);
}
