//! The process applets: `ps`, `pgrep`, `free` and `top`, over the sandbox's process table
//! (every process alive in the sandbox, of every job, with the pids the shell's `$!` and
//! `jobs -p` show), their CPU time as the host counts it, and the sandbox's memory budget.

use std::ffi::OsString;

use guest_support::process::{ProcessInfo, memory_usage, processes, self_pid};

fn strings(args: std::vec::IntoIter<OsString>) -> Vec<String> {
    crate::own::strings(args)
}

/// The user every process runs as (the sandbox's).
fn user() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "root".into())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `comm`: the program's name.
fn comm(p: &ProcessInfo) -> String {
    let a0 = p.argv.first().map_or("", String::as_str);
    a0.rsplit('/')
        .next()
        .unwrap_or(a0)
        .chars()
        .take(15)
        .collect()
}

fn args(p: &ProcessInfo) -> String {
    p.argv.join(" ")
}

/// `[[DD-]hh:]mm:ss` as `etime` prints it.
/// `ps`'s `TIME`: CPU time as `[DD-]HH:MM:SS`.
fn cpu_time(us: u64) -> String {
    let s = us / 1_000_000;
    let (d, h, m, s) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

fn etime(ms: u64) -> String {
    let s = ms / 1000;
    let (d, h, m, s) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h:02}:{m:02}:{s:02}")
    } else {
        format!("{m:02}:{s:02}")
    }
}

/// `HH:MM` (UTC) of a time in milliseconds since the epoch.
fn clock(ms: u64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}", s / 3600 % 24, s / 60 % 60)
}

fn clock_seconds(ms: u64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02}", s / 3600 % 24, s / 60 % 60, s % 60)
}

/// A column of `ps -o`: its header, whether it is right-aligned, and its value.
fn field(name: &str, p: &ProcessInfo, limit: u64, me: u32) -> Option<(&'static str, bool, String)> {
    let kib = p.memory_bytes / 1024;
    let pct = if limit == 0 {
        0.0
    } else {
        p.memory_bytes as f64 * 100.0 / limit as f64
    };
    Some(match name {
        "pid" => ("PID", true, p.pid.to_string()),
        "ppid" => ("PPID", true, p.ppid.to_string()),
        "comm" | "ucomm" | "ucmd" => ("COMMAND", false, comm(p)),
        "args" | "command" | "cmd" => ("COMMAND", false, args(p)),
        "user" | "euser" | "uname" | "ruser" => ("USER", false, user()),
        "uid" | "euid" | "ruid" => (
            "UID",
            true,
            if user() == "root" { "0" } else { "1000" }.into(),
        ),
        "etime" => (
            "ELAPSED",
            true,
            etime(now_ms().saturating_sub(p.started_ms)),
        ),
        "etimes" => (
            "ELAPSED",
            true,
            (now_ms().saturating_sub(p.started_ms) / 1000).to_string(),
        ),
        "rss" | "rssize" | "rsz" => ("RSS", true, kib.to_string()),
        "vsz" | "vsize" => ("VSZ", true, kib.to_string()),
        "%mem" | "pmem" => ("%MEM", true, format!("{pct:.1}")),
        "%cpu" | "pcpu" => {
            let alive_us = now_ms().saturating_sub(p.started_ms) * 1000;
            let pct = if alive_us == 0 {
                0.0
            } else {
                p.cpu_us as f64 * 100.0 / alive_us as f64
            };
            ("%CPU", true, format!("{pct:.1}"))
        }
        "time" | "cputime" => ("TIME", true, cpu_time(p.cpu_us)),
        // `ps -f`'s `C`: the same share, a whole number, at most 99 as procps prints it
        // (a process only just started, `ps` itself, can have used more than its lifetime).
        "c" => {
            let alive_us = now_ms().saturating_sub(p.started_ms) * 1000;
            let pct = (p.cpu_us * 100).checked_div(alive_us).unwrap_or(0).min(99);
            ("C", true, pct.to_string())
        }
        // top's `TIME+`: minutes, seconds and hundredths.
        "time+" => {
            let cs = p.cpu_us / 10_000;
            (
                "TIME+",
                true,
                format!("{}:{:02}.{:02}", cs / 6000, cs / 100 % 60, cs % 100),
            )
        }
        "stat" | "s" | "state" => ("STAT", false, if p.pid == me { "R" } else { "S" }.into()),
        "tty" | "tt" | "tname" => ("TTY", false, "?".into()),
        "start" | "stime" | "start_time" => ("STARTED", true, clock(p.started_ms)),
        _ => return None,
    })
}

