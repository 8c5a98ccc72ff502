//! Absolute symlink targets, kept on disk in a form the host's file system follows inside the
//! sandbox.
//!
//! cap-std (under `wasi:filesystem`) refuses to create a symlink whose target is absolute, and
//! follows none: an absolute target would name a path of the host. A guest's absolute target
//! (`ln -s /workspace/logs/a.log l`) is therefore written as the relative path from the link's
//! directory to the target, which reaches the same file inside the sandbox (and, like any
//! relative target, nothing outside it: a target in another of the sandbox's directories, or
//! outside them, climbs out of the link's directory and is refused when followed). A marker
//! in front, a few `./` that change nothing where the path leads, says that it was written
//! absolute, and reading the link gives back the absolute path as it was written.
//!
//! A relative target that itself begins with the marker is stored with one more `./` in
//! front, so that every target a guest writes reads back as it was written.

use crate::sandbox::normalize;

/// What an absolute target's relative form begins with on disk.
const MARKER: &str = "./././";

/// The target to store for a link at the sandbox path `link` (its components, normalized),
/// when the guest asked for `target`.
pub(crate) fn encode(link: &[String], target: &str) -> String {
    if !target.starts_with('/') {
        return if target.starts_with(MARKER) {
            format!("./{target}")
        } else {
            target.to_string()
        };
    }
    let dir = &link[..link.len().saturating_sub(1)];
    let to = normalize("/", target);
    let common = dir.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; dir.len() - common];
    parts.extend(to[common..].iter().map(String::as_str));
    let mut rel = if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    };
    if target.len() > 1 && target.ends_with('/') {
        rel.push('/');
    }
    format!("{MARKER}{rel}")
}

/// The target a guest reads back for a link at the sandbox path `link` whose stored target is
/// `stored` (what [`encode`] wrote, or any relative target another writer left).
pub(crate) fn decode(link: &[String], stored: &str) -> String {
    let rest = match stored.strip_prefix(MARKER) {
        Some(rest) if !rest.starts_with("./") => rest,
        _ => return decode_unplaced(stored),
    };
    let dir = format!("/{}", link[..link.len().saturating_sub(1)].join("/"));
    let mut abs = format!("/{}", normalize(&dir, rest).join("/"));
    if abs.len() > 1 && rest.ends_with('/') {
        abs.push('/');
    }
    abs
}

/// The target a guest reads back for a link reached through a descriptor whose sandbox path
/// is unknown: the stored one, with a relative target's escape (see [`encode`]) taken off.
pub(crate) fn decode_unplaced(stored: &str) -> String {
    match stored.strip_prefix(MARKER) {
        Some(rest) if rest.starts_with("./") => stored[2..].to_string(),
        _ => stored.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Vec<String> {
        p.split('/')
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect()
    }

    #[test]
    fn absolute_targets_round_trip_and_resolve_relative() {
        for (link, target, stored) in [
            ("/workspace/l", "/workspace/logs/a.log", "./././logs/a.log"),
            (
                "/workspace/x/y/l",
                "/workspace/logs/a.log",
                "./././../../logs/a.log",
            ),
            ("/workspace/l", "/etc/passwd", "./././../etc/passwd"),
            ("/workspace/d/l", "/workspace/d", "./././."),
            ("/workspace/l", "/workspace/logs/", "./././logs/"),
            ("/tmp/l", "/", "./././.."),
        ] {
            let link = path(link);
            assert_eq!(encode(&link, target), stored, "{target}");
            assert_eq!(decode(&link, stored), target, "{stored}");
        }
    }

    #[test]
    fn relative_targets_read_back_unchanged() {
        let link = path("/workspace/a/l");
        for target in [
            "a.log",
            "../b",
            "./x",
            "././x",
            "./././x",
            "./././././x",
            ".",
        ] {
            let stored = encode(&link, target);
            assert!(!stored.starts_with('/'));
            assert_eq!(
                decode(&link, &stored),
                target,
                "{target} stored as {stored}"
            );
        }
    }

    #[test]
    fn unclean_absolute_targets_reach_the_same_file() {
        let link = path("/workspace/l");
        let stored = encode(&link, "/workspace//logs/./x/../a.log");
        assert_eq!(stored, "./././logs/a.log");
        assert_eq!(decode(&link, &stored), "/workspace/logs/a.log");
    }
}
