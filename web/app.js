// app.js: the page (index.html). Every action runs a `wgpt` command of the
// WebAssembly build (wgpt.wasm, the native CLI's own code) on the page's
// in-memory files: tokenize the dropped text, train, sample, read a model.
// This file only moves files in and out and draws what the commands print.
import { compile, hasJspi, MemFS, run } from './wgpt.js';

const $ = (id) => document.getElementById(id);
const fs = new MemFS();
const SIZES = { tiny: [2, 2, 32], small: [4, 4, 128], medium: [6, 6, 192] };
const state = { mod: null, busy: false, texts: [], model: null, losses: [], lastLine: '' };
window.wgptPage = state;  // for the tests (tests/browser/page.test.mjs)

function showError(msg) {
  $('error').textContent = msg;
  $('error').style.display = 'block';
  state.error = msg;
}
function clearError() {
  $('error').style.display = 'none';
  $('error').textContent = '';
  state.error = null;
}
function log(line) {
  const l = $('log');
  l.textContent += line + '\n';
  if (l.textContent.length > 200000) l.textContent = l.textContent.slice(-100000);
  l.scrollTop = l.scrollHeight;
}
function refresh() {
  const idle = !state.busy && !!state.mod;
  $('train').disabled = !idle || !state.texts.length;
  $('resume').disabled = !idle || !state.texts.length || !state.loaded;
  $('sample-btn').disabled = !idle || !state.model;
  $('download').disabled = !idle || !fs.read('/run/latest.ckpt');
  $('use-sample').disabled = state.busy;
  $('stop').disabled = !state.training;
}

// Runs `wgpt ARGS...`; rejects with its error output if it fails.
async function wgpt(args, onLine) {
  const err = [];
  log(`$ wgpt ${args.join(' ')}`);
  const code = await run(state.mod, ['wgpt', ...args], {
    fs,
    control: state.control = {},
    out: (fd, line) => {
      log(line);
      if (fd === 2) err.push(line);
      if (onLine) onLine(line, fd);
    },
  });
  if (code !== 0) throw new Error(err.join('\n') || `wgpt ${args[0]} failed (exit status ${code})`);
}

async function busy(what, fn) {
  if (state.busy) return;
  clearError();
  state.busy = true;
  refresh();
  try {
    await fn();
  } catch (e) {
    showError(`${what}: ${e.message}`);
  } finally {
    state.busy = false;
    refresh();
  }
}

// --- text ---------------------------------------------------------------------
function addTexts(list) {
  const bad = [];
  const texts = [];
  for (const { name, bytes } of list) {
    if (!bytes.length) { bad.push(`${name} is empty`); continue; }
    const head = bytes.subarray(0, 8192);
    if (head.includes(0)) { bad.push(`${name} is not a text file (it holds NUL bytes): drop plain text (.txt) files`); continue; }
    texts.push({ name, bytes });
  }
  if (bad.length) showError(bad.join('\n'));
  else clearError();
  if (!texts.length) return;
  for (const old of state.texts) fs.remove(old.path);
  state.texts = texts.map((t, i) => {
    const path = `/text/${i}_${t.name.replace(/[^A-Za-z0-9._-]/g, '_')}`;
    fs.write(path, t.bytes);
    return { ...t, path };
  });
  const total = state.texts.reduce((a, t) => a + t.bytes.length, 0);
  $('data-status').textContent = `${state.texts.length} file(s), ${total} bytes: ${state.texts.map((t) => t.name).join(', ')}`;
  refresh();
}

async function readFiles(files) {
  return Promise.all([...files].map(async (f) => ({ name: f.name, bytes: new Uint8Array(await f.arrayBuffer()) })));
}

$('files').addEventListener('change', async (e) => addTexts(await readFiles(e.target.files)));
const drop = $('drop');
drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
drop.addEventListener('dragleave', () => drop.classList.remove('over'));
drop.addEventListener('drop', async (e) => {
  e.preventDefault();
  drop.classList.remove('over');
  addTexts(await readFiles(e.dataTransfer.files));
});
$('use-sample').addEventListener('click', async () => {
  const r = await fetch('sample.txt');
  if (!r.ok) return showError(`the bundled sample could not be loaded (HTTP ${r.status})`);
  addTexts([{ name: 'sample.txt', bytes: new Uint8Array(await r.arrayBuffer()) }]);
});

