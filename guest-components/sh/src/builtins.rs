//! Builtin commands: those that must change the shell itself (`cd`, `export`, `set`, ...)
//! and the common ones that are cheaper inside it (`echo`, `printf`, `test`).

use crate::io::{Io, read_line};
use crate::shell::{Array, BUILTINS, Ctl, Shell, Status, io_message};

pub fn run(sh: &mut Shell, argv: &[String], io: &Io) -> Status {
    let args = &argv[1..];
    let name = argv[0].as_str();
    let err = |sh: &Shell, msg: &str| sh.error(io, &format!("{name}: {msg}"));
    match name {
        ":" | "true" => Ok(0),
        "false" => Ok(1),
        "echo" => Ok(echo(args, io)),
        "printf" => printf(sh, args, io),
        "pwd" => {
            io.stdout.write_str(&format!("{}\n", sh.cwd));
            Ok(0)
        }
        "cd" => Ok(cd(sh, args, io)),
        "test" => Ok(test_status(sh, args, io, name)),
        "[" => {
            if args.last().map(String::as_str) != Some("]") {
                err(sh, "missing `]'");
                return Ok(2);
            }
            Ok(test_status(sh, &args[..args.len() - 1], io, name))
        }
        "exit" => {
            let code = match args.first() {
                Some(a) => match a.parse::<i64>() {
                    Ok(n) => (n & 0xff) as i32,
                    Err(_) => {
                        err(sh, &format!("{a}: numeric argument required"));
                        2
                    }
                },
                None => sh.last_status,
            };
            Err(Ctl::Exit(code))
        }
        "return" => {
            let code = args
                .first()
                .and_then(|a| a.parse::<i64>().ok())
                .map(|n| (n & 0xff) as i32)
                .unwrap_or(sh.last_status);
            Err(Ctl::Return(code))
        }
        "break" | "continue" => {
            let n = args
                .first()
                .and_then(|a| a.parse::<usize>().ok())
                .unwrap_or(1)
                .max(1);
            if sh.loop_depth == 0 {
                // bash: only meaningful in a loop; ignored otherwise.
                return Ok(0);
            }
            let n = n.min(sh.loop_depth);
            Err(if name == "break" {
                Ctl::Break(n)
            } else {
                Ctl::Continue(n)
            })
        }
        "export" | "readonly" => {
            let mut unexport = false;
            let mut any = false;
            for a in args {
                match a.as_str() {
                    "-n" => unexport = true,
                    "-p" | "-f" => {}
                    _ => {
                        any = true;
                        let (k, v) = match a.split_once('=') {
                            Some((k, v)) => (k, Some(v)),
                            None => (a.as_str(), None),
                        };
                        if !valid_name(k) {
                            err(sh, &format!("`{a}': not a valid identifier"));
                            return Ok(1);
                        }
                        if let Some(v) = v {
                            sh.set_var(k, v.to_string());
                        }
                        if name == "export" {
                            if unexport {
                                if let Some(var) = sh.vars.get_mut(k) {
                                    var.exported = false;
                                }
                            } else {
                                sh.export(k);
                            }
                        }
                    }
                }
            }
            if !any {
                let mut names: Vec<(&String, &crate::shell::Var)> =
                    sh.vars.iter().filter(|(_, v)| v.exported).collect();
                names.sort_by(|a, b| a.0.cmp(b.0));
                let mut out = String::new();
                for (k, v) in names {
                    out.push_str(&format!(
                        "declare -x {k}=\"{}\"\n",
                        v.value.replace('"', "\\\"")
                    ));
                }
                io.stdout.write_str(&out);
            }
            Ok(0)
        }
        "local" => {
            if sh.locals.is_empty() {
                err(sh, "can only be used in a function");
                return Ok(1);
            }
            for a in args {
                let (k, v) = match a.split_once('=') {
                    Some((k, v)) => (k, Some(v)),
                    None => (a.as_str(), None),
                };
                if k.starts_with('-') {
                    continue;
                }
                sh.make_local(k);
                if args.iter().any(|a| a.starts_with('-') && a.contains('n')) {
                    let target = v.unwrap_or_default().to_string();
                    sh.vars.insert(
                        k.to_string(),
                        crate::shell::Var {
                            nameref: Some(target),
                            ..Default::default()
                        },
                    );
                    continue;
                }
                if args.iter().any(|a| a == "-A" || a == "-a") {
                    let assoc = args.iter().any(|a| a == "-A");
                    sh.set_array(k, new_array(assoc));
                    continue;
                }
                match v {
                    Some(v) => sh.set_var(k, v.to_string()),
                    None => {
                        if sh.get_var(k).is_none() {
                            sh.set_var(k, String::new());
                        }
                    }
                }
            }
            Ok(0)
        }
        "unset" => {
            let mut functions = false;
            for a in args {
                match a.as_str() {
                    "-f" => functions = true,
                    "-v" => functions = false,
                    n if functions => {
                        sh.functions.remove(n);
                    }
                    n => match n.split_once('[') {
                        Some((name, rest)) if rest.ends_with(']') => {
                            let index = &rest[..rest.len() - 1];
                            if matches!(index, "@" | "*") {
                                sh.unset_var(name);
                            } else {
                                let key = sh.resolve_key(name, index)?;
                                sh.unset_elem(name, &key);
                            }
                        }
                        _ => {
                            sh.integers.remove(n);
                            sh.unset_var(n)
                        }
                    },
                }
            }
            Ok(0)
        }
        "shift" => {
            let n = args
                .first()
                .and_then(|a| a.parse::<usize>().ok())
                .unwrap_or(1);
            if n > sh.positional.len() {
                return Ok(1);
            }
            sh.positional.drain(..n);
            Ok(0)
        }
        "set" => Ok(set(sh, args, io)),
        "eval" => {
            let script = args.join(" ");
            sh.run_script(&script, io)
        }
        "." | "source" => {
            let Some(file) = args.first() else {
                err(sh, "filename argument required");
                return Ok(2);
            };
            let path = sh.abs_path(file);
            match std::fs::read_to_string(&path) {
                Ok(script) => {
                    let saved = if args.len() > 1 {
                        Some(std::mem::replace(&mut sh.positional, args[1..].to_vec()))
                    } else {
                        None
                    };
                    let r = match sh.run_script(&script, io) {
                        Err(Ctl::Return(s)) => Ok(s),
                        other => other,
                    };
                    if let Some(p) = saved {
                        sh.positional = p;
                    }
                    r
                }
                Err(e) => {
                    sh.error(io, &format!("{file}: {}", io_message(&e)));
                    Ok(1)
                }
            }
        }
        "read" => Ok(read(sh, args, io)),
        "declare" | "typeset" => declare(sh, args, io),
        // Aliases are kept and listed; as in a non-interactive bash (no `expand_aliases`),
        // they are not expanded.
        "alias" => {
            let mut status = 0;
            let list: Vec<&String> = args.iter().filter(|a| *a != "-p").collect();
            if list.is_empty() {
                for (k, v) in &sh.aliases {
                    io.stdout
                        .write_str(&format!("alias {k}={}\n", single_quote(v)));
                }
            }
            for a in list {
                match a.split_once('=') {
                    Some((k, v)) => {
                        sh.aliases.insert(k.to_string(), v.to_string());
                    }
                    None => match sh.aliases.get(a.as_str()) {
                        Some(v) => {
                            io.stdout
                                .write_str(&format!("alias {a}={}\n", single_quote(v)));
                        }
                        None => {
                            err(sh, &format!("{a}: not found"));
                            status = 1;
                        }
                    },
                }
            }
            Ok(status)
        }
        "unalias" => {
            let mut status = 0;
            if args.is_empty() {
                err(sh, "usage: unalias [-a] name [name ...]");
                return Ok(2);
            }
            for a in args {
                if a == "-a" {
                    sh.aliases.clear();
                } else if sh.aliases.remove(a.as_str()).is_none() {
                    err(sh, &format!("{a}: not found"));
                    status = 1;
                }
            }
            Ok(status)
        }
        "umask" => Ok(umask(sh, args, io)),
        "mapfile" | "readarray" => Ok(mapfile(sh, args, io)),
        "getopts" => Ok(getopts(sh, args, io)),
        "let" => {
            let mut v = 0;
            for a in args {
                match crate::arith::eval_str(sh, a) {
                    Ok(n) => v = n,
                    Err(msg) => {
                        err(sh, &msg);
                        return Ok(1);
                    }
                }
            }
            Ok((v == 0) as i32)
        }
        "type" => {
            const KEYWORDS: &[&str] = &[
                "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while",
                "until", "do", "done", "in", "function", "time", "{", "}", "!", "[[", "]]",
                "coproc",
            ];
            let mut status = 0;
            let (mut terse, mut path_only, mut force_path, mut no_func) =
                (false, false, false, false);
            let mut names = Vec::new();
            for a in args {
                match a.strip_prefix('-') {
                    Some(flags) if !flags.is_empty() && names.is_empty() => {
                        for c in flags.chars() {
                            match c {
                                't' => terse = true,
                                'p' => path_only = true,
                                'P' => force_path = true,
                                'f' => no_func = true,
                                'a' => {}
                                _ => {
                                    err(sh, &format!("type: -{c}: invalid option"));
                                    return Ok(2);
                                }
                            }
                        }
                    }
                    _ => names.push(a.clone()),
                }
            }
            for a in &names {
                let kind = if force_path {
                    None
                } else if !no_func && sh.functions.contains_key(a) {
                    Some(("function", format!("{a} is a function\n")))
                } else if KEYWORDS.contains(&a.as_str()) {
                    Some(("keyword", format!("{a} is a shell keyword\n")))
                } else if BUILTINS.contains(&a.as_str()) {
                    Some(("builtin", format!("{a} is a shell builtin\n")))
                } else {
                    None
                };
                let line = match kind {
                    Some((_, _)) if path_only => continue,
                    Some((t, _)) if terse => format!("{t}\n"),
                    Some((_, l)) => l,
                    None => match sh.path_lookup(a) {
                        Some(_) if terse => "file\n".to_string(),
                        Some(found) if path_only || force_path => format!("{found}\n"),
                        Some(found) => format!("{a} is {found}\n"),
                        None => {
                            if !terse && !path_only && !force_path {
                                err(sh, &format!("{a}: not found"));
                            }
                            status = 1;
                            continue;
                        }
                    },
                };
                io.stdout.write_str(&line);
            }
            Ok(status)
        }
        "command" => {
            let mut rest = args;
            let mut describe = false;
            let mut verbose = false;
            while let Some(a) = rest.first() {
                match a.as_str() {
                    "-v" => describe = true,
                    "-V" => (describe, verbose) = (true, true),
                    "-p" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
            let Some(cmd) = rest.first() else {
                return Ok(0);
            };
            if describe && rest.len() > 1 {
                // One answer per name; the status is 1 if any is not found.
                let mut status = 0;
                for name in rest {
                    let flag = if verbose { "-V" } else { "-v" };
                    let one = vec![flag.to_string(), name.clone()];
                    if run(sh, &[vec!["command".to_string()], one].concat(), io)? != 0 {
                        status = 1;
                    }
                }
                return Ok(status);
            }
            if describe {
                let found = if sh.functions.contains_key(cmd) {
                    Some((cmd.clone(), format!("{cmd} is a function")))
                } else if BUILTINS.contains(&cmd.as_str()) {
                    Some((cmd.clone(), format!("{cmd} is a shell builtin")))
                } else if cmd.contains('/') {
                    let p = sh.abs_path(cmd);
                    let runnable = std::fs::metadata(&p).is_ok_and(|m| m.is_file())
                        && guest_support::file_mode(&p).is_none_or(|m| m & 0o111 != 0);
                    runnable.then(|| (cmd.clone(), format!("{cmd} is {cmd}")))
                } else {
                    sh.path_lookup(cmd)
                        .map(|p| (p.clone(), format!("{cmd} is {p}")))
                };
                return Ok(match found {
                    Some((short, long)) => {
                        io.stdout
                            .write_str(&format!("{}\n", if verbose { long } else { short }));
                        0
                    }
                    None => {
                        if verbose {
                            err(sh, &format!("command: {cmd}: not found"));
                        }
                        1
                    }
                });
            }
            if BUILTINS.contains(&cmd.as_str()) {
                return run(sh, rest, io);
            }
            match sh.launch(rest, &[], io) {
                Ok(l) => Ok(sh.finish(l)),
                Err(s) => Ok(s),
            }
        }
        "exec" => {
            if args.is_empty() {
                // Only redirections: they stay for the rest of the script.
                sh.exec_io = Some(io.clone());
                sh.exec_gen += 1;
                return Ok(0);
            }
            let status = match sh.launch(args, &[], io) {
                Ok(l) => sh.finish(l),
                Err(s) => s,
            };
            Err(Ctl::Exit(status))
        }
        "wait" => Ok(wait(sh, args, io)),
        "kill" => {
            let (status, trapped) = kill(sh, args, io);
            // The shell signalled itself and has a trap for it: the trap runs instead.
            if let Some(condition) = trapped {
                sh.run_trap(&condition, io)?;
            }
            Ok(status)
        }
        // No table of remembered command paths is kept (each lookup walks PATH): `hash -r`
        // (a venv's activate script ends with it) has nothing to forget; `hash NAME` only
        // checks that NAME is found.
        "hash" => {
            let mut status = 0;
            for a in args.iter().filter(|a| !a.starts_with('-')) {
                if sh.path_lookup(a).is_none() && !BUILTINS.contains(&a.as_str()) {
                    err(sh, &format!("hash: {a}: not found"));
                    status = 1;
                }
            }
            if args.is_empty() {
                io.stdout.write_str("hash: hash table empty\n");
            }
            Ok(status)
        }
        "trap" => Ok(trap(sh, args, io)),
        "shopt" => Ok(shopt(sh, args, io)),
        "times" => {
            io.stdout.write_str(&crate::timing::times());
            Ok(0)
        }
        "ulimit" => {
            let (out, status) = crate::timing::ulimit(args, &mut |m| err(sh, m));
            io.stdout.write_str(&out);
            Ok(status)
        }
        "builtin" => match args.first() {
            None => Ok(0),
            Some(b) if BUILTINS.contains(&b.as_str()) => run(sh, args, io),
            Some(b) => {
                err(sh, &format!("{b}: not a shell builtin"));
                Ok(1)
            }
        },
        "pushd" => Ok(crate::jobs::pushd(sh, args, io)),
        "popd" => Ok(crate::jobs::popd(sh, args, io)),
        "dirs" => Ok(crate::jobs::dirs(sh, args, io)),
        "jobs" => Ok(crate::jobs::jobs(sh, args, io)),
        "disown" => Ok(crate::jobs::disown(sh, args, io)),
        "fg" | "bg" => Ok(crate::jobs::no_job_control(sh, name, io)),
        "compgen" => Ok(crate::compgen::compgen(sh, args, io)),
        _ => {
            err(sh, "not a builtin");
            Ok(127)
        }
    }
}

pub fn valid_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f == '_' || f.is_ascii_alphabetic())
        && c.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn test_status(sh: &Shell, args: &[String], io: &Io, name: &str) -> i32 {
    match crate::test::test(sh, args) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(msg) => {
            sh.error(io, &format!("{name}: {msg}"));
            2
        }
    }
}

