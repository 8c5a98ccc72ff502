//! `find` and `xargs` (findutils), as agents use them. Programs they run start through the
//! process host, in the same sandbox.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::Path;

use guest_support::process::Stdio;

use crate::own::reason;

use crate::own::strings;

pub use guest_support::cli::glob;

#[derive(Debug, Clone)]
enum Expr {
    True,
    Name(String, bool),
    Path(String),
    Type(char),
    Empty,
    Print(bool),
    Delete,
    Prune,
    Exec {
        argv: Vec<String>,
        batch: bool,
    },
    /// `-size`: comparison, count, unit in bytes (counts round up, as GNU find does).
    Size(std::cmp::Ordering, u64, u64),
    /// `-mtime`/`-mmin`/`-atime`/...: comparison, count, unit in seconds, access time.
    Age(std::cmp::Ordering, u64, u64, bool),
    /// `-newer FILE`: modified after this time.
    Newer(std::time::SystemTime),
    /// `-perm`: mode, and how (`=` exact, `-` all of these bits, `/` any of them).
    Perm(u32, char),
    Executable,
    Regex(regex::Regex),
    Printf(String),
    Ls,
    /// `-quit`: stop at once (after what was printed so far).
    Quit,
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

struct Parser {
    toks: Vec<String>,
    pos: usize,
    has_action: bool,
    maxdepth: Option<usize>,
    mindepth: usize,
    /// `-depth` (and `-delete`, which implies it): a directory after its contents.
    depth_first: bool,
}

impl Parser {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.pos).map(String::as_str)
    }
    fn next(&mut self) -> Option<String> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn or(&mut self) -> Result<Expr, String> {
        let mut e = self.and()?;
        while matches!(self.peek(), Some("-o") | Some("-or")) {
            self.pos += 1;
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }
    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.not()?;
        loop {
            match self.peek() {
                Some("-a") | Some("-and") => self.pos += 1,
                None | Some("-o") | Some("-or") | Some(")") => return Ok(e),
                _ => {}
            }
            e = Expr::And(Box::new(e), Box::new(self.not()?));
        }
    }
    fn not(&mut self) -> Result<Expr, String> {
        if matches!(self.peek(), Some("!") | Some("-not")) {
            self.pos += 1;
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.primary()
    }
    fn arg(&mut self, op: &str) -> Result<String, String> {
        self.next()
            .ok_or_else(|| format!("missing argument to `{op}'"))
    }
    fn primary(&mut self) -> Result<Expr, String> {
        let Some(t) = self.next() else {
            return Err("expected an expression".into());
        };
        Ok(match t.as_str() {
            "(" => {
                let e = self.or()?;
                if self.next().as_deref() != Some(")") {
                    return Err("invalid expression; I was expecting to find a ')' somewhere but did not see one.".into());
                }
                e
            }
            "-name" => Expr::Name(self.arg(&t)?, false),
            "-iname" => Expr::Name(self.arg(&t)?.to_lowercase(), true),
            "-path" | "-wholename" => Expr::Path(self.arg(&t)?),
            "-type" => {
                let v = self.arg(&t)?;
                match v.as_str() {
                    "f" | "d" | "l" => Expr::Type(v.chars().next().unwrap_or('f')),
                    _ => return Err(format!("Unknown argument to -type: {v}")),
                }
            }
            "-empty" => Expr::Empty,
            "-maxdepth" | "-mindepth" => {
                let v = self.arg(&t)?;
                let n: usize = v.parse().map_err(|_| {
                    format!("Expected a positive decimal integer argument to {t}, but got `{v}'")
                })?;
                if t == "-maxdepth" {
                    self.maxdepth = Some(n);
                } else {
                    self.mindepth = n;
                }
                Expr::True
            }
            "-print" | "-print0" => {
                self.has_action = true;
                Expr::Print(t == "-print0")
            }
            "-delete" => {
                self.has_action = true;
                self.depth_first = true;
                Expr::Delete
            }
            "-quit" => Expr::Quit,
            "-depth" | "-d" => {
                self.depth_first = true;
                Expr::True
            }
            "-prune" => Expr::Prune,
            "-size" => {
                let v = self.arg(&t)?;
                let (ord, rest) = comparison(&v);
                let (digits, unit) = match rest.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
                    Some((i, _)) => (&rest[..i], &rest[i..]),
                    None => (rest, ""),
                };
                let unit = match unit {
                    "" | "b" => 512,
                    "c" => 1,
                    "w" => 2,
                    "k" => 1024,
                    "M" => 1 << 20,
                    "G" => 1 << 30,
                    _ => return Err(format!("invalid -size type `{unit}'")),
                };
                let n = digits
                    .parse()
                    .map_err(|_| format!("invalid argument `{v}' to `-size'"))?;
                Expr::Size(ord, n, unit)
            }
            "-mtime" | "-atime" | "-ctime" | "-mmin" | "-amin" | "-cmin" => {
                let v = self.arg(&t)?;
                let (ord, rest) = comparison(&v);
                let n = rest
                    .parse()
                    .map_err(|_| format!("invalid argument `{v}' to `{t}'"))?;
                let unit = if t.ends_with("min") { 60 } else { 86_400 };
                Expr::Age(ord, n, unit, t.starts_with("-a"))
            }
            "-newer" | "-anewer" | "-cnewer" => {
                let f = self.arg(&t)?;
                let m = std::fs::metadata(&f)
                    .and_then(|m| m.modified())
                    .map_err(|e| format!("'{f}': {}", reason(&e)))?;
                Expr::Newer(m)
            }
            "-perm" => {
                let v = self.arg(&t)?;
                let (how, mode) = match v.chars().next() {
                    Some(c @ ('-' | '/')) => (c, &v[1..]),
                    _ => ('=', v.as_str()),
                };
                let bits = perm_bits(mode).ok_or_else(|| format!("invalid mode `{v}'"))?;
                Expr::Perm(bits, how)
            }
            "-executable" => Expr::Executable,
            "-regex" | "-iregex" => {
                let v = self.arg(&t)?;
                let pattern = format!("^(?s:{})$", emacs_regex(&v));
                let re = regex::RegexBuilder::new(&pattern)
                    .case_insensitive(t == "-iregex")
                    .build()
                    .map_err(|_| format!("invalid regular expression `{v}'"))?;
                Expr::Regex(re)
            }
            "-printf" => {
                self.has_action = true;
                Expr::Printf(self.arg(&t)?)
            }
            "-ls" => {
                self.has_action = true;
                Expr::Ls
            }
            "-user" | "-group" | "-uid" | "-gid" => {
                // A sandbox's files have one owner.
                let _ = self.arg(&t)?;
                Expr::True
            }
            "-readable"
            | "-writable"
            | "-nouser"
            | "-nogroup"
            | "-xdev"
            | "-mount"
            | "-follow"
            | "-noleaf"
            | "-ignore_readdir_race" => {
                if matches!(t.as_str(), "-nouser" | "-nogroup") {
                    Expr::Not(Box::new(Expr::True))
                } else {
                    Expr::True
                }
            }
            "-true" => Expr::True,
            "-false" => Expr::Not(Box::new(Expr::True)),
            "-exec" => {
                self.has_action = true;
                let mut argv = Vec::new();
                loop {
                    match self.next() {
                        None => return Err("missing argument to `-exec'".into()),
                        Some(a) if a == ";" => break Expr::Exec { argv, batch: false },
                        Some(a) if a == "+" && argv.last().map(String::as_str) == Some("{}") => {
                            argv.pop();
                            break Expr::Exec { argv, batch: true };
                        }
                        Some(a) => argv.push(a),
                    }
                }
            }
            other => return Err(format!("unknown predicate `{other}'")),
        })
    }
}

