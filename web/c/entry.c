// entry.c: how the page starts a program of the WebAssembly build (web/wgpt.js):
// the export wgpt_web_run takes the argument list the page gave through WASI
// and calls the program's main (compiled as wgpt_prog_main: web/web.mk), as
// a process would. exit() inside ends the run through WASI's proc_exit.
#include <stdio.h>
#include <stdlib.h>
#include <wasi/api.h>

int wgpt_prog_main(int argc, char **argv);

__attribute__((export_name("wgpt_web_run"))) int wgpt_web_run(void) {
    __wasi_size_t argc = 0, bytes = 0;
    if (__wasi_args_sizes_get(&argc, &bytes) != 0) return 70;
    char **argv = calloc(argc + 1, sizeof *argv);
    char *buf = malloc(bytes ? bytes : 1);
    if (!argv || !buf || __wasi_args_get((uint8_t **)argv, (uint8_t *)buf) != 0) return 70;
    int rc = wgpt_prog_main((int)argc, argv);
    fflush(NULL);
    free(argv);
    free(buf);
    return rc;
}
