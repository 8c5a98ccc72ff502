//! `git blame`: which commit last changed each line of a file, in git's default format
//! (`-L`, `-s`, `-e`, `-l`, `-n`, `-f`, `--root`, a revision) or its porcelain ones
//! (`--porcelain`, `--line-porcelain`). Lines are handed from a commit to its parents where
//! a line diff finds them unchanged, newest commits first; a line no parent has is the
//! commit's own. Without a revision the working tree's file is blamed: its lines HEAD does
//! not have are "Not Committed Yet". Renames are not followed (a file added under a new
//! name is blamed on that commit).

use std::collections::{BTreeMap, BinaryHeap};

use super::cmds::unknown_option;
use super::store::{Commit, Id, Kind, NULL_ID, hex, parse_ident};
use super::{Git, R, fatal, format_date, usage};

/// A commit with lines still to be placed: (line of the final file, line in this commit's
/// version of the file), both from 0.
struct Suspect {
    commit: Commit,
    lines: Vec<(usize, usize)>,
    content: Vec<Vec<u8>>,
}

/// The commits with lines still to be placed, newest first: a commit is looked at once
/// every child has handed its lines down (or again, should a child come later).
#[derive(Default)]
struct Suspects {
    queue: BinaryHeap<(i64, Id)>,
    waiting: BTreeMap<Id, Suspect>,
}

impl Suspects {
    /// Hands `lines` (final line, line in `content`) to commit `id`.
    fn add(&mut self, id: Id, commit: Commit, lines: Vec<(usize, usize)>, content: Vec<Vec<u8>>) {
        match self.waiting.get_mut(&id) {
            Some(s) => s.lines.extend(lines),
            None => {
                self.queue.push((commit_time(&commit), id));
                self.waiting.insert(
                    id,
                    Suspect {
                        commit,
                        lines,
                        content,
                    },
                );
            }
        }
    }

    fn next(&mut self) -> Option<(Id, Suspect)> {
        while let Some((_, id)) = self.queue.pop() {
            if let Some(s) = self.waiting.remove(&id) {
                return Some((id, s));
            }
        }
        None
    }
}

/// Who a final line is blamed on: the commit (NULL_ID: not committed) and its line there.
#[derive(Clone, Copy)]
struct Blamed {
    id: Id,
    orig: usize,
}

struct Opts {
    range: Option<String>,
    no_author: bool,
    email: bool,
    long: bool,
    number: bool,
    name: bool,
    root: bool,
    /// `--porcelain` (each commit's details once) or `--line-porcelain` (on every line).
    porcelain: Option<bool>,
}

