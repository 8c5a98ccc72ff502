//! Reading makefiles: logical lines, comments, conditionals, `define`, `include`,
//! assignments and rules, as GNU make reads them (targets and prerequisites are expanded as
//! they are read, recipes when they run).

use std::rc::Rc;

use super::{Line, Loc, Make, Origin, Pattern, R, TargetVar, Var, stop};

/// Positions of the bytes of `s` outside variable references and function calls.
pub(super) fn top_level(s: &str) -> Vec<(usize, u8)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut closers: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if let Some(&close) = closers.last() {
            match c {
                b'(' => closers.push(b')'),
                b'{' => closers.push(b'}'),
                _ if c == close => {
                    closers.pop();
                }
                _ => {}
            }
            i += 1;
            continue;
        }
        if c == b'$' && i + 1 < b.len() {
            match b[i + 1] {
                b'(' => closers.push(b')'),
                b'{' => closers.push(b'}'),
                _ => {}
            }
            i += 2;
            continue;
        }
        out.push((i, c));
        i += 1;
    }
    out
}

/// `NAME OP VALUE` when `s` is an assignment (`=`, `:=`, `::=`, `:::=`, `?=`, `+=`, `!=`):
/// the name untrimmed, the operator and the value without its leading blanks.
pub(super) fn split_assignment(s: &str) -> Option<(&str, &'static str, &str)> {
    for (i, c) in top_level(s) {
        match c {
            b'=' => {
                let before = &s[..i];
                let (name, op) = if let Some(n) = before.strip_suffix(":::") {
                    (n, ":::=")
                } else if let Some(n) = before.strip_suffix("::") {
                    (n, "::=")
                } else if let Some(n) = before.strip_suffix(':') {
                    (n, ":=")
                } else if let Some(n) = before.strip_suffix('+') {
                    (n, "+=")
                } else if let Some(n) = before.strip_suffix('?') {
                    (n, "?=")
                } else if let Some(n) = before.strip_suffix('!') {
                    (n, "!=")
                } else {
                    (before, "=")
                };
                if name.trim().is_empty() {
                    return None;
                }
                return Some((name, op, s[i + 1..].trim_start()));
            }
            b':' => {
                let rest = &s[i..];
                if !(rest.starts_with(":=") || rest.starts_with("::=") || rest.starts_with(":::="))
                {
                    return None;
                }
            }
            _ => {}
        }
    }
    None
}

/// The position of the first top-level `c` in `s`.
fn find_top(s: &str, c: u8) -> Option<usize> {
    top_level(s)
        .into_iter()
        .find(|&(_, b)| b == c)
        .map(|(i, _)| i)
}

/// `s` without its comment: a `#` outside references, not escaped (`\#` is a `#`).
fn strip_comment(s: &str) -> String {
    if !s.contains('#') {
        return s.to_string();
    }
    let tops: std::collections::HashSet<usize> = top_level(s)
        .into_iter()
        .filter(|&(_, c)| c == b'#')
        .map(|(i, _)| i)
        .collect();
    let mut out = String::new();
    for (i, c) in s.char_indices() {
        if c == '#' && tops.contains(&i) {
            if out.ends_with('\\') {
                let backslashes = out.len() - out.trim_end_matches('\\').len();
                out.pop();
                if backslashes % 2 == 1 {
                    out.push('#');
                    continue;
                }
                out.push('\\');
            }
            break;
        }
        out.push(c);
    }
    out
}

/// Whether a line continues on the next: it ends in an odd number of backslashes.
fn continues(s: &str) -> bool {
    (s.len() - s.trim_end_matches('\\').len()) % 2 == 1
}

/// One `if...`/`else` level.
struct Cond {
    /// Lines here are read.
    active: bool,
    /// A branch of this conditional was taken (or the enclosing one is inactive).
    taken: bool,
    seen_else: bool,
}

/// The rule whose recipe lines are being read.
struct RuleCtx {
    targets: Vec<String>,
    pattern: Option<usize>,
    lines: Vec<Line>,
    has_recipe: bool,
    loc: Loc,
}

struct Reader {
    conds: Vec<Cond>,
    rule: Option<RuleCtx>,
}

impl Reader {
    fn active(&self) -> bool {
        self.conds.last().is_none_or(|c| c.active)
    }
}

const CONDITIONALS: [&str; 4] = ["ifeq", "ifneq", "ifdef", "ifndef"];

