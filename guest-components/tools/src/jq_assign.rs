//! jq's assignment into `null` and past the end of an array: `null | .a.b = 1` is
//! `{"a":{"b":1}}` and `[] | .[2] = 1` is `[null,null,1]` in jq, where jaq's path update
//! stops with "cannot use null as iterable" or "index 2 out of bounds". The program is
//! parsed with jaq's own parser and written out again with every assignment (`=`, `|=`,
//! `+=`, ..., `//=`) preceded by `_wasbox_vivify(PATHS)`, a jq definition that makes the
//! objects and arrays along each assigned path (and pads arrays with `null`) as jq's
//! `setpath` would; the value at the end of the path is left alone, so the assignment then
//! does what it did. `jq.rs` runs this program only for an input where the original one
//! failed with one of those errors, so every program that worked keeps its exact behaviour.

use jaq_core::load::lex::{Lexer, StrPart};
use jaq_core::load::parse::{BinaryOp, Def, Parser, Pattern, Term};
use jaq_core::path::{Opt, Part, Path};

/// The definitions the rewritten program needs (put in the prelude).
pub const PRELUDE: &str = r#"
def _wasbox_viv($p):
  if $p == [] then .
  else $p[0] as $k
  | (if . == null then (if ($k | type) == "string" then {} else [] end) else . end)
  | (if ($k | type) == "number" and type == "array" and $k >= length
     then . + [range($k - length + 1) | null] else . end)
  | if ($p | length) > 1 then .[$k] |= _wasbox_viv($p[1:]) else . end
  end;
def _wasbox_vivify(paths): reduce path(paths) as $p (.; _wasbox_viv($p));
"#;

/// `code` with every assignment vivifying its paths first, or `None` when it has no
/// assignment (or is not a plain program of definitions and a filter).
pub fn vivifying(code: &str) -> Option<String> {
    let tokens = Lexer::new(code).lex().ok()?;
    let (defs, term): (Vec<Def<&str>>, Term<&str>) = Parser::new(&tokens)
        .parse(|p| {
            let defs = p.defs()?;
            let term = p.term()?;
            Ok((defs, term))
        })
        .ok()?;
    let mut w = Writer::default();
    for d in &defs {
        w.def(d);
    }
    w.term(&term);
    w.assigns.then_some(w.out)
}

#[derive(Default)]
struct Writer {
    out: String,
    assigns: bool,
}

impl Writer {
    fn s(&mut self, s: &str) {
        self.out.push_str(s);
    }

    /// `items` written by `f`, with `sep` between them.
    fn list<T>(&mut self, items: &[T], sep: &str, mut f: impl FnMut(&mut Self, &T)) {
        for (i, x) in items.iter().enumerate() {
            if i > 0 {
                self.s(sep);
            }
            f(self, x);
        }
    }

    fn def(&mut self, d: &Def<&str>) {
        self.s("def ");
        self.s(d.name);
        if !d.args.is_empty() {
            self.s("(");
            self.s(&d.args.join("; "));
            self.s(")");
        }
        self.s(": ");
        self.term(&d.body);
        self.s("; ");
    }

    /// A term in parentheses.
    fn group(&mut self, t: &Term<&str>) {
        self.s("(");
        self.term(t);
        self.s(")");
    }

    fn args(&mut self, args: &[Term<&str>]) {
        if args.is_empty() {
            return;
        }
        self.s("(");
        self.list(args, "; ", |w, a| w.term(a));
        self.s(")");
    }

    fn string(&mut self, fmt: Option<&str>, parts: &[StrPart<&str, Term<&str>>]) {
        if let Some(f) = fmt {
            self.s(f);
            self.s(" ");
        }
        self.s("\"");
        for p in parts {
            match p {
                StrPart::Str(s) => {
                    for c in s.chars() {
                        self.char(c);
                    }
                }
                StrPart::Char(c) => self.char(*c),
                StrPart::Term(t) => {
                    self.s("\\(");
                    self.term(t);
                    self.s(")");
                }
            }
        }
        self.s("\"");
    }

    fn char(&mut self, c: char) {
        match c {
            '"' => self.s("\\\""),
            '\\' => self.s("\\\\"),
            '\n' => self.s("\\n"),
            '\t' => self.s("\\t"),
            '\r' => self.s("\\r"),
            c if (c as u32) < 0x20 => self.s(&format!("\\u{:04x}", c as u32)),
            c => self.out.push(c),
        }
    }

    fn pattern(&mut self, p: &Pattern<&str>) {
        match p {
            Pattern::Var(v) => self.s(v),
            Pattern::Arr(ps) => {
                self.s("[");
                self.list(ps, ", ", |w, p| w.pattern(p));
                self.s("]");
            }
            Pattern::Obj(entries) => {
                self.s("{");
                self.list(entries, ", ", |w, (k, p)| {
                    w.group(k);
                    w.s(": ");
                    w.pattern(p);
                });
                self.s("}");
            }
        }
    }

