// comm_mpi.c: the ranks of an Open MPI job (see comm.h). Errors return on
// the communicator (MPI_ERRORS_RETURN) and every collective is a
// nonblocking one polled with MPI_Test until a deadline, so a dead peer is
// an error message, never a hang.
#define _GNU_SOURCE  // (clock_gettime, nanosleep with the MPI headers' feature set)
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/comm.h"
#include "util/clock.h"
#include "util/err.h"

#define POOL_ 64

struct wgpt_comm {
    int mpi;  // MPI initialised here (started by mpirun)
    MPI_Comm world, local;
    MPI_Comm rs, ag;  // the gradient sums' two phases (struct wgpt_comm_sum)
    int rank, size, local_rank, local_size;
    double timeout_s, seconds, kill_after_s;
    int *counts, *displs;  // per rank, for the v-collectives
    struct wgpt_comm_sum *sums;  // the sums in flight, in the order they began
    // finished sums' scratch, kept for the next (a step's buckets come again
    // in the same sizes): not a fresh mapping of the gradients' size a step
    struct {
        float *p;
        size_t cap;
    } pool[POOL_];
};

const char *wgpt_comm_kind(void) { return "mpi"; }

int wgpt_comm_launched(const wgpt_comm *c, double *kill_after_s) {
    *kill_after_s = c->mpi ? c->kill_after_s : 0;
    return c->mpi;
}

wgpt_comm *wgpt_comm_open(const wgpt_comm_options *o, char *err, size_t errlen) {
    wgpt_comm *c = calloc(1, sizeof *c);
    if (!c) return wgpt_errf(err, errlen, "out of host memory"), NULL;
    c->timeout_s = o->timeout_s > 0 ? o->timeout_s : 600;
    c->kill_after_s = o->kill_after_s;
    c->size = c->local_size = 1;
    if (o->launched_ranks <= 0) return c;  // not started by mpirun: one rank, MPI untouched
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        free(c);
        return wgpt_errf(err, errlen, "MPI_Init failed"), NULL;
    }
    c->mpi = 1;
    MPI_Comm_dup(MPI_COMM_WORLD, &c->world);
    MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->world, &c->rank);
    MPI_Comm_size(c->world, &c->size);
    // The ranks that share this host's memory: their order picks the GPU.
    MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &c->local);
    MPI_Comm_set_errhandler(c->local, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->local, &c->local_rank);
    MPI_Comm_size(c->local, &c->local_size);
    MPI_Comm_dup(c->world, &c->rs);
    MPI_Comm_dup(c->world, &c->ag);
    MPI_Comm_set_errhandler(c->rs, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(c->ag, MPI_ERRORS_RETURN);
    c->counts = calloc((size_t)c->size, sizeof *c->counts);
    c->displs = calloc((size_t)c->size, sizeof *c->displs);
    if (!c->counts || !c->displs) {
        wgpt_comm_close(c, 1);
        return wgpt_errf(err, errlen, "out of host memory"), NULL;
    }
    return c;
}

void wgpt_comm_close(wgpt_comm *c, int failed) {
    if (!c) return;
    if (c->mpi) {
        if (failed && c->size > 1) MPI_Abort(c->world, 1);  // the others must not wait for this rank
        MPI_Comm_free(&c->ag);
        MPI_Comm_free(&c->rs);
        MPI_Comm_free(&c->local);
        MPI_Comm_free(&c->world);
        MPI_Finalize();
    }
    for (int i = 0; i < POOL_; i++) free(c->pool[i].p);
    free(c->counts), free(c->displs);
    free(c);
}

int wgpt_comm_rank(const wgpt_comm *c) { return c->rank; }
int wgpt_comm_size(const wgpt_comm *c) { return c->size; }
int wgpt_comm_local_rank(const wgpt_comm *c) { return c->local_rank; }
int wgpt_comm_local_size(const wgpt_comm *c) { return c->local_size; }
double wgpt_comm_seconds(const wgpt_comm *c) { return c->seconds; }

