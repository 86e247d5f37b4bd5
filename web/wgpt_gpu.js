// wgpt_gpu.js: the browser side of wgpt's GPU layer. src/gpu/web/ (web_internal.h)
// imports these functions (module "wgpt_gpu") and does everything else in C;
// this file only moves its calls onto navigator.gpu. Functions that wait for
// the GPU are async and given to WebAssembly as WebAssembly.Suspending, so
// that the C code blocks on them (JSPI).
//
// One device serves the runs of a page one after another (a run closes only
// what it made), so that the pipelines it compiled serve the next run too:
// compiling every kernel again would cost each run its first half minute on
// SwiftShader. A lost device is replaced at the next open.
const shared = { adapter: null, device: null, f16: false, sgm: false, lost: false, pipes: new Map(), byKey: new Map(), active: null };

// Chromium's subgroup matrices (tensor cores): the feature and, on the adapter's
// info, subgroupMatrixConfigs ({componentType, resultComponentType, M, N, K}).
export const SGM_FEATURE = 'chromium-experimental-subgroup-matrix';
const SGM_TYPES = { f32: 1, f16: 2, u32: 3, i32: 4, u8: 5, i8: 6 };  // wgpt_matrix_type (Dawn's values)
export const SGM_MAX_CONFIGS = 32;  // WGPT_MAX_MATRIX_CONFIGS

// The adapter info's configurations as web_info.configs rows [input, result,
// M, N, K, sgMin, sgMax], in its order (at most SGM_MAX_CONFIGS). The browser
// does not say which subgroup sizes a configuration works with (Dawn's C API
// does): a configuration's own, where given, else the adapter's. A type this
// file does not know reads 0, which the C side refuses with a message.
export function matrixConfigs(info = {}) {
  const list = info.subgroupMatrixConfigs || [];
  const sgMin = info.subgroupMinSize || 4, sgMax = info.subgroupMaxSize || 128;
  return Array.from(list).slice(0, SGM_MAX_CONFIGS).map((c) => [SGM_TYPES[c.componentType] || 0,
    SGM_TYPES[c.resultComponentType] || 0, Number(c.M), Number(c.N), Number(c.K),
    c.subgroupMinSize || sgMin, c.subgroupMaxSize || sgMax]);
}

