// serve_web.c: `wgpt serve` in the browser build: a web page cannot listen on
// a socket, so the command says so (src/serve/ is libmicrohttpd's, native only).
#include <stdio.h>

#include "serve/serve.h"

int wgpt_serve_run(const wgpt_serve_opts *o, wgpt_gpt2 *model, const wgpt_tokenizer *tok, char *err, size_t errlen) {
    (void)o, (void)model, (void)tok;
    snprintf(err, errlen, "wgpt serve is not available in the browser (a web page cannot listen for connections)");
    return -1;
}
