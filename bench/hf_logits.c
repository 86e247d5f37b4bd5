// hf_logits.c: the logits wgpt computes for a batch of token ids from any
// model file it reads (a checkpoint, a Hugging Face GPT-2 folder or
// .safetensors, an llm.c .bin): bench/hf_roundtrip.py sets them beside
// transformers' on the same weights.
//   bench_hf_logits --model PATH --tokens FILE --batch B --seq T --out FILE [--adapter N|NAME]
// tokens: B*T int32 little-endian ids; out: (B, T, V) float32 logits. The
// forward needs targets: each position's next token (the last: token 0);
// the mean loss over all B*T positions is printed with the time.
#include <stdio.h>
#include <stdlib.h>

#include "cli/gpu_args.h"
#include "cli/options.h"
#include "model/gpt2.h"
#include "train/model_file.h"
#include "util/clock.h"

int main(int argc, char **argv) {
    const char *model = NULL, *tokens_path = NULL, *out_path = NULL, *adapter = NULL;
    uint32_t B = 1, T = 0;
    const wgpt_opt opts[] = {
        {"model", WGPT_OPT_STR, &model, "a checkpoint, Hugging Face GPT-2 folder or .safetensors, llm.c .bin"},
        {"tokens", WGPT_OPT_STR, &tokens_path, "B*T int32 token ids"},
        {"batch", WGPT_OPT_U32, &B, "sequences"},
        {"seq", WGPT_OPT_U32, &T, "tokens a sequence (0: the model's context)"},
        {"out", WGPT_OPT_STR, &out_path, "file for the (B, T, V) float32 logits"},
        {"adapter", WGPT_OPT_STR, &adapter, "GPU adapter: index or part of its name"},
    };
    char *pos[1];
    int npos, rc = wgpt_opts_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                                   "usage: bench_hf_logits --model PATH --tokens FILE --batch B --seq T --out FILE",
                                   pos, 0, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (!model || !tokens_path || !out_path) {
        fprintf(stderr, "bench_hf_logits: --model, --tokens and --out are needed\n");
        return 2;
    }
    char err[4096];
    double t0 = wgpt_clock_s();
    wgpt_weights w;
    if (wgpt_model_file_read(model, 1, &w, err, sizeof err) < 0) {
        fprintf(stderr, "bench_hf_logits: %s\n", err);
        return 1;
    }
    double t_read = wgpt_clock_s() - t0;
    if (!T) T = w.config.max_seq_len;
    size_t n = (size_t)B * T, V = w.config.vocab_size;
    int *tok = malloc(n * sizeof *tok), *tgt = malloc(n * sizeof *tgt);
    float *logits = malloc(n * V * sizeof *logits);
    FILE *f = fopen(tokens_path, "rb");
    if (!tok || !tgt || !logits || !f || fread(tok, sizeof *tok, n, f) != n) {
        fprintf(stderr, "bench_hf_logits: cannot read %zu int32 ids from %s\n", n, tokens_path);
        return 1;
    }
    fclose(f);
    for (size_t i = 0; i < n; i++) tgt[i] = i + 1 < n && (i + 1) % T ? tok[i + 1] : 0;
    wgpt_gpu_options gpu = {.adapter_index = -1};
    if (wgpt_gpu_args_apply(&gpu, adapter, err, sizeof err) < 0) {
        fprintf(stderr, "bench_hf_logits: %s\n", err);
        return 1;
    }
    wgpt_gpu *g = wgpt_gpu_open(&gpu, err, sizeof err);
    wgpt_gpt2 *m = g ? wgpt_gpt2_create_forward_only(g, &w.config, B, T, err, sizeof err) : NULL;
    float loss = 0;
    rc = 1;
    if (!m) fprintf(stderr, "bench_hf_logits: %s\n", err);
    else if (wgpt_gpt2_set_params(m, w.params) < 0 || wgpt_gpt2_forward(m, tok, tgt, &loss) < 0 ||
             wgpt_gpt2_read_logits(m, logits) < 0)
        fprintf(stderr, "bench_hf_logits: %s\n", wgpt_gpt2_error(m));
    else if (!(f = fopen(out_path, "wb")) || fwrite(logits, sizeof *logits, n * V, f) != n * V || fclose(f) != 0)
        fprintf(stderr, "bench_hf_logits: cannot write %s\n", out_path);
    else
        rc = 0;
    if (rc == 0)
        printf("bench_hf_logits: %s (%s) read in %.1f s; %u x %u tokens: loss %.6f; %.1f s in all\n", model, w.format,
               t_read, B, T, loss, wgpt_clock_s() - t0);
    wgpt_gpt2_free(m);
    wgpt_gpu_close(g);
    wgpt_weights_free(&w);
    free(tok), free(tgt), free(logits);
    return rc;
}
