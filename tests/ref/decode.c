// decode.c: the plain C reference of the KV-cache decoder's kernels
// (kernels/09_decode.wgsl, 09_decode_attention.wgsl), in double.
#include <math.h>

#include "ref/gpt2_ref.h"

void ref_decode_matvec(float *out, const float *inp, const float *w, const float *bias, int rows, int k, int n,
                       int round16) {
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < n; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int i = 0; i < k; i++) {
                float x = inp[(size_t)r * k + i];
                if (round16) x = ref_f32_from_f16(ref_f16_from_f32(x));
                s += (double)x * w[(size_t)o * k + i];
            }
            out[(size_t)r * n + o] = (float)s;
        }
}

void ref_decode_attention(float *out, const float *qkv, const float *kc, const float *vc, const int *slot,
                          const int *pos, int rows, int C, int NH, int T) {
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)r * 3 * C + h * hs;
            int len = pos[r] + 1;
            double mx = -INFINITY, sum = 0, s[4096];
            for (int j = 0; j < len; j++) {
                const float *k = kc + ((size_t)slot[r] * T + j) * C + h * hs;
                double d = 0;
                for (int i = 0; i < hs; i++) d += (double)q[i] * k[i];
                s[j] = d * scale;
                if (s[j] > mx) mx = s[j];
            }
            for (int j = 0; j < len; j++) sum += (s[j] = exp(s[j] - mx));
            for (int i = 0; i < hs; i++) {
                double a = 0;
                for (int j = 0; j < len; j++) a += s[j] * vc[((size_t)slot[r] * T + j) * C + h * hs + i];
                out[(size_t)r * C + h * hs + i] = (float)(a / sum);
            }
        }
}
