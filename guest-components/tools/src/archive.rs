//! `gzip`/`gunzip`/`zcat`, `bzip2`/`bunzip2`/`bzcat` and `xz`/`unxz`/`xzcat`/`lzma`
//! (one tool over the formats of `codec.rs`), `tar` (the tar crate, compressed by `-z`,
//! `-j`, `-J`, `--lzma` or `-a`, detected by its magic when reading) and `zip`/`unzip` (the zip crate, stored and deflated entries), with GNU's and
//! Info-ZIP's options, messages and exit codes where agents look at them.
//!
//! Archives are untrusted input: members with `..` in their path are skipped, a leading
//! `/` is removed, and permission bits are kept to `0o777` (never setuid, setgid or
//! sticky).

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use flate2::Compression;

use crate::codec::Codec;

use guest_support::cli::{Opts, glob, mode_string, reason};

fn mode_of(path: &Path) -> Option<u32> {
    guest_support::file_mode(&path.to_string_lossy())
}

/// Sets permission bits from an archive, never special bits.
fn set_mode(path: &Path, mode: u32) {
    let _ = guest_support::set_file_mode(&path.to_string_lossy(), mode & 0o777);
}

fn mtime_of(meta: &fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

fn set_mtime(path: &Path, secs: u64) {
    if let Ok(f) = fs::File::options().write(true).open(path) {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        let _ = f.set_times(fs::FileTimes::new().set_modified(t).set_accessed(t));
    }
}

/// A relative path with no `..`, or `None`; leading `/` and `./` are dropped.
fn safe_member_path(name: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in Path::new(name).components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            Component::ParentDir => return None,
        }
    }
    Some(out)
}

/// Makes a symbolic link; an absolute target is written relative to the link's directory
/// (WASI refuses absolute targets; the relative one reaches the same sandbox path).
pub(crate) fn symlink(target: &str, at: &Path) -> io::Result<()> {
    let target = if target.starts_with('/') {
        let dir = at
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| ".".into());
        guest_support::relative_path(&dir, target)
    } else {
        target.to_string()
    };
    rustix::fs::symlink(target.as_str(), at).map_err(io::Error::from)
}

// -- gzip ---------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
pub enum GzipMode {
    Compress,
    Decompress,
    Cat,
}

