//! The state of the tree (what differs between HEAD, the index and the work tree), pathspecs,
//! and the commands that change the index: `add`, `rm`, `mv`.

use std::collections::BTreeSet;

use guest_support::cli::glob;

use super::cmds::{split_dashdash, unknown_option};
use super::diff::{self, Delta, Files};
use super::ignore::{self, Ignore};
use super::store::{Id, Index, IndexEntry, Kind, Stat, read_work_file};
use super::{Fail, Git, R, error, fatal, usage};

/// The three trees and what differs between them.
pub(super) struct State {
    pub head: Option<Id>,
    pub head_files: Files,
    pub index: Index,
    pub staged: Vec<Delta>,
    pub unstaged: Vec<Delta>,
    /// Untracked files, each a full path (no directories collapsed).
    pub untracked: Vec<String>,
}

pub(super) fn tracked_dirs(index: &Index) -> BTreeSet<String> {
    let mut dirs = BTreeSet::new();
    for p in index.entries.keys() {
        let mut at = 0;
        while let Some(i) = p[at..].find('/') {
            dirs.insert(p[..at + i + 1].to_string());
            at += i + 1;
        }
    }
    dirs
}

pub(super) fn state(g: &Git, want_untracked: bool) -> R<State> {
    let head = g.repo.head();
    let head_files = g.head_files()?;
    let mut index = g.repo.read_index()?;
    let mut staged = diff::compare(&head_files, &index.files(), true);
    staged.retain(|d| !index.conflicts.contains_key(&d.path));
    let mut refresh = Vec::new();
    let unstaged = diff::worktree_changes(g, &index.entries, &mut refresh);
    if !refresh.is_empty() {
        for (p, st) in refresh {
            if let Some(e) = index.entries.get_mut(&p) {
                e.stat = st;
            }
        }
        let _ = g.repo.write_index(&index);
    }
    let mut untracked = Vec::new();
    if want_untracked {
        let mut ig = Ignore::new(&g.repo);
        let (entries, conflicts) = (&index.entries, &index.conflicts);
        ignore::untracked(
            &g.repo.work,
            "",
            &mut ig,
            &|p| entries.contains_key(p) || conflicts.contains_key(p),
            &mut untracked,
        );
    }
    Ok(State {
        head,
        head_files,
        index,
        staged,
        unstaged,
        untracked,
    })
}

/// Paths from the command line as paths from the top; `.` and a directory name cover
/// everything under them, and `*`, `?` and `[` match as git's pathspecs (across `/`).
pub(super) fn specs(g: &Git, args: &[String]) -> R<Vec<String>> {
    args.iter().map(|a| g.repo_path(a)).collect()
}

pub(super) fn matches(specs: &[String], path: &str) -> bool {
    specs.is_empty()
        || specs.iter().any(|s| {
            s.is_empty()
                || path == s
                || (path.starts_with(s.as_str()) && path.as_bytes().get(s.len()) == Some(&b'/'))
                || (s.contains(['*', '?', '[']) && glob(s, path))
        })
}

pub(super) fn stage_file(g: &Git, index: &mut Index, path: &str) -> R<()> {
    let full = g.work_path(path);
    let (mode, data) = read_work_file(&full, g.filemode()).map_err(|e| {
        error(format!(
            "open(\"{path}\"): {}",
            guest_support::cli::reason(&e)
        ))
    })?;
    let mode = if !g.filemode() && mode != 0o120000 {
        index.entries.get(path).map_or(mode, |e| e.mode)
    } else {
        mode
    };
    let id = g.repo.write(Kind::Blob, &data)?;
    let stat = std::fs::symlink_metadata(&full)
        .map(|m| Stat::of(&m))
        .unwrap_or_default();
    // A file replaces a directory of the same name and the other way round.
    let prefix = format!("{path}/");
    index.entries.retain(|p, _| !p.starts_with(&prefix));
    let mut at = 0;
    while let Some(i) = path[at..].find('/') {
        index.entries.remove(&path[..at + i]);
        at += i + 1;
    }
    index
        .entries
        .insert(path.to_string(), IndexEntry { mode, id, stat });
    // Adding a path marks its conflict resolved.
    index.conflicts.remove(path);
    Ok(())
}

// ---------------------------------------------------------------- add, rm, mv

