//! What changed between two sets of files (a tree, the index, the working tree) and git's
//! ways of showing it: patches, `--stat`, `--numstat`, `--name-only`, `--name-status`, and
//! the summary a commit prints.

use std::collections::{BTreeMap, BTreeSet};

use guest_support::textdiff::{Side, Unified, changes, lines, unified_hunks};

use super::store::{Id, IndexEntry, NULL_ID, Stat, hash_object, read_work_file};
use super::{Git, quote_path};

pub type Files = BTreeMap<String, (u32, Id)>;

#[derive(Clone, Debug)]
pub struct Delta {
    /// The path on the new side (the old one for a deletion).
    pub path: String,
    /// The old path of a rename.
    pub from: Option<String>,
    pub old: Option<(u32, Id)>,
    pub new: Option<(u32, Id)>,
}

impl Delta {
    pub fn letter(&self) -> char {
        match (&self.old, &self.new, &self.from) {
            (_, _, Some(_)) => 'R',
            (None, _, _) => 'A',
            (_, None, _) => 'D',
            (Some(o), Some(n), _) if (o.0 & 0o170000) != (n.0 & 0o170000) => 'T',
            _ => 'M',
        }
    }
    pub fn old_path(&self) -> &str {
        self.from.as_deref().unwrap_or(&self.path)
    }
}

/// Changes from `a` to `b`, sorted by path; with `renames`, a deleted file and an added one
/// with the same content are one rename (git's exact rename detection).
pub fn compare(a: &Files, b: &Files, renames: bool) -> Vec<Delta> {
    let mut out = Vec::new();
    for (p, o) in a {
        match b.get(p) {
            Some(n) if n == o => {}
            Some(n) => out.push(Delta {
                path: p.clone(),
                from: None,
                old: Some(*o),
                new: Some(*n),
            }),
            None => out.push(Delta {
                path: p.clone(),
                from: None,
                old: Some(*o),
                new: None,
            }),
        }
    }
    for (p, n) in b {
        if !a.contains_key(p) {
            out.push(Delta {
                path: p.clone(),
                from: None,
                old: None,
                new: Some(*n),
            });
        }
    }
    if renames {
        let mut used = BTreeSet::new();
        let deleted: Vec<(String, (u32, Id))> = out
            .iter()
            .filter(|d| d.new.is_none())
            .map(|d| (d.path.clone(), d.old.unwrap()))
            .collect();
        for d in out.iter_mut() {
            if d.old.is_none()
                && let Some(n) = d.new
                && let Some((from, o)) = deleted
                    .iter()
                    .find(|(p, o)| o.1 == n.1 && !used.contains(p))
            {
                used.insert(from.clone());
                d.from = Some(from.clone());
                d.old = Some(*o);
            }
        }
        out.retain(|d| !(d.new.is_none() && used.contains(&d.path)));
    }
    out.sort_by(|x, y| x.path.cmp(&y.path));
    out
}

/// The index against the working tree: a changed or missing tracked file. Entries whose
/// size and modification time match the index are taken as unchanged unless they are as
/// new as the index itself (git's "racy" case); `refresh` collects new stat data for
/// entries whose content turned out the same.
pub fn worktree_changes(
    g: &Git,
    index: &BTreeMap<String, IndexEntry>,
    refresh: &mut Vec<(String, Stat)>,
) -> Vec<Delta> {
    let index_time = std::fs::metadata(g.repo.index_path())
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or((0, 0), |d| (d.as_secs() as u32, d.subsec_nanos()));
    let filemode = g.filemode();
    let mut out = Vec::new();
    for (path, e) in index {
        if e.mode == 0o160000 {
            continue;
        }
        let full = g.work_path(path);
        // Gone, or a directory now: the tracked file is deleted.
        let meta = match std::fs::symlink_metadata(&full) {
            Ok(meta) if !meta.is_dir() => meta,
            _ => {
                out.push(Delta {
                    path: path.clone(),
                    from: None,
                    old: Some((e.mode, e.id)),
                    new: None,
                });
                continue;
            }
        };
        let st = Stat::of(&meta);
        let mode = super::store::file_mode(&full, &meta, filemode);
        let mode = if !filemode && mode != 0o120000 {
            e.mode
        } else {
            mode
        };
        if st.size == e.stat.size
            && st.mtime == e.stat.mtime
            && st.mtime < index_time
            && mode == e.mode
        {
            continue;
        }
        let Ok((_, data)) = read_work_file(&full, filemode) else {
            continue;
        };
        let id = hash_object("blob", &data);
        if id == e.id && mode == e.mode {
            refresh.push((path.clone(), st));
            continue;
        }
        out.push(Delta {
            path: path.clone(),
            from: None,
            old: Some((e.mode, e.id)),
            new: Some((mode, id)),
        });
    }
    out
}

