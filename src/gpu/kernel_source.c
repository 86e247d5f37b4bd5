// kernel_source.c: splitting, composing and line mapping of kernel files.
#include "kernel_source.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

static const char MARKER_HEAD[] = "// --- KERNEL:";

static int is_ident_(const char *s, size_t n) {
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return 0;
    return 1;
}

// Parses one line [s, s+n) as a marker. Returns 1 with the name on a marker,
// 0 if the line is not a marker, -1 if it starts like one but is malformed.
static int parse_marker_(const char *s, size_t n, char *name, size_t namecap) {
    size_t hl = sizeof MARKER_HEAD - 1;
    if (n < hl || memcmp(s, MARKER_HEAD, hl) != 0) return 0;
    if (n && s[n - 1] == '\r') n--;
    const char *tail = " ---";
    size_t tl = strlen(tail);
    if (n < hl + 1 + tl || s[hl] != ' ' || memcmp(s + n - tl, tail, tl) != 0) return -1;
    const char *nm = s + hl + 1;
    size_t nl = n - hl - 1 - tl;
    if (!is_ident_(nm, nl) || nl >= namecap) return -1;
    memcpy(name, nm, nl);
    name[nl] = 0;
    return 1;
}

int wgpt_ksrc_check_shared(const char *label, const char *text, char *err, size_t errlen) {
    uint32_t line = 1;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n >= sizeof MARKER_HEAD - 1 && memcmp(p, MARKER_HEAD, sizeof MARKER_HEAD - 1) == 0)
            return wgpt_errf(err, errlen,
                         "%s:%u: the shared preamble must not contain a kernel marker "
                         "(it is pasted in front of every kernel)",
                         label, line);
        if (!e) break;
        p = e + 1;
        line++;
    }
    return 0;
}

void wgpt_ksrc_free(wgpt_ksrc_file *f) {
    if (!f) return;
    free(f->label);
    free(f->text);
    free(f->kernels);
    memset(f, 0, sizeof *f);
}

int wgpt_ksrc_parse(wgpt_ksrc_file *f, const char *label, const char *text, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    f->label = strdup(label);
    f->text = strdup(text);
    if (!f->label || !f->text) {
        wgpt_ksrc_free(f);
        return wgpt_errf(err, errlen, "%s: out of memory", label);
    }
    int cap = 0;
    uint32_t line = 1;
    const char *t = f->text;
    for (const char *p = t; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char name[64];
        int m = parse_marker_(p, n, name, sizeof name);
        if (m < 0) {
            wgpt_ksrc_free(f);
            return wgpt_errf(err, errlen,
                         "%s:%u: malformed kernel marker; write `// --- KERNEL: name ---` "
                         "with a WGSL identifier of under 64 characters",
                         label, line);
        }
        if (m > 0) {
            for (int i = 0; i < f->nkernels; i++)
                if (strcmp(f->kernels[i].name, name) == 0) {
                    wgpt_ksrc_free(f);
                    return wgpt_errf(err, errlen, "%s:%u: kernel '%s' is defined twice", label, line, name);
                }
            if (f->nkernels == cap) {
                cap = cap ? cap * 2 : 8;
                wgpt_ksrc_kernel *nk = realloc(f->kernels, (size_t)cap * sizeof *nk);
                if (!nk) {
                    wgpt_ksrc_free(f);
                    return wgpt_errf(err, errlen, "%s: out of memory", label);
                }
                f->kernels = nk;
            }
            wgpt_ksrc_kernel *k = &f->kernels[f->nkernels];
            if (f->nkernels == 0) f->preamble_end = (size_t)(p - t);
            else f->kernels[f->nkernels - 1].body_end = (size_t)(p - t);
            snprintf(k->name, sizeof k->name, "%s", name);
            k->body_start = e ? (size_t)(e + 1 - t) : strlen(t);
            k->body_line = line + 1;
            f->nkernels++;
        }
        if (!e) break;
        p = e + 1;
        line++;
    }
    if (f->nkernels == 0) {
        wgpt_ksrc_free(f);
        return wgpt_errf(err, errlen, "%s: no kernel markers (`// --- KERNEL: name ---`) in this file", label);
    }
    f->kernels[f->nkernels - 1].body_end = strlen(t);
    return 0;
}

static uint32_t count_lines_(const char *s, size_t n) {
    uint32_t c = 0;
    for (size_t i = 0; i < n; i++) c += s[i] == '\n';
    if (n && s[n - 1] != '\n') c++;  // a newline is appended when composing
    return c;
}

// Appends part [s, s+n) plus a newline if it lacks one; records its segment.
static void append_(wgpt_ksrc_composed *c, size_t *len, uint32_t *line, const char *s, size_t n,
                    const char *file, uint32_t file_first) {
    memcpy(c->code + *len, s, n);
    *len += n;
    if (n && s[n - 1] != '\n') c->code[(*len)++] = '\n';
    uint32_t cnt = count_lines_(s, n);
    if (cnt) c->seg[c->nseg++] = (wgpt_line_seg){*line, cnt, file, file_first};
    *line += cnt;
}

int wgpt_ksrc_compose(wgpt_ksrc_composed *out, const char *enables, const char *shared_label,
                      const char *shared_text, const wgpt_ksrc_file *f, int kernel_index) {
    memset(out, 0, sizeof *out);
    const wgpt_ksrc_kernel *k = &f->kernels[kernel_index];
    size_t ne = strlen(enables), ns = strlen(shared_text), np = f->preamble_end;
    size_t nb = k->body_end - k->body_start;
    out->code = malloc(ne + ns + np + nb + 5);
    if (!out->code) return -1;
    size_t len = 0;
    uint32_t line = 1;
    append_(out, &len, &line, enables, ne, NULL, 1);
    append_(out, &len, &line, shared_text, ns, shared_label, 1);
    append_(out, &len, &line, f->text, np, f->label, 1);
    append_(out, &len, &line, f->text + k->body_start, nb, f->label, k->body_line);
    out->code[len] = 0;
    return 0;
}

void wgpt_ksrc_composed_free(wgpt_ksrc_composed *c) {
    if (!c) return;
    free(c->code);
    memset(c, 0, sizeof *c);
}

int wgpt_ksrc_map_line(const wgpt_ksrc_composed *c, uint32_t line, const char **file, uint32_t *file_line) {
    for (int i = 0; i < c->nseg; i++) {
        const wgpt_line_seg *s = &c->seg[i];
        if (line >= s->first && line < s->first + s->count) {
            *file = s->file;
            *file_line = s->file_first + (line - s->first);
            return 0;
        }
    }
    return -1;
}
