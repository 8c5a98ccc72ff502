//! `git apply`: a patch in git's or the plain unified format applied to the working tree (or
//! the index), all files or none. Hunks must match their context exactly, at their line or
//! displaced from it (git applies without fuzz); new, deleted, renamed files and modes come
//! from git's extended headers.

use std::io::Read;
use std::path::Path;

use super::checkout::write_file_data;
use super::store::{Kind, read_work_file};
use super::{Fail, R, discover, fatal};

struct Hunk {
    old_start: usize,
    /// (' ' | '-' | '+', line without its newline, the line had no newline at the end)
    lines: Vec<(u8, Vec<u8>, bool)>,
}

/// A file's old path, new path, and new mode and content (none when it is deleted).
type Outcome = (Option<String>, Option<String>, Option<(u32, Vec<u8>)>);

#[derive(Default)]
struct FilePatch {
    old: Option<String>,
    new: Option<String>,
    new_mode: Option<u32>,
    deleted: bool,
    created: bool,
    binary: bool,
    hunks: Vec<Hunk>,
}

fn strip(path: &str, p: usize) -> Option<String> {
    let path = path.split('\t').next().unwrap_or(path).trim_end();
    if path == "/dev/null" {
        return None;
    }
    let path = path.trim_matches('"');
    let mut parts = path.splitn(p + 1, '/');
    for _ in 0..p {
        parts.next();
    }
    parts.next().map(str::to_string)
}

fn parse(text: &[u8], p: usize) -> R<Vec<FilePatch>> {
    let lines: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
    let s = |l: &[u8]| {
        String::from_utf8_lossy(l)
            .trim_end_matches(['\n', '\r'])
            .to_string()
    };
    let mut out: Vec<FilePatch> = Vec::new();
    let mut i = 0;
    let mut cur: Option<FilePatch> = None;
    while i < lines.len() {
        let l = s(lines[i]);
        if let Some(rest) = l.strip_prefix("diff --git ") {
            if let Some(f) = cur.take() {
                out.push(f);
            }
            let mut f = FilePatch::default();
            // `a/X b/X`: both names, for patches with no ---/+++ (a mode change, an empty file).
            if let Some((a, b)) = rest.split_once(" b/") {
                f.old = strip(a, p);
                f.new = strip(&format!("b/{b}"), p);
            }
            cur = Some(f);
            i += 1;
            continue;
        }
        if l.starts_with("--- ") && i + 1 < lines.len() && s(lines[i + 1]).starts_with("+++ ") {
            let f = cur.get_or_insert_with(FilePatch::default);
            let old = strip(&l[4..], p);
            let new = strip(&s(lines[i + 1])[4..], p);
            f.created |= old.is_none();
            f.deleted |= new.is_none();
            if old.is_some() {
                f.old = old;
            }
            if new.is_some() {
                f.new = new;
            }
            if f.created {
                f.old = None;
            }
            if f.deleted {
                f.new = None;
            }
            i += 2;
            continue;
        }
        if let Some(ranges) = l.strip_prefix("@@ ") {
            let f = cur.as_mut().ok_or_else(|| {
                fatal(format!(
                    "patch fragment without header at line {}: {l}",
                    i + 1
                ))
            })?;
            let nums: Vec<&str> = ranges.split(' ').take(2).collect();
            let range = |r: &str| -> (usize, usize) {
                let r = &r[1..];
                match r.split_once(',') {
                    Some((a, b)) => (a.parse().unwrap_or(0), b.parse().unwrap_or(0)),
                    None => (r.parse().unwrap_or(0), 1),
                }
            };
            let (old_start, mut old_n) = range(nums.first().copied().unwrap_or("-0"));
            let (_, mut new_n) = range(nums.get(1).copied().unwrap_or("+0"));
            let mut hunk = Hunk {
                old_start,
                lines: Vec::new(),
            };
            i += 1;
            while i < lines.len() && (old_n > 0 || new_n > 0) {
                let raw = lines[i];
                let kind = raw.first().copied().unwrap_or(b' ');
                let body = raw[1.min(raw.len())..]
                    .strip_suffix(b"\n")
                    .unwrap_or(&raw[1.min(raw.len())..]);
                match kind {
                    b' ' | b'\n' => {
                        old_n = old_n.saturating_sub(1);
                        new_n = new_n.saturating_sub(1);
                        hunk.lines.push((
                            b' ',
                            if kind == b'\n' {
                                Vec::new()
                            } else {
                                body.to_vec()
                            },
                            false,
                        ));
                    }
                    b'-' => {
                        old_n = old_n.saturating_sub(1);
                        hunk.lines.push((b'-', body.to_vec(), false));
                    }
                    b'+' => {
                        new_n = new_n.saturating_sub(1);
                        hunk.lines.push((b'+', body.to_vec(), false));
                    }
                    b'\\' => {}
                    _ => return Err(fatal(format!("corrupt patch at line {}", i + 1))),
                }
                i += 1;
            }
            // "\ No newline at end of file" marks the line before it.
            if i < lines.len() && lines[i].starts_with(b"\\") {
                if let Some(last) = hunk.lines.last_mut() {
                    last.2 = true;
                }
                i += 1;
            }
            f.hunks.push(hunk);
            continue;
        }
        if let Some(f) = cur.as_mut() {
            if let Some(m) = l.strip_prefix("new file mode ") {
                f.created = true;
                f.old = None;
                f.new_mode = u32::from_str_radix(m.trim(), 8).ok();
            } else if let Some(m) = l.strip_prefix("deleted file mode ") {
                f.deleted = true;
                f.new = None;
                let _ = m;
            } else if let Some(m) = l.strip_prefix("new mode ") {
                f.new_mode = u32::from_str_radix(m.trim(), 8).ok();
            } else if let Some(n) = l.strip_prefix("rename from ") {
                f.old = Some(n.to_string());
            } else if let Some(n) = l.strip_prefix("rename to ") {
                f.new = Some(n.to_string());
            } else if l.starts_with("Binary files ") || l == "GIT binary patch" {
                f.binary = true;
            }
        }
        i += 1;
    }
    if let Some(f) = cur.take() {
        out.push(f);
    }
    if out.is_empty() {
        return Err(fatal(
            "No valid patches in input (allow with \"--allow-empty\")".into(),
        ));
    }
    Ok(out)
}

