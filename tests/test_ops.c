// test_ops.c: every op of the registry (tests/ops/ops.h) x variant x shape
// on the default device (or every adapter), against the plain C reference (tests/ref), as
// ggml's test-backend-ops runs its ops. One cmocka test per case, named
// "family/variant/sizes"; a case whose variant the device cannot run (no
// f16, no subgroup matrices) is a cmocka skip that says why, counted as
// skipped in scripts/run-tests.sh's summary. The devices are opened once per
// set of options (twin, emulated subgroup matrices, splits, f16 off, block,
// stream-K, compute units, binding limit) and kept, up to 8 at a time.
//
//   build/test_ops              every case, on the default adapter
//   build/test_ops WORD...      the cases whose name contains a WORD (e.g. layernorm/cpu)
//   build/test_ops --all-adapters [WORD...]   every case on every adapter
//                               wgpt_gpu_list finds (names start "adapter I: ")
#include "test_util.h"

#include "model/attention.h"   // wgpt_attention_uses_sgm: may the device run the sgm variants
#include "model/linear_f16.h"  // wgpt_linear_f16_uses_sgm
#include "ops/ops.h"

typedef struct op_case {
    int adapter;  // -1: the default one
    const op_family *f;
    const op_variant *v;
    const op_shape *s;
    char name[128];
} op_case;

typedef struct op_dev {
    int adapter;
    wgpt_kernels kernels;
    int emulate_sgm;
    uint32_t matmul_splits;
    int disable_f16;
    wgpt_sgm_block sgm_block;
    wgpt_streamk streamk;
    uint32_t compute_units;
    uint64_t max_binding;
    wgpt_gpu *g;
} op_dev;
static op_dev devs[8];
static size_t ndevs;

// The device for (adapter, variant, shape), opened on first use.
static wgpt_gpu *dev_for_(int adapter, const op_variant *v, const op_shape *s) {
    for (size_t i = 0; i < ndevs; i++)
        if (devs[i].adapter == adapter && devs[i].kernels == v->kernels && devs[i].emulate_sgm == v->emulate_sgm &&
            devs[i].matmul_splits == v->matmul_splits && devs[i].disable_f16 == v->disable_f16 &&
            devs[i].sgm_block == v->sgm_block && devs[i].streamk == v->streamk &&
            devs[i].compute_units == v->compute_units && devs[i].max_binding == s->max_binding)
            return devs[i].g;
    if (ndevs == OP_COUNT(devs))  // all taken: close them (the cases run family by family)
        while (ndevs) wgpt_gpu_close(devs[--ndevs].g);
    wgpt_gpu_options o = {.adapter_index = adapter,
                          .kernels = v->kernels,
                          .emulate_sgm = v->emulate_sgm,
                          .matmul_splits = v->matmul_splits,
                          .disable_f16 = v->disable_f16,
                          .sgm_block = v->sgm_block,
                          .streamk = v->streamk,
                          .compute_units = v->compute_units,
                          .max_binding = s->max_binding};
    o = tu_gpu_options(&o);  // and the WGPT_ variables it leaves open, as the CLI reads them
    char err[2048];
    wgpt_gpu *g = wgpt_gpu_open(&o, err, sizeof err);
    if (!g) fail_msg("cannot open the GPU: %s", err);
    devs[ndevs++] = (op_dev){adapter,      v->kernels,   v->emulate_sgm,    v->matmul_splits, v->disable_f16,
                             v->sgm_block, v->streamk,   v->compute_units, s->max_binding,   g};
    return g;
}

static void run_case_(void **state) {
    const op_case *c = *state;
    wgpt_gpu *g = dev_for_(c->adapter, c->v, c->s);
    const wgpt_gpu_info *info = wgpt_gpu_get_info(g);
    const char *why = NULL;
    char buf[200];
    if (c->v->needs && !info->has_f16) why = "needs shader-f16";
    else if ((c->v->needs & OP_NEEDS_SGM) && !wgpt_linear_f16_uses_sgm(g))
        why = "needs f16 subgroup matrices, real or emulated";
    else if ((c->v->needs & OP_NEEDS_SGM_ATTENTION) && info->max_workgroup_storage < WGPT_ATTENTION_SGM_STORAGE) {
        snprintf(buf, sizeof buf, "has %u bytes of workgroup memory; the f16 attention kernels need %u (wgpt's "
                 "tuned lavapipe, `make lavapipe`, offers 64 KiB)", (unsigned)info->max_workgroup_storage,
                 WGPT_ATTENTION_SGM_STORAGE);
        why = buf;
    } else if ((c->v->needs & OP_NEEDS_SGM_ATTENTION) && !wgpt_attention_uses_sgm(g, 64))
        why = "has no f16 subgroup matrices for attention, real or emulated, that the kernels take";
    if (why) {
        print_message("skipped: %s: '%s' %s\n", c->name, info->name, why);
        skip();
    }
    c->f->check(g, c->v, c->s);
}

