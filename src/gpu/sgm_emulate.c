// sgm_emulate.c: subgroup matrices emulated with subgroup broadcasts (see
// sgm_emulate.h). A source rewrite, not a second copy of the kernels: the
// tensor-core files run as written, only their matrix types and builtins
// become plain WGSL.
#include "sgm_emulate.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int wgpt_sgm_emulate_info(wgpt_gpu_info *in, char *err, size_t errlen) {
    if (!in->has_f16) {
        snprintf(err, errlen, "emulated subgroup matrices (WGPT_SGM_EMULATE) need shader-f16, which '%s' lacks",
                 in->name);
        return -1;
    }
    // (each lane holds whole rows of the 16-row fragments)
    if (in->subgroup_min != in->subgroup_max || in->subgroup_min == 0 || WGPT_SGM_EMU_M % in->subgroup_min) {
        snprintf(err, errlen, "emulated subgroup matrices (WGPT_SGM_EMULATE) need one subgroup size dividing %u; "
                 "'%s' has %u-%u", WGPT_SGM_EMU_M, in->name, in->subgroup_min, in->subgroup_max);
        return -1;
    }
    in->has_subgroup_matrix = 1;
    in->sgm_emulated = 1;
    in->n_matrix_configs = 1;
    in->matrix_configs[0] = (wgpt_matrix_config){WGPT_MATRIX_F16, WGPT_MATRIX_F32, WGPT_SGM_EMU_M, WGPT_SGM_EMU_N,
                                                 WGPT_SGM_EMU_K, in->subgroup_min, in->subgroup_max};
    return 0;
}

// A growing string.
typedef struct str_ {
    char *s;
    size_t n, cap;
    int oom;
} str_;

static void put_(str_ *o, const char *s, size_t n) {
    if (o->oom) return;
    if (o->n + n + 1 > o->cap) {
        size_t cap = (o->n + n + 1) * 2;
        char *p = realloc(o->s, cap);
        if (!p) {
            o->oom = 1;
            return;
        }
        o->s = p, o->cap = cap;
    }
    memcpy(o->s + o->n, s, n);
    o->n += n;
    o->s[o->n] = 0;
}

static void puts_(str_ *o, const char *s) { put_(o, s, strlen(s)); }

static void putf_(str_ *o, const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf) {
        o->oom = 1;
        return;
    }
    put_(o, buf, (size_t)n);
}

#define MAX_TYPES 8
#define MAX_ALIASES 16
#define MAX_FNS 32
#define ARG 256  // characters of one argument

enum { LEFT, RIGHT, RESULT };

// What a generated function is, where it is not a load of matrix type i (>= 0).
enum { FN_STORE = -1, FN_READ_F32 = -2, FN_READ_F16 = -3, FN_WRITE = -4 };

// A matrix type: kind, scalar, rows and columns (numbers: the template's
// arguments resolved), and values a lane (per).
typedef struct mtype_ {
    int kind, f16;
    unsigned rows, cols, per;
} mtype_;

typedef struct rewrite_ {
    const char *code;
    const wgpt_matrix_config *cfg;
    mtype_ types[MAX_TYPES];
    int ntypes;
    char alias[MAX_ALIASES][64];
    int alias_type[MAX_ALIASES];
    int naliases;
    // generated functions: loads (matrix type, layout, array), stores, and
    // the scalar readers and writers they call (FN_*, layout, array)
    struct {
        int type, col;
        char array[64];
    } fns[MAX_FNS];
    int nfns;
    str_ helpers;
    char *err;
    size_t errlen;
    int failed;
} rewrite_;

static int fail_(rewrite_ *r, const char *fmt, ...) {
    if (r->failed) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, r->errlen, fmt, ap);
    va_end(ap);
    r->failed = 1;
    return -1;
}

static int ident_char_(char c) { return isalnum((unsigned char)c) || c == '_'; }

// 1 if the identifier `word` starts at p (not inside a longer one).
static int word_at_(const char *code, const char *p, const char *word) {
    size_t n = strlen(word);
    return strncmp(p, word, n) == 0 && (p == code || !ident_char_(p[-1])) && !ident_char_(p[n]);
}

