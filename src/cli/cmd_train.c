// cmd_train.c: `wgpt train`: parses options and runs the training loop (train_run.h prints it).
#include "cli/commands.h"
#include "cli/data_files.h"
#include "cli/gpu_args.h"
#include "cli/options.h"
#include "cli/precision_arg.h"
#include "cli/signals.h"
#include "cli/train_run.h"

#include <stdio.h>

#include "dist/comm.h"

// Each numeric option gets the range the training layer allows (train_opts.c),
// so that the parser refuses a bad value up front and --help prints the range.
static int limits_(const wgpt_opt *opts, int n, wgpt_opt_range *ranges) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        const wgpt_train_limit *l = wgpt_train_limit_of(opts[i].name);
        if (l)
            ranges[k++] = (wgpt_opt_range){l->option, l->min, l->max,
                                           (l->open_min ? WGPT_OPT_GT_MIN : 0u) | (l->open_max ? WGPT_OPT_LT_MAX : 0u)};
    }
    return k;
}

int wgpt_cmd_train(int argc, char **argv) {
    wgpt_train_opts o;
    wgpt_train_defaults(&o);
    o.bpe_dir = wgpt_default_bpe_dir();
    const char *adapter = NULL, *precision_s = "auto";
    int quiet = 0;
    float comm_timeout = 600;
    const wgpt_opt opts[] = {
        {"data", WGPT_OPT_STR, &o.data, "token shards (a glob) made by `wgpt tokenize`"},
        {"out", WGPT_OPT_STR, &o.out_dir, "folder for latest.ckpt, metrics.jsonl, loss.svg"},
        {"resume", WGPT_OPT_STR, &o.resume, "checkpoint to resume, or 'none' (default: OUT/latest.ckpt if present)"},
        {"tokenizer", WGPT_OPT_STR, &o.tokenizer, "gpt2 or bytes (default: what the shards record, else bytes)"},
        {"bpe-dir", WGPT_OPT_STR, &o.bpe_dir, "folder with GPT-2's encoder.json and vocab.bpe"},
        {"recompute", WGPT_OPT_STR, &o.recompute, "none, gelu, all or auto: activations recomputed in the backward instead of kept (gelu: the GELU's output; all: and the LayerNorms'); auto: the fastest that fits"},
        {"precision", WGPT_OPT_STR, &precision_s, "auto, fp32, or f16: the matmuls on f16 copies with loss scaling; auto: f16 where the GPU has tensor cores (wgpt info)"},
        {"init-from", WGPT_OPT_STR, &o.init_from, "start from these weights (checkpoint, Hugging Face GPT-2, llm.c .bin)"},
        {"layers", WGPT_OPT_U32, &o.layers, "transformer blocks"},
        {"heads", WGPT_OPT_U32, &o.heads, "attention heads"},
        {"channels", WGPT_OPT_U32, &o.channels, "width (a multiple of heads)"},
        {"batch", WGPT_OPT_U32, &o.batch, "sequences per micro-batch"},
        {"seq", WGPT_OPT_U32, &o.seq, "tokens per sequence (the context)"},
        {"total-batch", WGPT_OPT_U32, &o.total_batch, "tokens per optimizer step, a multiple of batch*seq (0: one micro-batch)"},
        {"steps", WGPT_OPT_U32, &o.steps, "optimizer steps of the whole run (the schedule's length)"},
        {"stop-at", WGPT_OPT_U32, &o.stop_at, "stop after this step with a checkpoint (0: run to the end)"},
        {"lr", WGPT_OPT_F32, &o.lr, "peak learning rate"},
        {"min-lr-frac", WGPT_OPT_F32, &o.min_lr_frac, "final learning rate as a fraction of the peak"},
        {"warmup", WGPT_OPT_U32, &o.warmup, "linear warmup steps"},
        {"weight-decay", WGPT_OPT_F32, &o.weight_decay, "AdamW weight decay (2D weights only)"},
        {"beta1", WGPT_OPT_F32, &o.beta1, "AdamW beta1"},
        {"beta2", WGPT_OPT_F32, &o.beta2, "AdamW beta2"},
        {"grad-clip", WGPT_OPT_F32, &o.grad_clip, "clip the global gradient norm to this (0: off)"},
        {"val-every", WGPT_OPT_U32, &o.val_every, "validation loss every N steps (0: off)"},
        {"val-batches", WGPT_OPT_U32, &o.val_batches, "batches per validation"},
        {"val-fraction", WGPT_OPT_F32, &o.val_fraction, "with one shard: the share of it held out"},
        {"sample-every", WGPT_OPT_U32, &o.sample_every, "print a sample every N steps (0: off)"},
        {"sample-tokens", WGPT_OPT_U32, &o.sample_tokens, "tokens per sample"},
        {"temperature", WGPT_OPT_F32, &o.temperature, "sampling temperature"},
        {"top-k", WGPT_OPT_U32, &o.top_k, "sample among the k most likely tokens (0: all)"},
        {"checkpoint-every", WGPT_OPT_U32, &o.checkpoint_every, "checkpoint every N steps (also at the end)"},
        {"log-every", WGPT_OPT_U32, &o.log_every, "progress line every N steps when not on a terminal"},
        {"seed", WGPT_OPT_U64, &o.seed, "seed of the initialisation and the batch order"},
        {"spike-factor", WGPT_OPT_F32, &o.spike_factor, "skip a step whose gradient norm is this x the recent mean (0: off, else >= 1)"},
        {"max-skips", WGPT_OPT_U32, &o.max_skips, "stop after this many skipped steps in a row (0: never)"},
        {"inject-nan", WGPT_OPT_STR, &o.inject_nan, "testing: steps (e.g. 3,5) whose gradients get a NaN"},
        {"inject-device-loss", WGPT_OPT_U32, &o.inject_loss_at, "testing: lose the GPU device during this step"},
        {"adapter", WGPT_OPT_STR, &adapter, "GPU adapter: index or part of its name (see `wgpt info --list`)"},
        {"binding-limit", WGPT_OPT_COUNT, &o.gpu.max_binding, "testing: bind at most this many bytes at once (0: the device's limit)"},
        {"grad-buckets", WGPT_OPT_U32, &o.grad_buckets, "under mpirun: 1 sums the gradients layer by layer while the backward runs, 0 in one piece after it (the same result)"},
        {"comm-timeout", WGPT_OPT_F32, &comm_timeout, "under mpirun: seconds a rank waits for the others in one exchange before it fails"},
        {"quiet", WGPT_OPT_FLAG, &quiet, "print errors only"},
    };
    enum { NOPTS = sizeof opts / sizeof opts[0] };
    wgpt_opt_range ranges[NOPTS];
    int nranges = limits_(opts, NOPTS, ranges);
    char *pos[1];
    int npos;
    int rc = wgpt_opts_parse_ranged(argc, argv, opts, NOPTS, ranges, nranges,
                             "usage: wgpt train [options]\n\nTrains a GPT-2 model on token shards; resumes OUT/latest.ckpt "
                             "if it exists. Ctrl-C finishes the step, writes a checkpoint and stops; a second Ctrl-C "
                             "stops at once (losing the steps since the last checkpoint).",
                             pos, 0, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (wgpt_precision_arg("train", precision_s, &o.precision) < 0) return 2;
    if (!(comm_timeout > 0)) {
        fprintf(stderr, "wgpt train: --comm-timeout %g: must be above 0 seconds\n", (double)comm_timeout);
        return 2;
    }
    char err[1024];
    wgpt_comm_options co = {.timeout_s = comm_timeout};
    if (wgpt_cli_comm_env(&co, err, sizeof err) < 0 || wgpt_gpu_args_apply(&o.gpu, adapter, err, sizeof err) < 0) {
        fprintf(stderr, "wgpt train: %s\n", err);
        return 1;
    }
    wgpt_comm *comm = wgpt_comm_open(&co, err, sizeof err);  // one rank unless started by mpirun
    if (!comm) {
        fprintf(stderr, "wgpt train: %s\n", err);
        return 1;
    }
    o.comm = comm;
    o.stop = &wgpt_cli_stop;
    o.gpu.interrupt = &wgpt_cli_stop_now;
    wgpt_cli_signals_install("\nwgpt train: stopping after this step with a checkpoint (again: stop at once, "
                             "without one)\n");
    double kill_after_s;
    static char term_msg[512];
    if (wgpt_comm_launched(comm, &kill_after_s)) {  // the launcher's SIGTERM comes with a SIGKILL: say how soon, and what stops without one
        snprintf(term_msg, sizeof term_msg,
                 "\nwgpt train (rank %d): SIGTERM: stopping after this step with a checkpoint, if mpirun leaves the "
                 "time: after its own SIGTERM it kills the ranks %g s later (odls_base_sigkill_timeout; raise it "
                 "with mpirun --mca odls_base_sigkill_timeout 120). SIGUSR1 to mpirun stops without a kill\n",
                 wgpt_comm_rank(comm), kill_after_s);
        wgpt_cli_signals_term_msg(term_msg);
    }
    rc = wgpt_cli_train_run(&o, quiet || wgpt_comm_rank(comm) != 0);
    wgpt_cli_signals_restore();
    wgpt_comm_close(comm, rc != 0);  // a failed rank ends the job: the others must not wait for it
    return rc;
}
