// file_out.h: a file written crash-safely, in pieces: the bytes go to
// PATH.tmp, which is flushed, fsync'ed and renamed over PATH only when
// complete, so PATH is the old file or the whole new one, never half of one.
#ifndef WGPT_FILE_OUT_H
#define WGPT_FILE_OUT_H

#include <stddef.h>
#include <stdio.h>

typedef struct wgpt_file_out {
    FILE *f;
    char *path, *tmp;  // owned
    int failed;        // a write failed: finish refuses
    char why[256];     // the first failure
} wgpt_file_out;

// Returns 0, or -1 with err naming the file (o left closed).
int wgpt_file_out_begin(wgpt_file_out *o, const char *path, char *err, size_t errlen);
// Appends bytes, or floats as little-endian binary32. A failure is kept and
// reported by finish (so callers can write many pieces and check once).
void wgpt_file_out_write(wgpt_file_out *o, const void *p, size_t n);
void wgpt_file_out_floats(wgpt_file_out *o, const float *x, size_t n);
// Flushes, fsyncs, renames over the path, fsyncs the folder. Returns 0, or -1
// with err naming the file and the system's reason; o is closed either way
// (the .tmp removed on -1).
int wgpt_file_out_finish(wgpt_file_out *o, char *err, size_t errlen);
// finish in two halves, for files that must appear together: seal flushes,
// fsyncs and closes the .tmp (on -1 it is removed and o closed); commit
// renames it over the path and fsyncs the folder (o closed either way).
int wgpt_file_out_seal(wgpt_file_out *o, char *err, size_t errlen);
int wgpt_file_out_commit(wgpt_file_out *o, char *err, size_t errlen);
// Closes o and removes its .tmp. Safe on a closed o.
void wgpt_file_out_abort(wgpt_file_out *o);

#endif
