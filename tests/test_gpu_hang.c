// test_gpu_hang.c: a GPU that never finishes. A kernel that runs for hours
// (tests/kernels/test_spin.wgsl) stands in for a hung driver: a wait must end
// at WGPT_GPU_TIMEOUT_S or at an interrupt (a signal handler's flag) with a
// message, and closing the device afterwards must not wait for the work
// still running. Each case runs in a fresh process (this program, re-run
// with the case's name) that the parent kills if it does not exit in time.
// Also: the GPU layer's environment variables are checked, not ignored.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"
#include "util/clock.h"

static volatile sig_atomic_t interrupt_;
static void on_alarm_(int sig) {
    (void)sig;
    interrupt_ = 1;  // what the CLI's second Ctrl-C does
}

// Child: dispatch the spinning kernel, wait, close. Exit 0 when the wait
// failed with the expected message; the parent times the whole.
static int child_(const char *which) {
    wgpt_gpu_options o = {.adapter_index = -1, .interrupt = &interrupt_};
    char err[2048];
    if (wgpt_cli_gpu_env(&o, err, sizeof err) < 0) {  // WGPT_GPU_TIMEOUT_S, as the CLI reads it
        fprintf(stderr, "child: %s\n", err);
        return 10;
    }
    wgpt_gpu *g = wgpt_gpu_open(&o, err, sizeof err);
    if (!g) {
        fprintf(stderr, "child: %s\n", err);
        return 10;
    }
    char *src = tu_read_source("tests/kernels/test_spin.wgsl");
    if (wgpt_gpu_add_kernel_file(g, "test_spin.wgsl", src) < 0) return 11;
    free(src);
    wgpt_buf *b = wgpt_buf_create(g, 64, "spin out");
    wgpt_view v = {b, 0, 0};
    tu_scalar p = {0xFFFFFFFFu, 1.0f};
    wgpt_bind *k = wgpt_bind_create(g, wgpt_kernel_get(g, "test_spin"), &v, 1, &p, sizeof p);
    if (!k || wgpt_dispatch(g, k, 1, 1, 1) < 0) {
        fprintf(stderr, "child: %s\n", wgpt_gpu_error(g));
        return 12;
    }
    if (strcmp(which, "interrupt") == 0) {
        signal(SIGALRM, on_alarm_);
        alarm(2);
    }
    int rc = wgpt_gpu_finish(g);
    const char *want = strcmp(which, "interrupt") == 0 ? "interrupted" : "did not finish";
    printf("child: finish returned %d: %s\n", rc, wgpt_gpu_error(g));
    fflush(stdout);
    int ok = rc < 0 && strstr(wgpt_gpu_error(g), want);
    // The device is hung: later calls fail at once rather than wait again.
    float x[4];
    ok = ok && wgpt_buf_download(g, b, 0, x, sizeof x) < 0;
    wgpt_bind_free(k);
    wgpt_buf_free(b);
    wgpt_gpu_close(g);  // must not wait for the spinning kernel
    ok = ok && wgpt_gpu_left_hung() == 1;
    fflush(NULL);
    _exit(ok ? 0 : 13);  // as the CLI does (gpu.h: wgpt_gpu_left_hung)
}

static void self_path_(char *buf, size_t n) {
    ssize_t k = readlink("/proc/self/exe", buf, n - 1);
    assert_true(k > 0);
    buf[k] = 0;
}