// --- tokenizer files (GPT-2's BPE, served beside the page by make web) -----------
async function bpeArgs(tokenizer) {
  if (tokenizer !== 'gpt2') return [];
  if (!fs.read('/bpe/vocab.bpe')) {
    for (const f of ['encoder.json', 'vocab.bpe']) {
      const r = await fetch(`gpt2-bpe/${f}`);
      if (!r.ok) throw new Error(`GPT-2's tokenizer file gpt2-bpe/${f} is not served with this page (HTTP ${r.status}); use the bytes tokenizer`);
      fs.write(`/bpe/${f}`, new Uint8Array(await r.arrayBuffer()));
    }
  }
  return ['--bpe-dir', '/bpe'];
}

// --- training -------------------------------------------------------------------------
const STEP_RE = /^step\s+(\d+)\/(\d+) \| loss ([-\d.eE+naif]+)/;
function onTrainLine(line) {
  const m = STEP_RE.exec(line);
  if (m) {
    state.losses.push([+m[1], +m[3]]);
    state.lastLine = line;
    $('progress').textContent = line;
    plot();
  } else if (/^(val|done|stopped)/.test(line)) {
    $('progress').textContent = `${state.lastLine}\n${line}`;
  }
}

async function train(resumeFrom) {
  const tok = $('tokenizer').value;
  const steps = +$('steps').value;
  if (!(steps >= 1)) throw new Error(`steps must be a positive number, not '${$('steps').value}'`);
  const bpe = await bpeArgs(tok);
  $('progress').textContent = 'tokenizing...';
  for (const p of [...fs.files.keys()]) if (p.startsWith('/data/') || p.startsWith('/run/')) fs.remove(p);
  await wgpt(['tokenize', '--tokenizer', tok, '--out', '/data', '--val-fraction', '0.1', ...bpe, ...state.texts.map((t) => t.path)]);
  state.losses = [];
  plot();
  $('progress').textContent = 'compiling the kernels (the first step takes a while)...';
  const [L, H, C] = SIZES[$('size').value];
  const shape = resumeFrom ? [resumeFrom.endsWith('.ckpt') ? '--resume' : '--init-from', resumeFrom]
    : ['--resume', 'none', '--layers', String(L), '--heads', String(H), '--channels', String(C)];
  state.training = true;
  refresh();
  try {
    await wgpt(['train', '--data', '/data/*.bin', '--out', '/run', '--steps', String(steps), '--log-every', '1',
      '--checkpoint-every', '0', ...bpe, ...shape], onTrainLine);
  } finally {
    state.training = false;
  }
  state.model = '/run/latest.ckpt';
  $('model-status').textContent = `Model: trained here (${state.losses.length} steps this run).`;
}
$('train').addEventListener('click', () => busy('training', () => train(null)));
$('resume').addEventListener('click', () => busy('training', () => train(state.loaded)));
$('stop').addEventListener('click', () => { if (state.training && state.control.stop) state.control.stop(); });

function plot() {
  const c = $('plot');
  const g = c.getContext('2d');
  g.clearRect(0, 0, c.width, c.height);
  const pts = state.losses.filter(([, l]) => Number.isFinite(l));
  g.fillStyle = '#666';
  g.font = '12px sans-serif';
  if (!pts.length) { g.fillText('loss (per step) appears here while training', 10, 20); return; }
  const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(x0 + 1, ...xs), y0 = Math.min(...ys), y1 = Math.max(y0 + 1e-3, ...ys);
  const L = 50, R = 10, T = 10, B = 25, W = c.width - L - R, H = c.height - T - B;
  const X = (x) => L + ((x - x0) / (x1 - x0)) * W, Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * H;
  g.strokeStyle = '#bbb';
  g.strokeRect(L, T, W, H);
  g.fillText(y1.toFixed(3), 2, T + 10);
  g.fillText(y0.toFixed(3), 2, T + H);
  g.fillText(`step ${x0}`, L, c.height - 6);
  g.fillText(`step ${x1}`, L + W - 50, c.height - 6);
  g.strokeStyle = '#2255cc';
  g.lineWidth = 1.5;
  g.beginPath();
  pts.forEach(([x, y], i) => (i ? g.lineTo(X(x), Y(y)) : g.moveTo(X(x), Y(y))));
  g.stroke();
}

