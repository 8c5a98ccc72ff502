//! `ls`, ours because WASI reports no modes or owners (uutils then prints made-up ones):
//! modes come from the host, the owner is the sandbox user, as for every file it makes.
//! GNU's output when stdout is not a terminal: one name per line, `-l` columns aligned.

use std::ffi::OsString;
use std::fs::Metadata;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::files::{kind_char, mode_string};
use crate::own::reason;

#[derive(Default)]
struct Opts {
    all: bool,
    almost_all: bool,
    long: bool,
    human: bool,
    recursive: bool,
    dirs_themselves: bool,
    by_time: bool,
    by_size: bool,
    reverse: bool,
    unsorted: bool,
    classify: bool,
    slash: bool,
    inode: bool,
    numeric: bool,
    no_owner: bool,
    no_group: bool,
    follow: bool,
    full_time: bool,
    /// `--time-style`: `long-iso`, `iso`, `+FORMAT` (`full-iso` is `full_time`).
    time_style: Option<&'static str>,
    one_per_line: bool,
    size_blocks: bool,
}

struct Entry {
    name: String,
    path: String,
    meta: Metadata,
    mode: u32,
}

fn blocks_k(m: &Metadata) -> u64 {
    if m.file_type().is_symlink() {
        0
    } else {
        m.len().div_ceil(4096).max(u64::from(m.is_dir())) * 4
    }
}

