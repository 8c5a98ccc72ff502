// The Node-facing runtime of wasbox's `node`, over the `__wasbox_*` natives of main.rs.
// Evaluates to the hooks main.rs calls: main, tick, uncaught, exitCode.
(function () {
  'use strict';
  const g = globalThis;
  const N = {};
  for (const k of Object.getOwnPropertyNames(g)) {
    if (k.startsWith('__wasbox_')) {
      N[k.slice(9)] = g[k];
      delete g[k];
    }
  }

  // -- util.inspect, as Node formats values ------------------------------------------
  const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

  function quote(s) {
    let q = "'";
    if (s.includes("'")) {
      if (!s.includes('"')) q = '"';
      else if (!s.includes('`') && !s.includes('${')) q = '`';
    }
    let out = '';
    for (const c of s) {
      const code = c.charCodeAt(0);
      if (c === q || c === '\\') out += '\\' + c;
      else if (c === '\n') out += '\\n';
      else if (c === '\t') out += '\\t';
      else if (c === '\r') out += '\\r';
      else if (c === '\b') out += '\\b';
      else if (c === '\f') out += '\\f';
      else if (c === '\v') out += '\\v';
      else if (code < 0x20 || code === 0x7f) out += '\\x' + code.toString(16).toUpperCase().padStart(2, '0');
      else out += c;
    }
    return q + out + q;
  }

  function fnName(f) {
    const src = Function.prototype.toString.call(f);
    // A class's `prototype` cannot be reassigned; a function's can.
    const proto = Object.getOwnPropertyDescriptor(f, 'prototype');
    if (/^class[\s{]/.test(src) || (proto && !proto.writable)) {
      return f.name ? `[class ${f.name}]` : '[class (anonymous)]';
    }
    const kind = src.startsWith('async') ? 'AsyncFunction' : (/^function\s*\*/.test(src) ? 'GeneratorFunction' : 'Function');
    return f.name ? `[${kind}: ${f.name}]` : `[${kind} (anonymous)]`;
  }

  function numberText(n) {
    return Object.is(n, -0) ? '-0' : String(n);
  }

  function groupArray(ctx, output, value) {
    let total = 0;
    let maxLen = 0;
    const outLen = output.length - (ctx.extra ? 1 : 0);
    const sep = 2;
    const lens = new Array(outLen);
    for (let i = 0; i < outLen; i++) {
      const len = output[i].length;
      lens[i] = len;
      total += len + sep;
      if (maxLen < len) maxLen = len;
    }
    const actualMax = maxLen + sep;
    if (actualMax * 3 + ctx.indent < 80 && (total / actualMax > 5 || maxLen <= 6)) {
      const averageBias = Math.sqrt(actualMax - total / output.length);
      const biasedMax = Math.max(actualMax - 3 - averageBias, 1);
      const columns = Math.min(
        Math.round(Math.sqrt(2.5 * biasedMax * outLen) / biasedMax),
        Math.floor((80 - ctx.indent) / actualMax),
        12,
        15,
      );
      if (columns <= 1) return output;
      const tmp = [];
      const maxLine = [];
      for (let i = 0; i < columns; i++) {
        let lineLen = 0;
        for (let j = i; j < output.length; j += columns) if (lens[j] > lineLen) lineLen = lens[j];
        maxLine.push(lineLen + sep);
      }
      let padStart = true;
      if (value !== undefined) {
        for (let i = 0; i < output.length; i++) {
          if (typeof value[i] !== 'number' && typeof value[i] !== 'bigint') {
            padStart = false;
            break;
          }
        }
      }
      for (let i = 0; i < outLen; i += columns) {
        const max = Math.min(i + columns, outLen);
        let str = '';
        let j = i;
        for (; j < max - 1; j++) {
          const cell = output[j] + ', ';
          str += padStart ? cell.padStart(maxLine[j - i], ' ') : cell.padEnd(maxLine[j - i], ' ');
        }
        if (padStart) str += output[j].padStart(maxLine[j - i] - sep, ' ');
        else str += output[j];
        tmp.push(str);
      }
      if (ctx.extra) tmp.push(output[outLen]);
      return tmp;
    }
    return output;
  }

  function reduce(ctx, output, base, braces, isArray, depth, value) {
    const entries = output.length;
    if (isArray && entries > 6) output = groupArray(ctx, output, value);
    if (ctx.deepest - depth < 3 && entries === output.length) {
      const start = output.length + ctx.indent + braces[0].length + base.length + 10;
      let total = output.length + start;
      let fits = total + output.length <= 80;
      if (fits) {
        for (const o of output) {
          total += o.length;
          if (total > 80) {
            fits = false;
            break;
          }
        }
      }
      if (fits && !base.includes('\n')) {
        const joined = output.join(', ');
        if (!joined.includes('\n')) return `${base ? base + ' ' : ''}${braces[0]} ${joined} ${braces[1]}`;
      }
    }
    const ind = '\n' + ' '.repeat(ctx.indent);
    return `${base ? base + ' ' : ''}${braces[0]}${ind}  ${output.join(',' + ind + '  ')}${ind}${braces[1]}`;
  }

  function key(k) {
    if (typeof k === 'symbol') return `[${k.toString()}]`;
    return IDENT.test(k) ? k : quote(k);
  }

  function formatValue(ctx, v, depth, inner) {
    switch (typeof v) {
      case 'string': return inner ? quote(v) : v;
      case 'number': return numberText(v);
      case 'bigint': return `${v}n`;
      case 'boolean': return String(v);
      case 'undefined': return 'undefined';
      case 'symbol': return v.toString();
    }
    if (v === null) return 'null';
    if (typeof v === 'function' && !Object.keys(v).length) return fnName(v);
    if (ctx.seen.includes(v)) return '[Circular *1]';
    return formatObject(ctx, v, depth);
  }

  function protoName(v) {
    const p = Object.getPrototypeOf(v);
    if (p === null) return null;
    const c = p.constructor;
    return c && typeof c.name === 'string' ? c.name : '';
  }

  function formatObject(ctx, v, depth) {
    if (v instanceof Error) {
      const s = v.stack && String(v.stack).includes(v.message) ? String(v.stack) : `${v.name}: ${v.message}`;
      const own = Object.keys(v).filter((k) => k !== 'stack' && k !== 'message');
      if (!own.length) return s.replace(/\n+$/, '');
    }
    if (v instanceof Date) return isNaN(v) ? 'Invalid Date' : v.toISOString();
    if (v instanceof RegExp) return String(v);
    if (typeof Promise !== 'undefined' && v instanceof Promise) return 'Promise { <pending> }';
    const name = protoName(v);
    let braces;
    let base = '';
    let isArray = false;
    let output = [];
    if (depth > 2) {
      if (Array.isArray(v)) return '[Array]';
      return `[${name === null ? 'Object: null prototype' : name || 'Object'}]`;
    }
    ctx.seen.push(v);
    ctx.deepest = Math.max(ctx.deepest, depth);
    const saved = ctx.indent;
    ctx.indent += 2;
    const sub = (x) => formatValue(ctx, x, depth + 1, true);
    let extraKeys;
    if (Array.isArray(v)) {
      isArray = true;
      braces = [name === 'Array' ? '[' : `${name}(${v.length}) [`, ']'];
      let holes = 0;
      const max = Math.min(v.length, 100);
      for (let i = 0; i < max; i++) {
        if (!(i in v)) {
          holes++;
          continue;
        }
        if (holes) {
          output.push(`<${holes} empty item${holes > 1 ? 's' : ''}>`);
          holes = 0;
        }
        output.push(sub(v[i]));
      }
      if (holes) output.push(`<${holes} empty item${holes > 1 ? 's' : ''}>`);
      ctx.extra = v.length > 100;
      if (ctx.extra) output.push(`... ${v.length - 100} more item${v.length - 100 > 1 ? 's' : ''}`);
      extraKeys = Object.keys(v).filter((k) => !/^\d+$/.test(k));
    } else if (v instanceof Map) {
      braces = [`Map(${v.size}) {`, '}'];
      for (const [k, x] of v) output.push(`${sub(k)} => ${sub(x)}`);
      extraKeys = [];
    } else if (v instanceof Set) {
      braces = [`Set(${v.size}) {`, '}'];
      isArray = true;
      for (const x of v) output.push(sub(x));
      extraKeys = [];
    } else {
      if (typeof v === 'function') base = fnName(v);
      const prefix = name === null ? '[Object: null prototype] ' : name && name !== 'Object' && typeof v !== 'function' ? `${name} ` : '';
      braces = [`${prefix}{`, '}'];
      extraKeys = Object.keys(v);
      if (!extraKeys.length && !Object.getOwnPropertySymbols(v).length) {
        ctx.seen.pop();
        ctx.indent = saved;
        if (base) return base;
        return `${prefix}{}`;
      }
    }
    for (const k of extraKeys) {
      const d = Object.getOwnPropertyDescriptor(v, k);
      let val;
      if (d && (d.get || d.set)) val = d.get && d.set ? '[Getter/Setter]' : d.get ? '[Getter]' : '[Setter]';
      else val = sub(v[k]);
      output.push(`${key(k)}: ${val}`);
    }
    for (const s of Object.getOwnPropertySymbols(v)) {
      if (Object.getOwnPropertyDescriptor(v, s).enumerable) output.push(`${key(s)}: ${sub(v[s])}`);
    }
    ctx.indent = saved;
    ctx.seen.pop();
    const extra = ctx.extra;
    const res = output.length === 0 && isArray ? `${braces[0]}${braces[1]}` : reduce(ctx, output, base, braces, isArray && !(v instanceof Set), depth, isArray ? v : undefined);
    ctx.extra = extra && false;
    return res;
  }

  function inspect(v) {
    const ctx = { seen: [], indent: 0, deepest: 0, extra: false };
    return formatValue(ctx, v, 0, true);
  }

  function format(...args) {
    let out = '';
    let i = 0;
    if (typeof args[0] === 'string' && args.length > 1 && args[0].includes('%')) {
      const f = args[0];
      i = 1;
      for (let j = 0; j < f.length; j++) {
        if (f[j] === '%' && j + 1 < f.length) {
          const c = f[j + 1];
          if (c === '%') {
            out += '%';
            j++;
            continue;
          }
          if ('sdifjoOc'.includes(c)) {
            if (i >= args.length) {
              out += '%' + c;
              j++;
              continue;
            }
            const a = args[i++];
            if (c === 's') out += typeof a === 'string' ? a : typeof a === 'object' && a !== null ? inspect(a) : typeof a === 'bigint' ? `${a}n` : numberText(a) === '-0' ? '-0' : String(a);
            else if (c === 'd' || c === 'i') out += typeof a === 'bigint' ? `${a}n` : String(c === 'i' ? parseInt(a) : Number(a));
            else if (c === 'f') out += String(parseFloat(a));
            else if (c === 'j') out += JSON.stringify(a);
            else if (c === 'c') {}
            else out += inspect(a);
            j++;
            continue;
          }
        }
        out += f[j];
      }
    } else if (args.length) {
      out = typeof args[0] === 'string' ? args[0] : inspect(args[0]);
      i = 1;
    }
    for (; i < args.length; i++) out += ' ' + (typeof args[i] === 'string' ? args[i] : inspect(args[i]));
    return out;
  }

  // -- console ------------------------------------------------------------------------
  let groupIndent = '';
  const emit = (fd) => (...a) => {
    let s = format(...a);
    if (groupIndent) s = s.split('\n').map((l) => groupIndent + l).join('\n');
    N.write(fd, s + '\n');
  };
  const counts = new Map();
  const timers = new Map();
  const console = {
    log: emit(1), info: emit(1), debug: emit(1),
    error: emit(2), warn: emit(2), trace: emit(2),
    dir: (v) => N.write(1, inspect(v) + '\n'),
    table: (v) => N.write(1, inspect(v) + '\n'),
    assert: (ok, ...a) => { if (!ok) emit(2)(a.length ? 'Assertion failed: ' + format(...a) : 'Assertion failed'); },
    count: (l = 'default') => { counts.set(l, (counts.get(l) || 0) + 1); emit(1)(`${l}: ${counts.get(l)}`); },
    countReset: (l = 'default') => counts.delete(l),
    group: (...a) => { if (a.length) emit(1)(...a); groupIndent += '  '; },
    groupEnd: () => { groupIndent = groupIndent.slice(2); },
    time: (l = 'default') => timers.set(l, N.now()),
    timeEnd: (l = 'default') => { const t = timers.get(l); if (t !== undefined) emit(1)(`${l}: ${(N.now() - t).toFixed(3)}ms`); timers.delete(l); },
    timeLog: (l = 'default') => { const t = timers.get(l); if (t !== undefined) emit(1)(`${l}: ${(N.now() - t).toFixed(3)}ms`); },
  };
  console.groupCollapsed = console.group;
  Object.defineProperty(g, 'console', { value: console, writable: true, configurable: true });

  // -- errors from natives --------------------------------------------------------------
  function sysError(e, syscall, path, dest) {
    const m = /^([A-Z]+)\|(.*)$/.exec(e && e.message);
    if (!m) return e;
    const err = new Error(`${m[1]}: ${m[2]}, ${syscall} '${path}'${dest ? ` -> '${dest}'` : ''}`);
    err.errno = { ENOENT: -2, EEXIST: -17, EACCES: -13, EISDIR: -21, ENOTDIR: -20, ENOTEMPTY: -39 }[m[1]] || -5;
    err.code = m[1];
    err.syscall = syscall;
    err.path = path;
    if (dest) err.dest = dest;
    return err;
  }
  const sys = (syscall, f) => (p, ...rest) => {
    try {
      return f(String(p), ...rest);
    } catch (e) {
      throw sysError(e, syscall, String(p));
    }
  };

  // -- path ---------------------------------------------------------------------------
  function normalizeParts(parts, absolute) {
    const out = [];
    for (const p of parts) {
      if (!p || p === '.') continue;
      if (p === '..') {
        if (out.length && out[out.length - 1] !== '..') out.pop();
        else if (!absolute) out.push('..');
      } else out.push(p);
    }
    return out;
  }
  const path = {
    sep: '/',
    delimiter: ':',
    normalize(p) {
      if (p === '') return '.';
      const abs = p.startsWith('/');
      const trail = p.endsWith('/');
      let s = normalizeParts(p.split('/'), abs).join('/');
      if (!s && !abs) s = '.';
      if (s && trail) s += '/';
      return (abs ? '/' : '') + s;
    },
    join(...ps) {
      const j = ps.filter((p) => p !== '').join('/');
      return j ? path.normalize(j) : '.';
    },
    resolve(...ps) {
      let r = '';
      for (let i = ps.length - 1; i >= 0 && !r.startsWith('/'); i--) if (ps[i]) r = ps[i] + (r ? '/' + r : '');
      if (!r.startsWith('/')) r = N.cwd() + (r ? '/' + r : '');
      const s = '/' + normalizeParts(r.split('/'), true).join('/');
      return s;
    },
    isAbsolute: (p) => p.startsWith('/'),
    dirname(p) {
      if (!p) return '.';
      const s = p.replace(/\/+$/, '');
      if (!s) return '/';
      const i = s.lastIndexOf('/');
      if (i < 0) return '.';
      if (i === 0) return '/';
      return s.slice(0, i).replace(/\/+$/, '') || '/';
    },
    basename(p, ext) {
      let b = p.replace(/\/+$/, '');
      b = b.slice(b.lastIndexOf('/') + 1);
      if (ext && b.endsWith(ext) && b !== ext) b = b.slice(0, -ext.length);
      return b;
    },
    extname(p) {
      const b = path.basename(p);
      const i = b.lastIndexOf('.');
      return i <= 0 ? '' : b.slice(i);
    },
    relative(from, to) {
      const a = path.resolve(from).split('/').filter(Boolean);
      const b = path.resolve(to).split('/').filter(Boolean);
      let i = 0;
      while (i < a.length && i < b.length && a[i] === b[i]) i++;
      return [...Array(a.length - i).fill('..'), ...b.slice(i)].join('/');
    },
    parse(p) {
      const root = p.startsWith('/') ? '/' : '';
      const base = path.basename(p);
      const ext = path.extname(p);
      let dir = path.dirname(p);
      if (dir === '.' && !p.includes('/')) dir = '';
      return { root, dir, base, ext, name: ext ? base.slice(0, -ext.length) : base };
    },
    format(o) {
      const dir = o.dir || o.root || '';
      const base = o.base || (o.name || '') + (o.ext || '');
      return dir ? (dir.endsWith('/') ? dir + base : dir + '/' + base) : base;
    },
  };
  path.posix = path;

  // -- fs -----------------------------------------------------------------------------
  function encodingOf(o) {
    return typeof o === 'string' ? o : o && o.encoding;
  }
  function makeStats(line) {
    const [size, kind, mtime, atime, birth, mode] = line.split(' ');
    const typeBits = kind === 'dir' ? 0o040000 : kind === 'link' ? 0o120000 : 0o100000;
    return {
      size: Number(size), mode: typeBits | Number(mode), uid: 0, gid: 0, nlink: 1,
      mtimeMs: Number(mtime), atimeMs: Number(atime), birthtimeMs: Number(birth), ctimeMs: Number(mtime),
      mtime: new Date(Number(mtime)), atime: new Date(Number(atime)), birthtime: new Date(Number(birth)), ctime: new Date(Number(mtime)),
      isFile: () => kind === 'file', isDirectory: () => kind === 'dir', isSymbolicLink: () => kind === 'link',
      isFIFO: () => false, isSocket: () => false, isCharacterDevice: () => false, isBlockDevice: () => false,
    };
  }
  function data(d) {
    return typeof d === 'string' ? d : d && d.__wasboxBuffer ? d.text : String(d);
  }
  function Buffer(text) {
    this.__wasboxBuffer = true;
    this.text = text;
    this.length = text.length;
  }
  Buffer.prototype.toString = function () { return this.text; };
  Buffer.from = (s) => new Buffer(String(s));
  Buffer.isBuffer = (b) => !!(b && b.__wasboxBuffer);
  g.Buffer = Buffer;
  const fs = {
    readFileSync(p, o) {
      const t = sys('open', (q) => N.read(q))(p === 0 ? '0' : p);
      return encodingOf(o) ? t : new Buffer(t);
    },
    writeFileSync: (p, d, o) => sys('open', (q) => N.writeFile(q, data(d), !!(o && o.flag === 'a')))(p),
    appendFileSync: (p, d) => sys('open', (q) => N.writeFile(q, data(d), true))(p),
    existsSync: (p) => N.exists(String(p)),
    readdirSync(p, o) {
      const text = sys('scandir', (q) => N.readdir(q))(p);
      const names = text ? text.split('\n') : [];
      if (o && o.withFileTypes) {
        return names.map((n) => {
          const st = makeStats(N.stat(path.join(String(p), n), true));
          return { name: n, isFile: st.isFile, isDirectory: st.isDirectory, isSymbolicLink: st.isSymbolicLink };
        });
      }
      return names;
    },
    mkdirSync(p, o) {
      const rec = !!(o && (o === true || o.recursive));
      if (rec && N.exists(String(p))) return undefined;
      sys('mkdir', (q) => N.mkdir(q, rec))(p);
      return rec ? path.resolve(String(p)) : undefined;
    },
    statSync: (p, o) => {
      try {
        return makeStats(sys('stat', (q) => N.stat(q, false))(p));
      } catch (e) {
        if (o && o.throwIfNoEntry === false) return undefined;
        throw e;
      }
    },
    lstatSync: (p) => makeStats(sys('lstat', (q) => N.stat(q, true))(p)),
    unlinkSync: (p) => sys('unlink', (q) => N.remove(q, 'file'))(p),
    rmdirSync: (p, o) => sys('rmdir', (q) => N.remove(q, o && o.recursive ? 'all' : 'dir'))(p),
    rmSync(p, o) {
      if (o && o.force && !N.exists(String(p))) return;
      const st = fs.lstatSync(p);
      if (st.isDirectory() && !(o && o.recursive)) {
        const e = new Error(`Path is a directory: rm returned EISDIR (is a directory) ${p}`);
        e.code = 'ERR_FS_EISDIR';
        throw e;
      }
      sys('rm', (q) => N.remove(q, 'all'))(p);
    },
    renameSync: (a, b) => {
      try { N.rename(String(a), String(b), false); } catch (e) { throw sysError(e, 'rename', String(a), String(b)); }
    },
    copyFileSync: (a, b) => {
      try { N.rename(String(a), String(b), true); } catch (e) { throw sysError(e, 'copyfile', String(a), String(b)); }
    },
    accessSync: (p) => { fs.statSync(p); },
    realpathSync: (p) => path.resolve(String(p)),
    constants: { F_OK: 0, R_OK: 4, W_OK: 2, X_OK: 1 },
  };
  const promisify = (f) => (...a) => new Promise((res, rej) => { try { res(f(...a)); } catch (e) { rej(e); } });
  fs.promises = {};
  for (const [k, f] of Object.entries(fs)) {
    if (typeof f === 'function' && k.endsWith('Sync')) {
      const name = k.slice(0, -4);
      fs.promises[name] = promisify(f);
      fs[name] = (...a) => {
        const cb = typeof a[a.length - 1] === 'function' ? a.pop() : null;
        let r, err = null;
        try { r = f(...a); } catch (e) { err = e; }
        if (cb) queueMicrotask(() => (name === 'exists' ? cb(r) : cb(err, r)));
      };
    }
  }

  // -- process ------------------------------------------------------------------------
  let exitCode;
  const env = {};
  for (const rec of N.env().split('\0')) {
    const i = rec.indexOf('=');
    if (i > 0) env[rec.slice(0, i)] = rec.slice(i + 1);
  }
  const listeners = {};
  // process.nextTick callbacks run before promise jobs, as in Node.
  const ticks = [];
  function drainTicks() {
    while (ticks.length) {
      const [f, a] = ticks.shift();
      f(...a);
    }
  }
  const process = {
    argv: [], env, platform: 'linux', arch: 'wasm32', pid: 1, ppid: 0,
    version: '', versions: {}, release: { name: 'node' }, execPath: '/usr/bin/node',
    title: 'node', exitCode: undefined,
    cwd: () => N.cwd(),
    chdir: (d) => sys('chdir', (q) => N.chdir(q))(d),
    exit(code) {
      const c = code === undefined ? process.exitCode || 0 : code;
      emitEvent('exit', c);
      N.exit(Number(c) | 0);
    },
    on(ev, f) { (listeners[ev] = listeners[ev] || []).push(f); return process; },
    once(ev, f) { return process.on(ev, f); },
    off(ev, f) { listeners[ev] = (listeners[ev] || []).filter((x) => x !== f); return process; },
    nextTick: (f, ...a) => { ticks.push([f, a]); },
    hrtime: Object.assign((prev) => {
      const t = N.now() * 1e6;
      const s = Math.floor(t / 1e9);
      const ns = Math.floor(t % 1e9);
      return prev ? [s - prev[0], ns - prev[1]] : [s, ns];
    }, { bigint: () => BigInt(Math.floor(N.now() * 1e6)) }),
    uptime: () => (N.now() - startedAt) / 1000,
    memoryUsage: () => ({ rss: 0, heapTotal: 0, heapUsed: 0, external: 0 }),
    stdout: { write: (s) => { N.write(1, typeof s === 'string' ? s : data(s)); return true; }, isTTY: false },
    stderr: { write: (s) => { N.write(2, typeof s === 'string' ? s : data(s)); return true; }, isTTY: false },
    stdin: { isTTY: false },
  };
  process.removeListener = process.off;
  process.addListener = process.on;
  function emitEvent(ev, ...a) {
    for (const f of listeners[ev] || []) f(...a);
  }
  const startedAt = N.now();
  g.process = process;

  // -- timers -------------------------------------------------------------------------
  let timerSeq = 0;
  const timerList = new Map();
  function addTimer(f, ms, args, repeat) {
    const id = ++timerSeq;
    const delay = Math.max(1, Number(ms) || 0);
    timerList.set(id, { f, args, at: N.now() + delay, every: repeat ? delay : 0, seq: id });
    return { id, ref() { return this; }, unref() { return this; }, hasRef: () => true, [Symbol.toPrimitive]: () => id };
  }
  const clear = (t) => timerList.delete(typeof t === 'object' && t ? t.id : t);
  g.setTimeout = (f, ms, ...a) => addTimer(f, ms, a, false);
  g.setInterval = (f, ms, ...a) => addTimer(f, ms, a, true);
  g.setImmediate = (f, ...a) => addTimer(f, 0, a, false);
  g.clearTimeout = clear;
  g.clearInterval = clear;
  g.clearImmediate = clear;
  if (typeof g.queueMicrotask !== 'function') g.queueMicrotask = (f) => { Promise.resolve().then(f); };
  if (typeof g.structuredClone !== 'function') g.structuredClone = (v) => JSON.parse(JSON.stringify(v));
  g.global = g;
  g.performance = { now: () => N.now() - startedAt, timeOrigin: startedAt };

  // -- modules ------------------------------------------------------------------------
  const util = {
    inspect, format,
    promisify: (f) => (...a) => new Promise((res, rej) => f(...a, (e, r) => (e ? rej(e) : res(r)))),
    isDeepStrictEqual: (a, b) => JSON.stringify(a) === JSON.stringify(b),
    types: { isDate: (d) => d instanceof Date, isRegExp: (r) => r instanceof RegExp, isPromise: (p) => p instanceof Promise },
    inherits(c, s) { Object.setPrototypeOf(c.prototype, s.prototype); },
  };
  const os = {
    EOL: '\n', platform: () => 'linux', type: () => 'Linux', arch: () => 'wasm32',
    homedir: () => env.HOME || '/', tmpdir: () => '/tmp', hostname: () => 'wasbox', cpus: () => [{ model: 'wasm32' }],
    totalmem: () => 512 * 1024 * 1024, freemem: () => 256 * 1024 * 1024, endianness: () => 'LE', release: () => '0.0.0',
  };
  function execResult(cmd, input) {
    const [status, stdout, stderr] = N.run(String(cmd), input == null ? '' : String(input)).split('\0');
    return { status: Number(status), stdout, stderr };
  }
  const child_process = {
    execSync(cmd, o) {
      const r = execResult(cmd, o && o.input);
      if (!(o && o.stdio === 'pipe') && r.stderr) N.write(2, r.stderr);
      if (r.status !== 0) {
        const e = new Error(`Command failed: ${cmd}\n${r.stderr}`);
        e.status = r.status;
        e.stdout = r.stdout;
        e.stderr = r.stderr;
        throw e;
      }
      return encodingOf(o) ? r.stdout : new Buffer(r.stdout);
    },
    spawnSync(cmd, args, o) {
      const q = (s) => "'" + String(s).replace(/'/g, "'\\''") + "'";
      const line = [cmd, ...(args || [])].map(q).join(' ');
      const r = execResult(line, o && o.input);
      const enc = encodingOf(o);
      return { status: r.status, signal: null, stdout: enc ? r.stdout : new Buffer(r.stdout), stderr: enc ? r.stderr : new Buffer(r.stderr), output: [null, r.stdout, r.stderr] };
    },
  };
  child_process.execFileSync = (f, a, o) => {
    const r = child_process.spawnSync(f, a, o);
    if (r.status !== 0) {
      const e = new Error(`Command failed: ${f}`);
      e.status = r.status;
      throw e;
    }
    return r.stdout;
  };
  const assert = (ok, msg) => { if (!ok) { const e = new Error(msg || 'The expression evaluated to a falsy value'); e.name = 'AssertionError'; e.code = 'ERR_ASSERTION'; throw e; } };
  assert.ok = assert;
  assert.equal = (a, b, m) => assert(a == b, m || `${inspect(a)} == ${inspect(b)}`);
  assert.strictEqual = (a, b, m) => assert(Object.is(a, b), m || `Expected values to be strictly equal:\n\n${inspect(a)} !== ${inspect(b)}\n`);
  assert.notStrictEqual = (a, b, m) => assert(!Object.is(a, b), m || `Expected "actual" to be strictly unequal to: ${inspect(b)}`);
  assert.deepStrictEqual = (a, b, m) => assert(JSON.stringify(a) === JSON.stringify(b), m || 'Expected values to be strictly deep-equal');
  assert.deepEqual = assert.deepStrictEqual;
  assert.throws = (f, _e, m) => { let threw = false; try { f(); } catch (e) { threw = true; } assert(threw, m || 'Missing expected exception.'); };
  assert.strict = assert;

  const builtins = { fs, path, util, os, child_process, assert, events: null, process, buffer: { Buffer } };
  class EventEmitter {
    constructor() { this._ev = {}; }
    on(e, f) { (this._ev[e] = this._ev[e] || []).push(f); return this; }
    once(e, f) { const w = (...a) => { this.off(e, w); f(...a); }; return this.on(e, w); }
    off(e, f) { this._ev[e] = (this._ev[e] || []).filter((x) => x !== f); return this; }
    emit(e, ...a) { const l = this._ev[e] || []; for (const f of [...l]) f.apply(this, a); return l.length > 0; }
    listenerCount(e) { return (this._ev[e] || []).length; }
  }
  EventEmitter.prototype.addListener = EventEmitter.prototype.on;
  EventEmitter.prototype.removeListener = EventEmitter.prototype.off;
  EventEmitter.EventEmitter = EventEmitter;
  builtins.events = EventEmitter;
  const cache = {};

  function makeRequire(dir) {
    const require = (name) => {
      const bare = String(name).replace(/^node:/, '');
      if (Object.prototype.hasOwnProperty.call(builtins, bare)) {
        return bare === 'fs/promises' ? fs.promises : builtins[bare];
      }
      if (bare === 'fs/promises') return fs.promises;
      if (bare === 'path/posix') return path;
      if (!/^(\.{1,2}\/|\/)/.test(bare)) {
        const e = new Error(`Cannot find module '${name}'\nRequire stack:\n- ${dir}`);
        e.code = 'MODULE_NOT_FOUND';
        throw e;
      }
      const base = path.resolve(dir, bare);
      const candidates = [base, base + '.js', base + '.json', base + '/index.js'];
      const file = candidates.find((c) => N.exists(c) && makeStats(N.stat(c, false)).isFile());
      if (!file) {
        const e = new Error(`Cannot find module '${name}'`);
        e.code = 'MODULE_NOT_FOUND';
        throw e;
      }
      if (cache[file]) return cache[file].exports;
      const module = { exports: {}, filename: file, id: file, loaded: false };
      cache[file] = module;
      const src = N.read(file);
      if (file.endsWith('.json')) module.exports = JSON.parse(src);
      else runModule(src, file, module);
      module.loaded = true;
      return module.exports;
    };
    require.resolve = (n) => path.resolve(dir, n);
    require.cache = cache;
    return require;
  }

  function runModule(src, file, module) {
    const dir = path.dirname(file);
    const body = src.startsWith('#!') ? '//' + src : src;
    const wrapper = (0, eval)(`(function (exports, require, module, __filename, __dirname) {${body}\n})`);
    const req = makeRequire(dir);
    req.main = module;
    wrapper.call(module.exports, module.exports, req, module, file, dir);
  }

  function main(mode, filename, source, argv, version) {
    process.argv = argv.split('\0');
    process.version = version;
    process.versions = { node: version.slice(1), boa: '0.22.0' };
    const cwd = N.cwd();
    if (mode === 'file') {
      const module = { exports: {}, filename, id: '.', loaded: false };
      cache[filename] = module;
      runModule(source, filename, module);
      drainTicks();
      return;
    }
    const module = { exports: {}, filename: path.join(cwd, filename), id: filename };
    g.require = makeRequire(cwd);
    g.module = module;
    g.exports = module.exports;
    g.__filename = filename;
    g.__dirname = '.';
    const result = (0, eval)(source);
    if (mode === 'print') N.write(1, (typeof result === 'string' ? result : inspect(result)) + '\n');
    drainTicks();
  }

  function tick() {
    if (ticks.length) {
      drainTicks();
      return true;
    }
    if (!timerList.size) return false;
    let next = null;
    for (const t of timerList.values()) if (!next || t.at < next.at || (t.at === next.at && t.seq < next.seq)) next = t;
    const wait = next.at - N.now();
    if (wait > 0) N.sleep(wait);
    if (next.every) {
      next.at += next.every;
      next.seq = ++timerSeq;
    } else {
      timerList.delete([...timerList].find(([, t]) => t === next)[0]);
    }
    next.f(...next.args);
    drainTicks();
    return true;
  }

  function uncaught(e) {
    let text;
    if (e instanceof Error) {
      const stack = e.stack && String(e.stack);
      text = stack && stack.includes(e.message) ? stack : `${e.name}: ${e.message}`;
      const extra = Object.keys(e).filter((k) => k !== 'stack' && k !== 'message');
      if (extra.length) text += ' ' + inspect(Object.fromEntries(extra.map((k) => [k, e[k]])));
    } else {
      text = inspect(e);
    }
    N.write(2, `Uncaught ${text.replace(/\n+$/, '')}\n`);
  }

  return {
    main,
    tick,
    uncaught,
    exitCode: () => {
      const c = process.exitCode === undefined ? 0 : process.exitCode;
      emitEvent('exit', c);
      return Number(process.exitCode === undefined ? c : process.exitCode) | 0;
    },
  };
})()
