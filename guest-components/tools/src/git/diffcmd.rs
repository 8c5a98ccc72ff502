//! `git diff`: options shared with `log` and `show`, and the command itself.

use std::collections::BTreeSet;

use super::cmds::{split_dashdash, unknown_option};
use super::diff::{self, Delta, Files, Listing, Output, Show, Source, Ws};
use super::staging::{matches, specs, state};
use super::{Git, R, fatal, usage};

pub(super) struct DiffOpts {
    pub(super) out: Output,
    /// A format option was given (otherwise the command's default applies).
    pub(super) chosen: bool,
    pub(super) no_patch: bool,
    pub(super) show: Show,
    pub(super) quiet: bool,
    pub(super) exit_code: bool,
}

impl DiffOpts {
    pub(super) fn new() -> DiffOpts {
        DiffOpts {
            out: Output::default(),
            chosen: false,
            no_patch: false,
            show: Show::default(),
            quiet: false,
            exit_code: false,
        }
    }

    /// What to print, given the command's default (a patch for `diff` and `show`).
    pub(super) fn output(&self, default_patch: bool) -> Output {
        if self.no_patch {
            return Output {
                patch: false,
                ..self.out
            };
        }
        if !self.chosen {
            return Output {
                patch: default_patch,
                ..Output::default()
            };
        }
        self.out
    }
}

/// Options shared by `diff`, `log` and `show`; returns whether `a` was one.
pub(super) fn diff_option(a: &str, o: &mut DiffOpts) -> bool {
    let listing = match a {
        "--stat" => Some(Listing::Stat),
        a if a.starts_with("--stat=") => Some(Listing::Stat),
        "--numstat" => Some(Listing::Numstat),
        "--shortstat" => Some(Listing::Shortstat),
        "--name-only" => Some(Listing::NameOnly),
        "--name-status" => Some(Listing::NameStatus),
        _ => None,
    };
    if let Some(l) = listing {
        o.out.listing = Some(l);
        o.chosen = true;
        return true;
    }
    match a {
        "-p" | "-u" | "--patch" => {
            o.out.patch = true;
            o.chosen = true;
        }
        "--summary" => {
            o.out.summary = true;
            o.chosen = true;
        }
        "-s" | "--no-patch" => o.no_patch = true,
        "-w" | "--ignore-all-space" => o.show.ws = Ws::All,
        "-b" | "--ignore-space-change" => o.show.ws = Ws::Change,
        "--ignore-space-at-eol" => o.show.ws = Ws::AtEol,
        "--ignore-cr-at-eol" => o.show.ws = Ws::CrAtEol,
        "--quiet" => {
            o.quiet = true;
            o.exit_code = true;
        }
        "--exit-code" => o.exit_code = true,
        "--no-color" | "--color=never" | "--no-ext-diff" | "--no-textconv" | "-M"
        | "--find-renames" | "--no-renames" | "--full-index" | "--binary" | "--color=auto"
        | "--color" | "--color=always" => {}
        "--no-prefix" => {
            o.show.src_prefix.clear();
            o.show.dst_prefix.clear();
        }
        a if a.starts_with("-U") || a.starts_with("--unified=") => {
            o.show.context = a
                .trim_start_matches("-U")
                .trim_start_matches("--unified=")
                .parse()
                .unwrap_or(3);
            o.out.patch = true;
            o.chosen = true;
        }
        a if a.starts_with("--src-prefix=") => o.show.src_prefix = a[13..].to_string(),
        a if a.starts_with("--dst-prefix=") => o.show.dst_prefix = a[13..].to_string(),
        _ => return false,
    }
    true
}

