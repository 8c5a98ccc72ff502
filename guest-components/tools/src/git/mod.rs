//! `git`: the local half of git 2.47 that agents use to track and show their work (`init`,
//! `add`, `commit`, `status`, `diff`, `log`, `show`, `branch`, `checkout`/`switch`,
//! `restore`, `reset`, `rm`, `mv`, `tag`, `stash`, `clean`, `grep`, `config`, `rev-parse`,
//! `ls-files`, `cat-file` and friends), reading and writing repositories in git's own formats so that a real git
//! reads them too, and reading the pack files of a repository cloned elsewhere; `clone`,
//! `fetch`, `pull`, `push` and `ls-remote` over smart HTTP(S) (`transport`), where the
//! sandbox's network policy allows.
//!
//! Commands that need a history rewrite (`rebase`, ...) say that this git lacks them;
//! nothing pretends to have run.

mod apply;
mod blame;
mod checkout;
mod cmds;
mod commit;
mod diff;
mod diffcmd;
mod history;
mod ignore;
mod merge;
mod plumbing;
mod refs;
mod remote;
mod setup;
mod staging;
mod status;
mod store;
mod transport;
mod worktree;

use std::io::Write;
use std::path::{Path, PathBuf};

use store::{Commit, Id, Kind, Repo};

pub struct Fail {
    pub msg: String,
    pub code: i32,
}

pub type R<T> = Result<T, Fail>;

pub fn fatal(msg: String) -> Fail {
    Fail {
        msg: format!("fatal: {msg}"),
        code: 128,
    }
}

pub fn error(msg: String) -> Fail {
    Fail {
        msg: format!("error: {msg}"),
        code: 1,
    }
}

/// Output of `git help`-less usage errors: git's exit code 129.
pub fn usage(msg: String) -> Fail {
    Fail { msg, code: 129 }
}

const VERSION: &str = "git version 2.47.3";

const MISSING: &[&str] = &[
    "rebase",
    "bisect",
    "submodule",
    "worktree",
    "am",
    "format-patch",
    "gc",
    "fsck",
    "reflog",
    "notes",
    "archive",
    "send-email",
    "request-pull",
    "sparse-checkout",
    "lfs",
];

pub fn main(args: Vec<String>) -> i32 {
    let mut args: Vec<String> = args.into_iter().skip(1).collect();
    let mut overrides: Vec<(String, String)> = Vec::new();
    // Global options before the command.
    while let Some(a) = args.first().cloned() {
        match a.as_str() {
            "-C" if args.len() > 1 => {
                if let Err(e) = std::env::set_current_dir(&args[1]) {
                    eprintln!(
                        "fatal: cannot change to '{}': {}",
                        args[1],
                        guest_support::cli::reason(&e)
                    );
                    return 128;
                }
                args.drain(..2);
            }
            "-c" if args.len() > 1 => {
                let (k, v) = args[1].split_once('=').unwrap_or((&args[1], "true"));
                overrides.push((store::normal_key(k), v.to_string()));
                args.drain(..2);
            }
            "--no-pager" | "-P" | "--no-replace-objects" | "--literal-pathspecs" => {
                args.remove(0);
            }
            "--version" | "-v" => {
                println!("{VERSION}");
                return 0;
            }
            "--help" | "-h" => {
                args = vec!["help".into()];
                break;
            }
            a if a.starts_with("--exec-path")
                || a.starts_with("--git-dir")
                || a.starts_with("--work-tree") =>
            {
                eprintln!("fatal: {a} is not supported by this git");
                return 128;
            }
            _ => break,
        }
    }
    let Some(cmd) = args.first().cloned() else {
        print!("{}", cmds::HELP);
        return 1;
    };
    let rest: Vec<String> = args[1..].to_vec();
    let result = cmds::run(&cmd, rest, &overrides);
    match result {
        Ok(code) => code,
        Err(f) => {
            let _ = std::io::stdout().flush();
            if !f.msg.is_empty() {
                eprintln!("{}", f.msg);
            }
            f.code
        }
    }
}

