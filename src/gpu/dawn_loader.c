// dawn_loader.c: loads Dawn at run time and fills the C API pointers (see dawn_loader.h).
//
// The pinned dawn.node keeps the C API as local symbols: they are in the ELF
// .symtab but not in the dynamic table, so dlsym cannot see them. We read the
// .symtab ourselves, add the load bias the dynamic linker chose, install Dawn's
// native proc table (dawnProcSetProcs(&dawn::native::GetProcs())) and call the
// wgpu* functions at those addresses. The file's napi_* imports (it is a Node
// addon) are satisfied by do-nothing functions this executable exports (napi_imports.c).
#define _GNU_SOURCE  // dlinfo, RTLD_DI_LINKMAP
#include "dawn_loader.h"

#include <ctype.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dawn_api.h"
#include "napi_imports.h"
#include "util/err.h"

#ifndef WGPT_DAWN_NODE_SHA256
#error "build with -DWGPT_DAWN_NODE_SHA256=\"...\" (the Makefile takes it from scripts/pins.sh)"
#endif

#define WGPT_DAWN_DEFINE_(ret, name, params) ret(*name) params;
WGPT_DAWN_FUNCTIONS(WGPT_DAWN_DEFINE_)
#undef WGPT_DAWN_DEFINE_

// dawn::native's C++ helpers (x86-64 SysV C++ ABI; the names are Itanium-mangled).
#define SYM_GET_PROCS "_ZN4dawn6native8GetProcsEv"                            // dawn::native::GetProcs()
#define SYM_FEATURE_INFO "_ZN4dawn6native14GetFeatureInfoEN4wgpu11FeatureNameE"  // GetFeatureInfo(FeatureName)
#define SYM_SET_PROCS "dawnProcSetProcs"
#define SYM_VERSION "dawnProcGetVersion"  // 20 bytes: the git commit of the build
#define SYM_ANCHOR "napi_register_module_v1"  // exported: gives the load bias

typedef struct {
    const char *name, *description, *url;
    int state;
} dawn_feature_info_;

static struct {
    int tried, ok;
    char err[1024];
    char loaded[PATH_MAX + 64];
    void *handle;
    const dawn_feature_info_ *(*feature_info)(uint32_t);
} L;

// --- the ELF file, read with bounds checks on every table -----------------------
typedef struct {
    const unsigned char *map;
    size_t size;
    const Elf64_Sym *dynsym, *symtab;
    size_t ndynsym, nsymtab;
    const char *dynstr, *strtab;
    size_t dynstr_size, strtab_size;
} elf_file_;

static int in_file_(const elf_file_ *f, uint64_t off, uint64_t len) {
    return off <= f->size && len <= f->size - off;
}

static int elf_open_(elf_file_ *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    // O_NONBLOCK: a FIFO named as the library must not hang the process in open().
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return wgpt_errf(err, errlen, "Dawn: cannot open %s: %s (run scripts/setup.sh to fetch the pinned Dawn, or set "
                     "WGPT_DAWN_LIB to a libwebgpu_dawn.so)", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return wgpt_errf(err, errlen, "Dawn: %s is not a regular file", path);
    }
    if ((uint64_t)st.st_size < sizeof(Elf64_Ehdr)) {
        close(fd);
        return wgpt_errf(err, errlen, "Dawn: %s is not an ELF shared library (%lld bytes)", path, (long long)st.st_size);
    }
    f->size = (size_t)st.st_size;
    void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return wgpt_errf(err, errlen, "Dawn: cannot map %s: %s", path, strerror(errno));
    f->map = m;
    const Elf64_Ehdr *eh = m;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_type != ET_DYN || eh->e_machine != EM_X86_64)
        return wgpt_errf(err, errlen, "Dawn: %s is not an x86-64 ELF shared library", path);
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || !in_file_(f, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)))
        return wgpt_errf(err, errlen, "Dawn: %s has a damaged section table", path);
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(f->map + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
        const Elf64_Shdr *str = sh[i].sh_link < eh->e_shnum ? &sh[sh[i].sh_link] : NULL;
        if (!str || !in_file_(f, sh[i].sh_offset, sh[i].sh_size) || !in_file_(f, str->sh_offset, str->sh_size) ||
            sh[i].sh_offset % 8 || str->sh_size == 0 || f->map[str->sh_offset + str->sh_size - 1] != 0)
            return wgpt_errf(err, errlen, "Dawn: %s has a damaged symbol table", path);
        const Elf64_Sym *syms = (const Elf64_Sym *)(f->map + sh[i].sh_offset);
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        const char *strs = (const char *)(f->map + str->sh_offset);
        if (sh[i].sh_type == SHT_SYMTAB) f->symtab = syms, f->nsymtab = n, f->strtab = strs, f->strtab_size = str->sh_size;
        else f->dynsym = syms, f->ndynsym = n, f->dynstr = strs, f->dynstr_size = str->sh_size;
    }
    if (!f->dynsym) return wgpt_errf(err, errlen, "Dawn: %s has no dynamic symbol table", path);
    return 0;
}

