// test_train_host.c: the host-side pieces of training: the learning-rate
// schedule, the sampler (temperature, top-k, seeds) and the loss history with
// its metrics-log reload and SVG plot, the gradient norm spike detector.
#include <unistd.h>

#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

#include "model/gpt2.h"
#include "train/history.h"
#include "train/sampler.h"
#include "train/schedule.h"
#include "train/spike.h"

static void schedule_warmup_then_cosine(void **st) {
    (void)st;
    wgpt_lr_schedule s = {1e-3f, 0.1f, 10, 110};
    assert_float_equal(wgpt_lr_at(&s, 1), 1e-4f, 1e-9f);
    assert_float_equal(wgpt_lr_at(&s, 5), 5e-4f, 1e-9f);
    assert_float_equal(wgpt_lr_at(&s, 10), 1e-3f, 1e-9f);
    assert_float_equal(wgpt_lr_at(&s, 60), 0.55e-3f, 1e-8f);  // halfway: (max + min) / 2
    assert_float_equal(wgpt_lr_at(&s, 110), 1e-4f, 1e-9f);
    assert_float_equal(wgpt_lr_at(&s, 500), 1e-4f, 1e-9f);
    for (uint32_t t = 11; t < 110; t++) assert_true(wgpt_lr_at(&s, t + 1) <= wgpt_lr_at(&s, t));
    wgpt_lr_schedule none = {1e-3f, 0.0f, 0, 100};
    assert_float_equal(wgpt_lr_at(&none, 1), 1e-3f, 1e-6f);
}

static void sampler_greedy_topk_and_seeds(void **st) {
    (void)st;
    float logits[6] = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f, 2.0f}, pf[6];
    uint32_t pi[6];
    wgpt_sampler s;
    wgpt_sampler_init(&s, 0.0f, 0, 1);
    assert_int_equal(wgpt_sampler_pick(&s, logits, 6, pf, pi), 1);  // ties go to the lower id
    // top-k 2: only ids 1 and 5 (logit 2.0) can come out
    wgpt_sampler_init(&s, 1.0f, 2, 7);
    int seen[6] = {0};
    for (int i = 0; i < 2000; i++) seen[wgpt_sampler_pick(&s, logits, 6, pf, pi)]++;
    assert_int_equal(seen[0] + seen[2] + seen[3] + seen[4], 0);
    assert_true(seen[1] > 800 && seen[5] > 800);
    // the full distribution at temperature 1: frequencies near softmax
    wgpt_sampler_init(&s, 1.0f, 0, 9);
    int cnt[6] = {0};
    const int N = 60000;
    for (int i = 0; i < N; i++) cnt[wgpt_sampler_pick(&s, logits, 6, pf, pi)]++;
    double z = 0;
    for (int i = 0; i < 6; i++) z += exp(logits[i]);
    for (int i = 0; i < 6; i++) {
        double p = exp(logits[i]) / z, f = (double)cnt[i] / N;
        if (fabs(f - p) > 5 * sqrt(p * (1 - p) / N) + 1e-3) fail_msg("id %d: frequency %.4f, softmax %.4f", i, f, p);
    }
    // same seed, same sequence; another seed, another sequence
    wgpt_sampler a, b, c;
    wgpt_sampler_init(&a, 1.0f, 0, 123);
    wgpt_sampler_init(&b, 1.0f, 0, 123);
    wgpt_sampler_init(&c, 1.0f, 0, 124);
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint32_t x = wgpt_sampler_pick(&a, logits, 6, pf, pi), y = wgpt_sampler_pick(&b, logits, 6, pf, pi);
        assert_int_equal(x, y);
        differ += x != wgpt_sampler_pick(&c, logits, 6, pf, pi);
    }
    assert_true(differ > 10);
}

static void history_reload_and_plot(void **st) {
    (void)st;
    char dir[] = "/tmp/wgpt_hist_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char log[512], svg[512];
    snprintf(log, sizeof log, "%s/metrics.jsonl", dir);
    snprintf(svg, sizeof svg, "%s/loss.svg", dir);
    FILE *f = fopen(log, "w");
    fprintf(f, "{\"kind\":\"val\",\"step\":0,\"loss\":5.5}\n");
    for (int s = 1; s <= 6; s++) fprintf(f, "{\"kind\":\"train\",\"step\":%d,\"loss\":%g,\"lr\":0.001}\n", s, 5.0 - s * 0.5);
    fprintf(f, "not json at all\n");
    fprintf(f, "{\"kind\":\"val\",\"step\":6,\"loss\":2.25}\n");
    // a resume from step 4 rewrote steps 5 and 6
    fprintf(f, "{\"kind\":\"train\",\"step\":5,\"loss\":2.0}\n");
    fclose(f);
    wgpt_history h = {0};
    char err[256];
    assert_int_equal(wgpt_history_load(&h, log, err, sizeof err), 0);
    assert_int_equal(h.ntrain, 5);
    assert_int_equal(h.train[4].step, 5);
    assert_float_equal(h.train[4].loss, 2.0f, 0);
    assert_int_equal(h.nval, 1);  // the step-6 validation was dropped with the rewrite
    assert_int_equal(wgpt_history_plot_svg(&h, svg, "a <title> & more", err, sizeof err), 0);
    char *text = NULL;
    FILE *g = fopen(svg, "r");
    assert_non_null(g);
    text = calloc(1, 65536);
    fread(text, 1, 65535, g);
    fclose(g);
    assert_non_null(strstr(text, "<svg"));
    assert_non_null(strstr(text, "a &lt;title&gt; &amp; more"));
    assert_non_null(strstr(text, "<polyline"));
    assert_non_null(strstr(text, "</svg>"));
    free(text);
    wgpt_history_free(&h);
    // a missing log is a new run, not an error
    assert_int_equal(wgpt_history_load(&h, "/nonexistent/metrics.jsonl", err, sizeof err), 0);
    assert_int_equal(h.ntrain, 0);
    unlink(log), unlink(svg), rmdir(dir);
}

