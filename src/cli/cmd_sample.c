// cmd_sample.c: `wgpt sample`: parses options and streams text from a checkpoint
// (train/load.h, model/gpt2_decode.h, train/generate_stream.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/data_files.h"
#include "cli/gpu_args.h"
#include "cli/options.h"
#include "cli/precision_arg.h"
#include "cli/signals.h"
#include "model/gpt2_decode.h"
#include "train/generate_stream.h"
#include "train/load.h"
#include "train/sampler.h"
#include "train/train_opts.h"  // defines: WGPT_TRAIN_MAX_SAMPLE_TOKENS
#include "util/clock.h"

#define MAX_STOPS 16

// Where each sample's bytes go: sample 0 straight to stdout (flushed per
// token); with --count > 1 the others are held and printed after it, in order.
typedef struct out_ {
    uint32_t count;
    char **buf;
    size_t *len, *cap;
    int failed;  // stdout refused a write (a closed pipe, a full disk)
    double first;  // the clock when sample 0's first bytes came (0: not yet)
} out_;

static void emit_(void *user, uint32_t sample, const char *bytes, size_t len) {
    out_ *o = user;
    if (sample == 0) {
        if (!o->first) o->first = wgpt_clock_s();
        if (fwrite(bytes, 1, len, stdout) != len || fflush(stdout) != 0) o->failed = 1;
        return;
    }
    if (o->len[sample] + len > o->cap[sample]) {
        size_t cap = (o->len[sample] + len) * 2 + 64;
        char *b = realloc(o->buf[sample], cap);
        if (!b) {
            o->failed = 1;
            return;
        }
        o->buf[sample] = b, o->cap[sample] = cap;
    }
    memcpy(o->buf[sample] + o->len[sample], bytes, len);
    o->len[sample] += len;
}

// --stop may be given several times: its values are taken out of argv here
// (the parser keeps one value an option). Returns how many, or -1 (printed).
static int take_stops_(int *argc, char **argv, const char **stops) {
    int n = 0, w = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "--") == 0) {
            while (i < *argc) argv[w++] = argv[i++];
            break;
        }
        if (strcmp(a, "--stop") == 0) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "wgpt sample: --stop needs a value (the text to stop at)\n");
                return -1;
            }
            v = argv[++i];
        } else if (strncmp(a, "--stop=", 7) == 0) {
            v = a + 7;
        } else {
            argv[w++] = argv[i];
            continue;
        }
        if (!v[0]) {
            fprintf(stderr, "wgpt sample: --stop '' is empty: give the text to stop at\n");
            return -1;
        }
        if (n == MAX_STOPS) {
            fprintf(stderr, "wgpt sample: more than %d --stop strings\n", MAX_STOPS);
            return -1;
        }
        stops[n++] = v;
    }
    *argc = w;
    return n;
}

// --verbose: where the time from the command's start to its first token went.
static void print_phases_(const wgpt_loaded *l, double t_start, double t_dec, double t_gen, double t_first,
                          size_t tokens, uint32_t count) {
    double end = wgpt_clock_s(), first = t_first ? t_first - t_gen : end - t_gen;
    fprintf(stderr,
            "wgpt sample: start-up (seconds): read checkpoint %.3f (beside it: GPU open %.3f, model create %.3f), "
            "tokenizer %.3f, weights upload %.3f, decoder create %.3f, first token (prefill + step) %.3f; to first "
            "token %.3f\n",
            l->read_s, l->gpu_s, l->model_s, l->tokenizer_s, l->params_s, t_dec, first,
            (t_first ? t_first : end) - t_start);
    if (count == 1 && tokens > 1 && t_first && end > t_first)
        fprintf(stderr, "wgpt sample: %zu tokens after the first in %.3f s (%.1f tokens/s)\n", tokens - 1,
                end - t_first, (double)(tokens - 1) / (end - t_first));
}

