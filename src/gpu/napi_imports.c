// napi_imports.c: do-nothing Node-API functions for the Node addon that holds Dawn
// (see napi_imports.h). The Makefile exports them from every executable
// (-Wl,--export-dynamic-symbol='napi_*'); each returns napi_generic_failure (9).
#include "napi_imports.h"

#include <string.h>

#define WGPT_NAPI_DEFINE_(name) \
    int name(void);             \
    int name(void) { return 9; }
WGPT_NAPI_IMPORTS(WGPT_NAPI_DEFINE_)
#undef WGPT_NAPI_DEFINE_

int wgpt_napi_import_known_(const char *name) {
#define WGPT_NAPI_MATCH_(n) \
    if (strcmp(name, #n) == 0) return 1;
    WGPT_NAPI_IMPORTS(WGPT_NAPI_MATCH_)
#undef WGPT_NAPI_MATCH_
    return 0;
}
