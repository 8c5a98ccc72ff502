//! Applets about the system and the user, and the byte movers that must stream: `cat`
//! (uutils' refuses character devices on WASI), `dd`, `df` (the sandbox's disk quota),
//! `uname`, `arch`, `nproc`, `id`, `whoami`, `groups`, `logname`, `hostname`, `tty`,
//! `nohup`, `nice`, `chown`, `chgrp`, `sync`, `getconf`, `locale`, and `less`/`more` (which page
//! nothing: they copy their input, as they do when the output is not a terminal).
//!
//! What they report is the sandbox as it presents itself: Linux on `wasm32`, host name
//! `wasbox`, one processor per process, the user `root` (or `$USER` when it names the
//! image's other user, `user`), files without owners (`chown` checks and changes nothing).
//! Options and messages follow GNU coreutils.

use std::ffi::OsString;
use std::io::{BufRead, ErrorKind, Read, Write};
use std::time::Instant;

use guest_support::cli::{Opts, reason};

fn strings(args: std::vec::IntoIter<OsString>) -> Vec<String> {
    crate::own::strings(args)
}

/// What a write failure ends a tool with: quietly 141 for a reader that went away (as
/// SIGPIPE would), else the message and 1.
fn write_failed(tool: &str, e: &std::io::Error) -> i32 {
    if e.kind() == ErrorKind::BrokenPipe {
        return 141;
    }
    eprintln!("{tool}: write error: {}", reason(e));
    1
}

// -- cat ----------------------------------------------------------------------------------

#[derive(Default)]
struct CatOpts {
    number: bool,
    nonblank: bool,
    squeeze: bool,
    ends: bool,
    tabs: bool,
    nonprinting: bool,
}

/// Line state carried across files, as GNU's `cat -n a b` numbers on.
#[derive(Default)]
struct CatState {
    line: u64,
    blank_run: u32,
}

/// `cat [-AbeEnstTuv] [FILE]...`.
pub fn cat(args: std::vec::IntoIter<OsString>) -> i32 {
    let args = strings(args);
    let o = Opts::parse(&args, &[]);
    let known = [
        "A",
        "b",
        "e",
        "E",
        "n",
        "s",
        "t",
        "T",
        "u",
        "v",
        "show-all",
        "number-nonblank",
        "show-ends",
        "number",
        "squeeze-blank",
        "show-tabs",
        "show-nonprinting",
        "help",
        "version",
    ];
    if let Some(e) = o.unknown("cat", &known) {
        eprintln!("{e}\nTry 'cat --help' for more information.");
        return 1;
    }
    if o.has(&["help"]) {
        println!(
            "Usage: cat [OPTION]... [FILE]...\nConcatenate FILE(s) to standard output.\n\n\
             With no FILE, or when FILE is -, read standard input.\n\n\
             \x20 -A, --show-all           equivalent to -vET\n\
             \x20 -b, --number-nonblank    number nonempty output lines, overrides -n\n\
             \x20 -e                       equivalent to -vE\n\
             \x20 -E, --show-ends          display $ at end of each line\n\
             \x20 -n, --number             number all output lines\n\
             \x20 -s, --squeeze-blank      suppress repeated empty output lines\n\
             \x20 -t                       equivalent to -vT\n\
             \x20 -T, --show-tabs          display TAB characters as ^I\n\
             \x20 -u                       (ignored)\n\
             \x20 -v, --show-nonprinting   use ^ and M- notation, except for LFD and TAB"
        );
        return 0;
    }
    if o.has(&["version"]) {
        println!("cat (wasbox coreutils) 9.4");
        return 0;
    }
    let c = CatOpts {
        nonblank: o.has(&["b", "number-nonblank"]),
        number: o.has(&["n", "number", "b", "number-nonblank"]),
        squeeze: o.has(&["s", "squeeze-blank"]),
        ends: o.has(&["A", "show-all", "e", "E", "show-ends"]),
        tabs: o.has(&["A", "show-all", "t", "T", "show-tabs"]),
        nonprinting: o.has(&["A", "show-all", "e", "t", "v", "show-nonprinting"]),
    };
    let plain = !(c.number || c.squeeze || c.ends || c.tabs || c.nonprinting);
    let files = if o.operands.is_empty() {
        vec!["-".to_string()]
    } else {
        o.operands
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut state = CatState::default();
    let mut status = 0;
    for f in &files {
        let input: Box<dyn Read> = if f == "-" {
            Box::new(std::io::stdin().lock())
        } else {
            match std::fs::File::open(f) {
                Ok(file) => {
                    if file.metadata().is_ok_and(|m| m.is_dir()) {
                        eprintln!("cat: {f}: Is a directory");
                        status = 1;
                        continue;
                    }
                    Box::new(file)
                }
                Err(e) => {
                    eprintln!("cat: {f}: {}", reason(&e));
                    status = 1;
                    continue;
                }
            }
        };
        let r = if plain {
            copy_plain(input, &mut out)
        } else {
            copy_formatted(input, &mut out, &c, &mut state)
        };
        match r {
            Ok(()) => {}
            Err((true, e)) => return write_failed("cat", &e),
            Err((false, e)) => {
                eprintln!("cat: {f}: {}", reason(&e));
                status = 1;
            }
        }
    }
    if let Err(e) = out.flush() {
        return write_failed("cat", &e);
    }
    status
}

/// Copies everything; the error says whether it was the write (`true`) or the read.
fn copy_plain(
    mut input: Box<dyn Read>,
    out: &mut impl Write,
) -> Result<(), (bool, std::io::Error)> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err((false, e)),
        };
        out.write_all(&buf[..n]).map_err(|e| (true, e))?;
        // A short read: nothing more is waiting (a pipe, a terminal), so what came goes
        // out now, as GNU cat writes each read (`cat` fed a line at a time by another
        // program answers at once).
        if n < buf.len() {
            out.flush().map_err(|e| (true, e))?;
        }
    }
}

