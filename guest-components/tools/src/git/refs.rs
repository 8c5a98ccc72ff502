//! Names: `rev-parse`, `branch`, `tag`, `show-ref`, `symbolic-ref`, and `check-ignore` (whether
//! a path is ignored).

use std::collections::BTreeSet;

use guest_support::cli::glob;

use super::ignore::Ignore;
use super::store::{Id, Kind, hex, io_fail};
use super::{Fail, Git, R, error, fatal, ident, usage};

use super::cmds::*;
use super::history::*;

// ---------------------------------------------------------------- rev-parse

pub(super) fn rev_parse(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut short: Option<usize> = None;
    let mut verify = false;
    let mut quiet = false;
    let mut abbrev_ref = false;
    let mut out = String::new();
    let mut failed: Option<String> = None;
    for a in &args {
        match a.as_str() {
            "--show-toplevel" => out.push_str(&format!("{}\n", g.repo.work.display())),
            "--git-dir" => {
                let gd = &g.repo.git_dir;
                if g.prefix.is_empty() && gd == &g.repo.work.join(".git") {
                    out.push_str(".git\n");
                } else {
                    out.push_str(&format!("{}\n", gd.display()));
                }
            }
            "--absolute-git-dir" | "--git-common-dir" => {
                out.push_str(&format!("{}\n", g.repo.git_dir.display()))
            }
            "--is-inside-work-tree" => {
                let cwd = std::env::current_dir().unwrap_or_default();
                let in_git_dir = cwd.starts_with(&g.repo.git_dir);
                out.push_str(if in_git_dir { "false\n" } else { "true\n" });
            }
            "--is-inside-git-dir" => {
                let cwd = std::env::current_dir().unwrap_or_default();
                let inside = cwd.starts_with(&g.repo.git_dir);
                out.push_str(if inside { "true\n" } else { "false\n" });
            }
            "--is-bare-repository" | "--is-shallow-repository" => out.push_str("false\n"),
            "--show-prefix" => out.push_str(&format!("{}\n", g.prefix)),
            "--show-cdup" => {
                let ups = g.prefix.matches('/').count();
                out.push_str(&format!("{}\n", "../".repeat(ups)));
            }
            "--short" => short = Some(0),
            "--verify" => verify = true,
            "-q" | "--quiet" => quiet = true,
            "--abbrev-ref" | "--abbrev-ref=strict" | "--abbrev-ref=loose" => abbrev_ref = true,
            "--symbolic-full-name" => abbrev_ref = false,
            "--" => {}
            s if s.starts_with("--short=") => short = s[8..].parse().ok(),
            s if s.starts_with('-') && s.len() > 1 => out.push_str(&format!("{s}\n")),
            rev => {
                if abbrev_ref {
                    let name = if rev == "HEAD" || rev == "@" {
                        g.repo.branch().unwrap_or_else(|| "HEAD".into())
                    } else if g.resolve(rev).is_some() {
                        rev.to_string()
                    } else {
                        failed = Some(rev.into());
                        break;
                    };
                    if rev == "HEAD" && g.repo.head().is_none() {
                        failed = Some(rev.into());
                        break;
                    }
                    out.push_str(&format!("{name}\n"));
                    continue;
                }
                let (name, peel) = match rev
                    .strip_suffix("^{commit}")
                    .or_else(|| rev.strip_suffix("^{}"))
                {
                    Some(n) => (n, true),
                    None => (rev, false),
                };
                let id = g
                    .resolve(name)
                    .and_then(|id| if peel { g.peel(&id) } else { Some(id) });
                match id {
                    Some(id) => match short {
                        Some(n) => out.push_str(&format!("{}\n", g.repo.abbrev_len(&id, n))),
                        None => out.push_str(&format!("{}\n", hex(&id))),
                    },
                    None => {
                        failed = Some(rev.into());
                        break;
                    }
                }
            }
        }
    }
    if let Some(rev) = failed {
        if verify || short.is_some() {
            g.say(&out);
            if quiet {
                return Ok(1);
            }
            return Err(fatal("Needed a single revision".into()));
        }
        out.push_str(&format!("{rev}\n"));
        g.say(&out);
        return Err(super::bad_revision(&rev));
    }
    g.say(&out);
    Ok(0)
}

// ---------------------------------------------------------------- branch, tag

pub(super) fn valid_ref_name(n: &str) -> bool {
    !n.is_empty()
        && !n.starts_with('-')
        && !n.starts_with('/')
        && !n.ends_with('/')
        && !n.ends_with(".lock")
        && !n.ends_with('.')
        && !n.contains("..")
        && !n.contains("@{")
        && !n.contains("//")
        && n != "@"
        && !n
            .chars()
            .any(|c| c.is_ascii_control() || " ~^:?*[\\".contains(c))
}

