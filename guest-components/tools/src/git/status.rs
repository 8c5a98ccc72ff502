//! `git status`, long and short formats.

use std::collections::BTreeMap;

use super::cmds::{split_dashdash, unknown_option};
use super::diff::Delta;
use super::ignore;
use super::staging::{State, matches, specs, state, tracked_dirs};
use super::store::{self, Id};
use super::{Git, R, quote_path};

pub(super) fn label(d: &Delta) -> &'static str {
    match d.letter() {
        'A' => "new file:   ",
        'D' => "deleted:    ",
        'R' => "renamed:    ",
        'T' => "typechange: ",
        _ => "modified:   ",
    }
}

pub(super) fn branch_line(g: &Git) -> String {
    match g.repo.branch() {
        Some(b) => format!("On branch {b}\n"),
        None => match g.repo.head() {
            Some(h) => format!("HEAD detached at {}\n", g.repo.abbrev(&h)),
            None => "Not currently on any branch.\n".into(),
        },
    }
}

/// Git's words and short-format letters for an unmerged path, from which of its base,
/// ours and theirs exist.
pub(super) fn unmerged_label(stages: &[Option<(u32, Id)>; 3]) -> (&'static str, &'static str) {
    match (
        stages[0].is_some(),
        stages[1].is_some(),
        stages[2].is_some(),
    ) {
        (true, true, true) => ("both modified:", "UU"),
        (false, true, true) => ("both added:", "AA"),
        (true, true, false) => ("deleted by them:", "UD"),
        (true, false, true) => ("deleted by us:", "DU"),
        (false, true, false) => ("added by us:", "AU"),
        (false, false, true) => ("added by them:", "UA"),
        _ => ("both deleted:", "DD"),
    }
}

/// How untracked files show in the long format.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Untracked {
    No,
    /// `-unormal`: a directory with nothing tracked is one `dir/` line.
    Normal,
    All,
}

/// The long format of `git status`; `for_commit` gives the wording `git commit` uses when
/// it has nothing to commit ("Initial commit").
pub(super) fn print_long_status(
    g: &mut Git,
    st: &State,
    untracked: Untracked,
    for_commit: bool,
    footer: bool,
) {
    let mut s = branch_line(g);
    s.push_str(&super::remote::tracking_long(g).unwrap_or_default());
    let merging = g.repo.git_dir.join("MERGE_HEAD").exists();
    if merging && !st.index.conflicts.is_empty() {
        s.push_str("You have unmerged paths.\n  (fix conflicts and run \"git commit\")\n  (use \"git merge --abort\" to abort the merge)\n\n");
    } else if merging {
        s.push_str("All conflicts fixed but you are still merging.\n  (use \"git commit\" to conclude merge)\n\n");
    }
    for (file, verb, doing) in [
        ("CHERRY_PICK_HEAD", "cherry-pick", "cherry-picking"),
        ("REVERT_HEAD", "revert", "reverting"),
    ] {
        if let Some(id) = std::fs::read_to_string(g.repo.git_dir.join(file))
            .ok()
            .and_then(|t| store::parse_hex(t.trim()))
        {
            let short = g.repo.abbrev(&id);
            if st.index.conflicts.is_empty() {
                s.push_str(&format!("You are currently {doing} commit {short}.\n  (all conflicts fixed: run \"git {verb} --continue\")\n  (use \"git {verb} --skip\" to skip this patch)\n  (use \"git {verb} --abort\" to cancel the {verb} operation)\n\n"));
            } else {
                s.push_str(&format!("You are currently {doing} commit {short}.\n  (fix conflicts and run \"git {verb} --continue\")\n  (use \"git {verb} --skip\" to skip this patch)\n  (use \"git {verb} --abort\" to cancel the {verb} operation)\n\n"));
            }
        }
    }
    if st.head.is_none() {
        s.push_str(if for_commit {
            "\nInitial commit\n\n"
        } else {
            "\nNo commits yet\n\n"
        });
    }
    if !st.staged.is_empty() {
        s.push_str("Changes to be committed:\n");
        if merging {
            // Git gives no hint while a merge is being concluded.
        } else if st.head.is_some() {
            s.push_str("  (use \"git restore --staged <file>...\" to unstage)\n");
        } else {
            s.push_str("  (use \"git rm --cached <file>...\" to unstage)\n");
        }
        for d in &st.staged {
            let p = match &d.from {
                Some(f) => format!(
                    "{} -> {}",
                    quote_path(&g.relative(f), false),
                    quote_path(&g.relative(&d.path), false)
                ),
                None => quote_path(&g.relative(&d.path), false),
            };
            s.push_str(&format!("\t{}{p}\n", label(d)));
        }
        s.push('\n');
    }
    if !st.index.conflicts.is_empty() {
        s.push_str("Unmerged paths:\n  (use \"git add <file>...\" to mark resolution)\n");
        for (p, stages) in &st.index.conflicts {
            let (label, _) = unmerged_label(stages);
            s.push_str(&format!(
                "\t{label:<17}{}\n",
                quote_path(&g.relative(p), false)
            ));
        }
        s.push('\n');
    }
    if !st.unstaged.is_empty() {
        s.push_str("Changes not staged for commit:\n");
        if st.unstaged.iter().any(|d| d.new.is_none()) {
            s.push_str("  (use \"git add/rm <file>...\" to update what will be committed)\n");
        } else {
            s.push_str("  (use \"git add <file>...\" to update what will be committed)\n");
        }
        s.push_str("  (use \"git restore <file>...\" to discard changes in working directory)\n");
        for d in &st.unstaged {
            s.push_str(&format!(
                "\t{}{}\n",
                label(d),
                quote_path(&g.relative(&d.path), false)
            ));
        }
        s.push('\n');
    }
    let shown = match untracked {
        Untracked::No => Vec::new(),
        Untracked::Normal => ignore::collapse(&st.untracked, &tracked_dirs(&st.index)),
        Untracked::All => st.untracked.clone(),
    };
    if !shown.is_empty() {
        s.push_str("Untracked files:\n  (use \"git add <file>...\" to include in what will be committed)\n");
        for p in &shown {
            s.push_str(&format!("\t{}\n", quote_path(&g.relative(p), false)));
        }
        s.push('\n');
    }
    if untracked == Untracked::No && !st.staged.is_empty() {
        s.push_str("Untracked files not listed (use -u option to show untracked files)\n");
    }
    if st.staged.is_empty() && footer {
        if !st.unstaged.is_empty() || !st.index.conflicts.is_empty() {
            s.push_str("no changes added to commit (use \"git add\" and/or \"git commit -a\")\n");
        } else if !shown.is_empty() {
            s.push_str(
                "nothing added to commit but untracked files present (use \"git add\" to track)\n",
            );
        } else if st.head.is_none() {
            s.push_str("nothing to commit (create/copy files and use \"git add\" to track)\n");
        } else if untracked == Untracked::No {
            s.push_str("nothing to commit (use -u to show untracked files)\n");
        } else {
            s.push_str("nothing to commit, working tree clean\n");
        }
    }
    g.say(&s);
}

