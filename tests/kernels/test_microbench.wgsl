// test_microbench.wgsl: kernels for tests/test_microbench.c only (added with
// wgpt_gpu_add_kernel_file): each mb_kI adds 1 to count[I], so a test can
// tell how many times an op ran and which kernels it used.

// --- KERNEL: mb_k0 ---
@group(0) @binding(0) var<storage, read_write> count: array<f32>;

@compute @workgroup_size(1)
fn mb_k0() { count[0] = count[0] + 1.0; }

// --- KERNEL: mb_k1 ---
@group(0) @binding(0) var<storage, read_write> count: array<f32>;

@compute @workgroup_size(1)
fn mb_k1() { count[1] = count[1] + 1.0; }

// --- KERNEL: mb_k2 ---
@group(0) @binding(0) var<storage, read_write> count: array<f32>;

@compute @workgroup_size(1)
fn mb_k2() { count[2] = count[2] + 1.0; }

// --- KERNEL: mb_k3 ---
@group(0) @binding(0) var<storage, read_write> count: array<f32>;

@compute @workgroup_size(1)
fn mb_k3() { count[3] = count[3] + 1.0; }

// --- KERNEL: mb_k4 ---
@group(0) @binding(0) var<storage, read_write> count: array<f32>;

@compute @workgroup_size(1)
fn mb_k4() { count[4] = count[4] + 1.0; }

// --- KERNEL: mb_k5 ---
@group(0) @binding(0) var<storage, read_write> count: array<f32>;

@compute @workgroup_size(1)
fn mb_k5() { count[5] = count[5] + 1.0; }

// --- KERNEL: mb_k6 ---
@group(0) @binding(0) var<storage, read_write> count: array<f32>;

@compute @workgroup_size(1)
fn mb_k6() { count[6] = count[6] + 1.0; }

// --- KERNEL: mb_k7 ---
@group(0) @binding(0) var<storage, read_write> count: array<f32>;

@compute @workgroup_size(1)
fn mb_k7() { count[7] = count[7] + 1.0; }

// --- KERNEL: mb_k8 ---
@group(0) @binding(0) var<storage, read_write> count: array<f32>;

@compute @workgroup_size(1)
fn mb_k8() { count[8] = count[8] + 1.0; }