static int teardown_(void **state) {
    (void)state;
    while (ndevs) wgpt_gpu_close(devs[--ndevs].g);
    return 0;
}

static int matches_(const char *name, int argc, char **argv) {
    int words = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--all-adapters")) continue;
        words++;
        if (strstr(name, argv[i])) return 1;
    }
    return words == 0;
}

// "[adapter I: ]family/variant/d0xd1x... [(bindings of N KiB)]"
static void case_name_(op_case *c) {
    const op_shape *sh = c->s;
    int k = c->adapter < 0 ? 0 : snprintf(c->name, sizeof c->name, "adapter %d: ", c->adapter);
    k += snprintf(c->name + k, sizeof c->name - (size_t)k, "%s/%s/", c->f->name, c->v->name);
    size_t nd = OP_COUNT(sh->d);
    while (nd > 1 && !sh->d[nd - 1]) nd--;
    for (size_t d = 0; d < nd && k > 0 && (size_t)k < sizeof c->name; d++)
        k += snprintf(c->name + k, sizeof c->name - (size_t)k, d ? "x%u" : "%u", sh->d[d]);
    if (sh->max_binding && k > 0 && (size_t)k < sizeof c->name)
        snprintf(c->name + k, sizeof c->name - (size_t)k, " (bindings of %llu KiB)",
                 (unsigned long long)(sh->max_binding >> 10));
}

// 0 if every shape of every family runs with some variant and every variant
// with some shape (a row that tests nothing is an error, not a pass); else
// prints the first such row and returns -1.
static int registry_whole_(void) {
    for (size_t f = 0; f < op_nfamilies; f++) {
        const op_family *fam = op_families[f];
        unsigned used = 0, all = fam->nvariants >= 32 ? ~0u : (1u << fam->nvariants) - 1;
        if (!fam->nvariants || !fam->nshapes || !fam->check || fam->nvariants > 32) {
            fprintf(stderr, "test_ops: family %s has no variants, shapes or check (or over 32 variants)\n", fam->name);
            return -1;
        }
        for (size_t s = 0; s < fam->nshapes; s++) {
            unsigned m = fam->shapes[s].variants ? fam->shapes[s].variants & all : all;
            if (!m) {
                fprintf(stderr, "test_ops: family %s: shape %zu selects no variant\n", fam->name, s);
                return -1;
            }
            used |= m;
        }
        for (size_t v = 0; v < fam->nvariants; v++)
            if (!(used & (1u << v))) {
                fprintf(stderr, "test_ops: family %s: variant %s runs no shape\n", fam->name, fam->variants[v].name);
                return -1;
            }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (registry_whole_() < 0) return 2;
    int adapters[16] = {-1}, nad = 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--all-adapters")) {
            static wgpt_gpu_info list[16];
            char err[512];
            wgpt_gpu_options o = tu_gpu_options(NULL);
            nad = wgpt_gpu_list(&o, list, 16, err, sizeof err);
            if (nad < 1) {
                fprintf(stderr, "test_ops: no adapter: %s\n", nad < 0 ? err : "none found");
                return 2;
            }
            for (int a = 0; a < nad; a++) adapters[a] = a;
        }
    size_t max = 0;
    for (size_t f = 0; f < op_nfamilies; f++) max += op_families[f]->nshapes * op_families[f]->nvariants;
    max *= (size_t)nad;
    op_case *cases = calloc(max ? max : 1, sizeof *cases);
    struct CMUnitTest *tests = calloc(max ? max : 1, sizeof *tests);
    if (!cases || !tests) return 2;
    size_t n = 0;
    for (int a = 0; a < nad; a++)
        for (size_t f = 0; f < op_nfamilies; f++) {
            const op_family *fam = op_families[f];
            for (size_t v = 0; v < fam->nvariants; v++)  // variant by variant: each one's device serves its shapes
                for (size_t s = 0; s < fam->nshapes; s++) {
                    const op_shape *sh = &fam->shapes[s];
                    if (sh->variants && !(sh->variants & (1u << v))) continue;
                    op_case *c = &cases[n];
                    *c = (op_case){adapters[a], fam, &fam->variants[v], sh, ""};
                    case_name_(c);
                    if (!matches_(c->name, argc, argv)) continue;
                    tests[n] = (struct CMUnitTest){c->name, run_case_, NULL, NULL, c};
                    n++;
                }
        }
    if (!n) {
        fprintf(stderr, "test_ops: no case matches the words given\n");
        return 2;
    }
    int rc = _cmocka_run_group_tests("ops", tests, n, NULL, teardown_);
    free(tests), free(cases);
    return rc;
}