/// The narrowest a column is, as procps prints it.
fn min_width(header: &str) -> usize {
    match header {
        "PID" | "PPID" => 7,
        "USER" | "UID" | "TTY" | "TIME" => 8,
        "VSZ" => 6,
        "RSS" | "START" | "STIME" => 5,
        "%CPU" | "%MEM" | "STAT" => 4,
        "C" => 2,
        _ => 0,
    }
}

/// Prints rows of fields as `ps` does: right-aligned numbers, the last column unpadded.
fn table(headers: &[(&str, bool)], rows: &[Vec<String>], show_header: bool) {
    let mut widths: Vec<usize> = headers
        .iter()
        .map(|(h, _)| h.len().max(min_width(h)))
        .collect();
    for r in rows {
        for (i, v) in r.iter().enumerate() {
            widths[i] = widths[i].max(v.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let n = cells.len();
        let mut out = String::new();
        for (i, c) in cells.into_iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            let right = headers[i].1;
            if i + 1 == n && !right {
                out.push_str(c);
            } else if right {
                out.push_str(&format!("{c:>w$}", w = widths[i]));
            } else {
                out.push_str(&format!("{c:<w$}", w = widths[i]));
            }
        }
        println!("{}", out.trim_end());
    };
    if show_header {
        line(headers.iter().map(|(h, _)| *h).collect());
    }
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

const PS_USAGE: &str = "Usage: ps [-e|-A] [-f] [aux] [-p PID[,PID...]] [-C NAME] [-o FIELD[,FIELD...]] [--no-headers]\n\
Every process of the sandbox is listed. Fields: pid ppid user uid comm args cmd etime etimes\n\
rss vsz %mem %cpu time stat tty start (CPU time as the host counts it for each process).";

/// `ps`: the processes of the sandbox.
pub fn ps(argv: std::vec::IntoIter<OsString>) -> i32 {
    let argv = strings(argv);
    let mut full = false;
    let mut bsd = false;
    let mut fields: Vec<String> = Vec::new();
    let mut pids: Vec<u32> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut header = true;
    let mut sort_by: Option<String> = None;
    let mut it = argv.iter().peekable();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| -> Result<String, i32> {
            it.next().cloned().ok_or_else(|| {
                eprintln!("ps: option {flag} needs an argument\n{PS_USAGE}");
                1
            })
        };
        match a.as_str() {
            "--help" => {
                println!("{PS_USAGE}");
                return 0;
            }
            "-e" | "-A" | "--all" | "-a" | "-x" | "x" | "-d" => {}
            "-f" | "-F" | "-l" | "-ef" | "-eF" | "-Af" | "-fe" | "-efl" | "-elf" => full = true,
            "aux" | "ax" | "au" | "-aux" | "auxw" | "auxww" | "axu" | "u" | "-u" => bsd = true,
            "--no-headers" | "--no-heading" | "h" => header = false,
            "-o" | "o" | "--format" | "-O" => match value(a) {
                Ok(v) => fields.extend(
                    v.split([',', ' '])
                        .filter(|f| !f.is_empty())
                        .map(String::from),
                ),
                Err(c) => return c,
            },
            "-p" | "p" | "--pid" | "-q" | "q" => match value(a) {
                Ok(v) => {
                    for x in v.split([',', ' ']).filter(|x| !x.is_empty()) {
                        match x.parse() {
                            Ok(n) => pids.push(n),
                            Err(_) => {
                                eprintln!("ps: process ID list syntax error\n{PS_USAGE}");
                                return 1;
                            }
                        }
                    }
                }
                Err(c) => return c,
            },
            "-C" => match value(a) {
                Ok(v) => names.extend(v.split(',').map(String::from)),
                Err(c) => return c,
            },
            "--sort" => match value(a) {
                Ok(v) => sort_by = Some(v),
                Err(c) => return c,
            },
            s if s.starts_with("-o") && s.len() > 2 => {
                fields.extend(s[2..].split(',').map(String::from));
            }
            s if s.starts_with("--sort=") => sort_by = Some(s[7..].to_string()),
            s if s.starts_with("--format=") => fields.extend(s[9..].split(',').map(String::from)),
            s if !s.starts_with('-') && s.chars().all(|c| c.is_ascii_digit()) => {
                pids.push(s.parse().unwrap_or(0));
            }
            other => {
                eprintln!("ps: unsupported option '{other}'\n{PS_USAGE}");
                return 1;
            }
        }
    }
    // `-o pid=` names a column with an empty header.
    let mut headers_override: Vec<Option<String>> = Vec::new();
    if fields.is_empty() {
        let defaults: &[&str] = if bsd {
            &[
                "user", "pid", "%cpu", "%mem", "vsz", "rss", "tty", "stat", "start", "time", "args",
            ]
        } else if full {
            &["uid", "pid", "ppid", "c", "start", "tty", "time", "args"]
        } else {
            &["pid", "tty", "time", "comm"]
        };
        fields = defaults.iter().map(|s| s.to_string()).collect();
        if full {
            // `ps -f` calls them UID, C and STIME and shows the user's name.
            fields[0] = "user".into();
            headers_override = vec![
                Some("UID".into()),
                None,
                None,
                Some("C".into()),
                Some("STIME".into()),
                Some("TTY".into()),
                None,
                Some("CMD".into()),
            ];
        } else if bsd {
            headers_override = vec![None; 8];
            headers_override.push(Some("START".into()));
            headers_override.extend([None, None]);
        } else {
            headers_override = vec![None, None, None, Some("CMD".into())];
        }
    } else {
        for f in &mut fields {
            if let Some((name, h)) = f.clone().split_once('=') {
                *f = name.to_string();
                headers_override.push(Some(h.to_string()));
            } else {
                headers_override.push(None);
            }
        }
    }
    let (_, limit) = memory_usage();
    let me = self_pid();
    let mut procs = processes();
    if !pids.is_empty() {
        procs.retain(|p| pids.contains(&p.pid));
    }
    if !names.is_empty() {
        procs.retain(|p| names.contains(&comm(p)));
    }
    if let Some(key) = sort_by {
        let (desc, key) = match key.strip_prefix('-') {
            Some(k) => (true, k.to_string()),
            None => (false, key.trim_start_matches('+').to_string()),
        };
        match key.as_str() {
            "pid" => procs.sort_by_key(|p| p.pid),
            "ppid" => procs.sort_by_key(|p| p.ppid),
            "rss" | "vsz" | "%mem" | "pmem" => procs.sort_by_key(|p| p.memory_bytes),
            "start_time" | "etime" | "start" => {
                procs.sort_by_key(|p| std::cmp::Reverse(p.started_ms))
            }
            "comm" | "cmd" | "args" => procs.sort_by_key(comm),
            "time" | "cputime" => procs.sort_by_key(|p| p.cpu_us),
            "%cpu" | "pcpu" => {
                let now = now_ms();
                procs.sort_by(|a, b| {
                    let share = |p: &ProcessInfo| {
                        p.cpu_us as f64 / (now.saturating_sub(p.started_ms).max(1) * 1000) as f64
                    };
                    share(a).total_cmp(&share(b))
                })
            }
            other => {
                eprintln!("ps: unknown sort specifier: {other}");
                return 1;
            }
        }
        if desc {
            procs.reverse();
        }
    }
    let mut headers = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let probe = ProcessInfo {
            pid: 0,
            ppid: 0,
            argv: Vec::new(),
            started_ms: 0,
            memory_bytes: 0,
            cpu_us: 0,
        };
        let Some((h, right, _)) = field(&f.to_ascii_lowercase(), &probe, limit, me) else {
            eprintln!("ps: unknown user-defined format specifier \"{f}\"\n{PS_USAGE}");
            return 1;
        };
        let h = headers_override
            .get(i)
            .cloned()
            .flatten()
            .unwrap_or_else(|| h.to_string());
        headers.push((h, right));
    }
    let rows: Vec<Vec<String>> = procs
        .iter()
        .map(|p| {
            fields
                .iter()
                .map(|f| {
                    field(&f.to_ascii_lowercase(), p, limit, me).map_or_else(String::new, |x| x.2)
                })
                .collect()
        })
        .collect();
    let header_refs: Vec<(&str, bool)> = headers.iter().map(|(h, r)| (h.as_str(), *r)).collect();
    let any_header = headers.iter().any(|(h, _)| !h.is_empty());
    table(&header_refs, &rows, header && any_header);
    if (!pids.is_empty() || !names.is_empty()) && procs.is_empty() {
        return 1;
    }
    0
}

