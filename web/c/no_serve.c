// no_serve.c: `wgpt serve` in the browser build, where no program listens on
// a socket: the command says so instead of linking the HTTP server (src/serve/).
#include <stdio.h>

#include "cli/commands.h"

int wgpt_cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "wgpt serve: not in the browser build (a web page cannot listen on a port): run the native wgpt\n");
    return 2;
}