static void elf_close_(elf_file_ *f) {
    if (f->map) munmap((void *)f->map, f->size);
    memset(f, 0, sizeof *f);
}

static const char *sym_name_(const char *strs, size_t strs_size, const Elf64_Sym *s) {
    return s->st_name < strs_size ? strs + s->st_name : "";
}

// A defined function or object of that name: its st_value (an offset from the load base), or 0.
static uint64_t find_defined_(const Elf64_Sym *syms, size_t n, const char *strs, size_t strs_size, const char *name) {
    for (size_t i = 0; i < n; i++) {
        unsigned t = ELF64_ST_TYPE(syms[i].st_info);
        if (syms[i].st_shndx == SHN_UNDEF || !syms[i].st_value || (t != STT_FUNC && t != STT_OBJECT)) continue;
        if (strcmp(sym_name_(strs, strs_size, &syms[i]), name) == 0) return syms[i].st_value;
    }
    return 0;
}

static uint64_t local_(const elf_file_ *f, const char *name) {
    return f->symtab ? find_defined_(f->symtab, f->nsymtab, f->strtab, f->strtab_size, name) : 0;
}

static int exports_(const elf_file_ *f, const char *name) {
    return find_defined_(f->dynsym, f->ndynsym, f->dynstr, f->dynstr_size, name) != 0;
}

