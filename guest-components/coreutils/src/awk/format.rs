//! `printf`-style formatting as C does it (`%d %i %o %x %X %u %c %s %e %E %f %F %g %G %%`,
//! flags `-+ #0`, width, precision, `*`), and number-to-string conversion.

use super::Value;

/// A number as awk prints it: integers exactly, others through `fmt` (OFMT / CONVFMT).
pub fn num_to_string(n: f64, fmt: &str) -> String {
    if n == n.trunc() && n.abs() < 1e16 {
        return format!("{}", n as i64);
    }
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n < 0.0 { "-inf" } else { "inf" }.into();
    }
    sprintf(fmt, &[Value::Num(n)], "%.6g")
}

struct Spec {
    minus: bool,
    plus: bool,
    space: bool,
    alt: bool,
    zero: bool,
    width: usize,
    precision: Option<usize>,
}

fn pad(s: String, spec: &Spec, numeric: bool) -> String {
    let len = s.chars().count();
    if len >= spec.width {
        return s;
    }
    let fill = spec.width - len;
    if spec.minus {
        return s + &" ".repeat(fill);
    }
    if spec.zero && numeric {
        // Zeros go after the sign (and after 0x).
        let split = if s.starts_with(['-', '+', ' ']) {
            1
        } else if s.starts_with("0x") || s.starts_with("0X") {
            2
        } else {
            0
        };
        return format!("{}{}{}", &s[..split], "0".repeat(fill), &s[split..]);
    }
    " ".repeat(fill) + &s
}

fn sign(neg: bool, spec: &Spec) -> &'static str {
    if neg {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    }
}

/// `%e` digits: mantissa with `prec` decimals, exponent with a sign and two digits at least.
fn exp_form(v: f64, prec: usize, upper: bool, alt: bool) -> String {
    let s = format!("{:.*e}", prec, v);
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut mant = mant.to_string();
    if alt && prec == 0 {
        mant.push('.');
    }
    let e = if upper { 'E' } else { 'e' };
    format!(
        "{mant}{e}{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

fn g_form(v: f64, prec: usize, upper: bool, alt: bool) -> String {
    let p = if prec == 0 { 1 } else { prec };
    if v == 0.0 {
        return if alt {
            format!("{:.*}", p - 1, 0.0)
        } else {
            "0".into()
        };
    }
    let probe = format!("{:.*e}", p - 1, v);
    let exp: i32 = probe
        .split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0);
    let mut s = if exp < -4 || exp >= p as i32 {
        exp_form(v, p - 1, upper, alt)
    } else {
        format!("{:.*}", (p as i32 - 1 - exp).max(0) as usize, v)
    };
    if !alt {
        // Trailing zeros of the fraction go, and a bare point.
        let (body, tail) = match s.find(['e', 'E']) {
            Some(i) => (s[..i].to_string(), s[i..].to_string()),
            None => (s.clone(), String::new()),
        };
        if body.contains('.') {
            let trimmed = body.trim_end_matches('0').trim_end_matches('.');
            s = format!("{trimmed}{tail}");
        }
    }
    s
}

fn special(v: f64) -> Option<&'static str> {
    if v.is_nan() {
        Some("nan")
    } else if v.is_infinite() {
        Some("inf")
    } else {
        None
    }
}

