//! Running lists, and-or lists, pipelines and compound commands (`if`, loops, `case`,
//! subshells, groups), with `set -e`, traps and background jobs.

use crate::io::{In, Io, Out};
use brush_parser::ast;
use guest_support::process;
use std::rc::Rc;

use super::launch::Prepared;
use super::text::{and_or_text, redirects_text};
use super::*;

impl Shell {
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
    pub(super) fn run_async(&mut self, and_or: &ast::AndOrList, io: &Io) -> Status {
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
    pub(super) fn add_job(&mut self, pid: u32, and_or: &ast::AndOrList) {
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
    pub(super) fn fork_script(&self, and_or: &ast::AndOrList) -> String {
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

    pub(super) fn run_and_or(&mut self, list: &ast::AndOrList, io: &Io) -> Status {
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

    pub(super) fn check_errexit(&self, status: i32) -> Result<(), Ctl> {
        if status != 0 && self.opts.errexit && self.in_condition == 0 {
            return Err(Ctl::Exit(status));
        }
        Ok(())
    }

    pub(super) fn run_pipeline(&mut self, p: &ast::Pipeline, io: &Io) -> Status {
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

    pub(super) fn run_untimed(&mut self, p: &ast::Pipeline, io: &Io) -> Status {
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
    pub(super) fn set_pipestatus(&mut self, statuses: &[i32]) {
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
    pub(super) fn run_multi(&mut self, seq: &[ast::Command], io: &Io) -> Status {
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

    pub(super) fn run_command_inner(&mut self, cmd: &ast::Command, io: &Io) -> Status {
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

    pub(super) fn run_compound(&mut self, c: &ast::CompoundCommand, io: &Io) -> Status {
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
    pub(super) fn arith(&mut self, text: &str, io: &Io) -> Result<i64, Ctl> {
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

    pub(super) fn condition(&mut self, list: &ast::CompoundList, io: &Io) -> Result<bool, Ctl> {
        self.in_condition += 1;
        let r = self.run_list(list, io);
        self.in_condition -= 1;
        Ok(r? == 0)
    }

    pub(super) fn run_loop(
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
    pub(super) fn in_loop(&mut self, f: impl FnOnce(&mut Self) -> Status) -> Status {
        self.loop_depth += 1;
        let result = f(self);
        self.loop_depth -= 1;
        result
    }

    /// Runs a loop's body once. `break`/`continue` of this loop become a [`Next`]; those
    /// naming an outer loop go on up with one level less.
    pub(super) fn loop_body(
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
}
