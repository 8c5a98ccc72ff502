//! File applets that need what WASI lacks (permission bits, killing a child) or that uutils
//! gets wrong on WASI: `chmod`, `cp`, `stat`, `du`, `cmp`, `timeout`, `mktemp`. Options,
//! output and messages follow GNU coreutils / diffutils.

use std::ffi::OsString;
use std::fs::Metadata;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use guest_support::{file_mode, set_file_mode};

use crate::own::reason;

fn strings(args: std::vec::IntoIter<OsString>) -> Vec<String> {
    args.skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Splits clustered short options (`-rf`) and keeps long ones; `--` ends options.
/// `with_value` lists the short options that take a value.
fn parse_opts(args: Vec<String>, with_value: &str) -> (Vec<(String, Option<String>)>, Vec<String>) {
    let mut opts = Vec::new();
    let mut operands = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            operands.extend(args[i + 1..].iter().cloned());
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            match long.split_once('=') {
                Some((k, v)) => opts.push((format!("--{k}"), Some(v.to_string()))),
                None => opts.push((a.clone(), None)),
            }
        } else if a.starts_with('-') && a.len() > 1 {
            let chars: Vec<char> = a[1..].chars().collect();
            for (j, c) in chars.iter().enumerate() {
                if with_value.contains(*c) {
                    let rest: String = chars[j + 1..].iter().collect();
                    let v = if rest.is_empty() {
                        i += 1;
                        args.get(i).cloned()
                    } else {
                        Some(rest)
                    };
                    opts.push((format!("-{c}"), v));
                    break;
                }
                opts.push((format!("-{c}"), None));
            }
        } else {
            operands.push(a.clone());
        }
        i += 1;
    }
    (opts, operands)
}

fn has(opts: &[(String, Option<String>)], names: &[&str]) -> bool {
    opts.iter().any(|(k, _)| names.contains(&k.as_str()))
}

fn value<'a>(opts: &'a [(String, Option<String>)], names: &[&str]) -> Option<&'a str> {
    opts.iter()
        .rev()
        .find(|(k, _)| names.contains(&k.as_str()))
        .and_then(|(_, v)| v.as_deref())
}

// -- modes ---------------------------------------------------------------------------

pub use guest_support::cli::mode_string;

/// Applies a `chmod` mode (octal, or symbolic clauses like `u+x,go-w`) to `old`.
fn apply_mode(spec: &str, old: u32, is_dir: bool) -> Option<u32> {
    if !spec.is_empty() && spec.chars().all(|c| c.is_digit(8)) {
        let v = u32::from_str_radix(spec, 8).ok()?;
        if v > 0o7777 {
            return None;
        }
        // Directories keep set-id bits unless the mode names them (GNU).
        return Some(if is_dir && spec.len() <= 3 {
            v | (old & 0o6000)
        } else {
            v
        });
    }
    let umask = 0o022;
    let mut mode = old;
    for clause in spec.split(',') {
        let mut chars = clause.chars().peekable();
        let mut who = 0u32;
        while let Some(&c) = chars.peek() {
            match c {
                'u' => who |= 0o4700,
                'g' => who |= 0o2070,
                'o' => who |= 0o1007,
                'a' => who |= 0o7777,
                _ => break,
            }
            chars.next();
        }
        let masked = who == 0;
        if who == 0 {
            who = 0o7777;
        }
        let mut any_op = false;
        while let Some(op) = chars.next() {
            if !matches!(op, '+' | '-' | '=') {
                return None;
            }
            any_op = true;
            let mut perm = 0u32;
            while let Some(&c) = chars.peek() {
                if matches!(c, '+' | '-' | '=') {
                    break;
                }
                perm |= match c {
                    'r' => 0o444,
                    'w' => 0o222,
                    'x' => 0o111,
                    'X' if is_dir || mode & 0o111 != 0 => 0o111,
                    'X' => 0,
                    's' => 0o6000,
                    't' => 0o1000,
                    'u' => {
                        let u = (mode >> 6) & 7;
                        u | (u << 3) | (u << 6)
                    }
                    'g' => {
                        let g = (mode >> 3) & 7;
                        g | (g << 3) | (g << 6)
                    }
                    'o' => {
                        let o = mode & 7;
                        o | (o << 3) | (o << 6)
                    }
                    _ => return None,
                };
                chars.next();
            }
            let mut bits = perm & who;
            if masked {
                bits &= !umask;
            }
            match op {
                '+' => mode |= bits,
                '-' => mode &= !bits,
                _ => {
                    let clear = if masked { 0o7777 } else { who };
                    mode = (mode & !(clear & 0o7777 & !(if is_dir { 0o6000 } else { 0 }))) | bits;
                }
            }
        }
        if !any_op {
            return None;
        }
    }
    Some(mode)
}