// A resume at step 3 drops the records of later steps (lost with the crash
// that the resume follows) and a torn last line; a FIFO is not read.
static void history_log_trimmed_on_resume(void **st) {
    (void)st;
    char dir[] = "/tmp/wgpt_hist_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char log[512], line[256], fifo[512];
    snprintf(log, sizeof log, "%s/metrics.jsonl", dir);
    FILE *f = fopen(log, "w");
    fprintf(f, "{\"kind\":\"val\",\"step\":0,\"loss\":5.5}\n");
    for (int s = 1; s <= 5; s++) fprintf(f, "{\"kind\":\"train\",\"step\":%d,\"loss\":%d}\n", s, 10 - s);
    fprintf(f, "{\"kind\":\"val\",\"step\":4,\"loss\":2.5}\n");
    fprintf(f, "{\"kind\":\"train\",\"step\":6,\"lo");  // a write the crash cut
    fclose(f);
    char err[512];
    assert_int_equal(wgpt_history_trim_log(log, 3, err, sizeof err), 0);
    f = fopen(log, "r");
    int lines = 0, max_step = -1;
    while (fgets(line, sizeof line, f)) {
        lines++;
        const char *p = strstr(line, "\"step\":");
        assert_non_null(p);
        int s = atoi(p + 7);
        if (s > max_step) max_step = s;
        assert_non_null(strchr(line, '\n'));
    }
    fclose(f);
    assert_int_equal(lines, 4);  // val 0, train 1..3
    assert_int_equal(max_step, 3);
    assert_int_equal(wgpt_history_trim_log("/nonexistent/metrics.jsonl", 3, err, sizeof err), 0);
    snprintf(fifo, sizeof fifo, "%s/fifo.jsonl", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    wgpt_history h = {0};
    assert_int_equal(wgpt_history_load(&h, fifo, err, sizeof err), -1);
    assert_non_null(strstr(err, "FIFO"));
    assert_int_equal(wgpt_history_trim_log(fifo, 3, err, sizeof err), -1);
    unlink(fifo), unlink(log), rmdir(dir);
}

// L11: a size one byte past the device's largest buffer says both in exact
// bytes (in GB to 2 decimals they read the same).
static void shape_limits_in_exact_bytes(void **st) {
    (void)st;
    wgpt_gpt2_config c = {.max_seq_len = 1024, .vocab_size = 256, .padded_vocab_size = 256, .num_layers = 1,
                          .num_heads = 1, .channels = 64};
    char err[512];
    uint64_t logits = 1024ull * 1024 * 256 * 4;
    assert_int_equal(wgpt_gpt2_check_shape(&c, 1024, 1024, logits, err, sizeof err), 0);
    int dims = wgpt_gpt2_check_shape(&c, 1024, 1024, logits - 1, err, sizeof err);
    assert_true(dims & WGPT_GPT2_DIM_B);
    if (!strstr(err, "1073741824 bytes") || !strstr(err, "1073741823 bytes")) fail_msg("%s", err);
}

// The threshold waits for 50 good steps and the warmup, then is factor x the
// mean of the last 20 good norms; skipped steps count in a row, a good one
// resets the count and skipped norms never enter the window.
static void spike_threshold_and_skips(void **st) {
    (void)st;
    wgpt_spike sp = {0};
    for (uint32_t i = 0; i < 49; i++) assert_int_equal(wgpt_spike_record(&sp, 0, 100.0f), 0);
    assert_float_equal(wgpt_spike_threshold(&sp, 3.0f, 60, 10), 0.0f, 0);  // 49 good steps: not settled
    for (uint32_t i = 0; i < 20; i++) wgpt_spike_record(&sp, 0, (float)(i + 1));  // window 1..20: mean 10.5
    assert_float_equal(wgpt_spike_threshold(&sp, 3.0f, 60, 10), 31.5f, 1e-5f);
    assert_float_equal(wgpt_spike_threshold(&sp, 3.0f, 9, 10), 0.0f, 0);   // t + 1 not past the warmup
    assert_float_equal(wgpt_spike_threshold(&sp, 3.0f, 10, 10), 31.5f, 1e-5f);
    assert_float_equal(wgpt_spike_threshold(&sp, 0.0f, 60, 10), 0.0f, 0);  // --spike-factor 0: off
    assert_int_equal(wgpt_spike_record(&sp, 1, 1e9f), 1);
    assert_int_equal(wgpt_spike_record(&sp, 2, NAN), 2);
    assert_float_equal(wgpt_spike_threshold(&sp, 3.0f, 60, 10), 31.5f, 1e-5f);  // skipped norms left out
    assert_int_equal(wgpt_spike_record(&sp, 0, 10.5f), 0);
    assert_int_equal(wgpt_spike_record(&sp, 1, 1e9f), 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schedule_warmup_then_cosine),
        cmocka_unit_test(shape_limits_in_exact_bytes),
        cmocka_unit_test(sampler_greedy_topk_and_seeds),
        cmocka_unit_test(history_reload_and_plot),
        cmocka_unit_test(history_log_trimmed_on_resume),
        cmocka_unit_test(spike_threshold_and_skips),
    };
    return cmocka_run_group_tests_name("train_host", tests, NULL, NULL);
}
