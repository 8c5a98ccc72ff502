//! History: `log`, `show`, and the walk and formats they share.

use std::collections::{BTreeMap, BTreeSet};

use super::cmds::{Args, split_dashdash, unknown_option};
use super::diff::{self, Delta, Files, Source};
use super::diffcmd::{DiffOpts, diff_option};
use super::staging::{matches, specs};
use super::store::{Commit, Id, Kind, hex, parse_ident};
use super::{Git, R, fatal, format_date};

// ---------------------------------------------------------------- log, show

pub(super) struct LogOpts {
    pub(super) diff: DiffOpts,
    /// `show` prints a patch unless told otherwise; `log` does not.
    pub(super) default_patch: bool,
    pub(super) pretty: String,
    pub(super) abbrev_commit: bool,
    pub(super) date: String,
    pub(super) decorate: bool,
    pub(super) graph: bool,
}

/// Names to show beside commits (`--decorate`), in git's order: `HEAD` (joined with its
/// branch, `HEAD -> main`), then tags, remote-tracking refs and other branches, each group
/// in reverse name order.
pub(super) fn decorations(g: &Git) -> BTreeMap<Id, Vec<String>> {
    let mut m: BTreeMap<Id, Vec<String>> = BTreeMap::new();
    let head = g.repo.head();
    let cur = g.repo.branch();
    for (name, id) in g.repo.refs("refs/tags/").into_iter().rev() {
        let id = g.peel(&id).unwrap_or(id);
        m.entry(id)
            .or_default()
            .push(format!("tag: {}", name.trim_start_matches("refs/tags/")));
    }
    for (name, id, _) in super::remote::remote_refs(g).into_iter().rev() {
        m.entry(id).or_default().push(name);
    }
    for (name, id) in g.repo.refs("refs/heads/").into_iter().rev() {
        let short = name.trim_start_matches("refs/heads/").to_string();
        if cur.as_deref() != Some(short.as_str()) {
            m.entry(id).or_default().push(short);
        }
    }
    if let Some(h) = head {
        let first = match &cur {
            Some(b) => format!("HEAD -> {b}"),
            None => "HEAD".into(),
        };
        m.entry(h).or_default().insert(0, first);
    }
    m
}

pub(super) fn indent_message(msg: &str) -> String {
    let mut out = String::new();
    let lines: Vec<&str> = msg.trim_end_matches('\n').lines().collect();
    let start = lines
        .iter()
        .position(|l| !l.trim().is_empty())
        .unwrap_or(lines.len());
    for l in &lines[start..] {
        out.push_str(&format!("    {l}\n"));
    }
    out
}

/// One commit in `pretty` form; `format:` placeholders as git expands them.
pub(super) fn pretty(
    g: &Git,
    id: &Id,
    c: &Commit,
    o: &LogOpts,
    decor: &BTreeMap<Id, Vec<String>>,
) -> String {
    let short = |x: &Id| g.repo.abbrev(x);
    let dec = |with_paren: bool| -> String {
        match decor.get(id) {
            Some(v) if !v.is_empty() => {
                if with_paren {
                    format!(" ({})", v.join(", "))
                } else {
                    v.join(", ")
                }
            }
            _ => String::new(),
        }
    };
    let a = parse_ident(&c.author);
    let cm = parse_ident(&c.committer);
    let shown_id = if o.abbrev_commit { short(id) } else { hex(id) };
    let decorate = if o.decorate { dec(true) } else { String::new() };
    let p = o.pretty.as_str();
    if let Some(fmt) = p
        .strip_prefix("format:")
        .or_else(|| p.strip_prefix("tformat:"))
    {
        return expand(g, id, c, fmt, &o.date, &dec(true));
    }
    match p {
        "oneline" => format!("{shown_id}{decorate} {}\n", c.subject()),
        "short" => {
            let mut s = format!("commit {shown_id}{decorate}\n");
            if c.parents.len() > 1 {
                s.push_str(&format!(
                    "Merge: {}\n",
                    c.parents.iter().map(short).collect::<Vec<_>>().join(" ")
                ));
            }
            s.push_str(&format!(
                "Author: {} <{}>\n\n    {}\n",
                a.name,
                a.email,
                c.subject()
            ));
            s
        }
        "full" | "fuller" => {
            let mut s = format!("commit {shown_id}{decorate}\n");
            if c.parents.len() > 1 {
                s.push_str(&format!(
                    "Merge: {}\n",
                    c.parents.iter().map(short).collect::<Vec<_>>().join(" ")
                ));
            }
            if p == "full" {
                s.push_str(&format!(
                    "Author: {} <{}>\nCommit: {} <{}>\n",
                    a.name, a.email, cm.name, cm.email
                ));
            } else {
                s.push_str(&format!(
                    "Author:     {} <{}>\nAuthorDate: {}\nCommit:     {} <{}>\nCommitDate: {}\n",
                    a.name,
                    a.email,
                    format_date(a.time, a.tz, &o.date),
                    cm.name,
                    cm.email,
                    format_date(cm.time, cm.tz, &o.date)
                ));
            }
            s.push('\n');
            s.push_str(&indent_message(&c.message));
            s
        }
        _ => {
            let mut s = format!("commit {shown_id}{decorate}\n");
            if c.parents.len() > 1 {
                s.push_str(&format!(
                    "Merge: {}\n",
                    c.parents.iter().map(short).collect::<Vec<_>>().join(" ")
                ));
            }
            s.push_str(&format!(
                "Author: {} <{}>\nDate:   {}\n\n",
                a.name,
                a.email,
                format_date(a.time, a.tz, &o.date)
            ));
            s.push_str(&indent_message(&c.message));
            s
        }
    }
}

