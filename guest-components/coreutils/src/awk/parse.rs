//! The awk grammar (POSIX, with the usual extensions: `**`, `nextfile`, `delete ARRAY`,
//! `length ARRAY`, `func`) into a tree the interpreter walks.

use std::collections::HashMap;

use super::lex::{Lexed, Tok};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CmpOp {
    Lt,
    Le,
    Eq,
    Ne,
    Gt,
    Ge,
}

#[derive(Debug)]
pub enum GetSrc {
    Main,
    File(Box<Expr>),
    Cmd(Box<Expr>),
}

#[derive(Debug)]
pub enum Expr {
    Num(f64),
    Str(String),
    /// A regular expression literal: `$0 ~ /re/` where a value is wanted.
    Regex(String),
    Field(Box<Expr>),
    Var(String),
    Index(String, Vec<Expr>),
    Assign(Option<BinOp>, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Plus(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    Match(bool, Box<Expr>, Box<Expr>),
    Concat(Box<Expr>, Box<Expr>),
    In(Vec<Expr>, String),
    IncDec(bool, f64, Box<Expr>),
    Call(String, Vec<Expr>),
    Builtin(String, Vec<Expr>),
    Getline(Option<Box<Expr>>, GetSrc),
    Group(Box<Expr>),
}

#[derive(Debug)]
pub enum Redirect {
    File(Expr),
    Append(Expr),
    Pipe(Expr),
}

#[derive(Debug)]
pub enum Stmt {
    Expr(Expr),
    Print(Vec<Expr>, Option<Redirect>),
    Printf(Vec<Expr>, Option<Redirect>),
    If(Expr, Box<Stmt>, Option<Box<Stmt>>),
    While(Expr, Box<Stmt>),
    Do(Box<Stmt>, Expr),
    For(
        Option<Box<Stmt>>,
        Option<Expr>,
        Option<Box<Stmt>>,
        Box<Stmt>,
    ),
    ForIn(String, String, Box<Stmt>),
    Block(Vec<Stmt>),
    Next,
    NextFile,
    Exit(Option<Expr>),
    Return(Option<Expr>),
    Break,
    Continue,
    Delete(String, Option<Vec<Expr>>),
}

pub enum Pattern {
    All,
    Expr(Expr),
    Range(Expr, Expr),
}

pub struct Rule {
    pub pattern: Pattern,
    /// `None`: print the record.
    pub action: Option<Vec<Stmt>>,
}

pub struct Func {
    pub params: Vec<String>,
    pub body: Vec<Stmt>,
}

#[derive(Default)]
pub struct Program {
    pub begin: Vec<Vec<Stmt>>,
    pub end: Vec<Vec<Stmt>>,
    pub rules: Vec<Rule>,
    pub funcs: HashMap<String, Func>,
}

struct Parser {
    toks: Vec<Tok>,
    lines: Vec<usize>,
    pos: usize,
    /// Inside the argument list of `print`/`printf`: `>` redirects, `|` pipes.
    in_print: bool,
    /// In the first clause of a `for`: `in` is not an operator.
    no_in: bool,
}

type PResult<T> = Result<T, String>;

pub fn parse(lexed: Lexed) -> PResult<Program> {
    let mut p = Parser {
        toks: lexed.toks,
        lines: lexed.lines,
        pos: 0,
        in_print: false,
        no_in: false,
    };
    p.program()
}

fn is_lvalue(e: &Expr) -> bool {
    matches!(e, Expr::Var(_) | Expr::Index(..) | Expr::Field(_))
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos]
    }