fn human(n: u64) -> String {
    const UNITS: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    if n < 1024 {
        return n.to_string();
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v < 10.0 {
        let r = (v * 10.0).ceil() / 10.0;
        if r < 10.0 {
            return format!("{r:.1}{}", UNITS[unit]);
        }
    }
    format!("{}{}", v.ceil() as u64, UNITS[unit])
}

/// A time as `ls --time-style` shows it: `long-iso`, `iso` or `+FORMAT` (strftime, with a
/// second format after a newline for recent files).
fn styled_date(t: Option<SystemTime>, style: &str) -> String {
    let (secs, recent) = age(t);
    let format = match style {
        "long-iso" => "%Y-%m-%d %H:%M".to_string(),
        "iso" if recent => "%m-%d %H:%M".to_string(),
        "iso" => "%Y-%m-%d ".to_string(),
        s => {
            let f = s.strip_prefix('+').unwrap_or(s);
            match f.split_once('\n') {
                Some((old, new)) => (if recent { new } else { old }).to_string(),
                None => f.to_string(),
            }
        }
    };
    strftime(&format, secs)
}

/// The strftime directives of the C locale, in UTC.
pub fn strftime(format: &str, secs: i64) -> String {
    const DAYS: [&str; 7] = [
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
    ];
    const LONG_MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let (y, mo, d, h, mi, s, wd) = guest_support::civil_time(secs);
    // Day of the year: the days of the months before, and February 29th in a leap year.
    const DAYS_BEFORE: [u32; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let yday = DAYS_BEFORE[(mo - 1) as usize] + d + (leap && mo > 2) as u32;
    let mut out = String::new();
    let mut it = format.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('Y') => out.push_str(&y.to_string()),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('m') => out.push_str(&format!("{mo:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('e') => out.push_str(&format!("{d:>2}")),
            Some('H') => out.push_str(&format!("{h:02}")),
            Some('I') => out.push_str(&format!("{:02}", if h % 12 == 0 { 12 } else { h % 12 })),
            Some('M') => out.push_str(&format!("{mi:02}")),
            Some('S') => out.push_str(&format!("{s:02}")),
            Some('p') => out.push_str(if h < 12 { "AM" } else { "PM" }),
            Some('b') | Some('h') => out.push_str(MONTHS[(mo - 1) as usize]),
            Some('B') => out.push_str(LONG_MONTHS[(mo - 1) as usize]),
            Some('a') => out.push_str(&DAYS[wd as usize][..3]),
            Some('A') => out.push_str(DAYS[wd as usize]),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('F') => out.push_str(&format!("{y}-{mo:02}-{d:02}")),
            Some('T') => out.push_str(&format!("{h:02}:{mi:02}:{s:02}")),
            Some('R') => out.push_str(&format!("{h:02}:{mi:02}")),
            Some('D') => out.push_str(&format!("{mo:02}/{d:02}/{:02}", y.rem_euclid(100))),
            Some('s') => out.push_str(&secs.to_string()),
            Some('u') => out.push_str(&(if wd == 0 { 7 } else { wd }).to_string()),
            Some('w') => out.push_str(&wd.to_string()),
            Some('z') => out.push_str("+0000"),
            Some('Z') => out.push_str("UTC"),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('%') => out.push('%'),
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    out
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `Nov 22 04:33` within six months, `Nov 22  2025` otherwise (GNU, C locale, UTC).
pub fn date(t: Option<SystemTime>, full: bool) -> String {
    if full {
        return crate::diff::stamp(t);
    }
    let (secs, recent) = age(t);
    strftime(if recent { "%b %e %H:%M" } else { "%b %e  %Y" }, secs)
}

/// Seconds since the epoch of a file time, and whether it is recent as `ls` counts it
/// (within six months, not in the future): recent times show the clock, older the year.
fn age(t: Option<SystemTime>) -> (i64, bool) {
    let secs = t
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs() as i64);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    (secs, secs <= now + 60 && now - secs < 182 * 86_400 + 43_200)
}

fn entry(name: String, path: String, o: &Opts) -> std::io::Result<Entry> {
    let meta = if o.follow {
        std::fs::metadata(&path)?
    } else {
        std::fs::symlink_metadata(&path)?
    };
    let mode = if meta.file_type().is_symlink() {
        0o777
    } else {
        guest_support::file_mode(&path).unwrap_or(if meta.is_dir() { 0o755 } else { 0o644 })
    };
    Ok(Entry {
        name,
        path,
        meta,
        mode,
    })
}

fn sort(entries: &mut [Entry], o: &Opts) {
    if o.unsorted {
        return;
    }
    entries.sort_by(|a, b| {
        let by_name = a.name.as_bytes().cmp(b.name.as_bytes());
        let key = if o.by_size {
            b.meta.len().cmp(&a.meta.len())
        } else if o.by_time {
            let t = |e: &Entry| e.meta.modified().ok();
            t(b).cmp(&t(a))
        } else {
            std::cmp::Ordering::Equal
        };
        key.then(by_name)
    });
    if o.reverse {
        entries.reverse();
    }
}

fn suffix(e: &Entry, o: &Opts) -> &'static str {
    if o.classify {
        if e.meta.file_type().is_symlink() && !o.long {
            "@"
        } else if e.meta.is_dir() {
            "/"
        } else if e.mode & 0o111 != 0 && e.meta.is_file() {
            "*"
        } else {
            ""
        }
    } else if o.slash && e.meta.is_dir() {
        "/"
    } else {
        ""
    }
}

/// Counts a directory's subdirectories: its link count is 2 + that.
fn nlink(e: &Entry) -> u64 {
    if !e.meta.is_dir() {
        return 1;
    }
    let subdirs = std::fs::read_dir(&e.path)
        .map(|rd| {
            rd.flatten()
                .filter(|d| d.file_type().is_ok_and(|t| t.is_dir()))
                .count()
        })
        .unwrap_or(0);
    2 + subdirs as u64
}

fn print_entries(out: &mut impl Write, entries: &[Entry], o: &Opts, total: bool) {
    let blocks = |e: &Entry| {
        if o.human {
            human(blocks_k(&e.meta) * 1024)
        } else {
            blocks_k(&e.meta).to_string()
        }
    };
    let wb = entries.iter().map(|e| blocks(e).len()).max().unwrap_or(0);
    if !o.long {
        if total && o.size_blocks {
            let t: u64 = entries.iter().map(|e| blocks_k(&e.meta)).sum();
            let _ = writeln!(out, "total {t}");
        }
        for e in entries {
            let inode = if o.inode { "0 " } else { "" };
            let size = if o.size_blocks {
                format!("{:>wb$} ", blocks(e))
            } else {
                String::new()
            };
            let _ = writeln!(out, "{inode}{size}{}{}", e.name, suffix(e, o));
        }
        return;
    }
    if total {
        let t: u64 = entries.iter().map(|e| blocks_k(&e.meta)).sum();
        let t = if o.human {
            human(t * 1024)
        } else {
            t.to_string()
        };
        let _ = writeln!(out, "total {t}");
    }
    let rows: Vec<[String; 6]> = entries
        .iter()
        .map(|e| {
            let size = if o.human {
                human(e.meta.len())
            } else {
                e.meta.len().to_string()
            };
            let (name, uid, group_name, gid) = crate::system::file_owner();
            let (user, group) = if o.numeric {
                (uid.to_string(), gid.to_string())
            } else {
                (name.clone(), group_name.clone())
            };
            [
                mode_string(e.mode, kind_char(&e.meta, &e.path)),
                nlink(e).to_string(),
                user,
                group,
                size,
                match o.time_style {
                    Some(style) => styled_date(e.meta.modified().ok(), style),
                    None => date(e.meta.modified().ok(), o.full_time),
                },
            ]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].len()).max().unwrap_or(0);
    let (wl, wu, wg, ws) = (width(1), width(2), width(3), width(4));
    for (e, r) in entries.iter().zip(&rows) {
        let mut line = String::new();
        if o.inode {
            line.push_str("0 ");
        }
        if o.size_blocks {
            line.push_str(&format!("{:>wb$} ", blocks(e)));
        }
        line.push_str(&format!("{} {:>wl$}", r[0], r[1]));
        if !o.no_owner {
            line.push_str(&format!(" {:<wu$}", r[2]));
        }
        if !o.no_group {
            line.push_str(&format!(" {:<wg$}", r[3]));
        }
        line.push_str(&format!(
            " {:>ws$} {} {}{}",
            r[4],
            r[5],
            e.name,
            suffix(e, o)
        ));
        if e.meta.file_type().is_symlink()
            && let Ok(t) = std::fs::read_link(&e.path)
        {
            line.push_str(&format!(" -> {}", t.to_string_lossy()));
        }
        let _ = writeln!(out, "{line}");
    }
}

/// Lists one directory (and, with -R, those under it). Returns false on an error.
fn list_dir(out: &mut impl Write, dir: &str, o: &Opts, header: bool, first: &mut bool) -> bool {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => {
            let _ = out.flush();
            eprintln!("ls: cannot open directory '{dir}': {}", reason(&e));
            return false;
        }
    };
    let mut entries = Vec::new();
    let mut ok = true;
    let join = |n: &str| {
        if dir == "/" {
            format!("/{n}")
        } else {
            format!("{}/{n}", dir.trim_end_matches('/'))
        }
    };
    if o.all {
        for n in [".", ".."] {
            // `..` of the workspace root is outside the sandbox: show the root itself.
            let e = entry(n.to_string(), join(n), o)
                .or_else(|_| entry(n.to_string(), dir.to_string(), o));
            if let Ok(e) = e {
                entries.push(e);
            }
        }
    }
    for d in rd.flatten() {
        let name = d.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && !o.all && !o.almost_all {
            continue;
        }
        match entry(name.clone(), join(&name), o) {
            Ok(e) => entries.push(e),
            Err(e) => {
                eprintln!("ls: cannot access '{}': {}", join(&name), reason(&e));
                ok = false;
            }
        }
    }
    sort(&mut entries, o);
    if header {
        if !*first {
            let _ = writeln!(out);
        }
        let _ = writeln!(out, "{dir}:");
    }
    *first = false;
    print_entries(out, &entries, o, true);
    if o.recursive {
        for e in &entries {
            if e.meta.is_dir() && e.name != "." && e.name != ".." {
                ok &= list_dir(out, &e.path, o, true, first);
            }
        }
    }
    ok
}

pub fn main(args: std::vec::IntoIter<OsString>) -> i32 {
    let mut o = Opts::default();
    let mut operands = Vec::new();
    let mut only_operands = false;
    for a in args.skip(1).map(|a| a.to_string_lossy().into_owned()) {
        if only_operands || !a.starts_with('-') || a == "-" {
            operands.push(a);
            continue;
        }
        if a == "--" {
            only_operands = true;
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or(long);
            match name {
                "all" => o.all = true,
                "almost-all" => o.almost_all = true,
                "human-readable" => o.human = true,
                "recursive" => o.recursive = true,
                "directory" => o.dirs_themselves = true,
                "reverse" => o.reverse = true,
                "classify" => o.classify = true,
                "inode" => o.inode = true,
                "size" => o.size_blocks = true,
                "numeric-uid-gid" => {
                    o.numeric = true;
                    o.long = true;
                }
                "dereference" => o.follow = true,
                "full-time" => {
                    o.full_time = true;
                    o.long = true;
                }
                "time-style" => match long.split_once('=').map(|(_, v)| v) {
                    Some("full-iso") => o.full_time = true,
                    Some("locale") | Some("default") | Some("posix-locale") | None => {}
                    // The options live as long as the program.
                    Some(v) => {
                        o.time_style = Some(Box::leak(v.trim_start_matches("posix-").into()))
                    }
                },
                "color"
                | "colour"
                | "group-directories-first"
                | "quoting-style"
                | "literal"
                | "show-control-chars"
                | "hide-control-chars"
                | "width" => {}
                "sort" => match long.split_once('=').map(|(_, v)| v) {
                    Some("size") => o.by_size = true,
                    Some("time") => o.by_time = true,
                    Some("none") => o.unsorted = true,
                    _ => {}
                },
                "help" => {
                    println!("Usage: ls [OPTION]... [FILE]...");
                    return 0;
                }
                _ => {
                    eprintln!(
                        "ls: unrecognized option '{a}'\nTry 'ls --help' for more information."
                    );
                    return 2;
                }
            }
            continue;
        }
        for c in a[1..].chars() {
            match c {
                'a' => o.all = true,
                'A' => o.almost_all = true,
                'l' => o.long = true,
                'h' => o.human = true,
                'R' => o.recursive = true,
                'd' => o.dirs_themselves = true,
                't' => o.by_time = true,
                'S' => o.by_size = true,
                'r' => o.reverse = true,
                'U' | 'f' => o.unsorted = true,
                'F' => o.classify = true,
                'p' => o.slash = true,
                'i' => o.inode = true,
                's' => o.size_blocks = true,
                'n' => {
                    o.numeric = true;
                    o.long = true;
                }
                'g' => {
                    o.no_owner = true;
                    o.long = true;
                }
                'o' => {
                    o.no_group = true;
                    o.long = true;
                }
                'L' => o.follow = true,
                '1' => o.one_per_line = true,
                'C' | 'x' | 'm' | 'G' | 'k' | 'v' | 'X' | 'c' | 'u' | 'b' | 'q' | 'N' | 'Q' => {}
                _ => {
                    eprintln!("ls: invalid option -- '{c}'\nTry 'ls --help' for more information.");
                    return 2;
                }
            }
        }
    }
    if operands.is_empty() {
        operands.push(".".into());
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut status = 0;
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for p in &operands {
        // Operands are followed when they are symlinks to directories (unless -l / -d).
        let follow = o.follow || (!o.long && !o.dirs_themselves);
        match entry(p.clone(), p.clone(), &Opts { follow, ..o }) {
            Ok(e) if e.meta.is_dir() && !o.dirs_themselves => dirs.push(e),
            Ok(e) => files.push(e),
            Err(err) => match entry(p.clone(), p.clone(), &Opts { follow: false, ..o }) {
                Ok(e) => files.push(e),
                Err(_) => {
                    let _ = out.flush();
                    eprintln!("ls: cannot access '{p}': {}", reason(&err));
                    status = 2;
                }
            },
        }
    }
    sort(&mut files, &o);
    sort(&mut dirs, &o);
    print_entries(&mut out, &files, &o, false);
    let header = operands.len() > 1 || o.recursive;
    let mut first = files.is_empty();
    for d in &dirs {
        if !list_dir(&mut out, &d.path, &o, header, &mut first) && status == 0 {
            status = 1;
        }
    }
    if out.flush().is_err() {
        return 2;
    }
    status
}
