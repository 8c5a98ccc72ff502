//! `make`: the language of GNU make 4.3 and its messages, so that `make`, `make test`,
//! `make -C dir` and `$(MAKE)` recursion in an agent's repository behave as they do on a
//! Linux machine.
//!
//! - `mod.rs`: options, the driver, messages;
//! - `parse.rs`: reading makefiles (assignments, rules, conditionals, `define`, `include`);
//! - `expand.rs`: variable references and the functions (`$(patsubst)`, `$(shell)`, ...);
//! - `build.rs`: deciding what is out of date and running recipes through the shell.
//!
//! Recipes run one line at a time (or whole, under `.ONESHELL`), through `$(SHELL)`, in
//! order: `-j` is accepted and runs one job at a time. There are no built-in implicit rules
//! (as `make -r`): the sandbox has no compiler for them to call. What is missing says so.

mod build;
mod expand;
mod parse;

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::rc::Rc;

/// Where a line came from, for messages (`Makefile:3: ...`).
#[derive(Clone, Debug)]
pub(crate) struct Loc {
    file: Rc<str>,
    line: usize,
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Where a variable's value came from, as `$(origin)` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Default,
    Environment,
    File,
    CommandLine,
    Override,
    Automatic,
}

impl Origin {
    fn name(self) -> &'static str {
        match self {
            Origin::Default => "default",
            Origin::Environment => "environment",
            Origin::File => "file",
            Origin::CommandLine => "command line",
            Origin::Override => "override",
            Origin::Automatic => "automatic",
        }
    }
}

#[derive(Clone, Debug)]
struct Var {
    value: String,
    /// `=` (expanded at each use) rather than `:=` (expanded once).
    recursive: bool,
    origin: Origin,
}

/// One recipe line as written (after joining its continuations).
#[derive(Clone, Debug)]
struct Line {
    text: String,
    loc: Loc,
}

type Recipe = Rc<Vec<Line>>;

#[derive(Clone, Debug, Default)]
struct Target {
    prereqs: Vec<String>,
    order_only: Vec<String>,
    recipe: Option<Recipe>,
    /// The stem of a static pattern rule (`$*`).
    stem: Option<String>,
    /// Named as a target of some rule (not only as a prerequisite).
    is_target: bool,
}

/// A pattern rule (`%.o: %.c`).
#[derive(Clone, Debug)]
struct Pattern {
    targets: Vec<String>,
    prereqs: Vec<String>,
    order_only: Vec<String>,
    recipe: Option<Recipe>,
}

/// A target- or pattern-specific assignment (`test: FLAGS += -v`).
#[derive(Clone, Debug)]
struct TargetVar {
    name: String,
    op: String,
    value: String,
    overriding: bool,
    export: bool,
}

/// Why make stops: an error to print (with the makefile location when there is one), or an
/// exit status whose message was already printed.
enum Fail {
    Stop(Option<Loc>, String),
    Exit(i32),
}

type R<T> = Result<T, Fail>;

fn stop<T>(loc: Option<&Loc>, msg: impl Into<String>) -> R<T> {
    Err(Fail::Stop(loc.cloned(), msg.into()))
}

#[derive(Default)]
struct Opts {
    silent: bool,
    dry_run: bool,
    keep_going: bool,
    ignore_errors: bool,
    always: bool,
    env_overrides: bool,
    question: bool,
    touch: bool,
    /// `-w` / `--no-print-directory`; `None` leaves it to the defaults (on with `-C` and in
    /// a sub-make, off under `-s`).
    print_dir: Option<bool>,
    /// This make prints its directory (`w` in `MAKEFLAGS`).
    printing_dir: bool,
    includes: Vec<String>,
    old_files: HashSet<String>,
}

impl Opts {
    /// The switches a sub-make inherits, each with its letter (`-s` on the command line,
    /// `s` in `MAKEFLAGS`), in the order `MAKEFLAGS` lists them.
    fn switches(&mut self) -> [(char, &mut bool); 9] {
        [
            ('B', &mut self.always),
            ('e', &mut self.env_overrides),
            ('i', &mut self.ignore_errors),
            ('k', &mut self.keep_going),
            ('n', &mut self.dry_run),
            ('q', &mut self.question),
            ('s', &mut self.silent),
            ('t', &mut self.touch),
            ('w', &mut self.printing_dir),
        ]
    }

