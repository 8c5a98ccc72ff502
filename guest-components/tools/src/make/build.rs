//! Making targets: what is out of date (modification times, phony targets, `-B`), pattern
//! rules, target-specific variables, and recipes run through `$(SHELL)`.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use super::{Fail, Line, Make, Origin, R, Recipe, Var, stop};

/// A child's whole environment.
type Env = Vec<(String, String)>;

/// How deep a chain of prerequisites may go.
const MAX_CHAIN: u32 = 2000;

/// The stem of `name` under `pattern` (its first `%`), if it matches.
pub(super) fn match_pattern(pattern: &str, name: &str) -> Option<String> {
    let (pre, post) = pattern.split_once('%')?;
    (name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post))
        .then(|| name[pre.len()..name.len() - post.len()].to_string())
}

/// `pattern` with its first `%` replaced by `stem`.
pub(super) fn fill_pattern(pattern: &str, stem: &str) -> String {
    match pattern.split_once('%') {
        Some((pre, post)) => format!("{pre}{stem}{post}"),
        None => pattern.to_string(),
    }
}

fn mtime(path: &str) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// What making a target came to.
#[derive(Clone, Copy, Debug)]
pub(super) struct Outcome {
    /// Its file's time after it was made; `None` when there is no such file.
    mtime: Option<SystemTime>,
    /// A recipe ran for it, or it counts as new (phony, forced).
    remade: bool,
    failed: bool,
    /// It failed because a prerequisite did (`-k` says it was not remade).
    prereq_failed: bool,
    /// A circular dependency that was dropped.
    dropped: bool,
}

impl Outcome {
    fn failed() -> Outcome {
        Outcome {
            mtime: None,
            remade: false,
            failed: true,
            prereq_failed: false,
            dropped: false,
        }
    }
}

pub(super) enum State {
    Running,
    Done(Outcome),
}

/// The rule that makes a target: its own, or a pattern rule's.
struct Plan {
    prereqs: Vec<String>,
    order_only: Vec<String>,
    recipe: Option<Recipe>,
    stem: Option<String>,
}

/// One command of a recipe, its prefixes taken off.
struct Command {
    text: String,
    silent: bool,
    ignore: bool,
    /// `+`, or a line that runs `$(MAKE)`: run even under `-n`.
    force: bool,
}

fn dedup(list: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    list.iter().filter(|p| seen.insert(*p)).cloned().collect()
}

impl Make {
    fn is_phony(&self, name: &str) -> bool {
        self.targets
            .get(".PHONY")
            .is_some_and(|t| t.prereqs.iter().any(|p| p == name))
    }

    /// Whether special target `special` applies to `name`: listed, or present with no
    /// prerequisites (all targets).
    fn special_has(&self, special: &str, name: &str) -> bool {
        self.targets
            .get(special)
            .is_some_and(|t| t.prereqs.is_empty() || t.prereqs.iter().any(|p| p == name))
    }

    /// Makes the goals in order; the exit status.
    pub(super) fn make_goals(&mut self, goals: &[String]) -> R<i32> {
        let mut status = 0;
        for goal in goals {
            let before = self.commands;
            let outcome = match self.update(goal, None) {
                Ok(o) => o,
                Err(Fail::Exit(code)) => return Ok(code),
                Err(e) => return Err(e),
            };
            if outcome.failed {
                status = 2;
                if self.opts.keep_going && outcome.prereq_failed {
                    let _ = std::io::Write::flush(&mut std::io::stdout());
                    eprintln!(
                        "{}: Target '{goal}' not remade because of errors.",
                        self.name()
                    );
                }
                continue;
            }
            if self.opts.question {
                if self.commands != before {
                    status = status.max(1);
                }
                continue;
            }
            if self.commands == before {
                let has_recipe = self.plan(goal).is_some_and(|p| p.recipe.is_some());
                if has_recipe && !self.is_phony(goal) {
                    println!("{}: '{goal}' is up to date.", self.name());
                } else {
                    println!("{}: Nothing to be done for '{goal}'.", self.name());
                }
            }
        }
        Ok(status)
    }