static int mpi_fail_(const wgpt_comm *c, int code, const char *what, char *err, size_t errlen) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, s, &len);
    return wgpt_errf(err, errlen, "rank %d of %d: %s failed: %s (another rank has probably died)", c->rank, c->size,
                     what, s);
}

// Polls req until it completes or the deadline passes. The sleep keeps a
// waiting rank off the cores the GPU (lavapipe: the CPU) computes on.
static int wait_(wgpt_comm *c, MPI_Request *req, const char *what, char *err, size_t errlen) {
    double t0 = wgpt_clock_s();
    for (;;) {
        int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            c->seconds += wgpt_clock_s() - t0;
            return mpi_fail_(c, rc, what, err, errlen);
        }
        if (done) break;
        double now = wgpt_clock_s();
        if (now - t0 > c->timeout_s) {
            c->seconds += now - t0;
            return wgpt_errf(err, errlen,
                             "rank %d of %d: %s: no answer from the other ranks in %.0f s (--comm-timeout): a rank "
                             "has died or hangs",
                             c->rank, c->size, what, c->timeout_s);
        }
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    c->seconds += wgpt_clock_s() - t0;
    return 0;
}

// One sum of wgpt_comm_sum_floats in flight: a reduce-scatter (an
// all-to-all of shares) on c->rs, this rank's share summed in rank order,
// then an all-gather on c->ag. The two phases run on communicators of their
// own, and each sum's all-gather starts only after every earlier sum's, so
// that every rank issues the collectives of each communicator in the same
// order (MPI's rule for nonblocking collectives) however the sums' tests
// interleave with the caller's work.
struct wgpt_comm_sum {
    float *data, *scratch;  // scratch: every rank's copy of my share, rank i's at i * mine
    size_t n, mine, scratch_cap;
    int *counts, *displs, *rcounts, *rdispls;  // per rank; one allocation
    MPI_Request req;
    int phase;     // PHASE_
    int gather;    // 0: a reduce-scatter only (wgpt_comm_reduce_begin)
    double since;  // when the phase began: its deadline counts from here
    int queued;    // in c's list of sums in flight
    wgpt_comm_sum *next;
};
enum { PHASE_SCATTER, PHASE_GATHER, PHASE_DONE, PHASE_FAILED };

// Rank i's share of n floats: [displs[i], displs[i] + counts[i]).
static void shares_(const wgpt_comm *c, size_t n, int *counts, int *displs) {
    size_t per = (n + (size_t)c->size - 1) / (size_t)c->size, off = 0;
    for (int i = 0; i < c->size; i++) {
        size_t k = off < n ? (n - off < per ? n - off : per) : 0;
        counts[i] = (int)k, displs[i] = (int)off;
        off += k;
    }
}

// A scratch of at least n floats: the smallest pooled one that fits, else a new one.
static float *pool_get_(wgpt_comm *c, size_t n, size_t *cap) {
    int best = -1;
    for (int i = 0; i < POOL_; i++)
        if (c->pool[i].p && c->pool[i].cap >= n && (best < 0 || c->pool[i].cap < c->pool[best].cap)) best = i;
    if (best < 0) return *cap = n, malloc(n * sizeof(float));
    float *p = c->pool[best].p;
    *cap = c->pool[best].cap;
    c->pool[best].p = NULL;
    return p;
}

static void pool_put_(wgpt_comm *c, float *p, size_t cap) {
    for (int i = 0; p && i < POOL_; i++)
        if (!c->pool[i].p) {
            c->pool[i].p = p, c->pool[i].cap = cap;
            return;
        }
    free(p);
}

