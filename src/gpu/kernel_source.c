// kernel_source.c: splitting, composing and line mapping of kernel files.
#include "kernel_source.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

static const char MARKER_HEAD[] = "// --- KERNEL:";
static const char TEMPLATE_HEAD[] = "// --- TEMPLATE:";

static int is_ident_(const char *s, size_t n) {
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return 0;
    return 1;
}

// The variant part of a marker, "base with A=1, B=text" at [s, s+n), into
// k->subs as text (base name in *base); numbers or substitutions are told
// apart when the base is known. Returns 0, or -1 if it is malformed.
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
    k->nsubs = 0;
    for (;;) {
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq || !is_ident_(p, (size_t)(eq - p)) || (size_t)(eq - p) >= sizeof k->subs[0].name ||
            k->nsubs == WGPT_KSRC_MAX_SUBS)
            return -1;
        wgpt_ksrc_sub *c = &k->subs[k->nsubs++];
        memcpy(c->name, p, (size_t)(eq - p));
        c->name[eq - p] = 0;
        const char *v = eq + 1, *comma = memchr(v, ',', (size_t)(end - v));
        const char *vend = comma ? comma : end;
        if ((size_t)(vend - v) >= sizeof c->value || memchr(v, ' ', (size_t)(vend - v))) return -1;
        memcpy(c->value, v, (size_t)(vend - v));  // may be empty: a substitution by nothing
        c->value[vend - v] = 0;
        if (!comma) return 0;
        p = comma + 1;
        if (p < end && *p == ' ') p++;
    }
}

// A variant of a section, entry or instance: its text values as override
// constants.
// Returns 0, or -1 if there are too many or one is not a number.
static int subs_to_consts_(wgpt_ksrc_kernel *k) {
    if (k->nsubs > WGPT_KSRC_MAX_CONSTS) return -1;
    for (int i = 0; i < k->nsubs; i++) {
        char *stop;
        k->consts[i].value = strtod(k->subs[i].value, &stop);
        if (*stop || stop == k->subs[i].value) return -1;
        snprintf(k->consts[i].name, sizeof k->consts[i].name, "%s", k->subs[i].name);
    }
    k->nconsts = k->nsubs;
    k->nsubs = 0;
    return 0;
}

// Parses one line [s, s+n) as a marker. Returns 1 with the name on a section
// marker, 2 with k and *base filled on a variant (or instance) marker, 3 with
// *base the section on an entry marker (`name in section`), 4 with the name
// on a template marker, 0 if the line is not a marker, -1 if it starts like
// one but is malformed.
static int parse_marker_(const char *s, size_t n, wgpt_ksrc_kernel *k, char *base, size_t basecap) {
    size_t hl = sizeof MARKER_HEAD - 1, tl0 = sizeof TEMPLATE_HEAD - 1;
    if (n >= tl0 && memcmp(s, TEMPLATE_HEAD, tl0) == 0) {  // "// --- TEMPLATE: name ---"
        if (n && s[n - 1] == '\r') n--;
        if (n < tl0 + 5 || s[tl0] != ' ' || memcmp(s + n - 4, " ---", 4) != 0) return -1;
        size_t nl = n - tl0 - 5;
        if (!is_ident_(s + tl0 + 1, nl) || nl >= sizeof k->name) return -1;
        memcpy(k->name, s + tl0 + 1, nl);
        k->name[nl] = 0;
        return 4;
    }
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
        if ((n >= sizeof MARKER_HEAD - 1 && memcmp(p, MARKER_HEAD, sizeof MARKER_HEAD - 1) == 0) ||
            (n >= sizeof TEMPLATE_HEAD - 1 && memcmp(p, TEMPLATE_HEAD, sizeof TEMPLATE_HEAD - 1) == 0))
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
    free(f->templates);
    memset(f, 0, sizeof *f);
}

