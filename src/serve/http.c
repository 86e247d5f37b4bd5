// http.c: routes, request bodies and responses over libmicrohttpd (see http.h).
#include "serve/http.h"

#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve/request.h"
#include "serve/response.h"

#define WAIT_MS 200  // a waiting connection thread looks again this often

struct wgpt_http {
    wgpt_http_opts o;
    struct MHD_Daemon *d;
    wgpt_batcher *b;
    const wgpt_tokenizer *tok;
    uint16_t port;
    long long started;
    pthread_mutex_t mu;  // the id counter and the count of requests in flight
    unsigned long long next_id;
    int inflight;        // requests whose headers came and whose response is not all sent
};

typedef struct {
    wgpt_sbuf body;
    int too_big;
} conn_;

// --- plain responses ----------------------------------------------------------
static enum MHD_Result send_(struct MHD_Connection *c, int status, wgpt_sbuf *body, const char *type) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body->len, body->p ? body->p : (char *)"", MHD_RESPMEM_MUST_COPY);
    wgpt_sbuf_free(body);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_json_(struct MHD_Connection *c, int status, wgpt_sbuf *body) {
    return send_(c, status, body, "application/json");
}

static enum MHD_Result send_error_(struct MHD_Connection *c, int status, const char *msg, const char *param,
                                   const char *code) {
    wgpt_sbuf b = {0};
    if (wgpt_resp_error(&b, status, msg, param, code) < 0) {
        wgpt_sbuf_free(&b);
        return MHD_NO;
    }
    return send_json_(c, status, &b);
}

// --- streams ----------------------------------------------------------------
typedef struct {
    wgpt_http *h;
    wgpt_serve_job *j;
    wgpt_sbuf out;      // events not yet handed to MHD
    size_t off;
    size_t sent[WGPT_SERVE_MAX_N];
    unsigned char final_sent[WGPT_SERVE_MAX_N];
    int done;           // "data: [DONE]" is in out
} stream_;

// Appends the events for what the job did since the last call. (Lock held.)
static void stream_fill_(stream_ *s) {
    wgpt_serve_job *j = s->j;
    if (j->status) {
        wgpt_sbuf_add(&s->out, "data: ", 6);
        wgpt_resp_error(&s->out, j->status, j->error, NULL, NULL);
        wgpt_sbuf_add(&s->out, "\ndata: [DONE]\n\n", 15);
        s->done = 1;
        return;
    }
    uint32_t finals = 0;
    for (uint32_t c = 0; c < j->req.n; c++) {
        const wgpt_serve_choice *ch = &j->choice[c];
        if (s->final_sent[c]) {
            finals++;
            continue;
        }
        size_t upto = ch->finish ? ch->text.len : ch->ready;
        if (upto > s->sent[c] || ch->finish)
            wgpt_resp_chunk(&s->out, j, s->h->o.model, c, ch->text.p + s->sent[c], upto - s->sent[c], ch->finish);
        s->sent[c] = upto;
        if (ch->finish) s->final_sent[c] = 1, finals++;
    }
    if (finals == j->req.n) {
        wgpt_sbuf_add(&s->out, "data: [DONE]\n\n", 14);
        s->done = 1;
    }
}

