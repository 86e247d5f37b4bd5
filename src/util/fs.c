// fs.c: mkdir -p, regular-file opens and folder syncs (see fs.h).
#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_(mode_t m) {
    if (S_ISDIR(m)) return "a folder";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

int wgpt_mkdirs(const char *path, char *err, size_t errlen) {
    char p[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof p) {
        snprintf(err, errlen, "'%s': %s", path, n ? "folder name too long" : "empty folder name");
        return -1;
    }
    memcpy(p, path, n + 1);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != 0) continue;
        char c = *s;
        *s = 0;
        struct stat st;
        if (stat(p, &st) != 0) {
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                snprintf(err, errlen, "%s: cannot create the folder: %s", p, strerror(errno));
                return -1;
            }
            if (stat(p, &st) != 0) {
                snprintf(err, errlen, "%s: cannot create the folder: %s", p, strerror(errno));
                return -1;
            }
        }
        if (!S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "%s: exists and is %s, not a folder", p,
                     S_ISREG(st.st_mode) ? "a file" : kind_(st.st_mode));
            return -1;
        }
        *s = c;
        if (!c) return 0;
        while (s[1] == '/') s++;  // "a//b"
        if (!s[1]) return 0;      // "a/b/"
    }
}

int wgpt_open_regular(const char *path, int flags, mode_t mode, char *err, size_t errlen) {
    struct stat st;
    // A FIFO that exists is refused before open: even O_NONBLOCK|O_WRONLY on
    // one without a reader fails only with a puzzling ENXIO.
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: is %s, not a regular file", path, kind_(st.st_mode));
        return -1;
    }
    int fd = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    // Checked again on what was opened: the path may have changed meanwhile.
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: is %s, not a regular file", path, kind_(st.st_mode));
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        snprintf(err, errlen, "%s: cannot set blocking I/O: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

FILE *wgpt_fopen_regular(const char *path, const char *mode, char *err, size_t errlen) {
    int flags;
    if (mode[0] == 'r') flags = O_RDONLY;
    else if (mode[0] == 'w') flags = O_WRONLY | O_CREAT | O_TRUNC;
    else if (mode[0] == 'a') flags = O_WRONLY | O_CREAT | O_APPEND;
    else {
        snprintf(err, errlen, "%s: bad open mode '%s' (a wgpt bug)", path, mode);
        return NULL;
    }
    int fd = wgpt_open_regular(path, flags, 0666, err, errlen);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, mode);
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

int wgpt_sync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return ENOMEM;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
    free(dir);
    if (fd < 0) return errno;
    if (fsync(fd) != 0 && errno != EINVAL) rc = errno;
    close(fd);
    return rc;
}