static void unqueue_(wgpt_comm *c, wgpt_comm_sum *s) {
    for (wgpt_comm_sum **p = &c->sums; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    s->queued = 0;
}

void wgpt_comm_sum_free(wgpt_comm *c, wgpt_comm_sum *s) {
    if (!s) return;
    if (s->queued) unqueue_(c, s);
    // A sum abandoned in flight or past its deadline: MPI may still write its
    // buffers until the job ends (a failed rank aborts it), so they stay allocated.
    if (s->phase != PHASE_DONE) return;
    pool_put_(c, s->scratch, s->scratch_cap);
    free(s->counts), free(s);
}

static int sum_fail_(wgpt_comm *c, wgpt_comm_sum *s, int code, const char *what, char *err, size_t errlen) {
    s->phase = PHASE_FAILED;
    unqueue_(c, s);
    if (code != MPI_SUCCESS) return mpi_fail_(c, code, what, err, errlen);
    return wgpt_errf(err, errlen,
                     "rank %d of %d: %s: no answer from the other ranks in %.0f s (--comm-timeout): a rank has died "
                     "or hangs",
                     c->rank, c->size, what, c->timeout_s);
}

// The local sum of my share, rank 0 + rank 1 + ...: the order is fixed
// here, not by MPI; then the all-gather of the summed shares.
static int start_gather_(wgpt_comm *c, wgpt_comm_sum *s, char *err, size_t errlen) {
    float *out = s->data + s->displs[c->rank];
    for (size_t j = 0; j < s->mine; j++) {
        float v = s->scratch[j];
        for (int i = 1; i < c->size; i++) v += s->scratch[(size_t)i * s->mine + j];
        out[j] = v;
    }
    if (!s->gather) {
        s->phase = PHASE_DONE;
        unqueue_(c, s);
        return 0;
    }
    int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, s->data, s->counts, s->displs, MPI_FLOAT, c->ag, &s->req);
    if (rc != MPI_SUCCESS) return sum_fail_(c, s, rc, "the gradient all-gather", err, errlen);
    s->phase = PHASE_GATHER;
    s->since = wgpt_clock_s();
    return 0;
}

