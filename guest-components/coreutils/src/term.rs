//! `sudo`, `tput`, `clear` and `stty size`.
//!
//! A sandbox has one user, who may do everything the sandbox allows: `sudo` runs its command
//! as that user (its options are accepted and have nothing to change), as a container whose
//! user has passwordless sudo would. `tput` answers from the terminal's real size and the
//! xterm/ANSI escape sequences every terminal emulator of today understands.

use std::ffi::OsString;
use std::io::Write as _;

/// `sudo [-EHnSPbk] [-u USER] [-g GROUP] [-C N] [-D DIR] [-h HOST] [--] [VAR=value...] CMD...`
pub fn sudo(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut i = 0;
    let mut dir: Option<String> = None;
    let mut login_shell = false;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "--" => {
                i += 1;
                break;
            }
            "-h" | "--help" if i + 1 >= args.len() => {
                println!(
                    "usage: sudo [-EHknPS] [-u user] [-g group] [-D directory] [--] [VAR=value] command [arg ...]"
                );
                return 0;
            }
            "-V" | "--version" => {
                println!(
                    "Sudo version 1.9.16 (wasbox: runs the command as the sandbox's one user)"
                );
                return 0;
            }
            "-u" | "-g" | "-C" | "-h" | "-p" | "-U" | "-r" | "-t" | "-T" | "-R" => {
                if i + 1 >= args.len() {
                    eprintln!("sudo: option requires an argument -- '{}'", &a[1..]);
                    return 1;
                }
                i += 2;
                continue;
            }
            "-D" | "--chdir" => {
                let Some(d) = args.get(i + 1) else {
                    eprintln!("sudo: option requires an argument -- 'D'");
                    return 1;
                };
                dir = Some(d.clone());
                i += 2;
                continue;
            }
            "-i" | "--login" | "-s" | "--shell" => login_shell = true,
            "-k" | "-K" | "-v" | "--validate" | "--reset-timestamp" | "--remove-timestamp"
                if args.len() == 1 =>
            {
                return 0;
            }
            "-l" | "--list" => {
                println!(
                    "User may run the following commands on this sandbox:\n    (ALL : ALL) NOPASSWD: ALL"
                );
                return 0;
            }
            _ if a.starts_with("--") && a.contains('=') => {}
            _ if a.starts_with('-') && a.len() > 1 => {
                // Flags without arguments (-E, -H, -n, -S, -P, -b, -k, and bundles of them).
                let flags = &a[1..];
                if let Some(bad) = flags.chars().find(|c| !"EHnSPbkAB".contains(*c)) {
                    eprintln!("sudo: invalid option -- '{bad}'");
                    eprintln!("usage: sudo [-EHknPS] [-u user] [--] command [arg ...]");
                    return 1;
                }
            }
            _ => break,
        }
        i += 1;
    }
    let mut vars: Vec<(String, String)> = std::env::vars().collect();
    while let Some((k, v)) = args.get(i).and_then(|a| a.split_once('=')) {
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            break;
        }
        vars.retain(|(key, _)| key != k);
        vars.push((k.to_string(), v.to_string()));
        i += 1;
    }
    let mut argv: Vec<String> = args[i..].to_vec();
    if login_shell {
        argv = if argv.is_empty() {
            vec!["bash".into(), "-l".into()]
        } else {
            vec!["bash".into(), "-c".into(), argv.join(" ")]
        };
    }
    if argv.is_empty() {
        eprintln!("usage: sudo [-EHknPS] [-u user] [--] command [arg ...]");
        return 1;
    }
    if let Some(d) = dir {
        argv = vec![
            "sh".into(),
            "-c".into(),
            "cd \"$1\" && shift && exec \"$@\"".into(),
            "sudo".into(),
            d,
        ]
        .into_iter()
        .chain(argv)
        .collect();
    }
    vars.retain(|(k, _)| !k.starts_with("SUDO_"));
    vars.push((
        "SUDO_USER".into(),
        std::env::var("USER").unwrap_or_else(|_| "user".into()),
    ));
    vars.push(("SUDO_COMMAND".into(), argv.join(" ")));
    crate::run_command(&argv, vars, guest_support::process::Stdio::Inherit, "sudo")
}

/// `clear [-T TERM] [-x]`: clears the screen as `tput clear` does, then the scrollback
/// (xterm's E3) unless `-x`, as ncurses' `clear` does.
pub fn clear(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<OsString> = args.skip(1).collect();
    let keep_scrollback = args.iter().any(|a| a == "-x");
    let named = args.iter().any(|a| a.to_string_lossy().starts_with("-T"));
    if !named && std::env::var("TERM").map_or(true, |t| t.is_empty()) {
        eprintln!("TERM environment variable not set.");
        return 1;
    }
    let mut tput_args: Vec<OsString> = vec!["tput".into()];
    tput_args.extend(args.into_iter().filter(|a| a != "-x"));
    tput_args.push("clear".into());
    let code = tput(tput_args.into_iter());
    if code == 0 && !keep_scrollback {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(b"\x1b[3J").and_then(|()| out.flush());
    }
    code
}