// Checks instance k (marker at line) against template body [b, e): every
// `{{X}}` or `{{?X}}` there must be one of k's substitutions (a switch, X of
// `{{?X}}`, set to 0 or 1), and each of those used.
static int check_instance_(const wgpt_ksrc_kernel *k, const char *b, const char *e, const char *label,
                           const char *tname, char *err, size_t errlen) {
    unsigned used = 0;
    for (const char *p = b; p + 4 <= e; p++) {
        if (p[0] != '{' || p[1] != '{') continue;
        int sw = p[2] == '?';
        const char *n0 = p + 2 + sw, *q = n0;
        while (q < e && (isalnum((unsigned char)*q) || *q == '_')) q++;
        int i = 0;
        while (i < k->nsubs &&
               !(q + 1 < e && q[0] == '}' && q[1] == '}' && strlen(k->subs[i].name) == (size_t)(q - n0) &&
                 memcmp(k->subs[i].name, n0, (size_t)(q - n0)) == 0))
            i++;
        if (i == k->nsubs)
            return wgpt_errf(err, errlen, "%s:%u: kernel '%s': template '%s' holds `%.*s`, which it does not set",
                             label, k->marker_line, k->name, tname, (int)(q + 2 <= e ? q + 2 - p : q - p), p);
        if (sw && strcmp(k->subs[i].value, "0") != 0 && strcmp(k->subs[i].value, "1") != 0)
            return wgpt_errf(err, errlen,
                             "%s:%u: kernel '%s' sets %s=%s, but template '%s' uses it as a switch ({{?%s}}): 0 or 1",
                             label, k->marker_line, k->name, k->subs[i].name, k->subs[i].value, tname,
                             k->subs[i].name);
        used |= 1u << i;
        p = q + 1;
    }
    for (int i = 0; i < k->nsubs; i++)
        if (!(used >> i & 1))
            return wgpt_errf(err, errlen, "%s:%u: kernel '%s' sets %s, which template '%s' does not use ({{%s}})",
                             label, k->marker_line, k->name, k->subs[i].name, tname, k->subs[i].name);
    return 0;
}

// Grows f->kernels (or f->templates) and the side arrays to hold one more.
static int grow_(wgpt_ksrc_kernel **arr, int n, int *cap, char (**bases)[64], char **entry) {
    if (n < *cap) return 0;
    int nc = *cap ? *cap * 2 : 8;
    wgpt_ksrc_kernel *nk = realloc(*arr, (size_t)nc * sizeof *nk);
    if (nk) *arr = nk;
    if (bases) {
        char (*nb)[64] = realloc(*bases, (size_t)nc * sizeof *nb);
        char *ne = realloc(*entry, (size_t)nc);
        if (nb) *bases = nb;
        if (ne) *entry = ne;
        if (!nb || !ne) return -1;
    }
    if (!nk) return -1;
    *cap = nc;
    return 0;
}

// The index of template name in f->templates, or -1.
static int tmpl_index_(const wgpt_ksrc_file *f, const char *name) {
    for (int j = 0; j < f->ntemplates; j++)
        if (strcmp(f->templates[j].name, name) == 0) return j;
    return -1;
}

