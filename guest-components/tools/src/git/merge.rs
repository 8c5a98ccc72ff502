//! `git merge`: fast-forward, or a three-way merge of the two histories from their merge
//! base, file by file and, where both sides changed a text file, line by line (non-
//! overlapping changes combine; overlapping different ones become git's conflict markers
//! and index stages 1-3, for `git add` and `git commit` to finish, or `merge --abort`).

use std::collections::BTreeSet;

use guest_support::textdiff::{Change, changes};

use super::checkout::write_file_data;
use super::diff::{self, Files, Listing, Output, Show, Source};
use super::history::walk;
use super::staging::{State, state};
use super::store::{Commit, Id, Index, IndexEntry, Kind, Stat, hex};
use super::{Fail, Git, R, error, fatal, ident};

/// The nearest commit both `a` and `b` reach (newest by commit date among the common ones).
pub fn merge_base(g: &Git, a: &Id, b: &Id) -> R<Option<Id>> {
    let from_a: BTreeSet<Id> = walk(g, &[*a], &[], false)?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    Ok(walk(g, &[*b], &[], false)?
        .into_iter()
        .map(|(id, _)| id)
        .find(|id| from_a.contains(id)))
}

const MERGE_BASE_USAGE: &str = "usage: git merge-base [-a | --all] <commit> <commit>...
   or: git merge-base --is-ancestor <commit> <commit>";

/// `git merge-base [--all] A B`: their nearest common ancestor (exit 1 when they have
/// none); `--is-ancestor A B`: exit 0 when A is B or one of its ancestors, else 1.
pub fn merge_base_cmd(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut is_ancestor = false;
    let mut revs = Vec::new();
    for a in args {
        match a.as_str() {
            "--is-ancestor" => is_ancestor = true,
            "-a" | "--all" => {}
            "--octopus" | "--independent" | "--fork-point" => {
                return Err(fatal(format!(
                    "merge-base {a} is not available in this sandbox's git"
                )));
            }
            s if s.starts_with('-') && s.len() > 1 => {
                return Err(super::cmds::unknown_option(s));
            }
            _ => revs.push(a),
        }
    }
    if revs.len() != 2 {
        return Err(super::usage(MERGE_BASE_USAGE.to_string()));
    }
    let commit = |r: &str| {
        g.resolve(r)
            .and_then(|id| g.peel(&id))
            .ok_or_else(|| fatal(format!("Not a valid object name {r}")))
    };
    let (a, b) = (commit(&revs[0])?, commit(&revs[1])?);
    if is_ancestor {
        let reached = walk(g, &[b], &[], false)?.iter().any(|(id, _)| *id == a);
        return Ok(if reached { 0 } else { 1 });
    }
    match merge_base(g, &a, &b)? {
        Some(id) => {
            g.say(&format!("{}\n", hex(&id)));
            Ok(0)
        }
        None => Ok(1),
    }
}

fn split(d: &[u8]) -> Vec<&[u8]> {
    d.split_inclusive(|&c| c == b'\n').collect()
}

