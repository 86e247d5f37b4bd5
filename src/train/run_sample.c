// run_sample.c: a sample of text during training, for the user.
#include "train/run_internal.h"

#include <stdlib.h>

#include "train/generate.h"

// A sample for the user; a failure is a warning: the run goes on.
void wgpt_run_print_sample_(run_ *r, const char *tag) {
    char err[1024];
    if (!r->sampler_model) {
        r->sampler_model = wgpt_gpt2_create_inference(r->model, 1, r->o->seq, err, sizeof err);
        if (!r->sampler_model) {
            wgpt_run_say_(r, WARN_, "sampling: %s", err);
            return;
        }
    }
    char *text = wgpt_generate_text(r->sampler_model, r->o->seq, r->tok, &r->sampler, NULL, 0, r->o->sample_tokens,
                                    0, err, sizeof err);
    if (!text) {
        wgpt_run_say_(r, WARN_, "sampling: %s", err);
        return;
    }
    wgpt_run_say_(r, INFO_, "\n--- sample %s ---\n%s\n---\n", tag, text);
    free(text);
}