/// `stty size`: the rows and columns of the job's terminal. The terminal's modes are the
/// host's (it echoes and edits lines itself): `stty` neither lists nor changes them, and
/// says so rather than pretend.
pub fn stty(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let Some((cols, rows)) = guest_support::process::terminal_size() else {
        eprintln!("stty: 'standard input': Inappropriate ioctl for device");
        return 1;
    };
    match args.as_slice() {
        [a] if a == "size" => {
            println!("{rows} {cols}");
            0
        }
        _ => {
            eprintln!(
                "stty: the sandbox's terminal modes cannot be listed or changed here; \
                 `stty size` gives its size"
            );
            1
        }
    }
}

/// `tput [-T TERM] CAPNAME [PARAMS...]` and `tput -S` (capabilities from stdin, one a line).
pub fn tput(args: std::vec::IntoIter<OsString>) -> i32 {
    let mut args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut term = std::env::var("TERM").ok().filter(|t| !t.is_empty());
    if args.len() >= 2 && args[0] == "-T" {
        term = Some(args[1].clone());
        args.drain(..2);
    } else if let Some(t) = args
        .first()
        .and_then(|a| a.strip_prefix("-T"))
        .filter(|t| !t.is_empty())
    {
        term = Some(t.to_string());
        args.remove(0);
    }
    if args.first().map(String::as_str) == Some("-S") {
        let mut input = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut input);
        let mut status = 0;
        for line in input.lines().filter(|l| !l.trim().is_empty()) {
            let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
            status = one(term.as_deref(), &words);
        }
        return status;
    }
    if args.is_empty() {
        eprintln!("usage: tput [-T TERM] capname [parameters...]");
        return 2;
    }
    one(term.as_deref(), &args)
}

fn size() -> (u16, u16) {
    if let Some((cols, rows)) = guest_support::process::terminal_size() {
        return (cols, rows);
    }
    let env = |k: &str, d: u16| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|n| *n > 0)
            .unwrap_or(d)
    };
    (env("COLUMNS", 80), env("LINES", 24))
}

fn one(term: Option<&str>, words: &[String]) -> i32 {
    let cap = words[0].as_str();
    let num = |i: usize| words.get(i).and_then(|w| w.parse::<u32>().ok());
    let (cols, rows) = size();
    // The size needs no terminal description; everything else does.
    let sized = match cap {
        "cols" => Some(cols.to_string() + "\n"),
        "lines" => Some(rows.to_string() + "\n"),
        _ => None,
    };
    if let Some(s) = sized {
        print!("{s}");
        return 0;
    }
    let Some(term) = term else {
        eprintln!("tput: No value for $TERM and no -T specified");
        return 2;
    };
    if term == "dumb" {
        return match cap {
            "colors" => {
                println!("-1");
                0
            }
            "longname" => {
                print!("80-column dumb tty");
                0
            }
            _ => 1,
        };
    }
    let colors = if term.contains("256") { 256 } else { 8 };
    let color = |base: u32, n: u32| -> String {
        if n < 8 {
            format!("\x1b[{}m", base + n)
        } else if n < 16 {
            format!("\x1b[{}m", base + 60 + n - 8)
        } else {
            format!("\x1b[{};5;{n}m", base + 8)
        }
    };
    let out: String = match cap {
        "colors" => format!("{colors}\n"),
        "longname" => format!("{term} terminal"),
        "sgr0" => "\x1b(B\x1b[m".into(),
        "bold" => "\x1b[1m".into(),
        "dim" => "\x1b[2m".into(),
        "sitm" => "\x1b[3m".into(),
        "ritm" => "\x1b[23m".into(),
        "smul" => "\x1b[4m".into(),
        "rmul" => "\x1b[24m".into(),
        "blink" => "\x1b[5m".into(),
        "rev" | "smso" => "\x1b[7m".into(),
        "rmso" => "\x1b[27m".into(),
        "invis" => "\x1b[8m".into(),
        "setaf" | "setf" => match num(1) {
            Some(n) => color(30, n),
            None => return missing(cap),
        },
        "setab" | "setb" => match num(1) {
            Some(n) => color(40, n),
            None => return missing(cap),
        },
        "op" => "\x1b[39;49m".into(),
        "clear" => "\x1b[H\x1b[2J".into(),
        "el" => "\x1b[K".into(),
        "el1" => "\x1b[1K".into(),
        "ed" => "\x1b[J".into(),
        "home" => "\x1b[H".into(),
        "cup" => match (num(1), num(2)) {
            (Some(r), Some(c)) => format!("\x1b[{};{}H", r + 1, c + 1),
            _ => return missing(cap),
        },
        "hpa" => match num(1) {
            Some(c) => format!("\x1b[{}G", c + 1),
            None => return missing(cap),
        },
        "cuu1" => "\x1b[A".into(),
        "cud1" => "\n".into(),
        "cuf1" => "\x1b[C".into(),
        "cub1" => "\x08".into(),
        "cr" => "\r".into(),
        "civis" => "\x1b[?25l".into(),
        "cnorm" => "\x1b[?12l\x1b[?25h".into(),
        "smcup" => "\x1b[?1049h\x1b[22;0;0t".into(),
        "rmcup" => "\x1b[?1049l\x1b[23;0;0t".into(),
        "sc" => "\x1b7".into(),
        "rc" => "\x1b8".into(),
        "bel" => "\x07".into(),
        "it" => "8\n".into(),
        "init" | "reset" => String::new(),
        _ => {
            eprintln!("tput: unknown terminal capability '{cap}'");
            return 4;
        }
    };
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return 1;
    }
    0
}

fn missing(cap: &str) -> i32 {
    eprintln!("tput: {cap}: missing parameter");
    2
}
