//! `compgen`: the completions bash would offer for a word, one per line, as scripts use
//! it to list commands (`compgen -c`), functions, variables and files.

use std::collections::BTreeSet;

use crate::io::Io;
use crate::shell::{BUILTINS, Shell};

/// The words bash reserves (`compgen -k`).
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "in", "function", "time", "{", "}", "!", "[[", "]]", "coproc",
];

/// `compgen [-abcdefkv] [-A ACTION] [-W WORDS] [-P PREFIX] [-S SUFFIX] [-X PATTERN] [WORD]`.
/// Exits 1 when nothing matches.
pub fn compgen(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    let mut actions: Vec<String> = Vec::new();
    let (mut words, mut prefix, mut suffix, mut exclude) = (None, "", "", None);
    let mut word: Option<&str> = None;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "-A" | "-W" | "-P" | "-S" | "-X" | "-o" | "-F" | "-C" | "-G" => {
                let Some(v) = args.get(i + 1) else {
                    sh.error(io, &format!("compgen: {a}: option requires an argument"));
                    return 2;
                };
                match a {
                    "-A" => actions.push(v.clone()),
                    "-W" => words = Some(v.clone()),
                    "-P" => prefix = v,
                    "-S" => suffix = v,
                    "-X" => exclude = Some(v.clone()),
                    "-o" => {}
                    _ => {
                        sh.error(io, &format!("compgen: {a}: not available in this shell"));
                        return 2;
                    }
                }
                i += 2;
                continue;
            }
            "--" => {
                word = args.get(i + 1).map(String::as_str);
                break;
            }
            _ => {}
        }
        match a.strip_prefix('-').filter(|f| !f.is_empty()) {
            Some(flags) => {
                for f in flags.chars() {
                    let action = match f {
                        'a' => "alias",
                        'b' => "builtin",
                        'c' => "command",
                        'd' => "directory",
                        'e' => "export",
                        'f' => "file",
                        'k' => "keyword",
                        'v' => "variable",
                        'u' => "user",
                        'g' => "group",
                        'j' => "job",
                        's' => "service",
                        _ => {
                            sh.error(io, &format!("compgen: -{f}: invalid option"));
                            return 2;
                        }
                    };
                    actions.push(action.to_string());
                }
            }
            None => word = Some(a),
        }
        i += 1;
    }
    let word = word.unwrap_or("");
    let mut found: Vec<String> = Vec::new();
    for action in &actions {
        let mut names: Vec<String> = match action.as_str() {
            "alias" => sh.aliases.keys().cloned().collect(),
            "builtin" => BUILTINS.iter().map(|b| b.to_string()).collect(),
            "keyword" => KEYWORDS.iter().map(|k| k.to_string()).collect(),
            "function" => sorted(sh.functions.keys().cloned()),
            "variable" => sorted(sh.vars.keys().cloned()),
            "export" => sorted(
                sh.vars
                    .iter()
                    .filter(|(_, v)| v.exported)
                    .map(|(k, _)| k.clone()),
            ),
            "command" => {
                let mut all: Vec<String> = sh.aliases.keys().cloned().collect();
                all.extend(BUILTINS.iter().map(|b| b.to_string()));
                all.extend(sorted(sh.functions.keys().cloned()));
                all.extend(KEYWORDS.iter().map(|k| k.to_string()));
                all.extend(programs(sh));
                all
            }
            "file" => paths(sh, word, false),
            "directory" => paths(sh, word, true),
            "user" => account_names("/etc/passwd"),
            "group" => account_names("/etc/group"),
            "job" | "service" | "hostname" | "signal" | "setopt" | "shopt" | "helptopic"
            | "running" | "stopped" | "enabled" | "disabled" | "arrayvar" | "binding" => Vec::new(),
            other => {
                sh.error(io, &format!("compgen: {other}: invalid action name"));
                return 2;
            }
        };
        names.retain(|n| n.starts_with(word));
        found.extend(names);
    }
    if let Some(list) = &words {
        let ifs = sh.get_var("IFS").unwrap_or_else(|| " \t\n".to_string());
        found.extend(
            list.split(|c| ifs.contains(c))
                .filter(|w| !w.is_empty() && w.starts_with(word))
                .map(String::from),
        );
    }
    if let Some(pattern) = &exclude {
        // `-X '!PAT'` keeps only the matches; `-X PAT` removes them.
        let (keep, pat) = match pattern.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, pattern.as_str()),
        };
        found.retain(|w| guest_support::cli::glob(pat, w) == keep);
    }
    if found.is_empty() {
        return 1;
    }
    let out: String = found
        .iter()
        .map(|w| format!("{prefix}{w}{suffix}\n"))
        .collect();
    io.stdout.write_str(&out);
    0
}

fn sorted(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = names.collect();
    v.sort();
    v
}

/// The programs in `PATH`'s directories, each once.
fn programs(sh: &Shell) -> Vec<String> {
    let path = sh.get_var("PATH").unwrap_or_default();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let Ok(entries) = std::fs::read_dir(sh.abs_path(dir)) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        for n in names {
            if seen.insert(n.clone()) {
                out.push(n);
            }
        }
    }
    out
}

/// Files (or only directories) whose path starts with `word`, as written (`src/ma` gives
/// `src/main.rs`); names starting with `.` only when the word's last part does.
fn paths(sh: &Shell, word: &str, dirs_only: bool) -> Vec<String> {
    let (dir, base) = match word.rfind('/') {
        Some(i) => (&word[..=i], &word[i + 1..]),
        None => ("", word),
    };
    let Ok(entries) = std::fs::read_dir(sh.abs_path(if dir.is_empty() { "." } else { dir })) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| !dirs_only || std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(base) && (!n.starts_with('.') || base.starts_with('.')))
        .map(|n| format!("{dir}{n}"))
        .collect();
    out.sort();
    out
}

/// The first field of each line of `/etc/passwd` or `/etc/group`.
fn account_names(file: &str) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(':').next())
        .filter(|n| !n.is_empty())
        .map(String::from)
        .collect()
}
