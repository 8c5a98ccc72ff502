//! The interpreter: walks brush-parser's AST with POSIX sh / bash semantics. Programs that
//! are not builtins or functions run as child processes through the process host.
//!
//! The shell's state and its parse entry points are here; the rest by subject:
//! `vars` (variables and arrays), `exec` (lists, pipelines, compound commands), `launch`
//! (simple commands: functions, builtins, programs through the process host), `redirect`
//! (redirections and process substitution), `text` (commands printed back as shell text).

mod exec;
mod launch;
mod redirect;
mod text;
mod vars;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

/// The hasher of the shell's tables (variables, functions): FNV-1a, which needs no random
/// seed from the host at start-up and hashes a short name in a few instructions, where
/// std's SipHash was a tenth of a short script's time. The names are the script's own, so
/// a collision-heavy set of names slows only the script that made it.
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A table of the shell keyed by name.
pub type Table<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;
use std::rc::Rc;

use brush_parser::ast;

use crate::io::{Feed, Io, Out};

/// Non-local control flow out of a command.
#[derive(Debug)]
pub enum Ctl {
    Break(usize),
    Continue(usize),
    Return(i32),
    Exit(i32),
    /// Ctrl-C in an interactive shell: abandon the command line.
    Interrupt,
    /// An expansion error (`${x:?}`, a bad substitution, an arithmetic error) in an
    /// interactive shell: the command line is abandoned with this status, where a
    /// non-interactive shell exits.
    Abandon(i32),
}

pub type Status = Result<i32, Ctl>;

/// What a loop does after one run of its body.
enum Next {
    Go,
    Stop,
}

#[derive(Clone, Debug, Default)]
pub struct Var {
    /// The scalar value (unused while `array` is set).
    pub value: String,
    pub exported: bool,
    pub array: Option<Array>,
    /// `declare -n`/`local -n`: this variable names another one.
    pub nameref: Option<String>,
}

/// An array variable: indexed (`a=(x y)`, sparse) or associative (`declare -A`).
#[derive(Clone, Debug)]
pub enum Array {
    Indexed(BTreeMap<i64, String>),
    Assoc(BTreeMap<String, String>),
}

impl Array {
    pub fn values(&self) -> Vec<String> {
        match self {
            Array::Indexed(m) => m.values().cloned().collect(),
            Array::Assoc(m) => m.values().cloned().collect(),
        }
    }

