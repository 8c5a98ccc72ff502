//! The multi-call coreutils program of the base image. `argv[0]` names the applet (`ls`,
//! `/bin/ls`); `coreutils APPLET ARGS...` works too.
//!
//! Most applets are uutils. Ours, where uutils fails on WASI or lacks the tool: `cat`
//! (streams character devices), the system and user applets of `system.rs`, `env` (does
//! not build), `mkdir` (`-p` with an absolute path), `mv`, `realpath`, `tac` (need host
//! calls WASI lacks), `chmod` (WASI has no modes: a valid mode is accepted), `yes` (must end
//! quietly on a broken pipe), `printenv`, `true`, `false`, and `grep`, `egrep`, `fgrep`,
//! `rev`, `find`, `xargs`, `sed`, `diff`.

mod awk;
mod diff;
mod files;
mod find;
mod getopt;
mod grep;
mod iconv;
mod inspect;
mod ls;
mod own;
mod patch;
mod procs;
mod sed;
mod system;
mod term;
mod tree;

use std::ffi::OsString;
use std::io::{ErrorKind, Write};

type Main = fn(std::vec::IntoIter<OsString>) -> i32;

fn applet(name: &str) -> Option<Main> {
    Some(match name {
        "cat" => system::cat,
        "less" | "more" => system::pager,
        "dd" => system::dd,
        "df" => system::df,
        "uname" => system::uname,
        "arch" => system::arch,
        "nproc" => system::nproc,
        "id" => system::id,
        "whoami" => system::whoami,
        "logname" => system::logname,
        "groups" => system::groups,
        "hostname" => system::hostname,
        "tty" => system::tty,
        "nohup" => system::nohup,
        "nice" => system::nice,
        "chown" | "chgrp" => system::chown,
        "sync" => system::sync,
        "getconf" => system::getconf,
        "ps" => procs::ps,
        "pgrep" => procs::pgrep,
        "pkill" => procs::pkill,
        "killall" => procs::killall,
        "getopt" => getopt::getopt,
        "iconv" => iconv::iconv,
        "free" => procs::free,
        "top" => procs::top,
        "cp" => files::cp,
        "cmp" => files::cmp,
        "du" => files::du,
        "mktemp" => files::mktemp,
        "stat" => files::stat,
        "timeout" => files::timeout,
        "cut" => uu_cut::uumain,
        "echo" => uu_echo::uumain,
        "head" => uu_head::uumain,
        "ls" => ls::main,
        "ln" => own::ln,
        "mkdir" => own::mkdir,
        "mv" => own::mv,
        "pwd" => uu_pwd::uumain,
        "rm" => |a| uu_rm::uumain(own::without_trailing_slashes(a)),
        "seq" => uu_seq::uumain,
        "sleep" => uu_sleep::uumain,
        "sort" => own::sort,
        "tail" => uu_tail::uumain,
        "touch" => uu_touch::uumain,
        "tr" => uu_tr::uumain,
        "uniq" => uu_uniq::uumain,
        "wc" => uu_wc::uumain,
        "basename" => uu_basename::uumain,
        "base64" => uu_base64::uumain,
        "chmod" => files::chmod,
        "comm" => uu_comm::uumain,
        "date" => uu_date::uumain,
        "dirname" => uu_dirname::uumain,
        "expr" => uu_expr::uumain,
        "fold" => uu_fold::uumain,
        "md5sum" => uu_md5sum::uumain,
        "nl" => uu_nl::uumain,
        "od" => uu_od::uumain,
        "paste" => uu_paste::uumain,
        "printf" => uu_printf::uumain,
        "readlink" => uu_readlink::uumain,
        "realpath" => own::realpath,
        "rmdir" => |a| uu_rmdir::uumain(own::without_trailing_slashes(a)),
        "sha256sum" => uu_sha256sum::uumain,
        "tac" => own::tac,
        "shasum" => own::shasum,
        "uuidgen" => own::uuidgen,
        "which" => inspect::which,
        "strings" => inspect::strings,
        "xxd" => inspect::xxd,
        "hexdump" | "hd" => inspect::hexdump,
        "file" => inspect::file,
        "column" => inspect::column,
        "sha1sum" => uu_sha1sum::uumain,
        "sha512sum" => uu_sha512sum::uumain,
        "b2sum" => uu_b2sum::uumain,
        "cksum" => uu_cksum::uumain,
        "base32" => uu_base32::uumain,
        "join" => uu_join::uumain,
        "expand" => uu_expand::uumain,
        "unexpand" => uu_unexpand::uumain,
        "shuf" => uu_shuf::uumain,
        "numfmt" => uu_numfmt::uumain,
        "split" => uu_split::uumain,
        "csplit" => uu_csplit::uumain,
        "factor" => uu_factor::uumain,
        "link" => uu_link::uumain,
        "unlink" => uu_unlink::uumain,
        "stdbuf" => system::stdbuf,
        "tsort" => uu_tsort::uumain,
        "fmt" => uu_fmt::uumain,
        "sum" => uu_sum::uumain,
        "tee" => uu_tee::uumain,
        "test" | "[" => uu_test::uumain,
        "truncate" => uu_truncate::uumain,
        "grep" | "egrep" | "fgrep" => grep_main,
        "rev" => grep::rev,
        "find" => find::find,
        "sed" => sed::main,
        "diff" => diff::main,
        "awk" | "gawk" | "mawk" | "nawk" => awk::main,
        "tree" => tree::main,
        "patch" => patch::main,
        "install" => files::install,
        "envsubst" => system::envsubst,
        "xargs" => find::xargs,
        "env" => env,
        "printenv" => printenv,
        "true" => |_| 0,
        "false" => |_| 1,
        "yes" => yes,
        "sudo" => term::sudo,
        "tput" => term::tput,
        "clear" => term::clear,
        "stty" => term::stty,
        "locale" => system::locale,
        "sha224sum" => uu_sha224sum::uumain,
        "sha384sum" => uu_sha384sum::uumain,
        "basenc" => uu_basenc::uumain,
        _ => return None,
    })
}

