//! The interpreter: walks brush-parser's AST with POSIX sh / bash semantics. Programs that
//! are not builtins or functions run as child processes through the process host.

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
use guest_support::process::{self, Command as ChildCommand, Error as SpawnError, Stdio};

use crate::io::{Feed, In, Io, Out};

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

    // -- variables --------------------------------------------------------------------

    /// Whether the `shopt` option `name` is on.
    pub fn shopt(&self, name: &str) -> bool {
        self.shopts.contains(name)
    }

    /// bash's variables whose value changes by itself: `RANDOM` (0..32767, a new one at
    /// each use), `SRANDOM` (32 bits), `SECONDS` (since the shell started),
    /// `EPOCHSECONDS`, `EPOCHREALTIME`, `LINENO` (the line the running command starts on,
    /// whatever was assigned to it, as in bash). An assignment makes one an ordinary variable.
    fn dynamic_var(&self, name: &str) -> Option<String> {
        if !matches!(
            name,
            "RANDOM"
                | "SRANDOM"
                | "SECONDS"
                | "EPOCHSECONDS"
                | "EPOCHREALTIME"
                | "LINENO"
                | "BASHPID"
                | "PPID"
        ) || (name != "LINENO" && self.vars.contains_key(name))
        {
            return None;
        }
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
        };
        Some(match name {
            "RANDOM" => (self.next_random() % 32768).to_string(),
            "SRANDOM" => (self.next_random() as u32).to_string(),
            "SECONDS" => self.started.elapsed().as_secs().to_string(),
            "EPOCHSECONDS" => now().as_secs().to_string(),
            "LINENO" => self.lineno.to_string(),
            "BASHPID" => self.pid().to_string(),
            "PPID" => {
                let me = self.pid();
                process::processes()
                    .into_iter()
                    .find(|p| p.pid == me)
                    .map_or(0, |p| p.ppid)
                    .to_string()
            }
            _ => {
                let t = now();
                format!("{}.{:06}", t.as_secs(), t.subsec_micros())
            }
        })
    }

    /// This shell's pid in the sandbox (`$$`; asked once).
    pub fn pid(&self) -> u32 {
        if self.pid.get() == 0 {
            self.pid.set(process::self_pid().max(1));
        }
        self.pid.get()
    }

    fn next_random(&self) -> u64 {
        let mut x = self.rng.get();
        if x == 0 {
            x = random_seed();
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 16
    }

    /// The variable a name stands for: itself, or what its `-n` reference names (a chain
    /// of at most 8).
    pub fn resolve_ref(&self, name: &str) -> String {
        let mut cur = name;
        for _ in 0..8 {
            match self.vars.get(cur).and_then(|v| v.nameref.as_deref()) {
                Some(next) => cur = next,
                None => break,
            }
        }
        cur.to_string()
    }

    pub fn get_var(&self, name: &str) -> Option<String> {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        if let Some(v) = self.dynamic_var(name) {
            return Some(v);
        }
        let v = self.vars.get(name)?;
        match &v.array {
            None => Some(v.value.clone()),
            Some(Array::Indexed(m)) => m.get(&0).cloned(),
            Some(Array::Assoc(m)) => m.get("0").cloned(),
        }
    }

    pub fn set_var(&mut self, name: &str, value: String) {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        match self.vars.get_mut(name) {
            Some(Var {
                array: Some(Array::Indexed(m)),
                ..
            }) => {
                m.insert(0, value);
            }
            Some(Var {
                array: Some(Array::Assoc(m)),
                ..
            }) => {
                m.insert("0".into(), value);
            }
            Some(v) => v.value = value,
            None => {
                self.vars.insert(
                    name.to_string(),
                    Var {
                        value,
                        ..Var::default()
                    },
                );
            }
        }
    }

    /// The array `name` (a scalar is a one-element array; unset is `None`).
    pub fn array(&self, name: &str) -> Option<Array> {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        let v = self.vars.get(name)?;
        Some(match &v.array {
            Some(a) => a.clone(),
            None => Array::Indexed(BTreeMap::from([(0, v.value.clone())])),
        })
    }

    pub fn is_assoc(&self, name: &str) -> bool {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        matches!(
            self.vars.get(name),
            Some(Var {
                array: Some(Array::Assoc(_)),
                ..
            })
        )
    }

    /// Replaces `name` with an array (keeping its export flag).
    pub fn set_array(&mut self, name: &str, array: Array) {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        let v = self.vars.entry(name.to_string()).or_default();
        v.value.clear();
        v.array = Some(array);
    }

    /// Makes `name` an array if it is not one (a scalar becomes element 0).
    fn array_mut(&mut self, name: &str, assoc: bool) -> &mut Array {
        let v = self.vars.entry(name.to_string()).or_default();
        if v.array.is_none() {
            let old = std::mem::take(&mut v.value);
            v.array = Some(if assoc {
                Array::Assoc(BTreeMap::new())
            } else {
                let mut m = BTreeMap::new();
                if !old.is_empty() {
                    m.insert(0, old);
                }
                Array::Indexed(m)
            });
        }
        v.array.as_mut().unwrap()
    }

    /// Sets one element; `key` is already resolved (a number for indexed arrays).
    pub fn set_elem(&mut self, name: &str, key: &str, value: String) {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        let assoc = self.is_assoc(name);
        match self.array_mut(name, assoc) {
            Array::Indexed(m) => {
                m.insert(key.parse().unwrap_or(0), value);
            }
            Array::Assoc(m) => {
                m.insert(key.to_string(), value);
            }
        }
    }

    pub fn get_elem(&self, name: &str, key: &str) -> Option<String> {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        match &self.vars.get(name)?.array {
            Some(Array::Indexed(m)) => m.get(&key.parse().ok()?).cloned(),
            Some(Array::Assoc(m)) => m.get(key).cloned(),
            None => (key == "0").then(|| self.get_var(name)).flatten(),
        }
    }

    pub fn unset_elem(&mut self, name: &str, key: &str) {
        if let Some(v) = self.vars.get_mut(name) {
            match &mut v.array {
                Some(Array::Indexed(m)) => {
                    if let Ok(k) = key.parse() {
                        m.remove(&k);
                    }
                }
                Some(Array::Assoc(m)) => {
                    m.remove(key);
                }
                None if key == "0" => {
                    self.vars.remove(name);
                }
                None => {}
            }
        }
    }

    pub fn export(&mut self, name: &str) {
        self.vars.entry(name.to_string()).or_default().exported = true;
    }

    pub fn unset_var(&mut self, name: &str) {
        self.vars.remove(name);
    }

    /// Declares `name` local to the running function.
    pub fn make_local(&mut self, name: &str) {
        if let Some(frame) = self.locals.last_mut()
            && !frame.iter().any(|(n, _)| n == name)
        {
            frame.push((name.to_string(), self.vars.get(name).cloned()));
        }
    }

    /// The environment of a child: exported variables, then `extra`, and `PWD`.
    fn child_env(&self, extra: &[(String, String)]) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .vars
            .iter()
            .filter(|(k, v)| v.exported && k.as_str() != "PWD")
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect();
        for (k, v) in extra {
            env.retain(|(key, _)| key != k);
            env.push((k.clone(), v.clone()));
        }
        env.push(("PWD".to_string(), self.cwd.clone()));
        env
    }

    /// An absolute sandbox path for `p`.
    pub fn abs_path(&self, p: &str) -> String {
        if p.starts_with('/') {
            p.to_string()
        } else if self.cwd.ends_with('/') {
            format!("{}{p}", self.cwd)
        } else {
            format!("{}/{p}", self.cwd)
        }
    }

    pub fn error(&self, io: &Io, msg: &str) {
        let line = match &self.script {
            // bash names a script and the line: `s.sh: line 2: cd: /x: No such file ...`.
            Some(script) if self.lineno > 0 => format!("{script}: line {}: {msg}\n", self.lineno),
            Some(script) => format!("{script}: {msg}\n"),
            None => format!("{}: {msg}\n", self.name()),
        };
        io.stderr.write_str(&line);
    }

    pub fn name(&self) -> &str {
        match self.arg0.rsplit('/').next() {
            Some("bash") => "bash",
            _ => "sh",
        }
    }

    // -- running ----------------------------------------------------------------------

    pub fn run_program(&mut self, program: &ast::Program, io: &Io) -> Status {
        let mut status = 0;
        let mut io = io.clone();
        for cc in &program.complete_commands {
            let generation = self.exec_gen;
            status = self.run_list(cc, &io)?;
            if self.exec_gen != generation
                && let Some(new) = &self.exec_io
            {
                io = new.clone();
            }
        }
        Ok(status)
    }

    pub fn run_script(&mut self, script: &str, io: &Io) -> Status {
        match parse(script) {
            Ok(p) => self.run_program(&p, io),
            Err(msg) => {
                self.error(io, &msg);
                Ok(2)
            }
        }
    }

    pub fn run_list(&mut self, list: &ast::CompoundList, io: &Io) -> Status {
        let mut status = 0;
        let mut io = io.clone();
        for ast::CompoundListItem(and_or, sep) in &list.0 {
            if self.interactive && process::take_interrupt() {
                return Err(Ctl::Interrupt);
            }
            let generation = self.exec_gen;
            status = match sep {
                ast::SeparatorOperator::Async => self.run_async(and_or, &io)?,
                ast::SeparatorOperator::Sequence => self.run_and_or(and_or, &io)?,
            };
            self.last_status = status;
            if self.exec_gen != generation
                && let Some(new) = &self.exec_io
            {
                io = new.clone();
            }
        }
        Ok(status)
    }

    /// `cmd &`: a lone external command runs in the background as itself; anything else
    /// (a subshell, a group, a loop, a pipeline, a function, `a && b`) runs in the
    /// background in a new shell process that gets this shell's functions, variables and
    /// options first, as a fork would.
    fn run_async(&mut self, and_or: &ast::AndOrList, io: &Io) -> Status {
        if and_or.additional.is_empty()
            && and_or.first.seq.len() == 1
            && !and_or.first.bang
            && let ast::Command::Simple(simple) = &and_or.first.seq[0]
        {
            if let Some(prepared) = self.prepare_simple(simple, io)? {
                if let Prepared::External { argv, env, io: cio } = prepared {
                    match self.launch(&argv, &env, &cio) {
                        Ok(l) => {
                            self.finish_feeds(&l);
                            self.add_job(l.pid, and_or);
                            return Ok(0);
                        }
                        Err(status) => return Ok(status),
                    }
                }
                return self.run_prepared(prepared);
            }
            return Ok(self.last_status);
        }
        let mut argv = vec![
            "sh".to_string(),
            "-c".to_string(),
            self.fork_script(and_or),
            self.arg0.clone(),
        ];
        argv.extend(self.positional.iter().cloned());
        match self.launch(&argv, &[], io) {
            Ok(l) => {
                self.finish_feeds(&l);
                self.add_job(l.pid, and_or);
                Ok(0)
            }
            // No process to run it in (the sandbox's limits): run it now rather than not.
            Err(_) => self.run_and_or(and_or, io),
        }
    }

    /// Records a job started in the background: `$!`, `wait`, `jobs`.
    fn add_job(&mut self, pid: u32, and_or: &ast::AndOrList) {
        let background = &self.background;
        self.job_text.retain(|p, _| background.contains(p));
        self.background.push(pid);
        self.last_background = Some(pid);
        // The parser's text of the list, on one line as `jobs` shows it.
        let text = and_or.to_string();
        let words: Vec<&str> = text.split_whitespace().collect();
        self.job_text.insert(pid, format!("{} &", words.join(" ")));
    }

    /// A script that recreates this shell's state (options, unexported variables,
    /// functions; exported variables travel in the environment) and then runs `and_or`.
    fn fork_script(&self, and_or: &ast::AndOrList) -> String {
        use crate::builtins::quote;
        let mut s = String::new();
        for (on, flag) in [
            (self.opts.errexit, "-e"),
            (self.opts.nounset, "-u"),
            (self.opts.xtrace, "-x"),
            (self.opts.noglob, "-f"),
            (self.opts.noclobber, "-C"),
        ] {
            if on {
                s.push_str(&format!("set {flag}\n"));
            }
        }
        if self.opts.pipefail {
            s.push_str("set -o pipefail\n");
        }
        let mut names: Vec<&String> = self.vars.keys().collect();
        names.sort();
        for name in names {
            let var = &self.vars[name];
            let plain = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !plain || (var.exported && var.array.is_none()) {
                continue;
            }
            match &var.array {
                None => s.push_str(&format!("{name}={}\n", quote(&var.value))),
                Some(Array::Indexed(m)) => {
                    let items: Vec<String> = m
                        .iter()
                        .map(|(k, v)| format!("[{k}]={}", quote(v)))
                        .collect();
                    s.push_str(&format!("{name}=({})\n", items.join(" ")));
                }
                Some(Array::Assoc(m)) => {
                    let items: Vec<String> = m
                        .iter()
                        .map(|(k, v)| format!("[{}]={}", quote(k), quote(v)))
                        .collect();
                    s.push_str(&format!("declare -A {name}=({})\n", items.join(" ")));
                }
            }
        }
        let mut functions: Vec<_> = self.functions.iter().collect();
        functions.sort_by(|a, b| a.0.cmp(b.0));
        for (name, body) in functions {
            s.push_str(&format!("{name} () {}", body.0));
            if let Some(r) = &body.1 {
                s.push_str(&redirects_text(r));
            }
            s.push('\n');
        }
        s.push_str(&and_or_text(and_or));
        s.push('\n');
        s
    }

    fn run_and_or(&mut self, list: &ast::AndOrList, io: &Io) -> Status {
        let has_more = !list.additional.is_empty();
        if has_more {
            self.in_condition += 1;
        }
        let first = self.run_pipeline(&list.first, io);
        let mut status = match first {
            Ok(s) => s,
            Err(e) => {
                if has_more {
                    self.in_condition -= 1;
                }
                return Err(e);
            }
        };
        let n = list.additional.len();
        for (i, next) in list.additional.iter().enumerate() {
            self.last_status = status;
            let last = i + 1 == n;
            if last {
                self.in_condition -= 1;
            }
            let (run, pipeline) = match next {
                ast::AndOr::And(p) => (status == 0, p),
                ast::AndOr::Or(p) => (status != 0, p),
            };
            if run {
                match self.run_pipeline(pipeline, io) {
                    Ok(s) => status = s,
                    Err(e) => {
                        if !last {
                            self.in_condition -= 1;
                        }
                        return Err(e);
                    }
                }
            } else if last {
                // A skipped last command leaves the earlier status, and `set -e` ignores it.
                self.last_status = status;
                return Ok(status);
            }
        }
        self.last_status = status;
        if status != 0 && self.in_condition == 0 {
            self.run_trap("ERR", io)?;
        }
        self.check_errexit(status)?;
        Ok(status)
    }

    /// Runs the `trap` action for `condition`, if there is one, keeping `$?`; an `exit`
    /// in it ends the shell.
    pub fn run_trap(&mut self, condition: &str, io: &Io) -> Result<(), Ctl> {
        if self.in_trap {
            return Ok(());
        }
        let Some(action) = self.traps.get(condition).filter(|a| !a.is_empty()).cloned() else {
            return Ok(());
        };
        self.in_trap = true;
        let saved = self.last_status;
        let result = self.run_script(&action, io);
        self.in_trap = false;
        self.last_status = saved;
        match result {
            Err(Ctl::Exit(s)) => Err(Ctl::Exit(s)),
            _ => Ok(()),
        }
    }

    /// The end of the shell with `status`: the `EXIT` trap runs once (its `exit` replaces
    /// the status).
    pub fn end_shell(&mut self, status: i32, io: &Io) -> i32 {
        self.last_status = status;
        let Some(action) = self.traps.remove("EXIT").filter(|a| !a.is_empty()) else {
            return status;
        };
        self.in_trap = true;
        match self.run_script(&action, io) {
            Err(Ctl::Exit(s)) => s,
            _ => status,
        }
    }

    /// What an expansion error does: ends a non-interactive shell (status 1, as in bash);
    /// abandons the command line of an interactive one.
    pub fn expansion_failed(&self) -> Ctl {
        if self.interactive {
            Ctl::Abandon(1)
        } else {
            Ctl::Exit(1)
        }
    }

    fn check_errexit(&self, status: i32) -> Result<(), Ctl> {
        if status != 0 && self.opts.errexit && self.in_condition == 0 {
            return Err(Ctl::Exit(status));
        }
        Ok(())
    }

    fn run_pipeline(&mut self, p: &ast::Pipeline, io: &Io) -> Status {
        let Some(timed) = &p.timed else {
            return self.run_untimed(p, io);
        };
        // `time PIPELINE`: the report goes to the shell's stderr, not the pipeline's.
        let mark = crate::timing::Mark::now();
        let result = self.run_untimed(p, io);
        let format = self.vars.get("TIMEFORMAT").map(|v| v.value.clone());
        if let Some(report) = mark.report(timed.is_posix_output(), format.as_deref()) {
            io.stderr.write_str(&report);
        }
        result
    }

    fn run_untimed(&mut self, p: &ast::Pipeline, io: &Io) -> Status {
        if let Some(span) = brush_parser::ast::SourceLocation::location(p) {
            self.lineno = self.line_offset + span.start.line;
        }
        if p.bang {
            self.in_condition += 1;
        }
        let result = if p.seq.len() == 1 {
            self.run_command(&p.seq[0], io)
        } else {
            self.run_multi(&p.seq, io)
        };
        if p.bang {
            self.in_condition -= 1;
        }
        let status = result?;
        if p.seq.len() == 1 {
            self.set_pipestatus(&[status]);
        }
        let status = if p.bang { (status == 0) as i32 } else { status };
        self.last_status = status;
        Ok(status)
    }

    /// `PIPESTATUS`: the exit status of each command of the last pipeline.
    fn set_pipestatus(&mut self, statuses: &[i32]) {
        let m = statuses
            .iter()
            .enumerate()
            .map(|(i, s)| (i as i64, s.to_string()))
            .collect();
        self.set_array("PIPESTATUS", Array::Indexed(m));
    }

    /// A pipeline of two or more commands. External stages run concurrently as children;
    /// in-shell stages (builtins, functions, compound commands) run in a copy of the shell,
    /// one after another, after every external stage has started.
    fn run_multi(&mut self, seq: &[ast::Command], io: &Io) -> Status {
        let n = seq.len();
        let mut pipes: Vec<(u32, u32)> = Vec::new();
        for _ in 1..n {
            pipes.push(process::pipe());
        }
        let stage_io = |i: usize| Io {
            stdin: if i == 0 {
                io.stdin.clone()
            } else {
                In::Handle(pipes[i - 1].0)
            },
            stdout: if i + 1 == n {
                io.stdout.clone()
            } else {
                Out::Handle(pipes[i].1)
            },
            stderr: io.stderr.clone(),
        };
        let mut launched: Vec<Option<Launched>> = Vec::new();
        let mut statuses: Vec<Option<i32>> = vec![None; n];
        let mut in_shell: Vec<usize> = Vec::new();
        let mut stage_psubs = Vec::new();
        for (i, cmd) in seq.iter().enumerate() {
            let sio = stage_io(i);
            let mut external = None;
            if let ast::Command::Simple(simple) = cmd {
                let mut sub = self.clone();
                sub.psubs.clear();
                if let Ok(Some(Prepared::External { argv, env, io: cio })) =
                    sub.prepare_simple(simple, &sio)
                {
                    external = Some(sub.launch(&argv, &env, &cio));
                }
                stage_psubs.push((sub.psubs, sio.clone()));
            }
            match external {
                Some(Ok(l)) => launched.push(Some(l)),
                Some(Err(status)) => {
                    statuses[i] = Some(status);
                    launched.push(None);
                }
                None => {
                    in_shell.push(i);
                    launched.push(None);
                }
            }
        }
        // The shell keeps only the pipe ends its own stages use.
        for (i, (r, w)) in pipes.iter().enumerate() {
            if !in_shell.contains(&i) {
                process::close(*w);
            }
            if !in_shell.contains(&(i + 1)) {
                process::close(*r);
            }
        }
        for l in launched.iter().flatten() {
            self.finish_feeds(l);
        }
        for &i in &in_shell {
            let mut sub = self.clone();
            let status = match sub.run_command(&seq[i], &stage_io(i)) {
                Ok(s) | Err(Ctl::Exit(s)) | Err(Ctl::Return(s)) => s,
                Err(_) => 0,
            };
            statuses[i] = Some(status);
            if i + 1 < n {
                process::close(pipes[i].1);
            }
            if i > 0 {
                process::close(pipes[i - 1].0);
            }
        }
        for (i, l) in launched.into_iter().enumerate() {
            if let Some(l) = l {
                statuses[i] = Some(self.finish(l));
            }
        }
        for (psubs, sio) in stage_psubs {
            let mark = self.psubs.len();
            self.psubs.extend(psubs);
            self.finish_psubs(mark, &sio);
        }
        let statuses: Vec<i32> = statuses.into_iter().map(|s| s.unwrap_or(0)).collect();
        self.set_pipestatus(&statuses);
        let last = *statuses.last().unwrap_or(&0);
        if self.opts.pipefail
            && let Some(&s) = statuses.iter().rev().find(|&&s| s != 0)
        {
            return Ok(s);
        }
        Ok(last)
    }

    pub fn run_command(&mut self, cmd: &ast::Command, io: &Io) -> Status {
        let mark = self.psubs.len();
        let r = self.run_command_inner(cmd, io);
        self.finish_psubs(mark, io);
        r
    }

    fn run_command_inner(&mut self, cmd: &ast::Command, io: &Io) -> Status {
        match cmd {
            ast::Command::Simple(simple) => match self.prepare_simple(simple, io)? {
                Some(prepared) => self.run_prepared(prepared),
                None => Ok(self.last_status),
            },
            ast::Command::Compound(compound, redirects) => {
                let io = match redirects {
                    Some(r) => match self.apply_redirects(&r.0, io, true) {
                        Ok(io) => io,
                        Err(msg) => {
                            self.error(io, &msg);
                            return Ok(1);
                        }
                    },
                    None => io.clone(),
                };
                self.run_compound(compound, &io)
            }
            ast::Command::Function(def) => {
                let name = def.fname.value.clone();
                self.functions.insert(name, Rc::new(def.body.clone()));
                Ok(0)
            }
            ast::Command::ExtendedTest(test, redirects) => {
                let io = match redirects {
                    Some(r) => match self.apply_redirects(&r.0, io, true) {
                        Ok(io) => io,
                        Err(msg) => {
                            self.error(io, &msg);
                            return Ok(1);
                        }
                    },
                    None => io.clone(),
                };
                self.cur_io = io.clone();
                match crate::test::extended(self, &test.expr) {
                    Ok(true) => Ok(0),
                    Ok(false) => Ok(1),
                    Err(msg) => {
                        self.error(&io, &msg);
                        Ok(2)
                    }
                }
            }
        }
    }

    fn run_compound(&mut self, c: &ast::CompoundCommand, io: &Io) -> Status {
        use ast::CompoundCommand as C;
        match c {
            C::BraceGroup(g) => self.run_list(&g.list, io),
            C::Subshell(s) => {
                let mut sub = self.clone();
                let status = match sub.run_list(&s.list, io) {
                    Ok(s) | Err(Ctl::Exit(s)) | Err(Ctl::Return(s)) => s,
                    Err(_) => sub.last_status,
                };
                if sub.cwd != self.cwd {
                    let _ = std::env::set_current_dir(&self.cwd);
                }
                Ok(status)
            }
            C::IfClause(ifc) => {
                if self.condition(&ifc.condition, io)? {
                    return self.run_list(&ifc.then, io);
                }
                for e in ifc.elses.iter().flatten() {
                    match &e.condition {
                        Some(cond) => {
                            if self.condition(cond, io)? {
                                return self.run_list(&e.body, io);
                            }
                        }
                        None => return self.run_list(&e.body, io),
                    }
                }
                Ok(0)
            }
            C::WhileClause(w) => self.run_loop(&w.0, &w.1.list, io, true),
            C::UntilClause(w) => self.run_loop(&w.0, &w.1.list, io, false),
            C::ForClause(f) => {
                let values = match &f.values {
                    Some(words) => {
                        self.cur_io = io.clone();
                        let mut v = Vec::new();
                        for w in words {
                            v.extend(self.expand_word(&w.value)?);
                        }
                        v
                    }
                    None => self.positional.clone(),
                };
                self.in_loop(|sh| {
                    let mut status = 0;
                    for v in values {
                        sh.set_var(&f.variable_name, v);
                        if let Next::Stop = sh.loop_body(&f.body.list, io, &mut status)? {
                            break;
                        }
                    }
                    Ok(status)
                })
            }
            C::ArithmeticForClause(f) => self.in_loop(|sh| {
                let mut status = 0;
                if let Some(init) = &f.initializer {
                    sh.arith(&init.value, io)?;
                }
                loop {
                    if let Some(cond) = &f.condition
                        && sh.arith(&cond.value, io)? == 0
                    {
                        break;
                    }
                    if let Next::Stop = sh.loop_body(&f.body.list, io, &mut status)? {
                        break;
                    }
                    if let Some(upd) = &f.updater {
                        sh.arith(&upd.value, io)?;
                    }
                }
                Ok(status)
            }),
            C::CaseClause(case) => {
                self.cur_io = io.clone();
                let value = self.expand_single(&case.value.value)?;
                let mut i = 0;
                let mut status = 0;
                let mut fall_through = false;
                while i < case.cases.len() {
                    let item = &case.cases[i];
                    let mut matched = fall_through;
                    if !matched {
                        for p in &item.patterns {
                            let pat = self.expand_pattern(&p.value)?;
                            if crate::pattern::matches(&pat, &value) {
                                matched = true;
                                break;
                            }
                        }
                    }
                    if matched {
                        if let Some(cmd) = &item.cmd {
                            status = self.run_list(cmd, io)?;
                        }
                        match item.post_action {
                            ast::CaseItemPostAction::ExitCase => return Ok(status),
                            ast::CaseItemPostAction::UnconditionallyExecuteNextCaseItem => {
                                fall_through = true
                            }
                            ast::CaseItemPostAction::ContinueEvaluatingCases => {
                                fall_through = false
                            }
                        }
                    }
                    i += 1;
                }
                Ok(status)
            }
            C::Arithmetic(a) => Ok((self.arith(&a.expr.value, io)? == 0) as i32),
            C::Coprocess(_) => {
                self.error(io, "coproc: not supported");
                Ok(2)
            }
        }
    }

    /// Evaluates an arithmetic expression after expanding parameters in it.
    fn arith(&mut self, text: &str, io: &Io) -> Result<i64, Ctl> {
        self.cur_io = io.clone();
        let expanded = self.expand_arith_text(text)?;
        match crate::arith::eval_str(self, &expanded) {
            Ok(v) => Ok(v),
            Err(msg) => {
                // An arithmetic error ends a non-interactive shell, as in bash.
                self.error(io, &msg);
                Err(self.expansion_failed())
            }
        }
    }

    fn condition(&mut self, list: &ast::CompoundList, io: &Io) -> Result<bool, Ctl> {
        self.in_condition += 1;
        let r = self.run_list(list, io);
        self.in_condition -= 1;
        Ok(r? == 0)
    }

    fn run_loop(
        &mut self,
        cond: &ast::CompoundList,
        body: &ast::CompoundList,
        io: &Io,
        while_: bool,
    ) -> Status {
        self.in_loop(|sh| {
            let mut status = 0;
            while sh.condition(cond, io)? == while_ {
                if let Next::Stop = sh.loop_body(body, io, &mut status)? {
                    break;
                }
            }
            Ok(status)
        })
    }

    /// Runs `f` as a loop (so `break` and `continue` inside it mean this loop).
    fn in_loop(&mut self, f: impl FnOnce(&mut Self) -> Status) -> Status {
        self.loop_depth += 1;
        let result = f(self);
        self.loop_depth -= 1;
        result
    }

    /// Runs a loop's body once. `break`/`continue` of this loop become a [`Next`]; those
    /// naming an outer loop go on up with one level less.
    fn loop_body(
        &mut self,
        body: &ast::CompoundList,
        io: &Io,
        status: &mut i32,
    ) -> Result<Next, Ctl> {
        match self.run_list(body, io) {
            Ok(s) => {
                *status = s;
                Ok(Next::Go)
            }
            Err(Ctl::Break(n)) if n > 1 => Err(Ctl::Break(n - 1)),
            Err(Ctl::Break(_)) => Ok(Next::Stop),
            Err(Ctl::Continue(n)) if n > 1 => Err(Ctl::Continue(n - 1)),
            Err(Ctl::Continue(_)) => Ok(Next::Go),
            Err(e) => Err(e),
        }
    }

    // -- simple commands ----------------------------------------------------------------

    /// Expands a simple command and applies its redirections. `None` when it was only
    /// assignments or redirections (already done).
    fn prepare_simple(
        &mut self,
        cmd: &ast::SimpleCommand,
        io: &Io,
    ) -> Result<Option<Prepared>, Ctl> {
        self.cur_io = io.clone();
        let mut assigns: Vec<(String, String)> = Vec::new();
        let mut redirects: Vec<&ast::IoRedirect> = Vec::new();
        for item in cmd.prefix.iter().flat_map(|p| p.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, _) => {
                    if !self.assign_array_forms(a)? {
                        let (name, value) = self.expand_assignment(a)?;
                        if cmd.word_or_name.is_none() {
                            // Assignments alone take effect one by one, left to right:
                            // `IFS=, a=(...)` splits the array's words with the new IFS.
                            self.set_var(&name, value);
                        } else {
                            assigns.push((name, value));
                        }
                    }
                }
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => redirects.push(r),
                ast::CommandPrefixOrSuffixItem::Word(w) => {
                    // Should not happen in a prefix; treat as a word.
                    let _ = w;
                }
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {}
            }
        }
        let mut argv: Vec<String> = Vec::new();
        if let Some(w) = &cmd.word_or_name {
            argv.extend(self.expand_word(&w.value)?);
        }
        for item in cmd.suffix.iter().flat_map(|s| s.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::Word(w) => argv.extend(self.expand_word(&w.value)?),
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                    let array = matches!(a.value, ast::AssignmentValue::Array(_))
                        || matches!(a.name, ast::AssignmentName::ArrayElementName(..));
                    if array {
                        // `local a=(x y)`: the builtin declares `a`, then it is assigned.
                        let name = match &a.name {
                            ast::AssignmentName::VariableName(n)
                            | ast::AssignmentName::ArrayElementName(n, _) => n.clone(),
                        };
                        argv.push(name);
                        self.pending_arrays.push(a.clone());
                    } else {
                        // `export A=$x`: one field, no splitting (a declaration builtin).
                        argv.push(self.expand_single(&w.value)?);
                    }
                }
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => redirects.push(r),
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(kind, cmd) => {
                    match self.process_substitution(kind, cmd, io) {
                        Ok(path) => argv.push(path),
                        Err(msg) => {
                            self.error(io, &msg);
                            return Ok(Some(Prepared::Status(1)));
                        }
                    }
                }
            }
        }
        let in_shell = argv
            .first()
            .is_none_or(|a| BUILTINS.contains(&a.as_str()) || self.functions.contains_key(a));
        let owned: Vec<ast::IoRedirect> = redirects.into_iter().cloned().collect();
        let cio = match self.apply_redirects(&owned, io, in_shell) {
            Ok(cio) => cio,
            Err(msg) => {
                self.error(io, &msg);
                self.last_status = 1;
                return Ok(Some(Prepared::Status(1)));
            }
        };
        if argv.is_empty() {
            for (k, v) in assigns {
                self.set_var(&k, v);
            }
            // `$(false)` alone sets the status; plain assignments reset it.
            return Ok(Some(Prepared::Status(
                self.subst_status.take().unwrap_or(0),
            )));
        }
        self.subst_status = None;
        if self.opts.xtrace {
            let mut line = String::from("+");
            for (k, v) in &assigns {
                line.push_str(&format!(" {k}={v}"));
            }
            for a in &argv {
                line.push(' ');
                line.push_str(a);
            }
            line.push('\n');
            cio.stderr.write_str(&line);
        }
        if in_shell {
            return Ok(Some(Prepared::InShell {
                argv,
                assigns,
                io: cio,
            }));
        }
        Ok(Some(Prepared::External {
            argv,
            env: assigns,
            io: cio,
        }))
    }

    fn run_prepared(&mut self, p: Prepared) -> Status {
        match p {
            Prepared::Status(s) => Ok(s),
            Prepared::InShell { argv, assigns, io } => {
                if let Some(body) = self.functions.get(&argv[0]).cloned() {
                    self.pending_arrays.clear();
                    return self.call_function(&body, argv, assigns, &io);
                }
                // Assignments before a special builtin stay; before others they are
                // temporary. Keep it simple: apply them around the builtin.
                let saved: Vec<(String, Option<Var>)> = assigns
                    .iter()
                    .map(|(k, _)| (k.clone(), self.vars.get(k).cloned()))
                    .collect();
                for (k, v) in &assigns {
                    self.set_var(k, v.clone());
                }
                let pending = std::mem::take(&mut self.pending_arrays);
                let mut r = crate::builtins::run(self, &argv, &io);
                if r.is_ok() {
                    for a in &pending {
                        if let Err(e) = self.assign_array_forms(a) {
                            r = Err(e);
                            break;
                        }
                    }
                }
                let special = matches!(
                    argv[0].as_str(),
                    ":" | "."
                        | "source"
                        | "export"
                        | "readonly"
                        | "set"
                        | "unset"
                        | "eval"
                        | "exec"
                        | "exit"
                        | "return"
                        | "break"
                        | "continue"
                        | "shift"
                        | "local"
                );
                if !special {
                    for (k, v) in saved {
                        match v {
                            Some(v) => {
                                self.vars.insert(k, v);
                            }
                            None => {
                                self.vars.remove(&k);
                            }
                        }
                    }
                }
                r
            }
            Prepared::External { argv, env, io } => match self.launch(&argv, &env, &io) {
                Ok(l) => Ok(self.finish(l)),
                Err(status) => Ok(status),
            },
        }
    }

    fn call_function(
        &mut self,
        body: &ast::FunctionBody,
        argv: Vec<String>,
        assigns: Vec<(String, String)>,
        io: &Io,
    ) -> Status {
        let io = match &body.1 {
            Some(r) => match self.apply_redirects(&r.0, io, true) {
                Ok(io) => io,
                Err(msg) => {
                    self.error(io, &msg);
                    return Ok(1);
                }
            },
            None => io.clone(),
        };
        let saved_positional = std::mem::replace(&mut self.positional, argv[1..].to_vec());
        // FUNCNAME: this function first, then its callers.
        let saved_funcname = self.vars.get("FUNCNAME").cloned();
        let mut names = vec![argv[0].clone()];
        names.extend(
            self.array("FUNCNAME")
                .map(|a| a.values())
                .unwrap_or_default(),
        );
        self.set_array(
            "FUNCNAME",
            Array::Indexed(
                names
                    .into_iter()
                    .enumerate()
                    .map(|(i, n)| (i as i64, n))
                    .collect(),
            ),
        );
        self.locals.push(Vec::new());
        for (k, v) in assigns {
            self.make_local(&k);
            self.set_var(&k, v);
        }
        let saved_depth = std::mem::replace(&mut self.loop_depth, 0);
        let result = self.run_compound(&body.0, &io);
        self.loop_depth = saved_depth;
        if let Some(frame) = self.locals.pop() {
            for (k, v) in frame.into_iter().rev() {
                match v {
                    Some(v) => {
                        self.vars.insert(k, v);
                    }
                    None => {
                        self.vars.remove(&k);
                    }
                }
            }
        }
        self.positional = saved_positional;
        match saved_funcname {
            Some(v) => {
                self.vars.insert("FUNCNAME".into(), v);
            }
            None => {
                self.vars.remove("FUNCNAME");
            }
        }
        match result {
            Err(Ctl::Return(s)) => Ok(s),
            other => other,
        }
    }

    /// Starts an external program. On failure prints the shell's message and returns the
    /// status (127 not found, 126 cannot run).
    pub fn launch(
        &mut self,
        argv: &[String],
        extra_env: &[(String, String)],
        io: &Io,
    ) -> Result<Launched, i32> {
        let mut argv = argv.to_vec();
        // The path a program of the image was started by, when that is a symlink to it.
        let mut started_as = None;
        if argv[0].contains('/') && !is_bin_path(&argv[0]) {
            // A symlink to a program of the image (a venv's `bin/python`) runs the program.
            if let Some(target) = self.link_target(&argv[0]).filter(|t| is_bin_path(t)) {
                started_as = Some(self.abs_path(&argv[0]));
                argv[0] = target;
            } else {
                argv = self.script_argv(&argv, io)?;
            }
        } else if let Some(found) = self.sandbox_command(&argv[0], extra_env) {
            if let Some(target) = self.link_target(&found).filter(|t| is_bin_path(t)) {
                // A venv's `bin/pip` found on PATH: the program it links to.
                started_as = Some(found);
                argv[0] = target;
            } else {
                // A script of the sandbox found on PATH, run by its `#!` line like `./script`.
                argv[0] = found;
                argv = self.script_argv(&argv, io)?;
            }
        }
        // A `#!` line naming a venv's python (`#!/workspace/.venv/bin/python`).
        if started_as.is_none()
            && argv[0].contains('/')
            && !is_bin_path(&argv[0])
            && let Some(target) = self.link_target(&argv[0]).filter(|t| is_bin_path(t))
        {
            started_as = Some(self.abs_path(&argv[0]));
            argv[0] = target;
        }
        // Python (and pip) find their virtual environment from the path they were started by, which the
        // host's program lookup does not keep: it is passed as CPython's
        // `PYTHONEXECUTABLE` (which python3 reads and removes).
        let mut extra_env = extra_env.to_vec();
        if let Some(path) = started_as.filter(|_| {
            argv[0]
                .rsplit('/')
                .next()
                .is_some_and(|n| n.starts_with("python") || n.starts_with("pip"))
        }) {
            extra_env.push(("PYTHONEXECUTABLE".to_string(), path));
        }
        let extra_env = extra_env.as_slice();
        let mut feeds = Vec::new();
        let mut drains = Vec::new();
        let mut to_close = Vec::new();
        let stdin = match io.stdin.as_stdio() {
            Some(s) => s,
            None => {
                let (r, w) = process::pipe();
                if let In::Bytes(feed) = &io.stdin {
                    feeds.push((w, feed.clone()));
                }
                to_close.push(r);
                Stdio::Handle(r)
            }
        };
        let stdout = match io.stdout.as_stdio() {
            Some(s) => s,
            None => {
                let (r, w) = process::pipe();
                if let Out::Buffer(b) = &io.stdout {
                    drains.push((r, b.clone()));
                }
                to_close.push(w);
                Stdio::Handle(w)
            }
        };
        let stderr = match (&io.stderr, &io.stdout) {
            (Out::Buffer(a), Out::Buffer(b)) if Rc::ptr_eq(a, b) => Stdio::SameAsStdout,
            (Out::Stdout, _) => Stdio::InheritStdout,
            (Out::Stderr, _) => Stdio::Inherit,
            (other, _) => match other.as_stdio() {
                Some(s) => s,
                None => {
                    let (r, w) = process::pipe();
                    if let Out::Buffer(b) = other {
                        drains.push((r, b.clone()));
                    }
                    to_close.push(w);
                    Stdio::Handle(w)
                }
            },
        };
        let result = process::spawn(&ChildCommand {
            argv: argv.clone(),
            env: self.child_env(extra_env),
            cwd: self.cwd.clone(),
            stdin,
            stdout,
            stderr,
        });
        for h in to_close {
            process::close(h);
        }
        match result {
            Ok(pid) => Ok(Launched { pid, feeds, drains }),
            Err(e) => {
                for (h, _) in feeds {
                    process::close(h);
                }
                for (h, _) in drains {
                    process::close(h);
                }
                let (msg, status) = match e {
                    SpawnError::NotFound(_) if self.on_path_not_executable(&argv[0], extra_env) => {
                        (format!("{}: Permission denied", argv[0]), 126)
                    }
                    SpawnError::NotFound(_) => (format!("{}: command not found", argv[0]), 127),
                    SpawnError::Limit(m) => (m, 126),
                    SpawnError::Io(m) => (m, 1),
                    SpawnError::BadHandle => ("bad file descriptor".to_string(), 1),
                };
                self.error(io, &msg);
                Err(status)
            }
        }
    }

    /// The `PATH` a command gets: its own `PATH=dir cmd` assignment, else the shell's.
    fn command_path(&self, extra_env: &[(String, String)]) -> String {
        match extra_env.iter().rev().find(|(k, _)| k == "PATH") {
            Some((_, p)) => p.clone(),
            None => self.get_var("PATH").unwrap_or_default(),
        }
    }

    /// An executable file of the sandbox that a command name without a slash finds on
    /// `PATH` before any image program. With only the image's directories on `PATH` (the
    /// default) there is nothing to look for, so the common case costs no host call.
    fn sandbox_command(&self, name: &str, extra_env: &[(String, String)]) -> Option<String> {
        let path = self.command_path(extra_env);
        if path
            .split(':')
            .all(|d| guest_support::BIN_DIRS.contains(&d.trim_end_matches('/')))
        {
            return None;
        }
        guest_support::path_lookup(name, &path, &self.cwd).filter(|p| !is_bin_path(p))
    }

    /// Whether a command name that was not found names a file on `$PATH` that is not
    /// executable (bash then answers "Permission denied", status 126).
    fn on_path_not_executable(&self, name: &str, extra_env: &[(String, String)]) -> bool {
        if name.contains('/') {
            return false;
        }
        self.command_path(extra_env)
            .split(':')
            .filter(|d| !guest_support::BIN_DIRS.contains(&d.trim_end_matches('/')))
            .any(|d| {
                let dir = if d.is_empty() { "." } else { d };
                std::fs::metadata(self.abs_path(&format!("{dir}/{name}")))
                    .is_ok_and(|m| m.is_file())
            })
    }

    /// Where a command name is found on `$PATH` (see [`guest_support::path_lookup`]).
    pub fn path_lookup(&self, name: &str) -> Option<String> {
        let path = self.get_var("PATH").unwrap_or_default();
        guest_support::path_lookup(name, &path, &self.cwd)
    }

    /// Where the path `p` leads when it is a symlink (followed to its end, as absolute sandbox
    /// paths); `None` when it is not one.
    fn link_target(&self, p: &str) -> Option<String> {
        let mut path = normalize_path(&self.abs_path(p));
        let mut followed = false;
        for _ in 0..40 {
            let Ok(target) = std::fs::read_link(&path) else {
                break;
            };
            let target = target.to_string_lossy().into_owned();
            let dir = path
                .rsplit_once('/')
                .map_or("/", |(d, _)| if d.is_empty() { "/" } else { d });
            path = if target.starts_with('/') {
                normalize_path(&target)
            } else {
                normalize_path(&format!("{dir}/{target}"))
            };
            followed = true;
        }
        followed.then_some(path)
    }

    /// `./script.sh ARGS`: a file of the workspace run by the interpreter its `#!` line
    /// names (the shell when it has none).
    fn script_argv(&self, argv: &[String], io: &Io) -> Result<Vec<String>, i32> {
        let path = self.abs_path(&argv[0]);
        match std::fs::metadata(&path) {
            Err(_) => {
                self.error(io, &format!("{}: No such file or directory", argv[0]));
                Err(127)
            }
            Ok(m) if m.is_dir() => {
                self.error(io, &format!("{}: Is a directory", argv[0]));
                Err(126)
            }
            Ok(_) if guest_support::file_mode(&path).is_some_and(|mode| mode & 0o111 == 0) => {
                self.error(io, &format!("{}: Permission denied", argv[0]));
                Err(126)
            }
            Ok(_) => {
                let head = std::fs::read(&path).unwrap_or_default();
                let first = head.split(|&b| b == b'\n').next().unwrap_or_default();
                let first = String::from_utf8_lossy(first);
                let mut interp = vec!["sh".to_string()];
                if let Some(rest) = first.strip_prefix("#!") {
                    let words: Vec<&str> = rest.split_whitespace().collect();
                    interp = match words.as_slice() {
                        [env, prog, args @ ..] if env.ends_with("/env") => std::iter::once(*prog)
                            .chain(args.iter().copied())
                            .map(String::from)
                            .collect(),
                        [prog, args @ ..] => {
                            // A path of the sandbox (a venv's python) is kept for
                            // `launch`; a system one names a program of the image.
                            let keep = prog.starts_with('/')
                                && !is_bin_path(prog)
                                && self.link_target(prog).is_some_and(|t| is_bin_path(&t));
                            let prog = if keep {
                                *prog
                            } else {
                                prog.rsplit('/').next().unwrap_or(prog)
                            };
                            std::iter::once(prog)
                                .chain(args.iter().copied())
                                .map(String::from)
                                .collect()
                        }
                        [] => interp,
                    };
                }
                interp.extend(argv.iter().cloned());
                Ok(interp)
            }
        }
    }

    fn finish_feeds(&self, l: &Launched) {
        for (h, feed) in &l.feeds {
            let _ = process::write(*h, feed.take_rest());
            process::close(*h);
        }
    }

    /// Feeds, drains and waits for a launched child; returns its status.
    pub fn finish(&mut self, mut l: Launched) -> i32 {
        self.finish_feeds(&l);
        l.feeds.clear();
        for (h, buf) in &l.drains {
            loop {
                match process::read(*h, 65536) {
                    Ok(chunk) if !chunk.is_empty() => buf.borrow_mut().extend_from_slice(&chunk),
                    _ => break,
                }
            }
            process::close(*h);
        }
        process::wait(l.pid)
    }

    // -- process substitution -----------------------------------------------------------

    /// Runs `<(cmd)` to completion into a file and returns its path; for `>(cmd)` returns
    /// an empty file that `cmd` reads when the command is done.
    pub fn process_substitution(
        &mut self,
        kind: &ast::ProcessSubstitutionKind,
        cmd: &ast::SubshellCommand,
        io: &Io,
    ) -> Result<String, String> {
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = if std::fs::metadata("/tmp").is_ok_and(|m| m.is_dir()) {
            "/tmp".to_string()
        } else {
            self.cwd.clone()
        };
        let path = format!("{dir}/.sh-psub-{nanos:x}-{n}");
        std::fs::write(&path, b"").map_err(|e| format!("{path}: {}", io_message(&e)))?;
        match kind {
            ast::ProcessSubstitutionKind::Read => {
                let sio = Io {
                    stdin: io.stdin.clone(),
                    stdout: Out::File(path.clone()),
                    stderr: io.stderr.clone(),
                };
                let mut sub = self.clone();
                sub.psubs.clear();
                let _ = sub.run_list(&cmd.list, &sio);
                sub.finish_psubs(0, &sio);
                if sub.cwd != self.cwd {
                    let _ = std::env::set_current_dir(&self.cwd);
                }
                self.psubs.push(PSub::Input(path.clone()));
            }
            ast::ProcessSubstitutionKind::Write => {
                self.psubs.push(PSub::Output(path.clone(), cmd.clone()));
            }
        }
        Ok(path)
    }

    /// Ends the process substitutions made since `mark`: feeds `>(cmd)`s, removes files.
    pub fn finish_psubs(&mut self, mark: usize, io: &Io) {
        if self.psubs.len() <= mark {
            return;
        }
        for p in self.psubs.split_off(mark) {
            match p {
                PSub::Input(path) => {
                    let _ = std::fs::remove_file(&path);
                }
                PSub::Output(path, cmd) => {
                    let data = std::fs::read(&path).unwrap_or_default();
                    let _ = std::fs::remove_file(&path);
                    let sio = Io {
                        stdin: In::bytes(data),
                        stdout: io.stdout.clone(),
                        stderr: io.stderr.clone(),
                    };
                    let mut sub = self.clone();
                    sub.psubs.clear();
                    let _ = sub.run_list(&cmd.list, &sio);
                    if sub.cwd != self.cwd {
                        let _ = std::env::set_current_dir(&self.cwd);
                    }
                }
            }
        }
    }

    // -- redirections -------------------------------------------------------------------

    /// Applies redirections to `io`. `in_shell`: the command runs inside the shell, so an
    /// input file is read into memory (its readers then share one position).
    pub fn apply_redirects(
        &mut self,
        redirects: &[ast::IoRedirect],
        io: &Io,
        in_shell: bool,
    ) -> Result<Io, String> {
        let mut io = io.clone();
        for r in redirects {
            match r {
                ast::IoRedirect::File(fd, kind, target) => {
                    use ast::IoFileRedirectKind as K;
                    let default_fd = match kind {
                        K::Read | K::DuplicateInput | K::ReadAndWrite => 0,
                        _ => 1,
                    };
                    let fd = fd.unwrap_or(default_fd);
                    match (kind, target) {
                        (K::DuplicateOutput | K::DuplicateInput, t) => {
                            let src = match t {
                                ast::IoFileRedirectTarget::Fd(n) => n.to_string(),
                                ast::IoFileRedirectTarget::Duplicate(w)
                                | ast::IoFileRedirectTarget::Filename(w) => self
                                    .expand_single(&w.value)
                                    .map_err(|_| "bad substitution".to_string())?,
                                ast::IoFileRedirectTarget::ProcessSubstitution(kind, cmd) => {
                                    self.process_substitution(kind, cmd, &io)?
                                }
                            };
                            let out = match src.as_str() {
                                "1" => Some(io.stdout.clone()),
                                "2" => Some(io.stderr.clone()),
                                "-" if fd > 2 => {
                                    self.fds.remove(&fd);
                                    continue;
                                }
                                "-" => Some(Out::Null),
                                "0" => None,
                                other => {
                                    match other.parse::<i32>().ok().and_then(|n| self.fds.get(&n)) {
                                        Some(o) => Some(o.clone()),
                                        None => {
                                            return Err(format!("{other}: Bad file descriptor"));
                                        }
                                    }
                                }
                            };
                            match (fd, out) {
                                (1, Some(o)) => io.stdout = o,
                                (2, Some(o)) => io.stderr = o,
                                (0, _) => {}
                                (n, Some(o)) if n > 2 => {
                                    self.fds.insert(n, o);
                                }
                                (n, _) if n > 2 => {}
                                _ => return Err(format!("{src}: Bad file descriptor")),
                            }
                        }
                        (
                            _,
                            target @ (ast::IoFileRedirectTarget::Filename(_)
                            | ast::IoFileRedirectTarget::ProcessSubstitution(..)),
                        ) => {
                            let path = match target {
                                ast::IoFileRedirectTarget::Filename(w) => self
                                    .expand_single(&w.value)
                                    .map_err(|_| "bad substitution".to_string())?,
                                ast::IoFileRedirectTarget::ProcessSubstitution(kind, cmd) => {
                                    self.process_substitution(kind, cmd, &io)?
                                }
                                _ => unreachable!(),
                            };
                            if path.is_empty() {
                                return Err(": No such file or directory".into());
                            }
                            match kind {
                                K::Read => {
                                    let input = self.open_input(&path, in_shell)?;
                                    if fd == 0 {
                                        io.stdin = input;
                                    }
                                }
                                K::ReadAndWrite => {
                                    let abs = self.abs_path(&path);
                                    std::fs::OpenOptions::new()
                                        .read(true)
                                        .write(true)
                                        .create(true)
                                        .truncate(false)
                                        .open(&abs)
                                        .map_err(|e| format!("{path}: {}", io_message(&e)))?;
                                    if fd == 0 {
                                        io.stdin = self.open_input(&path, in_shell)?;
                                    }
                                }
                                _ => {
                                    let out = self.open_output(
                                        &path,
                                        matches!(kind, K::Append),
                                        matches!(kind, K::Clobber),
                                        &io,
                                    )?;
                                    match fd {
                                        1 => io.stdout = out,
                                        2 => io.stderr = out,
                                        n => {
                                            self.fds.insert(n, out);
                                        }
                                    }
                                }
                            }
                        }
                        (_, ast::IoFileRedirectTarget::Fd(n)) => {
                            let out = match n {
                                1 => io.stdout.clone(),
                                2 => io.stderr.clone(),
                                n => match self.fds.get(&{ *n }) {
                                    Some(o) => o.clone(),
                                    None => return Err(format!("{n}: Bad file descriptor")),
                                },
                            };
                            match fd {
                                1 => io.stdout = out,
                                2 => io.stderr = out,
                                _ => {}
                            }
                        }
                        (_, ast::IoFileRedirectTarget::Duplicate(_)) => {
                            return Err("unsupported redirection".into());
                        }
                    }
                }
                ast::IoRedirect::HereDocument(fd, doc) => {
                    let mut body = if doc.requires_expansion {
                        self.expand_heredoc(&doc.doc.value)
                            .map_err(|_| "bad substitution".to_string())?
                    } else {
                        doc.doc.value.clone()
                    };
                    if doc.remove_tabs {
                        body = body
                            .split_inclusive('\n')
                            .map(|l| l.trim_start_matches('\t'))
                            .collect();
                    }
                    if fd.unwrap_or(0) == 0 {
                        io.stdin = In::bytes(body.into_bytes());
                    }
                }
                ast::IoRedirect::HereString(fd, word) => {
                    let mut s = self
                        .expand_single(&word.value)
                        .map_err(|_| "bad substitution".to_string())?;
                    s.push('\n');
                    if fd.unwrap_or(0) == 0 {
                        io.stdin = In::bytes(s.into_bytes());
                    }
                }
                ast::IoRedirect::OutputAndError(word, append) => {
                    let path = self
                        .expand_single(&word.value)
                        .map_err(|_| "bad substitution".to_string())?;
                    let out = self.open_output(&path, *append, false, &io)?;
                    io.stdout = out.clone();
                    io.stderr = out;
                }
            }
        }
        Ok(io)
    }

    fn open_input(&self, path: &str, in_shell: bool) -> Result<In, String> {
        match path {
            "/dev/null" => return Ok(In::Null),
            "/dev/stdin" => return Ok(self.cur_io.stdin.clone()),
            _ => {}
        }
        let abs = self.abs_path(path);
        match std::fs::metadata(&abs) {
            Err(e) => Err(format!("{path}: {}", io_message(&e))),
            Ok(m) if m.is_dir() => Err(format!("{path}: Is a directory")),
            Ok(_) if in_shell => std::fs::read(&abs)
                .map(In::bytes)
                .map_err(|e| format!("{path}: {}", io_message(&e))),
            Ok(_) => Ok(In::File(abs)),
        }
    }

    fn open_output(&self, path: &str, append: bool, clobber: bool, io: &Io) -> Result<Out, String> {
        match path {
            "/dev/null" => return Ok(Out::Null),
            "/dev/stdout" => return Ok(io.stdout.clone()),
            "/dev/stderr" => return Ok(io.stderr.clone()),
            _ => {}
        }
        let abs = self.abs_path(path);
        if self.opts.noclobber
            && !append
            && !clobber
            && std::fs::metadata(&abs).is_ok_and(|m| m.is_file())
        {
            return Err(format!("{path}: cannot overwrite existing file"));
        }
        let mut o = std::fs::OpenOptions::new();
        if append {
            o.append(true).create(true);
        } else {
            o.write(true).create(true).truncate(true);
        }
        o.open(&abs)
            .map_err(|e| format!("{path}: {}", io_message(&e)))?;
        Ok(Out::File(abs))
    }
}