const PGREP_USAGE: &str = "Usage: pgrep [-f] [-l|-a] [-x] [-n|-o] [-c] [-d DELIM] PATTERN";

/// `pgrep PATTERN`: the pids of the sandbox's processes whose name (or whole command line
/// with `-f`) matches the extended regular expression; not itself.
pub fn pgrep(argv: std::vec::IntoIter<OsString>) -> i32 {
    matching(strings(argv), None)
}

const PKILL_USAGE: &str =
    "Usage: pkill [-SIGNAL|-s SIGNAL|--signal SIGNAL] [-f] [-x] [-n|-o] [-c] [-e] PATTERN";

/// The signals by name, as `kill -l` numbers them.
const SIGNALS: &[(&str, u8)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
];

fn signal_number(spec: &str) -> Option<u8> {
    if let Ok(n) = spec.parse::<u8>() {
        return (n <= 64).then_some(n);
    }
    let upper = spec.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS.iter().find(|(n, _)| *n == bare).map(|(_, v)| *v)
}

/// `pkill PATTERN`: signals (TERM unless told) the sandbox's processes `pgrep` would list,
/// of any job; exit status 0 when one was signalled, 1 when none matched.
pub fn pkill(argv: std::vec::IntoIter<OsString>) -> i32 {
    let mut argv = strings(argv);
    let mut signal = 15;
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        let spec = if a == "-s" || a == "--signal" {
            if i + 1 >= argv.len() {
                eprintln!("pkill: option requires an argument -- 's'\n{PKILL_USAGE}");
                return 2;
            }
            let v = argv.remove(i + 1);
            argv.remove(i);
            Some(v)
        } else if let Some(v) = a.strip_prefix("--signal=") {
            let v = v.to_string();
            argv.remove(i);
            Some(v)
        } else if let Some(v) = a.strip_prefix('-').filter(|v| signal_number(v).is_some()) {
            let v = v.to_string();
            argv.remove(i);
            Some(v)
        } else {
            i += 1;
            None
        };
        if let Some(spec) = spec {
            match signal_number(&spec) {
                Some(n) => signal = n,
                None => {
                    eprintln!("pkill: invalid signal name: {spec}\n{PKILL_USAGE}");
                    return 2;
                }
            }
        }
    }
    matching(argv, Some(signal))
}

