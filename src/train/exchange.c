// exchange.c: a multi-rank run's gradient exchange: the gradients summed over
// the ranks (in one piece, or bucket by bucket while the backward computes),
// ZeRO-1's sharded update and the gathers of parameters and optimizer state.
#include "train/run_internal.h"

#include <stdlib.h>
#include <time.h>

#include "util/clock.h"
#include "util/err.h"

// Several ranks: each holds 1/N of the moments and, in f16, of the fp32
// matmul weights (ZeRO-1): the fp32 parameters and both moments are gathered
// to rank 0 in the padded layout and returned there in the reference layout
// (every rank's true fp32 masters: the f16 copies are not what a checkpoint
// holds). Every rank must call it at the same step.
int wgpt_run_gather_state_(run_ *r, float *params, float *adam_m, float *adam_v) {
    uint64_t P = wgpt_gpt2_padded_params(r->model), off = r->shard_off[r->rank], n = r->shard_n[r->rank];
    uint64_t each = r->rank == 0 ? P : n;  // rank 0 receives the whole padded arrays; the others send their shard
    char err[1024];
    float *pp = malloc(each * sizeof *pp), *pm = malloc(each * sizeof *pm), *pv = malloc(each * sizeof *pv);
    int rc = -1;
    if (!pp || !pm || !pv) {
        wgpt_run_fail_(r, "out of host memory gathering the parameters and optimizer state");
    } else {
        uint64_t at = r->rank == 0 ? off : 0;
        if (wgpt_gpt2_get_param_shard(r->model, pp + at) < 0 ||
            wgpt_gpt2_get_adam_shard(r->model, pm + at, pv + at) < 0)
            wgpt_run_fail_(r, "reading the parameters and optimizer state for a checkpoint: %s",
                           wgpt_gpt2_error(r->model));
        else if (wgpt_comm_gather_floats(r->comm, pp + at, pp, r->shard_off, r->shard_n, 0, err, sizeof err) < 0 ||
                 wgpt_comm_gather_floats(r->comm, pm + at, pm, r->shard_off, r->shard_n, 0, err, sizeof err) < 0 ||
                 wgpt_comm_gather_floats(r->comm, pv + at, pv, r->shard_off, r->shard_n, 0, err, sizeof err) < 0)
            wgpt_run_fail_(r, "gathering the parameters and optimizer state for a checkpoint: %s", err);
        else {
            if (r->rank == 0)
                wgpt_gpt2_unpad(r->model, pp, params), wgpt_gpt2_unpad(r->model, pm, adam_m),
                    wgpt_gpt2_unpad(r->model, pv, adam_v);
            rc = 0;
        }
    }
    free(pp), free(pm), free(pv);
    return rc;
}

// The exchange's pieces: the whole gradient (reference layout) and with
// --grad-buckets 1 one bucket per segment, at its place in r->grads, each
// cut into the ranks' optimizer shards (a reduce-scatter gives each rank the
// sum of its own shard: ZeRO-1 reads no other).
int wgpt_run_open_buckets_(run_ *r) {
    uint32_t nb = r->o->grad_buckets ? wgpt_gpt2_grad_segments(r->model) : 0;
    size_t N = (size_t)r->nranks;
    r->counts = calloc((1 + (size_t)nb) * N, sizeof *r->counts);
    r->buckets = nb ? calloc(nb, sizeof *r->buckets) : NULL;
    if (!r->counts || (nb && !r->buckets)) return wgpt_run_fail_(r, "out of host memory for the gradient buckets");
    wgpt_gpt2_shard_counts(r->model, -1, r->counts);
    r->nbuckets = nb;
    float *at = r->grads;
    for (uint32_t i = 0; i < nb; i++) {
        r->buckets[i].host = at;
        r->buckets[i].counts = r->counts + (1 + i) * N;
        wgpt_gpt2_shard_counts(r->model, (int)i, r->buckets[i].counts);
        at += wgpt_gpt2_segment_floats(r->model, i);
    }
    return 0;
}