fn echo(args: &[String], io: &Io) -> i32 {
    let mut newline = true;
    let mut escapes = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let flags = a
            .strip_prefix('-')
            .filter(|f| !f.is_empty() && f.chars().all(|c| matches!(c, 'n' | 'e' | 'E')));
        let Some(flags) = flags else { break };
        for c in flags.chars() {
            match c {
                'n' => newline = false,
                'e' => escapes = true,
                _ => escapes = false,
            }
        }
        i += 1;
    }
    let mut out = args[i..].join(" ");
    if escapes {
        if let Some(cut) = out.find("\\c") {
            out.truncate(cut);
            newline = false;
        }
        out = crate::expand::ansi_c(&out);
    }
    if newline {
        out.push('\n');
    }
    if io.stdout.write_str(&out) { 0 } else { 1 }
}

fn cd(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    let args: Vec<&String> = args
        .iter()
        .filter(|a| !matches!(a.as_str(), "-L" | "-P"))
        .collect();
    let target = match args.first().map(|s| s.as_str()) {
        None => match sh.get_var("HOME") {
            Some(h) => h,
            None => {
                sh.error(io, "cd: HOME not set");
                return 1;
            }
        },
        Some("-") => match sh.get_var("OLDPWD") {
            Some(p) => {
                io.stdout.write_str(&format!("{p}\n"));
                p
            }
            None => {
                sh.error(io, "cd: OLDPWD not set");
                return 1;
            }
        },
        Some(t) => t.to_string(),
    };
    match change_dir(sh, &target) {
        Ok(()) => 0,
        Err(why) => {
            sh.error(io, &format!("cd: {why}"));
            1
        }
    }
}