    /// Turns on the switch of letter `c`; `false` when no switch has that letter.
    fn set_switch(&mut self, c: char) -> bool {
        match self.switches().into_iter().find(|(l, _)| *l == c) {
            Some((_, on)) => {
                *on = true;
                true
            }
            None => false,
        }
    }
}

pub(crate) struct Make {
    vars: HashMap<String, Var>,
    /// Innermost last: `$(call)` arguments, `$(foreach)` variables, automatic and
    /// target-specific variables of the target being made.
    scopes: Vec<HashMap<String, Var>>,
    targets: HashMap<String, Target>,
    patterns: Vec<Pattern>,
    target_vars: HashMap<String, Vec<TargetVar>>,
    pattern_vars: Vec<(String, TargetVar)>,
    first_goal: Option<String>,
    /// `export NAME` / `unexport NAME`.
    exports: HashMap<String, bool>,
    export_all: bool,
    /// Names taken from the environment at start (exported to recipes whatever their value).
    from_env: HashSet<String>,
    suffixes: Vec<String>,
    opts: Opts,
    level: u32,
    /// The line being read or run, for `$(error)` and friends.
    loc: Option<Loc>,
    states: HashMap<String, build::State>,
    /// Recipe lines run (or printed, under `-n`): a goal that ran none was up to date.
    commands: u64,
    /// Recursive variables being expanded, to catch one that references itself.
    expanding: Vec<String>,
    /// How deep expansions are nested now.
    depth: u32,
    /// How deep the prerequisite being made is.
    chain: u32,
    /// `-f` files and command-line assignments given to this make, for `MAKEFLAGS`.
    cmdline_vars: Vec<String>,
}

const VERSION: &str = "GNU Make 4.3
Built for wasm32-wasip2 (the wasbox sandbox's make: GNU make 4.3's language, one job at a time)
This is free software: you are free to change and redistribute it.
There is NO WARRANTY, to the extent permitted by law.";

const USAGE: &str = "Usage: make [options] [target] ...
Options:
  -B, --always-make           Unconditionally make all targets.
  -C DIRECTORY, --directory=DIRECTORY
                              Change to DIRECTORY before doing anything.
  -e, --environment-overrides
                              Environment variables override makefiles.
  -E STRING, --eval=STRING    Evaluate STRING as a makefile statement.
  -f FILE, --file=FILE, --makefile=FILE
                              Read FILE as a makefile.
  -h, --help                  Print this message and exit.
  -i, --ignore-errors         Ignore errors from recipes.
  -I DIRECTORY, --include-dir=DIRECTORY
                              Search DIRECTORY for included makefiles.
  -j [N], --jobs[=N]          Accepted; jobs run one at a time.
  -k, --keep-going            Keep going when some targets can't be made.
  -n, --just-print, --dry-run, --recon
                              Don't actually run any recipe; just print them.
  -o FILE, --old-file=FILE, --assume-old=FILE
                              Consider FILE to be very old and don't remake it.
  -q, --question              Run no recipe; exit status says if up to date.
  -r, --no-builtin-rules      Accepted (there are no built-in rules).
  -s, --silent, --quiet       Don't echo recipes.
  -t, --touch                 Touch targets instead of remaking them.
  -v, --version               Print the version number of make and exit.
  -w, --print-directory       Print the current directory.
  --no-print-directory        Turn off -w, even if it was turned on implicitly.
";

/// Suffixes GNU make knows by default (`.SUFFIXES`), for old-fashioned suffix rules.
const DEFAULT_SUFFIXES: &str = ".out .a .ln .o .c .cc .C .cpp .p .f .F .m .r .y .l .ym .yl \
    .s .S .mod .sym .def .h .info .dvi .tex .texinfo .texi .txinfo .w .ch .web .sh .elc .el";