// --- sampling ------------------------------------------------------------------------------
$('sample-btn').addEventListener('click', () => busy('sampling', async () => {
  const args = ['sample', '--checkpoint', state.model, '--tokens', String(+$('tokens').value || 200), '--seed', String(+$('seed').value || 0)];
  if ($('prompt').value) args.push('--prompt', $('prompt').value);
  const lines = [];
  $('sample').textContent = 'sampling...';
  await wgpt([...args, ...(await bpeArgs('gpt2').catch(() => []))], (line, fd) => { if (fd === 1) lines.push(line); });
  $('sample').textContent = lines.join('\n');
  state.sample = lines.join('\n');
}));

// --- checkpoints -----------------------------------------------------------------------------
$('download').addEventListener('click', () => {
  const bytes = fs.read('/run/latest.ckpt');
  if (!bytes) return showError('there is no checkpoint yet: train first');
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
  a.download = 'latest.ckpt';
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
});

// A model file, with a Hugging Face model's config.json beside it if given.
$('load').addEventListener('change', (e) => busy('loading a model', async () => {
  const files = await readFiles(e.target.files);
  e.target.value = '';
  if (!files.length) return;
  const models = files.filter((f) => f.name !== 'config.json');
  if (models.length !== 1) throw new Error(`choose one model file (and a Hugging Face model's config.json): got ${files.map((f) => f.name).join(', ')}`);
  const f = models[0];
  if (!f.bytes.length) throw new Error(`${f.name} is empty`);
  for (const p of [...fs.files.keys()]) if (p.startsWith('/load/')) fs.remove(p);
  const path = `/load/${f.name.replace(/[^A-Za-z0-9._-]/g, '_')}`;
  for (const x of files) fs.write(x === f ? path : '/load/config.json', x.bytes);
  const before = $('model-status').textContent;
  $('model-status').textContent = `checking ${f.name}...`;
  try {
    // the engine reads it: a model it cannot read is refused with the reason
    await wgpt(['sample', '--checkpoint', path, '--tokens', '1', ...(await bpeArgs('gpt2').catch(() => []))]);
  } catch (err) {
    for (const p of [...fs.files.keys()]) if (p.startsWith('/load/')) fs.remove(p);
    $('model-status').textContent = before;
    throw new Error(`${f.name} cannot be used: ${err.message.replace(/^wgpt sample: /, '').split(path).join(f.name)}`);
  }
  state.model = path;
  state.loaded = path;
  $('model-status').textContent = `Model: ${f.name} (${f.bytes.length} bytes), loaded.`;
}));

// --- start ---------------------------------------------------------------------------------------
async function start() {
  plot();
  if (!hasJspi()) return showError('This browser lacks WebAssembly JSPI (WebAssembly.Suspending), which wgpt needs: use Chromium or Chrome 137 or later.');
  if (!navigator.gpu) return showError('This browser offers no WebGPU (navigator.gpu is missing): use a recent Chromium or Chrome (headless: --enable-unsafe-webgpu).');
  try {
    state.mod = await compile('wgpt.wasm');
  } catch (e) {
    return showError(`wgpt.wasm could not be loaded: ${e.message}`);
  }
  const adapter = await navigator.gpu.requestAdapter();
  const ai = adapter ? adapter.info : null;
  $('device').textContent = ai ? `GPU: ${[ai.vendor, ai.architecture, ai.description].filter((s) => s).join(' ')}` : 'No WebGPU adapter.';
  state.ready = true;
  refresh();
}
start();
