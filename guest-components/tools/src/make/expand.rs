//! Expansion: `$(VAR)`, `${VAR}`, `$X`, substitution references (`$(SRC:.c=.o)`) and
//! GNU make's functions.

use std::collections::HashMap;
use std::rc::Rc;

use super::build::{fill_pattern, match_pattern};
use super::{Make, Origin, R, Var, stop};

/// How deep expansions may nest (each `$(call)`, `$(eval)` or recursive variable is a
/// level).
const MAX_DEPTH: u32 = 200;

/// How many arguments a function splits its text into (the last takes the rest, commas
/// and all); `0` for as many as there are.
fn arity(name: &str) -> Option<usize> {
    Some(match name {
        "subst" | "patsubst" | "wordlist" | "foreach" | "if" => 3,
        "findstring" | "filter" | "filter-out" | "word" | "addsuffix" | "addprefix" | "join"
        | "file" => 2,
        "strip" | "sort" | "words" | "firstword" | "lastword" | "dir" | "notdir" | "suffix"
        | "basename" | "wildcard" | "realpath" | "abspath" | "error" | "warning" | "info"
        | "shell" | "origin" | "flavor" | "value" | "eval" => 1,
        "call" | "or" | "and" => 0,
        _ => return None,
    })
}

/// The index of the `close` that ends a reference opened just before `from`.
fn matching(s: &str, from: usize, open: u8, close: u8) -> Option<usize> {
    let mut depth = 0;
    for (i, &c) in s.as_bytes().iter().enumerate().skip(from) {
        if c == open {
            depth += 1;
        } else if c == close {
            if depth == 0 {
                return Some(i);
            }
            depth -= 1;
        }
    }
    None
}

