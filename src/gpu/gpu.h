// gpu.h: the GPU layer of wgpt. Devices, buffers, WGSL kernels, dispatch.
// It knows nothing of GPT; nothing above it sees a Dawn type.
//
// Errors: a function that can fail returns NULL or -1 and leaves a message a
// user can act on in wgpt_gpu_error(gpu). Once the device is lost or an
// uncaptured error arrives, every later call fails with that message.
#ifndef WGPT_GPU_H
#define WGPT_GPU_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

typedef struct wgpt_gpu wgpt_gpu;
typedef struct wgpt_buf wgpt_buf;
typedef struct wgpt_kernel wgpt_kernel;
typedef struct wgpt_bind wgpt_bind;

// Seeds' dispatch constants: 256 threads a workgroup, 65535 workgroups a dimension.
#define WGPT_WG 256u
#define WGPT_MAX_WG_DIM 65535u

// Which of the layers' kernel twins a device runs (the layers above decide
// what a twin is: model/variant.h): the GPU kernels (tiled, workgroup memory)
// or their CPU twins (flat, no barriers), or chosen by the device.
typedef enum wgpt_kernels {
    WGPT_KERNELS_AUTO = 0,  // the CPU twins on a device of type "CPU", else the GPU kernels
    WGPT_KERNELS_GPU = 1,
    WGPT_KERNELS_CPU = 2,
} wgpt_kernels;

// Which block the f16 subgroup-matrix matmuls use (model/linear_f16.c):
// chosen per shape (AUTO), or 128 x 128 (matmul_sgm) or 128 x 256
// (matmul_sgm_wide) everywhere, for benchmarks and tests.
typedef enum wgpt_sgm_block { WGPT_SGM_AUTO = 0, WGPT_SGM_BASE, WGPT_SGM_WIDE } wgpt_sgm_block;

// Whether the f16 subgroup-matrix matmuls split their work stream-K (every
// compute unit the same number of stages, blocks shared between units:
// model/linear_f16.c): where the plan estimates it faster (AUTO), never, or
// wherever it can (benchmarks, tests; WGPT_MATMUL_STREAMK=auto|off|on).
typedef enum wgpt_streamk { WGPT_STREAMK_AUTO = 0, WGPT_STREAMK_OFF, WGPT_STREAMK_ON } wgpt_streamk;

// Which results the f16 subgroup-matrix matmuls' callers may have the matmul
// write in its epilogue instead of a pass after it (model/linear_f16.h): bits;
// none by default (each was slower than its pass on an H100), for benchmarks
// and tests (WGPT_MATMUL_EPILOGUE=round,gelu,gelu_grad, or all, none).
#define WGPT_EPI_ROUND 1u      // the output rounded to f16, no f32 output
#define WGPT_EPI_GELU 2u       // the output in f32 and its GELU in f16
#define WGPT_EPI_GELU_GRAD 4u  // an input pass times GELU' of a stored tensor, in f32 and f16
#define WGPT_EPI_ALL 7u

// wgpt_gpu_options.emulate_sgm: emulate only where the device has f16.
#define WGPT_SGM_EMULATE_IF_F16 2

// Limits of wgpt_gpu_options' timeout_s and dawn_toggles(_off).
#define WGPT_GPU_DEFAULT_TIMEOUT_S 600.0
#define WGPT_GPU_MAX_TIMEOUT_S 1e7       // about 4 months: beyond that, a typo
#define WGPT_GPU_TOGGLES_MAX_CHARS 512   // room for a list, its 0 included
#define WGPT_GPU_TOGGLES_ON_MAX 13       // names a list (wgpt adds its own)
#define WGPT_GPU_TOGGLES_OFF_MAX 15