// The gradients (in one piece unless bucketed: then they are summed) and the
// loss summed over the ranks, through host memory (dist/comm.h: a fixed
// order), back on the GPU before the update.
int wgpt_run_sum_over_ranks_(run_ *r, step_ *s) {
    char err[1024], kept[4608];
    size_t np = wgpt_gpt2_num_params(&r->cfg);
    if (!r->buckets) {
        if (wgpt_gpt2_get_grads(r->model, r->grads) < 0)
            return wgpt_run_fail_(r, "step %u: %s\n%s", s->t, wgpt_gpt2_error(r->model),
                                  wgpt_run_kept_(r, kept, sizeof kept));
        double t0 = wgpt_clock_s();
        wgpt_comm_sum *sum = wgpt_comm_reduce_begin(r->comm, r->grads, np, r->counts, err, sizeof err);
        int rc = sum ? wgpt_comm_sum_wait(r->comm, sum, err, sizeof err) : -1;
        wgpt_comm_sum_free(r->comm, sum);
        if (rc < 0) return wgpt_run_fail_(r, "step %u: %s\n%s", s->t, err, wgpt_run_kept_(r, kept, sizeof kept));
        s->exchange_s = wgpt_clock_s() - t0;  // after the backward: nothing overlaps
        if (wgpt_gpt2_set_grads(r->model, r->grads) < 0)
            return wgpt_run_fail_(r, "step %u: %s\n%s", s->t, wgpt_gpt2_error(r->model),
                                  wgpt_run_kept_(r, kept, sizeof kept));
    }
    if (wgpt_comm_sum_double(r->comm, &s->loss, err, sizeof err) < 0)
        return wgpt_run_fail_(r, "step %u: %s\n%s", s->t, err, wgpt_run_kept_(r, kept, sizeof kept));
    s->comm_seconds = wgpt_comm_seconds(r->comm) - s->comm0;
    r->exchange_s += s->exchange_s, r->overlap_s += s->overlap_s;
    return 0;
}

// The bucketed exchange's clock: time with a sum in flight counts as
// overlapped until the backward's last segment has landed, exposed after.
static void exchange_tick_(step_ *s) {
    double now = wgpt_clock_s();
    if (s->inflight) {
        s->exchange_s += now - s->mark;
        if (!s->gpu_done) s->overlap_s += now - s->mark;
    }
    s->mark = now;
}

// Bucket i's gradients have landed (wait: block until they do): they are
// copied out and their sum begins. Returns 1 if it began, 0 if not yet, -1.
static int bucket_begin_(run_ *r, step_ *s, uint32_t i, int wait, char *err, size_t errlen) {
    bucket_ *b = &r->buckets[i];
    int ready = wait ? 1 : wgpt_gpt2_segment_ready(r->model, i);
    if (ready <= 0) return ready < 0 ? wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(r->model)) : 0;
    if (wgpt_gpt2_segment_take(r->model, i, b->host) < 0)
        return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(r->model));
    exchange_tick_(s);
    if (i + 1 == r->nbuckets) s->gpu_done = 1;  // the backward has ended
    b->sum = wgpt_comm_reduce_begin(r->comm, b->host, wgpt_gpt2_segment_floats(r->model, i), b->counts, err, errlen);
    if (!b->sum) return -1;
    b->state = BUCKET_SUMMING;
    s->inflight++;
    return 1;
}

// Advances the buckets of the first `submitted` segments: the landed ones
// begin their sums (in segment order, the same on every rank), the summed
// ones go back to the GPU. wait: block for the next landing. 0 or -1.
static int buckets_advance_(run_ *r, step_ *s, uint32_t submitted, int wait, char *err, size_t errlen) {
    int beginning = 1;  // every earlier bucket's sum has begun
    for (uint32_t i = 0; i < submitted; i++) {
        bucket_ *b = &r->buckets[i];
        if (b->state == BUCKET_ON_GPU && beginning) {
            int rc = bucket_begin_(r, s, i, wait, err, errlen);
            if (rc < 0) return -1;
            wait = 0;
            if (rc == 0) beginning = 0;
        }
        if (b->state != BUCKET_SUMMING) continue;
        int done = wgpt_comm_sum_test(r->comm, b->sum, err, errlen);
        if (done < 0) return -1;
        if (!done) continue;
        exchange_tick_(s);
        s->inflight--;
        wgpt_comm_sum_free(r->comm, b->sum);
        b->sum = NULL;
        b->state = BUCKET_DONE;
        if (wgpt_gpt2_segment_put(r->model, i, b->host) < 0)
            return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(r->model));
    }
    return 0;
}

static int buckets_done_(const run_ *r) {
    for (uint32_t i = 0; i < r->nbuckets; i++)
        if (r->buckets[i].state != BUCKET_DONE) return 0;
    return 1;
}