    fn update(&mut self, name: &str, parent: Option<&str>) -> R<Outcome> {
        match self.states.get(name) {
            Some(State::Done(o)) => return Ok(*o),
            Some(State::Running) => {
                let _ = std::io::Write::flush(&mut std::io::stdout());
                eprintln!(
                    "{}: Circular {} <- {name} dependency dropped.",
                    self.name(),
                    parent.unwrap_or_default()
                );
                return Ok(Outcome {
                    mtime: None,
                    remade: false,
                    failed: false,
                    prereq_failed: false,
                    dropped: true,
                });
            }
            None => {}
        }
        // Each level is a few frames of the guest's stack: a chain of prerequisites deep
        // enough to run it out ends with make's error instead.
        if self.chain >= MAX_CHAIN {
            return stop(
                None,
                format!("prerequisites of '{name}' nested more than {MAX_CHAIN} deep"),
            );
        }
        self.states.insert(name.to_string(), State::Running);
        self.chain += 1;
        let result = self.update_now(name, parent);
        self.chain -= 1;
        let done = match &result {
            Ok(o) => *o,
            Err(_) => Outcome::failed(),
        };
        self.states.insert(name.to_string(), State::Done(done));
        result
    }

    /// The rule for `name`: its explicit rule with a recipe, else a pattern rule that
    /// applies, else `.DEFAULT`'s recipe; `None` when nothing makes it.
    fn plan(&self, name: &str) -> Option<Plan> {
        let explicit = self.targets.get(name);
        let mut plan = Plan {
            prereqs: explicit.map(|t| t.prereqs.clone()).unwrap_or_default(),
            order_only: explicit.map(|t| t.order_only.clone()).unwrap_or_default(),
            recipe: explicit.and_then(|t| t.recipe.clone()),
            stem: explicit.and_then(|t| t.stem.clone()),
        };
        if plan.recipe.is_none()
            && !self.is_phony(name)
            && let Some(found) = self.implicit(name, 0)
        {
            let mut prereqs = found.prereqs;
            prereqs.append(&mut plan.prereqs);
            plan.prereqs = prereqs;
            plan.order_only.extend(found.order_only);
            plan.recipe = found.recipe;
            plan.stem = found.stem;
        }
        let is_target = explicit.is_some_and(|t| t.is_target);
        if plan.recipe.is_none()
            && !is_target
            && mtime(name).is_none()
            && let Some(d) = self.targets.get(".DEFAULT").and_then(|t| t.recipe.clone())
        {
            plan.recipe = Some(d);
        }
        (is_target || plan.recipe.is_some()).then_some(plan)
    }

    /// A pattern rule that can make `name`: the shortest stem first, its prerequisites
    /// existing, named as targets, or makeable by another pattern rule.
    fn implicit(&self, name: &str, depth: usize) -> Option<Plan> {
        let (dir, base) = match name.rfind('/') {
            Some(i) => (&name[..=i], &name[i + 1..]),
            None => ("", name),
        };
        let mut candidates = Vec::new();
        for (idx, p) in self.patterns.iter().enumerate() {
            if p.recipe.is_none() {
                continue;
            }
            for tp in &p.targets {
                if tp == "%" && depth > 0 {
                    continue;
                }
                let (stem, in_dir) = if tp.contains('/') {
                    (match_pattern(tp, name), false)
                } else {
                    (match_pattern(tp, base), true)
                };
                if let Some(stem) = stem {
                    candidates.push((stem.len(), idx, stem, in_dir));
                }
            }
        }
        candidates.sort_by_key(|c| c.0);
        for (_, idx, stem, in_dir) in candidates {
            let p = &self.patterns[idx];
            let fill = |list: &[String]| -> Vec<String> {
                list.iter()
                    .map(|q| {
                        let f = fill_pattern(q, &stem);
                        if in_dir && q.contains('%') && !q.contains('/') {
                            format!("{dir}{f}")
                        } else {
                            f
                        }
                    })
                    .collect()
            };
            let prereqs = fill(&p.prereqs);
            let usable = prereqs.iter().all(|q| {
                q != name
                    && (mtime(q).is_some()
                        || self.targets.get(q).is_some_and(|t| t.is_target)
                        || (depth < 2 && self.implicit(q, depth + 1).is_some()))
            });
            if usable {
                return Some(Plan {
                    prereqs,
                    order_only: fill(&p.order_only),
                    recipe: p.recipe.clone(),
                    stem: Some(if in_dir { format!("{dir}{stem}") } else { stem }),
                });
            }
        }
        None
    }