pub(super) fn expand(g: &Git, id: &Id, c: &Commit, fmt: &str, date: &str, dec: &str) -> String {
    let a = parse_ident(&c.author);
    let cm = parse_ident(&c.committer);
    let mut out = String::new();
    let chars: Vec<char> = fmt.chars().collect();
    let mut i = 0;
    let rel = |t: i64| -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let d = (now - t).max(0);
        let (n, unit) = match d {
            0..=89 => (d, "second"),
            90..=5399 => ((d + 30) / 60, "minute"),
            5400..=129599 => ((d + 1800) / 3600, "hour"),
            129600..=1209599 => ((d + 43200) / 86400, "day"),
            1209600..=5183999 => ((d + 302400) / 604800, "week"),
            5184000..=31535999 => ((d + 1296000) / 2592000, "month"),
            _ => ((d + 15768000) / 31536000, "year"),
        };
        format!("{n} {unit}{} ago", if n == 1 { "" } else { "s" })
    };
    while i < chars.len() {
        let ch = chars[i];
        if ch != '%' {
            out.push(ch);
            i += 1;
            continue;
        }
        let rest: String = chars[i + 1..].iter().take(2).collect();
        let two = |k: &str| rest.starts_with(k);
        let (text, used) = if two("H") {
            (hex(id), 1)
        } else if two("h") {
            (g.repo.abbrev(id), 1)
        } else if two("T") {
            (hex(&c.tree), 1)
        } else if two("t") {
            (g.repo.abbrev(&c.tree), 1)
        } else if two("P") {
            (c.parents.iter().map(hex).collect::<Vec<_>>().join(" "), 1)
        } else if two("p") {
            (
                c.parents
                    .iter()
                    .map(|p| g.repo.abbrev(p))
                    .collect::<Vec<_>>()
                    .join(" "),
                1,
            )
        } else if two("an") || two("aN") {
            (a.name.to_string(), 2)
        } else if two("ae") || two("aE") {
            (a.email.to_string(), 2)
        } else if two("al") {
            (a.email.split('@').next().unwrap_or("").to_string(), 2)
        } else if two("ad") {
            (format_date(a.time, a.tz, date), 2)
        } else if two("aD") {
            (format_date(a.time, a.tz, "rfc"), 2)
        } else if two("at") {
            (a.time.to_string(), 2)
        } else if two("ai") {
            (format_date(a.time, a.tz, "iso"), 2)
        } else if two("aI") {
            (format_date(a.time, a.tz, "iso-strict"), 2)
        } else if two("as") {
            (format_date(a.time, a.tz, "short"), 2)
        } else if two("ar") {
            (rel(a.time), 2)
        } else if two("cn") || two("cN") {
            (cm.name.to_string(), 2)
        } else if two("ce") || two("cE") {
            (cm.email.to_string(), 2)
        } else if two("cd") {
            (format_date(cm.time, cm.tz, date), 2)
        } else if two("cD") {
            (format_date(cm.time, cm.tz, "rfc"), 2)
        } else if two("ct") {
            (cm.time.to_string(), 2)
        } else if two("ci") {
            (format_date(cm.time, cm.tz, "iso"), 2)
        } else if two("cI") {
            (format_date(cm.time, cm.tz, "iso-strict"), 2)
        } else if two("cs") {
            (format_date(cm.time, cm.tz, "short"), 2)
        } else if two("cr") {
            (rel(cm.time), 2)
        } else if two("s") {
            (c.subject(), 1)
        } else if two("f") {
            let s: String = c
                .subject()
                .chars()
                .map(|ch| {
                    if ch.is_ascii_alphanumeric() || ch == '.' || ch == '_' {
                        ch
                    } else {
                        '-'
                    }
                })
                .collect();
            let mut t = String::new();
            for ch in s.chars() {
                if !(ch == '-' && t.ends_with('-')) {
                    t.push(ch);
                }
            }
            (t.trim_matches(['-', '.']).to_string(), 1)
        } else if two("b") {
            (c.body(), 1)
        } else if two("B") {
            (c.message.clone(), 1)
        } else if two("n") {
            ("\n".into(), 1)
        } else if two("%") {
            ("%".into(), 1)
        } else if two("d") {
            (dec.to_string(), 1)
        } else if two("D") {
            (
                dec.trim_start_matches(" (")
                    .trim_end_matches(')')
                    .to_string(),
                1,
            )
        } else if two("x") {
            let hexd: String = chars[i + 2..].iter().take(2).collect();
            match u8::from_str_radix(&hexd, 16) {
                Ok(b) => ((b as char).to_string(), 3),
                Err(_) => ("%x".into(), 1),
            }
        } else {
            ("%".into(), 0)
        };
        out.push_str(&text);
        i += 1 + used;
    }
    out
}

