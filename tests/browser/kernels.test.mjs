// kernels.test.mjs: every kernel family in headless chromium against the plain
// C reference (build-web/wgpt_checks.wasm from tests/browser/checks.c): one
// test per check, all from one run of the program (compiling the kernels on
// SwiftShader is most of its time).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { open, runIn, WEB } from './browser.mjs';

let b, result;
before(async () => {
  b = await open();
  result = await runIn(b.page, 'wgpt_checks.wasm', ['checks']);
  const device = result.out.find((l) => l.startsWith('device: '));
  if (device) console.log(`# ${device}`);
});
after(async () => { if (b) await b.close(); });

const CHECKS = ['forward', 'embedding', 'layernorm', 'linear', 'attention', 'gelu_residual', 'cross_entropy', 'optimizer'];
for (const name of CHECKS) {
  test(`kernels in the browser: ${name} matches the C reference`, () => {
    const line = result.out.find((l) => l.startsWith(`check ${name}: `));
    assert.ok(line, `no result for ${name} (is ${WEB}/wgpt_checks.wasm current?); output:\n${result.out.join('\n')}`);
    assert.match(line, /: ok: /, line);
  });
}

test('kernels in the browser: the checks program exits 0', () => {
  assert.equal(result.code, 0, result.out.join('\n'));
});