pub(super) fn add(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let (mut all, mut update, mut force, mut verbose, mut dry) =
        (false, false, false, false, false);
    let mut paths = after.unwrap_or_default();
    for a in opts {
        match a.as_str() {
            "-A" | "--all" | "--no-ignore-removal" => all = true,
            "-u" | "--update" => update = true,
            "-f" | "--force" => force = true,
            "-v" | "--verbose" => verbose = true,
            "-n" | "--dry-run" => dry = true,
            "--ignore-errors" | "-N" | "--intent-to-add" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(a),
        }
    }
    if paths.is_empty() && !all && !update {
        eprintln!(
            "Nothing specified, nothing added.\nhint: Maybe you wanted to say 'git add .'?\nhint: Disable this message with \"git config advice.addEmptyPathspec false\""
        );
        return Ok(0);
    }
    let sp = if paths.is_empty() {
        vec![String::new()]
    } else {
        specs(g, &paths)?
    };
    let st = state(g, !update)?;
    let mut index = st.index;
    let ig = Ignore::new(&g.repo);
    // Every pathspec must match something, tracked or on disk.
    let mut ignored_named = Vec::new();
    for (arg, s) in paths.iter().zip(&sp) {
        let on_disk = std::fs::symlink_metadata(g.work_path(s)).is_ok();
        let tracked = index
            .entries
            .keys()
            .any(|p| matches(std::slice::from_ref(s), p));
        let untracked_hit = st
            .untracked
            .iter()
            .any(|p| matches(std::slice::from_ref(s), p));
        if !on_disk && !tracked && !untracked_hit {
            return Err(fatal(format!("pathspec '{arg}' did not match any files")));
        }
        if on_disk && !tracked && !untracked_hit && !force && !s.is_empty() {
            let is_dir = g.work_path(s).is_dir();
            if ig.ignored(s, is_dir) || ancestors_ignored(&ig, s) {
                ignored_named.push(arg.clone());
            }
        }
    }
    let mut names: Vec<(String, bool)> = Vec::new(); // (path, removed)
    for d in &st.unstaged {
        if matches(&sp, &d.path) {
            names.push((d.path.clone(), d.new.is_none()));
        }
    }
    for p in index.conflicts.keys() {
        if matches(&sp, p) {
            let gone = std::fs::symlink_metadata(g.work_path(p)).is_err();
            names.push((p.clone(), gone));
        }
    }
    if !update {
        for p in &st.untracked {
            if matches(&sp, p) {
                names.push((p.clone(), false));
            }
        }
        if force {
            for s in &sp {
                let full = g.work_path(s);
                if full.is_file() || full.is_symlink() {
                    names.push((s.clone(), false));
                } else if full.is_dir() {
                    walk_all(g, s, &mut names);
                }
            }
        }
    }
    // A directory holding a repository of its own is not added (git would add a gitlink,
    // a submodule, which this git does not keep).
    names.retain(|(p, _)| {
        let nested = p.ends_with('/');
        if nested {
            eprintln!(
                "warning: skipping embedded git repository: {}\nhint: this git does not keep submodules",
                p.trim_end_matches('/')
            );
        }
        !nested
    });
    names.sort();
    names.dedup();
    for (p, removed) in &names {
        if verbose || dry {
            if *removed {
                g.say(&format!("remove '{}'\n", g.relative(p)));
            } else {
                g.say(&format!("add '{}'\n", g.relative(p)));
            }
        }
        if dry {
            continue;
        }
        if *removed {
            index.entries.remove(p);
            index.conflicts.remove(p);
        } else {
            stage_file(g, &mut index, p)?;
        }
    }
    if !dry {
        g.repo.write_index(&index)?;
    }
    if !ignored_named.is_empty() {
        g.flush();
        return Err(Fail {
            msg: format!(
                "The following paths are ignored by one of your .gitignore files:\n{}\nhint: Use -f if you really want to add them.\nhint: Disable this message with \"git config advice.addIgnoredFile false\"",
                ignored_named.join("\n")
            ),
            code: 1,
        });
    }
    Ok(0)
}

pub(super) fn ancestors_ignored(ig: &Ignore, path: &str) -> bool {
    let mut at = 0;
    while let Some(i) = path[at..].find('/') {
        if ig.ignored(&path[..at + i], true) {
            return true;
        }
        at += i + 1;
    }
    false
}

pub(super) fn walk_all(g: &Git, dir: &str, out: &mut Vec<(String, bool)>) {
    let Ok(rd) = std::fs::read_dir(g.work_path(dir)) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == ".git" {
            continue;
        }
        let p = if dir.is_empty() {
            name
        } else {
            format!("{dir}/{name}")
        };
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            walk_all(g, &p, out);
        } else {
            out.push((p, false));
        }
    }
}