/// `gzip`, `bzip2`, `xz` and `lzma` with their decompressing (`gunzip`, `bunzip2`, `unxz`,
/// `unlzma`) and `cat` (`zcat`, `bzcat`, `xzcat`, `lzcat`) names: one tool, the options
/// the four share, each format's own suffix and magic.
pub fn compressor(args: Vec<String>, codec: Codec, mode: GzipMode) -> i32 {
    let tool = match (codec, mode) {
        (Codec::Gzip, GzipMode::Compress) => "gzip",
        (Codec::Gzip, GzipMode::Decompress) => "gunzip",
        (Codec::Gzip, GzipMode::Cat) => "zcat",
        (Codec::Bzip2, GzipMode::Compress) => "bzip2",
        (Codec::Bzip2, GzipMode::Decompress) => "bunzip2",
        (Codec::Bzip2, GzipMode::Cat) => "bzcat",
        (Codec::Xz, GzipMode::Compress) => "xz",
        (Codec::Xz, GzipMode::Decompress) => "unxz",
        (Codec::Xz, GzipMode::Cat) => "xzcat",
        (Codec::Lzma, GzipMode::Compress) => "lzma",
        (Codec::Lzma, GzipMode::Decompress) => "unlzma",
        (Codec::Lzma, GzipMode::Cat) => "lzcat",
    };
    let o = Opts::parse(
        &args[1..],
        &[
            "S", "suffix", "T", "threads", "F", "format", "M", "memlimit", "C", "check",
        ],
    );
    // `xz --format=lzma` is `lzma`; `xz -F xz` (or auto) stays xz.
    let explicit_format = o.value(&["F", "format"]).is_some_and(|f| f != "auto");
    let codec = match o.value(&["F", "format"]) {
        Some("lzma" | "alone") => Codec::Lzma,
        Some("xz") => Codec::Xz,
        _ => codec,
    };
    let flags = &o.flags;
    let mut files = o.operands.clone();
    let known = [
        "c",
        "stdout",
        "to-stdout",
        "d",
        "decompress",
        "uncompress",
        "k",
        "keep",
        "f",
        "force",
        "l",
        "list",
        "t",
        "test",
        "v",
        "verbose",
        "q",
        "quiet",
        "n",
        "no-name",
        "N",
        "name",
        "r",
        "recursive",
        "S",
        "suffix",
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
        "8",
        "9",
        "fast",
        "best",
        "h",
        "help",
        "V",
        "version",
        "s",
        "small",
        "z",
        "compress",
        "e",
        "extreme",
        "0",
        "T",
        "threads",
        "F",
        "format",
        "M",
        "memlimit",
        "C",
        "check",
        "L",
        "license",
    ];
    if let Some(e) = o.unknown(tool, &known) {
        eprintln!("{e}\nTry `{tool} --help' for more information.");
        return 1;
    }
    if o.has(&["h", "help"]) {
        let what = match codec {
            Codec::Gzip => "Compress or uncompress FILEs (by default, compress FILES in-place).",
            Codec::Bzip2 => "Compress or decompress FILEs in the bzip2 format (in place).",
            Codec::Xz | Codec::Lzma => {
                "Compress or decompress FILEs in the .xz format (.lzma with --format=lzma)."
            }
        };
        println!(
            "Usage: {tool} [OPTION]... [FILE]...\n{what}\n\n  -c, --stdout      write on standard output, keep original files unchanged\n  -d, --decompress  decompress\n  -z, --compress    compress (the default)\n  -f, --force       force overwrite of output file\n  -k, --keep        keep (don't delete) input files\n  -l, --list        list compressed file contents (gzip, xz)\n  -n, --no-name     do not save or restore the original name and timestamp (gzip)\n  -q, --quiet       suppress all warnings\n  -r, --recursive   operate recursively on directories (gzip)\n  -S, --suffix=SUF  use suffix SUF on compressed files (default {})\n  -t, --test        test compressed file integrity\n  -v, --verbose     verbose mode\n  -T, --threads=N   accepted; one thread is used\n  -F, --format=FMT  xz or lzma (xz)\n  -C, --check=CHECK none, crc32, crc64 or sha256 (xz)\n  -1, --fast        compress faster\n  -9, --best        compress better\n\nWith no FILE, or when FILE is -, read standard input.",
            codec.suffix()
        );
        return 0;
    }
    if o.has(&["V", "version", "L", "license"]) {
        match codec {
            Codec::Gzip => println!("gzip 1.12 (wasbox, flate2)"),
            Codec::Bzip2 => println!(
                "bzip2, a block-sorting file compressor.  Version 1.0.8 (wasbox, libbz2-rs)."
            ),
            Codec::Xz | Codec::Lzma => {
                println!("xz (XZ Utils) 5.4.1 (wasbox, lzma-rust2)\nliblzma 5.4.1")
            }
        }
        return 0;
    }
    let check = match o.value(&["C", "check"]) {
        None | Some("crc64") => lzma_rust2::CheckType::Crc64,
        Some("crc32") => lzma_rust2::CheckType::Crc32,
        Some("none") => lzma_rust2::CheckType::None,
        Some("sha256") => lzma_rust2::CheckType::Sha256,
        Some(other) => {
            eprintln!("{tool}: {other}: Unsupported integrity check type");
            return 1;
        }
    };
    let decompress = mode != GzipMode::Compress || o.has(&["d", "decompress", "uncompress"]);
    let list = o.has(&["l", "list"]) && codec != Codec::Bzip2;
    let to_stdout = mode == GzipMode::Cat || o.has(&["c", "stdout", "to-stdout"]);
    let keep = o.has(&["k", "keep"]);
    let force = o.has(&["f", "force"]);
    let verbose = o.has(&["v", "verbose"]);
    let quiet = o.has(&["q", "quiet"]);
    let test = o.has(&["t", "test"]);
    let no_name = o.has(&["n", "no-name"]);
    let suffix = o
        .value(&["S", "suffix"])
        .unwrap_or(codec.suffix())
        .to_string();
    let level = flags
        .iter()
        .rev()
        .find_map(|(n, _)| match n.as_str() {
            "fast" => Some(1),
            "best" => Some(9),
            "0" => Some(0),
            d if d.len() == 1 && d.as_bytes()[0].is_ascii_digit() => d.parse().ok(),
            _ => None,
        })
        .unwrap_or(match codec {
            Codec::Bzip2 => 9,
            _ => 6,
        });
    if o.has(&["r", "recursive"]) {
        let mut expanded = Vec::new();
        for f in files {
            if Path::new(&f).is_dir() {
                walk(Path::new(&f), &mut |p, is_dir| {
                    if !is_dir {
                        expanded.push(p.to_string_lossy().into_owned());
                    }
                });
            } else {
                expanded.push(f);
            }
        }
        files = expanded;
    }
    if files.is_empty() {
        files.push("-".into());
    }
    let mut status = 0;
    let warn = |s: &mut i32| {
        if *s == 0 {
            *s = 2;
        }
    };
    let mut header_shown = false;
    let (mut total_c, mut total_u) = (0u64, 0u64);
    for f in &files {
        let stdin = f == "-";
        let data = if stdin {
            let mut d = Vec::new();
            if let Err(e) = io::stdin().read_to_end(&mut d) {
                eprintln!("{tool}: stdin: {}", reason(&e));
                status = 1;
                continue;
            }
            d
        } else {
            let p = Path::new(f);
            if p.is_dir() {
                if !quiet {
                    eprintln!("{tool}: {f} is a directory -- ignored");
                }
                warn(&mut status);
                continue;
            }
            match fs::read(p) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("{tool}: {f}: {}", reason(&e));
                    status = 1;
                    continue;
                }
            }
        };
        if decompress || list || test {
            if list && stdin && codec != Codec::Gzip {
                eprintln!("{tool}: --list does not support reading from standard input");
                status = 1;
                continue;
            }
            // bzip2 decompresses a file of another name to NAME.out; gzip and xz skip it.
            let guessed = codec == Codec::Bzip2 && !f.ends_with(&suffix);
            if !stdin && !to_stdout && !list && !test && !f.ends_with(&suffix) && !guessed {
                if !quiet {
                    match codec {
                        Codec::Gzip => eprintln!("{tool}: {f}: unknown suffix -- ignored"),
                        _ => eprintln!("{tool}: {f}: Filename has an unknown suffix, skipping"),
                    }
                }
                warn(&mut status);
                continue;
            }
            // xz reads .xz and .lzma alike unless told a format; `--format=lzma` (and the
            // lzma names) take any header an lzma encoder may write.
            let found = match (codec, Codec::sniff(&data)) {
                (Codec::Xz | Codec::Lzma, Some(Codec::Xz)) if !explicit_format => Some(Codec::Xz),
                (Codec::Xz, Some(Codec::Lzma)) if !explicit_format => Some(Codec::Lzma),
                (Codec::Lzma, _) if data.len() >= 13 && data[0] < 225 => Some(Codec::Lzma),
                (c, s) if s == Some(c) => Some(c),
                _ => None,
            };
            let Some(found) = found else {
                match codec {
                    Codec::Gzip => eprintln!("{tool}: {f}: not in gzip format"),
                    Codec::Bzip2 => eprintln!("{tool}: {f} is not a bzip2 file."),
                    _ => eprintln!("{tool}: {f}: File format not recognized"),
                }
                status = if codec == Codec::Bzip2 { 2 } else { 1 };
                continue;
            };
            let out = match found.decode(&data) {
                Ok(out) => out,
                Err(e) => {
                    match codec {
                        Codec::Gzip => {
                            eprintln!("{tool}: {f}: invalid compressed data--{}", short(&e))
                        }
                        Codec::Bzip2 => eprintln!(
                            "{tool}: Data integrity error when decompressing.\n\tInput file = {f}, output file = (stdout)"
                        ),
                        _ => eprintln!("{tool}: {f}: Compressed data is corrupt"),
                    }
                    status = if codec == Codec::Bzip2 { 2 } else { 1 };
                    continue;
                }
            };
            let target = if stdin {
                "stdout".to_string()
            } else if guessed {
                if !to_stdout && !test && !quiet {
                    eprintln!("{tool}: Can't guess original name for {f} -- using {f}.out");
                }
                format!("{f}.out")
            } else {
                f[..f.len() - suffix.len().min(f.len())].to_string()
            };
            if list && codec != Codec::Gzip {
                if !header_shown {
                    println!("Strms  Blocks   Compressed Uncompressed  Ratio  Check   Filename");
                    header_shown = true;
                }
                let ratio = if out.is_empty() {
                    0.0
                } else {
                    data.len() as f64 / out.len() as f64
                };
                println!(
                    "{:>5} {:>7} {:>12} {:>12}  {:5.3}  {:<7} {f}",
                    1,
                    1,
                    human_size(data.len() as u64),
                    human_size(out.len() as u64),
                    ratio,
                    if codec == Codec::Xz { "CRC64" } else { "None" }
                );
                continue;
            }
            if list {
                if !header_shown {
                    println!("         compressed        uncompressed  ratio uncompressed_name");
                    header_shown = true;
                }
                let ratio = if out.is_empty() {
                    0.0
                } else {
                    100.0 * (1.0 - data.len() as f64 / out.len() as f64)
                };
                println!(
                    "{:>19} {:>19} {:>5.1}% {target}",
                    data.len(),
                    out.len(),
                    ratio
                );
                total_c += data.len() as u64;
                total_u += out.len() as u64;
                continue;
            }
            if test {
                if verbose {
                    match codec {
                        Codec::Gzip => eprintln!("{f}:\t OK"),
                        Codec::Bzip2 if stdin => eprintln!("  (stdin): ok"),
                        Codec::Bzip2 => eprintln!("  {f}: ok"),
                        _ => eprintln!("{f} (1/1)"),
                    }
                }
                continue;
            }
            if to_stdout || stdin {
                if let Err(e) = io::stdout().lock().write_all(&out) {
                    return broken(tool, &e);
                }
                continue;
            }
            if Path::new(&target).exists() && !force {
                eprintln!("{tool}: {target} already exists;\tnot overwritten");
                warn(&mut status);
                continue;
            }
            if let Err(e) = fs::write(&target, &out) {
                eprintln!("{tool}: {target}: {}", reason(&e));
                status = 1;
                continue;
            }
            finish_file(f, &target, keep, !no_name);
            if verbose {
                let ratio = 100.0 * (1.0 - data.len() as f64 / out.len().max(1) as f64);
                eprintln!("{f}:\t{ratio:5.1}% -- replaced with {target}");
            }
        } else {
            if !stdin && !to_stdout && f.ends_with(&suffix) {
                if !quiet {
                    match codec {
                        Codec::Gzip => {
                            eprintln!("{tool}: {f} already has {suffix} suffix -- unchanged")
                        }
                        Codec::Bzip2 => {
                            eprintln!("{tool}: Input file {f} already has {suffix} suffix.")
                        }
                        _ => eprintln!("{tool}: {f}: File already has `{suffix}' suffix, skipping"),
                    }
                }
                if codec == Codec::Bzip2 {
                    status = 1;
                } else {
                    warn(&mut status);
                }
                continue;
            }
            let mut builder = flate2::GzBuilder::new().operating_system(3);
            if !stdin && !no_name && codec == Codec::Gzip {
                let base = Path::new(f)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                builder = builder.filename(base.into_bytes());
                if let Ok(m) = fs::metadata(f) {
                    builder = builder.mtime(mtime_of(&m) as u32);
                }
            }
            let compressed = if codec == Codec::Gzip {
                let mut enc = builder.write(Vec::new(), Compression::new(level.max(1)));
                enc.write_all(&data).and_then(|_| enc.finish())
            } else if codec == Codec::Xz {
                crate::codec::encode_xz(&data, level, check)
            } else {
                codec.encode(&data, level)
            };
            let compressed = match compressed {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{tool}: {f}: {}", reason(&e));
                    status = 1;
                    continue;
                }
            };
            if to_stdout || stdin {
                if let Err(e) = io::stdout().lock().write_all(&compressed) {
                    return broken(tool, &e);
                }
                continue;
            }
            let target = format!("{f}{suffix}");
            if Path::new(&target).exists() && !force {
                eprintln!("{tool}: {target} already exists;\tnot overwritten");
                warn(&mut status);
                continue;
            }
            if let Err(e) = fs::write(&target, &compressed) {
                eprintln!("{tool}: {target}: {}", reason(&e));
                status = 1;
                continue;
            }
            finish_file(f, &target, keep, true);
            if verbose {
                let ratio = if data.is_empty() {
                    0.0
                } else {
                    100.0 * (1.0 - compressed.len() as f64 / data.len() as f64)
                };
                let what = if keep { "created" } else { "replaced with" };
                eprintln!("{f}:\t{ratio:5.1}% -- {what} {target}");
            }
        }
    }
    if list && files.len() > 1 {
        let ratio = 100.0 * (1.0 - total_c as f64 / total_u.max(1) as f64);
        println!("{total_c:>19} {total_u:>19} {ratio:>5.1}% (totals)");
    }
    status
}

