//! `test`, `[` and `[[ ]]`.

use brush_parser::ast::{BinaryPredicate as B, ExtendedTestExpr as X, UnaryPredicate as U};

use crate::shell::Shell;

fn file_test(sh: &Shell, op: &str, path: &str) -> bool {
    let p = sh.abs_path(path);
    let meta = std::fs::metadata(&p);
    match op {
        "-e" | "-a" => meta.is_ok(),
        "-f" => meta.map(|m| m.is_file()).unwrap_or(false),
        "-d" => meta.map(|m| m.is_dir()).unwrap_or(false),
        "-s" => meta.map(|m| m.len() > 0).unwrap_or(false),
        // As root (the sandbox user): readable and writable when present; executable
        // with any execute bit (modes come from the host, WASI has none).
        "-r" | "-w" => meta.is_ok(),
        // Every file is the sandbox user's.
        "-O" | "-G" => meta.is_ok(),
        "-x" => meta.is_ok() && guest_support::file_mode(&p).is_none_or(|mode| mode & 0o111 != 0),
        "-L" | "-h" => std::fs::symlink_metadata(&p)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false),
        "-c" | "-b" | "-S" | "-p" => {
            let want = match op {
                "-c" => 'c',
                "-b" => 'b',
                "-S" => 's',
                _ => 'p',
            };
            guest_support::special_kind(&p, true) == Some(want)
        }
        "-t" | "-g" | "-u" | "-k" => false,
        _ => false,
    }
}

const UNARY_FILE: &[&str] = &[
    "-e", "-a", "-f", "-d", "-s", "-r", "-w", "-x", "-L", "-h", "-p", "-S", "-b", "-c", "-g", "-u",
    "-k", "-O", "-G",
];

fn int(s: &str) -> Result<i64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("{s}: integer expression expected"))
}

fn binary(sh: &Shell, a: &str, op: &str, b: &str) -> Result<Option<bool>, String> {
    Ok(Some(match op {
        "=" | "==" => a == b,
        "!=" => a != b,
        "<" => a < b,
        ">" => a > b,
        "-eq" => int(a)? == int(b)?,
        "-ne" => int(a)? != int(b)?,
        "-lt" => int(a)? < int(b)?,
        "-le" => int(a)? <= int(b)?,
        "-gt" => int(a)? > int(b)?,
        "-ge" => int(a)? >= int(b)?,
        "-nt" | "-ot" => {
            let m = |p: &str| {
                std::fs::metadata(sh.abs_path(p))
                    .and_then(|m| m.modified())
                    .ok()
            };
            match (m(a), m(b)) {
                (Some(x), Some(y)) => {
                    if op == "-nt" {
                        x > y
                    } else {
                        x < y
                    }
                }
                (Some(_), None) => op == "-nt",
                (None, Some(_)) => op == "-ot",
                _ => false,
            }
        }
        "-ef" => sh.abs_path(a) == sh.abs_path(b),
        _ => return Ok(None),
    }))
}

/// `test ARGS` / `[ ARGS ]`: true, false, or an error message (status 2).
pub fn test(sh: &Shell, args: &[String]) -> Result<bool, String> {
    let mut p = Parser { sh, args, pos: 0 };
    if args.is_empty() {
        return Ok(false);
    }
    let v = p.or()?;
    if p.pos < args.len() {
        return Err(format!("{}: unexpected argument", args[p.pos]));
    }
    Ok(v)
}

struct Parser<'a> {
    sh: &'a Shell,
    args: &'a [String],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self, k: usize) -> Option<&'a str> {
        self.args.get(self.pos + k).map(String::as_str)
    }
    fn or(&mut self) -> Result<bool, String> {
        let mut v = self.and()?;
        while self.peek(0) == Some("-o") {
            self.pos += 1;
            let r = self.and()?;
            v = v || r;
        }
        Ok(v)
    }
    fn and(&mut self) -> Result<bool, String> {
        let mut v = self.not()?;
        while self.peek(0) == Some("-a") {
            self.pos += 1;
            let r = self.not()?;
            v = v && r;
        }
        Ok(v)
    }
    fn not(&mut self) -> Result<bool, String> {
        if self.peek(0) == Some("!") && self.peek(1).is_some() {
            self.pos += 1;
            return Ok(!self.not()?);
        }
        self.primary()
    }
    fn primary(&mut self) -> Result<bool, String> {
        let Some(a) = self.peek(0) else {
            return Err("argument expected".into());
        };
        if a == "(" {
            self.pos += 1;
            let v = self.or()?;
            if self.peek(0) != Some(")") {
                return Err("')' expected".into());
            }
            self.pos += 1;
            return Ok(v);
        }
        if let (Some(op), Some(b)) = (self.peek(1), self.peek(2))
            && let Some(v) = binary(self.sh, a, op, b)?
        {
            self.pos += 3;
            return Ok(v);
        }
        if let Some(b) = self.peek(1) {
            if a == "-n" || a == "-z" {
                self.pos += 2;
                return Ok((a == "-n") != b.is_empty());
            }
            if UNARY_FILE.contains(&a) || a == "-t" {
                self.pos += 2;
                return Ok(file_test(self.sh, a, b));
            }
        }
        self.pos += 1;
        Ok(!a.is_empty())
    }
}