// Splits the bracketed list whose opening bracket (`open`: '<' or '(') is at
// p at its top-level commas into at most max trimmed arguments; returns the
// character after the closing bracket, or NULL. Template lists count < >
// depth, call lists ( ) and [ ].
static const char *split_(rewrite_ *r, const char *p, char open, char args[][ARG], int max, int *nargs) {
    if (*p != open) return fail_(r, "expected '%c' at: %.40s", open, p), NULL;
    int depth = 0, n = 0;
    const char *start = p + 1;
    for (const char *q = p; *q; q++) {
        int opens = open == '<' ? *q == '<' : (*q == '(' || *q == '[');
        int closes = open == '<' ? *q == '>' : (*q == ')' || *q == ']');
        if (opens) {
            depth++;
            continue;
        }
        int end = closes && --depth == 0;
        if (!end && !(*q == ',' && depth == 1)) continue;
        while (isspace((unsigned char)*start)) start++;
        size_t len = (size_t)(q - start);
        while (len && isspace((unsigned char)start[len - 1])) len--;
        if (len || !end || n) {  // (an empty list has no arguments)
            if (n >= max || len >= ARG) return fail_(r, "too many or too long arguments at: %.60s", p), NULL;
            memcpy(args[n], start, len);
            args[n++][len] = 0;
        }
        start = q + 1;
        if (end) {
            *nargs = n;
            return q + 1;
        }
    }
    return fail_(r, "unbalanced '%c' at: %.60s", open, p), NULL;
}

// A matrix dimension as written: a literal, or one of the constants the
// engine writes (SGM_TM, SGM_TN, SGM_TK: the configuration's).
static int dim_(rewrite_ *r, const char *text, unsigned *out) {
    char *end;
    unsigned long v = strtoul(text, &end, 10);
    if (end != text && (!*end || !strcmp(end, "u")) && v > 0 && v <= 64) return *out = (unsigned)v, 0;
    if (!strcmp(text, "SGM_TM")) return *out = r->cfg->m, 0;
    if (!strcmp(text, "SGM_TN")) return *out = r->cfg->n, 0;
    if (!strcmp(text, "SGM_TK")) return *out = r->cfg->k, 0;
    return fail_(r, "matrix dimension '%s': emulated ones are literals or SGM_TM, SGM_TN, SGM_TK", text);
}

// The type index of `subgroup_matrix_<kind><...>` at p (recorded if new);
// *end after it; -1 on failure.
static int parse_type_(rewrite_ *r, const char *p, const char **end) {
    int kind = strncmp(p, "subgroup_matrix_left", 20) == 0    ? LEFT
               : strncmp(p, "subgroup_matrix_right", 21) == 0 ? RIGHT
                                                               : RESULT;
    const char *lt = strchr(p, '<');
    char a[3][ARG];
    int n;
    *end = lt ? split_(r, lt, '<', a, 3, &n) : NULL;
    if (!*end) return -1;
    if (n != 3) return fail_(r, "a matrix type needs <scalar, columns, rows>: %.60s", p);
    if (strcmp(a[0], "f16") != 0 && strcmp(a[0], "f32") != 0)
        return fail_(r, "emulated subgroup matrices hold f16 or f32, not %s", a[0]);
    mtype_ t = {kind, !strcmp(a[0], "f16"), 0, 0, 0};
    if (dim_(r, a[1], &t.cols) < 0 || dim_(r, a[2], &t.rows) < 0) return -1;
    unsigned sg = r->cfg->sg_max;
    if (t.rows % sg) return fail_(r, "a matrix of %u rows in subgroups of %u: emulated ones give each lane whole rows",
                                  t.rows, sg);
    t.per = t.rows * t.cols / sg;
    for (int i = 0; i < r->ntypes; i++)
        if (!memcmp(&r->types[i], &t, sizeof t)) return i;
    for (int i = 0; i < r->ntypes; i++)
        if (r->types[i].kind == kind) return fail_(r, "two %s matrix types: the emulation takes one a kind",
                                                   kind == LEFT ? "left" : kind == RIGHT ? "right" : "result");
    if (r->ntypes == MAX_TYPES) return fail_(r, "more than %d matrix types", MAX_TYPES);
    r->types[r->ntypes] = t;
    return r->ntypes++;
}

static int is_matrix_type_(const char *code, const char *p) {
    return word_at_(code, p, "subgroup_matrix_left") || word_at_(code, p, "subgroup_matrix_right") ||
           word_at_(code, p, "subgroup_matrix_result");
}

