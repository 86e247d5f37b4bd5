// browser.mjs: what the browser tests share: a static file server over the
// repository (the page in build-web/, made by `make web`) and Debian's
// chromium, headless with WebGPU on (SwiftShader where there is no GPU),
// driven by playwright-core with no browser download and no network.
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { chromium } from 'playwright-core';

export const ROOT = normalize(join(fileURLToPath(import.meta.url), '../../..'));
export const WEB = process.env.WGPT_WEB_BUILD || 'build-web';
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.txt': 'text/plain', '.json': 'application/json' };

export function serve() {
  const server = createServer(async (req, res) => {
    const path = normalize(join(ROOT, decodeURIComponent(new URL(req.url, 'http://x').pathname)));
    if (!path.startsWith(ROOT)) { res.writeHead(403).end(); return; }
    try {
      if (!(await stat(path)).isFile()) throw new Error('not a file');
      res.writeHead(200, { 'content-type': TYPES[extname(path)] || 'application/octet-stream', 'cache-control': 'no-store' });
      res.end(await readFile(path));
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}

export const CHROMIUM = process.env.WGPT_CHROMIUM || '/usr/bin/chromium';
export const FLAGS = ['--headless=new', '--no-sandbox', '--enable-unsafe-webgpu', '--disable-gpu-sandbox',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];

// {browser, page, server, url, close()}: the harness page loaded, window.wgpt ready.
export async function open(pagePath = `${WEB}/harness.html`) {
  const server = await serve();
  const dataDir = mkdtempSync(join(tmpdir(), 'wgpt-chromium-'));
  const browser = await chromium.launchPersistentContext(dataDir, { executablePath: CHROMIUM, headless: true, args: FLAGS });
  const page = browser.pages()[0] || await browser.newPage();
  const logs = [];
  page.on('console', (m) => logs.push(m.text()));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  const url = `http://127.0.0.1:${server.address().port}/`;
  await page.goto(url + pagePath);
  if (pagePath.endsWith('harness.html')) await page.waitForFunction(() => window.wgptReady === true);
  return {
    browser, page, server, url, logs,
    async close() { await browser.close(); server.close(); rmSync(dataDir, { recursive: true, force: true }); },
  };
}

// Runs a program of the WebAssembly build in the page: {code, out: [lines]}.
// files: {path: string or byte array} put in its file system first;
// want: paths whose bytes come back in result.files (arrays of numbers);
// env: the program's environment variables.
export async function runIn(page, wasm, args, files = {}, want = [], env = {}) {
  return page.evaluate(async ({ wasm, args, files, want, env }) => {
    const w = window.wgpt;
    window.wgptModules = window.wgptModules || {};
    const mod = window.wgptModules[wasm] || (window.wgptModules[wasm] = await w.compile(wasm));
    const fs = window.wgptFs || (window.wgptFs = new w.MemFS());
    for (const [p, d] of Object.entries(files)) fs.write(p, typeof d === 'string' ? d : new Uint8Array(d));
    const out = [];
    const code = await w.run(mod, args, { fs, env, out: (fd, line) => out.push(line) });
    const got = {};
    for (const p of want) { const b = fs.read(p); got[p] = b ? Array.from(b) : null; }
    return { code, out, files: got };
  }, { wasm, args, files, want, env });
}
