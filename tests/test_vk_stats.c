// test_vk_stats.c: $WGPT_KERNEL_STATS. wgpt turns on VK_LAYER_WGPT_stats
// (src/gpu/vk_stats/) for its Vulkan instances and writes each kernel's name
// to the file before its pipeline is made; the layer appends the driver's
// statistics of that pipeline where the driver has
// VK_KHR_pipeline_executable_properties (NVIDIA: registers, shared memory).
// Here: the device computes as usual with the layer on, the kernel's name is
// in the file, and a driver that reports statistics reports them after it
// (lavapipe 25.0.7 has no such extension: its file holds names only).
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/kernel_stats.h"
#include "model/elementwise.h"

static char path_[64];

static void stats_follow_the_kernel_name(void **st) {
    (void)st;
    wgpt_gpu_options o = {.adapter_index = -1};
    wgpt_gpu *g = tu_gpu_open(&o);
    const wgpt_gpu_info *in = wgpt_gpu_get_info(g);
    if (strcmp(in->backend, "Vulkan") != 0) {
        printf("skipped: needs a Vulkan adapter (the layer is Vulkan's); '%s' is not one\n", in->name);
        skip();
    }
    enum { N = 1024 };
    float a[N], b[N];
    tu_fill(a, N, -1, 1), tu_fill(b, N, -1, 1);
    wgpt_buf *ba = tu_upload_f32(g, a, N, "a"), *bb = tu_upload_f32(g, b, N, "b");
    wgpt_buf *bo = wgpt_buf_create(g, N * 4, "out");
    TU_NONNULL(g, bo);
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_view vo = {bo, 0, 0}, va = {ba, 0, 0}, vb = {bb, 0, 0};
    TU_OK(g, wgpt_residual_forward(g, &op, vo, va, vb, N));
    for (int i = 0; i < op.n; i++) TU_OK(g, wgpt_dispatch(g, op.steps[i].bind, op.steps[i].x, op.steps[i].y, op.steps[i].z));
    TU_OK(g, wgpt_gpu_finish(g));
    wgpt_op_free(&op);
    float *got = tu_download_f32(g, bo, N);
    for (int i = 0; i < N; i++) assert_float_equal(got[i], a[i] + b[i], 0);
    free(got);
    wgpt_buf_free(ba), wgpt_buf_free(bb), wgpt_buf_free(bo);

    FILE *f = fopen(path_, "r");
    assert_non_null(f);
    char line[4096], after[4096] = "";
    int named = 0;
    while (fgets(line, sizeof line, f)) {
        if (named && !after[0]) snprintf(after, sizeof after, "%s", line);
        if (strncmp(line, "kernel residual_forward", 23) == 0) named = 1;
    }
    fclose(f);
    if (!named) fail_msg("%s names no residual_forward kernel", path_);
    if (!after[0] || strncmp(after, "kernel ", 7) == 0) {
        printf("'%s' reports no pipeline statistics (no VK_KHR_pipeline_executable_properties): names only\n",
               in->name);
        if (in->vendor_id == 0x10de) fail_msg("NVIDIA's driver offers the statistics, and the file has none");
        return;
    }
    printf("'%s': %s", in->name, after);
    assert_non_null(strstr(after, " | "));
    if (in->vendor_id == 0x10de) assert_non_null(strstr(after, "Register Count="));
}

// A file wgpt cannot append to is an error that names it, before any device.
static void unwritable_file_is_named(void **st) {
    (void)st;
    char dir[1024], cmd[1400], out[2048] = "";
    assert_int_equal(tu_build_dir(dir, sizeof dir), 0);
    snprintf(cmd, sizeof cmd, "WGPT_KERNEL_STATS=/nonexistent-wgpt-dir/stats.txt '%s/wgpt' info 2>&1", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int rc = pclose(p);
    printf("%s", out);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(out, "WGPT_KERNEL_STATS=/nonexistent-wgpt-dir/stats.txt: cannot open that file"));
}

// The file read back for `wgpt bench --profile`: a kernel's figures from the
// driver's line after its name, none for a kernel without one (lavapipe, or
// a pipeline Dawn had in its cache), the last report of a kernel named twice.
static void stats_file_read_back(void **st) {
    (void)st;
    char path[64];
    snprintf(path, sizeof path, "/tmp/wgpt_kernel_stats_rb_%ld.txt", (long)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("kernel matmul_sgm (03_linear_sgm.wgsl)\n"
          "4 dawn_entry_point CS | Register Count=186 | Binary Size=78336 | Stack Size=0 | "
          "Local Memory Size=68719476736 | Shared Memory Size=35840\n"
          "kernel residual_forward_vec4 (05_residual.wgsl)\n"
          "kernel attention_sgm_forward (04_attention_sgm.wgsl)\n"
          "6 dawn_entry_point CS | Register Count=171 | Shared Memory Size=45056\n"
          "kernel attention_sgm_forward (04_attention_sgm.wgsl)\n"
          "9 dawn_entry_point CS | Register Count=105 | Shared Memory Size=45056\n", f);
    fclose(f);
    wgpt_kernel_stat k[8];
    assert_int_equal(wgpt_kernel_stats_read(path, k, 8), 3);
    const wgpt_kernel_stat *m = wgpt_kernel_stats_find(k, 3, "matmul_sgm");
    const wgpt_kernel_stat *r = wgpt_kernel_stats_find(k, 3, "residual_forward_vec4");
    const wgpt_kernel_stat *a = wgpt_kernel_stats_find(k, 3, "attention_sgm_forward");
    assert_non_null(m), assert_non_null(r), assert_non_null(a);
    assert_int_equal(m->registers, 186), assert_int_equal(m->shared_bytes, 35840);
    assert_int_equal(r->registers, -1), assert_int_equal(r->shared_bytes, -1);
    assert_int_equal(a->registers, 105), assert_int_equal(a->shared_bytes, 45056);
    assert_null(wgpt_kernel_stats_find(k, 3, "matmul"));
    assert_int_equal(wgpt_kernel_stats_read(path, k, 1), 1);  // at most max
    unlink(path);
    assert_int_equal(wgpt_kernel_stats_read(path, k, 8), -1);
}

int main(void) {
    snprintf(path_, sizeof path_, "/tmp/wgpt_kernel_stats_%ld.txt", (long)getpid());
    unlink(path_);
    setenv("WGPT_KERNEL_STATS", path_, 1);  // before the first device: the layer goes on once a process
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stats_follow_the_kernel_name),
        cmocka_unit_test(unwritable_file_is_named),
        cmocka_unit_test(stats_file_read_back),
    };
    int rc = cmocka_run_group_tests(tests, NULL, tu_group_teardown);
    unlink(path_);
    return rc;
}