/// Three-way merge of lines; `Err` carries the text with conflict markers.
fn merge_text(
    base: &[u8],
    ours: &[u8],
    theirs: &[u8],
    their_label: &str,
) -> Result<Vec<u8>, Vec<u8>> {
    let (b, o, t) = (split(base), split(ours), split(theirs));
    let co = changes(&b, &o);
    let ct = changes(&b, &t);
    // Groups of changes whose base ranges meet or touch, in base order.
    let mut all: Vec<(usize, Change)> = co
        .iter()
        .map(|c| (0, *c))
        .chain(ct.iter().map(|c| (1, *c)))
        .collect();
    all.sort_by_key(|(side, c)| (c.i1, c.i2, *side));
    let mut out = Vec::new();
    let mut conflict = false;
    let mut at = 0;
    let mut k = 0;
    while k < all.len() {
        let (mut lo, mut hi) = (all[k].1.i1, all[k].1.i2);
        let mut end = k + 1;
        while end < all.len() && all[end].1.i1 <= hi {
            hi = hi.max(all[end].1.i2);
            end += 1;
        }
        lo = lo.min(all[k].1.i1);
        for l in &b[at..lo] {
            out.extend_from_slice(l);
        }
        // Each side's version of base[lo..hi].
        let version = |side: usize, lines: &[&[u8]]| -> Option<Vec<u8>> {
            let cs: Vec<&Change> = all[k..end]
                .iter()
                .filter(|(s, _)| *s == side)
                .map(|(_, c)| c)
                .collect();
            if cs.is_empty() {
                return None;
            }
            let mut v = Vec::new();
            let mut i = lo;
            for c in cs {
                for l in &b[i..c.i1] {
                    v.extend_from_slice(l);
                }
                for l in &lines[c.j1..c.j2] {
                    v.extend_from_slice(l);
                }
                i = c.i2;
            }
            for l in &b[i..hi] {
                v.extend_from_slice(l);
            }
            Some(v)
        };
        match (version(0, &o), version(1, &t)) {
            (Some(x), None) | (None, Some(x)) => out.extend_from_slice(&x),
            (Some(x), Some(y)) if x == y => out.extend_from_slice(&x),
            (Some(x), Some(y)) => {
                conflict = true;
                let nl = |v: &mut Vec<u8>, part: &[u8]| {
                    v.extend_from_slice(part);
                    if !part.is_empty() && !part.ends_with(b"\n") {
                        v.push(b'\n');
                    }
                };
                out.extend_from_slice(b"<<<<<<< HEAD\n");
                nl(&mut out, &x);
                out.extend_from_slice(b"=======\n");
                nl(&mut out, &y);
                out.extend_from_slice(format!(">>>>>>> {their_label}\n").as_bytes());
            }
            (None, None) => {}
        }
        at = hi;
        k = end;
    }
    for l in &b[at.min(b.len())..] {
        out.extend_from_slice(l);
    }
    if conflict { Err(out) } else { Ok(out) }
}

fn is_binary(d: &[u8]) -> bool {
    d[..d.len().min(8000)].contains(&0)
}