struct Walk<'a> {
    expr: &'a Expr,
    /// The depth and starting point of the path being looked at (for `-printf`).
    depth: usize,
    root: String,
    out: std::io::BufWriter<std::io::StdoutLock<'static>>,
    status: i32,
    batch: Vec<String>,
    batch_cmd: Option<Vec<String>>,
    quit: bool,
}

impl Walk<'_> {
    /// Evaluates the expression for one path; `prune` is set by `-prune`.
    fn eval(&mut self, e: &Expr, path: &str, meta: &std::fs::Metadata, prune: &mut bool) -> bool {
        match e {
            Expr::True => true,
            Expr::Name(p, insensitive) => {
                let name = Path::new(path)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| path.to_string());
                if *insensitive {
                    glob(p, &name.to_lowercase())
                } else {
                    glob(p, &name)
                }
            }
            Expr::Path(p) => glob(p, path),
            Expr::Type(t) => match t {
                'd' => meta.is_dir(),
                'l' => meta.file_type().is_symlink(),
                _ => meta.is_file(),
            },
            Expr::Empty => {
                if meta.is_dir() {
                    std::fs::read_dir(path)
                        .map(|mut d| d.next().is_none())
                        .unwrap_or(false)
                } else {
                    meta.len() == 0
                }
            }
            Expr::Print(nul) => {
                let _ = self.out.write_all(path.as_bytes());
                let _ = self.out.write_all(if *nul { b"\0" } else { b"\n" });
                true
            }
            Expr::Delete => {
                let r = if meta.is_dir() {
                    std::fs::remove_dir(path)
                } else {
                    std::fs::remove_file(path)
                };
                if let Err(e) = r {
                    eprintln!("find: cannot delete '{path}': {}", reason(&e));
                    self.status = 1;
                    return false;
                }
                true
            }
            Expr::Prune => {
                *prune = true;
                true
            }
            Expr::Quit => {
                self.quit = true;
                true
            }
            Expr::Exec { argv, batch } => {
                if *batch {
                    self.batch_cmd = Some(argv.clone());
                    self.batch.push(path.to_string());
                    return true;
                }
                let argv: Vec<String> = argv.iter().map(|a| a.replace("{}", path)).collect();
                let _ = self.out.flush();
                run(&argv, "find") == 0
            }
            Expr::Size(ord, n, unit) => meta.len().div_ceil(*unit).cmp(n) == *ord,
            Expr::Age(ord, n, unit, access) => {
                let t = if *access {
                    meta.accessed()
                } else {
                    meta.modified()
                };
                let age = t
                    .ok()
                    .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
                    .map_or(0, |d| d.as_secs());
                (age / unit).cmp(n) == *ord
            }
            Expr::Newer(t) => meta.modified().is_ok_and(|m| m > *t),
            Expr::Perm(bits, how) => {
                let mode = guest_support::file_mode(path).unwrap_or(0) & 0o7777;
                match how {
                    '-' => mode & bits == *bits,
                    '/' => *bits == 0 || mode & bits != 0,
                    _ => mode == *bits,
                }
            }
            Expr::Executable => {
                meta.is_dir() || guest_support::file_mode(path).is_some_and(|m| m & 0o111 != 0)
            }
            Expr::Regex(re) => re.is_match(path),
            Expr::Printf(format) => {
                let text = printf(format, path, meta, self.depth, &self.root);
                let _ = self.out.write_all(text.as_bytes());
                true
            }
            Expr::Ls => {
                let mode = guest_support::file_mode(path).unwrap_or(0o644);
                let line = format!(
                    "{:>9} {:>6} {} {:>3} {:<8} {:<8} {:>8} {} {path}\n",
                    0,
                    meta.len().div_ceil(1024),
                    crate::files::mode_string(mode, crate::files::kind_char(meta, path)),
                    1,
                    crate::system::file_owner().0,
                    crate::system::file_owner().2,
                    meta.len(),
                    crate::ls::date(meta.modified().ok(), false),
                );
                let _ = self.out.write_all(line.as_bytes());
                true
            }
            Expr::Not(x) => !self.eval(x, path, meta, prune),
            Expr::And(a, b) => self.eval(a, path, meta, prune) && self.eval(b, path, meta, prune),
            Expr::Or(a, b) => self.eval(a, path, meta, prune) || self.eval(b, path, meta, prune),
        }
    }

    fn visit(&mut self, path: &str, depth: usize, p: &Parser) {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("find: '{path}': {}", reason(&e));
                self.status = 1;
                return;
            }
        };
        if self.quit {
            return;
        }
        let mut prune = false;
        self.depth = depth;
        if depth >= p.mindepth && !p.depth_first {
            let expr = self.expr;
            self.eval(expr, path, &meta, &mut prune);
        }
        if meta.is_dir() && !prune && p.maxdepth.is_none_or(|m| depth < m) {
            let mut names: Vec<String> = match std::fs::read_dir(path) {
                Ok(rd) => rd
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect(),
                Err(e) => {
                    eprintln!("find: '{path}': {}", reason(&e));
                    self.status = 1;
                    return;
                }
            };
            names.sort();
            for n in names {
                let child = if path.ends_with('/') {
                    format!("{path}{n}")
                } else {
                    format!("{path}/{n}")
                };
                self.visit(&child, depth + 1, p);
            }
        }
        if depth >= p.mindepth && p.depth_first && !self.quit {
            self.depth = depth;
            let expr = self.expr;
            self.eval(expr, path, &meta, &mut prune);
        }
    }
}

