//! `grep`: GNU grep's options as agents use them: -r/-R, -n, -i, -v, -c, -l, -L, -E, -F,
//! -G, -P (Perl: look-around, `\K`, backreferences, lazy and possessive quantifiers), -o,
//! -q, -s, -w, -x, -h/-H, -e, -f, -m, -A/-B/-C, --include/--exclude. Exit status 0 when a
//! line matched, 1 when none did, 2 on error.

use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::path::Path;

use regex::bytes::{Regex, RegexBuilder};

#[derive(Default)]
struct Opts {
    patterns: Vec<String>,
    extended: bool,
    perl: bool,
    fixed: bool,
    ignore_case: bool,
    invert: bool,
    count: bool,
    files_with: bool,
    files_without: bool,
    line_numbers: bool,
    only: bool,
    quiet: bool,
    silent: bool,
    word: bool,
    line: bool,
    recursive: bool,
    follow: bool,
    with_name: Option<bool>,
    max: Option<u64>,
    after: usize,
    before: usize,
    include: Vec<String>,
    exclude: Vec<String>,
}

fn usage_error(msg: &str) -> i32 {
    eprintln!(
        "grep: {msg}\nUsage: grep [OPTION]... PATTERNS [FILE]...\nTry 'grep --help' for more information."
    );
    2
}

