// gpt2_views.h: shorthands of the files that build the model's ops
// (gpt2_fp32.c, gpt2_f16.c, gpt2_classifier.c, gpt2_update.c): a failed GPU
// call returns the GPU layer's message as the model's error; the views of
// parameter tensor t (fp32 master, gradient, f16 copy) of layer l, and of
// slice l of an activation (gpt2_internal.h). Include after gpt2_internal.h.
#ifndef WGPT_GPT2_VIEWS_H
#define WGPT_GPT2_VIEWS_H

#include "model/gpt2_internal.h"

#define GPU_OK(m, call)                                                         \
    do {                                                                        \
        if ((call) < 0) return wgpt_gpt2_fail_((m), "%s", wgpt_gpu_error((m)->g)); \
    } while (0)
#define P(t, l) wgpt_gpt2_mview_(m, (t), (l))
#define D(t, l) wgpt_gpt2_pview_(m, m->grads, (t), (l))
#define A(act, l) wgpt_gpt2_aview_(&m->act, (l))
#define P16(t, l) wgpt_gpt2_p16view_(m, (t), (l))

#endif
