// history.c: loss curves, their reload from the metrics log, and the SVG plot.
#include "train/history.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"

void wgpt_history_free(wgpt_history *h) {
    free(h->train);
    free(h->val);
    memset(h, 0, sizeof *h);
}

int wgpt_history_add(wgpt_history *h, int val, uint32_t step, float loss) {
    wgpt_point **pts = val ? &h->val : &h->train;
    size_t *n = val ? &h->nval : &h->ntrain, *cap = val ? &h->cap_val : &h->cap_train;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        wgpt_point *np = realloc(*pts, nc * sizeof *np);
        if (!np) return -1;
        *pts = np;
        *cap = nc;
    }
    (*pts)[(*n)++] = (wgpt_point){step, loss};
    return 0;
}

void wgpt_history_truncate(wgpt_history *h, uint32_t step) {
    while (h->ntrain && h->train[h->ntrain - 1].step > step) h->ntrain--;
    while (h->nval && h->val[h->nval - 1].step > step) h->nval--;
}

// Opens path for reading; *f NULL (and 0) when it does not exist.
static int open_log_(const char *path, FILE **f, char *err, size_t errlen) {
    struct stat st;
    *f = NULL;
    if (stat(path, &st) != 0 && errno == ENOENT) return 0;
    *f = wgpt_fopen_regular(path, "r", err, errlen);
    return *f ? 0 : -1;
}

// Creates path.tmp for writing, replacing a stale one without following it.
static FILE *create_tmp_(const char *tmp, char *err, size_t errlen) {
    int fd = unlink(tmp) == 0 || errno == ENOENT ? open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        if (fd >= 0) close(fd), unlink(tmp);
    }
    return f;
}

int wgpt_history_load(wgpt_history *h, const char *path, char *err, size_t errlen) {
    FILE *f;
    if (open_log_(path, &f, err, errlen) < 0) return -1;
    if (!f) return 0;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
        const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step");
        const cJSON *loss = cJSON_GetObjectItemCaseSensitive(j, "loss");
        if (cJSON_IsString(kind) && cJSON_IsNumber(step) && cJSON_IsNumber(loss) && step->valuedouble >= 0) {
            int val = strcmp(kind->valuestring, "val") == 0;
            if (val || strcmp(kind->valuestring, "train") == 0) {
                // a resumed run rewrites from its checkpoint on: a record replaces
                // the ones of its kind at that step and later
                uint32_t st = (uint32_t)step->valuedouble;
                if (!val) wgpt_history_truncate(h, st ? st - 1 : 0);
                while (val && h->nval && h->val[h->nval - 1].step >= st) h->nval--;
                if (wgpt_history_add(h, val, (uint32_t)step->valuedouble, (float)loss->valuedouble) < 0) {
                    cJSON_Delete(j);
                    fclose(f);
                    snprintf(err, errlen, "%s: out of memory", path);
                    return -1;
                }
            }
        }
        cJSON_Delete(j);
    }
    int bad = ferror(f) ? errno : 0;
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: read error: %s", path, strerror(bad));
        return -1;
    }
    return 0;
}

// The step of a metrics record, or -1 if the line is not one.
static double record_step_(const char *line) {
    cJSON *j = cJSON_Parse(line);
    if (!j) return -1;
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step");
    double st = cJSON_IsNumber(step) && step->valuedouble >= 0 ? step->valuedouble : -1;
    cJSON_Delete(j);
    return st;
}