pub fn main(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut o = Opts::default();
    let mut operands = Vec::new();
    let mut explicit_pattern = false;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            operands.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, val) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let mut take = || {
                val.clone().or_else(|| {
                    i += 1;
                    args.get(i - 1).cloned()
                })
            };
            match name {
                "extended-regexp" => o.extended = true,
                "fixed-strings" => o.fixed = true,
                "basic-regexp" => o.extended = false,
                "ignore-case" => o.ignore_case = true,
                "invert-match" => o.invert = true,
                "count" => o.count = true,
                "files-with-matches" => o.files_with = true,
                "files-without-match" => o.files_without = true,
                "line-number" => o.line_numbers = true,
                "only-matching" => o.only = true,
                "quiet" | "silent" => o.quiet = true,
                "no-messages" => o.silent = true,
                "word-regexp" => o.word = true,
                "line-regexp" => o.line = true,
                "recursive" => o.recursive = true,
                "dereference-recursive" => {
                    o.recursive = true;
                    o.follow = true
                }
                "with-filename" => o.with_name = Some(true),
                "no-filename" => o.with_name = Some(false),
                "regexp" => {
                    explicit_pattern = true;
                    o.patterns.push(take().unwrap_or_default())
                }
                "max-count" => o.max = take().and_then(|v| v.parse().ok()),
                "include" => o.include.push(take().unwrap_or_default()),
                "exclude" => o.exclude.push(take().unwrap_or_default()),
                "color" | "colour" | "binary-files" | "exclude-dir" | "label" => {}
                "after-context" => o.after = take().and_then(|v| v.parse().ok()).unwrap_or(0),
                "before-context" => o.before = take().and_then(|v| v.parse().ok()).unwrap_or(0),
                "context" => {
                    let n = take().and_then(|v| v.parse().ok()).unwrap_or(0);
                    o.after = n;
                    o.before = n;
                }
                _ => return usage_error(&format!("unrecognized option '--{name}'")),
            }
            continue;
        }
        if a.len() > 1 && a.starts_with('-') && !a[1..].starts_with(|c: char| c.is_ascii_digit()) {
            let chars: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let c = chars[k];
                k += 1;
                let mut value = || -> Option<String> {
                    let rest: String = chars[k..].iter().collect();
                    k = chars.len();
                    if rest.is_empty() {
                        i += 1;
                        args.get(i - 1).cloned()
                    } else {
                        Some(rest)
                    }
                };
                match c {
                    'E' => o.extended = true,
                    'F' => o.fixed = true,
                    'G' => o.extended = false,
                    'P' => {
                        o.extended = true;
                        o.perl = true
                    }
                    'i' | 'y' => o.ignore_case = true,
                    'v' => o.invert = true,
                    'c' => o.count = true,
                    'l' => o.files_with = true,
                    'L' => o.files_without = true,
                    'n' => o.line_numbers = true,
                    'o' => o.only = true,
                    'q' => o.quiet = true,
                    's' => o.silent = true,
                    'w' => o.word = true,
                    'x' => o.line = true,
                    'r' => o.recursive = true,
                    'R' => {
                        o.recursive = true;
                        o.follow = true
                    }
                    'H' => o.with_name = Some(true),
                    'h' => o.with_name = Some(false),
                    'I' | 'a' | 'U' | 'z' => {}
                    'e' => {
                        explicit_pattern = true;
                        o.patterns.push(value().unwrap_or_default())
                    }
                    'f' => {
                        explicit_pattern = true;
                        let file = value().unwrap_or_default();
                        match std::fs::read_to_string(&file) {
                            Ok(t) => o.patterns.extend(t.lines().map(String::from)),
                            Err(e) => {
                                eprintln!("grep: {file}: {}", crate::own::reason(&e));
                                return 2;
                            }
                        }
                    }
                    'm' => o.max = value().and_then(|v| v.parse().ok()),
                    'A' => o.after = value().and_then(|v| v.parse().ok()).unwrap_or(0),
                    'B' => o.before = value().and_then(|v| v.parse().ok()).unwrap_or(0),
                    'C' => {
                        let n = value().and_then(|v| v.parse().ok()).unwrap_or(0);
                        o.after = n;
                        o.before = n;
                    }
                    other => return usage_error(&format!("invalid option -- '{other}'")),
                }
            }
            continue;
        }
        operands.push(a.clone());
    }
    if !explicit_pattern {
        if operands.is_empty() {
            return usage_error("no pattern given");
        }
        let p = operands.remove(0);
        o.patterns.extend(p.split('\n').map(String::from));
    }
    let re = match build(&o) {
        Ok(re) => re,
        Err(e) => {
            eprintln!("grep: {e}");
            return 2;
        }
    };
    let mut files: Vec<(String, String)> = Vec::new(); // (path to open, name to show)
    let mut errors = false;
    if operands.is_empty() {
        if o.recursive {
            walk(Path::new("."), "", &o, &mut files, &mut errors);
        } else {
            files.push(("-".into(), "(standard input)".into()));
        }
    } else {
        for f in &operands {
            let p = Path::new(f);
            if f != "-" && p.is_dir() {
                if o.recursive {
                    walk(p, f, &o, &mut files, &mut errors);
                } else {
                    if !o.silent {
                        eprintln!("grep: {f}: Is a directory");
                    }
                    errors = true;
                }
            } else {
                let shown = if f == "-" {
                    "(standard input)".to_string()
                } else {
                    f.clone()
                };
                files.push((f.clone(), shown));
            }
        }
    }
    let show_names = o.with_name.unwrap_or(o.recursive || files.len() > 1);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut any = false;
    for (path, shown) in &files {
        let data = if path == "-" {
            let mut v = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut v);
            v
        } else {
            match std::fs::read(path) {
                Ok(v) => v,
                Err(e) => {
                    if !o.silent {
                        eprintln!("grep: {shown}: {}", crate::own::reason(&e));
                    }
                    errors = true;
                    continue;
                }
            }
        };
        let matched = search(&re, &o, &data, shown, show_names, &mut out);
        any |= matched;
        if o.quiet && any {
            return 0;
        }
    }
    let _ = out.flush();
    if errors && !(o.quiet && any) {
        2
    } else if any {
        0
    } else {
        1
    }
}

fn walk(dir: &Path, shown: &str, o: &Opts, files: &mut Vec<(String, String)>, errors: &mut bool) {
    let mut entries: Vec<_> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.flatten().collect(),
        Err(e) => {
            if !o.silent {
                eprintln!(
                    "grep: {}: {}",
                    if shown.is_empty() { "." } else { shown },
                    crate::own::reason(&e)
                );
            }
            *errors = true;
            return;
        }
    };
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let shown_path = if shown.is_empty() {
            name.clone()
        } else if shown.ends_with('/') {
            format!("{shown}{name}")
        } else {
            format!("{shown}/{name}")
        };
        let Ok(ft) = e.file_type() else { continue };
        let is_dir = if ft.is_symlink() {
            if !o.follow {
                continue;
            }
            path.is_dir()
        } else {
            ft.is_dir()
        };
        if is_dir {
            walk(&path, &shown_path, o, files, errors);
        } else {
            if !o.include.is_empty() && !o.include.iter().any(|g| glob_match(g, &name)) {
                continue;
            }
            if o.exclude.iter().any(|g| glob_match(g, &name)) {
                continue;
            }
            files.push((path.to_string_lossy().into_owned(), shown_path));
        }
    }
}

