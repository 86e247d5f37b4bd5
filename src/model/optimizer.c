// optimizer.c: host side of kernels/07_optimizer.wgsl (see optimizer.h).
#include "model/optimizer.h"
#include "model/kernel_params.h"  // the kernels' params structs
#include "model/variant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct wgpt_adamw {
    int n;              // chunks
    wgpt_bind **binds;  // owned by the op
    adamw_params *params;
};

// Floats of 256 bytes: chunk offsets stay multiples of every storage offset
// alignment WebGPU allows (at most 256).
#define OPT_ALIGN_FLOATS 64u

// One dispatch's share of a flat range: the binding covers floats
// [first, first + len) from the base view (first a multiple of
// OPT_ALIGN_FLOATS); the kernel touches [start, start + n) of it.
typedef struct opt_chunk {
    uint64_t first, len;
    uint32_t start, n;
} opt_chunk;

// Floats one binding may hold: the device's limit, rounded down to `align`
// floats (a multiple of 256 bytes) when splitting, and never so many that a
// u32 index could wrap.
static uint64_t opt_chunk_floats(wgpt_gpu *g, uint64_t total, uint64_t align) {
    uint64_t max = wgpt_gpu_get_info(g)->max_storage_binding / 4;
    if (max > (1ull << 30)) max = 1ull << 30;
    if (total <= max) return total;
    uint64_t c = max / align * align;
    return c ? c : align;  // too small a limit: the bind fails and says why
}

// Splits floats [off, off + n) into chunks of a multiple of `align` floats
// (OPT_ALIGN_FLOATS, or the norm's WGPT_NORM_SLICE: then the norm's slices,
// and so its partial sums, are the same however the array is split); returns
// how many (0 if n is 0), writing at most max of them to out (out may be NULL
// to count).
static uint64_t opt_chunks_(wgpt_gpu *g, uint64_t off, uint64_t n, opt_chunk *out, uint64_t max, uint64_t align) {
    if (n == 0) return 0;
    uint64_t pad = off % OPT_ALIGN_FLOATS, first = off - pad, total = pad + n;
    uint64_t per = opt_chunk_floats(g, total, align), count = 0;
    for (uint64_t lo = 0; lo < total; lo += per, count++) {
        uint64_t hi = total - lo < per ? total : lo + per;
        uint64_t start = lo == 0 ? pad : 0;
        if (out && count < max) out[count] = (opt_chunk){first + lo, hi - lo, (uint32_t)start, (uint32_t)(hi - lo - start)};
    }
    return count;
}

static uint64_t opt_chunks(wgpt_gpu *g, uint64_t off, uint64_t n, opt_chunk *out, uint64_t max) {
    return opt_chunks_(g, off, n, out, max, OPT_ALIGN_FLOATS);
}
// The norm's: whole slices a chunk (its arrays start at offset 0).
static uint64_t norm_chunks(wgpt_gpu *g, uint64_t n, opt_chunk *out, uint64_t max) {
    return opt_chunks_(g, 0, n, out, max, WGPT_NORM_SLICE);
}

// The binding of chunk c of a flat array that starts at base.
static wgpt_view opt_view(wgpt_view base, const opt_chunk *c) {
    return (wgpt_view){base.buf, base.offset + c->first * 4, c->len * 4};
}

// The base view holds at least `floats` floats.
static int opt_covers(wgpt_view v, uint64_t floats) {
    if (!v.buf) return 0;
    return wgpt_view_bytes(v) >= floats * 4;
}

static uint64_t opt_ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Partial pairs of the norm over n floats: one per NORM_SLICE of each chunk.
static uint64_t norm_parts(const opt_chunk *chunks, uint64_t nchunks) {
    uint64_t parts = 0;
    for (uint64_t c = 0; c < nchunks; c++) parts += opt_ceil_div(chunks[c].n, WGPT_NORM_SLICE);
    return parts;
}

uint64_t wgpt_grad_norm_scratch_bytes(wgpt_gpu *g, uint64_t n) {
    uint64_t nchunks = norm_chunks(g, n, NULL, 0);
    opt_chunk *chunks = nchunks ? malloc(nchunks * sizeof *chunks) : NULL;
    if (!chunks) return 0;
    norm_chunks(g, n, chunks, nchunks);
    uint64_t parts = norm_parts(chunks, nchunks);
    free(chunks);
    return parts * 8;  // (sum of squares, non-finite count) per workgroup
}

