// test_gpu_cache.c: Dawn's pipeline cache on disk (wgpt_gpu_options.cache_dir,
// src/gpu/pipeline_cache.c): a first device compiles and stores, a second
// finds what the first stored (which also proves our declaration of
// WGPUDawnCacheDeviceDescriptor: Dawn calls both callbacks through it), and
// damaged entries are misses that change no result.
#include <fcntl.h>

#include "test_util.h"

static char DIR_[256];

static int setup_(void **state) {
    (void)state;
    snprintf(DIR_, sizeof DIR_, "/tmp/wgpt_test_gpu_cache_%ld", (long)getpid());
    tu_rm_rf(DIR_);
    return 0;
}
static int teardown_(void **state) {
    (void)state;
    tu_rm_rf(DIR_);
    return 0;
}

// Opens a device over DIR_, fills 1000 floats with 2.5 through a kernel,
// checks them, and returns the cache's counts (read before the close).
static wgpt_gpu_cache_stats run_kernel_(void) {
    wgpt_gpu_options o = {.adapter_index = -1, .cache_dir = DIR_};
    char err[2048];
    wgpt_gpu *g = wgpt_gpu_open(&o, err, sizeof err);
    if (!g) fail_msg("cannot open the GPU: %s", err);
    enum { N = 1000 };
    wgpt_buf *b = wgpt_buf_create(g, N * 4, "x");
    TU_NONNULL(g, b);
    wgpt_kernel *k = wgpt_kernel_get(g, "fill_const");
    TU_NONNULL(g, k);
    wgpt_view v = {b, 0, 0};
    tu_scalar p = {N, 2.5f};
    wgpt_bind *bind = wgpt_bind_create(g, k, &v, 1, &p, sizeof p);
    TU_NONNULL(g, bind);
    TU_OK(g, wgpt_dispatch1d(g, bind, wgpt_groups(N)));
    float *got = tu_download_f32(g, b, N);
    for (int i = 0; i < N; i++) assert_true(got[i] == 2.5f);
    free(got);
    wgpt_gpu_cache_stats st;
    wgpt_gpu_cache_stats_get(g, &st);
    wgpt_bind_free(bind);
    wgpt_buf_free(b);
    wgpt_gpu_close(g);
    printf("cache: %llu lookups, %llu hits, %llu rejected, %llu stores\n", (unsigned long long)st.lookups,
           (unsigned long long)st.hits, (unsigned long long)st.rejected, (unsigned long long)st.stores);
    return st;
}

// Calls fn(path) for every entry file of DIR_; returns how many there are.
static int each_entry_(void (*fn)(const char *path, int i)) {
    DIR *d = opendir(DIR_);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".bin") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", DIR_, e->d_name);
        if (fn) fn(path, n);
        n++;
    }
    closedir(d);
    return n;
}

// Damages entry i one of three ways: a flipped byte past the header, cut
// short, or replaced by text.
static void damage_(const char *path, int i) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    if (i % 3 == 0) {
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        off_t at = 56 + (st.st_size - 56) / 2;
        unsigned char c;
        assert_int_equal(pread(fd, &c, 1, at), 1);
        c ^= 0x5a;
        assert_int_equal(pwrite(fd, &c, 1, at), 1);
        close(fd);
    } else if (i % 3 == 1) {
        assert_int_equal(truncate(path, st.st_size - 7), 0);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputs("not a cache entry", f);
        fclose(f);
    }
}

static void second_open_hits_the_cache(void **st) {
    (void)st;
    wgpt_gpu_cache_stats a = run_kernel_();
    assert_true(a.lookups > 0);  // Dawn called our load callback: the sType and layout are right
    assert_int_equal(a.hits, 0);
    int files = each_entry_(NULL);
    printf("%d entries after the first device\n", files);
    assert_true(files > 0);      // ... and the store callback
    wgpt_gpu_cache_stats b = run_kernel_();
    assert_true(b.hits > 0);
    assert_int_equal(b.rejected, 0);
}

static void damaged_entries_are_misses(void **st) {
    (void)st;
    run_kernel_();
    int files = each_entry_(damage_);
    assert_true(files > 0);
    wgpt_gpu_cache_stats b = run_kernel_();  // (its results are checked inside)
    assert_int_equal(b.hits, 0);
    assert_int_equal(b.rejected, (uint64_t)files);
    wgpt_gpu_cache_stats c = run_kernel_();  // the damaged entries were written anew
    assert_true(c.hits > 0);
    assert_int_equal(c.rejected, 0);
}

// A folder that cannot be made is no cache, not an error.
static void unusable_folder_is_no_cache(void **st) {
    (void)st;
    FILE *f = fopen(DIR_, "wb");  // a file where the folder would be
    assert_non_null(f);
    fclose(f);
    wgpt_gpu_cache_stats a = run_kernel_();
    assert_int_equal(a.lookups, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(second_open_hits_the_cache, setup_, teardown_),
        cmocka_unit_test_setup_teardown(damaged_entries_are_misses, setup_, teardown_),
        cmocka_unit_test_setup_teardown(unusable_folder_is_no_cache, setup_, teardown_),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
