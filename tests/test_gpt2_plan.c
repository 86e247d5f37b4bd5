// test_gpt2_plan.c: the model's plans, listed (model/op.h
// wgpt_op_set_trace): every dispatch a model prepares, in order, with its
// kernel, grid, params and bindings (buffers numbered by first use).
//
//   build/test_gpt2_plan --dump DIR   writes one listing per configuration
//                                     (fp32 / f16, tensor cores emulated or
//                                     not, epilogues, recompute modes, a
//                                     binding limit that splits, ZeRO-1,
//                                     inference): what create prepares, then
//                                     what one step adds (the optimizer, an
//                                     inference instance), to diff two
//                                     builds' plans
//   build/test_gpt2_plan              checks the recompute modes' documented
//                                     invariants (gpt2.h wgpt_recompute) on
//                                     what create prepares (kernels, params
//                                     and grids; the bindings differ by
//                                     design), running nothing
#include "test_util.h"

#include <stdio.h>
#include <string.h>

#include "model/gpt2.h"
#include "model/gpt2_internal.h"

typedef struct rec_ {
    char kernel[64];
    int nv;
    const void *buf[16];
    uint64_t off[16], size[16];
    unsigned char params[256];
    size_t ps;
    uint32_t x, y, z;
} rec_;

typedef struct trace_ {
    rec_ *r;
    size_t n, cap;
} trace_;

static void on_add_(void *ctx, const char *kernel, const wgpt_view *views, int nviews, const void *params,
                    size_t params_size, uint32_t x, uint32_t y, uint32_t z) {
    trace_ *t = ctx;
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 256;
        t->r = realloc(t->r, t->cap * sizeof *t->r);
        if (!t->r) abort();
    }
    rec_ *r = &t->r[t->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
    r->nv = nviews < 16 ? nviews : 16;
    for (int i = 0; i < r->nv; i++) r->buf[i] = views[i].buf, r->off[i] = views[i].offset, r->size[i] = views[i].size;
    r->ps = params_size < sizeof r->params ? params_size : sizeof r->params;
    if (params) memcpy(r->params, params, r->ps);
    r->x = x, r->y = y, r->z = z;
}

// Buffers named by their first use in the listing, so that two runs compare.
typedef struct names_ {
    const void *p[512];
    int n;
} names_;

static int name_(names_ *nm, const void *p) {
    if (!p) return -1;
    for (int i = 0; i < nm->n; i++)
        if (nm->p[i] == p) return i;
    if (nm->n < 512) nm->p[nm->n] = p;
    return nm->n++;
}

static void write_recs_(FILE *f, names_ *nm, const trace_ *t, size_t from) {
    for (size_t i = from; i < t->n; i++) {
        const rec_ *r = &t->r[i];
        fprintf(f, "%zu %s grid %u %u %u params ", i, r->kernel, r->x, r->y, r->z);
        for (size_t k = 0; k < r->ps; k++) fprintf(f, "%02x", r->params[k]);
        fprintf(f, " views");
        for (int v = 0; v < r->nv; v++)
            fprintf(f, " b%d+%llu:%llu", name_(nm, r->buf[v]), (unsigned long long)r->off[v],
                    (unsigned long long)r->size[v]);
        fprintf(f, "\n");
    }
}

static void write_act_(FILE *f, const char *name, const wgpt_gpt2_act *a) {
    fprintf(f, "act %s slices %u floats %llu stride %llu\n", name, a->buf ? a->slices : 0,
            (unsigned long long)(a->buf ? a->floats : 0), (unsigned long long)(a->buf ? a->stride : 0));
}