pub fn main(args: Vec<String>) -> i32 {
    let level = std::env::var("MAKELEVEL")
        .ok()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0u32);
    let mut make = Make::new(level);
    let code = match make.run(args) {
        Ok(code) => code,
        Err(Fail::Exit(code)) => code,
        Err(Fail::Stop(loc, msg)) => {
            make.error(loc.as_ref(), &msg);
            2
        }
    };
    let _ = std::io::stdout().flush();
    code
}

/// What the command line asked for.
struct Request {
    files: Vec<String>,
    goals: Vec<String>,
    dir: Option<String>,
    evals: Vec<String>,
}

impl Make {
    fn new(level: u32) -> Make {
        Make {
            vars: HashMap::new(),
            scopes: Vec::new(),
            targets: HashMap::new(),
            patterns: Vec::new(),
            target_vars: HashMap::new(),
            pattern_vars: Vec::new(),
            first_goal: None,
            exports: HashMap::new(),
            export_all: false,
            from_env: HashSet::new(),
            suffixes: DEFAULT_SUFFIXES
                .split_whitespace()
                .map(String::from)
                .collect(),
            opts: Opts::default(),
            level,
            loc: None,
            states: HashMap::new(),
            commands: 0,
            expanding: Vec::new(),
            depth: 0,
            chain: 0,
            cmdline_vars: Vec::new(),
        }
    }

    /// `make` or `make[N]` in a sub-make.
    fn name(&self) -> String {
        if self.level == 0 {
            "make".into()
        } else {
            format!("make[{}]", self.level)
        }
    }

    /// `make: *** MSG.  Stop.` (or `Makefile:3: *** ...`) on stderr.
    fn error(&self, loc: Option<&Loc>, msg: &str) {
        let _ = std::io::stdout().flush();
        match loc {
            Some(loc) => eprintln!("{loc}: *** {msg}.  Stop."),
            None => eprintln!("{}: *** {msg}.  Stop.", self.name()),
        }
    }

    fn warn(&self, msg: &str) {
        let _ = std::io::stdout().flush();
        match &self.loc {
            Some(loc) => eprintln!("{loc}: {msg}"),
            None => eprintln!("{}: {msg}", self.name()),
        }
    }

    fn set_default(&mut self, name: &str, value: &str) {
        self.vars.insert(
            name.into(),
            Var {
                value: value.into(),
                recursive: true,
                origin: Origin::Default,
            },
        );
    }

    fn run(&mut self, args: Vec<String>) -> R<i32> {
        let mut request = Request {
            files: Vec::new(),
            goals: Vec::new(),
            dir: None,
            evals: Vec::new(),
        };
        // A sub-make takes its parent's flags and command-line variables from MAKEFLAGS.
        let inherited = std::env::var("MAKEFLAGS").unwrap_or_default();
        let mut assignments = self.parse_makeflags(&inherited)?;
        if let Some(code) = self.parse_args(&args[1.min(args.len())..], &mut request)? {
            return Ok(code);
        }
        for a in &request.goals {
            if parse::split_assignment(a).is_some() {
                assignments.push(a.clone());
            }
        }
        request
            .goals
            .retain(|a| parse::split_assignment(a).is_none());

        if let Some(dir) = &request.dir
            && let Err(e) = std::env::set_current_dir(dir)
        {
            return stop(None, format!("{dir}: {}", reason(&e)));
        }
        let cwd = guest_support::cwd();
        let goals = self.read_all(&request, &assignments, &cwd)?;
        let print_dir = self
            .opts
            .print_dir
            .unwrap_or(!self.opts.silent && (request.dir.is_some() || self.level > 0));
        self.opts.printing_dir = print_dir;
        let makeflags = self.makeflags();
        if self
            .vars
            .get("MAKEFLAGS")
            .is_none_or(|v| v.origin == Origin::Default)
        {
            self.set_default("MAKEFLAGS", &makeflags);
        }
        if print_dir {
            println!("{}: Entering directory '{cwd}'", self.name());
        }
        let result = match self.make_goals(&goals) {
            Err(Fail::Stop(loc, msg)) => {
                self.error(loc.as_ref(), &msg);
                Ok(2)
            }
            other => other,
        };
        if print_dir {
            println!("{}: Leaving directory '{cwd}'", self.name());
        }
        result
    }

