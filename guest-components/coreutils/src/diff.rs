//! `diff`: normal and unified (`-u`, `-U N`) output and `-q`, exit status 0 (same), 1
//! (different), 2 (trouble). Line matching is Myers' O((N+M)D) algorithm after trimming the
//! common prefix and suffix (`guest_support::textdiff`, shared with `git`).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::Path;

use guest_support::textdiff::{Change, Side, Unified, changes, line, unified_hunks};

use crate::own::reason;

struct Text {
    name: String,
    data: Vec<u8>,
    mtime: Option<std::time::SystemTime>,
}

impl Text {
    fn lines(&self) -> Vec<&[u8]> {
        guest_support::textdiff::lines(&self.data)
    }
    fn ends_without_newline(&self) -> bool {
        !self.data.is_empty() && !self.data.ends_with(b"\n")
    }
}

fn read(name: &str) -> Result<Text, String> {
    if name == "-" {
        let mut data = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut data);
        return Ok(Text {
            name: name.into(),
            data,
            mtime: Some(std::time::SystemTime::now()),
        });
    }
    let meta = std::fs::metadata(name).map_err(|e| format!("diff: {name}: {}", reason(&e)))?;
    if meta.is_dir() {
        return Err(format!("diff: {name}: Is a directory"));
    }
    let data = std::fs::read(name).map_err(|e| format!("diff: {name}: {}", reason(&e)))?;
    Ok(Text {
        name: name.into(),
        data,
        mtime: meta.modified().ok(),
    })
}

/// `2026-11-22 02:23:16.123456789 +0000`, as GNU diff labels unified output (and `stat`
/// prints times).
pub fn stamp(t: Option<std::time::SystemTime>) -> String {
    let d = t
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .unwrap_or_default();
    let (year, month, day, h, m, sec) = crate::civil(d.as_secs() as i64);
    format!(
        "{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{sec:02}.{:09} +0000",
        d.subsec_nanos()
    )
}

fn range(start: usize, end: usize) -> String {
    // 1-based, inclusive; `start` is the 0-based first line.
    if end - start == 1 {
        format!("{}", start + 1)
    } else {
        format!("{},{}", start + 1, end)
    }
}

pub fn main(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (mut unified, mut context, mut brief, mut recursive) = (false, 3usize, false, false);
    let mut shown_opts: Vec<String> = Vec::new();
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        if a.starts_with('-') && a.len() > 1 && a != "--" {
            shown_opts.push(a.to_string());
        }
        match a {
            "-u" | "--unified" => unified = true,
            "-q" | "--brief" => brief = true,
            "-r" | "--recursive" => recursive = true,
            a if a.len() > 2
                && a.starts_with('-')
                && !a.starts_with("--")
                && !a.starts_with("-U")
                && a[1..].chars().all(|c| matches!(c, 'u' | 'q' | 'r')) =>
            {
                for c in a[1..].chars() {
                    match c {
                        'u' => unified = true,
                        'q' => brief = true,
                        _ => recursive = true,
                    }
                }
            }
            "-U" => {
                unified = true;
                context = args.get(i).and_then(|v| v.parse().ok()).unwrap_or(3);
                i += 1;
            }
            "--" => {
                files.extend(args[i..].iter().cloned());
                break;
            }
            a if a.starts_with("-U") || a.starts_with("--unified=") => {
                unified = true;
                context = a
                    .trim_start_matches("-U")
                    .trim_start_matches("--unified=")
                    .parse()
                    .unwrap_or(3);
            }
            a if a.starts_with('-') && a.len() > 1 => {
                eprintln!(
                    "diff: invalid option -- '{}'\ndiff: Try 'diff --help' for more information.",
                    &a[1..]
                );
                return 2;
            }
            _ => files.push(a.to_string()),
        }
    }
    if files.len() != 2 {
        let what = if files.len() < 2 {
            "missing operand after"
        } else {
            "extra operand"
        };
        eprintln!(
            "diff: {what} '{}'\ndiff: Try 'diff --help' for more information.",
            files.last().map_or("diff", |f| f.as_str())
        );
        return 2;
    }
    let opts = Opts {
        unified,
        context,
        brief,
        recursive,
        shown: shown_opts.join(" "),
    };
    let (p0, p1) = (files[0].as_str(), files[1].as_str());
    let dir0 = p0 != "-" && Path::new(p0).is_dir();
    let dir1 = p1 != "-" && Path::new(p1).is_dir();
    let mut out = Vec::new();
    let status = match (dir0, dir1) {
        (true, true) => diff_dirs(p0, p1, &opts, &mut out, false),
        (true, false) => diff_pair(&join(p0, base(p1)), p1, &opts, &mut out, false),
        (false, true) => diff_pair(p0, &join(p1, base(p0)), &opts, &mut out, false),
        (false, false) => diff_pair(p0, p1, &opts, &mut out, false),
    };
    let _ = std::io::stdout().write_all(&out);
    status
}

struct Opts {
    unified: bool,
    context: usize,
    brief: bool,
    recursive: bool,
    /// The options as given, for the `diff -r a/x b/x` lines of directory comparisons.
    shown: String,
}

fn base(p: &str) -> &str {
    p.trim_end_matches('/').rsplit('/').next().unwrap_or(p)
}