pub(super) fn diff_cmd(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let mut o = DiffOpts::new();
    let mut cached = false;
    let mut filter: Option<String> = None;
    let mut revs: Vec<String> = Vec::new();
    let mut paths = after.clone().unwrap_or_default();
    for a in opts {
        if diff_option(&a, &mut o) {
            continue;
        }
        match a.as_str() {
            "--cached" | "--staged" => cached = true,
            s if s.starts_with("--diff-filter=") => filter = Some(s[14..].to_string()),
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => {
                if after.is_none() && !paths.is_empty() {
                    paths.push(a);
                } else if a.contains("..") || g.resolve(&a).is_some() {
                    revs.push(a);
                } else if after.is_none() && g.work_path(&g.repo_path(&a)?).exists() {
                    paths.push(a);
                } else if after.is_none() {
                    return Err(super::bad_revision(&a));
                } else {
                    return Err(fatal(format!("bad revision '{a}'")));
                }
            }
        }
    }
    let sp = specs(g, &paths)?;
    let tree_of = |g: &Git, rev: &str| -> R<Files> {
        let (_, c) = g.commit_of(rev)?;
        g.repo.flatten(&c.tree)
    };
    if revs.len() == 1 && revs[0].contains("..") {
        let r = revs.remove(0);
        let (a, b) = r.split_once("..").unwrap();
        let b = b.trim_start_matches('.');
        // git names the whole range when an end of it is not a revision.
        for end in [a, b] {
            if !end.is_empty() && g.resolve(end).is_none() {
                return Err(super::bad_revision(&r));
            }
        }
        revs = vec![
            if a.is_empty() {
                "HEAD".into()
            } else {
                a.to_string()
            },
            if b.is_empty() {
                "HEAD".into()
            } else {
                b.to_string()
            },
        ];
    }
    let (mut ds, src) = match (cached, revs.len()) {
        (true, n) if n <= 1 => {
            let base = match revs.first() {
                Some(r) => tree_of(g, r)?,
                None => g.head_files()?,
            };
            let index = g.repo.read_index()?;
            (diff::compare(&base, &index.files(), true), Source::Objects)
        }
        (false, 0) => {
            let st = state(g, false)?;
            (st.unstaged, Source::Worktree)
        }
        (false, 1) => {
            // A commit against the working tree: the index's view of the files, with the
            // working tree's changes over it.
            let base = tree_of(g, &revs[0])?;
            let st = state(g, false)?;
            let mut files = st.index.files();
            let mut from_work = BTreeSet::new();
            for d in &st.unstaged {
                match d.new {
                    Some(n) => {
                        files.insert(d.path.clone(), n);
                        from_work.insert(d.path.clone());
                    }
                    None => {
                        files.remove(&d.path);
                    }
                }
            }
            let ds = diff::compare(&base, &files, false);
            // Content of changed files comes from the working tree; unchanged-in-work
            // files have their blob in the object store.
            let mut out = Vec::new();
            for d in ds {
                if from_work.contains(&d.path) {
                    out.push((d, Source::Worktree));
                } else {
                    out.push((d, Source::Objects));
                }
            }
            out.retain(|(d, _)| matches(&sp, &d.path));
            return finish_mixed_diff(g, out, &o);
        }
        (false, 2) => {
            let (a, b) = (tree_of(g, &revs[0])?, tree_of(g, &revs[1])?);
            (diff::compare(&a, &b, true), Source::Objects)
        }
        _ => {
            return Err(usage(
                "usage: git diff [<options>] [<commit>] [--] [<path>...]".into(),
            ));
        }
    };
    ds.retain(|d| matches(&sp, &d.path) || d.from.as_deref().is_some_and(|f| matches(&sp, f)));
    if let Some(f) = &filter {
        // Upper-case letters keep those kinds, lower-case ones drop them; `U` is the paths
        // a merge left unresolved.
        let (keep, drop): (String, String) = f.chars().partition(|c| c.is_ascii_uppercase());
        ds.retain(|d| {
            let l = d.letter();
            (keep.is_empty() || keep.contains(l)) && !drop.to_ascii_uppercase().contains(l)
        });
        if keep.contains('U') {
            let index = g.repo.read_index()?;
            for p in index.conflicts.keys().filter(|p| matches(&sp, p)) {
                ds.push(Delta {
                    path: p.clone(),
                    from: None,
                    old: None,
                    new: None,
                });
            }
            ds.sort_by(|a, b| a.path.cmp(&b.path));
        }
    }
    if !o.quiet {
        let mut out = Vec::new();
        diff::write(g, &ds, src, &o.output(true), &o.show, &mut out);
        g.out.extend_from_slice(&out);
    }
    Ok(if o.exit_code && !ds.is_empty() { 1 } else { 0 })
}

pub(super) fn finish_mixed_diff(g: &mut Git, ds: Vec<(Delta, Source)>, o: &DiffOpts) -> R<i32> {
    if !o.quiet {
        let mut out = Vec::new();
        let work: BTreeSet<String> = ds
            .iter()
            .filter(|(_, s)| *s == Source::Worktree)
            .map(|(d, _)| d.path.clone())
            .collect();
        let all: Vec<Delta> = ds.into_iter().map(|(d, _)| d).collect();
        let src = |d: &Delta| {
            if work.contains(&d.path) {
                Source::Worktree
            } else {
                Source::Objects
            }
        };
        diff::write_with(g, &all, &src, &o.output(true), &o.show, &mut out);
        g.out.extend_from_slice(&out);
        return Ok(if o.exit_code && !all.is_empty() { 1 } else { 0 });
    }
    Ok(if o.exit_code && !ds.is_empty() { 1 } else { 0 })
}