/// `*` and `?` globs for --include/--exclude.
fn glob_match(p: &str, s: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (p.chars().collect(), s.chars().collect());
    fn go(p: &[char], s: &[char]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some('*') => (0..=s.len()).any(|i| go(&p[1..], &s[i..])),
            Some('?') => !s.is_empty() && go(&p[1..], &s[1..]),
            Some(c) => s.first() == Some(c) && go(&p[1..], &s[1..]),
        }
    }
    go(&p, &s)
}

/// A basic regular expression (grep's and sed's default syntax) in the regex crate's syntax.
pub fn from_basic(p: &str) -> String {
    let mut out = String::new();
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('(' | ')' | '{' | '}' | '|' | '+' | '?')) => out.push(n),
                Some('<') | Some('>') => out.push_str("\\b"),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push_str("\\\\"),
            },
            '(' | ')' | '{' | '}' | '|' | '+' | '?' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// The compiled patterns: the regex crate's, or with -P fancy-regex (which hands what needs
/// no backtracking to the regex crate).
enum Matcher {
    Plain(Regex),
    Perl(fancy_regex::Regex),
}

impl Matcher {
    fn is_match(&self, line: &[u8]) -> bool {
        match self {
            Matcher::Plain(re) => re.is_match(line),
            // A backtracking limit reached counts as no match, as PCRE's grep reports.
            Matcher::Perl(re) => re.is_match(line).unwrap_or(false),
        }
    }

    /// The non-empty matches of a line (what `\K` keeps out is not part of them).
    fn matches(&self, line: &[u8]) -> Vec<Vec<u8>> {
        match self {
            Matcher::Plain(re) => re
                .find_iter(line)
                .map(|m| m.as_bytes().to_vec())
                .filter(|m| !m.is_empty())
                .collect(),
            Matcher::Perl(re) => re
                .find_iter(line)
                .map_while(Result::ok)
                .map(|m| line[m.start()..m.end()].to_vec())
                .filter(|m| !m.is_empty())
                .collect(),
        }
    }
}

fn build(o: &Opts) -> Result<Matcher, String> {
    if o.perl && !o.fixed {
        if o.patterns.len() > 1 {
            return Err("the -P option only supports a single pattern".into());
        }
        let p = &o.patterns[0];
        let p = if o.line {
            format!("^(?:{p})$")
        } else if o.word {
            format!("(?<!\\w)(?:{p})(?!\\w)")
        } else {
            p.clone()
        };
        let p = if o.ignore_case { format!("(?i){p}") } else { p };
        return fancy_regex::Regex::new(&p)
            .map(Matcher::Perl)
            .map_err(|e| format!("invalid regular expression: {e}"));
    }
    build_plain(o).map(Matcher::Plain)
}

fn build_plain(o: &Opts) -> Result<Regex, String> {
    let parts: Vec<String> = o
        .patterns
        .iter()
        .map(|p| {
            if o.fixed {
                regex::escape(p)
            } else if o.extended {
                p.replace("\\<", "\\b").replace("\\>", "\\b")
            } else {
                from_basic(p)
            }
        })
        .map(|p| {
            if o.line {
                format!("^(?:{p})$")
            } else if o.word {
                format!("\\b(?:{p})\\b")
            } else {
                format!("(?:{p})")
            }
        })
        .collect();
    RegexBuilder::new(&parts.join("|"))
        .case_insensitive(o.ignore_case)
        .multi_line(false)
        .build()
        .map_err(|e| {
            let msg = e.to_string();
            if msg.contains("unclosed") {
                "Unmatched ( or \\(".to_string()
            } else {
                format!(
                    "invalid regular expression: {}",
                    msg.lines().last().unwrap_or("")
                )
            }
        })
}

