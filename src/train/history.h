// history.h: the loss curves of a run: appended to a JSON-lines metrics log
// as they happen, reloaded from it on resume, and drawn as an SVG plot.
#ifndef WGPT_HISTORY_H
#define WGPT_HISTORY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct wgpt_point {
    uint32_t step;
    float loss;
} wgpt_point;

typedef struct wgpt_history {
    wgpt_point *train, *val;
    size_t ntrain, nval, cap_train, cap_val;
} wgpt_history;

void wgpt_history_free(wgpt_history *h);
int wgpt_history_add(wgpt_history *h, int val, uint32_t step, float loss);
// Drops points after `step` (a resumed run replays from its checkpoint).
void wgpt_history_truncate(wgpt_history *h, uint32_t step);
// Reads the "train" and "val" records of a metrics log written by this
// module. A missing file is not an error (a new run); a malformed line is
// skipped. Returns 0, or -1 with err on a read error or if the path is not a
// regular file (a FIFO is refused without blocking).
int wgpt_history_load(wgpt_history *h, const char *jsonl_path, char *err, size_t errlen);
// A resumed run at `step`: rewrites the log (crash-safely) without the records
// of later steps, which a crash after them lost from the checkpoint and which
// the run is about to write again, and without a torn last line. A missing
// log is fine. Returns 0, or -1 with err naming the file and strerror.
int wgpt_history_trim_log(const char *jsonl_path, uint32_t step, char *err, size_t errlen);
// Writes the curves as an SVG line chart (train and validation loss against
// step), crash-safely (temporary file, rename). Returns 0 or -1 with err.
int wgpt_history_plot_svg(const wgpt_history *h, const char *path, const char *title, char *err, size_t errlen);

#endif
