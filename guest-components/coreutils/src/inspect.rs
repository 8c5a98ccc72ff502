//! Tools that look at files: `which`, `strings`, `xxd`, `hexdump`/`hd`, `file` and
//! `column`. Output formats follow Debian's tools (xxd from vim, hexdump and column from
//! util-linux, strings from GNU binutils, file 5.x); options are the ones their manuals
//! document that make sense without a terminal.

use std::ffi::OsString;
use std::io::{Read, Write};

use guest_support::cli::{Opts, reason};

/// A number as the tools take it: decimal, `0x` hexadecimal or `0` octal.
fn number(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// Reads a file operand (`-` or none is standard input).
fn read_input(tool: &str, path: Option<&str>) -> Result<Vec<u8>, i32> {
    read_input_upto(tool, path, None)
}

/// Reads a file operand, at most `max` bytes when given (so that `xxd -l 16 /dev/urandom`
/// ends).
fn read_input_upto(tool: &str, path: Option<&str>, max: Option<u64>) -> Result<Vec<u8>, i32> {
    let mut data = Vec::new();
    let limit = max.unwrap_or(u64::MAX);
    let (name, r) = match path {
        None | Some("-") => ("-", std::io::stdin().take(limit).read_to_end(&mut data)),
        Some(p) => (
            p,
            std::fs::File::open(p).and_then(|f| f.take(limit).read_to_end(&mut data)),
        ),
    };
    if let Err(e) = r {
        eprintln!("{tool}: {name}: {}", reason(&e));
        return Err(1);
    }
    Ok(data)
}

fn printable(b: u8) -> bool {
    (0x20..0x7f).contains(&b)
}

// -- which --------------------------------------------------------------------------------

/// `which [-a] [-s] NAME...`: where each command is found on `PATH`; status 1 if any is not.
pub fn which(args: std::vec::IntoIter<OsString>) -> i32 {
    let o = Opts::parse(&crate::own::strings(args.into_iter()), &[]);
    if let Some(e) = o.unknown("which", &["a", "s"]) {
        eprintln!("{e}");
        return 2;
    }
    let silent = o.has(&["s"]);
    let path = std::env::var("PATH").unwrap_or_default();
    let cwd = guest_support::cwd();
    let mut status = 0;
    for name in &o.operands {
        let found = if name.contains('/') {
            let runnable = std::fs::metadata(name).is_ok_and(|m| m.is_file())
                && guest_support::file_mode(name).is_none_or(|m| m & 0o111 != 0);
            runnable.then(|| name.clone())
        } else {
            guest_support::path_lookup(name, &path, &cwd)
        };
        match found {
            Some(p) if !silent => println!("{p}"),
            Some(_) => {}
            None => status = 1,
        }
    }
    if o.operands.is_empty() {
        status = 1;
    }
    status
}

// -- strings ------------------------------------------------------------------------------

/// `strings [-n MIN] [-t o|d|x] [-f] [FILE...]`: runs of at least MIN (4) printable
/// characters, the whole file scanned (`-a` is the default, as in binutils 2.39 and later).
pub fn strings(args: std::vec::IntoIter<OsString>) -> i32 {
    // `-8` is `-n 8`.
    let args: Vec<OsString> = args
        .map(|a| {
            let s = a.to_string_lossy();
            if s.len() > 1 && s.starts_with('-') && s[1..].chars().all(|c| c.is_ascii_digit()) {
                format!("--bytes={}", &s[1..]).into()
            } else {
                a
            }
        })
        .collect();
    let o = Opts::parse(
        &crate::own::strings(args.into_iter()),
        &["n", "bytes", "t", "radix"],
    );
    if let Some(e) = o.unknown(
        "strings",
        &[
            "n",
            "bytes",
            "t",
            "radix",
            "a",
            "all",
            "f",
            "print-file-name",
            "o",
        ],
    ) {
        eprintln!("{e}");
        return 1;
    }
    let min = match o.value(&["n", "bytes"]).map(|v| v.parse::<usize>()) {
        None => 4,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!(
                "strings: invalid minimum string length {}",
                o.value(&["n", "bytes"]).unwrap_or("")
            );
            return 1;
        }
    };
    let radix = if o.has(&["o"]) {
        Some("o")
    } else {
        o.value(&["t", "radix"])
    };
    if radix.is_some_and(|r| !matches!(r, "o" | "d" | "x")) {
        eprintln!("strings: invalid radix");
        return 1;
    }
    let files: Vec<Option<&str>> = if o.operands.is_empty() {
        vec![None]
    } else {
        o.operands.iter().map(|f| Some(f.as_str())).collect()
    };
    let with_name = o.has(&["f", "print-file-name"]);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut status = 0;
    for f in files {
        let Ok(data) = read_input("strings", f) else {
            status = 1;
            continue;
        };
        let mut start = None;
        for i in 0..=data.len() {
            let text = i < data.len() && (printable(data[i]) || data[i] == b'\t');
            match (text, start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    if i - s >= min {
                        if with_name {
                            let _ = write!(out, "{}: ", f.unwrap_or("{standard input}"));
                        }
                        let _ = match radix {
                            Some("o") => write!(out, "{s:7o} "),
                            Some("d") => write!(out, "{s:7} "),
                            Some(_) => write!(out, "{s:7x} "),
                            None => Ok(()),
                        };
                        let _ = out.write_all(&data[s..i]);
                        let _ = out.write_all(b"\n");
                    }
                    start = None;
                }
                _ => {}
            }
        }
    }
    status
}

