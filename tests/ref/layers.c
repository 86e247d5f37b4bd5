// layers.c: reference forward and backward of the position-wise layers:
// encoder, layernorm, matmul, GELU, residual.
#include <math.h>
#include <string.h>

#include "ref/gpt2_ref.h"
#include "ref/ref_internal.h"

// ---------------------------------------------------------------------------
// Encoder: token embedding + position embedding

void ref_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            size_t bt = (size_t)b * T + t;
            float *o = out + bt * C;                      // (C)
            const float *we = wte + (size_t)tokens[bt] * C;  // (C)
            const float *pe = wpe + (size_t)t * C;        // (C)
            for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
        }
    }
}

void ref_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C) {
    // wte rows: a token id may repeat anywhere in the batch, so add per position.
    for (size_t bt = 0; bt < (size_t)B * T; bt++) {
        float *dwe = dwte + (size_t)tokens[bt] * C;
        const float *d = dout + bt * C;
        for (int c = 0; c < C; c++) dwe[c] += d[c];
    }
    // wpe row t collects the same position of every sequence.
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < C; c++) {
            double acc = 0.0;
            for (int b = 0; b < B; b++) acc += dout[((size_t)b * T + t) * C + c];
            dwpe[(size_t)t * C + c] += (float)acc;
        }
    }
}

// ---------------------------------------------------------------------------
// LayerNorm over the last axis

void ref_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                           const float *bias, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;  // (C)
        float *o = out + (size_t)n * C;        // (C)
        double m = 0.0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        // Two passes: the variance of the centred values does not cancel.
        double var = 0.0;
        for (int c = 0; c < C; c++) {
            double d = x[c] - m;
            var += d * d;
        }
        var /= C;
        double s = 1.0 / sqrt(var + REF_LAYERNORM_EPS);
        for (int c = 0; c < C; c++) o[c] = (float)((x[c] - m) * s * weight[c] + bias[c]);
        mean[n] = (float)m;
        rstd[n] = (float)s;
    }
}

void ref_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, const float *mean, const float *rstd, int N, int C) {
    // dweight and dbias sum over all N rows: accumulate in double, add once.
    double *dw = ref_scratch((size_t)C);
    double *db = ref_scratch((size_t)C);
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *dy = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        double m = mean[n], s = rstd[n];
        // With xhat = (x - mean) * rstd and g = dy * weight, the Jacobian of the
        // normalisation gives dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
        double sum_g = 0.0, sum_gx = 0.0;
        for (int c = 0; c < C; c++) {
            double xhat = (x[c] - m) * s;
            double g = (double)dy[c] * weight[c];
            sum_g += g;
            sum_gx += g * xhat;
        }
        double mean_g = sum_g / C, mean_gx = sum_gx / C;
        for (int c = 0; c < C; c++) {
            double xhat = (x[c] - m) * s;
            double g = (double)dy[c] * weight[c];
            db[c] += dy[c];
            dw[c] += dy[c] * xhat;
            dx[c] += (float)(s * (g - mean_g - xhat * mean_gx));
        }
    }
    for (int c = 0; c < C; c++) {
        dweight[c] += (float)dw[c];
        dbias[c] += (float)db[c];
    }
    free(dw);
    free(db);
}

// ---------------------------------------------------------------------------
// Matmul: out = inp @ weight^T + bias (the layout of PyTorch's nn.Linear)

void ref_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;  // (C)
        for (int o = 0; o < OC; o++) {
            const float *w = weight + (size_t)o * C;  // (C)
            double acc = bias ? bias[o] : 0.0;
            for (int c = 0; c < C; c++) acc += (double)x[c] * w[c];
            out[(size_t)n * OC + o] = (float)acc;
        }
    }
}

void ref_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                         const float *weight, int N, int C, int OC) {
    // Loops are ordered so the inner one walks rows contiguously; a row of
    // double accumulators keeps the long sums exact enough.
    double *acc = ref_scratch((size_t)C);
    // dinp = dout @ weight: (N,OC) x (OC,C), a sum over OC
    for (int n = 0; n < N; n++) {
        memset(acc, 0, sizeof *acc * (size_t)C);
        for (int o = 0; o < OC; o++) {
            double d = dout[(size_t)n * OC + o];
            const float *w = weight + (size_t)o * C;
            for (int c = 0; c < C; c++) acc[c] += d * w[c];
        }
        float *dx = dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) dx[c] += (float)acc[c];
    }
    // dweight = dout^T @ inp: (OC,N) x (N,C), and dbias the column sums of dout; sums over N
    for (int o = 0; o < OC; o++) {
        memset(acc, 0, sizeof *acc * (size_t)C);
        double bsum = 0.0;
        for (int n = 0; n < N; n++) {
            double d = dout[(size_t)n * OC + o];
            const float *x = inp + (size_t)n * C;
            bsum += d;
            for (int c = 0; c < C; c++) acc[c] += d * x[c];
        }
        float *dw = dweight + (size_t)o * C;
        for (int c = 0; c < C; c++) dw[c] += (float)acc[c];
        if (dbias) dbias[o] += (float)bsum;
    }
    free(acc);
}

// ---------------------------------------------------------------------------
// GELU, tanh approximation (as GPT-2 was trained)

#define GELU_K 0.79788456080286535588  // sqrt(2/pi)
#define GELU_A 0.044715

void ref_gelu_forward(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = inp[i];
        double u = GELU_K * (x + GELU_A * x * x * x);
        out[i] = (float)(0.5 * x * (1.0 + tanh(u)));
    }
}

void ref_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = inp[i];
        double th = tanh(GELU_K * (x + GELU_A * x * x * x));
        // d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 x sech^2(u) u'(x)
        double du = GELU_K * (1.0 + 3.0 * GELU_A * x * x);
        double local = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
        dinp[i] += (float)(local * dout[i]);
    }
}

// ---------------------------------------------------------------------------
// Residual

void ref_residual_forward(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void ref_residual_backward(float *da, float *db, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}
