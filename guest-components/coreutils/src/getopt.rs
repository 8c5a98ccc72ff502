//! `getopt` (util-linux): parses a script's arguments and prints them normalized, quoted
//! for the shell, options first, then `--`, then the other arguments.

use std::ffi::OsString;

const USAGE: &str = "Usage:\n getopt <optstring> <parameters>\n getopt [options] [--] <optstring> <parameters>\n getopt [options] -o|--options <optstring> [options] [--] <parameters>";

/// getopt's own long options.
const OWN_LONG: &[&str] = &[
    "options",
    "longoptions",
    "name",
    "shell",
    "quiet",
    "quiet-output",
    "unquoted",
    "alternative",
    "test",
    "help",
    "version",
];

#[derive(Clone, Copy, PartialEq)]
enum Arg {
    No,
    Required,
    Optional,
}

/// `name`, `name:` or `name::` of an option string.
fn parse_long(spec: &str) -> Vec<(String, Arg)> {
    spec.split([',', ' ', '\t', '\n'])
        .filter(|s| !s.is_empty())
        .map(|s| {
            if let Some(n) = s.strip_suffix("::") {
                (n.to_string(), Arg::Optional)
            } else if let Some(n) = s.strip_suffix(':') {
                (n.to_string(), Arg::Required)
            } else {
                (s.to_string(), Arg::No)
            }
        })
        .collect()
}

/// The short option `c` of an option string, if it has it.
fn short_of(optstring: &str, c: char) -> Option<Arg> {
    let chars: Vec<char> = optstring.chars().collect();
    let i = chars.iter().position(|&x| x == c && x != ':')?;
    Some(match (chars.get(i + 1), chars.get(i + 2)) {
        (Some(':'), Some(':')) => Arg::Optional,
        (Some(':'), _) => Arg::Required,
        _ => Arg::No,
    })
}

pub fn getopt(argv: std::vec::IntoIter<OsString>) -> i32 {
    run(argv
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect())
}

