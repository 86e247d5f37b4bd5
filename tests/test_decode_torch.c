// test_decode_torch.c: wgpt's KV-cache greedy decoding beside plain
// PyTorch's (tests/torch_decode.py: Debian's python3-torch on the CPU, a KV
// cache written out by hand, no transformers) on a model that `wgpt export
// --format hf` wrote: the first 32 generated tokens must be the same.
// The checkpoint: 2 layers, 2 heads, C = 32, context 64, the bytes
// vocabulary (256), weights uniform with std 0.1 (large enough that the top
// two logits are seldom closer than what f32 sums in another order than
// PyTorch's move them, ~1e-6), wpe std 0.6 so that the text does not loop
// on one token (at least 8 distinct ones are required).
#include "test_util.h"

#include "model/gpt2.h"
#include "model/gpt2_decode.h"
#include "train/checkpoint.h"
#include "train/export.h"

static char dir_[] = "/tmp/wgpt_decode_torch_XXXXXX";

// WGPT_PYTHON, else the python3 on the PATH if it has torch, else Debian's (as test_torch_parity.c).
static const char *python_(void) {
    const char *p = getenv("WGPT_PYTHON");
    if (p && *p) return p;
    if (system("python3 -c 'import torch' >/dev/null 2>&1") == 0) return "python3";
    return "/usr/bin/python3";
}

static int group_teardown(void **state) {
    (void)state;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir_);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_greedy_matches_torch(void **state) {
    (void)state;
    assert_non_null(mkdtemp(dir_));
    wgpt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ck.config = (wgpt_gpt2_config){.max_seq_len = 64, .vocab_size = 256, .padded_vocab_size = 256,
                                   .num_layers = 2, .num_heads = 2, .channels = 32};
    snprintf(ck.tokenizer, sizeof ck.tokenizer, "bytes");
    size_t sizes[WGPT_GPT2_NUM_TENSORS], n = wgpt_gpt2_num_params(&ck.config), off = 0;
    wgpt_gpt2_param_sizes(&ck.config, sizes);
    ck.params = malloc(n * sizeof *ck.params);
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
        int lnw = t == 2 || t == 8 || t == 14, lnb = t == 3 || t == 9 || t == 15;
        for (size_t i = 0; i < sizes[t]; i++)
            ck.params[off + i] = lnw ? 1 + tu_randf(-0.1f, 0.1f)
                                 : lnb ? tu_randf(-0.05f, 0.05f)
                                 : t == 1 ? tu_randf(-1, 1)  // wpe: each position moves the logits, no loop on one token
                                          : tu_randf(-0.17f, 0.17f);
        off += sizes[t];
    }
    char path[800], hf[800], err[1024];
    snprintf(path, sizeof path, "%s/m.ckpt", dir_);
    snprintf(hf, sizeof hf, "%s/hf", dir_);
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) < 0) fail_msg("%s", err);
    if (wgpt_export(path, "hf", hf, 0, err, sizeof err) < 0) fail_msg("export: %s", err);

    enum { NP = 5, N = 32 };
    const int32_t prompt[NP] = {10, 200, 3, 77, 150};
    wgpt_gpu *g = tu_gpu_open(NULL);
    wgpt_gpt2 *m = wgpt_gpt2_create_forward_only(g, &ck.config, 1, 8, err, sizeof err);
    if (!m) fail_msg("%s", err);
    if (wgpt_gpt2_set_params(m, ck.params) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    wgpt_decoder *d = wgpt_decoder_create(m, 1, err, sizeof err);
    if (!d) fail_msg("%s", err);
    float logits[256];
    int32_t got[N];
    uint32_t slot = 0;
    if (wgpt_decoder_prefill(d, 0, prompt, NP, logits, err, sizeof err) < 0) fail_msg("%s", err);
    for (int k = 0; k < N; k++) {
        int32_t b = 0;
        for (int i = 1; i < 256; i++)
            if (logits[i] > logits[b]) b = i;
        got[k] = b;
        if (k + 1 < N && wgpt_decoder_step(d, &slot, &b, 1, logits, err, sizeof err) < 0) fail_msg("%s", err);
    }
    wgpt_decoder_free(d);
    wgpt_gpt2_free(m);
    free(ck.params);

    char cmd[2400], line[4096];
    snprintf(cmd, sizeof cmd, "%s %s/tests/torch_decode.py --model %s --prompt 10,200,3,77,150 --tokens %d", python_(),
             WGPT_SOURCE_DIR, hf, N);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t k = fread(line, 1, sizeof line - 1, f);
    line[k] = 0;
    if (pclose(f) != 0)
        fail_msg("`%s` failed: PyTorch is needed (scripts/setup.sh installs python3-torch; WGPT_PYTHON picks "
                 "another python)", cmd);
    char *p = line;
    for (int i = 0; i < N; i++) {
        char *end;
        long want = strtol(p, &end, 10);
        if (end == p) fail_msg("PyTorch printed %d ids, not %d: %s", i, N, line);
        if (want != got[i]) fail_msg("token %d: wgpt %d, PyTorch %ld (PyTorch: %s)", i, got[i], want, line);
        p = end;
    }
    int distinct = 0;  // a model stuck on one token would prove little
    for (int i = 0; i < N; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= got[j] == got[i];
        distinct += !seen;
    }
    assert_true(distinct >= 8);
    printf("greedy: the first %d tokens of wgpt (KV cache) and PyTorch agree: %s", N, line);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_matches_torch),
    };
    return cmocka_run_group_tests_name("decode_torch", tests, NULL, group_teardown);
}