/// A size as `xz -l` shows it.
fn human_size(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}

/// Gives the output the input's mode and time, then removes the input unless kept.
fn finish_file(from: &str, to: &str, keep: bool, times: bool) {
    if let Some(m) = mode_of(Path::new(from)) {
        set_mode(Path::new(to), m);
    }
    if times && let Ok(m) = fs::metadata(from) {
        set_mtime(Path::new(to), mtime_of(&m));
    }
    if !keep {
        let _ = fs::remove_file(from);
    }
}

fn short(e: &io::Error) -> String {
    e.to_string()
        .split(" (os error")
        .next()
        .unwrap_or_default()
        .to_string()
}

fn broken(tool: &str, e: &io::Error) -> i32 {
    if e.kind() == io::ErrorKind::BrokenPipe {
        return 141;
    }
    eprintln!("{tool}: stdout: {}", reason(e));
    1
}

/// Every path under `dir` (itself first), directories before their contents, names sorted.
fn walk(dir: &Path, f: &mut dyn FnMut(&Path, bool)) {
    let is_dir = fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
    f(dir, is_dir);
    if !is_dir {
        return;
    }
    let mut names: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.path()).collect(),
        Err(_) => return,
    };
    names.sort();
    for n in names {
        walk(&n, f);
    }
}

// -- tar ----------------------------------------------------------------------------------

