//! `git commit`: its options, the message, and the commit written from the index.

use super::cmds::{Args, unknown_option};
use super::diff::{self, Files, Source, Ws};
use super::staging::{matches, specs, stage_file, state};
use super::status::{Untracked, print_long_status};
use super::store::{self, Commit, Kind, parse_ident};
use super::{Fail, Git, R, error, fatal, format_date, ident};

/// Git's `whitespace` clean-up of a message: trailing spaces go, runs of blank lines become
/// one, blank lines at either end go, and the message ends with a newline.
pub(super) fn cleanup(msg: &str, strip_comments: bool) -> String {
    let mut out: Vec<&str> = Vec::new();
    for l in msg.lines() {
        if strip_comments && l.starts_with('#') {
            continue;
        }
        let l = l.trim_end();
        if l.is_empty() && out.last().is_none_or(|x| x.is_empty()) {
            continue;
        }
        out.push(l);
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    if out.is_empty() {
        String::new()
    } else {
        format!("{}\n", out.join("\n"))
    }
}

pub(super) fn commit(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut a = Args::new(args);
    let mut msgs: Vec<String> = Vec::new();
    let (mut all, mut quiet, mut allow_empty, mut amend, mut no_edit, mut signoff) =
        (false, false, false, false, false, false);
    let mut author_arg: Option<String> = None;
    let mut date_arg: Option<String> = None;
    let mut paths = Vec::new();
    while let Some(x) = a.next() {
        if let Some(v) = a.value(&x, "-m", "--message")? {
            msgs.push(v);
            continue;
        }
        if let Some(f) = a.value(&x, "-F", "--file")? {
            let text = if f == "-" {
                let mut s = String::new();
                let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut s);
                s
            } else {
                std::fs::read_to_string(g.prefix.clone() + &f)
                    .or_else(|_| std::fs::read_to_string(&f))
                    .map_err(|e| {
                        fatal(format!(
                            "could not read log file '{f}': {}",
                            guest_support::cli::reason(&e)
                        ))
                    })?
            };
            msgs.push(text);
            continue;
        }
        if let Some(v) = a.value(&x, "", "--author")? {
            author_arg = Some(v);
            continue;
        }
        if let Some(v) = a.value(&x, "", "--date")? {
            date_arg = Some(v);
            continue;
        }
        match x.as_str() {
            "-a" | "--all" => all = true,
            "-q" | "--quiet" => quiet = true,
            "--allow-empty" => allow_empty = true,
            "--allow-empty-message" => {}
            "--amend" => amend = true,
            "--no-edit" => no_edit = true,
            "-s" | "--signoff" => signoff = true,
            "-n" | "--no-verify" | "--no-gpg-sign" | "-v" | "--verbose" | "--no-status" => {}
            "--" => paths.extend(a.items[a.i..].iter().cloned()),
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(x),
        }
        if !paths.is_empty() && a.i >= a.items.len() {
            break;
        }
    }
    let mut st = state(g, true)?;
    if !st.index.conflicts.is_empty() {
        for p in st.index.conflicts.keys() {
            g.say(&format!("U\t{p}\n"));
        }
        return Err(Fail {
            msg: "error: Committing is not possible because you have unmerged files.\nhint: Fix them up in the work tree, and then use 'git add/rm <file>'\nhint: as appropriate to mark resolution and make a commit.\nfatal: Exiting because of an unresolved conflict.".into(),
            code: 128,
        });
    }
    // Concluding a merge: its other parent and, without -m, its prepared message.
    let merging = std::fs::read_to_string(g.repo.git_dir.join("MERGE_HEAD"))
        .ok()
        .and_then(|s| store::parse_hex(s.trim()));
    let picking = ["CHERRY_PICK_HEAD", "REVERT_HEAD"]
        .iter()
        .find_map(|f| std::fs::read_to_string(g.repo.git_dir.join(f)).ok())
        .and_then(|s| store::parse_hex(s.trim()));
    if (merging.is_some() || picking.is_some()) && msgs.is_empty() {
        let m = std::fs::read_to_string(g.repo.git_dir.join("MERGE_MSG")).unwrap_or_default();
        msgs.push(cleanup(&m, true));
        allow_empty = true;
    }
    let parent_commit = match st.head {
        Some(h) => Some(g.repo.commit(&h)?),
        None => None,
    };
    if amend && parent_commit.is_none() {
        return Err(fatal("You have nothing to amend.".into()));
    }
    if all || !paths.is_empty() {
        let sp = if paths.is_empty() {
            vec![String::new()]
        } else {
            specs(g, &paths)?
        };
        if !paths.is_empty() {
            for (arg, s) in paths.iter().zip(&sp) {
                if !st
                    .index
                    .entries
                    .keys()
                    .any(|p| matches(std::slice::from_ref(s), p))
                {
                    return Err(error(format!(
                        "pathspec '{arg}' did not match any file(s) known to git"
                    )));
                }
            }
        }
        for d in st.unstaged.clone() {
            if matches(&sp, &d.path) {
                if d.new.is_none() {
                    st.index.entries.remove(&d.path);
                } else {
                    stage_file(g, &mut st.index, &d.path)?;
                }
            }
        }
        st.staged = diff::compare(&st.head_files, &st.index.files(), true);
        st.unstaged.retain(|d| !matches(&sp, &d.path));
    }
    let base_files = if amend {
        match parent_commit.as_ref().and_then(|c| c.parents.first()) {
            Some(p) => g.repo.flatten(&g.repo.commit(p)?.tree)?,
            None => Files::new(),
        }
    } else {
        st.head_files.clone()
    };
    // `git commit PATHS` commits HEAD with only those paths as they are now (git's
    // `--only`); the rest of the index stays staged for later.
    let tree_files = if paths.is_empty() {
        st.index.files()
    } else {
        let sp = specs(g, &paths)?;
        let index_files = st.index.files();
        let mut files = base_files.clone();
        for p in base_files.keys().chain(index_files.keys()) {
            if matches(&sp, p) {
                match index_files.get(p) {
                    Some(v) => files.insert(p.clone(), *v),
                    None => files.remove(p),
                };
            }
        }
        files
    };
    let changes = diff::compare(&base_files, &tree_files, true);
    if changes.is_empty() && !allow_empty {
        g.repo.write_index(&st.index).ok();
        print_long_status(g, &st, Untracked::Normal, true, !amend);
        if amend {
            g.say("No changes\n");
            return Err(Fail {
                msg: "You asked to amend the most recent commit, but doing so would make\nit empty. You can repeat your command with --allow-empty, or you can\nremove the commit entirely with \"git reset HEAD^\".".into(),
                code: 1,
            });
        }
        return Ok(1);
    }
    let mut message = if !msgs.is_empty() {
        cleanup(&msgs.join("\n\n"), false)
    } else if amend && (no_edit || msgs.is_empty()) {
        parent_commit.as_ref().unwrap().message.clone()
    } else {
        return Err(Fail {
            msg: "error: Terminal is dumb, but EDITOR unset\nPlease supply the message using either -m or -F option.".into(),
            code: 1,
        });
    };
    if message.is_empty() {
        return Err(Fail {
            msg: "Aborting commit due to empty commit message.".into(),
            code: 1,
        });
    }
    let committer = ident(&g.repo, "COMMITTER")?;
    let picked_author = match picking {
        Some(p) if std::fs::metadata(g.repo.git_dir.join("CHERRY_PICK_HEAD")).is_ok() => {
            Some(g.repo.commit(&p)?.author)
        }
        _ => None,
    };
    let mut author = if amend && author_arg.is_none() {
        parent_commit.as_ref().unwrap().author.clone()
    } else if let Some(a) = picked_author {
        a
    } else {
        ident(&g.repo, "AUTHOR")?
    };
    if let Some(a) = &author_arg {
        let i = parse_ident(&author);
        let (t, tz) = (i.time, i.tz.to_string());
        let a = a.trim();
        if !a.contains('<') {
            return Err(fatal(format!(
                "--author '{a}' is not 'Name <email>' and matches no existing author"
            )));
        }
        author = format!("{} {t} {tz}", a);
    }
    if let Some(d) = &date_arg {
        let (t, tz) =
            super::parse_date(d).ok_or_else(|| fatal(format!("invalid date format: {d}")))?;
        let i = parse_ident(&author);
        author = format!("{} <{}> {t} {tz}", i.name, i.email);
    }
    if signoff {
        let c = parse_ident(&committer);
        let line = format!("Signed-off-by: {} <{}>", c.name, c.email);
        if !message.contains(&line) {
            let trailer_block = message
                .trim_end()
                .rsplit("\n\n")
                .next()
                .is_some_and(|p| p.lines().all(|l| l.contains(": ")));
            message = format!(
                "{}{}{line}\n",
                message.trim_end(),
                if trailer_block && message.trim_end().contains("\n\n") {
                    "\n"
                } else {
                    "\n\n"
                }
            );
        }
    }
    let tree = g.repo.write_tree(&tree_files)?;
    let parents = if amend {
        parent_commit.as_ref().unwrap().parents.clone()
    } else {
        st.head.into_iter().chain(merging).collect()
    };
    let c = Commit {
        tree,
        parents: parents.clone(),
        author: author.clone(),
        committer: committer.clone(),
        message,
    };
    let id = g.repo.write(Kind::Commit, &c.encode())?;
    g.repo.write_index(&st.index)?;
    g.repo.set_head(&id)?;
    super::merge::clear_merge_state(g);
    for f in ["CHERRY_PICK_HEAD", "REVERT_HEAD"] {
        let _ = std::fs::remove_file(g.repo.git_dir.join(f));
    }
    let kind = if amend {
        "commit (amend)"
    } else if merging.is_some() {
        "commit (merge)"
    } else if parents.is_empty() {
        "commit (initial)"
    } else {
        "commit"
    };
    g.repo.reflog(
        st.head,
        &id,
        &committer,
        &format!("{kind}: {}", c.subject()),
        true,
    );
    if quiet {
        return Ok(0);
    }
    let branch = g.repo.branch().unwrap_or_else(|| "detached HEAD".into());
    let root = if parents.is_empty() {
        " (root-commit)"
    } else {
        ""
    };
    g.say(&format!(
        "[{branch}{root} {}] {}\n",
        g.repo.abbrev(&id),
        c.subject()
    ));
    let (ai, ci) = (parse_ident(&author), parse_ident(&committer));
    if (ai.name, ai.email) != (ci.name, ci.email) {
        g.say(&format!(" Author: {} <{}>\n", ai.name, ai.email));
    }
    if amend || date_arg.is_some() || picking.is_some() {
        g.say(&format!(
            " Date: {}\n",
            format_date(ai.time, ai.tz, "default")
        ));
    }
    let mut out = Vec::new();
    if merging.is_none() {
        diff::shortstat(g, &changes, Source::Objects, Ws::Exact, &mut out);
        diff::summary(&changes, &mut out);
    }
    g.out.extend_from_slice(&out);
    Ok(0)
}