    /// Flags a makefile set in `MAKEFLAGS` (`MAKEFLAGS += -s --no-print-directory`).
    fn flags_from_makefile(&mut self) {
        let Some(v) = self
            .vars
            .get("MAKEFLAGS")
            .filter(|v| v.origin != Origin::Default)
        else {
            return;
        };
        let value = v.value.clone();
        let mut letters = Vec::new();
        for w in value.split_whitespace() {
            match w {
                "--" => break,
                "--no-print-directory" => self.opts.print_dir = Some(false),
                "--print-directory" => self.opts.print_dir = Some(true),
                "--silent" | "--quiet" => self.opts.silent = true,
                "--keep-going" => self.opts.keep_going = true,
                "--ignore-errors" => self.opts.ignore_errors = true,
                "--always-make" => self.opts.always = true,
                w if w.starts_with("--") => {}
                w => letters.push(w.trim_start_matches('-').to_string()),
            }
        }
        for l in letters {
            if !l.starts_with(['j', 'l', 'O']) && !l.contains('=') {
                let _ = self.parse_makeflags(&format!("-{l}"));
            }
        }
    }

    /// Reads the makefiles; the goals to make.
    fn read_all(&mut self, request: &Request, assignments: &[String], cwd: &str) -> R<Vec<String>> {
        for (name, value) in std::env::vars() {
            if matches!(
                name.as_str(),
                "SHELL" | "MAKELEVEL" | "MAKEFLAGS" | "MFLAGS"
            ) {
                continue;
            }
            self.from_env.insert(name.clone());
            self.vars.insert(
                name,
                Var {
                    value,
                    recursive: true,
                    origin: Origin::Environment,
                },
            );
        }
        for (name, value) in [
            ("SHELL", "/bin/sh"),
            (".SHELLFLAGS", "-c"),
            ("MAKE", "make"),
            ("MAKE_VERSION", "4.3"),
            ("MAKE_COMMAND", "make"),
            (".RECIPEPREFIX", ""),
            ("RM", "rm -f"),
            ("CC", "cc"),
            ("CXX", "g++"),
            ("CPP", "$(CC) -E"),
            ("AR", "ar"),
            ("ARFLAGS", "rv"),
            ("AS", "as"),
            ("LD", "ld"),
            ("LEX", "lex"),
            ("YACC", "yacc"),
            ("MAKEFILE_LIST", ""),
            ("SUFFIXES", DEFAULT_SUFFIXES),
        ] {
            self.set_default(name, value);
        }
        self.set_default("CURDIR", cwd);
        self.set_default("MAKELEVEL", &self.level.to_string());
        self.set_default("MAKECMDGOALS", &request.goals.join(" "));
        for a in assignments {
            let (name, op, value) = parse::split_assignment(a).expect("an assignment");
            let name = self.expand(name.trim())?;
            self.assign(&name, op, value, Origin::CommandLine)?;
            self.cmdline_vars.push(a.clone());
        }
        let makeflags = self.makeflags();
        self.set_default("MAKEFLAGS", &makeflags);
        for e in &request.evals {
            self.parse_text(e, Rc::from("--eval"))?;
        }

        let files = if request.files.is_empty() {
            ["GNUmakefile", "makefile", "Makefile"]
                .iter()
                .find(|f| std::path::Path::new(f).is_file())
                .map(|f| vec![f.to_string()])
                .unwrap_or_default()
        } else {
            request.files.clone()
        };
        for f in &files {
            if f == "-" {
                let mut text = String::new();
                let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text);
                self.parse_text(&text, Rc::from("-"))?;
                continue;
            }
            if !self.read_makefile(f, None)? {
                let _ = std::io::stdout().flush();
                eprintln!("{}: {f}: No such file or directory", self.name());
                return stop(None, format!("No rule to make target '{f}'"));
            }
        }
        self.loc = None;

