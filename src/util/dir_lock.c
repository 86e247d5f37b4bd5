// dir_lock.c: an exclusive flock on a file in a folder (see dir_lock.h).
#define _DEFAULT_SOURCE  // flock(2) is BSD, not POSIX
#include "util/dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/fs.h"

#ifdef __wasi__
// WebAssembly (make web): one program at a time per page, and WASI has no flock.
#define flock(fd, op) ((void)(fd), (void)(op), 0)
#endif

int wgpt_dir_lock(const char *dir, const char *name, const char *what, char *err, size_t errlen) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        snprintf(err, errlen, "%s: folder name too long", dir);
        return -1;
    }
    int fd = wgpt_open_regular(path, O_RDWR | O_CREAT, 0666, err, errlen);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        if (e == EWOULDBLOCK)
            snprintf(err, errlen, "%s is in use by %s (process %s holds the lock on %s); wait for it to end or use another folder",
                     dir, what, pid[0] ? pid : "?", path);
        else snprintf(err, errlen, "%s: cannot lock: %s", path, strerror(e));
        close(fd);
        return -1;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    int wrote = ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) == n;
    (void)wrote;  // the pid only improves a message: the lock holds without it
    return fd;
}

void wgpt_dir_unlock(int fd) {
    if (fd >= 0) close(fd);  // closing the only descriptor releases the flock
}