/// Moves the shell to `target` (`OLDPWD` and `PWD` follow), or says why not
/// (`DIR: No such file or directory`).
pub fn change_dir(sh: &mut Shell, target: &str) -> Result<(), String> {
    let abs = normalize(&sh.abs_path(target));
    match std::fs::metadata(&abs) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("{target}: Not a directory")),
        Err(e) => return Err(format!("{target}: {}", io_message(&e))),
    }
    if let Err(e) = std::env::set_current_dir(&abs) {
        return Err(format!("{target}: {}", io_message(&e)));
    }
    let old = std::mem::replace(&mut sh.cwd, abs.clone());
    sh.set_var("OLDPWD", old);
    sh.set_var("PWD", abs);
    Ok(())
}

/// Removes `.` and `..` components lexically, as `cd` does.
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

fn set(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    if args.is_empty() {
        let mut names: Vec<(&String, &crate::shell::Var)> = sh.vars.iter().collect();
        names.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = String::new();
        for (k, v) in names {
            out.push_str(&format!("{k}={}\n", quote(&v.value)));
        }
        io.stdout.write_str(&out);
        return 0;
    }
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            sh.positional = args[i + 1..].to_vec();
            return 0;
        }
        let (on, flags) = match (a.strip_prefix('-'), a.strip_prefix('+')) {
            (Some(f), _) => (true, f),
            (_, Some(f)) => (false, f),
            _ => {
                sh.positional = args[i..].to_vec();
                return 0;
            }
        };
        // `-o NAME`, also inside a group of letters (`set -euo pipefail`): each `o`
        // takes the next argument as an option name.
        let mut names = Vec::new();
        for c in flags.chars() {
            match c {
                'o' => {
                    i += 1;
                    match args.get(i) {
                        Some(n) => names.push(n.clone()),
                        None => return 0,
                    }
                }
                'e' => sh.opts.errexit = on,
                'u' => sh.opts.nounset = on,
                'x' => sh.opts.xtrace = on,
                'f' => sh.opts.noglob = on,
                'C' => sh.opts.noclobber = on,
                'v' | 'h' | 'B' | 'H' | 'm' | 'b' | 'E' | 'T' | 'P' => {}
                other => {
                    sh.error(io, &format!("set: -{other}: invalid option"));
                    return 2;
                }
            }
        }
        for name in names {
            match name.as_str() {
                "errexit" => sh.opts.errexit = on,
                "nounset" => sh.opts.nounset = on,
                "xtrace" => sh.opts.xtrace = on,
                "pipefail" => sh.opts.pipefail = on,
                "noglob" => sh.opts.noglob = on,
                "noclobber" => sh.opts.noclobber = on,
                "posix"
                | "monitor"
                | "emacs"
                | "vi"
                | "errtrace"
                | "functrace"
                | "hashall"
                | "braceexpand"
                | "histexpand"
                | "history"
                | "interactive-comments" => {}
                other => {
                    sh.error(io, &format!("set: {other}: invalid option name"));
                    return 2;
                }
            }
        }
        i += 1;
    }
    0
}