// The layer reads no setting from the environment: the CLI reads the WGPT_
// variables of the README's table into these fields (src/cli/gpu_env.c,
// whose wgpt_cli_gpu_env tests and tools call too), naming a bad value. A
// zeroed struct with adapter_index -1 is the default everywhere.
typedef struct wgpt_gpu_options {
    int adapter_index;         // -1: the default adapter; else index in wgpt_gpu_list()
    const char *adapter_name;  // NULL: any; else a case-insensitive substring of the name
    // NULL; else the deviceUUID (32 hex digits) of the Vulkan device to open,
    // through VK_LAYER_WGPT_select (wgpt_gpu_list's entries for identical GPUs
    // carry theirs in select_uuid; adapter_index reaches those by itself)
    const char *select_uuid;
    const char *kernel_dir;    // NULL: the kernels built in; else a folder of .wgsl files (WGPT_KERNEL_DIR)
    int disable_f16;           // behave as if the device had no shader-f16
    int profile;               // record GPU timestamps for every dispatch (if supported)
    uint64_t max_binding;      // 0: the device's maxStorageBufferBindingSize; else the
                               // smaller of the two (tests of code that splits bindings)
    int robust;                // keep Dawn's robustness (bounds clamps) on a GPU too (WGPT_ROBUST=1)
    wgpt_kernels kernels;      // which twins the layers dispatch on this device (info.cpu_kernels; WGPT_KERNELS)
    uint32_t matmul_splits;    // 0, or the split count over k every vec4 matmul asks for (benchmarks, tests)
    wgpt_sgm_block sgm_block;  // the subgroup-matrix matmuls' block: per shape (0), or one for all (benchmarks, tests)
    uint32_t matmul_epilogues; // WGPT_EPI_* bits (WGPT_MATMUL_EPILOGUE)
    wgpt_streamk streamk;      // AUTO: the plan's choice (WGPT_MATMUL_STREAMK)
    // 1: where the device has f16 but no subgroup matrices, emulate them with
    // subgroup broadcasts (sgm_emulate.h), so the tensor-core kernels run there
    // (a device without f16 is an error); WGPT_SGM_EMULATE_IF_F16: the same,
    // and nothing on a device without f16 (WGPT_SGM_EMULATE=1, so that a suite
    // run with it keeps its f16-less devices). Tests only, far slower than the
    // plain kernels.
    int emulate_sgm;
    // NULL, or a flag (set by the caller's signal handler) that ends a wait
    // for the GPU at once: the call fails with "interrupted" and the device
    // is left hung (see wgpt_gpu_close).
    volatile sig_atomic_t *interrupt;
    // NULL: no pipeline cache. Else a folder (made if missing) where Dawn keeps
    // what it compiled (shaders, the driver's pipeline data) between runs, so
    // that a later process skips compiling; one file an entry, checksummed: a
    // damaged or foreign file is a miss, and the folder may be deleted at any
    // time. The caller picks the folder (the CLI: WGPT_CACHE_DIR).
    const char *cache_dir;
    double timeout_s;               // 0: 600; else how long a wait for the GPU may take, in (0, 1e7] (WGPT_GPU_TIMEOUT_S)
    const char *dawn_toggles;       // NULL, or Dawn toggles to enable, comma-separated (WGPT_DAWN_TOGGLES; experiments)
    const char *dawn_toggles_off;   // NULL, or Dawn toggles to disable (WGPT_DAWN_TOGGLES_OFF)
    // 0: the subgroup-matrix configuration wgpt picks (info.sgm_config); i + 1:
    // configuration i of info.matrix_configs instead, an error where the
    // kernels cannot take it (WGPT_SGM_CONFIG=i; experiments)
    int sgm_config;
    uint32_t compute_units;         // 0: from the table of known chips (chips.c); else info.compute_units (WGPT_COMPUTE_UNITS)
    // NULL, or a file that each kernel's name and, where the driver reports
    // them, its pipeline's registers and memory are appended to, through
    // VK_LAYER_WGPT_stats (WGPT_KERNEL_STATS). The layer goes on for every
    // later Vulkan instance of the process: one file a process.
    const char *kernel_stats;
    // NULL: the pinned dawn.node beside the build (or installed); else the Dawn
    // library to load (WGPT_DAWN_LIB). Dawn is loaded once a process: the
    // first device opened or list made decides.
    const char *dawn_lib;
} wgpt_gpu_options;