/// Splits function arguments at top-level commas, into at most `max` (0: no limit).
fn split_args(s: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.bytes().enumerate() {
        match c {
            b'(' | b'{' => depth += 1,
            b')' | b'}' => depth -= 1,
            b',' if depth == 0 && (max == 0 || out.len() + 1 < max) => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn words(s: &str) -> impl Iterator<Item = &str> {
    s.split_whitespace()
}

fn join<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for w in it {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

fn join_owned(it: impl Iterator<Item = String>) -> String {
    it.collect::<Vec<_>>().join(" ")
}

/// `$(dir)`'s answer for one name.
fn dir_of(w: &str) -> String {
    match w.rfind('/') {
        Some(i) => w[..=i].to_string(),
        None => "./".into(),
    }
}

fn notdir_of(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

/// The suffix of a name: from its last `.` after its last `/`.
fn suffix_at(w: &str) -> Option<usize> {
    let dot = w.rfind('.')?;
    (w[dot..].find('/').is_none()).then_some(dot)
}

impl Make {
    /// The variable `name` as the innermost scope sees it.
    pub(super) fn lookup(&self, name: &str) -> Option<&Var> {
        self.scopes
            .iter()
            .rev()
            .find_map(|s| s.get(name))
            .or_else(|| self.vars.get(name))
    }

    /// The value of `$(name)`.
    pub(super) fn var_value(&mut self, name: &str) -> R<String> {
        let Some(var) = self.lookup(name) else {
            // `$(@D)`, `$(<F)` and the like.
            let mut chars = name.chars();
            if let (Some(a), Some(b), None) = (chars.next(), chars.next(), chars.next())
                && "@<^+?*%|".contains(a)
                && (b == 'D' || b == 'F')
            {
                let base = self.var_value(&a.to_string())?;
                return Ok(join_owned(words(&base).map(|w| {
                    if b == 'F' {
                        notdir_of(w).to_string()
                    } else {
                        match w.rfind('/') {
                            Some(0) => "/".to_string(),
                            Some(i) => w[..i].to_string(),
                            None => ".".to_string(),
                        }
                    }
                })));
            }
            return Ok(String::new());
        };
        if !var.recursive {
            return Ok(var.value.clone());
        }
        let value = var.value.clone();
        if self.expanding.iter().any(|n| n == name) {
            return stop(
                self.loc.as_ref(),
                format!("Recursive variable '{name}' references itself (eventually)"),
            );
        }
        self.expanding.push(name.to_string());
        let out = self.expand(&value);
        self.expanding.pop();
        out
    }

    /// Expands every reference in `s`.
    pub(super) fn expand(&mut self, s: &str) -> R<String> {
        if !s.contains('$') {
            return Ok(s.to_string());
        }
        // A `$(call)` or `$(eval)` that reaches itself would otherwise run the stack out.
        if self.depth >= MAX_DEPTH {
            return stop(
                self.loc.as_ref(),
                format!(
                    "expansion nested more than {MAX_DEPTH} deep (a $(call) or $(eval) that reaches itself?)"
                ),
            );
        }
        self.depth += 1;
        let out = self.expand_refs(s);
        self.depth -= 1;
        out
    }

    fn expand_refs(&mut self, s: &str) -> R<String> {
        let mut out = String::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            let Some(k) = s[i..].find('$') else {
                out.push_str(&s[i..]);
                break;
            };
            out.push_str(&s[i..i + k]);
            i += k;
            let Some(c) = s[i + 1..].chars().next() else {
                break;
            };
            match c {
                '$' => {
                    out.push('$');
                    i += 2;
                }
                '(' | '{' => {
                    let (open, close) = if c == '(' { (b'(', b')') } else { (b'{', b'}') };
                    let Some(end) = matching(s, i + 2, open, close) else {
                        return stop(self.loc.as_ref(), "unterminated variable reference");
                    };
                    let inner = &s[i + 2..end];
                    let value = self.reference(inner)?;
                    out.push_str(&value);
                    i = end + 1;
                }
                c => {
                    let value = self.var_value(&c.to_string())?;
                    out.push_str(&value);
                    i += 1 + c.len_utf8();
                }
            }
        }
        Ok(out)
    }

    /// What is inside `$(...)`: a function call, a substitution reference or a variable.
    fn reference(&mut self, inner: &str) -> R<String> {
        let name_end = inner.find([' ', '\t']).unwrap_or(inner.len());
        let fname = &inner[..name_end];
        if name_end < inner.len()
            && let Some(max) = arity(fname)
        {
            let args = inner[name_end..].trim_start_matches([' ', '\t']);
            return self.function(fname, split_args(args, max));
        }
        // `$(VAR:from=to)`.
        let tops = super::parse::top_level(inner);
        if let Some(colon) = tops.iter().find(|&&(_, c)| c == b':').map(|&(i, _)| i)
            && let Some(eq) = tops
                .iter()
                .find(|&&(i, c)| i > colon && c == b'=')
                .map(|&(i, _)| i)
        {
            let name = self.expand(&inner[..colon])?;
            let value = self.var_value(&name)?;
            let from = self.expand(&inner[colon + 1..eq])?;
            let to = self.expand(&inner[eq + 1..])?;
            let (from, to) = if from.contains('%') {
                (from, to)
            } else {
                (format!("%{from}"), format!("%{to}"))
            };
            return Ok(patsubst(&from, &to, &value));
        }
        let name = self.expand(inner)?;
        self.var_value(&name)
    }

    /// Runs `$(fname args...)`; arguments are expanded here, lazily where GNU make is lazy
    /// (`if`, `or`, `and`, `foreach`'s text).
    fn function(&mut self, fname: &str, args: Vec<&str>) -> R<String> {
        let arg = |m: &mut Make, n: usize| -> R<String> {
            match args.get(n) {
                Some(a) => m.expand(a),
                None => Ok(String::new()),
            }
        };
        Ok(match fname {
            "subst" => {
                let (from, to, text) = (arg(self, 0)?, arg(self, 1)?, arg(self, 2)?);
                if from.is_empty() {
                    format!("{text}{to}")
                } else {
                    text.replace(&from, &to)
                }
            }
            "patsubst" => {
                let (from, to, text) = (arg(self, 0)?, arg(self, 1)?, arg(self, 2)?);
                patsubst(from.trim(), to.trim(), &text)
            }
            "strip" => join(words(&arg(self, 0)?)),
            "findstring" => {
                let (find, text) = (arg(self, 0)?, arg(self, 1)?);
                if text.contains(&find) {
                    find
                } else {
                    String::new()
                }
            }
            "filter" | "filter-out" => {
                let (pats, text) = (arg(self, 0)?, arg(self, 1)?);
                let pats: Vec<&str> = words(&pats).collect();
                let keep = fname == "filter";
                join(words(&text).filter(|w| {
                    pats.iter().any(|p| match_pattern(p, w).is_some() || p == w) == keep
                }))
            }
            "sort" => {
                let text = arg(self, 0)?;
                let mut list: Vec<&str> = words(&text).collect();
                list.sort_unstable();
                list.dedup();
                list.join(" ")
            }
            "word" => {
                let (n, text) = (arg(self, 0)?, arg(self, 1)?);
                let n = self.number(&n, "word", "first")?;
                if n == 0 {
                    return stop(
                        self.loc.as_ref(),
                        "first argument to 'word' function must be greater than 0",
                    );
                }
                words(&text).nth(n - 1).unwrap_or_default().to_string()
            }
            "wordlist" => {
                let (s, e, text) = (arg(self, 0)?, arg(self, 1)?, arg(self, 2)?);
                let s = self.number(&s, "wordlist", "first")?;
                let e = self.number(&e, "wordlist", "second")?;
                if s == 0 {
                    return stop(
                        self.loc.as_ref(),
                        format!("invalid first argument to 'wordlist' function: '{s}'"),
                    );
                }
                if e < s {
                    String::new()
                } else {
                    join(words(&text).skip(s - 1).take(e - s + 1))
                }
            }
            "words" => words(&arg(self, 0)?).count().to_string(),
            "firstword" => words(&arg(self, 0)?).next().unwrap_or_default().to_string(),
            "lastword" => words(&arg(self, 0)?).last().unwrap_or_default().to_string(),
            "dir" => join_owned(words(&arg(self, 0)?).map(dir_of)),
            "notdir" => {
                let text = arg(self, 0)?;
                join(words(&text).map(notdir_of))
            }
            "suffix" => {
                let text = arg(self, 0)?;
                join(words(&text).filter_map(|w| suffix_at(w).map(|d| &w[d..])))
            }
            "basename" => {
                let text = arg(self, 0)?;
                join(words(&text).map(|w| match suffix_at(w) {
                    Some(d) => &w[..d],
                    None => w,
                }))
            }
            "addsuffix" => {
                let (suf, text) = (arg(self, 0)?, arg(self, 1)?);
                join_owned(words(&text).map(|w| format!("{w}{suf}")))
            }
            "addprefix" => {
                let (pre, text) = (arg(self, 0)?, arg(self, 1)?);
                join_owned(words(&text).map(|w| format!("{pre}{w}")))
            }
            "join" => {
                let (a, b) = (arg(self, 0)?, arg(self, 1)?);
                let a: Vec<&str> = words(&a).collect();
                let b: Vec<&str> = words(&b).collect();
                join_owned((0..a.len().max(b.len())).map(|i| {
                    format!(
                        "{}{}",
                        a.get(i).copied().unwrap_or_default(),
                        b.get(i).copied().unwrap_or_default()
                    )
                }))
            }
            "wildcard" => {
                let text = arg(self, 0)?;
                join_owned(words(&text).flat_map(glob))
            }
            "realpath" => {
                let text = arg(self, 0)?;
                join_owned(words(&text).filter_map(|w| {
                    std::fs::canonicalize(w)
                        .ok()
                        .map(|p| p.to_string_lossy().into_owned())
                }))
            }
            "abspath" => join_owned(words(&arg(self, 0)?).map(guest_support::normalize)),
            "error" => {
                let msg = arg(self, 0)?;
                return stop(self.loc.as_ref(), msg);
            }
            "warning" => {
                let msg = arg(self, 0)?;
                self.warn(&msg);
                String::new()
            }
            "info" => {
                let msg = arg(self, 0)?;
                println!("{msg}");
                String::new()
            }
            "shell" => {
                let cmd = arg(self, 0)?;
                self.shell_output(&cmd)?
            }
            "origin" => {
                let name = arg(self, 0)?;
                match self.lookup(&name) {
                    Some(v) => v.origin.name().to_string(),
                    None => "undefined".into(),
                }
            }
            "flavor" => {
                let name = arg(self, 0)?;
                match self.lookup(&name) {
                    Some(v) if v.recursive => "recursive".into(),
                    Some(_) => "simple".into(),
                    None => "undefined".into(),
                }
            }
            "value" => {
                let name = arg(self, 0)?;
                self.lookup(&name)
                    .map(|v| v.value.clone())
                    .unwrap_or_default()
            }
            "eval" => {
                let text = arg(self, 0)?;
                let file: Rc<str> = self
                    .loc
                    .as_ref()
                    .map(|l| l.file.clone())
                    .unwrap_or_else(|| Rc::from("eval"));
                let saved = self.loc.clone();
                self.parse_text(&text, file)?;
                self.loc = saved;
                String::new()
            }
            "if" => {
                let cond = arg(self, 0)?;
                if !cond.trim().is_empty() {
                    arg(self, 1)?
                } else {
                    arg(self, 2)?
                }
            }
            "or" => {
                for n in 0..args.len() {
                    let v = arg(self, n)?;
                    if !v.trim().is_empty() {
                        return Ok(v);
                    }
                }
                String::new()
            }
            "and" => {
                let mut last = String::new();
                for n in 0..args.len() {
                    last = arg(self, n)?;
                    if last.trim().is_empty() {
                        return Ok(String::new());
                    }
                }
                last
            }
            "foreach" => {
                let (var, list) = (arg(self, 0)?, arg(self, 1)?);
                let var = var.trim().to_string();
                let text = args.get(2).copied().unwrap_or_default();
                let mut out = Vec::new();
                for w in words(&list) {
                    let mut scope = HashMap::new();
                    scope.insert(
                        var.clone(),
                        Var {
                            value: w.to_string(),
                            recursive: false,
                            origin: Origin::Automatic,
                        },
                    );
                    self.scopes.push(scope);
                    let r = self.expand(text);
                    self.scopes.pop();
                    out.push(r?);
                }
                out.join(" ")
            }
            "call" => {
                let name = arg(self, 0)?;
                let name = name.trim().to_string();
                let mut scope = HashMap::new();
                for n in 0..args.len().max(10) {
                    let value = if n == 0 { name.clone() } else { arg(self, n)? };
                    scope.insert(
                        n.to_string(),
                        Var {
                            value,
                            recursive: false,
                            origin: Origin::Automatic,
                        },
                    );
                }
                let Some(var) = self.lookup(&name).cloned() else {
                    return Ok(String::new());
                };
                self.scopes.push(scope);
                let r = if var.recursive {
                    self.expand(&var.value)
                } else {
                    Ok(var.value)
                };
                self.scopes.pop();
                r?
            }
            "file" => {
                let (op, text) = (
                    arg(self, 0)?,
                    args.get(1).map(|_| arg(self, 1)).transpose()?,
                );
                let op = op.trim();
                if let Some(path) = op.strip_prefix('<') {
                    let text = std::fs::read_to_string(path.trim()).unwrap_or_default();
                    text.strip_suffix('\n').unwrap_or(&text).to_string()
                } else {
                    let (append, path) = match op.strip_prefix(">>") {
                        Some(p) => (true, p),
                        None => (false, op.strip_prefix('>').unwrap_or(op)),
                    };
                    let path = path.trim();
                    let mut data = text.unwrap_or_default();
                    if !data.is_empty() && !data.ends_with('\n') {
                        data.push('\n');
                    }
                    let written = std::fs::OpenOptions::new()
                        .create(true)
                        .write(true)
                        .append(append)
                        .truncate(!append)
                        .open(path)
                        .and_then(|mut f| std::io::Write::write_all(&mut f, data.as_bytes()));
                    if let Err(e) = written {
                        return stop(
                            self.loc.as_ref(),
                            format!("open: {path}: {}", super::reason(&e)),
                        );
                    }
                    String::new()
                }
            }
            _ => unreachable!("arity() names every function"),
        })
    }

    fn number(&self, s: &str, func: &str, which: &str) -> R<usize> {
        s.trim().parse().or_else(|_| {
            stop(
                self.loc.as_ref(),
                format!(
                    "non-numeric {which} argument to '{func}' function: '{}'",
                    s.trim()
                ),
            )
        })
    }

    /// `$(shell CMD)` and `!=`: the command's output, newlines made spaces and the last
    /// ones dropped; `.SHELLSTATUS` is its exit status.
    pub(super) fn shell_output(&mut self, cmd: &str) -> R<String> {
        use guest_support::process::{self, Stdio};
        let (argv, env) = self.shell_command(cmd)?;
        let (r, w) = process::pipe();
        let spawned =
            guest_support::spawn(argv, env, Stdio::Inherit, Stdio::Handle(w), Stdio::Inherit);
        process::close(w);
        let (text, status) = match spawned {
            Ok(pid) => {
                let out = guest_support::read_to_end(r);
                let text = String::from_utf8_lossy(&out);
                let text = text.trim_end_matches('\n').replace('\n', " ");
                (text, process::wait(pid))
            }
            Err(_) => (String::new(), 127),
        };
        process::close(r);
        self.set_status(status);
        Ok(text)
    }

    fn set_status(&mut self, status: i32) {
        self.vars.insert(
            ".SHELLSTATUS".into(),
            Var {
                value: status.to_string(),
                recursive: false,
                origin: Origin::Default,
            },
        );
    }
}

/// `$(patsubst from,to,text)`: words matching `from` (with one `%`) replaced by `to`.
pub(super) fn patsubst(from: &str, to: &str, text: &str) -> String {
    join_owned(words(text).map(|w| {
        if !from.contains('%') {
            return if w == from {
                to.to_string()
            } else {
                w.to_string()
            };
        }
        match match_pattern(from, w) {
            Some(stem) => fill_pattern(to, &stem),
            None => w.to_string(),
        }
    }))
}

/// `$(wildcard PATTERN)`: the existing files that match, sorted.
pub(super) fn glob(pattern: &str) -> Vec<String> {
    let magic = |s: &str| s.contains(['*', '?', '[']);
    if !magic(pattern) {
        let plain = pattern.replace('\\', "");
        return if std::fs::symlink_metadata(&plain).is_ok() {
            vec![plain]
        } else {
            Vec::new()
        };
    }
    let absolute = pattern.starts_with('/');
    let parts: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty()).collect();
    let mut found = vec![if absolute {
        "/".to_string()
    } else {
        String::new()
    }];
    for (k, part) in parts.iter().enumerate() {
        let last = k + 1 == parts.len();
        let mut next = Vec::new();
        for base in &found {
            let join = |name: &str| {
                if base.is_empty() {
                    name.to_string()
                } else if base.ends_with('/') {
                    format!("{base}{name}")
                } else {
                    format!("{base}/{name}")
                }
            };
            if !magic(part) {
                let p = join(part);
                let exists = if last {
                    std::fs::symlink_metadata(&p).is_ok()
                } else {
                    std::path::Path::new(&p).is_dir()
                };
                if exists {
                    next.push(p);
                }
                continue;
            }
            let dir = if base.is_empty() { "." } else { base.as_str() };
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.') || part.starts_with('.'))
                .filter(|n| guest_support::cli::glob(part, n))
                .collect();
            names.sort();
            for n in names {
                let p = join(&n);
                if last || std::path::Path::new(&p).is_dir() {
                    next.push(p);
                }
            }
        }
        found = next;
    }
    found
}