fn copy_formatted(
    input: Box<dyn Read>,
    out: &mut impl Write,
    c: &CatOpts,
    st: &mut CatState,
) -> Result<(), (bool, std::io::Error)> {
    let mut input = std::io::BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err((false, e)),
        }
        let newline = line.last() == Some(&b'\n');
        let body = if newline {
            &line[..line.len() - 1]
        } else {
            &line[..]
        };
        let blank = body.is_empty() && newline;
        if blank {
            st.blank_run += 1;
            if c.squeeze && st.blank_run > 1 {
                continue;
            }
        } else {
            st.blank_run = 0;
        }
        let mut text = Vec::with_capacity(line.len() + 16);
        if c.number && !(c.nonblank && blank) {
            st.line += 1;
            text.extend_from_slice(format!("{:>6}\t", st.line).as_bytes());
        }
        for &b in body {
            match b {
                b'\t' if c.tabs => text.extend_from_slice(b"^I"),
                b'\t' => text.push(b),
                _ if c.nonprinting => push_visible(&mut text, b),
                _ => text.push(b),
            }
        }
        if newline {
            if c.ends {
                text.push(b'$');
            }
            text.push(b'\n');
        }
        out.write_all(&text).map_err(|e| (true, e))?;
        if input.buffer().is_empty() {
            out.flush().map_err(|e| (true, e))?;
        }
    }
}

/// `cat -v` notation: `^X` for control characters, `^?` for DEL, `M-` for the high half.
fn push_visible(out: &mut Vec<u8>, b: u8) {
    let low = if b >= 128 {
        out.extend_from_slice(b"M-");
        b - 128
    } else {
        b
    };
    match low {
        0..=31 => out.extend_from_slice(&[b'^', low + 64]),
        127 => out.extend_from_slice(b"^?"),
        _ => out.push(low),
    }
}

/// `less`/`more [OPTIONS] [FILE]...`: no pager here; the files (or standard input) are
/// copied to the output, as both do when it is not a terminal.
pub fn pager(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<OsString> = args.collect();
    let files: Vec<OsString> = args
        .iter()
        .skip(1)
        .filter(|a| {
            let s = a.to_string_lossy();
            !(s.starts_with('-') && s.len() > 1 || s.starts_with('+'))
        })
        .cloned()
        .collect();
    let argv: Vec<OsString> = std::iter::once(OsString::from("cat"))
        .chain(files)
        .collect();
    cat(argv.into_iter())
}

// -- dd -----------------------------------------------------------------------------------

/// A `dd` size: a number with an optional multiplier suffix (`c`, `w`, `b`, `kB`, `K`,
/// `KiB`, `MB`, `M`, ... `E`), and products with `x` (`2x512`).
fn dd_size(s: &str) -> Option<u64> {
    s.split('x').try_fold(1u64, |acc, part| {
        let digits = part
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(part.len());
        if digits == 0 {
            return None;
        }
        let n: u64 = part[..digits].parse().ok()?;
        let mult: u64 = match &part[digits..] {
            "" | "c" => 1,
            "w" => 2,
            "b" => 512,
            "kB" => 1000,
            "K" | "k" | "KiB" => 1024,
            "MB" => 1000u64.pow(2),
            "M" | "MiB" => 1024u64.pow(2),
            "GB" => 1000u64.pow(3),
            "G" | "GiB" => 1024u64.pow(3),
            "TB" => 1000u64.pow(4),
            "T" | "TiB" => 1024u64.pow(4),
            _ => return None,
        };
        acc.checked_mul(n)?.checked_mul(mult)
    })
}

