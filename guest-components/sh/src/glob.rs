//! Pathname expansion: `*.txt`, `src/*/mod.rs`, relative to the working directory; with
//! `shopt` options `dotglob`, `globstar` (`**`) and `nocaseglob`.

use crate::pattern;

/// The `shopt` options that change pathname expansion.
#[derive(Clone, Copy, Debug, Default)]
pub struct GlobOpts {
    /// `*` matches names starting with `.` too (never `.` and `..`).
    pub dotglob: bool,
    /// `**` alone in a path component matches any number of directories (and, last, every
    /// file below).
    pub globstar: bool,
    /// Letters match either case.
    pub nocase: bool,
}

/// Everything below `dir` (relative names under `prefix`), depth first, symlinks not
/// followed; directories only unless `files`.
fn descendants(dir: &str, prefix: &str, opts: GlobOpts, files: bool, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| opts.dotglob || !n.starts_with('.'))
        .collect();
    names.sort();
    for n in names {
        let full = format!("{dir}/{n}");
        let rel = if prefix.is_empty() {
            n.clone()
        } else {
            format!("{prefix}/{n}")
        };
        let is_dir = std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_dir());
        if is_dir || files {
            out.push(rel.clone());
        }
        if is_dir {
            descendants(&full, &rel, opts, files, out);
        }
    }
}

/// Paths matching `pat` (relative patterns give relative paths), sorted; empty if none.
pub fn glob(cwd: &str, pat: &str, opts: GlobOpts) -> Vec<String> {
    let absolute = pat.starts_with('/');
    let parts: Vec<&str> = pat.split('/').filter(|p| !p.is_empty()).collect();
    let mut found: Vec<String> = vec![String::new()];
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut next = Vec::new();
        for prefix in &found {
            let dir = match (absolute, prefix.is_empty()) {
                (true, true) => "/".to_string(),
                (true, false) => format!("/{prefix}"),
                (false, true) => cwd.to_string(),
                (false, false) => format!("{cwd}/{prefix}"),
            };
            let join = |name: &str| {
                if prefix.is_empty() {
                    name.to_string()
                } else {
                    format!("{prefix}/{name}")
                }
            };
            if opts.globstar && *part == "**" {
                // Zero or more directories; last, everything below.
                if !last {
                    next.push(prefix.clone());
                }
                descendants(&dir, prefix, opts, last, &mut next);
                continue;
            }
            if !pattern::has_magic(part) {
                let name = unescape(part);
                let candidate = join(&name);
                let full = format!("{dir}/{name}");
                if std::fs::symlink_metadata(&full).is_ok() {
                    next.push(candidate);
                }
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    !n.starts_with('.')
                        || part.starts_with('.')
                        || (opts.dotglob && n != "." && n != "..")
                })
                .filter(|n| {
                    if opts.nocase {
                        pattern::matches(&part.to_lowercase(), &n.to_lowercase())
                    } else {
                        pattern::matches(part, n)
                    }
                })
                .collect();
            names.sort();
            for n in names {
                let full = format!("{dir}/{n}");
                if !last
                    && !std::fs::metadata(&full)
                        .map(|m| m.is_dir())
                        .unwrap_or(false)
                {
                    continue;
                }
                next.push(join(&n));
            }
        }
        found = next;
    }
    let mut out: Vec<String> = found
        .into_iter()
        .filter(|f| !f.is_empty())
        .map(|f| if absolute { format!("/{f}") } else { f })
        .collect();
    if pat.ends_with('/') {
        // `*/` matches directories only.
        out = out
            .into_iter()
            .filter(|f| {
                let full = if f.starts_with('/') {
                    f.clone()
                } else {
                    format!("{cwd}/{f}")
                };
                std::fs::metadata(full).is_ok_and(|m| m.is_dir())
            })
            .map(|f| f + "/")
            .collect();
    }
    out.sort();
    out.dedup();
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}
