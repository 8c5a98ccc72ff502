//! `bc [-l] [-q] [FILE...]`: the POSIX calculator language with GNU bc's extensions, on
//! arbitrary-precision decimals (truncating, as bc does): `scale`, `ibase`, `obase`,
//! variables, arrays, `++`/`--`, compound assignment, comparisons and `! && ||`, `if`/
//! `else`, `while`, `for`, `break`, `continue`, `define` with `auto` and `return`, `print`,
//! strings, `sqrt`, `length`, `scale()`, `quit`, and with `-l` the math library (`s c a l
//! e j`, scale 20).

use std::collections::HashMap;
use std::io::{Read, Write};

use num_bigint::BigInt;
use num_traits::{One, Signed, ToPrimitive, Zero};

/// A decimal: `m / 10^s`.
#[derive(Clone, Debug)]
struct D {
    m: BigInt,
    s: u32,
}

fn pow10(n: u32) -> BigInt {
    BigInt::from(10u32).pow(n)
}

impl D {
    fn int(n: i64) -> D {
        D {
            m: BigInt::from(n),
            s: 0,
        }
    }

    fn zero() -> D {
        D::int(0)
    }

    fn is_zero(&self) -> bool {
        self.m.is_zero()
    }

    /// The same value at scale `s` (digits beyond it truncated).
    fn at(&self, s: u32) -> D {
        if s >= self.s {
            D {
                m: &self.m * pow10(s - self.s),
                s,
            }
        } else {
            D {
                m: &self.m / pow10(self.s - s),
                s,
            }
        }
    }

    fn add(&self, o: &D) -> D {
        let s = self.s.max(o.s);
        D {
            m: self.at(s).m + o.at(s).m,
            s,
        }
    }

    fn sub(&self, o: &D) -> D {
        let s = self.s.max(o.s);
        D {
            m: self.at(s).m - o.at(s).m,
            s,
        }
    }

    fn mul(&self, o: &D, scale: u32) -> D {
        let full = D {
            m: &self.m * &o.m,
            s: self.s + o.s,
        };
        full.at((self.s + o.s).min(scale.max(self.s).max(o.s)))
    }

    fn div(&self, o: &D, scale: u32) -> Result<D, String> {
        if o.is_zero() {
            return Err("Divide by zero".into());
        }
        let num = &self.m * pow10(scale + o.s);
        let den = &o.m * pow10(self.s);
        Ok(D {
            m: num / den,
            s: scale,
        })
    }

    fn rem(&self, o: &D, scale: u32) -> Result<D, String> {
        if o.is_zero() {
            return Err("Modulo by zero".into());
        }
        let q = self.div(o, scale)?;
        let rs = (scale + o.s).max(self.s);
        Ok(self.sub(&q.mul(o, rs)).at(rs))
    }

    fn pow(&self, e: &D, scale: u32) -> Result<D, String> {
        let n = e.at(0).m;
        let neg = n.is_negative();
        let mut k = n.abs().to_u64().ok_or("exponent too large")?;
        let mut base = self.clone();
        let mut acc = D::int(1);
        while k > 0 {
            if k & 1 == 1 {
                acc = D {
                    m: &acc.m * &base.m,
                    s: acc.s + base.s,
                };
            }
            k >>= 1;
            if k > 0 {
                base = D {
                    m: &base.m * &base.m,
                    s: base.s * 2,
                };
            }
        }
        if neg {
            return D::int(1).div(&acc, scale);
        }
        let k = n.to_u64().unwrap_or(0) as u32;
        Ok(acc.at((self.s.saturating_mul(k)).min(scale.max(self.s))))
    }

    fn sqrt(&self, scale: u32) -> Result<D, String> {
        if self.m.is_negative() {
            return Err("Square root of a negative number".into());
        }
        let rs = scale.max(self.s);
        let radicand = &self.m * pow10(2 * rs - self.s);
        Ok(D {
            m: radicand.sqrt(),
            s: rs,
        })
    }

    fn cmp(&self, o: &D) -> std::cmp::Ordering {
        let s = self.s.max(o.s);
        self.at(s).m.cmp(&o.at(s).m)
    }

    fn truthy(&self) -> bool {
        !self.is_zero()
    }

    fn bool(b: bool) -> D {
        D::int(b as i64)
    }

    /// Significant digits (`length`).
    fn length(&self) -> u32 {
        let digits = self.m.abs().to_string();
        if self.m.is_zero() {
            return self.s.max(1);
        }
        (digits.len() as u32).max(self.s)
    }