/// `dd [OPERAND]...`: copies `if` (standard input) to `of` (standard output) in blocks,
/// with `bs`, `ibs`, `obs`, `count`, `skip`, `seek`, `conv` (`notrunc`, `noerror`, `sync`,
/// `ucase`, `lcase`, `excl`, `nocreat`, `fsync`, `fdatasync`), `iflag`/`oflag`
/// (`fullblock`, `count_bytes`, `skip_bytes`, `seek_bytes`, `append`) and `status`
/// (`none`, `noxfer`, `progress`). The summary goes to standard error.
pub fn dd(args: std::vec::IntoIter<OsString>) -> i32 {
    let args = strings(args);
    let (mut ibs, mut obs) = (512u64, 512u64);
    let mut bs = None;
    let (mut input, mut output) = (None::<String>, None::<String>);
    let (mut count, mut skip, mut seek) = (None::<u64>, 0u64, 0u64);
    let mut conv: Vec<String> = Vec::new();
    let mut iflag: Vec<String> = Vec::new();
    let mut oflag: Vec<String> = Vec::new();
    let mut status_level = String::new();
    for a in &args {
        if a == "--help" {
            println!(
                "Usage: dd [OPERAND]...\nCopy a file, converting and formatting according to the operands.\n\n\
                 \x20 bs=BYTES        read and write up to BYTES bytes at a time\n\
                 \x20 count=N         copy only N input blocks\n\
                 \x20 ibs=BYTES       read up to BYTES bytes at a time (default: 512)\n\
                 \x20 if=FILE         read from FILE instead of stdin\n\
                 \x20 obs=BYTES       write BYTES bytes at a time (default: 512)\n\
                 \x20 of=FILE         write to FILE instead of stdout\n\
                 \x20 seek=N          skip N obs-sized output blocks\n\
                 \x20 skip=N          skip N ibs-sized input blocks\n\
                 \x20 conv=CONVS      notrunc, noerror, sync, ucase, lcase, excl, nocreat, fsync\n\
                 \x20 iflag=FLAGS     fullblock, count_bytes, skip_bytes\n\
                 \x20 oflag=FLAGS     append, seek_bytes\n\
                 \x20 status=LEVEL    none, noxfer or progress"
            );
            return 0;
        }
        let Some((k, v)) = a.split_once('=') else {
            eprintln!("dd: unrecognized operand '{a}'\nTry 'dd --help' for more information.");
            return 1;
        };
        let size = || {
            dd_size(v).ok_or_else(|| {
                eprintln!("dd: invalid number: '{v}'");
                1
            })
        };
        let list = |v: &str| v.split(',').map(str::to_string).collect::<Vec<_>>();
        let r: Result<(), i32> = (|| {
            match k {
                "if" => input = Some(v.to_string()),
                "of" => output = Some(v.to_string()),
                "bs" => bs = Some(size()?),
                "ibs" => ibs = size()?,
                "obs" => obs = size()?,
                "count" => count = Some(size()?),
                "skip" | "iseek" => skip = size()?,
                "seek" | "oseek" => seek = size()?,
                "conv" => conv.extend(list(v)),
                "iflag" => iflag.extend(list(v)),
                "oflag" => oflag.extend(list(v)),
                "status" => status_level = v.to_string(),
                _ => {
                    eprintln!(
                        "dd: unrecognized operand '{a}'\nTry 'dd --help' for more information."
                    );
                    return Err(1);
                }
            }
            Ok(())
        })();
        if let Err(c) = r {
            return c;
        }
    }
    if let Some(b) = bs {
        ibs = b;
        obs = b;
    }
    if ibs == 0 || obs == 0 {
        eprintln!("dd: invalid number: '0'");
        return 1;
    }
    let known_conv = [
        "notrunc",
        "noerror",
        "sync",
        "ucase",
        "lcase",
        "excl",
        "nocreat",
        "fsync",
        "fdatasync",
        "sparse",
    ];
    if let Some(bad) = conv.iter().find(|c| !known_conv.contains(&c.as_str())) {
        eprintln!("dd: invalid conversion: '{bad}'");
        return 1;
    }
    let known_flags = [
        "fullblock",
        "count_bytes",
        "skip_bytes",
        "seek_bytes",
        "append",
        "direct",
        "dsync",
        "sync",
        "nonblock",
        "noatime",
        "nocache",
        "noctty",
        "nofollow",
        "binary",
        "text",
    ];
    if let Some(bad) = iflag
        .iter()
        .chain(&oflag)
        .find(|f| !known_flags.contains(&f.as_str()))
    {
        eprintln!("dd: invalid input flag: '{bad}'");
        return 1;
    }
    if !["", "none", "noxfer", "progress"].contains(&status_level.as_str()) {
        eprintln!("dd: invalid status level: '{status_level}'");
        return 1;
    }
    let has = |l: &[String], f: &str| l.iter().any(|x| x == f);
    let count_bytes = has(&iflag, "count_bytes");
    let skip_bytes = if has(&iflag, "skip_bytes") {
        skip
    } else {
        skip.saturating_mul(ibs)
    };
    let seek_bytes = if has(&oflag, "seek_bytes") {
        seek
    } else {
        seek.saturating_mul(obs)
    };

    let start = Instant::now();
    let mut reader: Box<dyn Read> = match &input {
        None => Box::new(std::io::stdin().lock()),
        Some(p) => match std::fs::File::open(p) {
            Ok(mut f) => {
                use std::io::Seek;
                if skip_bytes > 0 && f.metadata().is_ok_and(|m| m.is_file()) {
                    if let Err(e) = f.seek(std::io::SeekFrom::Start(skip_bytes)) {
                        eprintln!("dd: {p}: cannot skip: {}", reason(&e));
                        return 1;
                    }
                } else if skip_bytes > 0
                    && let Err(e) =
                        std::io::copy(&mut (&mut f).take(skip_bytes), &mut std::io::sink())
                {
                    eprintln!("dd: {p}: cannot skip: {}", reason(&e));
                    return 1;
                }
                Box::new(f)
            }
            Err(e) => {
                eprintln!("dd: failed to open '{p}': {}", reason(&e));
                return 1;
            }
        },
    };
    if input.is_none() && skip_bytes > 0 {
        let _ = std::io::copy(&mut (&mut reader).take(skip_bytes), &mut std::io::sink());
    }
    let mut writer: Box<dyn Write> = match &output {
        None => Box::new(std::io::stdout().lock()),
        Some(p) => {
            use std::io::Seek;
            let mut o = std::fs::OpenOptions::new();
            o.write(true);
            if has(&oflag, "append") {
                o.append(true);
            }
            if has(&conv, "excl") {
                o.create_new(true);
            } else if !has(&conv, "nocreat") {
                o.create(true);
            }
            let mut f = match o.open(p) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("dd: failed to open '{p}': {}", reason(&e));
                    return 1;
                }
            };
            let regular = f.metadata().is_ok_and(|m| m.is_file());
            if regular
                && !has(&conv, "notrunc")
                && !has(&oflag, "append")
                && let Err(e) = f.set_len(seek_bytes)
            {
                eprintln!(
                    "dd: failed to truncate to {seek_bytes} bytes in output file '{p}': {}",
                    reason(&e)
                );
                return 1;
            }
            if regular
                && seek_bytes > 0
                && let Err(e) = f.seek(std::io::SeekFrom::Start(seek_bytes))
            {
                eprintln!("dd: {p}: cannot seek: {}", reason(&e));
                return 1;
            }
            Box::new(f)
        }
    };

    let limit = count.map(|c| {
        if count_bytes {
            c
        } else {
            c.saturating_mul(ibs)
        }
    });
    let blocks_limit = if count_bytes { None } else { count };
    let (mut full_in, mut part_in, mut full_out, mut part_out, mut total) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut read_total = 0u64;
    let mut buf = vec![0u8; ibs.min(64 << 20) as usize];
    let mut pending: Vec<u8> = Vec::new();
    let mut status = 0;
    loop {
        if blocks_limit.is_some_and(|c| full_in + part_in >= c)
            || limit.is_some_and(|l| read_total >= l)
        {
            break;
        }
        let want = match limit {
            Some(l) => (l - read_total).min(buf.len() as u64) as usize,
            None => buf.len(),
        };
        let mut got = 0;
        loop {
            match reader.read(&mut buf[got..want]) {
                Ok(0) => break,
                Ok(n) => {
                    // Blocks are filled: a read here returns at most 64 KiB whatever the
                    // source, where Linux returns whole blocks from files and devices.
                    got += n;
                    if got == want {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    eprintln!(
                        "dd: error reading '{}': {}",
                        input.as_deref().unwrap_or("standard input"),
                        reason(&e)
                    );
                    status = 1;
                    break;
                }
            }
        }
        if got == 0 {
            break;
        }
        read_total += got as u64;
        if got == buf.len() {
            full_in += 1;
        } else {
            part_in += 1;
        }
        let mut block = buf[..got].to_vec();
        if has(&conv, "sync") && block.len() < buf.len() {
            block.resize(buf.len(), 0);
        }
        if has(&conv, "ucase") {
            block.make_ascii_uppercase();
        } else if has(&conv, "lcase") {
            block.make_ascii_lowercase();
        }
        pending.extend_from_slice(&block);
        let whole = if bs.is_some() {
            pending.len()
        } else {
            pending.len() / obs as usize * obs as usize
        };
        if whole > 0 {
            let chunk: Vec<u8> = pending.drain(..whole).collect();
            if let Err(e) = writer.write_all(&chunk) {
                return write_failed("dd", &e);
            }
            total += chunk.len() as u64;
            if bs.is_some() {
                if chunk.len() as u64 == obs {
                    full_out += 1
                } else {
                    part_out += 1
                }
            } else {
                full_out += chunk.len() as u64 / obs;
            }
        }
        if status != 0 {
            break;
        }
    }
    if !pending.is_empty() {
        if let Err(e) = writer.write_all(&pending) {
            return write_failed("dd", &e);
        }
        total += pending.len() as u64;
        part_out += 1;
    }
    if let Err(e) = writer.flush() {
        return write_failed("dd", &e);
    }
    drop(writer);
    if status_level != "none" {
        eprintln!("{full_in}+{part_in} records in\n{full_out}+{part_out} records out");
        if status_level != "noxfer" {
            let secs = start.elapsed().as_secs_f64();
            let rate = if secs > 0.0 { total as f64 / secs } else { 0.0 };
            let size = if total >= 1000 {
                format!(
                    "{total} bytes ({}, {}) copied",
                    si(total as f64, 1000.0, &["kB", "MB", "GB", "TB"]),
                    si(total as f64, 1024.0, &["KiB", "MiB", "GiB", "TiB"])
                )
            } else if total == 1 {
                "1 byte copied".to_string()
            } else {
                format!("{total} bytes copied")
            };
            eprintln!(
                "{size}, {secs:.6} s, {}/s",
                si(rate, 1000.0, &["kB", "MB", "GB", "TB"])
            );
        }
    }
    status
}