pub(super) fn blame(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut o = Opts {
        range: None,
        no_author: false,
        email: false,
        long: false,
        number: false,
        name: false,
        root: false,
        porcelain: None,
    };
    let mut words: Vec<String> = Vec::new();
    let mut paths_only = false;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if paths_only {
            words.push(a);
            continue;
        }
        match a.as_str() {
            "--" => paths_only = true,
            "-L" => {
                o.range = Some(
                    it.next()
                        .ok_or_else(|| usage("error: switch `L' requires a value".into()))?,
                )
            }
            s if s.starts_with("-L") => o.range = Some(s[2..].to_string()),
            "-s" => o.no_author = true,
            "-e" | "--show-email" => o.email = true,
            "-l" => o.long = true,
            "-n" | "--show-number" => o.number = true,
            "-f" | "--show-name" => o.name = true,
            "--root" => o.root = true,
            "-p" | "--porcelain" => o.porcelain = Some(false),
            "--line-porcelain" => o.porcelain = Some(true),
            "-w" | "-M" | "-C" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => words.push(a),
        }
    }
    let (rev, file) = match words.as_slice() {
        [file] => (None, file.clone()),
        [rev, file] => (Some(rev.clone()), file.clone()),
        _ => {
            return Err(usage(
                "usage: git blame [<options>] [<rev>] [--] <file>".into(),
            ));
        }
    };
    let path = g.repo_path(&file)?;
    let head = match &rev {
        Some(r) => Some(g.commit_of(r)?),
        None => g
            .repo
            .head()
            .map(|id| g.repo.commit(&id).map(|c| (id, c)))
            .transpose()?,
    };
    // The file in the revision (or in HEAD), read once.
    let mut head_text = match &head {
        Some((_, c)) => file_at(g, c, &path)?,
        None => None,
    };
    let final_text = match &rev {
        Some(r) => head_text
            .take()
            .ok_or_else(|| fatal(format!("no such path {path} in {r}")))?,
        None => {
            if head_text.is_none() && !g.repo.read_index()?.files().contains_key(&path) {
                return Err(fatal(format!("no such path '{path}' in HEAD")));
            }
            std::fs::read(g.work_path(&path)).map_err(|e| {
                fatal(format!(
                    "Cannot lstat '{file}': {}",
                    guest_support::cli::reason(&e)
                ))
            })?
        }
    };
    let final_lines = lines(&final_text);
    let (first, last) = range(o.range.as_deref(), final_lines.len(), &path)?;

    let mut blamed: Vec<Option<Blamed>> = vec![None; final_lines.len()];
    let mut commits: BTreeMap<Id, Commit> = BTreeMap::new();
    let mut suspects = Suspects::default();
    let all: Vec<(usize, usize)> = (0..final_lines.len()).map(|i| (i, i)).collect();
    match (&rev, head) {
        (Some(_), Some((id, c))) => suspects.add(id, c, all, final_lines.clone()),
        (_, head) => {
            // The working tree's file: what HEAD has goes to HEAD, the rest is not committed.
            let mut left = all;
            if let Some((id, c)) = head
                && let Some(text) = head_text
            {
                let content = lines(&text);
                let (passed, kept) = hand_down(&left, &content, &final_lines);
                left = kept;
                suspects.add(id, c, passed, content);
            }
            for (f, v) in left {
                blamed[f] = Some(Blamed {
                    id: NULL_ID,
                    orig: v,
                });
            }
        }
    }
    while let Some((id, s)) = suspects.next() {
        let mut left = s.lines;
        for p in &s.commit.parents {
            if left.is_empty() {
                break;
            }
            let pc = g.repo.commit(p)?;
            let Some(text) = file_at(g, &pc, &path)? else {
                continue;
            };
            let content = lines(&text);
            let (passed, kept) = hand_down(&left, &content, &s.content);
            left = kept;
            if !passed.is_empty() {
                suspects.add(*p, pc, passed, content);
            }
        }
        for (f, v) in left {
            blamed[f] = Some(Blamed { id, orig: v });
        }
        commits.insert(id, s.commit);
    }

    // git's default format: `hash (author date line) text`, columns as wide as the
    // widest value shown.
    let shown: Vec<(usize, Blamed)> = (first..last)
        // Every line is blamed by now; a line that were not would read as not committed.
        .map(|i| {
            let b = blamed[i].unwrap_or(Blamed {
                id: NULL_ID,
                orig: i,
            });
            (i, b)
        })
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    if let Some(every_line) = o.porcelain {
        let head_id = match &rev {
            Some(_) => None,
            None => g.repo.head(),
        };
        let out = porcelain(
            g,
            &o,
            &shown,
            &final_lines,
            &commits,
            &path,
            head_id,
            now,
            every_line,
        )?;
        g.out.extend_from_slice(&out);
        return Ok(0);
    }
    let who = |b: &Blamed| -> (String, String) {
        match commits.get(&b.id) {
            Some(c) => {
                let a = parse_ident(&c.author);
                let name = if o.email {
                    format!("<{}>", a.email)
                } else {
                    a.name.to_string()
                };
                (name, format_date(a.time, a.tz, "iso"))
            }
            None => {
                let name = if o.email {
                    "<not.committed.yet>".to_string()
                } else {
                    "Not Committed Yet".to_string()
                };
                (name, format_date(now, "+0000", "iso"))
            }
        }
    };
    let authors: Vec<(String, String)> = shown.iter().map(|(_, b)| who(b)).collect();
    let author_width = authors
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0);
    let digits = last.max(1).to_string().len();
    let orig_digits = shown
        .iter()
        .map(|(_, b)| b.orig + 1)
        .max()
        .unwrap_or(1)
        .to_string()
        .len();
    let hash_len = if o.long { 40 } else { 8 };
    let mut out = String::new();
    for ((i, b), (name, date)) in shown.iter().zip(&authors) {
        let boundary = commits
            .get(&b.id)
            .is_some_and(|c| c.parents.is_empty() && !o.root);
        let full = hex(&b.id);
        if boundary {
            out.push('^');
            out.push_str(&full[..hash_len - 1]);
        } else {
            out.push_str(&full[..hash_len]);
        }
        if o.name {
            out.push_str(&format!(" {path}"));
        }
        if o.number {
            out.push_str(&format!(" {:>orig_digits$}", b.orig + 1));
        }
        if !o.no_author {
            let pad = author_width - name.chars().count();
            out.push_str(&format!(" ({name}{} {date}", " ".repeat(pad)));
        }
        out.push_str(&format!(" {:>digits$}) ", i + 1));
        g.say(&out);
        out.clear();
        g.out.extend_from_slice(&final_lines[*i]);
        g.out.push(b'\n');
    }
    Ok(0)
}

