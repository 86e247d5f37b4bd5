// test_gpt2.c: the whole GPT-2 model on the GPU against the plain C reference
// (tests/ref) on a configuration whose sizes are multiples of no tile size:
// L=2, NH=3, C=48 (head size 16), T=37 < maxT=40, V=97 padded to 128, B=2.
//
// Tolerances. The GPU sums in f32 in other orders than the reference (which
// sums long axes in double); per element the error is a few ulp of the sum of
// |terms|, and it grows through the layers. For gradients we compare each
// tensor as a whole: ||gpu - ref|| / ||ref|| < 2e-4 (f32 through ~20 dependent
// reductions of length <= 400 stays near 1e-5; a wrong term moves it by far
// more than 1e-2), and every element within 1e-3 * max|ref| + 1e-7.
#include "test_util.h"

#include "model/gpt2.h"
#include "ref/gpt2_ref.h"

static wgpt_gpu *G;
static const wgpt_gpt2_config CFG = {.max_seq_len = 40, .vocab_size = 97, .padded_vocab_size = 128,
                                     .num_layers = 2, .num_heads = 3, .channels = 48};
static const ref_gpt2_config RCFG = {40, 97, 128, 2, 3, 48};
enum { B = 2, T = 37 };
static int tokens[B * T], targets[B * T];

static int group_setup(void **state) {
    (void)state;
    G = tu_gpu_open(NULL);
    ref_rng r;
    ref_rng_seed(&r, 7);
    for (int i = 0; i < B * T; i++) tokens[i] = (int)(ref_rng_u64(&r) % 97);
    for (int i = 0; i < B * T; i++) targets[i] = i + 1 < B * T ? tokens[i + 1] : 3;
    return 0;
}
static int group_teardown(void **state) {
    (void)state;
    wgpt_gpu_close(G);
    return 0;
}

