// page.test.mjs: the page (web/index.html, build-web/) as a user drives it:
// bad files get a clear message on the page; the bundled sample trains with a
// live loss plot and progress line; the model samples; the checkpoint
// downloads and the native build reads it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open, ROOT, WEB } from './browser.mjs';

const NATIVE = process.env.WGPT_NATIVE || join(ROOT, 'build/wgpt');
let b, page, dir;
const errorText = () => page.evaluate(() => window.wgptPage.error || '');
const idle = () => page.waitForFunction(() => window.wgptPage.ready && !window.wgptPage.busy, null, { timeout: 300000 });

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'wgpt-page-'));
  b = await open(`${WEB}/index.html`);
  page = b.page;
  await idle();
});
after(async () => {
  if (b) await b.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('page: an empty or binary text file gets a clear message', async () => {
  await page.setInputFiles('#files', [{ name: 'empty.txt', mimeType: 'text/plain', buffer: Buffer.alloc(0) },
    { name: 'image.png', mimeType: 'image/png', buffer: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 13]) }]);
  await page.waitForFunction(() => window.wgptPage.error);
  const msg = await errorText();
  assert.match(msg, /empty\.txt is empty/);
  assert.match(msg, /image\.png is not a text file/);
  assert.ok(await page.isVisible('#error'));
});

test('page: a file that is no model gets a clear message', async () => {
  await page.setInputFiles('#load', { name: 'notes.ckpt', mimeType: 'application/octet-stream', buffer: Buffer.from('just some notes, not a model\n') });
  await idle();
  const msg = await errorText();
  assert.match(msg, /notes\.ckpt cannot be used/, msg);
  assert.match(msg, /not a|checkpoint|model/, msg);
  assert.ok(await page.isVisible('#error'));
});

test('page: the bundled sample trains with a loss plot, samples, and its checkpoint downloads', async (t) => {
  await page.click('#use-sample');
  await page.waitForFunction(() => window.wgptPage.texts.length === 1);
  await page.fill('#steps', '5');
  await page.selectOption('#size', 'tiny');
  const t0 = Date.now();
  await page.click('#train');
  await idle();
  assert.equal(await errorText(), '');
  const losses = await page.evaluate(() => window.wgptPage.losses);
  assert.deepEqual(losses.map(([s]) => s), [1, 2, 3, 4, 5]);
  assert.ok(losses.every(([, l]) => l > 0 && l < 10), JSON.stringify(losses));
  assert.match(await page.textContent('#progress'), /step\s+5\/5 \| loss .* tok\/s/);
  t.diagnostic(`page: 5 steps in ${((Date.now() - t0) / 1000).toFixed(1)} s with kernel compilation`);

  await page.fill('#tokens', '20');
  await page.click('#sample-btn');
  await idle();
  assert.equal(await errorText(), '');
  assert.ok((await page.evaluate(() => window.wgptPage.sample)).length > 0);

  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
  const saved = join(dir, 'latest.ckpt');
  await download.saveAs(saved);
  if (existsSync(NATIVE)) {
    const out = execFileSync(NATIVE, ['sample', '--checkpoint', saved, '--tokens', '8'], { encoding: 'utf8' });
    assert.ok(out.length > 0);
  }
});

test('page: Stop ends training after the step with a checkpoint', async () => {
  await page.fill('#steps', '500');
  await page.click('#train');
  await page.waitForFunction(() => window.wgptPage.losses.length >= 2, null, { timeout: 300000 });
  await page.click('#stop');
  await idle();
  assert.equal(await errorText(), '');
  const n = await page.evaluate(() => window.wgptPage.losses.length);
  assert.ok(n >= 2 && n < 500, `${n} steps ran`);
  assert.ok(!(await page.isDisabled('#download')), 'no checkpoint to download after Stop');
  assert.ok(await page.evaluate(() => window.wgptPage.model === '/run/latest.ckpt'));
});

test('page: a checkpoint trained natively loads and samples', { skip: !existsSync(NATIVE) && `no native build at ${NATIVE}` }, async () => {
  const w = (...a) => execFileSync(NATIVE, a, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  w('tokenize', '--tokenizer', 'bytes', '--out', 'data', join(ROOT, 'web/sample.txt'));
  w('train', '--data', 'data/*.bin', '--out', 'run', '--layers', '2', '--heads', '2', '--channels', '32', '--batch', '2', '--seq', '32',
    '--steps', '3', '--val-every', '0', '--precision', 'fp32');
  await page.setInputFiles('#load', { name: 'native.ckpt', mimeType: 'application/octet-stream', buffer: readFileSync(join(dir, 'run/latest.ckpt')) });
  await idle();
  assert.equal(await errorText(), '');
  assert.match(await page.textContent('#model-status'), /native\.ckpt .* loaded/);
  await page.evaluate(() => { window.wgptPage.sample = null; });
  await page.click('#sample-btn');
  await idle();
  assert.equal(await errorText(), '');
  assert.ok((await page.evaluate(() => window.wgptPage.sample)).length > 0);
});

test('page: a model exported natively for Hugging Face and for llm.c loads and samples', { skip: !existsSync(NATIVE) && `no native build at ${NATIVE}` }, async () => {
  const w = (...a) => execFileSync(NATIVE, a, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  w('export', 'run/latest.ckpt', '--format', 'hf', '--out', 'hf');
  w('export', 'run/latest.ckpt', '--format', 'llmc', '--out', 'model.bin');
  const loads = {
    hf: [{ name: 'model.safetensors', mimeType: 'application/octet-stream', buffer: readFileSync(join(dir, 'hf/model.safetensors')) },
      { name: 'config.json', mimeType: 'application/json', buffer: readFileSync(join(dir, 'hf/config.json')) }],
    llmc: [{ name: 'model.bin', mimeType: 'application/octet-stream', buffer: readFileSync(join(dir, 'model.bin')) }],
  };
  for (const [what, files] of Object.entries(loads)) {
    await page.setInputFiles('#load', files);
    await idle();
    assert.equal(await errorText(), '', what);
    assert.match(await page.textContent('#model-status'), /loaded/, what);
    await page.evaluate(() => { window.wgptPage.sample = null; });
    await page.click('#sample-btn');
    await idle();
    assert.equal(await errorText(), '', what);
    assert.ok((await page.evaluate(() => window.wgptPage.sample)).length > 0, what);
  }
});