/// `chmod [-R] [-v|-c] [-f] [--reference=RFILE] MODE[,MODE]... FILE...`.
pub fn chmod(args: std::vec::IntoIter<OsString>) -> i32 {
    // Modes like `-x` look like options: take them as the mode when no mode was given.
    let raw = strings(args);
    let mut opts: Vec<String> = Vec::new();
    let mut rest: Vec<String> = Vec::new();
    let mut mode: Option<String> = None;
    let mut only_operands = false;
    for a in raw {
        if only_operands {
            rest.push(a);
        } else if a == "--" {
            only_operands = true;
        } else if a.starts_with("--")
            || (a.starts_with('-') && a.len() > 1 && a[1..].chars().all(|c| "Rvcf".contains(c)))
        {
            opts.push(a);
        } else if mode.is_none() && !opts.iter().any(|o| o.starts_with("--reference")) {
            mode = Some(a);
        } else {
            rest.push(a);
        }
    }
    let flag = |c: char, long: &str| {
        opts.iter()
            .any(|o| o == long || (!o.starts_with("--") && o.contains(c)))
    };
    let recursive = flag('R', "--recursive");
    let verbose = flag('v', "--verbose");
    let changes = flag('c', "--changes");
    let quiet = flag('f', "--silent") || opts.iter().any(|o| o == "--quiet");
    let reference = opts
        .iter()
        .find_map(|o| o.strip_prefix("--reference=").map(String::from));
    let mode_spec = match (&reference, mode) {
        (Some(r), _) => match file_mode(r) {
            Some(m) => format!("{m:o}"),
            None => {
                eprintln!("chmod: failed to get attributes of '{r}': No such file or directory");
                return 1;
            }
        },
        (None, Some(m)) => m,
        (None, None) => {
            eprintln!("chmod: missing operand\nTry 'chmod --help' for more information.");
            return 1;
        }
    };
    if rest.is_empty() {
        eprintln!(
            "chmod: missing operand after '{mode_spec}'\nTry 'chmod --help' for more information."
        );
        return 1;
    }
    if apply_mode(&mode_spec, 0o644, false).is_none() {
        eprintln!("chmod: invalid mode: '{mode_spec}'\nTry 'chmod --help' for more information.");
        return 1;
    }
    let mut status = 0;
    let mut stack: Vec<String> = rest.into_iter().rev().collect();
    while let Some(f) = stack.pop() {
        let meta = match std::fs::metadata(&f) {
            Ok(m) => m,
            Err(e) => {
                if !quiet {
                    eprintln!("chmod: cannot access '{f}': {}", reason(&e));
                }
                status = 1;
                continue;
            }
        };
        let old = file_mode(&f).unwrap_or(0o644);
        let new = apply_mode(&mode_spec, old, meta.is_dir()).unwrap_or(old);
        if new != old
            && let Err(msg) = set_file_mode(&f, new)
        {
            if !quiet {
                eprintln!(
                    "chmod: changing permissions of '{f}': {}",
                    msg.rsplit(": ").next().unwrap_or(&msg)
                );
            }
            status = 1;
            continue;
        }
        if verbose || (changes && new != old) {
            let what = if new == old {
                "retained as"
            } else {
                "changed from"
            };
            if new == old {
                println!(
                    "mode of '{f}' {what} {new:04o} ({})",
                    &mode_string(new, '-')[1..]
                );
            } else {
                println!(
                    "mode of '{f}' {what} {old:04o} ({}) to {new:04o} ({})",
                    &mode_string(old, '-')[1..],
                    &mode_string(new, '-')[1..]
                );
            }
        }
        if recursive
            && meta.is_dir()
            && !std::fs::symlink_metadata(&f).is_ok_and(|m| m.file_type().is_symlink())
            && let Ok(rd) = std::fs::read_dir(&f)
        {
            let mut names: Vec<String> = rd
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            for n in names.into_iter().rev() {
                stack.push(format!("{}/{n}", f.trim_end_matches('/')));
            }
        }
    }
    status
}

// -- cp ------------------------------------------------------------------------------