pub fn tar(mut args: Vec<String>) -> i32 {
    // Old-style bundled first argument: `tar czf out.tgz dir`.
    if args
        .get(1)
        .is_some_and(|a| !a.starts_with('-') && a.chars().all(|c| c.is_ascii_alphabetic()))
    {
        args[1] = format!("-{}", args[1]);
    }
    let with_value = [
        "f",
        "file",
        "C",
        "directory",
        "strip-components",
        "exclude",
        "T",
        "files-from",
        "transform",
        "owner",
        "group",
        "mode",
        "mtime",
        "xform",
        "b",
        "blocking-factor",
        "format",
        "H",
    ];
    let o = Opts::parse(&args[1..], &with_value);
    let flags = &o.flags;
    let known = [
        "c",
        "create",
        "x",
        "extract",
        "get",
        "t",
        "list",
        "f",
        "file",
        "z",
        "gzip",
        "gunzip",
        "ungzip",
        "j",
        "bzip2",
        "J",
        "xz",
        "lzma",
        "v",
        "verbose",
        "C",
        "directory",
        "strip-components",
        "exclude",
        "O",
        "to-stdout",
        "p",
        "preserve-permissions",
        "same-permissions",
        "k",
        "keep-old-files",
        "overwrite",
        "a",
        "auto-compress",
        "h",
        "dereference",
        "no-same-owner",
        "no-same-permissions",
        "same-owner",
        "m",
        "touch",
        "T",
        "files-from",
        "owner",
        "group",
        "mode",
        "mtime",
        "numeric-owner",
        "sort",
        "format",
        "H",
        "b",
        "blocking-factor",
        "wildcards",
        "no-recursion",
        "help",
        "version",
        "j",
        "J",
        "bzip2",
        "xz",
        "zstd",
        "lzma",
        "transform",
        "xform",
        "skip-old-files",
        "one-file-system",
        "totals",
        "show-transformed-names",
        "no-overwrite-dir",
        "checkpoint",
        "warning",
        "ignore-zeros",
        "i",
    ];
    if let Some(e) = o.unknown("tar", &known) {
        eprintln!("{e}\nTry 'tar --help' or 'tar --usage' for more information.");
        return 2;
    }
    if o.has(&["help"]) {
        println!(
            "Usage: tar [OPTION...] [FILE]...\n  -c, --create               create a new archive\n  -x, --extract, --get       extract files from an archive\n  -t, --list                 list the contents of an archive\n  -f, --file=ARCHIVE         use archive file ARCHIVE (- is standard input/output)\n  -z, --gzip                 filter the archive through gzip\n  -j, --bzip2                filter the archive through bzip2\n  -J, --xz                   filter the archive through xz\n      --lzma                 filter the archive through lzma\n  -a, --auto-compress        use archive suffix to determine the compression\n  -C, --directory=DIR        change to directory DIR\n  -v, --verbose              verbosely list files processed\n  -O, --to-stdout            extract files to standard output\n  -k, --keep-old-files       don't replace existing files when extracting\n      --strip-components=N   strip N leading components from file names\n      --exclude=PATTERN      exclude files, given as a PATTERN\n  -T, --files-from=FILE      get names to extract or create from FILE"
        );
        return 0;
    }
    if o.has(&["version"]) {
        println!("tar (GNU tar) 1.34\n(wasbox, tar crate)");
        return 0;
    }
    if o.has(&["zstd"]) {
        eprintln!(
            "tar: zstd compression is not available in this sandbox (gzip -z, bzip2 -j, xz -J and --lzma are)"
        );
        return 2;
    }
    let modes: Vec<char> = flags
        .iter()
        .filter_map(|(n, _)| match n.as_str() {
            "c" | "create" => Some('c'),
            "x" | "extract" | "get" => Some('x'),
            "t" | "list" => Some('t'),
            _ => None,
        })
        .collect();
    let mode = match modes.as_slice() {
        [] => {
            eprintln!(
                "tar: You must specify one of the '-Acdtrux', '--delete' or '--test-label' options\nTry 'tar --help' or 'tar --usage' for more information."
            );
            return 2;
        }
        [m, rest @ ..] if rest.iter().all(|r| r == m) => *m,
        _ => {
            eprintln!(
                "tar: You may not specify more than one '-Acdtrux', '--delete' or  '--test-label' option\nTry 'tar --help' or 'tar --usage' for more information."
            );
            return 2;
        }
    };
    let archive = o.value(&["f", "file"]).unwrap_or("-").to_string();
    // The last compression option wins, as in GNU tar; `-a` goes by the archive's name.
    let mut codec = flags.iter().rev().find_map(|(n, _)| match n.as_str() {
        "z" | "gzip" | "gunzip" | "ungzip" => Some(Codec::Gzip),
        "j" | "bzip2" => Some(Codec::Bzip2),
        "J" | "xz" => Some(Codec::Xz),
        "lzma" => Some(Codec::Lzma),
        _ => None,
    });
    if o.has(&["a", "auto-compress"]) && mode == 'c' {
        codec = Codec::by_name(&archive).or(codec);
    }
    let verbose = flags
        .iter()
        .filter(|(n, _)| n == "v" || n == "verbose")
        .count();
    let dir = o.value(&["C", "directory"]).map(PathBuf::from);
    let strip: usize = match o.value(&["strip-components"]).map(str::parse) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("tar: Invalid number for --strip-components");
            return 2;
        }
    };
    let excludes: Vec<String> = flags
        .iter()
        .filter(|(n, _)| n == "exclude")
        .filter_map(|(_, v)| v.clone())
        .collect();
    let mut names = o.operands.clone();
    if let Some(list) = o.value(&["T", "files-from"]) {
        match fs::read_to_string(list) {
            Ok(t) => names.extend(t.lines().filter(|l| !l.is_empty()).map(String::from)),
            Err(e) => {
                eprintln!("tar: {list}: Cannot open: {}", reason(&e));
                return 2;
            }
        }
    }
    let opts = TarOpts {
        verbose,
        dir,
        strip,
        excludes,
        to_stdout: o.has(&["O", "to-stdout"]),
        keep_old: o.has(&["k", "keep-old-files", "skip-old-files"]),
        touch: o.has(&["m", "touch"]),
        recursion: !o.has(&["no-recursion"]),
        archive_on_stdout: archive == "-",
    };
    match mode {
        'c' => tar_create(&archive, codec, &names, &opts),
        _ => tar_read(&archive, mode == 'x', &names, &opts),
    }
}

struct TarOpts {
    verbose: usize,
    dir: Option<PathBuf>,
    strip: usize,
    excludes: Vec<String>,
    to_stdout: bool,
    keep_old: bool,
    touch: bool,
    recursion: bool,
    archive_on_stdout: bool,
}

impl TarOpts {
    fn excluded(&self, name: &str) -> bool {
        let trimmed = name.trim_end_matches('/');
        self.excludes
            .iter()
            .any(|pat| trimmed.split('/').any(|part| glob(pat, part)) || glob(pat, trimmed))
    }
}

fn tar_create(archive: &str, codec: Option<Codec>, names: &[String], o: &TarOpts) -> i32 {
    if names.is_empty() {
        eprintln!(
            "tar: Cowardly refusing to create an empty archive\nTry 'tar --help' or 'tar --usage' for more information."
        );
        return 2;
    }
    let base = o.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    let mut status = 0;
    let mut stripped_slash = false;
    for name in names {
        let member_root = name.trim_start_matches('/');
        if member_root.len() != name.len() && !stripped_slash {
            eprintln!("tar: Removing leading `/' from member names");
            stripped_slash = true;
        }
        let on_disk = if name.starts_with('/') {
            PathBuf::from(name)
        } else {
            base.join(name)
        };
        if fs::symlink_metadata(&on_disk).is_err() {
            eprintln!("tar: {name}: Cannot stat: No such file or directory");
            status = 2;
            continue;
        }
        let mut entries: Vec<(PathBuf, bool)> = Vec::new();
        if o.recursion {
            walk(&on_disk, &mut |p, is_dir| {
                entries.push((p.to_path_buf(), is_dir))
            });
        } else {
            let is_dir = on_disk.is_dir();
            entries.push((on_disk.clone(), is_dir));
        }
        for (path, is_dir) in entries {
            let rel = path.strip_prefix(&on_disk).unwrap_or(Path::new(""));
            let mut member = PathBuf::from(if member_root.is_empty() {
                "."
            } else {
                member_root
            });
            if !rel.as_os_str().is_empty() {
                member.push(rel);
            }
            let mut member = member.to_string_lossy().into_owned();
            if is_dir && !member.ends_with('/') {
                member.push('/');
            }
            if o.excluded(&member) {
                continue;
            }
            if let Err(e) = append(&mut builder, &path, &member, is_dir) {
                eprintln!("tar: {}: {}", path.display(), reason(&e));
                status = 2;
                continue;
            }
            if o.verbose > 0 {
                if o.archive_on_stdout {
                    eprintln!("{member}");
                } else {
                    println!("{member}");
                }
            }
        }
    }
    let bytes = match builder.into_inner() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("tar: {}", reason(&e));
            return 2;
        }
    };
    let bytes = if let Some(codec) = codec {
        match codec.encode(&bytes, if codec == Codec::Bzip2 { 9 } else { 6 }) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("tar: {}", reason(&e));
                return 2;
            }
        }
    } else {
        bytes
    };
    let written = if archive == "-" {
        io::stdout().lock().write_all(&bytes)
    } else {
        fs::write(archive, &bytes)
    };
    if let Err(e) = written {
        eprintln!("tar: {archive}: Cannot write: {}", reason(&e));
        return 2;
    }
    if status != 0 {
        eprintln!("tar: Exiting with failure status due to previous errors");
    }
    status
}