/// A size with one significant decimal in the largest unit it reaches (`1.0 MB`).
fn si(v: f64, base: f64, units: &[&str]) -> String {
    let mut v = v;
    let mut unit = "B";
    for u in units {
        if v < base {
            break;
        }
        v /= base;
        unit = u;
    }
    if unit == "B" {
        format!("{v:.0} B")
    } else if v < 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.0} {unit}")
    }
}

// -- df -----------------------------------------------------------------------------------

/// GNU's `-h` sizes: powers of 1024 (`-H`: 1000), one decimal below 10, rounded up.
fn human(n: u64, base: u64) -> String {
    let units = ["K", "M", "G", "T", "P", "E"];
    if n < base {
        return n.to_string();
    }
    let mut v = n as f64;
    let mut unit = "";
    for u in units {
        if v < base as f64 {
            break;
        }
        v /= base as f64;
        unit = u;
    }
    let unit = if base == 1000 && unit == "K" {
        "k"
    } else {
        unit
    };
    if v < 10.0 {
        let r = (v * 10.0).ceil() / 10.0;
        if r >= 10.0 {
            format!("{}{unit}", r.ceil() as u64)
        } else {
            format!("{r:.1}{unit}")
        }
    } else {
        format!("{}{unit}", v.ceil() as u64)
    }
}

fn percent(used: u64, avail: u64) -> String {
    let total = used + avail;
    if total == 0 {
        return "-".into();
    }
    format!("{}%", (used * 100).div_ceil(total))
}

