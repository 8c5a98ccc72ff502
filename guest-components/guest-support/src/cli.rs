//! What the command-line tools of the image share: option parsing, GNU's wording for I/O
//! errors, shell patterns and `ls -l` style modes.

use std::io::ErrorKind;

/// One parsed command line: options (`-x`, `-xVALUE`, `-x VALUE`, `--name[=VALUE]`) and
/// operands. Options listed in `with_value` take a value.
pub struct Opts {
    pub flags: Vec<(String, Option<String>)>,
    pub operands: Vec<String>,
}

impl Opts {
    /// Parses `args` (without the program name).
    pub fn parse(args: &[String], with_value: &[&str]) -> Opts {
        let mut flags = Vec::new();
        let mut operands = Vec::new();
        let mut it = args.iter().cloned();
        while let Some(a) = it.next() {
            if a == "--" {
                operands.extend(it.by_ref());
                break;
            }
            if let Some(long) = a.strip_prefix("--") {
                let (name, val) = match long.split_once('=') {
                    Some((n, v)) => (n.to_string(), Some(v.to_string())),
                    None => (long.to_string(), None),
                };
                let val = match val {
                    None if with_value.contains(&name.as_str()) => it.next(),
                    v => v,
                };
                flags.push((name, val));
                continue;
            }
            if a.len() > 1 && a.starts_with('-') {
                let chars: Vec<char> = a[1..].chars().collect();
                for (k, c) in chars.iter().enumerate() {
                    let name = c.to_string();
                    if with_value.contains(&name.as_str()) {
                        let rest: String = chars[k + 1..].iter().collect();
                        let v = if rest.is_empty() {
                            it.next()
                        } else {
                            Some(rest)
                        };
                        flags.push((name, v));
                        break;
                    }
                    flags.push((name, None));
                }
                continue;
            }
            operands.push(a);
        }
        Opts { flags, operands }
    }

    pub fn has(&self, names: &[&str]) -> bool {
        self.flags.iter().any(|(n, _)| names.contains(&n.as_str()))
    }

    /// The last value given to any of `names`.
    pub fn value(&self, names: &[&str]) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(n, _)| names.contains(&n.as_str()))
            .and_then(|(_, v)| v.as_deref())
    }

    /// The first option not in `known`, as the error GNU tools print.
    pub fn unknown(&self, tool: &str, known: &[&str]) -> Option<String> {
        let (n, _) = self
            .flags
            .iter()
            .find(|(n, _)| !known.contains(&n.as_str()))?;
        Some(if n.chars().count() == 1 {
            format!("{tool}: invalid option -- '{n}'")
        } else {
            format!("{tool}: unrecognized option '--{n}'")
        })
    }
}

/// GNU's wording for an I/O error.
pub fn reason(e: &std::io::Error) -> String {
    match e.kind() {
        ErrorKind::NotFound => "No such file or directory".into(),
        ErrorKind::PermissionDenied => "Permission denied".into(),
        ErrorKind::AlreadyExists => "File exists".into(),
        ErrorKind::NotADirectory => "Not a directory".into(),
        ErrorKind::IsADirectory => "Is a directory".into(),
        ErrorKind::DirectoryNotEmpty => "Directory not empty".into(),
        ErrorKind::StorageFull => "No space left on device".into(),
        _ => {
            let s = e.to_string();
            if s.contains("apabilit") {
                "Permission denied".into()
            } else {
                s.split(" (os error").next().unwrap_or(&s).to_string()
            }
        }
    }
}

/// Shell patterns: `*`, `?`, `[...]`, `\x`.
pub fn glob(p: &str, s: &str) -> bool {
    let p: Vec<char> = p.chars().collect();
    let s: Vec<char> = s.chars().collect();
    fn class(p: &[char], c: char) -> Option<(bool, usize)> {
        let mut i = 1;
        let neg = matches!(p.get(1), Some('!') | Some('^'));
        if neg {
            i += 1;
        }
        let mut hit = false;
        let start = i;
        while i < p.len() {
            if p[i] == ']' && i > start {
                return Some((hit != neg, i + 1));
            }
            if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
                hit |= p[i] <= c && c <= p[i + 2];
                i += 3;
            } else {
                hit |= p[i] == c;
                i += 1;
            }
        }
        None
    }
    fn go(p: &[char], s: &[char]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some('*') => (0..=s.len()).any(|i| go(&p[1..], &s[i..])),
            Some('?') => !s.is_empty() && go(&p[1..], &s[1..]),
            Some('[') if !s.is_empty() => match class(p, s[0]) {
                Some((true, used)) => go(&p[used..], &s[1..]),
                Some((false, _)) => false,
                None => s[0] == '[' && go(&p[1..], &s[1..]),
            },
            Some('\\') if p.len() > 1 => s.first() == Some(&p[1]) && go(&p[2..], &s[1..]),
            Some(c) => s.first() == Some(c) && go(&p[1..], &s[1..]),
        }
    }
    go(&p, &s)
}

/// `rwxr-xr-x` for the low nine bits (with s/t), after a type character.
pub fn mode_string(mode: u32, kind: char) -> String {
    let mut s = String::from(kind);
    let bits = [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ];
    for (i, (bit, c)) in bits.iter().enumerate() {
        let set = mode & bit != 0;
        let special = match i {
            2 => mode & 0o4000 != 0,
            5 => mode & 0o2000 != 0,
            8 => mode & 0o1000 != 0,
            _ => false,
        };
        s.push(match (set, special, i) {
            (true, true, 8) => 't',
            (false, true, 8) => 'T',
            (true, true, _) => 's',
            (false, true, _) => 'S',
            (true, false, _) => *c,
            (false, false, _) => '-',
        });
    }
    s
}
