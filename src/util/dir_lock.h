// dir_lock.h: one process at a time in a folder. An exclusive flock(2) on a
// lock file in it, held while the returned descriptor stays open; the kernel
// drops it when the process ends, however it ends, so a crash leaves no
// stale lock (the file itself stays: removing it would race a new locker).
#ifndef WGPT_DIR_LOCK_H
#define WGPT_DIR_LOCK_H

#include <stddef.h>

// Locks DIR/name (created if missing; it then holds the locker's pid, for
// messages). Returns the descriptor, or -1 with err: another process holds it
// (its pid named, and `what` said: e.g. "another `wgpt train`"), or the file
// cannot be created (strerror).
int wgpt_dir_lock(const char *dir, const char *name, const char *what, char *err, size_t errlen);
// Releases the lock; -1 is fine.
void wgpt_dir_unlock(int fd);

#endif