pub fn find(args: std::vec::IntoIter<OsString>) -> i32 {
    let args = strings(args);
    let split = args
        .iter()
        .position(|a| a.starts_with('-') || a == "(" || a == "!")
        .unwrap_or(args.len());
    let mut roots: Vec<String> = args[..split].to_vec();
    if roots.is_empty() {
        roots.push(".".into());
    }
    let mut p = Parser {
        toks: args[split..].to_vec(),
        pos: 0,
        has_action: false,
        maxdepth: None,
        mindepth: 0,
        depth_first: false,
    };
    let expr = if p.toks.is_empty() {
        Expr::True
    } else {
        match p.or() {
            Ok(e) if p.pos >= p.toks.len() => e,
            Ok(_) => {
                eprintln!("find: paths must precede expression: `{}'", p.toks[p.pos]);
                return 1;
            }
            Err(m) => {
                eprintln!("find: {m}");
                return 1;
            }
        }
    };
    let expr = if p.has_action {
        expr
    } else {
        Expr::And(Box::new(expr), Box::new(Expr::Print(false)))
    };
    let mut w = Walk {
        expr: &expr,
        out: std::io::BufWriter::new(std::io::stdout().lock()),
        status: 0,
        batch: Vec::new(),
        batch_cmd: None,
        depth: 0,
        root: String::new(),
        quit: false,
    };
    for r in &roots {
        w.root = r.clone();
        if w.quit {
            break;
        }
        w.visit(r, 0, &p);
    }
    let _ = w.out.flush();
    if let Some(mut cmd) = w.batch_cmd.take()
        && !w.batch.is_empty()
    {
        cmd.append(&mut w.batch);
        if run(&cmd, "find") != 0 {
            w.status = 1;
        }
    }
    w.status
}