fn main() {
    guest_support::start();
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let mut name = base_name(args.first());
    if name == "coreutils" {
        args.remove(0);
        name = base_name(args.first());
    }
    let code = match applet(&name) {
        Some(main) => main(args.into_iter()),
        None => {
            eprintln!("coreutils: {name}: no such applet");
            127
        }
    };
    guest_support::exit(code);
}

fn base_name(arg: Option<&OsString>) -> String {
    let s = arg
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_default();
    s.rsplit('/').next().unwrap_or_default().to_string()
}

/// `grep`, and `egrep`/`fgrep` as `grep -E`/`grep -F`.
fn grep_main(args: std::vec::IntoIter<OsString>) -> i32 {
    let mut args: Vec<OsString> = args.collect();
    let name = base_name(args.first());
    match name.as_str() {
        "egrep" => args.insert(1, "-E".into()),
        "fgrep" => args.insert(1, "-F".into()),
        _ => {}
    }
    grep::main(args.into_iter())
}

/// `yes [STRING]...`: repeats its arguments (or `y`) until the reader goes away.
fn yes(args: std::vec::IntoIter<OsString>) -> i32 {
    let words: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let line = if words.is_empty() {
        "y".to_string()
    } else {
        words.join(" ")
    } + "\n";
    let block = line.repeat((8192 / line.len()).max(1));
    let mut out = std::io::stdout().lock();
    loop {
        if let Err(e) = out.write_all(block.as_bytes()) {
            // Like a process killed by SIGPIPE.
            return if e.kind() == ErrorKind::BrokenPipe {
                141
            } else {
                1
            };
        }
    }
}

/// `env [-i] [-u NAME]... [NAME=VALUE]... [COMMAND [ARG]...]`.
fn env(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut vars: Vec<(String, String)> = std::env::vars().collect();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-i" | "--ignore-environment" | "-" => vars.clear(),
            "-u" | "--unset" => {
                i += 1;
                let Some(name) = args.get(i) else {
                    eprintln!("env: option requires an argument -- 'u'");
                    return 125;
                };
                vars.retain(|(k, _)| k != name);
            }
            "-0" | "--null" => {}
            "--" => {
                i += 1;
                break;
            }
            a if a.starts_with('-') && a.len() > 1 => {
                eprintln!("env: invalid option -- '{}'", &a[1..]);
                return 125;
            }
            _ => break,
        }
        i += 1;
    }
    while let Some((k, v)) = args.get(i).and_then(|a| a.split_once('=')) {
        vars.retain(|(key, _)| key != k);
        vars.push((k.to_string(), v.to_string()));
        i += 1;
    }
    if i >= args.len() {
        let mut out = std::io::stdout().lock();
        for (k, v) in vars {
            if writeln!(out, "{k}={v}").is_err() {
                return 1;
            }
        }
        return 0;
    }
    run_command(
        &args[i..],
        vars,
        guest_support::process::Stdio::Inherit,
        "env",
    )
}

/// Runs a program in the sandbox with this process's stdout and stderr, exactly `vars` as
/// its environment and `stdin` as its input; returns its status (127 not found, 126 cannot
/// run, with `who`'s message).
pub fn run_command(
    argv: &[String],
    vars: Vec<(String, String)>,
    stdin: guest_support::process::Stdio,
    who: &str,
) -> i32 {
    use guest_support::process::{self, Error, Stdio};
    match guest_support::spawn(argv.to_vec(), vars, stdin, Stdio::Inherit, Stdio::Inherit) {
        Ok(pid) => process::wait(pid),
        Err(Error::NotFound(_)) => {
            eprintln!("{who}: '{}': No such file or directory", argv[0]);
            127
        }
        Err(Error::Limit(m) | Error::Io(m)) => {
            eprintln!("{who}: {m}");
            126
        }
        Err(Error::BadHandle) => 126,
    }
}

/// `printenv [NAME]...`.
fn printenv(args: std::vec::IntoIter<OsString>) -> i32 {
    let names: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if names.is_empty() {
        for (k, v) in std::env::vars() {
            println!("{k}={v}");
        }
        return 0;
    }
    let mut code = 0;
    for n in names {
        match std::env::var(&n) {
            Ok(v) => println!("{v}"),
            Err(_) => code = 1,
        }
    }
    code
}

/// Seconds since the epoch as UTC (year, month, day, hour, minute, second).
pub fn civil(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let (y, mo, d, h, mi, s, _) = guest_support::civil_time(secs);
    (y, mo as i64, d as i64, h as i64, mi as i64, s as i64)
}
