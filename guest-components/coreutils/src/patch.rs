//! `patch`: applies unified diffs (`diff -u`, `git diff`) as GNU patch does: `-pN`, `-i
//! FILE`, `-R`, `-N`, `--dry-run`, `-d DIR`, `-b`, `-s`, `-E`; hunks found at their line or
//! at an offset, with up to two lines of fuzz; new and deleted files; `\ No newline at end
//! of file`. A hunk that does not apply is written to `FILE.rej` and the exit status is 1.

use std::ffi::OsString;
use std::io::Read;

#[derive(Default)]
struct Opts {
    strip: Option<usize>,
    input: Option<String>,
    reverse: bool,
    forward: bool,
    dry_run: bool,
    silent: bool,
    backup: bool,
    remove_empty: bool,
    dir: Option<String>,
    target: Option<String>,
}

/// One line of a hunk: ' ' context, '-' removed, '+' added; `eol` false after `\ No
/// newline at end of file`.
#[derive(Clone)]
struct Line {
    kind: u8,
    text: String,
    eol: bool,
}

#[derive(Clone)]
struct Hunk {
    old_start: usize,
    new_start: usize,
    lines: Vec<Line>,
    header: String,
}

struct FilePatch {
    old: String,
    new: String,
    /// The `---` and `+++` lines as written (for `.rej` files).
    headers: (String, String),
    hunks: Vec<Hunk>,
}

fn usage(msg: &str) -> i32 {
    eprintln!("patch: {msg}\npatch: Try 'patch --help' for more information.");
    2
}

pub fn main(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut o = Opts::default();
    let mut operands = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].clone();
        i += 1;
        let mut next = |what: &str| -> Result<String, i32> {
            i += 1;
            args.get(i - 1)
                .cloned()
                .ok_or_else(|| usage(&format!("option requires an argument -- '{what}'")))
        };
        let strip = |v: &str| {
            v.parse::<usize>()
                .map_err(|_| usage(&format!("strip count {v} is not a number")))
        };
        let r: Result<(), i32> = (|| {
            match a.as_str() {
                "-R" | "--reverse" => o.reverse = true,
                "-N" | "--forward" => o.forward = true,
                "--dry-run" => o.dry_run = true,
                "-s" | "--silent" | "--quiet" => o.silent = true,
                "-b" | "--backup" => o.backup = true,
                "-E" | "--remove-empty-files" => o.remove_empty = true,
                "-u"
                | "--unified"
                | "-f"
                | "--force"
                | "-t"
                | "--batch"
                | "-l"
                | "--ignore-whitespace"
                | "--no-backup-if-mismatch"
                | "-V"
                | "--verbose" => {}
                "-p" => o.strip = Some(strip(&next("p")?)?),
                "-i" | "--input" => o.input = Some(next("i")?),
                "-d" | "--directory" => o.dir = Some(next("d")?),
                "-o" | "--output" => return Err(usage("-o is not supported")),
                "--help" => {
                    println!(
                        "Usage: patch [OPTION]... [ORIGFILE [PATCHFILE]]\n\n  -p NUM  --strip=NUM  Strip NUM leading components from file names.\n  -i PATCHFILE  --input=PATCHFILE  Read patch from PATCHFILE instead of stdin.\n  -R  --reverse  Assume patches were created with old and new files swapped.\n  -N  --forward  Ignore patches that seem to be reversed or already applied.\n  --dry-run  Do not actually change any files; just print what would happen.\n  -d DIR  --directory=DIR  Change the working directory to DIR first.\n  -b  --backup  Back up the original contents of each file (FILE.orig).\n  -E  --remove-empty-files  Remove output files that are empty after patching.\n  -s  --quiet  --silent  Work silently unless an error occurs."
                    );
                    return Err(0);
                }
                _ => {
                    if let Some(v) = a.strip_prefix("--strip=") {
                        o.strip = Some(strip(v)?);
                    } else if let Some(v) = a.strip_prefix("--input=") {
                        o.input = Some(v.into());
                    } else if let Some(v) = a.strip_prefix("--directory=") {
                        o.dir = Some(v.into());
                    } else if let Some(v) = a.strip_prefix("-p") {
                        o.strip = Some(strip(v)?);
                    } else if let Some(v) = a.strip_prefix("-i") {
                        o.input = Some(v.into());
                    } else if let Some(v) = a.strip_prefix("-d") {
                        o.dir = Some(v.into());
                    } else if a.starts_with('-') && a.len() > 1 {
                        return Err(usage(&format!("unrecognized option '{a}'")));
                    } else {
                        operands.push(a.clone());
                    }
                }
            }
            Ok(())
        })();
        if let Err(code) = r {
            return code;
        }
    }
    if let Some(f) = operands.first() {
        o.target = Some(f.clone());
    }
    if o.input.is_none() {
        o.input = operands.get(1).cloned();
    }
    let mut text = String::new();
    let read = match &o.input {
        Some(f) if f != "-" => {
            std::fs::read(f).map(|b| text = String::from_utf8_lossy(&b).into_owned())
        }
        _ => std::io::stdin().read_to_string(&mut text).map(|_| ()),
    };
    if let Err(e) = read {
        eprintln!(
            "patch: **** Can't open patch file {} : {}",
            o.input.as_deref().unwrap_or("-"),
            crate::own::reason(&e)
        );
        return 2;
    }
    if let Some(d) = &o.dir
        && let Err(e) = std::env::set_current_dir(d)
    {
        eprintln!(
            "patch: **** Can't change to directory {d} : {}",
            crate::own::reason(&e)
        );
        return 2;
    }
    let patches = match parse(&text) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("patch: **** {e}");
            return 2;
        }
    };
    if patches.is_empty() {
        eprintln!("patch: **** Only garbage was found in the patch input.");
        return 2;
    }
    let mut status = 0;
    for p in patches {
        status = status.max(apply_file(&o, p));
    }
    status
}

