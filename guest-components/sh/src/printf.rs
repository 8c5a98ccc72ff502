//! `printf FORMAT ARGS...` with bash's conversions; the format is reused while arguments
//! remain. The output is bytes: `\xHH` and `\NNN` escapes write the byte they name, as
//! bash does, whether or not it is valid UTF-8.

/// The output and (status, first error message).
pub fn format(fmt: &str, args: &[String]) -> (Vec<u8>, (i32, Option<String>)) {
    let mut out = Vec::new();
    let mut status = (0, None);
    let mut next = 0;
    loop {
        let consumed_before = next;
        let stop = one_pass(fmt, args, &mut next, &mut out, &mut status);
        if stop || next >= args.len() || next == consumed_before {
            break;
        }
    }
    (out, status)
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
}

fn push_char(out: &mut Vec<u8>, c: char) {
    push_str(out, c.encode_utf8(&mut [0; 4]));
}

fn one_pass(
    fmt: &str,
    args: &[String],
    next: &mut usize,
    out: &mut Vec<u8>,
    status: &mut (i32, Option<String>),
) -> bool {
    let chars: Vec<char> = fmt.chars().collect();
    let mut i = 0;
    let take = |next: &mut usize| -> Option<String> {
        let a = args.get(*next).cloned();
        if a.is_some() {
            *next += 1;
        }
        a
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            let (s, used, stop) = escape(&chars[i..]);
            out.extend_from_slice(&s);
            i += used;
            if stop {
                return true;
            }
            continue;
        }
        if c != '%' {
            push_char(out, c);
            i += 1;
            continue;
        }
        i += 1;
        if chars.get(i) == Some(&'%') {
            push_char(out, '%');
            i += 1;
            continue;
        }
        let mut spec = String::from("%");
        while i < chars.len() && "-+ #0".contains(chars[i]) {
            spec.push(chars[i]);
            i += 1;
        }
        let mut width = String::new();
        if chars.get(i) == Some(&'*') {
            width = take(next).unwrap_or_default();
            i += 1;
        } else {
            while i < chars.len() && chars[i].is_ascii_digit() {
                width.push(chars[i]);
                i += 1;
            }
        }
        let mut precision: Option<String> = None;
        if chars.get(i) == Some(&'.') {
            i += 1;
            let mut p = String::new();
            if chars.get(i) == Some(&'*') {
                p = take(next).unwrap_or_default();
                i += 1;
            } else {
                while i < chars.len() && chars[i].is_ascii_digit() {
                    p.push(chars[i]);
                    i += 1;
                }
            }
            precision = Some(p);
        }
        while i < chars.len() && "hlLjzt".contains(chars[i]) {
            i += 1;
        }
        let Some(&conv) = chars.get(i) else {
            push_str(out, &spec);
            break;
        };
        i += 1;
        let flags = &spec[1..];
        let width: usize = width.trim_start_matches('-').parse().unwrap_or(0);
        let left = flags.contains('-');
        let prec: Option<usize> = precision.as_deref().map(|p| p.parse().unwrap_or(0));
        let arg = take(next);
        let body = match conv {
            's' => {
                let mut s = arg.unwrap_or_default();
                if let Some(p) = prec {
                    s = s.chars().take(p).collect();
                }
                s
            }
            'b' => {
                let s = arg.unwrap_or_default();
                let (s, stop) = match s.find("\\c") {
                    Some(k) => (s[..k].to_string(), true),
                    None => (s, false),
                };
                let bytes = escaped_bytes(&s);
                let fill = width.saturating_sub(String::from_utf8_lossy(&bytes).chars().count());
                if !left {
                    out.extend(std::iter::repeat_n(b' ', fill));
                }
                out.extend_from_slice(&bytes);
                if left {
                    out.extend(std::iter::repeat_n(b' ', fill));
                }
                if stop {
                    return true;
                }
                continue;
            }
            'c' => arg
                .and_then(|a| a.chars().next())
                .map(String::from)
                .unwrap_or_default(),
            'd' | 'i' | 'u' | 'x' | 'X' | 'o' => {
                let a = arg.unwrap_or_default();
                let n = match parse_int(&a) {
                    Some(n) => n,
                    None => {
                        if status.1.is_none() {
                            *status = (1, Some(format!("{a}: invalid number")));
                        }
                        0
                    }
                };
                let digits = match conv {
                    'x' => format!("{:x}", n),
                    'X' => format!("{:X}", n),
                    'o' => format!("{:o}", n),
                    'u' => format!("{}", n as u64),
                    _ => format!("{}", n.unsigned_abs()),
                };
                let mut digits = match prec {
                    Some(p) if digits.len() < p => {
                        format!("{}{digits}", "0".repeat(p - digits.len()))
                    }
                    _ => digits,
                };
                if flags.contains('#') && conv == 'x' && n != 0 {
                    digits = format!("0x{digits}");
                }
                let sign = if matches!(conv, 'd' | 'i') {
                    if n < 0 {
                        "-"
                    } else if flags.contains('+') {
                        "+"
                    } else if flags.contains(' ') {
                        " "
                    } else {
                        ""
                    }
                } else {
                    ""
                };
                if flags.contains('0')
                    && !left
                    && prec.is_none()
                    && width > sign.len() + digits.len()
                {
                    format!(
                        "{sign}{}{digits}",
                        "0".repeat(width - sign.len() - digits.len())
                    )
                } else {
                    format!("{sign}{digits}")
                }
            }
            'f' | 'F' | 'e' | 'E' | 'g' | 'G' => {
                let a = arg.unwrap_or_default();
                let x: f64 = a.trim().parse().unwrap_or_else(|_| {
                    if !a.is_empty() && status.1.is_none() {
                        *status = (1, Some(format!("{a}: invalid number")));
                    }
                    0.0
                });
                let p = prec.unwrap_or(6);
                let s = match conv {
                    'f' | 'F' => format!("{x:.p$}"),
                    'e' | 'E' => c_exp(x, p, conv == 'E'),
                    _ => {
                        let p = if p == 0 { 1 } else { p };
                        let exp = if x == 0.0 {
                            0
                        } else {
                            x.abs().log10().floor() as i32
                        };
                        if exp < -4 || exp >= p as i32 {
                            let s = c_exp(x, p - 1, conv == 'G');
                            trim_g(&s)
                        } else {
                            let decimals = (p as i32 - 1 - exp).max(0) as usize;
                            trim_g(&format!("{x:.decimals$}"))
                        }
                    }
                };
                let s = if flags.contains('+') && x >= 0.0 {
                    format!("+{s}")
                } else {
                    s
                };
                if flags.contains('0') && !left && width > s.len() {
                    let (sign, rest) = if s.starts_with('-') || s.starts_with('+') {
                        s.split_at(1)
                    } else {
                        ("", s.as_str())
                    };
                    format!("{sign}{}{rest}", "0".repeat(width - s.len()))
                } else {
                    s
                }
            }
            'q' => shell_quote(&arg.unwrap_or_default()),
            other => {
                if status.1.is_none() {
                    *status = (1, Some(format!("%{other}: invalid format character")));
                }
                String::new()
            }
        };
        push_str(out, &pad(&body, width, left, false));
    }
    false
}