    pub fn keys(&self) -> Vec<String> {
        match self {
            Array::Indexed(m) => m.keys().map(|k| k.to_string()).collect(),
            Array::Assoc(m) => m.keys().cloned().collect(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Array::Indexed(m) => m.len(),
            Array::Assoc(m) => m.len(),
        }
    }
}

#[derive(Clone, Default)]
pub struct Opts {
    pub errexit: bool,
    pub nounset: bool,
    pub xtrace: bool,
    pub pipefail: bool,
    pub noglob: bool,
    pub noclobber: bool,
}

/// The state of one shell (a subshell is a clone).
/// The bash release whose behaviour this shell follows (`$BASH_VERSION`).
pub const BASH_VERSION: &str = "5.2.0(1)-release";

#[derive(Clone)]
pub struct Shell {
    pub vars: Table<String, Var>,
    /// The state of `$RANDOM`/`$SRANDOM` (xorshift, seeded from the host's randomness at
    /// the first use: 0 before, never 0 after).
    rng: std::cell::Cell<u64>,
    /// `$$`, once asked (0 before).
    pid: std::cell::Cell<u32>,
    /// When the shell started, for `$SECONDS`.
    started: std::time::Instant,
    /// The line of the script the running command starts on (`$LINENO`).
    lineno: usize,
    /// Lines read before the program running now (an interactive shell counts every line
    /// entered, as bash does).
    pub line_offset: usize,
    pub positional: Vec<String>,
    pub arg0: String,
    pub last_status: i32,
    pub functions: Table<String, Rc<ast::FunctionBody>>,
    pub opts: Opts,
    /// Saved variables of each running function, restored when it returns (`local`).
    pub locals: Vec<Vec<(String, Option<Var>)>>,
    /// Children started with `&` and not yet waited for.
    pub background: Vec<u32>,
    /// `$!`: the last job started in the background, waited for or not.
    pub last_background: Option<u32>,
    /// The command line of each background job, for `jobs`.
    pub job_text: HashMap<u32, String>,
    /// The directories `pushd` saved, the most recent first (`dirs` shows the working
    /// directory before them).
    pub dir_stack: Vec<String>,
    /// `trap` actions by condition (`EXIT`, `ERR`, `INT`, ...); an empty one ignores it.
    pub traps: BTreeMap<String, String>,
    /// A trap's action is running (an `ERR` inside it does not trigger another).
    pub in_trap: bool,
    /// `shopt` options that are on.
    pub shopts: std::collections::BTreeSet<String>,
    /// The streams of the command being expanded (for command substitution).
    pub cur_io: Io,
    /// Depth of conditions being evaluated (`set -e` does not apply inside them).
    pub in_condition: usize,
    pub loop_depth: usize,
    pub cwd: String,
    /// Status of the last command substitution of the command being expanded.
    pub subst_status: Option<i32>,
    /// Reading commands from a terminal (`sh -i`): polls for Ctrl-C between commands.
    pub interactive: bool,
    /// While expanding `${a[@]%x}` and the like: the element being transformed.
    pub element_override: Option<String>,
    /// `getopts`: position inside a cluster of options (`-abc`) and the OPTIND it set.
    pub getopts_char: usize,
    pub getopts_last: Option<usize>,
    /// Array assignments that are arguments of `local`/`declare` (`local a=(x y)`), done
    /// after the builtin has declared the names.
    pub pending_arrays: Vec<ast::Assignment>,
    /// The script file this shell runs (`bash s.sh`), which its messages name.
    pub script: Option<String>,
    /// Variables with the integer attribute (`declare -i`): assignments to them are
    /// arithmetic, `+=` adds.
    pub integers: std::collections::HashSet<String, BuildHasherDefault<Fnv>>,
    /// `alias` definitions (listed, not expanded: bash expands none without a terminal).
    pub aliases: BTreeMap<String, String>,
    /// `umask`.
    pub umask: u32,
    /// Output descriptors above 2 (`exec 3> file`).
    pub fds: BTreeMap<i32, Out>,
    /// The streams `exec` without a command redirected, and how many times it did so:
    /// every list running at the time goes on with them.
    pub exec_io: Option<Io>,
    pub exec_gen: u64,
    /// Files standing for `<(cmd)` and `>(cmd)` of the command being run.
    pub psubs: Vec<PSub>,
}

/// A process substitution: a file in `/tmp` holding the output of `<(cmd)`, or collecting
/// the input of `>(cmd)` (which runs when the command that wrote it is done).
#[derive(Clone)]
pub enum PSub {
    Input(String),
    Output(String, ast::SubshellCommand),
}

/// A child started but not finished: bytes still to feed it and output still to collect.
pub struct Launched {
    pid: u32,
    feeds: Vec<(u32, Rc<Feed>)>,
    drains: Vec<(u32, Rc<RefCell<Vec<u8>>>)>,
}

pub fn parser_options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions::default()
}

pub fn parse(script: &str) -> Result<ast::Program, String> {
    parse_or_incomplete(script)
        .map_err(|e| e.unwrap_or_else(|| "syntax error: unexpected end of file".into()))
}

/// Parses a script; `Err(None)` when it is incomplete (an open quote, `if` without `fi`,
/// ...), so an interactive shell reads another line.
pub fn parse_or_incomplete(script: &str) -> Result<ast::Program, Option<String>> {
    let mut parser = brush_parser::Parser::new(std::io::Cursor::new(script), &parser_options());
    parser.parse_program().map_err(|e| match &e {
        brush_parser::ParseError::ParsingAtEndOfInput => None,
        brush_parser::ParseError::Tokenizing { inner, .. }
            if inner.to_string().contains("unterminated") =>
        {
            None
        }
        _ => Some(syntax_error_message(script, &e)),
    })
}

/// bash-like text for a parse error: the line and the token the parser stopped at.
fn syntax_error_message(script: &str, e: &brush_parser::ParseError) -> String {
    match e {
        brush_parser::ParseError::ParsingNear(pos) => {
            let line = script.lines().nth(pos.line.saturating_sub(1)).unwrap_or("");
            let rest: String = line.chars().skip(pos.column.saturating_sub(1)).collect();
            let token: String = rest
                .split_whitespace()
                .next()
                .unwrap_or("newline")
                .to_string();
            format!(
                "line {}: syntax error near unexpected token `{token}'",
                pos.line
            )
        }
        brush_parser::ParseError::ParsingAtEndOfInput => {
            "syntax error: unexpected end of file".to_string()
        }
        other => format!("syntax error: {other}"),
    }
}

pub const BUILTINS: &[&str] = &[
    ":",
    ".",
    "[",
    "break",
    "cd",
    "command",
    "continue",
    "echo",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "local",
    "printf",
    "pwd",
    "read",
    "readonly",
    "return",
    "set",
    "shift",
    "source",
    "test",
    "true",
    "type",
    "unset",
    "wait",
    "kill",
    "hash",
    "trap",
    "shopt",
    "declare",
    "typeset",
    "mapfile",
    "readarray",
    "getopts",
    "let",
    "alias",
    "unalias",
    "umask",
    "times",
    "ulimit",
    "builtin",
    "pushd",
    "popd",
    "dirs",
    "jobs",
    "disown",
    "fg",
    "bg",
    "compgen",
];