pub(crate) struct CpOpts {
    pub(crate) recursive: bool,
    pub(crate) preserve: bool,
    pub(crate) no_clobber: bool,
    pub(crate) verbose: bool,
    pub(crate) update: bool,
    pub(crate) no_deref: bool,
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

fn copy_times(from: &Metadata, to: &Path) {
    if let (Ok(m), Ok(f)) = (
        from.modified(),
        std::fs::File::options().write(true).open(to),
    ) {
        let mut times = std::fs::FileTimes::new().set_modified(m);
        if let Ok(a) = from.accessed() {
            times = times.set_accessed(a);
        }
        let _ = f.set_times(times);
    }
}

pub(crate) fn cp_one(src: &str, dst: &str, o: &CpOpts) -> bool {
    let smeta = if o.no_deref {
        std::fs::symlink_metadata(src)
    } else {
        std::fs::metadata(src)
    };
    let smeta = match smeta {
        Ok(m) => m,
        Err(e) => {
            eprintln!("cp: cannot stat '{src}': {}", reason(&e));
            return false;
        }
    };
    if smeta.file_type().is_symlink() {
        let target = match std::fs::read_link(src) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("cp: cannot read symbolic link '{src}': {}", reason(&e));
                return false;
            }
        };
        let _ = std::fs::remove_file(dst);
        if let Err(e) = uu_ln::symlink(&target, dst) {
            eprintln!("cp: cannot create symbolic link '{dst}': {}", reason(&e));
            return false;
        }
        if o.verbose {
            println!("'{src}' -> '{dst}'");
        }
        return true;
    }
    if smeta.is_dir() {
        if !o.recursive {
            eprintln!("cp: -r not specified; omitting directory '{src}'");
            return false;
        }
        let canon_src = Path::new(src).canonicalize().ok();
        let dst_parent = Path::new(dst).parent().and_then(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".").canonicalize().ok()
            } else {
                p.canonicalize().ok()
            }
        });
        if let (Some(s), Some(p)) = (&canon_src, &dst_parent)
            && p.starts_with(s)
        {
            eprintln!("cp: cannot copy a directory, '{src}', into itself, '{dst}'");
            return false;
        }
        match std::fs::metadata(dst) {
            Ok(m) if !m.is_dir() => {
                eprintln!("cp: cannot overwrite non-directory '{dst}' with directory '{src}'");
                return false;
            }
            Ok(_) => {}
            Err(_) => {
                if let Err(e) = std::fs::create_dir(dst) {
                    eprintln!("cp: cannot create directory '{dst}': {}", reason(&e));
                    return false;
                }
                if o.verbose {
                    println!("'{src}' -> '{dst}'");
                }
            }
        }
        let mut ok = true;
        let mut names: Vec<String> = match std::fs::read_dir(src) {
            Ok(rd) => rd
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(e) => {
                eprintln!("cp: cannot access '{src}': {}", reason(&e));
                return false;
            }
        };
        names.sort();
        let sub = CpOpts {
            no_deref: o.no_deref || o.recursive,
            ..*o
        };
        for n in names {
            let s = format!("{}/{n}", src.trim_end_matches('/'));
            let d = format!("{}/{n}", dst.trim_end_matches('/'));
            ok &= cp_one(&s, &d, &sub);
        }
        if let Some(mode) = file_mode(src) {
            let _ = set_file_mode(dst, if o.preserve { mode } else { mode & 0o777 });
        }
        if o.preserve {
            copy_times(&smeta, Path::new(dst));
        }
        return ok;
    }
    if let Ok(dmeta) = std::fs::metadata(dst) {
        if same_file(Path::new(src), Path::new(dst)) {
            eprintln!("cp: '{src}' and '{dst}' are the same file");
            return false;
        }
        if dmeta.is_dir() {
            eprintln!("cp: cannot overwrite directory '{dst}' with non-directory");
            return false;
        }
        if o.no_clobber {
            return true;
        }
        if o.update
            && let (Ok(a), Ok(b)) = (smeta.modified(), dmeta.modified())
            && a <= b
        {
            return true;
        }
    }
    if let Err(e) = copy_contents(src, dst, &smeta) {
        // A file named with a trailing slash is taken for a directory that is not there:
        // GNU cp says so rather than the kernel's EISDIR.
        let msg = if dst.ends_with('/') && std::fs::metadata(dst).is_err() {
            "Not a directory".to_string()
        } else {
            reason(&e)
        };
        if std::fs::metadata(src).is_err() {
            eprintln!("cp: cannot open '{src}' for reading: {msg}");
        } else {
            eprintln!("cp: cannot create regular file '{dst}': {msg}");
        }
        return false;
    }
    if let Some(mode) = file_mode(src) {
        let _ = set_file_mode(dst, mode & if o.preserve { 0o7777 } else { 0o777 });
    }
    if o.preserve {
        copy_times(&smeta, Path::new(dst));
    }
    if o.verbose {
        println!("'{src}' -> '{dst}'");
    }
    true
}

/// Copies a file's contents; a device (`/dev/null`) is read to its end like a file.
fn copy_contents(src: &str, dst: &str, smeta: &Metadata) -> std::io::Result<u64> {
    if smeta.is_file() {
        return std::fs::copy(src, dst);
    }
    let mut input = std::fs::File::open(src)?;
    let mut output = std::fs::File::create(dst)?;
    std::io::copy(&mut input, &mut output)
}

/// `cp [-rRapfinuvPLdT] [-t DIR] SOURCE... DEST`.
pub fn cp(args: std::vec::IntoIter<OsString>) -> i32 {
    let (opts, mut operands) = parse_opts(strings(args), "tS");
    let archive = has(&opts, &["-a", "--archive"]);
    let o = CpOpts {
        recursive: archive || has(&opts, &["-r", "-R", "--recursive"]),
        preserve: archive || has(&opts, &["-p", "--preserve"]),
        no_clobber: has(&opts, &["-n", "--no-clobber"]),
        verbose: has(&opts, &["-v", "--verbose"]),
        update: has(&opts, &["-u", "--update"]),
        no_deref: archive || has(&opts, &["-P", "-d", "--no-dereference"]),
    };
    let no_target_dir = has(&opts, &["-T", "--no-target-directory"]);
    let target = value(&opts, &["-t", "--target-directory"]).map(String::from);
    if let Some((k, _)) = opts.iter().find(|(k, _)| {
        !matches!(
            k.as_str(),
            "-a" | "--archive"
                | "-r"
                | "-R"
                | "--recursive"
                | "-p"
                | "--preserve"
                | "-n"
                | "--no-clobber"
                | "-v"
                | "--verbose"
                | "-u"
                | "--update"
                | "-P"
                | "-d"
                | "--no-dereference"
                | "-T"
                | "--no-target-directory"
                | "-t"
                | "--target-directory"
                | "-f"
                | "--force"
                | "-i"
                | "--interactive"
                | "-L"
                | "--dereference"
                | "-H"
                | "-S"
                | "--suffix"
                | "-b"
                | "--backup"
        )
    }) {
        eprintln!(
            "cp: invalid option -- '{}'\nTry 'cp --help' for more information.",
            k.trim_start_matches('-')
        );
        return 1;
    }
    let dest = match target {
        Some(t) => t,
        None => match operands.pop() {
            Some(d) if !operands.is_empty() => d,
            Some(d) => {
                eprintln!(
                    "cp: missing destination file operand after '{d}'\nTry 'cp --help' for more information."
                );
                return 1;
            }
            None => {
                eprintln!("cp: missing file operand\nTry 'cp --help' for more information.");
                return 1;
            }
        },
    };
    let dest_is_dir = !no_target_dir && std::fs::metadata(&dest).is_ok_and(|m| m.is_dir());
    if operands.len() > 1 && !dest_is_dir {
        eprintln!("cp: target '{dest}' is not a directory");
        return 1;
    }
    let mut ok = true;
    for src in &operands {
        let d = if dest_is_dir {
            let base = Path::new(src.trim_end_matches('/'))
                .file_name()
                .map(|b| b.to_string_lossy().into_owned())
                .unwrap_or_else(|| src.clone());
            format!("{}/{base}", dest.trim_end_matches('/'))
        } else {
            dest.clone()
        };
        ok &= cp_one(src, &d, &o);
    }
    if ok { 0 } else { 1 }
}

