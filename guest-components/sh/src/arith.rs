//! Arithmetic expansion: `$((...))`, `((...))` and `for ((...))`, on 64-bit integers with
//! bash's operators.

use brush_parser::ast::{
    ArithmeticExpr as E, ArithmeticTarget, BinaryOperator as B, UnaryAssignmentOperator as UA,
    UnaryOperator as U,
};

use crate::shell::Shell;

thread_local! {
    /// Elements of associative arrays named in the expression being evaluated, each
    /// standing in it as a variable `__wasbox_assoc_N` (their subscripts are strings, not
    /// arithmetic).
    static ASSOC_REFS: std::cell::RefCell<Vec<(String, String)>> = const { std::cell::RefCell::new(Vec::new()) };
}

const ASSOC_PREFIX: &str = "__wasbox_assoc_";

pub fn eval_str(sh: &mut Shell, text: &str) -> Result<i64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(0);
    }
    let mark = ASSOC_REFS.with(|r| r.borrow().len());
    let rewritten = assoc_refs(sh, text);
    let result = brush_parser::arithmetic::parse(&rewritten)
        .map_err(|_| format!("{text}: syntax error in expression"))
        .and_then(|expr| eval(sh, &expr));
    ASSOC_REFS.with(|r| r.borrow_mut().truncate(mark));
    result
}

/// Replaces `NAME[KEY]` of every associative array NAME by a stand-in variable, the key
/// taken as text (quotes removed), as bash reads `((count[$k]++))`.
fn assoc_refs(sh: &Shell, text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let starts_name = (c.is_ascii_alphabetic() || c == '_')
            && (i == 0 || !(chars[i - 1].is_ascii_alphanumeric() || chars[i - 1] == '_'));
        if !starts_name {
            out.push(c);
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
            j += 1;
        }
        let name: String = chars[i..j].iter().collect();
        if j < chars.len() && chars[j] == '[' && sh.is_assoc(&name) {
            let mut depth = 0;
            let mut k = j;
            while k < chars.len() {
                match chars[k] {
                    '[' => depth += 1,
                    ']' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                k += 1;
            }
            if k < chars.len() {
                let raw: String = chars[j + 1..k].iter().collect();
                let key = raw.trim();
                let key = key
                    .strip_prefix('"')
                    .and_then(|k| k.strip_suffix('"'))
                    .or_else(|| key.strip_prefix('\'').and_then(|k| k.strip_suffix('\'')))
                    .unwrap_or(key)
                    .to_string();
                let n = ASSOC_REFS.with(|r| {
                    let mut r = r.borrow_mut();
                    r.push((name.clone(), key));
                    r.len() - 1
                });
                out.push_str(&format!("{ASSOC_PREFIX}{n}"));
                i = k + 1;
                continue;
            }
        }
        out.push_str(&name);
        i = j;
    }
    out
}

/// A variable or an array element named in an expression.
enum Slot {
    Var(String),
    Elem(String, String),
}

fn slot(sh: &mut Shell, t: &ArithmeticTarget) -> Result<Slot, String> {
    Ok(match t {
        ArithmeticTarget::Variable(n) if n.starts_with(ASSOC_PREFIX) => {
            let found = n[ASSOC_PREFIX.len()..]
                .parse::<usize>()
                .ok()
                .and_then(|i| ASSOC_REFS.with(|r| r.borrow().get(i).cloned()));
            match found {
                Some((name, key)) => Slot::Elem(name, key),
                None => Slot::Var(n.clone()),
            }
        }
        ArithmeticTarget::Variable(n) => Slot::Var(n.clone()),
        ArithmeticTarget::ArrayElement(n, idx) => {
            let mut i = eval(sh, idx)?;
            if i < 0
                && let Some(crate::shell::Array::Indexed(m)) = sh.array(n)
            {
                i += m.keys().next_back().map_or(0, |k| k + 1);
            }
            Slot::Elem(n.clone(), i.to_string())
        }
    })
}

fn read_slot(sh: &mut Shell, s: &Slot) -> Result<i64, String> {
    let v = match s {
        Slot::Var(n) => sh.get_var(n),
        Slot::Elem(n, k) => sh.get_elem(n, k),
    }
    .unwrap_or_default();
    let v = v.trim();
    if v.is_empty() {
        return Ok(0);
    }
    if let Ok(n) = parse_number(v) {
        return Ok(n);
    }
    // A variable holding an expression is evaluated (bash does this recursively).
    eval_str(sh, v)
}