/// Quotes a value for `set` output when it needs it.
pub(crate) fn quote(v: &str) -> String {
    if !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:,+@%".contains(c))
    {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', "'\\''"))
    }
}

fn read(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    let mut raw = false;
    let mut array: Option<String> = None;
    let mut names = Vec::new();
    let mut delim = b'\n';
    let mut max: Option<usize> = None;
    let mut i = 0;
    // Options may be grouped (`-ra NAME`, `-rp PROMPT`); a value is the rest of the group
    // or the next argument.
    while i < args.len() {
        let a = &args[i];
        if !names.is_empty() || !a.starts_with('-') || a == "-" {
            names.push(a.to_string());
            i += 1;
            continue;
        }
        if a == "--" {
            names.extend(args[i + 1..].iter().cloned());
            break;
        }
        let flags: Vec<char> = a[1..].chars().collect();
        for (k, c) in flags.iter().enumerate() {
            if matches!(c, 'p' | 'a' | 'd' | 'n' | 'N' | 't' | 'u') {
                let rest: String = flags[k + 1..].iter().collect();
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i).cloned().unwrap_or_default()
                } else {
                    rest
                };
                match c {
                    'p' => {
                        io.stderr.write_str(&value);
                    }
                    'a' => array = Some(value),
                    'd' => delim = value.bytes().next().unwrap_or(0),
                    'n' | 'N' => max = value.parse().ok().filter(|&n| n > 0),
                    _ => {}
                }
                break;
            }
            match c {
                'r' => raw = true,
                's' | 'e' => {}
                _ => {
                    sh.error(io, &format!("read: -{c}: invalid option"));
                    return 2;
                }
            }
        }
        i += 1;
    }
    let mut line = match crate::io::read_until(&io.stdin, delim, max) {
        Some(l) => l,
        None => {
            for n in &names {
                sh.set_var(n, String::new());
            }
            if names.is_empty() {
                sh.set_var("REPLY", String::new());
            }
            return 1;
        }
    };
    if !raw {
        while line.ends_with('\\') {
            line.pop();
            match read_line(&io.stdin) {
                Some(next) => line.push_str(&next),
                None => break,
            }
        }
        let mut out = String::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else {
                out.push(c);
            }
        }
        line = out;
    }
    if let Some(name) = array {
        let ifs = sh.get_var("IFS").unwrap_or_else(|| " \t\n".into());
        let words = crate::expand::ifs_fields(&line, &ifs)
            .into_iter()
            .enumerate()
            .map(|(i, w)| (i as i64, w))
            .collect();
        sh.set_array(&name, Array::Indexed(words));
        return 0;
    }
    if names.is_empty() {
        sh.set_var("REPLY", line);
        return 0;
    }
    let ifs = sh.get_var("IFS").unwrap_or_else(|| " \t\n".into());
    let is_ifs = |c: char| ifs.contains(c);
    let mut rest = line.trim_start_matches(|c: char| is_ifs(c) && c.is_whitespace());
    for (k, n) in names.iter().enumerate() {
        if k + 1 == names.len() {
            let v = rest.trim_end_matches(|c: char| is_ifs(c) && c.is_whitespace());
            sh.set_var(n, v.to_string());
        } else {
            let end = rest.find(is_ifs).unwrap_or(rest.len());
            sh.set_var(n, rest[..end].to_string());
            rest = rest[end..].trim_start_matches(|c: char| is_ifs(c) && c.is_whitespace());
            if let Some(r) = rest.strip_prefix(|c: char| is_ifs(c) && !c.is_whitespace()) {
                rest = r.trim_start_matches(|c: char| is_ifs(c) && c.is_whitespace());
            }
        }
    }
    0
}