// The type a load names: an alias of a matrix type, or the type itself.
static int type_of_(rewrite_ *r, const char *text) {
    for (int i = 0; i < r->naliases; i++)
        if (!strcmp(r->alias[i], text)) return r->alias_type[i];
    const char *end;
    if (is_matrix_type_(text, text)) return parse_type_(r, text, &end);
    return fail_(r, "subgroupMatrixLoad of '%s': not a matrix type or an alias of one", text);
}

// The type of `kind`, or -1.
static int kind_type_(const rewrite_ *r, int kind) {
    for (int i = 0; i < r->ntypes; i++)
        if (r->types[i].kind == kind) return i;
    return -1;
}

// Every `alias X = subgroup_matrix_...;` of the code, so loads may name X.
static void collect_aliases_(rewrite_ *r) {
    for (const char *p = r->code; (p = strstr(p, "alias ")) != NULL; p++) {
        if (!word_at_(r->code, p, "alias")) continue;
        const char *q = p + 6;
        while (isspace((unsigned char)*q)) q++;
        size_t len = 0;
        while (ident_char_(q[len])) len++;
        const char *eq = q + len;
        while (isspace((unsigned char)*eq)) eq++;
        if (*eq != '=' || len == 0 || len >= sizeof r->alias[0]) continue;
        eq++;
        while (isspace((unsigned char)*eq)) eq++;
        if (!is_matrix_type_(r->code, eq)) continue;
        const char *end;
        int t = parse_type_(r, eq, &end);
        if (t < 0) return;
        if (r->naliases == MAX_ALIASES) {
            fail_(r, "more than %d matrix aliases", MAX_ALIASES);
            return;
        }
        memcpy(r->alias[r->naliases], q, len);
        r->alias[r->naliases][len] = 0;
        r->alias_type[r->naliases++] = t;
    }
}

// The element of the module-scope array `name` (its `var` declaration):
// scalar ("f32", "f16", "u32") and components a element (1 for a scalar).
static int array_elem_(rewrite_ *r, const char *name, char scalar[8], int *comps) {
    for (const char *p = r->code; (p = strstr(p, "var<")) != NULL; p++) {
        if (!word_at_(r->code, p, "var")) continue;
        const char *q = strchr(p, '>');
        if (!q) break;
        q++;
        while (isspace((unsigned char)*q)) q++;
        size_t len = strlen(name);
        if (strncmp(q, name, len) != 0 || ident_char_(q[len])) continue;
        q += len;
        while (isspace((unsigned char)*q) || *q == ':') q++;
        if (strncmp(q, "array<", 6) != 0) return fail_(r, "'%s' is not an array", name);
        q += 6;
        while (isspace((unsigned char)*q)) q++;
        static const struct {
            const char *text;
            const char *scalar;
            int comps;
        } elems[] = {{"f32", "f32", 1},       {"f16", "f16", 1},       {"u32", "u32", 1},       {"vec2<f32>", "f32", 2},
                     {"vec4<f32>", "f32", 4}, {"vec2<f16>", "f16", 2}, {"vec4<f16>", "f16", 4}, {"vec2<u32>", "u32", 2},
                     {"vec4<u32>", "u32", 4}, {"vec2f", "f32", 2},     {"vec4f", "f32", 4},     {"vec2h", "f16", 2},
                     {"vec4h", "f16", 4},     {"vec2u", "u32", 2},     {"vec4u", "u32", 4}};
        for (size_t i = 0; i < sizeof elems / sizeof elems[0]; i++) {
            size_t n = strlen(elems[i].text);
            if (strncmp(q, elems[i].text, n) == 0 && !ident_char_(q[n]) && q[n] != '<') {
                snprintf(scalar, 8, "%s", elems[i].scalar);
                *comps = elems[i].comps;
                return 0;
            }
        }
        return fail_(r, "'%s': arrays of %.20s are not emulated (f32, f16, u32 and their vec2/vec4)", name, q);
    }
    return fail_(r, "no module-scope `var` named '%s' (emulated matrix loads and stores take &array)", name);
}