// -- xxd ----------------------------------------------------------------------------------

/// `xxd [-p|-i|-b] [-c COLS] [-g BYTES] [-l LEN] [-s SEEK] [-u] [-r] [IN [OUT]]`.
pub fn xxd(args: std::vec::IntoIter<OsString>) -> i32 {
    let o = Opts::parse(
        &crate::own::strings(args.into_iter()),
        &["c", "cols", "g", "groupsize", "l", "len", "s", "seek", "o"],
    );
    let known = [
        "c",
        "cols",
        "g",
        "groupsize",
        "l",
        "len",
        "s",
        "seek",
        "p",
        "ps",
        "plain",
        "postscript",
        "i",
        "include",
        "u",
        "r",
        "revert",
        "b",
        "bits",
        "o",
        "e",
        "C",
        "capitalize",
        "a",
        "autoskip",
    ];
    if let Some(e) = o.unknown("xxd", &known) {
        eprintln!("{e}");
        return 1;
    }
    let plain = o.has(&["p", "ps", "plain", "postscript"]);
    let include = o.has(&["i", "include"]);
    let bits = o.has(&["b", "bits"]);
    let upper = o.has(&["u"]);
    let num = |names: &[&str]| -> Result<Option<u64>, i32> {
        match o.value(names) {
            None => Ok(None),
            Some(v) => number(v.trim_start_matches('+')).map(Some).ok_or_else(|| {
                eprintln!("xxd: invalid number '{v}'");
                1
            }),
        }
    };
    let (cols, group, len, seek, disp) = match (
        num(&["c", "cols"]),
        num(&["g", "groupsize"]),
        num(&["l", "len"]),
        num(&["s", "seek"]),
        num(&["o"]),
    ) {
        (Ok(c), Ok(g), Ok(l), Ok(s), Ok(d)) => (c, g, l, s, d.unwrap_or(0)),
        _ => return 1,
    };
    let input = o.operands.first().map(String::as_str);
    let max = match (o.has(&["r", "revert"]), len) {
        (false, Some(l)) => Some(seek.unwrap_or(0).saturating_add(l)),
        _ => None,
    };
    let data = match read_input_upto("xxd", input, max) {
        Ok(d) => d,
        Err(c) => return c,
    };
    let mut out: Vec<u8> = Vec::new();
    if o.has(&["r", "revert"]) {
        out = if plain {
            unhex_plain(&data)
        } else {
            unhex_dump(&data)
        };
    } else {
        let start = (seek.unwrap_or(0) as usize).min(data.len());
        let end = match len {
            Some(l) => (start + l as usize).min(data.len()),
            None => data.len(),
        };
        let bytes = &data[start..end];
        let hex = |b: u8| {
            if upper {
                format!("{b:02X}")
            } else {
                format!("{b:02x}")
            }
        };
        if plain {
            let cols = cols.unwrap_or(30) as usize;
            for chunk in bytes.chunks(if cols == 0 { usize::MAX } else { cols }) {
                let line: String = chunk.iter().map(|&b| hex(b)).collect();
                out.extend_from_slice(line.as_bytes());
                out.push(b'\n');
            }
        } else if include {
            let cols = cols.unwrap_or(12).max(1) as usize;
            let var: Option<String> = input.filter(|i| *i != "-").map(|i| {
                i.chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect()
            });
            if let Some(v) = &var {
                out.extend_from_slice(format!("unsigned char {v}[] = {{\n").as_bytes());
            }
            let lines: Vec<String> = bytes
                .chunks(cols)
                .map(|c| {
                    let items: Vec<String> = c
                        .iter()
                        .map(|&b| {
                            if upper {
                                format!("0X{b:02X}")
                            } else {
                                format!("0x{b:02x}")
                            }
                        })
                        .collect();
                    format!("  {}", items.join(", "))
                })
                .collect();
            if !lines.is_empty() {
                out.extend_from_slice(lines.join(",\n").as_bytes());
                out.push(b'\n');
            }
            if let Some(v) = &var {
                out.extend_from_slice(
                    format!("}};\nunsigned int {v}_len = {};\n", bytes.len()).as_bytes(),
                );
            }
        } else {
            let cols = cols.unwrap_or(if bits { 6 } else { 16 }).max(1) as usize;
            let group = group.unwrap_or(if bits { 1 } else { 2 }) as usize;
            let cell = |b: u8| {
                if bits { format!("{b:08b}") } else { hex(b) }
            };
            let area = |chunk: &[u8]| {
                let mut s = String::new();
                for (i, &b) in chunk.iter().enumerate() {
                    s.push_str(&cell(b));
                    if group != 0 && (i + 1) % group == 0 {
                        s.push(' ');
                    }
                }
                s
            };
            let width = area(&vec![0u8; cols]).len().max(1);
            let width = if group == 0 || !cols.is_multiple_of(group) {
                width + 1
            } else {
                width
            };
            for (n, chunk) in bytes.chunks(cols).enumerate() {
                let offset = (start + n * cols) as u64 + disp;
                let text: String = chunk
                    .iter()
                    .map(|&b| if printable(b) { b as char } else { '.' })
                    .collect();
                let line = format!("{offset:08x}: {:<width$} {text}\n", area(chunk));
                out.extend_from_slice(line.as_bytes());
            }
        }
    }
    let written = match o.operands.get(1) {
        Some(path) => std::fs::write(path, &out).map_err(|e| format!("{path}: {}", reason(&e))),
        None => std::io::stdout()
            .lock()
            .write_all(&out)
            .map_err(|e| reason(&e)),
    };
    match written {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("xxd: {e}");
            1
        }
    }
}