    fn path(&mut self, path: &Path<Term<&str>>) {
        for (part, opt) in &path.0 {
            match part {
                Part::Index(i) => {
                    self.s("[");
                    self.term(i);
                    self.s("]");
                }
                Part::Range(from, to) => {
                    self.s("[");
                    if let Some(f) = from {
                        self.term(f);
                    }
                    if from.is_some() || to.is_some() {
                        self.s(":");
                    }
                    if let Some(t) = to {
                        self.term(t);
                    }
                    self.s("]");
                }
            }
            if matches!(opt, Opt::Optional) {
                self.s("?");
            }
        }
    }

    fn term(&mut self, t: &Term<&str>) {
        match t {
            Term::Id => self.s("."),
            Term::Recurse => self.s(".."),
            Term::Num(n) => self.s(n),
            Term::Str(fmt, parts) => self.string(*fmt, parts),
            Term::Arr(None) => self.s("[]"),
            Term::Arr(Some(t)) => {
                self.s("[");
                self.term(t);
                self.s("]");
            }
            Term::Obj(entries) => {
                self.s("{");
                self.list(entries, ", ", |w, (k, v)| {
                    match k {
                        Term::Var(_) | Term::Str(..) => w.term(k),
                        _ => w.group(k),
                    }
                    if let Some(v) = v {
                        w.s(": ");
                        w.group(v);
                    }
                });
                self.s("}");
            }
            Term::Neg(t) => {
                self.s("(-");
                self.group(t);
                self.s(")");
            }
            Term::BinOp(l, op, r) => {
                let assign = match op {
                    BinaryOp::Assign => Some("=".to_string()),
                    BinaryOp::Update => Some("|=".into()),
                    BinaryOp::UpdateMath(m) => Some(format!("{}=", m.as_str())),
                    BinaryOp::UpdateAlt => Some("//=".into()),
                    _ => None,
                };
                self.s("(");
                if let Some(a) = assign {
                    self.assigns = true;
                    self.s("_wasbox_vivify(");
                    self.term(l);
                    self.s(") | ");
                    self.group(l);
                    self.s(" ");
                    self.s(&a);
                    self.s(" ");
                    self.group(r);
                } else {
                    self.group(l);
                    match op {
                        BinaryOp::Pipe(None) => self.s(" | "),
                        BinaryOp::Pipe(Some(p)) => {
                            self.s(" as ");
                            self.pattern(p);
                            self.s(" | ");
                        }
                        BinaryOp::Comma => self.s(", "),
                        BinaryOp::Alt => self.s(" // "),
                        BinaryOp::Or => self.s(" or "),
                        BinaryOp::And => self.s(" and "),
                        BinaryOp::Math(m) => {
                            self.s(" ");
                            self.s(m.as_str());
                            self.s(" ");
                        }
                        BinaryOp::Cmp(c) => {
                            self.s(" ");
                            self.s(c.as_str());
                            self.s(" ");
                        }
                        _ => unreachable!("assignments are handled above"),
                    }
                    self.group(r);
                }
                self.s(")");
            }
            Term::Label(x, t) => {
                self.s("(label ");
                self.s(x);
                self.s(" | ");
                self.term(t);
                self.s(")");
            }
            Term::Break(x) => {
                self.s("break ");
                self.s(x);
            }
            Term::Fold(kind, xs, pat, args) => {
                self.s("(");
                self.s(kind);
                self.s(" ");
                self.group(xs);
                self.s(" as ");
                self.pattern(pat);
                self.args(args);
                self.s(")");
            }
            Term::TryCatch(t, catch) => {
                self.s("(try ");
                self.group(t);
                if let Some(c) = catch {
                    self.s(" catch ");
                    self.group(c);
                }
                self.s(")");
            }
            Term::IfThenElse(branches, else_) => {
                for (i, (c, t)) in branches.iter().enumerate() {
                    self.s(if i == 0 { "if " } else { " elif " });
                    self.term(c);
                    self.s(" then ");
                    self.term(t);
                }
                if let Some(e) = else_ {
                    self.s(" else ");
                    self.term(e);
                }
                self.s(" end");
            }
            Term::Def(defs, t) => {
                self.s("(");
                for d in defs {
                    self.def(d);
                }
                self.term(t);
                self.s(")");
            }
            Term::Call(name, args) => {
                self.s(name);
                self.args(args);
            }
            Term::Var(v) => self.s(v),
            Term::Path(t, path) => {
                match &**t {
                    Term::Id => self.s("."),
                    t => self.group(t),
                }
                self.path(path);
            }
        }
    }
}