// -- stat ----------------------------------------------------------------------------

fn kind_name(m: &Metadata, path: &str) -> &'static str {
    let t = m.file_type();
    if t.is_symlink() {
        "symbolic link"
    } else if t.is_dir() {
        "directory"
    } else if t.is_file() && m.len() == 0 {
        "regular empty file"
    } else if t.is_file() {
        "regular file"
    } else {
        match kind_char(m, path) {
            'c' => "character special file",
            'b' => "block special file",
            'p' => "fifo",
            's' => "socket",
            _ => "weird file",
        }
    }
}

/// The `ls -l` type character of the file at `path` whose metadata (not following a final
/// symlink) is `m`: `l`, `d`, `-`, or `c`, `b`, `p`, `s` for special files.
pub fn kind_char(m: &Metadata, path: &str) -> char {
    let t = m.file_type();
    if t.is_symlink() {
        'l'
    } else if t.is_dir() {
        'd'
    } else if t.is_file() {
        '-'
    } else {
        guest_support::special_kind(path, false).unwrap_or('-')
    }
}

fn epoch(t: std::io::Result<SystemTime>) -> (i64, u32) {
    match t.ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()) {
        Some(d) => (d.as_secs() as i64, d.subsec_nanos()),
        None => (0, 0),
    }
}

fn blocks_of(m: &Metadata) -> u64 {
    if m.file_type().is_symlink() {
        0
    } else if m.is_dir() {
        m.len().div_ceil(4096).max(1) * 8
    } else {
        m.len().div_ceil(4096) * 8
    }
}

fn stat_format(fmt: &str, path: &str, m: &Metadata) -> String {
    let mode = if m.file_type().is_symlink() {
        0o777
    } else {
        file_mode(path).unwrap_or(0o644)
    };
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        // Flags and width, as printf.
        let mut spec = String::new();
        while let Some(&n) = chars.peek() {
            if "-+ #0123456789.".contains(n) {
                spec.push(n);
                chars.next();
            } else {
                break;
            }
        }
        let Some(conv) = chars.next() else {
            out.push('%');
            break;
        };
        let v: String = match conv {
            '%' => "%".into(),
            'n' => path.into(),
            'N' => {
                if m.file_type().is_symlink() {
                    let t = std::fs::read_link(path)
                        .map(|t| t.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    format!("'{path}' -> '{t}'")
                } else {
                    format!("'{path}'")
                }
            }
            's' => m.len().to_string(),
            'F' => kind_name(m, path).into(),
            'a' => format!("{mode:o}"),
            'A' => mode_string(mode, kind_char(m, path)),
            'f' => {
                let t = if m.is_dir() {
                    0o040000
                } else if m.file_type().is_symlink() {
                    0o120000
                } else {
                    0o100000
                };
                format!("{:x}", t | mode)
            }
            'u' => crate::system::file_owner().1.to_string(),
            'g' => crate::system::file_owner().3.to_string(),
            'U' => crate::system::file_owner().0.clone(),
            'G' => crate::system::file_owner().2.clone(),
            'h' => (if m.is_dir() { 2 } else { 1 }).to_string(),
            'i' => "0".into(),
            'b' => blocks_of(m).to_string(),
            'B' => "512".into(),
            'o' => "4096".into(),
            'd' | 'D' | 't' | 'T' => "0".into(),
            'm' => "/".into(),
            'y' => crate::diff::stamp(m.modified().ok()),
            'Y' => epoch(m.modified()).0.to_string(),
            'x' => crate::diff::stamp(m.accessed().ok()),
            'X' => epoch(m.accessed()).0.to_string(),
            'z' => crate::diff::stamp(m.modified().ok()),
            'Z' => epoch(m.modified()).0.to_string(),
            'w' => match m.created() {
                Ok(t) => crate::diff::stamp(Some(t)),
                Err(_) => "-".into(),
            },
            'W' => epoch(m.created()).0.to_string(),
            other => format!("?{other}"),
        };
        let width: usize = spec
            .trim_start_matches(['-', '+', ' ', '#', '0'])
            .split('.')
            .next()
            .and_then(|w| w.parse().ok())
            .unwrap_or(0);
        if spec.starts_with('-') {
            out.push_str(&format!("{v:<width$}"));
        } else if spec.starts_with('0') && v.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("{v:0>width$}"));
        } else {
            out.push_str(&format!("{v:>width$}"));
        }
    }
    out
}

