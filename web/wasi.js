// wasi.js: the WASI calls wasi-libc makes, for wgpt's WebAssembly build in a
// page: an in-memory file system (the page puts text files and checkpoints in
// and takes them out), stdout/stderr as lines to a callback, clocks, random
// bytes. One MemFS outlives the module instances that use it.
const E = { SUCCESS: 0, ACCES: 2, BADF: 8, EXIST: 20, INVAL: 28, ISDIR: 31, NOENT: 44, NOSYS: 52, NOTDIR: 54, NOTEMPTY: 55 };
const FT = { CHAR: 2, DIR: 3, FILE: 4 };

export class ExitError extends Error {
  constructor(code) { super(`exit ${code}`); this.code = code; }
}

function norm(path) {
  const out = [];
  for (const p of path.split('/')) {
    if (!p || p === '.') continue;
    if (p === '..') out.pop(); else out.push(p);
  }
  return '/' + out.join('/');
}

export class MemFS {
  constructor() { this.files = new Map(); this.dirs = new Set(['/']); }
  write(path, data) {
    path = norm(path);
    this.mkdirp(path.slice(0, path.lastIndexOf('/')) || '/');
    this.files.set(path, { data: data instanceof Uint8Array ? data : new TextEncoder().encode(data), size: 0 });
    const f = this.files.get(path);
    f.size = f.data.length;
  }
  read(path) {
    const f = this.files.get(norm(path));
    return f ? f.data.slice(0, f.size) : null;
  }
  remove(path) { this.files.delete(norm(path)); }
  mkdirp(path) {
    let cur = '';
    for (const p of norm(path).split('/').filter((s) => s)) { cur += '/' + p; this.dirs.add(cur); }
  }
  list(dir) {
    dir = norm(dir);
    const pre = dir === '/' ? '/' : dir + '/';
    const names = new Set();
    for (const k of [...this.files.keys(), ...this.dirs]) {
      if (k.startsWith(pre) && k.length > pre.length) names.add(k.slice(pre.length).split('/')[0]);
    }
    return [...names].sort();
  }
}

