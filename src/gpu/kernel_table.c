// kernel_table.c: a device's kernel files and kernels (backend_shared.h),
// for both GPU backends.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/backend_shared.h"

// The file of t that already defines a kernel of f, or NULL (*name: that kernel).
static const char *defined_in_(const wgpt_ktable *t, const wgpt_ksrc_file *f, const char **name) {
    for (int i = 0; i < f->nkernels; i++)
        for (int j = 0; j < t->nfiles; j++)
            for (int k = 0; k < t->files[j].nkernels; k++)
                if (strcmp(t->files[j].kernels[k].name, f->kernels[i].name) == 0) {
                    *name = f->kernels[i].name;
                    return t->files[j].label;
                }
    return NULL;
}

// A kernel of kernel_size bytes with its id filled, or NULL (out of memory).
static wgpt_kernel *make_kernel_(size_t kernel_size, wgpt_gpu *g, const char *name, int file, int index) {
    wgpt_kernel *k = calloc(1, kernel_size);
    if (!k) return NULL;
    wgpt_kernel_id *id = (wgpt_kernel_id *)k;  // a wgpt_kernel begins with its id
    id->gpu = g;
    snprintf(id->name, sizeof id->name, "%s", name);
    id->file = file;
    id->index = index;
    return k;
}

int wgpt_ktable_add_(wgpt_ktable *t, wgpt_gpu *g, size_t kernel_size, const char *label, const char *text, char *err,
                     size_t errlen) {
    wgpt_ksrc_file f;
    if (wgpt_ksrc_parse(&f, label, text, err, errlen) < 0) return -1;
    const char *name, *other = defined_in_(t, &f, &name);
    if (other) {
        snprintf(err, errlen, "kernel '%s' is defined in both %s and %s", name, other, label);
        wgpt_ksrc_free(&f);
        return -1;
    }
    wgpt_ksrc_file *nf = realloc(t->files, (size_t)(t->nfiles + 1) * sizeof *nf);
    if (!nf) goto oom;
    t->files = nf;
    if (t->nkernels + f.nkernels > t->cap) {
        int cap = (t->nkernels + f.nkernels) * 2;
        wgpt_kernel **nk = realloc(t->kernels, (size_t)cap * sizeof *nk);
        if (!nk) goto oom;
        t->kernels = nk;
        t->cap = cap;
    }
    for (int i = 0; i < f.nkernels; i++) {
        wgpt_kernel *k = make_kernel_(kernel_size, g, f.kernels[i].name, t->nfiles, i);
        if (!k) {
            while (i-- > 0) free(t->kernels[--t->nkernels]);
            goto oom;
        }
        t->kernels[t->nkernels++] = k;
    }
    t->files[t->nfiles++] = f;
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", label);
    wgpt_ksrc_free(&f);
    return -1;
}

int wgpt_ktable_set_shared_(wgpt_ktable *t, const char *label, const char *text, char *err, size_t errlen) {
    if (wgpt_ksrc_check_shared(label, text, err, errlen) < 0) return -1;
    free(t->shared_label);
    free(t->shared_text);
    t->shared_label = strdup(label);
    t->shared_text = strdup(text);
    if (!t->shared_label || !t->shared_text) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

wgpt_kernel *wgpt_ktable_find_(const wgpt_ktable *t, const char *name) {
    for (int i = 0; i < t->nkernels; i++)
        if (strcmp(((const wgpt_kernel_id *)t->kernels[i])->name, name) == 0) return t->kernels[i];
    return NULL;
}

const char *wgpt_kernel_name(const wgpt_kernel *k) { return ((const wgpt_kernel_id *)k)->name; }

void wgpt_ktable_free_(wgpt_ktable *t) {
    for (int i = 0; i < t->nkernels; i++) free(t->kernels[i]);
    free(t->kernels);
    for (int i = 0; i < t->nfiles; i++) wgpt_ksrc_free(&t->files[i]);
    free(t->files);
    free(t->shared_label);
    free(t->shared_text);
    memset(t, 0, sizeof *t);
}
