//! Commands about the working tree as a whole: `clean`, `grep` and `stash`.

use std::collections::BTreeSet;

use super::checkout::{reset_to, write_file};
use super::cmds::{split_dashdash, unknown_option};
use super::diff::{self, Files, Listing, Output, Show, Source};
use super::ignore::{self, Ignore};
use super::staging::{matches, remove_empty_parents, specs, state, tracked_dirs};
use super::status::{Untracked, print_long_status};
use super::store::{Commit, Id, Index, Kind, NULL_ID, hex, io_fail, parse_hex, read_work_file};
use super::{Fail, Git, R, error, fatal, ident};

pub fn clean(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let (mut dry, mut force, mut dirs, mut no_ignore, mut only_ignored, mut quiet) =
        (false, false, false, false, false, false);
    let mut paths = after.unwrap_or_default();
    for a in opts {
        match a.as_str() {
            "-n" | "--dry-run" => dry = true,
            "-f" | "--force" => force = true,
            "-d" => dirs = true,
            "-x" => no_ignore = true,
            "-X" => only_ignored = true,
            "-q" | "--quiet" => quiet = true,
            "-i" | "--interactive" => {
                return Err(fatal(
                    "interactive clean needs a terminal this git does not drive".into(),
                ));
            }
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(a),
        }
    }
    if !force && !dry && g.repo.config.get_bool("clean.requireforce").unwrap_or(true) {
        return Err(fatal(
            "clean.requireForce is true and -f not given: refusing to clean".into(),
        ));
    }
    let sp = specs(g, &paths)?;
    let index = g.repo.read_index()?;
    let entries = &index.entries;
    let list = |ig: &mut Ignore| {
        let mut v = Vec::new();
        ignore::untracked(&g.repo.work, "", ig, &|p| entries.contains_key(p), &mut v);
        v
    };
    let with_rules = list(&mut Ignore::new(&g.repo));
    let files: Vec<String> = if no_ignore || only_ignored {
        let all = list(&mut Ignore::default());
        if only_ignored {
            let kept: BTreeSet<&String> = with_rules.iter().collect();
            all.into_iter().filter(|p| !kept.contains(p)).collect()
        } else {
            all
        }
    } else {
        with_rules
    };
    let files: Vec<String> = files.into_iter().filter(|p| matches(&sp, p)).collect();
    // Without -d, files in untracked directories stay (git does not recurse into them).
    let shown = ignore::collapse(&files, &tracked_dirs(&index));
    for p in shown {
        let is_dir = p.ends_with('/');
        if is_dir && !dirs {
            continue;
        }
        let rel = g.relative(&p);
        if dry {
            g.say(&format!("Would remove {rel}\n"));
            continue;
        }
        let full = g.work_path(p.trim_end_matches('/'));
        let r = if is_dir {
            std::fs::remove_dir_all(&full)
        } else {
            std::fs::remove_file(&full)
        };
        match r {
            Ok(()) if !quiet => g.say(&format!("Removing {rel}\n")),
            Ok(()) => {}
            Err(e) => eprintln!(
                "warning: failed to remove {rel}: {}",
                guest_support::cli::reason(&e)
            ),
        }
    }
    Ok(0)
}