/// Where the repository is: the nearest `.git` from the working directory up.
pub fn discover() -> R<(PathBuf, PathBuf)> {
    let cwd = std::env::current_dir()
        .map_err(|e| fatal(format!("unable to get current working directory: {e}")))?;
    let mut dir = cwd.clone();
    loop {
        let g = dir.join(".git");
        if g.join("HEAD").is_file() {
            return Ok((g, dir));
        }
        if g.is_file()
            && let Ok(s) = std::fs::read_to_string(&g)
            && let Some(p) = s.trim().strip_prefix("gitdir: ")
        {
            let gd = dir.join(p);
            return Ok((gd, dir));
        }
        if !dir.pop() {
            return Err(fatal(
                "not a git repository (or any of the parent directories): .git".into(),
            ));
        }
    }
}

/// A command's view: the repository, where the caller stands in it, and buffered output.
pub struct Git {
    pub repo: Repo,
    /// The working directory relative to the top: "" or "a/b/".
    pub prefix: String,
    pub out: Vec<u8>,
}

impl Git {
    pub fn open(overrides: &[(String, String)]) -> R<Git> {
        let (git_dir, work) = discover()?;
        let cwd = std::env::current_dir().unwrap_or_default();
        let prefix = cwd
            .strip_prefix(&work)
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
            .filter(|p| !p.is_empty())
            .map(|p| format!("{p}/"))
            .unwrap_or_default();
        Ok(Git {
            repo: Repo::open(git_dir, work, overrides)?,
            prefix,
            out: Vec::new(),
        })
    }

    pub fn say(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
    }

    pub fn flush(&mut self) {
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(&self.out);
        let _ = o.flush();
        self.out.clear();
    }

    pub fn work_path(&self, rel: &str) -> PathBuf {
        self.repo.work.join(rel)
    }