/// Where the content of each side of a delta comes from.
#[derive(Clone, Copy, PartialEq)]
pub enum Source {
    Objects,
    Worktree,
}

/// Which whitespace differences a diff does not count: `-w`/`--ignore-all-space`,
/// `-b`/`--ignore-space-change`, `--ignore-space-at-eol`, `--ignore-cr-at-eol`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ws {
    #[default]
    Exact,
    All,
    Change,
    AtEol,
    CrAtEol,
}

impl Ws {
    /// What a line (with its newline) is compared by.
    fn key(self, line: &[u8]) -> Vec<u8> {
        let space = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c);
        match self {
            Ws::Exact => line.to_vec(),
            Ws::All => line.iter().filter(|c| !space(c)).copied().collect(),
            Ws::Change => {
                let mut out = Vec::new();
                let mut gap = false;
                for c in line {
                    if space(c) {
                        gap = true;
                    } else {
                        if gap && !out.is_empty() {
                            out.push(b' ');
                        }
                        gap = false;
                        out.push(*c);
                    }
                }
                out
            }
            Ws::AtEol => {
                let end = line.len() - line.iter().rev().take_while(|c| space(c)).count();
                line[..end].to_vec()
            }
            Ws::CrAtEol => match line.strip_suffix(b"\r\n") {
                Some(l) => [l, b"\n"].concat(),
                None => line.strip_suffix(b"\r").unwrap_or(line).to_vec(),
            },
        }
    }
}

pub struct Show {
    /// Whitespace differences not counted.
    pub ws: Ws,
    pub context: usize,
    pub src_prefix: String,
    pub dst_prefix: String,
    /// Two unrelated paths (`diff --no-index`): no rename lines between their names.
    pub plain_names: bool,
}

impl Default for Show {
    fn default() -> Self {
        Show {
            ws: Ws::Exact,
            context: 3,
            src_prefix: "a/".into(),
            dst_prefix: "b/".into(),
            plain_names: false,
        }
    }
}

fn content(g: &Git, side: Option<(u32, Id)>, path: &str, src: Source) -> Vec<u8> {
    match side {
        None => Vec::new(),
        Some((mode, id)) => {
            if src == Source::Worktree {
                read_work_file(&g.work_path(path), g.filemode())
                    .map(|x| x.1)
                    .unwrap_or_default()
            } else if mode == 0o160000 {
                format!("Subproject commit {}\n", super::store::hex(&id)).into_bytes()
            } else {
                g.repo.read(&id).map(|x| x.1).unwrap_or_default()
            }
        }
    }
}

/// What a delta between two commits changes: the old and the new content.
pub fn sides(g: &Git, d: &Delta) -> (Vec<u8>, Vec<u8>) {
    (
        content(g, d.old, d.old_path(), Source::Objects),
        content(g, d.new, &d.path, Source::Objects),
    )
}

