//! `iconv` (glibc's): converts text between UTF-8, ASCII, ISO-8859-1, Windows-1252, UTF-16
//! and UTF-32, with `//TRANSLIT` (ASCII look-alikes: `é` as `e`, `€` as `EUR`) and
//! `//IGNORE`, `-c`, `-o` and `-l`.

use std::ffi::OsString;
use std::io::{Read, Write};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Enc {
    Utf8,
    Ascii,
    Latin1,
    Cp1252,
    Utf16,
    Utf16Le,
    Utf16Be,
    Utf32,
    Utf32Le,
    Utf32Be,
}

/// Every encoding by its names (the first is the one `-l` lists first).
const NAMES: &[(Enc, &[&str])] = &[
    (
        Enc::Ascii,
        &["ANSI_X3.4-1968", "ASCII", "US-ASCII", "646", "US"],
    ),
    (
        Enc::Latin1,
        &[
            "ISO-8859-1",
            "ISO8859-1",
            "ISO_8859-1",
            "LATIN1",
            "L1",
            "CP819",
        ],
    ),
    (Enc::Cp1252, &["CP1252", "WINDOWS-1252", "MS-ANSI"]),
    (Enc::Utf8, &["UTF-8", "UTF8"]),
    (Enc::Utf16, &["UTF-16", "UTF16"]),
    (Enc::Utf16Le, &["UTF-16LE", "UTF16LE"]),
    (Enc::Utf16Be, &["UTF-16BE", "UTF16BE"]),
    (Enc::Utf32, &["UTF-32", "UTF32"]),
    (Enc::Utf32Le, &["UTF-32LE", "UTF32LE"]),
    (Enc::Utf32Be, &["UTF-32BE", "UTF32BE"]),
];

/// Windows-1252's 0x80-0x9F (0 where it has no character).
const CP1252_HIGH: [u32; 32] = [
    0x20AC, 0, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039,
    0x0152, 0, 0x017D, 0, 0, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC,
    0x2122, 0x0161, 0x203A, 0x0153, 0, 0x017E, 0x0178,
];

/// An encoding name with its `//TRANSLIT` and `//IGNORE` suffixes.
fn parse(spec: &str) -> Option<(Enc, bool, bool)> {
    let mut parts = spec.split("//");
    let name = parts.next().unwrap_or("").to_ascii_uppercase();
    let (mut translit, mut ignore) = (false, false);
    for p in parts {
        match p.to_ascii_uppercase().as_str() {
            "TRANSLIT" => translit = true,
            "IGNORE" => ignore = true,
            "" => {}
            _ => return None,
        }
    }
    let name = if name.is_empty() {
        locale_charset().to_string()
    } else {
        name
    };
    let enc = NAMES
        .iter()
        .find(|(_, names)| names.contains(&name.as_str()))?
        .0;
    Some((enc, translit, ignore))
}

/// The charset of the locale the environment selects (`C` is ASCII).
fn locale_charset() -> &'static str {
    if crate::own::utf8_locale() {
        "UTF-8"
    } else {
        "ANSI_X3.4-1968"
    }
}