    /// A path given on the command line, as a path from the top ("" for the top itself).
    pub fn repo_path(&self, arg: &str) -> R<String> {
        let joined = if arg.starts_with('/') {
            let p = Path::new(arg);
            let rel = p.strip_prefix(&self.repo.work).map_err(|_| {
                fatal(format!(
                    "{arg}: '{arg}' is outside repository at '{}'",
                    self.repo.work.display()
                ))
            })?;
            rel.to_string_lossy().into_owned()
        } else {
            format!("{}{arg}", self.prefix)
        };
        let mut parts: Vec<&str> = Vec::new();
        for p in joined.split('/') {
            match p {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return Err(fatal(format!(
                            "{arg}: '{arg}' is outside repository at '{}'",
                            self.repo.work.display()
                        )));
                    }
                }
                p => parts.push(p),
            }
        }
        Ok(parts.join("/"))
    }

    /// `path` (from the top) as seen from the working directory, as git prints it.
    pub fn relative(&self, path: &str) -> String {
        let mut prefix = self.prefix.as_str();
        let mut ups = String::new();
        let mut p = path;
        loop {
            if let Some(rest) = p.strip_prefix(prefix) {
                p = rest;
                break;
            }
            // Up one level.
            let trimmed = prefix.trim_end_matches('/');
            prefix = match trimmed.rfind('/') {
                Some(i) => &prefix[..i + 1],
                None => "",
            };
            ups.push_str("../");
        }
        let r = format!("{ups}{p}");
        if r.is_empty() { "./".into() } else { r }
    }

    /// Revision syntax: `HEAD`, `@`, branch and tag names, full or abbreviated ids, and
    /// `~N`, `^N`, `^` after any of them.
    pub fn resolve(&self, rev: &str) -> Option<Id> {
        // `^{commit}`, `^{tree}` and `^{}` peel what the rest names.
        if let Some(i) = rev.find("^{")
            && rev.ends_with('}')
        {
            let id = self.resolve(&rev[..i])?;
            return match &rev[i + 2..rev.len() - 1] {
                "" | "commit" => self.peel(&id),
                "tree" => Some(self.repo.commit(&self.peel(&id)?).ok()?.tree),
                _ => None,
            };
        }
        let (base, suffix) = match rev.find(['~', '^']) {
            Some(i) => (&rev[..i], &rev[i..]),
            None => (rev, ""),
        };
        let mut id = self.resolve_name(if base.is_empty() { "HEAD" } else { base })?;
        let mut s = suffix;
        while !s.is_empty() {
            let op = s.as_bytes()[0];
            s = &s[1..];
            let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
            s = &s[digits.len()..];
            let n: usize = if digits.is_empty() {
                1
            } else {
                digits.parse().ok()?
            };
            let mut c = self.peel(&id)?;
            if op == b'~' {
                for _ in 0..n {
                    id = *self.repo.commit(&c).ok()?.parents.first()?;
                    c = id;
                }
            } else if n == 0 {
                id = c;
            } else {
                id = *self.repo.commit(&c).ok()?.parents.get(n - 1)?;
            }
        }
        Some(id)
    }

    fn resolve_name(&self, name: &str) -> Option<Id> {
        let name = if name == "@" { "HEAD" } else { name };
        for cand in [
            name.to_string(),
            format!("refs/{name}"),
            format!("refs/tags/{name}"),
            format!("refs/heads/{name}"),
            format!("refs/remotes/{name}"),
        ] {
            if (cand == "HEAD" || cand.starts_with("refs/"))
                && let Some(id) = self.repo.ref_id(&cand)
            {
                return Some(id);
            }
        }
        if name.len() >= 4 && name.len() <= 40 && name.chars().all(|c| c.is_ascii_hexdigit()) {
            let lower = name.to_ascii_lowercase();
            let hits = self.repo.ids_with_prefix(&lower);
            if hits.len() == 1 {
                return Some(hits[0]);
            }
        }
        None
    }

    /// The commit an id names (through annotated tags).
    pub fn peel(&self, id: &Id) -> Option<Id> {
        let mut id = *id;
        for _ in 0..10 {
            let (kind, data) = self.repo.read(&id).ok()?;
            match kind {
                Kind::Commit => return Some(id),
                Kind::Tag => {
                    let s = String::from_utf8_lossy(&data);
                    id = store::parse_hex(s.lines().next()?.strip_prefix("object ")?)?;
                }
                _ => return None,
            }
        }
        None
    }

    pub fn commit_of(&self, rev: &str) -> R<(Id, Commit)> {
        let id = self
            .resolve(rev)
            .and_then(|id| self.peel(&id))
            .ok_or_else(|| bad_revision(rev))?;
        Ok((id, self.repo.commit(&id)?))
    }

    /// Files of the commit HEAD names (none before the first commit).
    pub fn head_files(&self) -> R<std::collections::BTreeMap<String, (u32, Id)>> {
        match self.repo.head() {
            Some(h) => {
                let c = self.repo.commit(&h)?;
                self.repo.flatten(&c.tree)
            }
            None => Ok(Default::default()),
        }
    }

    pub fn filemode(&self) -> bool {
        self.repo.config.get_bool("core.filemode").unwrap_or(true)
    }
}

pub fn bad_revision(rev: &str) -> Fail {
    fatal(format!(
        "ambiguous argument '{rev}': unknown revision or path not in the working tree.\nUse '--' to separate paths from revisions, like this:\n'git <command> [<revision>...] -- [<file>...]'"
    ))
}

/// The author or committer line for a new commit: `GIT_AUTHOR_NAME`/`EMAIL`/`DATE` (or
/// the committer's), else `user.name` and `user.email`, else git's refusal.
pub fn ident(repo: &Repo, who: &str) -> R<String> {
    let env = |k: &str| std::env::var(format!("GIT_{who}_{k}")).ok();
    let name = env("NAME")
        .or_else(|| repo.config.get("user.name").map(str::to_string))
        .or_else(|| std::env::var("USER").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "root".into());
    let email = env("EMAIL")
        .or_else(|| repo.config.get("user.email").map(str::to_string))
        .or_else(|| std::env::var("EMAIL").ok().filter(|s| !s.is_empty()));
    let Some(email) = email else {
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        return Err(Fail {
            msg: format!(
                "Author identity unknown\n\n*** Please tell me who you are.\n\nRun\n\n  git config --global user.email \"you@example.com\"\n  git config --global user.name \"Your Name\"\n\nto set your account's default identity.\nOmit --global to set the identity only in this repository.\n\nfatal: unable to auto-detect email address (got '{}@{host}.(none)')",
                std::env::var("USER").unwrap_or_else(|_| "root".into())
            ),
            code: 128,
        });
    };
    if name.trim().is_empty() {
        return Err(fatal("empty ident name (for <>) not allowed".into()));
    }
    let date = match env("DATE") {
        Some(d) => parse_date(&d).ok_or_else(|| fatal(format!("invalid date format: {d}")))?,
        None => (
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
            "+0000".to_string(),
        ),
    };
    Ok(format!(
        "{} <{}> {} {}",
        name.trim(),
        email.trim(),
        date.0,
        date.1
    ))
}

