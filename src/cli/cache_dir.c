// cache_dir.c: where the commands keep Dawn's pipeline cache (cache_dir.h).
#include "cli/cache_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *wgpt_cli_cache_dir(void) {
    static char dir[4096];
    const char *env = getenv("WGPT_CACHE_DIR");
    if (env) return *env && strcmp(env, "off") != 0 ? env : NULL;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/') n = snprintf(dir, sizeof dir, "%s/wgpt", xdg);  // (the spec: relative ones are ignored)
    else if (home && *home) n = snprintf(dir, sizeof dir, "%s/.cache/wgpt", home);
    else return NULL;
    return n > 0 && (size_t)n < sizeof dir ? dir : NULL;
}
