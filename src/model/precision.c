// precision.c: the f16 cast's dispatch (see precision.h).
#include "model/precision.h"
#include "model/kernel_params.h"  // the kernels' params structs

#include "model/variant.h"

// 8-element steps a thread of cast_f16_vec4: CAST_V8 in 08_precision.wgsl.
#define CAST_V8 2u

// One cast dispatch over n elements that fit one binding each.
static int cast_f16_one_(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, uint64_t n) {
    wgpt_view v[2] = {{dst16.buf, dst16.offset, n * 2}, {src.buf, src.offset, n * 4}};
    cast_params p = {(uint32_t)n};
    // GPUs take whole vec4s where the sizes and offsets allow (the CPU twin
    // keeps one pair a thread, see variant.h).
    if (!wgpt_kernel_variant_cpu(g) && n % 8 == 0 && wgpt_views_vec4(v, 2))
        return wgpt_op_add1d(g, op, "cast_f16_vec4", v, 2, &p, sizeof p, (n / 8 + WGPT_WG * CAST_V8 - 1) / (WGPT_WG * CAST_V8))
                   ? 0
                   : -1;
    return wgpt_op_add1d(g, op, "cast_f16", v, 2, &p, sizeof p, wgpt_groups(n / 2)) ? 0 : -1;
}

int wgpt_cast_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, uint64_t n) {
    if (!dst16.buf || !src.buf) return wgpt_gpu_fail(g, "cast_f16: a view has no buffer");
    if (n % 2 || n > UINT32_MAX) return wgpt_gpu_fail(g, "cast_f16: n=%llu must be even and below 2^32",
                                                      (unsigned long long)n);
    if (wgpt_view_bytes(dst16) < n * 2 || wgpt_view_bytes(src) < n * 4)
        return wgpt_gpu_fail(g, "cast_f16: %llu elements need %llu bytes of dst and %llu of src (have %llu and %llu)",
                             (unsigned long long)n, (unsigned long long)(n * 2), (unsigned long long)(n * 4),
                             (unsigned long long)wgpt_view_bytes(dst16), (unsigned long long)wgpt_view_bytes(src));
    // Past one binding, chunks of a multiple of 128 elements (256 bytes of
    // dst: every offset stays aligned); each element is cast on its own, so
    // the halves are the same however it splits.
    uint64_t lim = wgpt_gpu_get_info(g)->max_storage_binding / 4 / 128 * 128;
    if (n * 4 > wgpt_gpu_get_info(g)->max_storage_binding && !lim)
        return wgpt_gpu_fail(g, "cast_f16: 128 elements exceed the device's binding limit of %llu bytes",
                             (unsigned long long)wgpt_gpu_get_info(g)->max_storage_binding);
    uint64_t chunk = n * 4 <= wgpt_gpu_get_info(g)->max_storage_binding ? n : lim;
    for (uint64_t i = 0; i < n; i += chunk) {
        uint64_t k = n - i < chunk ? n - i : chunk;
        wgpt_view d = {dst16.buf, dst16.offset + i * 2, k * 2}, s = {src.buf, src.offset + i * 4, k * 4};
        if (cast_f16_one_(g, op, d, s, k) < 0) return -1;
    }
    return 0;
}

// TR of 08_precision.wgsl: the halves a side of transpose_f16's tile.
#define TRANSPOSE_TILE 64u

// What a transpose's source holds: halves, floats, floats to GELU, or floats to normalise.
enum { FROM_F16, FROM_F32, FROM_F32_GELU, FROM_F32_LN };

// The transposes' bindings 2-5 into v: layernorm_f16_transpose's ln (mean,
// rstd: a float a row; weight, bias: a float a column), each sized to its
// tensor; the other kernels never read them and bind src there (ln NULL).
// Returns 0, or -1 naming the view that is missing or short.
static int ln_views_(wgpt_gpu *g, const wgpt_view *ln, wgpt_view src, uint32_t rows, uint32_t cols, wgpt_view *v) {
    static const char *const NAME[4] = {"mean", "rstd", "weight", "bias"};
    for (int i = 0; i < 4; i++) {
        if (!ln) {
            v[i] = src;
            continue;
        }
        uint64_t need = (uint64_t)(i < 2 ? rows : cols) * 4;
        if (!ln[i].buf || wgpt_view_bytes(ln[i]) < need)
            return wgpt_gpu_fail(g, "layernorm_f16_transpose: %u x %u needs %llu bytes of %s (has %llu)", rows, cols,
                                 (unsigned long long)need, NAME[i],
                                 (unsigned long long)(ln[i].buf ? wgpt_view_bytes(ln[i]) : 0));
        v[i] = (wgpt_view){ln[i].buf, ln[i].offset, need};
    }
    return 0;
}