    fn peek_at(&self, n: usize) -> &Tok {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)]
    }

    fn next(&mut self) -> Tok {
        let t = self.toks[self.pos].clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn is(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }

    fn is_kw(&self, k: &str) -> bool {
        matches!(self.peek(), Tok::Keyword(q) if *q == k)
    }

    fn eat(&mut self, p: &str) -> bool {
        if self.is(p) {
            self.next();
            true
        } else {
            false
        }
    }

    fn err<T>(&self, what: &str) -> PResult<T> {
        let near = match self.peek() {
            Tok::Eof => "end of program".to_string(),
            Tok::Newline => "newline".to_string(),
            Tok::Num(n) => n.to_string(),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Ere(r) => format!("/{r}/"),
            Tok::Name(n) | Tok::FuncName(n) | Tok::Builtin(n) => n.clone(),
            Tok::Keyword(k) | Tok::Punct(k) => k.to_string(),
        };
        Err(format!(
            "syntax error at source line {}: {what} near {near}",
            self.lines[self.pos]
        ))
    }

    fn expect(&mut self, p: &str) -> PResult<()> {
        if self.eat(p) {
            Ok(())
        } else {
            self.err(&format!("expected '{p}'"))
        }
    }

    fn newlines(&mut self) {
        while matches!(self.peek(), Tok::Newline) {
            self.next();
        }
    }

    fn terminators(&mut self) {
        while matches!(self.peek(), Tok::Newline | Tok::Punct(";")) {
            self.next();
        }
    }

    fn program(&mut self) -> PResult<Program> {
        let mut prog = Program::default();
        self.terminators();
        while !matches!(self.peek(), Tok::Eof) {
            if self.is_kw("BEGIN") {
                self.next();
                self.newlines();
                prog.begin.push(self.block()?);
            } else if self.is_kw("END") {
                self.next();
                self.newlines();
                prog.end.push(self.block()?);
            } else if self.is_kw("function") {
                self.next();
                let name = match self.next() {
                    Tok::Name(n) | Tok::FuncName(n) => n,
                    _ => return self.err("expected a function name"),
                };
                self.expect("(")?;
                let mut params = Vec::new();
                while !self.is(")") {
                    match self.next() {
                        Tok::Name(n) => params.push(n),
                        _ => return self.err("expected a parameter name"),
                    }
                    if !self.eat(",") {
                        break;
                    }
                    self.newlines();
                }
                self.expect(")")?;
                self.newlines();
                let body = self.block()?;
                if prog
                    .funcs
                    .insert(name.clone(), Func { params, body })
                    .is_some()
                {
                    return Err(format!("function `{name}' previously defined"));
                }
            } else {
                let pattern = if self.is("{") {
                    Pattern::All
                } else {
                    let first = self.expr()?;
                    if self.eat(",") {
                        self.newlines();
                        Pattern::Range(first, self.expr()?)
                    } else {
                        Pattern::Expr(first)
                    }
                };
                let action = if self.is("{") {
                    Some(self.block()?)
                } else {
                    None
                };
                prog.rules.push(Rule { pattern, action });
            }
            let after_block = matches!(self.toks[self.pos - 1], Tok::Punct("}"));
            if !after_block && !matches!(self.peek(), Tok::Newline | Tok::Punct(";") | Tok::Eof) {
                return self.err("expected a newline or ';'");
            }
            self.terminators();
        }
        Ok(prog)
    }

    fn block(&mut self) -> PResult<Vec<Stmt>> {
        self.expect("{")?;
        let mut stmts = Vec::new();
        self.terminators();
        while !self.is("}") {
            if matches!(self.peek(), Tok::Eof) {
                return self.err("expected '}'");
            }
            stmts.push(self.stmt()?);
            self.terminators();
        }
        self.next();
        Ok(stmts)
    }

    /// Ends a simple statement: `;`, a newline, or a `}` / end of program left in place.
    fn end_simple(&mut self) -> PResult<()> {
        match self.peek() {
            Tok::Punct(";") | Tok::Newline => {
                self.next();
                Ok(())
            }
            Tok::Punct("}") | Tok::Eof => Ok(()),
            _ => self.err("unexpected token"),
        }
    }

    /// A statement that may be followed by `else` (the terminators before it are eaten).
    fn body(&mut self) -> PResult<Stmt> {
        self.newlines();
        if self.eat(";") {
            return Ok(Stmt::Block(Vec::new()));
        }
        self.stmt()
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        if self.is("{") {
            return Ok(Stmt::Block(self.block()?));
        }
        if let Tok::Keyword(k) = self.peek().clone() {
            match k {
                "if" => {
                    self.next();
                    self.expect("(")?;
                    let cond = self.expr()?;
                    self.expect(")")?;
                    let then = self.body()?;
                    // `if (c) x; else y` and `if (c) x \n else y`.
                    let save = self.pos;
                    self.terminators();
                    if self.is_kw("else") {
                        self.next();
                        let other = self.body()?;
                        return Ok(Stmt::If(cond, Box::new(then), Some(Box::new(other))));
                    }
                    self.pos = save;
                    return Ok(Stmt::If(cond, Box::new(then), None));
                }
                "while" => {
                    self.next();
                    self.expect("(")?;
                    let cond = self.expr()?;
                    self.expect(")")?;
                    if self.is(";") {
                        self.next();
                        return Ok(Stmt::While(cond, Box::new(Stmt::Block(Vec::new()))));
                    }
                    return Ok(Stmt::While(cond, Box::new(self.body()?)));
                }
                "do" => {
                    self.next();
                    let body = self.body()?;
                    self.terminators();
                    if !self.is_kw("while") {
                        return self.err("expected 'while' after 'do'");
                    }
                    self.next();
                    self.expect("(")?;
                    let cond = self.expr()?;
                    self.expect(")")?;
                    self.end_simple()?;
                    return Ok(Stmt::Do(Box::new(body), cond));
                }
                "for" => {
                    self.next();
                    self.expect("(")?;
                    // for (k in arr)
                    if let (Tok::Name(k), Tok::Keyword("in"), Tok::Name(a), Tok::Punct(")")) = (
                        self.peek().clone(),
                        self.peek_at(1).clone(),
                        self.peek_at(2).clone(),
                        self.peek_at(3).clone(),
                    ) {
                        self.pos += 4;
                        return Ok(Stmt::ForIn(k, a, Box::new(self.body()?)));
                    }
                    let init = if self.is(";") {
                        None
                    } else {
                        self.no_in = true;
                        let s = self.simple_stmt();
                        self.no_in = false;
                        Some(Box::new(s?))
                    };
                    self.expect(";")?;
                    self.newlines();
                    let cond = if self.is(";") {
                        None
                    } else {
                        Some(self.expr()?)
                    };
                    self.expect(";")?;
                    self.newlines();
                    let step = if self.is(")") {
                        None
                    } else {
                        Some(Box::new(self.simple_stmt()?))
                    };
                    self.expect(")")?;
                    if self.is(";") {
                        self.next();
                        return Ok(Stmt::For(
                            init,
                            cond,
                            step,
                            Box::new(Stmt::Block(Vec::new())),
                        ));
                    }
                    return Ok(Stmt::For(init, cond, step, Box::new(self.body()?)));
                }
                _ => {}
            }
        }
        if self.eat(";") {
            return Ok(Stmt::Block(Vec::new()));
        }
        let s = self.simple_stmt()?;
        self.end_simple()?;
        Ok(s)
    }

    fn simple_stmt(&mut self) -> PResult<Stmt> {
        if let Tok::Keyword(k) = self.peek().clone() {
            match k {
                "print" | "printf" => {
                    self.next();
                    let args = self.print_args()?;
                    let redirect = if self.eat(">") {
                        Some(Redirect::File(self.redirect_target()?))
                    } else if self.eat(">>") {
                        Some(Redirect::Append(self.redirect_target()?))
                    } else if self.eat("|") {
                        Some(Redirect::Pipe(self.redirect_target()?))
                    } else {
                        None
                    };
                    if k == "printf" && args.is_empty() {
                        return self.err("printf needs a format");
                    }
                    return Ok(if k == "print" {
                        Stmt::Print(args, redirect)
                    } else {
                        Stmt::Printf(args, redirect)
                    });
                }
                "next" => {
                    self.next();
                    return Ok(Stmt::Next);
                }
                "nextfile" => {
                    self.next();
                    return Ok(Stmt::NextFile);
                }
                "break" => {
                    self.next();
                    return Ok(Stmt::Break);
                }
                "continue" => {
                    self.next();
                    return Ok(Stmt::Continue);
                }
                "exit" | "return" => {
                    self.next();
                    let value = if matches!(
                        self.peek(),
                        Tok::Newline | Tok::Eof | Tok::Punct(";") | Tok::Punct("}")
                    ) {
                        None
                    } else {
                        Some(self.expr()?)
                    };
                    return Ok(if k == "exit" {
                        Stmt::Exit(value)
                    } else {
                        Stmt::Return(value)
                    });
                }
                "delete" => {
                    self.next();
                    let Tok::Name(name) = self.next() else {
                        return self.err("expected an array name after delete");
                    };
                    if self.eat("[") {
                        let subs = self.expr_list("]")?;
                        return Ok(Stmt::Delete(name, Some(subs)));
                    }
                    return Ok(Stmt::Delete(name, None));
                }
                _ => {}
            }
        }
        Ok(Stmt::Expr(self.expr()?))
    }

    fn redirect_target(&mut self) -> PResult<Expr> {
        let was = self.in_print;
        self.in_print = true;
        let e = self.concat();
        self.in_print = was;
        e
    }

    fn print_args(&mut self) -> PResult<Vec<Expr>> {
        if matches!(
            self.peek(),
            Tok::Newline | Tok::Eof | Tok::Punct(";") | Tok::Punct("}")
        ) || self.is(">")
            || self.is(">>")
            || self.is("|")
        {
            return Ok(Vec::new());
        }
        // `print (a, b) > "f"`: a parenthesised list, if it is all there is.
        if self.is("(") {
            let save = self.pos;
            self.next();
            let was = self.in_print;
            self.in_print = false;
            let list = self.expr_list(")");
            self.in_print = was;
            if let Ok(list) = list
                && matches!(
                    self.peek(),
                    Tok::Newline
                        | Tok::Eof
                        | Tok::Punct(";")
                        | Tok::Punct("}")
                        | Tok::Punct(">")
                        | Tok::Punct(">>")
                        | Tok::Punct("|")
                )
            {
                return Ok(list);
            }
            self.pos = save;
        }
        let was = self.in_print;
        self.in_print = true;
        let mut args = vec![self.expr()];
        while self.eat(",") {
            self.newlines();
            args.push(self.expr());
        }
        self.in_print = was;
        args.into_iter().collect()
    }

    /// Comma-separated expressions up to `close` (consumed).
    fn expr_list(&mut self, close: &str) -> PResult<Vec<Expr>> {
        let mut list = Vec::new();
        self.newlines();
        if self.eat(close) {
            return Ok(list);
        }
        loop {
            list.push(self.expr()?);
            self.newlines();
            if self.eat(close) {
                return Ok(list);
            }
            self.expect(",")?;
            self.newlines();
        }
    }

    pub fn expr(&mut self) -> PResult<Expr> {
        let lhs = self.ternary()?;
        let op = match self.peek() {
            Tok::Punct("=") => None,
            Tok::Punct("+=") => Some(BinOp::Add),
            Tok::Punct("-=") => Some(BinOp::Sub),
            Tok::Punct("*=") => Some(BinOp::Mul),
            Tok::Punct("/=") => Some(BinOp::Div),
            Tok::Punct("%=") => Some(BinOp::Mod),
            Tok::Punct("^=") => Some(BinOp::Pow),
            _ => return Ok(lhs),
        };
        if !is_lvalue(&lhs) {
            return Ok(lhs);
        }
        self.next();
        self.newlines();
        let rhs = self.expr()?;
        Ok(Expr::Assign(op, Box::new(lhs), Box::new(rhs)))
    }

    fn ternary(&mut self) -> PResult<Expr> {
        let cond = self.or()?;
        if !self.eat("?") {
            return Ok(cond);
        }
        self.newlines();
        let a = self.expr()?;
        self.newlines();
        self.expect(":")?;
        self.newlines();
        let b = self.expr()?;
        Ok(Expr::Cond(Box::new(cond), Box::new(a), Box::new(b)))
    }

    fn or(&mut self) -> PResult<Expr> {
        let mut e = self.and()?;
        while self.eat("||") {
            self.newlines();
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> PResult<Expr> {
        let mut e = self.in_expr()?;
        while self.eat("&&") {
            self.newlines();
            e = Expr::And(Box::new(e), Box::new(self.in_expr()?));
        }
        Ok(e)
    }

    fn in_expr(&mut self) -> PResult<Expr> {
        let mut e = self.matching()?;
        while !self.no_in && self.is_kw("in") {
            self.next();
            let Tok::Name(arr) = self.next() else {
                return self.err("expected an array name after 'in'");
            };
            e = Expr::In(vec![e], arr);
        }
        Ok(e)
    }

    fn matching(&mut self) -> PResult<Expr> {
        let mut e = self.relational()?;
        loop {
            let neg = if self.is("~") {
                false
            } else if self.is("!~") {
                true
            } else {
                return Ok(e);
            };
            self.next();
            e = Expr::Match(neg, Box::new(e), Box::new(self.relational()?));
        }
    }

    fn relational(&mut self) -> PResult<Expr> {
        let mut e = self.concat()?;
        // `cmd | getline [var]`, possibly chained.
        while self.is("|") && matches!(self.peek_at(1), Tok::Keyword("getline")) {
            self.pos += 2;
            let var = self.getline_var()?;
            e = Expr::Getline(var, GetSrc::Cmd(Box::new(e)));
        }
        let op = match self.peek() {
            Tok::Punct("<") => CmpOp::Lt,
            Tok::Punct("<=") => CmpOp::Le,
            Tok::Punct("==") => CmpOp::Eq,
            Tok::Punct("!=") => CmpOp::Ne,
            Tok::Punct(">") if !self.in_print => CmpOp::Gt,
            Tok::Punct(">=") => CmpOp::Ge,
            _ => return Ok(e),
        };
        self.next();
        let rhs = self.concat()?;
        Ok(Expr::Cmp(op, Box::new(e), Box::new(rhs)))
    }

    fn starts_concat_operand(&self) -> bool {
        match self.peek() {
            Tok::Num(_)
            | Tok::Str(_)
            | Tok::Ere(_)
            | Tok::Name(_)
            | Tok::FuncName(_)
            | Tok::Builtin(_) => true,
            Tok::Punct(p) => matches!(*p, "$" | "(" | "++" | "--"),
            _ => false,
        }
    }

    fn concat(&mut self) -> PResult<Expr> {
        let mut e = self.additive()?;
        while self.starts_concat_operand() {
            let rhs = self.additive()?;
            e = Expr::Concat(Box::new(e), Box::new(rhs));
        }
        Ok(e)
    }

    fn additive(&mut self) -> PResult<Expr> {
        let mut e = self.multiplicative()?;
        loop {
            let op = if self.is("+") {
                BinOp::Add
            } else if self.is("-") {
                BinOp::Sub
            } else {
                return Ok(e);
            };
            self.next();
            e = Expr::Bin(op, Box::new(e), Box::new(self.multiplicative()?));
        }
    }

    fn multiplicative(&mut self) -> PResult<Expr> {
        let mut e = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Punct("*") => BinOp::Mul,
                Tok::Punct("/") => BinOp::Div,
                Tok::Punct("%") => BinOp::Mod,
                _ => return Ok(e),
            };
            self.next();
            e = Expr::Bin(op, Box::new(e), Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> PResult<Expr> {
        if self.eat("!") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat("-") {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        if self.eat("+") {
            return Ok(Expr::Plus(Box::new(self.unary()?)));
        }
        self.power()
    }

    fn power(&mut self) -> PResult<Expr> {
        let base = self.postfix()?;
        if self.eat("^") {
            // Right associative; the exponent may carry a sign: 2^-1.
            let exp = if self.eat("-") {
                Expr::Neg(Box::new(self.power_operand()?))
            } else if self.eat("+") {
                self.power_operand()?
            } else if self.eat("!") {
                Expr::Not(Box::new(self.power_operand()?))
            } else {
                self.power()?
            };
            return Ok(Expr::Bin(BinOp::Pow, Box::new(base), Box::new(exp)));
        }
        Ok(base)
    }

    fn power_operand(&mut self) -> PResult<Expr> {
        if self.eat("-") {
            return Ok(Expr::Neg(Box::new(self.power_operand()?)));
        }
        self.power()
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let e = self.primary()?;
        if is_lvalue(&e) {
            if self.eat("++") {
                return Ok(Expr::IncDec(false, 1.0, Box::new(e)));
            }
            if self.eat("--") {
                return Ok(Expr::IncDec(false, -1.0, Box::new(e)));
            }
        }
        Ok(e)
    }

    /// An optional variable after `getline`.
    fn getline_var(&mut self) -> PResult<Option<Box<Expr>>> {
        if matches!(self.peek(), Tok::Name(_)) || self.is("$") {
            let e = self.primary()?;
            if !is_lvalue(&e) {
                return self.err("getline needs a variable");
            }
            return Ok(Some(Box::new(e)));
        }
        Ok(None)
    }

    fn primary(&mut self) -> PResult<Expr> {
        match self.next() {
            Tok::Num(n) => Ok(Expr::Num(n)),
            Tok::Str(s) => Ok(Expr::Str(s)),
            Tok::Ere(r) => Ok(Expr::Regex(r)),
            Tok::Punct("$") => {
                let e = if self.eat("++") {
                    Expr::IncDec(true, 1.0, Box::new(self.primary()?))
                } else if self.eat("--") {
                    Expr::IncDec(true, -1.0, Box::new(self.primary()?))
                } else if self.eat("-") {
                    Expr::Neg(Box::new(self.primary()?))
                } else {
                    self.primary()?
                };
                Ok(Expr::Field(Box::new(e)))
            }
            Tok::Punct("++") | Tok::Punct("--") => {
                let delta = if matches!(self.toks[self.pos - 1], Tok::Punct("++")) {
                    1.0
                } else {
                    -1.0
                };
                let e = self.primary()?;
                if !is_lvalue(&e) {
                    return self.err("++ or -- needs a variable");
                }
                Ok(Expr::IncDec(true, delta, Box::new(e)))
            }
            Tok::Punct("-") => Ok(Expr::Neg(Box::new(self.primary()?))),
            Tok::Punct("!") => Ok(Expr::Not(Box::new(self.primary()?))),
            Tok::Punct("(") => {
                let was = (self.in_print, self.no_in);
                self.in_print = false;
                self.no_in = false;
                self.newlines();
                let first = self.expr();
                let r = match first {
                    Ok(first) if self.is(",") => {
                        let mut list = vec![first];
                        while self.eat(",") {
                            self.newlines();
                            list.push(self.expr()?);
                        }
                        self.expect(")")?;
                        if !self.is_kw("in") {
                            return self.err("expected 'in' after a grouped list");
                        }
                        self.next();
                        let Tok::Name(arr) = self.next() else {
                            return self.err("expected an array name after 'in'");
                        };
                        Ok(Expr::In(list, arr))
                    }
                    Ok(first) => {
                        self.newlines();
                        self.expect(")")?;
                        Ok(Expr::Group(Box::new(first)))
                    }
                    Err(e) => Err(e),
                };
                (self.in_print, self.no_in) = was;
                r
            }
            Tok::Name(n) => {
                if self.eat("[") {
                    let subs = self.expr_list("]")?;
                    if subs.is_empty() {
                        return self.err("empty subscript");
                    }
                    return Ok(Expr::Index(n, subs));
                }
                Ok(Expr::Var(n))
            }
            Tok::FuncName(n) => {
                self.expect("(")?;
                let args = self.expr_list(")")?;
                Ok(Expr::Call(n, args))
            }
            Tok::Builtin(n) => {
                if self.eat("(") {
                    let was = (self.in_print, self.no_in);
                    self.in_print = false;
                    self.no_in = false;
                    let args = self.expr_list(")");
                    (self.in_print, self.no_in) = was;
                    return Ok(Expr::Builtin(n, args?));
                }
                if n == "length" {
                    return Ok(Expr::Builtin(n, Vec::new()));
                }
                self.err(&format!("{n} needs arguments"))
            }
            Tok::Keyword("getline") => {
                let var = self.getline_var()?;
                if self.eat("<") {
                    // The file name is a primary: `getline < "a" "b"` reads "a".
                    let file = self.primary()?;
                    return Ok(Expr::Getline(var, GetSrc::File(Box::new(file))));
                }
                Ok(Expr::Getline(var, GetSrc::Main))
            }
            _ => {
                self.pos -= 1;
                self.err("unexpected token")
            }
        }
    }
}