/// The lines `b` removes from `a` and adds (without their newlines).
pub fn changed_lines<'a>(a: &'a [u8], b: &'a [u8]) -> Vec<&'a [u8]> {
    let split = |d: &'a [u8]| -> Vec<&'a [u8]> { d.split_inclusive(|&c| c == b'\n').collect() };
    let (la, lb) = (split(a), split(b));
    let mut out: Vec<&'a [u8]> = Vec::new();
    for c in line_changes(a, b, Ws::Exact) {
        out.extend(la[c.i1..c.i2].iter().chain(&lb[c.j1..c.j2]));
    }
    out.into_iter()
        .map(|l: &'a [u8]| l.strip_suffix(b"\n").unwrap_or(l))
        .collect()
}

fn is_binary(d: &[u8]) -> bool {
    d[..d.len().min(8000)].contains(&0)
}

/// Added and deleted lines of a delta (None for a binary file).
pub fn counts(g: &Git, d: &Delta, src: Source, ws: Ws) -> Option<(usize, usize)> {
    let a = content(g, d.old, d.old_path(), Source::Objects);
    let b = content(g, d.new, &d.path, src);
    if is_binary(&a) || is_binary(&b) {
        return None;
    }
    let cs = line_changes(&a, &b, ws);
    Some(
        cs.iter()
            .fold((0, 0), |(x, y), c| (x + c.j2 - c.j1, y + c.i2 - c.i1)),
    )
}

/// Line changes from `a` to `b`, comparing lines with their newlines so that a last line
/// that gains or loses one is a change.
fn line_changes(a: &[u8], b: &[u8], ws: Ws) -> Vec<guest_support::textdiff::Change> {
    let full = |d: &[u8]| -> Vec<Vec<u8>> {
        d.split_inclusive(|&c| c == b'\n')
            .map(|l| ws.key(l))
            .collect()
    };
    let (fa, fb) = (full(a), full(b));
    let ra: Vec<&[u8]> = fa.iter().map(Vec::as_slice).collect();
    let rb: Vec<&[u8]> = fb.iter().map(Vec::as_slice).collect();
    changes(&ra, &rb)
}

fn mode_s(m: u32) -> String {
    format!("{m:06o}")
}

/// One file's patch, as `git diff` writes it.
pub fn patch(g: &Git, d: &Delta, src: Source, how: &Show, out: &mut Vec<u8>) {
    let same = d.old.map(|o| o.1) == d.new.map(|n| n.1);
    let (a, b) = if same {
        (Vec::new(), Vec::new())
    } else {
        (
            content(g, d.old, d.old_path(), Source::Objects),
            content(g, d.new, &d.path, src),
        )
    };
    let abbrev = |id: &Id| g.repo.abbrev(id);
    patch_with(d, &a, &b, &abbrev, how, out);
}

/// A patch from contents already at hand; `abbrev` shortens object ids.
pub fn patch_with(
    d: &Delta,
    a: &[u8],
    b: &[u8],
    short: &dyn Fn(&Id) -> String,
    how: &Show,
    out: &mut Vec<u8>,
) {
    let (a_path, b_path) = (d.old_path(), d.path.as_str());
    let a_name = quote_path(&format!("{}{a_path}", how.src_prefix), false);
    let b_name = quote_path(&format!("{}{b_path}", how.dst_prefix), false);
    let mut head = format!("diff --git {a_name} {b_name}\n");
    let abbrev = |id: &Id| {
        if *id == NULL_ID {
            "0000000".to_string()
        } else {
            short(id)
        }
    };
    let (old, new) = (d.old.unwrap_or((0, NULL_ID)), d.new.unwrap_or((0, NULL_ID)));
    match (d.old, d.new) {
        (None, Some(n)) => head.push_str(&format!(
            "new file mode {}\nindex {}..{}\n",
            mode_s(n.0),
            abbrev(&NULL_ID),
            abbrev(&n.1)
        )),
        (Some(o), None) => head.push_str(&format!(
            "deleted file mode {}\nindex {}..{}\n",
            mode_s(o.0),
            abbrev(&o.1),
            abbrev(&NULL_ID)
        )),
        (Some(o), Some(n)) => {
            if d.from.is_some() && !how.plain_names {
                if o.1 == n.1 {
                    head.push_str("similarity index 100%\n");
                }
                head.push_str(&format!(
                    "rename from {}\nrename to {}\n",
                    quote_path(a_path, false),
                    quote_path(b_path, false)
                ));
            }
            if o.0 != n.0 {
                head.push_str(&format!(
                    "old mode {}\nnew mode {}\n",
                    mode_s(o.0),
                    mode_s(n.0)
                ));
            }
            if o.1 != n.1 {
                if o.0 == n.0 {
                    head.push_str(&format!(
                        "index {}..{} {}\n",
                        abbrev(&o.1),
                        abbrev(&n.1),
                        mode_s(n.0)
                    ));
                } else {
                    head.push_str(&format!("index {}..{}\n", abbrev(&o.1), abbrev(&n.1)));
                }
            }
        }
        (None, None) => return,
    }
    out.extend_from_slice(head.as_bytes());
    if old.1 == new.1 {
        return;
    }
    if is_binary(a) || is_binary(b) {
        let an = if d.old.is_none() {
            "/dev/null".into()
        } else {
            a_name.clone()
        };
        let bn = if d.new.is_none() {
            "/dev/null".into()
        } else {
            b_name.clone()
        };
        out.extend_from_slice(format!("Binary files {an} and {bn} differ\n").as_bytes());
        return;
    }
    let (la, lb) = (lines(a), lines(b));
    let cs = line_changes(a, b, how.ws);
    if cs.is_empty() {
        return;
    }
    let an = if d.old.is_none() {
        "/dev/null".into()
    } else {
        a_name
    };
    let bn = if d.new.is_none() {
        "/dev/null".into()
    } else {
        b_name
    };
    out.extend_from_slice(format!("--- {an}\n+++ {bn}\n").as_bytes());
    let nl = |d: &[u8]| !d.is_empty() && !d.ends_with(b"\n");
    unified_hunks(
        out,
        &Side {
            lines: &la,
            no_newline_at_end: nl(a),
        },
        &Side {
            lines: &lb,
            no_newline_at_end: nl(b),
        },
        &cs,
        &Unified {
            context: how.context,
            funcname: true,
            context_from_new: how.ws != Ws::Exact,
        },
    );
}

fn stat_name(d: &Delta) -> String {
    match &d.from {
        Some(f) => rename_arrow(f, &d.path),
        None => quote_path(&d.path, false),
    }
}

/// `a/{x => y}/b`, git's short form of a rename in `--stat`.
fn rename_arrow(a: &str, b: &str) -> String {
    let pre = a
        .char_indices()
        .zip(b.chars())
        .take_while(|((_, x), y)| x == y)
        .filter(|((_, x), _)| *x == '/')
        .map(|((i, _), _)| i + 1)
        .last()
        .unwrap_or(0);
    let suf = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .enumerate()
        .filter(|(_, (x, _))| *x == b'/')
        .map(|(i, _)| i + 1)
        .last()
        .unwrap_or(0);
    let suf = suf.min(a.len() - pre).min(b.len() - pre);
    if pre == 0 && suf == 0 {
        return format!("{a} => {b}");
    }
    format!(
        "{}{{{} => {}}}{}",
        &a[..pre],
        &a[pre..a.len() - suf],
        &b[pre..b.len() - suf],
        &a[a.len() - suf..]
    )
}

/// `--stat`: git's histogram, sized to 80 columns, and its summary line.
pub fn stat(g: &Git, ds: &[Delta], src: Source, ws: Ws, out: &mut Vec<u8>) {
    let rows: Vec<(String, Option<(usize, usize)>)> = ds
        .iter()
        .map(|d| (stat_name(d), counts(g, d, src, ws)))
        .collect();
    let sizes = |d: &Delta| {
        let a = content(g, d.old, d.old_path(), Source::Objects).len();
        let b = content(g, d.new, &d.path, src).len();
        (a, b)
    };
    if rows.is_empty() {
        return;
    }
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(80);
    let max_change = rows
        .iter()
        .map(|(_, c)| c.map_or(0, |(a, d)| a + d))
        .max()
        .unwrap_or(0);
    let max_len = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0);
    let has_bin = rows.iter().any(|(_, c)| c.is_none());
    let mut number_width = max_change.to_string().len();
    if has_bin {
        number_width = number_width.max(3);
    }
    let width = width.max(16 + 6 + number_width);
    let mut graph_width = max_change;
    let mut name_width = max_len;
    if name_width + number_width + 6 + graph_width > width {
        let cap = (width * 3 / 8).saturating_sub(number_width + 6);
        if graph_width > cap {
            graph_width = cap.max(6);
        }
        if name_width > width.saturating_sub(number_width + 6 + graph_width) {
            name_width = width.saturating_sub(number_width + 6 + graph_width);
        } else {
            graph_width = width - number_width - 6 - name_width;
        }
    }
    let scale = |it: usize| -> usize {
        if it == 0 || max_change == 0 {
            0
        } else {
            1 + it * (graph_width.max(1) - 1) / max_change
        }
    };
    let (mut ins, mut del) = (0, 0);
    for (k, (name, c)) in rows.iter().enumerate() {
        let shown = if name.chars().count() > name_width {
            let chars: Vec<char> = name.chars().collect();
            let keep = name_width.saturating_sub(3);
            let mut tail: String = chars[chars.len() - keep..].iter().collect();
            if let Some(i) = tail.find('/') {
                tail = tail[i..].to_string();
            }
            format!("...{tail}")
        } else {
            name.clone()
        };
        let pad = name_width.saturating_sub(shown.chars().count());
        match c {
            None => {
                out.extend_from_slice(
                    format!(
                        " {shown}{} | {:>number_width$} {} -> {} bytes\n",
                        " ".repeat(pad),
                        "Bin",
                        sizes(&ds[k]).0,
                        sizes(&ds[k]).1
                    )
                    .as_bytes(),
                );
            }
            Some((a, d)) => {
                ins += a;
                del += d;
                let (mut pa, mut pd) = (*a, *d);
                if graph_width <= max_change {
                    let mut total = scale(a + d);
                    if total < 2 && *a > 0 && *d > 0 {
                        total = 2;
                    }
                    if a < d {
                        pa = scale(*a);
                        pd = total - pa;
                    } else {
                        pd = scale(*d);
                        pa = total - pd;
                    }
                }
                let n = a + d;
                out.extend_from_slice(
                    format!(
                        " {shown}{} | {n:>number_width$}{}{}{}\n",
                        " ".repeat(pad),
                        if n > 0 { " " } else { "" },
                        "+".repeat(pa),
                        "-".repeat(pd)
                    )
                    .as_bytes(),
                );
            }
        }
    }
    out.extend_from_slice(summary_line(rows.len(), ins, del).as_bytes());
}

