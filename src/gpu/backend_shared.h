// backend_shared.h: what both GPU backends (Dawn's, src/gpu/, and the
// browser's, src/gpu/web/) do alike, written once: the options (settings.c),
// the chip table (chips.c), the subgroup-matrix choice (sgm_pick.c), the
// buffer range checks (buffer_checks.c) and the table of kernel files
// (kernel_table.c). On gpu.h and kernel_source.h alone.
#ifndef WGPT_GPU_BACKEND_SHARED_H
#define WGPT_GPU_BACKEND_SHARED_H

#include <stddef.h>

#include "gpu/gpu.h"
#include "gpu/kernel_source.h"

// 0, or -1 with err naming the field: values of opt the layer cannot take
// (the CLI refuses them first, naming the variable: src/cli/gpu_env.c);
// the limits are gpu.h's.
int wgpt_gpu_options_check_(const wgpt_gpu_options *opt, char *err, size_t errlen);
// How long a wait for the GPU may take: opt->timeout_s, else 600 s.
double wgpt_gpu_timeout_of_(const wgpt_gpu_options *opt);
// The settings of the layers above that a device keeps in its info
// (cpu_kernels, matmul_splits, sgm_block, matmul_epilogues, streamk, the
// binding limit), from opt and the device's type and limits in info.
void wgpt_gpu_keep_settings_(wgpt_gpu_info *info, const wgpt_gpu_options *opt);

// chips.c: info's compute_units and peaks from the table of known chips;
// compute_units (options.compute_units) instead of the table's where not 0.
void wgpt_chip_fill_(wgpt_gpu_info *info, uint32_t compute_units);
// sgm_pick.c: sets info->sgm_config from info's matrix configurations and
// subgroup sizes: the f16 x f16 -> f32 one 03_linear_sgm.wgsl takes (M 16, N 8
// or 16, K 8, 16 or 32, the adapter's one subgroup size), the largest K
// first, or -1; want > 0 (options.sgm_config): configuration want - 1, and -1
// with err filled if the kernels cannot take it.
int wgpt_sgm_choose_config_(wgpt_gpu_info *info, int want, char *err, size_t errlen);
// The same with want 0 (wgpt picks).
int wgpt_sgm_pick_config_(wgpt_gpu_info *info, char *err, size_t errlen);
// The lines every kernel's source begins with: `enable f16;`, `enable subgroups;`
// and, with subgroup matrices, `enable chromium_experimental_subgroup_matrix;`
// and the chosen configuration's fragment shape (SGM_TM, SGM_TN, SGM_TK, SGM_SG).
void wgpt_gpu_enables_(const wgpt_gpu_info *info, char *out, size_t cap);

// buffer_checks.c. The bytes [offset, offset + bytes) of a buffer of `size`
// bytes named label: 0 if 4-aligned and inside it, else -1 with g's error
// naming op ("upload", "readback", ...).
int wgpt_buf_range_check_(wgpt_gpu *g, const char *label, uint64_t size, uint64_t offset, uint64_t bytes,
                          const char *op);
// A readback of `bytes` named label: 0 if a positive multiple of 4 and at most max_buffer, else -1 with g's error.
int wgpt_readback_size_check_(wgpt_gpu *g, const char *label, uint64_t bytes, uint64_t max_buffer);
// The n ranges a read of readback rb_label (room rb_size) takes from buffer
// buf_label (buf_size bytes): each checked as above, their sum above 0 and
// within the room. The sum, or 0 with g's error set.
uint64_t wgpt_readback_ranges_check_(wgpt_gpu *g, const char *rb_label, uint64_t rb_size, const char *buf_label,
                                     uint64_t buf_size, const uint64_t *offsets, const uint64_t *sizes, int n);

// The bytes a buffer of `bytes` named label takes (rounded up to a multiple
// of 16, at least 16), or 0 with g's error if that is over max_buffer
// (maxBufferSize).
uint64_t wgpt_buf_size_check_(wgpt_gpu *g, const char *label, uint64_t bytes, uint64_t max_buffer);
// Binding i of kernel `kernel`: view v of the buffer buf_label of buf_size
// bytes (v->buf set). The bytes it covers, or 0 with g's error naming the
// kernel, binding and limit (an offset off the device's alignment, a range
// outside the buffer or not a multiple of 4, a range over the binding limit).
uint64_t wgpt_binding_check_(wgpt_gpu *g, const char *kernel, int i, const wgpt_view *v, const char *buf_label,
                             uint64_t buf_size);

// kernel_table.c: a device's kernel files and its kernels by name. Each
// backend has its own struct wgpt_kernel, which begins with a wgpt_kernel_id
// (member id) that the table fills; the backend frees its own objects of a
// kernel before wgpt_ktable_free_ frees the kernels.
typedef struct wgpt_kernel_id {
    wgpt_gpu *gpu;
    char name[64];
    int file;   // index into the table's files
    int index;  // kernel index in that file
} wgpt_kernel_id;
typedef struct wgpt_ktable {
    char *shared_label, *shared_text;  // the shared preamble (00_shared.wgsl)
    wgpt_ksrc_file *files;             // every other file, split at its markers
    int nfiles;
    wgpt_kernel **kernels;             // kernels[i] is (file, index) of a file's kernels, in order
    int nkernels, cap;
} wgpt_ktable;
// Adds a kernel file and a kernel of kernel_size bytes (sizeof(struct
// wgpt_kernel)) for each of its kernels, zeroed but for its id: 0, or -1 with
// err filled (a malformed file, a kernel name already in the table, out of
// memory), the table as it was.
int wgpt_ktable_add_(wgpt_ktable *t, wgpt_gpu *g, size_t kernel_size, const char *label, const char *text, char *err,
                     size_t errlen);
// The kernel named name, or NULL.
wgpt_kernel *wgpt_ktable_find_(const wgpt_ktable *t, const char *name);
// Keeps the shared preamble (it must hold no marker): 0, or -1 with err filled.
int wgpt_ktable_set_shared_(wgpt_ktable *t, const char *label, const char *text, char *err, size_t errlen);
// Frees the files and the kernels (with free) and empties the table.
void wgpt_ktable_free_(wgpt_ktable *t);

#endif
