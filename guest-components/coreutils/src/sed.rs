//! `sed`: the stream editor as agents use it: `s///` (flags g, p, i/I, N; `&` and `\1`..`\9`),
//! `p`, `d`, `q`, `=`, `i\`, `a\`, `c\`, `y`, `{...}`; addresses (N, `$`, `/re/`, ranges,
//! `!`); options -n, -e, -f, -E/-r, -i[SUFFIX], -s. Basic regular expressions unless -E.

use std::ffi::OsString;
use std::io::{Read, Write};

use regex::bytes::{Regex, RegexBuilder};

use crate::grep::from_basic;
use crate::own::reason;

#[derive(Debug, Clone)]
enum Addr {
    Line(usize),
    /// GNU's `first~step`: lines first, first+step, first+2*step...
    Step(usize, usize),
    Last,
    Re(Regex),
}

#[derive(Debug, Clone)]
enum Cmd {
    Subst {
        re: Regex,
        with: Vec<u8>,
        global: bool,
        nth: usize,
        print: bool,
    },
    Print,
    Delete,
    Quit,
    LineNumber,
    Insert(String),
    Append(String),
    Change(String),
    Translate(Vec<char>, Vec<char>),
    Block(Vec<Line>),
}

#[derive(Debug, Clone)]
struct Line {
    a1: Option<Addr>,
    a2: Option<Addr>,
    negate: bool,
    cmd: Cmd,
}

struct Parser<'a> {
    s: Vec<char>,
    i: usize,
    extended: bool,
    _src: &'a str,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(c) if c == ' ' || c == '\t') {
            self.i += 1;
        }
    }
    /// Reads up to the unescaped `delim` (consumed). `\delim` stands for the delimiter
    /// itself; other escapes are kept for the regex (or the replacement) to interpret.
    fn delimited(&mut self, delim: char, what: &str) -> Result<String, String> {
        let mut text = String::new();
        loop {
            match self.peek() {
                None => return Err(format!("unterminated {what}")),
                Some(c) if c == delim => {
                    self.i += 1;
                    return Ok(text);
                }
                Some('\\') => {
                    self.i += 1;
                    match self.peek() {
                        Some(c) if c == delim => text.push(c),
                        Some(c) => {
                            text.push('\\');
                            text.push(c);
                        }
                        None => return Err(format!("unterminated {what}")),
                    }
                    self.i += 1;
                }
                Some(c) => {
                    text.push(c);
                    self.i += 1;
                }
            }
        }
    }
    fn regex(&mut self, delim: char, insensitive: bool) -> Result<Regex, String> {
        let pat = self.delimited(delim, "address regex")?;
        compile(&pat, self.extended, insensitive)
    }
    fn addr(&mut self) -> Result<Option<Addr>, String> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() => {
                let mut n = 0usize;
                while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
                    n = n * 10 + d as usize;
                    self.i += 1;
                }
                if self.peek() == Some('~') {
                    self.i += 1;
                    let mut step = 0usize;
                    while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
                        step = step * 10 + d as usize;
                        self.i += 1;
                    }
                    return Ok(Some(Addr::Step(n, step)));
                }
                Ok(Some(Addr::Line(n)))
            }
            Some('$') => {
                self.i += 1;
                Ok(Some(Addr::Last))
            }
            Some('/') => {
                self.i += 1;
                Ok(Some(Addr::Re(self.regex('/', false)?)))
            }
            Some('\\') => {
                self.i += 1;
                let d = self.peek().ok_or("unexpected end")?;
                self.i += 1;
                Ok(Some(Addr::Re(self.regex(d, false)?)))
            }
            _ => Ok(None),
        }
    }
    /// Text of `i\`, `a\`, `c\` (GNU also takes it on the same line).
    fn text(&mut self) -> String {
        self.skip_ws();
        if self.peek() == Some('\\') {
            self.i += 1;
            if self.peek() == Some('\n') {
                self.i += 1;
            }
        }
        let mut t = String::new();
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                // GNU sed processes escapes in the text: `\t`, `\n`, ...; a backslash
                // before a newline continues the text on the next line.
                '\\' => {
                    if let Some(n) = self.peek() {
                        self.i += 1;
                        t.push(match n {
                            'n' => '\n',
                            't' => '\t',
                            'a' => '\x07',
                            'f' => '\x0c',
                            'v' => '\x0b',
                            'r' => '\r',
                            n => n,
                        });
                    }
                }
                '\n' => break,
                c => t.push(c),
            }
        }
        t
    }
    fn script(&mut self, nested: bool) -> Result<Vec<Line>, String> {
        let mut out = Vec::new();
        loop {
            while matches!(self.peek(), Some(c) if c.is_whitespace() || c == ';') {
                self.i += 1;
            }
            match self.peek() {
                None if nested => return Err("unmatched `{'".into()),
                None => return Ok(out),
                Some('}') if nested => {
                    self.i += 1;
                    return Ok(out);
                }
                Some('#') => {
                    while !matches!(self.peek(), None | Some('\n')) {
                        self.i += 1;
                    }
                    continue;
                }
                _ => {}
            }
            let a1 = self.addr()?;
            let mut a2 = None;
            if a1.is_some() && self.peek() == Some(',') {
                self.i += 1;
                a2 = Some(self.addr()?.ok_or("unexpected `,'")?);
            }
            self.skip_ws();
            let mut negate = false;
            while self.peek() == Some('!') {
                negate = true;
                self.i += 1;
                self.skip_ws();
            }
            let c = self.peek().ok_or("missing command")?;
            self.i += 1;
            let cmd = match c {
                'p' => Cmd::Print,
                'd' => Cmd::Delete,
                'q' => Cmd::Quit,
                '=' => Cmd::LineNumber,
                'i' => Cmd::Insert(self.text()),
                'a' => Cmd::Append(self.text()),
                'c' => Cmd::Change(self.text()),
                '{' => Cmd::Block(self.script(true)?),
                's' => {
                    let d = self.peek().ok_or("unterminated `s' command")?;
                    self.i += 1;
                    let pat = self.delimited(d, "`s' command")?;
                    let raw = self.delimited(d, "`s' command")?;
                    let with = replacement(&raw);
                    let (mut global, mut nth, mut print, mut insensitive) =
                        (false, 1, false, false);
                    while let Some(f) = self.peek() {
                        match f {
                            'g' => global = true,
                            'p' => print = true,
                            'i' | 'I' => insensitive = true,
                            d if d.is_ascii_digit() => nth = d.to_digit(10).unwrap_or(1) as usize,
                            _ => break,
                        }
                        self.i += 1;
                    }
                    Cmd::Subst {
                        re: compile(&pat, self.extended, insensitive)?,
                        with,
                        global,
                        nth,
                        print,
                    }
                }
                'y' => {
                    let d = self.peek().ok_or("unterminated `y' command")?;
                    self.i += 1;
                    let mut parts = [Vec::new(), Vec::new()];
                    for part in &mut parts {
                        loop {
                            match self.peek() {
                                None => return Err("unterminated `y' command".into()),
                                Some(x) if x == d => {
                                    self.i += 1;
                                    break;
                                }
                                Some(x) => {
                                    part.push(x);
                                    self.i += 1;
                                }
                            }
                        }
                    }
                    let [from, to] = parts;
                    if from.len() != to.len() {
                        return Err("strings for `y' command are different lengths".into());
                    }
                    Cmd::Translate(from, to)
                }
                other => return Err(format!("unknown command: `{other}'")),
            };
            out.push(Line {
                a1,
                a2,
                negate,
                cmd,
            });
        }
    }
}

