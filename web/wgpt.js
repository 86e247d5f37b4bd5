// wgpt.js: runs wgpt's programs, compiled to WebAssembly (make web), in a page.
// A run is one program with its arguments, like a process: a fresh instance of
// the module, the page's files in a MemFS (wasi.js) that outlives it, its
// stdout and stderr as lines, and the GPU layer on navigator.gpu (wgpt_gpu.js).
// Needs WebAssembly JSPI (WebAssembly.Suspending), present in Chromium.
import { ExitError, MemFS, wasiImports } from './wasi.js';
import { gpuImports } from './wgpt_gpu.js';

export { MemFS };

export async function compile(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`cannot load ${url}: HTTP ${r.status}`);
  return WebAssembly.compile(await r.arrayBuffer());
}

export function hasJspi() { return typeof WebAssembly.Suspending === 'function' && typeof WebAssembly.promising === 'function'; }

// Runs module's program with args (args[0]: its name) on fs; out(fd, line) gets
// its output (1 stdout, 2 stderr). Resolves to the exit status. control (an
// object) gets control.stop(): what Ctrl-C does natively (wgpt train: finish the
// step, write a checkpoint, stop; again: stop at once), for programs that export it.
export async function run(module, args, { fs = new MemFS(), out = () => {}, env = {}, control = {} } = {}) {
  if (!hasJspi()) throw new Error('this browser lacks WebAssembly JSPI (WebAssembly.Suspending), which wgpt needs: use Chromium 137 or later');
  let inst = null;
  const memory = () => inst.exports.memory;
  const wasi = wasiImports(memory, fs, args, env, out);
  const gpu = gpuImports(memory);
  const gpuImp = { ...gpu.sync };
  for (const [k, f] of Object.entries(gpu.async)) gpuImp[k] = new WebAssembly.Suspending(f);
  const wasiImp = { ...wasi.imports };
  for (const imp of WebAssembly.Module.imports(module))  // what the shim lacks: "not supported"
    if (imp.module === 'wasi_snapshot_preview1' && !(imp.name in wasiImp)) wasiImp[imp.name] = () => 52;
  inst = await WebAssembly.instantiate(module, { wasi_snapshot_preview1: wasiImp, wgpt_gpu: gpuImp });
  inst.exports._initialize();
  control.stop = () => { if (inst.exports.wgpt_web_stop) inst.exports.wgpt_web_stop(); };
  const main = WebAssembly.promising(inst.exports.wgpt_web_run);
  let code;
  try {
    code = await main();
  } catch (e) {
    if (!(e instanceof ExitError)) {
      wasi.flush();
      gpu.sync.close();
      throw e;
    }
    code = e.code;
  }
  wasi.flush();
  gpu.sync.close();  // a device the program left open
  return code;
}