// Element types of a subgroup-matrix configuration (the values are Dawn's).
typedef enum wgpt_matrix_type {
    WGPT_MATRIX_F32 = 1,
    WGPT_MATRIX_F16 = 2,
    WGPT_MATRIX_U32 = 3,
    WGPT_MATRIX_I32 = 4,
    WGPT_MATRIX_U8 = 5,
    WGPT_MATRIX_I8 = 6
} wgpt_matrix_type;
const char *wgpt_matrix_type_name(wgpt_matrix_type t);  // "f16", "f32", ...

// One shape the device's subgroup matrices (tensor cores) multiply: an M x K
// left times a K x N right into an M x N result, for subgroups of sg_min..sg_max.
typedef struct wgpt_matrix_config {
    wgpt_matrix_type input, result;
    uint32_t m, n, k;
    uint32_t sg_min, sg_max;
} wgpt_matrix_config;

#define WGPT_MAX_MATRIX_CONFIGS 32

typedef struct wgpt_gpu_info {
    char name[128];       // e.g. "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
    char vendor[64];
    char driver[128];     // Dawn's "description": driver name and version
    const char *backend;  // "Vulkan", "Metal", "D3D12", ... ("Null" is refused)
    const char *type;     // "discrete GPU", "integrated GPU", "CPU", "unknown"
    uint32_t vendor_id, device_id;
    char pci[16];         // "dddd:bb:dd.f" where the Vulkan driver reports it, else ""
    // Non-empty (32 hex digits) on one of several identical GPUs, which Dawn
    // lists as one adapter: wgpt_gpu_open opens it through VK_LAYER_WGPT_select
    // (src/gpu/vk_select/), which shows Dawn only the device of this deviceUUID.
    char select_uuid[33];
    uint32_t subgroup_min, subgroup_max;
    int has_f16;          // shader-f16 enabled on this device
    int has_timestamps;   // timestamp queries enabled
    int has_subgroup_size_control;  // subgroup-size-control enabled
    // chromium-experimental-subgroup-matrix enabled (kernels then get its `enable`);
    // the configurations the adapter reports, in its order.
    int has_subgroup_matrix;
    int n_matrix_configs;
    wgpt_matrix_config matrix_configs[WGPT_MAX_MATRIX_CONFIGS];
    // The f16 x f16 -> f32 configuration the subgroup-matrix kernels are compiled
    // for (an index of matrix_configs), -1 if none fits: the one with the largest
    // K, then the smallest M x N, among those with a fixed subgroup size equal to
    // the adapter's and M 16, N 8 or 16 (the fragments 03_linear_sgm.wgsl holds);
    // options.sgm_config picks another (experiments).
    int sgm_config;
    int sgm_emulated;     // the subgroup matrices are emulated (wgpt_gpu_options.emulate_sgm)
    int robust;           // Dawn's robustness on: every index clamped to its array (see wgpt_gpu_open)
    // Settings of the layers above, kept per device so that two devices in
    // one process may differ (from wgpt_gpu_options; the GPU layer only keeps them):
    int cpu_kernels;          // 1: the layers dispatch their CPU twins (options.kernels, else the type)
    uint32_t matmul_splits;   // options.matmul_splits
    wgpt_sgm_block sgm_block; // options.sgm_block
    uint32_t matmul_epilogues;  // options.matmul_epilogues
    wgpt_streamk streamk;       // options.streamk
    uint64_t max_storage_binding;  // bytes one storage binding may cover
    uint64_t max_buffer;           // bytes one buffer may hold
    uint32_t max_workgroup_storage;
    uint32_t max_invocations;
    uint32_t max_workgroups_per_dim;
    uint32_t storage_offset_align;  // a binding's offset must be a multiple of this
    // Not in WebGPU: from a table of known chips by name (src/gpu/chips.c),
    // 0 where unknown; options.compute_units sets the first.
    uint32_t compute_units;   // SMs (NVIDIA), CUs (AMD): what can run workgroups side by side
    double fp32_peak_tflops;  // the vendor's fp32 peak without tensor cores
    double f16_peak_tflops;   // its dense f16 (f32 accumulation) tensor-core peak
} wgpt_gpu_info;