static wgpt_gpt2 *model_(wgpt_gpu *g, ref_gpt2 *ref, uint64_t seed) {
    assert_int_equal(ref_gpt2_init(ref, &RCFG, B, T), 0);
    ref_gpt2_init_params(ref, seed);
    assert_int_equal(wgpt_gpt2_num_params(&CFG), ref->num_params);
    char err[2048];
    wgpt_gpt2 *m = wgpt_gpt2_create(g, &CFG, B, T, err, sizeof err);
    if (!m) fail_msg("model: %s", err);
    if (wgpt_gpt2_set_params(m, ref->params) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    return m;
}

static void compare_tensors_(const char *what, const float *got, const float *want, const ref_gpt2 *ref,
                             double rel_l2, double rel_max) {
    size_t off = 0;
    for (int t = 0; t < REF_NUM_PARAM_TENSORS; t++) {
        size_t n = ref->param_sizes[t];
        double d2 = 0, r2 = 0, mx = 0;
        for (size_t i = 0; i < n; i++) {
            double d = (double)got[off + i] - want[off + i];
            d2 += d * d;
            r2 += (double)want[off + i] * want[off + i];
            if (fabs(want[off + i]) > mx) mx = fabs(want[off + i]);
        }
        double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
      if (rel > rel_l2) fail_msg("%s %s: relative L2 error %.3g > %.3g", what, ref_gpt2_param_names[t], rel, rel_l2);
        for (size_t i = 0; i < n; i++)
            if (fabs((double)got[off + i] - want[off + i]) > rel_max * mx + 1e-7)
                fail_msg("%s %s[%zu]: %.9g, expected %.9g (max|ref| %.3g)", what, ref_gpt2_param_names[t], i,
                         got[off + i], want[off + i], mx);
        off += n;
    }
}

static void forward_loss_matches_reference(void **st) {
    (void)st;
    ref_gpt2 ref;
    wgpt_gpt2 *m = model_(G, &ref, 42);
    float want = ref_gpt2_forward(&ref, tokens, targets), got;
    if (wgpt_gpt2_forward(m, tokens, targets, &got) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    printf("loss gpu %.7f ref %.7f\n", got, want);
    assert_true(fabsf(got - want) < 2e-5f * want);
    wgpt_gpt2_free(m);
    ref_gpt2_free(&ref);
}

static void gradients_match_reference(void **st) {
    (void)st;
    ref_gpt2 ref;
    wgpt_gpt2 *m = model_(G, &ref, 43);
    float want = ref_gpt2_forward(&ref, tokens, targets), got;
    ref_gpt2_zero_grad(&ref);
    assert_int_equal(ref_gpt2_backward(&ref), 0);
    if (wgpt_gpt2_forward_backward(m, tokens, targets, &got) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    assert_true(fabsf(got - want) < 2e-5f * want);
    float *grads = malloc(ref.num_params * sizeof *grads);
    if (wgpt_gpt2_get_grads(m, grads) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    compare_tensors_("grad", grads, ref.grads, &ref, 2e-4, 1e-3);
    free(grads);
    wgpt_gpt2_free(m);
    ref_gpt2_free(&ref);
}

// Directional finite differences of the GPU loss: along a random +-1 vector
// over a whole tensor, (L(p+h s) - L(p-h s)) / 2h = grad . s. With h=1e-3 and
// f32 losses near 4.6 (noise ~5e-7 each), the quotient's noise is ~5e-4,
// against grad.s of order sum|grad| >> 1e-2 for these tensors: 2% is tight.
static void finite_differences_on_gpu(void **st) {
    (void)st;
    ref_gpt2 ref;
    wgpt_gpt2 *m = model_(G, &ref, 44);
    float loss;
    if (wgpt_gpt2_forward_backward(m, tokens, targets, &loss) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    size_t n = ref.num_params;
    float *g = malloc(n * sizeof *g), *p = malloc(n * sizeof *p);
    assert_int_equal(wgpt_gpt2_get_grads(m, g), 0);
    const int tensors[] = {REF_WTE, REF_QKVW, REF_LN1W, REF_FCB, REF_LNFB};
    ref_rng r;
    ref_rng_seed(&r, 99);
    for (size_t k = 0; k < sizeof tensors / sizeof tensors[0]; k++) {
        int t = tensors[k];
        size_t off = (size_t)(ref.param_ptr[t] - ref.params), len = ref.param_sizes[t];
        if (t == REF_WTE) len = (size_t)RCFG.vocab_size * RCFG.channels;  // padded rows have no gradient
        float *s = malloc(len * sizeof *s);
        double dot = 0, mag = 0;
        for (size_t i = 0; i < len; i++) {
            s[i] = (ref_rng_u64(&r) & 1) ? 1.0f : -1.0f;
            dot += (double)g[off + i] * s[i];
            mag += fabs(g[off + i]);
        }
        const float h = 1e-3f;
        float lp, lm;
        memcpy(p, ref.params, n * sizeof *p);
        for (size_t i = 0; i < len; i++) p[off + i] += h * s[i];
        assert_int_equal(wgpt_gpt2_set_params(m, p), 0);
        assert_int_equal(wgpt_gpt2_forward(m, tokens, targets, &lp), 0);
        for (size_t i = 0; i < len; i++) p[off + i] = ref.params[off + i] - h * s[i];
        assert_int_equal(wgpt_gpt2_set_params(m, p), 0);
        assert_int_equal(wgpt_gpt2_forward(m, tokens, targets, &lm), 0);
        double fd = ((double)lp - lm) / (2 * h);
        printf("  %-8s fd %.6f grad.s %.6f (sum|g| %.4f)\n", ref_gpt2_param_names[t], fd, dot, mag);
        if (fabs(fd - dot) > 0.02 * fabs(dot) + 2e-3) fail_msg("%s: fd %.6g vs grad %.6g", ref_gpt2_param_names[t], fd, dot);
        free(s);
    }
    free(g), free(p);
    wgpt_gpt2_free(m);
    ref_gpt2_free(&ref);
}

static void ref_step_(ref_gpt2 *ref, float *mm, float *vv, const wgpt_adamw_config *o, int t, float *norm) {
    ref_gpt2_zero_grad(ref);
    assert_int_equal(ref_gpt2_backward(ref), 0);
    *norm = ref_gpt2_clip_grads(ref, o->max_grad_norm);
    static const int decayed[] = {REF_WTE, REF_WPE, REF_QKVW, REF_ATTPROJW, REF_FCW, REF_FCPROJW};
    for (int k = 0; k < REF_NUM_PARAM_TENSORS; k++) {
        float wd = 0;
        for (size_t i = 0; i < 6; i++)
            if (decayed[i] == k) wd = o->weight_decay;
        size_t off = (size_t)(ref->param_ptr[k] - ref->params);
        ref_adamw_update(ref->param_ptr[k], ref->grad_ptr[k], mm + off, vv + off, ref->param_sizes[k], o->lr,
                         o->beta1, o->beta2, o->eps, wd, t);
    }
}

// Ten AdamW steps (clipping active: max norm 1) on GPU and reference: the
// losses agree to 1e-4 relative and the final parameters closely.
static void ten_training_steps_match_reference(void **st) {
    (void)st;
    ref_gpt2 ref;
    wgpt_gpt2 *m = model_(G, &ref, 45);
    float *mm = calloc(ref.num_params, sizeof *mm), *vv = calloc(ref.num_params, sizeof *vv);
    wgpt_adamw_config o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                           .max_grad_norm = 1.0f};
    for (int step = 1; step <= 10; step++) {
        float rl = ref_gpt2_forward(&ref, tokens, targets), rn;
        ref_step_(&ref, mm, vv, &o, step, &rn);
        wgpt_step_result r;
        if (wgpt_gpt2_train_step(m, tokens, targets, &o, step, &r) < 0) fail_msg("%s", wgpt_gpt2_error(m));
        printf("  step %2d loss gpu %.6f ref %.6f  norm gpu %.5f ref %.5f\n", step, r.loss, rl, r.grad_norm, rn);
        if (fabsf(r.loss - rl) > 1e-4f * rl) fail_msg("step %d: loss %.7g vs %.7g", step, r.loss, rl);
        if (fabsf(r.grad_norm - rn) > 1e-3f * rn) fail_msg("step %d: norm %.7g vs %.7g", step, r.grad_norm, rn);
    }
    float *p = malloc(ref.num_params * sizeof *p);
    assert_int_equal(wgpt_gpt2_get_params(m, p), 0);
    // Adam divides by sqrt(v): tiny gradient differences can move an element by
    // up to lr per step; 10 steps of lr 1e-3 bound the drift by 1e-2 * |max|.
    compare_tensors_("params after 10 steps", p, ref.params, &ref, 1e-3, 1e-2);
    free(p), free(mm), free(vv);
    wgpt_gpt2_free(m);
    ref_gpt2_free(&ref);
}

// Same start, same batches: bit-identical parameters (no float atomics).
static void training_is_deterministic(void **st) {
    (void)st;
    float *p[2];
    wgpt_adamw_config o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                           .max_grad_norm = 1.0f};
    for (int run = 0; run < 2; run++) {
        ref_gpt2 ref;
        wgpt_gpt2 *m = model_(G, &ref, 46);
        for (int step = 1; step <= 3; step++) {
            wgpt_step_result r;
            if (wgpt_gpt2_train_step(m, tokens, targets, &o, step, &r) < 0) fail_msg("%s", wgpt_gpt2_error(m));
        }
        p[run] = malloc(ref.num_params * sizeof *p[run]);
        assert_int_equal(wgpt_gpt2_get_params(m, p[run]), 0);
        if (run) assert_memory_equal(p[0], p[1], ref.num_params * sizeof *p[0]);
        wgpt_gpt2_free(m);
        ref_gpt2_free(&ref);
    }
    free(p[0]), free(p[1]);
}

// A device whose bindings are capped at 64 KiB forces every big tensor
// (wte, logits, the flat parameter arrays) to be bound in chunks, as the
// 154 MB GPT-2 embedding is on lavapipe's 128 MiB limit.
static void split_bindings_give_the_same_model(void **st) {
    (void)st;
    wgpt_gpu_options opt = {.adapter_index = -1, .max_binding = 64 << 10};
    wgpt_gpu *small = tu_gpu_open(&opt);
    ref_gpt2 ref;
    wgpt_gpt2 *m = model_(small, &ref, 47);
    float want = ref_gpt2_forward(&ref, tokens, targets), got;
    ref_gpt2_zero_grad(&ref);
    assert_int_equal(ref_gpt2_backward(&ref), 0);
    if (wgpt_gpt2_forward_backward(m, tokens, targets, &got) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    assert_true(fabsf(got - want) < 2e-5f * want);
    float *grads = malloc(ref.num_params * sizeof *grads);
    assert_int_equal(wgpt_gpt2_get_grads(m, grads), 0);
    compare_tensors_("split grad", grads, ref.grads, &ref, 2e-4, 1e-3);
    free(grads);
    wgpt_gpt2_free(m);
    ref_gpt2_free(&ref);
    wgpt_gpu_close(small);
}

// Two micro-batches of the same batch, scaled by 1/2, then one update: the
// same as one step on that batch. Not bit for bit: kernels that add into the
// gradient in place (e.g. the embedding's per-position sums) round
// (A + a) + b differently from 2 * (a + b) by an ulp; AdamW's first step moves
// each parameter by about lr * sign(g), so 1e-6 absolute covers it.
static void accumulation_equals_one_step(void **st) {
    (void)st;
    wgpt_adamw_config o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                           .max_grad_norm = 1.0f};
    float *p[2];
    for (int run = 0; run < 2; run++) {
        ref_gpt2 ref;
        wgpt_gpt2 *m = model_(G, &ref, 49);
        wgpt_step_result r;
        float l1, l2;
        if (run == 0) {
            if (wgpt_gpt2_train_step(m, tokens, targets, &o, 1, &r) < 0) fail_msg("%s", wgpt_gpt2_error(m));
        } else {
            if (wgpt_gpt2_accumulate(m, tokens, targets, 1, &l1) < 0 ||
                wgpt_gpt2_accumulate(m, tokens, targets, 0, &l2) < 0 || wgpt_gpt2_update(m, &o, 1, 2, &r) < 0)
                fail_msg("%s", wgpt_gpt2_error(m));
            assert_true(l1 == l2);
            assert_false(r.skipped);
        }
        p[run] = malloc(ref.num_params * sizeof *p[run]);
        assert_int_equal(wgpt_gpt2_get_params(m, p[run]), 0);
        wgpt_gpt2_free(m);
        ref_gpt2_free(&ref);
    }
    size_t n = wgpt_gpt2_num_params(&CFG);
    tu_assert_close("accumulated vs single step", p[1], p[0], n, 1e-6f, 0);
    free(p[0]), free(p[1]);
}

// Where tensor t's slice of layer l starts in the reference layout.
static size_t ref_at_(int t, uint32_t l) {
    size_t s[WGPT_GPT2_NUM_TENSORS], off = 0;
    wgpt_gpt2_param_sizes(&CFG, s);
    for (int i = 0; i < t; i++) off += s[i];
    return off + l * (t >= 2 && t <= 13 ? s[t] / CFG.num_layers : 0);
}

// The backward in segments (a bucketed exchange's) gives the gradients of
// the whole backward bit for bit; each segment's readback holds its tensors'
// final gradients in tensor order; put writes them back; segments run in order.
static void segmented_backward_equals_whole(void **st) {
    (void)st;
    ref_gpt2 ref, ref_b;
    wgpt_gpt2 *a = model_(G, &ref, 53), *b = model_(G, &ref_b, 53);
    size_t n = wgpt_gpt2_num_params(&CFG);
    float *ga = malloc(n * sizeof *ga), *gb = malloc(n * sizeof *gb), *seg = malloc(n * sizeof *seg), l1, l2, la, lb;
    assert_non_null(ga), assert_non_null(gb), assert_non_null(seg);
    uint32_t S = wgpt_gpt2_grad_segments(b), L = CFG.num_layers;
    assert_int_equal(S, L + 2);
    if (wgpt_gpt2_accumulate(a, tokens, targets, 1, &l1) < 0 || wgpt_gpt2_accumulate(a, tokens, targets, 0, &la) < 0 ||
        wgpt_gpt2_accumulate(b, tokens, targets, 1, &l2) < 0 || wgpt_gpt2_accumulate_begin(b, tokens, targets, 0) < 0)
        fail_msg("%s / %s", wgpt_gpt2_error(a), wgpt_gpt2_error(b));
    assert_int_equal(wgpt_gpt2_backward_segment(b, 1), -1);  // out of order
    assert_non_null(strstr(wgpt_gpt2_error(b), "out of order"));
    size_t at = 0, total = 0;
    for (uint32_t i = 0; i < S; i++) {
        if (wgpt_gpt2_backward_segment(b, i) < 0) fail_msg("%s", wgpt_gpt2_error(b));
        total += wgpt_gpt2_segment_floats(b, i);
    }
    assert_int_equal(total, n);
    if (wgpt_gpt2_accumulate_end(b, &lb) < 0) fail_msg("%s", wgpt_gpt2_error(b));
    assert_true(la == lb);
    assert_int_equal(wgpt_gpt2_get_grads(a, ga), 0);
    for (uint32_t i = 0; i < S; i++) {
        assert_int_not_equal(wgpt_gpt2_segment_ready(b, i), -1);
        assert_int_equal(wgpt_gpt2_segment_take(b, i, seg + at), 0);
        // the segment's tensors, in order, from the whole backward's gradients
        int first = i == 0 ? 14 : i > L ? 0 : 2, last = i == 0 ? 15 : i > L ? 1 : 13;
        uint32_t layer = i > 0 && i <= L ? L - i : 0;
        size_t sizes[WGPT_GPT2_NUM_TENSORS];
        wgpt_gpt2_param_sizes(&CFG, sizes);
        for (int t = first; t <= last; t++) {
            size_t k = t >= 2 && t <= 13 ? sizes[t] / L : sizes[t];
            assert_memory_equal(seg + at, ga + ref_at_(t, layer), k * sizeof *ga);
            at += k;
        }
    }
    assert_int_equal(at, n);
    assert_int_equal(wgpt_gpt2_get_grads(b, gb), 0);
    assert_memory_equal(ga, gb, n * sizeof *ga);
    // put: the segments doubled come back as the gradients doubled
    at = 0;
    for (uint32_t i = 0; i < S; i++) {
        size_t k = wgpt_gpt2_segment_floats(b, i);
        for (size_t j = 0; j < k; j++) seg[at + j] *= 2;
        assert_int_equal(wgpt_gpt2_segment_put(b, i, seg + at), 0);
        at += k;
    }
    assert_int_equal(wgpt_gpt2_get_grads(b, gb), 0);
    for (size_t j = 0; j < n; j++) assert_true(gb[j] == 2 * ga[j]);
    assert_int_equal(wgpt_gpt2_segment_take(b, S, seg), -1);
    free(ga), free(gb), free(seg);
    wgpt_gpt2_free(a), wgpt_gpt2_free(b);
    ref_gpt2_free(&ref), ref_gpt2_free(&ref_b);
}

// ZeRO-1: three models each updating one shard (shards of unequal sizes),
// their pieces gathered after every step, train exactly as one whole model:
// parameters and the gathered moments bit for bit; each holds ~1/3 of the
// moments; set_adam keeps a shard's slice of the full moments.
static void sharded_update_equals_whole(void **st) {
    (void)st;
    enum { NS = 3 };
    wgpt_adamw_config o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                           .max_grad_norm = 1.0f};
    ref_gpt2 ref;
    wgpt_gpt2 *whole = model_(G, &ref, 51), *sh[NS];
    char err[2048];
    for (int i = 0; i < NS; i++) {
        sh[i] = wgpt_gpt2_create_sharded(G, &CFG, B, T, WGPT_PRECISION_FP32, (uint32_t)i, NS, err, sizeof err);
        if (!sh[i]) fail_msg("shard %d: %s", i, err);
        assert_int_equal(wgpt_gpt2_set_params(sh[i], ref.params), 0);
    }
    uint64_t P = wgpt_gpt2_padded_params(whole), off, cnt, pg, aw, as;
    float *pad = malloc(P * sizeof *pad), *pm = malloc(P * sizeof *pm), *pv = malloc(P * sizeof *pv);
    wgpt_step_result r;
    for (int t = 1; t <= 3; t++) {
        if (wgpt_gpt2_train_step(whole, tokens, targets, &o, t, &r) < 0) fail_msg("%s", wgpt_gpt2_error(whole));
        for (int i = 0; i < NS; i++) {
            if (wgpt_gpt2_train_step(sh[i], tokens, targets, &o, t, &r) < 0) fail_msg("%s", wgpt_gpt2_error(sh[i]));
            wgpt_gpt2_shard_range(sh[i], (uint32_t)i, &off, &cnt);
            assert_int_equal(wgpt_gpt2_get_param_shard(sh[i], pad + off), 0);
            assert_int_equal(wgpt_gpt2_get_adam_shard(sh[i], pm + off, pv + off), 0);
        }
        for (int i = 0; i < NS; i++) assert_int_equal(wgpt_gpt2_set_params_padded(sh[i], pad), 0);
    }
    size_t n = wgpt_gpt2_num_params(&CFG);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c), *d = malloc(n * sizeof *d);
    assert_int_equal(wgpt_gpt2_get_params(whole, a), 0);
    assert_int_equal(wgpt_gpt2_get_params(sh[1], b), 0);
    assert_memory_equal(a, b, n * sizeof *a);
    assert_int_equal(wgpt_gpt2_get_adam(whole, a, b), 0);
    wgpt_gpt2_unpad(whole, pm, c), wgpt_gpt2_unpad(whole, pv, d);
    assert_memory_equal(a, c, n * sizeof *a);
    assert_memory_equal(b, d, n * sizeof *b);
    assert_int_equal(wgpt_gpt2_get_adam(sh[0], c, d), -1);  // a shard cannot give the whole
    assert_non_null(strstr(wgpt_gpt2_error(sh[0]), "shard 0 of 3"));
    wgpt_gpt2_memory_parts(whole, &pg, &aw);
    wgpt_gpt2_memory_parts(sh[2], &pg, &as);
    assert_true(as < aw / NS + 512);
    // A resumed shard takes its slice of the full moments.
    assert_int_equal(wgpt_gpt2_set_adam(sh[2], a, b), 0);
    wgpt_gpt2_shard_range(sh[2], 2, &off, &cnt);
    memset(pm, 0, P * sizeof *pm), memset(pv, 0, P * sizeof *pv);
    assert_int_equal(wgpt_gpt2_get_adam_shard(sh[2], pm + off, pv + off), 0);
    wgpt_gpt2_unpad(whole, pm, c);
    size_t lnfb = n - CFG.channels;  // the last tensor lies in the last shard
    assert_memory_equal(a + lnfb, c + lnfb, CFG.channels * sizeof *a);
    assert_null(wgpt_gpt2_create_sharded(G, &CFG, B, T, WGPT_PRECISION_FP32, 3, 3, err, sizeof err));
    for (int i = 0; i < NS; i++) wgpt_gpt2_free(sh[i]);
    wgpt_gpt2_free(whole);
    ref_gpt2_free(&ref);
    free(pad), free(pm), free(pv), free(a), free(b), free(c), free(d);
}

// ZeRO-1's split update: three shards whose norm is the sum of their
// squares (in shard order) train as one whole model within f32 rounding of
// the norm (the parameters within 1e-6; the summation order differs); the
// shard counts of the reference layout and of every segment add up; a NaN
// in one shard's gradients skips the step on every shard.
static void split_update_equals_whole(void **st) {
    (void)st;
    enum { NS = 3 };
    wgpt_adamw_config o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                           .max_grad_norm = 1.0f};
    ref_gpt2 ref;
    wgpt_gpt2 *whole = model_(G, &ref, 57), *sh[NS];
    char err[2048];
    for (int i = 0; i < NS; i++) {
        sh[i] = wgpt_gpt2_create_sharded(G, &CFG, B, T, WGPT_PRECISION_FP32, (uint32_t)i, NS, err, sizeof err);
        if (!sh[i]) fail_msg("shard %d: %s", i, err);
        assert_int_equal(wgpt_gpt2_set_params(sh[i], ref.params), 0);
    }
    size_t n = wgpt_gpt2_num_params(&CFG);
    uint64_t counts[NS], seg[NS] = {0}, sum = 0;
    wgpt_gpt2_shard_counts(sh[0], -1, counts);
    for (int i = 0; i < NS; i++) sum += counts[i];
    assert_int_equal(sum, n);
    for (uint32_t i = 0; i < wgpt_gpt2_grad_segments(sh[0]); i++) {
        uint64_t c[NS];
        wgpt_gpt2_shard_counts(sh[0], (int)i, c);
        for (int j = 0; j < NS; j++) seg[j] += c[j];
    }
    for (int j = 0; j < NS; j++) assert_int_equal(seg[j], counts[j]);
    uint64_t P = wgpt_gpt2_padded_params(whole), off, cnt;
    float *pad = malloc(P * sizeof *pad), l;
    wgpt_step_result r, rs[NS];
    for (int t = 1; t <= 4; t++) {
        if (wgpt_gpt2_accumulate(whole, tokens, targets, 1, &l) < 0 ||
            (t == 3 && wgpt_gpt2_inject_nan_grad(whole) < 0) || wgpt_gpt2_update(whole, &o, t, 1, &r) < 0)
            fail_msg("%s", wgpt_gpt2_error(whole));
        assert_int_equal(r.skipped, t == 3);
        double sumsq[NS], total = 0;
        int bad[NS], any = 0;
        for (int i = 0; i < NS; i++) {
            if (wgpt_gpt2_accumulate(sh[i], tokens, targets, 1, &l) < 0 ||
                (t == 3 && i == 0 && wgpt_gpt2_inject_nan_grad(sh[i]) < 0) ||
                wgpt_gpt2_update_shard_begin(sh[i], &o, 1, &sumsq[i], &bad[i]) < 0)
                fail_msg("%s", wgpt_gpt2_error(sh[i]));
        }
        for (int i = 0; i < NS; i++) total += sumsq[i], any |= bad[i];
        for (int i = 0; i < NS; i++) {
            if (wgpt_gpt2_update_shard_end(sh[i], &o, t, total, any, &rs[i]) < 0) fail_msg("%s", wgpt_gpt2_error(sh[i]));
            assert_int_equal(rs[i].skipped, t == 3);  // the NaN lies in shard 0's range only (grads[0])
            wgpt_gpt2_shard_range(sh[i], (uint32_t)i, &off, &cnt);
            assert_int_equal(wgpt_gpt2_get_param_shard(sh[i], pad + off), 0);
        }
        if (t != 3) assert_true(fabsf(rs[0].grad_norm - r.grad_norm) <= 1e-5f * r.grad_norm);
        for (int i = 0; i < NS; i++) assert_int_equal(wgpt_gpt2_set_params_padded(sh[i], pad), 0);
    }
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_int_equal(wgpt_gpt2_get_params(sh[2], b), 0);
    assert_int_equal(wgpt_gpt2_get_params(whole, a), 0);
    tu_assert_close("split update vs whole", b, a, n, 1e-6f, 0);
    for (int i = 0; i < NS; i++) wgpt_gpt2_free(sh[i]);
    wgpt_gpt2_free(whole);
    ref_gpt2_free(&ref);
    free(pad), free(a), free(b);
}

