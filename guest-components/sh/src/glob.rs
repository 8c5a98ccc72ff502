//! Pathname expansion: `*.txt`, `src/*/mod.rs`, relative to the working directory.

use crate::pattern;

/// Paths matching `pat` (relative patterns give relative paths), sorted; empty if none.
pub fn glob(cwd: &str, pat: &str) -> Vec<String> {
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
                .filter(|n| !n.starts_with('.') || part.starts_with('.'))
                .filter(|n| pattern::matches(part, n))
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