/// git's `--porcelain` and `--line-porcelain`: per line `HASH ORIG FINAL [GROUP]`, the
/// commit's details (the first time it appears, or on every line), and the line after a
/// tab. A group is a run of lines from one commit, consecutive on both sides.
#[allow(clippy::too_many_arguments)]
fn porcelain(
    g: &Git,
    o: &Opts,
    shown: &[(usize, Blamed)],
    final_lines: &[Vec<u8>],
    commits: &BTreeMap<Id, Commit>,
    path: &str,
    head: Option<Id>,
    now: i64,
    every_line: bool,
) -> R<Vec<u8>> {
    let mut out = Vec::new();
    // Each commit's details, made once (its `previous` reads a parent's tree).
    let mut told: BTreeMap<Id, String> = BTreeMap::new();
    let mut k = 0;
    while k < shown.len() {
        let (i, b) = shown[k];
        let mut run = 1;
        while k + run < shown.len()
            && shown[k + run].1.id == b.id
            && shown[k + run].1.orig == b.orig + run
            && shown[k + run].0 == i + run
        {
            run += 1;
        }
        for (n, (i, b)) in shown[k..k + run].iter().enumerate() {
            let mut head_line = format!("{} {} {}", hex(&b.id), b.orig + 1, i + 1);
            if n == 0 {
                head_line.push_str(&format!(" {run}"));
            }
            head_line.push('\n');
            out.extend_from_slice(head_line.as_bytes());
            let first = !told.contains_key(&b.id);
            if first {
                told.insert(b.id, details(g, o, b, commits, path, head, now)?);
            }
            if first || every_line {
                out.extend_from_slice(told[&b.id].as_bytes());
            }
            out.push(b'\t');
            out.extend_from_slice(&final_lines[*i]);
            out.push(b'\n');
        }
        k += run;
    }
    Ok(out)
}

/// The `author`...`filename` lines of a blamed commit in porcelain output.
fn details(
    g: &Git,
    o: &Opts,
    b: &Blamed,
    commits: &BTreeMap<Id, Commit>,
    path: &str,
    head: Option<Id>,
    now: i64,
) -> R<String> {
    let mut s = String::new();
    let person = |s: &mut String, role: &str, name: &str, email: &str, time: i64, tz: &str| {
        s.push_str(&format!(
            "{role} {name}\n{role}-mail <{email}>\n{role}-time {time}\n{role}-tz {tz}\n"
        ));
    };
    match commits.get(&b.id) {
        Some(c) => {
            let a = parse_ident(&c.author);
            let m = parse_ident(&c.committer);
            person(&mut s, "author", a.name, a.email, a.time, a.tz);
            person(&mut s, "committer", m.name, m.email, m.time, m.tz);
            s.push_str(&format!("summary {}\n", c.subject()));
            if c.parents.is_empty() && !o.root {
                s.push_str("boundary\n");
            }
            for p in &c.parents {
                if file_at(g, &g.repo.commit(p)?, path)?.is_some() {
                    s.push_str(&format!("previous {} {path}\n", hex(p)));
                    break;
                }
            }
        }
        None => {
            let who = "Not Committed Yet";
            person(&mut s, "author", who, "not.committed.yet", now, "+0000");
            person(&mut s, "committer", who, "not.committed.yet", now, "+0000");
            s.push_str(&format!("summary Version of {path} from {path}\n"));
            if let Some(h) = head {
                s.push_str(&format!("previous {} {path}\n", hex(&h)));
            }
        }
    }
    s.push_str(&format!("filename {path}\n"));
    Ok(s)
}