// An inference instance shares the parameters: its logits match the
// reference, before and after the training model updates them.
static void inference_instance_shares_params(void **st) {
    (void)st;
    ref_gpt2 ref;
    wgpt_gpt2 *m = model_(G, &ref, 50);
    char err[1024];
    wgpt_gpt2 *inf = wgpt_gpt2_create_inference(m, 1, T, err, sizeof err);
    if (!inf) fail_msg("%s", err);
    float *logits = malloc(RCFG.vocab_size * sizeof *logits);
    for (int round = 0; round < 2; round++) {
        ref_gpt2_forward(&ref, tokens, targets);  // the first sequence is tokens[0..T)
        const uint32_t t = 20;
        if (wgpt_gpt2_logits(inf, tokens, 0, t, logits) < 0) fail_msg("%s", wgpt_gpt2_error(inf));
        const float *want = ref.acts.logits + (size_t)t * RCFG.padded_vocab_size;
        tu_assert_close("logits", logits, want, RCFG.vocab_size, 2e-5f, 2e-5f);
        // one update on the training model; the reference gets the same parameters
        wgpt_adamw_config o = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .max_grad_norm = 1.0f};
        wgpt_step_result r;
        if (wgpt_gpt2_train_step(m, tokens, targets, &o, 1, &r) < 0) fail_msg("%s", wgpt_gpt2_error(m));
        assert_int_equal(wgpt_gpt2_get_params(m, ref.params), 0);
    }
    float mm[4];
    assert_int_equal(wgpt_gpt2_get_adam(inf, mm, mm), -1);  // no optimizer state there
    free(logits);
    wgpt_gpt2_free(inf);
    wgpt_gpt2_free(m);
    ref_gpt2_free(&ref);
}

