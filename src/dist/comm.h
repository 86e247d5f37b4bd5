// comm.h: the ranks of a data-parallel run and the few collectives the
// trainer needs. Two implementations, chosen by the Makefile: comm_mpi.c
// (Open MPI; WGPT_MPI=1) and comm_single.c (one process). With MPI, a process
// not started by mpirun (options.launched_ranks 0: the CLI reads
// OMPI_COMM_WORLD_SIZE) is a single rank too and never initialises MPI.
//
// Every collective is nonblocking underneath, polled against a deadline
// (timeout_s): a rank that died or stopped answering makes the others fail
// with a message instead of hanging. Errors return -1 with err filled.
// Reductions have a fixed order (rank 0 + rank 1 + ... in that order), so a
// run is reproducible for a given number of ranks whatever MPI's own
// algorithms are: no MPI reduction operator is ever used on data.
// The layer knows nothing of GPUs or models.
#ifndef WGPT_DIST_COMM_H
#define WGPT_DIST_COMM_H

#include <stddef.h>
#include <stdint.h>

typedef struct wgpt_comm wgpt_comm;

// What the comm is told of its launch (the layer reads no environment: the
// CLI fills these from mpirun's variables, src/cli/gpu_env.c).
typedef struct wgpt_comm_options {
    double timeout_s;    // > 0: the longest wait of one collective; 0: 600 s
    int launched_ranks;  // 0: not started by a launcher; else the ranks mpirun started (OMPI_COMM_WORLD_SIZE)
    double kill_after_s; // launched: how long after its SIGTERM mpirun kills the ranks (odls_base_sigkill_timeout)
} wgpt_comm_options;

// Opens the run's communicator. A build without MPI refuses launched_ranks > 1.
wgpt_comm *wgpt_comm_open(const wgpt_comm_options *o, char *err, size_t errlen);
// failed: this rank is leaving on an error; with other ranks it aborts the
// whole job (MPI_Abort), so that none waits for this one. Frees c.
void wgpt_comm_close(wgpt_comm *c, int failed);

int wgpt_comm_rank(const wgpt_comm *c);        // 0 .. size-1
int wgpt_comm_size(const wgpt_comm *c);        // ranks of the run
int wgpt_comm_local_rank(const wgpt_comm *c);  // rank among the ranks of this host
int wgpt_comm_local_size(const wgpt_comm *c);
const char *wgpt_comm_kind(void);              // "mpi" or "single": what this build has
// 1 if a launcher (mpirun) started this process: its stdout is the
// launcher's pipe or pty, not the user's terminal, and a SIGTERM to the
// launcher reaches the ranks (after a SIGCONT) only *kill_after_s seconds
// before it kills them (options.kill_after_s: Open MPI's
// odls_base_sigkill_timeout, 1 by default; SIGUSR1 to mpirun is forwarded
// without a kill). 0 for one process.
int wgpt_comm_launched(const wgpt_comm *c, double *kill_after_s);

// data[0, n) of every rank summed into every rank's data, in rank order:
// each rank sums its 1/size share (an all-to-all of shares, then rank 0's +
// rank 1's + ...), then the shares are gathered (a reduce-scatter and an
// all-gather, as ring all-reduces move: 2 (size-1)/size of the data).
int wgpt_comm_sum_floats(wgpt_comm *c, float *data, size_t n, char *err, size_t errlen);
// The same sum in parts, so that several can be in flight while the caller
// works (the buckets of a gradient exchange, summed while the GPU computes
// the rest of the backward). begin starts the sum of data[0, n) (data must
// stay untouched until it is done); test advances every sum in flight and
// returns 1 once this one is done (data then holds the sum), 0 if not yet;
// wait blocks until it is done; free releases it, done or not. Every rank
// must begin the same sums (the same n) in the same order; they finish in
// that order, each bit for bit what wgpt_comm_sum_floats gives for its
// data. The deadline (timeout_s) applies to each phase of each sum from
// its start. -1 with err filled on an error.
typedef struct wgpt_comm_sum wgpt_comm_sum;
wgpt_comm_sum *wgpt_comm_sum_begin(wgpt_comm *c, float *data, size_t n, char *err, size_t errlen);
int wgpt_comm_sum_test(wgpt_comm *c, wgpt_comm_sum *s, char *err, size_t errlen);
int wgpt_comm_sum_wait(wgpt_comm *c, wgpt_comm_sum *s, char *err, size_t errlen);
void wgpt_comm_sum_free(wgpt_comm *c, wgpt_comm_sum *s);
// The same without the all-gather (a reduce-scatter: ZeRO-1 needs only its
// shard of the summed gradients): rank i's share is counts[i] floats, one
// after the other (counts of every rank summing to n, the same on every
// rank); when done this rank's share of data holds the sum (in rank order,
// as above), the rest is left as it was. Tested and waited like a sum.
wgpt_comm_sum *wgpt_comm_reduce_begin(wgpt_comm *c, float *data, size_t n, const uint64_t *counts, char *err,
                                      size_t errlen);
// Rank i's piece of an array, all[offs[i], offs[i] + counts[i]) (mine: this
// rank's piece, which may be that place in all), gathered into all on every
// rank (root < 0: an all-gather) or on rank root alone (all is not touched
// elsewhere and may be NULL there). ZeRO-1's updated parameters and, before
// a checkpoint, its moments.
int wgpt_comm_gather_floats(wgpt_comm *c, const float *mine, float *all, const uint64_t *offs, const uint64_t *counts,
                            int root, char *err, size_t errlen);
// The same for 32-bit words, moved bit for bit (ZeRO-1's f16 updates: f16
// pairs and fp32 values in one piece a rank).
int wgpt_comm_gather_words(wgpt_comm *c, const uint32_t *mine, uint32_t *all, const uint64_t *offs,
                           const uint64_t *counts, int root, char *err, size_t errlen);
// *v of every rank, summed in rank order.
int wgpt_comm_sum_double(wgpt_comm *c, double *v, char *err, size_t errlen);
// The smallest and largest *v over the ranks (an options hash, a stop flag).
int wgpt_comm_min_max_u64(wgpt_comm *c, uint64_t v, uint64_t *min, uint64_t *max, char *err, size_t errlen);
// Seconds this rank spent in collectives so far (waits included).
double wgpt_comm_seconds(const wgpt_comm *c);

#endif