fn append(
    b: &mut tar::Builder<Vec<u8>>,
    path: &Path,
    member: &str,
    is_dir: bool,
) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    let mut h = tar::Header::new_gnu();
    h.set_mtime(mtime_of(&meta));
    h.set_uid(0);
    h.set_gid(0);
    let _ = h.set_username("root");
    let _ = h.set_groupname("root");
    // The tar crate drops `.` components from names; GNU tar keeps `./x` as given (`tar
    // -C dir -cf a.tar .`), so such a name short enough for the header goes in as it is.
    let verbatim = member.starts_with("./") && member.len() <= 100;
    if meta.file_type().is_symlink() {
        let target = fs::read_link(path)?;
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_mode(0o777);
        h.set_size(0);
        if verbatim {
            h.set_link_name(&target)?;
            raw_name(&mut h, member);
            return b.append(&h, io::empty());
        }
        b.append_link(&mut h, member, target)
    } else if is_dir {
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(mode_of(path).unwrap_or(0o755) & 0o7777);
        h.set_size(0);
        if verbatim {
            raw_name(&mut h, member);
            return b.append(&h, io::empty());
        }
        b.append_data(&mut h, member, io::empty())
    } else {
        let data = fs::read(path)?;
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(mode_of(path).unwrap_or(0o644) & 0o7777);
        h.set_size(data.len() as u64);
        if verbatim {
            raw_name(&mut h, member);
            return b.append(&h, &data[..]);
        }
        b.append_data(&mut h, member, &data[..])
    }
}

/// Writes `name` (at most 100 bytes) into the header's name field as it is, and the
/// checksum after it.
fn raw_name(h: &mut tar::Header, name: &str) {
    let field = &mut h.as_old_mut().name;
    field.fill(0);
    field[..name.len()].copy_from_slice(name.as_bytes());
    h.set_cksum();
}

fn tar_read(archive: &str, extract: bool, names: &[String], o: &TarOpts) -> i32 {
    let mut data = Vec::new();
    let read = if archive == "-" {
        io::stdin().read_to_end(&mut data).map(|_| ())
    } else {
        fs::read(archive).map(|d| data = d)
    };
    if let Err(e) = read {
        eprintln!(
            "tar: {archive}: Cannot open: {}\ntar: Error is not recoverable: exiting now",
            reason(&e)
        );
        return 2;
    }
    // Compressed archives are recognised by their magic, whatever the options said.
    if let Some(codec) = Codec::sniff(&data) {
        match codec.decode(&data) {
            Ok(out) => data = out,
            Err(_) => {
                eprintln!(
                    "tar: Child returned status 1\ntar: Error is not recoverable: exiting now"
                );
                return 2;
            }
        }
    }
    // A tar starts with a header block: ustar magic, an old-style header with a checksum,
    // or the zero blocks of an empty archive.
    let looks_like_tar = data.get(..512).is_some_and(|head| {
        let h = tar::Header::from_byte_slice(head);
        &head[257..262] == b"ustar"
            || head.iter().all(|&b| b == 0)
            || (h.as_old().cksum.iter().any(|&b| b != 0) && h.cksum().is_ok())
    });
    if !looks_like_tar {
        eprintln!(
            "tar: This does not look like a tar archive\ntar: Exiting with failure status due to previous errors"
        );
        return 2;
    }
    let base = o.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let mut ar = tar::Archive::new(&data[..]);
    let entries = match ar.entries() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("tar: {}", reason(&e));
            return 2;
        }
    };
    let mut status = 0;
    let mut matched = vec![false; names.len()];
    let mut stripped_slash = false;
    let mut dir_times: Vec<(PathBuf, u64)> = Vec::new();
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                eprintln!("tar: Unexpected EOF in archive: {}", reason(&e));
                status = 2;
                break;
            }
        };
        let raw_name = entry
            .path()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let kind = entry.header().entry_type();
        let shown = if kind.is_dir() && !raw_name.ends_with('/') {
            format!("{raw_name}/")
        } else {
            raw_name.clone()
        };
        if !names.is_empty() {
            let trimmed = shown.trim_end_matches('/');
            let hit = names.iter().position(|n| {
                let n = n.trim_end_matches('/');
                trimmed == n || trimmed.starts_with(&format!("{n}/"))
            });
            match hit {
                Some(i) => matched[i] = true,
                None => continue,
            }
        }
        if o.excluded(&shown) {
            continue;
        }
        let mode = entry.header().mode().unwrap_or(0o644);
        let size = entry.header().size().unwrap_or(0);
        let mtime = entry.header().mtime().unwrap_or(0);
        let link = entry
            .link_name()
            .ok()
            .flatten()
            .map(|l| l.to_string_lossy().into_owned());
        if !extract || o.verbose > 0 {
            let line = if (!extract && o.verbose > 0) || o.verbose > 1 {
                let (y, mo, d, h, mi, _, _) = guest_support::civil_time(mtime as i64);
                let user = entry
                    .header()
                    .username()
                    .ok()
                    .flatten()
                    .unwrap_or("root")
                    .to_string();
                let group = entry
                    .header()
                    .groupname()
                    .ok()
                    .flatten()
                    .unwrap_or("root")
                    .to_string();
                let ug = format!("{user}/{group}");
                let kc = if kind.is_dir() {
                    'd'
                } else if kind.is_symlink() {
                    'l'
                } else if kind.is_hard_link() {
                    'h'
                } else {
                    '-'
                };
                let width = 18usize.saturating_sub(ug.len()).max(1);
                let mut l = format!(
                    "{} {ug} {size:>width$} {y:04}-{mo:02}-{d:02} {h:02}:{mi:02} {shown}",
                    mode_string(mode, if kc == 'h' { '-' } else { kc })
                );
                if let Some(t) = &link {
                    if kind.is_symlink() {
                        l.push_str(&format!(" -> {t}"));
                    } else if kind.is_hard_link() {
                        l.push_str(&format!(" link to {t}"));
                    }
                }
                l
            } else {
                shown.clone()
            };
            if extract && o.to_stdout {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
        }
        if !extract {
            continue;
        }
        let Some(rel) = safe_member_path(&raw_name) else {
            eprintln!("tar: {raw_name}: Member name contains '..'");
            status = 2;
            continue;
        };
        if raw_name.starts_with('/') && !stripped_slash {
            eprintln!("tar: Removing leading `/' from member names");
            stripped_slash = true;
        }
        let rel: PathBuf = rel.components().skip(o.strip).collect();
        if rel.as_os_str().is_empty() {
            continue;
        }
        if o.to_stdout {
            if kind.is_file() {
                let mut buf = Vec::new();
                let _ = entry.read_to_end(&mut buf);
                if let Err(e) = io::stdout().lock().write_all(&buf) {
                    return broken("tar", &e);
                }
            }
            continue;
        }
        let target = base.join(&rel);
        if let Some(parent) = target.parent() {
            let _ = fs::create_dir_all(parent);
        }
        let result: io::Result<()> = if kind.is_dir() {
            let r = match fs::create_dir(&target) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && target.is_dir() => Ok(()),
                r => r,
            };
            if r.is_ok() {
                set_mode(&target, mode);
                dir_times.push((target.clone(), mtime));
            }
            r
        } else if o.keep_old && fs::symlink_metadata(&target).is_ok() {
            continue;
        } else if kind.is_symlink() {
            let _ = fs::remove_file(&target);
            symlink(link.as_deref().unwrap_or(""), &target)
        } else if kind.is_hard_link() {
            let from = link
                .as_deref()
                .and_then(safe_member_path)
                .map(|p| base.join(p.components().skip(o.strip).collect::<PathBuf>()));
            match from {
                Some(from) => {
                    let _ = fs::remove_file(&target);
                    fs::copy(&from, &target).map(|_| ())
                }
                None => Err(io::Error::other("Cannot hard link outside the archive")),
            }
        } else if kind.is_file() || kind == tar::EntryType::Continuous {
            let mut buf = Vec::new();
            entry.read_to_end(&mut buf).and_then(|_| {
                let _ = fs::remove_file(&target);
                fs::write(&target, &buf)?;
                set_mode(&target, mode);
                if !o.touch {
                    set_mtime(&target, mtime);
                }
                Ok(())
            })
        } else {
            // Devices, fifos and other special files are not made in a sandbox.
            eprintln!("tar: {raw_name}: special file not extracted");
            status = 2;
            continue;
        };
        if let Err(e) = result {
            eprintln!("tar: {}: Cannot open: {}", rel.display(), reason(&e));
            status = 2;
        }
    }
    if !o.touch {
        for (d, t) in dir_times.iter().rev() {
            set_mtime(d, *t);
        }
    }
    for (n, hit) in names.iter().zip(&matched) {
        if !hit {
            eprintln!("tar: {n}: Not found in archive");
            status = 2;
        }
    }
    if status != 0 {
        eprintln!("tar: Exiting with failure status due to previous errors");
    }
    status
}

