//! `jq`: the jq language from the jaq crates (parser, compiler, standard library), with jq's
//! command line and jq 1.6's output format (2-space indentation, numbers as `%.17g`-like
//! shortest forms, `\u00XX` escapes).

use std::io::{Read, Write};

use jaq_core::data::{DataT, HasLut};
use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Lut, Vars};
use jaq_json::{Map, Num, Val};
use jaq_std::input::{HasInputs, Inputs, RcIter};

struct Data;

impl DataT for Data {
    type V<'a> = Val;
    type Data<'a> = Global<'a>;
}

#[derive(Clone)]
struct Global<'a> {
    lut: &'a Lut<Data>,
    inputs: Inputs<'a, Val>,
}

impl<'a> HasLut<'a, Data> for Global<'a> {
    fn lut(&self) -> &'a Lut<Data> {
        self.lut
    }
}

impl<'a> HasInputs<'a, Val> for Global<'a> {
    fn inputs(&self) -> Inputs<'a, Val> {
        self.inputs
    }
}

/// How values are printed.
#[derive(Clone)]
struct Style {
    /// `None`: compact; `Some("  ")`: pretty with this indentation.
    indent: Option<String>,
    sort: bool,
    ascii: bool,
}

const USAGE: &str = "Usage:\tjq [OPTIONS] FILTER [FILES...]\n\tjq [OPTIONS] --args FILTER [STRINGS...]\n\tjq [OPTIONS] --jsonargs FILTER [JSON_TEXTS...]\n\njq is a tool for processing JSON inputs, applying the given filter to\nits JSON text inputs and producing the filter's results as JSON on\nstandard output.\n\nSome of the options include:\n  -c               compact instead of pretty-printed output;\n  -n               use `null` as the single input value;\n  -e               set the exit status code based on the output;\n  -s               read (slurp) all inputs into an array; apply filter to it;\n  -r               output raw strings, not JSON texts;\n  -j               like -r, without a newline after each output;\n  -a               output ASCII with \\uXXXX escapes;\n  -R               read each line as a string;\n  -S               sort keys of objects on output;\n  --tab            use tabs for indentation;\n  --indent n       use n spaces for indentation (max 7 spaces);\n  -f file          read the filter from a file;\n  --arg a v        set variable $a to value <v>;\n  --argjson a v    set variable $a to JSON value <v>;\n  --slurpfile a f  set variable $a to an array of JSON texts read from <f>;\n  --rawfile a f    set variable $a to a string consisting of the contents of <f>;\n  --args           remaining arguments are string arguments, not files;\n  --jsonargs       remaining arguments are JSON arguments, not files;\n  --               terminates argument processing;\n\nNamed arguments are also available as $ARGS.named[], while\npositional arguments are available as $ARGS.positional[].\n";

fn fail(msg: &str, code: i32) -> i32 {
    eprintln!("jq: error: {msg}");
    code
}

fn usage_error(msg: &str) -> i32 {
    eprintln!(
        "jq: {msg}\nUse jq --help for help with command-line options,\nor see the jq manpage, or online docs  at https://jqlang.github.io/jq"
    );
    2
}

fn parse_json(text: &[u8]) -> Result<Val, String> {
    jaq_json::read::parse_single(text).map_err(|e| e.to_string())
}