fn printf_escapes(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// `stat [-L] [-c FORMAT | --printf=FORMAT | -t] FILE...`.
pub fn stat(args: std::vec::IntoIter<OsString>) -> i32 {
    // `--format FMT` and `--printf FMT` take the next argument too.
    let mut raw = strings(args);
    for i in 0..raw.len() {
        if (raw[i] == "--printf" || raw[i] == "--format") && i + 1 < raw.len() {
            let v = raw.remove(i + 1);
            raw[i] = format!("{}={v}", raw[i]);
            break;
        }
    }
    let (opts, files) = parse_opts(raw, "c");
    let follow = has(&opts, &["-L", "--dereference"]);
    let format = value(&opts, &["-c", "--format"]).map(|f| f.to_string() + "\n");
    let printf = value(&opts, &["--printf"]).map(printf_escapes);
    let terse = has(&opts, &["-t", "--terse"]);
    if files.is_empty() {
        eprintln!("stat: missing operand\nTry 'stat --help' for more information.");
        return 1;
    }
    let mut status = 0;
    let mut out = std::io::stdout().lock();
    for f in &files {
        let meta = if follow {
            std::fs::metadata(f)
        } else {
            std::fs::symlink_metadata(f)
        };
        let m = match meta {
            Ok(m) => m,
            Err(e) => {
                eprintln!("stat: cannot statx '{f}': {}", reason(&e));
                status = 1;
                continue;
            }
        };
        let text = if let Some(p) = &printf {
            stat_format(p, f, &m)
        } else if let Some(c) = &format {
            stat_format(c, f, &m)
        } else if terse {
            stat_format("%n %s %b %f %u %g %D %i %h %t %T %X %Y %Z %W %o\n", f, &m)
        } else {
            let name = if m.file_type().is_symlink() {
                "%N"
            } else {
                "%n"
            };
            stat_format(
                &format!(
                    "  File: {name}\n  Size: %-10s\tBlocks: %-10b IO Block: %-6o %F\nDevice: 0h/0d\tInode: %-11i Links: %h\nAccess: (%04a/%A)  Uid: (    0/    root)   Gid: (    0/    root)\nAccess: %x\nModify: %y\nChange: %z\n Birth: %w\n"
                ),
                f,
                &m,
            )
        };
        if out.write_all(text.as_bytes()).is_err() {
            return 1;
        }
    }
    status
}

// -- du ------------------------------------------------------------------------------

struct DuOpts {
    apparent: bool,
    block: u64,
    human: bool,
    all: bool,
    summarize: bool,
    max_depth: Option<usize>,
}

fn du_size(m: &Metadata, o: &DuOpts) -> u64 {
    if o.apparent {
        if m.file_type().is_symlink() {
            std::fs::read_link("").map(|_| 0).unwrap_or(0)
        } else {
            m.len()
        }
    } else {
        blocks_of(m) * 512
    }
}

fn human(n: u64) -> String {
    const UNITS: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    if n < 1024 {
        return n.to_string();
    }
    let mut v = n as f64;
    let mut unit = 0;
    v /= 1024.0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    // GNU rounds up, with one decimal below 10.
    if v < 10.0 {
        let r = (v * 10.0).ceil() / 10.0;
        if r >= 10.0 {
            format!("{}{}", r.ceil() as u64, UNITS[unit])
        } else {
            format!("{r:.1}{}", UNITS[unit])
        }
    } else {
        format!("{}{}", v.ceil() as u64, UNITS[unit])
    }
}

fn du_show(n: u64, o: &DuOpts) -> String {
    if o.human {
        human(n)
    } else {
        n.div_ceil(o.block).to_string()
    }
}

fn du_walk(path: &str, depth: usize, o: &DuOpts, out: &mut Vec<String>, ok: &mut bool) -> u64 {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("du: cannot access '{path}': {}", reason(&e));
            *ok = false;
            return 0;
        }
    };
    let mut total = du_size(&m, o);
    let shown = |d: usize| !o.summarize && o.max_depth.is_none_or(|max| d <= max);
    if m.is_dir() {
        let mut names: Vec<String> = match std::fs::read_dir(path) {
            Ok(rd) => rd
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(e) => {
                eprintln!("du: cannot read directory '{path}': {}", reason(&e));
                *ok = false;
                Vec::new()
            }
        };
        names.sort();
        for n in names {
            let child = format!("{}/{n}", path.trim_end_matches('/'));
            total += du_walk(&child, depth + 1, o, out, ok);
        }
        if depth == 0 || shown(depth) {
            out.push(format!("{}\t{path}", du_show(total, o)));
        }
    } else if depth == 0 || (o.all && shown(depth)) {
        out.push(format!("{}\t{path}", du_show(total, o)));
    }
    total
}

/// `du [-abhkmsc] [-d N] [--apparent-size] [FILE]...`.
pub fn du(args: std::vec::IntoIter<OsString>) -> i32 {
    let (opts, mut files) = parse_opts(strings(args), "dB");
    let bytes = has(&opts, &["-b", "--bytes"]);
    let mut o = DuOpts {
        apparent: bytes || has(&opts, &["--apparent-size"]),
        block: 1024,
        human: has(&opts, &["-h", "--human-readable"]),
        all: has(&opts, &["-a", "--all"]),
        summarize: has(&opts, &["-s", "--summarize"]),
        max_depth: value(&opts, &["-d", "--max-depth"]).and_then(|v| v.parse().ok()),
    };
    if bytes {
        o.block = 1;
    }
    if has(&opts, &["-m"]) {
        o.block = 1 << 20;
    }
    if let Some(b) = value(&opts, &["-B", "--block-size"]) {
        o.block = match b.to_ascii_uppercase().as_str() {
            "K" | "KB" | "1K" => 1024,
            "M" | "MB" | "1M" => 1 << 20,
            "G" | "GB" | "1G" => 1 << 30,
            n => n.parse().unwrap_or(1024),
        };
    }
    let total = has(&opts, &["-c", "--total"]);
    if files.is_empty() {
        files.push(".".into());
    }
    let mut ok = true;
    let mut grand = 0;
    let mut lines = Vec::new();
    for f in &files {
        grand += du_walk(f, 0, &o, &mut lines, &mut ok);
    }
    if total {
        lines.push(format!("{}\ttotal", du_show(grand, &o)));
    }
    let mut out = std::io::stdout().lock();
    for l in lines {
        if writeln!(out, "{l}").is_err() {
            return 1;
        }
    }
    if ok { 0 } else { 1 }
}