/// Applies the hunks to `text` (lines with their newlines); the name is for messages.
fn apply_hunks(name: &str, text: &[u8], hunks: &[Hunk], reverse: bool) -> R<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = text
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    let mut shift: isize = 0;
    for h in hunks {
        let (from, to) = if reverse { (b'+', b'-') } else { (b'-', b'+') };
        let with_nl = |(_, l, no_nl): &(u8, Vec<u8>, bool)| {
            let mut v = l.clone();
            if !no_nl {
                v.push(b'\n');
            }
            v
        };
        let old: Vec<Vec<u8>> = h
            .lines
            .iter()
            .filter(|x| x.0 == b' ' || x.0 == from)
            .map(with_nl)
            .collect();
        let new: Vec<Vec<u8>> = h
            .lines
            .iter()
            .filter(|x| x.0 == b' ' || x.0 == to)
            .map(with_nl)
            .collect();
        // Where the hunk says, then ever further above and below.
        let want = (h.old_start.max(1) as isize - 1 + shift).max(0) as usize;
        let fits =
            |at: usize| at + old.len() <= lines.len() && lines[at..at + old.len()] == old[..];
        let at = if old.is_empty() {
            Some(want.min(lines.len()))
        } else {
            (0..=lines.len()).find_map(|d| {
                if want + d <= lines.len() && fits(want + d) {
                    Some(want + d)
                } else if d <= want && fits(want - d) {
                    Some(want - d)
                } else {
                    None
                }
            })
        };
        let Some(at) = at else {
            return Err(Fail {
                msg: format!(
                    "error: patch failed: {name}:{}\nerror: {name}: patch does not apply",
                    h.old_start
                ),
                code: 1,
            });
        };
        shift += at as isize - want as isize;
        lines.splice(at..at + old.len(), new.iter().cloned());
        shift += new.len() as isize - old.len() as isize;
    }
    Ok(lines.concat())
}