// Runs this program as the child `which` and asserts it exits 0 within limit_s.
static void run_child_(const char *which, const char *timeout_env, double limit_s) {
    char self[1024];
    self_path_(self, sizeof self);
    fflush(stdout);
    double t0 = wgpt_clock_s();
    pid_t pid = fork();
    if (pid == 0) {
        if (timeout_env) setenv("WGPT_GPU_TIMEOUT_S", timeout_env, 1);
        else unsetenv("WGPT_GPU_TIMEOUT_S");
        execl(self, self, "--child", which, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 && wgpt_clock_s() - t0 < limit_s) {
        struct timespec ts = {0, 50000000L};
        nanosleep(&ts, NULL);
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("%s: the process did not exit within %.0f s (stuck in the wait or in closing the device)", which,
                 limit_s);
    }
    double took = wgpt_clock_s() - t0;
    printf("  %s: exit %d after %.1f s\n", which, WIFEXITED(status) ? WEXITSTATUS(status) : -1, took);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

// WGPT_GPU_TIMEOUT_S=1: the wait gives up after a second, and the process
// exits soon after (without the fix it sat in wgpuDeviceDestroy for hours).
static void timeout_ends_the_wait_and_close_does_not_hang(void **st) {
    (void)st;
    run_child_("timeout", "1", 60);
}

// An interrupt flag set during the wait (a signal handler's) ends it at once,
// although the timeout is long.
static void interrupt_ends_a_stuck_wait(void **st) {
    (void)st;
    run_child_("interrupt", "600", 60);
}

// A bad value of a GPU variable is an error naming it, not a silent default
// (the CLI reads them: cli/gpu_env.h).
static void bad_environment_values_are_refused(void **st) {
    (void)st;
    static const char *const cases[][3] = {
        {"WGPT_GPU_TIMEOUT_S", "abc", "WGPT_GPU_TIMEOUT_S"},
        {"WGPT_GPU_TIMEOUT_S", "-5", "seconds"},
        {"WGPT_GPU_TIMEOUT_S", "0", "seconds"},
        {"WGPT_ROBUST", "yes", "WGPT_ROBUST"},
        {"WGPT_DAWN_TOGGLES", "dump_shaders, use_dxc", "' use_dxc'"},
        {"WGPT_DAWN_TOGGLES_OFF", "Bad-Name", "WGPT_DAWN_TOGGLES_OFF"},
        {"WGPT_DAWN_TOGGLES", "a,,b", "WGPT_DAWN_TOGGLES"},
        {"WGPT_MATMUL_EPILOGUE", "round,gelu_backward", "'gelu_backward'"},
        {"WGPT_MATMUL_EPILOGUE", "ROUND", "WGPT_MATMUL_EPILOGUE"},
        {"WGPT_MATMUL_STREAMK", "1", "WGPT_MATMUL_STREAMK"},
        {"WGPT_SGM_CONFIG", "x1", "WGPT_SGM_CONFIG"},
        {"WGPT_SGM_EMULATE", "2", "WGPT_SGM_EMULATE"},
        {"WGPT_KERNELS", "GPU", "WGPT_KERNELS"},
        {"WGPT_COMPUTE_UNITS", "0", "WGPT_COMPUTE_UNITS"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(cases[i][0], cases[i][1], 1);
        char err[2048] = "";
        wgpt_gpu_options o = {.adapter_index = -1};
        int rc = wgpt_cli_gpu_env(&o, err, sizeof err);
        unsetenv(cases[i][0]);
        if (rc == 0) fail_msg("%s=%s was accepted", cases[i][0], cases[i][1]);
        printf("  %s=%s: %s\n", cases[i][0], cases[i][1], err);
        assert_non_null(strstr(err, cases[i][2]));
    }
    // The layer refuses what it cannot take, naming the field.
    char err[2048] = "";
    wgpt_gpu_options bad = {.adapter_index = -1, .timeout_s = -1};
    wgpt_gpu_info info[8];
    assert_null(wgpt_gpu_open(&bad, err, sizeof err));
    assert_non_null(strstr(err, "timeout_s"));
    bad = (wgpt_gpu_options){.adapter_index = -1, .dawn_toggles = "a,b,c,d,e,f,g,h,i,j,k,l,m,n"};
    assert_int_equal(wgpt_gpu_list(&bad, info, 8, err, sizeof err), -1);
    assert_non_null(strstr(err, "dawn_toggles names more than 13"));
    setenv("WGPT_GPU_TIMEOUT_S", "2.5", 1);  // a good value still opens
    wgpt_gpu *g = tu_gpu_open(NULL);
    unsetenv("WGPT_GPU_TIMEOUT_S");
    wgpt_gpu_close(g);
    setenv("WGPT_MATMUL_EPILOGUE", "gelu,gelu_grad", 1);  // names become the device's bits
    g = tu_gpu_open(NULL);
    unsetenv("WGPT_MATMUL_EPILOGUE");
    assert_int_equal(wgpt_gpu_get_info(g)->matmul_epilogues, WGPT_EPI_GELU | WGPT_EPI_GELU_GRAD);
    wgpt_gpu_close(g);
    setenv("WGPT_MATMUL_STREAMK", "on", 1);  // and the stream-K choice its setting
    g = tu_gpu_open(NULL);
    unsetenv("WGPT_MATMUL_STREAMK");
    assert_int_equal(wgpt_gpu_get_info(g)->streamk, WGPT_STREAMK_ON);
    wgpt_gpu_close(g);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--child") == 0) return child_(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timeout_ends_the_wait_and_close_does_not_hang),
        cmocka_unit_test(interrupt_ends_a_stuck_wait),
        cmocka_unit_test(bad_environment_values_are_refused),
    };
    return cmocka_run_group_tests_name("gpu_hang", tests, NULL, NULL);
}