// Lists the adapters Dawn offers (one per power preference and backend,
// deduplicated), with one entry per device where the host has several
// identical GPUs (Dawn offers them as one adapter; the Vulkan loader tells
// them apart): those come in PCI address order, so every process of a host
// numbers them alike. Returns how many were written to out (at most max), or
// -1 with err filled. Of opt (NULL: the defaults) only the settings of the
// process (dawn_lib, kernel_stats) and timeout_s apply.
int wgpt_gpu_list(const wgpt_gpu_options *opt, wgpt_gpu_info *out, int max, char *err, size_t errlen);

// The index in list of the host's GPU i (i mod the number of GPUs): the i-th
// entry that is not a CPU adapter, so that ranks of a host can take GPUs in
// turn. -1 if the list has no GPU. *ngpus (if not NULL) gets their number.
int wgpt_gpu_list_nth_gpu(const wgpt_gpu_info *list, int n, int i, int *ngpus);

// Opens a device on the chosen adapter with the adapter's limits, subgroups
// (required) and, where available, shader-f16, timestamp queries,
// subgroup-size-control and subgroup matrices.
// On GPUs, Dawn's robustness (a clamp on every array index of every kernel, for
// untrusted web shaders) is turned off unless opt->robust:
// wgpt's kernels check their own bounds (tested against the C reference), the
// clamps cost the H200 14% of its matmul speed, and a stray access on a GPU
// ends as a lost device, which wgpt reports. On CPU adapters (lavapipe) it
// stays on: there a stray access would reach the process's own memory.
// Returns NULL with err filled if no real adapter is found (Dawn's Null backend
// is never used), or if the kernel files are malformed.
// A bad option value is an error naming it.
wgpt_gpu *wgpt_gpu_open(const wgpt_gpu_options *opt, char *err, size_t errlen);
// Releases the device. After a wait that timed out or was interrupted the GPU
// may still be running that work, and destroying the device would wait for
// it: then only host memory is freed and Dawn's objects are left to the
// process's exit, so that a caller can report the hang and exit.
void wgpt_gpu_close(wgpt_gpu *gpu);
// How many devices this process closed while hung. The process should then
// end with _exit: on NVIDIA's driver the normal exit (its and Dawn's exit-time
// destructors) waits for the hung work, i.e. forever.
int wgpt_gpu_left_hung(void);
const wgpt_gpu_info *wgpt_gpu_get_info(const wgpt_gpu *gpu);
const char *wgpt_gpu_error(const wgpt_gpu *gpu);
// Sets the message wgpt_gpu_error returns and returns -1: layers above report
// their own refusals (a bad shape, a view too small) through the same channel.
int wgpt_gpu_fail(wgpt_gpu *gpu, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// One line: name, backend, type, subgroup sizes, f16, subgroup matrices. For logs and `wgpt info`.
void wgpt_gpu_describe(const wgpt_gpu_info *info, char *out, size_t outlen);

// The Dawn in use: "PATH (Dawn COMMIT)", once a device was opened or listed; "" before.
const char *wgpt_gpu_dawn(void);

// Loses the device on purpose, as a driver crash would: for tests of the
// error paths. Every later call fails with a "device lost" message.
void wgpt_gpu_force_loss(wgpt_gpu *gpu);

// What the pipeline cache (wgpt_gpu_options.cache_dir) did on this device:
// entries Dawn asked for, found intact, rejected as damaged, written.
typedef struct wgpt_gpu_cache_stats {
    uint64_t lookups, hits, rejected, stores;
} wgpt_gpu_cache_stats;
void wgpt_gpu_cache_stats_get(const wgpt_gpu *gpu, wgpt_gpu_cache_stats *out);

// --- kernels ---------------------------------------------------------------
// Adds a kernel file after open (tests, experiments): split at its markers like
// the built-in files. label names it in errors. Returns 0, or -1 on a malformed
// file or a kernel name that already exists.
int wgpt_gpu_add_kernel_file(wgpt_gpu *gpu, const char *label, const char *text);
// The compiled pipeline of a kernel, by its marker name. Compiled on first use
// and cached. NULL on an unknown name or a compile error, which names the
// kernel file and its line.
wgpt_kernel *wgpt_kernel_get(wgpt_gpu *gpu, const char *name);
const char *wgpt_kernel_name(const wgpt_kernel *k);
// How many kernels have been compiled on this device so far (each once, at
// its first wgpt_kernel_get): what a command's start-up paid for.
int wgpt_gpu_kernels_compiled(const wgpt_gpu *gpu);

// --- buffers ---------------------------------------------------------------
// A storage buffer of at least `bytes` (rounded up to 16), zero-filled.
wgpt_buf *wgpt_buf_create(wgpt_gpu *gpu, uint64_t bytes, const char *label);
void wgpt_buf_free(wgpt_buf *buf);
uint64_t wgpt_buf_size(const wgpt_buf *buf);
// Bytes of the device's storage buffers now and at most so far (the sizes as
// created, rounded up to 16): what the process allocated through this layer.
void wgpt_gpu_memory(const wgpt_gpu *gpu, uint64_t *live, uint64_t *peak);
// A caller's categories of memory (what they mean is the caller's business):
// buffers created after wgpt_gpu_mem_tag(g, tag) count under tag (0 until
// then, and for anything created untagged); it returns the tag before, to be
// put back. wgpt_gpu_memory_tags fills at_peak[t] with the bytes of tag t
// live when the total was last at its peak (they sum to that peak).
#define WGPT_MEM_TAGS 4
int wgpt_gpu_mem_tag(wgpt_gpu *gpu, int tag);
void wgpt_gpu_memory_tags(const wgpt_gpu *gpu, uint64_t at_peak[WGPT_MEM_TAGS]);
// Copies host memory into the buffer after all work recorded so far.
// offset and bytes must be multiples of 4.
int wgpt_buf_upload(wgpt_gpu *gpu, wgpt_buf *buf, uint64_t offset, const void *src, uint64_t bytes);
// Waits for all recorded work, then copies the buffer's range to host memory.
int wgpt_buf_download(wgpt_gpu *gpu, wgpt_buf *buf, uint64_t offset, void *dst, uint64_t bytes);
// Records a fill with zeros (in order with the dispatches around it).
int wgpt_buf_zero(wgpt_gpu *gpu, wgpt_buf *buf, uint64_t offset, uint64_t bytes);

// Asynchronous reads: a mappable staging buffer that ranges of a storage
// buffer are copied into after the work recorded so far, mapped while the
// host goes on (recording more work, exchanging data); finished later.
typedef struct wgpt_readback wgpt_readback;
// Room for `bytes` (a multiple of 4). NULL with the error set.
wgpt_readback *wgpt_readback_create(wgpt_gpu *gpu, uint64_t bytes, const char *label);
// Waits for a read still in flight (it owns Dawn's callback) unless the device is gone.
void wgpt_readback_free(wgpt_gpu *gpu, wgpt_readback *r);
// Copies the n ranges [offsets[i], offsets[i] + sizes[i]) of buf, packed in
// that order, after all work recorded so far; submits and starts the map.
// Returns at once. One read at a time per readback.
int wgpt_readback_start(wgpt_gpu *gpu, wgpt_readback *r, wgpt_buf *buf, const uint64_t *offsets,
                        const uint64_t *sizes, int n);
// 1 once the read has landed, 0 not yet (handles Dawn's events, never
// sleeps), -1 on an error (a lost device, an interrupt, a failed map).
int wgpt_readback_ready(wgpt_gpu *gpu, wgpt_readback *r);
// Waits for the read (the GPU timeout and interrupt apply), copies its packed
// bytes to dst and unmaps, ready for the next start.
int wgpt_readback_finish(wgpt_gpu *gpu, wgpt_readback *r, void *dst);

// --- bind groups -------------------------------------------------------------
// A range of a buffer bound to one storage binding. size 0: to the buffer's end.
typedef struct wgpt_view {
    wgpt_buf *buf;
    uint64_t offset, size;
} wgpt_view;
// A 4 KiB storage buffer of g for a writable binding that a dispatch
// declares but does not touch: WebGPU refuses two writable bindings over the
// same bytes, so another output of the dispatch cannot stand in. 4 KiB: Dawn
// asks a binding that a subgroup matrix is stored to for at least one
// fragment (512 bytes for 16 x 8 floats on the H100). Made on
// first use, freed with g; {NULL} with the error set if it cannot be made.
wgpt_view wgpt_gpu_unused_binding(wgpt_gpu *g);

// Bytes a view covers: its size, or (size 0) from its offset to the buffer's end.
uint64_t wgpt_view_bytes(wgpt_view v);

// Binds views to bindings 0..nviews-1 of group 0 and, if params_size > 0, a
// uniform holding a copy of params at binding nviews. Created once, reused by
// every dispatch. Checks offsets and sizes against the device's limits.
wgpt_bind *wgpt_bind_create(wgpt_gpu *gpu, wgpt_kernel *k, const wgpt_view *views, int nviews,
                            const void *params, size_t params_size);
// Replaces the uniform's contents. Dispatches recorded before this call still
// see the old values (the pending work is submitted first when needed).
int wgpt_bind_set_params(wgpt_gpu *gpu, wgpt_bind *b, const void *params, size_t params_size);
void wgpt_bind_free(wgpt_bind *b);

// --- recording and submission ---------------------------------------------------
// Dispatches are recorded into a command buffer and submitted by
// wgpt_gpu_submit, or every 64 dispatches on their own (so the GPU starts on a
// long recording while the rest is recorded): no CPU round trip per kernel.
int wgpt_dispatch(wgpt_gpu *gpu, wgpt_bind *b, uint32_t x, uint32_t y, uint32_t z);
// n_workgroups in one dimension; past 65535, the seeds' 2D fallback
// (65535, ceil(n/65535), 1): kernels linearise with flat_id() and bounds-check.
int wgpt_dispatch1d(wgpt_gpu *gpu, wgpt_bind *b, uint64_t n_workgroups);
// The (x, y) that wgpt_dispatch1d uses for n_workgroups; -1 if even 2D is too small.
int wgpt_dims1d(wgpt_gpu *gpu, uint64_t n_workgroups, uint32_t *x, uint32_t *y);
// The workgroup count for n threads of WGPT_WG.
static inline uint64_t wgpt_groups(uint64_t n) { return (n + WGPT_WG - 1) / WGPT_WG; }
int wgpt_gpu_submit(wgpt_gpu *gpu);
// Submits and waits until the GPU has finished all of it.
int wgpt_gpu_finish(wgpt_gpu *gpu);

// --- profiling (wgpt_gpu_options.profile) -------------------------------------
typedef struct wgpt_timing {
    const char *kernel;  // valid while the gpu is open
    double ms;           // GPU time of that dispatch
} wgpt_timing;
// Waits for the work recorded so far and returns the timings of the dispatches
// since the last call, in order (at most max). -1 if timestamps are unavailable.
int wgpt_gpu_timings(wgpt_gpu *gpu, wgpt_timing *out, int max);

#endif