/// The file patches of a unified diff (anything between them is ignored, as GNU does).
fn parse(text: &str) -> Result<Vec<FilePatch>, String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_end_matches(['\n', '\r']);
        if let Some(old) = l.strip_prefix("--- ")
            && let Some(new) = lines
                .get(i + 1)
                .and_then(|n| n.trim_end_matches(['\n', '\r']).strip_prefix("+++ "))
        {
            let mut fp = FilePatch {
                old: header_name(old),
                new: header_name(new),
                headers: (format!("--- {old}"), format!("+++ {new}")),
                hunks: Vec::new(),
            };
            i += 2;
            while i < lines.len() && lines[i].starts_with("@@ ") {
                let header = lines[i].trim_end_matches(['\n', '\r']).to_string();
                let (old_start, old_len, new_start, new_len) = hunk_range(&header)
                    .ok_or_else(|| format!("malformed patch at line {}: {header}", i + 1))?;
                i += 1;
                let mut hunk = Hunk {
                    old_start,
                    new_start,
                    lines: Vec::new(),
                    header,
                };
                let (mut old_seen, mut new_seen) = (0, 0);
                while (old_seen < old_len || new_seen < new_len) && i < lines.len() {
                    let raw = lines[i];
                    let body = raw.strip_suffix('\n').unwrap_or(raw);
                    let body = body.strip_suffix('\r').unwrap_or(body);
                    let (kind, rest) = match body.as_bytes().first() {
                        Some(b' ') | Some(b'-') | Some(b'+') => (body.as_bytes()[0], &body[1..]),
                        // An empty line inside a hunk is an empty context line (some
                        // editors strip the trailing space).
                        None => (b' ', ""),
                        Some(b'\\') => {
                            i += 1;
                            continue;
                        }
                        _ => return Err(format!("malformed patch at line {}: {body}", i + 1)),
                    };
                    match kind {
                        b' ' => {
                            old_seen += 1;
                            new_seen += 1
                        }
                        b'-' => old_seen += 1,
                        _ => new_seen += 1,
                    }
                    hunk.lines.push(Line {
                        kind,
                        text: rest.to_string(),
                        eol: true,
                    });
                    i += 1;
                }
                if old_seen < old_len || new_seen < new_len {
                    return Err("unexpected end of file in patch".into());
                }
                if i < lines.len() && lines[i].starts_with('\\') {
                    if let Some(last) = hunk.lines.last_mut() {
                        last.eol = false;
                    }
                    i += 1;
                }
                // `\ No newline` may follow a '-' line with '+' lines after it.
                fp.hunks.push(hunk);
            }
            out.push(fp);
            continue;
        }
        i += 1;
    }
    Ok(out)
}

