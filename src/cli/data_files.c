// data_files.c: data files found next to the executable (see data_files.h).
#include "cli/data_files.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *wgpt_default_bpe_dir(void) {
    static char found[4400];
    if (found[0]) return found;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);  // the real file, links resolved
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;  // the executable's folder
        const char *rel[] = {"../share/wgpt/gpt2-bpe", "../third_party/gpt2-bpe"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            char probe[4500];
            snprintf(found, sizeof found, "%s/%s", exe, rel[i]);
            snprintf(probe, sizeof probe, "%s/encoder.json", found);
            if (access(probe, R_OK) == 0) return found;
        }
    }
    snprintf(found, sizeof found, "third_party/gpt2-bpe");
    return found;
}