    fn update_now(&mut self, name: &str, parent: Option<&str>) -> R<Outcome> {
        let phony = self.is_phony(name);
        let Some(plan) = self.plan(name) else {
            if let Some(t) = mtime(name) {
                return Ok(Outcome {
                    mtime: Some(t),
                    remade: false,
                    failed: false,
                    prereq_failed: false,
                    dropped: false,
                });
            }
            let msg = match parent {
                Some(p) => format!("No rule to make target '{name}', needed by '{p}'"),
                None => format!("No rule to make target '{name}'"),
            };
            if self.opts.keep_going {
                let _ = std::io::Write::flush(&mut std::io::stdout());
                eprintln!("{}: *** {msg}.", self.name());
                return Ok(Outcome::failed());
            }
            return stop(None, msg);
        };
        let own = if phony { None } else { mtime(name) };
        self.push_target_scope(name)?;
        let result = self.make_with(name, &plan, own, phony);
        self.scopes.pop();
        result
    }

    fn make_with(
        &mut self,
        name: &str,
        plan: &Plan,
        own: Option<SystemTime>,
        phony: bool,
    ) -> R<Outcome> {
        let mut need = self.opts.always || own.is_none();
        let mut newer = Vec::new();
        let mut failed = false;
        for (p, order_only) in plan
            .prereqs
            .iter()
            .map(|p| (p, false))
            .chain(plan.order_only.iter().map(|p| (p, true)))
        {
            let o = match self.update(p, Some(name)) {
                Ok(o) => o,
                Err(Fail::Exit(code)) => {
                    if !self.opts.keep_going {
                        return Err(Fail::Exit(code));
                    }
                    failed = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if o.failed {
                failed = true;
                continue;
            }
            if o.dropped || order_only {
                continue;
            }
            let is_newer = o.remade
                || match (o.mtime, own) {
                    (Some(pm), Some(tm)) => pm > tm,
                    _ => true,
                };
            if is_newer {
                need = true;
                if !newer.contains(p) {
                    newer.push(p.clone());
                }
            }
        }
        if failed {
            return Ok(Outcome {
                prereq_failed: true,
                ..Outcome::failed()
            });
        }
        if self.opts.old_files.contains(name) {
            need = false;
        }
        if !need {
            return Ok(Outcome {
                mtime: own,
                remade: false,
                failed: false,
                prereq_failed: false,
                dropped: false,
            });
        }
        if let Some(recipe) = &plan.recipe {
            let ok = if self.opts.question {
                if !recipe.is_empty() {
                    self.commands += 1;
                }
                true
            } else if self.opts.touch && !phony {
                self.touch(name)
            } else {
                self.run_recipe(name, recipe, plan, &newer)?
            };
            if !ok {
                if !phony
                    && self.targets.contains_key(".DELETE_ON_ERROR")
                    && std::fs::remove_file(name).is_ok()
                {
                    eprintln!("{}: *** Deleting file '{name}'", self.name());
                }
                if self.opts.keep_going {
                    return Ok(Outcome::failed());
                }
                return Err(Fail::Exit(2));
            }
        }
        Ok(Outcome {
            mtime: if phony { None } else { mtime(name) },
            remade: true,
            failed: false,
            prereq_failed: false,
            dropped: false,
        })
    }

    /// `-t`: the target's time set to now, its recipe not run.
    fn touch(&mut self, name: &str) -> bool {
        self.commands += 1;
        if !self.opts.silent {
            println!("touch {name}");
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(name);
        match file.and_then(|f| f.set_modified(SystemTime::now())) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("{}: touch {name}: {}", self.name(), super::reason(&e));
                false
            }
        }
    }

    /// The target-specific and pattern-specific variables of `name`, in a scope of their
    /// own (its prerequisites inherit them).
    fn push_target_scope(&mut self, name: &str) -> R<()> {
        let mut vars: Vec<super::TargetVar> = self
            .pattern_vars
            .iter()
            .filter(|(p, _)| match_pattern(p, name).is_some())
            .map(|(_, v)| v.clone())
            .collect();
        if let Some(own) = self.target_vars.get(name) {
            vars.extend(own.iter().cloned());
        }
        self.scopes.push(HashMap::new());
        for v in vars {
            let existing = self.lookup(&v.name).cloned();
            if existing
                .as_ref()
                .is_some_and(|e| e.origin == Origin::CommandLine)
                && !v.overriding
            {
                continue;
            }
            let origin = if v.overriding {
                Origin::Override
            } else {
                Origin::File
            };
            if let Some(var) = self.assigned(existing.as_ref(), &v.op, &v.value, origin)? {
                self.scopes
                    .last_mut()
                    .expect("pushed above")
                    .insert(v.name.clone(), var);
            }
            if v.export {
                self.exports.insert(v.name.clone(), true);
            }
        }
        Ok(())
    }

    /// The automatic variables of a recipe for `name`.
    fn automatic(&self, name: &str, plan: &Plan, newer: &[String]) -> HashMap<String, Var> {
        let stem = plan.stem.clone().unwrap_or_else(|| {
            self.suffixes
                .iter()
                .find_map(|s| name.strip_suffix(s.as_str()).filter(|b| !b.is_empty()))
                .unwrap_or_default()
                .to_string()
        });
        let auto = |value: String| Var {
            value,
            recursive: false,
            origin: Origin::Automatic,
        };
        let mut scope = HashMap::new();
        scope.insert("@".into(), auto(name.to_string()));
        scope.insert(
            "<".into(),
            auto(plan.prereqs.first().cloned().unwrap_or_default()),
        );
        scope.insert("^".into(), auto(dedup(&plan.prereqs).join(" ")));
        scope.insert("+".into(), auto(plan.prereqs.join(" ")));
        scope.insert("?".into(), auto(newer.join(" ")));
        scope.insert("|".into(), auto(dedup(&plan.order_only).join(" ")));
        scope.insert("*".into(), auto(stem));
        scope
    }

    /// Runs `recipe` for `name`; `false` when a command failed (its message printed).
    fn run_recipe(
        &mut self,
        name: &str,
        recipe: &[Line],
        plan: &Plan,
        newer: &[String],
    ) -> R<bool> {
        let scope = self.automatic(name, plan, newer);
        self.scopes.push(scope);
        let result = self.run_commands(name, recipe);
        self.scopes.pop();
        result
    }

    fn run_commands(&mut self, name: &str, recipe: &[Line]) -> R<bool> {
        let silent_all = self.opts.silent || self.special_has(".SILENT", name);
        let ignore_all = self.opts.ignore_errors || self.special_has(".IGNORE", name);
        let oneshell = self.targets.contains_key(".ONESHELL");
        let mut commands: Vec<(Command, super::Loc)> = Vec::new();
        for line in recipe {
            self.loc = Some(line.loc.clone());
            let runs_make = line.text.contains("$(MAKE)") || line.text.contains("${MAKE}");
            let text = self.expand(&line.text)?;
            for piece in split_commands(&text) {
                let mut c = strip_prefixes(piece);
                c.force |= runs_make;
                commands.push((c, line.loc.clone()));
            }
        }
        if oneshell && !commands.is_empty() {
            let (first, loc) = &commands[0];
            let joined = commands
                .iter()
                .map(|(c, _)| c.text.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            commands = vec![(
                Command {
                    text: joined,
                    silent: first.silent,
                    ignore: first.ignore,
                    force: commands.iter().any(|(c, _)| c.force),
                },
                loc.clone(),
            )];
        }
        for (c, loc) in commands {
            if c.text.trim().is_empty() {
                continue;
            }
            self.commands += 1;
            if self.opts.dry_run || !(c.silent || silent_all) {
                println!("{}", c.text);
            }
            if self.opts.dry_run && !c.force {
                continue;
            }
            let status = self.shell(&c.text)?;
            if status != 0 {
                let _ = std::io::Write::flush(&mut std::io::stdout());
                if c.ignore || ignore_all {
                    if self.opts.silent {
                        continue;
                    }
                    eprintln!("{}: [{loc}: {name}] Error {status} (ignored)", self.name());
                    continue;
                }
                eprintln!("{}: *** [{loc}: {name}] Error {status}", self.name());
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Runs one command through `$(SHELL) $(.SHELLFLAGS)`; its exit status.
    fn shell(&mut self, cmd: &str) -> R<i32> {
        use guest_support::process::Stdio;
        let (argv, env) = self.shell_command(cmd)?;
        let shell = argv[0].clone();
        match guest_support::spawn(argv, env, Stdio::Inherit, Stdio::Inherit, Stdio::Inherit) {
            Ok(pid) => Ok(guest_support::process::wait(pid)),
            Err(e) => {
                use guest_support::process::Error;
                let (why, status) = match e {
                    Error::NotFound(_) => ("No such file or directory".to_string(), 127),
                    Error::Limit(m) | Error::Io(m) => (m, 126),
                    Error::BadHandle => ("bad handle".to_string(), 126),
                };
                eprintln!("{}: {shell}: {why}", self.name());
                Ok(status)
            }
        }
    }

    /// `$(SHELL) $(.SHELLFLAGS) CMD` and the environment to run it in (recipes and
    /// `$(shell)` alike).
    pub(super) fn shell_command(&mut self, cmd: &str) -> R<(Vec<String>, Env)> {
        let shell = self.var_value("SHELL")?;
        let flags = self.var_value(".SHELLFLAGS")?;
        let mut argv = vec![shell.trim().to_string()];
        argv.extend(flags.split_whitespace().map(String::from));
        argv.push(cmd.to_string());
        Ok((argv, self.child_env()?))
    }

    /// The environment of a recipe: make's own, with exported variables at their values,
    /// `MAKELEVEL` one deeper and `MAKEFLAGS` for a sub-make.
    fn child_env(&mut self) -> R<Env> {
        let mut env: BTreeMap<String, String> = std::env::vars().collect();
        let mut names: Vec<String> = self.vars.keys().cloned().collect();
        for s in &self.scopes {
            names.extend(s.keys().cloned());
        }
        names.sort();
        names.dedup();
        for n in names {
            let Some(v) = self.lookup(&n) else {
                continue;
            };
            if matches!(v.origin, Origin::Automatic | Origin::Default)
                || matches!(n.as_str(), "MAKEFLAGS" | "MAKELEVEL" | "SHELL")
            {
                continue;
            }
            let explicit = self.exports.get(&n).copied();
            let export = explicit.unwrap_or_else(|| {
                self.from_env.contains(&n)
                    || v.origin == Origin::CommandLine
                    || (self.export_all && is_name(&n))
            });
            if export {
                let value = self.var_value(&n)?;
                env.insert(n, value);
            } else if explicit == Some(false) {
                env.remove(&n);
            }
        }
        // A shell takes its `pwd` from PWD when PWD names its directory, and make may
        // have moved (`-C`).
        if env.contains_key("PWD") {
            env.insert("PWD".into(), guest_support::cwd());
        }
        env.insert("MAKELEVEL".into(), (self.level + 1).to_string());
        env.insert("MAKEFLAGS".into(), self.makeflags());
        Ok(env.into_iter().collect())
    }
}

/// Whether `n` can be an environment variable's name.
fn is_name(n: &str) -> bool {
    !n.is_empty()
        && !n.starts_with(|c: char| c.is_ascii_digit())
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// An expanded recipe line split where it holds newlines of its own (a `define`d canned
/// recipe), but not at a backslash-newline, which the shell joins.
fn split_commands(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let b = text.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b'\n' && (i == 0 || b[i - 1] != b'\\') {
            out.push(&text[start..i]);
            start = i + 1;
        }
    }
    out.push(&text[start..]);
    out
}

/// `@`, `-` and `+` (in any order, with blanks) off the front of a command.
fn strip_prefixes(text: &str) -> Command {
    let mut c = Command {
        text: String::new(),
        silent: false,
        ignore: false,
        force: false,
    };
    let mut rest = text.trim_start();
    loop {
        match rest.chars().next() {
            Some('@') => c.silent = true,
            Some('-') => c.ignore = true,
            Some('+') => c.force = true,
            _ => break,
        }
        rest = rest[1..].trim_start();
    }
    c.text = rest.to_string();
    c
}