/// `+N` (more than), `-N` (less than) or `N` (exactly), as find's numeric tests take them.
fn comparison(v: &str) -> (std::cmp::Ordering, &str) {
    match v.chars().next() {
        Some('+') => (std::cmp::Ordering::Greater, &v[1..]),
        Some('-') => (std::cmp::Ordering::Less, &v[1..]),
        _ => (std::cmp::Ordering::Equal, v),
    }
}

/// An octal mode, or a symbolic one (`u+x`, `g=rw,o=r`, `a+r`) applied to nothing.
fn perm_bits(mode: &str) -> Option<u32> {
    if !mode.is_empty() && mode.chars().all(|c| c.is_digit(8)) {
        return u32::from_str_radix(mode, 8).ok();
    }
    let mut bits = 0;
    for clause in mode.split(',') {
        let op = clause.find(['+', '-', '='])?;
        let (who, rest) = clause.split_at(op);
        let perms = &rest[1..];
        let mut what = 0;
        for c in perms.chars() {
            what |= match c {
                'r' => 0o444,
                'w' => 0o222,
                'x' => 0o111,
                's' => 0o6000,
                't' => 0o1000,
                _ => return None,
            };
        }
        let mut mask = 0;
        for c in if who.is_empty() {
            "a".chars()
        } else {
            who.chars()
        } {
            mask |= match c {
                'u' => 0o4700,
                'g' => 0o2070,
                'o' => 0o1007,
                'a' => 0o7777,
                _ => return None,
            };
        }
        if !rest.starts_with('-') {
            bits |= what & mask;
        }
    }
    Some(bits)
}

/// An Emacs regular expression (find's default syntax) in Rust's syntax: `\(`, `\)`,
/// `\|` and `\{` are the operators, the bare characters are literal.
fn emacs_regex(re: &str) -> String {
    let mut out = String::new();
    let mut chars = re.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(o @ ('(' | ')' | '|' | '{' | '}')) => out.push(o),
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push_str("\\\\"),
            },
            '(' | ')' | '|' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// `-printf FORMAT`: GNU find's directives (`%p %f %h %H %P %l %s %k %b %d %m %M %y %Y