pub(super) fn branch(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut a = Args::new(args);
    // (local branches, remote-tracking ones)
    let mut listing = (true, false);
    // --merged / --no-merged, and the commit they are about (HEAD by default).
    let mut merged: Option<(bool, Option<String>)> = None;
    let (mut delete, mut force, mut rename, mut verbose, mut show_current, mut copy) =
        (false, false, false, 0, false, false);
    let mut names = Vec::new();
    while let Some(x) = a.next() {
        match x.as_str() {
            "-d" | "--delete" => delete = true,
            "-D" => {
                delete = true;
                force = true;
            }
            "-f" | "--force" => force = true,
            "-m" | "--move" => rename = true,
            "-M" => {
                rename = true;
                force = true;
            }
            "-c" | "--copy" => copy = true,
            "-v" | "--verbose" => verbose += 1,
            "-vv" => verbose += 2,
            "--show-current" => show_current = true,
            "--merged" | "--no-merged" => merged = Some((x == "--merged", None)),
            s if s.starts_with("--merged=") || s.starts_with("--no-merged=") => {
                let (flag, rev) = s.split_once('=').unwrap();
                merged = Some((flag == "--merged", Some(rev.to_string())));
            }
            "-a" | "--all" => listing = (true, true),
            "-r" | "--remotes" => listing = (false, true),
            "-l" | "--list" | "--no-color" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => names.push(x),
        }
    }
    let cur = g.repo.branch();
    if show_current {
        if let Some(b) = cur {
            g.say(&format!("{b}\n"));
        }
        return Ok(0);
    }
    if delete {
        if names.is_empty() {
            return Err(fatal("branch name required".into()));
        }
        let mut code = 0;
        for n in names {
            let r = format!("refs/heads/{n}");
            let Some(id) = g.repo.ref_id(&r) else {
                eprintln!("error: branch '{n}' not found");
                code = 1;
                continue;
            };
            if cur.as_deref() == Some(n.as_str()) {
                eprintln!(
                    "error: cannot delete branch '{n}' used by worktree at '{}'",
                    g.repo.work.display()
                );
                code = 1;
                continue;
            }
            if !force {
                let head = g.repo.head();
                let merged = match head {
                    Some(h) => walk(g, &[h], &[], false)?.iter().any(|(c, _)| *c == id),
                    None => false,
                };
                if !merged {
                    eprintln!(
                        "error: the branch '{n}' is not fully merged\nhint: If you are sure you want to delete it, run 'git branch -D {n}'\nhint: Disable this message with \"git config advice.forceDeleteBranch false\""
                    );
                    code = 1;
                    continue;
                }
            }
            g.repo.delete_ref(&r)?;
            g.say(&format!(
                "Deleted branch {n} (was {}).\n",
                g.repo.abbrev(&id)
            ));
        }
        return Ok(code);
    }
    if rename || copy {
        let (old, new) = match names.len() {
            1 => (
                cur.clone().ok_or_else(|| {
                    fatal("cannot rename the current branch while not on any".into())
                })?,
                names[0].clone(),
            ),
            2 => (names[0].clone(), names[1].clone()),
            _ => return Err(fatal("too many arguments for a rename operation".into())),
        };
        if !valid_ref_name(&new) {
            return Err(fatal(format!("'{new}' is not a valid branch name")));
        }
        let new_ref = format!("refs/heads/{new}");
        if g.repo.ref_id(&new_ref).is_some() && !force && old != new {
            return Err(fatal(format!("a branch named '{new}' already exists")));
        }
        let old_ref = format!("refs/heads/{old}");
        match g.repo.ref_id(&old_ref) {
            Some(id) => {
                g.repo.set_ref(&new_ref, &id)?;
                if !copy && old != new {
                    g.repo.delete_ref(&old_ref)?;
                }
            }
            None if cur.as_deref() == Some(old.as_str()) && g.repo.head().is_none() => {}
            None => {
                return Err(error(format!(
                    "refname refs/heads/{old} not found\nfatal: branch rename failed"
                )));
            }
        }
        if !copy && cur.as_deref() == Some(old.as_str()) {
            let p = g.repo.git_dir.join("HEAD");
            std::fs::write(&p, format!("ref: {new_ref}\n")).map_err(|e| io_fail(&p, e))?;
        }
        return Ok(0);
    }
    if let Some(n) = names.first() {
        if !valid_ref_name(n) {
            return Err(fatal(format!("'{n}' is not a valid branch name")));
        }
        let r = format!("refs/heads/{n}");
        if g.repo.ref_id(&r).is_some() && !force {
            return Err(fatal(format!("a branch named '{n}' already exists")));
        }
        let start = names.get(1).map_or("HEAD", String::as_str);
        let id = match g.resolve(start).and_then(|i| g.peel(&i)) {
            Some(id) => id,
            None if start == "HEAD" => {
                return Err(fatal(format!(
                    "not a valid object name: '{}'",
                    cur.unwrap_or_else(|| "HEAD".into())
                )));
            }
            None => return Err(fatal(format!("not a valid object name: '{start}'"))),
        };
        g.repo.set_ref(&r, &id)?;
        return Ok(0);
    }
    // List: (shown name, current, tip, upstream bracket for -vv, symbolic target).
    let mut rows: Vec<(String, bool, Option<Id>, Option<String>)> = Vec::new();
    if listing.0 {
        if cur.is_none()
            && let Some(h) = g.repo.head()
        {
            rows.push((
                format!("(HEAD detached at {})", g.repo.abbrev(&h)),
                true,
                Some(h),
                None,
            ));
        }
        let reachable: Option<(bool, BTreeSet<Id>)> = match &merged {
            Some((want, rev)) => {
                let tip = match rev {
                    Some(r) => g.commit_of(r)?.0,
                    None => g
                        .repo
                        .head()
                        .ok_or_else(|| fatal("malformed object name HEAD".into()))?,
                };
                Some((
                    *want,
                    walk(g, &[tip], &[], false)?
                        .into_iter()
                        .map(|(id, _)| id)
                        .collect(),
                ))
            }
            None => None,
        };
        for (name, id) in g.repo.refs("refs/heads/") {
            if let Some((want, set)) = &reachable
                && set.contains(&id) != *want
            {
                continue;
            }
            let short = name.trim_start_matches("refs/heads/").to_string();
            let is_cur = cur.as_deref() == Some(short.as_str());
            let bracket = match super::remote::tracking_short(g, &short, Some(id))? {
                Some((up, c)) if verbose > 1 && c.is_empty() => Some(format!("[{up}] ")),
                Some((up, c)) if verbose > 1 => Some(format!("[{up}: {c}] ")),
                Some((_, c)) if verbose == 1 && !c.is_empty() => Some(format!("[{c}] ")),
                _ => None,
            };
            rows.push((short, is_cur, Some(id), bracket));
        }
    }
    let mut symbolic: Vec<(String, String)> = Vec::new();
    if listing.1 {
        let prefix = if listing.0 { "remotes/" } else { "" };
        for (name, id, target) in super::remote::remote_refs(g) {
            match target {
                Some(t) => symbolic.push((format!("{prefix}{name}"), t)),
                None => rows.push((format!("{prefix}{name}"), false, Some(id), None)),
            }
        }
    }
    let width = rows
        .iter()
        .map(|r| r.0.chars().count())
        .chain(symbolic.iter().map(|r| r.0.chars().count()))
        .max()
        .unwrap_or(0);
    let mut lines: Vec<(String, String)> = Vec::new();
    for (name, is_cur, id, bracket) in rows {
        let mark = if is_cur { "* " } else { "  " };
        let line = match id {
            Some(id) if verbose > 0 => {
                let c = g.repo.commit(&id)?;
                format!(
                    "{mark}{name:<width$} {} {}{}\n",
                    g.repo.abbrev(&id),
                    bracket.unwrap_or_default(),
                    c.subject()
                )
            }
            _ => format!("{mark}{name}\n"),
        };
        lines.push((name, line));
    }
    for (name, target) in symbolic {
        lines.push((name.clone(), format!("  {name} -> {target}\n")));
    }
    // Local branches first (the detached line before them), then remote-tracking ones by
    // name.
    let local_count = lines
        .iter()
        .filter(|(n, _)| !n.starts_with("remotes/"))
        .count();
    if listing.0 && listing.1 {
        lines[local_count..].sort_by(|a, b| a.0.cmp(&b.0));
    } else if !listing.0 {
        lines.sort_by(|a, b| a.0.cmp(&b.0));
    }
    for (_, l) in lines {
        g.say(&l);
    }
    Ok(0)
}