int wgpt_grad_norm(wgpt_gpu *g, wgpt_op *op, wgpt_view grads, uint64_t n, wgpt_view scratch, wgpt_view state,
                   float max_norm, wgpt_grad_norm_handle *h) {
    if (n == 0 || !opt_covers(grads, n) || !opt_covers(state, WGPT_OPTIM_STATE_BYTES / 4))
        return wgpt_gpu_fail(g, "grad_norm: %s", n == 0 ? "no gradients" : "grads or state is missing or too small");
    uint64_t nchunks = norm_chunks(g, n, NULL, 0);
    opt_chunk *chunks = malloc(nchunks * sizeof *chunks);
    if (!chunks) return wgpt_gpu_fail(g, "grad_norm: out of host memory for %llu chunks", (unsigned long long)nchunks);
    norm_chunks(g, n, chunks, nchunks);
    uint64_t parts = norm_parts(chunks, nchunks);
    int rc = -1;
    if (parts > UINT32_MAX / 2) {
        wgpt_gpu_fail(g, "grad_norm: %llu gradients make %llu partial sums; at most %u", (unsigned long long)n,
                      (unsigned long long)parts, UINT32_MAX / 2);
        goto done;
    }
    if (!opt_covers(scratch, parts * 2)) {
        wgpt_gpu_fail(g, "grad_norm: the scratch %s; it needs %llu bytes (wgpt_grad_norm_scratch_bytes)",
                      scratch.buf ? "is too small" : "has no buffer", (unsigned long long)(parts * 8));
        goto done;
    }
    wgpt_view part_view = {scratch.buf, scratch.offset, parts * 8};
    // The CPU twin: one 8-lane workgroup a slice, its subgroup the whole workgroup.
    int flat = wgpt_kernel_variant_cpu(g) && wgpt_gpu_get_info(g)->subgroup_min >= 8;
    uint64_t base = 0;
    for (uint64_t c = 0; c < nchunks; c++) {
        uint64_t groups = opt_ceil_div(chunks[c].n, WGPT_NORM_SLICE);
        wgpt_view v[2] = {opt_view(grads, &chunks[c]), part_view};
        norm_partial_params p = {chunks[c].n, chunks[c].start, (uint32_t)base, (uint32_t)groups};
        if (!wgpt_op_add1d(g, op, flat ? "grad_norm_partial_flat" : "grad_norm_partial", v, 2, &p, sizeof p, groups))
            goto done;
        base += groups;
    }
    // One workgroup folds every chunk's partials in a fixed order.
    wgpt_view fv[2] = {part_view, {state.buf, state.offset, WGPT_OPTIM_STATE_BYTES}};
    norm_finish_params fp = {(uint32_t)parts, max_norm, 0.0f, 1.0f};
    wgpt_bind *fb = wgpt_op_add(g, op, "grad_norm_finish", fv, 2, &fp, sizeof fp, 1, 1, 1);
    if (!fb) goto done;
    if (h) *h = (wgpt_grad_norm_handle){fb, (uint32_t)parts, max_norm};
    rc = 0;
done:
    free(chunks);
    return rc;
}

// --- AdamW -----------------------------------------------------------------------