    fn to_text(&self, obase: u32) -> String {
        let neg = self.m.is_negative();
        let abs = self.m.abs();
        let unit = pow10(self.s);
        let int = &abs / &unit;
        let frac = &abs % &unit;
        let mut out = String::new();
        if neg && !abs.is_zero() {
            out.push('-');
        }
        if obase == 10 {
            if !int.is_zero() || self.s == 0 {
                out.push_str(&int.to_string());
            }
            if self.s > 0 {
                if abs.is_zero() {
                    return "0".into();
                }
                out.push('.');
                out.push_str(&format!("{:0>w$}", frac.to_string(), w = self.s as usize));
            }
            return out;
        }
        let big = obase > 16;
        let digit = |d: u32, out: &mut String| {
            if big {
                let width = (obase - 1).to_string().len();
                out.push_str(&format!(" {d:0width$}"));
            } else {
                out.push(
                    std::char::from_digit(d, obase)
                        .unwrap_or('?')
                        .to_ascii_uppercase(),
                );
            }
        };
        let mut digits = Vec::new();
        let mut n = int.clone();
        let b = BigInt::from(obase);
        while !n.is_zero() {
            digits.push((&n % &b).to_u32().unwrap_or(0));
            n /= &b;
        }
        if digits.is_empty() {
            digits.push(0);
        }
        for d in digits.iter().rev() {
            digit(*d, &mut out);
        }
        if self.s > 0 && !frac.is_zero() {
            out.push('.');
            let mut f = frac;
            let mut precision = BigInt::one();
            while precision < unit {
                f *= &b;
                digit((&f / &unit).to_u32().unwrap_or(0), &mut out);
                f %= &unit;
                precision *= &b;
            }
        }
        out
    }
}

// -- lexing and parsing ---------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(String),
    Name(String),
    Str(String),
    Op(&'static str),
    /// A newline or `;`.
    End,
}

const OPS: &[&str] = &[
    "++", "--", "+=", "-=", "*=", "/=", "%=", "^=", "==", "!=", "<=", ">=", "&&", "||", "+", "-",
    "*", "/", "%", "^", "=", "<", ">", "!", "(", ")", "{", "}", "[", "]", ",",
];

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, (String, usize)> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            out.push((Tok::End, line));
            line += 1;
            i += 1;
        } else if c == ';' {
            out.push((Tok::End, line));
            i += 1;
        } else if c == '\\' && chars.get(i + 1) == Some(&'\n') {
            i += 2;
            line += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 2;
        } else if c == '"' {
            let start = i + 1;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            out.push((
                Tok::Str(chars[start..i.min(chars.len())].iter().collect()),
                line,
            ));
            i += 1;
        } else if c.is_ascii_digit() || c.is_ascii_uppercase() || c == '.' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit() || chars[i].is_ascii_uppercase() || chars[i] == '.')
            {
                i += 1;
            }
            out.push((Tok::Num(chars[start..i].iter().collect()), line));
        } else if c.is_ascii_lowercase() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_lowercase() || chars[i].is_ascii_digit() || chars[i] == '_')
            {
                i += 1;
            }
            out.push((Tok::Name(chars[start..i].iter().collect()), line));
        } else {
            let rest: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            match OPS.iter().find(|op| rest.starts_with(**op)) {
                Some(op) => {
                    out.push((Tok::Op(op), line));
                    i += op.len();
                }
                None => return Err((format!("illegal character: {c}"), line)),
            }
        }
    }
    out.push((Tok::End, line));
    Ok(out)
}

#[derive(Clone, Debug)]
enum Lv {
    Var(String),
    Elem(String, Box<E>),
}