// Advances every sum in flight, in the order they began; a finished one
// leaves the list. -1 on the first error (a failed call, a deadline).
static int progress_(wgpt_comm *c, char *err, size_t errlen) {
    int earlier_gathering = 1;  // every earlier sum has started its all-gather
    for (wgpt_comm_sum *s = c->sums, *next; s; s = next) {
        next = s->next;
        const char *what = s->phase == PHASE_SCATTER ? "the gradient reduce-scatter" : "the gradient all-gather";
        int done = 0, rc = s->req == MPI_REQUEST_NULL ? MPI_SUCCESS : MPI_Test(&s->req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return sum_fail_(c, s, rc, what, err, errlen);
        done = done || s->req == MPI_REQUEST_NULL;
        if (done && s->phase == PHASE_SCATTER && earlier_gathering) {
            if (start_gather_(c, s, err, errlen) < 0) return -1;
        } else if (done && s->phase == PHASE_GATHER) {
            s->phase = PHASE_DONE;
            unqueue_(c, s);
        } else if (!done && wgpt_clock_s() - s->since > c->timeout_s) {
            return sum_fail_(c, s, MPI_SUCCESS, what, err, errlen);
        }
        earlier_gathering = earlier_gathering && s->phase != PHASE_SCATTER;
    }
    return 0;
}

// A sum of data[0, n) whose shares are counts[] (NULL: 1/size each), all-gathered or not.
static wgpt_comm_sum *begin_(wgpt_comm *c, float *data, size_t n, const uint64_t *counts, int gather, char *err,
                             size_t errlen) {
    if (c->size > 1 && (n > (size_t)INT32_MAX || n / (size_t)c->size > (size_t)1 << 30))
        return wgpt_errf(err, errlen, "%zu floats are too many for one sum", n), NULL;
    uint64_t total = 0;
    for (int i = 0; counts && i < c->size; i++) total += counts[i];
    if (counts && total != n)
        return wgpt_errf(err, errlen, "a sum of %zu floats in shares of %llu in all", n, (unsigned long long)total),
               NULL;
    wgpt_comm_sum *s = calloc(1, sizeof *s);
    int *ints = s ? calloc(4 * (size_t)c->size, sizeof *ints) : NULL;
    if (!ints) return free(s), wgpt_errf(err, errlen, "out of host memory"), NULL;
    s->data = data, s->n = n;
    s->counts = ints, s->displs = ints + c->size, s->rcounts = ints + 2 * c->size, s->rdispls = ints + 3 * c->size;
    s->req = MPI_REQUEST_NULL;
    s->phase = PHASE_DONE;
    s->gather = gather;
    if (c->size == 1) return s;
    shares_(c, n, s->counts, s->displs);
    for (int i = 0, off = 0; counts && i < c->size; off += (int)counts[i], i++)
        s->counts[i] = (int)counts[i], s->displs[i] = off;
    s->mine = (size_t)s->counts[c->rank];
    s->scratch = pool_get_(c, (s->mine ? s->mine : 1) * (size_t)c->size, &s->scratch_cap);
    if (!s->scratch) {
        wgpt_comm_sum_free(c, s);
        return wgpt_errf(err, errlen, "out of host memory for %zu floats", s->mine * (size_t)c->size), NULL;
    }
    for (int i = 0; i < c->size; i++) s->rcounts[i] = (int)s->mine, s->rdispls[i] = (int)(s->mine * (size_t)i);
    double t0 = wgpt_clock_s();
    int rc = MPI_Ialltoallv(data, s->counts, s->displs, MPI_FLOAT, s->scratch, s->rcounts, s->rdispls, MPI_FLOAT,
                            c->rs, &s->req);
    c->seconds += wgpt_clock_s() - t0;
    if (rc != MPI_SUCCESS) {
        mpi_fail_(c, rc, "the gradient reduce-scatter", err, errlen);
        wgpt_comm_sum_free(c, s);
        return NULL;
    }
    s->phase = PHASE_SCATTER;
    s->since = t0;
    wgpt_comm_sum **tail = &c->sums;
    while (*tail) tail = &(*tail)->next;
    *tail = s, s->queued = 1;
    return s;
}

wgpt_comm_sum *wgpt_comm_sum_begin(wgpt_comm *c, float *data, size_t n, char *err, size_t errlen) {
    return begin_(c, data, n, NULL, 1, err, errlen);
}

wgpt_comm_sum *wgpt_comm_reduce_begin(wgpt_comm *c, float *data, size_t n, const uint64_t *counts, char *err,
                                      size_t errlen) {
    return begin_(c, data, n, counts, 0, err, errlen);
}

static int state_(const wgpt_comm_sum *s) { return s->phase == PHASE_DONE ? 1 : s->phase == PHASE_FAILED ? -1 : 0; }

int wgpt_comm_sum_test(wgpt_comm *c, wgpt_comm_sum *s, char *err, size_t errlen) {
    if (state_(s)) return state_(s) > 0 ? 1 : wgpt_errf(err, errlen, "a failed gradient sum was tested again");
    double t0 = wgpt_clock_s();
    int rc = progress_(c, err, errlen);
    c->seconds += wgpt_clock_s() - t0;
    return rc < 0 ? -1 : state_(s) > 0;
}

// The sleep keeps a waiting rank off the cores the GPU (lavapipe: the CPU) computes on.
int wgpt_comm_sum_wait(wgpt_comm *c, wgpt_comm_sum *s, char *err, size_t errlen) {
    double t0 = wgpt_clock_s();
    int rc = 0;
    while (rc == 0 && state_(s) == 0) {
        rc = progress_(c, err, errlen);
        if (rc == 0 && state_(s) == 0) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    c->seconds += wgpt_clock_s() - t0;
    if (rc == 0 && state_(s) < 0) rc = wgpt_errf(err, errlen, "a failed gradient sum was waited for again");
    return rc;
}

int wgpt_comm_sum_floats(wgpt_comm *c, float *data, size_t n, char *err, size_t errlen) {
    if (c->size == 1) return 0;
    wgpt_comm_sum *s = wgpt_comm_sum_begin(c, data, n, err, errlen);
    if (!s) return -1;
    int rc = wgpt_comm_sum_wait(c, s, err, errlen);
    wgpt_comm_sum_free(c, s);
    return rc;
}

// The gathers of floats and of 32-bit words: the same collective on elements of 4 bytes.
static int gather_(wgpt_comm *c, const void *mine, void *all, const uint64_t *offs, const uint64_t *counts, int root,
                   MPI_Datatype type, const char *what, char *err, size_t errlen) {
    int me = c->rank;
    char *a = all;
    if (c->size == 1) {
        if (a && (const char *)mine != a + offs[0] * 4) memmove(a + offs[0] * 4, mine, counts[0] * 4);
        return 0;
    }
    if (root >= c->size) return wgpt_errf(err, errlen, "gather to rank %d of %d ranks", root, c->size);
    for (int i = 0; i < c->size; i++) {  // MPI counts and displacements are ints
        if (offs[i] + counts[i] > (uint64_t)INT32_MAX)
            return wgpt_errf(err, errlen, "a gather of %llu elements: at most %d",
                             (unsigned long long)(offs[i] + counts[i]), INT32_MAX);
        c->counts[i] = (int)counts[i], c->displs[i] = (int)offs[i];
    }
    int receives = root < 0 || root == me;
    if (receives && !all) return wgpt_errf(err, errlen, "a gather needs the whole array on the receiving rank");
    // In place where mine is already at its place in all (MPI forbids overlapping buffers otherwise).
    const void *send = receives && (const char *)mine == a + offs[me] * 4 ? MPI_IN_PLACE : mine;
    MPI_Request req;
    int rc = root < 0 ? MPI_Iallgatherv(send, c->counts[me], type, all, c->counts, c->displs, type, c->world, &req)
                      : MPI_Igatherv(send, c->counts[me], type, all, c->counts, c->displs, type, root, c->world, &req);
    if (rc != MPI_SUCCESS) return mpi_fail_(c, rc, what, err, errlen);
    return wait_(c, &req, what, err, errlen);
}

int wgpt_comm_gather_floats(wgpt_comm *c, const float *mine, float *all, const uint64_t *offs, const uint64_t *counts,
                            int root, char *err, size_t errlen) {
    const char *what = root < 0 ? "the parameter all-gather" : "the optimizer state gather";
    return gather_(c, mine, all, offs, counts, root, MPI_FLOAT, what, err, errlen);
}

int wgpt_comm_gather_words(wgpt_comm *c, const uint32_t *mine, uint32_t *all, const uint64_t *offs,
                           const uint64_t *counts, int root, char *err, size_t errlen) {
    const char *what = root < 0 ? "the all-gather of the updated shards" : "a gather of words";
    return gather_(c, mine, all, offs, counts, root, MPI_UINT32_T, what, err, errlen);
}

int wgpt_comm_sum_double(wgpt_comm *c, double *v, char *err, size_t errlen) {
    if (c->size == 1) return 0;
    double *all = malloc((size_t)c->size * sizeof *all);
    if (!all) return wgpt_errf(err, errlen, "out of host memory");
    MPI_Request req;
    int rc = MPI_Iallgather(v, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, c->world, &req);
    if (rc != MPI_SUCCESS) rc = mpi_fail_(c, rc, "a sum over the ranks", err, errlen);
    else rc = wait_(c, &req, "a sum over the ranks", err, errlen);
    if (rc == 0) {
        double s = all[0];
        for (int i = 1; i < c->size; i++) s += all[i];
        *v = s;
    }
    free(all);
    return rc;
}

int wgpt_comm_min_max_u64(wgpt_comm *c, uint64_t v, uint64_t *min, uint64_t *max, char *err, size_t errlen) {
    *min = *max = v;
    if (c->size == 1) return 0;
    uint64_t *all = malloc((size_t)c->size * sizeof *all);
    if (!all) return wgpt_errf(err, errlen, "out of host memory");
    MPI_Request req;
    int rc = MPI_Iallgather(&v, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, c->world, &req);
    if (rc != MPI_SUCCESS) rc = mpi_fail_(c, rc, "an agreement of the ranks", err, errlen);
    else rc = wait_(c, &req, "an agreement of the ranks", err, errlen);
    for (int i = 0; rc == 0 && i < c->size; i++) {
        if (all[i] < *min) *min = all[i];
        if (all[i] > *max) *max = all[i];
    }
    free(all);
    return rc;
}
