//! `.gitignore` rules (`.git/info/exclude`, `core.excludesFile`, and a `.gitignore` in any
//! directory) and the walk of the working tree that finds untracked files.

use std::collections::BTreeSet;
use std::path::Path;

use guest_support::cli::glob;

struct Rule {
    /// Directory of the file the rule came from, relative to the top ("" or "a/b/").
    base: String,
    segments: Vec<String>,
    negate: bool,
    dir_only: bool,
    /// A pattern with a slash before its end matches from `base`; others match a name at
    /// any depth.
    anchored: bool,
}

#[derive(Default)]
pub struct Ignore {
    rules: Vec<Rule>,
}

impl Ignore {
    /// The rules that hold everywhere: `core.excludesFile` (default
    /// `$XDG_CONFIG_HOME/git/ignore`), then `.git/info/exclude`, then the top `.gitignore`.
    pub fn new(repo: &super::store::Repo) -> Ignore {
        let mut ig = Ignore::default();
        let global = repo
            .config
            .get("core.excludesfile")
            .map(|p| match p.strip_prefix("~/") {
                Some(rest) => format!("{}/{rest}", std::env::var("HOME").unwrap_or_default()),
                None => p.to_string(),
            })
            .or_else(|| {
                let xdg = std::env::var("XDG_CONFIG_HOME")
                    .ok()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| {
                        format!("{}/.config", std::env::var("HOME").unwrap_or_default())
                    });
                Some(format!("{xdg}/git/ignore"))
            });
        if let Some(g) = global {
            ig.add_file(Path::new(&g), "");
        }
        ig.add_file(&repo.git_dir.join("info/exclude"), "");
        ig.add_file(&repo.work.join(".gitignore"), "");
        ig
    }

    pub fn add_file(&mut self, path: &Path, base: &str) {
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
        for line in text.lines() {
            let mut l = line.trim_end_matches('\r');
            // Trailing spaces go unless escaped.
            while l.ends_with(' ') && !l.ends_with("\\ ") {
                l = &l[..l.len() - 1];
            }
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let (negate, l) = match l.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, l.strip_prefix('\\').unwrap_or(l)),
            };
            let (dir_only, l) = match l.strip_suffix('/') {
                Some(rest) => (true, rest),
                None => (false, l),
            };
            let anchored = l.contains('/');
            let l = l.strip_prefix('/').unwrap_or(l);
            if l.is_empty() {
                continue;
            }
            self.rules.push(Rule {
                base: base.to_string(),
                segments: l.split('/').map(str::to_string).collect(),
                negate,
                dir_only,
                anchored,
            });
        }
    }

    /// Whether `path` (relative to the top, no trailing slash) is ignored by the rules
    /// read so far. Callers check a directory before walking into it, so a file in an
    /// ignored directory is never asked about.
    pub fn ignored(&self, path: &str, is_dir: bool) -> bool {
        for r in self.rules.iter().rev() {
            if r.dir_only && !is_dir {
                continue;
            }
            let Some(rel) = path.strip_prefix(&r.base) else {
                continue;
            };
            let hit = if r.anchored {
                let parts: Vec<&str> = rel.split('/').collect();
                segments_match(&r.segments, &parts)
            } else {
                glob(&r.segments[0], rel.rsplit('/').next().unwrap_or(rel))
            };
            if hit {
                return !r.negate;
            }
        }
        false
    }

    fn rule_count(&self) -> usize {
        self.rules.len()
    }

    fn truncate(&mut self, n: usize) {
        self.rules.truncate(n);
    }
}

fn segments_match(pat: &[String], parts: &[&str]) -> bool {
    match pat.first() {
        None => parts.is_empty(),
        Some(p) if p == "**" => {
            if pat.len() == 1 {
                return !parts.is_empty();
            }
            (0..=parts.len()).any(|i| segments_match(&pat[1..], &parts[i..]))
        }
        Some(p) => !parts.is_empty() && glob(p, parts[0]) && segments_match(&pat[1..], &parts[1..]),
    }
}

/// Files under `dir` (relative to the top, "" or "a/b/") that the index lacks and no rule
/// ignores, and the same for directories holding a repository of their own (listed with a
/// trailing slash, never entered). `tracked_dirs` holds every directory with a file in the
/// index ("a/", "a/b/").
pub fn untracked(
    work: &Path,
    dir: &str,
    ig: &mut Ignore,
    tracked: &dyn Fn(&str) -> bool,
    out: &mut Vec<String>,
) {
    let before = ig.rule_count();
    if !dir.is_empty() {
        ig.add_file(&work.join(dir).join(".gitignore"), dir);
    }
    let Ok(rd) = std::fs::read_dir(work.join(dir)) else {
        ig.truncate(before);
        return;
    };
    let mut names: Vec<(String, bool)> = rd
        .flatten()
        .map(|e| {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            (e.file_name().to_string_lossy().into_owned(), is_dir)
        })
        .collect();
    names.sort();
    for (name, is_dir) in names {
        if name == ".git" {
            continue;
        }
        let path = format!("{dir}{name}");
        if is_dir {
            if ig.ignored(&path, true) {
                continue;
            }
            if work.join(&path).join(".git").exists() && !tracked(&path) {
                out.push(format!("{path}/"));
                continue;
            }
            untracked(work, &format!("{path}/"), ig, tracked, out);
        } else if !tracked(&path) && !ig.ignored(&path, false) {
            out.push(path);
        }
    }
    ig.truncate(before);
}

/// Git's default (`-unormal`) view of untracked files: a directory with nothing tracked
/// under it is one entry, `dir/`.
pub fn collapse(files: &[String], tracked_dirs: &BTreeSet<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in files {
        let mut shown = f.clone();
        let mut at = 0;
        while let Some(i) = f[at..].find('/') {
            let d = &f[..at + i + 1];
            if !tracked_dirs.contains(d) {
                shown = d.to_string();
                break;
            }
            at += i + 1;
        }
        if out.last() != Some(&shown) {
            out.push(shown);
        }
    }
    out.dedup();
    out
}