// -- zip / unzip --------------------------------------------------------------------------

fn zip_time(secs: u64) -> zip::DateTime {
    let (y, mo, d, h, mi, s, _) = guest_support::civil_time(secs as i64);
    zip::DateTime::from_date_and_time(
        y.clamp(1980, 2107) as u16,
        mo as u8,
        d as u8,
        h as u8,
        mi as u8,
        s as u8,
    )
    .unwrap_or_default()
}

pub fn zip(args: Vec<String>) -> i32 {
    let o = Opts::parse(&args[1..], &["x", "exclude", "i", "include"]);
    let (flags, operands) = (&o.flags, &o.operands);
    let known = [
        "r",
        "recurse-paths",
        "q",
        "quiet",
        "j",
        "junk-paths",
        "0",
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
        "8",
        "9",
        "x",
        "exclude",
        "i",
        "include",
        "v",
        "y",
        "symlinks",
        "D",
        "no-dir-entries",
        "m",
        "move",
        "u",
        "update",
        "f",
        "freshen",
        "d",
        "delete",
        "X",
        "h",
        "help",
    ];
    if let Some((n, _)) = flags.iter().find(|(n, _)| !known.contains(&n.as_str())) {
        eprintln!("zip error: Invalid command arguments (no such option: {n})");
        return 16;
    }
    if o.has(&["h", "help"]) || operands.is_empty() {
        println!(
            "Usage: zip [-options] zipfile list\n  -r   recurse into directories     -j   junk (don't record) directory names\n  -0   store only                   -1 .. -9  compression level\n  -q   quiet operation              -x   exclude the following names\n  -y   store symbolic links as the link\n  -d   delete entries in zipfile    -m   move into zipfile (delete OS files)\n  -D   do not add directory entries"
        );
        return 0;
    }
    let mut zipname = operands[0].clone();
    if !zipname.contains('.') || Path::new(&zipname).extension().is_none() {
        zipname.push_str(".zip");
    }
    let recurse = o.has(&["r", "recurse-paths"]);
    let quiet = o.has(&["q", "quiet"]);
    let junk = o.has(&["j", "junk-paths"]);
    let symlinks = o.has(&["y", "symlinks"]);
    let no_dirs = o.has(&["D", "no-dir-entries"]);
    let delete = o.has(&["d", "delete"]);
    let move_files = o.has(&["m", "move"]);
    let store = o.has(&["0"]);
    let excludes: Vec<String> = flags
        .iter()
        .filter(|(n, _)| n == "x" || n == "exclude")
        .filter_map(|(_, v)| v.clone())
        .collect();
    let level: Option<i64> = flags.iter().rev().find_map(|(n, _)| {
        (n.len() == 1 && n.as_bytes()[0].is_ascii_digit()).then(|| n.parse().unwrap_or(6))
    });

    // Existing entries, kept unless replaced (or deleted with -d).
    let mut existing: Vec<ZipEntry> = Vec::new();
    if let Ok(bytes) = fs::read(&zipname) {
        match zip::ZipArchive::new(io::Cursor::new(bytes)) {
            Ok(mut ar) => {
                for i in 0..ar.len() {
                    let Ok(mut f) = ar.by_index(i) else { continue };
                    let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
                    let mut buf = Vec::new();
                    let _ = f.read_to_end(&mut buf);
                    let mtime = f.last_modified().unwrap_or_default();
                    existing.push((name, buf, f.unix_mode(), mtime, f.is_dir(), f.is_symlink()));
                }
            }
            Err(_) => {
                eprintln!("zip error: Zip file structure invalid ({zipname})");
                return 3;
            }
        }
    }
    let mut status = 0;
    let files = &operands[1..];
    if delete {
        let before = existing.len();
        existing.retain(|(name, ..)| {
            let gone = files.iter().any(|p| glob(p, name));
            if gone && !quiet {
                println!("deleting: {name}");
            }
            !gone
        });
        if before == existing.len() {
            eprintln!("zip warning: nothing to do!");
            return 12;
        }
        return write_zip(&zipname, &existing, &[], store, level);
    }
    let mut added: Vec<(String, PathBuf, bool)> = Vec::new();
    for f in files {
        let p = Path::new(f);
        if fs::symlink_metadata(p).is_err() {
            eprintln!("\tzip warning: name not matched: {f}");
            status = 12;
            continue;
        }
        let mut push = |path: &Path, is_dir: bool| {
            let mut name = if junk {
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            } else {
                let s = path.to_string_lossy();
                s.trim_start_matches("./")
                    .trim_start_matches('/')
                    .to_string()
            };
            if is_dir {
                if junk || no_dirs {
                    return;
                }
                name.push('/');
            }
            if excludes.iter().any(|x| glob(x, &name)) {
                return;
            }
            added.push((name, path.to_path_buf(), is_dir));
        };
        let is_link = fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
        if p.is_dir() && !(is_link && symlinks) {
            if recurse {
                walk(p, &mut |q, d| push(q, d));
            } else {
                push(p, true);
            }
        } else {
            push(p, false);
        }
    }
    if added.is_empty() && status != 0 {
        eprintln!("\nzip error: Nothing to do! ({zipname})");
        return 12;
    }
    let mut new_entries = Vec::new();
    for (name, path, is_dir) in &added {
        let meta = match fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) => {
                eprintln!(
                    "\tzip warning: could not open for reading: {}: {}",
                    path.display(),
                    reason(&e)
                );
                continue;
            }
        };
        let link = meta.file_type().is_symlink() && symlinks;
        let data = if *is_dir {
            Vec::new()
        } else if link {
            fs::read_link(path)
                .map(|t| t.to_string_lossy().into_owned().into_bytes())
                .unwrap_or_default()
        } else {
            match fs::read(path) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!(
                        "\tzip warning: could not open for reading: {}: {}",
                        path.display(),
                        reason(&e)
                    );
                    status = 18;
                    continue;
                }
            }
        };
        let replacing = existing.iter().position(|e| e.0 == *name);
        if let Some(i) = replacing {
            existing.remove(i);
        }
        if !quiet {
            let verb = if replacing.is_some() {
                "updating"
            } else {
                "  adding"
            };
            let how = if *is_dir || data.is_empty() || store || level == Some(0) {
                "stored 0%".to_string()
            } else {
                let compressed = deflated_size(&data, level);
                if compressed >= data.len() {
                    "stored 0%".to_string()
                } else {
                    format!(
                        "deflated {:.0}%",
                        100.0 * (1.0 - compressed as f64 / data.len() as f64)
                    )
                }
            };
            println!("{verb}: {name} ({how})");
        }
        let mode = mode_of(path).unwrap_or(if *is_dir { 0o755 } else { 0o644 });
        let mtime = zip_time(mtime_of(&meta));
        new_entries.push((name.clone(), data, Some(mode), mtime, *is_dir, link));
    }
    let code = write_zip(&zipname, &existing, &new_entries, store, level);
    if code != 0 {
        return code;
    }
    if move_files {
        for (_, path, is_dir) in added.iter().rev() {
            let _ = if *is_dir {
                fs::remove_dir(path)
            } else {
                fs::remove_file(path)
            };
        }
    }
    status
}