/// %u %g %U %G %n %t %a %c`, and `%T`, `%A`, `%C` with `@ Y m d H M S F T`) and backslash
/// escapes.
fn printf(format: &str, path: &str, meta: &std::fs::Metadata, depth: usize, root: &str) -> String {
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .unwrap_or_default();
    let time_of = |t: std::io::Result<std::time::SystemTime>| {
        t.ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .unwrap_or(mtime)
    };
    let atime = time_of(meta.accessed());
    let ctime = time_of(meta.modified());
    let mode = guest_support::file_mode(path).unwrap_or(0o644);
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('0') => out.push('\0'),
                Some('\\') => out.push('\\'),
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push('\\'),
            },
            '%' => match chars.next() {
                Some('%') => out.push('%'),
                Some('p') => out.push_str(path),
                Some('f') => out.push_str(
                    &Path::new(path)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| path.to_string()),
                ),
                Some('h') => out.push_str(match path.rfind('/') {
                    Some(0) => "/",
                    Some(i) => &path[..i],
                    None => ".",
                }),
                Some('P') => out.push_str(
                    path.strip_prefix(root)
                        .map(|r| r.trim_start_matches('/'))
                        .unwrap_or(path),
                ),
                Some('s') => out.push_str(&meta.len().to_string()),
                Some('k') => out.push_str(&meta.len().div_ceil(1024).to_string()),
                Some('d') => out.push_str(&depth.to_string()),
                Some('m') => out.push_str(&format!("{:o}", mode & 0o7777)),
                Some('M') => out.push_str(&crate::files::mode_string(
                    mode,
                    crate::files::kind_char(meta, path),
                )),
                Some('y') => out.push(if meta.is_dir() {
                    'd'
                } else if meta.file_type().is_symlink() {
                    'l'
                } else {
                    'f'
                }),
                Some('u') => out.push_str(&crate::system::file_owner().0),
                Some('g') => out.push_str(&crate::system::file_owner().2),
                Some('U') => out.push_str(&crate::system::file_owner().1.to_string()),
                Some('G') => out.push_str(&crate::system::file_owner().3.to_string()),
                Some('n') => out.push('1'),
                Some('t') => out.push_str(&crate::inspect::ctime(mtime.as_secs() as i64)),
                Some(c @ ('T' | 'A' | 'C')) => {
                    let t = match c {
                        'A' => atime,
                        'C' => ctime,
                        _ => mtime,
                    };
                    time_part(&mut out, c, chars.next(), t);
                }
                Some('a') => out.push_str(&crate::inspect::ctime(atime.as_secs() as i64)),
                Some('c') => out.push_str(&crate::inspect::ctime(ctime.as_secs() as i64)),
                Some('l') => {
                    if meta.file_type().is_symlink()
                        && let Ok(t) = std::fs::read_link(path)
                    {
                        out.push_str(&t.to_string_lossy());
                    }
                }
                Some('H') => out.push_str(root),
                Some('b') => out.push_str(&meta.len().div_ceil(512).to_string()),
                Some('Y') => out.push(match std::fs::metadata(path) {
                    Ok(m) if m.is_dir() => 'd',
                    Ok(_) => 'f',
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => 'N',
                    Err(_) => 'L',
                }),
                Some(o) => {
                    out.push('%');
                    out.push(o);
                }
                None => out.push('%'),
            },
            c => out.push(c),
        }
    }
    out
}

/// A `%T`/`%A`/`%C` directive's part `k` of time `t` (seconds since the epoch).
fn time_part(out: &mut String, c: char, k: Option<char>, t: std::time::Duration) {
    let (y, mo, d, h, mi, sec) = crate::civil(t.as_secs() as i64);
    match k {
        Some('@') => out.push_str(&format!(
            "{}.{:010}",
            t.as_secs(),
            t.subsec_nanos() as u64 * 10
        )),
        Some('Y') => out.push_str(&format!("{y:04}")),
        Some('m') => out.push_str(&format!("{mo:02}")),
        Some('d') => out.push_str(&format!("{d:02}")),
        Some('H') => out.push_str(&format!("{h:02}")),
        Some('M') => out.push_str(&format!("{mi:02}")),
        Some('S') => out.push_str(&format!("{sec:02}")),
        Some('F') => out.push_str(&format!("{y:04}-{mo:02}-{d:02}")),
        Some('T') => out.push_str(&format!("{h:02}:{mi:02}:{sec:02}")),
        Some(o) => {
            out.push('%');
            out.push(c);
            out.push(o);
        }
        None => {
            out.push('%');
            out.push(c);
        }
    }
}

/// Runs a program with this process's environment; its stdin is empty, as GNU does.
fn run(argv: &[String], who: &str) -> i32 {
    crate::run_command(argv, std::env::vars().collect(), Stdio::Null, who)
}

/// Splits xargs input into items: blanks separate, quotes and backslashes protect.
fn items(input: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut have = false;
    let mut chars = input.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                have = true;
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    cur.push(q);
                }
            }
            '\\' => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    have = true;
                }
            }
            c if c.is_whitespace() => {
                if have {
                    out.push(std::mem::take(&mut cur));
                    have = false;
                }
            }
            c => {
                cur.push(c);
                have = true;
            }
        }
    }
    if have {
        out.push(cur);
    }
    out
}