pub fn summary_line(files: usize, ins: usize, del: usize) -> String {
    let mut s = format!(" {files} file{} changed", if files == 1 { "" } else { "s" });
    if ins > 0 || del == 0 {
        s.push_str(&format!(
            ", {ins} insertion{}(+)",
            if ins == 1 { "" } else { "s" }
        ));
    }
    if del > 0 || ins == 0 {
        s.push_str(&format!(
            ", {del} deletion{}(-)",
            if del == 1 { "" } else { "s" }
        ));
    }
    s.push('\n');
    s
}

pub fn shortstat(g: &Git, ds: &[Delta], src: Source, ws: Ws, out: &mut Vec<u8>) {
    if ds.is_empty() {
        return;
    }
    let (mut ins, mut del) = (0, 0);
    for d in ds {
        if let Some((a, x)) = counts(g, d, src, ws) {
            ins += a;
            del += x;
        }
    }
    out.extend_from_slice(summary_line(ds.len(), ins, del).as_bytes());
}

pub fn numstat(g: &Git, ds: &[Delta], src: Source, ws: Ws, out: &mut Vec<u8>) {
    for d in ds {
        let (a, x) = match counts(g, d, src, ws) {
            Some((a, x)) => (a.to_string(), x.to_string()),
            None => ("-".into(), "-".into()),
        };
        out.extend_from_slice(format!("{a}\t{x}\t{}\n", stat_name(d)).as_bytes());
    }
}