// Resolves the entries, variants and instances of f once every marker is read.
static int resolve_(wgpt_ksrc_file *f, const char *label, char (*bases)[64], const char *entry, char *err,
                    size_t errlen) {
    for (int i = 0; i < f->nkernels; i++) {  // entries first: variants may compile them
        if (!entry[i]) continue;
        wgpt_ksrc_kernel *k = &f->kernels[i];
        for (int j = 0; j < f->nkernels && k->host < 0; j++)
            if (strcmp(f->kernels[j].name, bases[i]) == 0 && !bases[j][0]) k->host = j;
        if (k->host < 0)
            return wgpt_errf(err, errlen, "%s:%u: kernel '%s' is an entry in '%s', which is no section of this file",
                             label, k->marker_line, k->name, bases[i]);
        k->body_start = f->kernels[k->host].body_start;
        k->body_end = f->kernels[k->host].body_end;
        k->body_line = f->kernels[k->host].body_line;
    }
    for (int i = 0; i < f->nkernels; i++) {  // instances next: variants may compile them too
        if (!bases[i][0] || entry[i]) continue;
        wgpt_ksrc_kernel *k = &f->kernels[i];
        k->tmpl = tmpl_index_(f, bases[i]);
        if (k->tmpl < 0) continue;
        const wgpt_ksrc_kernel *t = &f->templates[k->tmpl];
        if (check_instance_(k, f->text + t->body_start, f->text + t->body_end, label, t->name, err, errlen)) return -1;
        k->body_start = t->body_start;
        k->body_end = t->body_end;
        k->body_line = t->body_line;
    }
    for (int i = 0; i < f->nkernels; i++) {
        if (!bases[i][0] || entry[i] || f->kernels[i].tmpl >= 0) continue;
        wgpt_ksrc_kernel *k = &f->kernels[i];
        for (int j = 0; j < f->nkernels && k->base < 0; j++)
            if (strcmp(f->kernels[j].name, bases[i]) == 0 &&
                (!bases[j][0] || entry[j] || tmpl_index_(f, bases[j]) >= 0))
                k->base = j;
        if (k->base < 0)
            return wgpt_errf(err, errlen,
                             "%s:%u: kernel '%s' is a variant of '%s', which is no section, entry, instance or "
                             "template of this file",
                             label, k->marker_line, k->name, bases[i]);
        if (subs_to_consts_(k) < 0)
            return wgpt_errf(err, errlen,
                             "%s:%u: malformed variant '%s': a variant of a section, entry or instance sets at "
                             "most %d override constants, each to a number",
                             label, k->marker_line, k->name, WGPT_KSRC_MAX_CONSTS);
        const wgpt_ksrc_kernel *from = &f->kernels[k->base];
        k->body_start = from->body_start;
        k->body_end = from->body_end;
        k->body_line = from->body_line;
        k->tmpl = from->tmpl;  // a variant of an instance: the instance's text, its own constants
        k->nsubs = from->nsubs;
        memcpy(k->subs, from->subs, sizeof k->subs);
    }
    return 0;
}

int wgpt_ksrc_parse(wgpt_ksrc_file *f, const char *label, const char *text, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    f->label = strdup(label);
    f->text = strdup(text);
    if (!f->label || !f->text) {
        wgpt_ksrc_free(f);
        return wgpt_errf(err, errlen, "%s: out of memory", label);
    }
    int cap = 0, tcap = 0;
    wgpt_ksrc_kernel *open = NULL;  // the section or template whose body runs to the next one
    int open_k = -1, open_t = -1;   // its index (kernels[] or templates[]): the arrays may move
    char (*bases)[64] = NULL;       // each variant's kernel or entry's section name, resolved at the end
    char *entry = NULL;             // 1: an entry marker
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
                           "--- KERNEL: name in section ---` for another entry point of a section, or `// --- "
                           "TEMPLATE: name ---` and `// --- KERNEL: name = template with X=text, ... ---` for a "
                           "template and its instance (at most %d substitutions, no spaces or commas), with "
                           "WGSL identifiers of under 64 characters",
                           label, line, WGPT_KSRC_MAX_CONSTS, WGPT_KSRC_MAX_SUBS);
            break;
        }
        if (m > 0) {
            for (int i = 0; i < f->nkernels && rc == 0; i++)
                if (strcmp(f->kernels[i].name, k.name) == 0)
                    rc = wgpt_errf(err, errlen, "%s:%u: kernel '%s' is defined twice", label, line, k.name);
            for (int i = 0; i < f->ntemplates && rc == 0; i++)
                if (strcmp(f->templates[i].name, k.name) == 0)
                    rc = wgpt_errf(err, errlen, "%s:%u: '%s' is already a template of this file", label, line, k.name);
            if (rc) break;
            if (m == 4 ? grow_(&f->templates, f->ntemplates, &tcap, NULL, NULL)
                       : grow_(&f->kernels, f->nkernels, &cap, &bases, &entry)) {
                rc = wgpt_errf(err, errlen, "%s: out of memory", label);
                break;
            }
            k.marker_line = line;
            k.base = -1;
            k.host = -1;
            k.tmpl = -1;
            if (m == 1 || m == 4) {  // a section or template: it ends the one before
                open = open_k >= 0 ? &f->kernels[open_k] : open_t >= 0 ? &f->templates[open_t] : NULL;
                if (!open) f->preamble_end = (size_t)(p - t);
                else open->body_end = (size_t)(p - t);
                k.body_start = e ? (size_t)(e + 1 - t) : strlen(t);
                k.body_line = line + 1;
                open_k = m == 1 ? f->nkernels : -1;
                open_t = m == 4 ? f->ntemplates : -1;
            }
            if (m == 4) {
                f->templates[f->ntemplates++] = k;
            } else {
                snprintf(bases[f->nkernels], sizeof bases[0], "%s", base);
                entry[f->nkernels] = m == 3;
                f->kernels[f->nkernels++] = k;
            }
        }
        if (!e) break;
        p = e + 1;
        line++;
    }
    open = open_k >= 0 ? &f->kernels[open_k] : open_t >= 0 ? &f->templates[open_t] : NULL;
    if (rc == 0 && !open)
        rc = wgpt_errf(err, errlen, "%s: no kernel markers (`// --- KERNEL: name ---`) in this file", label);
    if (rc == 0) open->body_end = strlen(t);
    if (rc == 0) rc = resolve_(f, label, bases, entry, err, errlen);
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