// memory(): the module's WebAssembly.Memory (it may grow: views are made per call).
export function gpuImports(memory) {
  const u8 = () => new Uint8Array(memory().buffer);
  const dv = () => new DataView(memory().buffer);
  const dec = new TextDecoder();
  const enc = new TextEncoder();
  const cstr = (p) => {
    const m = u8();
    let e = p;
    while (m[e]) e++;
    return dec.decode(m.subarray(p, e));
  };
  const putStr = (p, cap, s) => {
    if (!p || cap <= 0) return;
    const b = enc.encode(s).subarray(0, cap - 1);
    const m = u8();
    m.set(b, p);
    m[p + b.length] = 0;
  };

  let device = null, adapter = null, queue = null, error = null, closing = false;
  let encoder = null, pass = null, recorded = 0, batch = 1, nextId = 1;
  let staging = null;
  const bufs = new Map(), binds = new Map();
  const pipes = shared.pipes;
  const SUBMIT_EVERY = 64;  // as the Dawn backend (src/gpu/internal.h)

  const fail = (msg) => { if (!error) error = msg; };
  const ensureEncoder = () => { if (!encoder) encoder = device.createCommandEncoder({ label: 'wgpt batch' }); return encoder; };
  const endPass = () => { if (pass) { pass.end(); pass = null; } };
  const submit = () => {
    if (!encoder) return 0;
    endPass();
    queue.submit([encoder.finish()]);
    encoder = null;
    recorded = 0;
    batch++;
    return 0;
  };
  const reset = () => {
    for (const b of bufs.values()) b.destroy();
    for (const b of binds.values()) if (b.uniform) b.uniform.destroy();
    if (staging) staging.destroy();
    device = adapter = queue = staging = encoder = pass = null;
    bufs.clear(); binds.clear();
    recorded = 0;
  };
  const forget = () => {  // the shared device is gone: the next open makes another
    shared.device = null;
    shared.pipes.clear();
    shared.byKey.clear();
  };

  const sync = {
    close() {
      if (!device) return;
      closing = true;
      try { submit(); } catch (e) { /* the device may be gone */ }
      if (error) { device.destroy(); forget(); }  // a device in doubt is not handed on
      reset();
      if (shared.active === api) shared.active = null;
      error = null;
    },
    error(p, cap) {
      if (!error) return 0;
      putStr(p, cap, error);
      return 1;
    },
    force_loss() {
      fail('the GPU device was lost: forced by wgpt_gpu_force_loss');
      if (device) { device.destroy(); forget(); }
    },
    buf_create(bytes) {
      try {
        const b = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
        const id = nextId++;
        bufs.set(id, b);
        return id;
      } catch (e) {
        fail(`creating a buffer of ${bytes} bytes: ${e.message}`);
        return 0;
      }
    },
    buf_free(id) {
      const b = bufs.get(id);
      if (!b) return;
      if (encoder) submit();  // a recording that uses it goes first (as src/gpu/buffer.c)
      b.destroy();
      bufs.delete(id);
    },
    buf_write(id, offset, src, bytes) {
      submit();  // after all work recorded so far
      queue.writeBuffer(bufs.get(id), offset, u8(), src, bytes);
      return 0;
    },
    buf_zero(id, offset, bytes) {
      ensureEncoder();
      endPass();
      encoder.clearBuffer(bufs.get(id), offset, bytes);
      recorded++;
      return 0;
    },
    bind_create(pipe, bufsP, offsP, sizesP, n, params, psize) {
      const p = pipes.get(pipe);
      if (!p) { fail(`bind group: no pipeline ${pipe}`); return 0; }
      const d = dv();
      const entries = [];
      for (let i = 0; i < n; i++) {
        entries.push({
          binding: i,
          resource: { buffer: bufs.get(d.getInt32(bufsP + 4 * i, true)), offset: d.getFloat64(offsP + 8 * i, true), size: d.getFloat64(sizesP + 8 * i, true) },
        });
      }
      let uniform = null;
      if (psize > 0) {
        const size = (psize + 15) & ~15;
        uniform = device.createBuffer({ size, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
        const tmp = new Uint8Array(size);
        tmp.set(u8().subarray(params, params + psize));
        queue.writeBuffer(uniform, 0, tmp);
        entries.push({ binding: n, resource: { buffer: uniform, offset: 0, size } });
      }
      const group = device.createBindGroup({ layout: p.layout, entries, label: p.label });
      const id = nextId++;
      binds.set(id, { group, pipeline: p.pipeline, uniform, psize, used: 0 });
      return id;
    },
    bind_set_params(id, params, psize) {
      const b = binds.get(id);
      if (b.used === batch && recorded) submit();  // dispatches recorded with it keep the old values
      const size = (psize + 15) & ~15;
      const tmp = new Uint8Array(size);
      tmp.set(u8().subarray(params, params + psize));
      queue.writeBuffer(b.uniform, 0, tmp);
      return 0;
    },
    bind_free(id) {
      const b = binds.get(id);
      if (!b) return;
      if (b.uniform) {
        if (encoder) submit();
        b.uniform.destroy();
      }
      binds.delete(id);
    },
    dispatch(id, x, y, z) {
      const b = binds.get(id);
      ensureEncoder();
      if (!pass) pass = encoder.beginComputePass();
      pass.setPipeline(b.pipeline);
      pass.setBindGroup(0, b.group);
      pass.dispatchWorkgroups(x, y, z);
      b.used = batch;
      if (++recorded >= SUBMIT_EVERY) submit();
      return 0;
    },
    submit() { return submit(); },
  };

  const async = {
    async open(disableF16, infoP, errP, errCap) {
      const no = (msg) => { putStr(errP, errCap, msg); return -1; };
      if (device) return no('a device is already open');
      if (typeof navigator === 'undefined' || !navigator.gpu) return no('this browser offers no WebGPU (navigator.gpu is missing)');
      const reuse = shared.device && shared.f16 === (shared.adapter.features.has('shader-f16') && !disableF16);
      if (!reuse) {
        if (shared.device) { shared.device.destroy(); forget(); }
        const a = await navigator.gpu.requestAdapter();
        if (!a) return no('the browser offers no WebGPU adapter');
        if (!a.features.has('subgroups')) return no("the browser's WebGPU adapter has no subgroup operations, which wgpt's kernels need");
        const features = ['subgroups'];
        const f16 = a.features.has('shader-f16') && !disableF16;
        if (f16) features.push('shader-f16');
        // As the Dawn backend: every configuration takes f16 or 8-bit inputs, so none without f16.
        const sgm = f16 && a.features.has(SGM_FEATURE);
        if (sgm) features.push(SGM_FEATURE);
        const L = a.limits;
        const requiredLimits = {};
        for (const k of ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup',
          'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupSizeY', 'maxStorageBuffersPerShaderStage', 'maxComputeWorkgroupsPerDimension'])
          requiredLimits[k] = L[k];
        let dev;
        try {
          dev = await a.requestDevice({ requiredFeatures: features, requiredLimits, label: 'wgpt' });
        } catch (e) {
          return no(`could not open a device on the browser's adapter: ${e.message}`);
        }
        Object.assign(shared, { adapter: a, device: dev, f16: !!f16, sgm: dev.features.has(SGM_FEATURE) });
        dev.lost.then((info) => {  // (a device wgpt destroyed itself was forgotten first)
          if (shared.device !== dev) return;
          forget();
          if (shared.active) shared.active.lost(`the GPU device was lost (${info.reason}): ${info.message}`);
        });
        dev.onuncapturederror = (e) => { if (shared.active) shared.active.lost(`WebGPU error: ${e.error.message}`); };
      }
      adapter = shared.adapter;
      device = shared.device;
      const f16 = shared.f16;
      closing = false;
      error = null;
      queue = device.queue;
      shared.active = api;
      const ai = adapter.info || {};
      const text = `${ai.vendor || ''} ${ai.architecture || ''} ${ai.device || ''} ${ai.description || ''}`;
      const fallback = !!(ai.isFallbackAdapter || adapter.isFallbackAdapter || /swiftshader/i.test(text));
      const lim = device.limits;
      const d = dv();
      const u32 = [ai.subgroupMinSize || 4, ai.subgroupMaxSize || 128, f16 ? 1 : 0, 0,
        Math.min(lim.maxStorageBufferBindingSize, 0xfffffff0), Math.min(lim.maxBufferSize, 0xfffffff0),
        lim.maxComputeWorkgroupStorageSize, lim.maxComputeInvocationsPerWorkgroup,
        lim.maxComputeWorkgroupsPerDimension, lim.minStorageBufferOffsetAlignment, fallback ? 1 : 0, 0];
      u32.forEach((v, i) => d.setUint32(infoP + 4 * i, v >>> 0, true));
      const name = [ai.description, ai.device, ai.architecture].filter((s) => s).join(' ') || 'WebGPU adapter';
      putStr(infoP + 48, 128, /swiftshader/i.test(text) && !/swiftshader/i.test(name) ? `SwiftShader ${name}` : name);
      putStr(infoP + 176, 64, ai.vendor || '');
      putStr(infoP + 240, 128, navigator.userAgent || '');
      const cfgs = shared.sgm ? matrixConfigs(ai) : [];
      d.setUint32(infoP + 368, shared.sgm ? 1 : 0, true);
      d.setUint32(infoP + 372, cfgs.length, true);
      cfgs.forEach((row, i) => row.forEach((v, j) => d.setUint32(infoP + 376 + 4 * (7 * i + j), v >>> 0, true)));
      return 0;
    },
    async kernel_create(codeP, entryP, labelP, namesP, valsP, n, errP, errCap) {
      const code = cstr(codeP), entryPoint = cstr(entryP), label = cstr(labelP);
      const constants = {};
      const d = dv();
      for (let i = 0, p = namesP; i < n; i++) {
        const name = cstr(p);
        constants[name] = d.getFloat64(valsP + 8 * i, true);
        p += enc.encode(name).length + 1;
      }
      const key = JSON.stringify([code, entryPoint, constants]);
      if (shared.byKey.has(key)) return shared.byKey.get(key);
      const module = device.createShaderModule({ code, label });
      const info = await module.getCompilationInfo();
      const errs = info.messages.filter((m) => m.type === 'error');
      if (errs.length) {
        putStr(errP, errCap, errs.map((m) => `${m.lineNum}\t${m.linePos}\t${m.message}`).join('\n'));
        return 0;
      }
      let pipeline;
      try {
        pipeline = await device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint, constants }, label });
      } catch (e) {
        putStr(errP, errCap, `the pipeline could not be created: ${e.message}`);
        return 0;
      }
      const id = shared.nextPipe = (shared.nextPipe || 0) + 1;
      pipes.set(id, { pipeline, layout: pipeline.getBindGroupLayout(0), label });
      shared.byKey.set(key, id);
      return id;
    },
    async buf_read(id, offset, dst, bytes) {
      try {
        submit();
        const size = Math.max(16, Math.ceil(bytes / 16) * 16);
        if (!staging || staging.size < size) {
          if (staging) staging.destroy();
          staging = device.createBuffer({ size: Math.max(size, 1 << 16), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, label: 'wgpt read-back' });
        }
        const e = device.createCommandEncoder();
        e.copyBufferToBuffer(bufs.get(id), offset, staging, 0, bytes);
        queue.submit([e.finish()]);
        await staging.mapAsync(GPUMapMode.READ, 0, size);
        u8().set(new Uint8Array(staging.getMappedRange(0, size), 0, bytes), dst);
        staging.unmap();
        return 0;
      } catch (e) {
        fail(`reading a buffer back: ${e.message}`);
        return -1;
      }
    },
    async finish() {
      submit();
      await queue.onSubmittedWorkDone();
      return 0;
    },
  };
  const api = { sync, async, lost: (msg) => { if (!closing) fail(msg); } };
  return api;
}
