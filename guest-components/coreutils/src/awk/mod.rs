//! `awk`: the POSIX awk language (patterns and actions, BEGIN/END, ranges, fields, NR/NF/FNR,
//! FS/OFS/ORS/RS, associative arrays, user functions, printf, getline, output redirection
//! and pipes, the built-in functions) with gawk's behaviour where POSIX leaves room.

mod format;
mod lex;
mod parse;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::rc::Rc;

use indexmap::IndexMap;
use regex::Regex;

use format::{num_to_string, sprintf};
use parse::{BinOp, CmpOp, Expr, GetSrc, Pattern, Program, Redirect, Stmt};

/// A value: numbers, strings, and "strnums" (input that compares as a number when it looks
/// like one).
#[derive(Clone, Debug)]
pub enum Value {
    Uninit,
    Num(f64),
    Str(String),
    StrNum(String),
}

/// The leading number of `s`, as `strtod` reads it (0 if none).
fn str_to_num(s: &str) -> f64 {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let b = t.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let lower = t[i..].to_ascii_lowercase();
    if lower.starts_with("inf") || lower.starts_with("nan") {
        // gawk reads "+inf"/"-nan" only with a sign.
        if i == 0 {
            return 0.0;
        }
        let v = if lower.starts_with("inf") {
            f64::INFINITY
        } else {
            f64::NAN
        };
        return if b[0] == b'-' { -v } else { v };
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i == digits_start || (i == digits_start + 1 && b[digits_start] == b'.') {
        return 0.0;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    t[..i].parse().unwrap_or(0.0)
}

/// Whether the whole of `s` (blanks around allowed) is a number.
fn looks_numeric(s: &str) -> bool {
    let t = s.trim_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    if t.is_empty() {
        return false;
    }
    let body = t.strip_prefix(['+', '-']).unwrap_or(t);
    if body.is_empty() || !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return false;
    }
    let lower = body.to_ascii_lowercase();
    if lower.starts_with("inf") || lower.starts_with("nan") || lower.contains('x') {
        return false;
    }
    body.parse::<f64>().is_ok()
}

impl Value {
    pub fn num(&self) -> f64 {
        match self {
            Value::Uninit => 0.0,
            Value::Num(n) => *n,
            Value::Str(s) | Value::StrNum(s) => str_to_num(s),
        }
    }

    pub fn string(&self, convfmt: &str) -> String {
        match self {
            Value::Uninit => String::new(),
            Value::Num(n) => num_to_string(*n, convfmt),
            Value::Str(s) | Value::StrNum(s) => s.clone(),
        }
    }

    fn truthy(&self) -> bool {
        match self {
            Value::Uninit => false,
            Value::Num(n) => *n != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::StrNum(s) => {
                if looks_numeric(s) {
                    str_to_num(s) != 0.0
                } else {
                    !s.is_empty()
                }
            }
        }
    }

    /// Compares as numbers when both sides are numeric.
    fn is_numeric(&self) -> bool {
        match self {
            Value::Uninit | Value::Num(_) => true,
            Value::StrNum(s) => looks_numeric(s),
            Value::Str(_) => false,
        }
    }
}

type Array = IndexMap<String, Value>;

#[derive(Clone)]
enum Cell {
    Val(Value),
    Arr(Rc<RefCell<Array>>),
}

enum Flow {
    Normal,
    Break,
    Continue,
    Next,
    NextFile,
    Exit,
    Return(Value),
}

/// A runtime error: the program stops with status 2.
struct Fatal(String);

type R<T> = Result<T, Fatal>;

fn fatal<T>(msg: impl Into<String>) -> R<T> {
    Err(Fatal(msg.into()))
}

/// A record source: a file, standard input, or the output of a command.
struct Input {
    reader: Box<dyn BufRead>,
    /// For a regular-expression RS: text read but not yet returned.
    pending: Option<String>,
}

impl Input {
    fn new(reader: Box<dyn BufRead>) -> Self {
        Input {
            reader,
            pending: None,
        }
    }

    fn read_until(&mut self, byte: u8) -> Option<String> {
        let mut buf = Vec::new();
        match self.reader.read_until(byte, &mut buf) {
            Ok(0) | Err(_) => None,
            Ok(_) => {
                if buf.last() == Some(&byte) {
                    buf.pop();
                }
                Some(String::from_utf8_lossy(&buf).into_owned())
            }
        }
    }

    /// The next record by `rs`: a newline, any single character, "" (paragraphs) or a
    /// regular expression.
    fn record(&mut self, rs: &str, interp: &mut Interp) -> R<Option<String>> {
        if rs == "\n" || (rs.len() == 1 && rs.is_ascii()) {
            return Ok(self.read_until(rs.as_bytes()[0]));
        }
        if rs.is_empty() {
            let mut lines = Vec::new();
            while let Some(line) = self.read_until(b'\n') {
                if line.is_empty() {
                    if lines.is_empty() {
                        continue;
                    }
                    break;
                }
                lines.push(line);
            }
            return Ok(if lines.is_empty() {
                None
            } else {
                Some(lines.join("\n"))
            });
        }
        if self.pending.is_none() {
            let mut all = Vec::new();
            let _ = self.reader.read_to_end(&mut all);
            self.pending = Some(String::from_utf8_lossy(&all).into_owned());
        }
        let pending = self.pending.as_mut().unwrap();
        if pending.is_empty() {
            return Ok(None);
        }
        let re = interp.regex(rs)?;
        let rec = match re.find(pending) {
            Some(m) if !m.as_str().is_empty() => {
                let rec = pending[..m.start()].to_string();
                *pending = pending[m.end()..].to_string();
                rec
            }
            _ => std::mem::take(pending),
        };
        Ok(Some(rec))
    }
}

enum Output {
    Stdout,
    Stderr,
    File(std::io::BufWriter<std::fs::File>),
    Pipe { handle: u32, pid: u32, buf: Vec<u8> },
}

impl Output {
    fn write(&mut self, out: &mut std::io::BufWriter<std::io::Stdout>, data: &[u8]) -> bool {
        match self {
            Output::Stdout => out.write_all(data).is_ok(),
            Output::Stderr => {
                let _ = out.flush();
                std::io::stderr().write_all(data).is_ok()
            }
            Output::File(f) => f.write_all(data).is_ok(),
            Output::Pipe { handle, buf, .. } => {
                buf.extend_from_slice(data);
                if buf.len() >= 1 << 16 {
                    let ok = guest_support::process::write(*handle, buf).is_ok();
                    buf.clear();
                    return ok;
                }
                true
            }
        }
    }

    fn flush(&mut self) {
        match self {
            Output::Stdout | Output::Stderr => {}
            Output::File(f) => {
                let _ = f.flush();
            }
            Output::Pipe { handle, buf, .. } => {
                if !buf.is_empty() {
                    let _ = guest_support::process::write(*handle, buf);
                    buf.clear();
                }
            }
        }
    }

    /// Closes the stream; for a pipe, waits for the command and returns its status.
    fn close(mut self) -> i32 {
        self.flush();
        match self {
            Output::Pipe { handle, pid, .. } => {
                guest_support::process::close(handle);
                guest_support::process::wait(pid)
            }
            _ => 0,
        }
    }
}

struct Frame {
    locals: HashMap<String, Cell>,
}

struct Interp {
    prog: Rc<Program>,
    globals: HashMap<String, Cell>,
    frames: Vec<Frame>,
    record: String,
    fields: Vec<String>,
    split_done: bool,
    regexes: HashMap<String, Rc<Regex>>,
    stdout: std::io::BufWriter<std::io::Stdout>,
    outputs: IndexMap<String, Output>,
    inputs: HashMap<String, Input>,
    commands: HashMap<String, Input>,
    /// The main input: which ARGV operand is next, and the open one.
    argv_next: usize,
    main: Option<Input>,
    opened_any: bool,
    range_active: Vec<bool>,
    exit_code: i32,
    rand_seed: f64,
    rand_state: u64,
    depth: usize,
}

/// awk ERE -> the regex crate's syntax.
fn translate_ere(re: &str) -> String {
    let mut out = String::from("(?s)");
    let chars: Vec<char> = re.chars().collect();
    let mut i = 0;
    let mut in_bracket = false;
    while i < chars.len() {
        let c = chars[i];
        if in_bracket {
            match c {
                '[' if chars.get(i + 1) == Some(&':') => {
                    if let Some(end) = (i + 2..chars.len().saturating_sub(1))
                        .find(|&j| chars[j] == ':' && chars[j + 1] == ']')
                    {
                        out.extend(&chars[i..end + 2]);
                        i = end + 2;
                        continue;
                    }
                    out.push_str("\\[");
                }
                '[' => out.push_str("\\["),
                ']' => {
                    in_bracket = false;
                    out.push(']');
                }
                '\\' if i + 1 < chars.len() => {
                    out.push('\\');
                    out.push(chars[i + 1]);
                    i += 1;
                }
                // The regex crate reads `&&` and `~~` in a class as set operations.
                '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                _ => out.push(c),
            }
            i += 1;
            continue;
        }
        match c {
            '[' => {
                in_bracket = true;
                out.push('[');
                if chars.get(i + 1) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if chars.get(i + 1) == Some(&']') {
                    out.push_str("\\]");
                    i += 1;
                }
            }
            '\\' if i + 1 < chars.len() => {
                let n = chars[i + 1];
                match n {
                    'y' | '<' | '>' => out.push_str("\\b"),
                    'B' => out.push_str("\\B"),
                    '`' => out.push_str("\\A"),
                    '\'' => out.push_str("\\z"),
                    'n' => out.push_str("\\n"),
                    't' => out.push_str("\\t"),
                    'r' => out.push_str("\\r"),
                    '/' => out.push('/'),
                    '"' => out.push('"'),
                    c if c.is_ascii_alphanumeric() && !"wWsSdD".contains(c) => out.push(c),
                    _ => {
                        out.push('\\');
                        out.push(n);
                    }
                }
                i += 1;
            }
            '{' => {
                // An interval when it looks like one; a literal brace otherwise.
                let rest: String = chars[i..].iter().collect();
                let interval = rest.find('}').map(|end| &rest[1..end]).is_some_and(|b| {
                    !b.is_empty() && b.chars().all(|c| c.is_ascii_digit() || c == ',')
                });
                if interval && i > 0 {
                    out.push('{');
                } else {
                    out.push_str("\\{");
                }
            }
            '}' => {
                // Closes an interval we kept; otherwise literal.
                let opened = out
                    .rfind("{")
                    .is_some_and(|o| !out[..o].ends_with('\\') && !out[o..].contains('}'));
                out.push_str(if opened { "}" } else { "\\}" });
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

fn subscript(vals: Vec<String>, subsep: &str) -> String {
    vals.join(subsep)
}

impl Interp {
    fn var_str(&self, name: &str) -> String {
        match self.globals.get(name) {
            Some(Cell::Val(v)) => v.string("%.6g"),
            _ => String::new(),
        }
    }

    fn convfmt(&self) -> String {
        self.var_str("CONVFMT")
    }

    fn to_str(&self, v: &Value) -> String {
        match v {
            Value::Num(n) => num_to_string(*n, &self.convfmt()),
            _ => v.string("%.6g"),
        }
    }

    fn to_output_str(&self, v: &Value) -> String {
        match v {
            Value::Num(n) => num_to_string(*n, &self.var_str("OFMT")),
            _ => v.string("%.6g"),
        }
    }

    fn regex(&mut self, re: &str) -> R<Rc<Regex>> {
        if let Some(r) = self.regexes.get(re) {
            return Ok(r.clone());
        }
        let compiled = Regex::new(&translate_ere(re))
            .map_err(|e| Fatal(format!("invalid regular expression /{re}/: {e}")))?;
        let r = Rc::new(compiled);
        if self.regexes.len() > 500 {
            self.regexes.clear();
        }
        self.regexes.insert(re.to_string(), r.clone());
        Ok(r)
    }

    /// A regular expression operand: a literal, or any expression's string value.
    fn regex_of(&mut self, e: &Expr) -> R<Rc<Regex>> {
        match e {
            Expr::Regex(r) => self.regex(r),
            _ => {
                let v = self.eval(e)?;
                let s = self.to_str(&v);
                self.regex(&s)
            }
        }
    }

    // -- records and fields ------------------------------------------------------------

    fn set_record(&mut self, text: String) {
        self.record = text;
        self.split_done = false;
    }

    fn split_record(&mut self) -> R<()> {
        if self.split_done {
            return Ok(());
        }
        let fs = self.var_str("FS");
        let rs = self.var_str("RS");
        let record = std::mem::take(&mut self.record);
        let mut fields = self.split_with(&record, &fs)?;
        if rs.is_empty() && fs != " " {
            // In paragraph mode a newline always separates fields.
            fields = fields
                .into_iter()
                .flat_map(|f| f.split('\n').map(String::from).collect::<Vec<_>>())
                .collect();
        }
        self.record = record;
        self.fields = fields;
        self.split_done = true;
        Ok(())
    }

    fn split_with(&mut self, s: &str, fs: &str) -> R<Vec<String>> {
        if s.is_empty() {
            return Ok(Vec::new());
        }
        Ok(if fs == " " {
            s.split([' ', '\t', '\n'])
                .filter(|f| !f.is_empty())
                .map(String::from)
                .collect()
        } else if fs.chars().count() == 1 && fs != "\\" {
            s.split(fs).map(String::from).collect()
        } else {
            let re = self.regex(fs)?;
            re.split(s).map(String::from).collect()
        })
    }

    fn rebuild_record(&mut self) {
        let ofs = self.var_str("OFS");
        self.record = self.fields.join(&ofs);
    }

    fn field(&mut self, i: f64) -> R<Value> {
        if i < 0.0 {
            return fatal(format!("attempt to access field {}", i as i64));
        }
        let i = i as usize;
        if i == 0 {
            return Ok(Value::StrNum(self.record.clone()));
        }
        self.split_record()?;
        Ok(self
            .fields
            .get(i - 1)
            .map_or(Value::Uninit, |f| Value::StrNum(f.clone())))
    }

    fn set_field(&mut self, i: f64, v: String) -> R<()> {
        if i < 0.0 {
            return fatal(format!("attempt to access field {}", i as i64));
        }
        let i = i as usize;
        if i == 0 {
            self.set_record(v);
            return Ok(());
        }
        self.split_record()?;
        if self.fields.len() < i {
            self.fields.resize(i, String::new());
        }
        self.fields[i - 1] = v;
        self.rebuild_record();
        Ok(())
    }

    fn set_nf(&mut self, n: f64) -> R<()> {
        self.split_record()?;
        self.fields.resize(n.max(0.0) as usize, String::new());
        self.rebuild_record();
        Ok(())
    }

    // -- variables ---------------------------------------------------------------------

    fn cell_mut(&mut self, name: &str) -> &mut Cell {
        if let Some(f) = self.frames.last_mut()
            && f.locals.contains_key(name)
        {
            return f.locals.get_mut(name).unwrap();
        }
        self.globals
            .entry(name.to_string())
            .or_insert(Cell::Val(Value::Uninit))
    }

    fn get_var(&mut self, name: &str) -> R<Value> {
        if name == "NF"
            && self
                .frames
                .last()
                .is_none_or(|f| !f.locals.contains_key("NF"))
        {
            self.split_record()?;
            return Ok(Value::Num(self.fields.len() as f64));
        }
        match self.cell_mut(name) {
            Cell::Val(v) => Ok(v.clone()),
            Cell::Arr(a) if a.borrow().is_empty() => Ok(Value::Uninit),
            Cell::Arr(_) => fatal(format!("attempt to use array `{name}' in a scalar context")),
        }
    }

    fn set_var(&mut self, name: &str, v: Value) -> R<()> {
        let is_global = self
            .frames
            .last()
            .is_none_or(|f| !f.locals.contains_key(name));
        if is_global && name == "NF" {
            return self.set_nf(v.num());
        }
        let cell = self.cell_mut(name);
        if let Cell::Arr(a) = cell
            && !a.borrow().is_empty()
        {
            return fatal(format!("attempt to use array `{name}' in a scalar context"));
        }
        *cell = Cell::Val(v);
        Ok(())
    }

    fn array(&mut self, name: &str) -> R<Rc<RefCell<Array>>> {
        let cell = self.cell_mut(name);
        match cell {
            Cell::Arr(a) => Ok(a.clone()),
            Cell::Val(Value::Uninit) => {
                let a = Rc::new(RefCell::new(Array::new()));
                *cell = Cell::Arr(a.clone());
                Ok(a)
            }
            Cell::Val(_) => fatal(format!("attempt to use scalar `{name}' as an array")),
        }
    }

    fn subscript_of(&mut self, subs: &[Expr]) -> R<String> {
        let mut parts = Vec::with_capacity(subs.len());
        for s in subs {
            let v = self.eval(s)?;
            parts.push(self.to_str(&v));
        }
        let subsep = self.var_str("SUBSEP");
        Ok(subscript(parts, &subsep))
    }

    fn assign(&mut self, target: &Expr, v: Value) -> R<()> {
        match target {
            Expr::Var(n) => self.set_var(n, v),
            Expr::Index(n, subs) => {
                let key = self.subscript_of(subs)?;
                let arr = self.array(n)?;
                arr.borrow_mut().insert(key, v);
                Ok(())
            }
            Expr::Field(e) => {
                let i = self.eval(e)?.num();
                let s = self.to_str(&v);
                self.set_field(i, s)
            }
            Expr::Group(e) => self.assign(e, v),
            _ => fatal("assignment to something that is not a variable"),
        }
    }

    // -- expressions -------------------------------------------------------------------

    fn compare(&self, a: &Value, b: &Value) -> std::cmp::Ordering {
        if a.is_numeric() && b.is_numeric() {
            let (x, y) = (a.num(), b.num());
            return x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal);
        }
        self.to_str(a).cmp(&self.to_str(b))
    }

    fn arith(&self, op: BinOp, a: f64, b: f64) -> R<f64> {
        Ok(match op {
            BinOp::Add => a + b,
            BinOp::Sub => a - b,
            BinOp::Mul => a * b,
            BinOp::Div => {
                if b == 0.0 {
                    return fatal("division by zero attempted");
                }
                a / b
            }
            BinOp::Mod => {
                if b == 0.0 {
                    return fatal("division by zero attempted in `%'");
                }
                a % b
            }
            BinOp::Pow => a.powf(b),
        })
    }

    fn eval(&mut self, e: &Expr) -> R<Value> {
        Ok(match e {
            Expr::Num(n) => Value::Num(*n),
            Expr::Str(s) => Value::Str(s.clone()),
            Expr::Regex(r) => {
                let re = self.regex(r)?;
                Value::Num(re.is_match(&self.record) as i32 as f64)
            }
            Expr::Group(e) => self.eval(e)?,
            Expr::Field(i) => {
                let i = self.eval(i)?.num();
                self.field(i)?
            }
            Expr::Var(n) => self.get_var(n)?,
            Expr::Index(n, subs) => {
                let key = self.subscript_of(subs)?;
                let arr = self.array(n)?;
                let mut arr = arr.borrow_mut();
                // Referencing an element creates it, as in every awk.
                arr.entry(key).or_insert(Value::Uninit).clone()
            }
            Expr::Assign(op, target, rhs) => {
                let v = self.eval(rhs)?;
                let v = match op {
                    None => match v {
                        Value::Uninit => Value::Uninit,
                        v => v,
                    },
                    Some(op) => {
                        let cur = self.eval(target)?.num();
                        Value::Num(self.arith(*op, cur, v.num())?)
                    }
                };
                self.assign(target, v.clone())?;
                v
            }
            Expr::Cond(c, a, b) => {
                if self.eval(c)?.truthy() {
                    self.eval(a)?
                } else {
                    self.eval(b)?
                }
            }
            Expr::And(a, b) => {
                Value::Num((self.eval(a)?.truthy() && self.eval(b)?.truthy()) as i32 as f64)
            }
            Expr::Or(a, b) => {
                Value::Num((self.eval(a)?.truthy() || self.eval(b)?.truthy()) as i32 as f64)
            }
            Expr::Not(a) => Value::Num(!self.eval(a)?.truthy() as i32 as f64),
            Expr::Neg(a) => Value::Num(-self.eval(a)?.num()),
            Expr::Plus(a) => Value::Num(self.eval(a)?.num()),
            Expr::Bin(op, a, b) => {
                let x = self.eval(a)?.num();
                let y = self.eval(b)?.num();
                Value::Num(self.arith(*op, x, y)?)
            }
            Expr::Cmp(op, a, b) => {
                let x = self.eval(a)?;
                let y = self.eval(b)?;
                let o = self.compare(&x, &y);
                use std::cmp::Ordering::*;
                let r = match op {
                    CmpOp::Lt => o == Less,
                    CmpOp::Le => o != Greater,
                    CmpOp::Eq => o == Equal,
                    CmpOp::Ne => o != Equal,
                    CmpOp::Gt => o == Greater,
                    CmpOp::Ge => o != Less,
                };
                Value::Num(r as i32 as f64)
            }
            Expr::Match(neg, s, re) => {
                let v = self.eval(s)?;
                let s = self.to_str(&v);
                let re = self.regex_of(re)?;
                Value::Num((re.is_match(&s) != *neg) as i32 as f64)
            }
            Expr::Concat(a, b) => {
                let x = self.eval(a)?;
                let y = self.eval(b)?;
                Value::Str(self.to_str(&x) + &self.to_str(&y))
            }
            Expr::In(subs, arr) => {
                let key = self.subscript_of(subs)?;
                let arr = self.array(arr)?;
                let has = arr.borrow().contains_key(&key);
                Value::Num(has as i32 as f64)
            }
            Expr::IncDec(pre, delta, target) => {
                let old = self.eval(target)?.num();
                self.assign(target, Value::Num(old + delta))?;
                Value::Num(if *pre { old + delta } else { old })
            }
            Expr::Call(name, args) => self.call(name, args)?,
            Expr::Builtin(name, args) => self.builtin(name, args)?,
            Expr::Getline(var, src) => self.getline(var.as_deref(), src)?,
        })
    }

    fn call(&mut self, name: &str, args: &[Expr]) -> R<Value> {
        let prog = self.prog.clone();
        let Some(func) = prog.funcs.get(name) else {
            return fatal(format!("function `{name}' not defined"));
        };
        if args.len() > func.params.len() {
            return fatal(format!(
                "function `{name}' called with more arguments than declared"
            ));
        }
        if self.depth > 10_000 {
            return fatal("function calls nested too deeply");
        }
        let mut locals = HashMap::new();
        for (i, p) in func.params.iter().enumerate() {
            let cell = match args.get(i) {
                // A bare variable that is (or may become) an array is passed by reference.
                Some(Expr::Var(v)) => match self.cell_mut(v).clone() {
                    Cell::Arr(a) => Cell::Arr(a),
                    Cell::Val(Value::Uninit) if v != "NF" => {
                        let a = Rc::new(RefCell::new(Array::new()));
                        *self.cell_mut(v) = Cell::Arr(a.clone());
                        Cell::Arr(a)
                    }
                    Cell::Val(_) => Cell::Val(self.get_var(v)?),
                },
                Some(e) => Cell::Val(self.eval(e)?),
                None => Cell::Val(Value::Uninit),
            };
            locals.insert(p.clone(), cell);
        }
        self.frames.push(Frame { locals });
        self.depth += 1;
        let flow = self.exec_block(&func.body);
        self.depth -= 1;
        let frame = self.frames.pop().unwrap();
        // A parameter that stayed an unused empty array was a scalar after all.
        for (i, p) in func.params.iter().enumerate() {
            if let (Some(Expr::Var(v)), Some(Cell::Arr(a))) = (args.get(i), frame.locals.get(p))
                && a.borrow().is_empty()
                && Rc::strong_count(a) <= 2
                && let Cell::Arr(mine) = self.cell_mut(v).clone()
                && Rc::ptr_eq(&mine, a)
            {
                *self.cell_mut(v) = Cell::Val(Value::Uninit);
            }
        }
        match flow? {
            Flow::Return(v) => Ok(v),
            Flow::Exit => Err(Fatal(String::new())),
            _ => Ok(Value::Uninit),
        }
    }

    fn builtin(&mut self, name: &str, args: &[Expr]) -> R<Value> {
        let n = args.len();
        let arity = |lo: usize, hi: usize| -> R<()> {
            if n < lo || n > hi {
                fatal(format!("{name}: called with {n} arguments"))
            } else {
                Ok(())
            }
        };
        Ok(match name {
            "length" => {
                arity(0, 1)?;
                match args.first() {
                    None => Value::Num(self.record.chars().count() as f64),
                    Some(Expr::Var(v)) if matches!(self.cell_mut(v), Cell::Arr(_)) && v != "NF" => {
                        let a = self.array(v)?;
                        Value::Num(a.borrow().len() as f64)
                    }
                    Some(e) => {
                        let v = self.eval(e)?;
                        Value::Num(self.to_str(&v).chars().count() as f64)
                    }
                }
            }
            "substr" => {
                arity(2, 3)?;
                let v = self.eval(&args[0])?;
                let s: Vec<char> = self.to_str(&v).chars().collect();
                let m = self.eval(&args[1])?.num();
                let len = s.len() as f64;
                // gawk's reading: fractions are cut off, a start before 1 counts as 1 and
                // does not shorten the length.
                let start = if m.is_nan() { 1.0 } else { m.trunc().max(1.0) };
                let end = if n == 3 {
                    let l = self.eval(&args[2])?.num();
                    if l.is_nan() || l < 1.0 {
                        start
                    } else {
                        (start + l.trunc()).min(len + 1.0)
                    }
                } else {
                    len + 1.0
                };
                if end <= start {
                    Value::Str(String::new())
                } else {
                    Value::Str(s[start as usize - 1..end as usize - 1].iter().collect())
                }
            }
            "index" => {
                arity(2, 2)?;
                let a = self.eval(&args[0])?;
                let b = self.eval(&args[1])?;
                let (s, t) = (self.to_str(&a), self.to_str(&b));
                Value::Num(match s.find(&t) {
                    Some(i) => s[..i].chars().count() as f64 + 1.0,
                    None => 0.0,
                })
            }
            "split" => {
                arity(2, 3)?;
                let v = self.eval(&args[0])?;
                let s = self.to_str(&v);
                let Expr::Var(arr_name) = &args[1] else {
                    return fatal("split: second argument is not an array");
                };
                let parts = match args.get(2) {
                    Some(Expr::Regex(r)) => {
                        let re = self.regex(r)?;
                        if s.is_empty() {
                            Vec::new()
                        } else {
                            re.split(&s).map(String::from).collect()
                        }
                    }
                    Some(e) => {
                        let fs = self.eval(e)?;
                        let fs = self.to_str(&fs);
                        self.split_with(&s, &fs)?
                    }
                    None => {
                        let fs = self.var_str("FS");
                        self.split_with(&s, &fs)?
                    }
                };
                let arr = self.array(arr_name)?;
                let mut arr = arr.borrow_mut();
                arr.clear();
                for (i, p) in parts.iter().enumerate() {
                    arr.insert((i + 1).to_string(), Value::StrNum(p.clone()));
                }
                Value::Num(parts.len() as f64)
            }
            "sub" | "gsub" => {
                arity(2, 3)?;
                let re = self.regex_of(&args[0])?;
                let repl = self.eval(&args[1])?;
                let repl = self.to_str(&repl);
                let record = Expr::Field(Box::new(Expr::Num(0.0)));
                let target = args.get(2).unwrap_or(&record);
                let cur = self.eval(target)?;
                let cur = self.to_str(&cur);
                let (new, count) = substitute(&re, &cur, &repl, name == "gsub");
                if count > 0 {
                    self.assign(target, Value::Str(new))?;
                }
                Value::Num(count as f64)
            }
            "match" => {
                arity(2, 2)?;
                let v = self.eval(&args[0])?;
                let s = self.to_str(&v);
                let re = self.regex_of(&args[1])?;
                let (start, len) = match re.find(&s) {
                    Some(m) => (
                        s[..m.start()].chars().count() as f64 + 1.0,
                        m.as_str().chars().count() as f64,
                    ),
                    None => (0.0, -1.0),
                };
                self.set_var("RSTART", Value::Num(start))?;
                self.set_var("RLENGTH", Value::Num(len))?;
                Value::Num(start)
            }
            "sprintf" => {
                if n == 0 {
                    return fatal("sprintf: no format");
                }
                let mut vals = Vec::with_capacity(n);
                for a in args {
                    vals.push(self.eval(a)?);
                }
                let fmt = self.to_str(&vals[0]);
                Value::Str(sprintf(&fmt, &vals[1..], &self.convfmt()))
            }
            "sin" | "cos" | "exp" | "log" | "sqrt" | "int" => {
                arity(1, 1)?;
                let x = self.eval(&args[0])?.num();
                Value::Num(match name {
                    "sin" => x.sin(),
                    "cos" => x.cos(),
                    "exp" => x.exp(),
                    "log" => x.ln(),
                    "sqrt" => x.sqrt(),
                    _ => x.trunc(),
                })
            }
            "atan2" => {
                arity(2, 2)?;
                let y = self.eval(&args[0])?.num();
                let x = self.eval(&args[1])?.num();
                Value::Num(y.atan2(x))
            }
            "rand" => {
                arity(0, 0)?;
                // xorshift64*: repeatable for a given seed, like awk's default seed.
                let mut x = self.rand_state;
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                self.rand_state = x;
                let v = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
                Value::Num(v as f64 / (1u64 << 53) as f64)
            }
            "srand" => {
                arity(0, 1)?;
                let seed = match args.first() {
                    Some(e) => self.eval(e)?.num(),
                    None => std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0.0, |d| d.as_secs() as f64),
                };
                let prev = self.rand_seed;
                self.rand_seed = seed;
                self.rand_state = (seed.to_bits() ^ 0x9E37_79B9_7F4A_7C15) | 1;
                Value::Num(prev)
            }
            "tolower" | "toupper" => {
                arity(1, 1)?;
                let v = self.eval(&args[0])?;
                let s = self.to_str(&v);
                Value::Str(if name == "tolower" {
                    s.to_lowercase()
                } else {
                    s.to_uppercase()
                })
            }
            "system" => {
                arity(1, 1)?;
                let v = self.eval(&args[0])?;
                let cmd = self.to_str(&v);
                self.flush_all();
                let status = crate::run_command(
                    &["sh".into(), "-c".into(), cmd],
                    std::env::vars().collect(),
                    guest_support::process::Stdio::Inherit,
                    "awk",
                );
                Value::Num(status as f64)
            }
            "close" => {
                arity(1, 2)?;
                let v = self.eval(&args[0])?;
                let name = self.to_str(&v);
                let mut status = -1;
                if let Some(o) = self.outputs.shift_remove(&name) {
                    status = o.close();
                }
                if self.inputs.remove(&name).is_some() || self.commands.remove(&name).is_some() {
                    status = 0;
                }
                Value::Num(status as f64)
            }
            "fflush" => {
                arity(0, 1)?;
                self.flush_all();
                Value::Num(0.0)
            }
            _ => return fatal(format!("function `{name}' not defined")),
        })
    }

    fn flush_all(&mut self) {
        let _ = self.stdout.flush();
        for o in self.outputs.values_mut() {
            o.flush();
        }
    }

    // -- input -------------------------------------------------------------------------

    /// The next record of the main input (the ARGV operands, or stdin); sets FILENAME.
    fn next_main_record(&mut self) -> R<Option<String>> {
        loop {
            if let Some(mut input) = self.main.take() {
                let rs = self.var_str("RS");
                let rec = input.record(&rs, self)?;
                if let Some(r) = rec {
                    self.main = Some(input);
                    return Ok(Some(r));
                }
            }
            // Open the next operand.
            let argc = self.get_var("ARGC").map(|v| v.num() as usize).unwrap_or(0);
            let argv = self.array("ARGV")?;
            let mut opened = false;
            while self.argv_next < argc {
                let i = self.argv_next;
                self.argv_next += 1;
                let arg = argv
                    .borrow()
                    .get(&i.to_string())
                    .map(|v| self.to_str(v))
                    .unwrap_or_default();
                if arg.is_empty() {
                    continue;
                }
                if let Some((name, value)) = assignment(&arg) {
                    self.set_var(&name, Value::StrNum(lex::unescape(&value)))?;
                    continue;
                }
                self.set_var("FILENAME", Value::Str(arg.clone()))?;
                self.set_var("FNR", Value::Num(0.0))?;
                self.opened_any = true;
                if arg == "-" || arg == "/dev/stdin" {
                    self.main = Some(Input::new(Box::new(BufReader::new(std::io::stdin()))));
                } else {
                    match std::fs::File::open(&arg) {
                        Ok(f) if f.metadata().is_ok_and(|m| m.is_dir()) => {
                            eprintln!(
                                "awk: warning: command line argument `{arg}' is a directory: skipped"
                            );
                            continue;
                        }
                        Ok(f) => {
                            self.main = Some(Input::new(Box::new(BufReader::new(f))));
                        }
                        Err(e) => {
                            self.flush_all();
                            eprintln!(
                                "awk: fatal: cannot open file `{arg}' for reading: {}",
                                crate::own::reason(&e)
                            );
                            self.exit_code = 2;
                            return Err(Fatal(String::new()));
                        }
                    }
                }
                opened = true;
                break;
            }
            if !opened {
                if self.opened_any {
                    return Ok(None);
                }
                // No file operands: standard input.
                self.opened_any = true;
                self.main = Some(Input::new(Box::new(BufReader::new(std::io::stdin()))));
            }
        }
    }

    fn bump_nr(&mut self) -> R<()> {
        let nr = self.get_var("NR")?.num();
        self.set_var("NR", Value::Num(nr + 1.0))?;
        let fnr = self.get_var("FNR")?.num();
        self.set_var("FNR", Value::Num(fnr + 1.0))
    }

    fn getline(&mut self, var: Option<&Expr>, src: &GetSrc) -> R<Value> {
        let rec = match src {
            GetSrc::Main => {
                let Some(rec) = self.next_main_record()? else {
                    return Ok(Value::Num(0.0));
                };
                self.bump_nr()?;
                rec
            }
            GetSrc::File(f) => {
                let v = self.eval(f)?;
                let name = self.to_str(&v);
                if !self.inputs.contains_key(&name) {
                    let reader: Box<dyn BufRead> = if name == "-" || name == "/dev/stdin" {
                        Box::new(BufReader::new(std::io::stdin()))
                    } else {
                        match std::fs::File::open(&name) {
                            Ok(f) => Box::new(BufReader::new(f)),
                            Err(_) => return Ok(Value::Num(-1.0)),
                        }
                    };
                    self.inputs.insert(name.clone(), Input::new(reader));
                }
                let rs = self.var_str("RS");
                let mut input = self.inputs.remove(&name).unwrap();
                let rec = input.record(&rs, self);
                self.inputs.insert(name, input);
                match rec? {
                    Some(r) => r,
                    None => return Ok(Value::Num(0.0)),
                }
            }
            GetSrc::Cmd(c) => {
                let v = self.eval(c)?;
                let cmd = self.to_str(&v);
                if !self.commands.contains_key(&cmd) {
                    self.flush_all();
                    let out = command_output(&cmd);
                    self.commands
                        .insert(cmd.clone(), Input::new(Box::new(std::io::Cursor::new(out))));
                }
                let rs = self.var_str("RS");
                let mut input = self.commands.remove(&cmd).unwrap();
                let rec = input.record(&rs, self);
                self.commands.insert(cmd, input);
                match rec? {
                    Some(r) => {
                        let nr = self.get_var("NR")?.num();
                        self.set_var("NR", Value::Num(nr + 1.0))?;
                        r
                    }
                    None => return Ok(Value::Num(0.0)),
                }
            }
        };
        match var {
            Some(v) => self.assign(v, Value::StrNum(rec))?,
            None => self.set_record(rec),
        }
        Ok(Value::Num(1.0))
    }

    // -- output ------------------------------------------------------------------------

    fn emit(&mut self, redirect: Option<&Redirect>, data: String) -> R<()> {
        let bytes = format::raw_bytes(&data);
        let Some(redirect) = redirect else {
            if self.stdout.write_all(&bytes).is_err() {
                return Err(Fatal(String::new()));
            }
            return Ok(());
        };
        let (target, kind) = match redirect {
            Redirect::File(e) => (e, 0),
            Redirect::Append(e) => (e, 1),
            Redirect::Pipe(e) => (e, 2),
        };
        let v = self.eval(target)?;
        let name = self.to_str(&v);
        if !self.outputs.contains_key(&name) {
            let out = match (kind, name.as_str()) {
                (0 | 1, "/dev/stdout" | "-") => Output::Stdout,
                (0 | 1, "/dev/stderr") => Output::Stderr,
                (0 | 1, _) => {
                    let f = if kind == 0 {
                        std::fs::File::create(&name)
                    } else {
                        std::fs::OpenOptions::new()
                            .append(true)
                            .create(true)
                            .open(&name)
                    };
                    match f {
                        Ok(f) => Output::File(std::io::BufWriter::new(f)),
                        Err(e) => {
                            return fatal(format!(
                                "can't redirect to `{name}': {}",
                                crate::own::reason(&e)
                            ));
                        }
                    }
                }
                _ => {
                    self.flush_all();
                    match spawn_writer(&name) {
                        Some((handle, pid)) => Output::Pipe {
                            handle,
                            pid,
                            buf: Vec::new(),
                        },
                        None => return fatal(format!("can't open pipe `{name}'")),
                    }
                }
            };
            self.outputs.insert(name.clone(), out);
        }
        let out = self.outputs.get_mut(&name).unwrap();
        if !out.write(&mut self.stdout, &bytes) {
            return fatal(format!("write to `{name}' failed"));
        }
        Ok(())
    }

    // -- statements --------------------------------------------------------------------

    fn exec_block(&mut self, stmts: &[Stmt]) -> R<Flow> {
        for s in stmts {
            match self.exec(s)? {
                Flow::Normal => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Normal)
    }

    fn exec(&mut self, s: &Stmt) -> R<Flow> {
        match s {
            Stmt::Expr(e) => {
                self.eval(e)?;
            }
            Stmt::Print(args, redirect) => {
                let mut line = String::new();
                if args.is_empty() {
                    line.push_str(&self.record);
                } else {
                    let ofs = self.var_str("OFS");
                    for (i, a) in args.iter().enumerate() {
                        if i > 0 {
                            line.push_str(&ofs);
                        }
                        let v = self.eval(a)?;
                        line.push_str(&self.to_output_str(&v));
                    }
                }
                line.push_str(&self.var_str("ORS"));
                self.emit(redirect.as_ref(), line)?;
            }
            Stmt::Printf(args, redirect) => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(self.eval(a)?);
                }
                let fmt = self.to_str(&vals[0]);
                let text = sprintf(&fmt, &vals[1..], &self.convfmt());
                self.emit(redirect.as_ref(), text)?;
            }
            Stmt::If(c, a, b) => {
                if self.eval(c)?.truthy() {
                    return self.exec(a);
                } else if let Some(b) = b {
                    return self.exec(b);
                }
            }
            Stmt::While(c, body) => {
                while self.eval(c)?.truthy() {
                    match self.exec(body)? {
                        Flow::Break => break,
                        Flow::Normal | Flow::Continue => {}
                        other => return Ok(other),
                    }
                }
            }
            Stmt::Do(body, c) => loop {
                match self.exec(body)? {
                    Flow::Break => break,
                    Flow::Normal | Flow::Continue => {}
                    other => return Ok(other),
                }
                if !self.eval(c)?.truthy() {
                    break;
                }
            },
            Stmt::For(init, cond, step, body) => {
                if let Some(i) = init {
                    self.exec(i)?;
                }
                loop {
                    if let Some(c) = cond
                        && !self.eval(c)?.truthy()
                    {
                        break;
                    }
                    match self.exec(body)? {
                        Flow::Break => break,
                        Flow::Normal | Flow::Continue => {}
                        other => return Ok(other),
                    }
                    if let Some(s) = step {
                        self.exec(s)?;
                    }
                }
            }
            Stmt::ForIn(var, arr, body) => {
                let keys: Vec<String> = self.array(arr)?.borrow().keys().cloned().collect();
                let arr = self.array(arr)?;
                for k in keys {
                    if !arr.borrow().contains_key(&k) {
                        continue;
                    }
                    self.set_var(var, Value::StrNum(k))?;
                    match self.exec(body)? {
                        Flow::Break => break,
                        Flow::Normal | Flow::Continue => {}
                        other => return Ok(other),
                    }
                }
            }
            Stmt::Block(b) => return self.exec_block(b),
            Stmt::Next => return Ok(Flow::Next),
            Stmt::NextFile => return Ok(Flow::NextFile),
            Stmt::Break => return Ok(Flow::Break),
            Stmt::Continue => return Ok(Flow::Continue),
            Stmt::Exit(code) => {
                if let Some(c) = code {
                    self.exit_code = self.eval(c)?.num() as i32;
                }
                return Ok(Flow::Exit);
            }
            Stmt::Return(v) => {
                let v = match v {
                    Some(e) => self.eval(e)?,
                    None => Value::Uninit,
                };
                return Ok(Flow::Return(v));
            }
            Stmt::Delete(name, subs) => {
                let arr = self.array(name)?;
                match subs {
                    Some(subs) => {
                        let key = self.subscript_of(subs)?;
                        arr.borrow_mut().shift_remove(&key);
                    }
                    None => arr.borrow_mut().clear(),
                }
            }
        }
        Ok(Flow::Normal)
    }

    /// Runs the whole program; returns the exit status.
    fn run(&mut self) -> i32 {
        let prog = self.prog.clone();
        let mut exiting = false;
        let result: R<()> = (|| {
            for b in &prog.begin {
                match self.exec_block(b)? {
                    Flow::Exit => {
                        exiting = true;
                        break;
                    }
                    Flow::Next | Flow::NextFile => {
                        return fatal("`next' used in BEGIN action");
                    }
                    _ => {}
                }
            }
            if !exiting && (!prog.rules.is_empty() || !prog.end.is_empty()) {
                'records: while let Some(rec) = self.next_main_record()? {
                    self.bump_nr()?;
                    self.set_record(rec);
                    for (i, rule) in prog.rules.iter().enumerate() {
                        let matched = match &rule.pattern {
                            Pattern::All => true,
                            Pattern::Expr(e) => self.eval(e)?.truthy(),
                            Pattern::Range(a, b) => {
                                if self.range_active[i] {
                                    if self.eval(b)?.truthy() {
                                        self.range_active[i] = false;
                                    }
                                    true
                                } else if self.eval(a)?.truthy() {
                                    if !self.eval(b)?.truthy() {
                                        self.range_active[i] = true;
                                    }
                                    true
                                } else {
                                    false
                                }
                            }
                        };
                        if !matched {
                            continue;
                        }
                        let flow = match &rule.action {
                            Some(stmts) => self.exec_block(stmts)?,
                            None => {
                                let line = self.record.clone() + &self.var_str("ORS");
                                self.emit(None, line)?;
                                Flow::Normal
                            }
                        };
                        match flow {
                            Flow::Next => continue 'records,
                            Flow::NextFile => {
                                self.main = None;
                                continue 'records;
                            }
                            Flow::Exit => {
                                exiting = true;
                                break 'records;
                            }
                            _ => {}
                        }
                    }
                }
            }
            for b in &prog.end {
                if let Flow::Exit = self.exec_block(b)? {
                    break;
                }
            }
            Ok(())
        })();
        let mut code = self.exit_code;
        if let Err(Fatal(msg)) = result
            && !msg.is_empty()
        {
            let _ = self.stdout.flush();
            eprintln!("awk: fatal: {msg}");
            code = 2;
        }
        let _ = self.stdout.flush();
        for (_, o) in std::mem::take(&mut self.outputs) {
            o.close();
        }
        code
    }
}

/// `&` in a replacement is the match, `\&` a literal `&`, `\\` a backslash.
fn substitute(re: &Regex, s: &str, repl: &str, global: bool) -> (String, usize) {
    let mut out = String::new();
    let mut last = 0;
    let mut count = 0;
    for m in re.find_iter(s) {
        out.push_str(&s[last..m.start()]);
        let mut chars = repl.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&'&') => {
                    out.push('&');
                    chars.next();
                }
                '\\' if chars.peek() == Some(&'\\') => {
                    out.push('\\');
                    chars.next();
                }
                '&' => out.push_str(m.as_str()),
                c => out.push(c),
            }
        }
        last = m.end();
        count += 1;
        if !global {
            break;
        }
    }
    out.push_str(&s[last..]);
    (out, count)
}