static ssize_t stream_read_(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ *s = cls;
    if (s->off == s->out.len) {
        if (s->done) return MHD_CONTENT_READER_END_OF_STREAM;
        s->out.len = s->off = 0;
        wgpt_batcher_lock(s->h->b);
        for (;;) {
            stream_fill_(s);
            if (s->out.len || s->done) break;
            wgpt_batcher_wait(s->h->b, WAIT_MS);
        }
        wgpt_batcher_unlock(s->h->b);
        if (!s->out.len) return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = s->out.len - s->off < max ? s->out.len - s->off : max;
    memcpy(buf, s->out.p + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

// The stream's end: sent, or the client went away (then its slots are freed).
static void stream_free_(void *cls) {
    stream_ *s = cls;
    if (!s->done || s->off < s->out.len) wgpt_batcher_cancel(s->h->b, s->j);
    wgpt_batcher_release(s->h->b, s->j);
    wgpt_sbuf_free(&s->out);
    free(s);
}

static enum MHD_Result send_stream_(wgpt_http *h, struct MHD_Connection *c, wgpt_serve_job *j) {
    stream_ *s = calloc(1, sizeof *s);
    if (!s) {
        wgpt_batcher_cancel(h->b, j);
        wgpt_batcher_release(h->b, j);
        return send_error_(c, 500, "out of host memory", NULL, NULL);
    }
    s->h = h;
    s->j = j;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read_, s, stream_free_);
    if (!r) {
        stream_free_(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

// --- the completions endpoint ---------------------------------------------------
static wgpt_serve_job *new_job_(wgpt_http *h, wgpt_completion_req *req) {
    pthread_mutex_lock(&h->mu);
    unsigned long long k = ++h->next_id;
    pthread_mutex_unlock(&h->mu);
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t seed = (uint64_t)t.tv_sec * 1000000007ull ^ (uint64_t)t.tv_nsec ^ k << 32;
    wgpt_serve_job *j = wgpt_serve_job_new(req, h->tok, seed);
    if (!j) return NULL;
    snprintf(j->id, sizeof j->id, "cmpl-%llx%08llx", (unsigned long long)h->started, k);
    j->created = (long long)t.tv_sec;
    return j;
}

static enum MHD_Result complete_(wgpt_http *h, struct MHD_Connection *c, const conn_ *cc) {
    wgpt_completion_req req;
    char msg[512], param[64];
    if (wgpt_completion_req_parse(&req, cc->body.p ? cc->body.p : "", cc->body.len, msg, sizeof msg, param,
                                  sizeof param) < 0)
        return send_error_(c, 400, msg, param, NULL);
    wgpt_serve_job *j = new_job_(h, &req);
    wgpt_completion_req_free(&req);
    if (!j) return send_error_(c, 500, "out of host memory for the request", NULL, NULL);
    if (j->nids + j->req.max_tokens > h->o.context) {
        snprintf(msg, sizeof msg,
                 "this model's context is %u tokens; the request asks for %zu (%zu of prompt after a document "
                 "start, %u of completion): shorten the prompt or lower max_tokens",
                 h->o.context, j->nids + j->req.max_tokens, j->nids, j->req.max_tokens);
        wgpt_serve_job_free(j);
        return send_error_(c, 400, msg, "max_tokens", "context_length_exceeded");
    }
    if (wgpt_batcher_submit(h->b, j) < 0) {
        wgpt_serve_job_free(j);
        return send_error_(c, 503, "the server is shutting down", NULL, NULL);
    }
    if (j->req.stream) return send_stream_(h, c, j);
    wgpt_sbuf body = {0};
    int status = 200;
    wgpt_batcher_lock(h->b);
    while (j->finished < j->req.n) wgpt_batcher_wait(h->b, WAIT_MS);
    int cancelled = 0;
    for (uint32_t i = 0; i < j->req.n; i++) cancelled |= !strcmp(j->choice[i].finish, "cancelled");
    if (j->status) status = j->status, wgpt_resp_error(&body, status, j->error, NULL, NULL);
    else if (cancelled) status = 503, wgpt_resp_error(&body, status, "cancelled: the server is shutting down", NULL, NULL);
    else wgpt_resp_completion(&body, j, h->o.model);
    wgpt_batcher_unlock(h->b);
    wgpt_batcher_release(h->b, j);
    return send_json_(c, status, &body);
}

// --- routing ----------------------------------------------------------------
static enum MHD_Result route_(wgpt_http *h, struct MHD_Connection *c, const char *url, const char *method,
                              const conn_ *cc) {
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    wgpt_sbuf b = {0};
    if (!strcmp(url, "/v1/completions")) {
        if (!post) return send_error_(c, 405, "use POST for /v1/completions", NULL, NULL);
        if (cc->too_big) goto too_big;
        return complete_(h, c, cc);
    }
    if (!strcmp(url, "/v1/models") || !strcmp(url, "/health")) {
        if (!get) return send_error_(c, 405, "use GET here", NULL, NULL);
        if (url[1] == 'h') {
            wgpt_batcher_stats st;
            wgpt_batcher_get_stats(h->b, &st);
            wgpt_resp_health(&b, &st);
        } else {
            wgpt_resp_models(&b, h->o.model, h->started, h->o.context);
        }
        return send_json_(c, 200, &b);
    }
    char msg[300];
    snprintf(msg, sizeof msg, "no route %.200s (this server has POST /v1/completions, GET /v1/models, GET /health)",
             url);
    return send_error_(c, 404, msg, NULL, NULL);
too_big:;
    snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", h->o.max_body);
    return send_error_(c, 413, msg, NULL, NULL);
}

static enum MHD_Result on_request_(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                   const char *version, const char *data, size_t *data_size, void **ctx) {
    (void)version;
    wgpt_http *h = cls;
    conn_ *cc = *ctx;
    if (!cc) {  // the headers: refuse a body announced too large before it comes
        if (!(cc = calloc(1, sizeof *cc))) return MHD_NO;
        *ctx = cc;
        pthread_mutex_lock(&h->mu);
        h->inflight++;
        pthread_mutex_unlock(&h->mu);
        const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (len && strtoull(len, NULL, 10) > h->o.max_body) {
            cc->too_big = 1;
            char msg[128];
            snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", h->o.max_body);
            return send_error_(c, 413, msg, NULL, NULL);
        }
        return MHD_YES;
    }
    if (*data_size) {
        if (!cc->too_big && cc->body.len + *data_size <= h->o.max_body) {
            if (wgpt_sbuf_add(&cc->body, data, *data_size) < 0) return MHD_NO;
        } else {
            cc->too_big = 1;
            wgpt_sbuf_free(&cc->body);
        }
        *data_size = 0;
        return MHD_YES;
    }
    return route_(h, c, url, method, cc);
}

static void on_done_(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_RequestTerminationCode why) {
    (void)c, (void)why;
    wgpt_http *h = cls;
    conn_ *cc = *ctx;
    if (!cc) return;
    pthread_mutex_lock(&h->mu);
    h->inflight--;
    pthread_mutex_unlock(&h->mu);
    wgpt_sbuf_free(&cc->body);
    free(cc);
    *ctx = NULL;
}

wgpt_http *wgpt_http_start(const wgpt_http_opts *o, wgpt_batcher *b, const wgpt_tokenizer *tok, char *err,
                           size_t errlen) {
    struct addrinfo hints = {.ai_flags = AI_PASSIVE, .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", o->port);
    int g = getaddrinfo(o->host, port, &hints, &ai);
    if (g != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", o->host, gai_strerror(g));
        return NULL;
    }
    wgpt_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        snprintf(err, errlen, "out of host memory");
        return NULL;
    }
    h->o = *o;
    h->b = b;
    h->tok = tok;
    h->started = (long long)time(NULL);
    pthread_mutex_init(&h->mu, NULL);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, o->port, NULL, NULL, on_request_, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_conns, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)120, MHD_OPTION_NOTIFY_COMPLETED, on_done_, h, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s port %u (in use? not an address of this host?)", o->host, o->port);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : o->port;
    return h;
}

uint16_t wgpt_http_port(const wgpt_http *h) { return h->port; }

int wgpt_http_inflight(wgpt_http *h) {
    pthread_mutex_lock(&h->mu);
    int n = h->inflight;
    pthread_mutex_unlock(&h->mu);
    return n;
}

void wgpt_http_quiesce(wgpt_http *h) {
    MHD_socket s = MHD_quiesce_daemon(h->d);
    if (s != MHD_INVALID_SOCKET) close(s);
}

void wgpt_http_stop(wgpt_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
