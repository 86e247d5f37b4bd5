// cmd_serve.c: `wgpt serve`: parses options, loads a checkpoint and serves it
// (serve/serve.h) until SIGINT/SIGTERM.
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/data_files.h"
#include "cli/gpu_args.h"
#include "cli/options.h"
#include "cli/precision_arg.h"
#include "cli/signals.h"
#include "serve/serve.h"
#include "train/load.h"

static void say_(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "wgpt serve: %s\n", line);
}

// The model's name in responses: the checkpoint's file name without ".ckpt"
// (runs/demo/latest.ckpt: "demo"; the folder names a run better than "latest").
static void model_name_(const char *ckpt, char *out, size_t n) {
    const char *slash = strrchr(ckpt, '/');
    const char *base = slash ? slash + 1 : ckpt;
    if (!strcmp(base, "latest.ckpt") && slash && slash > ckpt) {
        const char *p = slash;
        while (p > ckpt && p[-1] != '/') p--;
        snprintf(out, n, "%.*s", (int)(slash - p), p);
        return;
    }
    size_t l = strlen(base);
    if (l > 5 && !strcmp(base + l - 5, ".ckpt")) l -= 5;
    snprintf(out, n, "%.*s", (int)l, base);
}

int wgpt_cmd_serve(int argc, char **argv) {
    const char *ckpt = "runs/demo/latest.ckpt", *host = "127.0.0.1", *bpe_dir = wgpt_default_bpe_dir();
    const char *adapter = NULL, *precision_s = "auto", *name = NULL;
    uint32_t port = 8080, max_batch = 8, max_body = 1u << 20, max_conns = 64;
    const wgpt_opt opts[] = {
        {"checkpoint", WGPT_OPT_STR, &ckpt, "checkpoint written by `wgpt train`"},
        {"host", WGPT_OPT_STR, &host, "address to listen on (the default takes connections from this host only)"},
        {"port", WGPT_OPT_U32, &port, "TCP port (0: any free one, printed)"},
        {"max-batch", WGPT_OPT_U32, &max_batch, "completions decoded together; more wait for a free slot"},
        {"max-body", WGPT_OPT_U32, &max_body, "bytes a request body may hold (larger: 413)"},
        {"max-connections", WGPT_OPT_U32, &max_conns, "connections at once"},
        {"model-name", WGPT_OPT_STR, &name, "the model's name in responses (default: from the checkpoint's path)"},
        {"bpe-dir", WGPT_OPT_STR, &bpe_dir, "folder with GPT-2's encoder.json and vocab.bpe"},
        {"adapter", WGPT_OPT_STR, &adapter, "GPU adapter: index or part of its name"},
        {"precision", WGPT_OPT_STR, &precision_s, "auto, fp32 or f16: what the matmuls multiply (auto: f16 where the GPU has tensor cores)"},
    };
    const wgpt_opt_range ranges[] = {
        {"port", 0, 65535, 0},
        {"max-batch", 1, 256, 0},
        {"max-body", 1024, 64u << 20, 0},
        {"max-connections", 1, 4096, 0},
    };
    char *pos[1];
    int npos;
    int rc = wgpt_opts_parse_ranged(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), ranges,
                                    (int)(sizeof ranges / sizeof ranges[0]),
                                    "usage: wgpt serve [options]\n\nServes a trained model over HTTP: OpenAI's "
                                    "POST /v1/completions, GET /v1/models, GET /health.",
                                    pos, 0, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    wgpt_precision precision;
    if (wgpt_precision_arg("serve", precision_s, &precision) < 0) return 2;
    char model[256];
    if (name) snprintf(model, sizeof model, "%s", name);
    else model_name_(ckpt, model, sizeof model);
    wgpt_gpu_options gpu = {.adapter_index = -1};
    wgpt_loaded l;
    char err[4096];
    if (wgpt_gpu_args_apply(&gpu, adapter, err, sizeof err) < 0) {
        fprintf(stderr, "wgpt serve: %s\n", err);
        return 1;
    }
    if (wgpt_load_for_inference(&l, ckpt, bpe_dir, &gpu, 1, 0, precision, err, sizeof err) < 0) {
        fprintf(stderr, "wgpt serve: %s\n", err);
        return 1;
    }
    wgpt_cli_signals_install("wgpt serve: finishing the requests in flight (again: cancel them)\n");
    wgpt_serve_opts so = {.host = host, .port = (uint16_t)port, .max_batch = max_batch, .max_body = max_body,
                          .max_conns = max_conns, .model = model, .stop = &wgpt_cli_stop,
                          .stop_now = &wgpt_cli_stop_now, .say = say_};
    rc = wgpt_serve_run(&so, l.model, l.tok, err, sizeof err) < 0 ? 1 : 0;
    if (rc) fprintf(stderr, "wgpt serve: %s\n", err);
    wgpt_cli_signals_restore();
    wgpt_loaded_free(&l);
    return rc;
}