// Instance k's text of template body [s, s+n), each `{{X}}` replaced by its
// value, and each `{{?X}}` by nothing where X is 1, else with the rest of its
// line (its newline kept, so lines still map); parse checked that k sets
// them all. Into out (NULL: only counts). Returns its length.
static size_t expand_(const char *s, size_t n, const wgpt_ksrc_kernel *k, char *out) {
    size_t len = 0;
    for (size_t i = 0; i < n;) {
        const wgpt_ksrc_sub *hit = NULL;
        size_t sw = s[i] == '{' && i + 2 < n && s[i + 1] == '{' && s[i + 2] == '?';
        if (s[i] == '{' && i + 1 < n && s[i + 1] == '{')
            for (int j = 0; j < k->nsubs && !hit; j++) {
                size_t l = strlen(k->subs[j].name);
                if (i + 4 + sw + l <= n && memcmp(s + i + 2 + sw, k->subs[j].name, l) == 0 &&
                    s[i + 2 + sw + l] == '}' && s[i + 3 + sw + l] == '}')
                    hit = &k->subs[j];
            }
        if (hit && sw) {  // a switch: the line goes on, or its rest goes
            i += 5 + strlen(hit->name);
            if (strcmp(hit->value, "1") != 0)
                while (i < n && s[i] != '\n') i++;
            continue;
        }
        if (hit) {
            size_t vl = strlen(hit->value);
            if (out) memcpy(out + len, hit->value, vl);
            len += vl;
            i += 4 + strlen(hit->name);
        } else {
            if (out) out[len] = s[i];
            len++;
            i++;
        }
    }
    return len;
}

int wgpt_ksrc_compose(wgpt_ksrc_composed *out, const char *enables, const char *shared_label,
                      const char *shared_text, const wgpt_ksrc_file *f, int kernel_index) {
    memset(out, 0, sizeof *out);
    const wgpt_ksrc_kernel *k = &f->kernels[kernel_index];
    size_t ne = strlen(enables), ns = strlen(shared_text), np = f->preamble_end;
    const char *body = f->text + k->body_start;
    size_t nb = k->body_end - k->body_start;
    char *inst = NULL;
    if (k->tmpl >= 0) {
        nb = expand_(body, nb, k, NULL);
        inst = malloc(nb + 1);
        if (!inst) return -1;
        expand_(body, k->body_end - k->body_start, k, inst);
        body = inst;
    }
    out->code = malloc(ne + ns + np + nb + 5);
    if (!out->code) {
        free(inst);
        return -1;
    }
    size_t len = 0;
    uint32_t line = 1;
    append_(out, &len, &line, enables, ne, NULL, 1);
    append_(out, &len, &line, shared_text, ns, shared_label, 1);
    append_(out, &len, &line, f->text, np, f->label, 1);
    append_(out, &len, &line, body, nb, f->label, k->body_line);
    out->code[len] = 0;
    free(inst);
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