// The model's counters and buffers: what the listing of its dispatches does not show.
static void write_model_(FILE *f, const wgpt_gpt2 *m) {
    fprintf(f, "precision %d recompute %d training %d shared %d cls_chunked %d cls_rows %u\n", m->precision,
            m->recompute, m->training, m->shared, m->cls_chunked, m->cls_rows);
    fprintf(f, "attn16 %d attn_ds %d in16_t %d split_masters %d loss_scale %g\n", m->plan.attn16, m->plan.attn_ds,
            m->plan.in16_t, m->split_masters, m->loss_scale);
    fprintf(f, "fwd %d fwd_train_n %d bwd %d opt %d opt_update_from %d shard_norm %d cast %d\n", m->fwd.n,
            m->fwd_train_n, m->bwd.n, m->opt.n, m->opt_update_from, m->shard_norm.n, m->cast.n);
    for (uint32_t i = 0; m->bwd_cut && i < m->c.num_layers + 2; i++) fprintf(f, "cut %u %d\n", i, m->bwd_cut[i]);
    fprintf(f, "bytes param %llu act %llu adam %llu master %llu w16 %llu grad %llu\n",
            (unsigned long long)m->param_bytes, (unsigned long long)m->activation_bytes,
            (unsigned long long)m->adam_bytes, (unsigned long long)m->master_bytes,
            (unsigned long long)m->weights16_bytes, (unsigned long long)m->grad_bytes);
#define ACT(x) write_act_(f, #x, &m->x)
    ACT(encoded), ACT(ln1), ACT(ln1_mean), ACT(ln1_rstd), ACT(qkv), ACT(atty), ACT(att_lse), ACT(attproj);
    ACT(res2), ACT(ln2), ACT(ln2_mean), ACT(ln2_rstd), ACT(fch), ACT(fch_gelu), ACT(fcproj), ACT(res3);
    ACT(lnf), ACT(lnf_mean), ACT(lnf_rstd), ACT(logits), ACT(losses), ACT(ce_lse), ACT(loss), ACT(status);
    ACT(dres), ACT(dln), ACT(datty), ACT(dqkv), ACT(dfch), ACT(dfch_gelu), ACT(att_d), ACT(tokens), ACT(targets);
    ACT(bucket), ACT(norm_scratch), ACT(mm_scratch), ACT(opt_state), ACT(ln_scratch), ACT(ln1_16), ACT(atty16);
    ACT(ln2_16), ACT(fchg16), ACT(lnf16), ACT(d16), ACT(qkv16), ACT(inp_t16), ACT(atty16_t);
#undef ACT
}

typedef struct config_ {
    const char *name;
    wgpt_gpt2_config c;
    uint32_t B, T;
    int emulate, epilogues;
    uint64_t max_binding;
    wgpt_gpt2_opts o;
    int step;       // 1: one training step (builds the optimizer), or a forward (inference)
    int inference;  // also an inference instance of the trained model at (B, T)
} config_;

// hs 64 (the f16 attention's head size), C 128; V 250 padded to 256
#define TINY {.max_seq_len = 32, .vocab_size = 250, .padded_vocab_size = 256, .num_layers = 2, .num_heads = 2, \
              .channels = 128}
#define SMALL {.max_seq_len = 64, .vocab_size = 250, .padded_vocab_size = 256, .num_layers = 3, .num_heads = 2, \
               .channels = 32}
#define TR(p, r) {.training = 1, .precision = (p), .recompute = (r)}
#define F32 WGPT_PRECISION_FP32
#define F16 WGPT_PRECISION_F16
#define NONE WGPT_RECOMPUTE_NONE
#define GELU WGPT_RECOMPUTE_GELU
#define ALL WGPT_RECOMPUTE_ALL