pub(super) fn tag(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut a = Args::new(args);
    let (mut delete, mut annotate, mut force, mut list) = (false, false, false, false);
    let mut msgs = Vec::new();
    let mut names = Vec::new();
    while let Some(x) = a.next() {
        if let Some(v) = a.value(&x, "-m", "--message")? {
            msgs.push(v);
            annotate = true;
            continue;
        }
        match x.as_str() {
            "-d" | "--delete" => delete = true,
            "-a" | "--annotate" => annotate = true,
            "-f" | "--force" => force = true,
            "-l" | "--list" => list = true,
            "-n" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => names.push(x),
        }
    }
    if delete {
        for n in &names {
            let r = format!("refs/tags/{n}");
            match g.repo.ref_id(&r) {
                Some(id) => {
                    g.repo.delete_ref(&r)?;
                    g.say(&format!("Deleted tag '{n}' (was {})\n", g.repo.abbrev(&id)));
                }
                None => return Err(error(format!("tag '{n}' not found."))),
            }
        }
        return Ok(0);
    }
    if names.is_empty() || list {
        for name in g.repo.refs("refs/tags/").keys() {
            let short = name.trim_start_matches("refs/tags/");
            if names.is_empty() || names.iter().any(|p| glob(p, short)) {
                g.say(&format!("{short}\n"));
            }
        }
        return Ok(0);
    }
    let n = &names[0];
    if !valid_ref_name(n) {
        return Err(fatal(format!("'{n}' is not a valid tag name.")));
    }
    let r = format!("refs/tags/{n}");
    if g.repo.ref_id(&r).is_some() && !force {
        return Err(fatal(format!("tag '{n}' already exists")));
    }
    let target = names.get(1).map_or("HEAD", String::as_str);
    let id = g
        .resolve(target)
        .ok_or_else(|| fatal(format!("Failed to resolve '{target}' as a valid ref.")))?;
    let id = if annotate {
        if msgs.is_empty() {
            return Err(Fail {
                msg: "error: Terminal is dumb, but EDITOR unset\nPlease supply the message using either -m or -F option.".into(),
                code: 1,
            });
        }
        let tagger = ident(&g.repo, "COMMITTER")?;
        let kind = g.repo.read(&id)?.0;
        let body = format!(
            "object {}\ntype {}\ntag {n}\ntagger {tagger}\n\n{}",
            hex(&id),
            kind.name(),
            cleanup(&msgs.join("\n\n"), false)
        );
        g.repo.write(Kind::Tag, body.as_bytes())?
    } else {
        id
    };
    g.repo.set_ref(&r, &id)?;
    Ok(0)
}