/// `df [-hHkmiTPa] [--output] [FILE]...`: the sandbox's one file system (its workspace
/// and `/tmp`, which share the sandbox's disk quota), mounted on `/`.
pub fn df(args: std::vec::IntoIter<OsString>) -> i32 {
    let o = Opts::parse(
        &strings(args),
        &[
            "B",
            "block-size",
            "t",
            "type",
            "x",
            "exclude-type",
            "output",
        ],
    );
    let known = [
        "h",
        "human-readable",
        "H",
        "si",
        "k",
        "m",
        "i",
        "inodes",
        "T",
        "print-type",
        "P",
        "portability",
        "a",
        "all",
        "l",
        "local",
        "B",
        "block-size",
        "t",
        "type",
        "x",
        "exclude-type",
        "total",
        "sync",
        "no-sync",
        "help",
        "output",
    ];
    if let Some(e) = o.unknown("df", &known) {
        eprintln!("{e}\nTry 'df --help' for more information.");
        return 1;
    }
    if o.has(&["help"]) {
        println!(
            "Usage: df [OPTION]... [FILE]...\nShow information about the file system on which each FILE resides,\n\
             or all file systems by default. In a wasbox sandbox those are the sandbox's own (the\n\
             workspace and /tmp, within its disk quota) and each volume attached, within its own.\n\n\
             \x20 -h, --human-readable  print sizes in powers of 1024 (e.g., 1023M)\n\
             \x20 -H, --si              print sizes in powers of 1000 (e.g., 1.1G)\n\
             \x20 -i, --inodes          list inode information instead of block usage\n\
             \x20 -k                    like --block-size=1K\n\
             \x20 -m                    like --block-size=1M\n\
             \x20 -P, --portability     use the POSIX output format\n\
             \x20 -T, --print-type      print file system type\n\
             \x20     --total           produce a grand total"
        );
        return 0;
    }
    // The file systems: the sandbox's own, mounted on `/`, and each volume.
    let own = guest_support::process::disk_usage();
    let volumes = guest_support::process::volumes();
    // (name, where, (used bytes, available bytes, used inodes, available inodes))
    type System = (String, String, (u64, u64, u64, u64));
    let mut systems: Vec<System> = vec![("sandbox".into(), "/".into(), own)];
    for v in &volumes {
        systems.push((format!("volume:{}", v.name), v.path.clone(), v.space));
    }
    let mut status = 0;
    let mut shown: Vec<usize> = Vec::new();
    for f in &o.operands {
        match std::fs::metadata(f) {
            Ok(_) => {
                // The volume whose mount path holds the file, else the sandbox's own.
                let at = guest_support::normalize(f);
                let within = |mount: &str| at == mount || at.starts_with(&format!("{mount}/"));
                let i = (1..systems.len())
                    .find(|&i| within(&systems[i].1))
                    .unwrap_or(0);
                shown.push(i);
            }
            Err(e) => {
                eprintln!("df: {f}: {}", reason(&e));
                status = 1;
            }
        }
    }
    if o.operands.is_empty() {
        shown = (0..systems.len()).collect();
    }
    if shown.is_empty() {
        return status;
    }
    let inodes = o.has(&["i", "inodes"]);
    let typed = o.has(&["T", "print-type"]);
    let human_base = if o.has(&["H", "si"]) {
        Some(1000)
    } else if o.has(&["h", "human-readable"]) {
        Some(1024)
    } else {
        None
    };
    let block: u64 = if o.has(&["m"]) {
        1 << 20
    } else if let Some(b) = o.value(&["B", "block-size"]) {
        match dd_size(b.trim_end_matches('B')).or_else(|| dd_size(b)) {
            Some(n) if n > 0 => n,
            _ => {
                eprintln!("df: invalid --block-size argument '{b}'");
                return 1;
            }
        }
    } else {
        1024
    };
    // Used and available (bytes, or inodes with -i) of a file system.
    let figures = |(used_b, avail_b, used_i, avail_i): (u64, u64, u64, u64)| {
        if inodes {
            (used_i, avail_i)
        } else {
            (used_b, avail_b)
        }
    };
    let size_head = if inodes {
        "Inodes".to_string()
    } else {
        match human_base {
            Some(_) => "Size".to_string(),
            None if block == 1024 => "1K-blocks".to_string(),
            None if block == 1 << 20 => "1M-blocks".to_string(),
            None => format!("{block}B-blocks"),
        }
    };
    let fmt = |n: u64| -> String {
        if inodes {
            match human_base {
                Some(b) => human(n, b),
                None => n.to_string(),
            }
        } else {
            match human_base {
                Some(b) => human(n, b),
                None => n.div_ceil(block).to_string(),
            }
        }
    };
    let (used_head, avail_head, pct_head) = match (inodes, human_base.is_some()) {
        (true, _) => ("IUsed", "IFree", "IUse%"),
        (false, true) => ("Used", "Avail", "Use%"),
        (false, false) if o.has(&["P", "portability"]) => ("Used", "Available", "Capacity"),
        (false, false) => ("Used", "Available", "Use%"),
    };
    let mut table: Vec<Vec<String>> = vec![{
        let mut h = vec!["Filesystem".to_string()];
        if typed {
            h.push("Type".into());
        }
        h.extend([
            size_head,
            used_head.into(),
            avail_head.into(),
            pct_head.into(),
            "Mounted on".into(),
        ]);
        h
    }];
    let (mut total_used, mut total_avail) = (0u64, 0u64);
    for &i in &shown {
        let (name, mount, space) = &systems[i];
        let (used, avail) = figures(*space);
        total_used += used;
        total_avail += avail;
        let mut row = vec![name.clone()];
        if typed {
            row.push("wasbox".into());
        }
        row.extend([
            fmt(used + avail),
            fmt(used),
            fmt(avail),
            percent(used, avail),
            mount.clone(),
        ]);
        table.push(row);
    }
    if o.has(&["total"]) {
        let mut t = vec!["total".to_string()];
        if typed {
            t.push("-".into());
        }
        t.extend([
            fmt(total_used + total_avail),
            fmt(total_used),
            fmt(total_avail),
            percent(total_used, total_avail),
            "-".into(),
        ]);
        table.push(t);
    }
    let cols = table[0].len();
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in &table {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c > 0 {
                line.push(' ');
            }
            let text_col = c == 0 || (typed && c == 1) || c == cols - 1;
            if c == cols - 1 {
                line.push_str(cell);
            } else if text_col {
                line.push_str(&format!("{cell:<w$}", w = width[c]));
            } else {
                line.push_str(&format!("{cell:>w$}", w = width[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    print!("{out}");
    status
}

// -- the system and the user --------------------------------------------------------------

const SYSNAME: &str = "Linux";
const RELEASE: &str = "6.1.0-wasbox";
const MACHINE: &str = "wasm32";

fn hostname_text() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "wasbox".into())
}

/// `uname [-asnrvmpio]`: Linux on wasm32.
pub fn uname(args: std::vec::IntoIter<OsString>) -> i32 {
    let o = Opts::parse(&strings(args), &[]);
    let fields = [
        ("s", "kernel-name"),
        ("n", "nodename"),
        ("r", "kernel-release"),
        ("v", "kernel-version"),
        ("m", "machine"),
        ("p", "processor"),
        ("i", "hardware-platform"),
        ("o", "operating-system"),
    ];
    let mut known: Vec<&str> = vec!["a", "all", "help", "version"];
    for (s, l) in fields {
        known.push(s);
        known.push(l);
    }
    if let Some(e) = o.unknown("uname", &known) {
        eprintln!("{e}\nTry 'uname --help' for more information.");
        return 1;
    }
    if let Some(extra) = o.operands.first() {
        eprintln!("uname: extra operand '{extra}'\nTry 'uname --help' for more information.");
        return 1;
    }
    if o.has(&["help"]) {
        println!(
            "Usage: uname [OPTION]...\nPrint certain system information (a wasbox sandbox: Linux on wasm32).\n\n\
             \x20 -a, --all                print all information, omitting -p and -i if unknown\n\
             \x20 -s, --kernel-name        print the kernel name\n\
             \x20 -n, --nodename           print the network node hostname\n\
             \x20 -r, --kernel-release     print the kernel release\n\
             \x20 -v, --kernel-version     print the kernel version\n\
             \x20 -m, --machine            print the machine hardware name\n\
             \x20 -p, --processor          print the processor type\n\
             \x20 -i, --hardware-platform  print the hardware platform\n\
             \x20 -o, --operating-system   print the operating system"
        );
        return 0;
    }
    let all = o.has(&["a", "all"]);
    let host = hostname_text();
    let version = format!("#1 SMP wasbox {}", env!("CARGO_PKG_VERSION"));
    let values = [
        SYSNAME,
        host.as_str(),
        RELEASE,
        version.as_str(),
        MACHINE,
        "unknown",
        "unknown",
        "GNU/Linux",
    ];
    let mut out = Vec::new();
    for (k, (s, l)) in fields.iter().enumerate() {
        let asked = o.has(&[s, l]);
        if asked || (all && !matches!(*s, "p" | "i")) {
            out.push(values[k]);
        }
    }
    if out.is_empty() {
        out.push(SYSNAME);
    }
    println!("{}", out.join(" "));
    0
}

/// `arch`: the machine name.
pub fn arch(_: std::vec::IntoIter<OsString>) -> i32 {
    println!("{MACHINE}");
    0
}

/// `nproc [--all] [--ignore=N]`: a sandbox process runs on one thread.
pub fn nproc(args: std::vec::IntoIter<OsString>) -> i32 {
    let o = Opts::parse(&strings(args), &["ignore"]);
    if let Some(e) = o.unknown("nproc", &["all", "ignore"]) {
        eprintln!("{e}");
        return 1;
    }
    let ignore = match o.value(&["ignore"]).map(str::parse::<u64>) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!(
                "nproc: invalid number: '{}'",
                o.value(&["ignore"]).unwrap_or("")
            );
            return 1;
        }
    };
    println!("{}", 1u64.saturating_sub(ignore).max(1));
    0
}

/// A user of the image: name, uid, gid, home, from `/etc/passwd` (`root` and `user`).
struct User {
    name: String,
    uid: u32,
    gid: u32,
}

fn users() -> Vec<User> {
    let text = std::fs::read_to_string("/etc/passwd")
        .unwrap_or_else(|_| "root:x:0:0:root:/root:/bin/sh\n".into());
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some(User {
                name: f.first()?.to_string(),
                uid: f.get(2)?.parse().ok()?,
                gid: f.get(3)?.parse().ok()?,
            })
        })
        .collect()
}