/// A `---`/`+++` header's file name: up to a tab (a time stamp follows), unquoted.
fn header_name(s: &str) -> String {
    let name = s.split('\t').next().unwrap_or(s).trim_end();
    let name = name
        .strip_prefix('"')
        .and_then(|n| n.strip_suffix('"'))
        .unwrap_or(name);
    name.to_string()
}

/// `@@ -a,b +c,d @@` (a length of 1 may be left out).
fn hunk_range(h: &str) -> Option<(usize, usize, usize, usize)> {
    let inner = h.strip_prefix("@@ -")?;
    let (ranges, _) = inner.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let range = |r: &str| -> Option<(usize, usize)> {
        match r.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (a, b) = range(old)?;
    let (c, d) = range(new)?;
    Some((a, b, c, d))
}

fn strip(name: &str, n: Option<usize>) -> String {
    match n {
        // POSIX: without -p, the last component.
        None => name.rsplit('/').next().unwrap_or(name).to_string(),
        Some(n) => {
            let parts: Vec<&str> = name.split('/').collect();
            let mut skipped = 0;
            let mut k = 0;
            while skipped < n && k < parts.len() - 1 {
                // Consecutive slashes count as one.
                if !parts[k].is_empty() || k == 0 {
                    skipped += 1;
                }
                k += 1;
            }
            parts[k..].join("/")
        }
    }
}

/// The lines of a file, each with whether it ended in a newline.
fn file_lines(data: &str) -> Vec<(String, bool)> {
    data.split_inclusive('\n')
        .map(|l| match l.strip_suffix('\n') {
            Some(t) => (t.to_string(), true),
            None => (l.to_string(), false),
        })
        .collect()
}

/// Where `want` matches `lines` nearest to `at` (offset search both ways).
fn find(lines: &[(String, bool)], want: &[&str], at: usize) -> Option<usize> {
    if want.len() > lines.len() {
        return None;
    }
    let last = lines.len() - want.len();
    let fits = |p: usize| want.iter().enumerate().all(|(k, w)| lines[p + k].0 == *w);
    let at = at.min(last);
    for d in 0..=last {
        if at + d <= last && fits(at + d) {
            return Some(at + d);
        }
        if d <= at && d > 0 && fits(at - d) {
            return Some(at - d);
        }
    }
    None
}

fn reversed(h: &Hunk) -> Hunk {
    Hunk {
        old_start: h.new_start,
        new_start: h.old_start,
        header: h.header.clone(),
        lines: h
            .lines
            .iter()
            .map(|l| Line {
                kind: match l.kind {
                    b'-' => b'+',
                    b'+' => b'-',
                    k => k,
                },
                ..l.clone()
            })
            .collect(),
    }
}

/// Applies one hunk to `lines` starting the search at its line plus `shift`; the line it
/// applied at, and the fuzz used.
fn apply_hunk(lines: &mut Vec<(String, bool)>, h: &Hunk, shift: isize) -> Option<(usize, usize)> {
    let lead = h.lines.iter().take_while(|l| l.kind == b' ').count();
    let trail = h.lines.iter().rev().take_while(|l| l.kind == b' ').count();
    for fuzz in 0..=2usize {
        let (cut_lead, cut_trail) = (fuzz.min(lead), fuzz.min(trail));
        if fuzz > 0 && cut_lead == 0 && cut_trail == 0 {
            break;
        }
        let body = &h.lines[cut_lead..h.lines.len() - cut_trail];
        let old: Vec<&str> = body
            .iter()
            .filter(|l| l.kind != b'+')
            .map(|l| l.text.as_str())
            .collect();
        let start = (h.old_start.max(1) as isize - 1 + cut_lead as isize + shift).max(0) as usize;
        let at = if old.is_empty() {
            // Pure insertion: at its line (after the last one when beyond).
            Some((h.old_start as isize + shift).clamp(0, lines.len() as isize) as usize)
        } else {
            find(lines, &old, start)
        };
        let Some(at) = at else { continue };
        let mut new: Vec<(String, bool)> = Vec::new();
        for l in body.iter().filter(|l| l.kind != b'-') {
            new.push((l.text.clone(), l.eol));
        }
        // A file's last line keeps its missing newline unless the hunk says otherwise.
        let end = at + old.len();
        if end == lines.len()
            && let Some(last) = new.last_mut()
            && body.last().is_some_and(|l| l.kind == b' ')
        {
            last.1 = lines.last().map(|l| l.1).unwrap_or(true) && last.1;
        }
        lines.splice(at..end, new);
        return Some((at.saturating_sub(cut_lead), fuzz));
    }
    None
}

fn apply_file(o: &Opts, mut fp: FilePatch) -> i32 {
    if o.reverse {
        std::mem::swap(&mut fp.old, &mut fp.new);
        fp.hunks = fp.hunks.iter().map(reversed).collect();
    }
    let creating = fp.old == "/dev/null";
    let deleting = fp.new == "/dev/null";
    let name = match &o.target {
        Some(t) => t.clone(),
        None => {
            let old = strip(&fp.old, o.strip);
            let new = strip(&fp.new, o.strip);
            if creating {
                new
            } else if deleting || std::path::Path::new(&old).exists() {
                old
            } else {
                new
            }
        }
    };
    let verb = if o.dry_run { "checking" } else { "patching" };
    if !o.silent {
        println!("{verb} file {name}");
    }
    let original = match std::fs::read(&name) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && creating => String::new(),
        Err(e) => {
            eprintln!(
                "patch: **** Can't open file {name} : {}",
                crate::own::reason(&e)
            );
            return 1;
        }
    };
    if creating && !original.is_empty() {
        // A creation patch on a file that exists: already applied, or a clash.
        let same = fp
            .hunks
            .iter()
            .flat_map(|h| h.lines.iter())
            .filter(|l| l.kind == b'+')
            .map(|l| l.text.as_str())
            .eq(file_lines(&original).iter().map(|l| l.0.as_str()));
        if same {
            println!("Reversed (or previously applied) patch detected!  Skipping patch.");
            println!(
                "{n} out of {n} hunk{s} ignored",
                n = fp.hunks.len(),
                s = if fp.hunks.len() == 1 { "" } else { "s" }
            );
            return 1;
        }
    }
    let mut lines = file_lines(&original);
    // Lines added less removed by the hunks applied so far, and the offset the last one
    // was found at (the next is looked for there first).
    let mut delta: isize = 0;
    let mut carried: isize = 0;
    let mut failed: Vec<&Hunk> = Vec::new();
    let total = fp.hunks.len();
    for (n, h) in fp.hunks.iter().enumerate() {
        let shift = delta + carried;
        match apply_hunk(&mut lines, h, shift) {
            Some((at, fuzz)) => {
                let offset = at as isize - (h.old_start.max(1) as isize - 1 + delta);
                if (offset != 0 || fuzz > 0) && !o.silent && !h.lines.iter().all(|l| l.kind == b'+')
                {
                    let mut msg = format!("Hunk #{} succeeded at {}", n + 1, at + 1);
                    if fuzz > 0 {
                        msg.push_str(&format!(" with fuzz {fuzz}"));
                    }
                    if offset != 0 {
                        let s = if offset.abs() == 1 { "" } else { "s" };
                        msg.push_str(&format!(" (offset {offset} line{s})"));
                    }
                    println!("{msg}.");
                }
                let added = h.lines.iter().filter(|l| l.kind == b'+').count() as isize;
                let removed = h.lines.iter().filter(|l| l.kind == b'-').count() as isize;
                delta += added - removed;
                carried = offset;
            }
            None => {
                // Already applied? Then say so, as GNU does.
                let mut probe = lines.clone();
                if n == 0 && apply_hunk(&mut probe, &reversed(h), shift).is_some() {
                    // GNU patch with its input not a terminal: it answers its own
                    // questions "no", or with -N does not ask.
                    if o.forward {
                        println!(
                            "Reversed (or previously applied) patch detected!  Skipping patch."
                        );
                    } else {
                        println!(
                            "Reversed (or previously applied) patch detected!  Assume -R? [n] \nApply anyway? [n] \nSkipping patch."
                        );
                    }
                    let s = if total == 1 { "" } else { "s" };
                    if o.dry_run {
                        println!("{total} out of {total} hunk{s} ignored");
                    } else {
                        let rej = format!("{name}.rej");
                        println!(
                            "{total} out of {total} hunk{s} ignored -- saving rejects to file {rej}"
                        );
                        let all: Vec<&Hunk> = fp.hunks.iter().collect();
                        let _ = std::fs::write(&rej, rejects(&fp, &name, &all));
                        if !creating {
                            let _ = std::fs::write(format!("{name}.orig"), &original);
                        }
                    }
                    return 1;
                }
                let at = (h.old_start as isize + shift).max(1);
                println!("Hunk #{} FAILED at {at}.", n + 1);
                failed.push(h);
            }
        }
    }
    if !failed.is_empty() {
        let rej = format!("{name}.rej");
        let s = if total == 1 { "" } else { "s" };
        if o.dry_run {
            println!("{} out of {total} hunk{s} FAILED", failed.len());
        } else {
            println!(
                "{} out of {total} hunk{s} FAILED -- saving rejects to file {rej}",
                failed.len()
            );
        }
        if !o.dry_run {
            let _ = std::fs::write(&rej, rejects(&fp, &name, &failed));
        }
    }
    if o.dry_run {
        return i32::from(!failed.is_empty());
    }
    // A backup when asked, or when a hunk failed (GNU's --backup-if-mismatch).
    if (o.backup || !failed.is_empty()) && !creating {
        let _ = std::fs::write(format!("{name}.orig"), &original);
    }
    let mut out = String::new();
    for (t, eol) in &lines {
        out.push_str(t);
        if *eol {
            out.push('\n');
        }
    }
    if deleting && out.is_empty() || o.remove_empty && out.is_empty() {
        if let Err(e) = std::fs::remove_file(&name)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!(
                "patch: **** Can't remove file {name} : {}",
                crate::own::reason(&e)
            );
            return 2;
        }
        // Directories the removal left empty go too, as GNU patch does.
        let mut dir = std::path::Path::new(&name).parent();
        while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        return i32::from(!failed.is_empty());
    }
    if let Some(parent) = std::path::Path::new(&name).parent()
        && !parent.as_os_str().is_empty()
    {
        let _ = std::fs::create_dir_all(parent);
    }
    if let Err(e) = std::fs::write(&name, out) {
        eprintln!(
            "patch: **** Can't create file {name} : {}",
            crate::own::reason(&e)
        );
        return 2;
    }
    i32::from(!failed.is_empty())
}

/// The text of a `.rej` file: the file's headers as written, then the hunks.
fn rejects(fp: &FilePatch, name: &str, hunks: &[&Hunk]) -> String {
    // As GNU: the file patched in place of the names written, their time stamps kept.
    let rename = |header: &str, mark: &str| {
        let rest = header.strip_prefix(mark).unwrap_or(header);
        let tail = rest.find('\t').map_or("", |t| &rest[t..]);
        format!("{mark}{name}{tail}")
    };
    let mut text = format!(
        "{}\n{}\n",
        rename(&fp.headers.0, "--- "),
        rename(&fp.headers.1, "+++ ")
    );
    for h in hunks {
        text.push_str(&h.header);
        text.push('\n');
        for l in &h.lines {
            text.push(l.kind as char);
            text.push_str(&l.text);
            text.push('\n');
        }
    }
    text
}
