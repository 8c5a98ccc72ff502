//! `gzip`, `bzip2`, `xz` and `lzma` and their other names: one tool over the formats of
//! `codec.rs`.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use flate2::Compression;
use guest_support::cli::{Opts, reason};

use super::{broken, finish_file, mtime_of, short, walk};
use crate::codec::Codec;

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
