// adamw.c: reference AdamW step, gradient norm and clipping.
#include <math.h>

#include "ref/gpt2_ref.h"

void ref_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int t) {
    // Bias correction: m and v start at 0, so after t steps they are
    // underestimated by the factors (1 - beta^t).
    double c1 = 1.0 - pow(beta1, t), c2 = 1.0 - pow(beta2, t);
    for (size_t i = 0; i < n; i++) {
        double g = grads[i];
        double mi = beta1 * (double)m[i] + (1.0 - beta1) * g;
        double vi = beta2 * (double)v[i] + (1.0 - beta2) * g * g;
        m[i] = (float)mi;
        v[i] = (float)vi;
        double mhat = mi / c1, vhat = vi / c2;
        // Decoupled weight decay: applied to the parameter, not mixed into g.
        double p = params[i];
        params[i] = (float)(p - lr * (mhat / (sqrt(vhat) + eps) + weight_decay * p));
    }
}

double ref_l2_norm(const float *x, size_t n) {
    double acc = 0.0;
    for (size_t i = 0; i < n; i++) acc += (double)x[i] * x[i];
    return sqrt(acc);
}

float ref_gpt2_grad_norm(const ref_gpt2 *model) { return (float)ref_l2_norm(model->grads, model->num_params); }

float ref_gpt2_clip_grads(ref_gpt2 *model, float max_norm) {
    double norm = ref_l2_norm(model->grads, model->num_params);
    if (norm > max_norm) {
        double s = max_norm / norm;
        for (size_t i = 0; i < model->num_params; i++) model->grads[i] = (float)(model->grads[i] * s);
    }
    return (float)norm;
}