fn printf(sh: &mut Shell, args: &[String], io: &Io) -> Status {
    let (target, args) = if args.first().map(String::as_str) == Some("-v") && args.len() >= 2 {
        (Some(args[1].clone()), &args[2..])
    } else {
        (None, args)
    };
    // `--` ends the options (`printf -- '--- %s\n' x`).
    let args = match args.first().map(String::as_str) {
        Some("--") => &args[1..],
        _ => args,
    };
    let Some(format) = args.first() else {
        sh.error(io, "printf: usage: printf [-v var] format [arguments]");
        return Ok(2);
    };
    let (out, status) = crate::printf::format(format, &args[1..]);
    if let Some(msg) = &status.1 {
        sh.error(io, &format!("printf: {msg}"));
    }
    match target {
        Some(v) => sh.set_var(&v, String::from_utf8_lossy(&out).into_owned()),
        None => {
            io.stdout.write(&out);
        }
    }
    Ok(status.0)
}

fn new_array(assoc: bool) -> Array {
    if assoc {
        Array::Assoc(Default::default())
    } else {
        Array::Indexed(Default::default())
    }
}

/// `declare`/`typeset [-aAxrigplun] [NAME[=VALUE]]...`.
fn declare(sh: &mut Shell, args: &[String], io: &Io) -> Status {
    let mut flags = String::new();
    let mut names = Vec::new();
    for a in args {
        match a.strip_prefix('-') {
            Some(f) if !f.is_empty() && names.is_empty() => flags.push_str(f),
            _ => names.push(a.clone()),
        }
    }
    if flags.contains('f') || flags.contains('F') {
        // Functions: list names (bodies are not kept as text).
        for n in names.iter().filter(|n| sh.functions.contains_key(*n)) {
            io.stdout.write_str(&format!("{n}\n"));
        }
        return Ok(0);
    }
    if flags.contains('p') || names.is_empty() {
        let mut list: Vec<String> = if names.is_empty() {
            let mut all: Vec<String> = sh.vars.keys().cloned().collect();
            all.sort();
            all
        } else {
            names.clone()
        };
        list.retain(|n| sh.vars.contains_key(n));
        let mut status = 0;
        for n in &names {
            if !sh.vars.contains_key(n) {
                sh.error(io, &format!("declare: {n}: not found"));
                status = 1;
            }
        }
        for n in list {
            io.stdout.write_str(&(describe(sh, &n) + "\n"));
        }
        return Ok(status);
    }
    let local = !sh.locals.is_empty() && !flags.contains('g');
    for a in names {
        let (k, v) = match a.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (a.clone(), None),
        };
        if !valid_name(&k) {
            sh.error(io, &format!("declare: `{a}': not a valid identifier"));
            return Ok(1);
        }
        if local {
            sh.make_local(&k);
        }
        if flags.contains('n') {
            sh.vars.insert(
                k.clone(),
                crate::shell::Var {
                    nameref: Some(v.clone().unwrap_or_default()),
                    ..Default::default()
                },
            );
            continue;
        }
        if flags.contains('i') {
            sh.integers.insert(k.clone());
        }
        if flags.contains('A') && !sh.is_assoc(&k) {
            sh.set_array(&k, new_array(true));
        } else if flags.contains('a') && sh.vars.get(&k).is_none_or(|v| v.array.is_none()) {
            let old = sh.get_var(&k);
            let mut arr = new_array(false);
            if let (Array::Indexed(m), Some(old)) = (&mut arr, old) {
                m.insert(0, old);
            }
            sh.set_array(&k, arr);
        }
        match v {
            Some(v) => {
                let v = if flags.contains('l') {
                    v.to_lowercase()
                } else if flags.contains('u') {
                    v.to_uppercase()
                } else if flags.contains('i') || sh.integers.contains(&k) {
                    crate::arith::eval_str(sh, &v).map_or(v, |n| n.to_string())
                } else {
                    v
                };
                sh.set_var(&k, v);
            }
            None if local && !sh.vars.contains_key(&k) => sh.set_var(&k, String::new()),
            None => {}
        }
        if flags.contains('x') {
            sh.export(&k);
        }
    }
    Ok(0)
}

/// `declare -p` text for one variable.
/// `'text'` as bash quotes an alias's value.
fn single_quote(v: &str) -> String {
    format!("'{}'", v.replace('\'', "'\\''"))
}

/// `umask [-S] [MODE]`: the mask new files are made with (octal, or symbolic as `chmod`
/// writes it: `u=rwx,g=rx,o=`), printed as bash prints it. The sandbox's files get their
/// permission bits from the host, so the mask is what the shell reports and what its
/// children inherit, not a filter the host applies.
fn umask(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    let symbolic = args.iter().any(|a| a == "-S");
    let rest: Vec<&String> = args.iter().filter(|a| *a != "-S" && *a != "-p").collect();
    let Some(mode) = rest.first() else {
        let m = sh.umask;
        if symbolic {
            let who = |shift: u32| {
                let allowed = !(m >> shift) & 7;
                let mut s = String::new();
                for (bit, c) in [(4, 'r'), (2, 'w'), (1, 'x')] {
                    if allowed & bit != 0 {
                        s.push(c);
                    }
                }
                s
            };
            io.stdout
                .write_str(&format!("u={},g={},o={}\n", who(6), who(3), who(0)));
        } else {
            io.stdout.write_str(&format!("{m:04o}\n"));
        }
        return 0;
    };
    if mode.chars().all(|c| c.is_ascii_digit()) {
        match u32::from_str_radix(mode, 8) {
            Ok(m) if m <= 0o777 => {
                sh.umask = m;
                0
            }
            _ => {
                sh.error(io, &format!("umask: {mode}: octal number out of range"));
                1
            }
        }
    } else {
        // Symbolic: `who=perms` clauses, each setting what `who` may have.
        let mut m = sh.umask;
        for clause in mode.split(',') {
            let Some((who, perms)) = clause.split_once('=') else {
                sh.error(
                    io,
                    &format!(
                        "umask: `{}': invalid symbolic mode operator",
                        clause.chars().find(|c| !"ugoa".contains(*c)).unwrap_or(' ')
                    ),
                );
                return 1;
            };
            let mut bits = 0;
            for c in perms.chars() {
                bits |= match c {
                    'r' => 4,
                    'w' => 2,
                    'x' => 1,
                    _ => {
                        sh.error(
                            io,
                            &format!("umask: `{c}': invalid symbolic mode character"),
                        );
                        return 1;
                    }
                };
            }
            let who = if who.is_empty() || who == "a" {
                "ugo"
            } else {
                who
            };
            for w in who.chars() {
                let shift = match w {
                    'u' => 6,
                    'g' => 3,
                    'o' => 0,
                    _ => {
                        sh.error(io, &format!("umask: `{w}': invalid symbolic mode operator"));
                        return 1;
                    }
                };
                m = (m & !(7 << shift)) | ((!bits & 7) << shift);
            }
        }
        sh.umask = m;
        0
    }
}