pub fn main(args: Vec<String>) -> i32 {
    let mut raw_out = false;
    let mut join = false;
    let mut null_input = false;
    let mut slurp = false;
    let mut exit_status = false;
    let mut raw_in = false;
    let mut style = Style {
        indent: Some("  ".into()),
        sort: false,
        ascii: false,
    };
    let mut filter: Option<String> = None;
    let mut from_file: Option<String> = None;
    let mut files: Vec<String> = Vec::new();
    let mut named: Vec<(String, Val)> = Vec::new();
    let mut positional: Vec<Val> = Vec::new();
    // Where operands go once the filter is known: files, --args strings or --jsonargs.
    let mut rest_mode = 0;
    let mut it = args.into_iter().skip(1);
    let mut only_operands = false;
    while let Some(a) = it.next() {
        let operand = only_operands || !a.starts_with('-') || a == "-";
        if operand {
            if filter.is_none() && from_file.is_none() {
                filter = Some(a);
            } else {
                match rest_mode {
                    1 => positional.push(Val::from(a)),
                    2 => match parse_json(a.as_bytes()) {
                        Ok(v) => positional.push(v),
                        Err(_) => {
                            return usage_error("Invalid JSON text passed to --jsonargs");
                        }
                    },
                    _ => files.push(a),
                }
            }
            continue;
        }
        let mut two = |what: &str| -> Result<(String, String), i32> {
            match (it.next(), it.next()) {
                (Some(n), Some(v)) => Ok((n, v)),
                _ => Err(usage_error(&format!(
                    "{what} takes two parameters (e.g. {what} varname value)"
                ))),
            }
        };
        match a.as_str() {
            "--" => only_operands = true,
            "--raw-output" => raw_out = true,
            "--join-output" => (raw_out, join) = (true, true),
            "--ascii-output" => style.ascii = true,
            "--compact-output" => style.indent = None,
            "--null-input" => null_input = true,
            "--slurp" => slurp = true,
            "--exit-status" => exit_status = true,
            "--raw-input" => raw_in = true,
            "--sort-keys" => style.sort = true,
            "--color-output" | "--monochrome-output" | "--unbuffered" | "--stream-errors" => {}
            "--tab" => style.indent = Some("\t".into()),
            "--indent" => match it.next().and_then(|n| n.parse::<usize>().ok()) {
                Some(n) if n <= 7 => style.indent = if n == 0 { None } else { Some(" ".repeat(n)) },
                Some(_) => return usage_error("Cannot indent more than 7 characters"),
                None => return usage_error("--indent takes one parameter"),
            },
            "--arg" => match two("--arg") {
                Ok((n, v)) => named.push((n, Val::from(v))),
                Err(c) => return c,
            },
            "--argjson" => match two("--argjson") {
                Ok((n, v)) => match parse_json(v.as_bytes()) {
                    Ok(j) => named.push((n, j)),
                    Err(_) => {
                        return usage_error("Invalid JSON text passed to --argjson");
                    }
                },
                Err(c) => return c,
            },
            "--slurpfile" | "--rawfile" => match two(&a) {
                Ok((n, path)) => match std::fs::read(&path) {
                    Ok(bytes) if a == "--rawfile" => {
                        named.push((n, Val::from(String::from_utf8_lossy(&bytes).into_owned())))
                    }
                    Ok(bytes) => {
                        let vals: Result<Vec<Val>, _> = jaq_json::read::parse_many(&bytes)
                            .scan(false, |failed, r| {
                                (!*failed).then(|| {
                                    *failed = r.is_err();
                                    r
                                })
                            })
                            .collect();
                        match vals {
                            Ok(v) => named.push((n, v.into_iter().collect())),
                            Err(e) => {
                                return fail(
                                    &format!("Bad JSON in --slurpfile {n} {path}: {e}"),
                                    2,
                                );
                            }
                        }
                    }
                    Err(e) => {
                        return fail(
                            &format!("Could not open {path}: {}", guest_support::cli::reason(&e)),
                            2,
                        );
                    }
                },
                Err(c) => return c,
            },
            "--args" => rest_mode = 1,
            "--jsonargs" => rest_mode = 2,
            "--from-file" => from_file = it.next(),
            "--help" => {
                print!("{USAGE}");
                return 0;
            }
            "--version" => {
                println!("jq-1.7.1");
                return 0;
            }
            long if long.starts_with("--") => {
                return usage_error(&format!("Unknown option: {long}"));
            }
            short => {
                let letters: Vec<char> = short[1..].chars().collect();
                for c in letters {
                    match c {
                        'r' => raw_out = true,
                        'j' => (raw_out, join) = (true, true),
                        'a' => style.ascii = true,
                        'c' => style.indent = None,
                        'n' => null_input = true,
                        's' => slurp = true,
                        'e' => exit_status = true,
                        'R' => raw_in = true,
                        'S' => style.sort = true,
                        'C' | 'M' => {}
                        'h' => {
                            print!("{USAGE}");
                            return 0;
                        }
                        'f' => from_file = it.next(),
                        _ => return usage_error(&format!("Unknown option: {short}")),
                    }
                }
            }
        }
    }
    // With -f, the first operand is an input file.
    let code = match (&from_file, filter.take()) {
        (Some(path), first) => {
            if let Some(f) = first {
                files.insert(0, f);
            }
            match std::fs::read_to_string(path) {
                Ok(c) => c,
                Err(e) => {
                    return fail(
                        &format!("Could not open {path}: {}", guest_support::cli::reason(&e)),
                        2,
                    );
                }
            }
        }
        (None, Some(f)) => f,
        (None, None) => {
            eprint!("{USAGE}");
            return 2;
        }
    };

    // Inputs: every file (or standard input) in turn.
    let mut data = Vec::new();
    if files.is_empty() {
        if !null_input || code.contains("input") {
            let _ = std::io::stdin().read_to_end(&mut data);
        }
    } else {
        for f in &files {
            match std::fs::read(f) {
                Ok(d) => data.extend_from_slice(&d),
                Err(e) => {
                    eprintln!(
                        "jq: error: Could not open {f}: {}",
                        guest_support::cli::reason(&e)
                    );
                    return 2;
                }
            }
        }
    }
    let mut values: Vec<Result<Val, String>> = if raw_in {
        let text = String::from_utf8_lossy(&data).into_owned();
        if slurp {
            vec![Ok(Val::from(text))]
        } else {
            text.lines().map(|l| Ok(Val::from(l.to_string()))).collect()
        }
    } else {
        // The parser does not move past a syntax error: stop at the first one.
        let mut failed = false;
        jaq_json::read::parse_many(&data)
            .map(|r| r.map_err(|e| e.to_string()))
            .take_while(|r| {
                let go = !failed;
                failed |= r.is_err();
                go
            })
            .collect()
    };
    if slurp && !raw_in {
        let mut all = Vec::new();
        for v in values {
            match v {
                Ok(v) => all.push(v),
                Err(e) => {
                    eprintln!("jq: error (at <stdin>:0): Cannot parse input: {e}");
                    return 4;
                }
            }
        }
        values = vec![Ok(all.into_iter().collect())];
    }

    // Global variables: $ENV, $ARGS, $__prog_name and the named arguments.
    let env: Map = std::env::vars()
        .map(|(k, v)| (Val::from(k), Val::from(v)))
        .collect();
    let named_obj: Map = named
        .iter()
        .map(|(k, v)| (Val::from(k.clone()), v.clone()))
        .collect();
    let mut args_obj = Map::default();
    args_obj.insert(
        Val::from("positional".to_string()),
        positional.into_iter().collect(),
    );
    args_obj.insert(Val::from("named".to_string()), Val::obj(named_obj));
    let mut var_names: Vec<String> = vec!["$ENV".into(), "$ARGS".into()];
    let mut var_values: Vec<Val> = vec![Val::obj(env), Val::obj(args_obj)];
    for (n, v) in named {
        var_names.push(format!("${n}"));
        var_values.push(v);
    }

    // What jq has and the jaq standard library does not.
    let prelude = r#"def env: $ENV; def input_filename: null; def ascii: [.] | implode;
def leaf_paths: paths(scalars);
def from_entries: reduce .[] as $x ({}; . + { ($x | if type == "object" and has("key") and .key != null
    then .key else (.k // .name // .Name // .K // .Key) end | if type == "string" then . else tojson end):
  ($x | if has("value") then .value elif has("v") then .v elif has("Value") then .Value else .V end) });
def @csv: if type != "array" then error("\(type) (\(tojson)) cannot be csv-formatted, only an array can be")
  else map(if type == "string" then "\"" + gsub("\""; "\"\"") + "\""
    elif type == "null" then "" elif type == "boolean" or type == "number" then tostring
    else error("\(type) (\(tojson)) is not valid in a csv row") end) | join(",") end;
def @tsv: if type != "array" then error("\(type) (\(tojson)) cannot be tsv-formatted, only an array can be")
  else map(if type == "string" then gsub("\\\\"; "\\\\") | gsub("\t"; "\\t") | gsub("\n"; "\\n") | gsub("\r"; "\\r")
    elif type == "null" then "" elif type == "boolean" or type == "number" then tostring
    else error("\(type) (\(tojson)) is not valid in a tsv row") end) | join("\t") end;
"#;
    let prelude = format!("{prelude}{}{MORE_JQ}", crate::jq_assign::PRELUDE);
    let program_text = format!("{prelude}{code}");
    let loader = Loader::new(all_defs());
    let arena = Arena::default();
    let modules = match loader.load(
        &arena,
        File {
            code: program_text.as_str(),
            path: (),
        },
    ) {
        Ok(m) => m,
        Err(errs) => {
            for (_, e) in &errs {
                eprintln!("jq: error: syntax error: {}", describe_load_error(e));
            }
            eprintln!(
                "jq: {} compile error{}",
                errs.len(),
                if errs.len() == 1 { "" } else { "s" }
            );
            return 3;
        }
    };
    let names: Vec<&str> = var_names.iter().map(String::as_str).collect();
    let filter = match Compiler::default()
        .with_funs(all_funs())
        .with_global_vars(names.iter().copied())
        .compile(modules)
    {
        Ok(f) => f,
        Err(errs) => {
            let mut n = 0;
            for (_, list) in &errs {
                for (name, undefined) in list {
                    n += 1;
                    eprintln!("jq: error: {name}/{} is not defined", arity(undefined));
                }
            }
            eprintln!("jq: {n} compile error{}", if n == 1 { "" } else { "s" });
            return 3;
        }
    };

    // The same program with assignments that make missing objects and arrays, for an input
    // where jaq's path update stopped at a `null` or past an array's end (see jq_assign).
    // Not for programs that read further inputs: a second run would read others.
    let vivifying = if code.contains("input") {
        None
    } else {
        crate::jq_assign::vivifying(&code).and_then(|c| {
            let text = format!("{prelude}{c}");
            let arena = Arena::default();
            let modules = Loader::new(all_defs())
                .load(
                    &arena,
                    File {
                        code: text.as_str(),
                        path: (),
                    },
                )
                .ok()?;
            Compiler::default()
                .with_funs(all_funs())
                .with_global_vars(names.iter().copied())
                .compile(modules)
                .ok()
        })
    };

    // With -n the program runs once on null and `input`/`inputs` read the data; without,
    // the main loop and `input`/`inputs` take from the same stream.
    let (first, rest) = if null_input {
        (vec![Ok(Val::Null)], values)
    } else {
        (values, Vec::new())
    };
    let main_iter = RcIter::new(first.into_iter());
    let rest_iter = RcIter::new(rest.into_iter());
    let shared: Inputs<'_, Val> = if null_input { &rest_iter } else { &main_iter };

    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut status = 0;
    let mut last: Option<Val> = None;
    loop {
        let next = (&main_iter).next();
        let Some(input) = next else { break };
        let input = match input {
            Ok(v) => v,
            Err(e) => {
                let _ = out.flush();
                // jq 1.6 ends with status 4 at input it cannot parse.
                eprintln!("jq: error (at <stdin>:0): Cannot parse input: {e}");
                status = 4;
                break;
            }
        };
        let global = Global {
            lut: &filter.lut,
            inputs: shared,
        };
        let ctx = Ctx::<Data>::new(global.clone(), Vars::new(var_values.clone()));
        let items: Box<dyn Iterator<Item = _>> = match &vivifying {
            None => Box::new(filter.id.run((ctx, input))),
            Some(viv) => {
                // Gathered first, so that a failed run leaves no output behind: up to the
                // first error, or a thousand outputs, after which the rest streams as it
                // comes (a program may never end).
                let mut run = filter.id.run((ctx, input.clone()));
                let mut gathered = Vec::new();
                let mut stopped = false;
                for item in run.by_ref() {
                    let failed = item.is_err();
                    if let Err(e) = &item {
                        let text = format!("{e:?}");
                        stopped = text.contains("iterable") || text.contains("out of bounds");
                    }
                    gathered.push(item);
                    if failed || gathered.len() >= 1000 {
                        break;
                    }
                }
                if stopped {
                    let global = Global {
                        lut: &viv.lut,
                        inputs: shared,
                    };
                    let ctx = Ctx::<Data>::new(global, Vars::new(var_values.clone()));
                    Box::new(viv.id.run((ctx, input)))
                } else {
                    Box::new(gathered.into_iter().chain(run))
                }
            }
        };
        for item in items {
            match item {
                Ok(v) => {
                    let mut buf = Vec::new();
                    match (&v, raw_out) {
                        (Val::TStr(s), true) | (Val::BStr(s), true) => buf.extend_from_slice(s),
                        _ => write_value(&mut buf, &v, &style, 0),
                    }
                    if !join {
                        buf.push(b'\n');
                    }
                    if out.write_all(&buf).is_err() {
                        return 2;
                    }
                    last = Some(v);
                }
                Err(exn) => match exn.get_err() {
                    Ok(err) => {
                        let _ = out.flush();
                        let v = err.into_val();
                        match v {
                            Val::TStr(s) => eprintln!(
                                "jq: error (at <stdin>:0): {}",
                                String::from_utf8_lossy(&s)
                            ),
                            other => {
                                let mut b = Vec::new();
                                write_value(
                                    &mut b,
                                    &other,
                                    &Style {
                                        indent: None,
                                        sort: false,
                                        ascii: false,
                                    },
                                    0,
                                );
                                eprintln!(
                                    "jq: error (at <stdin>:0) (not a string): {}",
                                    String::from_utf8_lossy(&b)
                                );
                            }
                        }
                        status = 5;
                        break;
                    }
                    Err(exn) => {
                        let code = exn.get_halt().unwrap_or(5);
                        let _ = out.flush();
                        return code;
                    }
                },
            }
        }
    }
    let _ = out.flush();
    if status != 0 {
        return status;
    }
    if exit_status {
        return match last {
            None => 4,
            Some(Val::Null) | Some(Val::Bool(false)) => 1,
            Some(_) => 0,
        };
    }
    0
}

fn arity(u: &jaq_core::compile::Undefined) -> String {
    match u {
        jaq_core::compile::Undefined::Filter(n) => n.to_string(),
        _ => "0".into(),
    }
}

fn describe_load_error(e: &jaq_core::load::Error<&str>) -> String {
    use jaq_core::load::Error;
    match e {
        Error::Io(list) => list
            .iter()
            .map(|(p, m)| format!("{p}: {m}"))
            .collect::<Vec<_>>()
            .join("; "),
        Error::Lex(list) => list
            .iter()
            .map(|(expect, at)| format!("expected {} at {:?}", expect.as_str(), first_chars(at)))
            .collect::<Vec<_>>()
            .join("; "),
        Error::Parse(list) => list
            .iter()
            .map(|(expect, at)| format!("expected {} at {:?}", expect.as_str(), first_chars(at)))
            .collect::<Vec<_>>()
            .join("; "),
    }
}

fn first_chars(s: &str) -> String {
    s.chars().take(20).collect()
}

/// A value as jq 1.6 prints it.
fn write_value(out: &mut Vec<u8>, v: &Val, style: &Style, level: usize) {
    match v {
        Val::Null => out.extend_from_slice(b"null"),
        Val::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Val::Num(n) => out.extend_from_slice(number(n).as_bytes()),
        Val::TStr(s) | Val::BStr(s) => write_string(out, &String::from_utf8_lossy(s), style.ascii),
        Val::Arr(items) => {
            if items.is_empty() {
                out.extend_from_slice(b"[]");
                return;
            }
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                newline(out, style, level + 1);
                write_value(out, item, style, level + 1);
            }
            newline(out, style, level);
            out.push(b']');
        }
        Val::Obj(map) => {
            if map.is_empty() {
                out.extend_from_slice(b"{}");
                return;
            }
            let mut entries: Vec<(&Val, &Val)> = map.iter().collect();
            if style.sort {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push(b'{');
            for (i, (k, val)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                newline(out, style, level + 1);
                match k {
                    Val::TStr(s) | Val::BStr(s) => {
                        write_string(out, &String::from_utf8_lossy(s), style.ascii)
                    }
                    other => write_string(out, &other.to_string(), style.ascii),
                }
                out.push(b':');
                if style.indent.is_some() {
                    out.push(b' ');
                }
                write_value(out, val, style, level + 1);
            }
            newline(out, style, level);
            out.push(b'}');
        }
    }
}

fn newline(out: &mut Vec<u8>, style: &Style, level: usize) {
    if let Some(ind) = &style.indent {
        out.push(b'\n');
        for _ in 0..level {
            out.extend_from_slice(ind.as_bytes());
        }
    }
}

fn write_string(out: &mut Vec<u8>, s: &str, ascii: bool) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c if ascii && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.extend_from_slice(format!("\\u{:04x}", u).as_bytes());
                }
            }
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// A number as jq 1.6 prints it: the shortest digits that read back as the same double,
/// in fixed notation unless the exponent is below -4 or far beyond the digits.
fn number(n: &Num) -> String {
    let x: f64 = match n {
        Num::Int(i) => *i as f64,
        Num::Float(f) => *f,
        Num::BigInt(b) => b.to_string().parse().unwrap_or(f64::INFINITY),
        Num::Dec(s) => s.parse().unwrap_or(0.0),
    };
    if let Num::Int(i) = n
        && (*i as f64).abs() < 1e17
    {
        return i.to_string();
    }
    format_double(x)
}