// The array a matrix builtin's first argument points to: `&name` or `&(name)`.
static int pointee_(rewrite_ *r, const char *arg, char name[64]) {
    const char *p = arg;
    if (*p++ != '&') return fail_(r, "a matrix load or store from '%s': emulated ones take &array", arg);
    while (*p == '(' || isspace((unsigned char)*p)) p++;
    size_t len = 0;
    while (ident_char_(p[len])) len++;
    const char *rest = p + len;
    while (*rest == ')' || isspace((unsigned char)*rest)) rest++;
    if (!len || len >= 64 || *rest) return fail_(r, "a matrix load or store from '%s': emulated ones take &array", arg);
    memcpy(name, p, len);
    name[len] = 0;
    return 0;
}

// A generated function's index for (type, layout, array), made by gen on
// first use.
typedef int (*gen_fn_)(rewrite_ *r, int k, int type, int col_major, const char *array);

static int fn_(rewrite_ *r, int type, int col_major, const char *array, gen_fn_ gen) {
    for (int i = 0; i < r->nfns; i++)
        if (r->fns[i].type == type && r->fns[i].col == col_major && !strcmp(r->fns[i].array, array)) return i;
    if (r->nfns == MAX_FNS) return fail_(r, "more than %d emulated loads and stores", MAX_FNS);
    int k = r->nfns++;
    r->fns[k].type = type, r->fns[k].col = col_major;
    snprintf(r->fns[k].array, sizeof r->fns[k].array, "%s", array);
    return gen(r, k, type, col_major, array) < 0 ? -1 : k;
}

// The scalar of matrix position (r, c) in the memory a load or store sees:
// element e and scalar q in it, for off and stride (in the array's elements)
// and `per_elem` matrix scalars an element.
static void address_(str_ *o, int col_major, int per_elem) {
    putf_(o, "    let major = %s; let minor = %s;\n", col_major ? "c" : "r", col_major ? "r" : "c");
    putf_(o, "    let e = off + major * stride + minor / %du; let q = minor %% %du;\n", per_elem, per_elem);
}

// How the scalar (or word, j) of element e is named.
static void elem_ref_(char *buf, size_t cap, const char *array, int comps, const char *j) {
    if (comps == 1) snprintf(buf, cap, "%s[e]", array);
    else snprintf(buf, cap, "%s[e][%s]", array, j);
}

// Reader (type FN_READ_F32 or FN_READ_F16: the matrix's scalar) of one scalar
// of `array` as f32, for loads that cannot read whole elements (whole_elems_
// has checked the scalars).
static int gen_read_(rewrite_ *r, int k, int type, int col_major, const char *array) {
    int f16 = type == FN_READ_F16, comps;
    char scalar[8], ref[160];
    if (array_elem_(r, array, scalar, &comps) < 0) return -1;
    int packed = f16 && !strcmp(scalar, "u32");  // two halves a u32
    str_ *o = &r->helpers;
    putf_(o, "fn sgm_emu_fn%d(off: u32, stride: u32, r: u32, c: u32) -> f32 {\n", k);
    address_(o, col_major, packed ? 2 * comps : comps);
    elem_ref_(ref, sizeof ref, array, comps, packed ? "q / 2u" : "q");
    if (packed) putf_(o, "    return unpack2x16float(%s)[q %% 2u];\n}\n", ref);
    else if (!strcmp(scalar, "u32")) putf_(o, "    return bitcast<f32>(%s);\n}\n", ref);
    else putf_(o, "    return f32(%s);\n}\n", ref);
    return 0;
}

// Writer of one f32 value (the result matrix's scalar) into `array`, for
// stores that cannot write whole elements (whole_elems_ has checked them).
static int gen_write_(rewrite_ *r, int k, int type, int col_major, const char *array) {
    int comps;
    char scalar[8], ref[160];
    (void)type;
    if (array_elem_(r, array, scalar, &comps) < 0) return -1;
    str_ *o = &r->helpers;
    putf_(o, "fn sgm_emu_fn%d(off: u32, stride: u32, r: u32, c: u32, x: f32) {\n", k);
    address_(o, col_major, comps);
    elem_ref_(ref, sizeof ref, array, comps, "q");
    if (!strcmp(scalar, "u32")) putf_(o, "    %s = bitcast<u32>(x);\n}\n", ref);
    else putf_(o, "    %s = %s(x);\n}\n", ref, scalar);
    return 0;
}