fn hex_value(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// `xxd -r -p`: every pair of hex digits is a byte; anything else is skipped.
fn unhex_plain(data: &[u8]) -> Vec<u8> {
    let digits: Vec<u8> = data.iter().filter_map(|&c| hex_value(c)).collect();
    digits
        .chunks(2)
        .filter(|p| p.len() == 2)
        .map(|p| p[0] << 4 | p[1])
        .collect()
}

/// `xxd -r` of a dump: the offset before `:` places the bytes that follow, up to the two
/// spaces before the text column; gaps are zeros.
fn unhex_dump(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(data).lines() {
        let Some((offset, rest)) = line.split_once(':') else {
            continue;
        };
        let Ok(mut at) = usize::from_str_radix(offset.trim(), 16) else {
            continue;
        };
        let hex = rest
            .split("  ")
            .find(|s| !s.trim().is_empty())
            .unwrap_or("");
        let digits: Vec<u8> = hex.bytes().filter_map(hex_value).collect();
        for pair in digits.chunks(2).filter(|p| p.len() == 2) {
            if out.len() < at {
                out.resize(at, 0);
            }
            if at < out.len() {
                out[at] = pair[0] << 4 | pair[1];
            } else {
                out.push(pair[0] << 4 | pair[1]);
            }
            at += 1;
        }
    }
    out
}

// -- hexdump ------------------------------------------------------------------------------

/// `hexdump [-C] [-n LEN] [-s SKIP] [-v] [FILE...]` and `hd` (`hexdump -C`).
pub fn hexdump(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<OsString> = args.collect();
    let canonical_name = args
        .first()
        .is_some_and(|a| a.to_string_lossy().rsplit('/').next() == Some("hd"));
    let o = Opts::parse(
        &crate::own::strings(args.into_iter()),
        &["n", "length", "s", "skip"],
    );
    if let Some(e) = o.unknown(
        "hexdump",
        &[
            "C",
            "canonical",
            "n",
            "length",
            "s",
            "skip",
            "v",
            "no-squeezing",
        ],
    ) {
        eprintln!("{e}");
        return 1;
    }
    let canonical = canonical_name || o.has(&["C", "canonical"]);
    let squeeze = !o.has(&["v", "no-squeezing"]);
    let parse = |names: &[&str]| o.value(names).map(|v| number(v).ok_or(v.to_string()));
    let skip = match parse(&["s", "skip"]) {
        None => 0,
        Some(Ok(n)) => n as usize,
        Some(Err(v)) => {
            eprintln!("hexdump: invalid skip value: '{v}'");
            return 1;
        }
    };
    let length = match parse(&["n", "length"]) {
        None => None,
        Some(Ok(n)) => Some(n as usize),
        Some(Err(v)) => {
            eprintln!("hexdump: invalid length value: '{v}'");
            return 1;
        }
    };
    // Read no further than the dump reaches (`hexdump -n 16 /dev/urandom` ends).
    let want = length.map(|n| skip.saturating_add(n));
    let left = |have: usize| want.map(|w| w.saturating_sub(have) as u64);
    let mut data = Vec::new();
    let mut status = 0;
    if o.operands.is_empty() {
        data = read_input_upto("hexdump", None, left(0)).unwrap_or_default();
    }
    for f in &o.operands {
        match read_input_upto("hexdump", Some(f), left(data.len())) {
            Ok(d) => data.extend_from_slice(&d),
            Err(c) => status = c,
        }
    }
    let start = skip.min(data.len());
    let end = match length {
        None => data.len(),
        Some(n) => (start + n).min(data.len()),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut previous: Option<&[u8]> = None;
    let mut starred = false;
    for (n, chunk) in data[start..end].chunks(16).enumerate() {
        let offset = start + n * 16;
        if squeeze && chunk.len() == 16 && previous == Some(chunk) {
            if !starred {
                let _ = writeln!(out, "*");
                starred = true;
            }
            continue;
        }
        previous = Some(chunk);
        starred = false;
        if canonical {
            let mut hex = String::new();
            for (i, b) in chunk.iter().enumerate() {
                hex.push_str(&format!("{b:02x} "));
                if i == 7 {
                    hex.push(' ');
                }
            }
            let text: String = chunk
                .iter()
                .map(|&b| if printable(b) { b as char } else { '.' })
                .collect();
            let _ = writeln!(out, "{offset:08x}  {hex:<49} |{text}|");
        } else {
            let mut words = String::new();
            for pair in chunk.chunks(2) {
                let w = pair[0] as u16 | (*pair.get(1).unwrap_or(&0) as u16) << 8;
                words.push_str(&format!(" {w:04x}"));
            }
            let _ = writeln!(out, "{offset:07x}{words:<40}");
        }
    }
    if end > start || start > 0 {
        let _ = if canonical {
            writeln!(out, "{end:08x}")
        } else {
            writeln!(out, "{end:07x}")
        };
    }
    status
}

// -- file ---------------------------------------------------------------------------------

/// `file [-b] [-i|--mime|--mime-type] [-L] FILE...`: the type of each file from its
/// content, as file(1)'s common magic names it.
pub fn file(args: std::vec::IntoIter<OsString>) -> i32 {
    let o = Opts::parse(&crate::own::strings(args.into_iter()), &[]);
    if let Some(e) = o.unknown(
        "file",
        &[
            "b",
            "brief",
            "i",
            "mime",
            "mime-type",
            "mime-encoding",
            "L",
            "dereference",
            "h",
            "no-dereference",
            "E",
        ],
    ) {
        eprintln!("{e}");
        return 1;
    }
    if o.operands.is_empty() {
        eprintln!(
            "Usage: file [-bchikLlNnprsSvzZ0] [--apple] [--extension] [--mime-encoding]\n            [--mime-type] [-e <testname>] [-F <separator>]  [-f <namefile>]\n            [-m <magicfiles>] [-P <parameter=value>] [--exclude-quiet]\n            <file> ..."
        );
        return 1;
    }
    let brief = o.has(&["b", "brief"]);
    let follow = o.has(&["L", "dereference"]);
    let mode = if o.has(&["i", "mime"]) {
        Mime::Full
    } else if o.has(&["mime-type"]) {
        Mime::Type
    } else if o.has(&["mime-encoding"]) {
        Mime::Encoding
    } else {
        Mime::None
    };
    let width = o
        .operands
        .iter()
        .map(|f| f.chars().count())
        .max()
        .unwrap_or(0)
        + 1;
    let mut status = 0;
    for f in &o.operands {
        let kind = describe(f, follow);
        if matches!(kind, Kind::Missing(_)) && o.has(&["E"]) {
            status = 1;
        }
        let text = match mode {
            Mime::None => kind.text(),
            Mime::Type => kind.mime().0,
            Mime::Encoding => kind.mime().1.to_string(),
            Mime::Full => match kind.mime() {
                (t, "") => t,
                (t, c) => format!("{t}; charset={c}"),
            },
        };
        if brief {
            println!("{text}");
        } else {
            println!("{:<width$} {text}", format!("{f}:"), width = width);
        }
    }
    status
}

enum Mime {
    None,
    Type,
    Encoding,
    Full,
}

enum Kind {
    Missing(String),
    Directory {
        sticky: bool,
    },
    Link(String),
    Empty,
    /// Binary formats: description, MIME type.
    Binary(String, &'static str),
    /// Text: what it is (`None` for plain text), its encoding, the notes after it, and the
    /// MIME type.
    Text {
        what: Option<String>,
        encoding: Encoding,
        notes: Vec<String>,
        mime: &'static str,
        script: bool,
    },
}

#[derive(Clone, Copy)]
enum Encoding {
    Ascii,
    Utf8,
    Utf8Bom,
    Latin1,
}

impl Kind {
    fn text(&self) -> String {
        match self {
            Kind::Missing(why) => why.clone(),
            Kind::Directory { sticky: true } => "sticky, directory".into(),
            Kind::Directory { sticky: false } => "directory".into(),
            Kind::Link(t) => t.clone(),
            Kind::Empty => "empty".into(),
            Kind::Binary(d, _) => d.clone(),
            Kind::Text {
                what,
                encoding,
                notes,
                script,
                ..
            } => {
                let enc = match encoding {
                    Encoding::Ascii => "ASCII text",
                    Encoding::Utf8 => "Unicode text, UTF-8 text",
                    Encoding::Utf8Bom => "Unicode text, UTF-8 (with BOM) text",
                    Encoding::Latin1 => "ISO-8859 text",
                };
                let mut s = match what {
                    Some(w) if w.ends_with("data") || w == "CSV text" => return w.clone(),
                    Some(w) if w.starts_with("Node.js") => format!("{w} executable, {enc}"),
                    Some(w) => format!("{w}, {enc}"),
                    None => enc.to_string(),
                };
                if *script && what.as_deref().is_some_and(|w| !w.starts_with("Node.js")) {
                    s.push_str(" executable");
                }
                for n in notes {
                    s.push_str(", ");
                    s.push_str(n);
                }
                s
            }
        }
    }

    fn mime(&self) -> (String, &'static str) {
        match self {
            Kind::Missing(why) => (why.clone(), ""),
            Kind::Directory { .. } => ("inode/directory".into(), "binary"),
            Kind::Link(_) => ("inode/symlink".into(), "binary"),
            Kind::Empty => ("inode/x-empty".into(), "binary"),
            Kind::Binary(_, m) => (m.to_string(), "binary"),
            Kind::Text { encoding, mime, .. } => (
                mime.to_string(),
                match encoding {
                    Encoding::Ascii => "us-ascii",
                    Encoding::Utf8 | Encoding::Utf8Bom => "utf-8",
                    Encoding::Latin1 => "iso-8859-1",
                },
            ),
        }
    }
}

fn describe(path: &str, follow: bool) -> Kind {
    let meta = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    };
    let meta = match meta {
        Ok(m) => m,
        Err(e) => return Kind::Missing(format!("cannot open `{path}' ({})", reason(&e))),
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path)
            .map(|t| t.to_string_lossy().into_owned())
            .unwrap_or_default();
        if std::fs::metadata(path).is_err() {
            return Kind::Link(format!("broken symbolic link to {target}"));
        }
        return Kind::Link(format!("symbolic link to {target}"));
    }
    if meta.is_dir() {
        let sticky = guest_support::file_mode(path).is_some_and(|m| m & 0o1000 != 0);
        return Kind::Directory { sticky };
    }
    if guest_support::special_kind(path, follow) == Some('c') {
        return Kind::Binary("character special".into(), "inode/chardevice");
    }
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) => return Kind::Missing(format!("cannot open `{path}' ({})", reason(&e))),
    };
    classify(&data)
}

