// comm_single.c: one process, one rank (the build without MPI): every
// collective is the identity.
#include <stdlib.h>

#include "dist/comm.h"

struct wgpt_comm {
    int unused;
};

wgpt_comm *wgpt_comm_open(double timeout_s, char *err, size_t errlen) {
    (void)timeout_s, (void)err, (void)errlen;
    return calloc(1, sizeof(wgpt_comm));
}
void wgpt_comm_close(wgpt_comm *c, int failed) { (void)failed, free(c); }
int wgpt_comm_rank(const wgpt_comm *c) { return (void)c, 0; }
int wgpt_comm_size(const wgpt_comm *c) { return (void)c, 1; }
int wgpt_comm_local_rank(const wgpt_comm *c) { return (void)c, 0; }
int wgpt_comm_local_size(const wgpt_comm *c) { return (void)c, 1; }
const char *wgpt_comm_kind(void) { return "single"; }
int wgpt_comm_sum_floats(wgpt_comm *c, float *data, size_t n, char *err, size_t errlen) {
    (void)c, (void)data, (void)n, (void)err, (void)errlen;
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