fn write_slot(sh: &mut Shell, s: &Slot, v: i64) {
    match s {
        Slot::Var(n) => sh.set_var(n, v.to_string()),
        Slot::Elem(n, k) => sh.set_elem(n, k, v.to_string()),
    }
}

fn parse_number(s: &str) -> Result<i64, String> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let n = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i64::from_str_radix(h, 16)
    } else if let Some((base, digits)) = s.split_once('#') {
        let base: u32 = base.parse().map_err(|_| s.to_string())?;
        i64::from_str_radix(digits, base)
    } else if s.len() > 1 && s.starts_with('0') {
        i64::from_str_radix(&s[1..], 8)
    } else {
        s.parse()
    }
    .map_err(|_| format!("{s}: value too great for base"))?;
    Ok(if neg { -n } else { n })
}

pub fn eval(sh: &mut Shell, e: &E) -> Result<i64, String> {
    Ok(match e {
        E::Literal(n) => *n,
        E::Reference(t) => {
            let s = slot(sh, t)?;
            read_slot(sh, &s)?
        }
        E::UnaryOp(op, x) => {
            let v = eval(sh, x)?;
            match op {
                U::UnaryPlus => v,
                U::UnaryMinus => v.wrapping_neg(),
                U::BitwiseNot => !v,
                U::LogicalNot => (v == 0) as i64,
            }
        }
        E::BinaryOp(B::LogicalAnd, a, b) => (eval(sh, a)? != 0 && eval(sh, b)? != 0) as i64,
        E::BinaryOp(B::LogicalOr, a, b) => (eval(sh, a)? != 0 || eval(sh, b)? != 0) as i64,
        E::BinaryOp(op, a, b) => {
            let x = eval(sh, a)?;
            let y = eval(sh, b)?;
            binary(*op, x, y)?
        }
        E::Conditional(c, a, b) => {
            if eval(sh, c)? != 0 {
                eval(sh, a)?
            } else {
                eval(sh, b)?
            }
        }
        E::Assignment(t, x) => {
            let v = eval(sh, x)?;
            let s = slot(sh, t)?;
            write_slot(sh, &s, v);
            v
        }
        E::BinaryAssignment(op, t, x) => {
            let s = slot(sh, t)?;
            let cur = read_slot(sh, &s)?;
            let y = eval(sh, x)?;
            let v = binary(*op, cur, y)?;
            write_slot(sh, &s, v);
            v
        }
        E::UnaryAssignment(op, t) => {
            let s = slot(sh, t)?;
            let cur = read_slot(sh, &s)?;
            let (new, result) = match op {
                UA::PrefixIncrement => (cur + 1, cur + 1),
                UA::PrefixDecrement => (cur - 1, cur - 1),
                UA::PostfixIncrement => (cur + 1, cur),
                UA::PostfixDecrement => (cur - 1, cur),
            };
            write_slot(sh, &s, new);
            result
        }
    })
}

fn binary(op: B, x: i64, y: i64) -> Result<i64, String> {
    Ok(match op {
        B::Power => {
            if y < 0 {
                return Err("exponent less than 0".into());
            }
            x.wrapping_pow(y as u32)
        }
        B::Multiply => x.wrapping_mul(y),
        B::Divide | B::Modulo if y == 0 => return Err("division by 0".into()),
        B::Divide => x.wrapping_div(y),
        B::Modulo => x.wrapping_rem(y),
        B::Comma => y,
        B::Add => x.wrapping_add(y),
        B::Subtract => x.wrapping_sub(y),
        B::ShiftLeft => x.wrapping_shl(y as u32),
        B::ShiftRight => x.wrapping_shr(y as u32),
        B::LessThan => (x < y) as i64,
        B::LessThanOrEqualTo => (x <= y) as i64,
        B::GreaterThan => (x > y) as i64,
        B::GreaterThanOrEqualTo => (x >= y) as i64,
        B::Equals => (x == y) as i64,
        B::NotEquals => (x != y) as i64,
        B::BitwiseAnd => x & y,
        B::BitwiseXor => x ^ y,
        B::BitwiseOr => x | y,
        B::LogicalAnd => (x != 0 && y != 0) as i64,
        B::LogicalOr => (x != 0 || y != 0) as i64,
    })
}