/// `@1700000000 +0100`, `1700000000 +0100`, `2023-11-14T22:13:20[Z|+01:00]`,
/// `2023-11-14 22:13:20 +0100` and RFC 2822 (`Tue, 14 Nov 2023 22:13:20 +0000`).
pub fn parse_date(s: &str) -> Option<(i64, String)> {
    let s = s.trim();
    let tz_of = |t: &str| -> Option<(String, i64)> {
        let t = t.trim();
        if t == "Z" || t.is_empty() || t == "UTC" || t == "GMT" {
            return Some(("+0000".into(), 0));
        }
        let sign = match t.as_bytes()[0] {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        let d: String = t[1..].chars().filter(|c| c.is_ascii_digit()).collect();
        if d.len() != 4 {
            return None;
        }
        let h: i64 = d[..2].parse().ok()?;
        let m: i64 = d[2..].parse().ok()?;
        Some((
            format!("{}{d}", if sign > 0 { '+' } else { '-' }),
            sign * (h * 3600 + m * 60),
        ))
    };
    // `2 weeks ago`, `yesterday`, `now`: from the current time.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    match s {
        "now" => return Some((now, "+0000".into())),
        "yesterday" => return Some((now - 86400, "+0000".into())),
        _ => {}
    }
    if let Some(back) = relative_seconds(s) {
        return Some((now - back, "+0000".into()));
    }
    let raw = s.strip_prefix('@').unwrap_or(s);
    let mut it = raw.split_whitespace();
    if let Some(first) = it.next()
        && first.chars().all(|c| c.is_ascii_digit())
        && first.len() > 8
    {
        let tz = it.next().and_then(tz_of).map_or("+0000".into(), |t| t.0);
        return Some((first.parse().ok()?, tz));
    }
    // RFC 2822: drop the weekday.
    let s2 = s.split_once(", ").map_or(s, |(_, r)| r);
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let parts: Vec<&str> = s2.split_whitespace().collect();
    if parts.len() >= 4
        && let Some(mi) = months.iter().position(|m| *m == parts[1])
    {
        let day: i64 = parts[0].parse().ok()?;
        let year: i64 = parts[2].parse().ok()?;
        let hms: Vec<i64> = parts[3].split(':').filter_map(|x| x.parse().ok()).collect();
        let (tz, off) = parts
            .get(4)
            .map_or(Some(("+0000".into(), 0)), |t| tz_of(t))?;
        let t = days_from_civil(year, mi as i64 + 1, day) * 86400
            + hms.first()? * 3600
            + hms.get(1).unwrap_or(&0) * 60
            + hms.get(2).unwrap_or(&0)
            - off;
        return Some((t, tz));
    }
    // ISO 8601.
    let (date, rest) = s.split_at(s.find(['T', ' ']).unwrap_or(s.len()));
    let ymd: Vec<i64> = date.split('-').filter_map(|x| x.parse().ok()).collect();
    if ymd.len() != 3 {
        return None;
    }
    let rest = rest.trim_start_matches(['T', ' ']);
    let tz_at = rest.find(['+', '-', 'Z', ' ']).unwrap_or(rest.len());
    let hms: Vec<i64> = rest[..tz_at]
        .split(':')
        .filter_map(|x| x.split('.').next()?.parse().ok())
        .collect();
    let (tz, off) = tz_of(&rest[tz_at..])?;
    let t = days_from_civil(ymd[0], ymd[1], ymd[2]) * 86400
        + hms.first().unwrap_or(&0) * 3600
        + hms.get(1).unwrap_or(&0) * 60
        + hms.get(2).unwrap_or(&0)
        - off;
    Some((t, tz))
}

