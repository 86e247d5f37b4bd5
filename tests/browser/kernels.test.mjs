// kernels.test.mjs: every kernel family in headless chromium against the plain
// C reference (build-web/wgpt_checks.wasm from tests/browser/checks.c), twice:
// with the kernels the device picks (on SwiftShader, a CPU adapter, the CPU
// twins where they take its subgroups of 4) and with WGPT_KERNELS=gpu. One
// test per check; each set from one run of the program (compiling the kernels
// on SwiftShader is most of its time). A check the adapter cannot run (f16
// without shader-f16, the tensor-core kernels without subgroup matrices) is skipped.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { open, runIn, WEB } from './browser.mjs';

const SETS = { 'picked by the device': {}, 'GPU kernels': { WGPT_KERNELS: 'gpu' } };
let b;
const results = {};
before(async () => {
  b = await open();
  for (const [name, env] of Object.entries(SETS)) results[name] = await runIn(b.page, 'wgpt_checks.wasm', ['checks'], {}, [], env);
});
after(async () => { if (b) await b.close(); });

const CHECKS = ['forward', 'embedding', 'layernorm', 'linear', 'attention', 'gelu_residual', 'cross_entropy', 'optimizer', 'decode', 'f16', 'f16_sgm'];
for (const set of Object.keys(SETS)) {
  for (const name of CHECKS) {
    test(`kernels in the browser (${set}): ${name} matches the C reference`, (t) => {
      const r = results[set];
      const line = r.out.find((l) => l.startsWith(`check ${name}: `));
      assert.ok(line, `no result for ${name} (is ${WEB}/wgpt_checks.wasm current?); output:\n${r.out.join('\n')}`);
      if (/: skip: /.test(line)) return t.skip(line);
      assert.match(line, /: ok: /, line);
    });
  }
  test(`kernels in the browser (${set}): the checks program exits 0`, (t) => {
    const r = results[set];
    const device = r.out.find((l) => l.startsWith('device: '));
    if (device) t.diagnostic(device);
    assert.equal(r.code, 0, r.out.join('\n'));
  });
}