// -- cmp -----------------------------------------------------------------------------

/// `cmp [-s] [-l] [-n LIMIT] FILE1 [FILE2]`.
pub fn cmp(args: std::vec::IntoIter<OsString>) -> i32 {
    let (opts, files) = parse_opts(strings(args), "ni");
    let silent = has(&opts, &["-s", "--quiet", "--silent"]);
    let list = has(&opts, &["-l", "--verbose"]);
    let limit: Option<usize> = value(&opts, &["-n", "--bytes"]).and_then(|v| v.parse().ok());
    let (a, b) = match files.as_slice() {
        [a] => (a.clone(), "-".to_string()),
        [a, b] => (a.clone(), b.clone()),
        [] => {
            eprintln!(
                "cmp: missing operand after 'cmp'\ncmp: Try 'cmp --help' for more information."
            );
            return 2;
        }
        _ => {
            eprintln!("cmp: invalid --ignore-initial value '{}'", files[2]);
            return 2;
        }
    };
    let read = |f: &str| -> Result<Vec<u8>, String> {
        let mut v = Vec::new();
        let r = if f == "-" {
            std::io::stdin().read_to_end(&mut v)
        } else {
            std::fs::File::open(f).and_then(|mut h| h.read_to_end(&mut v))
        };
        r.map(|_| v)
            .map_err(|e| format!("cmp: {f}: {}", reason(&e)))
    };
    let (x, y) = match (read(&a), read(&b)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let n = limit.unwrap_or(usize::MAX);
    let (x, y) = (&x[..x.len().min(n)], &y[..y.len().min(n)]);
    let mut line = 1;
    let mut differ = false;
    let mut out = std::io::stdout().lock();
    for (i, (p, q)) in x.iter().zip(y.iter()).enumerate() {
        if p != q {
            differ = true;
            if silent {
                return 1;
            }
            if list {
                let width = x.len().max(y.len()).to_string().len();
                let _ = writeln!(out, "{:>width$} {:3o} {:3o}", i + 1, p, q);
                continue;
            }
            // GNU cmp's words in the C locale.
            let _ = writeln!(out, "{a} {b} differ: char {}, line {line}", i + 1);
            return 1;
        }
        if *p == b'\n' {
            line += 1;
        }
    }
    if x.len() != y.len() {
        if !silent {
            let _ = out.flush();
            let (short, len) = if x.len() < y.len() {
                (&a, x.len())
            } else {
                (&b, y.len())
            };
            if len == 0 {
                eprintln!("cmp: EOF on {short} which is empty");
            } else if list {
                eprintln!("cmp: EOF on {short} after byte {len}");
            } else {
                let lines = x[..len].iter().filter(|&&c| c == b'\n').count();
                let col = len
                    - x[..len]
                        .iter()
                        .rposition(|&c| c == b'\n')
                        .map_or(0, |p| p + 1);
                if col == 0 {
                    eprintln!("cmp: EOF on {short} after byte {len}, line {lines}");
                } else {
                    eprintln!(
                        "cmp: EOF on {short} after byte {len}, in line {}",
                        lines + 1
                    );
                }
            }
        }
        return 1;
    }
    if differ { 1 } else { 0 }
}

// -- timeout -------------------------------------------------------------------------

fn parse_duration(s: &str) -> Option<Duration> {
    let (num, mult) = match s.chars().last()? {
        's' => (&s[..s.len() - 1], 1.0),
        'm' => (&s[..s.len() - 1], 60.0),
        'h' => (&s[..s.len() - 1], 3600.0),
        'd' => (&s[..s.len() - 1], 86400.0),
        _ => (s, 1.0),
    };
    let v: f64 = num.parse().ok()?;
    if v.is_nan() || v < 0.0 || !v.is_finite() {
        return None;
    }
    Some(Duration::from_secs_f64(v * mult))
}

fn signal_number(s: &str) -> Option<u8> {
    if let Ok(n) = s.parse::<u8>() {
        return Some(n);
    }
    let name = s.trim_start_matches("SIG").to_ascii_uppercase();
    Some(match name.as_str() {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "ALRM" => 14,
        "TERM" => 15,
        _ => return None,
    })
}

/// `timeout [-s SIGNAL] [-k DURATION] [--preserve-status] [-v] DURATION COMMAND [ARG]...`.
pub fn timeout(args: std::vec::IntoIter<OsString>) -> i32 {
    use guest_support::process::{self, Error, Stdio};
    let args = strings(args);
    let mut i = 0;
    let mut signal = 15u8;
    let mut preserve = false;
    let mut verbose = false;
    while i < args.len() && args[i].starts_with('-') && args[i].len() > 1 {
        let a = args[i].as_str();
        let (name, inline) = match a.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (a, None),
        };
        let take = |i: &mut usize| -> Option<String> {
            if let Some(v) = &inline {
                return Some(v.clone());
            }
            if let Some(v) = name.strip_prefix("-s").or(name.strip_prefix("-k"))
                && !v.is_empty()
            {
                return Some(v.to_string());
            }
            *i += 1;
            args.get(*i).cloned()
        };
        match name {
            "--preserve-status" => preserve = true,
            "--foreground" => {}
            "-v" | "--verbose" => verbose = true,
            n if n.starts_with("-s") || n == "--signal" => {
                match take(&mut i).as_deref().and_then(signal_number) {
                    Some(s) => signal = s,
                    None => {
                        eprintln!("timeout: invalid signal");
                        return 125;
                    }
                }
            }
            n if n.starts_with("-k") || n == "--kill-after" => {
                let _ = take(&mut i);
            }
            "--" => {
                i += 1;
                break;
            }
            _ => {
                eprintln!(
                    "timeout: unrecognized option '{a}'\nTry 'timeout --help' for more information."
                );
                return 125;
            }
        }
        i += 1;
    }
    let Some(limit) = args.get(i) else {
        eprintln!("timeout: missing operand\nTry 'timeout --help' for more information.");
        return 125;
    };
    let Some(limit) = parse_duration(limit) else {
        eprintln!(
            "timeout: invalid time interval '{limit}'\nTry 'timeout --help' for more information."
        );
        return 125;
    };
    let argv = &args[i + 1..];
    if argv.is_empty() {
        eprintln!("timeout: missing operand\nTry 'timeout --help' for more information.");
        return 125;
    }
    let pid = match guest_support::spawn(
        argv.to_vec(),
        std::env::vars().collect(),
        Stdio::Inherit,
        Stdio::Inherit,
        Stdio::Inherit,
    ) {
        Ok(pid) => pid,
        Err(Error::NotFound(_)) => {
            eprintln!(
                "timeout: failed to run command '{}': No such file or directory",
                argv[0]
            );
            return 127;
        }
        Err(Error::Limit(m) | Error::Io(m)) => {
            eprintln!("timeout: failed to run command '{}': {m}", argv[0]);
            return 126;
        }
        Err(Error::BadHandle) => return 126,
    };
    // Zero means no limit, as in GNU.
    if limit.is_zero() {
        return process::wait(pid);
    }
    match process::wait_timeout(pid, limit.as_millis().max(1) as u64) {
        Some(status) => status,
        None => {
            if verbose {
                eprintln!("timeout: sending signal {signal} to command '{}'", argv[0]);
            }
            process::kill(pid, signal);
            let status = process::wait(pid);
            // KILL cannot be caught, so GNU reports it rather than 124.
            if preserve || signal == 9 { status } else { 124 }
        }
    }
}