fn deflated_size(data: &[u8], level: Option<i64>) -> usize {
    let mut enc = flate2::write::DeflateEncoder::new(
        Vec::new(),
        Compression::new(level.unwrap_or(6).clamp(0, 9) as u32),
    );
    let _ = enc.write_all(data);
    enc.finish().map(|v| v.len()).unwrap_or(usize::MAX)
}

type ZipEntry = (String, Vec<u8>, Option<u32>, zip::DateTime, bool, bool);

fn write_zip(
    zipname: &str,
    existing: &[ZipEntry],
    new: &[ZipEntry],
    store: bool,
    level: Option<i64>,
) -> i32 {
    let mut w = zip::ZipWriter::new(io::Cursor::new(Vec::new()));
    for (name, data, mode, mtime, is_dir, link) in existing.iter().chain(new) {
        let method = if store
            || *is_dir
            || data.is_empty()
            || level == Some(0)
            || deflated_size(data, level) >= data.len()
        {
            zip::CompressionMethod::Stored
        } else {
            zip::CompressionMethod::Deflated
        };
        let mut opts = zip::write::SimpleFileOptions::default()
            .compression_method(method)
            .last_modified_time(*mtime);
        if method == zip::CompressionMethod::Deflated {
            opts = opts.compression_level(level);
        }
        if let Some(m) = mode {
            opts = opts.unix_permissions(m & 0o777);
        }
        let r = if *is_dir {
            w.add_directory(name.trim_end_matches('/'), opts)
        } else if *link {
            w.add_symlink(name, String::from_utf8_lossy(data), opts)
        } else {
            w.start_file(name, opts)
                .and_then(|_| w.write_all(data).map_err(zip::result::ZipError::from))
        };
        if let Err(e) = r {
            eprintln!("zip error: {e}");
            return 15;
        }
    }
    match w.finish() {
        Ok(c) => match fs::write(zipname, c.into_inner()) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!(
                    "zip error: Could not create output file ({zipname}): {}",
                    reason(&e)
                );
                15
            }
        },
        Err(e) => {
            eprintln!("zip error: {e}");
            15
        }
    }
}

