// train.test.mjs: the engine in the browser against the native build on this
// machine (build/wgpt on lavapipe): the same tiny model trained in both gives
// the same losses; a checkpoint written in the browser resumes natively; one
// written natively samples the same text in the browser for the same seed.
//
// Tolerance: 1e-4 relative on every step's loss, test_gpt2.c's bound for 10
// AdamW steps. The two runs use different kernels of the same math (lavapipe,
// subgroups of 8: the layers' CPU twins; SwiftShader, subgroups of 4: the GPU
// kernels), which sum in other orders; measured: 1.2e-7 at most over 30
// steps. An AdamW step 1% too large (07_optimizer.wgsl) fails it at step 2.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open, ROOT, runIn } from './browser.mjs';

const NATIVE = process.env.WGPT_NATIVE || join(ROOT, 'build/wgpt');
const SAMPLE = readFileSync(join(ROOT, 'web/sample.txt'), 'utf8');
const MODEL = ['--layers', '2', '--heads', '2', '--channels', '32', '--batch', '2', '--seq', '32', '--warmup', '2',
  '--val-every', '0', '--log-every', '1', '--precision', 'fp32', '--seed', '5'];
const STEPS = ['--steps', '30'];
const SAMPLING = ['--seed', '7', '--tokens', '48', '--temperature', '0.8', '--top-k', '40'];
const TOL = 1e-4;

const have = existsSync(NATIVE);
const skip = have ? false : `no native build at ${NATIVE} (make first)`;
let b, dir, native = {}, web = {};

const losses = (jsonl) => jsonl.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l)).filter((r) => r.kind === 'train')
  .map((r) => [r.step, r.loss]);
const wgpt = (...args) => execFileSync(NATIVE, args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const sampleText = (out) => out.join('\n');

before(async () => {
  if (!have) return;
  dir = mkdtempSync(join(tmpdir(), 'wgpt-browser-train-'));
  writeFileSync(join(dir, 'sample.txt'), SAMPLE);
  // native: 30 steps, a checkpoint at the end; a sample from it
  wgpt('tokenize', '--tokenizer', 'bytes', '--out', 'data', '--val-fraction', '0.1', 'sample.txt');
  wgpt('train', '--data', 'data/train_*.bin', '--out', 'native', ...MODEL, ...STEPS, '--checkpoint-every', '0');
  native.losses = losses(readFileSync(join(dir, 'native/metrics.jsonl'), 'utf8'));
  native.ckpt = readFileSync(join(dir, 'native/latest.ckpt'));
  native.sample = wgpt('sample', '--checkpoint', 'native/latest.ckpt', ...SAMPLING);
  // the browser: the same 30-step schedule stopped after 20 with a checkpoint;
  // the native checkpoint sampled
  b = await open();
  let r = await runIn(b.page, 'wgpt.wasm', ['wgpt', 'tokenize', '--tokenizer', 'bytes', '--out', '/data', '--val-fraction', '0.1', '/sample.txt'], { '/sample.txt': SAMPLE });
  assert.equal(r.code, 0, r.out.join('\n'));
  const t0 = Date.now();
  r = await runIn(b.page, 'wgpt.wasm', ['wgpt', 'train', '--data', '/data/train_*.bin', '--out', '/web', ...MODEL, ...STEPS, '--stop-at', '20',
    '--checkpoint-every', '0'], {}, ['/web/metrics.jsonl', '/web/latest.ckpt']);
  web.train = r;
  web.ms = Date.now() - t0;
  if (r.files['/web/metrics.jsonl']) web.losses = losses(Buffer.from(r.files['/web/metrics.jsonl']).toString());
  if (r.files['/web/latest.ckpt']) writeFileSync(join(dir, 'web.ckpt'), Buffer.from(r.files['/web/latest.ckpt']));
  r = await runIn(b.page, 'wgpt.wasm', ['wgpt', 'sample', '--checkpoint', '/native.ckpt', ...SAMPLING], { '/native.ckpt': Array.from(native.ckpt) });
  web.sample = r;
});
after(async () => {
  if (b) await b.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const BPE = join(ROOT, 'third_party/gpt2-bpe');
test('browser: GPT-2 tokenization gives the native shards byte for byte', { skip: skip || (!existsSync(join(BPE, 'vocab.bpe')) && 'no GPT-2 tokenizer files (scripts/setup.sh)') }, async () => {
  const files = { '/s.txt': SAMPLE, '/bpe/encoder.json': readFileSync(join(BPE, 'encoder.json'), 'utf8'), '/bpe/vocab.bpe': readFileSync(join(BPE, 'vocab.bpe'), 'utf8') };
  const shards = ['train_000000.bin', 'val_000000.bin'];
  const r = await runIn(b.page, 'wgpt.wasm', ['wgpt', 'tokenize', '--tokenizer', 'gpt2', '--bpe-dir', '/bpe', '--out', '/g', '/s.txt'], files, shards.map((f) => `/g/${f}`));
  assert.equal(r.code, 0, r.out.join('\n'));
  wgpt('tokenize', '--tokenizer', 'gpt2', '--bpe-dir', BPE, '--out', 'g', 'sample.txt');
  for (const f of shards) assert.ok(Buffer.from(r.files[`/g/${f}`]).equals(readFileSync(join(dir, 'g', f))), `${f} differs`);
});

const close = (a, w, what) => {
  assert.ok(Math.abs(a - w) <= TOL * Math.abs(w), `${what}: ${a} vs native ${w} (tolerance ${TOL} relative)`);
};

test('browser: 20 training steps give the native losses', { skip }, (t) => {
  assert.equal(web.train.code, 0, web.train.out.join('\n'));
  assert.equal(web.losses.length, 20, web.train.out.join('\n'));
  let worst = 0;
  for (const [step, loss] of web.losses) {
    const w = native.losses[step - 1][1];
    worst = Math.max(worst, Math.abs(loss - w) / w);
    close(loss, w, `step ${step} loss`);
  }
  t.diagnostic(`loss: 20 steps, largest relative difference to native ${worst.toExponential(2)}; the run took ${(web.ms / 1000).toFixed(1)} s with kernel compilation`);
});

test('browser: a checkpoint trained in the browser resumes natively', { skip }, () => {
  assert.ok(existsSync(join(dir, 'web.ckpt')), 'the browser wrote no checkpoint');
  wgpt('train', '--data', 'data/train_*.bin', '--out', 'resumed', '--resume', 'web.ckpt', ...MODEL, ...STEPS, '--checkpoint-every', '0');
  const resumed = losses(readFileSync(join(dir, 'resumed/metrics.jsonl'), 'utf8'));
  assert.deepEqual(resumed.map(([s]) => s), Array.from({ length: 10 }, (_, i) => i + 21));
  for (const [step, loss] of resumed) close(loss, native.losses[step - 1][1], `resumed step ${step} loss`);
});

test('browser: a native checkpoint samples the same text in the browser', { skip }, () => {
  assert.equal(web.sample.code, 0, web.sample.out.join('\n'));
  assert.equal(sampleText(web.sample.out), native.sample.replace(/\n$/, ''));
});