pub(super) fn rm(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let (mut cached, mut recursive, mut force, mut quiet) = (false, false, false, false);
    let mut paths = after.unwrap_or_default();
    for a in opts {
        match a.as_str() {
            "--cached" => cached = true,
            "-r" => recursive = true,
            "-f" | "--force" => force = true,
            "-q" | "--quiet" => quiet = true,
            "--ignore-unmatch" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(a),
        }
    }
    if paths.is_empty() {
        return Err(usage("usage: git rm [-f | --force] [-n] [-r] [--cached] [--ignore-unmatch]\n              [--quiet] [--pathspec-from-file=<file> [--pathspec-file-nul]]\n              [--] [<pathspec>...]".into()));
    }
    let sp = specs(g, &paths)?;
    let st = state(g, false)?;
    let mut index = st.index;
    let mut chosen = Vec::new();
    for (arg, s) in paths.iter().zip(&sp) {
        let hits: Vec<String> = index
            .entries
            .keys()
            .filter(|p| matches(std::slice::from_ref(s), p))
            .cloned()
            .collect();
        if hits.is_empty() {
            return Err(fatal(format!("pathspec '{arg}' did not match any files")));
        }
        if !recursive && !hits.iter().any(|h| h == s) && !s.contains(['*', '?', '[']) {
            return Err(fatal(format!(
                "not removing '{arg}' recursively without -r"
            )));
        }
        chosen.extend(hits);
    }
    chosen.sort();
    chosen.dedup();
    if !force {
        let modified: Vec<&String> = chosen
            .iter()
            .filter(|p| st.unstaged.iter().any(|d| &d.path == *p && d.new.is_some()))
            .collect();
        let staged: Vec<&String> = chosen
            .iter()
            .filter(|p| st.staged.iter().any(|d| &d.path == *p))
            .collect();
        if !modified.is_empty() && !cached {
            let (s, it) = if modified.len() == 1 {
                ("file has", "")
            } else {
                ("files have", "")
            };
            let _ = it;
            return Err(error(format!(
                "the following {s} local modifications:\n{}\n(use --cached to keep the file, or -f to force removal)",
                modified
                    .iter()
                    .map(|p| format!("    {}", g.relative(p)))
                    .collect::<Vec<_>>()
                    .join("\n")
            )));
        }
        if !staged.is_empty() && !cached && st.head.is_some() {
            let both: Vec<&&String> = staged.iter().filter(|p| modified.contains(p)).collect();
            if !both.is_empty() {
                return Err(error(format!(
                    "the following file has staged content different from both the\nfile and the HEAD:\n{}\n(use -f to force removal)",
                    both.iter()
                        .map(|p| format!("    {}", g.relative(p)))
                        .collect::<Vec<_>>()
                        .join("\n")
                )));
            }
        }
    }
    for p in &chosen {
        if !quiet {
            g.say(&format!("rm '{p}'\n"));
        }
        index.entries.remove(p);
        if !cached {
            let full = g.work_path(p);
            let _ = std::fs::remove_file(&full);
            remove_empty_parents(g, p);
        }
    }
    g.repo.write_index(&index)?;
    Ok(0)
}

pub(super) fn remove_empty_parents(g: &Git, path: &str) {
    let mut p = path;
    while let Some(i) = p.rfind('/') {
        p = &p[..i];
        if std::fs::remove_dir(g.work_path(p)).is_err() {
            break;
        }
    }
}

pub(super) fn mv(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut paths = Vec::new();
    let (mut force, mut verbose) = (false, false);
    for a in args {
        match a.as_str() {
            "-f" | "--force" => force = true,
            "-v" | "--verbose" => verbose = true,
            "-k" | "--" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(a),
        }
    }
    if paths.len() < 2 {
        return Err(usage(
            "usage: git mv [<options>] <source>... <destination>".into(),
        ));
    }
    let dest_arg = paths.pop().unwrap();
    let dest = g.repo_path(&dest_arg)?;
    let dest_is_dir = g.work_path(&dest).is_dir();
    if paths.len() > 1 && !dest_is_dir {
        return Err(fatal(format!(
            "destination '{dest_arg}' is not a directory"
        )));
    }
    let mut index = g.repo.read_index()?;
    for src_arg in &paths {
        let src = g.repo_path(src_arg)?;
        let name = src.rsplit('/').next().unwrap_or(&src).to_string();
        let to = if dest_is_dir {
            if dest.is_empty() {
                name
            } else {
                format!("{dest}/{name}")
            }
        } else {
            dest.clone()
        };
        let moved: Vec<String> = index
            .entries
            .keys()
            .filter(|p| **p == src || p.starts_with(&format!("{src}/")))
            .cloned()
            .collect();
        if !g.work_path(&src).exists() && !g.work_path(&src).is_symlink() {
            return Err(fatal(format!(
                "bad source, source={src_arg}, destination={}",
                dest_arg
            )));
        }
        if moved.is_empty() {
            return Err(fatal(format!(
                "not under version control, source={src_arg}, destination={}",
                g.relative(&to)
            )));
        }
        if g.work_path(&to).exists() && !force && !g.work_path(&to).is_dir() {
            return Err(fatal(format!(
                "destination exists, source={src_arg}, destination={}",
                g.relative(&to)
            )));
        }
        if verbose {
            g.say(&format!(
                "Renaming {} to {}\n",
                g.relative(&src),
                g.relative(&to)
            ));
        }
        std::fs::rename(g.work_path(&src), g.work_path(&to)).map_err(|e| {
            fatal(format!(
                "renaming '{src_arg}' failed: {}",
                guest_support::cli::reason(&e)
            ))
        })?;
        for p in moved {
            let e = index.entries.remove(&p).unwrap();
            let np = format!("{to}{}", &p[src.len()..]);
            index.entries.insert(np, e);
        }
    }
    g.repo.write_index(&index)?;
    Ok(0)
}