fn le16(d: &[u8], at: usize) -> u16 {
    d.get(at..at + 2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .unwrap_or(0)
}

fn be32(d: &[u8], at: usize) -> u32 {
    d.get(at..at + 4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0)
}

fn le32(d: &[u8], at: usize) -> u32 {
    d.get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0)
}

/// The type of a file's content.
fn classify(d: &[u8]) -> Kind {
    if d.is_empty() {
        return Kind::Empty;
    }
    let bin = |s: String, m: &'static str| Kind::Binary(s, m);
    if d.starts_with(b"\x7fELF") && d.len() > 20 {
        let bits = if d[4] == 2 { "64-bit" } else { "32-bit" };
        let order = if d[5] == 2 { "MSB" } else { "LSB" };
        let e_type = if d[5] == 2 {
            u16::from_be_bytes([d[16], d[17]])
        } else {
            le16(d, 16)
        };
        let machine = if d[5] == 2 {
            u16::from_be_bytes([d[18], d[19]])
        } else {
            le16(d, 18)
        };
        let (kind, mime) = match e_type {
            1 => ("relocatable", "application/x-object"),
            2 => ("executable", "application/x-executable"),
            3 => ("shared object", "application/x-sharedlib"),
            4 => ("core file", "application/x-coredump"),
            _ => ("unknown type", "application/octet-stream"),
        };
        let arch = match machine {
            3 => "Intel 80386",
            0x28 => "ARM",
            0x3e => "x86-64",
            0xb7 => "ARM aarch64",
            0xf3 => "UCB RISC-V",
            _ => "unknown arch",
        };
        return bin(
            format!("ELF {bits} {order} {kind}, {arch}, version 1 (SYSV)"),
            mime,
        );
    }
    if d.starts_with(b"\0asm") && d.len() >= 8 {
        let v = le32(d, 4);
        let desc = if v == 1 {
            "WebAssembly (wasm) binary module version 0x1 (MVP)".to_string()
        } else {
            format!("WebAssembly (wasm) binary module version {v:#x}")
        };
        return bin(desc, "application/wasm");
    }
    if d.starts_with(b"\x89PNG\r\n\x1a\n") && d.len() >= 29 {
        let (w, h, depth, color, interlace) = (be32(d, 16), be32(d, 20), d[24], d[25], d[28]);
        let color = match color {
            0 => format!("{depth}-bit grayscale"),
            2 => format!("{depth}-bit/color RGB"),
            3 => format!("{depth}-bit colormap"),
            4 => format!("{depth}-bit gray+alpha"),
            6 => format!("{depth}-bit/color RGBA"),
            _ => format!("{depth}-bit"),
        };
        let inter = if interlace == 1 {
            "interlaced"
        } else {
            "non-interlaced"
        };
        return bin(
            format!("PNG image data, {w} x {h}, {color}, {inter}"),
            "image/png",
        );
    }
    if d.starts_with(b"\xff\xd8\xff") {
        let mut s = "JPEG image data".to_string();
        if d.get(6..11) == Some(b"JFIF\0") && d.len() > 13 {
            s.push_str(&format!(", JFIF standard {}.{:02}", d[11], d[12]));
        } else if d.get(6..10) == Some(b"Exif") {
            s.push_str(", Exif standard");
        }
        return bin(s, "image/jpeg");
    }
    if (d.starts_with(b"GIF87a") || d.starts_with(b"GIF89a")) && d.len() >= 10 {
        let v = String::from_utf8_lossy(&d[3..6]).into_owned();
        return bin(
            format!(
                "GIF image data, version {v}, {} x {}",
                le16(d, 6),
                le16(d, 8)
            ),
            "image/gif",
        );
    }
    if d.starts_with(b"\x1f\x8b") && d.len() >= 18 {
        return bin(gzip_description(d), "application/gzip");
    }
    if d.starts_with(b"PK\x03\x04") && d.len() >= 10 {
        let need = le16(d, 4);
        let method = match le16(d, 8) {
            0 => "store".to_string(),
            8 => "deflate".to_string(),
            12 => "bzip2".to_string(),
            14 => "lzma".to_string(),
            93 => "zstd".to_string(),
            m => m.to_string(),
        };
        return bin(
            format!(
                "Zip archive data, at least v{}.{} to extract, compression method={method}",
                need / 10,
                need % 10
            ),
            "application/zip",
        );
    }
    if d.starts_with(b"PK\x05\x06") {
        return bin("Zip archive data (empty)".into(), "application/zip");
    }
    if d.starts_with(b"BZh") && d.len() > 4 && d[3].is_ascii_digit() {
        return bin(
            format!("bzip2 compressed data, block size = {}00k", d[3] as char),
            "application/x-bzip2",
        );
    }
    if d.starts_with(b"\xfd7zXZ\0") {
        return bin("XZ compressed data".into(), "application/x-xz");
    }
    if d.len() >= 13 && d.starts_with(b"\x5d\0\0") {
        let size = u64::from_le_bytes(d[5..13].try_into().expect("8 bytes"));
        let how = if size == u64::MAX {
            "streamed".to_string()
        } else {
            format!("non-streamed, size {size}")
        };
        return bin(format!("LZMA compressed data, {how}"), "application/x-lzma");
    }
    if d.starts_with(b"\x28\xb5\x2f\xfd") {
        return bin(
            "Zstandard compressed data (v0.8+), Dictionary ID: None".into(),
            "application/zstd",
        );
    }
    if d.starts_with(b"7z\xbc\xaf\x27\x1c") {
        return bin("7-zip archive data".into(), "application/x-7z-compressed");
    }
    if d.starts_with(b"SQLite format 3\0") {
        return bin("SQLite 3.x database".into(), "application/vnd.sqlite3");
    }
    if d.starts_with(b"%PDF-") {
        let v: String = d[5..]
            .iter()
            .take_while(|b| b.is_ascii_digit() || **b == b'.')
            .map(|&b| b as char)
            .collect();
        return bin(format!("PDF document, version {v}"), "application/pdf");
    }
    if d.get(257..262) == Some(b"ustar") {
        let gnu = d.get(257..265) == Some(b"ustar  \0");
        let s = if gnu {
            "POSIX tar archive (GNU)"
        } else {
            "POSIX tar archive"
        };
        return bin(s.into(), "application/x-tar");
    }
    text_kind(d).unwrap_or_else(|| bin("data".into(), "application/octet-stream"))
}