static const config_ CONFIGS[] = {
    {"fp32_none", TINY, 2, 16, 0, 0, 0, TR(F32, NONE), 1, 1},
    {"fp32_gelu", TINY, 2, 16, 0, 0, 0, TR(F32, GELU), 1, 0},
    {"fp32_all", TINY, 2, 16, 0, 0, 0, TR(F32, ALL), 1, 0},
    {"fp32_b1_t3", TINY, 1, 3, 0, 0, 0, TR(F32, ALL), 1, 1},
    {"fp32_infer", TINY, 2, 16, 0, 0, 0, {.precision = F32}, 1, 0},
    {"f16_none", TINY, 2, 16, 0, 0, 0, TR(F16, NONE), 1, 1},
    {"f16_gelu", TINY, 2, 16, 0, 0, 0, TR(F16, GELU), 1, 0},
    {"f16_all", TINY, 2, 16, 0, 0, 0, TR(F16, ALL), 1, 0},
    {"f16_infer", TINY, 2, 16, 0, 0, 0, {.precision = F16}, 1, 0},
    {"sgm_none", TINY, 2, 16, 1, 0, 0, TR(F16, NONE), 1, 1},
    {"sgm_gelu", TINY, 2, 16, 1, 0, 0, TR(F16, GELU), 1, 0},
    {"sgm_all", TINY, 2, 16, 1, 0, 0, TR(F16, ALL), 1, 0},
    {"sgm_infer", TINY, 2, 16, 1, 0, 0, {.precision = F16}, 1, 0},
    {"sgm_todd", TINY, 8, 7, 1, 0, 0, TR(F16, ALL), 1, 1},
    {"sgm_hs16", SMALL, 2, 16, 1, 0, 0, TR(F16, NONE), 1, 1},
    {"epi_none", TINY, 2, 16, 1, WGPT_EPI_ALL, 0, TR(F16, NONE), 1, 1},
    {"epi_all", TINY, 2, 16, 1, WGPT_EPI_ALL, 0, TR(F16, ALL), 1, 0},
    {"epi_todd", TINY, 8, 7, 1, WGPT_EPI_ALL, 0, TR(F16, GELU), 1, 0},
    {"epi_gelugrad", TINY, 2, 16, 1, WGPT_EPI_GELU_GRAD, 0, TR(F16, NONE), 1, 0},
    {"split_fp32", SMALL, 4, 32, 0, 0, 65536, TR(F32, GELU), 1, 1},
    {"split_f16", SMALL, 4, 32, 0, 0, 65536, TR(F16, NONE), 1, 0},
    {"split_sgm", SMALL, 4, 32, 1, 0, 65536, TR(F16, ALL), 1, 0},
    {"zero_fp32", TINY, 2, 16, 0, 0, 0, {.training = 1, .precision = F32, .shard = 1, .nshards = 2}, 1, 0},
    {"zero_f16", TINY, 2, 16, 1, 0, 0, {.training = 1, .precision = F16, .shard = 0, .nshards = 3}, 1, 1},
};
enum { NCONFIGS = sizeof CONFIGS / sizeof CONFIGS[0] };

static const wgpt_adamw_config OPT = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                                      .max_grad_norm = 1.0f};

static void fail_(wgpt_gpt2 *m) { fail_msg("%s", wgpt_gpt2_error(m)); }

// What the checks need of a training model: where its forward and backward
// lie in the trace (built in that order at create) and its segments' ends.
typedef struct counts_ {
    int fwd_n, bwd_n, cut[64];
} counts_;

// Sets the parameters of m and runs the configuration's step (a training
// step, ZeRO-1's split update, or a forward), then the forward of an
// inference instance if asked for; lists what each prepared to f.
static void step_(const config_ *k, wgpt_gpt2 *m, FILE *f, trace_ *t, names_ *nm) {
    size_t n = wgpt_gpt2_num_params(&k->c), BT = (size_t)k->B * k->T, mark = t->n;
    float *p = malloc(n * sizeof *p), loss;
    int *tok = malloc(BT * sizeof *tok), *tgt = malloc(BT * sizeof *tgt);
    wgpt_gpt2_init_params(&k->c, p, 3);
    for (size_t i = 0; i < BT; i++) tok[i] = (int)((i * 7919u + 13u) % k->c.vocab_size), tgt[i] = (int)(i % 5);
    if (wgpt_gpt2_set_params(m, p) < 0) fail_(m);
    wgpt_step_result r;
    if (k->o.training && k->o.nshards > 1) {
        double sumsq;
        int bad;
        if (wgpt_gpt2_accumulate(m, tok, tgt, 1, &loss) < 0 ||
            wgpt_gpt2_update_shard_begin(m, &OPT, 1, &sumsq, &bad) < 0 ||
            wgpt_gpt2_update_shard_end(m, &OPT, 1, sumsq, bad, &r) < 0)
            fail_(m);
    } else if (k->o.training) {
        if (wgpt_gpt2_train_step(m, tok, tgt, &OPT, 1, &r) < 0) fail_(m);
    } else if (wgpt_gpt2_forward(m, tok, tgt, &loss) < 0) {
        fail_(m);
    }
    fprintf(f, "== %s: step\n", k->name), write_recs_(f, nm, t, mark);
    write_model_(f, m);
    if (k->inference) {
        char err[2048];
        mark = t->n;
        wgpt_gpt2 *inf = wgpt_gpt2_create_inference(m, k->B, k->T, err, sizeof err);
        if (!inf) fail_msg("%s: inference: %s", k->name, err);
        if (wgpt_gpt2_forward(inf, tok, tgt, &loss) < 0) fail_(inf);
        fprintf(f, "== %s: inference\n", k->name), write_recs_(f, nm, t, mark), write_model_(f, inf);
        wgpt_gpt2_free(inf);
    }
    free(p), free(tok), free(tgt);
}