/// How far back a relative date goes, in git's approximate forms: `2 weeks ago`,
/// `2.weeks.ago`, `1.day`, `3 days 4 hours ago`, `last month`, `a week ago`.
fn relative_seconds(s: &str) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let mut words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == '.' || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    if words.last() == Some(&"ago") {
        words.pop();
    }
    if words.is_empty() || !words.len().is_multiple_of(2) {
        return None;
    }
    let mut total = 0i64;
    for pair in words.chunks(2) {
        let n: i64 = match pair[0] {
            "a" | "an" | "one" | "last" => 1,
            "two" => 2,
            "three" => 3,
            n => n.parse().ok()?,
        };
        let unit = match pair[1].trim_end_matches('s') {
            "second" | "sec" => 1,
            "minute" | "min" => 60,
            "hour" => 3600,
            "day" => 86400,
            "week" => 7 * 86400,
            "month" => 30 * 86400,
            "year" => 365 * 86400,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    Some(total)
}

pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// A time in git's formats: `default` (`Tue Nov 14 22:13:20 2023 +0000`), `iso`,
/// `iso-strict`, `short`, `unix`, `raw`, `rfc`, in the zone it was recorded in.
pub fn format_date(t: i64, tz: &str, style: &str) -> String {
    let sign = if tz.starts_with('-') { -1 } else { 1 };
    let d: i64 = tz.get(1..).and_then(|x| x.parse().ok()).unwrap_or(0);
    let off = sign * ((d / 100) * 3600 + (d % 100) * 60);
    let local = t + off;
    let (y, m, dd, h, mi, s, wday) = guest_support::civil_time(local);
    let wd = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"][wday as usize];
    let mon = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][m as usize - 1];
    match style {
        "iso" | "iso8601" => format!("{y:04}-{m:02}-{dd:02} {h:02}:{mi:02}:{s:02} {tz}"),
        "iso-strict" | "iso8601-strict" => {
            let z = if tz == "+0000" {
                "Z".to_string()
            } else {
                format!(
                    "{}:{}",
                    tz.get(..3).unwrap_or("+00"),
                    tz.get(3..).unwrap_or("00")
                )
            };
            format!("{y:04}-{m:02}-{dd:02}T{h:02}:{mi:02}:{s:02}{z}")
        }
        "short" => format!("{y:04}-{m:02}-{dd:02}"),
        "unix" => format!("{t}"),
        "raw" => format!("{t} {tz}"),
        "rfc" | "rfc2822" => format!("{wd}, {dd} {mon} {y} {h:02}:{mi:02}:{s:02} {tz}"),
        _ => format!("{wd} {mon} {dd} {h:02}:{mi:02}:{s:02} {y} {tz}"),
    }
}

/// Git's quoting of a path for display: C-style in double quotes when it has control
/// characters, `"`, `\` or bytes above 127 (and spaces, where `quote_space` asks).
pub fn quote_path(p: &str, quote_space: bool) -> String {
    let needs = p
        .bytes()
        .any(|b| b < 0x20 || b == b'"' || b == b'\\' || b >= 0x7f || (quote_space && b == b' '));
    if !needs {
        return p.to_string();
    }
    let mut s = String::from("\"");
    for b in p.bytes() {
        match b {
            b'\x07' => s.push_str("\\a"),
            b'\x08' => s.push_str("\\b"),
            b'\t' => s.push_str("\\t"),
            b'\n' => s.push_str("\\n"),
            b'\x0b' => s.push_str("\\v"),
            b'\x0c' => s.push_str("\\f"),
            b'\r' => s.push_str("\\r"),
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b if !(0x20..0x7f).contains(&b) => s.push_str(&format!("\\{b:03o}")),
            b => s.push(b as char),
        }
    }
    s.push('"');
    s
}