pub fn apply(args: Vec<String>) -> R<i32> {
    let (mut check, mut index, mut cached, mut reverse, mut verbose, mut p) =
        (false, false, false, false, false, 1usize);
    let mut files = Vec::new();
    for a in &args {
        match a.as_str() {
            "--check" => check = true,
            "--index" => index = true,
            "--cached" => cached = true,
            "-R" | "--reverse" => reverse = true,
            "-v" | "--verbose" => verbose = true,
            "--whitespace=nowarn"
            | "--whitespace=fix"
            | "--whitespace=warn"
            | "--recount"
            | "--unidiff-zero"
            | "--allow-empty"
            | "--apply"
            | "-q"
            | "--quiet" => {}
            s if s.starts_with("-p") => p = s[2..].parse().unwrap_or(1),
            "--3way" | "-3" | "--reject" | "--stat" | "--numstat" | "--summary" => {
                return Err(fatal(format!(
                    "{a} is not available in this sandbox's git apply"
                )));
            }
            s if s.starts_with('-') && s.len() > 1 => return Err(super::cmds::unknown_option(s)),
            _ => files.push(a.clone()),
        }
    }
    let mut text = Vec::new();
    if files.is_empty() || files.iter().any(|f| f == "-") {
        let _ = std::io::stdin().read_to_end(&mut text);
    }
    for f in files.iter().filter(|f| *f != "-") {
        let data = std::fs::read(f).map_err(|e| {
            fatal(format!(
                "can't open patch '{f}': {}",
                guest_support::cli::reason(&e)
            ))
        })?;
        text.extend_from_slice(&data);
    }
    let patches = parse(&text, p)?;
    let repo = if index || cached {
        let (gd, work) = discover()?;
        Some(super::store::Repo::open(gd, work, &[])?)
    } else {
        None
    };
    let mut index_data = match &repo {
        Some(r) => Some(r.read_index()?),
        None => None,
    };
    // Work out every result first; write only when all apply.
    let mut results: Vec<Outcome> = Vec::new();
    for f in &patches {
        let (old, new) = if reverse {
            (f.new.clone(), f.old.clone())
        } else {
            (f.old.clone(), f.new.clone())
        };
        let shown = new.clone().or(old.clone()).unwrap_or_default();
        for p in old.iter().chain(new.iter()) {
            if !super::store::safe_path(p) {
                return Err(Fail {
                    msg: format!("error: invalid path '{p}'"),
                    code: 128,
                });
            }
        }
        if verbose {
            eprintln!("Checking patch {shown}...");
        }
        if f.binary {
            return Err(fatal(format!(
                "cannot apply binary patch to '{shown}' without full index line\nerror: {shown}: patch does not apply"
            )));
        }
        let current: Option<(u32, Vec<u8>)> = match &old {
            None => None,
            Some(o) => {
                let from_index = cached.then(|| {
                    let r = repo.as_ref().unwrap();
                    index_data
                        .as_ref()
                        .unwrap()
                        .entries
                        .get(o)
                        .and_then(|e| r.read(&e.id).ok().map(|(_, d)| (e.mode, d)))
                });
                match from_index {
                    Some(x) => Some(x.ok_or_else(|| Fail {
                        msg: format!("error: {o}: does not exist in index"),
                        code: 1,
                    })?),
                    None => Some(read_work_file(Path::new(o), true).map_err(|_| Fail {
                        msg: format!("error: {o}: No such file or directory"),
                        code: 1,
                    })?),
                }
            }
        };
        if let (None, Some(n)) = (&old, &new)
            && !cached
            && Path::new(n).exists()
        {
            return Err(Fail {
                msg: format!("error: {n}: already exists in working directory"),
                code: 1,
            });
        }
        let base = current.as_ref().map(|c| c.1.clone()).unwrap_or_default();
        let out = apply_hunks(&shown, &base, &f.hunks, reverse)?;
        let result = new.as_ref().map(|_| {
            let mode = f
                .new_mode
                .filter(|_| !reverse)
                .or(current.as_ref().map(|c| c.0))
                .unwrap_or(0o100644);
            (mode, out)
        });
        results.push((old, new, result));
    }
    if check {
        return Ok(0);
    }
    for (old, new, result) in results {
        if let Some(o) = &old
            && new.as_ref() != Some(o)
        {
            if !cached {
                let _ = std::fs::remove_file(o);
            }
            if let Some(ix) = index_data.as_mut() {
                ix.entries.remove(o);
            }
        }
        if let (Some(n), Some((mode, data))) = (&new, result) {
            if !cached {
                write_file_data(Path::new(n), mode, &data)?;
            }
            if let (Some(ix), Some(r)) = (index_data.as_mut(), repo.as_ref()) {
                let id = r.write(Kind::Blob, &data)?;
                let stat = if cached {
                    ix.entries
                        .get(n)
                        .map(|e| e.stat.clone())
                        .unwrap_or_default()
                } else {
                    std::fs::symlink_metadata(n)
                        .map(|m| super::store::Stat::of(&m))
                        .unwrap_or_default()
                };
                ix.entries
                    .insert(n.clone(), super::store::IndexEntry { mode, id, stat });
            }
        }
        if verbose {
            eprintln!("Applied patch {} cleanly.", new.or(old).unwrap_or_default());
        }
    }
    if let (Some(ix), Some(r)) = (index_data, repo) {
        r.write_index(&ix)?;
    }
    Ok(0)
}