fn group_name(gid: u32) -> String {
    std::fs::read_to_string("/etc/group")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.get(2)?.parse::<u32>().ok()? == gid).then(|| f[0].to_string())
            })
        })
        .unwrap_or_else(|| gid.to_string())
}

/// Who owns every file, as `ls -l`, `stat` and `find -ls` show it: the user the sandbox
/// runs as (WASI keeps no owners; what the sandbox user makes is its own). Name, uid,
/// group name, gid.
pub fn file_owner() -> &'static (String, u32, String, u32) {
    static OWNER: std::sync::OnceLock<(String, u32, String, u32)> = std::sync::OnceLock::new();
    OWNER.get_or_init(|| {
        let u = current_user();
        let group = group_name(u.gid);
        (u.name, u.uid, group, u.gid)
    })
}

/// The user the sandbox runs as: `$USER` when it names a user of the image, else root.
fn current_user() -> User {
    let all = users();
    let want = std::env::var("USER").unwrap_or_default();
    let mut found = None;
    let mut root = None;
    for u in all {
        if u.name == want {
            found = Some(u);
        } else if u.uid == 0 && root.is_none() {
            root = Some(u);
        }
    }
    found.or(root).unwrap_or(User {
        name: "root".into(),
        uid: 0,
        gid: 0,
    })
}

fn find_user(spec: &str) -> Option<User> {
    users()
        .into_iter()
        .find(|u| u.name == spec || spec.parse::<u32>().is_ok_and(|n| n == u.uid))
}

/// `id [-u|-g|-G] [-n] [-r] [-z] [USER]`.
pub fn id(args: std::vec::IntoIter<OsString>) -> i32 {
    let o = Opts::parse(&strings(args), &[]);
    let known = [
        "u", "user", "g", "group", "G", "groups", "n", "name", "r", "real", "z", "zero", "a",
        "help",
    ];
    if let Some(e) = o.unknown("id", &known) {
        eprintln!("{e}\nTry 'id --help' for more information.");
        return 1;
    }
    let user = match o.operands.first() {
        None => current_user(),
        Some(spec) => match find_user(spec) {
            Some(u) => u,
            None => {
                eprintln!("id: '{spec}': no such user");
                return 1;
            }
        },
    };
    let name = o.has(&["n", "name"]);
    let end = if o.has(&["z", "zero"]) { "\0" } else { "\n" };
    let which = [
        o.has(&["u", "user"]),
        o.has(&["g", "group"]),
        o.has(&["G", "groups"]),
    ];
    if which.iter().filter(|b| **b).count() > 1 {
        eprintln!("id: cannot print \"only\" of more than one choice");
        return 1;
    }
    if name && !which.iter().any(|b| *b) {
        eprintln!("id: cannot print only names or real IDs in default format");
        return 1;
    }
    let group = group_name(user.gid);
    if which[0] {
        print!(
            "{}{end}",
            if name {
                user.name.clone()
            } else {
                user.uid.to_string()
            }
        );
    } else if which[1] || which[2] {
        print!("{}{end}", if name { group } else { user.gid.to_string() });
    } else {
        println!(
            "uid={}({}) gid={}({}) groups={}({})",
            user.uid, user.name, user.gid, group, user.gid, group
        );
    }
    0
}

/// `whoami`.
pub fn whoami(args: std::vec::IntoIter<OsString>) -> i32 {
    if let Some(extra) = strings(args).first() {
        eprintln!("whoami: extra operand '{extra}'\nTry 'whoami --help' for more information.");
        return 1;
    }
    println!("{}", current_user().name);
    0
}

/// `logname`: the user the sandbox runs as.
pub fn logname(_: std::vec::IntoIter<OsString>) -> i32 {
    println!("{}", current_user().name);
    0
}

/// `groups [USER]...`.
pub fn groups(args: std::vec::IntoIter<OsString>) -> i32 {
    let names = strings(args);
    if names.is_empty() {
        println!("{}", group_name(current_user().gid));
        return 0;
    }
    let mut status = 0;
    for n in names {
        match find_user(&n) {
            Some(u) => println!("{n} : {}", group_name(u.gid)),
            None => {
                eprintln!("groups: '{n}': no such user");
                status = 1;
            }
        }
    }
    status
}

/// `hostname [-s|-f|-d|-i|-I|-A]`; setting the name is refused.
pub fn hostname(args: std::vec::IntoIter<OsString>) -> i32 {
    let o = Opts::parse(&strings(args), &["F", "file"]);
    let known = [
        "s",
        "short",
        "f",
        "fqdn",
        "long",
        "d",
        "domain",
        "i",
        "ip-address",
        "I",
        "all-ip-addresses",
        "A",
        "all-fqdns",
        "a",
        "alias",
        "y",
        "yp",
        "nis",
        "F",
        "file",
    ];
    if let Some(e) = o.unknown("hostname", &known) {
        eprintln!(
            "{e}\nUsage: hostname [-b] {{hostname|-F file}}         set host name (from file)"
        );
        return 1;
    }
    if !o.operands.is_empty() || o.has(&["F", "file"]) {
        eprintln!("hostname: you must be root to change the host name");
        return 1;
    }
    let name = hostname_text();
    if o.has(&["i", "ip-address"]) {
        println!("127.0.1.1");
    } else if o.has(&["I", "all-ip-addresses"]) {
        // No network interfaces: GNU prints an empty line.
        println!();
    } else if o.has(&["d", "domain", "y", "yp", "nis", "a", "alias"]) {
        println!();
    } else if o.has(&["s", "short"]) {
        println!("{}", name.split('.').next().unwrap_or(&name));
    } else {
        println!("{name}");
    }
    0
}

/// `tty [-s]`: the job's terminal when it runs on one.
pub fn tty(args: std::vec::IntoIter<OsString>) -> i32 {
    let o = Opts::parse(&strings(args), &[]);
    let silent = o.has(&["s", "silent", "quiet"]);
    if guest_support::process::terminal_size().is_some() {
        if !silent {
            println!("/dev/pts/0");
        }
        0
    } else {
        if !silent {
            println!("not a tty");
        }
        1
    }
}

/// Runs a command with this process's environment and streams.
fn run(argv: &[String], tool: &str) -> i32 {
    crate::run_command(
        argv,
        std::env::vars().collect(),
        guest_support::process::Stdio::Inherit,
        tool,
    )
}

/// `nohup COMMAND [ARG]...`: runs the command (a sandbox process gets no hangups).
pub fn nohup(args: std::vec::IntoIter<OsString>) -> i32 {
    let argv = strings(args);
    let argv: Vec<String> = match argv.first().map(String::as_str) {
        Some("--") => argv[1..].to_vec(),
        _ => argv,
    };
    if argv.is_empty() {
        eprintln!("nohup: missing operand\nTry 'nohup --help' for more information.");
        return 125;
    }
    run(&argv, "nohup")
}