/// Commits reachable from `include` and not from `exclude`, newest committer date first
/// (git's default order), following only first parents where asked.
pub(super) fn walk(
    g: &Git,
    include: &[Id],
    exclude: &[Id],
    first_parent: bool,
) -> R<Vec<(Id, Commit)>> {
    let mut hidden: BTreeSet<Id> = BTreeSet::new();
    let mut stack: Vec<Id> = exclude.to_vec();
    while let Some(id) = stack.pop() {
        if hidden.insert(id) {
            stack.extend(g.repo.commit(&id)?.parents);
        }
    }
    let mut seen: BTreeSet<Id> = BTreeSet::new();
    let mut queue: Vec<(i64, usize, Id, Commit)> = Vec::new();
    let mut order = 0usize;
    for id in include {
        if !hidden.contains(id) && seen.insert(*id) {
            let c = g.repo.commit(id)?;
            queue.push((parse_ident(&c.committer).time, usize::MAX - order, *id, c));
            order += 1;
        }
    }
    let mut out = Vec::new();
    while !queue.is_empty() {
        let best = (0..queue.len())
            .max_by_key(|&i| (queue[i].0, queue[i].1))
            .unwrap();
        let (_, _, id, c) = queue.swap_remove(best);
        let parents = if first_parent {
            c.parents.iter().take(1).copied().collect::<Vec<_>>()
        } else {
            c.parents.clone()
        };
        for p in parents {
            if !hidden.contains(&p) && seen.insert(p) {
                let pc = g.repo.commit(&p)?;
                queue.push((parse_ident(&pc.committer).time, usize::MAX - order, p, pc));
                order += 1;
            }
        }
        out.push((id, c));
    }
    Ok(out)
}

pub(super) fn commit_changes(g: &Git, c: &Commit) -> R<Vec<Delta>> {
    let base = match c.parents.first() {
        Some(p) => g.repo.flatten(&g.repo.commit(p)?.tree)?,
        None => Files::new(),
    };
    Ok(diff::compare(&base, &g.repo.flatten(&c.tree)?, true))
}