/// The next character of `input` at `at` in `enc`: (character, its length in bytes), or
/// `Err(len)` for an invalid sequence of `len` bytes (0: cut short at the end).
fn decode(enc: Enc, input: &[u8], at: usize, big_endian: bool) -> Result<(u32, usize), usize> {
    let rest = &input[at..];
    match enc {
        Enc::Ascii => (rest[0] < 0x80).then_some((u32::from(rest[0]), 1)).ok_or(1),
        Enc::Latin1 => Ok((u32::from(rest[0]), 1)),
        Enc::Cp1252 => match rest[0] {
            b @ 0x80..=0x9F => match CP1252_HIGH[usize::from(b - 0x80)] {
                0 => Err(1),
                c => Ok((c, 1)),
            },
            b => Ok((u32::from(b), 1)),
        },
        Enc::Utf8 => {
            let len = match rest[0] {
                0x00..=0x7F => 1,
                0xC2..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF4 => 4,
                _ => return Err(1),
            };
            if rest.len() < len {
                return Err(0);
            }
            match std::str::from_utf8(&rest[..len]) {
                Ok(s) => Ok((s.chars().next().map_or(0, u32::from), len)),
                Err(_) => Err(1),
            }
        }
        Enc::Utf16 | Enc::Utf16Le | Enc::Utf16Be => {
            let unit = |b: &[u8]| {
                if big_endian {
                    u16::from_be_bytes([b[0], b[1]])
                } else {
                    u16::from_le_bytes([b[0], b[1]])
                }
            };
            if rest.len() < 2 {
                return Err(0);
            }
            let u = unit(rest);
            match u {
                0xD800..=0xDBFF => {
                    if rest.len() < 4 {
                        return Err(0);
                    }
                    let low = unit(&rest[2..]);
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return Err(2);
                    }
                    Ok((
                        0x10000 + ((u32::from(u) - 0xD800) << 10) + (u32::from(low) - 0xDC00),
                        4,
                    ))
                }
                0xDC00..=0xDFFF => Err(2),
                u => Ok((u32::from(u), 2)),
            }
        }
        Enc::Utf32 | Enc::Utf32Le | Enc::Utf32Be => {
            if rest.len() < 4 {
                return Err(0);
            }
            let b = [rest[0], rest[1], rest[2], rest[3]];
            let c = if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            };
            char::from_u32(c).map(|_| (c, 4)).ok_or(4)
        }
    }
}

/// Appends `c` in `enc`, or says it has no such character.
fn encode(enc: Enc, c: u32, out: &mut Vec<u8>) -> bool {
    match enc {
        Enc::Ascii if c < 0x80 => out.push(c as u8),
        Enc::Latin1 if c < 0x100 => out.push(c as u8),
        Enc::Cp1252 => {
            if c < 0x80 || (0xA0..0x100).contains(&c) {
                out.push(c as u8);
            } else if let Some(i) = CP1252_HIGH.iter().position(|&h| h == c && h != 0) {
                out.push(0x80 + i as u8);
            } else {
                return false;
            }
        }
        Enc::Utf8 => match char::from_u32(c) {
            Some(ch) => out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes()),
            None => return false,
        },
        Enc::Utf16 | Enc::Utf16Le | Enc::Utf16Be => {
            let Some(ch) = char::from_u32(c) else {
                return false;
            };
            for u in ch.encode_utf16(&mut [0; 2]) {
                if enc == Enc::Utf16Be {
                    out.extend_from_slice(&u.to_be_bytes());
                } else {
                    out.extend_from_slice(&u.to_le_bytes());
                }
            }
        }
        Enc::Utf32 | Enc::Utf32Le => out.extend_from_slice(&c.to_le_bytes()),
        Enc::Utf32Be => out.extend_from_slice(&c.to_be_bytes()),
        _ => return false,
    }
    true
}

/// The base letters of U+0100-U+017F (`?` where the letter has none, or several).
const LATIN_EXTENDED_A: &str = "AaAaAaCcCcCcCcDdDdEeEeEeEeEeGgGgGgGgHhHhIiIiIiIiIi??Jj\
Kk?LlLlLlLlLlNnNnNn?NnOoOoOo??RrRrRrSsSsSsSsTtTtTtUuUuUuUuUuUuWwYyYZzZzZzs";

/// Whether glibc's C locale transliterates `c` (ligatures, quotes, dashes and a few signs;
/// accented letters only in a UTF-8 locale).
fn c_locale_has(c: u32) -> bool {
    matches!(
        c,
        0xA0 | 0xA9
            | 0xAB
            | 0xAD
            | 0xAE
            | 0xB5
            | 0xBB..=0xBE
            | 0xC6
            | 0xD7
            | 0xDF
            | 0xE6
            | 0x132
            | 0x133
            | 0x149
            | 0x152
            | 0x153
            | 0x17F
            | 0x2010..=0x2014
            | 0x2018..=0x201E
            | 0x2022
            | 0x2026
            | 0x2039
            | 0x203A
            | 0x20AC
            | 0x2122
    )
}