fn join(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

/// Compares two directories like GNU diff: common files compared, names only on one side
/// reported, common subdirectories entered with `-r` (named otherwise). Status 0/1/2.
fn diff_dirs(a: &str, b: &str, o: &Opts, out: &mut Vec<u8>, _nested: bool) -> i32 {
    let list = |d: &str| -> Result<std::collections::BTreeSet<Vec<u8>>, String> {
        let rd = std::fs::read_dir(d).map_err(|e| format!("diff: {d}: {}", reason(&e)))?;
        Ok(rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned().into_bytes())
            .collect())
    };
    let (la, lb) = match (list(a), list(b)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => {
            let _ = std::io::stdout().write_all(out);
            out.clear();
            eprintln!("{e}");
            return 2;
        }
    };
    let mut status = 0;
    let all: std::collections::BTreeSet<&Vec<u8>> = la.iter().chain(lb.iter()).collect();
    for name in all {
        let n = String::from_utf8_lossy(name).into_owned();
        let (pa, pb) = (join(a, &n), join(b, &n));
        match (la.contains(name), lb.contains(name)) {
            (true, false) => {
                out.extend_from_slice(format!("Only in {a}: {n}\n").as_bytes());
                status = status.max(1);
            }
            (false, true) => {
                out.extend_from_slice(format!("Only in {b}: {n}\n").as_bytes());
                status = status.max(1);
            }
            _ => {
                let (da, db) = (Path::new(&pa).is_dir(), Path::new(&pb).is_dir());
                let s = match (da, db) {
                    (true, true) if o.recursive => diff_dirs(&pa, &pb, o, out, true),
                    (true, true) => {
                        out.extend_from_slice(
                            format!("Common subdirectories: {pa} and {pb}\n").as_bytes(),
                        );
                        0
                    }
                    (true, false) | (false, true) => {
                        let kind = |d: bool| if d { "directory" } else { "regular file" };
                        out.extend_from_slice(
                            format!(
                                "File {pa} is a {} while file {pb} is a {}\n",
                                kind(da),
                                kind(db)
                            )
                            .as_bytes(),
                        );
                        1
                    }
                    _ => diff_pair(&pa, &pb, o, out, true),
                };
                status = status.max(s);
            }
        }
    }
    status
}

/// Compares two files; in a directory comparison a differing pair is introduced by the
/// `diff OPTIONS A B` line GNU diff prints.
fn diff_pair(pa: &str, pb: &str, o: &Opts, out: &mut Vec<u8>, in_dirs: bool) -> i32 {
    let (a, b) = match (read(pa), read(pb)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            let _ = std::io::stdout().write_all(out);
            out.clear();
            eprintln!("{e}");
            return 2;
        }
    };
    let (unified, context, brief) = (o.unified, o.context, o.brief);
    if a.data.contains(&0) || b.data.contains(&0) {
        if a.data != b.data {
            out.extend_from_slice(
                format!("Binary files {} and {} differ\n", a.name, b.name).as_bytes(),
            );
            return 1;
        }
        return 0;
    }
    let (la, lb) = (a.lines(), b.lines());
    let mut cs = changes(&la, &lb);
    // A changed last line that differs only in its final newline still differs.
    if cs.is_empty() && a.ends_without_newline() != b.ends_without_newline() && !la.is_empty() {
        cs.push(Change {
            i1: la.len() - 1,
            i2: la.len(),
            j1: lb.len() - 1,
            j2: lb.len(),
        });
    }
    if cs.is_empty() {
        return 0;
    }
    if brief {
        out.extend_from_slice(format!("Files {} and {} differ\n", a.name, b.name).as_bytes());
        return 1;
    }
    if in_dirs {
        let opts = if o.shown.is_empty() {
            String::new()
        } else {
            format!("{} ", o.shown)
        };
        out.extend_from_slice(format!("diff {opts}{} {}\n", a.name, b.name).as_bytes());
    }
    let (a_nl, b_nl) = (a.ends_without_newline(), b.ends_without_newline());
    if unified {
        out.extend_from_slice(
            format!(
                "--- {}\t{}\n+++ {}\t{}\n",
                a.name,
                stamp(a.mtime),
                b.name,
                stamp(b.mtime)
            )
            .as_bytes(),
        );
        unified_hunks(
            out,
            &Side {
                lines: &la,
                no_newline_at_end: a_nl,
            },
            &Side {
                lines: &lb,
                no_newline_at_end: b_nl,
            },
            &cs,
            &Unified {
                context,
                funcname: false,
                context_from_new: false,
            },
        );
    } else {
        for c in &cs {
            let head = match (c.i1 == c.i2, c.j1 == c.j2) {
                (true, _) => format!("{}a{}\n", c.i1, range(c.j1, c.j2)),
                (_, true) => format!("{}d{}\n", range(c.i1, c.i2), c.j1),
                _ => format!("{}c{}\n", range(c.i1, c.i2), range(c.j1, c.j2)),
            };
            out.extend_from_slice(head.as_bytes());
            for x in c.i1..c.i2 {
                line(out, b"< ", la[x], a_nl && x + 1 == la.len());
            }
            if c.i1 != c.i2 && c.j1 != c.j2 {
                out.extend_from_slice(b"---\n");
            }
            for y in c.j1..c.j2 {
                line(out, b"> ", lb[y], b_nl && y + 1 == lb.len());
            }
        }
    }
    1
}