pub(super) fn parse_log_opts(
    g: &Git,
    args: &[String],
    o: &mut LogOpts,
    extra: &mut dyn FnMut(&str, &mut Args) -> R<bool>,
) -> R<(Vec<String>, Vec<String>)> {
    let (opts, after) = split_dashdash(args);
    let mut revs = Vec::new();
    let mut paths = after.clone().unwrap_or_default();
    let mut a = Args::new(opts);
    while let Some(x) = a.next() {
        if diff_option(&x, &mut o.diff) {
            continue;
        }
        if extra(&x, &mut a)? {
            continue;
        }
        if let Some(v) = x
            .strip_prefix("--pretty=")
            .or_else(|| x.strip_prefix("--format="))
        {
            o.pretty = match v {
                "oneline" | "short" | "medium" | "full" | "fuller" => v.to_string(),
                v if v.starts_with("format:") || v.starts_with("tformat:") => v.to_string(),
                v if x.starts_with("--format=") || v.contains('%') => format!("tformat:{v}"),
                v => return Err(fatal(format!("invalid --pretty format: {v}"))),
            };
            if o.pretty == "oneline" {
                o.abbrev_commit = false;
            }
            continue;
        }
        if let Some(v) = x.strip_prefix("--date=") {
            o.date = match v {
                "local" | "default" => "default".into(),
                v => v.to_string(),
            };
            continue;
        }
        match x.as_str() {
            "--oneline" => {
                o.pretty = "oneline".into();
                o.abbrev_commit = true;
            }
            "--pretty" => o.pretty = "medium".into(),
            "--abbrev-commit" => o.abbrev_commit = true,
            "--no-abbrev-commit" => o.abbrev_commit = false,
            "--decorate" | "--decorate=short" | "--decorate=full" => o.decorate = true,
            "--no-decorate" | "--decorate=no" => o.decorate = false,
            "--graph" => o.graph = true,
            "--no-color" | "--color=never" | "--color=auto" | "--no-merges" | "--topo-order"
            | "--date-order" | "--no-walk" | "--follow" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => {
                if after.is_none()
                    && (x.contains("..")
                        || x.starts_with('^')
                        || g.resolve(&x).is_some()
                        || x.contains(':'))
                {
                    revs.push(x);
                } else if after.is_none() && g.work_path(&g.repo_path(&x)?).exists() {
                    paths.push(x);
                } else if after.is_none() {
                    return Err(super::bad_revision(&x));
                } else {
                    revs.push(x);
                }
            }
        }
    }
    Ok((revs, paths))
}

