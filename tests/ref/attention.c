// attention.c: reference causal self-attention and the softmax cross-entropy
// at the end of the model: the two layers with a softmax inside.
#include <math.h>
#include <string.h>

#include "ref/gpt2_ref.h"
#include "ref/ref_internal.h"

// ---------------------------------------------------------------------------
// Causal multi-head self-attention

void ref_attention_forward(float *out, float *preatt, float *att, const float *qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + (size_t)h * hs;  // (hs)
                size_t row = (((size_t)b * NH + h) * T + t) * T;
                float *pre = preatt + row;  // (T)
                float *a = att + row;       // (T)
                // scores against the keys at or before t; later ones are masked
                double maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs;
                    double dot = 0.0;
                    for (int i = 0; i < hs; i++) dot += (double)q[i] * k[i];
                    pre[t2] = (float)(dot * scale);
                    if (pre[t2] > maxv) maxv = pre[t2];
                }
                // softmax, shifted by the max so exp cannot overflow
                double sum = 0.0;
                for (int t2 = 0; t2 <= t; t2++) sum += exp(pre[t2] - maxv);
                for (int t2 = 0; t2 <= t; t2++) a[t2] = (float)(exp(pre[t2] - maxv) / sum);
                for (int t2 = t + 1; t2 < T; t2++) pre[t2] = a[t2] = 0.0f;
                // weighted sum of the values
                float *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int i = 0; i < hs; i++) {
                    double acc = 0.0;
                    for (int t2 = 0; t2 <= t; t2++)
                        acc += (double)a[t2] * qkv[((size_t)b * T + t2) * C3 + 2 * (size_t)C + (size_t)h * hs + i];
                    o[i] = (float)acc;
                }
            }
        }
    }
}

void ref_attention_backward(float *dqkv, float *dpreatt, float *datt, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH) {
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    double scale = 1.0 / sqrt((double)hs);
    // Per (b, h): dk and dv of position t2 collect from every query t >= t2, so
    // they are summed in double over the whole sequence and added once.
    double *dk = ref_scratch((size_t)T * hs);  // (T, hs)
    double *dv = ref_scratch((size_t)T * hs);  // (T, hs)
    double *dq = ref_scratch((size_t)hs);      // (hs)
    double *da = ref_scratch((size_t)T);       // (T) this query's d att
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            memset(dk, 0, sizeof *dk * (size_t)T * hs);
            memset(dv, 0, sizeof *dv * (size_t)T * hs);
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + (size_t)h * hs;
                const float *dy = dout + ((size_t)b * T + t) * C + (size_t)h * hs;  // (hs)
                size_t row = (((size_t)b * NH + h) * T + t) * T;
                const float *a = att + row;
                // out = sum_t2 att[t2] v[t2]: d att[t2] = dy.v[t2], d v[t2] += att[t2] dy
                double adot = 0.0;  // sum_t2 att[t2] * d att[t2], for the softmax
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((size_t)b * T + t2) * C3 + 2 * (size_t)C + (size_t)h * hs;
                    double dot = 0.0;
                    for (int i = 0; i < hs; i++) {
                        dot += (double)dy[i] * v[i];
                        dv[(size_t)t2 * hs + i] += (double)a[t2] * dy[i];
                    }
                    da[t2] = dot;
                    adot += a[t2] * dot;
                    datt[row + t2] += (float)dot;
                }
                // softmax: d pre[t2] = att[t2] * (d att[t2] - sum_j att[j] d att[j]);
                // pre = scale * q.k: dq += d pre * scale * k, dk += d pre * scale * q
                memset(dq, 0, sizeof *dq * (size_t)hs);
                for (int t2 = 0; t2 <= t; t2++) {
                    double dpre = a[t2] * (da[t2] - adot);
                    dpreatt[row + t2] += (float)dpre;
                    const float *k = qkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += dpre * scale * k[i];
                        dk[(size_t)t2 * hs + i] += dpre * scale * q[i];
                    }
                }
                float *dqp = dqkv + ((size_t)b * T + t) * C3 + (size_t)h * hs;
                for (int i = 0; i < hs; i++) dqp[i] += (float)dq[i];
            }
            for (int t2 = 0; t2 < T; t2++) {
                float *dkp = dqkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs;
                float *dvp = dkp + C;
                for (int i = 0; i < hs; i++) {
                    dkp[i] += (float)dk[(size_t)t2 * hs + i];
                    dvp[i] += (float)dv[(size_t)t2 * hs + i];
                }
            }
        }
    }
    free(dk);
    free(dv);
    free(dq);
    free(da);
}

// ---------------------------------------------------------------------------
// Softmax + cross-entropy over the (unpadded) vocabulary

void ref_softmax_crossentropy_forward(float *losses, float *probs, const float *logits, const int *targets, int B,
                                      int T, int V, int Vp) {
    for (size_t bt = 0; bt < (size_t)B * T; bt++) {
        const float *l = logits + bt * Vp;  // (Vp), only [0, V) is read
        float *p = probs + bt * Vp;         // (Vp)
        double maxv = -INFINITY;
        for (int i = 0; i < V; i++)
            if (l[i] > maxv) maxv = l[i];
        double sum = 0.0;
        for (int i = 0; i < V; i++) sum += exp(l[i] - maxv);
        for (int i = 0; i < V; i++) p[i] = (float)(exp(l[i] - maxv) / sum);
        for (int i = V; i < Vp; i++) p[i] = 0.0f;
        // -log softmax[target] as log-sum-exp minus the logit: finite even when
        // the probability underflows float.
        if (targets && losses) losses[bt] = (float)(log(sum) + maxv - l[targets[bt]]);
    }
}

void ref_crossentropy_softmax_backward(float *dlogits, const float *dlosses, const float *probs, const int *targets,
                                       int B, int T, int V, int Vp) {
    for (size_t bt = 0; bt < (size_t)B * T; bt++) {
        float *dl = dlogits + bt * Vp;
        const float *p = probs + bt * Vp;
        double dloss = dlosses[bt];
        int target = targets[bt];
        // d loss / d logit_i = softmax_i - [i == target]; padded columns get nothing
        for (int i = 0; i < V; i++) dl[i] += (float)(((double)p[i] - (i == target ? 1.0 : 0.0)) * dloss);
    }
}
