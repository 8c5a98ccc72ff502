//! Moving the working tree and index: `checkout`, `switch`, `restore`, `reset`.

use std::collections::BTreeSet;
use std::path::Path;

use super::cmds::{Args, split_dashdash, unknown_option};
use super::diff::{self, Delta, Files};
use super::refs::valid_ref_name;
use super::staging::{State, matches, remove_empty_parents, specs, state};
use super::store::{self, Id, Index, IndexEntry, Stat, hash_object, hex, io_fail, read_work_file};
use super::{Fail, Git, R, error, fatal, ident, usage};

// ---------------------------------------------------------------- checkout, switch, restore, reset

/// Moves the index and working tree from HEAD's files to `target`'s, keeping local changes
/// to files the two commits agree on, and refusing (before touching anything) when a local
/// change or an untracked file would be lost.
pub(super) fn move_tree(g: &mut Git, target: &Files, force: bool) -> R<Vec<Delta>> {
    let st = state(g, true)?;
    if !st.index.conflicts.is_empty() {
        return Err(Fail {
            msg: format!(
                "error: you need to resolve your current index first\n{}",
                st.index
                    .conflicts
                    .keys()
                    .map(|p| format!("{p}: needs merge"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
            code: 1,
        });
    }
    let cur = &st.head_files;
    let mut index = st.index;
    let mut dirty = Vec::new();
    let mut untracked_hit = Vec::new();
    let paths: BTreeSet<&String> = cur.keys().chain(target.keys()).collect();
    for p in &paths {
        let (c, t) = (cur.get(*p), target.get(*p));
        if c == t {
            continue;
        }
        let staged = index.entries.get(*p).map(|e| (e.mode, e.id)).as_ref() != c;
        let unstaged = st.unstaged.iter().any(|d| &d.path == *p);
        let index_is_target = index.entries.get(*p).map(|e| (e.mode, e.id)).as_ref() == t;
        if (staged || unstaged) && !index_is_target && !force {
            dirty.push((*p).clone());
        }
        if c.is_none() && !index.entries.contains_key(*p) && st.untracked.contains(p) && !force {
            let same = read_work_file(&g.work_path(p), g.filemode())
                .ok()
                .is_some_and(|(_, d)| t.is_some_and(|t| hash_object("blob", &d) == t.1));
            if !same {
                untracked_hit.push((*p).clone());
            }
        }
    }
    if !dirty.is_empty() {
        return Err(Fail {
            msg: format!(
                "error: Your local changes to the following files would be overwritten by checkout:\n{}\nPlease commit your changes or stash them before you switch branches.\nAborting",
                dirty
                    .iter()
                    .map(|p| format!("\t{p}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
            code: 1,
        });
    }
    if !untracked_hit.is_empty() {
        return Err(Fail {
            msg: format!(
                "error: The following untracked working tree files would be overwritten by checkout:\n{}\nPlease move or remove them before you switch branches.\nAborting",
                untracked_hit
                    .iter()
                    .map(|p| format!("\t{p}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
            code: 1,
        });
    }
    for p in &paths {
        let (c, t) = (cur.get(*p), target.get(*p));
        if c == t && !force {
            continue;
        }
        match t {
            Some(t) => write_file(g, &mut index, p, t)?,
            None => {
                if index.entries.remove(*p).is_some() || force {
                    let _ = std::fs::remove_file(g.work_path(p));
                    remove_empty_parents(g, p);
                }
            }
        }
    }
    if force {
        // Staged files that neither commit has go too.
        let staged: Vec<String> = index.entries.keys().cloned().collect();
        remove_absent(g, &mut index, &staged, target);
    }
    g.repo.write_index(&index)?;
    // What stays modified, for the `M\tpath` lines.
    let after = state(g, false)?;
    let mut left = diff::compare(target, &after.index.files(), false);
    for d in after.unstaged {
        if !left.iter().any(|x| x.path == d.path) {
            left.push(d);
        }
    }
    left.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(left)
}

/// Writes a blob to the working tree and records it in the index.
pub(super) fn write_file(g: &Git, index: &mut Index, path: &str, (mode, id): &(u32, Id)) -> R<()> {
    let full = g.work_path(path);
    let data = g.repo.read(id)?.1;
    write_file_data(&full, *mode, &data)?;
    let stat = std::fs::symlink_metadata(&full)
        .map(|m| Stat::of(&m))
        .unwrap_or_default();
    index.entries.insert(
        path.to_string(),
        IndexEntry {
            mode: *mode,
            id: *id,
            stat,
        },
    );
    Ok(())
}

/// Puts `data` at `full` as a file of git's `mode` (a symlink for 120000, executable for
/// 100755), replacing a directory or file in the way and making its parents.
pub(super) fn write_file_data(full: &Path, mode: u32, data: &[u8]) -> R<()> {
    if let Some(d) = full.parent()
        && !d.as_os_str().is_empty()
    {
        if d.is_file() {
            let _ = std::fs::remove_file(d);
        }
        std::fs::create_dir_all(d).map_err(|e| io_fail(d, e))?;
    }
    if full.is_dir() && !full.is_symlink() {
        let _ = std::fs::remove_dir_all(full);
    }
    let _ = std::fs::remove_file(full);
    if mode == 0o120000 {
        let target = String::from_utf8_lossy(data).into_owned();
        crate::archive::symlink(&target, full).map_err(|e| {
            fatal(format!(
                "unable to create symlink '{}': {}",
                full.display(),
                guest_support::cli::reason(&e)
            ))
        })?;
    } else {
        std::fs::write(full, data).map_err(|e| io_fail(full, e))?;
        if mode == 0o100755 {
            let _ = guest_support::set_file_mode(&full.to_string_lossy(), 0o755);
        }
    }
    Ok(())
}

pub(super) fn say_left(g: &mut Git, left: &[Delta]) {
    for d in left {
        let l = if d.new.is_none() { 'D' } else { d.letter() };
        g.say(&format!("{l}\t{}\n", d.path));
    }
}

pub(super) enum Target {
    Branch(String),
    NewBranch(String, bool),
    Detach,
}

pub(super) fn switch_to(
    g: &mut Git,
    rev: Option<&str>,
    target: Target,
    force: bool,
    quiet: bool,
) -> R<i32> {
    let cur_branch = g.repo.branch();
    let id = match rev {
        Some(r) => Some(
            g.commit_of(r)
                .map_err(|_| match &target {
                    Target::NewBranch(..) => fatal(format!(
                        "'{r}' is not a commit and a branch cannot be created from it"
                    )),
                    _ => fatal(format!("invalid reference: {r}")),
                })?
                .0,
        ),
        None => g.repo.head(),
    };
    if let Target::NewBranch(n, reset) = &target {
        if !valid_ref_name(n) {
            return Err(fatal(format!("'{n}' is not a valid branch name")));
        }
        if g.repo.ref_id(&format!("refs/heads/{n}")).is_some() && !reset {
            return Err(fatal(format!("a branch named '{n}' already exists")));
        }
    }
    let target_files = match id {
        Some(id) => g.repo.flatten(&g.repo.commit(&id)?.tree)?,
        None => Files::new(),
    };
    let left = if id == g.repo.head() && !force {
        let st = state(g, false)?;
        let mut l = st.staged.clone();
        for d in st.unstaged {
            if !l.iter().any(|x| x.path == d.path) {
                l.push(d);
            }
        }
        l.sort_by(|a, b| a.path.cmp(&b.path));
        l
    } else {
        move_tree(g, &target_files, force)?
    };
    let head_path = g.repo.git_dir.join("HEAD");
    let from = cur_branch
        .clone()
        .or_else(|| g.repo.head().map(|h| hex(&h)))
        .unwrap_or_else(|| "HEAD".into());
    let to = match &target {
        Target::Branch(b) | Target::NewBranch(b, _) => b.clone(),
        Target::Detach => rev.unwrap_or("HEAD").to_string(),
    };
    if let (Some(new), Ok(who)) = (id, ident(&g.repo, "COMMITTER")) {
        g.repo.reflog(
            g.repo.head(),
            &new,
            &who,
            &format!("checkout: moving from {from} to {to}"),
            false,
        );
    }
    match &target {
        Target::Branch(b) => {
            std::fs::write(&head_path, format!("ref: refs/heads/{b}\n"))
                .map_err(|e| io_fail(&head_path, e))?;
            if !quiet {
                say_left(g, &left);
            }
            if !quiet {
                g.flush();
                if cur_branch.as_deref() == Some(b.as_str()) {
                    eprintln!("Already on '{b}'");
                } else {
                    eprintln!("Switched to branch '{b}'");
                }
            }
        }
        Target::NewBranch(n, reset) => {
            if let Some(id) = id {
                g.repo.set_ref(&format!("refs/heads/{n}"), &id)?;
            }
            std::fs::write(&head_path, format!("ref: refs/heads/{n}\n"))
                .map_err(|e| io_fail(&head_path, e))?;
            if !quiet {
                say_left(g, &left);
                g.flush();
                if *reset && cur_branch.as_deref() == Some(n.as_str()) {
                    eprintln!("Reset branch '{n}'");
                } else if *reset {
                    eprintln!("Switched to and reset branch '{n}'");
                } else {
                    eprintln!("Switched to a new branch '{n}'");
                }
            }
        }
        Target::Detach => {
            let id = id.ok_or_else(|| fatal("You are on a branch yet to be born".into()))?;
            let was_detached = cur_branch.is_none();
            std::fs::write(&head_path, format!("{}\n", hex(&id)))
                .map_err(|e| io_fail(&head_path, e))?;
            if !quiet {
                say_left(g, &left);
                g.flush();
                let c = g.repo.commit(&id)?;
                if !was_detached {
                    eprintln!(
                        "Note: switching to '{}'.\n\nYou are in 'detached HEAD' state. You can look around, make experimental\nchanges and commit them, and you can discard any commits you make in this\nstate without impacting any branches by switching back to a branch.\n\nIf you want to create a new branch to retain commits you create, you may\ndo so (now or later) by using -c with the switch command. Example:\n\n  git switch -c <new-branch-name>\n\nOr undo this operation with:\n\n  git switch -\n\nTurn off this advice by setting config variable advice.detachedHead to false\n",
                        rev.unwrap_or("HEAD")
                    );
                }
                eprintln!("HEAD is now at {} {}", g.repo.abbrev(&id), c.subject());
            }
        }
    }
    Ok(0)
}

pub(super) fn checkout(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let mut a = Args::new(opts);
    let (mut new_branch, mut force, mut quiet, mut detach) =
        (None::<(String, bool)>, false, false, false);
    let mut rest = Vec::new();
    while let Some(x) = a.next() {
        match x.as_str() {
            "-b" | "-B" => {
                let n = a.next().ok_or_else(|| {
                    usage(format!("error: switch `{}' requires a value", &x[1..]))
                })?;
                new_branch = Some((n, x == "-B"));
            }
            "-f" | "--force" => force = true,
            "-q" | "--quiet" => quiet = true,
            "--detach" => detach = true,
            "--no-track" | "--track" | "-t" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => rest.push(x),
        }
    }
    previous_for_dash(g, &mut rest)?;
    // Paths: `checkout [rev] -- paths`, or names that are not revisions.
    if after.is_some()
        || (rest.len() > 1 && new_branch.is_none())
        || (rest.len() == 1 && new_branch.is_none() && g.resolve(&rest[0]).is_none())
    {
        let dashdash = after.is_some();
        let (source, paths) = match after {
            Some(p) => (rest.first().cloned(), p),
            None => {
                if g.resolve(&rest[0]).is_some() {
                    (Some(rest[0].clone()), rest[1..].to_vec())
                } else {
                    (None, rest.clone())
                }
            }
        };
        if paths.is_empty() {
            if let Some(s) = source {
                return switch_like(g, &s, new_branch, force, quiet, detach);
            }
            return Ok(0);
        }
        let only = match rest.first() {
            Some(r) if rest.len() == 1 && source.is_none() => Some(g.repo_path(r)?),
            _ => None,
        };
        if let Some(spec) = only
            && !g.work_path(&spec).exists()
            && g.repo
                .read_index()?
                .entries
                .keys()
                .all(|p| !matches(std::slice::from_ref(&spec), p))
        {
            return Err(error(format!(
                "pathspec '{}' did not match any file(s) known to git",
                rest[0]
            )));
        }
        let n = restore_paths(g, source.as_deref(), &paths, source.is_some(), true)?;
        // Git counts the paths only when they were not after `--`.
        if !quiet && !dashdash {
            g.flush();
            eprintln!(
                "Updated {n} path{} from {}",
                if n == 1 { "" } else { "s" },
                if let Some(src) = source.as_deref() {
                    g.repo.abbrev(&g.commit_of(src)?.1.tree)
                } else {
                    "the index".to_string()
                }
            );
        }
        return Ok(0);
    }
    let target = rest.first().cloned();
    match (new_branch, target) {
        (Some((n, reset)), start) => switch_to(
            g,
            start.as_deref(),
            Target::NewBranch(n, reset),
            force,
            quiet,
        ),
        (None, Some(t)) => switch_like(g, &t, None, force, quiet, detach),
        (None, None) => {
            let st = state(g, false)?;
            let mut l = st.staged.clone();
            for d in st.unstaged {
                if !l.iter().any(|x| x.path == d.path) {
                    l.push(d);
                }
            }
            l.sort_by(|a, b| a.path.cmp(&b.path));
            say_left(g, &l);
            Ok(0)
        }
    }
}

/// `switch NAME` / `checkout NAME` where only one remote has a branch NAME: a new branch
/// there, set to track it (git's `--guess`).
pub(super) fn track_remote(g: &mut Git, t: &str, quiet: bool) -> R<Option<i32>> {
    let hits: Vec<(String, Id)> = super::remote::remote_refs(g)
        .into_iter()
        .filter(|(n, _, target)| target.is_none() && n.split_once('/').is_some_and(|(_, b)| b == t))
        .map(|(n, id, _)| (n, id))
        .collect();
    let [(name, _)] = hits.as_slice() else {
        return Ok(None);
    };
    let remote = name.split_once('/').unwrap().0.to_string();
    let code = switch_to(
        g,
        Some(name),
        Target::NewBranch(t.to_string(), false),
        false,
        true,
    )?;
    let config = g.repo.git_dir.join("config");
    store::set_config(&config, &format!("branch.{t}.remote"), Some(&remote))?;
    store::set_config(
        &config,
        &format!("branch.{t}.merge"),
        Some(&format!("refs/heads/{t}")),
    )?;
    if !quiet {
        g.say(&format!("branch '{t}' set up to track '{name}'.\n"));
        g.flush();
        eprintln!("Switched to a new branch '{t}'");
    }
    Ok(Some(code))
}

pub(super) fn switch_like(
    g: &mut Git,
    t: &str,
    _nb: Option<(String, bool)>,
    force: bool,
    quiet: bool,
    detach: bool,
) -> R<i32> {
    if !detach && g.repo.ref_id(&format!("refs/heads/{t}")).is_some() {
        return switch_to(g, Some(t), Target::Branch(t.to_string()), force, quiet);
    }
    if !detach
        && g.resolve(t).is_none()
        && let Some(r) = track_remote(g, t, quiet)?
    {
        return Ok(r);
    }
    if !detach && g.repo.head().is_none() && g.repo.branch().as_deref() == Some(t) {
        return switch_to(g, None, Target::Branch(t.to_string()), force, quiet);
    }
    if g.resolve(t).and_then(|i| g.peel(&i)).is_none() {
        return Err(error(format!(
            "pathspec '{t}' did not match any file(s) known to git"
        )));
    }
    switch_to(g, Some(t), Target::Detach, force, quiet)
}

/// `-` names the branch (or commit) of the checkout before the last one.
pub(super) fn previous_for_dash(g: &Git, rest: &mut [String]) -> R<()> {
    if let Some(first) = rest.first_mut()
        && first == "-"
    {
        *first = g
            .repo
            .previous_checkout()
            .ok_or_else(|| fatal("invalid reference: @{-1}".into()))?;
    }
    Ok(())
}

pub(super) fn switch(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut a = Args::new(args);
    let (mut create, mut force, mut quiet, mut detach) =
        (None::<(String, bool)>, false, false, false);
    let mut rest = Vec::new();
    while let Some(x) = a.next() {
        match x.as_str() {
            "-c" | "-C" | "--create" | "--force-create" => {
                let n = a.next().ok_or_else(|| {
                    usage(format!(
                        "error: switch `{}' requires a value",
                        x.trim_start_matches('-')
                    ))
                })?;
                create = Some((n, x == "-C" || x == "--force-create"));
            }
            "-f" | "--force" | "--discard-changes" => force = true,
            "-q" | "--quiet" => quiet = true,
            "-d" | "--detach" => detach = true,
            "--no-track" | "--track" | "-t" | "--" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => rest.push(x),
        }
    }
    previous_for_dash(g, &mut rest)?;
    if let Some((n, reset)) = create {
        return switch_to(
            g,
            rest.first().map(String::as_str),
            Target::NewBranch(n, reset),
            force,
            quiet,
        );
    }
    let Some(t) = rest.first().cloned() else {
        return Err(fatal("missing branch or commit argument".into()));
    };
    if detach {
        return switch_to(g, Some(&t), Target::Detach, force, quiet);
    }
    if g.repo.ref_id(&format!("refs/heads/{t}")).is_none() {
        if let Some(r) = track_remote(g, &t, quiet)? {
            return Ok(r);
        }
        if g.resolve(&t).is_some() {
            return Err(fatal(format!(
                "a branch is expected, got commit '{t}'\nhint: If you want to detach HEAD at the commit, try again with the --detach option."
            )));
        }
        return Err(fatal(format!("invalid reference: {t}")));
    }
    switch_to(g, Some(&t), Target::Branch(t.clone()), force, quiet)
}

/// Points the index entry of `path` at a blob from a tree; its stat data goes unless the
/// blob is the same, so the next look at the working tree compares content.
pub(super) fn set_entry(index: &mut Index, path: &str, (mode, id): &(u32, Id)) {
    let stat = match index.entries.get(path) {
        Some(e) if e.id == *id && e.mode == *mode => e.stat.clone(),
        _ => Stat::default(),
    };
    index.entries.insert(
        path.to_string(),
        IndexEntry {
            mode: *mode,
            id: *id,
            stat,
        },
    );
}

/// The index takes `from`'s version of every path `sp` matches, and loses those `from`
/// lacks (`reset -- paths`, `restore --staged`).
pub(super) fn set_entries(index: &mut Index, from: &Files, sp: &[String]) {
    let all: BTreeSet<String> = from
        .keys()
        .chain(index.entries.keys())
        .filter(|p| matches(sp, p))
        .cloned()
        .collect();
    for p in all {
        match from.get(&p) {
            Some(t) => set_entry(index, &p, t),
            None => {
                index.entries.remove(&p);
            }
        }
    }
}

/// Copies `paths` from a commit (or the index) to the index (`staged`) and/or the working
/// tree; returns how many files were written.
pub(super) fn restore_paths(
    g: &mut Git,
    source: Option<&str>,
    paths: &[String],
    staged: bool,
    worktree: bool,
) -> R<usize> {
    let sp = specs(g, paths)?;
    let mut index = g.repo.read_index()?;
    let from: Files = match source {
        Some(r) => {
            let (_, c) = g.commit_of(r)?;
            g.repo.flatten(&c.tree)?
        }
        None if staged && !worktree => g.head_files()?,
        None => index.files(),
    };
    for (arg, s) in paths.iter().zip(&sp) {
        let hit = from.keys().any(|p| matches(std::slice::from_ref(s), p))
            || index
                .entries
                .keys()
                .any(|p| matches(std::slice::from_ref(s), p));
        if !hit {
            return Err(error(format!(
                "pathspec '{arg}' did not match any file(s) known to git"
            )));
        }
    }
    let mut n = 0;
    let targets: BTreeSet<String> = from
        .keys()
        .chain(index.entries.keys())
        .filter(|p| matches(&sp, p))
        .cloned()
        .collect();
    for p in targets {
        match from.get(&p) {
            Some(t) => {
                if worktree {
                    let mut scratch = Index::default();
                    write_file(g, &mut scratch, &p, t)?;
                    if staged || source.is_some() {
                        index
                            .entries
                            .insert(p.clone(), scratch.entries.remove(&p).unwrap());
                    } else if let Some(e) = index.entries.get_mut(&p) {
                        e.stat = scratch.entries.remove(&p).unwrap().stat;
                    }
                } else {
                    set_entry(&mut index, &p, t);
                }
                n += 1;
            }
            None => {
                if staged || source.is_some() {
                    index.entries.remove(&p);
                    if worktree {
                        let _ = std::fs::remove_file(g.work_path(&p));
                    }
                }
            }
        }
    }
    g.repo.write_index(&index)?;
    Ok(n)
}

pub(super) fn restore(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let mut a = Args::new(opts);
    let (mut staged, mut worktree, mut source) = (false, false, None::<String>);
    let mut paths = after.unwrap_or_default();
    while let Some(x) = a.next() {
        if let Some(v) = a.value(&x, "-s", "--source")? {
            source = Some(v);
            continue;
        }
        match x.as_str() {
            "-S" | "--staged" => staged = true,
            "-W" | "--worktree" => worktree = true,
            "-q" | "--quiet" | "--no-overlay" | "--overlay" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(x),
        }
    }
    if paths.is_empty() {
        return Err(fatal("you must specify path(s) to restore".into()));
    }
    if !staged {
        worktree = true;
    }
    let src = source
        .clone()
        .or_else(|| (staged && g.repo.head().is_some()).then(|| "HEAD".to_string()));
    if staged && !worktree {
        // Unstage: the index takes the source's version (or loses a file HEAD lacks).
        let sp = specs(g, &paths)?;
        let mut index = g.repo.read_index()?;
        let from = match &src {
            Some(r) => g.repo.flatten(&g.commit_of(r)?.1.tree)?,
            None => Files::new(),
        };
        for (arg, s) in paths.iter().zip(&sp) {
            if !from
                .keys()
                .chain(index.entries.keys())
                .any(|p| matches(std::slice::from_ref(s), p))
            {
                return Err(error(format!(
                    "pathspec '{arg}' did not match any file(s) known to git"
                )));
            }
        }
        set_entries(&mut index, &from, &sp);
        g.repo.write_index(&index)?;
        return Ok(0);
    }
    restore_paths(g, src.as_deref(), &paths, staged, worktree)?;
    Ok(0)
}

pub(super) fn reset(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let (mut mode, mut quiet) = ("mixed", false);
    let mut rest = Vec::new();
    for a in opts {
        match a.as_str() {
            "--soft" => mode = "soft",
            "--mixed" => mode = "mixed",
            "--hard" => mode = "hard",
            "--keep" | "--merge" => mode = "keep",
            "-q" | "--quiet" => quiet = true,
            "--no-refresh" | "--refresh" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => rest.push(a),
        }
    }
    let mut paths = after.unwrap_or_default();
    let rev = match rest.first() {
        Some(r) if g.resolve(r).is_some() => {
            let r = r.clone();
            paths.extend(rest[1..].iter().cloned());
            Some(r)
        }
        Some(_) => {
            paths.extend(rest.iter().cloned());
            None
        }
        None => None,
    };
    if !paths.is_empty() {
        if mode != "mixed" {
            return Err(fatal(format!("Cannot do {mode} reset with paths.")));
        }
        let sp = specs(g, &paths)?;
        let from = match &rev {
            Some(r) => g.repo.flatten(&g.commit_of(r)?.1.tree)?,
            None => g.head_files()?,
        };
        let mut index = g.repo.read_index()?;
        set_entries(&mut index, &from, &sp);
        g.repo.write_index(&index)?;
        if !quiet {
            unstaged_after_reset(g)?;
        }
        return Ok(0);
    }
    let target = match &rev {
        Some(r) => g.commit_of(r)?.0,
        None => {
            match g.repo.head() {
                Some(h) => h,
                None => {
                    // Before the first commit, a reset empties the index.
                    if mode == "mixed" {
                        g.repo.write_index(&Index::default())?;
                        return Ok(0);
                    }
                    return Err(fatal("ambiguous argument 'HEAD': unknown revision or path not in the working tree.".into()));
                }
            }
        }
    };
    let c = g.repo.commit(&target)?;
    let files = g.repo.flatten(&c.tree)?;
    match mode {
        "soft" => {}
        "mixed" => {
            let mut index = g.repo.read_index()?;
            index.conflicts.clear();
            set_entries(&mut index, &files, &[]);
            g.repo.write_index(&index)?;
        }
        _ => {
            let st = state(g, false)?;
            reset_to(g, &st, &files)?;
        }
    }
    let before = g.repo.head();
    if mode != "soft" {
        super::merge::clear_merge_state(g);
    }
    g.repo.set_head(&target)?;
    if let Ok(who) = ident(&g.repo, "COMMITTER") {
        let to = rev.as_deref().unwrap_or("HEAD");
        g.repo.reflog(
            before,
            &target,
            &who,
            &format!("reset: moving to {to}"),
            true,
        );
    }
    if !quiet {
        if mode == "hard" {
            g.say(&format!(
                "HEAD is now at {} {}\n",
                g.repo.abbrev(&target),
                c.subject()
            ));
        } else if mode == "mixed" {
            unstaged_after_reset(g)?;
        }
    }
    Ok(0)
}

pub(super) fn unstaged_after_reset(g: &mut Git) -> R<()> {
    let st = state(g, false)?;
    if !st.unstaged.is_empty() {
        g.say("Unstaged changes after reset:\n");
        for d in &st.unstaged {
            let l = if d.new.is_none() { 'D' } else { 'M' };
            g.say(&format!("{l}\t{}\n", d.path));
        }
    }
    Ok(())
}

/// Index and tracked files become exactly `target` (`reset --hard`, `stash`, `merge --abort`,
/// `cherry-pick --abort`): changed or dirty files are written, files the target lacks go
/// (conflicted ones included), and unchanged entries keep their stat data.
pub(super) fn reset_to(g: &Git, st: &State, target: &Files) -> R<()> {
    let mut index = Index {
        entries: st.index.entries.clone(),
        ..Index::default()
    };
    let dirty: BTreeSet<&String> = st.unstaged.iter().map(|d| &d.path).collect();
    for (p, t) in target {
        if index.entries.get(p).map(|e| (e.mode, e.id)) != Some(*t) || dirty.contains(p) {
            write_file(g, &mut index, p, t)?;
        }
    }
    // The entries written above are all in the target, so the original ones stand for
    // the index here.
    remove_absent(
        g,
        &mut index,
        st.index.entries.keys().chain(st.index.conflicts.keys()),
        target,
    );
    g.repo.write_index(&index)
}

/// Takes every path of `paths` that `target` lacks out of `index` and the working tree
/// (with the directories that leaves empty).
fn remove_absent<'a>(
    g: &Git,
    index: &mut Index,
    paths: impl IntoIterator<Item = &'a String>,
    target: &Files,
) {
    let absent: Vec<&String> = paths
        .into_iter()
        .filter(|p| !target.contains_key(*p))
        .collect();
    for p in absent {
        index.entries.remove(p);
        let _ = std::fs::remove_file(g.work_path(p));
        remove_empty_parents(g, p);
    }
}