fn describe(sh: &Shell, name: &str) -> String {
    let quote = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
    let Some(var) = sh.vars.get(name) else {
        return String::new();
    };
    let x = if var.exported { "x" } else { "" };
    match &var.array {
        Some(Array::Indexed(m)) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("[{k}]={}", quote(v)))
                .collect();
            format!("declare -a{x} {name}=({})", items.join(" "))
        }
        Some(Array::Assoc(m)) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("[{k}]={} ", quote(v)))
                .collect();
            format!("declare -A{x} {name}=({})", items.concat())
        }
        None => {
            let i = if sh.integers.contains(name) { "i" } else { "" };
            let f = if x.is_empty() && i.is_empty() {
                "-"
            } else {
                ""
            };
            format!("declare -{f}{i}{x} {name}={}", quote(&var.value))
        }
    }
}

/// The process a job spec names for `wait` and `kill`: `%%`/`%+` (the last job), `%-`,
/// `%N`, or a process id.
pub fn job_pid(sh: &Shell, id: &str) -> Option<u32> {
    match id {
        "%%" | "%+" => sh.background.last().copied(),
        "%-" => sh.background.iter().rev().nth(1).copied(),
        j if j.starts_with('%') => j[1..]
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|n| sh.background.get(n).copied()),
        p => p.parse::<u32>().ok(),
    }
}

/// `mapfile`/`readarray [-t] [-n COUNT] [-s SKIP] [-d DELIM] [ARRAY]`.
fn mapfile(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    let mut trim = false;
    let mut count = 0usize;
    let mut skip = 0usize;
    let mut name = "MAPFILE".to_string();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-t" => trim = true,
            "-n" | "-s" | "-d" | "-u" | "-C" | "-c" | "-O" => {
                i += 1;
                let v = args.get(i).cloned().unwrap_or_default();
                match args[i - 1].as_str() {
                    "-n" => count = v.parse().unwrap_or(0),
                    "-s" => skip = v.parse().unwrap_or(0),
                    _ => {}
                }
            }
            a => name = a.to_string(),
        }
        i += 1;
    }
    let mut m = std::collections::BTreeMap::new();
    let mut n = 0;
    while count == 0 || (m.len() < count) {
        let Some(line) = read_line(&io.stdin) else {
            break;
        };
        if n < skip {
            n += 1;
            continue;
        }
        n += 1;
        let line = if trim { line } else { line + "\n" };
        m.insert(m.len() as i64, line);
    }
    sh.set_array(&name, Array::Indexed(m));
    0
}

/// `getopts OPTSTRING NAME [ARG]...`: the next option of the positional parameters (or ARGs).
fn getopts(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    if args.len() < 2 {
        sh.error(io, "getopts: usage: getopts optstring name [arg ...]");
        return 2;
    }
    let spec = args[0].clone();
    let name = args[1].clone();
    let params: Vec<String> = if args.len() > 2 {
        args[2..].to_vec()
    } else {
        sh.positional.clone()
    };
    let silent = spec.starts_with(':');
    let mut optind: usize = sh
        .get_var("OPTIND")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    if sh.getopts_last != Some(optind) {
        sh.getopts_char = 0;
    }
    let done = |sh: &mut Shell, optind: usize| {
        sh.set_var(&name, "?".into());
        sh.set_var("OPTIND", optind.to_string());
        sh.getopts_last = Some(optind);
        sh.getopts_char = 0;
        1
    };
    let Some(arg) = params.get(optind - 1).cloned() else {
        return done(sh, optind);
    };
    if sh.getopts_char == 0 {
        if arg == "--" {
            return done(sh, optind + 1);
        }
        if !arg.starts_with('-') || arg == "-" {
            return done(sh, optind);
        }
        sh.getopts_char = 1;
    }
    let chars: Vec<char> = arg.chars().collect();
    let c = chars[sh.getopts_char];
    sh.getopts_char += 1;
    if sh.getopts_char >= chars.len() {
        optind += 1;
        sh.getopts_char = 0;
    }
    let pos = spec.find(c).filter(|_| c != ':');
    match pos {
        Some(p) if spec[p + 1..].starts_with(':') => {
            if sh.getopts_char != 0 {
                let rest: String = chars[sh.getopts_char..].iter().collect();
                sh.set_var("OPTARG", rest);
                optind += 1;
                sh.getopts_char = 0;
                sh.set_var(&name, c.to_string());
            } else if let Some(v) = params.get(optind - 1) {
                sh.set_var("OPTARG", v.clone());
                optind += 1;
                sh.set_var(&name, c.to_string());
            } else if silent {
                sh.set_var(&name, ":".into());
                sh.set_var("OPTARG", c.to_string());
            } else {
                sh.error(io, &format!("option requires an argument -- {c}"));
                sh.set_var(&name, "?".into());
                sh.unset_var("OPTARG");
            }
        }
        Some(_) => {
            sh.unset_var("OPTARG");
            sh.set_var(&name, c.to_string());
        }
        None => {
            if silent {
                sh.set_var("OPTARG", c.to_string());
            } else {
                sh.error(io, &format!("illegal option -- {c}"));
                sh.unset_var("OPTARG");
            }
            sh.set_var(&name, "?".into());
        }
    }
    sh.set_var("OPTIND", optind.to_string());
    sh.getopts_last = Some(optind);
    0
}