pub(super) fn status(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let (mut short, mut porcelain, mut show_branch, mut untracked_mode) =
        (false, false, false, "normal".to_string());
    let mut paths = after.unwrap_or_default();
    for a in opts {
        match a.as_str() {
            "-s" | "--short" => short = true,
            "--porcelain" | "--porcelain=v1" | "--porcelain=1" => porcelain = true,
            "-b" | "--branch" => show_branch = true,
            "--long" | "--no-renames" | "--renames" | "-v" | "--ahead-behind"
            | "--no-ahead-behind" => {}
            "-u" | "-uall" | "--untracked-files" | "--untracked-files=all" => {
                untracked_mode = "all".into()
            }
            "-uno" | "--untracked-files=no" => untracked_mode = "no".into(),
            "-unormal" | "--untracked-files=normal" => untracked_mode = "normal".into(),
            "--ignored" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(a),
        }
    }
    let sp = specs(g, &paths)?;
    let mut st = state(g, untracked_mode != "no")?;
    st.staged
        .retain(|d| matches(&sp, &d.path) || d.from.as_deref().is_some_and(|f| matches(&sp, f)));
    st.unstaged.retain(|d| matches(&sp, &d.path));
    st.untracked.retain(|p| matches(&sp, p));
    if !short && !porcelain {
        let mode = match untracked_mode.as_str() {
            "no" => Untracked::No,
            "all" => Untracked::All,
            _ => Untracked::Normal,
        };
        print_long_status(g, &st, mode, false, true);
        return Ok(0);
    }
    let rel = |g: &Git, p: &str| {
        if porcelain {
            quote_path(p, true)
        } else {
            quote_path(&g.relative(p), true)
        }
    };
    if show_branch {
        let b = match (g.repo.branch(), st.head) {
            (Some(b), None) => format!("## No commits yet on {b}\n"),
            (Some(b), Some(h)) => match super::remote::tracking_short(g, &b, Some(h))? {
                Some((up, counts)) if counts.is_empty() => format!("## {b}...{up}\n"),
                Some((up, counts)) => format!("## {b}...{up} [{counts}]\n"),
                None => format!("## {b}\n"),
            },
            (None, _) => "## HEAD (no branch)\n".into(),
        };
        g.say(&b);
    }
    let mut rows: BTreeMap<String, (char, char, Option<String>)> = BTreeMap::new();
    for d in &st.staged {
        rows.insert(d.path.clone(), (d.letter(), ' ', d.from.clone()));
    }
    for d in &st.unstaged {
        let y = if d.new.is_none() { 'D' } else { d.letter() };
        rows.entry(d.path.clone()).or_insert((' ', ' ', None)).1 = y;
    }
    for (p, stages) in &st.index.conflicts {
        let (_, xy) = unmerged_label(stages);
        let mut c = xy.chars();
        rows.insert(p.clone(), (c.next().unwrap(), c.next().unwrap(), None));
    }
    for (p, (x, y, from)) in &rows {
        let shown = match from {
            Some(f) => format!("{} -> {}", rel(g, f), rel(g, p)),
            None => rel(g, p),
        };
        g.say(&format!("{x}{y} {shown}\n"));
    }
    let shown = if untracked_mode == "all" {
        st.untracked.clone()
    } else {
        ignore::collapse(&st.untracked, &tracked_dirs(&st.index))
    };
    for p in shown {
        g.say(&format!("?? {}\n", rel(g, &p)));
    }
    Ok(0)
}