pub(super) fn log(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut o = LogOpts {
        diff: DiffOpts::new(),
        default_patch: false,
        pretty: "medium".into(),
        abbrev_commit: false,
        date: "default".into(),
        decorate: false,
        graph: false,
    };
    let mut max: Option<usize> = None;
    let (mut reverse, mut all, mut first_parent, mut skip) = (false, false, false, 0usize);
    let mut authors: Vec<String> = Vec::new();
    let mut greps: Vec<String> = Vec::new();
    let mut dates = Dates::default();
    let (mut pickaxe, mut pickaxe_regex) = (None::<(char, String)>, false);
    let (revs, paths) = parse_log_opts(g, &args, &mut o, &mut |x, a| {
        for flag in ['S', 'G'] {
            let short = format!("-{flag}");
            if x == short {
                let v = a.next().ok_or_else(|| {
                    super::usage(format!("error: switch `{flag}' requires a value"))
                })?;
                pickaxe = Some((flag, v));
                return Ok(true);
            }
            if let Some(v) = x.strip_prefix(&short) {
                pickaxe = Some((flag, v.to_string()));
                return Ok(true);
            }
        }
        if x == "--pickaxe-regex" {
            pickaxe_regex = true;
            return Ok(true);
        }
        if let Some(v) = a.value(x, "-n", "--max-count")? {
            max = Some(
                v.parse()
                    .map_err(|_| fatal(format!("'{v}': not an integer")))?,
            );
            return Ok(true);
        }
        if let Some(v) = a.value(x, "", "--skip")? {
            skip = v.parse().unwrap_or(0);
            return Ok(true);
        }
        if let Some(v) = a.value(x, "", "--author")? {
            authors.push(v);
            return Ok(true);
        }
        if let Some(v) = a.value(x, "", "--grep")? {
            greps.push(v);
            return Ok(true);
        }
        if dates.option(x, a)? {
            return Ok(true);
        }
        if x.len() > 1 && x.starts_with('-') && x[1..].chars().all(|c| c.is_ascii_digit()) {
            max = x[1..].parse().ok();
            return Ok(true);
        }
        match x {
            "--reverse" => reverse = true,
            "--all" | "--branches" => all = true,
            "--first-parent" => first_parent = true,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    let sp = specs(g, &paths)?;
    let (include, exclude) = rev_sets(g, &revs, all)?;
    let mut commits = touching(g, walk(g, &include, &exclude, first_parent)?, &sp)?;
    if let Some((flag, what)) = pickaxe {
        let p = Pickaxe::new(flag, &what, pickaxe_regex)?;
        let mut kept = Vec::new();
        for (id, c) in commits {
            if p.hits(g, &c, &sp)? {
                kept.push((id, c));
            }
        }
        commits = kept;
    }
    if !authors.is_empty() {
        commits.retain(|(_, c)| authors.iter().any(|a| c.author.contains(a.as_str())));
    }
    if !greps.is_empty() {
        commits.retain(|(_, c)| greps.iter().any(|p| c.message.contains(p.as_str())));
    }
    commits.retain(|(_, c)| dates.holds(c));
    let commits: Vec<(Id, Commit)> = commits
        .into_iter()
        .skip(skip)
        .take(max.unwrap_or(usize::MAX))
        .collect();
    let mut commits = commits;
    if reverse {
        commits.reverse();
    }
    print_commits(g, &commits, &o, &sp)
}

/// `--since`/`--after` and `--until`/`--before` of `log` and `rev-list`.
#[derive(Default)]
struct Dates {
    since: Option<i64>,
    until: Option<i64>,
}

impl Dates {
    /// Takes `x` (and its value) when it is one of the date options.
    fn option(&mut self, x: &str, a: &mut Args) -> R<bool> {
        for (long, is_since) in [
            ("--since", true),
            ("--after", true),
            ("--until", false),
            ("--before", false),
        ] {
            if let Some(v) = a.value(x, "", long)? {
                let (t, _) =
                    super::parse_date(&v).ok_or_else(|| fatal(format!("invalid date: {v}")))?;
                *(if is_since {
                    &mut self.since
                } else {
                    &mut self.until
                }) = Some(t);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether `c`'s commit date lies within the dates given.
    fn holds(&self, c: &Commit) -> bool {
        let t = parse_ident(&c.committer).time;
        self.since.is_none_or(|s| t >= s) && self.until.is_none_or(|u| t <= u)
    }
}

/// Whether a change touches a path `sp` names (on either side of a rename).
fn names(sp: &[String], d: &Delta) -> bool {
    matches(sp, &d.path) || d.from.as_deref().is_some_and(|f| matches(sp, f))
}

/// The commits that change a path `sp` names (all of them when it names none).
fn touching(g: &Git, commits: Vec<(Id, Commit)>, sp: &[String]) -> R<Vec<(Id, Commit)>> {
    if sp.is_empty() {
        return Ok(commits);
    }
    let mut kept = Vec::new();
    for (id, c) in commits {
        if commit_changes(g, &c)?.iter().any(|d| names(sp, d)) {
            kept.push((id, c));
        }
    }
    Ok(kept)
}

const REV_LIST_USAGE: &str = "usage: git rev-list [<options>] <commit>... [--] [<path>...]";

/// `git rev-list REVISION... [-- PATH...]`: the commits, newest first, one full id a line;
/// `--count`, `--all`, `--reverse`, `--first-parent`, `-n`/`--max-count`, `--skip`,
/// `--no-merges`, `--merges`, `--since`/`--until`, `--abbrev-commit`.
pub(super) fn rev_list(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let (mut count, mut all, mut reverse, mut first_parent, mut abbrev) =
        (false, false, false, false, false);
    let (mut merges, mut no_merges) = (false, false);
    let (mut max, mut skip) = (None::<usize>, 0usize);
    let mut dates = Dates::default();
    let mut revs = Vec::new();
    let mut a = Args::new(opts);
    let number = |v: &str| {
        v.parse::<usize>()
            .map_err(|_| fatal(format!("'{v}': not an integer")))
    };
    while let Some(x) = a.next() {
        if let Some(v) = a.value(&x, "-n", "--max-count")? {
            max = Some(number(&v)?);
            continue;
        }
        if let Some(v) = a.value(&x, "", "--skip")? {
            skip = number(&v)?;
            continue;
        }
        if dates.option(&x, &mut a)? {
            continue;
        }
        match x.as_str() {
            "--count" => count = true,
            "--all" | "--branches" => all = true,
            "--reverse" => reverse = true,
            "--first-parent" => first_parent = true,
            "--abbrev-commit" => abbrev = true,
            "--merges" => merges = true,
            "--no-merges" => no_merges = true,
            "--topo-order" | "--date-order" => {}
            s if s.len() > 1
                && s.starts_with('-')
                && s[1..].chars().all(|c| c.is_ascii_digit()) =>
            {
                max = Some(number(&s[1..])?);
            }
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => revs.push(x),
        }
    }
    if revs.is_empty() && !all {
        return Err(super::usage(REV_LIST_USAGE.to_string()));
    }
    let sp = specs(g, &after.unwrap_or_default())?;
    let (include, exclude) = rev_sets(g, &revs, all)?;
    let mut commits = touching(g, walk(g, &include, &exclude, first_parent)?, &sp)?;
    commits.retain(|(_, c)| {
        (!merges || c.parents.len() > 1) && (!no_merges || c.parents.len() <= 1) && dates.holds(c)
    });
    let mut ids: Vec<Id> = commits
        .into_iter()
        .skip(skip)
        .take(max.unwrap_or(usize::MAX))
        .map(|(id, _)| id)
        .collect();
    if count {
        g.say(&format!("{}\n", ids.len()));
        return Ok(0);
    }
    if reverse {
        ids.reverse();
    }
    let mut out = String::new();
    for id in ids {
        out.push_str(&if abbrev { g.repo.abbrev(&id) } else { hex(&id) });
        out.push('\n');
    }
    g.say(&out);
    Ok(0)
}

/// `log -S STRING` (commits that change how many times STRING occurs in a file; with
/// `--pickaxe-regex` a regex) and `log -G REGEX` (commits whose diff adds or removes a line
/// that matches). Merges have no diff of their own, as in git.
enum Pickaxe {
    Count(Vec<u8>),
    CountRegex(regex::bytes::Regex),
    Lines(regex::bytes::Regex),
}

impl Pickaxe {
    fn new(flag: char, what: &str, regex: bool) -> R<Pickaxe> {
        let compile = |p: &str| {
            regex::bytes::Regex::new(p).map_err(|e| {
                fatal(format!(
                    "invalid regex: {}",
                    e.to_string().lines().last().unwrap_or("")
                ))
            })
        };
        Ok(match (flag, regex) {
            ('G', _) => Pickaxe::Lines(compile(what)?),
            (_, true) => Pickaxe::CountRegex(compile(what)?),
            _ => Pickaxe::Count(what.as_bytes().to_vec()),
        })
    }

    fn count(&self, text: &[u8]) -> usize {
        match self {
            Pickaxe::Count(s) if s.is_empty() => 0,
            Pickaxe::Count(s) => {
                let (mut n, mut at) = (0, 0);
                while let Some(i) = text[at..].windows(s.len()).position(|w| w == s.as_slice()) {
                    n += 1;
                    at += i + s.len();
                }
                n
            }
            Pickaxe::CountRegex(r) | Pickaxe::Lines(r) => r.find_iter(text).count(),
        }
    }

    fn hits(&self, g: &Git, c: &Commit, sp: &[String]) -> R<bool> {
        if c.parents.len() > 1 {
            return Ok(false);
        }
        for d in commit_changes(g, c)? {
            if !sp.is_empty() && !names(sp, &d) {
                continue;
            }
            let (a, b) = diff::sides(g, &d);
            let hit = match self {
                Pickaxe::Lines(r) => diff::changed_lines(&a, &b).iter().any(|l| r.is_match(l)),
                _ => self.count(&a) != self.count(&b),
            };
            if hit {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The commits to walk from and to hide for `revs` (`A`, `^A`, `A..B`) and `--all`:
/// HEAD when nothing is named.
pub(super) fn rev_sets(g: &Git, revs: &[String], all: bool) -> R<(Vec<Id>, Vec<Id>)> {
    let mut include = Vec::new();
    let mut exclude = Vec::new();
    for r in revs {
        if let Some((a, b)) = r.split_once("..") {
            let b = b.trim_start_matches('.');
            let a = if a.is_empty() { "HEAD" } else { a };
            let b = if b.is_empty() { "HEAD" } else { b };
            exclude.push(g.commit_of(a)?.0);
            include.push(g.commit_of(b)?.0);
        } else if let Some(x) = r.strip_prefix('^') {
            exclude.push(g.commit_of(x)?.0);
        } else {
            include.push(g.commit_of(r)?.0);
        }
    }
    if all {
        for id in g.repo.refs("refs/heads/").values() {
            include.push(*id);
        }
        include.extend(g.repo.head());
    }
    if revs.is_empty() && !all {
        match g.repo.head() {
            Some(h) => include.push(h),
            None => {
                return Err(fatal(format!(
                    "your current branch '{}' does not have any commits yet",
                    g.repo.branch().unwrap_or_else(|| "HEAD".into())
                )));
            }
        }
    }
    Ok((include, exclude))
}

/// `git shortlog [-s] [-n] [-e] [-c] [--all] [REVISION...]`: commits grouped by author (or
/// committer), names in order and each one's subjects oldest first, or (`-s`) counted;
/// `-n` orders by count. Without a revision and with standard input not a terminal, it
/// summarizes the `git log` output it reads there, as git does.
pub(super) fn shortlog(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (mut summary, mut numbered, mut email, mut committer, mut all) =
        (false, false, false, false, false);
    let mut revs = Vec::new();
    let (opts, _paths) = split_dashdash(&args);
    for a in opts {
        match a.as_str() {
            "--summary" => summary = true,
            "--numbered" => numbered = true,
            "--email" => email = true,
            "--committer" => committer = true,
            "--all" | "--branches" => all = true,
            "--no-merges" | "--no-color" | "-w" => {}
            s if s.starts_with('-') && !s.starts_with("--") && s.len() > 1 => {
                for c in s[1..].chars() {
                    match c {
                        's' => summary = true,
                        'n' => numbered = true,
                        'e' => email = true,
                        'c' => committer = true,
                        _ => return Err(unknown_option(&format!("-{c}"))),
                    }
                }
            }
            s if s.starts_with("--") => return Err(unknown_option(s)),
            _ => revs.push(a),
        }
    }
    // (who, subject), oldest first.
    let mut entries: Vec<(String, String)> = Vec::new();
    if revs.is_empty() && !all && guest_support::process::terminal_size().is_none() {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| fatal(format!("reading the log from standard input: {e}")))?;
        let key = if committer { "Commit: " } else { "Author: " };
        let mut who: Option<String> = None;
        for line in text.lines() {
            if let Some(w) = line.strip_prefix(key) {
                who = Some(w.trim().to_string());
            } else if let Some(subject) = line.strip_prefix("    ")
                && let Some(w) = who.take()
            {
                entries.push((w, subject.trim().to_string()));
            }
        }
        entries.reverse();
    } else {
        let (include, exclude) = rev_sets(g, &revs, all)?;
        for (_, c) in walk(g, &include, &exclude, false)?.into_iter().rev() {
            let who = parse_ident(if committer { &c.committer } else { &c.author });
            entries.push((
                format!("{} <{}>", who.name, who.email),
                c.subject().to_string(),
            ));
        }
    }
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (who, subject) in entries {
        let name = if email {
            who
        } else {
            who.split(" <").next().unwrap_or_default().to_string()
        };
        groups.entry(name).or_default().push(subject);
    }
    let mut groups: Vec<(String, Vec<String>)> = groups.into_iter().collect();
    if numbered {
        groups.sort_by_key(|g| std::cmp::Reverse(g.1.len()));
    }
    let mut out = String::new();
    for (who, subjects) in groups {
        if summary {
            out.push_str(&format!("{:6}\t{who}\n", subjects.len()));
        } else {
            out.push_str(&format!("{who} ({}):\n", subjects.len()));
            for s in subjects {
                out.push_str(&format!("      {s}\n"));
            }
            out.push('\n');
        }
    }
    g.say(&out);
    Ok(0)
}

pub(super) fn print_commits(
    g: &mut Git,
    commits: &[(Id, Commit)],
    o: &LogOpts,
    sp: &[String],
) -> R<i32> {
    let decor = if o.decorate {
        decorations(g)
    } else {
        BTreeMap::new()
    };
    let separator = o.pretty.starts_with("format:");
    let custom = separator || o.pretty.starts_with("tformat:");
    let oneline = o.pretty == "oneline";
    let n = commits.len();
    for (k, (id, c)) in commits.iter().enumerate() {
        let last = k + 1 == n;
        let mut text = pretty(g, id, c, o, &decor);
        // An empty format (`--format=`) prints no line at all.
        let blank_format = custom && o.pretty.split_once(':').is_some_and(|(_, f)| f.is_empty());
        if custom && !separator && !blank_format {
            text.push('\n');
        }
        let mut diff_out = Vec::new();
        let what = o.diff.output(o.default_patch);
        if !what.is_empty() && c.parents.len() <= 1 {
            let mut ds = commit_changes(g, c)?;
            if !sp.is_empty() {
                ds.retain(|d| names(sp, d));
            }
            diff::write(g, &ds, Source::Objects, &what, &o.diff.show, &mut diff_out);
        }
        if o.graph {
            // Linear history: `* ` before each commit's first line, `| ` before the rest.
            let mut g_text = String::new();
            for (i, l) in text.lines().enumerate() {
                let pre = if i == 0 {
                    "* "
                } else if last {
                    "  "
                } else {
                    "| "
                };
                g_text.push_str(format!("{pre}{l}").trim_end());
                g_text.push('\n');
            }
            if !oneline && !custom && !last {
                g_text.push_str("|\n");
            }
            g.say(&g_text);
            g.out.extend_from_slice(&diff_out);
            continue;
        }
        g.say(&text);
        if !diff_out.is_empty() {
            if !oneline && !blank_format {
                g.say("\n");
            }
            g.out.extend_from_slice(&diff_out);
        }
        if !last && ((!oneline && !custom) || separator) {
            g.say("\n");
        }
    }
    Ok(0)
}

pub(super) fn show(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut o = LogOpts {
        diff: DiffOpts::new(),
        default_patch: true,
        pretty: "medium".into(),
        abbrev_commit: false,
        date: "default".into(),
        decorate: false,
        graph: false,
    };
    let (revs, paths) = parse_log_opts(g, &args, &mut o, &mut |_, _| Ok(false))?;
    let sp = specs(g, &paths)?;
    let revs = if revs.is_empty() {
        vec!["HEAD".to_string()]
    } else {
        revs
    };
    for (k, r) in revs.iter().enumerate() {
        if k > 0 {
            g.say("\n");
        }
        if let Some((rev, path)) = r.split_once(':') {
            let tree = if rev.is_empty() {
                // `:path` is the index's copy.
                let index = g.repo.read_index()?;
                let p = g.repo_path(path).unwrap_or_default();
                let e = index.entries.get(&p).ok_or_else(|| {
                    fatal(format!(
                        "path '{p}' does not exist (neither on disk nor in the index)"
                    ))
                })?;
                let data = g.repo.read(&e.id)?.1;
                g.out.extend_from_slice(&data);
                continue;
            } else {
                g.commit_of(rev)?.1.tree
            };
            let path = path.trim_start_matches("./");
            let path = if path.starts_with("./") || path.starts_with("../") {
                g.repo_path(path)?
            } else {
                path.trim_end_matches('/').to_string()
            };
            let files = g.repo.flatten(&tree)?;
            if let Some((_, id)) = files.get(&path) {
                let data = g.repo.read(id)?.1;
                g.out.extend_from_slice(&data);
                continue;
            }
            let dir_prefix = if path.is_empty() {
                String::new()
            } else {
                format!("{path}/")
            };
            let mut names: Vec<String> = files
                .keys()
                .filter_map(|p| p.strip_prefix(dir_prefix.as_str()))
                .map(|rest| match rest.split_once('/') {
                    Some((d, _)) => format!("{d}/"),
                    None => rest.to_string(),
                })
                .collect();
            names.dedup();
            if names.is_empty() {
                return Err(fatal(format!("path '{path}' does not exist in '{rev}'")));
            }
            g.say(&format!("tree {r}\n\n"));
            for n in names {
                g.say(&format!("{n}\n"));
            }
            continue;
        }
        let id = g.resolve(r).ok_or_else(|| super::bad_revision(r))?;
        let (kind, data) = g.repo.read(&id)?;
        match kind {
            Kind::Blob => g.out.extend_from_slice(&data),
            Kind::Tree => {
                g.say(&format!("tree {r}\n\n"));
                for e in g.repo.tree(&id)? {
                    let slash = if e.mode == 0o40000 { "/" } else { "" };
                    g.say(&format!("{}{slash}\n", e.name));
                }
            }
            Kind::Tag => {
                let s = String::from_utf8_lossy(&data).into_owned();
                let (head, msg) = s.split_once("\n\n").unwrap_or((&s, ""));
                let tagger = head
                    .lines()
                    .find_map(|l| l.strip_prefix("tagger "))
                    .unwrap_or("");
                let name = head
                    .lines()
                    .find_map(|l| l.strip_prefix("tag "))
                    .unwrap_or(r);
                let t = parse_ident(tagger);
                g.say(&format!(
                    "tag {name}\nTagger: {} <{}>\nDate:   {}\n\n{}\n\n",
                    t.name,
                    t.email,
                    format_date(t.time, t.tz, "default"),
                    msg.trim_end()
                ));
                let cid = g.peel(&id).ok_or_else(|| super::bad_revision(r))?;
                let c = g.repo.commit(&cid)?;
                print_commits(g, &[(cid, c)], &o, &sp)?;
            }
            Kind::Commit => {
                let c = g.repo.commit(&id)?;
                print_commits(g, &[(id, c)], &o, &sp)?;
            }
        }
    }
    Ok(0)
}