static int sha256_hex_(const elf_file_ *f, char out[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (!EVP_Digest(f->map, f->size, md, &n, EVP_sha256(), NULL) || n != 32) return -1;
    for (unsigned i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
    return 0;
}

// Every napi_* the addon imports must be one this executable exports, or dlopen fails
// (or, for a lazily bound one, a call would end the process). Say which one is missing.
static int check_napi_imports_(const elf_file_ *f, const char *path, char *err, size_t errlen) {
    for (size_t i = 0; i < f->ndynsym; i++) {
        if (f->dynsym[i].st_shndx != SHN_UNDEF) continue;
        const char *name = sym_name_(f->dynstr, f->dynstr_size, &f->dynsym[i]);
        if (strncmp(name, "napi_", 5) != 0) continue;
        if (!wgpt_napi_import_known_(name))
            return wgpt_errf(err, errlen, "Dawn: %s imports %s, which wgpt does not provide (add it to "
                         "src/gpu/napi_imports.h)", path, name);
        if (!dlsym(RTLD_DEFAULT, name))
            return wgpt_errf(err, errlen, "Dawn: %s imports %s, but this executable does not export it (link with "
                         "-Wl,--export-dynamic-symbol='napi_*', as the Makefile does)", path, name);
    }
    return 0;
}

static void reset_pointers_(void) {
#define WGPT_DAWN_RESET_(ret, name, params) name = NULL;
    WGPT_DAWN_FUNCTIONS(WGPT_DAWN_RESET_)
#undef WGPT_DAWN_RESET_
    L.feature_info = NULL;
}

// The pinned addon (a file that exports no C API): its hash, and the symbols
// that give the C API's table (v[0], v[1]) and the load address (v[2]).
// 0, or -1 with err filled.
static int check_addon_(elf_file_ *f, const char *path, const char *pinned_sha256, uint64_t v[3], char *err,
                        size_t errlen) {
    char sha[65];
    if (sha256_hex_(f, sha) < 0) return wgpt_errf(err, errlen, "Dawn: cannot hash %s (OpenSSL's SHA-256 failed)", path);
    if (strcmp(sha, pinned_sha256) != 0)
        return wgpt_errf(err, errlen, "Dawn: %s exports no C API, and its sha256 %s is not the pinned dawn.node's %s, "
                         "whose symbols wgpt knows (run scripts/setup.sh to fetch it, or point WGPT_DAWN_LIB at "
                         "a libwebgpu_dawn.so that exports the C API)", path, sha, pinned_sha256);
    if (!f->symtab)
        return wgpt_errf(err, errlen, "Dawn: %s has no .symtab (stripped), so its C API cannot be found", path);
    const char *need[] = {SYM_GET_PROCS, SYM_SET_PROCS, "wgpuGetProcAddress"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!local_(f, need[i])) return wgpt_errf(err, errlen, "Dawn: %s has no symbol %s", path, need[i]);
    v[0] = local_(f, SYM_GET_PROCS);
    v[1] = local_(f, SYM_SET_PROCS);
    v[2] = find_defined_(f->dynsym, f->ndynsym, f->dynstr, f->dynstr_size, SYM_ANCHOR);
    if (!v[2])
        return wgpt_errf(err, errlen, "Dawn: %s does not export %s, which gives its load address", path, SYM_ANCHOR);
    return check_napi_imports_(f, path, err, errlen);
}

int wgpt_dawn_load_file_(const char *path, const char *pinned_sha256, char *err, size_t errlen) {
    if (L.ok) return wgpt_errf(err, errlen, "Dawn is already loaded (%s)", L.loaded);
    if (!pinned_sha256) pinned_sha256 = WGPT_DAWN_NODE_SHA256;
    elf_file_ f;
    if (elf_open_(&f, path, err, errlen) < 0) {
        elf_close_(&f);
        return -1;
    }
    // A library that exports the C API is used as it is; anything else must be the pinned addon.
    int addon = !exports_(&f, "wgpuGetProcAddress");
    uint64_t v[3] = {0, 0, 0};  // the addon's get and set of its C API table, its anchor
    if (addon && check_addon_(&f, path, pinned_sha256, v, err, errlen) < 0) {
        elf_close_(&f);
        return -1;
    }
    uint64_t v_get = v[0], v_set = v[1], v_anchor = v[2];

    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        elf_close_(&f);
        return wgpt_errf(err, errlen, "Dawn: dlopen %s: %s", path, e ? e : "failed");
    }
    uintptr_t base = 0;
    if (addon) {
        struct link_map *lm = NULL;
        void *anchor = dlsym(h, SYM_ANCHOR);
        if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !anchor ||
            (uintptr_t)anchor - (uintptr_t)v_anchor != (uintptr_t)lm->l_addr) {
            dlclose(h);
            elf_close_(&f);
            return wgpt_errf(err, errlen, "Dawn: %s: its load address and %s disagree; the file is not what its "
                         "symbol table says", path, SYM_ANCHOR);
        }
        base = (uintptr_t)lm->l_addr;
        const void *(*get_procs)(void) = (const void *(*)(void))(base + v_get);
        void (*set_procs)(const void *) = (void (*)(const void *))(base + v_set);
        set_procs(get_procs());
    }

    // Each function: the file's own symbol (a dawn_proc trampoline in the addon), else Dawn's getProcAddress.
    reset_pointers_();
    const char *missing = NULL;
#define WGPT_DAWN_RESOLVE_(ret, name, params)                                                   \
    if (!missing) {                                                                              \
        void *p_ = NULL;                                                                         \
        if (addon) {                                                                             \
            uint64_t v_ = local_(&f, #name);                                                     \
            p_ = v_ ? (void *)(base + v_) : NULL;                                                \
        } else {                                                                                 \
            p_ = dlsym(h, #name);                                                                \
        }                                                                                        \
        if (!p_ && wgpuGetProcAddress) p_ = (void *)wgpuGetProcAddress((WGPUStringView){#name, strlen(#name)}); \
        if (p_) memcpy(&name, &p_, sizeof p_);                                                   \
        else missing = #name;                                                                    \
    }
    WGPT_DAWN_FUNCTIONS(WGPT_DAWN_RESOLVE_)
#undef WGPT_DAWN_RESOLVE_
    if (missing) {
        reset_pointers_();
        dlclose(h);
        elf_close_(&f);
        return wgpt_errf(err, errlen, "Dawn: %s has no %s", path, missing);
    }

    char version[41] = "unknown";
    void *pv = NULL, *pf = NULL;
    if (addon) {
        uint64_t vv = local_(&f, SYM_VERSION), vf = local_(&f, SYM_FEATURE_INFO);
        pv = vv ? (void *)(base + vv) : NULL;
        pf = vf ? (void *)(base + vf) : NULL;
    } else {
        pv = dlsym(h, SYM_VERSION);
        pf = dlsym(h, SYM_FEATURE_INFO);
    }
    if (pv) {
        const uint8_t *(*get_version)(void);
        memcpy(&get_version, &pv, sizeof pv);
        const uint8_t *sha = get_version();
        for (int i = 0; sha && i < 20; i++) snprintf(version + 2 * i, 3, "%02x", sha[i]);
    }
    if (pf) memcpy(&L.feature_info, &pf, sizeof pf);
    elf_close_(&f);

    int checked = 0;
    if (wgpt_dawn_check_features_(&checked, err, errlen) < 0) {
        reset_pointers_();
        dlclose(h);
        return -1;
    }
    L.handle = h;
    L.ok = 1;
    char real[PATH_MAX];
    snprintf(L.loaded, sizeof L.loaded, "%s (Dawn %.12s)", realpath(path, real) ? real : path, version);
    return 0;
}

static void normalise_(const char *in, char *out, size_t cap) {
    size_t j = 0;
    for (; *in && j + 1 < cap; in++)
        if (isalnum((unsigned char)*in)) out[j++] = (char)tolower((unsigned char)*in);
    out[j] = 0;
}

int wgpt_dawn_check_features_(int *checked, char *err, size_t errlen) {
    static const struct {
        WGPUFeatureName value;
        const char *name;
    } declared[] = {
        {WGPUFeatureName_TimestampQuery, "timestamp-query"},
        {WGPUFeatureName_ShaderF16, "shader-f16"},
        {WGPUFeatureName_Subgroups, "subgroups"},
        {WGPUFeatureName_SubgroupSizeControl, "subgroup-size-control"},
        {WGPUFeatureName_ChromiumExperimentalSubgroupMatrix, "chromium-experimental-subgroup-matrix"},
    };
    *checked = 0;
    if (!L.feature_info) return 0;  // a library without Dawn's C++ symbols: nothing to ask
    for (size_t i = 0; i < sizeof declared / sizeof declared[0]; i++) {
        const dawn_feature_info_ *fi = L.feature_info((uint32_t)declared[i].value);
        char a[96], b[96];
        normalise_(fi && fi->name ? fi->name : "", a, sizeof a);
        normalise_(declared[i].name, b, sizeof b);
        if (strcmp(a, b) != 0)
            return wgpt_errf(err, errlen, "Dawn: feature value 0x%x is '%s' in this build, but src/gpu/dawn_api.h "
                         "declares it as %s: the declarations do not fit this Dawn",
                         (unsigned)declared[i].value, fi && fi->name ? fi->name : "(none)", declared[i].name);
        (*checked)++;
    }
    return 0;
}

int wgpt_exe_dir_(char *out, size_t cap) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0;
    return snprintf(out, cap, "%s", exe) < (int)cap ? 0 : -1;
}

int wgpt_dawn_load_(const char *lib, char *err, size_t errlen) {
    if (!L.tried) {
        L.tried = 1;
        char path[PATH_MAX];
        if (lib && *lib) {
            snprintf(path, sizeof path, "%s", lib);
        } else {
            char dir[PATH_MAX - 64];
            if (wgpt_exe_dir_(dir, sizeof dir) < 0) snprintf(dir, sizeof dir, ".");
            // The build tree's copy, else where `make install` puts it (PREFIX/bin -> PREFIX/lib/wgpt).
            snprintf(path, sizeof path, "%s/../third_party/dawn/dawn.node", dir);
            if (access(path, F_OK) != 0) {
                char installed[PATH_MAX];
                snprintf(installed, sizeof installed, "%s/../lib/wgpt/dawn.node", dir);
                if (access(installed, F_OK) == 0) snprintf(path, sizeof path, "%s", installed);
            }
        }
        if (wgpt_dawn_load_file_(path, NULL, L.err, sizeof L.err) < 0 && lib && *lib) {
            size_t n = strlen(L.err);
            snprintf(L.err + n, sizeof L.err - n, " (from WGPT_DAWN_LIB)");
        }
    }
    if (!L.ok) return wgpt_errf(err, errlen, "%s", L.err);
    return 0;
}

const char *wgpt_dawn_loaded_(void) { return L.ok ? L.loaded : ""; }