pub fn unzip(args: Vec<String>) -> i32 {
    let o = Opts::parse(&args[1..], &["d", "x"]);
    let (flags, operands) = (&o.flags, &o.operands);
    let known = [
        "l", "o", "n", "q", "qq", "d", "p", "t", "j", "v", "x", "Z", "1", "h", "hh", "a", "L", "X",
        "C",
    ];
    if let Some((n, _)) = flags.iter().find(|(n, _)| !known.contains(&n.as_str())) {
        eprintln!("error:  -{n}: unknown option");
        return 10;
    }
    let Some(zipname) = operands.first().cloned() else {
        println!(
            "UnZip 6.00 (wasbox). Usage: unzip [-Z] [-opts[modifiers]] file[.zip] [list] [-x xlist] [-d exdir]\n  -p  extract files to pipe, no messages     -l  list files (short format)\n  -t  test compressed archive data            -d  extract files into exdir\n  -o  overwrite files WITHOUT prompting       -n  never overwrite existing files\n  -j  junk paths (do not make directories)    -q  quiet mode (-qq => quieter)\n  -x  exclude files that follow (in xlist)"
        );
        return 0;
    };
    let zipname = if !Path::new(&zipname).exists() && Path::new(&format!("{zipname}.zip")).exists()
    {
        format!("{zipname}.zip")
    } else {
        zipname
    };
    let bytes = match fs::read(&zipname) {
        Ok(b) => b,
        Err(_) => {
            eprintln!("unzip:  cannot find or open {zipname}, {zipname}.zip or {zipname}.ZIP.");
            return 9;
        }
    };
    let mut ar = match zip::ZipArchive::new(io::Cursor::new(bytes)) {
        Ok(a) => a,
        Err(_) => {
            println!("Archive:  {zipname}");
            eprintln!(
                "  End-of-central-directory signature not found.  Either this file is not\n  a zipfile, or it constitutes one disk of a multi-part archive.  In the\n  latter case the central directory and zipfile comment will be found on\n  the last disk(s) of this archive.\nunzip:  cannot find zipfile directory in one of {zipname} or\n        {zipname}.zip, and cannot find {zipname}.ZIP, period."
            );
            return 9;
        }
    };
    let quiet = flags.iter().filter(|(n, _)| n.starts_with('q')).count();
    let list = o.has(&["l", "v", "Z", "1"]);
    let pipe = o.has(&["p"]);
    let test = o.has(&["t"]);
    let overwrite = o.has(&["o"]);
    let never = o.has(&["n"]);
    let junk = o.has(&["j"]);
    let dest = PathBuf::from(o.value(&["d"]).unwrap_or("."));
    let mut excludes: Vec<String> = flags
        .iter()
        .filter(|(n, _)| n == "x")
        .filter_map(|(_, v)| v.clone())
        .collect();
    // `-x` also takes the operands after it.
    let mut members: Vec<String> = Vec::new();
    let mut after_x = false;
    for (i, a) in args.iter().enumerate().skip(1) {
        if a == "-x" {
            after_x = true;
            continue;
        }
        // The list after -x ends at the next option.
        if a.starts_with('-') {
            after_x = false;
        } else if after_x
            && args.get(i.saturating_sub(1)).map(String::as_str) != Some("-d")
            && !excludes.contains(a)
        {
            excludes.push(a.clone());
        }
    }
    for m in &operands[1..] {
        if !excludes.contains(m) {
            members.push(m.clone());
        }
    }
    let wanted = |name: &str| {
        (members.is_empty() || members.iter().any(|m| glob(m, name)))
            && !excludes.iter().any(|x| glob(x, name))
    };
    // `-Z1` (zipinfo -1): the names alone, one per line, nothing else.
    if o.has(&["Z"]) && o.has(&["1"]) {
        for i in 0..ar.len() {
            let Ok(f) = ar.by_index(i) else { continue };
            let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
            if wanted(&name) {
                println!("{name}");
            }
        }
        return 0;
    }
    if !pipe && (quiet == 0 || list) {
        println!("Archive:  {zipname}");
    }
    if list {
        println!("  Length      Date    Time    Name\n---------  ---------- -----   ----");
        let (mut total, mut count) = (0u64, 0usize);
        for i in 0..ar.len() {
            let Ok(f) = ar.by_index(i) else { continue };
            let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
            if !wanted(&name) {
                continue;
            }
            let t = f.last_modified().unwrap_or_default();
            println!(
                "{:>9}  {:04}-{:02}-{:02} {:02}:{:02}   {name}",
                f.size(),
                t.year(),
                t.month(),
                t.day(),
                t.hour(),
                t.minute()
            );
            total += f.size();
            count += 1;
        }
        println!(
            "---------                     -------\n{total:>9}                     {count} file{}",
            if count == 1 { "" } else { "s" }
        );
        return 0;
    }
    let mut status = 0;
    let mut all: Option<bool> = None;
    for i in 0..ar.len() {
        let mut f = match ar.by_index(i) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: {e}");
                status = 2;
                continue;
            }
        };
        let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
        if !wanted(&name) {
            continue;
        }
        let mut data = Vec::new();
        if !f.is_dir()
            && let Err(e) = f.read_to_end(&mut data)
        {
            eprintln!("  error:  invalid compressed data to inflate {name} ({e})");
            status = 2;
            continue;
        }
        if test {
            if quiet == 0 {
                println!("    testing: {name:<24} OK");
            }
            continue;
        }
        if pipe {
            if !f.is_dir()
                && let Err(e) = io::stdout().lock().write_all(&data)
            {
                return broken("unzip", &e);
            }
            continue;
        }
        let Some(rel) = safe_member_path(&name) else {
            eprintln!("warning:  skipped \"../\" path component(s) in {name}");
            status = 1;
            continue;
        };
        let rel = if junk {
            match rel.file_name() {
                Some(n) if !f.is_dir() => PathBuf::from(n),
                _ => continue,
            }
        } else {
            rel
        };
        let target = dest.join(&rel);
        if f.is_dir() {
            if !target.is_dir() {
                if quiet == 0 {
                    println!("   creating: {}", shown_path(&dest, &name));
                }
                if let Err(e) = fs::create_dir_all(&target) {
                    eprintln!(
                        "checkdir error:  cannot create {}\n                 {}",
                        target.display(),
                        reason(&e)
                    );
                    status = 1;
                    continue;
                }
            }
            if let Some(m) = f.unix_mode() {
                set_mode(&target, m);
            }
            continue;
        }
        if let Some(parent) = target.parent()
            && !parent.as_os_str().is_empty()
            && !parent.is_dir()
        {
            if quiet == 0 && !junk {
                println!("   creating: {}/", parent.display());
            }
            let _ = fs::create_dir_all(parent);
        }
        if fs::symlink_metadata(&target).is_ok() && !overwrite {
            if never || all == Some(false) {
                continue;
            }
            if all != Some(true) {
                eprint!(
                    "replace {}? [y]es, [n]o, [A]ll, [N]one, [r]ename: ",
                    target.display()
                );
                let mut answer = String::new();
                let got = io::stdin().read_line(&mut answer).unwrap_or(0);
                match answer.trim() {
                    _ if got == 0 => {
                        eprintln!(" NULL\n(EOF or read error, treating as \"[N]one\" ...)");
                        all = Some(false);
                        status = 1;
                        continue;
                    }
                    "y" | "yes" => {}
                    "A" => all = Some(true),
                    "N" => {
                        all = Some(false);
                        continue;
                    }
                    _ => continue,
                }
            }
        }
        let verb = if f.is_symlink() {
            "    linking"
        } else if f.compression() == zip::CompressionMethod::Stored {
            " extracting"
        } else {
            "  inflating"
        };
        let _ = fs::remove_file(&target);
        let result = if f.is_symlink() {
            symlink(&String::from_utf8_lossy(&data), &target)
        } else {
            fs::write(&target, &data)
        };
        if let Err(e) = result {
            eprintln!(
                "error:  cannot create {}\n        {}",
                target.display(),
                reason(&e)
            );
            status = 1;
            continue;
        }
        if quiet == 0 {
            if f.is_symlink() {
                println!(
                    "{verb}: {} -> {}",
                    shown_path(&dest, &rel.to_string_lossy()),
                    String::from_utf8_lossy(&data)
                );
            } else {
                println!("{verb}: {:<23} ", shown_path(&dest, &rel.to_string_lossy()));
            }
        }
        if !f.is_symlink() {
            if let Some(m) = f.unix_mode() {
                set_mode(&target, m);
            }
            if let Some(t) = f.last_modified() {
                let secs = civil_to_unix(t);
                set_mtime(&target, secs);
            }
        }
    }
    if test && status == 0 {
        println!("No errors detected in compressed data of {zipname}.");
    }
    if !members.is_empty() && status == 0 {
        for m in &members {
            let found = (0..ar.len()).any(|i| {
                ar.by_index(i)
                    .ok()
                    .and_then(|f| f.name().ok().map(|n| glob(m, &n)))
                    .unwrap_or(false)
            });
            if !found {
                eprintln!("caution: filename not matched:  {m}");
                status = 11;
            }
        }
    }
    status
}

fn shown_path(dest: &Path, name: &str) -> String {
    if dest == Path::new(".") {
        name.to_string()
    } else {
        format!("{}/{name}", dest.display())
    }
}

fn civil_to_unix(t: zip::DateTime) -> u64 {
    // Days from civil (inverse of guest_support::civil_time).
    let (y, m, d) = (t.year() as i64, t.month() as i64, t.day() as i64);
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    (days * 86_400 + t.hour() as i64 * 3600 + t.minute() as i64 * 60 + t.second() as i64).max(0)
        as u64
}
