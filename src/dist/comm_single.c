// comm_single.c: one process, one rank (the build without MPI): every
// collective is the identity.
#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"
#include "util/err.h"

struct wgpt_comm {
    int unused;
};

wgpt_comm *wgpt_comm_open(const wgpt_comm_options *o, char *err, size_t errlen) {
    // Under mpirun with several ranks each copy would train alone, all in one --out.
    if (o->launched_ranks > 1)
        return wgpt_errf(err, errlen, "this wgpt was built without MPI (WGPT_MPI=0), so it cannot be one of %d ranks: "
                         "build it where mpicc is found", o->launched_ranks), NULL;
    wgpt_comm *c = calloc(1, sizeof *c);
    if (!c) wgpt_errf(err, errlen, "out of host memory");
    return c;
}
void wgpt_comm_close(wgpt_comm *c, int failed) { (void)failed, free(c); }
int wgpt_comm_rank(const wgpt_comm *c) { return (void)c, 0; }
int wgpt_comm_size(const wgpt_comm *c) { return (void)c, 1; }
int wgpt_comm_local_rank(const wgpt_comm *c) { return (void)c, 0; }
int wgpt_comm_local_size(const wgpt_comm *c) { return (void)c, 1; }
const char *wgpt_comm_kind(void) { return "single"; }
int wgpt_comm_launched(const wgpt_comm *c, double *kill_after_s) { return (void)c, *kill_after_s = 0, 0; }
int wgpt_comm_sum_floats(wgpt_comm *c, float *data, size_t n, char *err, size_t errlen) {
    (void)c, (void)data, (void)n, (void)err, (void)errlen;
    return 0;
}
// One process: a sum is done when it begins.
struct wgpt_comm_sum {
    int unused;
};
wgpt_comm_sum *wgpt_comm_sum_begin(wgpt_comm *c, float *data, size_t n, char *err, size_t errlen) {
    (void)c, (void)data, (void)n;
    wgpt_comm_sum *s = calloc(1, sizeof *s);
    if (!s) wgpt_errf(err, errlen, "out of host memory");
    return s;
}
wgpt_comm_sum *wgpt_comm_reduce_begin(wgpt_comm *c, float *data, size_t n, const uint64_t *counts, char *err,
                                      size_t errlen) {
    (void)counts;
    return wgpt_comm_sum_begin(c, data, n, err, errlen);
}
int wgpt_comm_sum_test(wgpt_comm *c, wgpt_comm_sum *s, char *err, size_t errlen) {
    (void)c, (void)s, (void)err, (void)errlen;
    return 1;
}
int wgpt_comm_sum_wait(wgpt_comm *c, wgpt_comm_sum *s, char *err, size_t errlen) {
    (void)c, (void)s, (void)err, (void)errlen;
    return 0;
}
void wgpt_comm_sum_free(wgpt_comm *c, wgpt_comm_sum *s) { (void)c, free(s); }
int wgpt_comm_gather_floats(wgpt_comm *c, const float *mine, float *all, const uint64_t *offs, const uint64_t *counts,
                            int root, char *err, size_t errlen) {
    (void)c, (void)root, (void)err, (void)errlen;
    if (all && mine != all + offs[0]) memmove(all + offs[0], mine, counts[0] * sizeof *all);
    return 0;
}
int wgpt_comm_gather_words(wgpt_comm *c, const uint32_t *mine, uint32_t *all, const uint64_t *offs,
                           const uint64_t *counts, int root, char *err, size_t errlen) {
    (void)c, (void)root, (void)err, (void)errlen;
    if (all && mine != all + offs[0]) memmove(all + offs[0], mine, counts[0] * sizeof *all);
    return 0;
}
int wgpt_comm_sum_double(wgpt_comm *c, double *v, char *err, size_t errlen) {
    (void)c, (void)v, (void)err, (void)errlen;
    return 0;
}
int wgpt_comm_min_max_u64(wgpt_comm *c, uint64_t v, uint64_t *min, uint64_t *max, char *err, size_t errlen) {
    (void)c, (void)err, (void)errlen;
    *min = *max = v;
    return 0;
}
double wgpt_comm_seconds(const wgpt_comm *c) { return (void)c, 0.0; }
