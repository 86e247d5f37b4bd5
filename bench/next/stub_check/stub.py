# stub.py SRC OUT (bench/next/stub_check): copies the kernel folder SRC to OUT with
# the subgroup-matrix types and calls in 03_linear_sgm and 04_attention_sgm replaced
# by vec4 stubs, so that a device without subgroup matrices can compile them.
import re, sys, os, shutil
src_dir, out_dir = sys.argv[1], sys.argv[2]
os.makedirs(out_dir, exist_ok=True)
for f in os.listdir(src_dir): shutil.copy(os.path.join(src_dir, f), out_dir)
F32 = {'tile_s', 'out'}
def load(m):
    arr, off, stride = m.group(2), m.group(3), m.group(4)
    if arr in F32: return f'vec4<f32>({arr}[{off}] + f32({stride}))'
    return f'(bitcast<vec4<f32>>({arr}[{off}]) + f32({stride}))'
def store(m):
    arr, off, val, stride = m.group(1), m.group(2), m.group(3), m.group(4)
    if arr in F32: return f'{arr}[{off}] = ({val}).x + f32({stride})'
    return f'{arr}[{off}] = bitcast<vec4<u32>>({val}) + vec4<u32>({stride})'
for name in ('03_linear_sgm.wgsl', '04_attention_sgm.wgsl'):
    p = os.path.join(out_dir, name)
    s = open(p).read()
    head = 'const SGM_TM: u32 = 16u;\nconst SGM_TN: u32 = 8u;\nconst SGM_TK: u32 = 16u;\nconst SGM_SG: u32 = 32u;\n'
    s = re.sub(r'alias (LT|RT|CT) = subgroup_matrix_\w+<[^;]*>;', r'alias \1 = vec4<f32>;', s)
    s = re.sub(r'subgroupMatrixLoad<(\w+), \w+>\(&(\w+), ([^,]+), ([^)]+)\)', load, s)
    s = re.sub(r'subgroupMatrixStore<\w+>\(&(\w+), ([^,]+), ([^,]+), ([^)]+)\)', store, s)
    s = s.replace('subgroupMatrixMultiplyAccumulate(', 'smma(')
    s = s.replace('@diagnostic(off, subgroup_uniformity)', '')
    # the first kernel marker: stubs go into the file's preamble part
    s = head + 'fn smma(a: vec4<f32>, b: vec4<f32>, c: vec4<f32>) -> vec4<f32> { return a * b + c; }\n' + s
    open(p, 'w').write(s)
    left = [l for l in s.splitlines() if 'subgroupMatrix' in l]
    if left: print(name, 'unconverted:', left[:5])
