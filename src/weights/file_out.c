// file_out.c: crash-safe file writing (see file_out.h).
#include "weights/file_out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *dup_(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    char *d = malloc(a + b + 1);
    if (d) memcpy(d, s, a), memcpy(d + a, suffix, b + 1);
    return d;
}

int wgpt_file_out_begin(wgpt_file_out *o, const char *path, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->path = dup_(path, "");
    o->tmp = dup_(path, ".tmp");
    if (!o->path || !o->tmp) {
        snprintf(err, errlen, "%s: out of memory", path);
        wgpt_file_out_abort(o);
        return -1;
    }
    // A stale .tmp (an earlier write killed) is replaced; O_EXCL then never
    // follows a link planted there nor blocks on a FIFO.
    int fd = -1;
    if (unlink(o->tmp) != 0 && errno != ENOENT)
        snprintf(err, errlen, "%s: cannot remove the stale temporary file: %s", o->tmp, strerror(errno));
    else if ((fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL, 0644)) < 0 || !(o->f = fdopen(fd, "wb")))
        snprintf(err, errlen, "%s: cannot create: %s", o->tmp, strerror(errno));
    if (!o->f) {
        if (fd >= 0) close(fd), unlink(o->tmp);
        free(o->tmp);  // not ours to remove
        o->tmp = NULL;
        wgpt_file_out_abort(o);
        return -1;
    }
    return 0;
}

void wgpt_file_out_write(wgpt_file_out *o, const void *p, size_t n) {
    if (o->failed || n == 0) return;
    errno = 0;
    if (fwrite(p, 1, n, o->f) != n) {
        o->failed = 1;
        snprintf(o->why, sizeof o->why, "%s", strerror(errno ? errno : EIO));
    }
}

void wgpt_file_out_floats(wgpt_file_out *o, const float *x, size_t n) {
    const uint16_t one = 1;
    unsigned char le;
    memcpy(&le, &one, 1);
    if (le) {
        wgpt_file_out_write(o, x, n * 4);
        return;
    }
    unsigned char buf[4096];
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        for (; k < sizeof buf / 4 && i < n; k++, i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            for (int b = 0; b < 4; b++) buf[4 * k + b] = (unsigned char)(u >> (8 * b));
        }
        wgpt_file_out_write(o, buf, 4 * k);
    }
}

// The folder's fsync makes the rename itself durable.
static int sync_dir_(const char *path) {
    char *d = dup_(path, "");
    if (!d) return -1;
    char *slash = strrchr(d, '/');
    if (slash == d) slash[1] = 0;
    else if (slash) *slash = 0;
    else strcpy(d, ".");
    int fd = open(d, O_RDONLY), rc = -1;
    if (fd >= 0) rc = fsync(fd), close(fd);
    free(d);
    return rc;
}

int wgpt_file_out_seal(wgpt_file_out *o, char *err, size_t errlen) {
    int rc = -1;
    if (o->failed) snprintf(err, errlen, "%s: write failed: %s", o->tmp, o->why);
    else if (fflush(o->f) != 0 || fsync(fileno(o->f)) != 0)
        snprintf(err, errlen, "%s: cannot flush to disk: %s", o->tmp, strerror(errno));
    else if (fclose(o->f) != 0)
        o->f = NULL, snprintf(err, errlen, "%s: cannot close: %s", o->tmp, strerror(errno));
    else
        o->f = NULL, rc = 0;
    if (rc < 0) wgpt_file_out_abort(o);
    return rc;
}

int wgpt_file_out_commit(wgpt_file_out *o, char *err, size_t errlen) {
    int rc = -1;
    if (rename(o->tmp, o->path) != 0)
        snprintf(err, errlen, "cannot rename %s to %s: %s", o->tmp, o->path, strerror(errno));
    else {
        rc = 0;
        if (sync_dir_(o->path) != 0) {
            snprintf(err, errlen, "%s: written, but its folder cannot be synced (%s): it may not survive a power loss",
                     o->path, strerror(errno));
            rc = -1;
        }
        free(o->tmp);  // renamed: nothing to remove
        o->tmp = NULL;
    }
    wgpt_file_out_abort(o);
    return rc;
}

int wgpt_file_out_finish(wgpt_file_out *o, char *err, size_t errlen) {
    if (wgpt_file_out_seal(o, err, errlen) < 0) return -1;
    return wgpt_file_out_commit(o, err, errlen);
}

void wgpt_file_out_abort(wgpt_file_out *o) {
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
}