pub fn merge(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (mut no_ff, mut ff_only, mut quiet, mut abort, mut no_commit, mut squash) =
        (false, false, false, false, false, false);
    let mut msgs: Vec<String> = Vec::new();
    let mut revs = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--no-ff" => no_ff = true,
            "--ff-only" => ff_only = true,
            "--ff" | "--no-edit" | "--stat" | "--no-verify" | "--progress" | "--no-progress" => {}
            "-q" | "--quiet" => quiet = true,
            "--abort" => abort = true,
            "--no-commit" => no_commit = true,
            "--squash" => squash = true,
            "-m" => msgs.push(
                it.next()
                    .ok_or_else(|| super::usage("error: switch `m' requires a value".into()))?,
            ),
            "--continue" => return super::cmds::run("commit", vec![], &[]),
            s if s.starts_with("-m") && s.len() > 2 => msgs.push(s[2..].to_string()),
            s if s.starts_with("--message=") => msgs.push(s[10..].to_string()),
            s if s.starts_with("-s") || s.starts_with("--strategy") || s.starts_with("-X") => {
                return Err(fatal(format!(
                    "{s} is not available in this sandbox's git merge"
                )));
            }
            s if s.starts_with('-') && s.len() > 1 => return Err(super::cmds::unknown_option(s)),
            _ => revs.push(a),
        }
    }
    let merge_head = g.repo.git_dir.join("MERGE_HEAD");
    if abort {
        if !merge_head.exists() {
            return Err(fatal(
                "There is no merge to abort (MERGE_HEAD missing).".into(),
            ));
        }
        let head_files = g.head_files()?;
        let st = state(g, false)?;
        super::checkout::reset_to(g, &st, &head_files)?;
        clear_merge_state(g);
        return Ok(0);
    }
    if merge_head.exists() {
        return Err(Fail {
            msg: "error: Merging is not possible because you have unmerged files.\nhint: Fix them up in the work tree, and then use 'git add/rm <file>'\nhint: as appropriate to mark resolution and make a commit.\nfatal: Exiting because of an unresolved conflict.".into(),
            code: 128,
        });
    }
    let [rev] = revs.as_slice() else {
        return Err(fatal(if revs.is_empty() {
            "No remote for the current branch.".into()
        } else {
            "merging more than one branch (an octopus) is not available in this sandbox's git"
                .to_string()
        }));
    };
    let theirs = g
        .resolve(rev)
        .and_then(|id| g.peel(&id))
        .ok_or_else(|| fatal(format!("{rev} - not something we can merge")))?;
    let Some(ours) = g.repo.head() else {
        return Err(fatal(
            "merging into a branch with no commits yet is not available in this sandbox's git"
                .into(),
        ));
    };
    let base = merge_base(g, &ours, &theirs)?;
    if base == Some(theirs) {
        if !quiet {
            g.say("Already up to date.\n");
        }
        return Ok(0);
    }
    let their_c = g.repo.commit(&theirs)?;
    let our_c = g.repo.commit(&ours)?;
    let their_files = g.repo.flatten(&their_c.tree)?;
    let our_files = g.repo.flatten(&our_c.tree)?;
    let st = state(g, false)?;
    let is_branch = g.repo.ref_id(&format!("refs/heads/{rev}")).is_some();
    let what = if is_branch { "branch" } else { "commit" };
    if base == Some(ours) && !no_ff && !squash {
        // Fast-forward: the tree moves like a checkout, keeping unrelated local changes.
        guard_local_changes(g, &st, &our_files, &their_files)?;
        if !quiet {
            g.say(&format!(
                "Updating {}..{}\nFast-forward\n",
                g.repo.abbrev(&ours),
                g.repo.abbrev(&theirs)
            ));
        }
        let ds = diff::compare(&our_files, &their_files, true);
        move_to(g, &st, &our_files, &their_files)?;
        g.repo.set_head(&theirs)?;
        if let Ok(who) = ident(&g.repo, "COMMITTER") {
            g.repo.reflog(
                Some(ours),
                &theirs,
                &who,
                &format!("merge {rev}: Fast-forward"),
                true,
            );
        }
        if !quiet {
            show_stat(g, &ds);
        }
        return Ok(0);
    }
    if ff_only {
        return Err(fatal("Not possible to fast-forward, aborting.".into()));
    }
    let base_files = match base {
        Some(b) => g.repo.flatten(&g.repo.commit(&b)?.tree)?,
        None => {
            return Err(fatal("refusing to merge unrelated histories".into()));
        }
    };
    guard_local_changes(g, &st, &our_files, &their_files)?;
    let m = three_way(g, &base_files, &our_files, &their_files, rev)?;
    apply_merged(g, &st, &our_files, &m)?;
    let (result, conflicts, notes) = (m.result, m.conflicts, m.notes);
    let into = match g.repo.branch() {
        Some(b) if b != "main" && b != "master" => format!(" into {b}"),
        _ => String::new(),
    };
    let message = if msgs.is_empty() {
        format!("Merge {what} '{rev}'{into}\n")
    } else {
        format!("{}\n", msgs.join("\n\n"))
    };
    if !quiet {
        g.say(&notes);
    }
    if !conflicts.is_empty() || no_commit || squash {
        let gd = &g.repo.git_dir;
        let mut msg = message.clone();
        if !conflicts.is_empty() {
            msg.push_str("\n# Conflicts:\n");
            for c in &conflicts {
                msg.push_str(&format!("#\t{}\n", c.path));
            }
        }
        let w = |name: &str, s: &str| {
            std::fs::write(gd.join(name), s).map_err(|e| super::store::io_fail(&gd.join(name), e))
        };
        w("ORIG_HEAD", &format!("{}\n", hex(&ours)))?;
        if !squash {
            w("MERGE_HEAD", &format!("{}\n", hex(&theirs)))?;
            w("MERGE_MODE", if no_ff { "no-ff" } else { "" })?;
        }
        w("MERGE_MSG", &msg)?;
        if !conflicts.is_empty() {
            say_conflicts(g, &conflicts);
            g.say("Automatic merge failed; fix conflicts and then commit the result.\n");
            return Ok(1);
        }
        g.say(if squash {
            "Squash commit -- not updating HEAD\n"
        } else {
            "Automatic merge went well; stopped before committing as requested\n"
        });
        return Ok(0);
    }
    let committer = ident(&g.repo, "COMMITTER")?;
    let author = ident(&g.repo, "AUTHOR")?;
    let tree = g.repo.write_tree(&result)?;
    let c = Commit {
        tree,
        parents: vec![ours, theirs],
        author,
        committer: committer.clone(),
        message,
    };
    let id = g.repo.write(Kind::Commit, &c.encode())?;
    g.repo.set_head(&id)?;
    g.repo.reflog(
        Some(ours),
        &id,
        &committer,
        &format!("merge {rev}: Merge made by the 'ort' strategy."),
        true,
    );
    let _ = std::fs::write(
        g.repo.git_dir.join("ORIG_HEAD"),
        format!("{}\n", hex(&ours)),
    );
    if !quiet {
        g.say("Merge made by the 'ort' strategy.\n");
        let ds = diff::compare(&our_files, &result, true);
        show_stat(g, &ds);
    }
    Ok(0)
}

