//! What a repository knows of its remotes without a network: `git remote` (its config),
//! remote-tracking refs, and a branch's upstream with how far ahead and behind it is, as
//! `status`, `branch -vv` and `log --decorate` show them.

use super::store::{Id, NULL_ID, normal_key};
use super::{Fail, Git, R, fatal};

pub struct Upstream {
    /// `origin/main` (or a local branch name for `remote = .`).
    pub name: String,
    /// Where it points, `None` when the ref is gone.
    pub id: Option<Id>,
}

/// The upstream of `branch` from `branch.<name>.remote` and `branch.<name>.merge`.
pub fn upstream(g: &Git, branch: &str) -> Option<Upstream> {
    let remote = g
        .repo
        .config
        .get(&format!("branch.{branch}.remote"))?
        .to_string();
    let merge = g
        .repo
        .config
        .get(&format!("branch.{branch}.merge"))?
        .to_string();
    let short = merge
        .strip_prefix("refs/heads/")
        .unwrap_or(&merge)
        .to_string();
    let (name, r) = if remote == "." {
        (short.clone(), format!("refs/heads/{short}"))
    } else {
        (
            format!("{remote}/{short}"),
            format!("refs/remotes/{remote}/{short}"),
        )
    };
    Some(Upstream {
        name,
        id: g.repo.ref_id(&r),
    })
}

/// Commits on `a` and not `b`, and on `b` and not `a`.
pub fn ahead_behind(g: &Git, a: &Id, b: &Id) -> R<(usize, usize)> {
    Ok((
        super::history::walk(g, &[*a], &[*b], false)?.len(),
        super::history::walk(g, &[*b], &[*a], false)?.len(),
    ))
}

fn commits(n: usize) -> String {
    format!("{n} commit{}", if n == 1 { "" } else { "s" })
}

/// The lines `git status` prints under "On branch X" about its upstream, with the blank
/// line after them; empty without an upstream.
pub fn tracking_long(g: &Git) -> R<String> {
    let (Some(b), Some(head)) = (g.repo.branch(), g.repo.head()) else {
        return Ok(String::new());
    };
    let Some(up) = upstream(g, &b) else {
        return Ok(String::new());
    };
    let n = &up.name;
    let Some(uid) = up.id else {
        return Ok(format!(
            "Your branch is based on '{n}', but the upstream is gone.\n  (use \"git branch --unset-upstream\" to fixup)\n\n"
        ));
    };
    Ok(match ahead_behind(g, &head, &uid)? {
        (0, 0) => format!("Your branch is up to date with '{n}'.\n\n"),
        (a, 0) => format!(
            "Your branch is ahead of '{n}' by {}.\n  (use \"git push\" to publish your local commits)\n\n",
            commits(a)
        ),
        (0, b) => format!(
            "Your branch is behind '{n}' by {}, and can be fast-forwarded.\n  (use \"git pull\" to update your local branch)\n\n",
            commits(b)
        ),
        (a, b) => format!(
            "Your branch and '{n}' have diverged,\nand have {a} and {b} different commits each, respectively.\n  (use \"git pull\" if you want to integrate the remote branch with yours)\n\n"
        ),
    })
}

/// `...origin/main [ahead 1, behind 2]` for `status -sb`, and the bracket of
/// `branch -vv` (`[origin/main: ahead 1]`).
pub fn tracking_short(g: &Git, branch: &str, tip: Option<Id>) -> R<Option<(String, String)>> {
    let Some(up) = upstream(g, branch) else {
        return Ok(None);
    };
    let counts = match (tip, up.id) {
        (_, None) => "gone".to_string(),
        (None, Some(_)) => String::new(),
        (Some(t), Some(u)) => match ahead_behind(g, &t, &u)? {
            (0, 0) => String::new(),
            (a, 0) => format!("ahead {a}"),
            (0, b) => format!("behind {b}"),
            (a, b) => format!("ahead {a}, behind {b}"),
        },
    };
    Ok(Some((up.name, counts)))
}