// The memory a load (store: 0) or store (1) of a matrix (f16 or f32, cols
// columns) touches in `array`: -1 where the scalars do not go together (an
// f16 matrix from f32 memory, an f32 one from f16, an f16 result into
// anything but f16); else the vector elements a row-major row reads or writes
// whole (comps > 1, the row a whole number of them), or 0: scalar by scalar.
// *per_elem: the matrix scalars in one element (two halves a u32).
static int whole_elems_(rewrite_ *r, const char *array, int store, int col_major, int f16, unsigned cols, int *comps,
                        char scalar[8], int *per_elem) {
    if (array_elem_(r, array, scalar, comps) < 0) return -1;
    if (!store && f16 && !strcmp(scalar, "f32"))
        return fail_(r, "an f16 matrix loaded from '%s', an array of f32", array);
    if (!store && !f16 && !strcmp(scalar, "f16"))
        return fail_(r, "an f32 matrix loaded from '%s', an array of f16", array);
    if (store && f16 && strcmp(scalar, "f16") != 0)
        return fail_(r, "an f16 result stored to '%s': emulated only into arrays of f16", array);
    *per_elem = f16 && !strcmp(scalar, "u32") ? 2 * *comps : *comps;
    if (col_major || *comps == 1 || cols % (unsigned)*per_elem) return 0;
    return (int)(cols / (unsigned)*per_elem);
}

// A load of `type`: each lane reads its whole rows, slot by slot (unrolled:
// constant indices), a row-major row as whole vector elements where it can
// (fewer memory accesses: test_linear_f16's first compiles, which lavapipe's
// LLVM spends in its coroutine pass, took 2 min 52 s instead of 4 min).
static int gen_load_(rewrite_ *r, int k, int type, int col_major, const char *array) {
    const mtype_ *t = &r->types[type];
    int comps, per_elem;
    char scalar[8];
    int whole = whole_elems_(r, array, 0, col_major, t->f16, t->cols, &comps, scalar, &per_elem);
    if (whole < 0) return -1;
    int rd = whole ? 0 : fn_(r, t->f16 ? FN_READ_F16 : FN_READ_F32, col_major, array, gen_read_);
    if (rd < 0) return -1;
    str_ *o = &r->helpers;
    unsigned rows = t->per / t->cols;
    putf_(o, "fn sgm_emu_fn%d(off: u32, stride: u32) -> SgmEmu%d {\n    var m: SgmEmu%d;\n", k, type, type);
    putf_(o, "    let row = sgm_emu_lane() * %uu;\n", rows);
    if (whole) {
        static const char xyzw[] = "xyzw";
        for (unsigned i = 0; i < rows; i++)
            for (int w = 0; w < whole; w++) {
                putf_(o, "    let x%u_%d = %s[off + (row + %uu) * stride + %du];\n", i, w, array, i, w);
                for (int q = 0; q < per_elem; q++) {
                    unsigned slot = i * t->cols + (unsigned)(w * per_elem + q);
                    if (per_elem != comps)  // packed halves
                        putf_(o, "    m.v[%u] = unpack2x16float(x%u_%d.%c)[%d];\n", slot, i, w, xyzw[q / 2], q % 2);
                    else if (!strcmp(scalar, "u32"))
                        putf_(o, "    m.v[%u] = bitcast<f32>(x%u_%d.%c);\n", slot, i, w, xyzw[q]);
                    else
                        putf_(o, "    m.v[%u] = f32(x%u_%d.%c);\n", slot, i, w, xyzw[q]);
                }
            }
    } else {
        for (unsigned s = 0; s < t->per; s++)
            putf_(o, "    m.v[%u] = sgm_emu_fn%d(off, stride, row + %uu, %uu);\n", s, rd, s / t->cols, s % t->cols);
    }
    puts_(o, "    return m;\n}\n");
    return 0;
}