// After the stream: the other samples, then what ended it; the exit status.
static int finish_(out_ *out, const char *prompt, const wgpt_decoder *d, const wgpt_stream_stats *st, int rc,
                   const char *ckpt, const char *err) {
    uint32_t count = out->count;
    printf("\n");
    for (uint32_t c = 1; c < count; c++) {
        printf("--- sample %u ---\n", c + 1);
        fwrite(prompt, 1, strlen(prompt), stdout);
        if (out->len[c]) fwrite(out->buf[c], 1, out->len[c], stdout);
        printf("\n");
    }
    if (rc) fprintf(stderr, "wgpt sample: %s: %s\n", ckpt, err);
    if (fflush(stdout) != 0 || out->failed) {
        fprintf(stderr, "wgpt sample: writing the text to stdout failed\n");
        rc = 1;
    }
    if (rc == 0 && st->prompt_cut)
        fprintf(stderr, "wgpt sample: the prompt is longer than the context of %u tokens: only its last %zu were used\n",
                wgpt_decoder_context(d), st->prompt_tokens - 1);
    if (rc == 0 && st->full)
        fprintf(stderr, "wgpt sample: stopped at the full context of %u tokens (--on-full slide goes on)\n",
                wgpt_decoder_context(d));
    if (rc == 0 && st->interrupted) fprintf(stderr, "wgpt sample: interrupted after %zu tokens\n", st->tokens);
    return rc;
}

