// `npm` of the wasbox image: install pure-JavaScript packages from a registry into
// node_modules, and run package scripts. Packages come through the host's HTTP client, so
// the sandbox's network policy decides which registry it may reach; every tarball is checked
// against the registry's integrity (sha512) or shasum before it is unpacked. Install scripts
// are never run (a sandbox has no compiler for native addons either).
'use strict';
const fs = require('fs');
const path = require('path');
const cp = require('child_process');

const VERSION = '10.9.2';
const argv = process.argv.slice(2);

function fail(msg, code) {
  for (const line of String(msg).split('\n')) process.stderr.write('npm error ' + line + '\n');
  process.exit(code || 1);
}

// -- configuration: flags, environment, .npmrc ------------------------------------------
const flags = {};
const positional = [];
let passthrough = [];
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--') { passthrough = argv.slice(i + 1); break; }
  if (a.startsWith('--')) {
    const [k, v] = a.slice(2).split(/=(.*)/s);
    if (v !== undefined) flags[k] = v;
    else if (['registry', 'prefix', 'cache', 'loglevel'].includes(k) && i + 1 < argv.length) flags[k] = argv[++i];
    else flags[k] = true;
  } else if (/^-[a-zA-Z]+$/.test(a)) {
    for (const c of a.slice(1)) flags[c] = true;
  } else positional.push(a);
}

function readRc(file) {
  const out = {};
  try {
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      const m = /^\s*([^#;=\s][^=]*?)\s*=\s*(.*?)\s*$/.exec(line);
      if (m) out[m[1]] = m[2].replace(/\$\{([^}]+)\}/g, (_, v) => process.env[v] || '');
    }
  } catch (e) { /* no file */ }
  return out;
}
const home = process.env.HOME || '/workspace';
const rc = Object.assign({}, readRc(path.join(home, '.npmrc')), readRc(path.join(process.cwd(), '.npmrc')));
let registry = flags.registry || process.env.npm_config_registry || process.env.NPM_CONFIG_REGISTRY || rc.registry || 'https://registry.npmjs.org/';
if (!registry.endsWith('/')) registry += '/';

// `//host[:port]/path/:_authToken=TOKEN` lines of .npmrc: the token of the URL's host.
function authFor(url) {
  const host = new URL(url).host;
  const key = Object.keys(rc).find((k) => k.endsWith(':_authToken') && k.startsWith('//' + host + '/'));
  return key ? { authorization: 'Bearer ' + rc[key] } : {};
}