// transpose_f16, cast_f16_transpose, gelu_f16_transpose or layernorm_f16_transpose (ln: its mean,
// rstd, weight, bias; else NULL): the same tiles, the source 2 or 4 bytes an element (their _v8
// twins where rows and cols are multiples of 8).
static int transpose_(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, uint32_t rows, uint32_t cols,
                      int from, const wgpt_view *ln) {
    static const char *const NAME[4][2] = {{"transpose_f16", "transpose_f16_v8"},
                                           {"cast_f16_transpose", "cast_f16_transpose_v8"},
                                           {"gelu_f16_transpose", "gelu_f16_transpose_v8"},
                                           {"layernorm_f16_transpose", "layernorm_f16_transpose_v8"}};
    const char *kernel = NAME[from][0];
    int from_f32 = from != FROM_F16;
    if (!dst16.buf || !src.buf) return wgpt_gpu_fail(g, "%s: a view has no buffer", kernel);
    if (!rows || !cols || rows % 2 || cols % 2)
        return wgpt_gpu_fail(g, "%s: %u x %u: both must be even and positive", kernel, rows, cols);
    uint64_t bytes = (uint64_t)rows * cols * 2, sbytes = bytes * (from_f32 ? 2 : 1);
    uint64_t lim = wgpt_gpu_get_info(g)->max_storage_binding;
    if (wgpt_view_bytes(dst16) < bytes || wgpt_view_bytes(src) < sbytes || sbytes > lim)
        return wgpt_gpu_fail(g, "%s: %u x %u needs %llu bytes of dst and %llu of src in one binding each "
                             "(have %llu and %llu; the device binds at most %llu)", kernel, rows, cols,
                             (unsigned long long)bytes, (unsigned long long)sbytes,
                             (unsigned long long)wgpt_view_bytes(dst16), (unsigned long long)wgpt_view_bytes(src),
                             (unsigned long long)lim);
    uint32_t gx = (cols + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE, gy = (rows + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE;
    if (gx > WGPT_MAX_WG_DIM || gy > WGPT_MAX_WG_DIM)
        return wgpt_gpu_fail(g, "%s: %u x %u tiles exceed %u a dimension", kernel, gx, gy, WGPT_MAX_WG_DIM);
    wgpt_view v[6] = {{dst16.buf, dst16.offset, bytes}, {src.buf, src.offset, sbytes}};
    if (ln_views_(g, ln, v[1], rows, cols, v + 2) < 0) return -1;
    transpose_params p = {rows, cols};
    // GPUs move 16 bytes a thread where whole vec4s fit (the CPU twin keeps
    // the u32 kernel, see variant.h): on an H100 the u32 kernels ran at about
    // 1 TB/s, a third of a copy's bandwidth.
    if (!wgpt_kernel_variant_cpu(g) && rows % 8 == 0 && cols % 8 == 0 && wgpt_views_vec4(v, 6))
        kernel = NAME[from][1];
    return wgpt_op_add(g, op, kernel, v, 6, &p, sizeof p, gx, gy, 1) ? 0 : -1;
}

int wgpt_transpose_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src16, uint32_t rows, uint32_t cols) {
    return transpose_(g, op, dst16, src16, rows, cols, FROM_F16, NULL);
}

int wgpt_cast_f16_transpose(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, uint32_t rows, uint32_t cols) {
    return transpose_(g, op, dst16, src, rows, cols, FROM_F32, NULL);
}

int wgpt_gelu_f16_transpose(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, uint32_t rows, uint32_t cols) {
    return transpose_(g, op, dst16, src, rows, cols, FROM_F32_GELU, NULL);
}

int wgpt_layernorm_f16_transpose(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, wgpt_view mean,
                                 wgpt_view rstd, wgpt_view weight, wgpt_view bias, uint32_t rows, uint32_t cols) {
    const wgpt_view ln[4] = {mean, rstd, weight, bias};
    return transpose_(g, op, dst16, src, rows, cols, FROM_F32_LN, ln);
}