/// `git grep`: GNU grep's matching over the tracked files (`-n`, `-i`, `-w`, `-v`, `-l`,
/// `-c`, `-E`, `-F`, `-e`), with paths as git prints them.
pub fn grep(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let mut flags: Vec<String> = Vec::new();
    let mut patterns: Vec<String> = Vec::new();
    let mut rest: Vec<String> = Vec::new();
    let mut untracked = false;
    let mut it = opts.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-e" => patterns.push(
                it.next()
                    .ok_or_else(|| fatal("switch `e' requires a value".into()))?,
            ),
            "--untracked" => untracked = true,
            "--cached" | "--no-index" | "--no-color" | "--full-name" | "-r" => {}
            "-n"
            | "--line-number"
            | "-i"
            | "--ignore-case"
            | "-w"
            | "--word-regexp"
            | "-v"
            | "--invert-match"
            | "-l"
            | "--files-with-matches"
            | "-L"
            | "--files-without-match"
            | "-c"
            | "--count"
            | "-E"
            | "--extended-regexp"
            | "-F"
            | "--fixed-strings"
            | "-G"
            | "--basic-regexp"
            | "-P"
            | "--perl-regexp"
            | "-o"
            | "--only-matching"
            | "-q"
            | "--quiet"
            | "-h"
            | "-H"
            | "-I"
            | "-z" => {
                if a != "-G" && a != "--basic-regexp" {
                    flags.push(a)
                }
            }
            s if (s.starts_with("-A") || s.starts_with("-B") || s.starts_with("-C"))
                && s.len() > 2 =>
            {
                flags.push(a)
            }
            "-A" | "-B" | "-C" => {
                let v = it
                    .next()
                    .ok_or_else(|| fatal(format!("switch `{}' requires a value", &a[1..])))?;
                flags.push(format!("{a}{v}"));
            }
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => rest.push(a),
        }
    }
    if patterns.is_empty() {
        if rest.is_empty() {
            return Err(fatal("no pattern given".into()));
        }
        patterns.push(rest.remove(0));
    }
    let mut paths = after.unwrap_or_default();
    paths.extend(rest);
    let sp = if paths.is_empty() && !g.prefix.is_empty() {
        vec![g.prefix.trim_end_matches('/').to_string()]
    } else {
        specs(g, &paths)?
    };
    let index = g.repo.read_index()?;
    let mut files: Vec<String> = index
        .entries
        .iter()
        .filter(|(p, e)| e.mode != 0o160000 && matches(&sp, p))
        .map(|(p, _)| p.clone())
        .collect();
    if untracked {
        let st = state(g, true)?;
        files.extend(st.untracked.into_iter().filter(|p| matches(&sp, p)));
    }
    let files: Vec<String> = files
        .into_iter()
        .filter(|p| g.work_path(p).is_file())
        .map(|p| g.relative(&p))
        .collect();
    if files.is_empty() {
        return Ok(1);
    }
    let mut argv = vec!["grep".to_string()];
    if !flags.iter().any(|f| f == "-h") {
        argv.push("-H".into());
    }
    argv.extend(flags);
    for p in patterns {
        argv.push("-e".into());
        argv.push(p);
    }
    argv.push("--".into());
    argv.extend(files);
    g.flush();
    use guest_support::process::{self, Stdio};
    let count = argv.iter().any(|a| a == "-c" || a == "--count");
    let (read, write) = if count {
        let (r, w) = process::pipe();
        (Some(r), Stdio::Handle(w))
    } else {
        (None, Stdio::Inherit)
    };
    let spawned = guest_support::spawn(
        argv,
        std::env::vars().collect(),
        Stdio::Null,
        write.clone(),
        Stdio::Inherit,
    );
    if let Stdio::Handle(w) = write {
        process::close(w);
    }
    let pid = spawned.map_err(|_| fatal("cannot run grep".into()))?;
    if let Some(r) = read {
        // `git grep -c` leaves out files without a match, where grep prints `:0`.
        let text = guest_support::read_to_end(r);
        for line in String::from_utf8_lossy(&text).lines() {
            if !line.ends_with(":0") {
                g.say(&format!("{line}\n"));
            }
        }
    }
    Ok(process::wait(pid))
}

// ---------------------------------------------------------------- stash

const STASH: &str = "refs/stash";

/// The stash entries, newest first: (id, message) from `logs/refs/stash`.
fn entries(g: &Git) -> Vec<(Id, String)> {
    let text = std::fs::read_to_string(g.repo.git_dir.join("logs").join(STASH)).unwrap_or_default();
    let mut v: Vec<(Id, String)> = text
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            parts.next()?;
            let id = parse_hex(parts.next()?)?;
            let msg = l.split_once('\t').map_or("", |x| x.1).to_string();
            Some((id, msg))
        })
        .collect();
    v.reverse();
    v
}