/// `pgrep`, or with a signal `pkill`, over `argv` (without the program name).
fn matching(argv: Vec<String>, kill: Option<u8>) -> i32 {
    let (name, usage) = match kill {
        Some(_) => ("pkill", PKILL_USAGE),
        None => ("pgrep", PGREP_USAGE),
    };
    let mut echo = false;
    let (mut full, mut list_name, mut list_full, mut exact, mut count) =
        (false, false, false, false, false);
    let (mut newest, mut oldest) = (false, false);
    let mut delim = "\n".to_string();
    let mut pattern = None;
    let mut it = argv.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--help" => {
                println!("{usage}");
                return 0;
            }
            "-d" | "--delimiter" if kill.is_none() => delim = it.next().unwrap_or_default(),
            s if s.starts_with('-') && s.len() > 1 => {
                for c in s[1..].chars() {
                    match c {
                        'f' => full = true,
                        'l' => list_name = true,
                        'a' => list_full = true,
                        'x' => exact = true,
                        'c' => count = true,
                        'n' => newest = true,
                        'o' => oldest = true,
                        'e' if kill.is_some() => echo = true,
                        _ => {
                            eprintln!("{name}: invalid option -- '{c}'\n{usage}");
                            return 2;
                        }
                    }
                }
            }
            _ if pattern.is_none() => pattern = Some(a),
            _ => {
                eprintln!("{name}: only one pattern can be provided\n{usage}");
                return 2;
            }
        }
    }
    let Some(pattern) = pattern else {
        eprintln!("{name}: no matching criteria specified\n{usage}");
        return 2;
    };
    let pattern = if exact {
        format!("^(?:{pattern})$")
    } else {
        pattern
    };
    let re = match regex::Regex::new(&pattern) {
        Ok(r) => r,
        Err(_) => {
            eprintln!("{name}: invalid regular expression");
            return 2;
        }
    };
    let me = self_pid();
    let mut found: Vec<ProcessInfo> = processes()
        .into_iter()
        .filter(|p| p.pid != me)
        .filter(|p| re.is_match(&if full { args(p) } else { comm(p) }))
        .collect();
    if newest {
        found.sort_by_key(|p| p.started_ms);
        found = found.pop().into_iter().collect();
    } else if oldest {
        found.sort_by_key(|p| p.started_ms);
        found.truncate(1);
    }
    if let Some(signal) = kill {
        // Gone since listed, it is not counted.
        found.retain(|p| guest_support::process::signal_process(p.pid, signal).is_ok());
        for p in found.iter().filter(|_| echo) {
            println!("{} killed (pid {})", comm(p), p.pid);
        }
        if count {
            println!("{}", found.len());
        }
    } else if count {
        println!("{}", found.len());
    } else {
        let items: Vec<String> = found
            .iter()
            .map(|p| {
                if list_full {
                    format!("{} {}", p.pid, args(p))
                } else if list_name {
                    format!("{} {}", p.pid, comm(p))
                } else {
                    p.pid.to_string()
                }
            })
            .collect();
        if !items.is_empty() {
            print!("{}", items.join(&delim));
            println!();
        }
    }
    if found.is_empty() { 1 } else { 0 }
}

