// The JavaScript kernels of `wasbox bench` (js/*): run as `node -e THIS KERNEL SCALE`, the same
// source under native node and in a sandbox. Each prints a checksum, which must agree.
const [kernel, scaleText] = process.argv.slice(-2);
const scale = Number(scaleText) || 1;
const kernels = {
  // Plain recursion: calls and small integers.
  recursion() {
    const fib = (n) => (n < 2 ? n : fib(n - 1) + fib(n - 2));
    return fib(24 + Math.round(Math.log2(scale)));
  },
  // Property bags: object literals made, read and summed.
  objects() {
    let sum = 0;
    for (let i = 0; i < 300000 * scale; i++) {
      const o = { id: i, x: i & 255, y: (i >> 3) & 255, tag: 'p' };
      sum += o.x * 3 + o.y + o.tag.length;
    }
    return sum;
  },
  // Sort with a comparator.
  sort() {
    let seed = 42;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
    const a = Array.from({ length: 100000 * scale }, rand);
    a.sort((x, y) => x - y);
    return a[0] + a[a.length >> 1] + a[a.length - 1];
  },
  // Strings: concatenation, template literals, split and join.
  strings() {
    let total = 0;
    for (let r = 0; r < 5 * scale; r++) {
      let s = '';
      for (let i = 0; i < 20000; i++) s += `${i},`;
      const parts = s.split(',');
      total += parts.join(';').length + parts.length;
    }
    return total;
  },
  // JSON: records serialised and parsed back.
  json() {
    const records = Array.from({ length: 2000 }, (_, i) => ({
      id: i,
      name: `user${i}`,
      tags: ['a', 'b', String(i % 7)],
      score: i * 1.5,
      active: i % 2 === 0,
    }));
    let n = 0;
    for (let r = 0; r < 10 * scale; r++) {
      const back = JSON.parse(JSON.stringify(records));
      n += back.length + back[r % back.length].tags.length;
    }
    return n;
  },
  // Regular expressions: matching, capture groups and replace over log lines.
  regex() {
    const lines = [];
    for (let i = 0; i < 20000 * scale; i++) {
      lines.push(`2024-01-${String((i % 28) + 1).padStart(2, '0')} user${i}@example.org GET /api/v1/items/${i} ${200 + (i % 5)}`);
    }
    const re = /^(\d{4})-(\d{2})-(\d{2}) (\w+)@([\w.]+) (GET|POST) (\S+) (\d{3})$/;
    let hits = 0;
    for (const l of lines) {
      const m = re.exec(l);
      if (m && m[8] === '200') hits += Number(m[3]);
      if (/items\/\d*7$/.test(l)) hits++;
    }
    return hits + lines.join('\n').replace(/user\d+/g, 'u').length;
  },
  // Classes: instances allocated, methods and getters called.
  classes() {
    class Vec {
      constructor(x, y) {
        this.x = x;
        this.y = y;
      }
      add(o) {
        return new Vec(this.x + o.x, this.y + o.y);
      }
      get len2() {
        return this.x * this.x + this.y * this.y;
      }
    }
    let acc = new Vec(0, 0);
    for (let i = 0; i < 200000 * scale; i++) acc = acc.add(new Vec(i & 7, 1));
    return acc.len2 % 1000003;
  },
  // Closures: made in a loop, kept and called.
  closures() {
    const fns = [];
    for (let i = 0; i < 1000; i++) fns.push((x) => x + i);
    let v = 0;
    for (let r = 0; r < 300 * scale; r++) for (const f of fns) v = f(v) % 1000003;
    return v;
  },
};
const run = kernels[kernel];
if (!run) {
  console.error(`unknown kernel ${kernel}`);
  process.exit(2);
}
console.log(run());