/// The `--stat` and `--summary` a merge prints of what it changed.
fn show_stat(g: &mut Git, ds: &[diff::Delta]) {
    let mut out = Vec::new();
    let o = Output {
        listing: Some(Listing::Stat),
        summary: true,
        patch: false,
    };
    diff::write(g, ds, Source::Objects, &o, &Show::default(), &mut out);
    g.out.extend_from_slice(&out);
}

/// Refuses, before anything changes, when a local change is to a file the merge changes.
fn guard_local_changes(g: &Git, st: &State, ours: &Files, target: &Files) -> R<()> {
    let touched: Vec<&String> = st
        .staged
        .iter()
        .chain(st.unstaged.iter())
        .map(|d| &d.path)
        .filter(|p| ours.get(*p) != target.get(*p))
        .collect();
    if touched.is_empty() {
        return Ok(());
    }
    let _ = g;
    Err(error(format!(
        "Your local changes to the following files would be overwritten by merge:\n{}\nPlease commit your changes or stash them before you merge.\nAborting",
        touched
            .iter()
            .map(|p| format!("\t{p}"))
            .collect::<Vec<_>>()
            .join("\n")
    )))
}

/// The files that differ between `from` and `to` are written or removed; the rest, and
/// local changes to them, stay.
fn move_to(g: &Git, st: &State, from: &Files, to: &Files) -> R<()> {
    let mut index = Index {
        entries: st.index.entries.clone(),
        conflicts: Default::default(),
    };
    for p in from.keys().chain(to.keys()).collect::<BTreeSet<_>>() {
        match (from.get(p), to.get(p)) {
            (a, b) if a == b => {}
            (_, Some(v)) => super::checkout::write_file(g, &mut index, p, v)?,
            (Some(_), None) => {
                index.entries.remove(p);
                let _ = std::fs::remove_file(g.work_path(p));
                super::staging::remove_empty_parents(g, p);
            }
            (None, None) => {}
        }
    }
    g.repo.write_index(&index)
}

pub fn clear_merge_state(g: &Git) {
    for f in ["MERGE_HEAD", "MERGE_MSG", "MERGE_MODE"] {
        let _ = std::fs::remove_file(g.repo.git_dir.join(f));
    }
}

/// A path both sides changed in ways that do not combine.
pub struct Conflict {
    pub path: String,
    /// `content`, `add/add`, or the whole modify/delete sentence.
    pub kind: String,
    /// Base, ours, theirs (the index's stages 1-3).
    pub stages: [Option<(u32, Id)>; 3],
}

/// The outcome of a three-way merge of file sets.
pub struct Merged {
    pub result: Files,
    pub conflicts: Vec<Conflict>,
    /// Files whose merged (or conflict-marked) content has no blob of its own to check out.
    pub written: Vec<(String, u32, Vec<u8>)>,
    /// `Auto-merging PATH` lines and warnings, as git prints them.
    pub notes: String,
}