/// `NAME=value` operands and `-v` arguments.
fn assignment(arg: &str) -> Option<(String, String)> {
    let (name, value) = arg.split_once('=')?;
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then(|| (name.to_string(), value.to_string()))
}

/// Runs `sh -c CMD` and returns everything it wrote to stdout.
fn command_output(cmd: &str) -> Vec<u8> {
    use guest_support::process::{self, Stdio};
    let (r, w) = process::pipe();
    let spawned = guest_support::spawn_sh(cmd, Stdio::Inherit, Stdio::Handle(w), Stdio::Inherit);
    process::close(w);
    let out = guest_support::read_to_end(r);
    if let Ok(pid) = spawned {
        process::wait(pid);
    }
    out
}

/// Starts `sh -c CMD` reading from a new pipe; returns the pipe's write end and the pid.
fn spawn_writer(cmd: &str) -> Option<(u32, u32)> {
    use guest_support::process::{self, Stdio};
    let (r, w) = process::pipe();
    let spawned = guest_support::spawn_sh(cmd, Stdio::Handle(r), Stdio::Inherit, Stdio::Inherit);
    process::close(r);
    match spawned {
        Ok(pid) => Some((w, pid)),
        Err(_) => {
            process::close(w);
            None
        }
    }
}

const USAGE: &str = "usage: awk [-F fs][-v var=value][prog | -f progfile][file ...]";