// A store of the result type (the only kind the kernels store; another
// type's value is a WGSL type error here), whole vector elements where it can.
static int gen_store_(rewrite_ *r, int k, int type, int col_major, const char *array) {
    (void)type;
    int rt = kind_type_(r, RESULT);
    if (rt < 0) return fail_(r, "a matrix store, and no result matrix type to store");
    const mtype_ *t = &r->types[rt];
    int comps, per_elem;
    char scalar[8];
    int whole = whole_elems_(r, array, 1, col_major, t->f16, t->cols, &comps, scalar, &per_elem);
    if (whole < 0) return -1;
    int wr = whole ? 0 : fn_(r, FN_WRITE, col_major, array, gen_write_);
    if (wr < 0) return -1;
    str_ *o = &r->helpers;
    unsigned rows = t->per / t->cols;
    putf_(o, "fn sgm_emu_fn%d(off: u32, m: SgmEmu%d, stride: u32) {\n", k, rt);
    putf_(o, "    let row = sgm_emu_lane() * %uu;\n", rows);
    if (whole) {
        const char *cast = !strcmp(scalar, "u32") ? "bitcast<u32>" : scalar;
        for (unsigned i = 0; i < rows; i++)
            for (int w = 0; w < whole; w++) {
                putf_(o, "    %s[off + (row + %uu) * stride + %du] = vec%d<%s>(", array, i, w, comps, scalar);
                for (int q = 0; q < comps; q++)
                    putf_(o, "%s%s(m.v[%u])", q ? ", " : "", cast, i * t->cols + (unsigned)(w * comps + q));
                puts_(o, ");\n");
            }
    } else {
        for (unsigned s = 0; s < t->per; s++)
            putf_(o, "    sgm_emu_fn%d(off, stride, row + %uu, %uu, m.v[%u]);\n", wr, s / t->cols, s % t->cols, s);
    }
    puts_(o, "}\n");
    return 0;
}

// The layout template argument: 0 row_major, 1 col_major, -1 neither.
static int layout_(rewrite_ *r, const char *text) {
    if (!strcmp(text, "row_major")) return 0;
    if (!strcmp(text, "col_major")) return 1;
    return fail_(r, "matrix layout '%s': row_major or col_major", text);
}

// The structs, the lane and the multiply-accumulate: each lane holds the same
// rows of a and of the result, so c (i, j) += a (i, k) b (k, j) needs only b's
// row k from its owner, one broadcast a value; sums in order of k, in f32
// (exact products of f16 values), unrolled.
static int common_helpers_(rewrite_ *r, str_ *o) {
    puts_(o, "\n// --- subgroup matrices emulated (src/gpu/sgm_emulate.c) ---\n");
    for (int i = 0; i < r->ntypes; i++)
        putf_(o, "struct SgmEmu%d { v: array<f32, %u>, }  // %u x %u %s, whole rows a lane\n", i, r->types[i].per,
              r->types[i].rows, r->types[i].cols, r->types[i].f16 ? "f16" : "f32");
    puts_(o, "// all lanes take part in every matrix call, so this is subgroup_invocation_id\n"
             "fn sgm_emu_lane() -> u32 { return subgroupExclusiveAdd(1u); }\n");
    int lt = kind_type_(r, LEFT), rt = kind_type_(r, RIGHT), ct = kind_type_(r, RESULT);
    if (lt < 0 || rt < 0 || ct < 0) return 0;  // no multiply possible
    const mtype_ *a = &r->types[lt], *b = &r->types[rt], *c = &r->types[ct];
    if (a->cols != b->rows || a->rows != c->rows || b->cols != c->cols)
        return fail_(r, "matrix shapes %ux%u, %ux%u, %ux%u do not multiply", a->rows, a->cols, b->rows, b->cols,
                     c->rows, c->cols);
    unsigned rows = c->per / c->cols;  // a lane's rows
    putf_(o, "fn sgm_emu_mma(a: SgmEmu%d, b: SgmEmu%d, c: SgmEmu%d) -> SgmEmu%d {\n    var o = c;\n    var x: f32;\n",
          lt, rt, ct, ct);
    for (unsigned k = 0; k < a->cols; k++)
        for (unsigned j = 0; j < b->cols; j++) {
            unsigned e = k * b->cols + j;
            putf_(o, "    x = subgroupBroadcast(b.v[%u], %uu);\n", e % b->per, e / b->per);
            for (unsigned i = 0; i < rows; i++)
                putf_(o, "    o.v[%u] += a.v[%u] * x;\n", i * c->cols + j, i * a->cols + k);
        }
    if (c->f16)
        for (unsigned s = 0; s < c->per; s++) putf_(o, "    o.v[%u] = f32(f16(o.v[%u]));\n", s, s);
    puts_(o, "    return o;\n}\n");
    return 0;
}