/// The lines of `left` (final line, line in `child`) that a diff of `parent` against
/// `child` finds unchanged, as (final line, line in `parent`); and the rest.
type Handed = (Vec<(usize, usize)>, Vec<(usize, usize)>);

fn hand_down(left: &[(usize, usize)], parent: &[Vec<u8>], child: &[Vec<u8>]) -> Handed {
    let a: Vec<&[u8]> = parent.iter().map(Vec::as_slice).collect();
    let b: Vec<&[u8]> = child.iter().map(Vec::as_slice).collect();
    // For each line of the child, its line in the parent if unchanged.
    let mut in_parent: Vec<Option<usize>> = vec![None; b.len()];
    let (mut i, mut j) = (0, 0);
    for c in guest_support::textdiff::changes(&a, &b) {
        while j < c.j1 {
            in_parent[j] = Some(i);
            i += 1;
            j += 1;
        }
        i = c.i2;
        j = c.j2;
    }
    while j < b.len() && i < a.len() {
        in_parent[j] = Some(i);
        i += 1;
        j += 1;
    }
    let (mut passed, mut kept) = (Vec::new(), Vec::new());
    for &(f, v) in left {
        match in_parent.get(v).copied().flatten() {
            Some(p) => passed.push((f, p)),
            None => kept.push((f, v)),
        }
    }
    (passed, kept)
}

fn lines(text: &[u8]) -> Vec<Vec<u8>> {
    guest_support::textdiff::lines(text)
        .into_iter()
        .map(<[u8]>::to_vec)
        .collect()
}

fn commit_time(c: &Commit) -> i64 {
    parse_ident(&c.committer).time
}

/// The file at `path` in commit `c`, if it has one.
fn file_at(g: &Git, c: &Commit, path: &str) -> R<Option<Vec<u8>>> {
    let files = g.repo.flatten(&c.tree)?;
    match files.get(path) {
        Some((_, blob)) => Ok(Some(g.repo.read_kind(blob, Kind::Blob)?)),
        None => Ok(None),
    }
}

/// `-L start,end`, `-L start,+count` or `-L start` as a range of lines from 0 (end
/// excluded); all lines without one.
fn range(spec: Option<&str>, n: usize, path: &str) -> R<(usize, usize)> {
    let Some(spec) = spec else {
        return Ok((0, n));
    };
    let bad = || fatal(format!("invalid -L argument '{spec}'"));
    let (a, b) = spec.split_once(',').unwrap_or((spec, ""));
    let start: usize = if a.is_empty() {
        1
    } else {
        a.parse().map_err(|_| bad())?
    };
    if start == 0 {
        return Err(bad());
    }
    if start > n {
        return Err(fatal(format!(
            "file {path} has only {n} line{}",
            if n == 1 { "" } else { "s" }
        )));
    }
    let end = if b.is_empty() {
        n
    } else if let Some(count) = b.strip_prefix('+') {
        let c: usize = count.parse().map_err(|_| bad())?;
        (start + c.max(1) - 1).min(n)
    } else if let Some(count) = b.strip_prefix('-') {
        let c: usize = count.parse().map_err(|_| bad())?;
        let first = start.saturating_sub(c.max(1) - 1).max(1);
        return Ok((first - 1, start));
    } else {
        let e: usize = b.parse().map_err(|_| bad())?;
        if e < start {
            return Ok((e.max(1) - 1, start));
        }
        e.min(n)
    };
    Ok((start - 1, end))
}