/// `nice [-n N] [COMMAND [ARG]...]`: runs the command (priorities are the host's); with
/// no command, prints the niceness, 0.
pub fn nice(args: std::vec::IntoIter<OsString>) -> i32 {
    let mut argv = strings(args);
    if let Some(first) = argv.first() {
        if first == "-n" || first == "--adjustment" {
            if argv.len() < 2 {
                eprintln!("nice: option requires an argument -- 'n'");
                return 125;
            }
            argv.drain(..2);
        } else if first.starts_with("--adjustment=")
            || (first.starts_with('-')
                && first[1..]
                    .trim_start_matches(['n', '+', '-'])
                    .parse::<i64>()
                    .is_ok())
        {
            argv.remove(0);
        }
    }
    if argv.first().map(String::as_str) == Some("--") {
        argv.remove(0);
    }
    if argv.is_empty() {
        println!("0");
        return 0;
    }
    run(&argv, "nice")
}

/// `stdbuf [-i MODE] [-o MODE] [-e MODE] COMMAND [ARG]...`: runs COMMAND. A sandbox
/// process's output reaches a pipe as it writes it (no C library buffers it), so line or
/// no buffering is what every command already has; the modes are checked as GNU checks
/// them (`L`, `0`, or a size) and otherwise change nothing.
pub fn stdbuf(args: std::vec::IntoIter<OsString>) -> i32 {
    let argv = strings(args);
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        let (flag, value) = if let Some(rest) = a.strip_prefix("--") {
            match rest.split_once('=') {
                Some((k, v)) if ["input", "output", "error"].contains(&k) => {
                    (k, Some(v.to_string()))
                }
                _ if rest.is_empty() => {
                    i += 1;
                    break;
                }
                _ => {
                    eprintln!(
                        "stdbuf: unrecognized option '{a}'\nTry 'stdbuf --help' for more information."
                    );
                    return 125;
                }
            }
        } else if let Some(opt) = a.strip_prefix('-').filter(|o| !o.is_empty()) {
            // One letter, its value attached or the next argument; any letter but `i`, `o`,
            // `e` (ASCII or not) is answered as getopt would.
            let letter = opt.chars().next().unwrap_or('-');
            if !matches!(letter, 'i' | 'o' | 'e') {
                eprintln!(
                    "stdbuf: invalid option -- '{letter}'\nTry 'stdbuf --help' for more information."
                );
                return 125;
            }
            let v = if opt.len() > 1 {
                Some(opt[1..].to_string())
            } else {
                i += 1;
                argv.get(i).cloned()
            };
            (&opt[..1], v)
        } else {
            break;
        };
        let Some(v) = value else {
            eprintln!("stdbuf: option requires an argument -- '{}'", &flag[..1]);
            return 125;
        };
        let ok = v == "L"
            || v.trim_end_matches(['K', 'M', 'G', 'k', 'B'])
                .parse::<u64>()
                .is_ok();
        if !ok || (flag.starts_with('i') && v == "L") {
            eprintln!("stdbuf: invalid mode '{v}'");
            return 125;
        }
        i += 1;
    }
    let rest = &argv[i.min(argv.len())..];
    if rest.is_empty() {
        eprintln!("stdbuf: missing operand\nTry 'stdbuf --help' for more information.");
        return 125;
    }
    run(rest, "stdbuf")
}

/// `chown`/`chgrp [-R] [-h] [-v] OWNER[:GROUP] FILE...`: files here have no owners (WASI
/// keeps none); a known user and existing files are accepted and nothing changes.
pub fn chown(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<OsString> = args.collect();
    let tool = crate::base_name(args.first());
    let o = Opts::parse(&strings(args.into_iter()), &["reference", "from"]);
    let known = [
        "R",
        "recursive",
        "h",
        "no-dereference",
        "v",
        "verbose",
        "c",
        "changes",
        "f",
        "silent",
        "quiet",
        "H",
        "L",
        "P",
        "dereference",
        "reference",
        "from",
        "preserve-root",
        "no-preserve-root",
    ];
    if let Some(e) = o.unknown(&tool, &known) {
        eprintln!("{e}\nTry '{tool} --help' for more information.");
        return 1;
    }
    let mut ops = o.operands.clone();
    if o.value(&["reference"]).is_none() {
        if ops.is_empty() {
            eprintln!("{tool}: missing operand\nTry '{tool} --help' for more information.");
            return 1;
        }
        let spec = ops.remove(0);
        let (user, group) = if tool == "chgrp" {
            (None, Some(spec.as_str()))
        } else {
            match spec.split_once([':', '.']) {
                Some((u, g)) => (Some(u), Some(g)),
                None => (Some(spec.as_str()), None),
            }
        };
        let known_id = |s: &str, file: &str| {
            s.is_empty()
                || s.parse::<u32>().is_ok()
                || std::fs::read_to_string(file)
                    .unwrap_or_default()
                    .lines()
                    .any(|l| l.split(':').next() == Some(s))
        };
        if user.is_some_and(|u| !known_id(u, "/etc/passwd")) {
            eprintln!("{tool}: invalid user: '{spec}'");
            return 1;
        }
        if let Some(g) = group.filter(|g| !known_id(g, "/etc/group")) {
            eprintln!("{tool}: invalid group: '{g}'");
            return 1;
        }
    }
    if ops.is_empty() {
        eprintln!("{tool}: missing operand\nTry '{tool} --help' for more information.");
        return 1;
    }
    let mut status = 0;
    for f in &ops {
        if let Err(e) = std::fs::symlink_metadata(f) {
            eprintln!("{tool}: cannot access '{f}': {}", reason(&e));
            status = 1;
        }
    }
    status
}

/// `sync [FILE]...`: the host's file system decides when data reaches the disk.
/// The categories `locale` reports, in glibc's order.
const LOCALE_CATEGORIES: [&str; 12] = [
    "LC_CTYPE",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_COLLATE",
    "LC_MONETARY",
    "LC_MESSAGES",
    "LC_PAPER",
    "LC_NAME",
    "LC_ADDRESS",
    "LC_TELEPHONE",
    "LC_MEASUREMENT",
    "LC_IDENTIFICATION",
];