pub fn format_double(x: f64) -> String {
    if x.is_nan() {
        return "null".into();
    }
    let x = if x.is_infinite() {
        f64::MAX.copysign(x)
    } else {
        x
    };
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let nd = digits.len() as i32;
    let decpt = exp.parse::<i32>().unwrap_or(0) + 1;
    let sign = if x < 0.0 { "-" } else { "" };
    if decpt <= -4 || decpt > nd + 15 {
        let e = decpt - 1;
        let frac = if nd > 1 {
            format!(".{}", &digits[1..])
        } else {
            String::new()
        };
        let esign = if e < 0 { '-' } else { '+' };
        format!("{sign}{}{frac}e{esign}{:02}", &digits[..1], e.abs())
    } else if decpt <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-decpt) as usize))
    } else if decpt >= nd {
        format!("{sign}{digits}{}", "0".repeat((decpt - nd) as usize))
    } else {
        let (a, b) = digits.split_at(decpt as usize);
        format!("{sign}{a}.{b}")
    }
}

/// More of jq 1.6 in jq, after [`crate::jq_assign::PRELUDE`]: `setpath` through `null`
/// and past an array's end; `del` and `delpaths` of several paths (deleted from the last,
/// so that earlier deletions do not move later paths); `ltrimstr`/`rtrimstr` leaving
/// anything but a string prefix alone; the streaming forms `tostream`, `fromstream` and
/// `truncate_stream` (the manual's "Streaming" section).
const MORE_JQ: &str = r#"
def setpath($p; $v): _wasbox_viv($p) | getpath($p) = $v;
def del(f): delpaths([path(f)] | unique | reverse);
def delpaths($ps): reduce ($ps | unique | reverse)[] as $p (.; del(getpath($p)));
def ltrimstr($x): if type == "string" and ($x | type) == "string" and startswith($x)
  then .[($x | length):] else . end;