const KILLALL_USAGE: &str = "Usage: killall [-s SIGNAL | -SIGNAL] [-e] [-q] [-r] [-v] [-w] NAME...";

/// `killall NAME...` (psmisc): signals (TERM unless told) every process of the sandbox
/// named NAME exactly (`-r`: matching the extended regular expression), not itself. Exit
/// status 0 when something was signalled for every NAME; `NAME: no process found` and 1
/// otherwise. `-w` waits until they have ended.
pub fn killall(argv: std::vec::IntoIter<OsString>) -> i32 {
    let mut signal = 15;
    let (mut quiet, mut verbose, mut wait, mut regex) = (false, false, false, false);
    let mut names = Vec::new();
    let mut it = strings(argv).into_iter();
    while let Some(a) = it.next() {
        let spec = if a == "-s" || a == "--signal" {
            match it.next() {
                Some(v) => Some(v),
                None => {
                    eprintln!("killall: option requires an argument -- 's'\n{KILLALL_USAGE}");
                    return 1;
                }
            }
        } else if let Some(v) = a.strip_prefix("--signal=") {
            Some(v.to_string())
        } else {
            a.strip_prefix('-')
                .filter(|v| signal_number(v).is_some())
                .map(|v| v.to_string())
        };
        if let Some(spec) = spec {
            match signal_number(&spec) {
                Some(n) => signal = n,
                None => {
                    eprintln!("killall: {spec}: unknown signal; killall -l lists signals.");
                    return 1;
                }
            }
            continue;
        }
        match a.as_str() {
            "-l" | "--list" => {
                let all: Vec<&str> = SIGNALS.iter().map(|(n, _)| *n).collect();
                println!("{}", all.join(" "));
                return 0;
            }
            "--help" => {
                println!("{KILLALL_USAGE}");
                return 0;
            }
            s if s.starts_with('-') && s.len() > 1 && !s.starts_with("--") => {
                for c in s[1..].chars() {
                    match c {
                        'q' => quiet = true,
                        'v' => verbose = true,
                        'w' => wait = true,
                        'r' => regex = true,
                        'e' | 'I' | 'g' => {}
                        _ => {
                            eprintln!("killall: invalid option -- '{c}'\n{KILLALL_USAGE}");
                            return 1;
                        }
                    }
                }
            }
            "--quiet" => quiet = true,
            "--verbose" => verbose = true,
            "--wait" => wait = true,
            "--regexp" => regex = true,
            "--exact" | "--ignore-case" => {}
            _ => names.push(a),
        }
    }
    if names.is_empty() {
        eprintln!("{KILLALL_USAGE}");
        return 1;
    }
    let me = self_pid();
    let mut status = 0;
    let mut signalled = Vec::new();
    for name in &names {
        let matches: Box<dyn Fn(&ProcessInfo) -> bool> = if regex {
            match regex::Regex::new(name) {
                Ok(re) => Box::new(move |p: &ProcessInfo| re.is_match(&comm(p))),
                Err(_) => {
                    eprintln!("killall: Bad regular expression: {name}");
                    return 1;
                }
            }
        } else {
            // The full name, not the 15 characters `comm` keeps.
            let name = name.clone();
            Box::new(move |p: &ProcessInfo| {
                let a0 = p.argv.first().map_or("", String::as_str);
                a0.rsplit('/').next().unwrap_or(a0) == name
            })
        };
        let mut any = false;
        for p in processes()
            .into_iter()
            .filter(|p| p.pid != me && matches(p))
        {
            if guest_support::process::signal_process(p.pid, signal).is_ok() {
                any = true;
                if verbose {
                    eprintln!("Killed {}({}) with signal {signal}", comm(&p), p.pid);
                }
                signalled.push(p.pid);
            }
        }
        if !any {
            if !quiet {
                eprintln!("{name}: no process found");
            }
            status = 1;
        }
    }
    while wait && !signalled.is_empty() {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let alive: Vec<u32> = processes().iter().map(|p| p.pid).collect();
        signalled.retain(|p| alive.contains(p));
    }
    status
}

