// test_serve.c: `wgpt serve` with real HTTP clients. A tiny bytes model is
// trained here (a few steps), then tests/serve_client.py starts the server
// on a free loopback port and checks it with Python's http.client and curl
// (what it checks is listed there). Bounded: every wait has a limit.
#include <time.h>

#include "test_util.h"

static char dir_[256], wgpt_[4096];

static int sh_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh_(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    fflush(stdout);
    int rc = system(cmd);
    if (rc != 0) printf("exit status %d: %s\n", rc, cmd);
    return rc;
}

static int setup_(void **state) {
    (void)state;
    snprintf(dir_, sizeof dir_, "/tmp/wgpt_test_serve_%ld", (long)getpid());
    tu_rm_rf(dir_);
    if (mkdir(dir_, 0755) != 0 || tu_build_dir(wgpt_, sizeof wgpt_ - 8) < 0) return -1;
    strcat(wgpt_, "/wgpt");
    char path[600];
    snprintf(path, sizeof path, "%s/cache", dir_);  // the pipeline cache: the test's own, not the user's
    setenv("WGPT_CACHE_DIR", path, 1);
    snprintf(path, sizeof path, "%s/text.txt", dir_);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    const char *w[] = {"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog"};
    uint64_t s = 1;
    for (int i = 0; i < 4000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        fprintf(f, "%s ", w[(s >> 33) % 9]);
    }
    fclose(f);
    return 0;
}

static int teardown_(void **state) {
    (void)state;
    tu_rm_rf(dir_);
    return 0;
}

static void serve_with_real_clients(void **st) {
    (void)st;
    assert_int_equal(sh_("cd %s && timeout 60 %s tokenize --tokenizer bytes --val-fraction 0 --out data text.txt "
                         ">/dev/null",
                         dir_, wgpt_),
                     0);
    assert_int_equal(sh_("cd %s && timeout 300 %s train --data data --out run --layers 1 --heads 2 --channels 32 "
                         "--seq 128 --batch 4 --steps 20 --warmup 0 --val-every 0 --lr 0.02 --quiet >/dev/null",
                         dir_, wgpt_),
                     0);
    assert_int_equal(sh_("timeout 600 python3 %s/tests/serve_client.py --wgpt %s --checkpoint %s/run/latest.ckpt "
                         "--dir %s",
                         WGPT_SOURCE_DIR, wgpt_, dir_, dir_),
                     0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(serve_with_real_clients, setup_, teardown_),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