/// Merges `theirs` into `ours` from `base`, file by file and line by line.
pub fn three_way(
    g: &Git,
    base_files: &Files,
    our_files: &Files,
    their_files: &Files,
    label: &str,
) -> R<Merged> {
    let paths: BTreeSet<&String> = base_files
        .keys()
        .chain(our_files.keys())
        .chain(their_files.keys())
        .collect();
    let mut m = Merged {
        result: Files::new(),
        conflicts: Vec::new(),
        written: Vec::new(),
        notes: String::new(),
    };
    for p in paths {
        let (b, o, t) = (
            base_files.get(p).copied(),
            our_files.get(p).copied(),
            their_files.get(p).copied(),
        );
        let conflict = |kind: String| Conflict {
            path: p.clone(),
            kind,
            stages: [b, o, t],
        };
        let pick = if o == t || b == t {
            o
        } else if b == o {
            t
        } else {
            // Both changed it, differently.
            match (o, t) {
                (Some(ov), Some(tv)) => {
                    let base_data = match b {
                        Some(x) => g.repo.read(&x.1)?.1,
                        None => Vec::new(),
                    };
                    let od = g.repo.read(&ov.1)?.1;
                    let td = g.repo.read(&tv.1)?.1;
                    m.notes.push_str(&format!("Auto-merging {p}\n"));
                    let mode = if b.is_some_and(|x| x.0 == ov.0) {
                        tv.0
                    } else {
                        ov.0
                    };
                    if is_binary(&od) || is_binary(&td) || is_binary(&base_data) {
                        m.notes.push_str(&format!(
                            "warning: Cannot merge binary files: {p} (HEAD vs. {label})\n"
                        ));
                        m.conflicts.push(conflict("content".into()));
                        continue;
                    }
                    match merge_text(&base_data, &od, &td, label) {
                        Ok(data) => {
                            let id = g.repo.write(Kind::Blob, &data)?;
                            m.written.push((p.clone(), mode, data));
                            Some((mode, id))
                        }
                        Err(marked) => {
                            let kind = if b.is_none() { "add/add" } else { "content" };
                            m.written.push((p.clone(), ov.0, marked));
                            m.conflicts.push(conflict(kind.into()));
                            continue;
                        }
                    }
                }
                (Some(_), None) => {
                    m.conflicts.push(conflict(format!("modify/delete): {p} deleted in {label} and modified in HEAD.  Version HEAD of {p} left in tree")));
                    continue;
                }
                (None, Some(tv)) => {
                    let data = g.repo.read(&tv.1)?.1;
                    m.written.push((p.clone(), tv.0, data));
                    m.conflicts.push(conflict(format!("modify/delete): {p} deleted in HEAD and modified in {label}.  Version {label} of {p} left in tree")));
                    continue;
                }
                (None, None) => None,
            }
        };
        if let Some(v) = pick {
            m.result.insert(p.clone(), v);
        }
    }
    Ok(m)
}

/// The working tree and index take a merge's result, conflicted paths as marked files and
/// index stages.
pub fn apply_merged(g: &Git, st: &State, our_files: &Files, m: &Merged) -> R<()> {
    let mut index = Index {
        entries: st.index.entries.clone(),
        conflicts: Default::default(),
    };
    let conflicted = |p: &String| m.conflicts.iter().any(|c| &c.path == p);
    for p in our_files.keys() {
        if !m.result.contains_key(p) && !conflicted(p) {
            index.entries.remove(p);
            let _ = std::fs::remove_file(g.work_path(p));
        }
    }
    for (p, v) in &m.result {
        if our_files.get(p) != Some(v) {
            super::checkout::write_file(g, &mut index, p, v)?;
        }
    }
    for (p, mode, data) in &m.written {
        write_file_data(&g.work_path(p), *mode, data)?;
        if let Some(v) = m.result.get(p) {
            let stat = std::fs::symlink_metadata(g.work_path(p))
                .map(|m| Stat::of(&m))
                .unwrap_or_default();
            index.entries.insert(
                p.clone(),
                IndexEntry {
                    mode: v.0,
                    id: v.1,
                    stat,
                },
            );
        }
    }
    for c in &m.conflicts {
        index.entries.remove(&c.path);
        index.conflicts.insert(c.path.clone(), c.stages);
    }
    g.repo.write_index(&index)
}