/// What `//TRANSLIT` writes for a character the target lacks, as glibc's tables do: in a
/// UTF-8 locale the Latin letters without their accents and common signs, in the C locale
/// only what [`c_locale_has`]; `?` for the rest.
fn transliterate(c: u32, utf8_locale: bool) -> String {
    if !utf8_locale && !c_locale_has(c) {
        return "?".into();
    }
    let s = match c {
        0xA0 => " ",
        0xA1 => "!",
        0xA2 => "c",
        0xA3 => "GBP",
        0xA5 => "JPY",
        0xA6 => "|",
        0xA9 => "(C)",
        0xAB => "<<",
        0xAD => "-",
        0xAE => "(R)",
        0xB1 => "+-",
        0xB5 => "u",
        0xB7 => ".",
        0xBB => ">>",
        0xBC => " 1/4 ",
        0xBD => " 1/2 ",
        0xBE => " 3/4 ",
        0xBF => "?",
        0xC0..=0xC5 => "A",
        0xC6 => "AE",
        0xC7 => "C",
        0xC8..=0xCB => "E",
        0xCC..=0xCF => "I",
        0xD0 => "D",
        0xD1 => "N",
        0xD2..=0xD6 | 0xD8 => "O",
        0xD7 => "x",
        0xD9..=0xDC => "U",
        0xDD => "Y",
        0xDE => "TH",
        0xDF => "ss",
        0xE0..=0xE5 => "a",
        0xE6 => "ae",
        0xE7 => "c",
        0xE8..=0xEB => "e",
        0xEC..=0xEF => "i",
        0xF0 => "d",
        0xF1 => "n",
        0xF2..=0xF6 | 0xF8 => "o",
        0xF7 => "/",
        0xF9..=0xFC => "u",
        0xFD | 0xFF => "y",
        0xFE => "th",
        0x132 => "IJ",
        0x133 => "ij",
        0x149 => "'n",
        0x152 => "OE",
        0x153 => "oe",
        0x100..=0x17F => {
            let i = (c - 0x100) as usize;
            return LATIN_EXTENDED_A[i..=i].to_string();
        }
        0x2010..=0x2012 | 0x2013 | 0x2212 => "-",
        0x2014 => "--",
        0x2018 | 0x2019 | 0x201A | 0x2032 => "'",
        0x201C | 0x201D | 0x201E | 0x2033 => "\"",
        0x2022 => "o",
        0x2026 => "...",
        0x2039 => "<",
        0x203A => ">",
        0x20AC => "EUR",
        0x2122 => "(TM)",
        _ => "?",
    };
    s.to_string()
}

const USAGE: &str = "Usage: iconv [-c] [-f FROM] [-t TO] [-o FILE] [FILE...]\n       iconv -l";

