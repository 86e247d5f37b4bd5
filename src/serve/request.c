// request.c: parsing a completion request's JSON (see request.h).
#include "serve/request.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *msg, *param;
    size_t msglen, paramlen;
} why_;

__attribute__((format(printf, 3, 4))) static int refuse_(why_ *w, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, w->msglen, fmt, ap);
    va_end(ap);
    snprintf(w->param, w->paramlen, "%s", param);
    return -1;
}

// A whole number in [lo, hi] (JSON has only doubles: 3.0 is 3, 3.5 is refused).
static int whole_(why_ *w, const cJSON *v, const char *name, double lo, double hi, uint64_t *out) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || floor(v->valuedouble) != v->valuedouble)
        return refuse_(w, name, "'%s' must be a whole number", name);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return refuse_(w, name, "'%s' is %.17g; it must be from %.17g to %.17g", name, v->valuedouble, lo, hi);
    // a negative value (seed's range) as its two's complement: a double below 0 has no uint64_t value
    *out = v->valuedouble < 0 ? (uint64_t)(int64_t)v->valuedouble : (uint64_t)v->valuedouble;
    return 0;
}

static int real_(why_ *w, const cJSON *v, const char *name, double lo, double hi, int lo_open, float *out) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return refuse_(w, name, "'%s' must be a number", name);
    double x = v->valuedouble;
    if (x < lo || (lo_open && x == lo) || x > hi)
        return refuse_(w, name, "'%s' is %g; it must be %s %g and at most %g", name, x, lo_open ? "above" : "at least",
                       lo, hi);
    *out = (float)x;
    return 0;
}

static int prompt_(why_ *w, const cJSON *v, wgpt_completion_req *r) {
    if (cJSON_IsArray(v)) {
        if (cJSON_GetArraySize(v) != 1)
            return refuse_(w, "prompt", "'prompt' as an array must hold exactly one string (this server takes one "
                                        "prompt a request; ask for several completions of it with 'n')");
        v = cJSON_GetArrayItem(v, 0);
    }
    if (!cJSON_IsString(v)) return refuse_(w, "prompt", "'prompt' must be a string or an array of one string");
    r->prompt_len = strlen(v->valuestring);
    r->prompt = strdup(v->valuestring);
    return r->prompt ? 0 : refuse_(w, "prompt", "out of memory");
}

static int stop_(why_ *w, const cJSON *v, wgpt_completion_req *r) {
    if (cJSON_IsNull(v)) return 0;
    const cJSON *items[WGPT_SERVE_MAX_STOPS];
    int n = 0;
    if (cJSON_IsString(v)) {
        items[n++] = v;
    } else if (cJSON_IsArray(v)) {
        if (cJSON_GetArraySize(v) > WGPT_SERVE_MAX_STOPS)
            return refuse_(w, "stop", "'stop' holds %d strings; at most %d", cJSON_GetArraySize(v),
                           WGPT_SERVE_MAX_STOPS);
        const cJSON *e;
        cJSON_ArrayForEach(e, v) items[n++] = e;
    } else {
        return refuse_(w, "stop", "'stop' must be a string or an array of up to %d strings", WGPT_SERVE_MAX_STOPS);
    }
    for (int i = 0; i < n; i++) {
        if (!cJSON_IsString(items[i])) return refuse_(w, "stop", "every 'stop' entry must be a string");
        size_t len = strlen(items[i]->valuestring);
        if (len == 0 || len > WGPT_SERVE_MAX_STOP_BYTES)
            return refuse_(w, "stop", "a 'stop' string must hold 1 to %d bytes", WGPT_SERVE_MAX_STOP_BYTES);
        if (!(r->stops[r->nstops] = strdup(items[i]->valuestring))) return refuse_(w, "stop", "out of memory");
        r->stop_lens[r->nstops++] = len;
    }
    return 0;
}

static int field_(why_ *w, const cJSON *v, wgpt_completion_req *r) {
    const char *k = v->string;
    uint64_t u = 0;
    if (!strcmp(k, "model") || !strcmp(k, "user")) {
        // any model name is this server's one model (GET /v1/models names it)
        return cJSON_IsString(v) || cJSON_IsNull(v) ? 0 : refuse_(w, k, "'%s' must be a string", k);
    }
    if (!strcmp(k, "prompt")) return prompt_(w, v, r);
    if (!strcmp(k, "stop")) return stop_(w, v, r);
    if (cJSON_IsNull(v)) return 0;  // (OpenAI's clients send null for "the default")
    if (!strcmp(k, "max_tokens")) {
        if (whole_(w, v, k, 1, UINT32_MAX, &u) < 0) return -1;
        r->max_tokens = (uint32_t)u;
        return 0;
    }
    if (!strcmp(k, "temperature")) return real_(w, v, k, 0, 2, 0, &r->temperature);
    if (!strcmp(k, "top_p")) return real_(w, v, k, 0, 1, 1, &r->top_p);
    if (!strcmp(k, "top_k")) {
        if (whole_(w, v, k, 0, UINT32_MAX, &u) < 0) return -1;
        r->top_k = (uint32_t)u;
        return 0;
    }
    if (!strcmp(k, "seed")) {  // (doubles hold whole numbers exactly up to 2^53)
        if (whole_(w, v, k, -9007199254740992.0, 9007199254740992.0, &u) < 0) return -1;
        r->seed = (uint64_t)(int64_t)v->valuedouble;
        r->seed_given = 1;
        return 0;
    }
    if (!strcmp(k, "n")) {
        if (whole_(w, v, k, 1, WGPT_SERVE_MAX_N, &u) < 0) return -1;
        r->n = (uint32_t)u;
        return 0;
    }
    if (!strcmp(k, "stream")) {
        if (!cJSON_IsBool(v)) return refuse_(w, k, "'stream' must be true or false");
        r->stream = cJSON_IsTrue(v);
        return 0;
    }
    return refuse_(w, k,
                   "unknown field '%s' (this server takes model, prompt, max_tokens, temperature, top_p, top_k, "
                   "stop, seed, n, stream, user)",
                   k);
}

int wgpt_completion_req_parse(wgpt_completion_req *r, const char *body, size_t len, char *msg, size_t msglen,
                              char *param, size_t paramlen) {
    why_ w = {msg, param, msglen, paramlen};
    memset(r, 0, sizeof *r);
    r->max_tokens = 16;
    r->temperature = 1;
    r->top_p = 1;
    r->n = 1;
    cJSON *root = cJSON_ParseWithLength(body, len);
    int rc = 0;
    if (!root) rc = refuse_(&w, "", "the body is not valid JSON");
    else if (!cJSON_IsObject(root)) rc = refuse_(&w, "", "the body must be a JSON object");
    const cJSON *v;
    if (rc == 0) cJSON_ArrayForEach(v, root) {
            if (cJSON_GetObjectItemCaseSensitive(root, v->string) != v) {
                rc = refuse_(&w, v->string, "the field '%s' is given twice", v->string);
                break;
            }
            if ((rc = field_(&w, v, r)) < 0) break;
        }
    if (rc == 0 && !r->prompt && !(r->prompt = strdup(""))) rc = refuse_(&w, "prompt", "out of memory");
    cJSON_Delete(root);
    if (rc < 0) {
        wgpt_completion_req_free(r);
        memset(r, 0, sizeof *r);
    }
    return rc;
}

void wgpt_completion_req_free(wgpt_completion_req *r) {
    free(r->prompt);
    for (int i = 0; i < r->nstops; i++) free(r->stops[i]);
    r->prompt = NULL;
    r->nstops = 0;
}
