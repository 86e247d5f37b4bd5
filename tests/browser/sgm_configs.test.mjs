// sgm_configs.test.mjs: web/wgpt_gpu.js's reading of Chromium's subgroup-matrix
// configurations (adapter.info.subgroupMatrixConfigs) into the rows the C side
// (src/gpu/web/device.c) takes, on made-up adapter infos: SwiftShader offers
// no subgroup matrices, so the browser never shows this path one here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { matrixConfigs, SGM_MAX_CONFIGS } from '../../web/wgpt_gpu.js';

test('subgroup matrices: an NVIDIA-like adapter info reads as Dawn reports it', () => {
  const info = {
    subgroupMinSize: 32, subgroupMaxSize: 32,
    subgroupMatrixConfigs: [
      { componentType: 'f16', resultComponentType: 'f32', M: 16, N: 16, K: 16 },
      { componentType: 'f16', resultComponentType: 'f16', M: 16, N: 8, K: 16 },
      { componentType: 'i8', resultComponentType: 'i32', M: 16, N: 8, K: 32 },
    ],
  };
  // wgpt_matrix_type: f32 1, f16 2, u32 3, i32 4, u8 5, i8 6; the adapter's subgroup sizes.
  assert.deepEqual(matrixConfigs(info), [[2, 1, 16, 16, 16, 32, 32], [2, 2, 16, 8, 16, 32, 32], [6, 4, 16, 8, 32, 32, 32]]);
});

test('subgroup matrices: a configuration\'s own subgroup sizes win; unknown types read 0', () => {
  const info = {
    subgroupMinSize: 32, subgroupMaxSize: 64,
    subgroupMatrixConfigs: [
      { componentType: 'f16', resultComponentType: 'f32', M: 16, N: 16, K: 16, subgroupMinSize: 64, subgroupMaxSize: 64 },
      { componentType: 'bf16', resultComponentType: 'f32', M: 16, N: 16, K: 16 },
    ],
  };
  assert.deepEqual(matrixConfigs(info), [[2, 1, 16, 16, 16, 64, 64], [0, 1, 16, 16, 16, 32, 64]]);
});

test('subgroup matrices: none offered (SwiftShader), or more than the C side holds', () => {
  assert.deepEqual(matrixConfigs({ subgroupMinSize: 4, subgroupMaxSize: 4 }), []);
  assert.deepEqual(matrixConfigs(), []);
  const many = Array.from({ length: SGM_MAX_CONFIGS + 5 }, () => ({ componentType: 'f16', resultComponentType: 'f32', M: 16, N: 8, K: 16 }));
  assert.equal(matrixConfigs({ subgroupMinSize: 32, subgroupMaxSize: 32, subgroupMatrixConfigs: many }).length, SGM_MAX_CONFIGS);
});