/// What a simple command turned out to be after expansion.
pub enum Prepared {
    Status(i32),
    InShell {
        argv: Vec<String>,
        assigns: Vec<(String, String)>,
        io: Io,
    },
    External {
        argv: Vec<String>,
        env: Vec<(String, String)>,
        io: Io,
    },
}

/// `p` (absolute) with `.`, `..` and repeated slashes resolved.
fn normalize_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            x => parts.push(x),
        }
    }
    format!("/{}", parts.join("/"))
}

fn is_bin_path(p: &str) -> bool {
    p.rsplit_once('/')
        .is_some_and(|(dir, _)| guest_support::BIN_DIRS.contains(&dir))
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

/// A seed for `$RANDOM` from the host's randomness (std's hash keys come from it).
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish() | 1
}

/// Shell text for an and-or list. brush's `Display` writes a compound command's
/// redirections with no space between them (`(cmd) >f 2>&1` would come out as
/// `(cmd)>f2>&1`), so the outer levels, where backgrounded commands carry theirs, are
/// written here.
fn and_or_text(list: &ast::AndOrList) -> String {
    let mut s = pipeline_text(&list.first);
    for next in &list.additional {
        match next {
            ast::AndOr::And(p) => s.push_str(&format!(" && {}", pipeline_text(p))),
            ast::AndOr::Or(p) => s.push_str(&format!(" || {}", pipeline_text(p))),
        }
    }
    s
}

fn pipeline_text(p: &ast::Pipeline) -> String {
    if p.timed.is_some() {
        return p.to_string();
    }
    let commands: Vec<String> = p
        .seq
        .iter()
        .map(|c| match c {
            ast::Command::Compound(c, Some(r)) => format!("{c}{}", redirects_text(r)),
            other => other.to_string(),
        })
        .collect();
    let bang = if p.bang { "! " } else { "" };
    format!("{bang}{}", commands.join(" | "))
}

/// ` >f 2>&1`: each redirection after a space.
fn redirects_text(r: &ast::RedirectList) -> String {
    r.0.iter().map(|item| format!(" {item}")).collect()
}