/// `[[ expr ]]`.
pub fn extended(sh: &mut Shell, e: &X) -> Result<bool, String> {
    let expand = |sh: &mut Shell, w: &str| {
        sh.expand_single(w)
            .map_err(|_| "bad substitution".to_string())
    };
    Ok(match e {
        X::And(a, b) => extended(sh, a)? && extended(sh, b)?,
        X::Or(a, b) => extended(sh, a)? || extended(sh, b)?,
        X::Not(a) => !extended(sh, a)?,
        X::Parenthesized(a) => extended(sh, a)?,
        X::UnaryTest(op, w) => {
            let v = expand(sh, &w.value)?;
            match op {
                U::StringHasZeroLength => v.is_empty(),
                U::StringHasNonZeroLength => !v.is_empty(),
                U::FileExists => file_test(sh, "-e", &v),
                U::FileExistsAndIsRegularFile => file_test(sh, "-f", &v),
                U::FileExistsAndIsDir => file_test(sh, "-d", &v),
                U::FileExistsAndIsNotZeroLength => file_test(sh, "-s", &v),
                U::FileExistsAndIsSymlink => file_test(sh, "-L", &v),
                U::FileExistsAndIsReadable | U::FileExistsAndIsWritable => file_test(sh, "-e", &v),
                U::FileExistsAndIsExecutable => file_test(sh, "-x", &v),
                U::FileExistsAndIsCharSpecialFile => file_test(sh, "-c", &v),
                U::FileExistsAndIsBlockSpecialFile => file_test(sh, "-b", &v),
                U::FileExistsAndIsSocket => file_test(sh, "-S", &v),
                U::FileExistsAndIsFifo => file_test(sh, "-p", &v),
                U::FileExistsAndOwnedByEffectiveUserId
                | U::FileExistsAndOwnedByEffectiveGroupId => file_test(sh, "-O", &v),
                U::ShellVariableIsSetAndAssigned => match v.split_once('[') {
                    Some((name, rest)) if rest.ends_with(']') => {
                        let index = &rest[..rest.len() - 1];
                        match sh.resolve_key(name, index) {
                            Ok(key) => sh.get_elem(name, &key).is_some(),
                            Err(_) => false,
                        }
                    }
                    _ => sh.vars.contains_key(&v),
                },
                _ => false,
            }
        }
        X::BinaryTest(op, l, r) => {
            let a = expand(sh, &l.value)?;
            match op {
                B::StringExactlyMatchesPattern | B::StringDoesNotExactlyMatchPattern => {
                    let pat = sh
                        .expand_pattern(&r.value)
                        .map_err(|_| "bad substitution".to_string())?;
                    crate::pattern::matches(&pat, &a)
                        == matches!(op, B::StringExactlyMatchesPattern)
                }
                B::StringMatchesRegex => {
                    let re = sh
                        .expand_regex(&r.value)
                        .map_err(|_| "bad substitution".to_string())?;
                    return regex_match(sh, &a, &re);
                }
                _ => {
                    let b = expand(sh, &r.value)?;
                    let o = match op {
                        B::StringExactlyMatchesString => "==",
                        B::StringDoesNotExactlyMatchString => "!=",
                        B::LeftSortsBeforeRight => "<",
                        B::LeftSortsAfterRight => ">",
                        B::ArithmeticEqualTo => "-eq",
                        B::ArithmeticNotEqualTo => "-ne",
                        B::ArithmeticLessThan => "-lt",
                        B::ArithmeticLessThanOrEqualTo => "-le",
                        B::ArithmeticGreaterThan => "-gt",
                        B::ArithmeticGreaterThanOrEqualTo => "-ge",
                        B::LeftFileIsNewerOrExistsWhenRightDoesNot => "-nt",
                        B::LeftFileIsOlderOrDoesNotExistWhenRightDoes => "-ot",
                        B::FilesReferToSameDeviceAndInodeNumbers => "-ef",
                        _ => "==",
                    };
                    if (o.starts_with("-e")
                        || o.starts_with("-n")
                        || o.starts_with("-l")
                        || o.starts_with("-g"))
                        && matches!(o, "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge")
                    {
                        let x = crate::arith::eval_str(sh, &a)?;
                        let y = crate::arith::eval_str(sh, &b)?;
                        return Ok(match o {
                            "-eq" => x == y,
                            "-ne" => x != y,
                            "-lt" => x < y,
                            "-le" => x <= y,
                            "-gt" => x > y,
                            _ => x >= y,
                        });
                    }
                    binary(sh, &a, o, &b)?.unwrap_or(false)
                }
            }
        }
    })
}

/// `[[ s =~ re ]]`: POSIX extended syntax; sets `BASH_REMATCH`. A bad expression is
/// status 2, like bash.
fn regex_match(sh: &mut Shell, s: &str, re: &str) -> Result<bool, String> {
    let translated = re.replace("[[:<:]]", "\\b").replace("[[:>:]]", "\\b");
    let compiled = regex::Regex::new(&translated).map_err(|_| RegexError.to_string())?;
    let mut m = std::collections::BTreeMap::new();
    let found = match compiled.captures(s) {
        Some(caps) => {
            for (i, g) in caps.iter().enumerate() {
                m.insert(
                    i as i64,
                    g.map_or(String::new(), |g| g.as_str().to_string()),
                );
            }
            true
        }
        None => false,
    };
    sh.set_array("BASH_REMATCH", crate::shell::Array::Indexed(m));
    Ok(found)
}

struct RegexError;

impl std::fmt::Display for RegexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("=~: invalid regular expression")
    }
}