/// `getopt` over its arguments (without the program's name).
fn run(args: Vec<String>) -> i32 {
    let mut name = "getopt".to_string();
    let (mut quiet, mut quiet_output, mut unquoted, mut alternative) = (false, false, false, false);
    let mut optstring: Option<String> = None;
    let mut longs: Vec<(String, Arg)> = Vec::new();
    let mut i = 0;
    // getopt's own options (the old form has none: its first argument is the optstring).
    let compatible = args.first().is_some_and(|a| !a.starts_with('-'));
    if !compatible {
        while i < args.len() {
            let a = args[i].as_str();
            let take = |i: &mut usize| -> Option<String> {
                *i += 1;
                args.get(*i).cloned()
            };
            let (key, inline) = match a.split_once('=') {
                Some((k, v)) if k.starts_with("--") => (k, Some(v.to_string())),
                _ => (a, None),
            };
            // getopt's own long options, like any, may be shortened (`--long`).
            let key = match key.strip_prefix("--").filter(|k| !k.is_empty()) {
                Some(k) => {
                    let all: Vec<&&str> = OWN_LONG.iter().filter(|o| o.starts_with(k)).collect();
                    match (OWN_LONG.iter().find(|o| **o == k), all.as_slice()) {
                        (Some(exact), _) => format!("--{exact}"),
                        (None, [one]) => format!("--{one}"),
                        (None, []) => key.to_string(),
                        (None, _) => {
                            eprintln!(
                                "getopt: option '{key}' is ambiguous\nTry 'getopt --help' for more information."
                            );
                            return 2;
                        }
                    }
                }
                None => key.to_string(),
            };
            match key.as_str() {
                "--" => {
                    i += 1;
                    break;
                }
                "-o" | "--options" => optstring = inline.or_else(|| take(&mut i)),
                "-l" | "--longoptions" => longs.extend(parse_long(
                    &inline.or_else(|| take(&mut i)).unwrap_or_default(),
                )),
                "-n" | "--name" => name = inline.or_else(|| take(&mut i)).unwrap_or_default(),
                "-s" | "--shell" => {
                    let shell = inline.or_else(|| take(&mut i)).unwrap_or_default();
                    if !matches!(shell.as_str(), "sh" | "bash" | "csh" | "tcsh") {
                        eprintln!("getopt: unknown shell after -s or --shell argument");
                        return 2;
                    }
                }
                "-q" | "--quiet" => quiet = true,
                "-Q" | "--quiet-output" => quiet_output = true,
                "-u" | "--unquoted" => unquoted = true,
                "-a" | "--alternative" => alternative = true,
                "-T" | "--test" => return 4,
                "-h" | "--help" => {
                    println!("{USAGE}");
                    return 0;
                }
                "-V" | "--version" => {
                    println!("getopt from util-linux 2.38.1");
                    return 0;
                }
                // Short options of getopt's own, joined (`-qo ab`) or with a value (`-oab`).
                k if k.starts_with('-') && !k.starts_with("--") && k.len() > 2 => {
                    let (flag, rest) = k.split_at(2);
                    match flag {
                        "-o" => optstring = Some(rest.to_string()),
                        "-l" => longs.extend(parse_long(rest)),
                        "-n" => name = rest.to_string(),
                        "-s" => {}
                        _ => {
                            let mut expanded: Vec<String> =
                                rest.chars().map(|c| format!("-{c}")).collect();
                            expanded.insert(0, flag.to_string());
                            let mut again = args[..i].to_vec();
                            again.extend(expanded);
                            again.extend(args[i + 1..].iter().cloned());
                            return run(again);
                        }
                    }
                }
                k if k.starts_with('-') => {
                    eprintln!(
                        "getopt: unrecognized option '{k}'\nTry 'getopt --help' for more information."
                    );
                    return 2;
                }
                _ => break,
            }
            i += 1;
        }
    } else {
        unquoted = true;
    }
    let optstring = match optstring {
        Some(o) => o,
        None => match args.get(i) {
            Some(o) => {
                i += 1;
                o.clone()
            }
            None => {
                eprintln!(
                    "getopt: missing optstring argument\nTry 'getopt --help' for more information."
                );
                return 2;
            }
        },
    };
    let params = &args[i.min(args.len())..];
    // `+` (or POSIXLY_CORRECT): options end at the first other argument.
    let stop_first = optstring.starts_with('+') || std::env::var_os("POSIXLY_CORRECT").is_some();
    let optstring = optstring.trim_start_matches(['+', '-']).to_string();
    let quote = |s: &str| {
        if unquoted {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', "'\\''"))
        }
    };
    let mut out: Vec<String> = Vec::new();
    let mut rest: Vec<String> = Vec::new();
    let mut status = 0;
    let mut err = |msg: String| {
        if !quiet {
            eprintln!("{name}: {msg}");
        }
        status = 1;
    };
    let mut k = 0;
    while k < params.len() {
        let p = &params[k];
        k += 1;
        if p == "--" {
            rest.extend(params[k..].iter().cloned());
            break;
        }
        let long_body = p
            .strip_prefix("--")
            .or_else(|| {
                (alternative && p.len() > 1)
                    .then(|| p.strip_prefix('-'))
                    .flatten()
            })
            .filter(|b| !b.is_empty());
        if let Some(body) = long_body {
            let (key, value) = match body.split_once('=') {
                Some((k, v)) => (k, Some(v.to_string())),
                None => (body, None),
            };
            let exact = longs.iter().find(|(n, _)| n == key);
            let candidates: Vec<&(String, Arg)> =
                longs.iter().filter(|(n, _)| n.starts_with(key)).collect();
            let found = match (exact, candidates.len()) {
                (Some(e), _) => Some(e),
                (None, 1) => Some(candidates[0]),
                (None, 0) => None,
                (None, _) => {
                    let all: Vec<String> =
                        candidates.iter().map(|(n, _)| format!("'--{n}'")).collect();
                    err(format!(
                        "option '--{key}' is ambiguous; possibilities: {}",
                        all.join(" ")
                    ));
                    continue;
                }
            };
            // With -a, `-x` that is no long option may be short ones.
            if found.is_none() && alternative && !p.starts_with("--") {
                // Falls through to the short options below.
            } else {
                let Some((long, arg)) = found else {
                    err(format!("unrecognized option '{p}'"));
                    continue;
                };
                match (arg, value) {
                    (Arg::No, Some(_)) => {
                        err(format!("option '--{long}' doesn't allow an argument"));
                    }
                    (Arg::No, None) => out.push(format!("--{long}")),
                    (Arg::Optional, v) => {
                        out.push(format!("--{long}"));
                        out.push(quote(&v.unwrap_or_default()));
                    }
                    (Arg::Required, Some(v)) => {
                        out.push(format!("--{long}"));
                        out.push(quote(&v));
                    }
                    (Arg::Required, None) => match params.get(k) {
                        Some(v) => {
                            k += 1;
                            out.push(format!("--{long}"));
                            out.push(quote(v));
                        }
                        None => err(format!("option '--{long}' requires an argument")),
                    },
                }
                continue;
            }
        }
        if p.len() > 1 && p.starts_with('-') {
            let chars: Vec<char> = p[1..].chars().collect();
            let mut j = 0;
            while j < chars.len() {
                let c = chars[j];
                j += 1;
                match short_of(&optstring, c) {
                    None => err(format!("invalid option -- '{c}'")),
                    Some(Arg::No) => out.push(format!("-{c}")),
                    Some(arg) => {
                        let attached: String = chars[j..].iter().collect();
                        j = chars.len();
                        if !attached.is_empty() {
                            out.push(format!("-{c}"));
                            out.push(quote(&attached));
                        } else if arg == Arg::Optional {
                            out.push(format!("-{c}"));
                            out.push(quote(""));
                        } else if let Some(v) = params.get(k) {
                            k += 1;
                            out.push(format!("-{c}"));
                            out.push(quote(v));
                        } else {
                            err(format!("option requires an argument -- '{c}'"));
                        }
                    }
                }
            }
            continue;
        }
        rest.push(p.clone());
        if stop_first {
            rest.extend(params[k..].iter().cloned());
            break;
        }
    }
    if !quiet_output {
        let mut line = String::new();
        for o in &out {
            line.push(' ');
            line.push_str(o);
        }
        line.push_str(" --");
        for r in &rest {
            line.push(' ');
            line.push_str(&quote(r));
        }
        println!("{line}");
    }
    status
}