// -- semver ranges (what package.json files use) ----------------------------------------
function parseVersion(v) {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$/.exec(String(v).trim());
  return m ? { major: +m[1], minor: +m[2], patch: +m[3], pre: m[4] ? m[4].split('.') : [] } : null;
}
function cmp(a, b) {
  for (const k of ['major', 'minor', 'patch']) if (a[k] !== b[k]) return a[k] < b[k] ? -1 : 1;
  if (!a.pre.length || !b.pre.length) return a.pre.length === b.pre.length ? 0 : a.pre.length ? -1 : 1;
  for (let i = 0; i < Math.max(a.pre.length, b.pre.length); i++) {
    const x = a.pre[i], y = b.pre[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    const nx = /^\d+$/.test(x), ny = /^\d+$/.test(y);
    if (nx && ny && +x !== +y) return +x < +y ? -1 : 1;
    if (nx !== ny) return nx ? -1 : 1;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}
// A partial version (`1`, `1.2`, `1.x`): its parts, with -1 for what is missing or a wildcard.
function partial(s) {
  const m = /^v?(\d+|[xX*])?(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?(?:-([0-9A-Za-z.-]+))?$/.exec(s);
  if (!m) return null;
  const n = (x) => (x === undefined || /[xX*]/.test(x) ? -1 : +x);
  return { major: n(m[1]), minor: n(m[2]), patch: n(m[3]), pre: m[4] ? m[4].split('.') : [] };
}
const V = (M, m, p, pre) => ({ major: M, minor: m, patch: p, pre: pre || [] });
// A comparator set (one side of `||`) as [op, version] pairs.
function comparators(set) {
  const out = [];
  set = set.trim().replace(/(>=|<=|>|<|=|\^|~)\s+/g, '$1');
  const hyphen = /^(\S+)\s+-\s+(\S+)$/.exec(set);
  if (hyphen) {
    const lo = partial(hyphen[1]), hi = partial(hyphen[2]);
    out.push(['>=', V(Math.max(lo.major, 0), Math.max(lo.minor, 0), Math.max(lo.patch, 0), lo.pre)]);
    if (hi.minor < 0) out.push(['<', V(hi.major + 1, 0, 0, ['0'])]);
    else if (hi.patch < 0) out.push(['<', V(hi.major, hi.minor + 1, 0, ['0'])]);
    else out.push(['<=', V(hi.major, hi.minor, hi.patch, hi.pre)]);
    return out;
  }
  for (const tok of set.split(/\s+/).filter(Boolean)) {
    const m = /^(>=|<=|>|<|=|\^|~>?|)(.*)$/.exec(tok);
    const op = m[1], p = partial(m[2] || '*');
    if (!p) return null;
    const { major: M, minor: mi, patch: pa, pre } = p;
    if (M < 0) { out.push(['>=', V(0, 0, 0)]); continue; }
    if (op === '^') {
      const lo = V(M, Math.max(mi, 0), Math.max(pa, 0), pre);
      const hi = M > 0 || mi < 0 ? V(M + 1, 0, 0, ['0']) : mi > 0 || pa < 0 ? V(0, mi + 1, 0, ['0']) : V(0, 0, pa + 1, ['0']);
      out.push(['>=', lo], ['<', hi]);
    } else if (op === '~' || op === '~>') {
      out.push(['>=', V(M, Math.max(mi, 0), Math.max(pa, 0), pre)]);
      out.push(['<', mi < 0 ? V(M + 1, 0, 0, ['0']) : V(M, mi + 1, 0, ['0'])]);
    } else if (op === '' || op === '=') {
      if (mi < 0) out.push(['>=', V(M, 0, 0)], ['<', V(M + 1, 0, 0, ['0'])]);
      else if (pa < 0) out.push(['>=', V(M, mi, 0)], ['<', V(M, mi + 1, 0, ['0'])]);
      else out.push(['=', V(M, mi, pa, pre)]);
    } else {
      const v = V(M, Math.max(mi, 0), Math.max(pa, 0), pre);
      if (op === '>' && mi < 0) out.push(['>=', V(M + 1, 0, 0)]);
      else if (op === '>' && pa < 0) out.push(['>=', V(M, mi + 1, 0)]);
      else if (op === '<=' && mi < 0) out.push(['<', V(M + 1, 0, 0, ['0'])]);
      else if (op === '<=' && pa < 0) out.push(['<', V(M, mi + 1, 0, ['0'])]);
      else out.push([op, v]);
    }
  }
  return out;
}
function satisfies(version, range) {
  const v = parseVersion(version);
  if (!v) return false;
  range = String(range || '*').trim() || '*';
  if (range === 'latest') return true;
  return range.split('||').some((set) => {
    const cs = comparators(set);
    if (!cs) return false;
    // A prerelease matches only a comparator naming the same major.minor.patch with one.
    if (v.pre.length && !cs.some(([, c]) => c.pre.length && c.major === v.major && c.minor === v.minor && c.patch === v.patch)) return false;
    return cs.every(([op, c]) => {
      const r = cmp(v, c);
      return op === '>=' ? r >= 0 : op === '<=' ? r <= 0 : op === '>' ? r > 0 : op === '<' ? r < 0 : r === 0;
    });
  });
}

// -- the registry -------------------------------------------------------------------------
const packuments = {};
async function packument(name) {
  if (packuments[name]) return packuments[name];
  const url = registry + name.replace('/', '%2f');
  let r;
  try {
    r = await fetch(url, { headers: Object.assign({ accept: 'application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8' }, authFor(url)) });
  } catch (e) {
    const why = e.cause ? e.cause.message : e.message;
    fail(`code ${e.cause && e.cause.code || 'ECONNREFUSED'}\nrequest to ${url} failed, reason: ${why}`);
  }
  if (r.status === 404) fail(`code E404\n404 Not Found - GET ${url} - Not found\n\n404  '${name}@*' is not in this registry.`);
  if (!r.ok) fail(`code E${r.status}\n${r.status} ${r.statusText} - GET ${url}`);
  packuments[name] = await r.json();
  return packuments[name];
}
async function pick(name, range) {
  const doc = await packument(name);
  const tags = doc['dist-tags'] || {};
  if (tags[range]) return doc.versions[tags[range]];
  if (!range || range === '*' || range === 'latest') {
    if (tags.latest && doc.versions[tags.latest]) return doc.versions[tags.latest];
  }
  const fits = Object.keys(doc.versions || {}).filter((v) => satisfies(v, range)).map(parseVersion);
  if (!fits.length) fail(`code ETARGET\nNo matching version found for ${name}@${range}.`);
  fits.sort(cmp);
  const best = fits[fits.length - 1];
  const key = Object.keys(doc.versions).find((v) => { const p = parseVersion(v); return p && cmp(p, best) === 0; });
  return doc.versions[key];
}

function sh(cmd) {
  return cp.execSync(cmd, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}
const quote = (s) => "'" + String(s).replace(/'/g, "'\\''") + "'";

let fetched = 0;
// Where each package unpacked by this run came from, by its directory (for the lock file).
const unpacked = {};
async function unpack(meta, dest) {
  const dist = meta.dist || {};
  unpacked[dest] = { resolved: dist.tarball, integrity: dist.integrity || (dist.shasum ? 'sha1-' + Buffer.from(dist.shasum, 'hex').toString('base64') : undefined) };
  const tmp = `/tmp/npm-${process.pid}-${fetched++}.tgz`;
  const integrity = dist.integrity && /^sha512-/.test(dist.integrity) ? dist.integrity.split(/\s+/)[0] : dist.shasum ? 'sha1:' + dist.shasum : null;
  try {
    await fetchTo(dist.tarball, tmp, integrity);
  } catch (e) {
    fail(`code ${e.cause && e.cause.code || 'EFETCH'}\n${e.cause ? e.cause.message : e.message}`);
  }
  fs.rmSync(dest, { recursive: true, force: true });
  fs.mkdirSync(dest, { recursive: true });
  sh(`tar -xzf ${quote(tmp)} -C ${quote(dest)} --strip-components=1`);
  fs.rmSync(tmp, { force: true });
}

function fetchTo(url, file, integrity) {
  return globalThis.__npmFetchTo(url, file, integrity, authFor(url));
}

function readJson(file) {
  try { return JSON.parse(fs.readFileSync(file, 'utf8')); } catch (e) { return null; }
}
function writeJson(file, obj) {
  fs.writeFileSync(file, JSON.stringify(obj, null, 2) + '\n');
}
function splitSpec(spec) {
  const at = spec.lastIndexOf('@');
  if (at > 0) return [spec.slice(0, at), spec.slice(at + 1) || 'latest'];
  return [spec, 'latest'];
}

function linkBins(root, dir, meta) {
  let bins = meta.bin;
  if (!bins) return;
  if (typeof bins === 'string') bins = { [meta.name.split('/').pop()]: bins };
  const binDir = path.join(root, 'node_modules', '.bin');
  fs.mkdirSync(binDir, { recursive: true });
  for (const [name, file] of Object.entries(bins)) {
    const target = path.resolve(dir, file);
    const wrapper = path.join(binDir, name);
    fs.writeFileSync(wrapper, `#!/bin/sh\nexec node ${quote(target)} "$@"\n`);
    sh(`chmod +x ${quote(wrapper)}`);
  }
}

// -- package-lock.json (lockfileVersion 3, as npm 7 and later write it) ----------------
const LOCK = 'package-lock.json';
const EMPTY_LOCK_DEPS = ['dependencies', 'devDependencies', 'optionalDependencies', 'peerDependencies'];

// Every package directory under node_modules, as npm's lock names them
// (`node_modules/a`, `node_modules/a/node_modules/b`, `node_modules/@s/c`), sorted.
function installedDirs(root) {
  const out = [];
  const walk = (nm) => {
    let names = [];
    try { names = fs.readdirSync(nm); } catch (e) { return; }
    for (const n of names) {
      if (n.startsWith('.')) continue;
      const dirs = n.startsWith('@') ? fs.readdirSync(path.join(nm, n)).map((m) => path.join(nm, n, m)) : [path.join(nm, n)];
      for (const d of dirs) {
        if (!readJson(path.join(d, 'package.json'))) continue;
        out.push(d);
        walk(path.join(d, 'node_modules'));
      }
    }
  };
  walk(path.join(root, 'node_modules'));
  return out.sort();
}

// The directory `require(name)` from `dir` finds, as node resolves it (up the tree).
function resolveFrom(root, dir, name) {
  let d = dir;
  for (;;) {
    const cand = path.join(d, 'node_modules', name);
    if (readJson(path.join(cand, 'package.json'))) return cand;
    if (d === root || path.dirname(d) === d) return null;
    d = path.dirname(d);
    if (path.basename(d) === 'node_modules') d = path.dirname(d);
    else if (path.basename(d).startsWith('@') && path.basename(path.dirname(d)) === 'node_modules') d = path.dirname(path.dirname(d));
  }
}

function writeLock(root, opts) {
  if (opts.noLock) return;
  const pkg = readJson(path.join(root, 'package.json')) || {};
  const old = readJson(path.join(root, LOCK)) || {};
  const oldPackages = old.packages || {};
  const top = { name: pkg.name || path.basename(root), version: pkg.version };
  for (const f of EMPTY_LOCK_DEPS) if (pkg[f] && Object.keys(pkg[f]).length) top[f] = pkg[f];
  if (pkg.bin) top.bin = pkg.bin;
  const packages = { '': top };
  const dirs = installedDirs(root);
  // What the project's own dependencies reach; the rest is there for development only.
  const prod = new Set();
  const reach = (dir, names) => {
    for (const n of names) {
      const found = resolveFrom(root, dir, n);
      if (!found || prod.has(found)) continue;
      prod.add(found);
      const own = readJson(path.join(found, 'package.json')) || {};
      reach(found, Object.keys(Object.assign({}, own.dependencies, own.optionalDependencies)));
    }
  };
  reach(root, Object.keys(Object.assign({}, pkg.dependencies, pkg.optionalDependencies)));
  for (const dir of dirs) {
    const rel = path.relative(root, dir);
    const own = readJson(path.join(dir, 'package.json'));
    const from = unpacked[dir] || oldPackages[rel] || {};
    const entry = { version: own.version };
    if (from.resolved) entry.resolved = from.resolved;
    if (from.integrity) entry.integrity = from.integrity;
    if (!prod.has(dir)) entry.dev = true;
    if (own.license) entry.license = own.license;
    for (const f of ['dependencies', 'optionalDependencies', 'peerDependencies']) if (own[f] && Object.keys(own[f]).length) entry[f] = own[f];
    if (own.bin) entry.bin = typeof own.bin === 'string' ? { [own.name.split('/').pop()]: own.bin } : own.bin;
    if (own.engines) entry.engines = own.engines;
    packages[rel] = entry;
  }
  writeJson(path.join(root, LOCK), { name: top.name, version: top.version, lockfileVersion: 3, requires: true, packages });
}

// The version the lock file has at `rel`, if it satisfies `range`.
function lockedVersion(lock, rel, range) {
  const e = lock && lock.packages && lock.packages[rel];
  return e && e.version && satisfies(e.version, range) ? e.version : null;
}

// `npm ci`: exactly what the lock file says, into a fresh node_modules.
async function ci(opts) {
  const started = Date.now();
  const root = process.cwd();
  const lock = readJson(path.join(root, LOCK));
  if (!lock || !lock.packages) {
    fail('code EUSAGE\n\nThe `npm ci` command can only install with an existing package-lock.json or\nnpm-shrinkwrap.json with lockfileVersion >= 1. Run an install with npm@5 or\nlater to generate a package-lock.json file, then try again.');
  }
  const pkg = readJson(path.join(root, 'package.json')) || {};
  for (const f of ['dependencies', 'devDependencies', 'optionalDependencies']) {
    for (const [n, r] of Object.entries(pkg[f] || {})) {
      if (!lockedVersion(lock, 'node_modules/' + n, r)) {
        fail(`code EUSAGE\n\n\`npm ci\` can only install packages when your package.json and package-lock.json or npm-shrinkwrap.json are in sync. Please update your lock file with \`npm install\` before continuing.\n\nMissing: ${n}@${r} from lock file`);
      }
    }
  }
  fs.rmSync(path.join(root, 'node_modules'), { recursive: true, force: true });
  let added = 0;
  for (const [rel, entry] of Object.entries(lock.packages)) {
    if (!rel || entry.link || !entry.resolved) continue;
    if (opts.production && entry.dev) continue;
    const name = rel.slice(rel.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const dest = path.join(root, rel);
    await unpack({ name, version: entry.version, dist: { tarball: entry.resolved, integrity: entry.integrity } }, dest);
    linkBins(root, dest, readJson(path.join(dest, 'package.json')) || { name });
    added++;
  }
  const secs = Math.max(1, Math.round((Date.now() - started) / 1000));
  if (!opts.silent) process.stdout.write(`\nadded ${added} package${added === 1 ? '' : 's'} in ${secs}s\n`);
}

async function install(specs, opts) {
  const started = Date.now();
  const root = process.cwd();
  const pkgFile = path.join(root, 'package.json');
  const pkg = readJson(pkgFile);
  let wanted = [];
  if (specs.length) wanted = specs.map(splitSpec);
  else if (pkg) {
    for (const field of opts.production ? ['dependencies'] : ['dependencies', 'devDependencies', 'optionalDependencies']) {
      for (const [n, r] of Object.entries(pkg[field] || {})) wanted.push([n, r]);
    }
  }
  const top = path.join(root, 'node_modules');
  const lock = readJson(path.join(root, LOCK));
  const placed = {}; // top-level name -> version
  let added = 0;
  const queue = wanted.map(([n, r]) => ({ name: n, range: r, parent: root, top: true }));
  const chosenTop = {};
  while (queue.length) {
    const { name, range, parent, top: isTop } = queue.shift();
    const hoisted = path.join(top, name);
    const existing = readJson(path.join(hoisted, 'package.json'));
    if (existing && satisfies(existing.version, range)) {
      if (isTop) chosenTop[name] = existing.version;
      continue;
    }
    // A version the lock file holds for that place is kept while it satisfies the range.
    const locked = lockedVersion(lock, path.relative(root, hoisted), range);
    const doc = locked && await packument(name);
    const meta = doc && doc.versions && doc.versions[locked] ? doc.versions[locked] : await pick(name, range);
    let dest = hoisted;
    if (existing || placed[name]) {
      if (placed[name] === meta.version) continue;
      if (!isTop) dest = path.join(parent, 'node_modules', name);
    }
    const there = readJson(path.join(dest, 'package.json'));
    if (there && there.version === meta.version) continue;
    await unpack(meta, dest);
    added++;
    if (dest === hoisted) placed[name] = meta.version;
    if (isTop) chosenTop[name] = meta.version;
    const own = readJson(path.join(dest, 'package.json')) || meta;
    linkBins(root, dest, own);
    for (const field of ['dependencies', 'optionalDependencies']) {
      for (const [n, r] of Object.entries(own[field] || {})) queue.push({ name: n, range: r, parent: dest, top: false });
    }
  }
  added += await repair(root);
  if (specs.length && !opts.noSave) {
    const out = pkg || { name: path.basename(root), version: '1.0.0' };
    const field = opts.dev ? 'devDependencies' : 'dependencies';
    out[field] = out[field] || {};
    for (const [n, r] of wanted) {
      const v = chosenTop[n];
      // As npm saves them: a range with operators as written, else `^` and the version.
      out[field][n] = opts.exact ? v : /[~<>|*^\s]|[0-9]\.[xX]/.test(r) ? r : '^' + v;
    }
    const sorted = {};
    for (const k of Object.keys(out[field]).sort()) sorted[k] = out[field][k];
    out[field] = sorted;
    writeJson(pkgFile, out);
  }
  writeLock(root, opts);
  const secs = Math.max(1, Math.round((Date.now() - started) / 1000));
  if (!opts.silent) {
    process.stdout.write(added ? `\nadded ${added} package${added === 1 ? '' : 's'} in ${secs}s\n` : `\nup to date in ${secs}s\n`);
  }
}

// Every installed package's dependencies must resolve (as require does, up the tree) to a
// version that satisfies them: one that does not gets the right version nested under it.
async function repair(root) {
  let added = 0;
  for (let round = 0; round < 8; round++) {
    let changed = false;
    for (const dir of installedDirs(root)) {
      const own = readJson(path.join(dir, 'package.json'));
      for (const [n, r] of Object.entries(own.dependencies || {})) {
        const found = resolveFrom(root, dir, n);
        const have = found && readJson(path.join(found, 'package.json'));
        if (have && satisfies(have.version, r)) continue;
        const meta = await pick(n, r);
        const dest = path.join(dir, 'node_modules', n);
        await unpack(meta, dest);
        linkBins(root, dest, readJson(path.join(dest, 'package.json')) || meta);
        added++;
        changed = true;
      }
    }
    if (!changed) break;
  }
  return added;
}

function uninstall(names, opts) {
  const root = process.cwd();
  const pkgFile = path.join(root, 'package.json');
  const pkg = readJson(pkgFile);
  let removed = 0;
  for (const n of names) {
    const dir = path.join(root, 'node_modules', n);
    if (fs.existsSync(dir)) { fs.rmSync(dir, { recursive: true, force: true }); removed++; }
    if (pkg && !opts.noSave) for (const f of ['dependencies', 'devDependencies', 'optionalDependencies']) if (pkg[f]) delete pkg[f][n];
  }
  if (pkg && !opts.noSave) writeJson(pkgFile, pkg);
  writeLock(root, opts);
  process.stdout.write(removed ? `\nremoved ${removed} package${removed === 1 ? '' : 's'} in 1s\n` : '\nup to date in 1s\n');
}

function ls() {
  const root = process.cwd();
  const pkg = readJson(path.join(root, 'package.json')) || {};
  const deps = Object.assign({}, pkg.dependencies, pkg.devDependencies, pkg.optionalDependencies);
  const names = Object.keys(deps).sort();
  process.stdout.write(`${pkg.name ? pkg.name + '@' + (pkg.version || '') + ' ' : ''}${root}\n`);
  if (!names.length) { process.stdout.write('└── (empty)\n\n'); return 0; }
  let missing = 0;
  names.forEach((n, i) => {
    const got = readJson(path.join(root, 'node_modules', n, 'package.json'));
    const branch = i === names.length - 1 ? '└── ' : '├── ';
    if (got) process.stdout.write(`${branch}${n}@${got.version}\n`);
    else { missing++; process.stdout.write(`${branch}UNMET DEPENDENCY ${n}@${deps[n]}\n`); }
  });
  process.stdout.write('\n');
  return missing ? 1 : 0;
}

function runScript(name, args) {
  const root = process.cwd();
  const pkg = readJson(path.join(root, 'package.json'));
  if (!pkg) fail(`code ENOENT\nsyscall open\npath ${root}/package.json\nerrno -2\nenoent Could not read package.json: Error: ENOENT: no such file or directory, open '${root}/package.json'`, 254);
  const scripts = pkg.scripts || {};
  if (!name) {
    const keys = Object.keys(scripts);
    if (keys.length) {
      process.stdout.write(`Scripts available in ${pkg.name}@${pkg.version} via \`npm run-script\`:\n`);
      for (const k of keys) process.stdout.write(`  ${k}\n    ${scripts[k]}\n`);
    }
    return 0;
  }
  if (scripts[name] === undefined) {
    if (name === 'test') fail('Missing script: "test"\n\nTo see a list of scripts, run:\n  npm run');
    if (name === 'start' && fs.existsSync(path.join(root, 'server.js'))) scripts.start = 'node server.js';
    else fail(`Missing script: "${name}"\n\nTo see a list of scripts, run:\n  npm run`);
  }
  const cmd = scripts[name] + (args.length ? ' ' + args.map(quote).join(' ') : '');
  process.stdout.write(`\n> ${pkg.name || ''}${pkg.version ? '@' + pkg.version : ''} ${name}\n> ${scripts[name]}${args.length ? ' ' + args.join(' ') : ''}\n\n`);
  const bin = path.join(root, 'node_modules', '.bin');
  const env = `PATH=${quote(bin)}:"$PATH" npm_lifecycle_event=${quote(name)} npm_package_name=${quote(pkg.name || '')} npm_package_version=${quote(pkg.version || '')}; export PATH npm_lifecycle_event npm_package_name npm_package_version; `;
  const r = cp.spawnSync('sh', ['-c', env + cmd], { stdio: 'inherit' });
  const code = r.status === null ? 1 : r.status;
  if (code) {
    process.stderr.write(`npm error Lifecycle script \`${name}\` failed with error:\nnpm error code ${code}\nnpm error path ${root}\nnpm error command failed\nnpm error command sh -c ${scripts[name]}\n`);
  }
  return code;
}

function init() {
  const root = process.cwd();
  const file = path.join(root, 'package.json');
  const pkg = readJson(file) || {
    name: path.basename(root).toLowerCase().replace(/[^a-z0-9._-]/g, '-'),
    version: '1.0.0',
    main: 'index.js',
    scripts: { test: 'echo "Error: no test specified" && exit 1' },
    keywords: [],
    author: '',
    license: 'ISC',
    description: '',
  };
  writeJson(file, pkg);
  process.stdout.write(`Wrote to ${file}:\n\n${JSON.stringify(pkg, null, 2)}\n\n\n`);
  return 0;
}

async function main() {
  if (flags.v || flags.version) { process.stdout.write(VERSION + '\n'); return 0; }
  const cmd = positional.shift();
  const opts = {
    dev: flags.D || flags['save-dev'],
    noSave: flags['no-save'],
    exact: flags.E || flags['save-exact'],
    silent: flags.s || flags.silent || flags.loglevel === 'silent',
    production: flags.production || flags.omit === 'dev',
    noLock: flags['package-lock'] === 'false' || flags['no-package-lock'],
  };
  switch (cmd) {
    case undefined:
    case 'help':
      process.stdout.write(`npm <command>\n\nUsage:\n\nnpm install        install all the dependencies in your project\nnpm install <foo>  add the <foo> dependency to your project\nnpm test           run this project's tests\nnpm run <foo>      run the script named <foo>\nnpm <command> -h   quick help on <command>\n\nnpm@${VERSION} /usr/lib/node_modules/npm\n`);
      return cmd ? 0 : 1;
    case 'install': case 'i': case 'add': case 'isntall': case 'in':
      if (flags.g || flags.global) fail('global installs are not available in this sandbox: install into the project (npm install <pkg>)');
      await install(positional, opts);
      return 0;
    case 'ci': case 'clean-install': case 'ic': case 'install-clean': case 'isntall-clean':
      await ci(opts);
      return 0;
    case 'uninstall': case 'un': case 'rm': case 'remove': case 'r':
      uninstall(positional, opts);
      return 0;
    case 'ls': case 'list': case 'll': case 'la':
      return ls();
    case 'run': case 'run-script': case 'rum': case 'urn':
      return runScript(positional[0], positional.slice(1).concat(passthrough));
    case 'test': case 't': case 'tst':
      return runScript('test', positional.concat(passthrough));
    case 'start':
      return runScript('start', positional.concat(passthrough));
    case 'init':
      return init();
    case 'view': case 'info': case 'show': case 'v': {
      const [name, range] = splitSpec(positional[0] || '');
      const meta = await pick(name, range);
      const field = positional[1];
      if (field) {
        const v = field.split('.').reduce((o, k) => (o == null ? o : o[k]), meta);
        process.stdout.write((typeof v === 'string' ? v : JSON.stringify(v, null, 2)) + '\n');
      } else process.stdout.write(`${meta.name}@${meta.version}\n`);
      return 0;
    }
    case 'config':
      if (positional[0] === 'get' && positional[1] === 'registry') { process.stdout.write(registry + '\n'); return 0; }
      if (positional[0] === 'get') { process.stdout.write((rc[positional[1]] || 'undefined') + '\n'); return 0; }
      fail('npm config: only `get` is available in this sandbox');
      return 1;
    case 'prefix':
      process.stdout.write(process.cwd() + '\n');
      return 0;
    case 'root':
      process.stdout.write(path.join(process.cwd(), 'node_modules') + '\n');
      return 0;
    default:
      fail(`Unknown command: "${cmd}"\n\nTo see a list of supported npm commands, run:\n  npm help`);
  }
  return 1;
}

main().then((code) => { process.exitCode = code; }, (e) => fail(e && e.stack || e));
