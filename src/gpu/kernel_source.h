// kernel_source.h: the seeds' kernel-file rules as plain text processing,
// with no GPU: split a .wgsl file at its `// --- KERNEL: name ---` markers,
// paste enables + shared preamble + file preamble + kernel into one source,
// and map a line of that source back to the file and line it came from.
#ifndef WGPT_KERNEL_SOURCE_H
#define WGPT_KERNEL_SOURCE_H

#include <stddef.h>
#include <stdint.h>

// A WGSL pipeline-overridable constant (`override NAME: T = ...;`) and the
// value a variant's pipeline sets it to (a bool is 0 or 1).
typedef struct wgpt_ksrc_const {
    char name[64];
    double value;
} wgpt_ksrc_const;
#define WGPT_KSRC_MAX_CONSTS 4

// A template instance's text substitution: `{{name}}` in the template's body
// becomes value.
typedef struct wgpt_ksrc_sub {
    char name[32];
    char value[64];
} wgpt_ksrc_sub;
#define WGPT_KSRC_MAX_SUBS 12

// A kernel: a section of the file (after `// --- KERNEL: name ---`); or a
// second entry point of a section (`// --- KERNEL: name in section ---`): the
// section's source, compiled with entry point `name`, a function of that
// section, so that kernels with the same bindings declare them once; or a
// variant of either (`// --- KERNEL: name = kernel with A=1, B=2 ---`): the
// same source compiled under its own name, its entry point the kernel's, with
// override constants set when its pipeline is created; or an instance of a
// template (`// --- KERNEL: name = template with A=text, B=text ---`, the
// template a `// --- TEMPLATE: template ---` section, which is no kernel
// itself): the template's body with each `{{A}}` replaced by its text,
// compiled with entry point `name`; a variant of an instance compiles the
// instance's text (tmpl and subs copied) with its own constants.
typedef struct wgpt_ksrc_kernel {
    char name[64];
    size_t body_start, body_end;  // bytes of the file after the marker line (a variant: its section's)
    uint32_t body_line;           // 1-based file line where the body starts
    uint32_t marker_line;         // the marker's own line
    int base;                     // -1: a section or an entry of one; else the index of the kernel a variant compiles
    int host;                     // an entry marker's section (its body); -1 for the others
    int nconsts;                  // a variant's override constants
    wgpt_ksrc_const consts[WGPT_KSRC_MAX_CONSTS];
    int tmpl;                     // an instance's template (index in templates[]); -1 for the others
    int nsubs;                    // an instance's substitutions
    wgpt_ksrc_sub subs[WGPT_KSRC_MAX_SUBS];
} wgpt_ksrc_kernel;

typedef struct wgpt_ksrc_file {
    char *label;          // file name used in messages, e.g. "00_infrastructure.wgsl"
    char *text;           // owned copy of the file
    size_t preamble_end;  // the file preamble is text[0, preamble_end)
    wgpt_ksrc_kernel *kernels;
    int nkernels;
    wgpt_ksrc_kernel *templates;  // the TEMPLATE sections (name and body only): no kernels
    int ntemplates;
} wgpt_ksrc_file;

// Splits text at its markers; kernels[] lists sections, entries and variants
// in file order. An entry or variant line opens no section (the lines after
// it still belong to the one before) and may stand anywhere in the file; an
// entry's section must be a section of the same file, a variant's kernel a
// section or entry of it. A template section ends the section before it, as
// a section does; an instance may stand anywhere in the file. A file with no
// section or template, a malformed marker line, a name that is not a WGSL
// identifier or is used twice, an entry in a missing section or in an entry
// or variant, a variant of a missing kernel or of a variant, more than
// WGPT_KSRC_MAX_CONSTS constants or a value that is not a number (a
// variant), more than WGPT_KSRC_MAX_SUBS substitutions, a `{{X}}` of the
// template that an instance does not set or a substitution the template does
// not use (an instance) are errors naming the file and line. Returns 0 or -1 (err filled);
// free with wgpt_ksrc_free.
int wgpt_ksrc_parse(wgpt_ksrc_file *f, const char *label, const char *text, char *err, size_t errlen);
void wgpt_ksrc_free(wgpt_ksrc_file *f);

// The shared preamble must hold no marker: returns 0, or -1 naming the line.
int wgpt_ksrc_check_shared(const char *label, const char *text, char *err, size_t errlen);

// Where a run of lines of the composed source came from.
typedef struct wgpt_line_seg {
    uint32_t first;       // first line (1-based) in the composed source
    uint32_t count;
    const char *file;     // NULL: lines the engine wrote (enable directives)
    uint32_t file_first;  // first line in that file
} wgpt_line_seg;

typedef struct wgpt_ksrc_composed {
    char *code;  // owned, nul-terminated WGSL
    wgpt_line_seg seg[4];
    int nseg;
} wgpt_ksrc_composed;

// The name of kernel i's entry point: its own, or a variant's base's.
static inline const char *wgpt_ksrc_entry(const wgpt_ksrc_file *f, int i) {
    return f->kernels[i].base >= 0 ? f->kernels[f->kernels[i].base].name : f->kernels[i].name;
}

// code = enables + shared + file preamble + kernel body (an instance: its
// template's, substituted), each part ending in a newline so that lines map
// exactly (a substitution holds no newline). Returns 0 or -1 (out of memory).
int wgpt_ksrc_compose(wgpt_ksrc_composed *out, const char *enables, const char *shared_label,
                      const char *shared_text, const wgpt_ksrc_file *f, int kernel_index);
void wgpt_ksrc_composed_free(wgpt_ksrc_composed *c);
// Maps a composed line to (file, line). Returns 0, or -1 if the line is out of range.
int wgpt_ksrc_map_line(const wgpt_ksrc_composed *c, uint32_t line, const char **file, uint32_t *file_line);

#endif
