// corpus_swap.c: the output folder of `wgpt tokenize`: its lock, the set it
// already holds, and the replacement of that set by a new one (see corpus.h).
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/corpus_internal.h"
#include "data/shard.h"
#include "util/dir_lock.h"
#include "util/err.h"
#include "util/fs.h"

#define LOCK_FILE ".wgpt-tokenize.lock"
#define TMP_PREFIX ".wgpt-tokenize-"

#define FAIL_(...) wgpt_errf(err, errlen, __VA_ARGS__)

// A file of ours inside a temporary folder: a shard, or a shard's .tmp.
static int ours_in_tmp_(const char *name) {
    char base[256];
    size_t n = strlen(name);
    if (n >= sizeof base) return 0;
    memcpy(base, name, n + 1);
    if (n > 4 && strcmp(base + n - 4, ".tmp") == 0) base[n - 4] = 0;
    return wgpt_shard_set_is_shard_name(base);
}

// Empties a temporary folder of ours and removes it; files wgpt did not
// write stay (and so does the folder then).
static void remove_tmp_dir_(const char *path) {
    DIR *dd = opendir(path);
    if (!dd) return;
    struct dirent *e;
    char p[4600];
    while ((e = readdir(dd)))
        if (ours_in_tmp_(e->d_name)) {
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            unlink(p);
        }
    closedir(dd);
    rmdir(path);
}

static void remove_stale_tmp_dirs_(const char *dir) {
    DIR *dd = opendir(dir);
    if (!dd) return;
    struct dirent *e;
    char p[4600];
    while ((e = readdir(dd)))
        if (strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            remove_tmp_dir_(p);
        }
    closedir(dd);
}

// Fills d->old with the files of the set dir holds, refusing files named
// like shards that wgpt did not write; notes other .bin files.
static int inspect_(wgpt_corpus_dest *d, char *err, size_t errlen) {
    wgpt_shard_set rec;
    int has_rec = wgpt_shard_set_read(d->dir, &rec, err, errlen);
    if (has_rec < 0) {
        char why[1024];  // err is both the reason and the destination: copy it first
        snprintf(why, sizeof why, "%s", err);
        return FAIL_("%s (remove it if %s holds no shards you need)", why, d->dir);
    }
    d->had_set = has_rec;
    DIR *dd = opendir(d->dir);
    if (!dd) {
        if (has_rec) wgpt_shard_set_free(&rec);
        return FAIL_("%s: cannot list the folder: %s", d->dir, strerror(errno));
    }
    struct dirent *e;
    int rc = 0;
    size_t others = 0;
    char p[4600], first_other[256] = "";
    while (rc == 0 && (e = readdir(dd))) {
        snprintf(p, sizeof p, "%s/%s", d->dir, e->d_name);
        if (!wgpt_shard_set_is_shard_name(e->d_name)) {
            size_t n = strlen(e->d_name);
            if (n > 4 && strcmp(e->d_name + n - 4, ".bin") == 0 && others++ == 0)
                snprintf(first_other, sizeof first_other, "%s", e->d_name);
            continue;
        }
        if (has_rec) {
            if (!wgpt_shard_set_find(&rec, e->d_name))
                rc = FAIL_("%s is named like a shard but is not in the set wgpt recorded in %s/%s: wgpt did not "
                           "write it there; move it away first",
                           p, d->dir, WGPT_SHARD_SET_FILE);
        } else {
            // No record (a set from before records existed): a real shard is ours.
            wgpt_shard s;
            char why[1024];
            if (wgpt_shard_open(p, &s, why, sizeof why) < 0)
                rc = FAIL_("%s is named like a shard but is not one (%s): wgpt did not write it; move it away first",
                           p, why);
            wgpt_shard_close(&s);
        }
        if (rc == 0 && wgpt_shard_set_add(&d->old, e->d_name, 0) < 0) rc = FAIL_("out of host memory");
        d->had_set |= rc == 0;
    }
    closedir(dd);
    if (rc == 0 && others)
        snprintf(d->note, sizeof d->note,
                 "%s also holds %zu other .bin file%s (%s): `--data %s` would read %s with the shards", d->dir, others,
                 others == 1 ? "" : "s", first_other, d->dir, others == 1 ? "it" : "them");
    if (rc == 0 && has_rec && !rec.complete) d->had_set = 2;  // an interrupted replacement
    if (has_rec) wgpt_shard_set_free(&rec);
    return rc;
}