/// `locale [-a | -m | NAME...]`: the locale the environment selects, as glibc's `locale`
/// prints it (a category set on its own unquoted, one that comes from `LC_ALL` or `LANG`
/// quoted, `POSIX` when nothing sets it). The sandbox has the C and C.UTF-8 locales.
pub fn locale(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let all = var("LC_ALL");
    let lang = var("LANG");
    // The locale a category uses: LC_ALL, then its own variable, then LANG.
    let of = |cat: &str| {
        all.clone()
            .or_else(|| var(cat))
            .or_else(|| lang.clone())
            .unwrap_or_else(|| "POSIX".into())
    };
    let mut out = String::new();
    match args.first().map(String::as_str) {
        None => {
            out.push_str(&format!("LANG={}\n", lang.clone().unwrap_or_default()));
            out.push_str(&format!(
                "LANGUAGE={}\n",
                var("LANGUAGE").unwrap_or_default()
            ));
            for cat in LOCALE_CATEGORIES {
                match var(cat).filter(|_| all.is_none()) {
                    Some(own) => out.push_str(&format!("{cat}={own}\n")),
                    None => out.push_str(&format!("{cat}=\"{}\"\n", of(cat))),
                }
            }
            out.push_str(&format!("LC_ALL={}\n", all.clone().unwrap_or_default()));
        }
        Some("-a" | "--all-locales") => out.push_str("C\nC.utf8\nPOSIX\n"),
        Some("-m" | "--charmaps") => out.push_str("ANSI_X3.4-1968\nUTF-8\n"),
        Some(_) => {
            let utf8 = {
                let l = of("LC_CTYPE").to_ascii_lowercase();
                l.contains("utf-8") || l.contains("utf8")
            };
            for name in &args {
                let value = match name.as_str() {
                    "charmap" => {
                        if utf8 {
                            "UTF-8"
                        } else {
                            "ANSI_X3.4-1968"
                        }
                    }
                    "decimal_point" | "mon_decimal_point" => ".",
                    "thousands_sep" | "mon_thousands_sep" | "grouping" => "",
                    cat if LOCALE_CATEGORIES.contains(&cat) => {
                        eprintln!("locale: -k is needed to list the keywords of {cat}");
                        return 1;
                    }
                    other => {
                        eprintln!("locale: unknown name \"{other}\"");
                        return 1;
                    }
                };
                out.push_str(value);
                out.push('\n');
            }
        }
    }
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    0
}

pub fn sync(_: std::vec::IntoIter<OsString>) -> i32 {
    0
}

/// `getconf NAME`: the values a wasm32 sandbox process has.
pub fn getconf(args: std::vec::IntoIter<OsString>) -> i32 {
    let args = strings(args);
    let Some(name) = args.iter().find(|a| !a.starts_with('-')) else {
        eprintln!("Usage: getconf [-v specification] variable_name [pathname]");
        return 1;
    };
    let value = match name.as_str() {
        "_NPROCESSORS_ONLN" | "_NPROCESSORS_CONF" | "NPROCESSORS_ONLN" | "NPROCESSORS_CONF" => "1",
        "PAGESIZE" | "PAGE_SIZE" | "_SC_PAGESIZE" => "65536",
        "LONG_BIT" => "32",
        "WORD_BIT" => "32",
        "ARG_MAX" => "2097152",
        "CHILD_MAX" | "OPEN_MAX" => "1024",
        "PATH_MAX" => "4096",
        "NAME_MAX" => "255",
        "LINE_MAX" => "2048",
        "HOST_NAME_MAX" => "64",
        "CLK_TCK" => "100",
        "PATH" => "/bin:/usr/bin",
        "INT_MAX" => "2147483647",
        "UINT_MAX" => "4294967295",
        "LONG_MAX" => "2147483647",
        _ => {
            eprintln!("getconf: Unrecognized variable '{name}'");
            return 1;
        }
    };
    println!("{value}");
    0
}

/// `envsubst [SHELL-FORMAT]`: copies stdin to stdout with `$VAR` and `${VAR}` replaced by
/// the environment's values (empty when unset); with SHELL-FORMAT, only the variables it
/// names. `-v`/`--variables` lists the variables SHELL-FORMAT names.
pub fn envsubst(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let list = args.iter().any(|a| a == "-v" || a == "--variables");
    let format: Option<&String> = args.iter().find(|a| !a.starts_with('-'));
    if let Some(a) = args
        .iter()
        .find(|a| a.starts_with('-') && !matches!(a.as_str(), "-v" | "--variables"))
    {
        eprintln!(
            "envsubst: invalid option -- '{}'\nTry 'envsubst --help' for more information.",
            a.trim_start_matches('-')
        );
        return 1;
    }
    let names = |text: &str| -> Vec<String> {
        let mut out = Vec::new();
        each_reference(text, &mut |name, _| {
            out.push(name.to_string());
            None
        });
        out
    };
    if list {
        let Some(f) = format else {
            eprintln!("envsubst: missing arguments");
            return 1;
        };
        for n in names(f) {
            println!("{n}");
        }
        return 0;
    }
    let allowed: Option<Vec<String>> = format.map(|f| names(f));
    let mut input = String::new();
    if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut input) {
        eprintln!(
            "envsubst: error while reading standard input: {}",
            crate::own::reason(&e)
        );
        return 1;
    }
    let out = each_reference(&input, &mut |name, _| {
        if allowed
            .as_ref()
            .is_some_and(|a| !a.iter().any(|n| n == name))
        {
            return None;
        }
        Some(std::env::var(name).unwrap_or_default())
    });
    print!("{out}");
    0
}

/// Calls `f` for each `$NAME` / `${NAME}` in `text` (with the reference's text); returns
/// `text` with each reference replaced by what `f` gives (kept when it gives `None`).
fn each_reference(text: &str, f: &mut dyn FnMut(&str, &str) -> Option<String>) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let name_char =
        |c: u8, first: bool| c == b'_' || c.is_ascii_alphabetic() || (!first && c.is_ascii_digit());
    while i < b.len() {
        if b[i] == b'$' {
            let (start, braced) = if b.get(i + 1) == Some(&b'{') {
                (i + 2, true)
            } else {
                (i + 1, false)
            };
            let mut j = start;
            while j < b.len() && name_char(b[j], j == start) {
                j += 1;
            }
            let closed = !braced || b.get(j) == Some(&b'}');
            if j > start && closed {
                let end = if braced { j + 1 } else { j };
                let whole = &text[i..end];
                match f(&text[start..j], whole) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(whole),
                }
                i = end;
                continue;
            }
        }
        let ch = text[i..].chars().next().unwrap_or('\u{fffd}');
        out.push(ch);
        i += ch.len_utf8().max(1);
    }
    out
}