// Rewrites one matrix builtin call at p into o; returns the character after it.
static const char *call_(rewrite_ *r, const char *p, str_ *o) {
    char t[2][ARG], a[4][ARG], array[64];
    int nt, na;
    if (word_at_(r->code, p, "subgroupMatrixMultiplyAccumulate")) {
        puts_(o, "sgm_emu_mma");
        return p + strlen("subgroupMatrixMultiplyAccumulate");
    }
    int load = word_at_(r->code, p, "subgroupMatrixLoad"), store = word_at_(r->code, p, "subgroupMatrixStore");
    if (!load && !store) {
        size_t len = 0;
        while (ident_char_(p[len])) len++;
        return fail_(r, "'%.*s' is not emulated (only subgroupMatrixLoad, Store, MultiplyAccumulate)", (int)len, p),
               NULL;
    }
    const char *q = p + (load ? 18 : 19);
    if (*q != '<') return fail_(r, "%s without its layout template argument (the deprecated form)",
                                load ? "subgroupMatrixLoad" : "subgroupMatrixStore"), NULL;
    q = split_(r, q, '<', t, 2, &nt);
    if (!q) return NULL;
    q = split_(r, q, '(', a, 4, &na);
    if (!q) return NULL;
    if (load ? nt != 2 || na != 3 : nt != 1 || na != 4)
        return fail_(r, "%s with %d template and %d call arguments (emulated: %s)",
                     load ? "subgroupMatrixLoad" : "subgroupMatrixStore", nt, na,
                     load ? "<type, layout>(&array, offset, stride)" : "<layout>(&array, offset, value, stride)"), NULL;
    for (int i = 1; i < na; i++)
        if (strstr(a[i], "subgroupMatrix")) return fail_(r, "a matrix call inside a matrix call's argument"), NULL;
    if (pointee_(r, a[0], array) < 0) return NULL;
    int col = layout_(r, t[load ? 1 : 0]);
    if (col < 0) return NULL;
    int fn;
    if (load) {
        int type = type_of_(r, t[0]);
        if (type < 0 || (fn = fn_(r, type, col, array, gen_load_)) < 0) return NULL;
        putf_(o, "sgm_emu_fn%d(%s, %s)", fn, a[1], a[2]);
    } else {
        if ((fn = fn_(r, FN_STORE, col, array, gen_store_)) < 0) return NULL;
        putf_(o, "sgm_emu_fn%d(%s, %s, %s)", fn, a[1], a[2], a[3]);
    }
    return q;
}

char *wgpt_sgm_emulate_source(const char *code, const wgpt_matrix_config *cfg, char *err, size_t errlen) {
    rewrite_ r;
    memset(&r, 0, sizeof r);
    r.code = code, r.cfg = cfg, r.err = err, r.errlen = errlen;
    collect_aliases_(&r);
    str_ o = {0};
    const char *p = code;
    while (p && *p && !r.failed) {
        if (p[0] == '/' && p[1] == '/') {  // a comment, as it is
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            put_(&o, p, n);
            p += n;
            continue;
        }
        if (is_matrix_type_(code, p)) {
            const char *end;
            int t = parse_type_(&r, p, &end);
            if (t < 0) break;
            putf_(&o, "SgmEmu%d", t);
            p = end;
            continue;
        }
        if (strncmp(p, "subgroupMatrix", 14) == 0 && (p == code || !ident_char_(p[-1]))) {
            p = call_(&r, p, &o);
            continue;
        }
        if (strncmp(p, "chromium_experimental_subgroup_matrix", 37) == 0) {
            fail_(&r, "the code enables chromium_experimental_subgroup_matrix itself; the engine writes the enables");
            break;
        }
        put_(&o, p, 1);
        p++;
    }
    if (!r.failed && r.ntypes == 0) fail_(&r, "no subgroup-matrix type in the code: nothing to emulate");
    if (!r.failed) {
        common_helpers_(&r, &o);
        put_(&o, r.helpers.s ? r.helpers.s : "", r.helpers.n);
    }
    if (!r.failed && (o.oom || r.helpers.oom)) fail_(&r, "out of memory emulating subgroup matrices");
    free(r.helpers.s);
    if (r.failed) {
        free(o.s);
        return NULL;
    }
    return o.s;
}
