// fs.h: file-system helpers every layer shares: mkdir -p with the system's
// reason in its message, and opening a file only when it is a regular file,
// without ever blocking on a FIFO or a device on the way.
#ifndef WGPT_FS_H
#define WGPT_FS_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

// Creates path and its missing parents (mode 0777 before the umask). Returns 0,
// or -1 with err naming the component that failed and strerror's reason.
int wgpt_mkdirs(const char *path, char *err, size_t errlen);

// open(2) that refuses anything but a regular file (a FIFO, a folder, a
// device): the file is opened with O_NONBLOCK so that a FIFO cannot block the
// call, checked with fstat, then set back to blocking. flags as open(2)'s
// (O_CREAT needs mode). Returns the fd, or -1 with err naming path and why.
int wgpt_open_regular(const char *path, int flags, mode_t mode, char *err, size_t errlen);
// The same as a stdio stream; mode is "r", "rb", "w", "wb", "a" or "ab".
FILE *wgpt_fopen_regular(const char *path, const char *mode, char *err, size_t errlen);

// fsyncs the folder holding path (so that a rename into it is durable).
// Returns 0, or an errno; EINVAL (a file system that cannot sync folders) is 0.
int wgpt_sync_parent(const char *path);

#endif
