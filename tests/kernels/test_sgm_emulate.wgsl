// test_sgm_emulate.wgsl: one workgroup of one subgroup multiplies d = c + a b
// on subgroup matrices in the layouts test_sgm_emulate.c checks the emulation
// with (src/gpu/sgm_emulate.h): a (16 x 16) row-major from vec4<u32> (offset 2,
// stride 2), b (16 x 8) column-major from packed u32 (offset 1, stride 8),
// c (16 x 8) column-major from f32 (offset 3, stride 16); d stored row-major
// to f32 (stride 8) and column-major to vec4<u32> (stride 4).
// --- KERNEL: sgm_emu_check ---
@group(0) @binding(0) var<storage, read> a4: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> bp: array<u32>;
@group(0) @binding(2) var<storage, read> c32: array<f32>;
@group(0) @binding(3) var<storage, read_write> out_r: array<f32>;
@group(0) @binding(4) var<storage, read_write> out_c: array<vec4<u32>>;
alias L = subgroup_matrix_left<f16, SGM_TK, SGM_TM>;
alias R = subgroup_matrix_right<f16, SGM_TN, SGM_TK>;
alias C = subgroup_matrix_result<f32, SGM_TN, SGM_TM>;
@compute @workgroup_size(SGM_SG)
fn sgm_emu_check() {
    let a = subgroupMatrixLoad<L, row_major>(&a4, 2u, 2u);
    let b = subgroupMatrixLoad<R, col_major>(&bp, 1u, 8u);
    let c = subgroupMatrixLoad<C, col_major>(&c32, 3u, 16u);
    let d = subgroupMatrixMultiplyAccumulate(a, b, c);
    subgroupMatrixStore<row_major>(&out_r, 0u, d, 8u);
    subgroupMatrixStore<col_major>(&(out_c), 0u, d, 4u);
}