/// A replacement in the form `substitute` applies: `&` and `\N` become group references
/// (0x01, N), `\&` a literal `&` (0x00, `&`), `\n`/`\t` those characters.
fn replacement(raw: &str) -> Vec<u8> {
    let mut with = Vec::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '&' => with.extend_from_slice(&[0x01, 0]),
            '\\' => match chars.next() {
                Some('n') => with.push(b'\n'),
                Some('t') => with.push(b'\t'),
                Some('&') => with.extend_from_slice(b"\x00&"),
                Some(d) if d.is_ascii_digit() => with.extend_from_slice(&[0x01, d as u8 - b'0']),
                Some(x) => with.extend_from_slice(x.encode_utf8(&mut [0; 4]).as_bytes()),
                None => with.push(b'\\'),
            },
            c => with.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    with
}

fn compile(pat: &str, extended: bool, insensitive: bool) -> Result<Regex, String> {
    let p = if extended {
        pat.to_string()
    } else {
        from_basic(pat)
    };
    RegexBuilder::new(&p)
        .case_insensitive(insensitive)
        .build()
        .map_err(|_| format!("-e expression #1: invalid regular expression `{pat}'"))
}

/// Running state of one input stream.
struct Exec {
    quiet: bool,
    /// Whether each range line (by index in a flattened list) is inside its range.
    active: std::collections::HashMap<usize, bool>,
    quit: bool,
}

fn matches(a: &Addr, n: usize, last: bool, line: &[u8]) -> bool {
    match a {
        Addr::Line(k) => *k == n,
        Addr::Step(first, 0) => n == *first,
        Addr::Step(first, step) => n >= *first && (n - first).is_multiple_of(*step),
        Addr::Last => last,
        Addr::Re(re) => re.is_match(line),
    }
}

