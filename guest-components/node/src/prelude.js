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
    if (g.Buffer && v instanceof g.Buffer) {
      const shown = Array.from(v.subarray(0, 50), (b) => b.toString(16).padStart(2, '0')).join(' ');
      return `<Buffer${shown ? ' ' + shown : ''}${v.length > 50 ? ` ... ${v.length - 50} more bytes` : ''}>`;
    }
    if (v instanceof Date) return isNaN(v) ? 'Invalid Date' : v.toISOString();
    if (v instanceof RegExp) return String(v);
    if (typeof Promise !== 'undefined' && v instanceof Promise) return 'Promise { <pending> }';
    const name = protoName(v);
    let braces;
    let base = '';
    let isArray = false;
    let output = [];
    if (depth > ctx.maxDepth) {
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
    } else if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      isArray = true;
      braces = [`${name}(${v.length}) [`, ']'];
      const max = Math.min(v.length, 100);
      for (let i = 0; i < max; i++) output.push(sub(v[i]));
      ctx.extra = v.length > 100;
      if (ctx.extra) output.push(`... ${v.length - 100} more item${v.length - 100 > 1 ? 's' : ''}`);
      extraKeys = [];
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

  function inspect(v, opts) {
    let maxDepth = 2;
    if (opts && typeof opts === 'object' && 'depth' in opts) {
      maxDepth = opts.depth === null || opts.depth === Infinity ? Infinity : Number(opts.depth);
    }
    const ctx = { seen: [], indent: 0, deepest: 0, extra: false, maxDepth };
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
    err.errno = { ENOENT: -2, EEXIST: -17, EACCES: -13, EISDIR: -21, ENOTDIR: -20, ENOTEMPTY: -39, EINVAL: -22 }[m[1]] || -5;
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
  // -- text encodings and Buffer (a Uint8Array, as in Node) ------------------------------
  // UTF-8 by the host (natively: the loops below take a QuickJS second a few MiB); the loops
  // remain for what the host cannot take (a string with a lone surrogate).
  function utf8Encode(str) {
    try {
      return N.encode(str);
    } catch (_) {
      return utf8EncodeJs(str);
    }
  }
  function utf8Decode(bytes) {
    return bytes instanceof Uint8Array ? N.decode(bytes) : utf8DecodeJs(bytes);
  }
  function utf8EncodeJs(str) {
    const out = [];
    for (let i = 0; i < str.length; i++) {
      let c = str.charCodeAt(i);
      if (c >= 0xd800 && c < 0xdc00 && i + 1 < str.length) {
        const d = str.charCodeAt(i + 1);
        if (d >= 0xdc00 && d < 0xe000) {
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          i++;
        } else c = 0xfffd;
      } else if (c >= 0xd800 && c < 0xe000) c = 0xfffd;
      if (c < 0x80) out.push(c);
      else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
      else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
      else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    }
    return new Uint8Array(out);
  }
  function utf8DecodeJs(bytes) {
    let out = '';
    for (let i = 0; i < bytes.length;) {
      const b = bytes[i];
      let c = 0xfffd;
      let n = 1;
      if (b < 0x80) c = b;
      else if (b >= 0xc2 && b < 0xe0 && i + 1 < bytes.length && (bytes[i + 1] & 0xc0) === 0x80) {
        c = ((b & 31) << 6) | (bytes[i + 1] & 63);
        n = 2;
      } else if (b >= 0xe0 && b < 0xf0 && i + 2 < bytes.length && (bytes[i + 1] & 0xc0) === 0x80 && (bytes[i + 2] & 0xc0) === 0x80) {
        c = ((b & 15) << 12) | ((bytes[i + 1] & 63) << 6) | (bytes[i + 2] & 63);
        n = 3;
      } else if (b >= 0xf0 && b < 0xf5 && i + 3 < bytes.length && (bytes[i + 1] & 0xc0) === 0x80 && (bytes[i + 2] & 0xc0) === 0x80 && (bytes[i + 3] & 0xc0) === 0x80) {
        c = ((b & 7) << 18) | ((bytes[i + 1] & 63) << 12) | ((bytes[i + 2] & 63) << 6) | (bytes[i + 3] & 63);
        n = 4;
      }
      out += String.fromCodePoint(c);
      i += n;
    }
    return out;
  }
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  function base64Encode(bytes, url) {
    let out = '';
    for (let i = 0; i < bytes.length; i += 3) {
      const n = (bytes[i] << 16) | ((bytes[i + 1] || 0) << 8) | (bytes[i + 2] || 0);
      out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63];
      out += i + 1 < bytes.length ? B64[(n >> 6) & 63] : url ? '' : '=';
      out += i + 2 < bytes.length ? B64[n & 63] : url ? '' : '=';
    }
    return url ? out.replace(/\+/g, '-').replace(/\//g, '_') : out;
  }
  function base64Decode(str) {
    const clean = String(str).replace(/-/g, '+').replace(/_/g, '/').replace(/[^A-Za-z0-9+/]/g, '');
    const out = [];
    for (let i = 0; i < clean.length; i += 4) {
      const chunk = clean.slice(i, i + 4);
      const n = [...chunk].reduce((a, ch, k) => a | (B64.indexOf(ch) << (18 - 6 * k)), 0);
      out.push((n >> 16) & 255);
      if (chunk.length > 2) out.push((n >> 8) & 255);
      if (chunk.length > 3) out.push(n & 255);
    }
    return new Uint8Array(out);
  }
  function normEnc(e) {
    const x = String(e || 'utf8').toLowerCase().replace('-', '');
    if (x === 'utf8' || x === 'hex' || x === 'base64' || x === 'base64url' || x === 'ascii' || x === 'latin1' || x === 'binary' || x === 'ucs2' || x === 'utf16le') return x;
    const err = new TypeError(`Unknown encoding: ${e}`);
    err.code = 'ERR_UNKNOWN_ENCODING';
    throw err;
  }
  function encodeString(str, enc) {
    switch (normEnc(enc)) {
      case 'hex': {
        const out = [];
        for (let i = 0; i + 1 < str.length; i += 2) {
          const b = parseInt(str.slice(i, i + 2), 16);
          if (Number.isNaN(b)) break;
          out.push(b);
        }
        return new Uint8Array(out);
      }
      case 'base64': case 'base64url': return base64Decode(str);
      case 'ascii': case 'latin1': case 'binary': return Uint8Array.from(str, (c) => c.charCodeAt(0) & 255);
      case 'ucs2': case 'utf16le': {
        const out = new Uint8Array(str.length * 2);
        for (let i = 0; i < str.length; i++) { out[2 * i] = str.charCodeAt(i) & 255; out[2 * i + 1] = str.charCodeAt(i) >> 8; }
        return out;
      }
      default: return utf8Encode(str);
    }
  }
  class Buffer extends Uint8Array {
    static from(v, enc, len) {
      if (typeof v === 'string') return Buffer.of_(encodeString(v, enc));
      if (v instanceof ArrayBuffer) return new Buffer(v, enc || 0, len === undefined ? v.byteLength - (enc || 0) : len);
      if (v instanceof Uint8Array) return Buffer.of_(v);
      if (v && typeof v === 'object' && v.type === 'Buffer' && Array.isArray(v.data)) return Buffer.of_(Uint8Array.from(v.data));
      if (v && typeof v.length === 'number') return Buffer.of_(Uint8Array.from(v, (x) => Number(x) & 255));
      throw new TypeError('The first argument must be of type string or an instance of Buffer, ArrayBuffer, or Array or an Array-like Object.');
    }
    static of_(u8) {
      const b = new Buffer(u8.length);
      b.set(u8);
      return b;
    }
    static alloc(n, fill) {
      const b = new Buffer(n);
      if (fill !== undefined) b.fill(typeof fill === 'string' ? fill.charCodeAt(0) : fill);
      return b;
    }
    static allocUnsafe(n) { return new Buffer(n); }
    static isBuffer(b) { return b instanceof Buffer; }
    static isEncoding(e) { try { normEnc(e); return true; } catch (_) { return false; } }
    static byteLength(v, enc) { return typeof v === 'string' ? encodeString(v, enc).length : v.byteLength; }
    static concat(list, total) {
      const len = total === undefined ? list.reduce((a, b) => a + b.length, 0) : total;
      const out = Buffer.alloc(len);
      let at = 0;
      for (const b of list) {
        if (at >= len) break;
        out.set(b.subarray(0, len - at), at);
        at += b.length;
      }
      return out;
    }
    static compare(a, b) { return a.compare(b); }
    toString(enc, start = 0, end = this.length) {
      const bytes = this.subarray(start, end);
      switch (normEnc(enc)) {
        case 'hex': return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
        case 'base64': return base64Encode(bytes, false);
        case 'base64url': return base64Encode(bytes, true);
        case 'ascii': return Array.from(bytes, (b) => String.fromCharCode(b & 127)).join('');
        case 'latin1': case 'binary': return Array.from(bytes, (b) => String.fromCharCode(b)).join('');
        case 'ucs2': case 'utf16le': {
          let out = '';
          for (let i = 0; i + 1 < bytes.length; i += 2) out += String.fromCharCode(bytes[i] | (bytes[i + 1] << 8));
          return out;
        }
        default: return utf8Decode(bytes);
      }
    }
    toJSON() { return { type: 'Buffer', data: Array.from(this) }; }
    equals(o) { return this.compare(o) === 0; }
    compare(o) {
      const n = Math.min(this.length, o.length);
      for (let i = 0; i < n; i++) if (this[i] !== o[i]) return this[i] < o[i] ? -1 : 1;
      return this.length === o.length ? 0 : this.length < o.length ? -1 : 1;
    }
    slice(s, e) { return this.subarray(s, e); }
    subarray(s, e) {
      const u = Uint8Array.prototype.subarray.call(this, s, e);
      return new Buffer(u.buffer, u.byteOffset, u.length);
    }
    write(str, offset = 0, enc) {
      const bytes = encodeString(str, typeof offset === 'string' ? offset : enc);
      const at = typeof offset === 'number' ? offset : 0;
      const n = Math.min(bytes.length, this.length - at);
      this.set(bytes.subarray(0, n), at);
      return n;
    }
    indexOf(v, from = 0) {
      const needle = typeof v === 'number' ? [v] : typeof v === 'string' ? encodeString(v) : v;
      outer: for (let i = from; i <= this.length - needle.length; i++) {
        for (let k = 0; k < needle.length; k++) if (this[i + k] !== needle[k]) continue outer;
        return i;
      }
      return -1;
    }
    includes(v, from) { return this.indexOf(v, from) !== -1; }
    readUInt8(o = 0) { return this[o]; }
    readUInt16LE(o = 0) { return this[o] | (this[o + 1] << 8); }
    readUInt16BE(o = 0) { return (this[o] << 8) | this[o + 1]; }
    readUInt32LE(o = 0) { return (this[o] | (this[o + 1] << 8) | (this[o + 2] << 16)) + this[o + 3] * 0x1000000; }
    readUInt32BE(o = 0) { return this[o] * 0x1000000 + ((this[o + 1] << 16) | (this[o + 2] << 8) | this[o + 3]); }
    readInt8(o = 0) { return (this[o] << 24) >> 24; }
    readInt32LE(o = 0) { return this[o] | (this[o + 1] << 8) | (this[o + 2] << 16) | (this[o + 3] << 24); }
    writeUInt8(v, o = 0) { this[o] = v; return o + 1; }
    writeUInt32BE(v, o = 0) { this[o] = v >>> 24; this[o + 1] = v >>> 16; this[o + 2] = v >>> 8; this[o + 3] = v; return o + 4; }
    writeUInt32LE(v, o = 0) { this[o] = v; this[o + 1] = v >>> 8; this[o + 2] = v >>> 16; this[o + 3] = v >>> 24; return o + 4; }
  }
  g.Buffer = Buffer;
  class TextEncoder {
    get encoding() { return 'utf-8'; }
    encode(s = '') { return utf8Encode(String(s)); }
  }
  class TextDecoder {
    constructor(enc = 'utf-8') { this.encoding = String(enc).toLowerCase(); }
    decode(b) {
      if (b === undefined) return '';
      const u = b instanceof ArrayBuffer ? new Uint8Array(b) : new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
      return this.encoding === 'latin1' ? Array.from(u, (x) => String.fromCharCode(x)).join('') : utf8Decode(u);
    }
  }
  g.TextEncoder = TextEncoder;
  g.TextDecoder = TextDecoder;
  g.btoa = (s) => base64Encode(Uint8Array.from(String(s), (c) => c.charCodeAt(0) & 255), false);
  g.atob = (s) => Array.from(base64Decode(s), (b) => String.fromCharCode(b)).join('');
  // What a write takes: a string as it is, bytes as they are (a Buffer, any typed array's
  // bytes, an ArrayBuffer), anything else as String(d).
  function data(d, enc) {
    if (typeof d === 'string') return enc && normEnc(enc) !== 'utf8' ? Buffer.from(d, enc) : d;
    if (d instanceof Uint8Array) return d;
    if (ArrayBuffer.isView(d)) return new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
    if (d instanceof ArrayBuffer) return new Uint8Array(d);
    return String(d);
  }
  const asBuffer = (u8) => new Buffer(u8.buffer, u8.byteOffset, u8.length);
  const textBuffer = (t) => Buffer.from(t, 'utf8');
  const fs = {
    readFileSync(p, o) {
      const enc = encodingOf(o);
      const text = enc && normEnc(enc) === 'utf8';
      const t = sys('open', (q) => N.read(q, !text))(p === 0 ? '0' : p);
      if (text) return t;
      const b = asBuffer(t);
      return enc ? b.toString(enc) : b;
    },
    writeFileSync: (p, d, o) => sys('open', (q) => N.writeFile(q, data(d, encodingOf(o)), !!(o && o.flag === 'a')))(p),
    appendFileSync: (p, d, o) => sys('open', (q) => N.writeFile(q, data(d, encodingOf(o)), true))(p),
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
    symlinkSync: (t, p) => {
      try { N.symlink(String(t), String(p)); } catch (e) { throw sysError(e, 'symlink', String(t), String(p)); }
    },
    readlinkSync: (p) => sys('readlink', (q) => N.readlink(q))(p),
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

  // Streams of a file: read whole when someone listens (a 'data', 'readable' or 'end'
  // listener, pipe, resume or async iteration), given in chunks of `highWaterMark` bytes
  // (64 KiB) from `start` to `end`; a write stream appends each write as it comes.
  fs.createReadStream = (p, o) => {
    o = typeof o === 'string' ? { encoding: o } : o || {};
    const s = new EventEmitter();
    let encoding = o.encoding || null;
    let started = false;
    const size = Math.max(1, Number(o.highWaterMark) || 65536);
    const chunks = [];
    let ended = false;
    s.path = p;
    s.bytesRead = 0;
    s.readable = true;
    // Opened at once, as Node opens it: a missing file is an 'error' whoever listens.
    ticks.push([() => {
      if (started) return;
      try {
        sys('open', (q) => N.stat(q, false))(p);
      } catch (e) {
        started = true;
        s.destroyed = true;
        s.emit('error', e);
        s.emit('close');
      }
    }, []]);
    s.setEncoding = (e) => { encoding = e || 'utf8'; return s; };
    const out = (b) => (encoding ? b.toString(encoding) : b);
    function start() {
      if (started) return s;
      started = true;
      // Opened, then read: each a turn, as in Node.
      ticks.push([() => ticks.push([read, []]), []]);
      return s;
    }
    function read() {
      let all;
      try {
        all = asBuffer(sys('open', (q) => N.read(q, true))(p));
      } catch (e) {
        s.destroyed = true;
        s.emit('error', e);
        s.emit('close');
        return;
      }
      const from = Number(o.start) || 0;
      const to = o.end === undefined ? all.length : Math.min(all.length, Number(o.end) + 1);
      s.emit('open', 3);
      s.emit('ready');
      for (let at = from; at < to; at += size) {
        const piece = all.subarray(at, Math.min(to, at + size));
        s.bytesRead += piece.length;
        chunks.push(piece);
        if (s.listenerCount('data') > 0) s.emit('data', out(chunks.shift()));
      }
      ended = true;
      if (!chunks.length) { s.emit('end'); s.emit('close'); }
      else s.emit('readable');
    }
    const on = s.on.bind(s);
    s.on = s.addListener = (e, f) => {
      on(e, f);
      if (e === 'data' || e === 'readable' || e === 'end') start();
      return s;
    };
    s.read = () => {
      start();
      if (!chunks.length) {
        if (ended) queueMicrotask(() => { s.emit('end'); s.emit('close'); });
        return null;
      }
      return out(chunks.shift());
    };
    s.resume = () => start();
    s.pause = () => s;
    s.close = s.destroy = (err) => { s.destroyed = true; if (err) s.emit('error', err); s.emit('close'); return s; };
    s.pipe = (dest) => {
      s.on('data', (c) => dest.write(c));
      s.on('end', () => { if (dest !== process.stdout && dest !== process.stderr && dest.end) dest.end(); });
      return dest;
    };
    s[Symbol.asyncIterator] = () => {
      const queue = [];
      let done = false;
      let failed = null;
      let wake = null;
      const poke = () => { if (wake) { const w = wake; wake = null; w(); } };
      s.on('data', (c) => { queue.push(c); poke(); });
      s.on('end', () => { done = true; poke(); });
      s.on('error', (e) => { failed = e; poke(); });
      return {
        async next() {
          for (;;) {
            if (queue.length) return { done: false, value: queue.shift() };
            if (failed) throw failed;
            if (done) return { done: true, value: undefined };
            await new Promise((r) => { wake = r; });
          }
        },
        async return() { done = true; return { done: true, value: undefined }; },
      };
    };
    return s;
  };
  fs.createWriteStream = (p, o) => {
    o = typeof o === 'string' ? { encoding: o } : o || {};
    const s = new EventEmitter();
    const append = /^a/.test(o.flags || 'w');
    s.path = p;
    s.bytesWritten = 0;
    s.writable = true;
    let failed = false;
    const fail = (e) => { failed = true; ticks.push([() => { s.emit('error', e); s.emit('close'); }, []]); };
    try {
      if (!append) sys('open', (q) => N.writeFile(q, '', false))(p);
      ticks.push([() => { s.emit('open', 3); s.emit('ready'); }, []]);
    } catch (e) { fail(e); }
    s.write = (c, enc, cb) => {
      if (typeof enc === 'function') { cb = enc; enc = undefined; }
      if (failed) return false;
      const d = data(c, enc || o.encoding);
      try {
        sys('open', (q) => N.writeFile(q, d, true))(p);
        s.bytesWritten += typeof d === 'string' ? Buffer.byteLength(d) : d.length;
        if (cb) ticks.push([cb, [null]]);
      } catch (e) { fail(e); if (cb) ticks.push([cb, [e]]); }
      return true;
    };
    s.end = (c, enc, cb) => {
      if (typeof c === 'function') { cb = c; c = undefined; }
      if (typeof enc === 'function') { cb = enc; enc = undefined; }
      if (c !== undefined && c !== null) s.write(c, enc);
      s.writable = false;
      if (cb) s.once(failed ? 'close' : 'finish', cb);
      // 'finish' once the writes are through: a turn later than a lone open's answer, as
      // in Node, whose writes each take a turn of its loop.
      ticks.push([() => ticks.push([() => { if (!failed) { s.emit('finish'); s.emit('close'); } }, []]), []]);
      return s;
    };
    s.close = (cb) => s.end(cb);
    s.destroy = () => { s.writable = false; s.emit('close'); return s; };
    s.cork = s.uncork = () => {};
    s.setDefaultEncoding = (e) => { o.encoding = e; return s; };
    return s;
  };

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
    getuid: () => sandboxUser().uid, geteuid: () => sandboxUser().uid,
    getgid: () => sandboxUser().gid, getegid: () => sandboxUser().gid,
    getgroups: () => [sandboxUser().gid],
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
    stdin: makeStdin(),
  };
  process.removeListener = process.off;
  process.addListener = process.on;
  // Standard input as a readable stream: it is read when a listener asks for it, after
  // the script's own code has run, and given as one 'data' chunk, then 'end'.
  function makeStdin() {
    const ev = {};
    let encoding = null;
    let started = false;
    let text = null;
    const emit = (e, ...a) => { for (const f of [...(ev[e] || [])]) f.apply(s, a); };
    const load = () => { if (text === null) text = N.read('0'); return text; };
    const chunk = (t) => (encoding ? t : textBuffer(t));
    function start() {
      if (started) return;
      started = true;
      ticks.push([() => {
        const t = load();
        if (t.length) emit('data', chunk(t));
        emit('end');
        emit('close');
      }, []]);
    }
    const s = {
      isTTY: false,
      fd: 0,
      readable: true,
      setEncoding(e) { encoding = e || 'utf8'; return s; },
      on(e, f) {
        (ev[e] = ev[e] || []).push(f);
        if (e === 'data' || e === 'end' || e === 'readable') start();
        return s;
      },
      once(e, f) { const w = (...a) => { s.off(e, w); f(...a); }; return s.on(e, w); },
      off(e, f) { ev[e] = (ev[e] || []).filter((x) => x !== f); return s; },
      resume() { start(); return s; },
      pause() { return s; },
      read() { if (started && text !== null) return null; started = true; const t = load(); return t.length ? chunk(t) : null; },
      pipe(dest) { ticks.push([() => { const t = load(); if (t.length) dest.write(t); if (dest.end && dest !== process.stdout && dest !== process.stderr) dest.end(); }, []]); return dest; },
      [Symbol.asyncIterator]() {
        let given = false;
        return { next: () => { if (given) return Promise.resolve({ done: true, value: undefined }); given = true; const t = load(); return Promise.resolve(t.length ? { done: false, value: chunk(t) } : { done: true, value: undefined }); } };
      },
    };
    s.addListener = s.on;
    s.removeListener = s.off;
    return s;
  }

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
  // The user, as `id` gives it: `$USER` when it names a user of the sandbox's own
  // /etc/passwd, else root.
  function sandboxUser() {
    let lines = [];
    try { lines = fs.readFileSync('/etc/passwd', 'utf8').split('\n'); } catch (e) { /* none */ }
    const users = lines.map((l) => l.split(':')).filter((f) => f.length === 7)
      .map((f) => ({ username: f[0], uid: Number(f[2]), gid: Number(f[3]), homedir: f[5], shell: f[6] }));
    return users.find((u) => u.username === env.USER) || users.find((u) => u.uid === 0)
      || { username: 'root', uid: 0, gid: 0, homedir: '/root', shell: '/bin/sh' };
  }
  function sandboxHostname() {
    try { return fs.readFileSync('/etc/hostname', 'utf8').trim() || 'localhost'; } catch (e) { return 'localhost'; }
  }
  const os = {
    EOL: '\n', platform: () => 'linux', type: () => 'Linux', arch: () => 'wasm32', machine: () => 'wasm32',
    homedir: () => env.HOME || '/', tmpdir: () => '/tmp', hostname: sandboxHostname, cpus: () => [{ model: 'wasm32' }],
    totalmem: () => 512 * 1024 * 1024, freemem: () => 256 * 1024 * 1024, endianness: () => 'LE',
    release: () => '6.1.0-wasbox', version: () => '#1 SMP wasbox',
    userInfo(o) {
      const u = sandboxUser();
      return { ...u, homedir: env.HOME || u.homedir };
    },
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
      return encodingOf(o) ? r.stdout : textBuffer(r.stdout);
    },
    spawnSync(cmd, args, o) {
      const q = (s) => "'" + String(s).replace(/'/g, "'\\''") + "'";
      const line = [cmd, ...(args || [])].map(q).join(' ');
      const r = execResult(line, o && o.input);
      const enc = encodingOf(o);
      // `stdio: 'inherit'`: what the child wrote goes to ours (once it has ended).
      if (o && (o.stdio === 'inherit' || (Array.isArray(o.stdio) && o.stdio[1] === 'inherit'))) {
        if (r.stdout) N.write(1, r.stdout);
        if (r.stderr) N.write(2, r.stderr);
      }
      return { status: r.status, signal: null, stdout: enc ? r.stdout : textBuffer(r.stdout), stderr: enc ? r.stderr : textBuffer(r.stderr), output: [null, r.stdout, r.stderr] };
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

  // -- readline: lines of a stream, with question() and async iteration -----------------
  function createInterface(input, output) {
    if (input && !input.on && input.input) {
      output = input.output;
      input = input.input;
    }
    const rl = new EventEmitter();
    let buf = '';
    const queue = [];
    const waiting = [];
    const questions = [];
    let closed = false;
    let prompt = '> ';
    function deliver(line) {
      if (questions.length) return questions.shift()(line);
      if (waiting.length) return waiting.shift()({ done: false, value: line });
      if (rl.listenerCount('line') > 0) rl.emit('line', line);
      else queue.push(line);
    }
    rl.close = () => {
      if (closed) return;
      closed = true;
      rl.closed = true;
      while (waiting.length) waiting.shift()({ done: true, value: undefined });
      rl.emit('close');
    };
    rl.question = (q, opts, cb) => {
      cb = typeof opts === 'function' ? opts : cb;
      if (output && output.write) output.write(q);
      questions.push(cb);
    };
    rl.setPrompt = (p) => { prompt = p; };
    rl.getPrompt = () => prompt;
    rl.prompt = () => { if (output && output.write) output.write(prompt); };
    rl.write = (d) => { if (output && output.write) output.write(d); };
    rl.pause = () => rl;
    rl.resume = () => rl;
    rl[Symbol.asyncIterator] = () => ({
      next() {
        if (queue.length) return Promise.resolve({ done: false, value: queue.shift() });
        if (closed) return Promise.resolve({ done: true, value: undefined });
        return new Promise((res) => waiting.push(res));
      },
      return() { rl.close(); return Promise.resolve({ done: true, value: undefined }); },
    });
    // Bytes are decoded as they come, a character split between chunks kept for the next.
    let tail = null;
    const decode = (b) => {
      if (tail) { const j = new Uint8Array(tail.length + b.length); j.set(tail); j.set(b, tail.length); b = j; tail = null; }
      let cut = b.length;
      for (let k = 1; k <= 3 && k <= b.length; k++) {
        const x = b[b.length - k];
        if ((x & 0xc0) === 0x80) continue;
        const need = x >= 0xf0 ? 4 : x >= 0xe0 ? 3 : x >= 0xc0 ? 2 : 1;
        if (need > k) cut = b.length - k;
        break;
      }
      if (cut < b.length) tail = b.slice(cut);
      return utf8Decode(b.subarray(0, cut));
    };
    input.on('data', (c) => {
      buf += typeof c === 'string' ? c : decode(data(c));
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).replace(/\r$/, '');
        buf = buf.slice(i + 1);
        deliver(line);
      }
    });
    input.on('end', () => {
      if (tail) { buf += utf8Decode(tail); tail = null; }
      if (buf) deliver(buf);
      buf = '';
      rl.close();
    });
    return rl;
  }
  const readline = { createInterface, Interface: EventEmitter, clearLine: () => true, cursorTo: () => true, emitKeypressEvents: () => {} };
  builtins.readline = readline;
  builtins['readline/promises'] = {
    createInterface(...a) {
      const rl = createInterface(...a);
      const q = rl.question;
      rl.question = (text) => new Promise((res) => q(text, res));
      return rl;
    },
  };

  // -- crypto: hashes and HMACs computed by the host, random bytes from WASI -----------
  function toBytes(d, enc) {
    return typeof d === 'string' ? encodeString(d, enc) : d instanceof Uint8Array ? d : new Uint8Array(d.buffer || d);
  }
  const cryptoError = (e) => {
    const m = /^([A-Z_]+)\|(.*)$/.exec(e && e.message);
    if (!m) return e;
    const err = new Error(m[2]);
    err.code = m[1];
    return err;
  };
  function hasher(compute) {
    const parts = [];
    const h = {
      update(d, enc) { parts.push(toBytes(d, enc)); return h; },
      digest(enc) {
        let out;
        try { out = asBuffer(compute(Buffer.concat(parts))); } catch (e) { throw cryptoError(e); }
        return enc ? out.toString(enc) : out;
      },
      copy() { const c = hasher(compute); parts.forEach((p) => c.update(p)); return c; },
    };
    return h;
  }
  function randomBytes(n, cb) {
    const b = Buffer.from(N.random(Number(n)), 'hex');
    if (typeof cb === 'function') { ticks.push([() => cb(null, b), []]); return undefined; }
    return b;
  }
  function randomUUID() {
    const b = randomBytes(16);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = b.toString('hex');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
  const crypto = {
    createHash(alg) {
      try { N.hash(String(alg), ''); } catch (e) { throw cryptoError(e); }
      return hasher((bytes) => N.hash(String(alg), bytes));
    },
    createHmac(alg, key) {
      const k = toBytes(key);
      return hasher((bytes) => N.hmac(String(alg), k, bytes));
    },
    getHashes: () => ['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512'],
    randomBytes,
    randomUUID,
    randomInt(min, max, cb) {
      if (max === undefined || typeof max === 'function') { cb = max; max = min; min = 0; }
      const range = max - min;
      const b = randomBytes(6);
      const v = min + Math.floor((b.readUInt32BE(0) * 65536 + b.readUInt16BE(4)) / 2 ** 48 * range);
      if (typeof cb === 'function') { ticks.push([() => cb(null, v), []]); return undefined; }
      return v;
    },
    getRandomValues(arr) {
      const b = randomBytes(arr.byteLength);
      new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength).set(b);
      return arr;
    },
    timingSafeEqual(a, b) {
      if (a.length !== b.length) throw new RangeError('Input buffers must have the same byte length');
      let d = 0;
      for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
      return d === 0;
    },
  };
  crypto.webcrypto = { getRandomValues: crypto.getRandomValues, randomUUID };
  builtins.crypto = crypto;
  if (!g.crypto) g.crypto = { getRandomValues: crypto.getRandomValues, randomUUID };

  // -- URL and URLSearchParams (the parts scripts use) ----------------------------------
  class URLSearchParams {
    constructor(init) {
      this._list = [];
      if (typeof init === 'string') {
        for (const part of init.replace(/^\?/, '').split('&')) {
          if (!part) continue;
          const i = part.indexOf('=');
          const dec = (x) => decodeURIComponent(x.replace(/\+/g, ' '));
          this._list.push(i < 0 ? [dec(part), ''] : [dec(part.slice(0, i)), dec(part.slice(i + 1))]);
        }
      } else if (init && typeof init[Symbol.iterator] === 'function') {
        for (const [k, v] of init) this._list.push([String(k), String(v)]);
      } else if (init && typeof init === 'object') {
        for (const k of Object.keys(init)) this._list.push([k, String(init[k])]);
      }
    }
    get size() { return this._list.length; }
    append(k, v) { this._list.push([String(k), String(v)]); this._update(); }
    delete(k) { this._list = this._list.filter(([x]) => x !== k); this._update(); }
    get(k) { const e = this._list.find(([x]) => x === k); return e ? e[1] : null; }
    getAll(k) { return this._list.filter(([x]) => x === k).map(([, v]) => v); }
    has(k) { return this._list.some(([x]) => x === k); }
    set(k, v) {
      const i = this._list.findIndex(([x]) => x === k);
      if (i < 0) this._list.push([String(k), String(v)]);
      else { this._list[i] = [String(k), String(v)]; this._list = this._list.filter(([x], j) => x !== k || j === i); }
      this._update();
    }
    sort() { this._list.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)); this._update(); }
    forEach(f, t) { for (const [k, v] of this._list) f.call(t, v, k, this); }
    keys() { return this._list.map(([k]) => k)[Symbol.iterator](); }
    values() { return this._list.map(([, v]) => v)[Symbol.iterator](); }
    entries() { return this._list.map((e) => [...e])[Symbol.iterator](); }
    [Symbol.iterator]() { return this.entries(); }
    toString() {
      const enc = (x) => encodeURIComponent(x).replace(/%20/g, '+').replace(/[!'()~]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
      return this._list.map(([k, v]) => `${enc(k)}=${enc(v)}`).join('&');
    }
    _update() { if (this._url) { const q = this.toString(); this._url._search = q ? '?' + q : ''; } }
  }
  const DEFAULT_PORTS = { 'http:': '80', 'https:': '443', 'ws:': '80', 'wss:': '443', 'ftp:': '21' };
  class URL {
    constructor(input, base) {
      input = String(input).trim();
      const abs = /^([a-zA-Z][a-zA-Z0-9+.-]*:)(.*)$/.exec(input);
      if (!abs) {
        if (base === undefined) throw Object.assign(new TypeError('Invalid URL'), { code: 'ERR_INVALID_URL', input });
        const b = base instanceof URL ? base : new URL(base);
        let rel = input;
        let path;
        if (rel.startsWith('//')) return new URL(b.protocol + rel);
        const hashAt = rel.indexOf('#');
        const hash = hashAt >= 0 ? rel.slice(hashAt) : '';
        if (hashAt >= 0) rel = rel.slice(0, hashAt);
        const qAt = rel.indexOf('?');
        const search = qAt >= 0 ? rel.slice(qAt) : null;
        if (qAt >= 0) rel = rel.slice(0, qAt);
        if (rel === '') path = b.pathname;
        else if (rel.startsWith('/')) path = rel;
        else path = b.pathname.replace(/[^/]*$/, '') + rel;
        return new URL(`${b.protocol}//${b.username ? b.username + (b.password ? ':' + b.password : '') + '@' : ''}${b.host}${path}${search === null ? (rel === '' ? b.search : '') : search}${hash}`);
      }
      this.protocol = abs[1].toLowerCase();
      let rest = abs[2];
      const hashAt = rest.indexOf('#');
      this.hash = hashAt >= 0 && hashAt < rest.length - 1 ? rest.slice(hashAt) : '';
      if (hashAt >= 0) rest = rest.slice(0, hashAt);
      const qAt = rest.indexOf('?');
      this._search = qAt >= 0 && qAt < rest.length - 1 ? rest.slice(qAt) : '';
      if (qAt >= 0) rest = rest.slice(0, qAt);
      this.username = '';
      this.password = '';
      this.hostname = '';
      this.port = '';
      if (rest.startsWith('//')) {
        rest = rest.slice(2);
        const slash = rest.indexOf('/');
        let auth = slash >= 0 ? rest.slice(0, slash) : rest;
        rest = slash >= 0 ? rest.slice(slash) : '';
        const at = auth.lastIndexOf('@');
        if (at >= 0) {
          const [u, p] = auth.slice(0, at).split(':');
          this.username = u || '';
          this.password = p || '';
          auth = auth.slice(at + 1);
        }
        const m = /^(\[[^\]]*\]|[^:]*)(?::(\d*))?$/.exec(auth);
        if (!m) throw Object.assign(new TypeError('Invalid URL'), { code: 'ERR_INVALID_URL', input });
        this.hostname = m[1].toLowerCase();
        this.port = m[2] && m[2] !== DEFAULT_PORTS[this.protocol] ? String(Number(m[2])) : '';
        if (!rest) rest = '/';
      }
      const segs = [];
      for (const seg of rest.split('/').slice(1)) {
        if (seg === '..') segs.pop();
        else if (seg !== '.') segs.push(seg);
      }
      this.pathname = rest.startsWith('/') ? '/' + segs.join('/') : rest;
      this.searchParams = new URLSearchParams(this._search);
      this.searchParams._url = this;
    }
    get search() { return this._search; }
    set search(v) { v = String(v); this._search = v && !v.startsWith('?') ? '?' + v : v === '?' ? '' : v; this.searchParams = new URLSearchParams(this._search); this.searchParams._url = this; }
    get host() { return this.hostname + (this.port ? ':' + this.port : ''); }
    get origin() { return this.hostname ? `${this.protocol}//${this.host}` : 'null'; }
    get href() {
      const auth = this.username ? this.username + (this.password ? ':' + this.password : '') + '@' : '';
      const slashes = this.hostname || ['http:', 'https:', 'ws:', 'wss:', 'ftp:', 'file:'].includes(this.protocol) ? '//' : '';
      return `${this.protocol}${slashes}${auth}${this.host}${this.pathname}${this._search}${this.hash}`;
    }
    toString() { return this.href; }
    toJSON() { return this.href; }
  }
  g.URL = URL;

  // -- fetch, over the host's HTTP client (the sandbox's network policy applies) --------
  class Headers {
    constructor(init) {
      this._h = new Map();
      if (init instanceof Headers) init.forEach((v, k) => this.append(k, v));
      else if (Array.isArray(init)) for (const [k, v] of init) this.append(k, v);
      else if (init && typeof init === 'object') for (const k of Object.keys(init)) this.append(k, init[k]);
    }
    append(k, v) {
      const key = String(k).toLowerCase();
      const old = this._h.get(key);
      this._h.set(key, old === undefined ? String(v) : old + ', ' + String(v));
    }
    set(k, v) { this._h.set(String(k).toLowerCase(), String(v)); }
    get(k) { const v = this._h.get(String(k).toLowerCase()); return v === undefined ? null : v; }
    has(k) { return this._h.has(String(k).toLowerCase()); }
    delete(k) { this._h.delete(String(k).toLowerCase()); }
    forEach(f, self) { for (const [k, v] of this.entries()) f.call(self, v, k, this); }
    *entries() { yield* [...this._h.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)); }
    *keys() { for (const [k] of this.entries()) yield k; }
    *values() { for (const [, v] of this.entries()) yield v; }
    [Symbol.iterator]() { return this.entries(); }
  }
  class Response {
    constructor(body, init) {
      init = init || {};
      this._body = body == null ? '' : body instanceof Uint8Array ? body : ArrayBuffer.isView(body) || body instanceof ArrayBuffer ? data(body) : String(body);
      this.status = init.status === undefined ? 200 : init.status;
      this.statusText = init.statusText || '';
      this.headers = new Headers(init.headers);
      this.url = init.url || '';
      this.redirected = !!init.redirected;
      this.ok = this.status >= 200 && this.status < 300;
      this.type = 'basic';
      this.bodyUsed = false;
    }
    _take() {
      if (this.bodyUsed) return Promise.reject(new TypeError('Body is unusable: Body has already been read'));
      this.bodyUsed = true;
      return Promise.resolve(this._body);
    }
    text() { return this._take().then((b) => (typeof b === 'string' ? b : utf8Decode(b))); }
    json() { return this.text().then((t) => JSON.parse(t)); }
    arrayBuffer() { return this._take().then((t) => { const b = typeof t === 'string' ? Buffer.from(t) : t; return b.buffer.slice(b.byteOffset, b.byteOffset + b.length); }); }
    bytes() { return this.arrayBuffer().then((b) => new Uint8Array(b)); }
    blob() { return this.arrayBuffer(); }
    clone() { return new Response(this._body, this); }
  }
  function fetchError(e, url) {
    const m = /^([A-Z_]+)\|(.*)$/.exec(String(e && e.message));
    const cause = new Error(m ? m[2] : String(e));
    if (m) cause.code = m[1];
    if (m && m[1] === 'ERR_INVALID_URL') {
      const err = new TypeError('Failed to parse URL from ' + url);
      err.cause = cause;
      return err;
    }
    const err = new TypeError('fetch failed');
    err.cause = cause;
    return err;
  }
  function fetchNow(input, init) {
    init = init || {};
    let url = typeof input === 'string' ? input : (input && input.href) || (input && input.url) || String(input);
    let method = String(init.method || (input && input.method) || 'GET').toUpperCase();
    const headers = new Headers(init.headers || (input && input.headers));
    let body = init.body == null ? null : init.body;
    if (body !== null && typeof body === 'object' && !(body instanceof Uint8Array) && typeof body.toString === 'function' && body.constructor && body.constructor.name === 'URLSearchParams') {
      if (!headers.has('content-type')) headers.set('content-type', 'application/x-www-form-urlencoded;charset=UTF-8');
      body = body.toString();
    } else if (body instanceof Uint8Array || ArrayBuffer.isView(body) || body instanceof ArrayBuffer) body = data(body);
    else if (body !== null) {
      body = String(body);
      if (!headers.has('content-type')) headers.set('content-type', 'text/plain;charset=UTF-8');
    }
    if (body !== null) headers.set('content-length', String(Buffer.byteLength(body)));
    if (!headers.has('accept')) headers.set('accept', '*/*');
    if (!headers.has('user-agent')) headers.set('user-agent', 'node');
    for (let hops = 0; ; hops++) {
      let lines = '';
      headers.forEach((v, k) => { lines += k + ': ' + v + '\n'; });
      let raw, bytes;
      try {
        [raw, bytes] = N.fetch(method, url, lines, body);
      } catch (e) {
        throw fetchError(e, url);
      }
      const split = raw.indexOf('\n\n');
      const head = raw.slice(0, split).split('\n');
      const status = Number(head[0]);
      const rh = new Headers();
      for (const l of head.slice(1)) {
        const i = l.indexOf(': ');
        if (i > 0) rh.append(l.slice(0, i), l.slice(i + 2));
      }
      const location = rh.get('location');
      if ([301, 302, 303, 307, 308].includes(status) && location && (init.redirect || 'follow') === 'follow') {
        if (hops >= 20) throw fetchError(new Error('ECONNRESET|redirect count exceeded'), url);
        url = new URL(location, url).href;
        if (status === 303 || ((status === 301 || status === 302) && method === 'POST')) {
          method = 'GET';
          body = null;
          headers.delete('content-type');
          headers.delete('content-length');
        }
        continue;
      }
      if (location && init.redirect === 'error') throw fetchError(new Error('ECONNRESET|unexpected redirect'), url);
      return new Response(asBuffer(bytes), { status, statusText: STATUS_TEXT[status] || '', headers: rh, url, redirected: hops > 0 });
    }
  }
  const STATUS_TEXT = { 200: 'OK', 201: 'Created', 204: 'No Content', 301: 'Moved Permanently', 302: 'Found', 304: 'Not Modified', 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 500: 'Internal Server Error', 502: 'Bad Gateway', 503: 'Service Unavailable' };
  g.fetch = (input, init) => new Promise((resolve, reject) => {
    try { resolve(fetchNow(input, init)); } catch (e) { reject(e); }
  });
  g.Headers = Headers;
  g.Response = Response;
  // npm's downloads: the body to a file, checked against its integrity, redirects followed.
  Object.defineProperty(g, '__npmFetchTo', {
    enumerable: false,
    value: (url, file, integrity, extra) => new Promise((resolve, reject) => {
      try {
        for (let hops = 0; hops < 20; hops++) {
          let lines = 'accept: */*\nuser-agent: npm/10.9.2 node\n';
          for (const k of Object.keys(extra || {})) lines += k + ': ' + extra[k] + '\n';
          let raw;
          try {
            raw = N.fetch('GET', url, lines, null, file, integrity || null)[0];
          } catch (e) {
            throw fetchError(e, url);
          }
          const head = raw.slice(0, raw.indexOf('\n\n')).split('\n');
          const status = Number(head[0]);
          const loc = head.slice(1).find((l) => l.toLowerCase().startsWith('location: '));
          if (status >= 300 && status < 400 && loc) { url = new URL(loc.slice(10), url).href; continue; }
          if (status < 200 || status >= 300) {
            const err = new TypeError('fetch failed');
            err.cause = Object.assign(new Error(`${status} ${STATUS_TEXT[status] || ''} - GET ${url}`), { code: 'E' + status });
            throw err;
          }
          return resolve(status);
        }
        throw fetchError(new Error('ECONNRESET|redirect count exceeded'), url);
      } catch (e) {
        reject(e);
      }
    }),
  });

  // -- http and https: requests through the same host client (no servers) ---------------
  const STATUS_CODES = Object.assign({}, STATUS_TEXT);
  function netError(e) {
    const m = /^([A-Z_]+)\|(.*)$/.exec(String(e && e.message));
    const err = new Error(m ? m[2] : String(e));
    if (m) { err.code = m[1]; err.errno = m[1]; err.syscall = 'connect'; }
    return err;
  }
  function httpModule(defaultProtocol) {
    function request(url, options, cb) {
      if (typeof url === 'string' || (url && url.href && url.protocol)) {
        url = new URL(String(url.href || url));
        if (typeof options === 'function') { cb = options; options = {}; }
        options = Object.assign({}, options || {});
      } else {
        cb = options;
        options = Object.assign({}, url || {});
        url = null;
      }
      const protocol = options.protocol || (url ? url.protocol : defaultProtocol);
      let host = options.hostname || options.host || (url ? url.hostname : 'localhost');
      if (host.includes(':') && !host.startsWith('[')) host = '[' + host + ']';
      const port = options.port || (url ? url.port : '');
      const path = options.path || (url ? url.pathname + url.search : '/');
      const method = String(options.method || 'GET').toUpperCase();
      const headers = {};
      for (const k of Object.keys(options.headers || {})) headers[k.toLowerCase()] = options.headers[k];
      if (options.auth && !headers.authorization) headers.authorization = 'Basic ' + Buffer.from(options.auth).toString('base64');
      const req = new EventEmitter();
      const chunks = [];
      let sent = false;
      req.method = method;
      req.path = path;
      req.host = host;
      req.protocol = protocol;
      req.setHeader = (k, v) => { headers[String(k).toLowerCase()] = v; return req; };
      req.getHeader = (k) => headers[String(k).toLowerCase()];
      req.removeHeader = (k) => { delete headers[String(k).toLowerCase()]; };
      req.setTimeout = (ms, f) => { if (f) req.once('timeout', f); return req; };
      req.setNoDelay = () => req;
      req.setSocketKeepAlive = () => req;
      req.flushHeaders = () => {};
      req.destroy = (err) => { sent = true; req.destroyed = true; if (err) req.emit('error', err); req.emit('close'); return req; };
      req.abort = () => req.destroy();
      req.write = (c, enc, done) => {
        chunks.push(typeof c === 'string' ? Buffer.from(c, typeof enc === 'string' ? enc : 'utf8') : asBuffer(data(c)));
        if (typeof enc === 'function') enc();
        else if (typeof done === 'function') done();
        return true;
      };
      req.end = (c, enc, done) => {
        if (typeof c === 'function') { done = c; c = null; }
        if (typeof enc === 'function') { done = enc; }
        if (c) req.write(c);
        if (sent) return req;
        sent = true;
        Promise.resolve().then(() => {
          if (req.destroyed) return;
          const body = Buffer.concat(chunks);
          if (body.length && headers['content-length'] === undefined) headers['content-length'] = String(body.length);
          if (headers.host === undefined) delete headers.host;
          let lines = '';
          for (const k of Object.keys(headers)) {
            const v = headers[k];
            for (const one of Array.isArray(v) ? v : [v]) lines += k + ': ' + one + '\n';
          }
          let raw, bytes;
          try {
            [raw, bytes] = N.fetch(method, protocol + '//' + host + (port ? ':' + port : '') + path, lines, body.length ? body : null);
          } catch (e) {
            req.emit('error', netError(e));
            req.emit('close');
            return;
          }
          if (typeof done === 'function') done();
          const split = raw.indexOf('\n\n');
          const head = raw.slice(0, split).split('\n');
          const res = new EventEmitter();
          res.statusCode = Number(head[0]);
          res.statusMessage = STATUS_TEXT[res.statusCode] || '';
          res.httpVersion = '1.1';
          res.headers = {};
          res.rawHeaders = [];
          for (const l of head.slice(1)) {
            const i = l.indexOf(': ');
            if (i <= 0) continue;
            const k = l.slice(0, i).toLowerCase();
            const v = l.slice(i + 2);
            res.rawHeaders.push(l.slice(0, i), v);
            if (k === 'set-cookie') (res.headers[k] = res.headers[k] || []).push(v);
            else res.headers[k] = res.headers[k] === undefined ? v : res.headers[k] + ', ' + v;
          }
          let encoding = null;
          res.setEncoding = (e) => { encoding = e; return res; };
          res.resume = () => res;
          res.pause = () => res;
          res.destroy = () => res;
          res.pipe = (dest) => {
            res.on('data', (d) => dest.write(d));
            res.on('end', () => { if (dest !== process.stdout && dest !== process.stderr && dest.end) dest.end(); });
            return dest;
          };
          const got = asBuffer(bytes);
          const chunk = () => (encoding ? got.toString(encoding) : got);
          res[Symbol.asyncIterator] = async function* () { if (got.length) yield chunk(); };
          if (cb) req.once('response', cb);
          req.emit('response', res);
          Promise.resolve().then(() => {
            if (got.length) res.emit('data', chunk());
            res.complete = true;
            res.emit('end');
            res.emit('close');
            req.emit('close');
          });
        });
        return req;
      };
      return req;
    }
    function get(...a) {
      const r = request(...a);
      r.end();
      return r;
    }
    function createServer() {
      throw new Error('listening for connections is not available in this sandbox');
    }
    class Agent { constructor(o) { this.options = o || {}; } destroy() {} }
    return { request, get, createServer, Agent, globalAgent: new Agent(), STATUS_CODES, METHODS: ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT'] };
  }
  builtins.http = httpModule('http:');
  builtins.https = httpModule('https:');
  g.URLSearchParams = URLSearchParams;
  builtins.url = { URL, URLSearchParams, parse: (u) => new URL(u), fileURLToPath: (u) => decodeURIComponent(new URL(String(u)).pathname), pathToFileURL: (p) => new URL('file://' + path.resolve(String(p))) };
  builtins.string_decoder = { StringDecoder: class { constructor(e) { this.e = e || 'utf8'; } write(b) { return typeof b === 'string' ? b : Buffer.from(b).toString(this.e); } end(b) { return b ? this.write(b) : ''; } } };
  const cache = {};

  const isFile = (c) => N.exists(c) && makeStats(N.stat(c, false)).isFile();
  function resolveFile(base) {
    const candidates = [base, base + '.js', base + '.cjs', base + '.mjs', base + '.json'];
    const file = candidates.find(isFile);
    if (file) return file;
    if (N.exists(base + '/package.json')) {
      const main = packageEntry(base);
      if (main) return main;
    }
    return [base + '/index.js', base + '/index.cjs', base + '/index.mjs', base + '/index.json'].find(isFile);
  }
  // The entry of a package directory: `exports` ("." as a string, or its require/node/
  // default condition), else `main`, else index.js.
  function packageEntry(dir, sub) {
    let pkg = {};
    try { pkg = JSON.parse(N.read(dir + '/package.json')); } catch (e) { pkg = {}; }
    const pick = (x) => {
      if (typeof x === 'string') return x;
      if (Array.isArray(x)) { for (const y of x) { const r = pick(y); if (r) return r; } return null; }
      if (x && typeof x === 'object') {
        for (const k of ['require', 'node', 'default']) if (x[k] !== undefined) { const r = pick(x[k]); if (r) return r; }
      }
      return null;
    };
    const key = sub ? './' + sub : '.';
    let target = null;
    if (pkg.exports !== undefined) {
      const ex = pkg.exports;
      const keyed = ex && typeof ex === 'object' && !Array.isArray(ex) && Object.keys(ex).some((k) => k.startsWith('.'));
      if (!keyed) target = key === '.' ? pick(ex) : null;
      else if (ex[key] !== undefined) target = pick(ex[key]);
      else {
        for (const k of Object.keys(ex)) {
          if (k.endsWith('/*') && key.startsWith(k.slice(0, -1))) {
            const t = pick(ex[k]);
            if (t) target = t.replace('*', key.slice(k.length - 1));
          }
        }
      }
      if (target) return resolveFile(path.resolve(dir, target)) || null;
    }
    if (sub) return resolveFile(path.resolve(dir, sub));
    if (pkg.main) {
      const m = resolveFile(path.resolve(dir, pkg.main));
      if (m) return m;
    }
    return [dir + '/index.js', dir + '/index.cjs', dir + '/index.json'].find(isFile);
  }
  // A package name (`lodash`, `@scope/pkg`, with a subpath) looked up in `node_modules` of
  // `from` and each directory above it, as Node does.
  function resolvePackage(spec, from) {
    const parts = spec.split('/');
    const n = spec.startsWith('@') ? 2 : 1;
    const name = parts.slice(0, n).join('/');
    const sub = parts.slice(n).join('/');
    let d = from;
    for (;;) {
      const cand = path.join(d, 'node_modules', name);
      if (N.exists(cand + '/package.json') || N.exists(cand)) {
        const f = packageEntry(cand, sub);
        if (f) return f;
      }
      const up = path.dirname(d);
      if (up === d) break;
      d = up;
    }
    return null;
  }

  function makeRequire(dir) {
    const require = (name) => {
      const bare = String(name).replace(/^node:/, '');
      if (Object.prototype.hasOwnProperty.call(builtins, bare)) {
        return bare === 'fs/promises' ? fs.promises : builtins[bare];
      }
      if (bare === 'fs/promises') return fs.promises;
      if (bare === 'path/posix') return path;
      let file;
      if (!/^(\.{1,2}\/|\/)/.test(bare)) {
        file = resolvePackage(bare, dir);
        if (!file) {
          const e = new Error(`Cannot find module '${name}'\nRequire stack:\n- ${dir}`);
          e.code = 'MODULE_NOT_FOUND';
          throw e;
        }
      } else {
        file = resolveFile(path.resolve(dir, bare));
      }
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
    require.resolve = (n) => {
      const bare = String(n).replace(/^node:/, '');
      if (Object.prototype.hasOwnProperty.call(builtins, bare)) return bare;
      const f = /^(\.{1,2}\/|\/)/.test(bare) ? resolveFile(path.resolve(dir, bare)) : resolvePackage(bare, dir);
      if (!f) {
        const e = new Error(`Cannot find module '${n}'`);
        e.code = 'MODULE_NOT_FOUND';
        throw e;
      }
      return f;
    };
    require.cache = cache;
    return require;
  }

  // ES module syntax, as CommonJS: static imports become require() calls, exports
  // become properties of module.exports (no live bindings). The entry module runs in an
  // async function, so top-level await works there.
  const ESM_SYNTAX = /^[ \t]*(import[ \t]*[\w{*'"]|export[ \t]+(default|const|let|var|function|async|class|\{|\*))/m;
  function esmToCjs(src, entry) {
    const names = [];
    const req = (spec) => `__esmRequire(${spec})`;
    // One import or export statement per line (`export const a = 1; export default f`).
    let out = src
      .replace(/;[ \t]*(?=(import|export)[ \t]*[\w{*'"])/g, ';\n')
      .replace(/^[ \t]*import[ \t]+(['"][^'"]+['"])[ \t]*;?/gm, (_, m) => `${req(m)};`)
      .replace(/^[ \t]*import[ \t]+\*[ \t]+as[ \t]+([\w$]+)[ \t]+from[ \t]+(['"][^'"]+['"])[ \t]*;?/gm, (_, n, m) => `const ${n} = ${req(m)};`)
      .replace(/^[ \t]*import[ \t]+([\w$]+)[ \t]*,[ \t]*\{([^}]*)\}[ \t]*from[ \t]+(['"][^'"]+['"])[ \t]*;?/gm,
        (_, d, list, m) => `const __m_${d} = ${req(m)}; const ${d} = __esmDefault(__m_${d}); const {${list.replace(/([\w$]+)[ \t]+as[ \t]+([\w$]+)/g, '$1: $2')}} = __m_${d};`)
      .replace(/^[ \t]*import[ \t]+\{([^}]*)\}[ \t]*from[ \t]+(['"][^'"]+['"])[ \t]*;?/gm,
        (_, list, m) => `const {${list.replace(/([\w$]+)[ \t]+as[ \t]+([\w$]+)/g, '$1: $2')}} = ${req(m)};`)
      .replace(/^[ \t]*import[ \t]+([\w$]+)[ \t]+from[ \t]+(['"][^'"]+['"])[ \t]*;?/gm, (_, d, m) => `const ${d} = __esmDefault(${req(m)});`)
      .replace(/^([ \t]*)export[ \t]+default[ \t]+(async[ \t]+function|function|class)\b([ \t]*\*?[ \t]*)([\w$]*)/gm, (_, sp, kw, star, n) => {
        const name = n || '__default';
        names.push(['default', name]);
        return `${sp}${kw}${star}${name}`;
      })
      .replace(/^([ \t]*)export[ \t]+default[ \t]+/gm, (_, sp) => `${sp}module.exports.default = `)
      .replace(/^([ \t]*)export[ \t]+(const|let|var)[ \t]+([\w$]+)/gm, (_, sp, kw, n) => { names.push([n, n]); return `${sp}${kw} ${n}`; })
      .replace(/^([ \t]*)export[ \t]+(async[ \t]+function|function|class)([ \t]*\*?[ \t]*)([\w$]+)/gm, (_, sp, kw, star, n) => { names.push([n, n]); return `${sp}${kw}${star}${n}`; })
      .replace(/^[ \t]*export[ \t]*\*[ \t]*from[ \t]+(['"][^'"]+['"])[ \t]*;?/gm, (_, m) => `Object.assign(module.exports, ${req(m)});`)
      .replace(/^[ \t]*export[ \t]*\{([^}]*)\}[ \t]*from[ \t]+(['"][^'"]+['"])[ \t]*;?/gm, (_, list, m) =>
        `{ const __m = ${req(m)}; ${list.split(',').filter((x) => x.trim()).map((x) => { const [a, b] = x.trim().split(/[ \t]+as[ \t]+/); return `module.exports[${JSON.stringify(b || a)}] = __m[${JSON.stringify(a)}];`; }).join(' ')} }`)
      .replace(/^[ \t]*export[ \t]*\{([^}]*)\}[ \t]*;?/gm, (_, list) => {
        for (const x of list.split(',').filter((y) => y.trim())) {
          const [a, b] = x.trim().split(/[ \t]+as[ \t]+/);
          names.push([b || a, a]);
        }
        return '';
      })
      .replace(/\bimport\.meta\.url\b/g, '__importMetaUrl')
      .replace(/\bimport\.meta\.(dirname|filename)\b/g, (_, k) => (k === 'dirname' ? '__dirname' : '__filename'));
    const tail = names.map(([e, n]) => `module.exports[${JSON.stringify(e)}] = ${n};`).join(' ');
    out = `Object.defineProperty(module.exports, '__esModule', { value: true }); ${out}\n;${tail}`;
    return entry ? `return (async () => {\n${out}\n})();` : out;
  }
  const __esmDefault = (m) => (m && m.__esModule ? m.default : m);

  function runModule(src, file, module, entry) {
    const dir = path.dirname(file);
    let body = src.startsWith('#!') ? '//' + src : src;
    const esm = file.endsWith('.mjs') || (!file.endsWith('.cjs') && ESM_SYNTAX.test(body));
    if (esm) body = esmToCjs(body, entry);
    const wrapper = (0, eval)(`(function (exports, require, module, __filename, __dirname, __esmRequire, __esmDefault, __importMetaUrl) {${body}\n})`);
    const req = makeRequire(dir);
    req.main = module;
    wrapper.call(module.exports, module.exports, req, module, file, dir, req, __esmDefault, 'file://' + file);
  }

  function main(mode, filename, source, argv, version) {
    process.argv = argv.split('\0');
    process.version = version;
    process.versions = { node: version.slice(1), quickjs: '0.16.0' };
    const cwd = N.cwd();
    if (mode === 'file') {
      const module = { exports: {}, filename, id: '.', loaded: false };
      cache[filename] = module;
      runModule(source, filename, module, true);
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
