//! `sh` / `bash` of the wasbox base image: the bash grammar (brush-parser) with POSIX sh
//! semantics; every program that is not a builtin runs as a child process through the
//! `wasbox:sandbox/process` import, inside the same sandbox.
//!
//! `sh -c CMD [NAME [ARG]...]`, `sh [-lc] ...`, `sh SCRIPT [ARG]...`, `sh -s [ARG]...` and a
//! script on stdin.

mod arith;
mod builtins;
mod compgen;
mod expand;
mod glob;
mod io;
mod jobs;
mod pattern;
mod printf;
mod shell;
mod test;
mod timing;

use std::io::Read;

use io::Io;
use shell::{Ctl, Shell};

fn main() {
    guest_support::start();
    let args: Vec<String> = std::env::args().collect();
    let arg0 = args.first().cloned().unwrap_or_else(|| "sh".into());
    let code = run(arg0, &args[1.min(args.len())..]);
    guest_support::exit(code);
}

fn run(arg0: String, args: &[String]) -> i32 {
    let mut command_mode = false;
    let mut stdin_mode = false;
    let mut interactive = false;
    let mut noexec = false;
    let mut opts = shell::Opts::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" || a == "-" {
            i += 1;
            break;
        }
        let (on, flags) = match (a.strip_prefix('-'), a.strip_prefix('+')) {
            (Some(f), _) if !f.is_empty() && !f.starts_with('-') => (true, f),
            (_, Some(f)) if !f.is_empty() => (false, f),
            _ if a == "--version" => {
                // What scripts parse (`bash --version | head -1`), and what this shell is.
                println!(
                    "GNU bash, version {} (wasm32-unknown-linux-gnu)\n\
                     This is the wasbox shell: bash's grammar and behaviour, not GNU bash.",
                    shell::BASH_VERSION
                );
                return 0;
            }
            _ if a.starts_with("--") => {
                // --login, --norc, --noprofile, --posix: accepted and ignored.
                i += 1;
                continue;
            }
            _ => break,
        };
        for c in flags.chars() {
            match c {
                'c' => command_mode = on,
                's' => stdin_mode = on,
                'e' => opts.errexit = on,
                'u' => opts.nounset = on,
                'x' => opts.xtrace = on,
                'f' => opts.noglob = on,
                'o' => {
                    i += 1;
                    match args.get(i).map(String::as_str) {
                        Some("pipefail") => opts.pipefail = on,
                        Some("errexit") => opts.errexit = on,
                        Some("nounset") => opts.nounset = on,
                        Some("xtrace") => opts.xtrace = on,
                        _ => {}
                    }
                }
                'i' => interactive = on,
                'n' => noexec = on,
                'l' | 'h' | 'v' | 'B' | 'H' | 'm' | 'p' | 'P' | 'E' | 'T' | 'b' | 'C' => {}
                other => {
                    eprintln!("{}: -{other}: invalid option", short(&arg0));
                    return 2;
                }
            }
        }
        i += 1;
    }
    let rest = &args[i.min(args.len())..];
    if interactive && !command_mode {
        let mut sh = Shell::new(arg0.clone(), rest.to_vec());
        sh.opts = opts;
        sh.interactive = true;
        return repl(&mut sh);
    }

    let mut script_file = None;
    let (script, name, positional) = if command_mode {
        let Some(cmd) = rest.first() else {
            eprintln!("{}: -c: option requires an argument", short(&arg0));
            return 2;
        };
        let name = rest.get(1).cloned().unwrap_or_else(|| arg0.clone());
        let positional = rest.get(2..).map(|r| r.to_vec()).unwrap_or_default();
        (cmd.clone(), name, positional)
    } else if !stdin_mode && !rest.is_empty() {
        let path = &rest[0];
        match std::fs::read_to_string(path) {
            Ok(s) => {
                script_file = Some(path.clone());
                (s, path.clone(), rest[1..].to_vec())
            }
            Err(e) => {
                eprintln!("{}: {path}: {}", short(&arg0), shell::io_message(&e));
                return 127;
            }
        }
    } else if noexec {
        let mut s = String::new();
        let _ = std::io::stdin().read_to_string(&mut s);
        (s, arg0.clone(), rest.to_vec())
    } else {
        let mut sh = std::mem::ManuallyDrop::new(Shell::new(arg0.clone(), rest.to_vec()));
        sh.opts = opts;
        return run_stdin(&mut sh);
    };

    // The process ends when this returns: its memory and host handles go with it, so the
    // shell's tables and functions are not freed one by one first.
    let mut sh = std::mem::ManuallyDrop::new(Shell::new(name, positional));
    sh.opts = opts;
    sh.script = script_file;
    let io = Io::standard();
    if noexec {
        // `bash -n`: read and parse only; a syntax error is status 2.
        return match shell::parse(&script) {
            Ok(_) => 0,
            Err(msg) => {
                sh.error(&io, &msg);
                2
            }
        };
    }
    let status = match sh.run_script(&script, &io) {
        Ok(s) => s,
        Err(Ctl::Exit(s)) | Err(Ctl::Return(s)) | Err(Ctl::Abandon(s)) => s,
        Err(Ctl::Break(_)) | Err(Ctl::Continue(_)) => sh.last_status,
        Err(Ctl::Interrupt) => 130,
    };
    sh.end_shell(status, &io)
}