fn write_entries(g: &Git, list: &[(Id, String)]) -> R<()> {
    let log = g.repo.git_dir.join("logs").join(STASH);
    if list.is_empty() {
        let _ = std::fs::remove_file(&log);
        g.repo.delete_ref(STASH)?;
        return Ok(());
    }
    let who = ident(&g.repo, "COMMITTER").unwrap_or_else(|_| "git <git@localhost> 0 +0000".into());
    let mut text = String::new();
    let mut old = NULL_ID;
    for (id, msg) in list.iter().rev() {
        text.push_str(&format!("{} {} {who}\t{msg}\n", hex(&old), hex(id)));
        old = *id;
    }
    if let Some(d) = log.parent() {
        std::fs::create_dir_all(d).map_err(|e| io_fail(d, e))?;
    }
    std::fs::write(&log, text).map_err(|e| io_fail(&log, e))?;
    g.repo.set_ref(STASH, &list[0].0)
}

/// `stash@{N}`, `N` or nothing (the newest).
fn pick(g: &Git, arg: Option<&String>) -> R<(usize, Id)> {
    let list = entries(g);
    if list.is_empty() {
        return Err(Fail {
            msg: "No stash entries found.".into(),
            code: 1,
        });
    }
    let n = match arg {
        None => 0,
        Some(a) => {
            let inner = a
                .strip_prefix("stash@{")
                .and_then(|r| r.strip_suffix('}'))
                .unwrap_or(a);
            inner
                .parse::<usize>()
                .map_err(|_| error(format!("{a} is not a valid reference")))?
        }
    };
    let (id, _) = list
        .get(n)
        .ok_or_else(|| error(format!("stash@{{{n}}} is not a valid reference")))?;
    Ok((n, *id))
}

pub fn stash(g: &mut Git, args: Vec<String>) -> R<i32> {
    let sub = args.first().cloned().unwrap_or_else(|| "push".into());
    let (sub, rest) = if sub.starts_with('-') {
        ("push".to_string(), args.clone())
    } else {
        (
            sub,
            args.get(1..).map(<[String]>::to_vec).unwrap_or_default(),
        )
    };
    match sub.as_str() {
        "push" | "save" => push(g, rest, sub == "save"),
        "list" => {
            for (i, (_, msg)) in entries(g).iter().enumerate() {
                g.say(&format!("stash@{{{i}}}: {msg}\n"));
            }
            Ok(0)
        }
        "show" => {
            let patch = rest
                .iter()
                .any(|a| a == "-p" || a == "--patch" || a == "-u");
            let name_only = rest.iter().any(|a| a == "--name-only");
            let (_, id) = pick(g, rest.iter().find(|a| !a.starts_with('-')))?;
            let w = g.repo.commit(&id)?;
            let base =
                g.repo.flatten(
                    &g.repo
                        .commit(w.parents.first().ok_or_else(|| {
                            fatal("the stash entry is not a stash commit".into())
                        })?)?
                        .tree,
                )?;
            let ds = diff::compare(&base, &g.repo.flatten(&w.tree)?, true);
            let what = Output {
                listing: if patch {
                    None
                } else if name_only {
                    Some(Listing::NameOnly)
                } else {
                    Some(Listing::Stat)
                },
                summary: false,
                patch,
            };
            let mut out = Vec::new();
            diff::write(g, &ds, Source::Objects, &what, &Show::default(), &mut out);
            g.out.extend_from_slice(&out);
            Ok(0)
        }
        "drop" => {
            let (n, id) = pick(g, rest.iter().find(|a| !a.starts_with('-')))?;
            let mut list = entries(g);
            list.remove(n);
            write_entries(g, &list)?;
            if !rest.iter().any(|a| a == "-q" || a == "--quiet") {
                g.say(&format!("Dropped refs/stash@{{{n}}} ({})\n", hex(&id)));
            }
            Ok(0)
        }
        "clear" => write_entries(g, &[]).map(|_| 0),
        "apply" | "pop" => {
            let quiet = rest.iter().any(|a| a == "-q" || a == "--quiet");
            let (n, id) = pick(g, rest.iter().find(|a| !a.starts_with('-')))?;
            if let Err(e) = apply(g, &id, quiet) {
                if e.msg.contains("would be overwritten") {
                    // Git shows where things stand, and keeps the entry.
                    let st = state(g, true)?;
                    print_long_status(g, &st, Untracked::Normal, false, true);
                    if sub == "pop" {
                        g.say("The stash entry is kept in case you need it again.\n");
                    }
                }
                return Err(e);
            }
            if sub == "pop" {
                let mut list = entries(g);
                list.remove(n);
                write_entries(g, &list)?;
                if !quiet {
                    g.say(&format!("Dropped refs/stash@{{{n}}} ({})\n", hex(&id)));
                }
            }
            Ok(0)
        }
        "branch" | "create" | "store" => Err(fatal(format!(
            "'stash {sub}' is not available in this sandbox's git"
        ))),
        s => Err(Fail {
            msg: format!("error: unknown subcommand: `{s}'"),
            code: 129,
        }),
    }
}