/// `wait [-n] [-f] [-p VAR] [ID...]`: every background job, the ones named (process ids,
/// or `%N`/`%%`/`%+`/`%-` for the jobs started in that order), or with `-n` the next of
/// them to end (its id in VAR with `-p`). The status is the last one waited for; an id
/// that is no child of this shell is 127.
fn wait(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    use guest_support::process;
    let mut any = false;
    let mut var = None;
    let mut ids = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-n" => any = true,
            "-f" => {}
            "-p" if i + 1 < args.len() => {
                i += 1;
                var = Some(args[i].clone());
            }
            "--" => {
                ids.extend(args[i + 1..].iter().cloned());
                break;
            }
            a => ids.push(a.to_string()),
        }
        i += 1;
    }
    let mut pids = Vec::new();
    for id in &ids {
        let pid = job_pid(sh, id);
        match pid {
            Some(p) if sh.background.contains(&p) => pids.push(p),
            _ => {
                let _ = io.stderr.write_str(&format!(
                    "sh: wait: {id}: no such job or not a child of this shell\n"
                ));
                if !any {
                    return 127;
                }
            }
        }
    }
    if any {
        let candidates = if ids.is_empty() {
            sh.background.clone()
        } else {
            pids
        };
        if candidates.is_empty() {
            return 127;
        }
        loop {
            for &p in &candidates {
                if let Some(status) = process::wait_timeout(p, 5) {
                    sh.background.retain(|b| *b != p);
                    if let Some(v) = &var {
                        sh.set_var(v, p.to_string());
                    }
                    return status;
                }
            }
        }
    }
    if ids.is_empty() {
        let mut status = 0;
        for pid in std::mem::take(&mut sh.background) {
            status = process::wait(pid);
        }
        return status;
    }
    let mut status = 0;
    for p in pids {
        sh.background.retain(|b| *b != p);
        status = process::wait(p);
    }
    status
}

const SIGNALS: &[(&str, u8)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ABRT", 6),
    ("KILL", 9),
    ("USR1", 10),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
];

fn signal_number(name: &str) -> Option<u8> {
    if let Ok(n) = name.parse::<u8>() {
        return (n <= 64).then_some(n);
    }
    let upper = name.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS.iter().find(|(n, _)| *n == bare).map(|(_, v)| *v)
}

/// `kill [-s SIG | -SIG | -n N] ID...` and `kill -l [STATUS]`: ends background jobs of this
/// shell (process ids or `%N`) and, by pid, any process of the sandbox (another job's, as
/// `ps` lists them); a process ended by a signal has status 128 + its number.
/// Signal 0 only checks that the job is there.
fn kill(sh: &mut Shell, args: &[String], io: &Io) -> (i32, Option<String>) {
    let mut signal = 15u8;
    let mut i = 0;
    if args.first().map(String::as_str) == Some("-l")
        || args.first().map(String::as_str) == Some("-L")
    {
        if let Some(status) = args.get(1).and_then(|a| a.parse::<u8>().ok()) {
            let n = if status > 128 { status - 128 } else { status };
            match SIGNALS.iter().find(|(_, v)| *v == n) {
                Some((name, _)) => {
                    io.stdout.write_str(&format!("{name}\n"));
                    return (0, None);
                }
                None => {
                    io.stderr.write_str(&format!(
                        "sh: kill: {status}: invalid signal specification\n"
                    ));
                    return (1, None);
                }
            }
        }
        let names: Vec<String> = SIGNALS
            .iter()
            .map(|(n, v)| format!("{v}) SIG{n}"))
            .collect();
        io.stdout.write_str(&format!("{}\n", names.join(" ")));
        return (0, None);
    }
    while let Some(a) = args.get(i) {
        if a == "--" {
            i += 1;
            break;
        }
        let spec = if a == "-s" || a == "-n" {
            i += 1;
            args.get(i).cloned()
        } else if let Some(s) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            Some(s.to_string())
        } else {
            break;
        };
        match spec.as_deref().and_then(signal_number) {
            Some(n) => signal = n,
            None => {
                io.stderr.write_str(&format!(
                    "sh: kill: {}: invalid signal specification\n",
                    spec.unwrap_or_default()
                ));
                return (1, None);
            }
        }
        i += 1;
    }
    let ids = &args[i.min(args.len())..];
    if ids.is_empty() {
        io.stderr.write_str(
            "sh: kill: usage: kill [-s sigspec | -n signum | -sigspec] pid | jobspec ...\n",
        );
        return (2, None);
    }
    let mut status = 0;
    let mut trapped = None;
    for id in ids {
        let pid = job_pid(sh, id);
        // A signal to the shell itself that it traps (or ignores with `trap '' SIG`).
        if pid == Some(sh.pid())
            && signal != 0
            && let Some(condition) = trap_condition(&signal.to_string())
            && sh.traps.contains_key(&condition)
        {
            if sh.traps.get(&condition).is_some_and(|a| !a.is_empty()) {
                trapped = Some(condition);
            }
            continue;
        }
        match pid {
            Some(p) if sh.background.contains(&p) => {
                if signal != 0 {
                    guest_support::process::kill(p, signal);
                }
            }
            // A process of another job of the sandbox (as `ps` lists them).
            Some(p) if !id.starts_with('%') => {
                if let Err(e) = guest_support::process::signal_process(p, signal) {
                    io.stderr.write_str(&format!("sh: kill: {e}\n"));
                    status = 1;
                }
            }
            _ => {
                let what = if id.starts_with('%') {
                    format!("sh: kill: {id}: no such job\n")
                } else if id.parse::<u32>().is_ok() {
                    format!("sh: kill: ({id}) - No such process\n")
                } else {
                    format!("sh: kill: {id}: arguments must be process or job IDs\n")
                };
                io.stderr.write_str(&what);
                status = 1;
            }
        }
    }
    (status, trapped)
}

/// A trap condition's name as `trap -p` prints it: `EXIT`, `ERR`, `DEBUG`, `RETURN`, or a
/// signal without its `SIG` (also given by number; 0 is `EXIT`).
fn trap_condition(spec: &str) -> Option<String> {
    let upper = spec.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    match bare {
        "0" | "EXIT" => return Some("EXIT".into()),
        "ERR" | "DEBUG" | "RETURN" => return Some(bare.into()),
        _ => {}
    }
    let n = signal_number(bare)?;
    SIGNALS
        .iter()
        .find(|(_, v)| *v == n)
        .map(|(name, _)| name.to_string())
}