fn gzip_description(d: &[u8]) -> String {
    let flags = d[3];
    let mtime = le32(d, 4);
    let mut s = "gzip compressed data".to_string();
    if flags & 8 != 0 {
        let mut at = 10;
        if flags & 4 != 0 {
            at += 2 + le16(d, 10) as usize;
        }
        if let Some(rest) = d.get(at..) {
            let name: Vec<u8> = rest.iter().take_while(|&&b| b != 0).copied().collect();
            s.push_str(&format!(", was \"{}\"", String::from_utf8_lossy(&name)));
        }
    }
    if mtime != 0 {
        s.push_str(&format!(", last modified: {}", ctime(mtime as i64)));
    }
    match d[8] {
        2 => s.push_str(", max compression"),
        4 => s.push_str(", max speed"),
        _ => {}
    }
    if d[9] == 3 {
        s.push_str(", from Unix");
    }
    s.push_str(&format!(
        ", original size modulo 2^32 {}",
        le32(d, d.len() - 4)
    ));
    s
}

/// `Tue Nov 24 08:40:40 2026` for seconds since the epoch (UTC, the sandbox's zone).
pub fn ctime(t: i64) -> String {
    crate::ls::strftime("%a %b %e %H:%M:%S %Y", t)
}

/// Text files: what kind of text, or `None` if the bytes are not text.
fn text_kind(d: &[u8]) -> Option<Kind> {
    let (body, bom) = match d.strip_prefix(b"\xef\xbb\xbf") {
        Some(b) => (b, true),
        None => (d, false),
    };
    let texty = |b: u8| printable(b) || matches!(b, b'\n' | b'\r' | b'\t' | 0x0c | 0x08 | 0x1b);
    let encoding = if body.iter().all(|&b| texty(b)) {
        if bom {
            Encoding::Utf8Bom
        } else {
            Encoding::Ascii
        }
    } else if std::str::from_utf8(body).is_ok() && !body.iter().any(|&b| b < 0x20 && !texty(b)) {
        if bom {
            Encoding::Utf8Bom
        } else {
            Encoding::Utf8
        }
    } else if body.iter().all(|&b| texty(b) || b >= 0xa0) {
        Encoding::Latin1
    } else {
        return None;
    };
    let mut notes = Vec::new();
    let longest = body
        .split(|&b| b == b'\n')
        .map(|l| l.len())
        .max()
        .unwrap_or(0);
    if longest > 300 {
        notes.push(format!("with very long lines ({longest})"));
    }
    let crlf = body.windows(2).any(|w| w == b"\r\n");
    let lone_cr = body
        .iter()
        .enumerate()
        .any(|(i, &b)| b == b'\r' && body.get(i + 1) != Some(&b'\n'));
    if crlf {
        notes.push("with CRLF line terminators".into());
    } else if lone_cr && !body.contains(&b'\n') {
        notes.push("with CR line terminators".into());
    } else if !body.contains(&b'\n') && !body.contains(&b'\r') {
        notes.push("with no line terminators".into());
    }
    if body.contains(&0x1b) {
        notes.push("with escape sequences".into());
    }
    let text = String::from_utf8_lossy(body);
    let trimmed = text.trim_start();
    let (what, mime, script): (Option<String>, &'static str, bool) =
        if let Some(line) = text.strip_prefix("#!") {
            let first = line.lines().next().unwrap_or("");
            let words: Vec<&str> = first.split_whitespace().collect();
            let prog = match words.as_slice() {
                [env, p, ..] if env.ends_with("/env") => *p,
                [p, ..] => p.rsplit('/').next().unwrap_or(p),
                [] => "",
            };
            let (w, m) = match prog.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.') {
                "bash" => (
                    "Bourne-Again shell script".to_string(),
                    "text/x-shellscript",
                ),
                "sh" | "dash" => ("POSIX shell script".to_string(), "text/x-shellscript"),
                "zsh" => (
                    "Paul Falstad's zsh script".to_string(),
                    "text/x-shellscript",
                ),
                "python" => ("Python script".to_string(), "text/x-script.python"),
                "node" | "nodejs" => ("Node.js script".to_string(), "application/javascript"),
                "perl" => ("Perl script text".to_string(), "text/x-perl"),
                "ruby" => ("Ruby script".to_string(), "text/x-ruby"),
                "awk" | "gawk" => ("awk script".to_string(), "text/x-awk"),
                _ => (format!("a {} script", first.trim()), "text/plain"),
            };
            (Some(w), m, true)
        } else if looks_like_python(&text) {
            (Some("Python script".into()), "text/x-script.python", true)
        } else if (trimmed.starts_with('{') || trimmed.starts_with('['))
            && serde_json::from_str::<serde_json::Value>(&text).is_ok()
        {
            (Some("JSON text data".into()), "application/json", false)
        } else if trimmed.starts_with("<?xml") {
            (Some("XML 1.0 document".into()), "text/xml", false)
        } else if trimmed
            .bytes()
            .take(14)
            .map(|b| b.to_ascii_lowercase())
            .eq(b"<!doctype html".iter().copied())
            || trimmed
                .bytes()
                .take(5)
                .map(|b| b.to_ascii_lowercase())
                .eq(b"<html".iter().copied())
        {
            (Some("HTML document".into()), "text/html", false)
        } else if is_csv(&text) {
            (Some("CSV text".into()), "text/csv", false)
        } else {
            (None, "text/plain", false)
        };
    Some(Kind::Text {
        what,
        encoding,
        notes,
        mime,
        script,
    })
}