static int range_cmp(const void *a, const void *b) {
    const wgpt_adamw_range *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

// Sorted copy of the non-empty ranges, adjacent ones with the same decay
// merged: how many are left in *out (malloc'ed), or -1 (the message in g).
static int ranges_normalise(wgpt_gpu *g, const wgpt_adamw_range *in, int n, wgpt_adamw_range **out) {
    wgpt_adamw_range *r = malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
    if (!r) return wgpt_gpu_fail(g, "adamw: out of host memory for %d ranges", n);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (in[i].count) r[k++] = in[i];
    qsort(r, (size_t)k, sizeof *r, range_cmp);
    int m = 0;
    for (int i = 0; i < k; i++) {
        if (m > 0) {
            wgpt_adamw_range *last = &r[m - 1];
            uint64_t end = last->offset + last->count;
            if (r[i].offset < end) {
                free(r);
                return wgpt_gpu_fail(g, "adamw: two parameter ranges overlap");
            }
            if (r[i].offset == end && r[i].weight_decay == last->weight_decay) {
                last->count += r[i].count;
                continue;
            }
        }
        r[m++] = r[i];
    }
    *out = r;
    return m;
}

// The step-dependent fields: lr and the bias corrections 1 - beta^t, taken in
// double as ref_adamw_update does, then rounded once.
static void adamw_params_step(adamw_params *p, float lr, int t) {
    p->lr = lr;
    p->bc1 = (float)(1.0 - pow((double)p->beta1, t));
    p->bc2 = (float)(1.0 - pow((double)p->beta2, t));
}

// The f16 copy's binding of chunk c: two bytes a float of params' chunk.
static wgpt_view opt_view16(wgpt_view base16, const opt_chunk *c) {
    return (wgpt_view){base16.buf, base16.offset + c->first * 2, c->len * 2};
}

// wgpt_adamw_update, and with params16.buf the f16 copy written too.
static int adamw_update_(wgpt_gpu *g, wgpt_op *op, wgpt_view params, wgpt_view params16, wgpt_view grads,
                         wgpt_view m, wgpt_view v, wgpt_view state, const wgpt_adamw_range *ranges, int nranges,
                         const wgpt_adamw_hparams *hp, wgpt_adamw **out) {
    *out = NULL;
    int f16 = params16.buf != NULL;
    if (nranges < 0 || (nranges > 0 && !ranges) || !hp || hp->t < 1 || !(hp->beta1 >= 0.0f && hp->beta1 < 1.0f) ||
        !(hp->beta2 >= 0.0f && hp->beta2 < 1.0f) || !opt_covers(state, WGPT_OPTIM_STATE_BYTES / 4))
        return wgpt_gpu_fail(g, "adamw: bad arguments (step >= 1, betas in [0, 1), a state view of %d bytes)",
                             WGPT_OPTIM_STATE_BYTES);
    wgpt_adamw_range *r = NULL;
    int nr = ranges_normalise(g, ranges, nranges, &r);
    if (nr < 0) return -1;
    wgpt_adamw *h = calloc(1, sizeof *h);
    uint64_t total = 0;
    int rc = -1;
    if (!h) {
        wgpt_gpu_fail(g, "adamw: out of host memory");
        goto done;
    }
    for (int i = 0; i < nr; i++) {
        uint64_t end = r[i].offset + r[i].count;
        if (f16 && (r[i].offset % 2 || r[i].count % 2 || wgpt_view_bytes(params16) < end * 2)) {
            wgpt_gpu_fail(g, "adamw_f16: the range [%llu, %llu) must start and end on an even float and lie within "
                          "the f16 copy (%llu bytes)", (unsigned long long)r[i].offset, (unsigned long long)end,
                          (unsigned long long)wgpt_view_bytes(params16));
            goto done;
        }
        if (!opt_covers(params, end) || !opt_covers(grads, end) || !opt_covers(m, end) || !opt_covers(v, end)) {
            wgpt_gpu_fail(g, "adamw: the range [%llu, %llu) reaches past params, grads, m or v (or one has no buffer)",
                          (unsigned long long)r[i].offset, (unsigned long long)end);
            goto done;
        }
        total += opt_chunks(g, r[i].offset, r[i].count, NULL, 0);
    }
    if (total > INT32_MAX) {
        wgpt_gpu_fail(g, "adamw: %llu dispatches; at most %d", (unsigned long long)total, INT32_MAX);
        goto done;
    }
    h->binds = calloc(total ? total : 1, sizeof *h->binds);
    h->params = calloc(total ? total : 1, sizeof *h->params);
    if (!h->binds || !h->params) {
        wgpt_gpu_fail(g, "adamw: out of host memory for %llu dispatches", (unsigned long long)total);
        goto done;
    }
    wgpt_view st = {state.buf, state.offset, WGPT_OPTIM_STATE_BYTES};
    for (int i = 0; i < nr; i++) {
        uint64_t nc = opt_chunks(g, r[i].offset, r[i].count, NULL, 0);
        opt_chunk *chunks = malloc(nc * sizeof *chunks);
        if (!chunks) {
            wgpt_gpu_fail(g, "adamw: out of host memory for %llu chunks", (unsigned long long)nc);
            goto done;
        }
        opt_chunks(g, r[i].offset, r[i].count, chunks, nc);
        for (uint64_t c = 0; c < nc; c++) {
            adamw_params *p = &h->params[h->n];
            *p = (adamw_params){
                .n = chunks[c].n,
                .start = chunks[c].start,
                .beta1 = hp->beta1,
                .beta2 = hp->beta2,
                // 1 - beta in double, rounded once (exact in f32 for beta >= 0.5).
                .one_minus_beta1 = (float)(1.0 - (double)hp->beta1),
                .one_minus_beta2 = (float)(1.0 - (double)hp->beta2),
                .eps = hp->eps,
                .weight_decay = r[i].weight_decay,
            };
            adamw_params_step(p, hp->lr, hp->t);
            wgpt_view vs[6] = {opt_view(params, &chunks[c]), opt_view(grads, &chunks[c]), opt_view(m, &chunks[c]),
                               opt_view(v, &chunks[c]), st, f16 ? opt_view16(params16, &chunks[c]) : st};
            // The vec4 twin where the chunk's floats and the four arrays' views line up on vec4s
            // (and the f16 copy's on 4 halves).
            int vec4 = p->n % 4 == 0 && p->start % 4 == 0 && wgpt_views_vec4(vs, 4) && (!f16 || vs[5].offset % 8 == 0);
            const char *k = f16 ? (vec4 ? "adamw_update_f16_vec4" : "adamw_update_f16")
                                : (vec4 ? "adamw_update_vec4" : "adamw_update");
            uint64_t threads = vec4 ? chunks[c].n / 4 : f16 ? chunks[c].n / 2 : chunks[c].n;
            h->binds[h->n] = wgpt_op_add1d(g, op, k, vs, f16 ? 6 : 5, p, sizeof *p, wgpt_groups(threads));
            if (!h->binds[h->n]) {
                free(chunks);
                goto done;
            }
            h->n++;
        }
        free(chunks);
    }
    *out = h;
    rc = 0;
done:
    free(r);
    if (rc < 0) wgpt_adamw_free(h);
    return rc;
}

int wgpt_adamw_update(wgpt_gpu *g, wgpt_op *op, wgpt_view params, wgpt_view grads, wgpt_view m, wgpt_view v,
                      wgpt_view state, const wgpt_adamw_range *ranges, int nranges, const wgpt_adamw_hparams *hp,
                      wgpt_adamw **out) {
    wgpt_view none = {NULL, 0, 0};
    return adamw_update_(g, op, params, none, grads, m, v, state, ranges, nranges, hp, out);
}

int wgpt_adamw_update_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view params, wgpt_view params16, wgpt_view grads,
                          wgpt_view m, wgpt_view v, wgpt_view state, const wgpt_adamw_range *ranges, int nranges,
                          const wgpt_adamw_hparams *hp, wgpt_adamw **out) {
    *out = NULL;
    if (!params16.buf) return wgpt_gpu_fail(g, "adamw_f16: the f16 copy has no buffer");
    return adamw_update_(g, op, params, params16, grads, m, v, state, ranges, nranges, hp, out);
}

int wgpt_adamw_set_step(wgpt_gpu *g, wgpt_adamw *h, float lr, int t) {
    if (!h || t < 1) return wgpt_gpu_fail(g, "adamw: step %d (steps count from 1)", t);
    for (int i = 0; i < h->n; i++) {
        adamw_params_step(&h->params[i], lr, t);
        if (wgpt_bind_set_params(g, h->binds[i], &h->params[i], sizeof h->params[i]) < 0) return -1;
    }
    return 0;
}

void wgpt_adamw_free(wgpt_adamw *h) {
    if (!h) return;
    free(h->binds);
    free(h->params);
    free(h);
}

int wgpt_grad_norm_set(wgpt_gpu *g, const wgpt_grad_norm_handle *h, float skip_norm, float grad_scale) {
    if (!(grad_scale > 0.0f) || !isfinite(grad_scale))
        return wgpt_gpu_fail(g, "grad_norm: grad_scale %g must be positive and finite", grad_scale);
    norm_finish_params fp = {h->n_parts, h->max_norm, skip_norm, grad_scale};
    return wgpt_bind_set_params(g, h->finish, &fp, sizeof fp);
}
