// dawn_loader.h: finds Dawn at run time and fills the function pointers that
// dawn_api.h declares. Two kinds of file are accepted:
//   - the pinned dawn.node (npm webgpu@0.6.2): a Node addon that does not
//     export the C API, but whose ELF symbol table still lists it; checked
//     against the pinned sha256, since our declarations fit that build only;
//   - a libwebgpu_dawn.so that exports the C API (a Dawn built from source),
//     named by options.dawn_lib (WGPT_DAWN_LIB): plain dlsym, then the ABI checks below.
// Process-wide: Dawn's proc table is global. Only src/gpu/*.c and the loader's
// own test include this file.
#ifndef WGPT_DAWN_LOADER_H
#define WGPT_DAWN_LOADER_H

#include <stddef.h>

// Loads Dawn once per process: lib (options.dawn_lib, WGPT_DAWN_LIB) if not
// NULL, else <directory of the executable>/../third_party/dawn/dawn.node.
// Returns 0, or -1 with err naming the file and what is wrong with it. Later
// calls return the first call's result, whatever lib they name.
int wgpt_dawn_load_(const char *lib, char *err, size_t errlen);

// The directory of the running executable (files found relative to it: Dawn,
// the device layer). Returns 0, or -1 if /proc/self/exe cannot say.
int wgpt_exe_dir_(char *out, size_t cap);

// One attempt on one file, for tests: pinned_sha256 (64 hex digits) is what a
// Node addon must hash to (NULL: the sha compiled in). Nothing is left loaded
// on failure; after a success, the process uses that Dawn.
int wgpt_dawn_load_file_(const char *path, const char *pinned_sha256, char *err, size_t errlen);

// What was loaded, for `wgpt info`: "PATH (Dawn COMMIT)"; "" before a load.
const char *wgpt_dawn_loaded_(void);

// Asks the build for the name of each feature value dawn_api.h declares and
// compares (Dawn's own feature table, where the file lists it). Returns 0, or
// -1 with err naming the value and both names. *checked: how many were compared.
int wgpt_dawn_check_features_(int *checked, char *err, size_t errlen);

#endif