const FREE_USAGE: &str = "Usage: free [-b|-k|-m|-g|-h] [--si] [-t] [-w]\n\
Memory is the sandbox's: total is its limit, used what its processes hold.";

/// `free`: the sandbox's memory (its limit, what its processes hold) as `free` prints a
/// machine's; a sandbox has no swap, buffers or cache.
pub fn free(argv: std::vec::IntoIter<OsString>) -> i32 {
    let argv = strings(argv);
    let mut unit: u64 = 1024;
    let mut human = false;
    let mut si = false;
    let mut total_line = false;
    let mut wide = false;
    for a in &argv {
        match a.as_str() {
            "--help" => {
                println!("{FREE_USAGE}");
                return 0;
            }
            "-b" | "--bytes" => unit = 1,
            "-k" | "--kibi" | "--kilo" => unit = 1024,
            "-m" | "--mebi" | "--mega" => unit = 1 << 20,
            "-g" | "--gibi" | "--giga" => unit = 1 << 30,
            "-h" | "--human" => human = true,
            "--si" => si = true,
            "-t" | "--total" => total_line = true,
            "-w" | "--wide" => wide = true,
            "-l" | "--lohi" => {}
            other => {
                eprintln!(
                    "free: invalid option -- '{}'\n{FREE_USAGE}",
                    other.trim_start_matches('-')
                );
                return 1;
            }
        }
    }
    if si && unit > 1 {
        unit = match unit {
            1024 => 1000,
            1_048_576 => 1_000_000,
            _ => 1_000_000_000,
        };
    }
    let (used, total) = memory_usage();
    let free = total.saturating_sub(used);
    let show = |b: u64| -> String {
        if human {
            let base: f64 = if si { 1000.0 } else { 1024.0 };
            let suffix = ["B", "Ki", "Mi", "Gi", "Ti"];
            let mut v = b as f64;
            let mut i = 0;
            while v >= base && i + 1 < suffix.len() {
                v /= base;
                i += 1;
            }
            let s = if si {
                suffix[i].trim_end_matches('i')
            } else {
                suffix[i]
            };
            if i == 0 {
                format!("{b}B")
            } else if v < 10.0 {
                format!("{v:.1}{s}")
            } else {
                format!("{v:.0}{s}")
            }
        } else {
            (b / unit).to_string()
        }
    };
    let cols: &[&str] = if wide {
        &[
            "total",
            "used",
            "free",
            "shared",
            "buffers",
            "cache",
            "available",
        ]
    } else {
        &["total", "used", "free", "shared", "buff/cache", "available"]
    };
    let mut head = format!("{:>7}", "");
    for c in cols {
        head.push_str(&format!(" {c:>11}"));
    }
    println!("{head}");
    let row = |label: &str, vals: &[u64]| {
        let mut s = format!("{label:<7}");
        for v in vals {
            s.push_str(&format!(" {:>11}", show(*v)));
        }
        println!("{s}");
    };
    if wide {
        row("Mem:", &[total, used, free, 0, 0, 0, free]);
    } else {
        row("Mem:", &[total, used, free, 0, 0, free]);
    }
    row("Swap:", &[0, 0, 0]);
    if total_line {
        row("Total:", &[total, used, free]);
    }
    0
}

