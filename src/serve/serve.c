// serve.c: start, serve, stop in order (see serve.h).
#include "serve/serve.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "model/gpt2_decode.h"
#include "serve/batcher.h"
#include "serve/http.h"

#define SHUTDOWN_GRACE_S 10.0

static void say_(const wgpt_serve_opts *o, const char *line) {
    if (o->say) o->say(o->say_user, line);
}

static void nap_(void) {
    struct timespec t = {0, 50 * 1000000L};
    nanosleep(&t, NULL);
}

int wgpt_serve_run(const wgpt_serve_opts *o, wgpt_gpt2 *model, const wgpt_tokenizer *tok, char *err, size_t errlen) {
    wgpt_decoder *d = wgpt_decoder_create(model, o->max_batch, err, errlen);
    if (!d) return -1;
    // The threads started here block every signal: the caller's handler runs
    // on this thread, and the decode thread's GPU waits see no EINTR.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    wgpt_batcher *b = wgpt_batcher_start(d, tok, err, errlen);
    wgpt_http_opts ho = {o->host, o->port, o->max_body, o->max_conns, o->model, wgpt_decoder_context(d)};
    wgpt_http *h = b ? wgpt_http_start(&ho, b, tok, err, errlen) : NULL;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!b) {
        wgpt_decoder_free(d);
        return -1;
    }
    if (!h) {
        wgpt_batcher_free(b);
        wgpt_decoder_free(d);
        return -1;
    }
    char line[512];
    int v6 = o->host[0] != '[' && strchr(o->host, ':');
    snprintf(line, sizeof line, "listening on http://%s%s%s:%u (model %s, context %u, %u slots)", v6 ? "[" : "",
             o->host, v6 ? "]" : "", wgpt_http_port(h), o->model, wgpt_decoder_context(d), o->max_batch);
    say_(o, line);
    while (!*o->stop) nap_();
    // Take no new connections, fail what waits for a slot, finish what runs
    // (a second signal: cancel it), then close the connections.
    wgpt_http_quiesce(h);
    wgpt_batcher_drain(b, 0);
    int cancelled = 0;
    while (!wgpt_batcher_idle(b)) {
        if (*o->stop_now && !cancelled) wgpt_batcher_drain(b, cancelled = 1);
        nap_();
    }
    wgpt_batcher_stop(b, cancelled);
    // Let the connections send what their finished jobs hold (a client that
    // does not read it gets SHUTDOWN_GRACE_S seconds), then close them all.
    double grace = SHUTDOWN_GRACE_S;
    while (wgpt_http_inflight(h) > 0 && grace > 0 && !*o->stop_now) nap_(), grace -= 0.05;
    wgpt_http_stop(h);
    wgpt_batcher_free(b);
    wgpt_decoder_free(d);
    say_(o, "stopped");
    return 0;
}
