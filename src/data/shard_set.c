// shard_set.c: the record of a folder's shard set (see shard_set.h).
#include "data/shard_set.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"
#include "util/fs.h"

void wgpt_shard_set_free(wgpt_shard_set *s) {
    for (size_t i = 0; i < s->n; i++) free(s->files[i].name);
    free(s->files);
    memset(s, 0, sizeof *s);
}

int wgpt_shard_set_add(wgpt_shard_set *s, const char *name, uint64_t bytes) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        wgpt_shard_set_file *f = realloc(s->files, cap * sizeof *f);
        if (!f) return -1;
        s->files = f;
        s->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return -1;
    s->files[s->n++] = (wgpt_shard_set_file){copy, bytes};
    return 0;
}

const wgpt_shard_set_file *wgpt_shard_set_find(const wgpt_shard_set *s, const char *name) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->files[i].name, name) == 0) return &s->files[i];
    return NULL;
}

int wgpt_shard_set_is_shard_name(const char *name) {
    const char *p = strncmp(name, "train_", 6) == 0 ? name + 6 : strncmp(name, "val_", 4) == 0 ? name + 4 : NULL;
    if (!p) return 0;
    for (int i = 0; i < 6; i++)
        if (p[i] < '0' || p[i] > '9') return 0;
    return strcmp(p + 6, ".bin") == 0;
}

static void record_path_(char *buf, size_t n, const char *dir) { snprintf(buf, n, "%s/%s", dir, WGPT_SHARD_SET_FILE); }

int wgpt_shard_set_read(const char *dir, wgpt_shard_set *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    char path[4200], line[4352];
    record_path_(path, sizeof path, dir);
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) return 0;
    FILE *f = wgpt_fopen_regular(path, "r", err, errlen);
    if (!f) return -1;
    int rc = 1, lineno = 0;
    while (rc == 1 && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n') line[--len] = 0;
        char name[4096];
        unsigned long long bytes;
        if (lineno == 1) {
            if (strcmp(line, "wgpt shard set 1") != 0)
                rc = wgpt_errf(err, errlen, "%s: not a wgpt shard set record (its first line is not \"wgpt shard set 1\")",
                           path);
        } else if (strcmp(line, "state complete") == 0) {
            s->complete = 1;
        } else if (strcmp(line, "state replacing") == 0) {
            s->complete = 0;
        } else if (strncmp(line, "tokenizer ", 10) == 0 && len - 10 < sizeof s->tokenizer && len > 10) {
            memcpy(s->tokenizer, line + 10, len - 10 + 1);
        } else if (sscanf(line, "file %4095s %llu", name, &bytes) == 2 && !strchr(name, '/')) {
            if (wgpt_shard_set_add(s, name, bytes) < 0) rc = wgpt_errf(err, errlen, "%s: out of host memory", path);
        } else {
            rc = wgpt_errf(err, errlen, "%s: line %d is not understood: \"%.80s\"", path, lineno, line);
        }
    }
    if (rc == 1 && ferror(f)) rc = wgpt_errf(err, errlen, "%s: read error: %s", path, strerror(errno));
    if (rc == 1 && lineno == 0) rc = wgpt_errf(err, errlen, "%s: empty (a damaged shard set record)", path);
    fclose(f);
    if (rc < 0) wgpt_shard_set_free(s);
    return rc;
}

int wgpt_shard_set_write(const char *dir, const wgpt_shard_set *s, char *err, size_t errlen) {
    char path[4200], tmp[4300];
    record_path_(path, sizeof path, dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (unlink(tmp) != 0 && errno != ENOENT) return wgpt_errf(err, errlen, "%s: cannot remove: %s", tmp, strerror(errno));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) close(fd);
        unlink(tmp);
        return wgpt_errf(err, errlen, "%s: cannot create: %s", tmp, strerror(e));
    }
    fprintf(f, "wgpt shard set 1\nstate %s\n", s->complete ? "complete" : "replacing");
    if (s->tokenizer[0]) fprintf(f, "tokenizer %s\n", s->tokenizer);
    for (size_t i = 0; i < s->n; i++) fprintf(f, "file %s %llu\n", s->files[i].name, (unsigned long long)s->files[i].bytes);
    int ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0 && ok) ok = 0, e = errno;
    if (ok && rename(tmp, path) != 0) ok = 0, e = errno;
    if (!ok) {
        unlink(tmp);
        return wgpt_errf(err, errlen, "%s: cannot write: %s", path, strerror(e));
    }
    int se = wgpt_sync_parent(path);
    if (se) return wgpt_errf(err, errlen, "%s: written, but its folder could not be synced: %s", path, strerror(se));
    return 0;
}

static const char *base_(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

// The folder of path as the record's readers name it: "." for a bare name.
static void dir_of_(const char *path, char *dir, size_t n) {
    size_t pl = (size_t)(base_(path) - path);
    if (pl == 0) snprintf(dir, n, ".");
    else if (pl == 1) snprintf(dir, n, "/");
    else snprintf(dir, n, "%.*s", (int)(pl - 1), path);
}

// Checks the paths that lie in folder dir (a prefix of each of them) against its record.
static int check_dir_(const char *dir, const char *const *paths, size_t npaths, char *err, size_t errlen) {
    wgpt_shard_set s;
    int rc = wgpt_shard_set_read(dir, &s, err, errlen);
    if (rc <= 0) return rc;
    char rec[4200];
    record_path_(rec, sizeof rec, dir);
    if (!s.complete) {
        wgpt_shard_set_free(&s);
        return wgpt_errf(err, errlen,
                     "%s holds an incomplete shard set: a `wgpt tokenize` stopped while replacing it (%s says "
                     "\"replacing\"); run that tokenize again with --force",
                     dir, rec);
    }
    for (size_t i = 0; rc >= 0 && i < npaths; i++) {
        const char *p = paths[i], *name = base_(p);
        char pd[4096];
        dir_of_(p, pd, sizeof pd);
        if (strcmp(pd, dir) != 0) continue;
        const wgpt_shard_set_file *f = wgpt_shard_set_find(&s, name);
        struct stat st;
        if (!f && wgpt_shard_set_is_shard_name(name))
            rc = wgpt_errf(err, errlen,
                       "%s is named like a shard of the set in %s but %s does not list it (left from another "
                       "set?): move it away, or tokenize again with --force",
                       p, dir, rec);
        else if (f && stat(p, &st) == 0 && (uint64_t)st.st_size != f->bytes)
            rc = wgpt_errf(err, errlen,
                       "%s holds %llu bytes but %s recorded %llu when `wgpt tokenize` wrote it: the file was changed "
                       "since; tokenize again",
                       p, (unsigned long long)st.st_size, rec, (unsigned long long)f->bytes);
    }
    wgpt_shard_set_free(&s);
    return rc < 0 ? -1 : 0;
}

int wgpt_shard_set_check(const char *const *paths, size_t npaths, char *err, size_t errlen) {
    // Each distinct folder once (paths arrive sorted, so a folder's run is contiguous).
    char prev[4096] = "";
    int have_prev = 0;
    for (size_t i = 0; i < npaths; i++) {
        char dir[4096];
        dir_of_(paths[i], dir, sizeof dir);
        if (have_prev && strcmp(dir, prev) == 0) continue;
        snprintf(prev, sizeof prev, "%s", dir);
        have_prev = 1;
        if (check_dir_(dir, paths, npaths, err, errlen) < 0) return -1;
    }
    return 0;
}