int wgpt_history_trim_log(const char *path, uint32_t step, char *err, size_t errlen) {
    FILE *in;
    if (open_log_(path, &in, err, errlen) < 0) return -1;
    if (!in) return 0;
    char tmp[4200], line[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = create_tmp_(tmp, err, errlen);
    if (!out) {
        fclose(in);
        return -1;
    }
    // A line longer than the buffer is no record of ours: it is dropped whole.
    int rc = 0, whole = 1, read_failed = 0;  // read_failed: the message is written already
    while (fgets(line, sizeof line, in)) {
        size_t n = strlen(line);
        int ends = n && line[n - 1] == '\n';
        if (whole && ends) {
            double st = record_step_(line);
            if (st >= 0 && st <= step && fputs(line, out) == EOF) rc = -1;
        }
        whole = ends;
    }
    int e = errno;
    if (ferror(in)) {
        snprintf(err, errlen, "%s: read error: %s", path, strerror(e));
        rc = -1, read_failed = 1;
    }
    fclose(in);
    if (rc == 0 && (fflush(out) != 0 || fsync(fileno(out)) != 0)) rc = -1;
    e = errno;
    if (fclose(out) != 0 && rc == 0) rc = -1, e = errno;
    if (rc == 0 && rename(tmp, path) != 0) rc = -1, e = errno;
    if (rc < 0) {
        unlink(tmp);
        if (!read_failed) snprintf(err, errlen, "%s: cannot rewrite it from step %u on: %s", path, step, strerror(e));
        return -1;
    }
    return 0;
}

// --- SVG ----------------------------------------------------------------------
enum { W = 800, H = 480, ML = 70, MR = 20, MT = 40, MB = 50 };

static void polyline_(FILE *f, const wgpt_point *p, size_t n, double x0, double x1, double y0, double y1,
                      const char *color) {
    if (!n) return;
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(p[i].loss)) continue;
        double x = ML + (p[i].step - x0) / (x1 - x0) * (W - ML - MR);
        double y = MT + (y1 - p[i].loss) / (y1 - y0) * (H - MT - MB);
        fprintf(f, "%.1f,%.1f ", x, y);
    }
    fprintf(f, "\"/>\n");
}

int wgpt_history_plot_svg(const wgpt_history *h, const char *path, const char *title, char *err, size_t errlen) {
    double x0 = 1e30, x1 = -1e30, y0 = 1e30, y1 = -1e30;
    const wgpt_point *sets[2] = {h->train, h->val};
    size_t ns[2] = {h->ntrain, h->nval};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < ns[s]; i++) {
            if (!isfinite(sets[s][i].loss)) continue;
            x0 = fmin(x0, sets[s][i].step), x1 = fmax(x1, sets[s][i].step);
            y0 = fmin(y0, sets[s][i].loss), y1 = fmax(y1, sets[s][i].loss);
        }
    if (x0 > x1) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    if (x1 - x0 < 1) x1 = x0 + 1;
    double pad = (y1 - y0) * 0.05 + 1e-3;
    y0 -= pad, y1 += pad;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = create_tmp_(tmp, err, errlen);
    if (!f) return -1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"16\">", ML);
    for (const char *c = title; *c; c++) {  // escape the title for XML
        if (*c == '<') fputs("&lt;", f);
        else if (*c == '>') fputs("&gt;", f);
        else if (*c == '&') fputs("&amp;", f);
        else fputc(*c, f);
    }
    fprintf(f, "</text>\n");
    for (int i = 0; i <= 5; i++) {  // grid and axis labels
        double y = MT + i * (H - MT - MB) / 5.0, v = y1 - i * (y1 - y0) / 5.0;
        double x = ML + i * (W - ML - MR) / 5.0, s = x0 + i * (x1 - x0) / 5.0;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ML, y, W - MR, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.3f</text>\n", ML - 6, y + 4, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, MT, x, H - MB);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n", x, H - MB + 18, s);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n", (W + ML) / 2, H - 10);
    fprintf(f, "<text x=\"16\" y=\"%d\" transform=\"rotate(-90 16 %d)\" text-anchor=\"middle\">loss</text>\n",
            (H + MT) / 2, (H + MT) / 2);
    polyline_(f, h->train, h->ntrain, x0, x1, y0, y1, "#1f77b4");
    polyline_(f, h->val, h->nval, x0, x1, y0, y1, "#d62728");
    fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#1f77b4\">train</text>\n", W - MR - 120, MT + 16);
    fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#d62728\">validation</text>\n", W - MR - 120, MT + 32);
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(e));
        return -1;
    }
    return 0;
}
