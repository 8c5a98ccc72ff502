//! Shell pattern matching (`*`, `?`, `[...]`, `\x`) for `case`, `[[ == ]]`, `${v%pat}` and
//! pathname expansion.

/// One element of a compiled pattern.
#[derive(Debug, Clone)]
enum Tok {
    Any,
    One,
    Lit(char),
    Class {
        negated: bool,
        items: Vec<(char, char)>,
    },
}

fn compile(pattern: &str) -> Vec<Tok> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => out.push(Tok::Any),
            '?' => out.push(Tok::One),
            '\\' if i + 1 < chars.len() => {
                i += 1;
                out.push(Tok::Lit(chars[i]));
            }
            '[' => match class(&chars, i) {
                Some((tok, next)) => {
                    out.push(tok);
                    i = next;
                    continue;
                }
                None => out.push(Tok::Lit('[')),
            },
            c => out.push(Tok::Lit(c)),
        }
        i += 1;
    }
    out
}

/// Parses a bracket expression starting at `chars[start] == '['`.
fn class(chars: &[char], start: usize) -> Option<(Tok, usize)> {
    let mut i = start + 1;
    let negated = matches!(chars.get(i), Some('!') | Some('^'));
    if negated {
        i += 1;
    }
    let mut items = Vec::new();
    let mut first = true;
    while i < chars.len() {
        let c = chars[i];
        if c == ']' && !first {
            return Some((Tok::Class { negated, items }, i + 1));
        }
        first = false;
        if c == '[' && chars.get(i + 1) == Some(&':') {
            let rest: String = chars[i + 2..].iter().collect();
            if let Some(end) = rest.find(":]") {
                let name = &rest[..end];
                items.extend(named_class(name));
                i += 2 + end + 2;
                continue;
            }
        }
        let c = if c == '\\' && i + 1 < chars.len() {
            i += 1;
            chars[i]
        } else {
            c
        };
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&e| e != ']') {
            items.push((c, chars[i + 2]));
            i += 3;
        } else {
            items.push((c, c));
            i += 1;
        }
    }
    None
}

fn named_class(name: &str) -> Vec<(char, char)> {
    match name {
        "alpha" => vec![('a', 'z'), ('A', 'Z')],
        "digit" => vec![('0', '9')],
        "alnum" => vec![('a', 'z'), ('A', 'Z'), ('0', '9')],
        "upper" => vec![('A', 'Z')],
        "lower" => vec![('a', 'z')],
        "space" => vec![(' ', ' '), ('\t', '\r')],
        "blank" => vec![(' ', ' '), ('\t', '\t')],
        "xdigit" => vec![('0', '9'), ('a', 'f'), ('A', 'F')],
        "punct" => vec![('!', '/'), (':', '@'), ('[', '`'), ('{', '~')],
        _ => vec![],
    }
}

fn matches_at(toks: &[Tok], s: &[char]) -> bool {
    // Iterative matcher with backtracking on the last `*`.
    let (mut ti, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        let ok = match toks.get(ti) {
            Some(Tok::Any) => {
                star = Some((ti, si));
                ti += 1;
                continue;
            }
            Some(Tok::One) => true,
            Some(Tok::Lit(c)) => *c == s[si],
            Some(Tok::Class { negated, items }) => {
                items.iter().any(|&(a, b)| a <= s[si] && s[si] <= b) != *negated
            }
            None => false,
        };
        if ok {
            ti += 1;
            si += 1;
        } else if let Some((st, ss)) = star {
            ti = st + 1;
            si = ss + 1;
            star = Some((st, ss + 1));
        } else {
            return false;
        }
    }
    toks[ti..].iter().all(|t| matches!(t, Tok::Any))
}

/// Whether all of `s` matches `pattern`.
pub fn matches(pattern: &str, s: &str) -> bool {
    let chars: Vec<char> = s.chars().collect();
    matches_at(&compile(pattern), &chars)
}

/// Whether `s` has any unescaped pattern character.
pub fn has_magic(s: &str) -> bool {
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '*' | '?' | '[' => return true,
            _ => {}
        }
    }
    false
}

/// Removes the shortest or longest prefix or suffix of `s` that matches `pattern`.
pub fn remove(s: &str, pattern: &str, suffix: bool, longest: bool) -> String {
    let toks = compile(pattern);
    let chars: Vec<char> = s.chars().collect();
    let n = chars.len();
    // Shortest prefix and longest suffix try cut points from the start; the others from
    // the end.
    let mut cuts: Vec<usize> = (0..=n).collect();
    if suffix != longest {
        cuts.reverse();
    }
    for k in cuts {
        if suffix {
            if matches_at(&toks, &chars[k..]) {
                return chars[..k].iter().collect();
            }
        } else if matches_at(&toks, &chars[..k]) {
            return chars[k..].iter().collect();
        }
    }
    s.to_string()
}

/// Replaces the first (or every) match of `pattern` in `s`; `anchor` is `Some(false)` for a
/// prefix-anchored pattern (`${v/#p/r}`) and `Some(true)` for a suffix-anchored one.
pub fn replace(s: &str, pattern: &str, with: &str, all: bool, anchor: Option<bool>) -> String {
    let toks = compile(pattern);
    let chars: Vec<char> = s.chars().collect();
    let n = chars.len();
    match anchor {
        Some(false) => {
            for end in (0..=n).rev() {
                if matches_at(&toks, &chars[..end]) {
                    return format!("{with}{}", chars[end..].iter().collect::<String>());
                }
            }
            return s.to_string();
        }
        Some(true) => {
            for start in 0..=n {
                if matches_at(&toks, &chars[start..]) {
                    return format!("{}{with}", chars[..start].iter().collect::<String>());
                }
            }
            return s.to_string();
        }
        None => {}
    }
    let mut out = String::new();
    let mut i = 0;
    let mut replaced = false;
    while i < n {
        if replaced && !all {
            break;
        }
        let found = (i + 1..=n)
            .rev()
            .find(|&end| matches_at(&toks, &chars[i..end]));
        match found {
            Some(end) => {
                out.push_str(with);
                i = end;
                replaced = true;
            }
            None => {
                out.push(chars[i]);
                i += 1;
            }
        }
    }
    out.extend(&chars[i..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(matches("*.txt", "a.txt"));
        assert!(!matches("*.txt", "a.txt.bak"));
        assert!(matches("a?c", "abc"));
        assert!(matches("[a-c]x", "bx"));
        assert!(!matches("[!a-c]x", "bx"));
        assert!(matches("\\*", "*"));
    }

    #[test]
    fn removal() {
        assert_eq!(remove("file.tar.gz", ".*", true, false), "file.tar");
        assert_eq!(remove("file.tar.gz", ".*", true, true), "file");
        assert_eq!(remove("/a/b/c", "*/", false, false), "a/b/c");
        assert_eq!(remove("/a/b/c", "*/", false, true), "c");
        assert_eq!(replace("hello", "l", "L", false, None), "heLlo");
        assert_eq!(replace("hello", "l", "L", true, None), "heLLo");
    }
}