/// The first word of `t` and what follows it (trimmed), when it is one of `words`.
fn directive<'a>(t: &'a str, words: &[&str]) -> Option<(&'a str, &'a str)> {
    let end = t
        .find(|c: char| c.is_whitespace() || c == '(' || c == '"' || c == '\'')
        .unwrap_or(t.len());
    let word = &t[..end];
    words.contains(&word).then(|| (word, t[end..].trim()))
}

impl Make {
    /// Reads a makefile; `false` when there is no such file.
    pub(super) fn read_makefile(&mut self, path: &str, from: Option<&Loc>) -> R<bool> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return stop(from, format!("{path}: {}", super::reason(&e))),
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let list = self.vars.get("MAKEFILE_LIST").map(|v| v.value.clone());
        self.vars.insert(
            "MAKEFILE_LIST".into(),
            Var {
                value: format!("{} {path}", list.unwrap_or_default()),
                recursive: false,
                origin: Origin::File,
            },
        );
        let saved = self.loc.clone();
        self.parse_text(&text, Rc::from(path))?;
        self.loc = saved;
        Ok(true)
    }

    /// Reads makefile text (a file, `--eval`, or `$(eval)`).
    pub(super) fn parse_text(&mut self, text: &str, file: Rc<str>) -> R<()> {
        let lines: Vec<&str> = text
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect();
        let lines = if text.ends_with('\n') {
            &lines[..lines.len() - 1]
        } else {
            &lines[..]
        };
        let mut r = Reader {
            conds: Vec::new(),
            rule: None,
        };
        let mut i = 0;
        while i < lines.len() {
            let loc = Loc {
                file: file.clone(),
                line: i + 1,
            };
            self.loc = Some(loc.clone());
            let prefix = self.recipe_prefix();
            // A recipe line of the rule being read.
            if r.rule.is_some() && lines[i].starts_with(prefix) {
                let mut text = lines[i][prefix.len_utf8()..].to_string();
                i += 1;
                while continues(&text) && i < lines.len() {
                    text.push('\n');
                    text.push_str(lines[i].strip_prefix(prefix).unwrap_or(lines[i]));
                    i += 1;
                }
                if r.active()
                    && let Some(rule) = &mut r.rule
                {
                    rule.has_recipe = true;
                    rule.lines.push(Line { text, loc });
                }
                continue;
            }
            // A logical line: continuations joined by one space.
            let mut line = lines[i].to_string();
            i += 1;
            while continues(&line) && i < lines.len() {
                line.pop();
                let kept = line.trim_end().len();
                line.truncate(kept);
                line.push(' ');
                line.push_str(lines[i].trim_start());
                i += 1;
            }
            let line = strip_comment(&line);
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            if self.conditional(&mut r, t, &loc)? {
                continue;
            }
            if let Some((_, rest)) = directive(t, &["define"]) {
                i = self.define(&mut r, lines, i, rest, &loc, false, false)?;
                continue;
            }
            if !r.active() {
                continue;
            }
            self.finish_rule(&mut r);
            // An assignment keeps the blanks at the end of its value.
            self.statement(&mut r, line.trim_start(), &line, lines, &mut i, &loc)?;
        }
        if !r.conds.is_empty() {
            let loc = Loc {
                file,
                line: lines.len() + 1,
            };
            return stop(Some(&loc), "missing 'endif'");
        }
        self.finish_rule(&mut r);
        Ok(())
    }

    fn recipe_prefix(&self) -> char {
        self.vars
            .get(".RECIPEPREFIX")
            .and_then(|v| v.value.chars().next())
            .unwrap_or('\t')
    }

    /// `ifeq`, `ifneq`, `ifdef`, `ifndef`, `else`, `endif`: `true` when `t` was one.
    fn conditional(&mut self, r: &mut Reader, t: &str, loc: &Loc) -> R<bool> {
        if let Some((word, rest)) = directive(t, &CONDITIONALS) {
            let parent = r.active();
            let result = if parent {
                self.condition(word, rest, loc)?
            } else {
                false
            };
            r.conds.push(Cond {
                active: parent && result,
                taken: !parent || result,
                seen_else: false,
            });
            return Ok(true);
        }
        if let Some((_, rest)) = directive(t, &["else"]) {
            let parent = r.conds.len() < 2 || r.conds[r.conds.len() - 2].active;
            let Some(top) = r.conds.last() else {
                return stop(Some(loc), "extraneous 'else'");
            };
            if top.seen_else {
                return stop(Some(loc), "only one 'else' per conditional");
            }
            let taken = top.taken;
            let (active, seen_else) = if rest.is_empty() {
                (parent && !taken, true)
            } else if let Some((word, args)) = directive(rest, &CONDITIONALS) {
                (parent && !taken && self.condition(word, args, loc)?, false)
            } else {
                return stop(Some(loc), "extraneous text after 'else' directive");
            };
            let top = r.conds.last_mut().expect("checked above");
            top.active = active;
            top.taken = taken || active;
            top.seen_else = seen_else;
            return Ok(true);
        }
        if directive(t, &["endif"]).is_some() {
            if r.conds.pop().is_none() {
                return stop(Some(loc), "extraneous 'endif'");
            }
            return Ok(true);
        }
        Ok(false)
    }

    fn condition(&mut self, word: &str, args: &str, loc: &Loc) -> R<bool> {
        match word {
            "ifdef" | "ifndef" => {
                let name = self.expand(args)?;
                let name = name.trim();
                let defined = self.lookup(name).is_some_and(|v| !v.value.is_empty());
                Ok(defined == (word == "ifdef"))
            }
            _ => {
                let Some((a, b)) = comparison(args) else {
                    return stop(Some(loc), "invalid syntax in conditional");
                };
                let a = self.expand(a)?;
                let b = self.expand(b)?;
                Ok((a == b) == (word == "ifeq"))
            }
        }
    }

    /// `define NAME [OP]` up to its `endef`; returns the index of the line after it.
    #[allow(clippy::too_many_arguments)]
    fn define(
        &mut self,
        r: &mut Reader,
        lines: &[&str],
        mut i: usize,
        rest: &str,
        loc: &Loc,
        overriding: bool,
        export: bool,
    ) -> R<usize> {
        let mut body = Vec::new();
        let mut depth = 0;
        loop {
            let Some(l) = lines.get(i) else {
                return stop(Some(loc), "missing 'endef', unterminated 'define'");
            };
            i += 1;
            let t = l.trim_start();
            if directive(t, &["define"]).is_some() {
                depth += 1;
            } else if directive(strip_comment(t).trim(), &["endef"]).is_some() {
                if depth == 0 {
                    break;
                }
                depth -= 1;
            }
            body.push(*l);
        }
        if !r.active() {
            return Ok(i);
        }
        self.finish_rule(r);
        let rest = rest.trim();
        let (name, op) = match ["::=", ":::=", ":=", "+=", "?=", "!=", "="]
            .iter()
            .find(|op| rest.ends_with(*op))
        {
            Some(op) => (rest[..rest.len() - op.len()].trim(), *op),
            None => (rest, "="),
        };
        let name = self.expand(name)?;
        let origin = if overriding {
            Origin::Override
        } else {
            Origin::File
        };
        self.assign(&name, op, &body.join("\n"), origin)?;
        if export {
            self.exports.insert(name, true);
        }
        Ok(i)
    }

    /// A line that is not a recipe, conditional or `define`.
    fn statement(
        &mut self,
        r: &mut Reader,
        t: &str,
        line: &str,
        lines: &[&str],
        i: &mut usize,
        loc: &Loc,
    ) -> R<()> {
        if let Some((word, rest)) = directive(t, &["include", "-include", "sinclude"]) {
            let names = self.expand(rest)?;
            for name in names.split_whitespace() {
                let mut found = self.read_makefile(name, Some(loc))?;
                if !found && !name.starts_with('/') {
                    for dir in self.opts.includes.clone() {
                        if self.read_makefile(&format!("{dir}/{name}"), Some(loc))? {
                            found = true;
                            break;
                        }
                    }
                }
                if !found && word == "include" {
                    let _ = std::io::Write::flush(&mut std::io::stdout());
                    eprintln!("{loc}: {name}: No such file or directory");
                    return stop(None, format!("No rule to make target '{name}'"));
                }
            }
            self.loc = Some(loc.clone());
            return Ok(());
        }
        // Directory search is not implemented (the README says so): a `vpath` line is
        // read and has no effect.
        if directive(t, &["vpath"]).is_some() {
            return Ok(());
        }
        // `override`, `export`, `unexport`, `private` in front of an assignment.
        let mut rest = t;
        let mut overriding = false;
        let mut export = None;
        while let Some((word, after)) = directive(
            rest,
            &["override", "export", "unexport", "private", "undefine"],
        ) {
            match word {
                "override" => overriding = true,
                "export" => export = Some(true),
                "unexport" => export = Some(false),
                "undefine" => {
                    let name = self.expand(after)?;
                    for n in name.split_whitespace() {
                        let keep = self
                            .vars
                            .get(n)
                            .is_some_and(|v| v.origin == Origin::CommandLine && !overriding);
                        if !keep {
                            self.vars.remove(n);
                        }
                    }
                    return Ok(());
                }
                _ => {}
            }
            rest = after;
            if let Some((_, drest)) = directive(rest, &["define"]) {
                *i = self.define(r, lines, *i, drest, loc, overriding, export == Some(true))?;
                return Ok(());
            }
        }
        if let Some((name, op, value)) = split_assignment(rest) {
            let name = self.expand(name.trim())?;
            let origin = if overriding {
                Origin::Override
            } else {
                Origin::File
            };
            self.assign(&name, op, value, origin)?;
            if let Some(e) = export {
                self.exports.insert(name, e);
            }
            return Ok(());
        }
        if let Some(e) = export {
            let names = self.expand(rest)?;
            if names.trim().is_empty() {
                self.export_all = e;
            }
            for n in names.split_whitespace() {
                self.exports.insert(n.to_string(), e);
            }
            return Ok(());
        }
        if find_top(t, b':').is_some() {
            return self.rule(r, t, loc);
        }
        let expanded = self.expand(t)?;
        if expanded.trim().is_empty() {
            return Ok(());
        }
        if line.starts_with("        ") {
            return stop(
                Some(loc),
                "missing separator (did you mean TAB instead of 8 spaces?)",
            );
        }
        if line.starts_with('\t') {
            return stop(Some(loc), "recipe commences before first target");
        }
        stop(Some(loc), "missing separator")
    }

    /// `name OP value` from a makefile (or the command line, or a target's variables).
    pub(super) fn assign(&mut self, name: &str, op: &str, value: &str, origin: Origin) -> R<()> {
        if name.is_empty() {
            return stop(self.loc.as_ref(), "empty variable name");
        }
        let existing = self.vars.get(name).cloned();
        // A command-line variable wins over the makefile's, unless `override`; with `-e`
        // so does the environment's.
        if let Some(v) = &existing {
            let protected = match origin {
                Origin::File => {
                    v.origin == Origin::CommandLine
                        || v.origin == Origin::Override
                        || (self.opts.env_overrides && v.origin == Origin::Environment)
                }
                Origin::CommandLine => v.origin == Origin::Override,
                _ => false,
            };
            if protected {
                return Ok(());
            }
        }
        let var = self.assigned(existing.as_ref(), op, value, origin)?;
        if let Some(var) = var {
            self.vars.insert(name.to_string(), var);
        }
        Ok(())
    }

    /// The variable `op` makes of `existing` and `value`; `None` when it changes nothing
    /// (`?=` on a defined variable).
    pub(super) fn assigned(
        &mut self,
        existing: Option<&Var>,
        op: &str,
        value: &str,
        origin: Origin,
    ) -> R<Option<Var>> {
        Ok(Some(match op {
            "=" => Var {
                value: value.to_string(),
                recursive: true,
                origin,
            },
            ":=" | "::=" | ":::=" => Var {
                value: self.expand(value)?,
                recursive: false,
                origin,
            },
            "?=" => {
                if existing.is_some() {
                    return Ok(None);
                }
                Var {
                    value: value.to_string(),
                    recursive: true,
                    origin,
                }
            }
            "!=" => {
                let cmd = self.expand(value)?;
                Var {
                    value: self.shell_output(&cmd)?,
                    recursive: false,
                    origin,
                }
            }
            _ => match existing {
                // `+=`: a simple variable takes the value expanded now, a recursive one
                // the text.
                Some(v) if !v.value.is_empty() || !value.is_empty() => {
                    let add = if v.recursive {
                        value.to_string()
                    } else {
                        self.expand(value)?
                    };
                    let value = if v.value.is_empty() {
                        add
                    } else if add.is_empty() {
                        v.value.clone()
                    } else {
                        format!("{} {add}", v.value)
                    };
                    Var {
                        value,
                        recursive: v.recursive,
                        origin: if v.origin == Origin::Override {
                            Origin::Override
                        } else {
                            origin
                        },
                    }
                }
                Some(v) => v.clone(),
                None => Var {
                    value: value.to_string(),
                    recursive: true,
                    origin,
                },
            },
        }))
    }

    /// Attaches the recipe read so far to its rule's targets.
    fn finish_rule(&mut self, r: &mut Reader) {
        let Some(rule) = r.rule.take() else {
            return;
        };
        if !rule.has_recipe {
            return;
        }
        let recipe = Rc::new(rule.lines);
        if let Some(p) = rule.pattern {
            self.patterns[p].recipe = Some(recipe);
            return;
        }
        for t in &rule.targets {
            let target = self.targets.entry(t.clone()).or_default();
            if let Some(old) = &target.recipe
                && !t.starts_with('.')
            {
                let old_loc = old.first().map(|l| l.loc.clone());
                let _ = std::io::Write::flush(&mut std::io::stdout());
                let new_loc = recipe.first().map_or(&rule.loc, |l| &l.loc);
                eprintln!("{new_loc}: warning: overriding recipe for target '{t}'");
                if let Some(ol) = old_loc {
                    eprintln!("{ol}: warning: ignoring old recipe for target '{t}'");
                }
            }
            target.recipe = Some(recipe.clone());
        }
    }

    /// `targets: prerequisites [; recipe]`, `targets: VAR = value`, or a static pattern rule
    /// `targets: target-pattern: prerequisite-patterns`.
    fn rule(&mut self, r: &mut Reader, t: &str, loc: &Loc) -> R<()> {
        let colon = find_top(t, b':').expect("checked by the caller");
        let targets_text = &t[..colon];
        let mut rest = &t[colon + 1..];
        let double = rest.starts_with(':');
        if double {
            rest = &rest[1..];
        }
        // The inline recipe after `;`.
        let (deps_text, inline) = match find_top(rest, b';') {
            Some(i) => (&rest[..i], Some(rest[i + 1..].to_string())),
            None => (rest, None),
        };
        let targets: Vec<String> = self
            .expand(targets_text)?
            .split_whitespace()
            .map(String::from)
            .collect();
        if targets.is_empty() {
            if deps_text.trim().is_empty() && inline.is_none() {
                return Ok(());
            }
            return stop(Some(loc), "missing target pattern");
        }
        // A target-specific variable.
        if inline.is_none()
            && let Some((name, op, value)) = split_assignment(deps_text)
        {
            let mut name = name.trim();
            let mut overriding = false;
            let mut export = false;
            while let Some((word, after)) = directive(name, &["override", "export", "private"]) {
                match word {
                    "override" => overriding = true,
                    "export" => export = true,
                    _ => {}
                }
                name = after;
            }
            let name = self.expand(name)?;
            for target in &targets {
                let var = TargetVar {
                    name: name.clone(),
                    op: op.to_string(),
                    value: value.to_string(),
                    overriding,
                    export,
                };
                if target.contains('%') {
                    self.pattern_vars.push((target.clone(), var));
                } else {
                    self.target_vars
                        .entry(target.clone())
                        .or_default()
                        .push(var);
                }
            }
            return Ok(());
        }
        // A static pattern rule: `objs: %.o: %.c`.
        let (static_pattern, deps_text) = match find_top(deps_text, b':') {
            Some(i) => (
                Some(self.expand(&deps_text[..i])?.trim().to_string()),
                &deps_text[i + 1..],
            ),
            None => (None, deps_text),
        };
        let deps = self.expand(deps_text)?;
        let (normal, order_only) = match deps.split_once('|') {
            Some((n, o)) => (n.to_string(), o.to_string()),
            None => (deps, String::new()),
        };
        let prereqs: Vec<String> = normal.split_whitespace().map(String::from).collect();
        let order_only: Vec<String> = order_only.split_whitespace().map(String::from).collect();
        let mut ctx = RuleCtx {
            targets: Vec::new(),
            pattern: None,
            lines: Vec::new(),
            has_recipe: inline.is_some(),
            loc: loc.clone(),
        };
        if let Some(text) = inline {
            ctx.lines.push(Line {
                text: text.trim_start().to_string(),
                loc: loc.clone(),
            });
        }
        if let Some(pattern) = static_pattern {
            for target in &targets {
                let Some(stem) = super::build::match_pattern(&pattern, target) else {
                    self.warn(&format!(
                        "target '{target}' doesn't match the target pattern"
                    ));
                    continue;
                };
                let subst = |list: &[String]| -> Vec<String> {
                    list.iter()
                        .map(|p| super::build::fill_pattern(p, &stem))
                        .collect()
                };
                let entry = self.targets.entry(target.clone()).or_default();
                entry.prereqs.extend(subst(&prereqs));
                entry.order_only.extend(subst(&order_only));
                entry.stem = Some(stem.clone());
                entry.is_target = true;
                ctx.targets.push(target.clone());
            }
            self.note_goal(&targets);
            r.rule = Some(ctx);
            return Ok(());
        }
        if targets.iter().any(|t| t.contains('%')) {
            if targets.iter().any(|t| !t.contains('%')) {
                return stop(Some(loc), "mixed implicit and normal rules");
            }
            self.patterns.push(Pattern {
                targets,
                prereqs,
                order_only,
                recipe: None,
            });
            ctx.pattern = Some(self.patterns.len() - 1);
            r.rule = Some(ctx);
            return Ok(());
        }
        // An old-fashioned suffix rule (`.c.o:`) is the pattern rule `%.o: %.c`.
        if targets.len() == 1
            && prereqs.is_empty()
            && let Some((from, to)) = self.suffix_rule(&targets[0])
        {
            self.patterns.push(Pattern {
                targets: vec![format!("%{to}")],
                prereqs: vec![format!("%{from}")],
                order_only: Vec::new(),
                recipe: None,
            });
            ctx.pattern = Some(self.patterns.len() - 1);
            r.rule = Some(ctx);
            return Ok(());
        }
        for target in &targets {
            if target == ".SUFFIXES" {
                if prereqs.is_empty() {
                    self.suffixes.clear();
                }
                self.suffixes.extend(prereqs.iter().cloned());
            }
            let entry = self.targets.entry(target.clone()).or_default();
            entry.prereqs.extend(prereqs.iter().cloned());
            entry.order_only.extend(order_only.iter().cloned());
            entry.is_target = true;
            ctx.targets.push(target.clone());
        }
        if double {
            // `::` rules each keep their own recipe in GNU make; here a later one's
            // recipe lines are added to the earlier one's.
            for target in &targets {
                if let Some(old) = self.targets.get_mut(target).and_then(|t| t.recipe.take()) {
                    let mut lines = (*old).clone();
                    lines.append(&mut ctx.lines);
                    ctx.lines = lines;
                }
            }
        }
        self.note_goal(&targets);
        r.rule = Some(ctx);
        Ok(())
    }

    /// `(".c", ".o")` for a target `.c.o` whose two suffixes are known, `(".c", "")` for
    /// `.c`.
    fn suffix_rule(&self, target: &str) -> Option<(String, String)> {
        if !target.starts_with('.') || target.contains('/') {
            return None;
        }
        if self.suffixes.iter().any(|s| s == target) {
            return Some((target.to_string(), String::new()));
        }
        self.suffixes.iter().find_map(|from| {
            let to = target.strip_prefix(from.as_str())?;
            self.suffixes
                .iter()
                .any(|s| s == to)
                .then(|| (from.clone(), to.to_string()))
        })
    }

    /// The first target of the first rule is the default goal, unless it starts with `.`
    /// (and has no `/`).
    fn note_goal(&mut self, targets: &[String]) {
        if self.first_goal.is_some() {
            return;
        }
        if let Some(t) = targets
            .iter()
            .find(|t| !t.starts_with('.') || t.contains('/'))
        {
            self.first_goal = Some(t.clone());
        }
    }
}

/// The two sides of `ifeq (a,b)`, `ifeq "a" "b"` or `ifeq 'a' 'b'`.
fn comparison(args: &str) -> Option<(&str, &str)> {
    if let Some(inner) = args.strip_prefix('(') {
        let inner = inner.strip_suffix(')')?;
        let comma = find_top(inner, b',')?;
        // Only the blanks between `(`, `,` and `)` and the arguments go.
        let a = inner[..comma].trim_end();
        let b = inner[comma + 1..].trim_start();
        return Some((a.trim_start(), b.trim_end()));
    }
    let quoted = |s: &str| -> Option<(usize, usize)> {
        let q = s.chars().next()?;
        if q != '"' && q != '\'' {
            return None;
        }
        let end = s[1..].find(q)? + 1;
        Some((1, end))
    };
    let (s, e) = quoted(args)?;
    let a = &args[s..e];
    let rest = args[e + 1..].trim_start();
    let (s2, e2) = quoted(rest)?;
    if !rest[e2 + 1..].trim().is_empty() {
        return None;
    }
    Some((a, &rest[s2..e2]))
}
