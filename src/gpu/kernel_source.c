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

// The variant part of a marker, "section with A=1, B=2" at [s, s+n), into k
// (base name in *base). Returns 0, or -1 if it is malformed.
static int parse_variant_(const char *s, size_t n, wgpt_ksrc_kernel *k, char *base, size_t basecap) {
    const char *with = " with ";
    const char *w = NULL;
    for (size_t i = 0; i + strlen(with) <= n; i++)
        if (memcmp(s + i, with, strlen(with)) == 0) {
            w = s + i;
            break;
        }
    if (!w || !is_ident_(s, (size_t)(w - s)) || (size_t)(w - s) >= basecap) return -1;
    memcpy(base, s, (size_t)(w - s));
    base[w - s] = 0;
    const char *p = w + strlen(with), *end = s + n;
    k->nconsts = 0;
    for (;;) {
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq || !is_ident_(p, (size_t)(eq - p)) || (size_t)(eq - p) >= sizeof k->consts[0].name ||
            k->nconsts == WGPT_KSRC_MAX_CONSTS)
            return -1;
        wgpt_ksrc_const *c = &k->consts[k->nconsts++];
        memcpy(c->name, p, (size_t)(eq - p));
        c->name[eq - p] = 0;
        const char *v = eq + 1, *comma = memchr(v, ',', (size_t)(end - v));
        const char *vend = comma ? comma : end;
        char num[64];
        if (vend == v || (size_t)(vend - v) >= sizeof num) return -1;
        memcpy(num, v, (size_t)(vend - v));
        num[vend - v] = 0;
        char *stop;
        c->value = strtod(num, &stop);
        if (*stop || stop == num) return -1;
        if (!comma) return 0;
        p = comma + 1;
        if (p < end && *p == ' ') p++;
    }
}