pub fn xargs(args: std::vec::IntoIter<OsString>) -> i32 {
    let args = strings(args);
    let mut max_args: Option<usize> = None;
    let mut replace: Option<String> = None;
    let mut nul = false;
    let mut delim: Option<char> = None;
    let mut no_run_if_empty = false;
    let mut trace = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let value = |i: &mut usize, inline: &str| -> Option<String> {
            if inline.is_empty() {
                *i += 1;
                args.get(*i).cloned()
            } else {
                Some(inline.to_string())
            }
        };
        match a {
            "-0" | "--null" => nul = true,
            "-r" | "--no-run-if-empty" => no_run_if_empty = true,
            "-t" | "--verbose" => trace = true,
            "--" => {
                i += 1;
                break;
            }
            _ if a.starts_with("-n") => {
                max_args = value(&mut i, &a[2..]).and_then(|v| v.parse().ok())
            }
            _ if a.starts_with("-P") || a.starts_with("-s") || a.starts_with("-L") => {
                let _ = value(&mut i, &a[2..]);
            }
            _ if a.starts_with("-I") => replace = value(&mut i, &a[2..]),
            "-i" => replace = Some("{}".into()),
            _ if a.starts_with("-d") => delim = value(&mut i, &a[2..]).and_then(|d| delimiter(&d)),
            _ if a.starts_with('-') && a.len() > 1 => {
                eprintln!("xargs: invalid option -- '{}'", &a[1..]);
                return 1;
            }
            _ => break,
        }
        i += 1;
    }
    let mut command: Vec<String> = args[i.min(args.len())..].to_vec();
    if command.is_empty() {
        command.push("echo".into());
    }
    let mut input = String::new();
    let _ = std::io::stdin().read_to_string(&mut input);
    let list: Vec<String> = if nul || delim.is_some() {
        let d = if nul { '\0' } else { delim.unwrap_or('\n') };
        let mut v: Vec<String> = input.split(d).map(String::from).collect();
        if v.last().is_some_and(|l| l.is_empty()) {
            v.pop();
        }
        v
    } else if replace.is_some() {
        input
            .lines()
            .map(|l| l.trim_start().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    } else {
        items(&input)
    };
    let mut worst = 0;
    let mut run_one = |argv: Vec<String>| -> bool {
        if trace {
            eprintln!("{}", argv.join(" "));
        }
        match run(&argv, "xargs") {
            0 => true,
            127 => {
                worst = 127;
                false
            }
            126 => {
                worst = 126;
                false
            }
            255 => {
                worst = 124;
                false
            }
            _ => {
                worst = worst.max(123);
                true
            }
        }
    };
    if let Some(r) = &replace {
        for item in &list {
            let argv = command
                .iter()
                .map(|a| a.replace(r.as_str(), item))
                .collect();
            if !run_one(argv) {
                break;
            }
        }
        return worst;
    }
    if list.is_empty() {
        if !no_run_if_empty {
            run_one(command.clone());
        }
        return worst;
    }
    let per = max_args.unwrap_or(usize::MAX).max(1);
    for chunk in list.chunks(per.min(list.len())) {
        let mut argv = command.clone();
        argv.extend(chunk.iter().cloned());
        if !run_one(argv) {
            break;
        }
    }
    worst
}

/// xargs `-d`'s delimiter: a character, or a C escape (`\n`, `\t`, `\0`, `\\`, `\xHH`,
/// `\NNN` octal).
fn delimiter(d: &str) -> Option<char> {
    let Some(rest) = d.strip_prefix('\\') else {
        return d.chars().next();
    };
    let simple = match rest {
        "n" => Some('\n'),
        "t" => Some('\t'),
        "r" => Some('\r'),
        "a" => Some('\x07'),
        "b" => Some('\x08'),
        "f" => Some('\x0c'),
        "v" => Some('\x0b'),
        "\\" => Some('\\'),
        "" => Some('\\'),
        _ => None,
    };
    if simple.is_some() {
        return simple;
    }
    if let Some(hex) = rest.strip_prefix('x') {
        return u32::from_str_radix(hex, 16).ok().and_then(char::from_u32);
    }
    u32::from_str_radix(rest, 8).ok().and_then(char::from_u32)
}