fn substitute(re: &Regex, with: &[u8], global: bool, nth: usize, line: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut last = 0;
    let mut count = 0;
    let mut changed = false;
    for caps in re.captures_iter(line) {
        let m = caps.get(0).expect("group 0");
        count += 1;
        if count < nth {
            continue;
        }
        out.extend_from_slice(&line[last..m.start()]);
        let mut k = 0;
        while k < with.len() {
            if with[k] == 0x01 && k + 1 < with.len() {
                if let Some(g) = caps.get(with[k + 1] as usize) {
                    out.extend_from_slice(g.as_bytes());
                }
                k += 2;
            } else if with[k] == 0x00 && k + 1 < with.len() {
                out.push(with[k + 1]);
                k += 2;
            } else {
                out.push(with[k]);
                k += 1;
            }
        }
        last = m.end();
        changed = true;
        if !global {
            break;
        }
    }
    if !changed {
        return None;
    }
    out.extend_from_slice(&line[last..]);
    Some(out)
}

/// What running the script on one line asks for.
#[derive(Default)]
struct Outcome {
    deleted: bool,
    before: Vec<u8>,
    after: Vec<u8>,
}

#[allow(clippy::too_many_arguments)]
fn run_lines(
    ex: &mut Exec,
    lines: &[Line],
    base: usize,
    n: usize,
    last: bool,
    space: &mut Vec<u8>,
    out: &mut Vec<u8>,
    o: &mut Outcome,
) {
    for (idx, l) in lines.iter().enumerate() {
        if ex.quit || o.deleted {
            return;
        }
        let key = base * 1000 + idx;
        let selected = match (&l.a1, &l.a2) {
            (None, _) => true,
            (Some(a), None) => matches(a, n, last, space),
            (Some(a), Some(b)) => {
                let on = ex.active.get(&key).copied().unwrap_or(false);
                if on {
                    let end = match b {
                        Addr::Line(k) => n >= *k,
                        other => matches(other, n, last, space),
                    };
                    if end {
                        ex.active.insert(key, false);
                    }
                    true
                } else if matches(a, n, last, space) {
                    let ends_now = matches!(b, Addr::Line(k) if *k <= n);
                    ex.active.insert(key, !ends_now);
                    true
                } else {
                    false
                }
            }
        };
        if selected == l.negate {
            continue;
        }
        match &l.cmd {
            Cmd::Print => {
                out.extend_from_slice(space);
                out.push(b'\n');
            }
            Cmd::Delete => o.deleted = true,
            Cmd::Quit => ex.quit = true,
            Cmd::LineNumber => out.extend_from_slice(format!("{n}\n").as_bytes()),
            Cmd::Insert(t) => {
                o.before.extend_from_slice(t.as_bytes());
                o.before.push(b'\n');
            }
            Cmd::Append(t) => {
                o.after.extend_from_slice(t.as_bytes());
                o.after.push(b'\n');
            }
            Cmd::Change(t) => {
                let range_end = l.a2.is_none() || !ex.active.get(&key).copied().unwrap_or(false);
                if range_end {
                    o.before.extend_from_slice(t.as_bytes());
                    o.before.push(b'\n');
                }
                o.deleted = true;
            }
            Cmd::Translate(from, to) => {
                let text = String::from_utf8_lossy(space).into_owned();
                let mapped: String = text
                    .chars()
                    .map(|c| from.iter().position(|f| *f == c).map_or(c, |k| to[k]))
                    .collect();
                *space = mapped.into_bytes();
            }
            Cmd::Subst {
                re,
                with,
                global,
                nth,
                print,
            } => {
                if let Some(new) = substitute(re, with, *global, *nth, space) {
                    *space = new;
                    if *print {
                        out.extend_from_slice(space);
                        out.push(b'\n');
                    }
                }
            }
            Cmd::Block(inner) => run_lines(ex, inner, key + 1, n, last, space, out, o),
        }
    }
}

fn process(
    script: &[Line],
    quiet: bool,
    data: &[u8],
    out: &mut Vec<u8>,
    start_line: &mut usize,
    last_file: bool,
) -> bool {
    if data.is_empty() {
        return false;
    }
    let mut lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let trailing_newline = data.ends_with(b"\n");
    if trailing_newline {
        lines.pop();
    }
    let mut ex = Exec {
        quiet,
        active: Default::default(),
        quit: false,
    };
    let total = lines.len();
    for (k, line) in lines.into_iter().enumerate() {
        *start_line += 1;
        let last = last_file && k + 1 == total;
        let mut space = line.to_vec();
        let mut o = Outcome::default();
        let mut printed = Vec::new();
        run_lines(
            &mut ex,
            script,
            0,
            *start_line,
            last,
            &mut space,
            &mut printed,
            &mut o,
        );
        out.extend_from_slice(&o.before);
        out.extend_from_slice(&printed);
        if !o.deleted && !ex.quiet {
            out.extend_from_slice(&space);
            if k + 1 < total || trailing_newline {
                out.push(b'\n');
            }
        }
        out.extend_from_slice(&o.after);
        if ex.quit {
            return true;
        }
    }
    false
}