// Parses one line [s, s+n) as a marker. Returns 1 with the name on a section
// marker, 2 with k and *base filled on a variant marker, 3 with *base the
// section on an entry marker (`name in section`), 0 if the line is not a
// marker, -1 if it starts like one but is malformed.
static int parse_marker_(const char *s, size_t n, wgpt_ksrc_kernel *k, char *base, size_t basecap) {
    size_t hl = sizeof MARKER_HEAD - 1;
    if (n < hl || memcmp(s, MARKER_HEAD, hl) != 0) return 0;
    if (n && s[n - 1] == '\r') n--;
    const char *tail = " ---";
    size_t tl = strlen(tail);
    if (n < hl + 1 + tl || s[hl] != ' ' || memcmp(s + n - tl, tail, tl) != 0) return -1;
    const char *nm = s + hl + 1;
    size_t nl = n - hl - 1 - tl;
    const char *eq = memchr(nm, '=', nl), *sp = memchr(nm, ' ', nl);
    if (!eq && sp) {  // an entry marker: "name in section"
        size_t a = (size_t)(sp - nm), bl = nl - a - 4;
        if (nl < a + 5 || memcmp(sp, " in ", 4) != 0 || !is_ident_(nm, a) || a >= sizeof k->name ||
            !is_ident_(sp + 4, bl) || bl >= basecap)
            return -1;
        memcpy(k->name, nm, a);
        k->name[a] = 0;
        memcpy(base, sp + 4, bl);
        base[bl] = 0;
        return 3;
    }
    size_t idl = eq ? (size_t)(eq - nm) : nl;
    if (eq && (idl < 2 || nm[idl - 1] != ' ' || eq + 1 >= nm + nl || eq[1] != ' ')) return -1;
    if (eq) idl--;  // the space before '='
    if (!is_ident_(nm, idl) || idl >= sizeof k->name) return -1;
    memcpy(k->name, nm, idl);
    k->name[idl] = 0;
    if (!eq) return 1;
    return parse_variant_(eq + 2, (size_t)(nm + nl - (eq + 2)), k, base, basecap) < 0 ? -1 : 2;
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
    int cap = 0, last_section = -1;
    char (*bases)[64] = NULL;  // each variant's kernel or entry's section name, resolved at the end
    char *entry = NULL;        // 1: an entry marker
    uint32_t line = 1;
    const char *t = f->text;
    int rc = 0;
    for (const char *p = t; *p && rc == 0;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        wgpt_ksrc_kernel k;
        memset(&k, 0, sizeof k);
        char base[64] = "";
        int m = parse_marker_(p, n, &k, base, sizeof base);
        if (m < 0) {
            rc = wgpt_errf(err, errlen,
                           "%s:%u: malformed kernel marker; write `// --- KERNEL: name ---`, or `// --- KERNEL: "
                           "name = kernel with CONST=number, ... ---` for a variant (at most %d constants), or `// "
                           "--- KERNEL: name in section ---` for another entry point of a section, with "
                           "WGSL identifiers of under 64 characters",
                           label, line, WGPT_KSRC_MAX_CONSTS);
            break;
        }
        if (m > 0) {
            for (int i = 0; i < f->nkernels && rc == 0; i++)
                if (strcmp(f->kernels[i].name, k.name) == 0)
                    rc = wgpt_errf(err, errlen, "%s:%u: kernel '%s' is defined twice", label, line, k.name);
            if (rc) break;
            if (f->nkernels == cap) {
                cap = cap ? cap * 2 : 8;
                wgpt_ksrc_kernel *nk = realloc(f->kernels, (size_t)cap * sizeof *nk);
                char (*nb)[64] = realloc(bases, (size_t)cap * sizeof *nb);
                char *ne = realloc(entry, (size_t)cap);
                if (nk) f->kernels = nk;
                if (nb) bases = nb;
                if (ne) entry = ne;
                if (!nk || !nb || !ne) {
                    rc = wgpt_errf(err, errlen, "%s: out of memory", label);
                    break;
                }
            }
            k.marker_line = line;
            k.base = -1;
            k.host = -1;
            snprintf(bases[f->nkernels], sizeof bases[0], "%s", base);
            entry[f->nkernels] = m == 3;
            if (m == 1) {  // a section: it ends the one before
                if (last_section < 0) f->preamble_end = (size_t)(p - t);
                else f->kernels[last_section].body_end = (size_t)(p - t);
                k.body_start = e ? (size_t)(e + 1 - t) : strlen(t);
                k.body_line = line + 1;
                last_section = f->nkernels;
            }
            f->kernels[f->nkernels++] = k;
        }
        if (!e) break;
        p = e + 1;
        line++;
    }
    if (rc == 0 && last_section < 0)
        rc = wgpt_errf(err, errlen, "%s: no kernel markers (`// --- KERNEL: name ---`) in this file", label);
    if (rc == 0) f->kernels[last_section].body_end = strlen(t);
    for (int i = 0; rc == 0 && i < f->nkernels; i++) {  // entries first: variants may compile them
        if (!entry || !entry[i]) continue;
        wgpt_ksrc_kernel *k = &f->kernels[i];
        for (int j = 0; j < f->nkernels && k->host < 0; j++)
            if (strcmp(f->kernels[j].name, bases[i]) == 0 && !bases[j][0]) k->host = j;
        if (k->host < 0) {
            rc = wgpt_errf(err, errlen, "%s:%u: kernel '%s' is an entry in '%s', which is no section of this file",
                           label, k->marker_line, k->name, bases[i]);
            break;
        }
        k->body_start = f->kernels[k->host].body_start;
        k->body_end = f->kernels[k->host].body_end;
        k->body_line = f->kernels[k->host].body_line;
    }
    for (int i = 0; rc == 0 && i < f->nkernels; i++) {
        if (!bases[i][0] || entry[i]) continue;
        wgpt_ksrc_kernel *k = &f->kernels[i];
        for (int j = 0; j < f->nkernels && k->base < 0; j++)
            if (strcmp(f->kernels[j].name, bases[i]) == 0 && (!bases[j][0] || entry[j])) k->base = j;
        if (k->base < 0) {
            rc = wgpt_errf(err, errlen,
                           "%s:%u: kernel '%s' is a variant of '%s', which is no section or entry of this file",
                           label, k->marker_line, k->name, bases[i]);
            break;
        }
        k->body_start = f->kernels[k->base].body_start;
        k->body_end = f->kernels[k->base].body_end;
        k->body_line = f->kernels[k->base].body_line;
    }
    free(bases);
    free(entry);
    if (rc) wgpt_ksrc_free(f);
    return rc;
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