/// Remote-tracking refs by short name (`origin/main`), with the target of a symbolic one
/// (`origin/HEAD` -> `origin/main`).
pub fn remote_refs(g: &Git) -> Vec<(String, Id, Option<String>)> {
    let mut out: Vec<(String, Id, Option<String>)> = g
        .repo
        .refs("refs/remotes/")
        .into_iter()
        .map(|(n, id)| (n.trim_start_matches("refs/remotes/").to_string(), id, None))
        .collect();
    if let Ok(rd) = std::fs::read_dir(g.repo.git_dir.join("refs/remotes")) {
        for remote in rd.flatten() {
            let head = remote.path().join("HEAD");
            if let Ok(s) = std::fs::read_to_string(&head)
                && let Some(target) = s.trim().strip_prefix("ref: refs/remotes/")
            {
                let name = format!("{}/HEAD", remote.file_name().to_string_lossy());
                let id = g
                    .repo
                    .ref_id(&format!("refs/remotes/{target}"))
                    .unwrap_or(NULL_ID);
                out.push((name, id, Some(target.to_string())));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn remote_names(g: &Git) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (k, _) in &g.repo.config.values {
        if let Some(rest) = k.strip_prefix("remote.")
            && let Some(name) = rest.strip_suffix(".url")
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_string());
        }
    }
    names
}

/// `git remote`: its configuration only (`-v`, `add`, `remove`, `rename`, `get-url`,
/// `set-url`); talking to a remote is not available here.
pub fn remote(g: &mut Git, args: Vec<String>) -> R<i32> {
    let config = g.repo.git_dir.join("config");
    let verbose = args.first().is_some_and(|a| a == "-v" || a == "--verbose");
    let rest: Vec<&String> = args
        .iter()
        .filter(|a| *a != "-v" && *a != "--verbose")
        .collect();
    let no_such = |n: &str| Fail {
        msg: format!("error: No such remote '{n}'"),
        code: 2,
    };
    match rest.first().map(|s| s.as_str()) {
        None => {
            for n in remote_names(g) {
                if verbose {
                    let url = g.repo.config.get(&format!("remote.{n}.url")).unwrap_or("");
                    let push = g
                        .repo
                        .config
                        .get(&format!("remote.{n}.pushurl"))
                        .unwrap_or(url);
                    g.say(&format!("{n}\t{url} (fetch)\n{n}\t{push} (push)\n"));
                } else {
                    g.say(&format!("{n}\n"));
                }
            }
            Ok(0)
        }
        Some("add") => {
            let (Some(n), Some(url)) = (rest.get(1), rest.get(2)) else {
                return Err(super::usage(
                    "usage: git remote add [<options>] <name> <url>".into(),
                ));
            };
            if remote_names(g).contains(n) {
                return Err(Fail {
                    msg: format!("error: remote {n} already exists."),
                    code: 3,
                });
            }
            super::store::set_config(&config, &format!("remote.{n}.url"), Some(url))?;
            super::store::set_config(
                &config,
                &format!("remote.{n}.fetch"),
                Some(&format!("+refs/heads/*:refs/remotes/{n}/*")),
            )?;
            Ok(0)
        }
        Some("get-url") => {
            let n = rest.get(1).ok_or_else(|| {
                super::usage("usage: git remote get-url [--push] [--all] <name>".into())
            })?;
            let url = g
                .repo
                .config
                .get(&format!("remote.{n}.url"))
                .ok_or_else(|| no_such(n))?
                .to_string();
            g.say(&format!("{url}\n"));
            Ok(0)
        }
        Some("set-url") => {
            let (Some(n), Some(url)) = (rest.get(1), rest.get(2)) else {
                return Err(super::usage(
                    "usage: git remote set-url [--push] <name> <newurl> [<oldurl>]".into(),
                ));
            };
            if !remote_names(g).contains(n) {
                return Err(no_such(n));
            }
            super::store::set_config(&config, &format!("remote.{n}.url"), Some(url))?;
            Ok(0)
        }
        Some("remove" | "rm") => {
            let n = rest
                .get(1)
                .ok_or_else(|| super::usage("usage: git remote remove <name>".into()))?;
            if !remote_names(g).contains(n) {
                return Err(Fail {
                    msg: format!("error: No such remote: '{n}'"),
                    code: 2,
                });
            }
            remove_section(&config, &format!("remote.{n}"))?;
            for (r, _) in g.repo.refs(&format!("refs/remotes/{n}/")) {
                g.repo.delete_ref(&r)?;
            }
            let _ = std::fs::remove_dir_all(g.repo.git_dir.join("refs/remotes").join(n.as_str()));
            Ok(0)
        }
        Some(s @ ("show" | "prune" | "update" | "set-head" | "rename" | "set-branches")) => {
            Err(fatal(format!(
                "'remote {s}' is not available in this sandbox's git: it has no network"
            )))
        }
        Some(s) => Err(Fail {
            msg: format!("error: unknown subcommand: `{s}'"),
            code: 129,
        }),
    }
}

/// Removes `[section "sub"]` (given as `section.sub`) and its entries from a config file.
fn remove_section(path: &std::path::Path, section: &str) -> R<()> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = String::new();
    let mut skipping = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            let key = super::store::parse_config(&format!("{t}\nx=1"))
                .pop()
                .map(|(k, _)| k.trim_end_matches(".x").to_string())
                .unwrap_or_default();
            skipping = key == normal_key(&format!("{section}.x")).trim_end_matches(".x");
        }
        if !skipping {
            out.push_str(line);
            out.push('\n');
        }
    }
    std::fs::write(path, out).map_err(|e| super::store::io_fail(path, e))
}