/// The lines after a commit's stat: `create mode`, `delete mode`, `rename`, `mode change`.
pub fn summary(ds: &[Delta], out: &mut Vec<u8>) {
    for d in ds {
        match (&d.old, &d.new, &d.from) {
            (_, Some(_), Some(f)) => out.extend_from_slice(
                format!(" rename {} (100%)\n", rename_arrow(f, &d.path)).as_bytes(),
            ),
            (None, Some(n), _) => out.extend_from_slice(
                format!(
                    " create mode {} {}\n",
                    mode_s(n.0),
                    quote_path(&d.path, false)
                )
                .as_bytes(),
            ),
            (Some(o), None, _) => out.extend_from_slice(
                format!(
                    " delete mode {} {}\n",
                    mode_s(o.0),
                    quote_path(&d.path, false)
                )
                .as_bytes(),
            ),
            (Some(o), Some(n), _) if o.0 != n.0 => out.extend_from_slice(
                format!(
                    " mode change {} => {} {}\n",
                    mode_s(o.0),
                    mode_s(n.0),
                    quote_path(&d.path, false)
                )
                .as_bytes(),
            ),
            _ => {}
        }
    }
}

/// A listing of the changed files before any patch.
#[derive(Clone, Copy, PartialEq)]
pub enum Listing {
    Stat,
    Numstat,
    Shortstat,
    NameOnly,
    NameStatus,
}

