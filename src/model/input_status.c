// input_status.c: reading and reporting the kernels' input status (input_status.h).
#include "model/input_status.h"

#include <stdio.h>

int wgpt_input_status_message(const uint32_t st[WGPT_STATUS_WORDS], uint32_t V, char *msg, size_t len) {
    if (len) msg[0] = 0;
    if (!st[0]) return 0;
    int n = 0;
    if (st[0] & WGPT_STATUS_BAD_TOKEN)
        n = snprintf(msg, len, "token id %u out of range [0, %u)", st[1], V);
    if (st[0] & WGPT_STATUS_BAD_TARGET) {
        size_t off = n > 0 && (size_t)n < len ? (size_t)n : 0;
        snprintf(msg + off, len - off, "%starget id %u out of range [0, %u)", off ? "; " : "", st[2], V);
    }
    return 1;
}

int wgpt_input_status_check(wgpt_gpu *g, wgpt_view status, uint32_t V, char *msg, size_t len) {
    uint32_t st[WGPT_STATUS_WORDS];
    if (wgpt_buf_download(g, status.buf, status.offset, st, WGPT_STATUS_BYTES) < 0) return -1;
    if (!wgpt_input_status_message(st, V, msg, len)) return 0;
    if (wgpt_buf_zero(g, status.buf, status.offset, WGPT_STATUS_BYTES) < 0) return -1;
    return 1;
}