static void bad_token_is_named(void **st) {
    (void)st;
    ref_gpt2 ref;
    wgpt_gpt2 *m = model_(G, &ref, 48);
    int bad[B * T];
    memcpy(bad, tokens, sizeof bad);
    bad[5] = 97;
    float loss;
    assert_int_equal(wgpt_gpt2_forward(m, bad, targets, &loss), -1);
    assert_non_null(strstr(wgpt_gpt2_error(m), "97"));
    assert_non_null(strstr(wgpt_gpt2_error(m), "position 5"));
    assert_int_equal(wgpt_gpt2_forward(m, tokens, targets, &loss), 0);  // still usable
    wgpt_gpt2_free(m);
    ref_gpt2_free(&ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forward_loss_matches_reference),
        cmocka_unit_test(gradients_match_reference),
        cmocka_unit_test(finite_differences_on_gpu),
        cmocka_unit_test(ten_training_steps_match_reference),
        cmocka_unit_test(training_is_deterministic),
        cmocka_unit_test(split_bindings_give_the_same_model),
        cmocka_unit_test(accumulation_equals_one_step),
        cmocka_unit_test(segmented_backward_equals_whole),
        cmocka_unit_test(sharded_update_equals_whole),
        cmocka_unit_test(split_update_equals_whole),
        cmocka_unit_test(inference_instance_shares_params),
        cmocka_unit_test(bad_token_is_named),
    };
    return cmocka_run_group_tests_name("gpt2", tests, group_setup, group_teardown);
}
