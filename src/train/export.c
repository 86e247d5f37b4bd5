// export.c: any model file -> Hugging Face or llm.c files (see export.h).
#include "train/export.h"

#include <stdio.h>
#include <string.h>

#include "train/model_file.h"
#include "weights/hf_gpt2.h"
#include "weights/llmc.h"

int wgpt_export(const char *in, const char *format, const char *out, char *err, size_t errlen) {
    int hf = strcmp(format, "hf") == 0;
    if (!hf && strcmp(format, "llmc") != 0) {
        snprintf(err, errlen, "unknown export format '%s' (hf or llmc)", format);
        return -1;
    }
    wgpt_weights w;
    if (wgpt_model_file_read(in, 1, &w, err, errlen) < 0) return -1;
    int rc = hf ? wgpt_hf_gpt2_write(out, &w, err, errlen) : wgpt_llmc_write(out, &w, err, errlen);
    wgpt_weights_free(&w);
    return rc;
}