/// Python source without a `#!` line, as file(1)'s magic finds it: the first statement
/// is an `import` or a `from ... import`.
fn looks_like_python(text: &str) -> bool {
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'));
    first.is_some_and(|l| {
        let word = |w: &str| l.strip_prefix(w).is_some_and(|r| r.starts_with(' '));
        (word("import")
            && l[6..]
                .trim()
                .chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_'))
            || (word("from") && l.contains(" import "))
    })
}

/// At least two lines with the same number (one or more) of commas outside quotes.
fn is_csv(text: &str) -> bool {
    let counts: Vec<usize> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut quoted = false;
            l.chars()
                .filter(|&c| {
                    if c == '"' {
                        quoted = !quoted;
                    }
                    c == ',' && !quoted
                })
                .count()
        })
        .collect();
    counts.len() >= 2 && counts[0] > 0 && counts.iter().all(|&c| c == counts[0])
}

// -- column -------------------------------------------------------------------------------

/// `column [-t] [-s SEP] [-o OUTSEP] [-c WIDTH] [-x] [-R COLS] [-N NAMES] [FILE...]`.
pub fn column(args: std::vec::IntoIter<OsString>) -> i32 {
    let o = Opts::parse(
        &crate::own::strings(args.into_iter()),
        &[
            "s",
            "separator",
            "o",
            "output-separator",
            "c",
            "output-width",
            "R",
            "table-right",
            "N",
            "table-columns",
        ],
    );
    if let Some(e) = o.unknown(
        "column",
        &[
            "t",
            "table",
            "s",
            "separator",
            "o",
            "output-separator",
            "c",
            "output-width",
            "x",
            "fillrows",
            "R",
            "table-right",
            "N",
            "table-columns",
            "n",
            "e",
            "L",
            "keep-empty-lines",
        ],
    ) {
        eprintln!("{e}");
        return 1;
    }
    let mut text = String::new();
    let mut status = 0;
    if o.operands.is_empty() {
        text = String::from_utf8_lossy(&read_input("column", None).unwrap_or_default()).into();
    }
    for f in &o.operands {
        match std::fs::read(f) {
            Ok(d) => text.push_str(&String::from_utf8_lossy(&d)),
            Err(e) => {
                eprintln!("column: cannot open {f}: {}", reason(&e));
                status = 1;
            }
        }
    }
    let keep_empty = o.has(&["L", "keep-empty-lines"]);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| keep_empty || !l.trim().is_empty())
        .collect();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if o.has(&["t", "table"]) {
        let seps = o.value(&["s", "separator"]);
        let outsep = o.value(&["o", "output-separator"]).unwrap_or("  ");
        let mut rows: Vec<Vec<String>> = Vec::new();
        if let Some(names) = o.value(&["N", "table-columns"]) {
            rows.push(names.split(',').map(String::from).collect());
        }
        for l in &lines {
            let cells: Vec<String> = match seps {
                Some(s) => l.split(|c| s.contains(c)).map(String::from).collect(),
                None => l.split_whitespace().map(String::from).collect(),
            };
            rows.push(cells);
        }
        let ncols = rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; ncols];
        for r in &rows {
            for (i, c) in r.iter().enumerate() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let right: Vec<usize> = o
            .value(&["R", "table-right"])
            .map(|v| v.split(',').filter_map(|n| n.parse().ok()).collect())
            .unwrap_or_default();
        for r in &rows {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate() {
                let last = i + 1 == r.len();
                let pad = widths[i] - c.chars().count();
                if right.contains(&(i + 1)) {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(c);
                } else {
                    line.push_str(c);
                    if !last {
                        line.push_str(&" ".repeat(pad));
                    }
                }
                if !last {
                    line.push_str(outsep);
                }
            }
            let _ = writeln!(out, "{}", line);
        }
        return status;
    }
    // Fill columns (down first, or across with -x) to the output width, like column(1)
    // with its 8-column tab stops.
    let width: usize = o
        .value(&["c", "output-width"])
        .and_then(|v| v.parse().ok())
        .or_else(|| std::env::var("COLUMNS").ok().and_then(|v| v.parse().ok()))
        .unwrap_or(80);
    let items: Vec<&str> = lines.iter().map(|l| l.trim_end()).collect();
    if items.is_empty() {
        return status;
    }
    let longest = items.iter().map(|i| i.chars().count()).max().unwrap_or(0);
    let colw = (longest / 8 + 1) * 8;
    let per_line = (width / colw).max(1);
    if per_line >= items.len() && longest + 1 >= width {
        for i in &items {
            let _ = writeln!(out, "{i}");
        }
        return status;
    }
    let rows = items.len().div_ceil(per_line);
    let across = o.has(&["x", "fillrows"]);
    for r in 0..rows {
        let row: Vec<&str> = (0..per_line)
            .filter_map(|c| {
                let idx = if across {
                    r * per_line + c
                } else {
                    c * rows + r
                };
                items.get(idx).copied()
            })
            .collect();
        let mut line = String::new();
        let mut at = 0;
        for (k, item) in row.iter().enumerate() {
            line.push_str(item);
            at += item.chars().count();
            if k + 1 < row.len() {
                // Tabs to the next column.
                let target = (k + 1) * colw;
                while at < target {
                    line.push('\t');
                    at = (at / 8 + 1) * 8;
                }
            }
        }
        let _ = writeln!(out, "{line}");
    }
    status
}