fn push(g: &mut Git, args: Vec<String>, save: bool) -> R<i32> {
    let (mut msg, mut quiet, mut with_untracked, mut keep_index) =
        (None::<String>, false, false, false);
    let mut it = args.into_iter();
    let mut words = Vec::new();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-m" | "--message" => msg = it.next(),
            "-q" | "--quiet" => quiet = true,
            "-u" | "--include-untracked" => with_untracked = true,
            "-k" | "--keep-index" => keep_index = true,
            "--no-keep-index" => keep_index = false,
            s if s.starts_with("--message=") => msg = Some(s[10..].to_string()),
            s if s.starts_with("-m") && s.len() > 2 => msg = Some(s[2..].to_string()),
            "--" => {
                if it.next().is_some() {
                    return Err(fatal(
                        "stash with pathspecs is not available in this sandbox's git".into(),
                    ));
                }
            }
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ if save => words.push(a),
            _ => {
                return Err(fatal(
                    "stash with pathspecs is not available in this sandbox's git".into(),
                ));
            }
        }
    }
    if save && !words.is_empty() {
        msg = Some(words.join(" "));
    }
    let st = state(g, with_untracked)?;
    if st.staged.is_empty() && st.unstaged.is_empty() && st.untracked.is_empty() {
        g.say("No local changes to save\n");
        return Ok(0);
    }
    let Some(head) = st.head else {
        return Err(error("You do not have the initial commit yet".into()));
    };
    let hc = g.repo.commit(&head)?;
    let branch = g.repo.branch().unwrap_or_else(|| "(no branch)".into());
    let about = format!("{}: {} {}", branch, g.repo.abbrev(&head), hc.subject());
    let committer = ident(&g.repo, "COMMITTER")?;
    let commit = |g: &Git, tree: Id, parents: Vec<Id>, message: String| -> R<Id> {
        let c = Commit {
            tree,
            parents,
            author: committer.clone(),
            committer: committer.clone(),
            message,
        };
        g.repo.write(Kind::Commit, &c.encode())
    };
    let index_files = st.index.files();
    let i_tree = g.repo.write_tree(&index_files)?;
    let i = commit(g, i_tree, vec![head], format!("index on {about}\n"))?;
    // The working tree's version of every tracked file.
    let mut work: Files = index_files.clone();
    for d in &st.unstaged {
        match d.new {
            Some((mode, _)) => {
                let (_, data) = read_work_file(&g.work_path(&d.path), g.filemode())
                    .map_err(|e| io_fail(&g.work_path(&d.path), e))?;
                work.insert(d.path.clone(), (mode, g.repo.write(Kind::Blob, &data)?));
            }
            None => {
                work.remove(&d.path);
            }
        }
    }
    let mut parents = vec![head, i];
    if with_untracked && !st.untracked.is_empty() {
        let mut files = Files::new();
        for p in &st.untracked {
            let (mode, data) = read_work_file(&g.work_path(p), g.filemode())
                .map_err(|e| io_fail(&g.work_path(p), e))?;
            files.insert(p.clone(), (mode, g.repo.write(Kind::Blob, &data)?));
        }
        let u_tree = g.repo.write_tree(&files)?;
        parents.push(commit(
            g,
            u_tree,
            vec![],
            format!("untracked files on {about}\n"),
        )?);
    }
    let w_tree = g.repo.write_tree(&work)?;
    let message = match &msg {
        Some(m) => format!("On {branch}: {m}"),
        None => format!("WIP on {about}"),
    };
    // Git writes the stash commit's message without a final newline.
    let w = commit(g, w_tree, parents, message.clone())?;
    let mut list = entries(g);
    list.insert(0, (w, message.clone()));
    write_entries(g, &list)?;
    // Back to HEAD (or to the index, with --keep-index), and the untracked files go.
    let target = if keep_index {
        index_files
    } else {
        g.head_files()?
    };
    reset_to(g, &st, &target)?;
    if with_untracked {
        for p in &st.untracked {
            let _ = std::fs::remove_file(g.work_path(p));
            remove_empty_parents(g, p);
        }
    }
    if !quiet {
        g.say(&format!(
            "Saved working directory and index state {message}\n"
        ));
    }
    Ok(0)
}

