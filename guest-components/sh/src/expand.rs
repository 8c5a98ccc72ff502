//! Word expansion: tilde, parameters, command substitution, arithmetic, field splitting,
//! pathname expansion and quote removal, in the order POSIX gives.

use std::cell::RefCell;
use std::rc::Rc;

use brush_parser::word::{
    self, Parameter, ParameterExpr as PE, ParameterTestType, ParameterTransformOp,
    SpecialParameter, SubstringMatchKind, TildeExpr, WordPiece,
};

use crate::io::{Io, Out};
use crate::pattern;
use crate::shell::{Array, Ctl, Shell, parser_options};

#[derive(Default, Clone)]
struct Field {
    text: String,
    /// The same text as a pattern: quoted characters escaped.
    pat: String,
    /// The same text as a regular expression (`[[ =~ ]]`): quoted parts escaped.
    re: String,
    quoted: bool,
    magic: bool,
}

struct Fields {
    done: Vec<Field>,
    cur: Field,
    /// Whether unquoted expansion results are split into fields (not in assignments etc.).
    split: bool,
    ifs: String,
}

fn escape_pattern(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl Fields {
    fn literal(&mut self, s: &str, quoted: bool) {
        self.cur.text.push_str(s);
        if quoted {
            self.cur.pat.push_str(&escape_pattern(s));
            self.cur.re.push_str(&regex::escape(s));
            self.cur.quoted = true;
        } else {
            self.cur.pat.push_str(s);
            self.cur.re.push_str(s);
            if pattern::has_magic(s) {
                self.cur.magic = true;
            }
        }
    }

    /// The result of an expansion: split on IFS unless quoted.
    fn expansion(&mut self, s: &str, quoted: bool) {
        if quoted || !self.split {
            self.cur.text.push_str(s);
            if quoted {
                self.cur.pat.push_str(&escape_pattern(s));
                self.cur.re.push_str(&regex::escape(s));
                self.cur.quoted = true;
            } else {
                // Unquoted results stay patterns: `[[ $x == $pat ]]`, `${v%$suffix}`.
                self.cur.pat.push_str(s);
                self.cur.re.push_str(s);
            }
            return;
        }
        let ifs = self.ifs.clone();
        // POSIX field splitting: IFS white space around a delimiter belongs to it; each
        // other IFS character ends a field, so two of them in a row make an empty one.
        #[derive(PartialEq)]
        enum At {
            Field,
            AfterBlank,
            AfterDelim,
        }
        let mut at = At::Field;
        for c in s.chars() {
            if ifs.contains(c) {
                if c.is_whitespace() {
                    if at == At::Field {
                        self.end();
                        at = At::AfterBlank;
                    }
                } else {
                    if at != At::AfterBlank {
                        self.end_always();
                    }
                    at = At::AfterDelim;
                }
                continue;
            }
            // Unquoted expansion results are subject to pathname expansion.
            self.cur.text.push(c);
            self.cur.pat.push(c);
            self.cur.re.push(c);
            if matches!(c, '*' | '?' | '[') {
                self.cur.magic = true;
            }
            at = At::Field;
        }
    }

    fn end(&mut self) {
        if !self.cur.text.is_empty() || self.cur.quoted {
            self.done.push(std::mem::take(&mut self.cur));
        } else {
            self.cur = Field::default();
        }
    }

    fn end_always(&mut self) {
        self.done.push(std::mem::take(&mut self.cur));
    }

    fn finish(mut self) -> Vec<Field> {
        self.end();
        self.done
    }
}

impl Shell {
    fn ifs(&self) -> String {
        self.get_var("IFS").unwrap_or_else(|| " \t\n".to_string())
    }

    /// A word as a command's arguments: every expansion, splitting and globbing.
    pub fn expand_word(&mut self, w: &str) -> Result<Vec<String>, Ctl> {
        let mut out = Vec::new();
        for w in brace_expand(w) {
            let fields = self.expand_fields(&w, true)?;
            for f in fields {
                if f.magic && !self.opts.noglob {
                    let glob_opts = crate::glob::GlobOpts {
                        dotglob: self.shopt("dotglob"),
                        globstar: self.shopt("globstar"),
                        nocase: self.shopt("nocaseglob"),
                    };
                    let matches = crate::glob::glob(&self.cwd, &f.pat, glob_opts);
                    if !matches.is_empty() {
                        out.extend(matches);
                        continue;
                    }
                    if self.shopt("nullglob") {
                        continue;
                    }
                }
                out.push(f.text);
            }
        }
        Ok(out)
    }

    /// A word as one string: no splitting, no globbing (assignments, redirections, case).
    pub fn expand_single(&mut self, w: &str) -> Result<String, Ctl> {
        let fields = self.expand_fields(w, false)?;
        Ok(fields
            .into_iter()
            .map(|f| f.text)
            .collect::<Vec<_>>()
            .join(" "))
    }

    /// A word as a pattern: quoted parts match literally.
    pub fn expand_pattern(&mut self, w: &str) -> Result<String, Ctl> {
        let fields = self.expand_fields(w, false)?;
        Ok(fields
            .into_iter()
            .map(|f| f.pat)
            .collect::<Vec<_>>()
            .join(" "))
    }

    /// A word as a regular expression: quoted parts match literally.
    pub fn expand_regex(&mut self, w: &str) -> Result<String, Ctl> {
        let fields = self.expand_fields(w, false)?;
        Ok(fields
            .into_iter()
            .map(|f| f.re)
            .collect::<Vec<_>>()
            .join(" "))
    }

    pub fn expand_heredoc(&mut self, body: &str) -> Result<String, Ctl> {
        let pieces = match word::parse_heredoc(body, &parser_options()) {
            Ok(p) => p,
            Err(_) => return Ok(body.to_string()),
        };
        let mut f = Fields {
            done: Vec::new(),
            cur: Field::default(),
            split: false,
            ifs: String::new(),
        };
        for p in pieces {
            self.piece(&p.piece, &mut f, true)?;
        }
        Ok(f.cur.text)
    }

    /// Expands `$x`, `${x}` and `$(...)` inside an arithmetic expression.
    pub fn expand_arith_text(&mut self, text: &str) -> Result<String, Ctl> {
        if !text.contains('$') && !text.contains('`') {
            return Ok(text.to_string());
        }
        self.expand_heredoc(text)
    }

    /// An array assignment (`a=(x y)`, `a+=(z)`, `a[i]=v`, `m[k]+=v`), done at once.
    /// Returns `false` for a plain scalar assignment, which the caller does.
    pub fn assign_array_forms(&mut self, a: &brush_parser::ast::Assignment) -> Result<bool, Ctl> {
        use brush_parser::ast::{AssignmentName, AssignmentValue};
        match (&a.name, &a.value) {
            (AssignmentName::VariableName(name), AssignmentValue::Array(items)) => {
                let assoc = self.is_assoc(name);
                let mut array = match (a.append, self.array(name)) {
                    (true, Some(existing)) => existing,
                    _ if assoc => Array::Assoc(Default::default()),
                    _ => Array::Indexed(Default::default()),
                };
                let mut next = match &array {
                    Array::Indexed(m) => m.keys().next_back().map_or(0, |k| k + 1),
                    Array::Assoc(_) => 0,
                };
                for (key, w) in items {
                    match key {
                        Some(k) => {
                            let value = self.expand_single(&w.value)?;
                            match &mut array {
                                Array::Indexed(m) => {
                                    let i = self.arith_index(&k.value)?;
                                    m.insert(i, value);
                                    next = i + 1;
                                }
                                Array::Assoc(m) => {
                                    let k = self.expand_single(&k.value)?;
                                    m.insert(k, value);
                                }
                            }
                        }
                        None => {
                            for value in self.expand_word(&w.value)? {
                                match &mut array {
                                    Array::Indexed(m) => {
                                        m.insert(next, value);
                                        next += 1;
                                    }
                                    Array::Assoc(m) => {
                                        m.insert(value, String::new());
                                    }
                                }
                            }
                        }
                    }
                }
                self.set_array(name, array);
                Ok(true)
            }
            (AssignmentName::ArrayElementName(name, index), value) => {
                let key = self.resolve_key(name, index)?;
                let mut v = match value {
                    AssignmentValue::Scalar(w) => self.expand_single(&w.value)?,
                    AssignmentValue::Array(_) => {
                        let io = self.cur_io.clone();
                        self.error(
                            &io,
                            &format!("{name}[{index}]: cannot assign list to array member"),
                        );
                        return Err(self.expansion_failed());
                    }
                };
                if a.append {
                    v = self.get_elem(name, &key).unwrap_or_default() + &v;
                }
                self.set_elem(name, &key, v);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// An index of an indexed array: arithmetic, negative counts from the end.
    fn arith_index(&mut self, text: &str) -> Result<i64, Ctl> {
        let t = self.expand_arith_text(text)?;
        crate::arith::eval_str(self, &t).map_err(|msg| {
            let io = self.cur_io.clone();
            self.error(&io, &msg);
            self.expansion_failed()
        })
    }

    /// The key `index` names in array `name`: a string for associative arrays, a
    /// number (negative from the end) for indexed ones.
    pub fn resolve_key(&mut self, name: &str, index: &str) -> Result<String, Ctl> {
        if self.is_assoc(name) {
            return self.expand_single(index);
        }
        let mut i = self.arith_index(index)?;
        if i < 0 {
            let last = match self.array(name) {
                Some(Array::Indexed(m)) => m.keys().next_back().copied().unwrap_or(-1),
                _ => 0,
            };
            i += last + 1;
        }
        Ok(i.to_string())
    }

    pub fn expand_assignment(
        &mut self,
        a: &brush_parser::ast::Assignment,
    ) -> Result<(String, String), Ctl> {
        use brush_parser::ast::{AssignmentName, AssignmentValue};
        let name = match &a.name {
            AssignmentName::VariableName(n) => n.clone(),
            AssignmentName::ArrayElementName(n, _) => n.clone(),
        };
        let mut value = match &a.value {
            AssignmentValue::Scalar(w) => self.expand_single(&w.value)?,
            AssignmentValue::Array(items) => {
                let mut vals = Vec::new();
                for (_, w) in items {
                    vals.extend(self.expand_word(&w.value)?);
                }
                vals.join(" ")
            }
        };
        let scalar = matches!(&a.value, AssignmentValue::Scalar(_))
            && matches!(&a.name, AssignmentName::VariableName(_));
        if scalar && self.integers.contains(&name) {
            // `declare -i`: the value is an arithmetic expression; `+=` adds.
            let io = self.cur_io.clone();
            let n = match crate::arith::eval_str(self, &value) {
                Ok(n) => n,
                Err(msg) => {
                    self.error(&io, &msg);
                    return Err(self.expansion_failed());
                }
            };
            let old = if a.append {
                self.get_var(&name)
                    .and_then(|v| v.trim().parse::<i64>().ok())
                    .unwrap_or(0)
            } else {
                0
            };
            return Ok((name, old.wrapping_add(n).to_string()));
        }
        if a.append {
            value = self.get_var(&name).unwrap_or_default() + &value;
        }
        Ok((name, value))
    }

    fn expand_fields(&mut self, w: &str, split: bool) -> Result<Vec<Field>, Ctl> {
        let pieces = match word::parse(w, &parser_options()) {
            Ok(p) => p,
            Err(_) => {
                let io = self.cur_io.clone();
                self.error(&io, &format!("{w}: bad substitution"));
                return Err(self.expansion_failed());
            }
        };
        let mut f = Fields {
            done: Vec::new(),
            cur: Field::default(),
            split,
            ifs: self.ifs(),
        };
        for (i, p) in pieces.iter().enumerate() {
            // Tilde expansion happens only at the start of a word.
            if i > 0
                && let WordPiece::TildeExpansion(t) = &p.piece
            {
                f.literal(&tilde_text(t), false);
                continue;
            }
            self.piece(&p.piece, &mut f, false)?;
        }
        Ok(f.finish())
    }

    fn piece(&mut self, piece: &WordPiece, f: &mut Fields, quoted: bool) -> Result<(), Ctl> {
        match piece {
            WordPiece::Text(s) => f.literal(s, quoted),
            WordPiece::SingleQuotedText(s) => f.literal(s, true),
            WordPiece::AnsiCQuotedText(s) => f.literal(&ansi_c(s), true),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                // `"$@"` (and `"${a[@]}"`) with no elements is no field at all.
                let empty_list = matches!(inner.as_slice(), [only]
                    if matches!(&only.piece, WordPiece::ParameterExpansion(
                        PE::Parameter { parameter, indirect: false })
                        if self.list_of(parameter).is_some_and(|(l, joined)| l.is_empty() && !joined)));
                if !empty_list {
                    f.cur.quoted = true;
                }
                for p in inner {
                    self.piece(&p.piece, f, true)?;
                }
            }
            WordPiece::TildeExpansion(t) => {
                let v = match t {
                    TildeExpr::Home => self.get_var("HOME").unwrap_or_else(|| "~".into()),
                    TildeExpr::WorkingDir => self.cwd.clone(),
                    TildeExpr::OldWorkingDir => self.get_var("OLDPWD").unwrap_or_default(),
                    other => tilde_text(other),
                };
                f.literal(&v, true);
            }
            WordPiece::EscapeSequence(s) => {
                let c = s.strip_prefix('\\').unwrap_or(s);
                if quoted && !matches!(c, "$" | "`" | "\"" | "\\" | "\n") {
                    f.literal(s, true);
                } else if c == "\n" {
                    // line continuation
                } else {
                    f.literal(c, true);
                }
            }
            WordPiece::ParameterExpansion(expr) => self.parameter(expr, f, quoted)?,
            WordPiece::CommandSubstitution(cmd) => {
                let out = self.command_substitution(cmd)?;
                f.expansion(&out, quoted);
            }
            WordPiece::BackquotedCommandSubstitution(cmd) => {
                let cmd = unescape_backquoted(cmd);
                let out = self.command_substitution(&cmd)?;
                f.expansion(&out, quoted);
            }
            WordPiece::ArithmeticExpression(e) => {
                let text = self.expand_arith_text(&e.value)?;
                match crate::arith::eval_str(self, &text) {
                    Ok(v) => f.expansion(&v.to_string(), quoted),
                    Err(msg) => {
                        let io = self.cur_io.clone();
                        self.error(&io, &msg);
                        return Err(self.expansion_failed());
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs `cmd` in a subshell and returns its output without trailing newlines.
    pub fn command_substitution(&mut self, cmd: &str) -> Result<String, Ctl> {
        let buf = Rc::new(RefCell::new(Vec::new()));
        let io = Io {
            stdin: self.cur_io.stdin.clone(),
            stdout: Out::Buffer(buf.clone()),
            stderr: self.cur_io.stderr.clone(),
        };
        let mut sub = self.clone();
        let status = match sub.run_script(cmd, &io) {
            Ok(s) | Err(Ctl::Exit(s)) | Err(Ctl::Return(s)) => s,
            Err(_) => sub.last_status,
        };
        if sub.cwd != self.cwd {
            let _ = std::env::set_current_dir(&self.cwd);
        }
        self.subst_status = Some(status);
        self.last_status = status;
        let mut s = String::from_utf8_lossy(&buf.borrow()).into_owned();
        while s.ends_with('\n') {
            s.pop();
        }
        Ok(s)
    }

    fn param_value(&mut self, p: &Parameter) -> Option<String> {
        match p {
            Parameter::Positional(0) => Some(self.arg0.clone()),
            Parameter::Positional(n) => self.positional.get(*n as usize - 1).cloned(),
            Parameter::Special(s) => Some(match s {
                SpecialParameter::AllPositionalParameters { concatenate } => {
                    let sep = if *concatenate {
                        self.ifs()
                            .chars()
                            .next()
                            .map(String::from)
                            .unwrap_or_default()
                    } else {
                        " ".to_string()
                    };
                    self.positional.join(&sep)
                }
                SpecialParameter::PositionalParameterCount => self.positional.len().to_string(),
                SpecialParameter::LastExitStatus => self.last_status.to_string(),
                SpecialParameter::CurrentOptionFlags => {
                    let mut s = String::from("h");
                    if self.opts.errexit {
                        s.push('e');
                    }
                    if self.opts.nounset {
                        s.push('u');
                    }
                    if self.opts.xtrace {
                        s.push('x');
                    }
                    s
                }
                SpecialParameter::ProcessId => self.pid().to_string(),
                SpecialParameter::LastBackgroundProcessId => self
                    .last_background
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
                SpecialParameter::ShellName => self.arg0.clone(),
            }),
            Parameter::Named(n) => self.get_var(n),
            Parameter::NamedWithIndex { name, index } => {
                let key = self.resolve_key(name, index).ok()?;
                self.get_elem(name, &key)
            }
            Parameter::NamedWithAllIndices { name, concatenate } => {
                let values = self.array(name)?.values();
                let sep = if *concatenate {
                    self.ifs()
                        .chars()
                        .next()
                        .map(String::from)
                        .unwrap_or_default()
                } else {
                    " ".to_string()
                };
                Some(values.join(&sep))
            }
        }
    }

    fn param_name(p: &Parameter) -> String {
        match p {
            Parameter::Positional(n) => n.to_string(),
            Parameter::Special(s) => s.to_string(),
            Parameter::Named(n) => n.clone(),
            Parameter::NamedWithIndex { name, index } => format!("{name}[{index}]"),
            Parameter::NamedWithAllIndices { name, concatenate } => {
                format!("{name}[{}]", if *concatenate { '*' } else { '@' })
            }
        }
    }

    fn lookup(&mut self, p: &Parameter, indirect: bool) -> Option<String> {
        if let Some(v) = self.element_override.clone() {
            return Some(v);
        }
        let v = self.param_value(p);
        if indirect {
            let name = v?;
            return self.get_var(&name);
        }
        v
    }

    fn unbound(&mut self, p: &Parameter) -> Ctl {
        let io = self.cur_io.clone();
        self.error(&io, &format!("{}: unbound variable", Self::param_name(p)));
        // bash leaves a non-interactive shell with 127 here.
        Ctl::Exit(127)
    }

    /// The elements of `$@`/`$*`/`${a[@]}`/`${a[*]}`, and whether they are joined (`*`).
    fn list_of(&self, p: &Parameter) -> Option<(Vec<String>, bool)> {
        match p {
            Parameter::Special(SpecialParameter::AllPositionalParameters { concatenate }) => {
                Some((self.positional.clone(), *concatenate))
            }
            Parameter::NamedWithAllIndices { name, concatenate } => Some((
                self.array(name).map(|a| a.values()).unwrap_or_default(),
                *concatenate,
            )),
            _ => None,
        }
    }

    /// One field per element (quoted `@`, or unquoted and split), or the elements joined
    /// by the first character of IFS (quoted `*`).
    fn emit_list(&mut self, list: &[String], concatenate: bool, f: &mut Fields, quoted: bool) {
        if concatenate && quoted {
            let sep = self
                .ifs()
                .chars()
                .next()
                .map(String::from)
                .unwrap_or_default();
            f.expansion(&list.join(&sep), true);
            return;
        }
        if quoted && list.is_empty() {
            return;
        }
        for (i, p) in list.iter().enumerate() {
            if i > 0 {
                if quoted || f.split {
                    f.end_always();
                } else {
                    f.literal(" ", true);
                }
            }
            f.expansion(p, quoted);
        }
    }

    fn parameter(&mut self, expr: &PE, f: &mut Fields, quoted: bool) -> Result<(), Ctl> {
        let list_param = match expr {
            PE::Parameter {
                parameter,
                indirect: false,
            }
            | PE::Substring {
                parameter,
                indirect: false,
                ..
            }
            | PE::RemoveSmallestSuffixPattern {
                parameter,
                indirect: false,
                ..
            }
            | PE::RemoveLargestSuffixPattern {
                parameter,
                indirect: false,
                ..
            }
            | PE::RemoveSmallestPrefixPattern {
                parameter,
                indirect: false,
                ..
            }
            | PE::RemoveLargestPrefixPattern {
                parameter,
                indirect: false,
                ..
            }
            | PE::ReplaceSubstring {
                parameter,
                indirect: false,
                ..
            }
            | PE::Transform {
                parameter,
                indirect: false,
                ..
            }
            | PE::UppercaseFirstChar {
                parameter,
                indirect: false,
                ..
            }
            | PE::UppercasePattern {
                parameter,
                indirect: false,
                ..
            }
            | PE::LowercaseFirstChar {
                parameter,
                indirect: false,
                ..
            }
            | PE::LowercasePattern {
                parameter,
                indirect: false,
                ..
            } => Some(parameter),
            _ => None,
        };
        if let Some(p) = list_param
            && let Some((mut list, concatenate)) = self.list_of(p)
        {
            match expr {
                PE::Parameter { .. } => {}
                PE::Substring { offset, length, .. } => {
                    // `${@:0}` starts with $0; arrays count elements from 0.
                    if matches!(p, Parameter::Special(_)) {
                        list.insert(0, self.arg0.clone());
                    }
                    let n = list.len() as i64;
                    let off = self.arith_index(&offset.value)?;
                    let start = if off < 0 {
                        (n + off).max(0)
                    } else {
                        off.min(n)
                    };
                    let end = match length {
                        Some(l) => {
                            let len = self.arith_index(&l.value)?;
                            if len < 0 {
                                (n + len).max(start)
                            } else {
                                (start + len).min(n)
                            }
                        }
                        None => n,
                    };
                    list = list[start as usize..end.max(start) as usize].to_vec();
                }
                _ => {
                    let mut mapped = Vec::with_capacity(list.len());
                    for v in list {
                        self.element_override = Some(v);
                        let r = self.parameter_value(expr);
                        self.element_override = None;
                        mapped.push(r?);
                    }
                    list = mapped;
                }
            }
            self.emit_list(&list, concatenate, f, quoted);
            return Ok(());
        }
        if let PE::MemberKeys {
            variable_name,
            concatenate,
        } = expr
        {
            let keys = self
                .array(variable_name)
                .map(|a| a.keys())
                .unwrap_or_default();
            self.emit_list(&keys, *concatenate, f, quoted);
            return Ok(());
        }
        let value = self.parameter_value(expr)?;
        f.expansion(&value, quoted);
        Ok(())
    }

    fn parameter_value(&mut self, expr: &PE) -> Result<String, Ctl> {
        let is_set = |v: &Option<String>, t: &ParameterTestType| match t {
            ParameterTestType::UnsetOrNull => v.as_ref().is_some_and(|s| !s.is_empty()),
            ParameterTestType::Unset => v.is_some(),
        };
        Ok(match expr {
            PE::Parameter {
                parameter,
                indirect,
            } => match self.lookup(parameter, *indirect) {
                Some(v) => v,
                None if self.opts.nounset && !matches!(parameter, Parameter::Special(_)) => {
                    return Err(self.unbound(parameter));
                }
                None => String::new(),
            },
            PE::UseDefaultValues {
                parameter,
                indirect,
                test_type,
                default_value,
            } => {
                let v = self.lookup(parameter, *indirect);
                if is_set(&v, test_type) {
                    v.unwrap_or_default()
                } else {
                    self.expand_single(default_value.as_deref().unwrap_or(""))?
                }
            }
            PE::AssignDefaultValues {
                parameter,
                indirect,
                test_type,
                default_value,
            } => {
                let v = self.lookup(parameter, *indirect);
                if is_set(&v, test_type) {
                    v.unwrap_or_default()
                } else {
                    let d = self.expand_single(default_value.as_deref().unwrap_or(""))?;
                    if let Parameter::Named(n) = parameter {
                        self.set_var(n, d.clone());
                    }
                    d
                }
            }
            PE::IndicateErrorIfNullOrUnset {
                parameter,
                indirect,
                test_type,
                error_message,
            } => {
                let v = self.lookup(parameter, *indirect);
                if is_set(&v, test_type) {
                    v.unwrap_or_default()
                } else {
                    let msg = match error_message {
                        Some(m) if !m.is_empty() => self.expand_single(m)?,
                        _ => "parameter null or not set".to_string(),
                    };
                    let io = self.cur_io.clone();
                    self.error(&io, &format!("{}: {msg}", Self::param_name(parameter)));
                    // bash ends a non-interactive shell here with 127, as for `set -u`.
                    return Err(if self.interactive {
                        Ctl::Abandon(1)
                    } else {
                        Ctl::Exit(127)
                    });
                }
            }
            PE::UseAlternativeValue {
                parameter,
                indirect,
                test_type,
                alternative_value,
            } => {
                let v = self.lookup(parameter, *indirect);
                if is_set(&v, test_type) {
                    self.expand_single(alternative_value.as_deref().unwrap_or(""))?
                } else {
                    String::new()
                }
            }
            PE::ParameterLength {
                parameter,
                indirect,
            } => match parameter {
                Parameter::Special(SpecialParameter::AllPositionalParameters { .. }) => {
                    self.positional.len().to_string()
                }
                Parameter::NamedWithAllIndices { name, .. } if !*indirect => {
                    self.array(name).map_or(0, |a| a.len()).to_string()
                }
                _ => match self.lookup(parameter, *indirect) {
                    Some(v) => v.chars().count().to_string(),
                    None if self.opts.nounset => return Err(self.unbound(parameter)),
                    None => "0".to_string(),
                },
            },
            PE::RemoveSmallestSuffixPattern {
                parameter,
                indirect,
                pattern,
            }
            | PE::RemoveLargestSuffixPattern {
                parameter,
                indirect,
                pattern,
            }
            | PE::RemoveSmallestPrefixPattern {
                parameter,
                indirect,
                pattern,
            }
            | PE::RemoveLargestPrefixPattern {
                parameter,
                indirect,
                pattern,
            } => {
                let v = self.lookup(parameter, *indirect).unwrap_or_default();
                let pat = self.expand_pattern(pattern.as_deref().unwrap_or(""))?;
                let (suffix, longest) = match expr {
                    PE::RemoveSmallestSuffixPattern { .. } => (true, false),
                    PE::RemoveLargestSuffixPattern { .. } => (true, true),
                    PE::RemoveSmallestPrefixPattern { .. } => (false, false),
                    _ => (false, true),
                };
                pattern::remove(&v, &pat, suffix, longest)
            }
            PE::Substring {
                parameter,
                indirect,
                offset,
                length,
            } => {
                let v = self.lookup(parameter, *indirect).unwrap_or_default();
                let chars: Vec<char> = v.chars().collect();
                let n = chars.len() as i64;
                let off_text = self.expand_arith_text(&offset.value)?;
                let off =
                    crate::arith::eval_str(self, &off_text).map_err(|_| self.expansion_failed())?;
                let start = if off < 0 {
                    (n + off).max(0)
                } else {
                    off.min(n)
                };
                let end = match length {
                    Some(l) => {
                        let lt = self.expand_arith_text(&l.value)?;
                        let len = crate::arith::eval_str(self, &lt)
                            .map_err(|_| self.expansion_failed())?;
                        if len < 0 {
                            (n + len).max(start)
                        } else {
                            (start + len).min(n)
                        }
                    }
                    None => n,
                };
                chars[start as usize..end.max(start) as usize]
                    .iter()
                    .collect()
            }
            PE::Transform {
                parameter,
                indirect,
                op,
            } => {
                let v = self.lookup(parameter, *indirect).unwrap_or_default();
                match op {
                    ParameterTransformOp::ToUpperCase => v.to_uppercase(),
                    ParameterTransformOp::ToLowerCase => v.to_lowercase(),
                    ParameterTransformOp::CapitalizeInitial => capitalize(&v),
                    ParameterTransformOp::Quoted => format!("'{}'", v.replace('\'', "'\\''")),
                    ParameterTransformOp::ExpandEscapeSequences => ansi_c(&v),
                    _ => v,
                }
            }
            PE::UppercaseFirstChar {
                parameter,
                indirect,
                ..
            } => capitalize(&self.lookup(parameter, *indirect).unwrap_or_default()),
            PE::UppercasePattern {
                parameter,
                indirect,
                ..
            } => self
                .lookup(parameter, *indirect)
                .unwrap_or_default()
                .to_uppercase(),
            PE::LowercaseFirstChar {
                parameter,
                indirect,
                ..
            } => {
                let v = self.lookup(parameter, *indirect).unwrap_or_default();
                let mut c = v.chars();
                match c.next() {
                    Some(first) => first.to_lowercase().collect::<String>() + c.as_str(),
                    None => String::new(),
                }
            }
            PE::LowercasePattern {
                parameter,
                indirect,
                ..
            } => self
                .lookup(parameter, *indirect)
                .unwrap_or_default()
                .to_lowercase(),
            PE::ReplaceSubstring {
                parameter,
                indirect,
                pattern,
                replacement,
                match_kind,
            } => {
                let v = self.lookup(parameter, *indirect).unwrap_or_default();
                let pat = self.expand_pattern(pattern)?;
                let with = self.expand_single(replacement.as_deref().unwrap_or(""))?;
                match match_kind {
                    SubstringMatchKind::FirstOccurrence => {
                        pattern::replace(&v, &pat, &with, false, None)
                    }
                    SubstringMatchKind::Anywhere => pattern::replace(&v, &pat, &with, true, None),
                    SubstringMatchKind::Prefix => {
                        pattern::replace(&v, &pat, &with, false, Some(false))
                    }
                    SubstringMatchKind::Suffix => {
                        pattern::replace(&v, &pat, &with, false, Some(true))
                    }
                }
            }
            PE::VariableNames { prefix, .. } => {
                let mut names: Vec<&String> = self
                    .vars
                    .keys()
                    .filter(|k| k.starts_with(prefix.as_str()))
                    .collect();
                names.sort();
                names.into_iter().cloned().collect::<Vec<_>>().join(" ")
            }
            PE::MemberKeys { variable_name, .. } => self
                .array(variable_name)
                .map(|a| a.keys().join(" "))
                .unwrap_or_default(),
        })
    }
}

fn capitalize(v: &str) -> String {
    let mut c = v.chars();
    match c.next() {
        Some(first) => first.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn tilde_text(t: &TildeExpr) -> String {
    match t {
        TildeExpr::Home => "~".into(),
        TildeExpr::UserHome(u) => format!("~{u}"),
        TildeExpr::WorkingDir => "~+".into(),
        TildeExpr::OldWorkingDir => "~-".into(),
        TildeExpr::NthDirFromTopOfDirStack { n, plus_used } => {
            format!("~{}{n}", if *plus_used { "+" } else { "" })
        }
        TildeExpr::NthDirFromBottomOfDirStack { n } => format!("~-{n}"),
    }
}

/// Inside backquotes, `\$`, `` \` `` and `\\` stand for the character itself.
fn unescape_backquoted(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&n) = chars.peek()
            && matches!(n, '$' | '`' | '\\')
        {
            out.push(n);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}

/// Interprets the backslash escapes of `$'...'` (and `echo -e`, `printf %b`).
pub fn ansi_c(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' || i + 1 >= chars.len() {
            out.push(c);
            i += 1;
            continue;
        }
        i += 1;
        let e = chars[i];
        i += 1;
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'e' | 'E' => out.push('\x1b'),
            'f' => out.push('\x0c'),
            'v' => out.push('\x0b'),
            '\\' => out.push('\\'),
            '\'' => out.push('\''),
            '"' => out.push('"'),
            '?' => out.push('?'),
            'x' => {
                let hex: String = chars[i..]
                    .iter()
                    .take(2)
                    .take_while(|c| c.is_ascii_hexdigit())
                    .collect();
                if hex.is_empty() {
                    out.push_str("\\x");
                } else {
                    i += hex.len();
                    out.push(u8::from_str_radix(&hex, 16).unwrap_or(b'?') as char);
                }
            }
            '0'..='7' => {
                let mut oct: String = e.to_string();
                while oct.len() < 3 && i < chars.len() && ('0'..='7').contains(&chars[i]) {
                    oct.push(chars[i]);
                    i += 1;
                }
                out.push(u8::from_str_radix(&oct, 8).unwrap_or(b'?') as char);
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

/// `{a,b}` and `{1..5}` brace expansion, on the raw word (quoted braces stay).
pub fn brace_expand(w: &str) -> Vec<String> {
    let chars: Vec<char> = w.chars().collect();
    // Find the first unquoted `{` with a matching `}` that contains a top-level `,` or `..`.
    let mut i = 0;
    let mut quote: Option<char> = None;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                } else if c == '\\' && q == '"' {
                    i += 1;
                }
            }
            None => match c {
                '\\' => i += 1,
                '\'' | '"' => quote = Some(c),
                '$' if chars.get(i + 1) == Some(&'{') => {
                    // skip a parameter expansion
                    let mut depth = 0;
                    while i < chars.len() {
                        if chars[i] == '{' {
                            depth += 1;
                        } else if chars[i] == '}' {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        i += 1;
                    }
                }
                '{' => {
                    if let Some((end, parts)) = brace_parts(&chars, i) {
                        let prefix: String = chars[..i].iter().collect();
                        let suffix: String = chars[end + 1..].iter().collect();
                        let mut out = Vec::new();
                        for p in parts {
                            for rest in brace_expand(&format!("{p}{suffix}")) {
                                out.push(format!("{prefix}{rest}"));
                            }
                        }
                        return out;
                    }
                }
                _ => {}
            },
        }
        i += 1;
    }
    vec![w.to_string()]
}

fn brace_parts(chars: &[char], open: usize) -> Option<(usize, Vec<String>)> {
    let mut depth = 0;
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut i = open;
    let mut quote: Option<char> = None;
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = quote {
            cur.push(c);
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                cur.push(c);
            }
            '\\' => {
                cur.push(c);
                if let Some(&n) = chars.get(i + 1) {
                    cur.push(n);
                    i += 1;
                }
            }
            '{' => {
                depth += 1;
                if depth > 1 {
                    cur.push(c);
                }
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    parts.push(cur);
                    if parts.len() > 1 {
                        return Some((i, parts));
                    }
                    return sequence(&parts[0]).map(|seq| (i, seq));
                }
                cur.push(c);
            }
            ',' if depth == 1 => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
        i += 1;
    }
    None
}

/// `1..5`, `a..e`, `1..10..2`.
fn sequence(s: &str) -> Option<Vec<String>> {
    let parts: Vec<&str> = s.split("..").collect();
    if parts.len() < 2 || parts.len() > 3 {
        return None;
    }
    let step: i64 = parts
        .get(2)
        .map_or(Some(1i64), |s| s.parse().ok())?
        .abs()
        .max(1);
    if let (Ok(a), Ok(b)) = (parts[0].parse::<i64>(), parts[1].parse::<i64>()) {
        let width = if (parts[0].starts_with('0') && parts[0].len() > 1)
            || (parts[1].starts_with('0') && parts[1].len() > 1)
        {
            parts[0].len().max(parts[1].len())
        } else {
            0
        };
        let mut out = Vec::new();
        let mut x = a;
        loop {
            out.push(format!("{x:0width$}"));
            if x == b || out.len() > 100_000 {
                break;
            }
            x += if a < b { step } else { -step };
            if (a < b && x > b) || (a > b && x < b) {
                break;
            }
        }
        return Some(out);
    }
    let (a, b) = (parts[0].chars().next()?, parts[1].chars().next()?);
    if parts[0].chars().count() != 1 || parts[1].chars().count() != 1 {
        return None;
    }
    let (a, b) = (a as u32, b as u32);
    let mut out = Vec::new();
    let mut x = a as i64;
    loop {
        out.push(char::from_u32(x as u32)?.to_string());
        if x == b as i64 {
            break;
        }
        x += if a < b { step } else { -step };
        if (a < b && x > b as i64) || (a > b && x < b as i64) {
            break;
        }
    }
    Some(out)
}

/// `s` split into fields at `ifs` as `read -a` does: IFS white space at either end is
/// dropped, white space around a delimiter belongs to it, each other IFS character ends a
/// field (two in a row make an empty one), and a delimiter at the end makes no empty field.
pub fn ifs_fields(s: &str, ifs: &str) -> Vec<String> {
    #[derive(PartialEq)]
    enum At {
        Field,
        AfterBlank,
        AfterDelim,
    }
    let blank = |c: char| ifs.contains(c) && c.is_whitespace();
    let s = s.trim_matches(blank);
    if s.is_empty() {
        return Vec::new();
    }
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut at = At::Field;
    for c in s.chars() {
        if ifs.contains(c) {
            if c.is_whitespace() {
                if at == At::Field {
                    fields.push(std::mem::take(&mut cur));
                    at = At::AfterBlank;
                }
            } else {
                if at != At::AfterBlank {
                    fields.push(std::mem::take(&mut cur));
                }
                at = At::AfterDelim;
            }
            continue;
        }
        cur.push(c);
        at = At::Field;
    }
    if at == At::Field {
        fields.push(cur);
    }
    fields
}