/// `top -b [-n N] [-d SECS]`: the sandbox's memory and processes, printed N times (once by
/// default; there is no interactive screen).
pub fn top(argv: std::vec::IntoIter<OsString>) -> i32 {
    let argv = strings(argv);
    let mut iterations: u64 = 1;
    let mut delay = 3.0f64;
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        let (flag, inline) =
            if a.starts_with('-') && a.len() > 2 && (a.starts_with("-n") || a.starts_with("-d")) {
                (&a[..2], Some(a[2..].to_string()))
            } else {
                (a.as_str(), None)
            };
        match flag {
            "--help" | "-h" => {
                println!("Usage: top -b [-n ITERATIONS] [-d SECONDS] (batch output only)");
                return 0;
            }
            "-b" | "-c" | "-i" | "-H" | "-bc" | "-cb" | "-bn1" | "-bn" => {
                if flag == "-bn1" {
                    iterations = 1;
                }
            }
            "-n" | "-d" => {
                let v = inline.or_else(|| it.next().cloned()).unwrap_or_default();
                let ok = if flag == "-n" {
                    v.parse().map(|n| iterations = n).is_ok()
                } else {
                    v.parse().map(|d| delay = d).is_ok()
                };
                if !ok {
                    eprintln!("top: bad argument for {flag}: '{v}'");
                    return 1;
                }
            }
            "-o" | "-p" | "-u" | "-w" => {
                it.next();
            }
            other => {
                eprintln!("top: unknown option '{other}'");
                return 1;
            }
        }
    }
    for round in 0..iterations.max(1) {
        if round > 0 {
            std::thread::sleep(std::time::Duration::from_secs_f64(delay.max(0.0)));
            println!();
        }
        let (used, limit) = memory_usage();
        let me = self_pid();
        let procs = processes();
        let first = procs
            .iter()
            .map(|p| p.started_ms)
            .min()
            .unwrap_or_else(now_ms);
        println!(
            "top - {} up {}, 1 user",
            clock_seconds(now_ms()),
            etime(now_ms().saturating_sub(first))
        );
        println!(
            "Tasks: {:>3} total, {:>3} running, {:>3} sleeping",
            procs.len(),
            1,
            procs.len().saturating_sub(1)
        );
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!(
            "MiB Mem : {:>8.1} total, {:>8.1} free, {:>8.1} used",
            mib(limit),
            mib(limit.saturating_sub(used)),
            mib(used)
        );
        println!(
            "MiB Swap: {:>8.1} total, {:>8.1} free, {:>8.1} used",
            0.0, 0.0, 0.0
        );
        println!();
        let fields = [
            "pid", "user", "rss", "stat", "%cpu", "%mem", "time+", "comm",
        ];
        let headers: Vec<(&str, bool)> = vec![
            ("PID", true),
            ("USER", false),
            ("RES", true),
            ("S", false),
            ("%CPU", true),
            ("%MEM", true),
            ("TIME+", true),
            ("COMMAND", false),
        ];
        let rows: Vec<Vec<String>> = procs
            .iter()
            .map(|p| {
                fields
                    .iter()
                    .map(|f| field(f, p, limit, me).map_or_else(String::new, |x| x.2))
                    .collect()
            })
            .collect();
        table(&headers, &rows, true);
    }
    0
}