pub fn iconv(argv: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = argv
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (mut from, mut to) = (String::new(), String::new());
    let mut skip_invalid = false;
    let mut output: Option<String> = None;
    let mut files = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let mut value = |short: &str, long: &str| -> Option<Option<String>> {
            if a == short || a == long {
                i += 1;
                return Some(args.get(i).cloned());
            }
            if let Some(v) = a.strip_prefix(&format!("{long}=")) {
                return Some(Some(v.to_string()));
            }
            a.strip_prefix(short)
                .filter(|v| !v.is_empty() && !short.is_empty())
                .map(|v| Some(v.to_string()))
        };
        if let Some(v) = value("-f", "--from-code") {
            from = v.unwrap_or_default();
        } else if let Some(v) = value("-t", "--to-code") {
            to = v.unwrap_or_default();
        } else if let Some(v) = value("-o", "--output") {
            output = v;
        } else {
            match a {
                "-c" => skip_invalid = true,
                "-s" | "--silent" => {}
                "-l" | "--list" => {
                    for (_, names) in NAMES {
                        for n in *names {
                            println!("{n}//");
                        }
                    }
                    return 0;
                }
                "--help" => {
                    println!("{USAGE}");
                    return 0;
                }
                "--" => files.extend(args[i + 1..].iter().cloned()),
                s if s.starts_with('-') && s.len() > 1 => {
                    eprintln!("iconv: invalid option -- '{}'\n{USAGE}", &s[1..]);
                    return 1;
                }
                _ => files.push(a.to_string()),
            }
            if a == "--" {
                break;
            }
        }
        i += 1;
    }
    let Some((from_enc, _, _)) = parse(&from) else {
        eprintln!("iconv: conversion from `{from}' is not supported");
        return 1;
    };
    let Some((to_enc, translit, ignore)) = parse(&to) else {
        eprintln!("iconv: conversion to `{to}' is not supported");
        return 1;
    };
    if files.is_empty() {
        files.push("-".into());
    }
    let utf8_locale = crate::own::utf8_locale();
    let mut out = Vec::new();
    if matches!(to_enc, Enc::Utf16) {
        out.extend_from_slice(&[0xFF, 0xFE]);
    } else if matches!(to_enc, Enc::Utf32) {
        out.extend_from_slice(&[0xFF, 0xFE, 0, 0]);
    }
    let mut status = 0;
    'files: for file in &files {
        let mut input = Vec::new();
        let read = if file == "-" {
            std::io::stdin().read_to_end(&mut input)
        } else {
            std::fs::File::open(file).and_then(|mut f| f.read_to_end(&mut input))
        };
        if let Err(e) = read {
            eprintln!(
                "iconv: cannot open input file `{file}': {}",
                crate::own::reason(&e)
            );
            status = 1;
            continue;
        }
        let mut at = 0;
        // A byte-order mark picks the order (and is not text); without one, the machine's
        // (little-endian), as glibc does.
        let mut big_endian = matches!(from_enc, Enc::Utf16Be | Enc::Utf32Be);
        match from_enc {
            Enc::Utf16 if input.starts_with(&[0xFF, 0xFE]) => at = 2,
            Enc::Utf16 if input.starts_with(&[0xFE, 0xFF]) => (at, big_endian) = (2, true),
            _ => {}
        }
        if from_enc == Enc::Utf32 {
            if input.starts_with(&[0xFF, 0xFE, 0, 0]) {
                (at, big_endian) = (4, false);
            } else if input.starts_with(&[0, 0, 0xFE, 0xFF]) {
                at = 4;
            }
        }
        let mut lacked = false;
        while at < input.len() {
            match decode(from_enc, &input, at, big_endian) {
                Ok((c, len)) => {
                    if !encode(to_enc, c, &mut out) {
                        if translit {
                            for t in transliterate(c, utf8_locale).chars() {
                                if !encode(to_enc, u32::from(t), &mut out) {
                                    encode(to_enc, u32::from('?'), &mut out);
                                }
                            }
                        } else if skip_invalid {
                        } else if ignore {
                            lacked = true;
                        } else {
                            eprintln!("iconv: illegal input sequence at position {at}");
                            status = 1;
                            break 'files;
                        }
                    }
                    at += len;
                }
                Err(0) => {
                    eprintln!("iconv: incomplete character or shift sequence at end of buffer");
                    status = 1;
                    break 'files;
                }
                Err(len) if skip_invalid || ignore => {
                    lacked |= ignore && !skip_invalid;
                    at += len;
                }
                Err(_) => {
                    eprintln!("iconv: illegal input sequence at position {at}");
                    status = 1;
                    break 'files;
                }
            }
        }
        if lacked {
            // glibc reports the skipped characters at the end of the input.
            eprintln!("iconv: illegal input sequence at position {}", input.len());
            status = 1;
        }
    }
    let written = match &output {
        Some(path) => std::fs::write(path, &out),
        None => std::io::stdout().write_all(&out),
    };
    if let Err(e) = written {
        eprintln!("iconv: cannot write output: {}", crate::own::reason(&e));
        return 1;
    }
    status
}