#[derive(Clone, Debug)]
enum E {
    Num(String),
    Load(Lv),
    Assign(Lv, Option<&'static str>, Box<E>),
    IncDec(Lv, bool, bool),
    Neg(Box<E>),
    Not(Box<E>),
    Bin(&'static str, Box<E>, Box<E>),
    Call(String, Vec<E>),
}

#[derive(Clone, Debug)]
enum S {
    Expr(E),
    Str(String),
    Print(Vec<Result<E, String>>),
    If(E, Box<S>, Option<Box<S>>),
    While(E, Box<S>),
    For(Option<E>, Option<E>, Option<E>, Box<S>),
    Block(Vec<S>),
    Break,
    Continue,
    Return(Option<E>),
    Quit,
    Define(String, Vec<String>, Vec<String>, Vec<S>),
    Empty,
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
}

type PResult<T> = Result<T, usize>;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos.min(self.toks.len() - 1)].0
    }
    fn line(&self) -> usize {
        self.toks[self.pos.min(self.toks.len() - 1)].1
    }
    fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        self.pos += 1;
        t
    }
    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Tok::Op(o) if *o == op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, op: &str) -> PResult<()> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(self.line())
        }
    }
    fn skip_ends(&mut self) {
        while *self.peek() == Tok::End && self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
    }
    fn at_eof(&self) -> bool {
        self.pos >= self.toks.len() - 1
    }

    fn statement(&mut self) -> PResult<S> {
        let t = self.peek().clone();
        match t {
            Tok::End => {
                self.bump();
                Ok(S::Empty)
            }
            Tok::Str(s) => {
                self.bump();
                Ok(S::Str(s))
            }
            Tok::Op("{") => {
                self.bump();
                let mut body = Vec::new();
                loop {
                    self.skip_ends();
                    if self.eat("}") {
                        break;
                    }
                    if self.at_eof() {
                        return Err(self.line());
                    }
                    body.push(self.statement()?);
                }
                Ok(S::Block(body))
            }
            Tok::Name(n) => match n.as_str() {
                "if" => {
                    self.bump();
                    self.expect("(")?;
                    let c = self.expr()?;
                    self.expect(")")?;
                    self.skip_ends();
                    let then = self.statement()?;
                    let save = self.pos;
                    self.skip_ends();
                    if matches!(self.peek(), Tok::Name(e) if e == "else") {
                        self.bump();
                        self.skip_ends();
                        let other = self.statement()?;
                        return Ok(S::If(c, Box::new(then), Some(Box::new(other))));
                    }
                    self.pos = save;
                    Ok(S::If(c, Box::new(then), None))
                }
                "while" => {
                    self.bump();
                    self.expect("(")?;
                    let c = self.expr()?;
                    self.expect(")")?;
                    self.skip_ends();
                    Ok(S::While(c, Box::new(self.statement()?)))
                }
                "for" => {
                    self.bump();
                    self.expect("(")?;
                    let part = |p: &mut Parser, end: &str| -> PResult<Option<E>> {
                        if p.eat(end)
                            || (end == ";" && *p.peek() == Tok::End && {
                                p.bump();
                                true
                            })
                        {
                            return Ok(None);
                        }
                        let e = p.expr()?;
                        if end == ";" {
                            if *p.peek() != Tok::End {
                                return Err(p.line());
                            }
                            p.bump();
                        } else {
                            p.expect(end)?;
                        }
                        Ok(Some(e))
                    };
                    let a = part(self, ";")?;
                    let b = part(self, ";")?;
                    let c = part(self, ")")?;
                    self.skip_ends();
                    Ok(S::For(a, b, c, Box::new(self.statement()?)))
                }
                "break" => {
                    self.bump();
                    Ok(S::Break)
                }
                "continue" => {
                    self.bump();
                    Ok(S::Continue)
                }
                "quit" | "halt" => {
                    self.bump();
                    Ok(S::Quit)
                }
                "return" => {
                    self.bump();
                    if self.eat("(") {
                        if self.eat(")") {
                            return Ok(S::Return(None));
                        }
                        let e = self.expr()?;
                        self.expect(")")?;
                        return Ok(S::Return(Some(e)));
                    }
                    if matches!(self.peek(), Tok::End | Tok::Op("}")) {
                        return Ok(S::Return(None));
                    }
                    Ok(S::Return(Some(self.expr()?)))
                }
                "print" => {
                    self.bump();
                    let mut items = Vec::new();
                    loop {
                        match self.peek().clone() {
                            Tok::Str(s) => {
                                self.bump();
                                items.push(Err(s));
                            }
                            _ => items.push(Ok(self.expr()?)),
                        }
                        if !self.eat(",") {
                            break;
                        }
                    }
                    Ok(S::Print(items))
                }
                "define" => {
                    self.bump();
                    let Tok::Name(name) = self.bump() else {
                        return Err(self.line());
                    };
                    self.expect("(")?;
                    let mut params = Vec::new();
                    while let Tok::Name(p) = self.peek().clone() {
                        self.bump();
                        if self.eat("[") {
                            self.expect("]")?;
                        }
                        params.push(p);
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.expect(")")?;
                    self.skip_ends();
                    self.expect("{")?;
                    let mut autos = Vec::new();
                    let mut body = Vec::new();
                    loop {
                        self.skip_ends();
                        if self.eat("}") {
                            break;
                        }
                        if self.at_eof() {
                            return Err(self.line());
                        }
                        if matches!(self.peek(), Tok::Name(a) if a == "auto") {
                            self.bump();
                            while let Tok::Name(a) = self.peek().clone() {
                                self.bump();
                                if self.eat("[") {
                                    self.expect("]")?;
                                }
                                autos.push(a);
                                if !self.eat(",") {
                                    break;
                                }
                            }
                            continue;
                        }
                        body.push(self.statement()?);
                    }
                    Ok(S::Define(name, params, autos, body))
                }
                _ => Ok(S::Expr(self.expr()?)),
            },
            _ => Ok(S::Expr(self.expr()?)),
        }
    }

    fn expr(&mut self) -> PResult<E> {
        self.or()
    }

    fn or(&mut self) -> PResult<E> {
        let mut l = self.and()?;
        while self.eat("||") {
            l = E::Bin("||", Box::new(l), Box::new(self.and()?));
        }
        Ok(l)
    }

    fn and(&mut self) -> PResult<E> {
        let mut l = self.not()?;
        while self.eat("&&") {
            l = E::Bin("&&", Box::new(l), Box::new(self.not()?));
        }
        Ok(l)
    }

    fn not(&mut self) -> PResult<E> {
        if self.eat("!") {
            return Ok(E::Not(Box::new(self.not()?)));
        }
        self.rel()
    }

    fn rel(&mut self) -> PResult<E> {
        let l = self.assign()?;
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if self.eat(op) {
                return Ok(E::Bin(op, Box::new(l), Box::new(self.assign()?)));
            }
        }
        Ok(l)
    }

    fn assign(&mut self) -> PResult<E> {
        let save = self.pos;
        if let Ok(lv) = self.lvalue() {
            for (op, bin) in [
                ("=", None),
                ("+=", Some("+")),
                ("-=", Some("-")),
                ("*=", Some("*")),
                ("/=", Some("/")),
                ("%=", Some("%")),
                ("^=", Some("^")),
            ] {
                if self.eat(op) {
                    return Ok(E::Assign(lv, bin, Box::new(self.assign()?)));
                }
            }
        }
        self.pos = save;
        self.add()
    }

    fn lvalue(&mut self) -> PResult<Lv> {
        let Tok::Name(n) = self.peek().clone() else {
            return Err(self.line());
        };
        if matches!(
            n.as_str(),
            "if" | "while"
                | "for"
                | "define"
                | "return"
                | "print"
                | "quit"
                | "auto"
                | "else"
                | "break"
                | "continue"
                | "halt"
                | "length"
                | "sqrt"
                | "read"
        ) {
            return Err(self.line());
        }
        self.bump();
        if matches!(self.peek(), Tok::Op("(")) {
            return Err(self.line());
        }
        if self.eat("[") {
            let i = self.expr()?;
            self.expect("]")?;
            return Ok(Lv::Elem(n, Box::new(i)));
        }
        Ok(Lv::Var(n))
    }

    fn add(&mut self) -> PResult<E> {
        let mut l = self.mul()?;
        loop {
            if self.eat("+") {
                l = E::Bin("+", Box::new(l), Box::new(self.mul()?));
            } else if self.eat("-") {
                l = E::Bin("-", Box::new(l), Box::new(self.mul()?));
            } else {
                return Ok(l);
            }
        }
    }

    fn mul(&mut self) -> PResult<E> {
        let mut l = self.unary()?;
        loop {
            let op = if self.eat("*") {
                "*"
            } else if self.eat("/") {
                "/"
            } else if self.eat("%") {
                "%"
            } else {
                return Ok(l);
            };
            l = E::Bin(op, Box::new(l), Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> PResult<E> {
        if self.eat("-") {
            return Ok(E::Neg(Box::new(self.unary()?)));
        }
        self.power()
    }

    fn power(&mut self) -> PResult<E> {
        let base = self.postfix()?;
        if self.eat("^") {
            // Right associative, binding tighter than unary minus on its right.
            let e = self.unary()?;
            return Ok(E::Bin("^", Box::new(base), Box::new(e)));
        }
        Ok(base)
    }

    fn postfix(&mut self) -> PResult<E> {
        if self.eat("++") {
            return Ok(E::IncDec(self.lvalue()?, true, true));
        }
        if self.eat("--") {
            return Ok(E::IncDec(self.lvalue()?, false, true));
        }
        let save = self.pos;
        if let Ok(lv) = self.lvalue() {
            if self.eat("++") {
                return Ok(E::IncDec(lv, true, false));
            }
            if self.eat("--") {
                return Ok(E::IncDec(lv, false, false));
            }
            return Ok(E::Load(lv));
        }
        self.pos = save;
        match self.bump() {
            Tok::Num(n) => Ok(E::Num(n)),
            Tok::Op("(") => {
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Name(n) => {
                self.expect("(")?;
                let mut args = Vec::new();
                if !self.eat(")") {
                    loop {
                        args.push(self.expr()?);
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.expect(")")?;
                }
                Ok(E::Call(n, args))
            }
            _ => Err(self.line()),
        }
    }
}

// -- evaluation ---------------------------------------------------------------------------

enum Flow {
    Normal,
    Break,
    Continue,
    Return(D),
    Quit,
}

struct Func {
    params: Vec<String>,
    autos: Vec<String>,
    body: Vec<S>,
}

struct Bc {
    vars: Vec<HashMap<String, D>>,
    arrays: HashMap<String, HashMap<i64, D>>,
    funcs: HashMap<String, std::rc::Rc<Func>>,
    scale: u32,
    ibase: u32,
    obase: u32,
    last: D,
    out: Vec<u8>,
    mathlib: bool,
}

impl Bc {
    fn get(&self, name: &str) -> D {
        match name {
            "scale" => D::int(self.scale as i64),
            "ibase" => D::int(self.ibase as i64),
            "obase" => D::int(self.obase as i64),
            "last" => self.last.clone(),
            _ => self
                .vars
                .iter()
                .rev()
                .find_map(|f| f.get(name).cloned())
                .unwrap_or_else(D::zero),
        }
    }

    fn set(&mut self, name: &str, v: D) -> Result<(), String> {
        let int = || v.at(0).m.to_i64().unwrap_or(-1);
        match name {
            "scale" => {
                let n = int();
                if !(0..=10_000).contains(&n) {
                    return Err("Scale must be between 0 and 10000".into());
                }
                self.scale = n as u32;
            }
            "ibase" => {
                let n = int();
                self.ibase = n.clamp(2, 16) as u32;
            }
            "obase" => {
                let n = int();
                if n < 2 {
                    return Err("Invalid output base".into());
                }
                self.obase = n.min(999) as u32;
            }
            "last" => self.last = v,
            _ => match self.vars.iter().rposition(|f| f.contains_key(name)) {
                Some(idx) => {
                    self.vars[idx].insert(name.to_string(), v);
                }
                None => {
                    self.vars[0].insert(name.to_string(), v);
                }
            },
        }
        Ok(())
    }

    fn load(&mut self, lv: &Lv) -> Result<D, String> {
        match lv {
            Lv::Var(n) => Ok(self.get(n)),
            Lv::Elem(n, i) => {
                let i = self.eval(i)?.at(0).m.to_i64().unwrap_or(0);
                Ok(self
                    .arrays
                    .get(n)
                    .and_then(|a| a.get(&i))
                    .cloned()
                    .unwrap_or_else(D::zero))
            }
        }
    }

    fn store(&mut self, lv: &Lv, v: D) -> Result<(), String> {
        match lv {
            Lv::Var(n) => self.set(n, v),
            Lv::Elem(n, i) => {
                let i = self.eval(i)?.at(0).m.to_i64().unwrap_or(0);
                if !(0..=16_777_215).contains(&i) {
                    return Err("Array index out of range".into());
                }
                self.arrays.entry(n.clone()).or_default().insert(i, v);
                Ok(())
            }
        }
    }

    fn number(&self, text: &str) -> D {
        if self.ibase == 10 && text.chars().all(|c| c.is_ascii_digit() || c == '.') {
            let (int, frac) = text.split_once('.').unwrap_or((text, ""));
            let digits = format!("{int}{frac}");
            let m = if digits.is_empty() {
                BigInt::zero()
            } else {
                digits.parse().unwrap_or_default()
            };
            return D {
                m,
                s: frac.len() as u32,
            };
        }
        // Other bases: each digit (0-9, A-F) is worth its value even past the base, as in
        // bc; a single digit is read as hexadecimal whatever the base.
        let base = if text.len() == 1 { 16 } else { self.ibase };
        let (int, frac) = text.split_once('.').unwrap_or((text, ""));
        let mut m = BigInt::zero();
        for c in int.chars() {
            m = m * base + c.to_digit(16).unwrap_or(0);
        }
        let mut v = D { m, s: 0 };
        if !frac.is_empty() {
            let mut f = D::zero();
            let mut div = D::int(1);
            let s = frac.len() as u32;
            for c in frac.chars() {
                div = div.mul(&D::int(base as i64), 0);
                let digit = D::int(c.to_digit(16).unwrap_or(0) as i64);
                f = f.add(&digit.div(&div, s + 2).unwrap_or_else(|_| D::zero()));
            }
            v = v.add(&f.at(s));
        }
        v
    }

    fn eval(&mut self, e: &E) -> Result<D, String> {
        let scale = self.scale;
        Ok(match e {
            E::Num(t) => self.number(t),
            E::Load(lv) => self.load(lv)?,
            E::Assign(lv, op, x) => {
                let v = self.eval(x)?;
                let v = match op {
                    None => v,
                    Some(op) => {
                        let cur = self.load(lv)?;
                        self.binary(op, &cur, &v)?
                    }
                };
                self.store(lv, v.clone())?;
                v
            }
            E::IncDec(lv, inc, prefix) => {
                let cur = self.load(lv)?;
                let one = D::int(1);
                let new = if *inc { cur.add(&one) } else { cur.sub(&one) };
                self.store(lv, new.clone())?;
                if *prefix { new } else { cur }
            }
            E::Neg(x) => {
                let v = self.eval(x)?;
                D { m: -v.m, s: v.s }
            }
            E::Not(x) => D::bool(!self.eval(x)?.truthy()),
            E::Bin("&&", a, b) => D::bool(self.eval(a)?.truthy() && self.eval(b)?.truthy()),
            E::Bin("||", a, b) => D::bool(self.eval(a)?.truthy() || self.eval(b)?.truthy()),
            E::Bin(op, a, b) => {
                let x = self.eval(a)?;
                let y = self.eval(b)?;
                self.binary(op, &x, &y)?
            }
            E::Call(name, args) => self.call(name, args, scale)?,
        })
    }

    fn binary(&self, op: &str, x: &D, y: &D) -> Result<D, String> {
        use std::cmp::Ordering::*;
        let scale = self.scale;
        Ok(match op {
            "+" => x.add(y),
            "-" => x.sub(y),
            "*" => x.mul(y, scale),
            "/" => x.div(y, scale)?,
            "%" => x.rem(y, scale)?,
            "^" => x.pow(y, scale)?,
            "==" => D::bool(x.cmp(y) == Equal),
            "!=" => D::bool(x.cmp(y) != Equal),
            "<" => D::bool(x.cmp(y) == Less),
            "<=" => D::bool(x.cmp(y) != Greater),
            ">" => D::bool(x.cmp(y) == Greater),
            ">=" => D::bool(x.cmp(y) != Less),
            _ => return Err(format!("unknown operator {op}")),
        })
    }

    fn call(&mut self, name: &str, args: &[E], scale: u32) -> Result<D, String> {
        let mut vals = Vec::new();
        for a in args {
            vals.push(self.eval(a)?);
        }
        let one = |v: &[D]| -> Result<D, String> {
            v.first()
                .cloned()
                .ok_or_else(|| format!("Parameter number mismatch in {name}"))
        };
        match name {
            "sqrt" => return one(&vals)?.sqrt(scale),
            "length" => return Ok(D::int(one(&vals)?.length() as i64)),
            "scale" => return Ok(D::int(one(&vals)?.s as i64)),
            _ => {}
        }
        if let Some(f) = self.funcs.get(name).cloned() {
            if f.params.len() != vals.len() {
                return Err(format!("Parameter number mismatch in {name}"));
            }
            let mut frame = HashMap::new();
            for (p, v) in f.params.iter().zip(vals) {
                frame.insert(p.clone(), v);
            }
            for a in &f.autos {
                frame.insert(a.clone(), D::zero());
            }
            if self.vars.len() > 1000 {
                return Err("Function call nesting too deep".into());
            }
            self.vars.push(frame);
            let mut result = D::zero();
            for s in &f.body {
                match self.exec(s) {
                    Ok(Flow::Return(v)) => {
                        result = v;
                        break;
                    }
                    Ok(Flow::Quit) => {
                        self.vars.pop();
                        return Err("\u{0}quit".into());
                    }
                    Ok(_) => {}
                    Err(e) => {
                        self.vars.pop();
                        return Err(e);
                    }
                }
            }
            self.vars.pop();
            return Ok(result);
        }
        let x = || one(&vals);
        let w = scale + 10;
        let r = match name {
            "e" if self.mathlib => exp(&x()?, w)?,
            "l" if self.mathlib => ln(&x()?, w)?,
            "s" if self.mathlib => sin(&x()?, w)?,
            "c" if self.mathlib => {
                let half_pi = atan(&D::int(1), w)?.mul(&D::int(2), w);
                sin(&x()?.add(&half_pi), w)?
            }
            "a" if self.mathlib => atan(&x()?, w)?,
            _ => return Err(format!("Function {name} not defined.")),
        };
        Ok(r.at(scale))
    }

    fn exec(&mut self, s: &S) -> Result<Flow, String> {
        match s {
            S::Empty => {}
            S::Expr(e) => {
                let v = self.eval(e)?;
                if !matches!(e, E::Assign(..)) {
                    let text = v.to_text(self.obase);
                    self.emit_number(&text);
                    self.out.push(b'\n');
                    self.last = v;
                }
            }
            S::Str(t) => self.out.extend_from_slice(unescape(t, false).as_bytes()),
            S::Print(items) => {
                for i in items {
                    match i {
                        Err(t) => self.out.extend_from_slice(unescape(t, true).as_bytes()),
                        Ok(e) => {
                            let v = self.eval(e)?;
                            let text = v.to_text(self.obase);
                            self.emit_number(&text);
                            self.last = v;
                        }
                    }
                }
            }
            S::If(c, then, other) => {
                if self.eval(c)?.truthy() {
                    return self.exec(then);
                } else if let Some(o) = other {
                    return self.exec(o);
                }
            }
            S::While(c, body) => return self.run_loop(Some(c), None, body),
            S::For(init, c, step, body) => {
                if let Some(init) = init {
                    self.eval(init)?;
                }
                return self.run_loop(c.as_ref(), step.as_ref(), body);
            }
            S::Block(list) => {
                for s in list {
                    match self.exec(s)? {
                        Flow::Normal => {}
                        other => return Ok(other),
                    }
                }
            }
            S::Break => return Ok(Flow::Break),
            S::Continue => return Ok(Flow::Continue),
            S::Return(e) => {
                let v = match e {
                    Some(e) => self.eval(e)?,
                    None => D::zero(),
                };
                return Ok(Flow::Return(v));
            }
            S::Quit => return Ok(Flow::Quit),
            S::Define(name, params, autos, body) => {
                self.funcs.insert(
                    name.clone(),
                    std::rc::Rc::new(Func {
                        params: params.clone(),
                        autos: autos.clone(),
                        body: body.clone(),
                    }),
                );
            }
        }
        Ok(Flow::Normal)
    }

    /// `while` and `for`: the body while the condition holds (always without one), then the
    /// step; `break` ends the loop, `return` and `quit` leave it. A loop is cut off after
    /// 100,000,000 rounds.
    fn run_loop(&mut self, cond: Option<&E>, step: Option<&E>, body: &S) -> Result<Flow, String> {
        for _ in 0..100_000_000u64 {
            if let Some(c) = cond
                && !self.eval(c)?.truthy()
            {
                return Ok(Flow::Normal);
            }
            match self.exec(body)? {
                Flow::Break => return Ok(Flow::Normal),
                Flow::Return(v) => return Ok(Flow::Return(v)),
                Flow::Quit => return Ok(Flow::Quit),
                Flow::Normal | Flow::Continue => {}
            }
            if let Some(step) = step {
                self.eval(step)?;
            }
        }
        Err("loop limit reached".into())
    }

    /// Numbers longer than a line are split with `\` to lines of 70 characters, as bc does.
    fn emit_number(&mut self, text: &str) {
        let chars: Vec<char> = text.chars().collect();
        let mut col = 0;
        for c in chars {
            if col == 68 {
                self.out.extend_from_slice(b"\\\n");
                col = 0;
            }
            let mut b = [0u8; 4];
            self.out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            col += 1;
        }
    }
}

fn unescape(s: &str, escapes: bool) -> String {
    if !escapes {
        return s.to_string();
    }
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('f') => out.push('\x0c'),
            Some('r') => out.push('\r'),
            Some('q') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

// -- the math library (-l), computed with guard digits, truncated by the caller ------------

fn exp(x: &D, w: u32) -> Result<D, String> {
    if x.m.is_negative() {
        let p = exp(
            &D {
                m: -x.m.clone(),
                s: x.s,
            },
            w,
        )?;
        return D::int(1).div(&p, w);
    }
    // Halve until below 1, sum the series, square back.
    let mut k = 0;
    let mut y = x.at(w);
    let one = D::int(1);
    while y.cmp(&one) == std::cmp::Ordering::Greater {
        y = y.div(&D::int(2), w)?;
        k += 1;
    }
    let mut sum = D::int(1).at(w);
    let mut term = D::int(1).at(w);
    let mut n = 1;
    loop {
        term = term.mul(&y, w).div(&D::int(n), w)?;
        if term.is_zero() {
            break;
        }
        sum = sum.add(&term);
        n += 1;
    }
    for _ in 0..k {
        sum = sum.mul(&sum, w);
    }
    Ok(sum)
}

fn ln(x: &D, w: u32) -> Result<D, String> {
    if !x.m.is_positive() {
        return Err("Math error: l of a non-positive number".into());
    }
    // Square roots bring x near 1; ln x = 2^k * 2 atanh((x-1)/(x+1)).
    let mut k = 0u32;
    let mut y = x.at(w);
    let two = D::int(2);
    let half = D {
        m: BigInt::from(5),
        s: 1,
    };
    while y.cmp(&two) == std::cmp::Ordering::Greater || y.cmp(&half) == std::cmp::Ordering::Less {
        y = y.sqrt(w)?;
        k += 1;
    }
    let z = y.sub(&D::int(1)).div(&y.add(&D::int(1)), w)?;
    let z2 = z.mul(&z, w);
    let mut term = z.clone();
    let mut sum = z.clone();
    let mut n = 3;
    loop {
        term = term.mul(&z2, w);
        let t = term.div(&D::int(n), w)?;
        if t.is_zero() {
            break;
        }
        sum = sum.add(&t);
        n += 2;
    }
    let factor = D {
        m: BigInt::from(2u32).pow(k + 1),
        s: 0,
    };
    Ok(sum.mul(&factor, w))
}

fn atan(x: &D, w: u32) -> Result<D, String> {
    if x.m.is_negative() {
        let r = atan(
            &D {
                m: -x.m.clone(),
                s: x.s,
            },
            w,
        )?;
        return Ok(D { m: -r.m, s: r.s });
    }
    // atan x = 2 atan(x / (1 + sqrt(1 + x^2))) until x is small, then the series.
    let mut y = x.at(w);
    let mut k = 0u32;
    let limit = D {
        m: BigInt::from(2),
        s: 1,
    };
    while y.cmp(&limit) == std::cmp::Ordering::Greater {
        let r = D::int(1).add(&y.mul(&y, w)).sqrt(w)?;
        y = y.div(&D::int(1).add(&r), w)?;
        k += 1;
    }
    let y2 = y.mul(&y, w);
    let mut term = y.clone();
    let mut sum = y.clone();
    let mut n = 3;
    let mut neg = true;
    loop {
        term = term.mul(&y2, w);
        let t = term.div(&D::int(n), w)?;
        if t.is_zero() {
            break;
        }
        sum = if neg { sum.sub(&t) } else { sum.add(&t) };
        neg = !neg;
        n += 2;
    }
    Ok(sum.mul(
        &D {
            m: BigInt::from(2u32).pow(k),
            s: 0,
        },
        w,
    ))
}

fn sin(x: &D, w: u32) -> Result<D, String> {
    // Reduce by whole turns, then the series.
    let pi = atan(&D::int(1), w + 5)?.mul(&D::int(4), w + 5);
    let turn = pi.mul(&D::int(2), w + 5);
    let turns = x.div(&turn, 0)?;
    let y = x.at(w + 5).sub(&turns.mul(&turn, w + 5));
    let y2 = y.mul(&y, w + 5);
    let mut term = y.clone();
    let mut sum = y.clone();
    let mut n = 1i64;
    loop {
        term = term
            .mul(&y2, w + 5)
            .div(&D::int((n + 1) * (n + 2)), w + 5)?;
        term.m = -term.m;
        if term.is_zero() {
            break;
        }
        sum = sum.add(&term);
        n += 2;
    }
    Ok(sum.at(w))
}

// -- the command ----------------------------------------------------------------------------

impl Bc {
    fn new(mathlib: bool) -> Bc {
        Bc {
            vars: vec![HashMap::new()],
            arrays: HashMap::new(),
            funcs: HashMap::new(),
            scale: if mathlib { 20 } else { 0 },
            ibase: 10,
            obase: 10,
            last: D::zero(),
            out: Vec::new(),
            mathlib,
        }
    }
}

pub fn main(args: Vec<String>) -> i32 {
    let mut mathlib = false;
    let mut files = Vec::new();
    for a in &args[1..] {
        match a.as_str() {
            "-l" | "--mathlib" => mathlib = true,
            "-q" | "--quiet" | "-s" | "--standard" | "-w" | "--warn" => {}
            "-h" | "--help" => {
                println!(
                    "usage: bc [options] [file ...]\n  -l  --mathlib  use the predefined math routines\n  -q  --quiet    don't print initial banner"
                );
                return 0;
            }
            "-v" | "--version" => {
                println!("bc 1.07.1 (wasbox)");
                return 0;
            }
            f if f.starts_with('-') && f.len() > 1 => {
                eprintln!("bc: invalid option -- '{}'", &f[1..]);
                return 1;
            }
            f => files.push(f.to_string()),
        }
    }
    let mut bc = Bc::new(mathlib);
    let mut sources: Vec<(String, String)> = Vec::new();
    for f in &files {
        match std::fs::read_to_string(f) {
            Ok(t) => sources.push((f.clone(), t)),
            Err(e) => {
                eprintln!("File {f} is unavailable.");
                let _ = e;
                return 1;
            }
        }
    }
    let mut stdin = String::new();
    let _ = std::io::stdin().read_to_string(&mut stdin);
    sources.push(("(standard_in)".into(), stdin));
    let mut status = 0;
    for (name, text) in sources {
        let toks = match lex(&text) {
            Ok(t) => t,
            Err((msg, line)) => {
                let _ = std::io::stdout().write_all(&bc.out);
                eprintln!("{name} {line}: {msg}");
                return 1;
            }
        };
        let mut p = Parser { toks, pos: 0 };
        while !p.at_eof() {
            let start = p.pos;
            let stmt = p.statement();
            let stmt = match stmt {
                Ok(s) => {
                    // A statement ends at a newline, `;` or the end of input.
                    if !matches!(p.peek(), Tok::End) && !p.at_eof() && !matches!(s, S::Empty) {
                        Err(p.line())
                    } else {
                        Ok(s)
                    }
                }
                Err(l) => Err(l),
            };
            match stmt {
                Ok(s) => match bc.exec(&s) {
                    Ok(Flow::Quit) => {
                        let _ = std::io::stdout().write_all(&bc.out);
                        return status;
                    }
                    Ok(_) => {}
                    Err(e) if e == "\u{0}quit" => {
                        let _ = std::io::stdout().write_all(&bc.out);
                        return status;
                    }
                    Err(e) => {
                        let _ = std::io::stdout().write_all(&bc.out);
                        bc.out.clear();
                        let _ = std::io::stdout().flush();
                        eprintln!("Runtime error (func=(main), adr=0): {e}");
                    }
                },
                Err(line) => {
                    let _ = std::io::stdout().write_all(&bc.out);
                    bc.out.clear();
                    let _ = std::io::stdout().flush();
                    eprintln!("{name} {line}: syntax error");
                    status = 1;
                    // Skip to the end of the line.
                    if p.pos == start {
                        p.pos += 1;
                    }
                    while !p.at_eof() && *p.peek() != Tok::End {
                        p.pos += 1;
                    }
                }
            }
            if bc.out.len() > 1 << 16 {
                if std::io::stdout().write_all(&bc.out).is_err() {
                    return 1;
                }
                bc.out.clear();
            }
        }
    }
    let _ = std::io::stdout().write_all(&bc.out);
    // bc leaves with status 0 after reporting errors in its input, as GNU bc does.
    let _ = status;
    0
}
