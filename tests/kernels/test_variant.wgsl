// test_variant.wgsl: a kernel section and its variants (kernel_source.h):
// override constants set when each pipeline is created, one of them sizing
// a workgroup array (tests/test_gpu_device.c, variants_set_override_constants).
override WIDE: bool = false;  // a second 16 KiB tile: 32 KiB of workgroup memory in all
override SCALE: f32 = 1.0;
@group(0) @binding(0) var<storage, read_write> o: array<f32>;  // (256)

// --- KERNEL: test_variant ---
// --- KERNEL: test_variant_scaled = test_variant with SCALE=2 ---
// --- KERNEL: test_variant_wide = test_variant with WIDE=1, SCALE=3 ---
// o[t] = SCALE * (1 + 2, or + 3 more from the second tile when WIDE).
var<workgroup> ta: array<vec4<f32>, 1024>;                     // 16 KiB
var<workgroup> tb: array<vec4<f32>, select(1u, 2048u, WIDE)>;  // 16 B, or 32 KiB when WIDE

@compute @workgroup_size(256)
fn test_variant(@builtin(local_invocation_index) t: u32) {
    ta[t] = vec4<f32>(1.0);
    ta[t + 256u] = vec4<f32>(2.0);
    if (WIDE) {
        tb[t + 1024u] = vec4<f32>(3.0);
    }
    workgroupBarrier();
    var s = ta[t].x + ta[t + 256u].x;
    if (WIDE) {
        s += tb[t + 1024u].x;
    }
    o[t] = SCALE * s;
}