pub fn main(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut scripts: Vec<String> = Vec::new();
    let (mut quiet, mut extended, mut in_place, mut separate) =
        (false, false, None::<String>, false);
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        match a.as_str() {
            "-n" | "--quiet" | "--silent" => quiet = true,
            "-E" | "-r" | "--regexp-extended" => extended = true,
            "-s" | "--separate" => separate = true,
            "-e" | "--expression" => {
                let Some(s) = args.get(i) else {
                    eprintln!("sed: option requires an argument -- 'e'");
                    return 1;
                };
                scripts.push(s.clone());
                i += 1;
            }
            "-f" | "--file" => {
                let Some(f) = args.get(i) else {
                    eprintln!("sed: option requires an argument -- 'f'");
                    return 1;
                };
                match std::fs::read_to_string(f) {
                    Ok(s) => scripts.push(s),
                    Err(e) => {
                        eprintln!("sed: couldn't open file {f}: {}", reason(&e));
                        return 1;
                    }
                }
                i += 1;
            }
            "--" => {
                files.extend(args[i..].iter().cloned());
                break;
            }
            s if s.starts_with("-i") || s.starts_with("--in-place") => {
                in_place = Some(
                    s.trim_start_matches("--in-place")
                        .trim_start_matches("-i")
                        .trim_start_matches('=')
                        .to_string(),
                );
            }
            s if s.starts_with('-')
                && s.len() > 1
                && s[1..].chars().all(|c| "nErs".contains(c)) =>
            {
                for c in s[1..].chars() {
                    match c {
                        'n' => quiet = true,
                        'E' | 'r' => extended = true,
                        _ => separate = true,
                    }
                }
            }
            s if s.starts_with('-') && s.len() > 1 => {
                eprintln!("sed: invalid option -- '{}'", &s[1..]);
                return 1;
            }
            _ => files.push(a.clone()),
        }
    }
    if scripts.is_empty() {
        if files.is_empty() {
            eprintln!("Usage: sed [OPTION]... {{script-only-if-no-other-script}} [input-file]...");
            return 1;
        }
        scripts.push(files.remove(0));
    }
    let text = scripts.join("\n");
    let mut p = Parser {
        s: text.chars().collect(),
        i: 0,
        extended,
        _src: &text,
    };
    let script = match p.script(false) {
        Ok(s) => s,
        Err(m) => {
            eprintln!("sed: -e expression #1, char {}: {m}", p.i);
            return 1;
        }
    };
    let mut status = 0;
    let mut line_no = 0;
    if let Some(suffix) = in_place {
        if files.is_empty() {
            eprintln!("sed: no input files");
            return 1;
        }
        for f in &files {
            match std::fs::read(f) {
                Ok(data) => {
                    let mut out = Vec::new();
                    let mut n = 0;
                    process(&script, quiet, &data, &mut out, &mut n, true);
                    if !suffix.is_empty() {
                        let _ = std::fs::write(format!("{f}{suffix}"), &data);
                    }
                    if let Err(e) = std::fs::write(f, &out) {
                        eprintln!("sed: couldn't write {f}: {}", reason(&e));
                        status = 4;
                    }
                }
                Err(e) => {
                    eprintln!("sed: can't read {f}: {}", reason(&e));
                    status = 2;
                }
            }
        }
        return status;
    }
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    if files.is_empty() {
        let mut d = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut d);
        inputs.push(d);
    }
    for f in &files {
        if f == "-" {
            let mut d = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut d);
            inputs.push(d);
            continue;
        }
        match std::fs::read(f) {
            Ok(d) => inputs.push(d),
            Err(e) => {
                eprintln!("sed: can't read {f}: {}", reason(&e));
                status = 2;
            }
        }
    }
    let mut out = Vec::new();
    if separate {
        let n = inputs.len();
        for (k, d) in inputs.iter().enumerate() {
            let mut ln = 0;
            if process(&script, quiet, d, &mut out, &mut ln, k + 1 == n) {
                break;
            }
        }
    } else {
        // One stream: files are concatenated (a missing final newline is supplied between).
        let mut all = Vec::new();
        for d in &inputs {
            all.extend_from_slice(d);
            if !d.is_empty()
                && !d.ends_with(b"\n")
                && !std::ptr::eq(d, inputs.last().expect("nonempty"))
            {
                all.push(b'\n');
            }
        }
        process(&script, quiet, &all, &mut out, &mut line_no, true);
    }
    let _ = std::io::stdout().write_all(&out);
    status
}
