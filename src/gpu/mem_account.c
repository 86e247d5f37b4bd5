// mem_account.c: storage-buffer bytes by tag (see mem_account.h).
#include "gpu/mem_account.h"

#include <string.h>

int wgpt_mem_account_add(wgpt_mem_account *a, uint64_t size) {
    a->live += size;
    a->tag_live[a->tag] += size;
    if (a->live > a->peak) {
        a->peak = a->live;
        memcpy(a->tag_at_peak, a->tag_live, sizeof a->tag_at_peak);
    }
    return a->tag;
}

void wgpt_mem_account_remove(wgpt_mem_account *a, uint64_t size, int tag) {
    a->live -= size;
    a->tag_live[tag] -= size;
}

int wgpt_mem_account_set_tag(wgpt_mem_account *a, int tag) {
    int was = a->tag;
    a->tag = tag >= 0 && tag < WGPT_MEM_TAGS ? tag : 0;
    return was;
}