// Makes the configuration's model with the trace on, leaving the trace in
// t and the model's counters in *cn; with f, also steps it (step_) and
// writes the listing there.
static void run_config_(const config_ *k, FILE *f, trace_ *t, counts_ *cn) {
    wgpt_gpu_options go = {.adapter_index = -1, .emulate_sgm = k->emulate, .matmul_epilogues = (uint32_t)k->epilogues,
                           .max_binding = k->max_binding, .kernels = k->emulate ? WGPT_KERNELS_GPU : 0};
    char err[2048];
    wgpt_gpu *g = wgpt_gpu_open(&go, err, sizeof err);
    if (!g) fail_msg("cannot open the GPU: %s", err);
    names_ nm = {.n = 0};
    t->n = 0;
    wgpt_op_set_trace(on_add_, t);
    wgpt_gpt2 *m = wgpt_gpt2_create_opts(g, &k->c, k->B, k->T, &k->o, err, sizeof err);
    if (!m) fail_msg("%s: %s", k->name, err);
    cn->fwd_n = m->fwd.n, cn->bwd_n = m->bwd.n;
    for (uint32_t i = 0; m->bwd_cut && i < m->c.num_layers + 2 && i < 64; i++) cn->cut[i] = m->bwd_cut[i];
    if (f) {
        fprintf(f, "== %s: create\n", k->name), write_recs_(f, &nm, t, 0);
        step_(k, m, f, t, &nm);
    }
    wgpt_op_set_trace(NULL, NULL);
    wgpt_gpt2_free(m);
    wgpt_gpu_close(g);
}

static int dump_(const char *dir) {
    trace_ t = {0};
    for (int i = 0; i < NCONFIGS; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.txt", dir, CONFIGS[i].name);
        FILE *f = fopen(path, "w");
        if (!f) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
        counts_ cn;
        run_config_(&CONFIGS[i], f, &t, &cn);
        fclose(f);
        printf("%s: %zu dispatches prepared\n", path, t.n);
    }
    free(t.r);
    return 0;
}

// 1 if two steps dispatch the same kernel with the same params on the same grid.
static int same_(const rec_ *a, const rec_ *b) {
    return !strcmp(a->kernel, b->kernel) && a->ps == b->ps && !memcmp(a->params, b->params, a->ps) && a->x == b->x &&
           a->y == b->y && a->z == b->z;
}

static const config_ *config_named_(const char *name) {
    for (int i = 0; i < NCONFIGS; i++)
        if (!strcmp(CONFIGS[i].name, name)) return &CONFIGS[i];
    fail_msg("no configuration %s", name);
    return NULL;
}