// args: argv strings; env: {NAME: value}; out(stream, line): 1 stdout, 2 stderr.
export function wasiImports(memory, fs, args, env, out) {
  const u8 = () => new Uint8Array(memory().buffer);
  const dv = () => new DataView(memory().buffer);
  const enc = new TextEncoder(), dec = new TextDecoder();
  const fds = new Map();  // fd -> {path, pos, dir, append}
  fds.set(3, { path: '/', pos: 0, dir: true });
  let nextFd = 4;
  const pending = { 1: '', 2: '' };
  const str = (p, n) => dec.decode(u8().subarray(p, p + n));
  const resolve = (dirfd, p, n) => {
    const d = fds.get(dirfd);
    const rel = str(p, n);
    return norm(rel.startsWith('/') ? rel : (d ? d.path : '/') + '/' + rel);
  };
  const grow = (f, need) => {
    if (f.data.length >= need) return;
    const n = new Uint8Array(Math.max(need, f.data.length * 2, 4096));
    n.set(f.data.subarray(0, f.size));
    f.data = n;
  };
  const envList = Object.entries(env).map(([k, v]) => `${k}=${v}`);
  const putList = (list, ptrs, buf) => {
    const d = dv(), m = u8();
    for (const s of list) {
      d.setUint32(ptrs, buf, true);
      ptrs += 4;
      const b = enc.encode(s);
      m.set(b, buf);
      m[buf + b.length] = 0;
      buf += b.length + 1;
    }
    return E.SUCCESS;
  };
  const sizes = (list, cP, sP) => {
    dv().setUint32(cP, list.length, true);
    dv().setUint32(sP, list.reduce((a, s) => a + enc.encode(s).length + 1, 0), true);
    return E.SUCCESS;
  };
  const filestat = (p, ptr) => {
    const d = dv();
    for (let i = 0; i < 64; i += 4) d.setUint32(ptr + i, 0, true);
    if (fs.dirs.has(p)) d.setUint8(ptr + 16, FT.DIR);
    else if (fs.files.has(p)) { d.setUint8(ptr + 16, FT.FILE); d.setBigUint64(ptr + 32, BigInt(fs.files.get(p).size), true); }
    else return E.NOENT;
    d.setBigUint64(ptr + 24, 1n, true);
    return E.SUCCESS;
  };
  const iov = (iovs, n, fn) => {
    const d = dv();
    let total = 0;
    for (let i = 0; i < n; i++) {
      const p = d.getUint32(iovs + 8 * i, true), len = d.getUint32(iovs + 8 * i + 4, true);
      const got = fn(p, len);
      total += got;
      if (got < len) break;
    }
    return total;
  };
  const w = {
    args_sizes_get: (c, s) => sizes(args, c, s),
    args_get: (p, b) => putList(args, p, b),
    environ_sizes_get: (c, s) => sizes(envList, c, s),
    environ_get: (p, b) => putList(envList, p, b),
    clock_res_get: (id, p) => { dv().setBigUint64(p, 1000n, true); return E.SUCCESS; },
    clock_time_get: (id, prec, p) => {
      const ns = id === 0 ? BigInt(Date.now()) * 1000000n : BigInt(Math.round(performance.now() * 1e6));
      dv().setBigUint64(p, ns, true);
      return E.SUCCESS;
    },
    random_get: (p, n) => { crypto.getRandomValues(u8().subarray(p, p + n)); return E.SUCCESS; },
    proc_exit: (code) => { throw new ExitError(code); },
    sched_yield: () => E.SUCCESS,
    poll_oneoff: () => E.NOSYS,
    fd_prestat_get: (fd, p) => {
      if (fd !== 3) return E.BADF;
      dv().setUint8(p, 0);
      dv().setUint32(p + 4, 1, true);
      return E.SUCCESS;
    },
    fd_prestat_dir_name: (fd, p, n) => { if (fd !== 3) return E.BADF; u8()[p] = 47; return E.SUCCESS; },
    fd_fdstat_get: (fd, p) => {
      const d = dv();
      const f = fds.get(fd);
      if (fd > 2 && !f) return E.BADF;
      d.setUint8(p, fd <= 2 ? FT.CHAR : f.dir ? FT.DIR : FT.FILE);
      d.setUint16(p + 2, f && f.append ? 1 : 0, true);
      d.setBigUint64(p + 8, 0xffffffffffffffffn, true);
      d.setBigUint64(p + 16, 0xffffffffffffffffn, true);
      return E.SUCCESS;
    },
    fd_fdstat_set_flags: () => E.SUCCESS,
    fd_filestat_get: (fd, p) => {
      if (fd <= 2) { filestat('/', p); dv().setUint8(p + 16, FT.CHAR); return E.SUCCESS; }
      const f = fds.get(fd);
      return f ? filestat(f.path, p) : E.BADF;
    },
    fd_filestat_set_size: (fd, size) => {
      const f = fds.get(fd);
      if (!f || f.dir) return E.BADF;
      const file = fs.files.get(f.path);
      grow(file, Number(size));
      if (Number(size) < file.size) file.data.fill(0, Number(size), file.size);
      file.size = Number(size);
      return E.SUCCESS;
    },
    fd_filestat_set_times: () => E.SUCCESS,
    path_filestat_set_times: () => E.SUCCESS,
    fd_sync: () => E.SUCCESS,
    fd_datasync: () => E.SUCCESS,
    fd_advise: () => E.SUCCESS,
    fd_allocate: () => E.SUCCESS,
    path_filestat_get: (dirfd, flags, p, n, ptr) => filestat(resolve(dirfd, p, n), ptr),
    path_open: (dirfd, dirflags, p, n, oflags, rb, ri, fdflags, fdP) => {
      const path = resolve(dirfd, p, n);
      const isDir = fs.dirs.has(path);
      if (oflags & 2) {  // O_DIRECTORY
        if (!isDir) return fs.files.has(path) ? E.NOTDIR : E.NOENT;
      } else if (isDir) {
        if (oflags & 1) return E.ISDIR;
      } else if (!fs.files.has(path)) {
        if (!(oflags & 1)) return E.NOENT;
        const parent = path.slice(0, path.lastIndexOf('/')) || '/';
        if (!fs.dirs.has(parent)) return E.NOENT;
        fs.files.set(path, { data: new Uint8Array(0), size: 0 });
      } else if (oflags & 4) {
        return E.EXIST;
      }
      if ((oflags & 8) && fs.files.has(path)) fs.files.get(path).size = 0;
      const fd = nextFd++;
      fds.set(fd, { path, pos: 0, dir: isDir, append: !!(fdflags & 1) });
      dv().setUint32(fdP, fd, true);
      return E.SUCCESS;
    },
    fd_close: (fd) => { if (fd > 3) fds.delete(fd); return E.SUCCESS; },
    fd_write: (fd, iovs, n, nP) => {
      if (fd === 1 || fd === 2) {
        const total = iov(iovs, n, (p, len) => {
          pending[fd] += str(p, len);
          let i;
          while ((i = pending[fd].indexOf('\n')) >= 0) { out(fd, pending[fd].slice(0, i)); pending[fd] = pending[fd].slice(i + 1); }
          return len;
        });
        dv().setUint32(nP, total, true);
        return E.SUCCESS;
      }
      const f = fds.get(fd);
      if (!f || f.dir) return E.BADF;
      const file = fs.files.get(f.path);
      if (!file) return E.BADF;
      if (f.append) f.pos = file.size;
      const total = iov(iovs, n, (p, len) => {
        grow(file, f.pos + len);
        file.data.set(u8().subarray(p, p + len), f.pos);
        f.pos += len;
        if (f.pos > file.size) file.size = f.pos;
        return len;
      });
      dv().setUint32(nP, total, true);
      return E.SUCCESS;
    },
    fd_pwrite: (fd, iovs, n, off, nP) => {
      const f = fds.get(fd);
      if (!f) return E.BADF;
      const save = f.pos, app = f.append;
      f.pos = Number(off); f.append = false;
      const r = w.fd_write(fd, iovs, n, nP);
      f.pos = save; f.append = app;
      return r;
    },
    fd_read: (fd, iovs, n, nP) => {
      if (fd === 0) { dv().setUint32(nP, 0, true); return E.SUCCESS; }
      const f = fds.get(fd);
      if (!f || f.dir) return E.BADF;
      const file = fs.files.get(f.path);
      const total = iov(iovs, n, (p, len) => {
        const k = Math.max(0, Math.min(len, file.size - f.pos));
        u8().set(file.data.subarray(f.pos, f.pos + k), p);
        f.pos += k;
        return k;
      });
      dv().setUint32(nP, total, true);
      return E.SUCCESS;
    },
    fd_pread: (fd, iovs, n, off, nP) => {
      const f = fds.get(fd);
      if (!f) return E.BADF;
      const save = f.pos;
      f.pos = Number(off);
      const r = w.fd_read(fd, iovs, n, nP);
      f.pos = save;
      return r;
    },
    fd_seek: (fd, off, whence, p) => {
      const f = fds.get(fd);
      if (!f || f.dir) return fd <= 2 ? 70 /* ESPIPE */ : E.BADF;
      const size = fs.files.get(f.path).size;
      const base = whence === 0 ? 0 : whence === 1 ? f.pos : size;
      const np = base + Number(off);
      if (np < 0) return E.INVAL;
      f.pos = np;
      dv().setBigUint64(p, BigInt(np), true);
      return E.SUCCESS;
    },
    fd_tell: (fd, p) => { const f = fds.get(fd); if (!f) return E.BADF; dv().setBigUint64(p, BigInt(f.pos), true); return E.SUCCESS; },
    fd_readdir: (fd, buf, len, cookie, usedP) => {
      const f = fds.get(fd);
      if (!f || !f.dir) return E.BADF;
      const names = fs.list(f.path);
      const d = dv(), m = u8();
      let used = 0;
      for (let i = Number(cookie); i < names.length; i++) {
        const nb = enc.encode(names[i]);
        const ent = new Uint8Array(24 + nb.length);
        const ed = new DataView(ent.buffer);
        ed.setBigUint64(0, BigInt(i + 1), true);
        ed.setBigUint64(8, BigInt(i + 1), true);
        ed.setUint32(16, nb.length, true);
        const full = norm(f.path + '/' + names[i]);
        ed.setUint8(20, fs.dirs.has(full) ? FT.DIR : FT.FILE);
        ent.set(nb, 24);
        const k = Math.min(ent.length, len - used);
        m.set(ent.subarray(0, k), buf + used);
        used += k;
        if (used >= len) break;
      }
      d.setUint32(usedP, used, true);
      return E.SUCCESS;
    },
    path_create_directory: (dirfd, p, n) => {
      const path = resolve(dirfd, p, n);
      if (fs.dirs.has(path) || fs.files.has(path)) return E.EXIST;
      const parent = path.slice(0, path.lastIndexOf('/')) || '/';
      if (!fs.dirs.has(parent)) return E.NOENT;
      fs.dirs.add(path);
      return E.SUCCESS;
    },
    path_remove_directory: (dirfd, p, n) => {
      const path = resolve(dirfd, p, n);
      if (!fs.dirs.has(path)) return E.NOENT;
      if (fs.list(path).length) return E.NOTEMPTY;
      fs.dirs.delete(path);
      return E.SUCCESS;
    },
    path_unlink_file: (dirfd, p, n) => {
      const path = resolve(dirfd, p, n);
      if (fs.dirs.has(path)) return E.ISDIR;
      if (!fs.files.delete(path)) return E.NOENT;
      return E.SUCCESS;
    },
    path_rename: (fd1, p1, n1, fd2, p2, n2) => {
      const a = resolve(fd1, p1, n1), b = resolve(fd2, p2, n2);
      if (fs.files.has(a)) { fs.files.set(b, fs.files.get(a)); fs.files.delete(a); return E.SUCCESS; }
      if (fs.dirs.has(a)) {
        for (const k of [...fs.files.keys()]) if (k.startsWith(a + '/')) { fs.files.set(b + k.slice(a.length), fs.files.get(k)); fs.files.delete(k); }
        for (const k of [...fs.dirs]) if (k === a || k.startsWith(a + '/')) { fs.dirs.delete(k); fs.dirs.add(b + k.slice(a.length)); }
        return E.SUCCESS;
      }
      return E.NOENT;
    },
    path_link: () => E.NOSYS,
    path_symlink: () => E.NOSYS,
    path_readlink: () => E.NOENT,
  };
  const flush = () => { for (const fd of [1, 2]) if (pending[fd]) { out(fd, pending[fd]); pending[fd] = ''; } };
  return { imports: w, flush };
}