pub(super) fn check_ignore(g: &mut Git, args: Vec<String>) -> R<i32> {
    let quiet = args.iter().any(|a| a == "-q" || a == "--quiet");
    let paths: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if paths.is_empty() {
        return Err(fatal("no path specified".into()));
    }
    let index = g.repo.read_index()?;
    let mut any = false;
    for arg in paths {
        let p = g.repo_path(arg)?;
        // Rules of every directory on the way down apply.
        let mut ig = Ignore::new(&g.repo);
        let mut at = 0;
        while let Some(i) = p[at..].find('/') {
            let dir = &p[..at + i + 1];
            ig.add_file(&g.work_path(dir).join(".gitignore"), dir);
            at += i + 1;
        }
        let is_dir = g.work_path(&p).is_dir();
        if !index.entries.contains_key(&p) && (ig.ignored(&p, is_dir) || ancestors_ignored(&ig, &p))
        {
            any = true;
            if !quiet {
                g.say(&format!("{arg}\n"));
            }
        }
    }
    Ok(if any { 0 } else { 1 })
}

pub(super) fn show_ref(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut any = false;
    let mut all: Vec<(String, Id)> = Vec::new();
    for prefix in ["refs/heads/", "refs/tags/", "refs/remotes/"] {
        all.extend(g.repo.refs(prefix));
    }
    let (heads, tags) = (
        args.iter().any(|a| a == "--heads" || a == "--branches"),
        args.iter().any(|a| a == "--tags"),
    );
    let pats: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    for (name, id) in all {
        if (heads || tags)
            && !((heads && name.starts_with("refs/heads/"))
                || (tags && name.starts_with("refs/tags/")))
        {
            continue;
        }
        if !pats.is_empty()
            && !pats
                .iter()
                .any(|p| name == **p || name.ends_with(&format!("/{p}")))
        {
            continue;
        }
        any = true;
        g.say(&format!("{} {name}\n", hex(&id)));
    }
    Ok(if any { 0 } else { 1 })
}

pub(super) fn symbolic_ref(g: &mut Git, args: Vec<String>) -> R<i32> {
    let short = args.iter().any(|a| a == "--short");
    let rest: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    match rest.as_slice() {
        [name] if name.as_str() == "HEAD" => match g.repo.head_ref() {
            Some(r) => {
                let shown = if short {
                    r.trim_start_matches("refs/heads/").to_string()
                } else {
                    r
                };
                g.say(&format!("{shown}\n"));
                Ok(0)
            }
            None => Err(fatal("ref HEAD is not a symbolic ref".into())),
        },
        [name, target] if name.as_str() == "HEAD" && target.starts_with("refs/") => {
            let p = g.repo.git_dir.join("HEAD");
            std::fs::write(&p, format!("ref: {target}\n")).map_err(|e| io_fail(&p, e))?;
            Ok(0)
        }
        _ => Err(usage(
            "usage: git symbolic-ref [-q] [--short] HEAD [<ref>]".into(),
        )),
    }
}