pub fn say_conflicts(g: &mut Git, conflicts: &[Conflict]) {
    for c in conflicts {
        if c.kind.starts_with("modify/delete") {
            g.say(&format!("CONFLICT ({}.\n", c.kind));
        } else {
            g.say(&format!(
                "CONFLICT ({}): Merge conflict in {}\n",
                c.kind, c.path
            ));
        }
    }
}

/// `git cherry-pick` and `git revert`: each commit's change (or its undoing) merged onto
/// HEAD from the commit's parent (or from the commit), then committed; a conflict stops
/// with the files marked, for `--continue` (a commit) or `--abort`.
pub fn pick(g: &mut Git, args: Vec<String>, revert: bool) -> R<i32> {
    let verb = if revert { "revert" } else { "cherry-pick" };
    let head_file = g.repo.git_dir.join(if revert {
        "REVERT_HEAD"
    } else {
        "CHERRY_PICK_HEAD"
    });
    let (mut no_commit, mut mark_x) = (false, false);
    let mut revs = Vec::new();
    for a in args {
        match a.as_str() {
            "-n" | "--no-commit" => no_commit = true,
            "-x" => mark_x = true,
            "--no-edit"
            | "--edit"
            | "-e"
            | "--ff"
            | "--allow-empty"
            | "--keep-redundant-commits" => {}
            "--continue" => return super::cmds::run("commit", vec![], &[]),
            "--abort" | "--quit" | "--skip" => {
                if !head_file.exists() {
                    return Err(Fail {
                        msg: format!(
                            "error: no cherry-pick or revert in progress\nfatal: {verb} failed"
                        ),
                        code: 128,
                    });
                }
                if a != "--quit" {
                    let head_files = g.head_files()?;
                    let st = state(g, false)?;
                    super::checkout::reset_to(g, &st, &head_files)?;
                }
                let _ = std::fs::remove_file(&head_file);
                let _ = std::fs::remove_file(g.repo.git_dir.join("MERGE_MSG"));
                return Ok(0);
            }
            s if s.starts_with("-m") || s.starts_with("--mainline") => {
                return Err(fatal(format!(
                    "{s} (picking from a merge) is not available in this sandbox's git"
                )));
            }
            s if s.starts_with('-') && s.len() > 1 => return Err(super::cmds::unknown_option(s)),
            _ => revs.push(a),
        }
    }
    if revs.is_empty() {
        return Err(super::usage(format!(
            "usage: git {verb} [<options>] <commit-ish>..."
        )));
    }
    if head_file.exists() || g.repo.git_dir.join("MERGE_HEAD").exists() {
        return Err(Fail {
            msg: format!(
                "error: {verb} is already in progress\nhint: try \"git {verb} (--continue | --abort | --quit)\"\nfatal: {verb} failed"
            ),
            code: 128,
        });
    }
    // Ranges (`A..B`) pick oldest first.
    let mut ids: Vec<Id> = Vec::new();
    for r in &revs {
        if let Some((a, b)) = r.split_once("..") {
            let (a, _) = g.commit_of(if a.is_empty() { "HEAD" } else { a })?;
            let (b, _) = g.commit_of(if b.is_empty() { "HEAD" } else { b })?;
            let mut list: Vec<Id> = walk(g, &[b], &[a], false)?
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            list.reverse();
            ids.extend(list);
        } else {
            ids.push(g.commit_of(r)?.0);
        }
    }
    for id in ids {
        let c = g.repo.commit(&id)?;
        if c.parents.len() > 1 {
            return Err(fatal(format!(
                "commit {} is a merge but no -m option was given.",
                hex(&id)
            )));
        }
        let Some(head) = g.repo.head() else {
            return Err(fatal(format!(
                "{verb} onto a branch with no commits yet is not available in this sandbox's git"
            )));
        };
        let parent_files = match c.parents.first() {
            Some(p) => g.repo.flatten(&g.repo.commit(p)?.tree)?,
            None => Files::new(),
        };
        let commit_files = g.repo.flatten(&c.tree)?;
        let (base, theirs) = if revert {
            (commit_files, parent_files)
        } else {
            (parent_files, commit_files)
        };
        let ours = g.head_files()?;
        let st = state(g, false)?;
        let short = g.repo.abbrev(&id);
        let subject = c.subject();
        if let Err(mut e) = guard_local_changes(g, &st, &ours, &theirs) {
            e.msg = e.msg.replace("by merge", &format!("by {verb}"));
            return Err(e);
        }
        let label = if revert {
            format!("parent of {short} ({subject})")
        } else {
            format!("{short} ({subject})")
        };
        let m = three_way(g, &base, &ours, &theirs, &label)?;
        apply_merged(g, &st, &ours, &m)?;
        let mut message = if revert {
            format!(
                "Revert \"{subject}\"\n\nThis reverts commit {}.\n",
                hex(&id)
            )
        } else {
            c.message.clone()
        };
        if mark_x && !revert {
            message = format!(
                "{}\n(cherry picked from commit {})\n",
                message.trim_end(),
                hex(&id)
            );
        }
        g.say(&m.notes);
        if !m.conflicts.is_empty() {
            let mut msg = message.clone();
            msg.push_str("\n# Conflicts:\n");
            for k in &m.conflicts {
                msg.push_str(&format!("#\t{}\n", k.path));
            }
            let gd = g.repo.git_dir.clone();
            std::fs::write(gd.join("MERGE_MSG"), msg).map_err(|e| super::store::io_fail(&gd, e))?;
            std::fs::write(&head_file, format!("{}\n", hex(&id)))
                .map_err(|e| super::store::io_fail(&head_file, e))?;
            say_conflicts(g, &m.conflicts);
            let what = if revert { "revert" } else { "apply" };
            return Err(Fail {
                msg: format!(
                    "error: could not {what} {short}... {subject}\nhint: After resolving the conflicts, mark them with\nhint: \"git add/rm <pathspec>\", then run\nhint: \"git {verb} --continue\".\nhint: You can instead skip this commit with \"git {verb} --skip\".\nhint: To abort and get back to the state before \"git {verb}\",\nhint: run \"git {verb} --abort\".\nhint: Disable this message with \"git config advice.mergeConflict false\""
                ),
                code: 1,
            });
        }
        if no_commit {
            continue;
        }
        let committer = ident(&g.repo, "COMMITTER")?;
        let author = if revert {
            ident(&g.repo, "AUTHOR")?
        } else {
            c.author.clone()
        };
        let tree = g.repo.write_tree(&m.result)?;
        let new = Commit {
            tree,
            parents: vec![head],
            author: author.clone(),
            committer: committer.clone(),
            message,
        };
        let nid = g.repo.write(Kind::Commit, &new.encode())?;
        g.repo.set_head(&nid)?;
        g.repo.reflog(
            Some(head),
            &nid,
            &committer,
            &format!("{verb}: {}", new.subject()),
            true,
        );
        let branch = g.repo.branch().unwrap_or_else(|| "detached HEAD".into());
        g.say(&format!(
            "[{branch} {}] {}\n",
            g.repo.abbrev(&nid),
            new.subject()
        ));
        let a = super::store::parse_ident(&author);
        g.say(&format!(
            " Date: {}\n",
            super::format_date(a.time, a.tz, "default")
        ));
        let ds = diff::compare(&ours, &m.result, true);
        let mut out = Vec::new();
        diff::shortstat(g, &ds, Source::Objects, diff::Ws::Exact, &mut out);
        diff::summary(&ds, &mut out);
        g.out.extend_from_slice(&out);
    }
    Ok(0)
}
