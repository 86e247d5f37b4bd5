// cmd_info.c: `wgpt info`: adapters, the opened device, limits and features.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/gpu_args.h"
#include "cli/options.h"
#include "gpu/gpu.h"
#include "model/gpt2.h"  // defines: wgpt_precision_auto
#include "train/checkpoint.h"
#include "train/model_file.h"

static const char USAGE_[] =
    "usage: wgpt info [--list] [--check] [--adapter N|NAME] [CHECKPOINT]\n\n"
    "Describes the GPU adapter wgpt opens (its limits and features), or, given a\n"
    "CHECKPOINT, that checkpoint or imported model file (Hugging Face GPT-2 folder or\n"
    "safetensors, llm.c .bin): model, step, tokenizer; the whole file is read and checked\n"
    "(a checkpoint's checksums too): a damaged one exits 1.";

int wgpt_cmd_info(int argc, char **argv) {
    int list = 0, check = 0;
    const char *adapter = NULL;
    const wgpt_opt opts[] = {
        {"list", WGPT_OPT_FLAG, &list, "list every adapter Dawn offers, with its index"},
        {"check", WGPT_OPT_FLAG, &check, "exit 0 if a real GPU adapter exists (not Dawn's Null backend), else 1"},
        {"adapter", WGPT_OPT_STR, &adapter, "open adapter N of --list, or the first whose name contains NAME"},
    };
    char *pos[1];
    int npos = 0;
    int prc = wgpt_opts_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), USAGE_, pos, 1, &npos);
    if (prc) return prc == 1 ? 0 : 2;
    const char *ckpt = npos ? pos[0] : NULL;
    wgpt_gpu_options opt = {.adapter_index = -1};
    char err[2048], line[512];
    if (ckpt) {
        wgpt_weights ck;  // the header first: a wgpt checkpoint, Hugging Face GPT-2 or llm.c file
        if (wgpt_model_file_read(ckpt, 0, &ck, err, sizeof err) < 0) {
            fprintf(stderr, "wgpt info: %s\n", err);
            return 1;
        }
        // then the body, whole: checksums (checkpoints), sizes, shapes and values
        int is_ckpt = strcmp(ck.format, "wgpt checkpoint") == 0;
        wgpt_weights body;
        if (is_ckpt ? wgpt_checkpoint_verify(ckpt, err, sizeof err) < 0
                    : wgpt_model_file_read(ckpt, 1, &body, err, sizeof err) < 0) {
            fprintf(stderr, "wgpt info: damaged: %s\n", err);
            wgpt_weights_free(&ck);
            return 1;
        }
        if (!is_ckpt) wgpt_weights_free(&body);
        const wgpt_gpt2_config *c = &ck.config;
        printf("%s: %s, step %llu, tokenizer %s\n", ckpt, ck.format, (unsigned long long)ck.step,
               ck.tokenizer[0] ? ck.tokenizer : "unknown (the vocabulary fits neither gpt2 nor bytes)");
        printf("model: %u layers, %u heads, %u channels, context %u, vocabulary %u (padded %u): %zu parameters\n",
               c->num_layers, c->num_heads, c->channels, c->max_seq_len, c->vocab_size, c->padded_vocab_size,
               wgpt_gpt2_num_params(c));
        printf("body: %s\n", is_ckpt ? "read whole, checksums verified, every value finite"
                                      : "read whole (the format has no checksums): every tensor's shape checked, "
                                        "every value finite");
        wgpt_weights_free(&ck);
        return 0;
    }
    if (wgpt_gpu_args_apply(&opt, adapter, err, sizeof err) < 0) {
        fprintf(stderr, "wgpt info: %s\n", err);
        return 1;
    }
    if (list || check) {
        wgpt_gpu_info infos[8];
        int n = wgpt_gpu_list(&opt, infos, 8, err, sizeof err);
        if (n < 0) {
            fprintf(stderr, "wgpt info: %s\n", err);
            return 1;
        }
        for (int i = 0; i < n && !check; i++) {
            wgpt_gpu_describe(&infos[i], line, sizeof line);
            printf("[%d] %s\n", i, line);
        }
        if (check) printf("ok: %s (%s)\n", infos[0].name, infos[0].backend);
        return 0;
    }
    wgpt_gpu *g = wgpt_gpu_open(&opt, err, sizeof err);
    if (!g) {
        fprintf(stderr, "wgpt info: %s\n", err);
        return 1;
    }
    const wgpt_gpu_info *in = wgpt_gpu_get_info(g);
    wgpt_gpu_describe(in, line, sizeof line);
    printf("adapter: %s\n", line);
    printf("vendor: %s (0x%04x), device 0x%04x, driver: %s\n", in->vendor, in->vendor_id, in->device_id, in->driver);
    printf("limits: storage binding %llu MiB, buffer %llu MiB, workgroup storage %u KiB, "
           "%u invocations/workgroup, %u workgroups/dimension, storage offset alignment %u\n",
           (unsigned long long)(in->max_storage_binding >> 20), (unsigned long long)(in->max_buffer >> 20),
           in->max_workgroup_storage >> 10, in->max_invocations, in->max_workgroups_per_dim,
           in->storage_offset_align);
    printf("dawn: %s\n", wgpt_gpu_dawn());
    printf("features: f16 %s, subgroup-size-control %s, subgroup matrices %s, timestamps %s\n",
           in->has_f16 ? "yes" : "no", in->has_subgroup_size_control ? "yes" : "no",
           in->sgm_emulated ? "emulated (WGPT_SGM_EMULATE: subgroup broadcasts, for tests)"
           : in->has_subgroup_matrix ? "yes" : "no", in->has_timestamps ? "yes" : "no");
    for (int i = 0; i < in->n_matrix_configs; i++) {
        const wgpt_matrix_config *c = &in->matrix_configs[i];
        printf("subgroup matrix %d: %s x %s -> %s, M %u x N %u x K %u, subgroup %u-%u%s\n", i,
               wgpt_matrix_type_name(c->input), wgpt_matrix_type_name(c->input), wgpt_matrix_type_name(c->result),
               c->m, c->n, c->k, c->sg_min, c->sg_max, i == in->sgm_config ? " (wgpt's f16 matmuls)" : "");
    }
    printf("precision auto: %s\n", wgpt_precision_auto(in) == WGPT_PRECISION_F16
                                         ? "f16 (the matmuls on subgroup matrices, with loss scaling)"
                                         : in->has_f16 ? "fp32 (f16 without subgroup matrices is slower than fp32)"
                                                       : "fp32 (no shader-f16)");
    if (in->compute_units) {  // src/gpu/chips.c, or WGPT_COMPUTE_UNITS
        printf("compute units: %u", in->compute_units);
        if (in->fp32_peak_tflops > 0) printf(", fp32 peak %.1f TFLOP/s", in->fp32_peak_tflops);
        if (in->f16_peak_tflops > 0) printf(", f16 tensor peak %.1f TFLOP/s (dense)", in->f16_peak_tflops);
        printf("\n");
    }
    wgpt_gpu_close(g);
    return 0;
}