/// The interactive loop: prompt, read a command (more lines while it is incomplete), run
/// it. Ctrl-C abandons the command; end of input (Ctrl-D) leaves.
fn repl(sh: &mut Shell) -> i32 {
    use std::io::Write;
    let io = Io::standard();
    let mut pending = String::new();
    // Lines entered before `pending`: `$LINENO` goes on counting from one command to the
    // next, as in an interactive bash.
    let mut lines_before = 0;
    loop {
        let prompt = if pending.is_empty() {
            sh.get_var("PS1").unwrap_or_else(|| "$ ".into())
        } else {
            sh.get_var("PS2").unwrap_or_else(|| "> ".into())
        };
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        let line = io::read_line(&io.stdin);
        if guest_support::process::take_interrupt() {
            pending.clear();
            sh.last_status = 130;
            if let Err(Ctl::Exit(s)) = sh.run_trap("INT", &io) {
                return sh.end_shell(s, &io);
            }
            continue;
        }
        let Some(line) = line else {
            eprintln!("exit");
            let status = sh.last_status;
            return sh.end_shell(status, &io);
        };
        pending.push_str(&line);
        pending.push('\n');
        let program = match shell::parse_or_incomplete(&pending) {
            Ok(p) => p,
            Err(None) => continue,
            Err(Some(msg)) => {
                sh.error(&io, &msg);
                sh.last_status = 2;
                lines_before += pending.matches('\n').count();
                pending.clear();
                continue;
            }
        };
        sh.line_offset = lines_before;
        lines_before += pending.matches('\n').count();
        pending.clear();
        // Like bash's checkwinsize: the size as it is now, for the command about to run.
        if let Some((cols, rows)) = guest_support::process::terminal_size() {
            sh.set_var("COLUMNS", cols.to_string());
            sh.set_var("LINES", rows.to_string());
        }
        match sh.run_program(&program, &io) {
            Ok(s) => sh.last_status = s,
            Err(Ctl::Exit(s)) => return sh.end_shell(s, &io),
            Err(Ctl::Interrupt) => sh.last_status = 130,
            Err(Ctl::Abandon(s)) => sh.last_status = s,
            Err(_) => {}
        }
        // An interrupt that came while the command ran is dealt with.
        guest_support::process::take_interrupt();
    }
}

/// A script read from stdin, as bash reads one: a command at a time, each run as soon as it
/// is complete, so that what it runs reads the lines after it and a program driving the
/// shell through a pipe (E2B's bash contexts) gets each answer before it sends more. A
/// syntax error ends the shell (status 2), as in a non-interactive bash.
fn run_stdin(sh: &mut Shell) -> i32 {
    let io = Io::standard();
    let mut pending = String::new();
    let mut lines_before = 0;
    loop {
        let line = io::read_line(&io.stdin);
        let at_end = line.is_none();
        if let Some(line) = line {
            pending.push_str(&line);
            pending.push('\n');
        } else if pending.trim().is_empty() {
            let status = sh.last_status;
            return sh.end_shell(status, &io);
        }
        let parsed = if at_end {
            shell::parse(&pending).map_err(Some)
        } else {
            shell::parse_or_incomplete(&pending)
        };
        let program = match parsed {
            Ok(p) => p,
            Err(None) => continue,
            Err(Some(msg)) => {
                sh.error(&io, &msg);
                return sh.end_shell(2, &io);
            }
        };
        sh.line_offset = lines_before;
        lines_before += pending.matches('\n').count();
        pending.clear();
        match sh.run_program(&program, &io) {
            Ok(s) => sh.last_status = s,
            Err(Ctl::Exit(s)) | Err(Ctl::Return(s)) | Err(Ctl::Abandon(s)) => {
                return sh.end_shell(s, &io);
            }
            Err(Ctl::Break(_)) | Err(Ctl::Continue(_)) => {}
            Err(Ctl::Interrupt) => return sh.end_shell(130, &io),
        }
        if at_end {
            let status = sh.last_status;
            return sh.end_shell(status, &io);
        }
    }
}

fn short(arg0: &str) -> &str {
    arg0.rsplit('/').next().unwrap_or(arg0)
}