/// `trap [-lp] [[ACTION] CONDITION...]`: what the shell runs on `EXIT` (the end of the
/// shell, also by `exit` or `set -e`), on `ERR` (a command failing where `set -e` would
/// look), and on `INT` (Ctrl-C at an interactive prompt). `-` (or a lone number) resets a
/// condition, an empty action ignores it. The other signals are recorded and shown: a
/// sandbox process is only ever stopped, not signalled.
fn trap(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    let mut args = args;
    if args.first().map(String::as_str) == Some("--") {
        args = &args[1..];
    }
    match args.first().map(String::as_str) {
        Some("-l") => {
            let names: Vec<String> = SIGNALS
                .iter()
                .map(|(n, v)| format!("{v}) SIG{n}"))
                .collect();
            io.stdout.write_str(&format!("{}\n", names.join(" ")));
            return 0;
        }
        None | Some("-p") => {
            let wanted: Vec<String> = args
                .iter()
                .skip(1)
                .filter_map(|a| trap_condition(a))
                .collect();
            for (cond, action) in &sh.traps {
                if wanted.is_empty() || wanted.contains(cond) {
                    io.stdout
                        .write_str(&format!("trap -- {} {cond}\n", quote_always(action)));
                }
            }
            return 0;
        }
        _ => {}
    }
    let (action, conditions) = if args.len() == 1 || args[0].parse::<u32>().is_ok() {
        (None, args)
    } else if args[0] == "-" {
        (None, &args[1..])
    } else {
        (Some(args[0].clone()), &args[1..])
    };
    let mut status = 0;
    for c in conditions {
        match trap_condition(c) {
            Some(name) => match &action {
                Some(a) => {
                    sh.traps.insert(name, a.clone());
                }
                None => {
                    sh.traps.remove(&name);
                }
            },
            None => {
                io.stderr
                    .write_str(&format!("sh: trap: {c}: invalid signal specification\n"));
                status = 1;
            }
        }
    }
    status
}

fn quote_always(v: &str) -> String {
    format!("'{}'", v.replace('\'', "'\\''"))
}

/// The `shopt` options this shell knows. The first group changes what it does; the second
/// is about history, completion and prompts, which a shell without line editing has no use
/// for, so they are kept and shown but change nothing.
const SHOPT_EFFECTIVE: &[&str] = &["dotglob", "globstar", "nocaseglob", "nullglob"];
const SHOPT_INERT: &[&str] = &[
    "autocd",
    "cdspell",
    "checkhash",
    "checkjobs",
    "checkwinsize",
    "cmdhist",
    "complete_fullquote",
    "direxpand",
    "dirspell",
    "execfail",
    "expand_aliases",
    "extquote",
    "force_fignore",
    "globasciiranges",
    "histappend",
    "histreedit",
    "histverify",
    "hostcomplete",
    "huponexit",
    "inherit_errexit",
    "interactive_comments",
    "lastpipe",
    "lithist",
    "login_shell",
    "mailwarn",
    "no_empty_cmd_completion",
    "progcomp",
    "promptvars",
    "shift_verbose",
    "sourcepath",
    "xpg_echo",
];

/// `shopt [-pqsu] [-o] [NAME...]`: sets, unsets, shows or tests shell options. Options this
/// shell does not implement (`extglob`, `failglob`, `nocasematch`, ...) are refused by name
/// rather than accepted and ignored.
fn shopt(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    let (mut set, mut unset, mut quiet, mut print, mut set_o) = (false, false, false, false, false);
    let mut names = Vec::new();
    for a in args {
        match a.as_str() {
            "-s" => set = true,
            "-u" => unset = true,
            "-q" => quiet = true,
            "-p" => print = true,
            "-o" => set_o = true,
            s if s.starts_with('-') && s.len() > 1 => {
                for c in s[1..].chars() {
                    match c {
                        's' => set = true,
                        'u' => unset = true,
                        'q' => quiet = true,
                        'p' => print = true,
                        'o' => set_o = true,
                        other => {
                            io.stderr
                                .write_str(&format!("sh: shopt: -{other}: invalid option\n"));
                            return 2;
                        }
                    }
                }
            }
            n => names.push(n.to_string()),
        }
    }
    if set && unset {
        io.stderr
            .write_str("sh: shopt: cannot set and unset shell options simultaneously\n");
        return 1;
    }
    if set_o {
        // `shopt -o` is `set -o`.
        let flag = if unset { "+o" } else { "-o" };
        let mut set_args = Vec::new();
        for n in &names {
            set_args.push(flag.to_string());
            set_args.push(n.clone());
        }
        return if set_args.is_empty() {
            0
        } else {
            self::set(sh, &set_args, io)
        };
    }
    let known = |n: &str| SHOPT_EFFECTIVE.contains(&n) || SHOPT_INERT.contains(&n);
    for n in &names {
        if !known(n) {
            io.stderr.write_str(&format!(
                "sh: shopt: {n}: invalid shell option name (or one this shell does not implement)\n"
            ));
            return 1;
        }
    }
    if set || unset {
        for n in names {
            if set {
                sh.shopts.insert(n);
            } else {
                sh.shopts.remove(&n);
            }
        }
        return 0;
    }
    let mut all: Vec<&str> = SHOPT_EFFECTIVE.iter().chain(SHOPT_INERT).copied().collect();
    all.sort();
    let shown: Vec<&str> = if names.is_empty() {
        all
    } else {
        names.iter().map(String::as_str).collect()
    };
    let mut status = 0;
    let mut out = String::new();
    for n in shown {
        let on = sh.shopt(n);
        if !on {
            status = 1;
        }
        if print {
            out.push_str(&format!("shopt {} {n}\n", if on { "-s" } else { "-u" }));
        } else {
            out.push_str(&format!("{n:<24}{}\n", if on { "on" } else { "off" }));
        }
    }
    if !quiet {
        io.stdout.write_str(&out);
    }
    if names.is_empty() { 0 } else { status }
}