// -- mktemp --------------------------------------------------------------------------

fn random_suffix(n: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut out = String::new();
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    let mut x = h.finish();
    for _ in 0..n {
        if x < CHARS.len() as u64 {
            h.write_u64(x);
            x = h.finish();
        }
        out.push(CHARS[(x % CHARS.len() as u64) as usize] as char);
        x /= CHARS.len() as u64;
    }
    out
}

/// `mktemp [-d] [-q] [-u] [-p DIR | --tmpdir[=DIR]] [-t] [--suffix=SUFF] [TEMPLATE]`. The
/// random part is the last run of `X`s; what follows it is the suffix (`XXXXXX.txt`), or
/// `--suffix` is added after the template.
pub fn mktemp(args: std::vec::IntoIter<OsString>) -> i32 {
    // `--suffix SUFF` as `--suffix=SUFF`.
    let mut joined: Vec<String> = Vec::new();
    let mut args = strings(args).into_iter();
    while let Some(a) = args.next() {
        if a == "--suffix" {
            joined.push(format!("--suffix={}", args.next().unwrap_or_default()));
        } else {
            joined.push(a);
        }
    }
    let (opts, operands) = parse_opts(joined, "p");
    let suffix_opt = value(&opts, &["--suffix"]).unwrap_or("").to_string();
    if suffix_opt.contains('/') {
        eprintln!("mktemp: invalid suffix '{suffix_opt}', contains directory separator");
        return 1;
    }
    let dir_mode = has(&opts, &["-d", "--directory"]);
    let quiet = has(&opts, &["-q", "--quiet"]);
    let dry = has(&opts, &["-u", "--dry-run"]);
    let tmpdir_flag = has(&opts, &["-t", "-p", "--tmpdir"]);
    let base = value(&opts, &["-p", "--tmpdir"])
        .map(String::from)
        .or_else(|| std::env::var("TMPDIR").ok().filter(|t| !t.is_empty()))
        .unwrap_or_else(|| "/tmp".into());
    if operands.len() > 1 {
        eprintln!("mktemp: too many templates");
        return 1;
    }
    let template = operands.first().cloned();
    let full = match &template {
        None => format!("{}/tmp.XXXXXXXXXX", base.trim_end_matches('/')),
        Some(t) if tmpdir_flag && t.starts_with('/') => {
            eprintln!("mktemp: invalid template, '{t}'; with --tmpdir, it may not be absolute");
            return 1;
        }
        Some(t) if tmpdir_flag => format!("{}/{t}", base.trim_end_matches('/')),
        Some(t) => t.clone(),
    };
    // The template's own suffix: what follows its last `X` in the last component.
    let last = full.rfind('/').map_or(0, |i| i + 1);
    let own_suffix_at = full[last..].rfind('X').map_or(full.len(), |i| last + i + 1);
    let (path, own_suffix) = full.split_at(own_suffix_at);
    if !suffix_opt.is_empty() && !own_suffix.is_empty() {
        eprintln!("mktemp: with --suffix, template '{full}' must end in X");
        return 1;
    }
    let suffix = format!("{own_suffix}{suffix_opt}");
    let xs = path.len() - path.trim_end_matches('X').len();
    if xs < 3 {
        if !quiet {
            eprintln!(
                "mktemp: too few X's in template '{}'",
                template.unwrap_or(full.clone())
            );
        }
        return 1;
    }
    let stem = &path[..path.len() - xs];
    for _ in 0..100 {
        let candidate = format!("{stem}{}{suffix}", random_suffix(xs));
        if dry {
            println!("{candidate}");
            return 0;
        }
        let made = if dir_mode {
            std::fs::create_dir(&candidate).map(|_| ())
        } else {
            std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(&candidate)
                .map(|_| ())
        };
        match made {
            Ok(()) => {
                let _ = set_file_mode(&candidate, if dir_mode { 0o700 } else { 0o600 });
                println!("{candidate}");
                return 0;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                if !quiet {
                    let what = if dir_mode { "directory" } else { "file" };
                    eprintln!(
                        "mktemp: failed to create {what} via template '{path}': {}",
                        reason(&e)
                    );
                }
                return 1;
            }
        }
    }
    1
}

