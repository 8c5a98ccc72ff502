//! Applets written for wasbox where the uutils versions fail on WASI: `mkdir` (absolute
//! paths with `-p`), `mv`, `chmod`, `realpath` and `tac`. Options and messages follow GNU
//! coreutils.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// The arguments after the program name, as text.
pub fn strings(args: std::vec::IntoIter<OsString>) -> Vec<String> {
    args.skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

pub use guest_support::cli::reason;

/// Splits `-abc` style flags from operands; `--` ends options.
fn flags_and_operands(
    args: Vec<String>,
    with_value: &[char],
) -> (Vec<(char, Option<String>)>, Vec<String>) {
    let mut flags = Vec::new();
    let mut operands = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if a == "--" {
            operands.extend(it.by_ref());
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, val) = match long.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (long.to_string(), None),
            };
            let c = match name.as_str() {
                "parents" => 'p',
                "verbose" => 'v',
                "mode" => 'm',
                "force" => 'f',
                "interactive" => 'i',
                "no-clobber" => 'n',
                "no-target-directory" => 'T',
                "target-directory" => 't',
                "update" => 'u',
                _ => '?',
            };
            let val = if with_value.contains(&c) && val.is_none() {
                it.next()
            } else {
                val
            };
            flags.push((c, val));
            continue;
        }
        if a.len() > 1 && a.starts_with('-') {
            let chars: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let c = chars[k];
                if with_value.contains(&c) {
                    let rest: String = chars[k + 1..].iter().collect();
                    let v = if rest.is_empty() {
                        it.next()
                    } else {
                        Some(rest)
                    };
                    flags.push((c, v));
                    break;
                }
                flags.push((c, None));
                k += 1;
            }
            continue;
        }
        operands.push(a);
    }
    (flags, operands)
}

pub fn mkdir(args: std::vec::IntoIter<OsString>) -> i32 {
    let (flags, dirs) = flags_and_operands(strings(args), &['m']);
    let parents = flags.iter().any(|(c, _)| *c == 'p');
    let verbose = flags.iter().any(|(c, _)| *c == 'v');
    if let Some((c, _)) = flags.iter().find(|(c, _)| !matches!(c, 'p' | 'v' | 'm')) {
        eprintln!("mkdir: invalid option -- '{c}'");
        return 1;
    }
    if dirs.is_empty() {
        eprintln!("mkdir: missing operand\nTry 'mkdir --help' for more information.");
        return 1;
    }
    let mut status = 0;
    for d in dirs {
        let result = if parents {
            create_all(Path::new(&d), verbose)
        } else {
            std::fs::create_dir(&d)
        };
        match result {
            Ok(()) => {
                if verbose && !parents {
                    println!("mkdir: created directory '{d}'");
                }
            }
            Err(e) => {
                eprintln!("mkdir: cannot create directory '{d}': {}", reason(&e));
                status = 1;
            }
        }
    }
    status
}