/// Formats `args` by `fmt`; `convfmt` turns numbers into strings for `%s`.
pub fn sprintf(fmt: &str, args: &[Value], convfmt: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = fmt.chars().collect();
    let mut next_arg = args.iter();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '%' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let mut spec = Spec {
            minus: false,
            plus: false,
            space: false,
            alt: false,
            zero: false,
            width: 0,
            precision: None,
        };
        while i < chars.len() {
            match chars[i] {
                '-' => spec.minus = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '#' => spec.alt = true,
                '0' => spec.zero = true,
                _ => break,
            }
            i += 1;
        }
        if chars.get(i) == Some(&'*') {
            let w = next_arg.next().map_or(0.0, Value::num);
            if w < 0.0 {
                spec.minus = true;
            }
            spec.width = w.abs() as usize;
            i += 1;
        } else {
            while let Some(d) = chars.get(i).and_then(|c| c.to_digit(10)) {
                spec.width = spec.width * 10 + d as usize;
                i += 1;
            }
        }
        if chars.get(i) == Some(&'.') {
            i += 1;
            let mut p = 0;
            if chars.get(i) == Some(&'*') {
                p = next_arg.next().map_or(0.0, Value::num).max(0.0) as usize;
                i += 1;
            } else {
                while let Some(d) = chars.get(i).and_then(|c| c.to_digit(10)) {
                    p = p * 10 + d as usize;
                    i += 1;
                }
            }
            spec.precision = Some(p);
        }
        // Length modifiers mean nothing here.
        while matches!(chars.get(i), Some('h' | 'l' | 'L' | 'q' | 'j' | 'z' | 't')) {
            i += 1;
        }
        let Some(&conv) = chars.get(i) else {
            out.extend(&chars[start..]);
            break;
        };
        i += 1;
        match conv {
            '%' => out.push('%'),
            'd' | 'i' | 'u' => {
                let v = next_arg.next().map_or(0.0, Value::num);
                if let Some(s) = special(v) {
                    let s = format!("{}{s}", sign(v < 0.0, &spec));
                    out.push_str(&pad(s, &spec, false));
                    continue;
                }
                let n = v.trunc();
                let mut digits = format!("{}", n.abs() as u128);
                if let Some(p) = spec.precision {
                    if p == 0 && n == 0.0 {
                        digits.clear();
                    }
                    while digits.len() < p {
                        digits.insert(0, '0');
                    }
                    spec.zero = false;
                }
                let s = format!("{}{digits}", sign(n < 0.0, &spec));
                out.push_str(&pad(s, &spec, true));
            }
            'o' | 'x' | 'X' => {
                let v = next_arg.next().map_or(0.0, Value::num).trunc();
                let n = if v < 0.0 { v as i64 as u64 } else { v as u64 };
                let mut digits = match conv {
                    'o' => format!("{n:o}"),
                    'x' => format!("{n:x}"),
                    _ => format!("{n:X}"),
                };
                if let Some(p) = spec.precision {
                    while digits.len() < p {
                        digits.insert(0, '0');
                    }
                    spec.zero = false;
                }
                if spec.alt && n != 0 {
                    digits = match conv {
                        'o' if !digits.starts_with('0') => format!("0{digits}"),
                        'x' => format!("0x{digits}"),
                        'X' => format!("0X{digits}"),
                        _ => digits,
                    };
                }
                out.push_str(&pad(digits, &spec, true));
            }
            'c' => {
                let utf8 = utf8_locale();
                let s = match next_arg.next() {
                    // As gawk: the character of that code point in a UTF-8 locale, else
                    // the byte of its low eight bits.
                    Some(Value::Num(n)) if utf8 => {
                        char::from_u32(*n as u32).unwrap_or('?').to_string()
                    }
                    Some(Value::Num(n)) => byte_char((*n as i64 & 0xff) as u8).to_string(),
                    Some(v) => {
                        let text = v.string(convfmt);
                        match text.chars().next() {
                            Some(c) if utf8 || c.is_ascii() => c.to_string(),
                            // The first byte of the string, in a locale of bytes.
                            Some(_) => byte_char(text.as_bytes()[0]).to_string(),
                            None => String::new(),
                        }
                    }
                    None => String::new(),
                };
                out.push_str(&pad(s, &spec, false));
            }
            's' => {
                let mut s = next_arg
                    .next()
                    .map(|v| v.string(convfmt))
                    .unwrap_or_default();
                if let Some(p) = spec.precision {
                    s = s.chars().take(p).collect();
                }
                out.push_str(&pad(s, &spec, false));
            }
            'e' | 'E' | 'f' | 'F' | 'g' | 'G' => {
                let v = next_arg.next().map_or(0.0, Value::num);
                let prec = spec.precision.unwrap_or(6);
                let body = if let Some(s) = special(v.abs()) {
                    spec.zero = false;
                    if conv.is_uppercase() {
                        s.to_uppercase()
                    } else {
                        s.to_string()
                    }
                } else {
                    match conv {
                        'e' | 'E' => exp_form(v.abs(), prec, conv == 'E', spec.alt),
                        'f' | 'F' => {
                            let mut s = format!("{:.*}", prec, v.abs());
                            if spec.alt && prec == 0 {
                                s.push('.');
                            }
                            s
                        }
                        _ => g_form(v.abs(), prec, conv == 'G', spec.alt),
                    }
                };
                let s = format!("{}{body}", sign(v.is_sign_negative() && v != 0.0, &spec));
                out.push_str(&pad(s, &spec, true));
            }
            _ => {
                // Not a conversion: printed as written.
                out.extend(&chars[start..i]);
            }
        }
    }
    out
}

/// Whether the environment selects a UTF-8 locale (`LC_ALL`, else `LC_CTYPE`, else `LANG`),
/// as gawk decides whether `%c` writes a character or a byte.
pub fn utf8_locale() -> bool {
    static UTF8: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *UTF8.get_or_init(|| {
        let chosen = ["LC_ALL", "LC_CTYPE", "LANG"]
            .iter()
            .filter_map(|k| std::env::var(k).ok())
            .find(|v| !v.is_empty())
            .unwrap_or_default()
            .to_ascii_lowercase();
        chosen.contains("utf-8") || chosen.contains("utf8")
    })
}

/// Where a raw byte of output (0x80-0xff, which is no character by itself) travels inside
/// awk's strings: a private-use character, written out as the byte ([`raw_bytes`]).
const RAW_BASE: u32 = 0x10_ff00;

/// A byte as awk's strings carry it: ASCII as itself, others as a private-use character.
pub fn byte_char(b: u8) -> char {
    if b.is_ascii() {
        b as char
    } else {
        char::from_u32(RAW_BASE + u32::from(b)).unwrap_or('?')
    }
}

/// The bytes to write for `s`: UTF-8, but each raw byte's character as that byte.
pub fn raw_bytes(s: &str) -> std::borrow::Cow<'_, [u8]> {
    // U+10FF80..U+10FFFF encode as F4 8F BE/BF ..: nothing else starts so.
    if !s
        .as_bytes()
        .windows(3)
        .any(|w| w == [0xf4, 0x8f, 0xbe] || w == [0xf4, 0x8f, 0xbf])
    {
        return std::borrow::Cow::Borrowed(s.as_bytes());
    }
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        let u = c as u32;
        if (RAW_BASE + 0x80..=RAW_BASE + 0xff).contains(&u) {
            out.push((u - RAW_BASE) as u8);
        } else {
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    std::borrow::Cow::Owned(out)
}
