//! Line differences shared by `diff` (coreutils) and `git` (tools): Myers' O((N+M)D)
//! algorithm after trimming the common prefix and suffix, and the unified format's hunks.

/// A run of differing lines: a[i1..i2] became b[j1..j2].
#[derive(Debug, Clone, Copy)]
pub struct Change {
    pub i1: usize,
    pub i2: usize,
    pub j1: usize,
    pub j2: usize,
}

pub fn changes(a: &[&[u8]], b: &[&[u8]]) -> Vec<Change> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ca, cb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    // Edit script as (deleted, inserted) flags per step, from Myers with a trace.
    let (n, m) = (ca.len() as isize, cb.len() as isize);
    let max = (n + m) as usize;
    let off = max as isize + 1;
    let mut v = vec![0isize; 2 * max + 3];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let mut found = None;
    'outer: for d in 0..=max as isize {
        trace.push(v[(off - d) as usize..=(off + d) as usize].to_vec());
        let mut k = -d;
        while k <= d {
            let idx = (off + k) as usize;
            let mut x = if k == -d || (k != d && v[idx - 1] < v[idx + 1]) {
                v[idx + 1]
            } else {
                v[idx - 1] + 1
            };
            let mut y = x - k;
            while x < n && y < m && ca[x as usize] == cb[y as usize] {
                x += 1;
                y += 1;
            }
            v[idx] = x;
            if x >= n && y >= m {
                found = Some(d);
                break 'outer;
            }
            k += 2;
        }
    }
    // Walk back: collect per-line operations in reverse.
    let mut ops: Vec<u8> = Vec::new(); // b'=', b'-', b'+'
    let (mut x, mut y) = (n, m);
    for d in (0..=found.unwrap_or(0)).rev() {
        let w = &trace[d as usize];
        let at = |k: isize| w[(k + d) as usize];
        let k = x - y;
        let prev_k = if k == -d || (k != d && at(k - 1) < at(k + 1)) {
            k + 1
        } else {
            k - 1
        };
        let prev_x = if d == 0 { 0 } else { at(prev_k) };
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            ops.push(b'=');
            x -= 1;
            y -= 1;
        }
        if d > 0 {
            if x == prev_x {
                ops.push(b'+');
            } else {
                ops.push(b'-');
            }
        }
        x = prev_x;
        y = prev_y;
    }
    ops.reverse();
    let mut out = Vec::new();
    let (mut i, mut j) = (prefix, prefix);
    let mut cur: Option<Change> = None;
    for op in ops {
        match op {
            b'=' => {
                if let Some(c) = cur.take() {
                    out.push(c);
                }
                i += 1;
                j += 1;
            }
            op => {
                let c = cur.get_or_insert(Change {
                    i1: i,
                    i2: i,
                    j1: j,
                    j2: j,
                });
                if op == b'-' {
                    c.i2 += 1;
                    i += 1;
                } else {
                    c.j2 += 1;
                    j += 1;
                }
            }
        }
    }
    if let Some(c) = cur {
        out.push(c);
    }
    out
}

/// The lines of `data`, without their newlines (a last line without one is still a line).
pub fn lines(data: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    if data.ends_with(b"\n") || data.is_empty() {
        v.pop();
    }
    v
}

/// One side of a unified diff: its lines and whether the last one lacks a newline.
pub struct Side<'a> {
    pub lines: &'a [&'a [u8]],
    pub no_newline_at_end: bool,
}

/// How hunks are written: lines of context, and (git) the nearest line before each hunk
/// that starts with a letter, `_` or `$` after its `@@` range, as git's default funcname.
pub struct Unified {
    pub context: usize,
    pub funcname: bool,
    /// Context lines from the new side (git does so when it ignores whitespace: the lines
    /// of a context match without being the same).
    pub context_from_new: bool,
}

/// Appends one line of a diff with its prefix, and git's and GNU's note when the file's last
/// line lacks a newline.
pub fn line(out: &mut Vec<u8>, prefix: &[u8], l: &[u8], last_without_newline: bool) {
    out.extend_from_slice(prefix);
    out.extend_from_slice(l);
    out.push(b'\n');
    if last_without_newline {
        out.extend_from_slice(b"\\ No newline at end of file\n");
    }
}

/// Appends the hunks (`@@ ... @@` and their lines) of `cs`, changes from `a` to `b`.
pub fn unified_hunks(out: &mut Vec<u8>, a: &Side, b: &Side, cs: &[Change], how: &Unified) {
    let (la, lb, context) = (a.lines, b.lines, how.context);
    let (a_nl, b_nl) = (a.no_newline_at_end, b.no_newline_at_end);
    let mut func: &[u8] = b"";
    let mut searched_to = 0usize;
    let mut k = 0;
    while k < cs.len() {
        let mut end = k;
        while end + 1 < cs.len() && cs[end + 1].i1 - cs[end].i2 <= 2 * context {
            end += 1;
        }
        let (first, last) = (cs[k], cs[end]);
        let a_start = first.i1.saturating_sub(context);
        let a_end = (last.i2 + context).min(la.len());
        let b_start = first.j1.saturating_sub(context);
        let b_end = (last.j2 + context).min(lb.len());
        let hdr = |s: usize, e: usize| match e - s {
            0 => format!("{s},0"),
            1 => format!("{}", s + 1),
            n => format!("{},{n}", s + 1),
        };
        out.extend_from_slice(
            format!("@@ -{} +{} @@", hdr(a_start, a_end), hdr(b_start, b_end)).as_bytes(),
        );
        if how.funcname {
            // Lines before the hunk, back to where the last search stopped; an earlier
            // hunk's name stays when none is found (git's xdiff does the same).
            if let Some(f) = la[searched_to.min(a_start)..a_start]
                .iter()
                .rev()
                .find(|l| {
                    l.first()
                        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_' || *c == b'$')
                })
            {
                let f = &f[..f.len().min(80)];
                let trimmed = f.len()
                    - f.iter()
                        .rev()
                        .take_while(|c| c.is_ascii_whitespace())
                        .count();
                func = &f[..trimmed];
            }
            searched_to = a_start;
            if !func.is_empty() {
                out.push(b' ');
                out.extend_from_slice(func);
            }
        }
        out.push(b'\n');
        let (mut ia, mut ib) = (a_start, b_start);
        let context_line = |out: &mut Vec<u8>, ia: usize, ib: usize| {
            let last = a_nl && b_nl && ia + 1 == la.len();
            let text = if how.context_from_new { lb[ib] } else { la[ia] };
            line(out, b" ", text, last);
        };
        for c in &cs[k..=end] {
            while ia < c.i1 {
                context_line(out, ia, ib);
                ia += 1;
                ib += 1;
            }
            for x in c.i1..c.i2 {
                line(out, b"-", la[x], a_nl && x + 1 == la.len());
            }
            for y in c.j1..c.j2 {
                line(out, b"+", lb[y], b_nl && y + 1 == lb.len());
            }
            (ia, ib) = (c.i2, c.j2);
        }
        while ia < a_end {
            context_line(out, ia, ib);
            ia += 1;
            ib += 1;
        }
        k = end + 1;
    }
}