/// The backslash escapes of a `%b` argument, as bytes (`\0NNN` and `\NNN` octal, `\xHH`).
fn escaped_bytes(s: &str) -> Vec<u8> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '\\' {
            push_char(&mut out, chars[i]);
            i += 1;
            continue;
        }
        // `\0NNN` in %b takes up to three octal digits after the zero.
        if chars.get(i + 1) == Some(&'0') {
            let digits: String = chars[i + 2..]
                .iter()
                .take(3)
                .take_while(|c| ('0'..='7').contains(c))
                .collect();
            out.push(u32::from_str_radix(&digits, 8).unwrap_or(0) as u8);
            i += 2 + digits.len();
            continue;
        }
        let (bytes, used, _) = escape(&chars[i..]);
        out.extend_from_slice(&bytes);
        i += used;
    }
    out
}

fn trim_g(s: &str) -> String {
    if let Some((mant, exp)) = s.split_once(['e', 'E']) {
        let m = if mant.contains('.') {
            mant.trim_end_matches('0').trim_end_matches('.')
        } else {
            mant
        };
        let e = if s.contains('E') { 'E' } else { 'e' };
        format!("{m}{e}{exp}")
    } else if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

fn c_exp(x: f64, p: usize, upper: bool) -> String {
    let s = format!("{x:.p$e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let e = if upper { 'E' } else { 'e' };
    format!(
        "{mant}{e}{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

fn pad(s: &str, width: usize, left: bool, _zero: bool) -> String {
    let n = s.chars().count();
    if n >= width {
        return s.to_string();
    }
    if left {
        format!("{s}{}", " ".repeat(width - n))
    } else {
        format!("{}{s}", " ".repeat(width - n))
    }
}

fn parse_int(a: &str) -> Option<i64> {
    let t = a.trim();
    if t.is_empty() {
        return Some(0);
    }
    if let Some(c) = t.strip_prefix('\'').or_else(|| t.strip_prefix('"')) {
        return c.chars().next().map(|c| c as i64);
    }
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let n = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else if body.len() > 1 && body.starts_with('0') {
        i64::from_str_radix(&body[1..], 8).ok()?
    } else {
        body.parse().ok()?
    };
    Some(if neg { -n } else { n })
}

/// One backslash escape of a format string: (bytes, chars used, stop output).
fn escape(chars: &[char]) -> (Vec<u8>, usize, bool) {
    match chars.get(1) {
        None => (b"\\".to_vec(), 1, false),
        Some('c') => (Vec::new(), 2, true),
        Some(&c) if c.is_ascii_digit() && c < '8' => {
            let mut k = 1;
            let mut oct = String::new();
            while k < chars.len() && oct.len() < 3 && ('0'..='7').contains(&chars[k]) {
                oct.push(chars[k]);
                k += 1;
            }
            let v = u32::from_str_radix(&oct, 8).unwrap_or(0);
            (vec![v as u8], k, false)
        }
        Some('x') => {
            let hex: String = chars[2..]
                .iter()
                .take(2)
                .take_while(|c| c.is_ascii_hexdigit())
                .collect();
            match u8::from_str_radix(&hex, 16) {
                Ok(b) => (vec![b], 2 + hex.len(), false),
                Err(_) => (b"\\x".to_vec(), 2, false),
            }
        }
        Some(_) => {
            let s: String = chars[..2].iter().collect();
            (crate::expand::ansi_c(&s).into_bytes(), 2, false)
        }
    }
}

/// `%q`: the argument quoted for reuse as shell input, as bash writes it: `''` for nothing,
/// `$'...'` when it holds control characters, else a backslash before each character the
/// shell would treat specially (`~` and `#` only at the start).
pub fn shell_quote(a: &str) -> String {
    if a.is_empty() {
        return "''".into();
    }
    if a.chars().any(|c| c.is_control()) {
        let mut out = String::from("$'");
        for c in a.chars() {
            match c {
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                '\x07' => out.push_str("\\a"),
                '\x08' => out.push_str("\\b"),
                '\x0b' => out.push_str("\\v"),
                '\x0c' => out.push_str("\\f"),
                '\x1b' => out.push_str("\\E"),
                '\'' => out.push_str("\\'"),
                '\\' => out.push_str("\\\\"),
                c if c.is_control() => out.push_str(&format!("\\{:03o}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('\'');
        return out;
    }
    let mut out = String::new();
    for (i, c) in a.chars().enumerate() {
        let special = matches!(
            c,
            ' ' | '!'
                | '"'
                | '$'
                | '&'
                | '\''
                | '('
                | ')'
                | '*'
                | ','
                | ';'
                | '<'
                | '>'
                | '?'
                | '['
                | '\\'
                | ']'
                | '^'
                | '`'
                | '{'
                | '|'
                | '}'
        ) || (i == 0 && matches!(c, '~' | '#'));
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
