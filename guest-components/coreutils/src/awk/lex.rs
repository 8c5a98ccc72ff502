//! awk tokens. A `/` starts a regular expression where an operand is expected and divides
//! where one has just ended; newlines are tokens (they end statements).

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Num(f64),
    Str(String),
    Ere(String),
    /// A variable or function name not directly followed by `(`.
    Name(String),
    /// A name directly followed by `(`: a call of a user function.
    FuncName(String),
    /// A built-in function name (`length`, `substr`, ...).
    Builtin(String),
    Keyword(&'static str),
    Punct(&'static str),
    Newline,
    Eof,
}

const KEYWORDS: &[&str] = &[
    "BEGIN", "END", "function", "func", "if", "else", "while", "for", "do", "break", "continue",
    "next", "nextfile", "exit", "return", "delete", "in", "getline", "print", "printf",
];

pub const BUILTINS: &[&str] = &[
    "length", "substr", "index", "split", "sub", "gsub", "match", "sprintf", "sin", "cos", "atan2",
    "exp", "log", "sqrt", "int", "rand", "srand", "tolower", "toupper", "system", "close",
    "fflush",
];

/// Longest first, so `**=` wins over `**` and `*`.
const PUNCT: &[&str] = &[
    "**=", "&&", "||", "==", "<=", ">=", "!=", "++", "--", "+=", "-=", "*=", "/=", "%=", "^=",
    "!~", ">>", "**", "{", "}", "(", ")", "[", "]", ";", ",", "+", "-", "*", "/", "%", "^", "!",
    ">", "<", "|", "?", ":", "~", "$", "=",
];

pub struct Lexed {
    pub toks: Vec<Tok>,
    pub lines: Vec<usize>,
}

fn ends_operand(t: Option<&Tok>) -> bool {
    matches!(
        t,
        Some(
            Tok::Num(_)
                | Tok::Str(_)
                | Tok::Ere(_)
                | Tok::Name(_)
                | Tok::Builtin(_)
                | Tok::Punct(")")
                | Tok::Punct("]")
                | Tok::Punct("$")
                | Tok::Punct("++")
                | Tok::Punct("--")
        )
    )
}

/// The escape sequences of string literals (and of `-v` / operand assignments).
pub fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('f') => out.push('\x0c'),
            Some('v') => out.push('\x0b'),
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some('/') => out.push('/'),
            Some(d @ '0'..='7') => {
                let mut v = d.to_digit(8).unwrap();
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(n) => {
                            v = v * 8 + n;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(v).unwrap_or('?'));
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

pub fn lex(src: &str) -> Result<Lexed, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let mut lines = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let at = line;
        let push = |toks: &mut Vec<Tok>, lines: &mut Vec<usize>, t: Tok| {
            toks.push(t);
            lines.push(at);
        };
        match c {
            ' ' | '\t' | '\r' => i += 1,
            '\\' if chars.get(i + 1) == Some(&'\n') => {
                i += 2;
                line += 1;
            }
            '\\' if chars.get(i + 1) == Some(&'\r') && chars.get(i + 2) == Some(&'\n') => {
                i += 3;
                line += 1;
            }
            '\n' => {
                push(&mut toks, &mut lines, Tok::Newline);
                line += 1;
                i += 1;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '"' => {
                let mut raw = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None | Some('\n') => {
                            return Err(format!("unterminated string at source line {line}"));
                        }
                        Some('"') => break,
                        Some('\\') if i + 1 < chars.len() => {
                            if chars[i + 1] == '\n' {
                                line += 1;
                            } else {
                                raw.push('\\');
                                raw.push(chars[i + 1]);
                            }
                            i += 2;
                            continue;
                        }
                        Some(&c) => raw.push(c),
                    }
                    i += 1;
                }
                i += 1;
                push(&mut toks, &mut lines, Tok::Str(unescape(&raw)));
            }
            '/' if !ends_operand(toks.last()) => {
                let mut re = String::new();
                let mut in_bracket = false;
                i += 1;
                loop {
                    match chars.get(i) {
                        None | Some('\n') => {
                            return Err(format!(
                                "unterminated regular expression at source line {line}"
                            ));
                        }
                        Some('/') if !in_bracket => break,
                        Some('\\') if i + 1 < chars.len() => {
                            if chars[i + 1] == '/' {
                                re.push('/');
                            } else {
                                re.push('\\');
                                re.push(chars[i + 1]);
                            }
                            i += 2;
                            continue;
                        }
                        Some('[') if !in_bracket => {
                            in_bracket = true;
                            re.push('[');
                            // `]` right after `[` or `[^` is a member, not the end.
                            if chars.get(i + 1) == Some(&'^') {
                                re.push('^');
                                i += 1;
                            }
                            if chars.get(i + 1) == Some(&']') {
                                re.push(']');
                                i += 1;
                            }
                        }
                        Some('[') if chars.get(i + 1) == Some(&':') => {
                            // A class like [:digit:] inside a bracket expression.
                            let end = (i + 2..chars.len().saturating_sub(1))
                                .find(|&j| chars[j] == ':' && chars[j + 1] == ']');
                            match end {
                                Some(j) => {
                                    re.extend(&chars[i..j + 2]);
                                    i = j + 2;
                                    continue;
                                }
                                None => re.push('['),
                            }
                        }
                        Some(']') if in_bracket => {
                            in_bracket = false;
                            re.push(']');
                        }
                        Some(&c) => re.push(c),
                    }
                    i += 1;
                }
                i += 1;
                push(&mut toks, &mut lines, Tok::Ere(re));
            }
            '0'..='9' | '.' if c != '.' || chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()) => {
                let start = i;
                if c == '0' && matches!(chars.get(i + 1), Some('x' | 'X')) {
                    i += 2;
                    while i < chars.len() && chars[i].is_ascii_hexdigit() {
                        i += 1;
                    }
                    let text: String = chars[start + 2..i].iter().collect();
                    let v = u64::from_str_radix(&text, 16).map_err(|e| e.to_string())?;
                    push(&mut toks, &mut lines, Tok::Num(v as f64));
                    continue;
                }
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                    let mut j = i + 1;
                    if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                        j += 1;
                    }
                    if j < chars.len() && chars[j].is_ascii_digit() {
                        i = j;
                        while i < chars.len() && chars[i].is_ascii_digit() {
                            i += 1;
                        }
                    }
                }
                let text: String = chars[start..i].iter().collect();
                let v = text
                    .parse::<f64>()
                    .map_err(|_| format!("bad number {text:?} at source line {line}"))?;
                push(&mut toks, &mut lines, Tok::Num(v));
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let t = if let Some(k) = KEYWORDS.iter().find(|k| **k == word) {
                    Tok::Keyword(if *k == "func" { "function" } else { k })
                } else if BUILTINS.contains(&word.as_str()) {
                    Tok::Builtin(word)
                } else if chars.get(i) == Some(&'(') {
                    Tok::FuncName(word)
                } else {
                    Tok::Name(word)
                };
                push(&mut toks, &mut lines, t);
            }
            _ => {
                let rest: String = chars[i..chars.len().min(i + 3)].iter().collect();
                let Some(p) = PUNCT.iter().find(|p| rest.starts_with(**p)) else {
                    return Err(format!("invalid character '{c}' at source line {line}"));
                };
                i += p.chars().count();
                let p = match *p {
                    "**" => "^",
                    "**=" => "^=",
                    p => p,
                };
                push(&mut toks, &mut lines, Tok::Punct(p));
            }
        }
    }
    toks.push(Tok::Eof);
    lines.push(line);
    Ok(Lexed { toks, lines })
}