/// Puts a stash's changes on the working tree: what the stash changed since its base,
/// where HEAD still has the base's version. Files new in the stash are staged, as git
/// stages them; a file that HEAD changed too is refused (this git has no three-way merge),
/// before anything is written.
fn apply(g: &mut Git, id: &Id, quiet: bool) -> R<()> {
    let w = g.repo.commit(id)?;
    let base = g.repo.flatten(
        &g.repo
            .commit(
                w.parents
                    .first()
                    .ok_or_else(|| fatal("the stash entry is not a stash commit".into()))?,
            )?
            .tree,
    )?;
    let stashed = g.repo.flatten(&w.tree)?;
    let untracked = match w.parents.get(2) {
        Some(u) => g.repo.flatten(&g.repo.commit(u)?.tree)?,
        None => Files::new(),
    };
    let st = state(g, true)?;
    let head = &st.head_files;
    let changed: Vec<&String> = base
        .keys()
        .chain(stashed.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|p| base.get(*p) != stashed.get(*p))
        .collect();
    let local: BTreeSet<&String> = st
        .unstaged
        .iter()
        .map(|d| &d.path)
        .chain(st.staged.iter().map(|d| &d.path))
        .collect();
    let overwritten: Vec<&&String> = changed.iter().filter(|p| local.contains(**p)).collect();
    if !overwritten.is_empty() {
        return Err(Fail {
            msg: format!(
                "error: Your local changes to the following files would be overwritten by merge:\n{}\nPlease commit your changes or stash them before you merge.\nAborting",
                overwritten
                    .iter()
                    .map(|p| format!("\t{p}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
            code: 1,
        });
    }
    let both: Vec<&&String> = changed
        .iter()
        .filter(|p| head.get(**p) != base.get(**p) && head.get(**p) != stashed.get(**p))
        .collect();
    if !both.is_empty() {
        return Err(error(format!(
            "the stash and HEAD both changed {}; this git has no three-way merge, so nothing was applied (commit or reset, then apply again)",
            both.iter()
                .map(|p| format!("'{p}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let exists: Vec<&String> = untracked
        .keys()
        .filter(|p| g.work_path(p).exists())
        .collect();
    if !exists.is_empty() {
        return Err(error(format!(
            "{}\nCould not restore untracked files from stash",
            exists
                .iter()
                .map(|p| format!("{p} already exists, no checkout"))
                .collect::<Vec<_>>()
                .join("\n")
        )));
    }
    let mut index = Index {
        entries: st.index.entries.clone(),
        conflicts: st.index.conflicts.clone(),
    };
    let mut any = false;
    for p in &changed {
        if head.get(*p) == stashed.get(*p) {
            continue;
        }
        any = true;
        match stashed.get(*p) {
            Some(t) => {
                let mut scratch = Index::default();
                write_file(g, &mut scratch, p, t)?;
                if !base.contains_key(*p) {
                    index
                        .entries
                        .insert((*p).clone(), scratch.entries.remove(*p).unwrap());
                }
            }
            None => {
                index.entries.remove(*p);
                let _ = std::fs::remove_file(g.work_path(p));
                remove_empty_parents(g, p);
            }
        }
    }
    for (p, t) in &untracked {
        let mut scratch = Index::default();
        write_file(g, &mut scratch, p, t)?;
    }
    g.repo.write_index(&index)?;
    if !any {
        g.say("Already up to date.\n");
    }
    if !quiet {
        let after = state(g, true)?;
        print_long_status(g, &after, Untracked::Normal, false, true);
    }
    Ok(())
}