// A step's last micro-batch with buckets: its backward segment by segment,
// each bucket's sum over the ranks begun as soon as its gradients land and
// written back once summed, while the GPU computes the next segments.
// Returns 0, or -1 with err filled.
int wgpt_run_accumulate_bucketed_(run_ *r, step_ *s, int first, float *loss, char *err, size_t errlen) {
    wgpt_gpt2 *m = r->model;
    for (uint32_t i = 0; i < r->nbuckets; i++) r->buckets[i].state = BUCKET_ON_GPU;
    s->inflight = s->gpu_done = 0;
    s->mark = wgpt_clock_s();
    if (wgpt_gpt2_accumulate_begin(m, r->inputs, r->targets, first) < 0)
        return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(m));
    for (uint32_t i = 0; i < r->nbuckets; i++) {
        if (wgpt_gpt2_backward_segment(m, i) < 0) return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(m));
        if (buckets_advance_(r, s, i + 1, 0, err, errlen) < 0) return -1;
    }
    while (!buckets_done_(r)) {
        // Nothing in flight: only the GPU to wait for (with its timeout).
        if (buckets_advance_(r, s, r->nbuckets, s->inflight == 0, err, errlen) < 0) return -1;
        struct timespec ts = {0, 100000};
        if (s->inflight) nanosleep(&ts, NULL);  // off the cores the GPU (lavapipe) computes on
    }
    if (wgpt_gpt2_accumulate_end(m, loss) < 0) return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(m));
    return 0;
}

// ZeRO-1's update: each rank holds the sum of its shard's gradients only;
// the global norm is the sum of the shards' squares in rank order, and a
// NaN/Inf anywhere skips the step on every rank.
int wgpt_run_update_sharded_(run_ *r, const wgpt_adamw_config *ac, step_ *s, int global) {
    char err[1024], kept[4608];
    double sumsq, c0 = wgpt_comm_seconds(r->comm);
    int bad;
    uint64_t lo, hi;
    if (wgpt_gpt2_update_shard_begin(r->model, ac, global, &sumsq, &bad) < 0)
        return wgpt_run_fail_(r, "step %u: %s\n%s", s->t, wgpt_gpt2_error(r->model),
                              wgpt_run_kept_(r, kept, sizeof kept));
    if (wgpt_comm_sum_double(r->comm, &sumsq, err, sizeof err) < 0 ||
        wgpt_comm_min_max_u64(r->comm, (uint64_t)bad, &lo, &hi, err, sizeof err) < 0)
        return wgpt_run_fail_(r, "step %u: %s\n%s", s->t, err, wgpt_run_kept_(r, kept, sizeof kept));
    s->comm_seconds += wgpt_comm_seconds(r->comm) - c0;
    if (wgpt_gpt2_update_shard_end(r->model, ac, (int)s->t, sumsq, hi != 0, &s->res) < 0)
        return wgpt_run_fail_(r, "step %u: %s\nThe GPU state cannot be trusted after this; %s", s->t,
                              wgpt_gpt2_error(r->model), wgpt_run_kept_(r, kept, sizeof kept));
    return 0;
}

// ZeRO-1: each rank updated its shard of the parameters; the updates are
// gathered in rank order and every rank takes them all (a skipped step
// gathers the unchanged ones). In f16 an update is the shard's f16 copy and
// the fp32 values of the tensors every rank keeps whole (model/gpt2.h).
int wgpt_run_gather_params_(run_ *r, step_ *s) {
    char err[1024], kept[4608];
    double c0 = wgpt_comm_seconds(r->comm);
    uint32_t *mine = r->updates + r->update_off[r->rank];
    if (wgpt_gpt2_get_shard_update(r->model, mine) < 0)
        return wgpt_run_fail_(r, "step %u: %s\n%s", s->t, wgpt_gpt2_error(r->model),
                              wgpt_run_kept_(r, kept, sizeof kept));
    if (wgpt_comm_gather_words(r->comm, mine, r->updates, r->update_off, r->update_n, -1, err, sizeof err) < 0)
        return wgpt_run_fail_(r, "step %u: %s\n%s", s->t, err, wgpt_run_kept_(r, kept, sizeof kept));
    if (wgpt_gpt2_set_shard_updates(r->model, r->updates) < 0)
        return wgpt_run_fail_(r, "step %u: %s\n%s", s->t, wgpt_gpt2_error(r->model),
                              wgpt_run_kept_(r, kept, sizeof kept));
    s->comm_seconds += wgpt_comm_seconds(r->comm) - c0;
    return 0;
}

// The summary of the gradient exchange over the run's steps (rank 0 says it).
void wgpt_run_say_exchange_(const run_ *r, uint32_t steps) {
    double ms = r->exchange_s * 1e3 / steps, pct = r->exchange_s > 0 ? 100 * r->overlap_s / r->exchange_s : 0;
    if (r->buckets)
        wgpt_run_say_(r, INFO_,
                      "gradient exchange: %u buckets a step, %.2f ms a step in flight, %.0f%% of it while the "
                      "backward computed (overlap)\n",
                      r->nbuckets, ms, pct);
    else
        wgpt_run_say_(r, INFO_, "gradient exchange: one sum after the backward (--grad-buckets 0), %.2f ms a step, 0%% "
                      "overlap\n", ms);
}