        let mut goals = request.goals.clone();
        if goals.is_empty() {
            let default = self.var_value(".DEFAULT_GOAL")?;
            let default = default.trim();
            if !default.is_empty() {
                goals.push(default.to_string());
            } else if let Some(g) = &self.first_goal {
                goals.push(g.clone());
            } else if files.is_empty() {
                return stop(None, "No targets specified and no makefile found");
            } else {
                return stop(None, "No targets");
            }
        }
        self.flags_from_makefile();
        Ok(goals)
    }

    /// Options and `-f`/`-C` arguments; `Some(code)` when the answer is already given
    /// (`--version`, `--help`, a bad option).
    fn parse_args(&mut self, args: &[String], request: &mut Request) -> R<Option<i32>> {
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            i += 1;
            if a == "--" {
                request.goals.extend(args[i..].iter().cloned());
                break;
            }
            if let Some(long) = a.strip_prefix("--") {
                let (key, inline) = match long.split_once('=') {
                    Some((k, v)) => (k, Some(v.to_string())),
                    None => (long, None),
                };
                let value = |i: &mut usize| -> R<String> {
                    if let Some(v) = &inline {
                        return Ok(v.clone());
                    }
                    match args.get(*i) {
                        Some(v) => {
                            *i += 1;
                            Ok(v.clone())
                        }
                        None => {
                            eprintln!("{}: option '--{key}' requires an argument", self.name());
                            Err(Fail::Exit(2))
                        }
                    }
                };
                match key {
                    "always-make" => self.opts.always = true,
                    "directory" => request.dir = Some(value(&mut i)?),
                    "environment-overrides" => self.opts.env_overrides = true,
                    "eval" => request.evals.push(value(&mut i)?),
                    "file" | "makefile" => request.files.push(value(&mut i)?),
                    "help" => {
                        print!("{USAGE}");
                        return Ok(Some(0));
                    }
                    "ignore-errors" => self.opts.ignore_errors = true,
                    "include-dir" => self.opts.includes.push(value(&mut i)?),
                    "jobs" | "load-average" | "max-load" | "output-sync" | "debug" => {}
                    "keep-going" => self.opts.keep_going = true,
                    "no-keep-going" | "stop" => self.opts.keep_going = false,
                    "just-print" | "dry-run" | "recon" => self.opts.dry_run = true,
                    "old-file" | "assume-old" => {
                        let f = value(&mut i)?;
                        self.opts.old_files.insert(f);
                    }
                    "question" => self.opts.question = true,
                    "no-builtin-rules" | "no-builtin-variables" | "warn-undefined-variables" => {}
                    "silent" | "quiet" => self.opts.silent = true,
                    "no-silent" => self.opts.silent = false,
                    "touch" => self.opts.touch = true,
                    "version" => {
                        println!("{VERSION}");
                        return Ok(Some(0));
                    }
                    "print-directory" => self.opts.print_dir = Some(true),
                    "no-print-directory" => self.opts.print_dir = Some(false),
                    "print-data-base" | "what-if" | "new-file" | "assume-new" | "trace" => {
                        eprintln!(
                            "{}: --{key} is not available in this sandbox's make",
                            self.name()
                        );
                        return Ok(Some(2));
                    }
                    _ => {
                        eprintln!("{}: unrecognized option '{a}'", self.name());
                        eprint!("{USAGE}");
                        return Ok(Some(2));
                    }
                }
                continue;
            }
            let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) else {
                request.goals.push(a.clone());
                continue;
            };
            let chars: Vec<char> = flags.chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let c = chars[k];
                k += 1;
                // `-w` also asks for the directory lines (below).
                if self.opts.set_switch(c) && c != 'w' {
                    continue;
                }
                // The rest of this word, or the next argument.
                let value = |k: &mut usize, i: &mut usize| -> R<String> {
                    let rest: String = chars[*k..].iter().collect();
                    *k = chars.len();
                    if !rest.is_empty() {
                        return Ok(rest);
                    }
                    match args.get(*i) {
                        Some(v) => {
                            *i += 1;
                            Ok(v.clone())
                        }
                        None => {
                            eprintln!("{}: option requires an argument -- '{c}'", self.name());
                            eprint!("{USAGE}");
                            Err(Fail::Exit(2))
                        }
                    }
                };
                match c {
                    'C' => {
                        let d = value(&mut k, &mut i)?;
                        request.dir = Some(match request.dir.take() {
                            Some(prev) if !d.starts_with('/') => format!("{prev}/{d}"),
                            _ => d,
                        });
                    }
                    'E' => request.evals.push(value(&mut k, &mut i)?),
                    'f' => request.files.push(value(&mut k, &mut i)?),
                    'h' => {
                        print!("{USAGE}");
                        return Ok(Some(0));
                    }
                    'I' => {
                        let d = value(&mut k, &mut i)?;
                        self.opts.includes.push(d);
                    }
                    'j' | 'l' => {
                        // An optional number: the rest of the word, or the next argument
                        // when it is one.
                        if k < chars.len() {
                            k = chars.len();
                        } else if args.get(i).is_some_and(|n| n.parse::<f64>().is_ok()) {
                            i += 1;
                        }
                    }
                    'O' => k = chars.len(),
                    'S' => self.opts.keep_going = false,
                    'o' => {
                        let f = value(&mut k, &mut i)?;
                        self.opts.old_files.insert(f);
                    }
                    'r' | 'R' | 'd' => {}
                    'v' => {
                        println!("{VERSION}");
                        return Ok(Some(0));
                    }
                    'w' => self.opts.print_dir = Some(true),
                    'p' | 'W' => {
                        eprintln!(
                            "{}: -{c} is not available in this sandbox's make",
                            self.name()
                        );
                        return Ok(Some(2));
                    }
                    _ => {
                        eprintln!("{}: invalid option -- '{c}'", self.name());
                        eprint!("{USAGE}");
                        return Ok(Some(2));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Takes the flags a parent make passed in `MAKEFLAGS` (`ks -- VAR=value`); returns its
    /// command-line assignments.
    fn parse_makeflags(&mut self, flags: &str) -> R<Vec<String>> {
        let mut assignments = Vec::new();
        let mut words = flags.split_whitespace();
        let mut first = true;
        while let Some(w) = words.next() {
            if w == "--" {
                // Assignments, with `\ ` for a space inside one.
                let rest: Vec<&str> = words.by_ref().collect();
                let mut cur = String::new();
                for part in rest {
                    if let Some(p) = cur.strip_suffix('\\') {
                        cur = format!("{p} {part}");
                    } else {
                        if !cur.is_empty() {
                            assignments.push(std::mem::take(&mut cur));
                        }
                        cur = part.to_string();
                    }
                }
                if !cur.is_empty() {
                    assignments.push(cur);
                }
                break;
            }
            let letters = if first && !w.starts_with('-') {
                w
            } else if let Some(l) = w.strip_prefix('-').filter(|l| !l.starts_with('-')) {
                l
            } else {
                first = false;
                continue;
            };
            first = false;
            for c in letters.chars() {
                self.opts.set_switch(c);
            }
        }
        Ok(assignments)
    }

    /// `MAKEFLAGS` for sub-makes: the flag letters, then `-- VAR=value ...`.
    fn makeflags(&mut self) -> String {
        let letters: String = self
            .opts
            .switches()
            .into_iter()
            .filter(|(_, on)| **on)
            .map(|(c, _)| c)
            .collect();
        let mut out = letters;
        if !self.cmdline_vars.is_empty() {
            out.push_str(" --");
            for v in &self.cmdline_vars {
                out.push(' ');
                out.push_str(&v.replace(' ', "\\ "));
            }
        }
        out
    }
}

/// An I/O error in the words of the C library, as make prints them.
fn reason(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory",
        std::io::ErrorKind::PermissionDenied => "Permission denied",
        std::io::ErrorKind::NotADirectory => "Not a directory",
        std::io::ErrorKind::IsADirectory => "Is a directory",
        _ => "Input/output error",
    }
}