/// What `git diff`, `show` and `log` print for a set of deltas: a listing, the summary
/// lines (`--summary`), then the patches.
#[derive(Clone, Copy, Default)]
pub struct Output {
    pub listing: Option<Listing>,
    pub summary: bool,
    pub patch: bool,
}

impl Output {
    pub fn is_empty(&self) -> bool {
        self.listing.is_none() && !self.summary && !self.patch
    }
}

pub fn write(g: &Git, ds: &[Delta], src: Source, o: &Output, how: &Show, out: &mut Vec<u8>) {
    write_with(g, ds, &|_| src, o, how, out)
}

/// [`write`] where each delta's new side may live elsewhere (`git diff COMMIT`: the working
/// tree for the files changed there, the object store for the rest).
pub fn write_with(
    g: &Git,
    ds: &[Delta],
    src: &dyn Fn(&Delta) -> Source,
    o: &Output,
    how: &Show,
    out: &mut Vec<u8>,
) {
    let any_work = if ds.iter().any(|d| src(d) == Source::Worktree) {
        Source::Worktree
    } else {
        Source::Objects
    };
    // Files whose every change is whitespace a diff does not count have no stat line and
    // no patch (their names are still listed, as git lists them).
    let counted: Vec<Delta>;
    let shown = if how.ws == Ws::Exact {
        ds
    } else {
        counted = ds
            .iter()
            .filter(|d| {
                d.old.map(|o| o.0) != d.new.map(|n| n.0)
                    || d.from.is_some()
                    || counts(g, d, src(d), how.ws).is_none_or(|(a, x)| a + x > 0)
            })
            .cloned()
            .collect();
        &counted
    };
    match o.listing {
        Some(Listing::Stat) => stat(g, shown, any_work, how.ws, out),
        Some(Listing::Numstat) => numstat(g, shown, any_work, how.ws, out),
        Some(Listing::Shortstat) => shortstat(g, shown, any_work, how.ws, out),
        Some(Listing::NameOnly) => {
            for d in ds {
                out.extend_from_slice(format!("{}\n", quote_path(&d.path, false)).as_bytes());
            }
        }
        Some(Listing::NameStatus) => {
            for d in ds {
                let line = match &d.from {
                    Some(f) => format!(
                        "R100\t{}\t{}\n",
                        quote_path(f, false),
                        quote_path(&d.path, false)
                    ),
                    None => format!("{}\t{}\n", d.letter(), quote_path(&d.path, false)),
                };
                out.extend_from_slice(line.as_bytes());
            }
        }
        None => {}
    }
    if o.summary {
        summary(ds, out);
    }
    if o.patch {
        let stats = matches!(
            o.listing,
            Some(Listing::Stat | Listing::Numstat | Listing::Shortstat)
        ) || o.summary;
        if stats && !shown.is_empty() {
            out.push(b'\n');
        }
        for d in shown {
            patch(g, d, src(d), how, out);
        }
    }
}