/// `install`: copies files and sets their mode (0755 unless `-m`), or with `-d` makes
/// directories; `-D` makes the destination's missing parents; `-t DIR`; `-v`; `-o`/`-g`
/// are accepted (the sandbox has one user); `-s`, `-p`, `-C` are accepted.
pub fn install(args: std::vec::IntoIter<OsString>) -> i32 {
    let (opts, operands) = parse_opts(strings(args), "mogtS");
    let mode_spec = value(&opts, &["-m", "--mode"]).unwrap_or("755").to_string();
    let Some(mode) = apply_mode(&mode_spec, 0, false) else {
        eprintln!("install: invalid mode '{mode_spec}'");
        return 1;
    };
    let verbose = has(&opts, &["-v", "--verbose"]);
    let parents = has(&opts, &["-D"]);
    let target_dir = value(&opts, &["-t", "--target-directory"]).map(String::from);
    if let Some((k, _)) = opts.iter().find(|(k, _)| {
        !matches!(
            k.as_str(),
            "-m" | "--mode"
                | "-v"
                | "--verbose"
                | "-D"
                | "-d"
                | "--directory"
                | "-t"
                | "--target-directory"
                | "-o"
                | "--owner"
                | "-g"
                | "--group"
                | "-s"
                | "--strip"
                | "-p"
                | "--preserve-timestamps"
                | "-C"
                | "--compare"
                | "-c"
                | "-S"
                | "--suffix"
                | "-b"
                | "--backup"
        )
    }) {
        eprintln!("install: unrecognized option '{k}'\nTry 'install --help' for more information.");
        return 1;
    }
    if has(&opts, &["-d", "--directory"]) {
        if operands.is_empty() {
            eprintln!("install: missing operand\nTry 'install --help' for more information.");
            return 1;
        }
        let mut status = 0;
        for d in &operands {
            match std::fs::create_dir_all(d) {
                Ok(()) => {
                    let _ = set_file_mode(d, mode);
                    if verbose {
                        println!("install: creating directory '{d}'");
                    }
                }
                Err(e) => {
                    eprintln!("install: cannot create directory '{d}': {}", reason(&e));
                    status = 1;
                }
            }
        }
        return status;
    }
    let (sources, dest, into_dir): (Vec<String>, String, bool) = match (&target_dir, operands.len())
    {
        (Some(t), n) if n >= 1 => (operands.clone(), t.clone(), true),
        (None, n) if n >= 2 => {
            let dest = operands[n - 1].clone();
            let into = n > 2 || Path::new(&dest).is_dir();
            (operands[..n - 1].to_vec(), dest, into)
        }
        (None, 1) => {
            eprintln!(
                "install: missing destination file operand after '{}'\nTry 'install --help' for more information.",
                operands[0]
            );
            return 1;
        }
        _ => {
            eprintln!("install: missing file operand\nTry 'install --help' for more information.");
            return 1;
        }
    };
    if into_dir && parents {
        let _ = std::fs::create_dir_all(&dest);
    }
    if into_dir && !Path::new(&dest).is_dir() {
        eprintln!("install: target '{dest}' is not a directory");
        return 1;
    }
    let mut status = 0;
    for src in &sources {
        let to = if into_dir {
            let base = src.trim_end_matches('/').rsplit('/').next().unwrap_or(src);
            format!("{}/{base}", dest.trim_end_matches('/'))
        } else {
            dest.clone()
        };
        if Path::new(src).is_dir() {
            eprintln!("install: omitting directory '{src}'");
            status = 1;
            continue;
        }
        if parents
            && !into_dir
            && let Some(parent) = Path::new(&to).parent()
            && !parent.as_os_str().is_empty()
            && let Err(e) = std::fs::create_dir_all(parent)
        {
            eprintln!(
                "install: cannot create directory '{}': {}",
                parent.display(),
                reason(&e)
            );
            status = 1;
            continue;
        }
        // A new file replaces the old one (install removes the destination first).
        let _ = std::fs::remove_file(&to);
        match std::fs::copy(src, &to) {
            Ok(_) => {
                let _ = set_file_mode(&to, mode);
                if verbose {
                    println!("'{src}' -> '{to}'");
                }
            }
            Err(e) => {
                let which = if Path::new(src).exists() { &to } else { src };
                let verb = if which == src {
                    "cannot stat"
                } else {
                    "cannot create regular file"
                };
                eprintln!("install: {verb} '{which}': {}", reason(&e));
                status = 1;
            }
        }
    }
    status
}