int wgpt_cmd_sample(int argc, char **argv) {
    const char *ckpt = "runs/demo/latest.ckpt", *prompt = "", *bpe_dir = wgpt_default_bpe_dir(), *adapter = NULL;
    const char *precision_s = "auto", *stop_help = NULL, *on_full_s = "slide";
    uint32_t tokens = 200, top_k = 40, count = 1;
    float temperature = 0.8f, top_p = 1.0f;
    uint64_t seed = 42;
    int verbose = 0;
    const char *stops[MAX_STOPS];
    int nstops = take_stops_(&argc, argv, stops);
    if (nstops < 0) return 2;
    const wgpt_opt opts[] = {
        {"checkpoint", WGPT_OPT_STR, &ckpt, "checkpoint written by `wgpt train`"},
        {"prompt", WGPT_OPT_STR, &prompt, "text to continue (default: start of a document)"},
        {"tokens", WGPT_OPT_U32, &tokens, "tokens to generate"},
        {"temperature", WGPT_OPT_F32, &temperature, "0: always the most likely token (greedy); higher: more varied"},
        {"top-k", WGPT_OPT_U32, &top_k, "sample among the k most likely tokens (0: all)"},
        {"top-p", WGPT_OPT_F32, &top_p, "sample among the most likely tokens whose probability sums to p (1: all)"},
        {"seed", WGPT_OPT_U64, &seed, "random seed: the same seed gives the same text"},
        {"stop", WGPT_OPT_STR, &stop_help, "end a sample where this text appears (not printed); repeatable"},
        {"count", WGPT_OPT_U32, &count, "number of samples, decoded together (the first printed as it comes)"},
        {"on-full", WGPT_OPT_STR, &on_full_s, "when a sample fills the context: slide (go on from its last half) or stop"},
        {"bpe-dir", WGPT_OPT_STR, &bpe_dir, "folder with GPT-2's encoder.json and vocab.bpe"},
        {"adapter", WGPT_OPT_STR, &adapter, "GPU adapter: index or part of its name"},
        {"precision", WGPT_OPT_STR, &precision_s, "auto, fp32 or f16: what the matmuls multiply (auto: f16 where the GPU has tensor cores)"},
        {"verbose", WGPT_OPT_FLAG, &verbose, "print the seconds each start-up phase took to stderr"},
    };
    const wgpt_opt_range ranges[] = {
        {"tokens", 1, WGPT_TRAIN_MAX_SAMPLE_TOKENS, 0},
        {"temperature", 0, 100, 0},
        {"top-k", 0, 65536, 0},
        {"top-p", 0, 1, WGPT_OPT_GT_MIN},
        {"count", 1, 256, 0},
    };
    char *pos[1];
    int npos;
    int rc = wgpt_opts_parse_ranged(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), ranges,
                                    (int)(sizeof ranges / sizeof ranges[0]),
                                    "usage: wgpt sample [options]\n\nGenerates text from a trained model, printing "
                                    "each token as it is decoded (KV cache). Ctrl-C ends it, keeping what was printed.",
                                    pos, 0, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    double t_start = wgpt_clock_s();
    wgpt_precision precision;
    if (wgpt_precision_arg("sample", precision_s, &precision) < 0) return 2;
    wgpt_on_full on_full;
    if (strcmp(on_full_s, "slide") == 0) on_full = WGPT_FULL_SLIDE;
    else if (strcmp(on_full_s, "stop") == 0) on_full = WGPT_FULL_STOP;
    else {
        fprintf(stderr, "wgpt sample: --on-full must be slide or stop, got '%s'\n", on_full_s);
        return 2;
    }
    wgpt_gpu_options gpu = {.adapter_index = -1};
    char err[4096];
    if (wgpt_gpu_args_apply(&gpu, adapter, err, sizeof err) < 0) {
        fprintf(stderr, "wgpt sample: %s\n", err);
        return 1;
    }
    // from here a Ctrl-C ends the text after the token being decoded (or before the first)
    wgpt_cli_signals_install("wgpt sample: stopping after this token (Ctrl-C again to quit at once)");
    wgpt_loaded l;
    // the model holds the weights; the decoder its own caches and rows (8: the f16 matmuls' multiple)
    if (wgpt_load_for_inference(&l, ckpt, bpe_dir, &gpu, 1, 8, precision, err, sizeof err) < 0) {
        fprintf(stderr, "wgpt sample: %s\n", err);
        wgpt_cli_signals_restore();
        return 1;
    }
    uint32_t *pids = NULL;
    size_t np = 0, pcap = 0;
    wgpt_decoder *d = NULL;
    out_ out = {.count = count};
    out.buf = calloc(count, sizeof *out.buf);
    out.len = calloc(count, sizeof *out.len);
    out.cap = calloc(count, sizeof *out.cap);
    if (!out.buf || !out.len || !out.cap || wgpt_tokenizer_encode(l.tok, prompt, strlen(prompt), &pids, &np, &pcap) < 0) {
        fprintf(stderr, "wgpt sample: out of memory encoding the prompt\n");
        rc = 1;
        goto done;
    }
    double t_dec = wgpt_clock_s();
    if (!(d = wgpt_decoder_create(l.model, count, err, sizeof err))) {
        fprintf(stderr, "wgpt sample: %s: %s\n", ckpt, err);
        rc = 1;
        goto done;
    }
    t_dec = wgpt_clock_s() - t_dec;
    wgpt_sampler s;
    wgpt_sampler_init(&s, temperature, top_k, seed);
    wgpt_sampler_set_top_p(&s, top_p);
    wgpt_stream_opts so = {.n_new = tokens, .stops = stops, .nstops = (size_t)nstops, .stop_at_eot = 1,
                           .on_full = on_full, .stop = &wgpt_cli_stop, .emit = emit_, .user = &out};
    wgpt_stream_stats st;
    if (count > 1) printf("--- sample 1 ---\n");
    fwrite(prompt, 1, strlen(prompt), stdout);
    fflush(stdout);
    double t_gen = wgpt_clock_s();
    rc = wgpt_generate_stream(d, l.tok, &s, pids, np, count, &so, &st, err, sizeof err) < 0 ? 1 : 0;
    rc = finish_(&out, prompt, d, &st, rc, ckpt, err);
    if (verbose) print_phases_(&l, t_start, t_dec, t_gen, out.first, st.tokens, count);
done:
    wgpt_cli_signals_restore();
    for (uint32_t c = 0; out.buf && c < count; c++) free(out.buf[c]);
    free(out.buf), free(out.len), free(out.cap);
    wgpt_decoder_free(d);
    free(pids);
    wgpt_loaded_free(&l);
    return rc;
}