impl Shell {
    pub fn new(arg0: String, positional: Vec<String>) -> Shell {
        // The environment, a dozen variables of the shell's own, and room for a script's.
        let mut vars = Table::with_capacity_and_hasher(64, Default::default());
        for (k, v) in std::env::vars() {
            vars.insert(
                k,
                Var {
                    value: v,
                    exported: true,
                    array: None,
                    nameref: None,
                },
            );
        }
        // The directory the host started this shell in; an inherited PWD that names
        // another (a parent that changed directory and kept its environment, as `make -C`
        // or Python's `subprocess` with `cwd=` do) is not taken over it.
        let cwd = guest_support::cwd();
        vars.insert(
            "PWD".into(),
            Var {
                value: cwd.clone(),
                exported: true,
                array: None,
                nameref: None,
            },
        );
        for (k, v) in [
            ("IFS", " \t\n"),
            ("PS1", "$ "),
            ("PS2", "> "),
            ("OPTIND", "1"),
        ] {
            vars.entry(k.to_string()).or_insert(Var {
                value: v.to_string(),
                ..Var::default()
            });
        }
        // bash's own variables, which scripts test (`${BASH_VERSINFO[0]} -ge 4`, `$EUID -ne
        // 0`, `$OSTYPE == linux*`): the bash level this shell implements, the machine as
        // `uname` reports it, and the user as `id` does.
        for (k, v) in [
            ("BASH", "/bin/bash"),
            ("BASH_VERSION", BASH_VERSION),
            ("OSTYPE", "linux-gnu"),
            ("HOSTTYPE", "wasm32"),
            ("MACHTYPE", "wasm32-unknown-linux-gnu"),
            ("UID", "0"),
            ("EUID", "0"),
        ] {
            vars.insert(
                k.to_string(),
                Var {
                    value: v.to_string(),
                    ..Var::default()
                },
            );
        }
        vars.insert(
            "BASH_VERSINFO".to_string(),
            Var {
                array: Some(Array::Indexed(
                    ["5", "2", "0", "1", "release", "wasm32-unknown-linux-gnu"]
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (i as i64, v.to_string()))
                        .collect(),
                )),
                ..Var::default()
            },
        );
        // Each shell one level deeper than the one that started it.
        let level = vars
            .get("SHLVL")
            .and_then(|v| v.value.trim().parse::<i64>().ok())
            .unwrap_or(0);
        vars.insert(
            "SHLVL".to_string(),
            Var {
                value: (level.max(0) + 1).to_string(),
                exported: true,
                ..Var::default()
            },
        );
        Shell {
            vars,
            rng: std::cell::Cell::new(0),
            pid: std::cell::Cell::new(0),
            started: std::time::Instant::now(),
            lineno: 0,
            line_offset: 0,
            positional,
            arg0,
            last_status: 0,
            functions: Table::default(),
            opts: Opts::default(),
            locals: Vec::new(),
            background: Vec::new(),
            last_background: None,
            job_text: HashMap::new(),
            dir_stack: Vec::new(),
            traps: BTreeMap::new(),
            in_trap: false,
            shopts: [
                "checkwinsize",
                "cmdhist",
                "expand_aliases",
                "interactive_comments",
                "progcomp",
                "promptvars",
                "sourcepath",
                "complete_fullquote",
                "extquote",
                "force_fignore",
                "hostcomplete",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            cur_io: Io::standard(),
            in_condition: 0,
            loop_depth: 0,
            cwd,
            subst_status: None,
            interactive: false,
            element_override: None,
            getopts_char: 0,
            getopts_last: None,
            pending_arrays: Vec::new(),
            script: None,
            integers: Default::default(),
            aliases: BTreeMap::new(),
            umask: 0o022,
            fds: BTreeMap::new(),
            exec_io: None,
            exec_gen: 0,
            psubs: Vec::new(),
        }
    }
}

/// The text a shell prints for an I/O error.
pub fn io_message(e: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        NotFound => "No such file or directory".into(),
        PermissionDenied => "Permission denied".into(),
        IsADirectory => "Is a directory".into(),
        NotADirectory => "Not a directory".into(),
        AlreadyExists => "File exists".into(),
        DirectoryNotEmpty => "Directory not empty".into(),
        _ => {
            // WASI reports a path outside every preopened directory as "not capable".
            let s = e.to_string();
            if s.contains("apabilit") {
                "Permission denied".into()
            } else {
                s.split(" (os error").next().unwrap_or(&s).to_string()
            }
        }
    }
}