fn search(
    re: &Matcher,
    o: &Opts,
    data: &[u8],
    name: &str,
    show_names: bool,
    out: &mut impl Write,
) -> bool {
    let binary = data.iter().take(8192).any(|&b| b == 0);
    let mut count = 0u64;
    let mut last_printed: Option<usize> = None;
    let mut after_left = 0usize;
    let lines: Vec<&[u8]> = {
        let mut v: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
        if data.ends_with(b"\n") {
            v.pop();
        }
        v
    };
    let print_line = |out: &mut dyn Write, n: usize, line: &[u8], sep: char| {
        let mut prefix = String::new();
        if show_names {
            prefix.push_str(name);
            prefix.push(sep);
        }
        if o.line_numbers {
            prefix.push_str(&format!("{}{sep}", n + 1));
        }
        let _ = out.write_all(prefix.as_bytes());
        let _ = out.write_all(line);
        let _ = out.write_all(b"\n");
    };
    let context = o.after > 0 || o.before > 0;
    for (n, line) in lines.iter().enumerate() {
        if o.max.is_some_and(|m| count >= m) {
            // After the last match -m allows, its trailing context (matching lines too).
            if after_left > 0 && !o.count && !o.files_with && !o.files_without && !o.quiet {
                print_line(out, n, line, '-');
                after_left -= 1;
                continue;
            }
            break;
        }
        let hit = re.is_match(line) != o.invert;
        if !hit {
            if after_left > 0 && !o.count && !o.files_with && !o.files_without && !o.quiet {
                print_line(out, n, line, '-');
                last_printed = Some(n);
                after_left -= 1;
            }
            continue;
        }
        count += 1;
        if o.quiet || o.files_with || o.files_without || o.count || binary {
            continue;
        }
        if context {
            let start = n.saturating_sub(o.before);
            let from = last_printed.map_or(start, |l| (l + 1).max(start));
            if let Some(l) = last_printed {
                if from > l + 1 {
                    let _ = out.write_all(b"--\n");
                }
            } else if from > 0 && count > 1 {
                let _ = out.write_all(b"--\n");
            }
            for (k, l) in lines.iter().enumerate().take(n).skip(from) {
                print_line(out, k, l, '-');
            }
            after_left = o.after;
        }
        if o.only && !o.invert {
            for m in re.matches(line) {
                print_line(out, n, &m, ':');
            }
        } else {
            print_line(out, n, line, ':');
        }
        last_printed = Some(n);
    }
    if o.count {
        let _ = if show_names {
            writeln!(out, "{name}:{count}")
        } else {
            writeln!(out, "{count}")
        };
    }
    if o.files_with && count > 0 {
        let _ = writeln!(out, "{name}");
    }
    if o.files_without && count == 0 {
        let _ = writeln!(out, "{name}");
    }
    if binary && count > 0 && !o.quiet && !o.files_with && !o.files_without && !o.count {
        let _ = writeln!(out, "Binary file {name} matches");
    }
    count > 0
}

/// `rev [FILE]...`: each line's characters in reverse order.
pub fn rev(args: std::vec::IntoIter<OsString>) -> i32 {
    let files: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut status = 0;
    // Each line reversed, its newline kept where it was (a last line without one gets none).
    let mut each = |r: &mut dyn BufRead| {
        let mut buf = Vec::new();
        while r.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
            let newline = buf.last() == Some(&b'\n');
            let body = String::from_utf8_lossy(&buf[..buf.len() - newline as usize]);
            let s: String = body.chars().rev().collect();
            let _ = out.write_all(s.as_bytes());
            if newline {
                let _ = out.write_all(b"\n");
            }
            buf.clear();
        }
    };
    if files.is_empty() {
        each(&mut std::io::stdin().lock());
    }
    for f in &files {
        match std::fs::File::open(f) {
            Ok(file) => each(&mut std::io::BufReader::new(file)),
            Err(e) => {
                eprintln!("rev: cannot open {f}: {}", crate::own::reason(&e));
                status = 1;
            }
        }
    }
    status
}