/// `mkdir -p`: creates each missing component, never touching the components that exist
/// (so an absolute path under the workspace works without reaching `/`).
fn create_all(path: &Path, verbose: bool) -> std::io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    let mut missing: Vec<&Path> = Vec::new();
    let mut p = Some(path);
    while let Some(cur) = p {
        if cur.as_os_str().is_empty() || cur.is_dir() {
            break;
        }
        missing.push(cur);
        p = cur.parent();
    }
    for dir in missing.into_iter().rev() {
        match std::fs::create_dir(dir) {
            Ok(()) => {
                if verbose {
                    println!("mkdir: created directory '{}'", dir.display());
                }
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub fn mv(args: std::vec::IntoIter<OsString>) -> i32 {
    let (flags, mut operands) = flags_and_operands(strings(args), &['t', 'S']);
    let mut no_clobber = false;
    let mut verbose = false;
    let mut no_target_dir = false;
    let mut target_dir: Option<String> = None;
    for (c, v) in flags {
        match c {
            'f' | 'i' => no_clobber = false,
            'n' => no_clobber = true,
            'v' => verbose = true,
            'T' => no_target_dir = true,
            't' => target_dir = v,
            'u' | 'b' | 'S' => {}
            other => {
                eprintln!("mv: invalid option -- '{other}'\nTry 'mv --help' for more information.");
                return 1;
            }
        }
    }
    let dest = match target_dir {
        Some(t) => t,
        None => {
            if operands.is_empty() {
                eprintln!("mv: missing file operand\nTry 'mv --help' for more information.");
                return 1;
            }
            if operands.len() == 1 {
                eprintln!(
                    "mv: missing destination file operand after '{}'\nTry 'mv --help' for more information.",
                    operands[0]
                );
                return 1;
            }
            operands.pop().unwrap_or_default()
        }
    };
    let dest_is_dir = !no_target_dir && Path::new(&dest).is_dir();
    if operands.len() > 1 && !dest_is_dir {
        eprintln!("mv: target '{dest}' is not a directory");
        return 1;
    }
    let mut status = 0;
    for src in operands {
        let src_path = Path::new(&src);
        if std::fs::symlink_metadata(src_path).is_err() {
            eprintln!("mv: cannot stat '{src}': No such file or directory");
            status = 1;
            continue;
        }
        let target: PathBuf = if dest_is_dir {
            let name = src_path
                .file_name()
                .map(|n| n.to_os_string())
                .unwrap_or_default();
            Path::new(&dest).join(name)
        } else {
            PathBuf::from(&dest)
        };
        if no_clobber && std::fs::symlink_metadata(&target).is_ok() {
            continue;
        }
        if let (Ok(a), Ok(b)) = (
            std::fs::canonicalize(src_path),
            std::fs::canonicalize(&target),
        ) && a == b
        {
            eprintln!("mv: '{src}' and '{}' are the same file", target.display());
            status = 1;
            continue;
        }
        if src_path.is_dir() && target.starts_with(src_path) {
            eprintln!(
                "mv: cannot move '{src}' to a subdirectory of itself, '{}'",
                target.display()
            );
            status = 1;
            continue;
        }
        match std::fs::rename(src_path, &target) {
            Ok(()) => {
                if verbose {
                    println!("renamed '{src}' -> '{}'", target.display());
                }
            }
            // Another file system (a volume and the workspace): copied, then removed, as
            // GNU mv does.
            Err(e) if e.kind() == ErrorKind::CrossesDevices => {
                if !move_across(&src, src_path, &target, verbose) {
                    status = 1;
                }
            }
            Err(e) => {
                eprintln!(
                    "mv: cannot move '{src}' to '{}': {}",
                    target.display(),
                    reason(&e)
                );
                status = 1;
            }
        }
    }
    status
}

/// Moves `src` to `target` on another file system: a copy of the whole tree (modes, times
/// and symlinks kept), then the source removed.
fn move_across(src: &str, src_path: &Path, target: &Path, verbose: bool) -> bool {
    let opts = crate::files::CpOpts {
        recursive: true,
        preserve: true,
        no_clobber: false,
        verbose: false,
        update: false,
        no_deref: true,
    };
    let dst = target.to_string_lossy();
    if src_path.is_dir() && !src_path.is_symlink() && target.is_dir() {
        // A directory replaces an empty one only, as rename(2) would.
        if std::fs::read_dir(target).is_ok_and(|mut d| d.next().is_some()) {
            eprintln!("mv: cannot move '{src}' to '{dst}': Directory not empty");
            return false;
        }
        let _ = std::fs::remove_dir(target);
    }
    if !crate::files::cp_one(src, &dst, &opts) {
        return false;
    }
    let removed = if src_path.is_dir() && !src_path.is_symlink() {
        std::fs::remove_dir_all(src_path)
    } else {
        std::fs::remove_file(src_path)
    };
    if let Err(e) = removed {
        eprintln!("mv: cannot remove '{src}': {}", reason(&e));
        return false;
    }
    if verbose {
        println!("copied '{src}' -> '{dst}'\nremoved '{src}'");
    }
    true
}

/// `realpath [-e|-m|-s] FILE...`: the absolute path, with `.` and `..` resolved (WASI has
/// no `realpath(3)`; the components are resolved in the sandbox's path space).
pub fn realpath(args: std::vec::IntoIter<OsString>) -> i32 {
    // `--relative-to=DIR` / `--relative-to DIR`: print paths relative to DIR.
    let mut relative_to = None;
    let mut rest = Vec::new();
    let mut it = strings(args).into_iter();
    while let Some(a) = it.next() {
        if let Some(d) = a.strip_prefix("--relative-to=") {
            relative_to = Some(d.to_string());
        } else if a == "--relative-to" {
            relative_to = it.next();
        } else if a == "--canonicalize-missing" {
            rest.push("-m".to_string());
        } else {
            rest.push(a);
        }
    }
    let (flags, files) = flags_and_operands(rest, &[]);
    let missing_ok = flags.iter().any(|(c, _)| *c == 'm');
    if files.is_empty() {
        eprintln!("realpath: missing operand\nTry 'realpath --help' for more information.");
        return 1;
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut status = 0;
    for f in files {
        let mut parts: Vec<String> = Vec::new();
        let full = if f.starts_with('/') {
            PathBuf::from(&f)
        } else {
            cwd.join(&f)
        };
        for c in full.to_string_lossy().split('/') {
            match c {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                c => parts.push(c.to_string()),
            }
        }
        let resolved = format!("/{}", parts.join("/"));
        if !missing_ok && std::fs::symlink_metadata(&resolved).is_err() {
            eprintln!("realpath: {f}: No such file or directory");
            status = 1;
            continue;
        }
        match &relative_to {
            Some(base) => println!("{}", guest_support::relative_path(base, &resolved)),
            None => println!("{resolved}"),
        }
    }
    status
}

/// `rm` and `rmdir` take `dir/` like GNU does (WASI refuses a trailing slash).
pub fn without_trailing_slashes(
    args: std::vec::IntoIter<OsString>,
) -> std::vec::IntoIter<OsString> {
    args.map(|a| {
        let s = a.to_string_lossy();
        if s.len() > 1 && s.ends_with('/') && !s.starts_with('-') {
            let t = s.trim_end_matches('/');
            OsString::from(if t.is_empty() { "/" } else { t })
        } else {
            a
        }
    })
    .collect::<Vec<_>>()
    .into_iter()
}

/// `ln`: uutils' (the host keeps an absolute symlink target as it was written: see the
/// runtime's `linktarget`).
pub fn ln(args: std::vec::IntoIter<OsString>) -> i32 {
    uu_ln::uumain(args)
}

/// `tac [FILE]...`: lines in reverse order.
pub fn tac(args: std::vec::IntoIter<OsString>) -> i32 {
    use std::io::{Read, Write};
    let mut files = strings(args);
    if files.is_empty() {
        files.push("-".into());
    }
    let mut status = 0;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // Each file on its own, lines in reverse order with their separators as they are: a
    // last line without a newline is printed without one (GNU tac).
    for f in &files {
        let mut data = Vec::new();
        let read = if f == "-" {
            std::io::stdin().read_to_end(&mut data).map(|_| ())
        } else {
            std::fs::read(f).map(|d| data = d)
        };
        if let Err(e) = read {
            eprintln!("tac: failed to open '{f}' for reading: {}", reason(&e));
            status = 1;
            continue;
        }
        let mut lines: Vec<&[u8]> = data.split_inclusive(|&b| b == b'\n').collect();
        lines.reverse();
        for l in lines {
            let _ = out.write_all(l);
        }
    }
    status
}

/// `sort`: uutils' sort, except `-c`/`-C`/`--check` (uutils checks on a thread, which a
/// wasm process cannot start). A check sorts the input with the same options in a child
/// `sort` and compares; on a difference, the first line out of order is found by sorting
/// prefixes (a sorted prefix's prefixes are sorted), and reported as GNU sort does.
pub fn sort(args: std::vec::IntoIter<OsString>) -> i32 {
    let all: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
    let mut check: Option<bool> = None; // Some(quiet)
    let mut opts: Vec<String> = Vec::new();
    let mut files: Vec<String> = Vec::new();
    let mut i = 1;
    let long_with_value = [
        "--key",
        "--field-separator",
        "--output",
        "--buffer-size",
        "--temporary-directory",
        "--parallel",
        "--sort",
        "--files0-from",
        "--random-source",
        "--compress-program",
        "--batch-size",
    ];
    while i < all.len() {
        let a = &all[i];
        i += 1;
        if a == "--" {
            files.extend(all[i..].iter().cloned());
            break;
        }
        if a == "--check" || a == "--check=diagnose-first" {
            check = Some(false);
        } else if a == "--check=quiet" || a == "--check=silent" {
            check = Some(true);
        } else if a.starts_with("--") {
            opts.push(a.clone());
            if !a.contains('=') && long_with_value.contains(&a.as_str()) && i < all.len() {
                opts.push(all[i].clone());
                i += 1;
            }
        } else if a.len() > 1 && a.starts_with('-') {
            let mut kept = String::from("-");
            let chars: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            let mut takes_next = false;
            while k < chars.len() {
                let c = chars[k];
                k += 1;
                match c {
                    'c' => check = Some(check.unwrap_or(false)),
                    'C' => check = Some(true),
                    'k' | 't' | 'o' | 'S' | 'T' => {
                        kept.push(c);
                        kept.extend(&chars[k..]);
                        takes_next = k == chars.len();
                        break;
                    }
                    c => kept.push(c),
                }
            }
            if kept.len() > 1 {
                opts.push(kept);
            }
            if takes_next && i < all.len() {
                opts.push(all[i].clone());
                i += 1;
            }
        } else {
            files.push(a.clone());
        }
    }
    let Some(quiet) = check else {
        return uu_sort::uumain(all.into_iter().map(OsString::from));
    };
    if files.len() > 1 {
        eprintln!("sort: extra operand '{}' not allowed with -c", files[1]);
        return 2;
    }
    let name = files.first().cloned().unwrap_or_else(|| "-".into());
    let mut input = Vec::new();
    let read = if name == "-" {
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut input).map(|_| ())
    } else {
        std::fs::read(&name).map(|d| input = d)
    };
    if let Err(e) = read {
        eprintln!("sort: open failed: {name}: {}", reason(&e));
        return 2;
    }
    let text = String::from_utf8_lossy(&input).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    let me = guest_support::process::self_pid();
    let (in_path, out_path) = (
        format!("/tmp/.sort-check-{me}-in"),
        format!("/tmp/.sort-check-{me}-out"),
    );
    // Whether the first `n` lines are in order: sorting them changes nothing.
    let sorted = |n: usize| -> Result<bool, i32> {
        let mut body = lines[..n].join("\n");
        body.push('\n');
        if std::fs::write(&in_path, &body).is_err() {
            eprintln!("sort: cannot write a temporary file in /tmp");
            return Err(2);
        }
        let mut argv = vec!["sort".to_string()];
        argv.extend(opts.iter().cloned());
        argv.push(in_path.clone());
        let cmd = guest_support::process::Command {
            argv,
            env: std::env::vars().collect(),
            cwd: std::env::current_dir()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "/".into()),
            stdin: guest_support::process::Stdio::Null,
            stdout: guest_support::process::Stdio::WriteFile(out_path.clone()),
            stderr: guest_support::process::Stdio::Inherit,
        };
        let status = match guest_support::process::spawn(&cmd) {
            Ok(pid) => guest_support::process::wait(pid),
            Err(_) => 2,
        };
        if status != 0 {
            return Err(2);
        }
        Ok(std::fs::read_to_string(&out_path).unwrap_or_default() == body)
    };
    let result = (|| -> Result<Option<usize>, i32> {
        if lines.len() < 2 || sorted(lines.len())? {
            return Ok(None);
        }
        // The longest sorted prefix: `lo` lines are in order, `hi` lines are not.
        let (mut lo, mut hi) = (1usize, lines.len());
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if sorted(mid)? {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(Some(lo))
    })();
    let _ = std::fs::remove_file(&in_path);
    let _ = std::fs::remove_file(&out_path);
    match result {
        Err(code) => code,
        Ok(None) => 0,
        Ok(Some(n)) => {
            if !quiet {
                eprintln!("sort: {name}:{}: disorder: {}", n + 1, lines[n]);
            }
            1
        }
    }
}

/// Whether the locale (`LC_ALL`, else `LC_CTYPE`, else `LANG`) uses UTF-8.
pub fn utf8_locale() -> bool {
    ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        .is_some_and(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("utf-8") || l.contains("utf8")
        })
}

/// `shasum [-a 1|224|256|384|512] [OPTION]... [FILE]...`: Perl's `shasum` as the
/// `sha*sum` of its algorithm (the same output, `-c`, `-b`, `--tag` and the rest).
pub fn shasum(args: std::vec::IntoIter<OsString>) -> i32 {
    let mut args: Vec<OsString> = args.collect();
    if args.is_empty() {
        args.push("shasum".into());
    }
    let argv0 = args.remove(0);
    let mut algorithm = "1".to_string();
    let mut rest = vec![argv0];
    let mut i = 0;
    while i < args.len() {
        let a = args[i].to_string_lossy().into_owned();
        i += 1;
        if a == "--" {
            rest.extend(args[i - 1..].iter().cloned());
            break;
        }
        if a == "-a" || a == "--algorithm" {
            match args.get(i) {
                Some(v) => algorithm = v.to_string_lossy().into_owned(),
                None => {
                    eprintln!("shasum: option {a} requires an argument");
                    return 1;
                }
            }
            i += 1;
        } else if let Some(v) = a.strip_prefix("--algorithm=") {
            algorithm = v.to_string();
        } else if let Some(v) = a.strip_prefix("-a").filter(|v| !v.is_empty()) {
            algorithm = v.to_string();
        } else {
            rest.push(args[i - 1].clone());
        }
    }
    let main: fn(std::vec::IntoIter<OsString>) -> i32 = match algorithm.as_str() {
        "1" => uu_sha1sum::uumain,
        "224" => uu_sha224sum::uumain,
        "256" => uu_sha256sum::uumain,
        "384" => uu_sha384sum::uumain,
        "512" => uu_sha512sum::uumain,
        _ => {
            eprintln!("shasum: Unrecognized algorithm");
            return 1;
        }
    };
    main(rest.into_iter())
}

/// `uuidgen [-r|-t]`: a random (version 4) UUID, or with `-t` a time-based (version 1)
/// one whose node is random, as util-linux makes when it has no MAC address to use.
pub fn uuidgen(args: std::vec::IntoIter<OsString>) -> i32 {
    let mut time = false;
    for a in args.skip(1) {
        match a.to_string_lossy().as_ref() {
            "-r" | "--random" => time = false,
            "-t" | "--time" => time = true,
            "-h" | "--help" => {
                println!(
                    "Usage:\n uuidgen [options]\n\nOptions:\n -r, --random     generate random-based uuid\n -t, --time       generate time-based uuid"
                );
                return 0;
            }
            other => {
                eprintln!(
                    "uuidgen: invalid option -- '{}'",
                    other.trim_start_matches('-')
                );
                return 1;
            }
        }
    }
    let mut b = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_err()
    {
        eprintln!("uuidgen: cannot read random bytes");
        return 1;
    }
    if time {
        // 100-nanosecond intervals since 1582-10-15, the start of the Gregorian calendar.
        let since_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() / 100)
            .unwrap_or_default() as u64;
        let t = since_unix + 0x01B2_1DD2_1381_4000;
        b[0..4].copy_from_slice(&((t & 0xffff_ffff) as u32).to_be_bytes());
        b[4..6].copy_from_slice(&(((t >> 32) & 0xffff) as u16).to_be_bytes());
        b[6..8].copy_from_slice(&((((t >> 48) & 0x0fff) as u16) | 0x1000).to_be_bytes());
        // A random node has its multicast bit set (RFC 4122, 4.5).
        b[10] |= 0x01;
    } else {
        b[6] = (b[6] & 0x0f) | 0x40;
    }
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    println!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    );
    0
}