// gpt2.h wgpt_recompute: "the same kernels write the same values". For the
// configurations <prefix>_none, _gelu and _all (same shape and device):
// the forwards are the same steps (kernel, params, grid: the slices they
// bind differ); each layer's backward (a segment of the backward op) is
// NONE's with steps put in front: GELU one, ALL more, and every step put
// in front is one of the forward's.
static void recompute_is_none_plus_forward_steps_(const char *prefix) {
    trace_ t[3] = {{0}};
    counts_ c[3];
    static const char *const mode[3] = {"none", "gelu", "all"};
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s_%s", prefix, mode[i]);
        run_config_(config_named_(name), NULL, &t[i], &c[i]);
    }
    char first[64];
    snprintf(first, sizeof first, "%s_none", prefix);
    uint32_t L = config_named_(first)->c.num_layers;
    for (int i = 1; i < 3; i++) {
        assert_int_equal(c[i].fwd_n, c[0].fwd_n);
        for (int k = 0; k < c[0].fwd_n; k++) assert_true(same_(&t[i].r[k], &t[0].r[k]));
        // segment 0 (the classifier, lnf) and the encoder's are the same
        assert_int_equal(c[i].cut[0], c[0].cut[0]);
        for (int k = 0; k < c[0].cut[0]; k++) assert_true(same_(&t[i].r[c[i].fwd_n + k], &t[0].r[c[0].fwd_n + k]));
        int extra = 0;
        for (uint32_t s = 1; s <= L; s++) {
            const rec_ *mine = t[i].r + c[i].fwd_n + c[i].cut[s - 1], *none = t[0].r + c[0].fwd_n + c[0].cut[s - 1];
            int n = c[i].cut[s] - c[i].cut[s - 1], n0 = c[0].cut[s] - c[0].cut[s - 1], front = n - n0;
            assert_true(i == 1 ? front == 1 : front > 1);
            for (int k = 0; k < n0; k++) assert_true(same_(&mine[front + k], &none[k]));
            for (int k = 0; k < front; k++) {
                int found = 0;
                for (int f = 0; f < c[i].fwd_n && !found; f++) found = same_(&mine[k], &t[i].r[f]);
                if (!found) fail_msg("%s_%s: step %d of layer %u's backward (%s) is not one of the forward's", prefix,
                                     mode[i], k, L - s, mine[k].kernel);
            }
            extra += front;
        }
        assert_int_equal(c[i].bwd_n, c[0].bwd_n + extra);
        const rec_ *enc = t[i].r + c[i].fwd_n + c[i].cut[L], *enc0 = t[0].r + c[0].fwd_n + c[0].cut[L];
        assert_int_equal(c[i].cut[L + 1] - c[i].cut[L], c[0].cut[L + 1] - c[0].cut[L]);
        for (int k = 0; k < c[0].cut[L + 1] - c[0].cut[L]; k++) assert_true(same_(&enc[k], &enc0[k]));
    }
    for (int i = 0; i < 3; i++) free(t[i].r);
}

static void fp32_recompute(void **st) {
    (void)st;
    recompute_is_none_plus_forward_steps_("fp32");
}

static int f16_or_skip_(int emulate) {
    wgpt_gpu_options o = {.adapter_index = -1, .emulate_sgm = emulate};
    char err[2048];
    wgpt_gpu *g = wgpt_gpu_open(&o, err, sizeof err);
    if (!g) fail_msg("cannot open the GPU: %s", err);
    const wgpt_gpu_info *i = wgpt_gpu_get_info(g);
    int ok = i->has_f16 && (!emulate || (i->has_subgroup_matrix && i->sgm_config >= 0));
    if (!ok) printf("skipped: '%s' has no f16%s\n", i->name, emulate ? " or no emulated subgroup matrices" : "");
    wgpt_gpu_close(g);
    return ok;
}

static void f16_recompute(void **st) {
    (void)st;
    if (!f16_or_skip_(0)) skip();
    recompute_is_none_plus_forward_steps_("f16");
}

// The f16 plan with transposed inputs (tensor cores, emulated where the device has none).
static void f16_transposed_recompute(void **st) {
    (void)st;
    if (!f16_or_skip_(1)) skip();
    recompute_is_none_plus_forward_steps_("sgm");
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--dump") == 0) return dump_(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--dump DIR]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp32_recompute),
        cmocka_unit_test(f16_recompute),
        cmocka_unit_test(f16_transposed_recompute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