int wgpt_corpus_dest_open_(wgpt_corpus_dest *d, const char *dir, int force, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    d->dir = dir;
    d->lock = -1;
    if (wgpt_mkdirs(dir, err, errlen) < 0) return -1;
    d->lock = wgpt_dir_lock(dir, LOCK_FILE, "another `wgpt tokenize`", err, errlen);
    if (d->lock < 0) return -1;
    // Holding the lock, every temporary folder here is a killed run's.
    remove_stale_tmp_dirs_(dir);
    int rc = inspect_(d, err, errlen);
    if (rc == 0 && d->had_set && !force) {
        if (d->had_set == 2)
            rc = FAIL_("%s holds an incomplete shard set (an earlier `wgpt tokenize` stopped while replacing it); "
                       "pass --force to replace it",
                       dir);
        else
            rc = FAIL_("%s already holds shards (%s, %zu in all); remove them, choose another --out, or pass --force",
                       dir, d->old.n ? d->old.files[0].name : WGPT_SHARD_SET_FILE, d->old.n);
    }
    if (rc == 0) {
        snprintf(d->tmp_dir, sizeof d->tmp_dir, "%s/%s%ld", dir, TMP_PREFIX, (long)getpid());
        if (mkdir(d->tmp_dir, 0777) != 0) rc = FAIL_("%s: cannot create the folder: %s", d->tmp_dir, strerror(errno));
        if (rc) d->tmp_dir[0] = 0;
    }
    if (rc) wgpt_corpus_dest_close_(d);
    return rc;
}

void wgpt_corpus_dest_close_(wgpt_corpus_dest *d) {
    if (d->tmp_dir[0]) remove_tmp_dir_(d->tmp_dir);
    d->tmp_dir[0] = 0;
    wgpt_shard_set_free(&d->old);
    wgpt_dir_unlock(d->lock);
    d->lock = -1;
}

int wgpt_corpus_dest_swap_(wgpt_corpus_dest *d, const wgpt_shard_set *written, const char *tokenizer,
                           wgpt_shard_set *now, char *err, size_t errlen) {
    memset(now, 0, sizeof *now);
    // 1. The record lists every file this swap may leave in dir, old and new.
    wgpt_shard_set rec;
    memset(&rec, 0, sizeof rec);
    snprintf(rec.tokenizer, sizeof rec.tokenizer, "%s", tokenizer);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < d->old.n; i++) rc = wgpt_shard_set_add(&rec, d->old.files[i].name, 0);
    for (size_t i = 0; rc == 0 && i < written->n; i++)
        if (!wgpt_shard_set_find(&rec, written->files[i].name)) rc = wgpt_shard_set_add(&rec, written->files[i].name, 0);
    if (rc < 0) {
        wgpt_shard_set_free(&rec);
        return FAIL_("out of host memory");
    }
    if (wgpt_shard_set_write(d->dir, &rec, err, errlen) < 0) {
        wgpt_shard_set_free(&rec);
        return -1;  // nothing was changed yet
    }
    wgpt_shard_set_free(&rec);
    // 2. The old files the new set does not overwrite go; 3. the new ones move in.
    char from[4600], to[4600];
    for (size_t i = 0; rc == 0 && i < d->old.n; i++) {
        if (wgpt_shard_set_find(written, d->old.files[i].name)) continue;
        snprintf(to, sizeof to, "%s/%s", d->dir, d->old.files[i].name);
        if (unlink(to) != 0 && errno != ENOENT) rc = FAIL_("%s: cannot remove: %s", to, strerror(errno));
    }
    for (size_t i = 0; rc == 0 && i < written->n; i++) {
        snprintf(from, sizeof from, "%s/%s", d->tmp_dir, written->files[i].name);
        snprintf(to, sizeof to, "%s/%s", d->dir, written->files[i].name);
        if (rename(from, to) != 0) rc = FAIL_("%s: cannot move to %s: %s", from, to, strerror(errno));
    }
    if (rc < 0) {
        size_t k = strlen(err);
        snprintf(err + k, errlen > k ? errlen - k : 0,
                 "; %s now holds an incomplete shard set (its %s says so): run again with --force", d->dir,
                 WGPT_SHARD_SET_FILE);
        return -1;
    }
    snprintf(to, sizeof to, "%s/%s", d->dir, WGPT_SHARD_SET_FILE);
    wgpt_sync_parent(to);
    // 4. The record of the complete set.
    memset(now, 0, sizeof *now);
    now->complete = 1;
    snprintf(now->tokenizer, sizeof now->tokenizer, "%s", tokenizer);
    for (size_t i = 0; rc == 0 && i < written->n; i++)
        rc = wgpt_shard_set_add(now, written->files[i].name, written->files[i].bytes);
    if (rc < 0 || wgpt_shard_set_write(d->dir, now, err, errlen) < 0) {
        if (rc < 0) FAIL_("out of host memory");
        wgpt_shard_set_free(now);
        size_t k = strlen(err);
        snprintf(err + k, errlen > k ? errlen - k : 0, "; run again with --force to complete %s", d->dir);
        return -1;
    }
    return 0;
}