def rtrimstr($x): if type == "string" and ($x | type) == "string" and endswith($x)
  and ($x | length) > 0 then .[:length - ($x | length)] else . end;
def tostream:
  def _s($p):
    if (type == "array" or type == "object") and length > 0 then
      (if type == "array" then [range(length)] else keys_unsorted end) as $ks
      | ($ks[] as $k | .[$k] | _s($p + [$k])), [$p + [$ks[-1]]]
    else [$p, .] end;
  _s([]);
def fromstream(f): {x: null, e: false} as $init
  | foreach f as $i ($init;
      (if .e then $init else . end)
      | if ($i | length) == 2
        then .e = ($i[0] | length == 0) | .x = (.x | setpath($i[0]; $i[1]))
        else .e = ($i[0] | length == 1) end;
      if .e then .x else empty end);
def truncate_stream(stream): . as $n | null | stream
  | if (.[0] | length) > $n then .[0] = .[0][$n:] else empty end;
"#;

/// jaq's definitions in jq (core, standard library, JSON).
fn all_defs() -> impl Iterator<Item = jaq_core::load::parse::Def<&'static str>> {
    jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs())
}

/// jaq's native filters, `input`/`inputs` included.
fn all_funs() -> impl Iterator<Item = jaq_core::native::Fun<Data>> {
    jaq_core::funs::<Data>()
        .chain(jaq_std::funs())
        .chain(
            jaq_std::input::funs()
                .into_vec()
                .into_iter()
                .map(jaq_core::native::run),
        )
        .chain(jaq_json::funs())
}
