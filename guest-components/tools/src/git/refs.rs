//! Names: `rev-parse`, `branch`, `tag`, `show-ref`, `symbolic-ref`, and `check-ignore` (whether
//! a path is ignored).

use std::collections::BTreeSet;

use guest_support::cli::glob;

use super::cmds::{Args, unknown_option};
use super::commit::cleanup;
use super::history::walk;
use super::ignore::Ignore;
use super::staging::ancestors_ignored;
use super::store::{Id, Kind, hex, io_fail};
use super::{Fail, Git, R, error, fatal, format_date, ident, usage};

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
    // `-n[NUM]`: list with the first NUM lines of each tag's message (or its commit's).
    let mut lines: Option<usize> = None;
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
            "-n" => lines = Some(1),
            s if s.starts_with("-n") && s[2..].chars().all(|c| c.is_ascii_digit()) => {
                lines = s[2..].parse().ok();
            }
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
    if names.is_empty() || list || lines.is_some() {
        for (name, id) in g.repo.refs("refs/tags/") {
            let short = name.trim_start_matches("refs/tags/");
            if !names.is_empty() && !names.iter().any(|p| glob(p, short)) {
                continue;
            }
            let Some(n) = lines else {
                g.say(&format!("{short}\n"));
                continue;
            };
            let message = match g.repo.read(&id)? {
                (Kind::Tag | Kind::Commit, data) => {
                    let text = String::from_utf8_lossy(&data).into_owned();
                    text.split_once("\n\n")
                        .map_or(String::new(), |m| m.1.to_string())
                }
                _ => String::new(),
            };
            let mut shown = format!("{short:<15} ");
            for (i, line) in message.trim_end().lines().take(n.max(1)).enumerate() {
                if i > 0 {
                    shown.push_str("\n    ");
                }
                shown.push_str(line);
            }
            g.say(&format!("{shown}\n"));
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

// ---------------------------------------------------------------- for-each-ref

/// What `for-each-ref` knows of one ref: its name and object, and (peeled through an
/// annotated tag to its target) the commit's or tag's fields.
struct RefItem {
    name: String,
    id: Id,
    kind: Kind,
    data: Vec<u8>,
}

impl RefItem {
    fn load(g: &Git, name: String, id: Id) -> R<RefItem> {
        let (kind, data) = g.repo.read(&id)?;
        Ok(RefItem {
            name,
            id,
            kind,
            data,
        })
    }

    /// The header lines and the message of a commit or tag.
    fn parts(&self) -> (String, String) {
        let s = String::from_utf8_lossy(&self.data).into_owned();
        match s.split_once("\n\n") {
            Some((h, m)) => (h.to_string(), m.to_string()),
            None => (s, String::new()),
        }
    }

    fn header(&self, key: &str) -> Option<String> {
        if !matches!(self.kind, Kind::Commit | Kind::Tag) {
            return None;
        }
        self.parts()
            .0
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key} ")).map(str::to_string))
    }

    /// The date a sort by `key` compares, and the text an atom shows.
    fn atom(&self, g: &Git, atom: &str) -> R<(String, Option<i64>)> {
        if let Some(inner) = atom.strip_prefix('*') {
            // Through an annotated tag to what it tags; nothing for other refs.
            if self.kind != Kind::Tag {
                return Ok((String::new(), None));
            }
            let Some(target) = self
                .header("object")
                .and_then(|h| super::store::parse_hex(&h))
            else {
                return Ok((String::new(), None));
            };
            return RefItem::load(g, self.name.clone(), target)?.atom(g, inner);
        }
        let (name, modifier) = atom.split_once(':').unwrap_or((atom, ""));
        let ident_field = |who: &str, field: &str| -> (String, Option<i64>) {
            let Some(line) = self.header(who) else {
                return (String::new(), None);
            };
            let i = super::store::parse_ident(&line);
            match field {
                "name" => (i.name.to_string(), None),
                "email" if modifier == "trim" => (i.email.to_string(), None),
                "email" => (format!("<{}>", i.email), None),
                _ => {
                    let style = match modifier {
                        "" => "default",
                        m => m.strip_prefix("format:").unwrap_or(m),
                    };
                    (format_date(i.time, i.tz, style), Some(i.time))
                }
            }
        };
        let message = || self.parts().1;
        Ok(match name {
            "refname" => {
                let n = &self.name;
                let shown = match modifier {
                    "" => n.clone(),
                    "short" => ["refs/heads/", "refs/tags/", "refs/remotes/", "refs/"]
                        .iter()
                        .find_map(|p| n.strip_prefix(p))
                        .unwrap_or(n)
                        .to_string(),
                    m => {
                        let k: usize = m
                            .strip_prefix("lstrip=")
                            .or_else(|| m.strip_prefix("strip="))
                            .and_then(|k| k.parse().ok())
                            .ok_or_else(|| {
                                fatal(format!("unrecognized %(refname) argument: {m}"))
                            })?;
                        n.split('/').skip(k).collect::<Vec<_>>().join("/")
                    }
                };
                (shown, None)
            }
            "objectname" => match modifier {
                "" => (hex(&self.id), None),
                "short" => (g.repo.abbrev(&self.id), None),
                m => match m.strip_prefix("short=").and_then(|k| k.parse().ok()) {
                    Some(k) => (g.repo.abbrev_len(&self.id, k), None),
                    None => {
                        return Err(fatal(format!("unrecognized %(objectname) argument: {m}")));
                    }
                },
            },
            "objecttype" => (self.kind.name().to_string(), None),
            "objectsize" => (self.data.len().to_string(), None),
            "HEAD" => {
                let current = g.repo.head_ref();
                let star = current.as_deref() == Some(self.name.as_str());
                ((if star { "*" } else { " " }).to_string(), None)
            }
            "tree" => (self.header("tree").unwrap_or_default(), None),
            "parent" => {
                let (h, _) = self.parts();
                let ps: Vec<&str> = h
                    .lines()
                    .filter_map(|l| l.strip_prefix("parent "))
                    .collect();
                (ps.join(" "), None)
            }
            "subject" => (message().lines().next().unwrap_or("").to_string(), None),
            "body" => {
                let m = message();
                (m.split_once("\n\n").map_or("", |x| x.1).to_string(), None)
            }
            "contents" => match modifier {
                "" => (message(), None),
                "subject" => (message().lines().next().unwrap_or("").to_string(), None),
                "body" => {
                    let m = message();
                    (m.split_once("\n\n").map_or("", |x| x.1).to_string(), None)
                }
                m => return Err(fatal(format!("unrecognized %(contents) argument: {m}"))),
            },
            "authorname" => ident_field("author", "name"),
            "authoremail" => ident_field("author", "email"),
            "authordate" => ident_field("author", "date"),
            "committername" => ident_field("committer", "name"),
            "committeremail" => ident_field("committer", "email"),
            "committerdate" => ident_field("committer", "date"),
            "taggername" => ident_field("tagger", "name"),
            "taggeremail" => ident_field("tagger", "email"),
            "taggerdate" => ident_field("tagger", "date"),
            "creatordate" => match self.kind {
                Kind::Tag => ident_field("tagger", "date"),
                _ => ident_field("committer", "date"),
            },
            "upstream" | "push" => {
                let up = self
                    .name
                    .strip_prefix("refs/heads/")
                    .and_then(|b| super::remote::upstream(g, b));
                match (up, modifier) {
                    (None, _) => (String::new(), None),
                    (Some(u), "short") => (u.name, None),
                    (Some(u), _) => {
                        let full = if u.name.contains('/') {
                            format!("refs/remotes/{}", u.name)
                        } else {
                            format!("refs/heads/{}", u.name)
                        };
                        (full, None)
                    }
                }
            }
            "color" | "align" | "end" => (String::new(), None),
            _ => return Err(fatal(format!("unknown field name: {name}"))),
        })
    }
}

/// Expands `%(atom)`, `%%` and `%xx` (a hex byte) in a `for-each-ref` format.
fn expand_ref_format(g: &Git, item: &RefItem, format: &str) -> R<String> {
    let mut out = String::new();
    let mut rest = format;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        rest = &rest[i + 1..];
        if let Some(r) = rest.strip_prefix('%') {
            out.push('%');
            rest = r;
        } else if let Some(r) = rest.strip_prefix('(') {
            let end = r
                .find(')')
                .ok_or_else(|| fatal(format!("malformed format string {format}")))?;
            out.push_str(&item.atom(g, &r[..end])?.0);
            rest = &r[end + 1..];
        } else if rest.len() >= 2
            && let Ok(b) = u8::from_str_radix(&rest[..2], 16)
        {
            out.push(b as char);
            rest = &rest[2..];
        } else {
            out.push('%');
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// `git for-each-ref [--format=FORMAT] [--sort=KEY]... [--count=N] [PATTERN...]`: every ref
/// (or those a pattern names, whole path components from the start or a glob), sorted by
/// name unless `--sort` says otherwise (`-KEY` reverses; the last key decides first).
pub(super) fn for_each_ref(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut format = "%(objectname) %(objecttype)\t%(refname)".to_string();
    let mut sorts: Vec<String> = Vec::new();
    let mut count: Option<usize> = None;
    let mut patterns: Vec<String> = Vec::new();
    let mut a = Args::new(args);
    while let Some(x) = a.next() {
        if let Some(v) = a.value(&x, "", "--format")? {
            format = v;
        } else if let Some(v) = a.value(&x, "", "--sort")? {
            sorts.push(v);
        } else if let Some(v) = a.value(&x, "", "--count")? {
            count = Some(
                v.parse()
                    .map_err(|_| fatal(format!("'{v}': not an integer")))?,
            );
        } else if x == "--" {
            continue;
        } else if x.starts_with('-') && x.len() > 1 {
            return Err(unknown_option(&x));
        } else {
            patterns.push(x);
        }
    }
    let wanted = |name: &str| {
        patterns.is_empty()
            || patterns.iter().any(|p| {
                let p = p.trim_end_matches('/');
                name == p || name.starts_with(&format!("{p}/")) || glob(p, name)
            })
    };
    let mut items = Vec::new();
    for (name, id) in g.repo.refs("refs/") {
        if wanted(&name) {
            items.push(RefItem::load(g, name, id)?);
        }
    }
    if sorts.is_empty() {
        sorts.push("refname".into());
    }
    for key in &sorts {
        let (desc, key) = match key.strip_prefix('-') {
            Some(k) => (true, k),
            None => (false, key.as_str()),
        };
        let (version, key) = match key
            .strip_prefix("version:")
            .or_else(|| key.strip_prefix("v:"))
        {
            Some(k) => (true, k),
            None => (false, key),
        };
        let mut keyed = Vec::new();
        for item in items {
            let k = item.atom(g, key)?;
            keyed.push((k, item));
        }
        keyed.sort_by(|(x, _), (y, _)| {
            let o = match (x.1, y.1) {
                (Some(a), Some(b)) => a.cmp(&b),
                _ if version => version_cmp(&x.0, &y.0),
                _ => x.0.cmp(&y.0),
            };
            if desc { o.reverse() } else { o }
        });
        items = keyed.into_iter().map(|(_, i)| i).collect();
    }
    let mut out = String::new();
    for item in items.iter().take(count.unwrap_or(usize::MAX)) {
        out.push_str(&expand_ref_format(g, item, &format)?);
        out.push('\n');
    }
    g.say(&out);
    Ok(0)
}

/// Orders names as versions: runs of digits by their value (`v1.10` after `v1.9`).
fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn runs(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ra, rb) = (runs(a), runs(b));
    for ((da, xa), (db, xb)) in ra.iter().zip(&rb) {
        let o = if *da && *db {
            let (ta, tb) = (xa.trim_start_matches('0'), xb.trim_start_matches('0'));
            ta.len().cmp(&tb.len()).then(ta.cmp(tb))
        } else {
            xa.cmp(xb)
        };
        if o.is_ne() {
            return o;
        }
    }
    ra.len().cmp(&rb.len())
}