pub fn main(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut fs: Option<String> = None;
    let mut assigns: Vec<(String, String)> = Vec::new();
    let mut prog_files: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            i += 1;
            break;
        }
        if !a.starts_with('-') || a == "-" {
            break;
        }
        let (opt, attached) = if let Some(long) = a.strip_prefix("--") {
            match long.split_once('=') {
                Some((k, v)) => (format!("--{k}"), Some(v.to_string())),
                None => (a.clone(), None),
            }
        } else {
            let rest = &a[2..];
            (
                a[..2].to_string(),
                (!rest.is_empty()).then(|| rest.to_string()),
            )
        };
        let value = |i: &mut usize| -> Option<String> {
            if let Some(v) = &attached {
                return Some(v.clone());
            }
            *i += 1;
            args.get(*i).cloned()
        };
        match opt.as_str() {
            "-F" | "--field-separator" => {
                let Some(v) = value(&mut i) else {
                    eprintln!("awk: option requires an argument -- 'F'\n{USAGE}");
                    return 2;
                };
                fs = Some(if v == "t" {
                    "\t".into()
                } else {
                    lex::unescape(&v)
                });
            }
            "-v" | "--assign" => {
                let Some(v) = value(&mut i) else {
                    eprintln!("awk: option requires an argument -- 'v'\n{USAGE}");
                    return 2;
                };
                match assignment(&v) {
                    Some(kv) => assigns.push(kv),
                    None => {
                        eprintln!("awk: `{v}' argument to `-v' not in `var=value' form");
                        return 2;
                    }
                }
            }
            "-f" | "--file" => {
                let Some(v) = value(&mut i) else {
                    eprintln!("awk: option requires an argument -- 'f'\n{USAGE}");
                    return 2;
                };
                prog_files.push(v);
            }
            "--version" | "-V" => {
                println!("awk (wasbox) 0.1: the POSIX awk language");
                return 0;
            }
            "--posix" | "--traditional" | "-P" | "-c" => {}
            _ => {
                eprintln!("awk: unknown option {a}\n{USAGE}");
                return 2;
            }
        }
        i += 1;
    }
    let source = if prog_files.is_empty() {
        let Some(p) = args.get(i) else {
            eprintln!("{USAGE}");
            return 2;
        };
        i += 1;
        p.clone()
    } else {
        let mut src = String::new();
        for f in &prog_files {
            match std::fs::read_to_string(f) {
                Ok(s) => {
                    src.push_str(&s);
                    src.push('\n');
                }
                Err(e) => {
                    eprintln!(
                        "awk: fatal: can't open source file `{f}' for reading: {}",
                        crate::own::reason(&e)
                    );
                    return 2;
                }
            }
        }
        src
    };
    let prog = match lex::lex(&source).and_then(parse::parse) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("awk: {e}");
            return 1;
        }
    };

    let mut globals: HashMap<String, Cell> = HashMap::new();
    let mut set = |k: &str, v: Value| {
        globals.insert(k.to_string(), Cell::Val(v));
    };
    set("FS", Value::Str(fs.unwrap_or_else(|| " ".into())));
    set("OFS", Value::Str(" ".into()));
    set("ORS", Value::Str("\n".into()));
    set("RS", Value::Str("\n".into()));
    set("SUBSEP", Value::Str("\x1c".into()));
    set("CONVFMT", Value::Str("%.6g".into()));
    set("OFMT", Value::Str("%.6g".into()));
    set("NR", Value::Num(0.0));
    set("FNR", Value::Num(0.0));
    set("RSTART", Value::Num(0.0));
    set("RLENGTH", Value::Num(-1.0));
    set("FILENAME", Value::Uninit);
    let operands = &args[i..];
    set("ARGC", Value::Num(operands.len() as f64 + 1.0));
    let mut argv = Array::new();
    argv.insert("0".into(), Value::Str("awk".into()));
    for (n, a) in operands.iter().enumerate() {
        argv.insert((n + 1).to_string(), Value::StrNum(a.clone()));
    }
    globals.insert("ARGV".into(), Cell::Arr(Rc::new(RefCell::new(argv))));
    let environ: Array = std::env::vars()
        .map(|(k, v)| (k, Value::StrNum(v)))
        .collect();
    globals.insert("ENVIRON".into(), Cell::Arr(Rc::new(RefCell::new(environ))));

    let rules = prog.rules.len();
    let mut interp = Interp {
        prog: Rc::new(prog),
        globals,
        frames: Vec::new(),
        record: String::new(),
        fields: Vec::new(),
        split_done: true,
        regexes: HashMap::new(),
        stdout: std::io::BufWriter::with_capacity(1 << 16, std::io::stdout()),
        outputs: IndexMap::new(),
        inputs: HashMap::new(),
        commands: HashMap::new(),
        argv_next: 1,
        main: None,
        opened_any: false,
        range_active: vec![false; rules],
        exit_code: 0,
        rand_seed: 0.0,
        rand_state: 0x9E37_79B9_7F4A_7C15,
        depth: 0,
    };
    for (k, v) in assigns {
        if interp
            .set_var(&k, Value::StrNum(lex::unescape(&v)))
            .is_err()
        {
            eprintln!("awk: cannot assign to {k}");
            return 2;
        }
    }
    interp.run()
}
