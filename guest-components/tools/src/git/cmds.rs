//! The commands: each parses git's options, acts on the repository and writes git's output
//! and messages.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use guest_support::cli::glob;

use super::diff::{self, Delta, Files, Listing, Output, Show, Source};
use super::ignore::{self, Ignore};
use super::store::{
    self, Commit, Config, Id, Index, IndexEntry, Kind, Stat, hash_object, hex, io_fail,
    parse_ident, read_work_file,
};
use super::{Fail, Git, MISSING, R, VERSION, error, fatal, format_date, ident, quote_path, usage};

pub const HELP: &str = "usage: git [-v | --version] [-h | --help] [-C <path>] [-c <name>=<value>]
           [--no-pager] <command> [<args>]

These are common Git commands used in various situations:

start a working area
   init       Create an empty Git repository or reinitialize an existing one

work on the current change
   add        Add file contents to the index
   mv         Move or rename a file, a directory, or a symlink
   restore    Restore working tree files
   rm         Remove files from the working tree and from the index

examine the history and state
   diff       Show changes between commits, commit and working tree, etc
   log        Show commit logs
   show       Show various types of objects
   status     Show the working tree status

grow, mark and tweak your common history
   branch     List, create, or delete branches
   commit     Record changes to the repository
   reset      Reset current HEAD to the specified state
   switch     Switch branches
   tag        Create, list, delete or verify a tag object signed with GPG
   stash      Stash the changes in a dirty working directory away

This git keeps history in the sandbox only: it has no network commands (clone, fetch,
pull, push) and no merge or rebase.
";

/// Bundled short options (`-qb NAME`, `-am MSG`, `-rf`) split into one per argument, for
/// the letters each command knows; a letter that takes a value must come last.
fn unbundle(cmd: &str, args: Vec<String>) -> Vec<String> {
    let (flags, valued) = match cmd {
        "checkout" => ("qf", "bB"),
        "switch" => ("qfd", "cC"),
        "commit" => ("aqsnv", "mF"),
        "branch" => ("dDfmMcvral", ""),
        "rm" => ("rfqn", ""),
        "add" => ("AufvnN", ""),
        "status" => ("sbvz", ""),
        "tag" => ("adfln", "m"),
        "init" => ("q", "b"),
        "reset" => ("q", ""),
        "ls-files" => ("osmdcz", ""),
        "clean" => ("nfdxXq", ""),
        "grep" => ("nilvwcEFhHoqrIz", "e"),
        "restore" => ("SWq", "s"),
        _ => return args,
    };
    let mut out = Vec::new();
    let mut rest = false;
    for a in args {
        let ok = !rest
            && a.len() > 2
            && a.starts_with('-')
            && !a.starts_with("--")
            && a[1..]
                .char_indices()
                .all(|(i, c)| flags.contains(c) || (valued.contains(c) && i == a.len() - 2));
        if a == "--" {
            rest = true;
        }
        if ok {
            out.extend(a[1..].chars().map(|c| format!("-{c}")));
        } else {
            out.push(a);
        }
    }
    out
}

pub fn run(cmd: &str, args: Vec<String>, overrides: &[(String, String)]) -> R<i32> {
    let args = unbundle(cmd, args);
    let with_repo = |f: fn(&mut Git, Vec<String>) -> R<i32>| -> R<i32> {
        let mut g = Git::open(overrides)?;
        let r = f(&mut g, args.clone());
        g.flush();
        r
    };
    match cmd {
        "init" => init(args),
        "version" | "--version" => {
            println!("{VERSION}");
            Ok(0)
        }
        "help" => {
            print!("{HELP}");
            Ok(0)
        }
        "config" => config(args, overrides),
        "add" => with_repo(add),
        "rm" => with_repo(rm),
        "mv" => with_repo(mv),
        "commit" => with_repo(commit),
        "status" => with_repo(status),
        "diff" if args.iter().any(|a| a == "--no-index") => diff_no_index(args),
        "diff" => with_repo(diff_cmd),
        "describe" => with_repo(describe),
        "remote" => with_repo(super::remote::remote),
        "merge" => with_repo(super::merge::merge),
        "cherry-pick" => with_repo(|g, a| super::merge::pick(g, a, false)),
        "revert" => with_repo(|g, a| super::merge::pick(g, a, true)),
        "apply" => super::apply::apply(args),
        "log" => with_repo(log),
        "show" => with_repo(show),
        "rev-parse" => with_repo(rev_parse),
        "branch" => with_repo(branch),
        "checkout" => with_repo(checkout),
        "switch" => with_repo(switch),
        "restore" => with_repo(restore),
        "reset" => with_repo(reset),
        "tag" => with_repo(tag),
        "ls-files" => with_repo(ls_files),
        "ls-tree" => with_repo(ls_tree),
        "cat-file" => with_repo(cat_file),
        "hash-object" => hash_object_cmd(args, overrides),
        "write-tree" => with_repo(|g, _| {
            let id = g.repo.write_tree(&g.repo.read_index()?.files())?;
            g.say(&format!("{}\n", hex(&id)));
            Ok(0)
        }),
        "show-ref" => with_repo(show_ref),
        "check-ignore" => with_repo(check_ignore),
        "clean" => with_repo(super::worktree::clean),
        "grep" => with_repo(super::worktree::grep),
        "stash" => with_repo(super::worktree::stash),
        "symbolic-ref" => with_repo(symbolic_ref),
        c if MISSING.contains(&c) => Err(fatal(format!(
            "'{c}' is not available in this sandbox's git: it keeps history locally (no network, merge or rebase)"
        ))),
        c => Err(Fail {
            msg: format!("git: '{c}' is not a git command. See 'git --help'."),
            code: 1,
        }),
    }
}

/// Splits arguments at `--`: options and revisions before, paths after.
pub(super) fn split_dashdash(args: &[String]) -> (Vec<String>, Option<Vec<String>>) {
    match args.iter().position(|a| a == "--") {
        Some(i) => (args[..i].to_vec(), Some(args[i + 1..].to_vec())),
        None => (args.to_vec(), None),
    }
}

/// Options of the form `-x`, `--long`, `--long=value` and `-xVALUE`; returns the value of
/// an option that takes one (from the same or the next argument).
struct Args {
    items: Vec<String>,
    i: usize,
}

impl Args {
    fn new(items: Vec<String>) -> Args {
        Args { items, i: 0 }
    }
    fn next(&mut self) -> Option<String> {
        let a = self.items.get(self.i).cloned();
        self.i += 1;
        a
    }
    fn value(&mut self, a: &str, short: &str, long: &str) -> R<Option<String>> {
        if a == short || a == long {
            return self.next().map(Some).ok_or_else(|| {
                usage(format!(
                    "error: switch `{}' requires a value",
                    a.trim_start_matches('-')
                ))
            });
        }
        if let Some(v) = a.strip_prefix(&format!("{long}=")) {
            return Ok(Some(v.to_string()));
        }
        if short.len() == 2 && a.starts_with(short) && !a.starts_with("--") && a.len() > 2 {
            return Ok(Some(a[2..].to_string()));
        }
        Ok(None)
    }
}

pub(super) fn unknown_option(a: &str) -> Fail {
    if let Some(l) = a.strip_prefix("--") {
        usage(format!("error: unknown option `{l}'"))
    } else {
        usage(format!(
            "error: unknown switch `{}'",
            a.trim_start_matches('-')
        ))
    }
}

// ---------------------------------------------------------------- init, config

fn init(args: Vec<String>) -> R<i32> {
    let mut a = Args::new(args);
    let (mut quiet, mut branch, mut dir) = (false, None, None);
    while let Some(x) = a.next() {
        if let Some(v) = a.value(&x, "-b", "--initial-branch")? {
            branch = Some(v);
            continue;
        }
        match x.as_str() {
            "-q" | "--quiet" => quiet = true,
            "--bare" => {
                return Err(fatal(
                    "bare repositories are not supported by this git".into(),
                ));
            }
            s if s.starts_with('-') => return Err(unknown_option(s)),
            _ => dir = Some(x),
        }
    }
    let top = match &dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| io_fail(Path::new(d), e))?;
            std::env::current_dir().unwrap_or_default().join(d)
        }
        None => std::env::current_dir().unwrap_or_default(),
    };
    let top = normalize(&top);
    let gd = top.join(".git");
    let mut user = Config::default();
    for p in Config::user_files() {
        user.read_file(&p);
    }
    let existed = gd.join("HEAD").is_file();
    for d in [
        "objects/info",
        "objects/pack",
        "refs/heads",
        "refs/tags",
        "info",
        "hooks",
    ] {
        std::fs::create_dir_all(gd.join(d)).map_err(|e| io_fail(&gd.join(d), e))?;
    }
    if !existed {
        let name = branch
            .clone()
            .or_else(|| user.get("init.defaultbranch").map(str::to_string));
        if name.is_none() && !quiet {
            eprint!(
                "hint: Using 'master' as the name for the initial branch. This default branch name\nhint: is subject to change. To configure the initial branch name to use in all\nhint: of your new repositories, which will suppress this warning, call:\nhint:\nhint: \tgit config --global init.defaultBranch <name>\nhint:\nhint: Names commonly chosen instead of 'master' are 'main', 'trunk' and\nhint: 'development'. The just-created branch can be renamed via this command:\nhint:\nhint: \tgit branch -m <name>\n"
            );
        }
        let name = name.unwrap_or_else(|| "master".into());
        let w =
            |p: &str, s: &str| std::fs::write(gd.join(p), s).map_err(|e| io_fail(&gd.join(p), e));
        w("HEAD", &format!("ref: refs/heads/{name}\n"))?;
        w(
            "config",
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
        )?;
        w(
            "description",
            "Unnamed repository; edit this file 'description' to name the repository.\n",
        )?;
        w(
            "info/exclude",
            "# git ls-files --others --exclude-from=.git/info/exclude\n# Lines that start with '#' are comments.\n# For a project mostly in C, the following would be a good set of\n# exclude patterns (uncomment them if you want to use them):\n# *.[oa]\n# *~\n",
        )?;
    } else if let Some(b) = &branch {
        eprintln!("warning: re-init: ignored --initial-branch={b}");
    }
    if !quiet {
        println!(
            "{} Git repository in {}/",
            if existed {
                "Reinitialized existing"
            } else {
                "Initialized empty"
            },
            gd.display()
        );
    }
    Ok(0)
}

fn normalize(p: &Path) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::from("/");
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

fn config(args: Vec<String>, overrides: &[(String, String)]) -> R<i32> {
    let mut args = args;
    // git 2.46's subcommands: `git config get|set|unset|list ...`.
    let sub = match args.first().map(String::as_str) {
        Some(s @ ("get" | "set" | "unset" | "list")) => {
            let s = s.to_string();
            args.remove(0);
            Some(s)
        }
        _ => None,
    };
    let (mut scope, mut action, mut positional) = (None::<&str>, sub.clone(), Vec::new());
    for a in &args {
        match a.as_str() {
            "--global" => scope = Some("global"),
            "--local" => scope = Some("local"),
            "--system" => scope = Some("system"),
            "-l" | "--list" => action = Some("list".into()),
            "--get" => action = Some("get".into()),
            "--get-all" => action = Some("get-all".into()),
            "--unset" | "--unset-all" => action = Some("unset".into()),
            "--add" => action = Some("add".into()),
            "--bool" | "--int" | "--path" | "--type=bool" | "--type=int" | "--type=path"
            | "--type=string" => {}
            "--show-origin" | "--show-scope" | "--name-only" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => positional.push(a.clone()),
        }
    }
    let local_file = || -> R<std::path::PathBuf> {
        super::discover()
            .map(|(gd, _)| gd.join("config"))
            .map_err(|_| fatal("not in a git directory".into()))
    };
    let file = match scope {
        Some("global") => Config::global_file(),
        Some("system") => {
            return Err(fatal(
                "the system config is not available in this sandbox".into(),
            ));
        }
        _ => local_file().unwrap_or_default(),
    };
    let action = action.unwrap_or_else(|| match positional.len() {
        0 => "usage".into(),
        1 => "get".into(),
        _ => "set".into(),
    });
    let check_key = |k: &str| -> R<()> {
        if !k.contains('.') || k.starts_with('.') || k.ends_with('.') {
            return Err(Fail {
                msg: format!("error: key does not contain a section: {k}"),
                code: 1,
            });
        }
        Ok(())
    };
    match action.as_str() {
        "list" => {
            let mut c = Config::default();
            match scope {
                Some("global") => c.read_file(&Config::global_file()),
                Some("local") => c.read_file(&local_file()?),
                _ => {
                    for p in Config::user_files() {
                        c.read_file(&p);
                    }
                    if let Ok(f) = local_file() {
                        c.read_file(&f);
                    }
                    c.values.extend(overrides.iter().cloned());
                }
            }
            for (k, v) in c.values {
                println!("{k}={v}");
            }
            Ok(0)
        }
        "get" | "get-all" => {
            let key = positional
                .first()
                .ok_or_else(|| usage("error: wrong number of arguments, should be 1".into()))?;
            check_key(key)?;
            let mut c = Config::default();
            match scope {
                Some(_) => c.read_file(&file),
                None => {
                    for p in Config::user_files() {
                        c.read_file(&p);
                    }
                    if let Ok(f) = local_file() {
                        c.read_file(&f);
                    }
                    c.values.extend(overrides.iter().cloned());
                }
            }
            let k = store::normal_key(key);
            let all: Vec<&String> = c
                .values
                .iter()
                .filter(|(x, _)| *x == k)
                .map(|(_, v)| v)
                .collect();
            if all.is_empty() {
                return Ok(1);
            }
            if action == "get-all" {
                for v in all {
                    println!("{v}");
                }
            } else {
                println!("{}", all[all.len() - 1]);
            }
            Ok(0)
        }
        "set" | "add" => {
            if positional.len() != 2 {
                return Err(usage(
                    "error: wrong number of arguments, should be 2".into(),
                ));
            }
            check_key(&positional[0])?;
            if scope != Some("global") {
                local_file()?;
            }
            store::set_config(&file, &positional[0], Some(&positional[1]))?;
            Ok(0)
        }
        "unset" => {
            let key = positional
                .first()
                .ok_or_else(|| usage("error: wrong number of arguments, should be 1".into()))?;
            if scope != Some("global") {
                local_file()?;
            }
            Ok(if store::set_config(&file, key, None)? {
                0
            } else {
                5
            })
        }
        _ => Err(usage("usage: git config [<options>]".into())),
    }
}

// ---------------------------------------------------------------- the state of the tree

/// The three trees and what differs between them.
pub(super) struct State {
    pub head: Option<Id>,
    pub head_files: Files,
    pub index: Index,
    pub staged: Vec<Delta>,
    pub unstaged: Vec<Delta>,
    /// Untracked files, each a full path (no directories collapsed).
    pub untracked: Vec<String>,
}

pub(super) fn tracked_dirs(index: &Index) -> BTreeSet<String> {
    let mut dirs = BTreeSet::new();
    for p in index.entries.keys() {
        let mut at = 0;
        while let Some(i) = p[at..].find('/') {
            dirs.insert(p[..at + i + 1].to_string());
            at += i + 1;
        }
    }
    dirs
}

pub(super) fn state(g: &Git, want_untracked: bool) -> R<State> {
    let head = g.repo.head();
    let head_files = g.head_files()?;
    let mut index = g.repo.read_index()?;
    let mut staged = diff::compare(&head_files, &index.files(), true);
    staged.retain(|d| !index.conflicts.contains_key(&d.path));
    let mut refresh = Vec::new();
    let unstaged = diff::worktree_changes(g, &index.entries, &mut refresh);
    if !refresh.is_empty() {
        for (p, st) in refresh {
            if let Some(e) = index.entries.get_mut(&p) {
                e.stat = st;
            }
        }
        let _ = g.repo.write_index(&index);
    }
    let mut untracked = Vec::new();
    if want_untracked {
        let mut ig = Ignore::new(&g.repo);
        let (entries, conflicts) = (&index.entries, &index.conflicts);
        ignore::untracked(
            &g.repo.work,
            "",
            &mut ig,
            &|p| entries.contains_key(p) || conflicts.contains_key(p),
            &mut untracked,
        );
    }
    Ok(State {
        head,
        head_files,
        index,
        staged,
        unstaged,
        untracked,
    })
}

/// Paths from the command line as paths from the top; `.` and a directory name cover
/// everything under them, and `*`, `?` and `[` match as git's pathspecs (across `/`).
pub(super) fn specs(g: &Git, args: &[String]) -> R<Vec<String>> {
    args.iter().map(|a| g.repo_path(a)).collect()
}

pub(super) fn matches(specs: &[String], path: &str) -> bool {
    specs.is_empty()
        || specs.iter().any(|s| {
            s.is_empty()
                || path == s
                || (path.starts_with(s.as_str()) && path.as_bytes().get(s.len()) == Some(&b'/'))
                || (s.contains(['*', '?', '[']) && glob(s, path))
        })
}

pub(super) fn stage_file(g: &Git, index: &mut Index, path: &str) -> R<()> {
    let full = g.work_path(path);
    let (mode, data) = read_work_file(&full, g.filemode()).map_err(|e| {
        error(format!(
            "open(\"{path}\"): {}",
            guest_support::cli::reason(&e)
        ))
    })?;
    let mode = if !g.filemode() && mode != 0o120000 {
        index.entries.get(path).map_or(mode, |e| e.mode)
    } else {
        mode
    };
    let id = g.repo.write(Kind::Blob, &data)?;
    let stat = std::fs::symlink_metadata(&full)
        .map(|m| Stat::of(&m))
        .unwrap_or_default();
    // A file replaces a directory of the same name and the other way round.
    let prefix = format!("{path}/");
    index.entries.retain(|p, _| !p.starts_with(&prefix));
    let mut at = 0;
    while let Some(i) = path[at..].find('/') {
        index.entries.remove(&path[..at + i]);
        at += i + 1;
    }
    index
        .entries
        .insert(path.to_string(), IndexEntry { mode, id, stat });
    // Adding a path marks its conflict resolved.
    index.conflicts.remove(path);
    Ok(())
}

// ---------------------------------------------------------------- add, rm, mv

fn add(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let (mut all, mut update, mut force, mut verbose, mut dry) =
        (false, false, false, false, false);
    let mut paths = after.unwrap_or_default();
    for a in opts {
        match a.as_str() {
            "-A" | "--all" | "--no-ignore-removal" => all = true,
            "-u" | "--update" => update = true,
            "-f" | "--force" => force = true,
            "-v" | "--verbose" => verbose = true,
            "-n" | "--dry-run" => dry = true,
            "--ignore-errors" | "-N" | "--intent-to-add" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(a),
        }
    }
    if paths.is_empty() && !all && !update {
        eprintln!(
            "Nothing specified, nothing added.\nhint: Maybe you wanted to say 'git add .'?\nhint: Disable this message with \"git config advice.addEmptyPathspec false\""
        );
        return Ok(0);
    }
    let sp = if paths.is_empty() {
        vec![String::new()]
    } else {
        specs(g, &paths)?
    };
    let st = state(g, !update)?;
    let mut index = st.index;
    let ig = Ignore::new(&g.repo);
    // Every pathspec must match something, tracked or on disk.
    let mut ignored_named = Vec::new();
    for (arg, s) in paths.iter().zip(&sp) {
        let on_disk = std::fs::symlink_metadata(g.work_path(s)).is_ok();
        let tracked = index
            .entries
            .keys()
            .any(|p| matches(std::slice::from_ref(s), p));
        let untracked_hit = st
            .untracked
            .iter()
            .any(|p| matches(std::slice::from_ref(s), p));
        if !on_disk && !tracked && !untracked_hit {
            return Err(fatal(format!("pathspec '{arg}' did not match any files")));
        }
        if on_disk && !tracked && !untracked_hit && !force && !s.is_empty() {
            let is_dir = g.work_path(s).is_dir();
            if ig.ignored(s, is_dir) || ancestors_ignored(&ig, s) {
                ignored_named.push(arg.clone());
            }
        }
    }
    let mut names: Vec<(String, bool)> = Vec::new(); // (path, removed)
    for d in &st.unstaged {
        if matches(&sp, &d.path) {
            names.push((d.path.clone(), d.new.is_none()));
        }
    }
    for p in index.conflicts.keys() {
        if matches(&sp, p) {
            let gone = std::fs::symlink_metadata(g.work_path(p)).is_err();
            names.push((p.clone(), gone));
        }
    }
    if !update {
        for p in &st.untracked {
            if matches(&sp, p) {
                names.push((p.clone(), false));
            }
        }
        if force {
            for s in &sp {
                let full = g.work_path(s);
                if full.is_file() || full.is_symlink() {
                    names.push((s.clone(), false));
                } else if full.is_dir() {
                    walk_all(g, s, &mut names);
                }
            }
        }
    }
    names.sort();
    names.dedup();
    for (p, removed) in &names {
        if verbose || dry {
            if *removed {
                g.say(&format!("remove '{}'\n", g.relative(p)));
            } else {
                g.say(&format!("add '{}'\n", g.relative(p)));
            }
        }
        if dry {
            continue;
        }
        if *removed {
            index.entries.remove(p);
            index.conflicts.remove(p);
        } else {
            stage_file(g, &mut index, p)?;
        }
    }
    if !dry {
        g.repo.write_index(&index)?;
    }
    if !ignored_named.is_empty() {
        g.flush();
        return Err(Fail {
            msg: format!(
                "The following paths are ignored by one of your .gitignore files:\n{}\nhint: Use -f if you really want to add them.\nhint: Disable this message with \"git config advice.addIgnoredFile false\"",
                ignored_named.join("\n")
            ),
            code: 1,
        });
    }
    Ok(0)
}

fn ancestors_ignored(ig: &Ignore, path: &str) -> bool {
    let mut at = 0;
    while let Some(i) = path[at..].find('/') {
        if ig.ignored(&path[..at + i], true) {
            return true;
        }
        at += i + 1;
    }
    false
}

fn walk_all(g: &Git, dir: &str, out: &mut Vec<(String, bool)>) {
    let Ok(rd) = std::fs::read_dir(g.work_path(dir)) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == ".git" {
            continue;
        }
        let p = if dir.is_empty() {
            name
        } else {
            format!("{dir}/{name}")
        };
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            walk_all(g, &p, out);
        } else {
            out.push((p, false));
        }
    }
}

fn rm(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let (mut cached, mut recursive, mut force, mut quiet) = (false, false, false, false);
    let mut paths = after.unwrap_or_default();
    for a in opts {
        match a.as_str() {
            "--cached" => cached = true,
            "-r" => recursive = true,
            "-f" | "--force" => force = true,
            "-q" | "--quiet" => quiet = true,
            "--ignore-unmatch" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(a),
        }
    }
    if paths.is_empty() {
        return Err(usage("usage: git rm [-f | --force] [-n] [-r] [--cached] [--ignore-unmatch]\n              [--quiet] [--pathspec-from-file=<file> [--pathspec-file-nul]]\n              [--] [<pathspec>...]".into()));
    }
    let sp = specs(g, &paths)?;
    let st = state(g, false)?;
    let mut index = st.index;
    let mut chosen = Vec::new();
    for (arg, s) in paths.iter().zip(&sp) {
        let hits: Vec<String> = index
            .entries
            .keys()
            .filter(|p| matches(std::slice::from_ref(s), p))
            .cloned()
            .collect();
        if hits.is_empty() {
            return Err(fatal(format!("pathspec '{arg}' did not match any files")));
        }
        if !recursive && !hits.iter().any(|h| h == s) && !s.contains(['*', '?', '[']) {
            return Err(fatal(format!(
                "not removing '{arg}' recursively without -r"
            )));
        }
        chosen.extend(hits);
    }
    chosen.sort();
    chosen.dedup();
    if !force {
        let modified: Vec<&String> = chosen
            .iter()
            .filter(|p| st.unstaged.iter().any(|d| &d.path == *p && d.new.is_some()))
            .collect();
        let staged: Vec<&String> = chosen
            .iter()
            .filter(|p| st.staged.iter().any(|d| &d.path == *p))
            .collect();
        if !modified.is_empty() && !cached {
            let (s, it) = if modified.len() == 1 {
                ("file has", "")
            } else {
                ("files have", "")
            };
            let _ = it;
            return Err(error(format!(
                "the following {s} local modifications:\n{}\n(use --cached to keep the file, or -f to force removal)",
                modified
                    .iter()
                    .map(|p| format!("    {}", g.relative(p)))
                    .collect::<Vec<_>>()
                    .join("\n")
            )));
        }
        if !staged.is_empty() && !cached && st.head.is_some() {
            let both: Vec<&&String> = staged.iter().filter(|p| modified.contains(p)).collect();
            if !both.is_empty() {
                return Err(error(format!(
                    "the following file has staged content different from both the\nfile and the HEAD:\n{}\n(use -f to force removal)",
                    both.iter()
                        .map(|p| format!("    {}", g.relative(p)))
                        .collect::<Vec<_>>()
                        .join("\n")
                )));
            }
        }
    }
    for p in &chosen {
        if !quiet {
            g.say(&format!("rm '{p}'\n"));
        }
        index.entries.remove(p);
        if !cached {
            let full = g.work_path(p);
            let _ = std::fs::remove_file(&full);
            remove_empty_parents(g, p);
        }
    }
    g.repo.write_index(&index)?;
    Ok(0)
}

pub(super) fn remove_empty_parents(g: &Git, path: &str) {
    let mut p = path;
    while let Some(i) = p.rfind('/') {
        p = &p[..i];
        if std::fs::remove_dir(g.work_path(p)).is_err() {
            break;
        }
    }
}

fn mv(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut paths = Vec::new();
    let (mut force, mut verbose) = (false, false);
    for a in args {
        match a.as_str() {
            "-f" | "--force" => force = true,
            "-v" | "--verbose" => verbose = true,
            "-k" | "--" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(a),
        }
    }
    if paths.len() < 2 {
        return Err(usage(
            "usage: git mv [<options>] <source>... <destination>".into(),
        ));
    }
    let dest_arg = paths.pop().unwrap();
    let dest = g.repo_path(&dest_arg)?;
    let dest_is_dir = g.work_path(&dest).is_dir();
    if paths.len() > 1 && !dest_is_dir {
        return Err(fatal(format!(
            "destination '{dest_arg}' is not a directory"
        )));
    }
    let mut index = g.repo.read_index()?;
    for src_arg in &paths {
        let src = g.repo_path(src_arg)?;
        let name = src.rsplit('/').next().unwrap_or(&src).to_string();
        let to = if dest_is_dir {
            if dest.is_empty() {
                name
            } else {
                format!("{dest}/{name}")
            }
        } else {
            dest.clone()
        };
        let moved: Vec<String> = index
            .entries
            .keys()
            .filter(|p| **p == src || p.starts_with(&format!("{src}/")))
            .cloned()
            .collect();
        if !g.work_path(&src).exists() && !g.work_path(&src).is_symlink() {
            return Err(fatal(format!(
                "bad source, source={src_arg}, destination={}",
                dest_arg
            )));
        }
        if moved.is_empty() {
            return Err(fatal(format!(
                "not under version control, source={src_arg}, destination={}",
                g.relative(&to)
            )));
        }
        if g.work_path(&to).exists() && !force && !g.work_path(&to).is_dir() {
            return Err(fatal(format!(
                "destination exists, source={src_arg}, destination={}",
                g.relative(&to)
            )));
        }
        if verbose {
            g.say(&format!(
                "Renaming {} to {}\n",
                g.relative(&src),
                g.relative(&to)
            ));
        }
        std::fs::rename(g.work_path(&src), g.work_path(&to)).map_err(|e| {
            fatal(format!(
                "renaming '{src_arg}' failed: {}",
                guest_support::cli::reason(&e)
            ))
        })?;
        for p in moved {
            let e = index.entries.remove(&p).unwrap();
            let np = format!("{to}{}", &p[src.len()..]);
            index.entries.insert(np, e);
        }
    }
    g.repo.write_index(&index)?;
    Ok(0)
}

// ---------------------------------------------------------------- commit

/// Git's `whitespace` clean-up of a message: trailing spaces go, runs of blank lines become
/// one, blank lines at either end go, and the message ends with a newline.
pub(super) fn cleanup(msg: &str, strip_comments: bool) -> String {
    let mut out: Vec<&str> = Vec::new();
    for l in msg.lines() {
        if strip_comments && l.starts_with('#') {
            continue;
        }
        let l = l.trim_end();
        if l.is_empty() && out.last().is_none_or(|x| x.is_empty()) {
            continue;
        }
        out.push(l);
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    if out.is_empty() {
        String::new()
    } else {
        format!("{}\n", out.join("\n"))
    }
}

fn commit(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut a = Args::new(args);
    let mut msgs: Vec<String> = Vec::new();
    let (mut all, mut quiet, mut allow_empty, mut amend, mut no_edit, mut signoff) =
        (false, false, false, false, false, false);
    let mut author_arg: Option<String> = None;
    let mut date_arg: Option<String> = None;
    let mut paths = Vec::new();
    while let Some(x) = a.next() {
        if let Some(v) = a.value(&x, "-m", "--message")? {
            msgs.push(v);
            continue;
        }
        if let Some(f) = a.value(&x, "-F", "--file")? {
            let text = if f == "-" {
                let mut s = String::new();
                let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut s);
                s
            } else {
                std::fs::read_to_string(g.prefix.clone() + &f)
                    .or_else(|_| std::fs::read_to_string(&f))
                    .map_err(|e| {
                        fatal(format!(
                            "could not read log file '{f}': {}",
                            guest_support::cli::reason(&e)
                        ))
                    })?
            };
            msgs.push(text);
            continue;
        }
        if let Some(v) = a.value(&x, "", "--author")? {
            author_arg = Some(v);
            continue;
        }
        if let Some(v) = a.value(&x, "", "--date")? {
            date_arg = Some(v);
            continue;
        }
        match x.as_str() {
            "-a" | "--all" => all = true,
            "-q" | "--quiet" => quiet = true,
            "--allow-empty" => allow_empty = true,
            "--allow-empty-message" => {}
            "--amend" => amend = true,
            "--no-edit" => no_edit = true,
            "-s" | "--signoff" => signoff = true,
            "-n" | "--no-verify" | "--no-gpg-sign" | "-v" | "--verbose" | "--no-status" => {}
            "--" => paths.extend(a.items[a.i..].iter().cloned()),
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(x),
        }
        if !paths.is_empty() && a.i >= a.items.len() {
            break;
        }
    }
    let mut st = state(g, true)?;
    if !st.index.conflicts.is_empty() {
        for p in st.index.conflicts.keys() {
            g.say(&format!("U\t{p}\n"));
        }
        return Err(Fail {
            msg: "error: Committing is not possible because you have unmerged files.\nhint: Fix them up in the work tree, and then use 'git add/rm <file>'\nhint: as appropriate to mark resolution and make a commit.\nfatal: Exiting because of an unresolved conflict.".into(),
            code: 128,
        });
    }
    // Concluding a merge: its other parent and, without -m, its prepared message.
    let merging = std::fs::read_to_string(g.repo.git_dir.join("MERGE_HEAD"))
        .ok()
        .and_then(|s| store::parse_hex(s.trim()));
    let picking = ["CHERRY_PICK_HEAD", "REVERT_HEAD"]
        .iter()
        .find_map(|f| std::fs::read_to_string(g.repo.git_dir.join(f)).ok())
        .and_then(|s| store::parse_hex(s.trim()));
    if (merging.is_some() || picking.is_some()) && msgs.is_empty() {
        let m = std::fs::read_to_string(g.repo.git_dir.join("MERGE_MSG")).unwrap_or_default();
        msgs.push(cleanup(&m, true));
        allow_empty = true;
    }
    let parent_commit = match st.head {
        Some(h) => Some(g.repo.commit(&h)?),
        None => None,
    };
    if amend && parent_commit.is_none() {
        return Err(fatal("You have nothing to amend.".into()));
    }
    if all || !paths.is_empty() {
        let sp = if paths.is_empty() {
            vec![String::new()]
        } else {
            specs(g, &paths)?
        };
        if !paths.is_empty() {
            for (arg, s) in paths.iter().zip(&sp) {
                if !st
                    .index
                    .entries
                    .keys()
                    .any(|p| matches(std::slice::from_ref(s), p))
                {
                    return Err(error(format!(
                        "pathspec '{arg}' did not match any file(s) known to git"
                    )));
                }
            }
        }
        for d in st.unstaged.clone() {
            if matches(&sp, &d.path) {
                if d.new.is_none() {
                    st.index.entries.remove(&d.path);
                } else {
                    stage_file(g, &mut st.index, &d.path)?;
                }
            }
        }
        st.staged = diff::compare(&st.head_files, &st.index.files(), true);
        st.unstaged.retain(|d| !matches(&sp, &d.path));
    }
    let base_files = if amend {
        match parent_commit.as_ref().and_then(|c| c.parents.first()) {
            Some(p) => g.repo.flatten(&g.repo.commit(p)?.tree)?,
            None => Files::new(),
        }
    } else {
        st.head_files.clone()
    };
    let tree_files = st.index.files();
    let changes = diff::compare(&base_files, &tree_files, true);
    if changes.is_empty() && !allow_empty {
        g.repo.write_index(&st.index).ok();
        print_long_status(g, &st, Untracked::Normal, true, !amend);
        if amend {
            g.say("No changes\n");
            return Err(Fail {
                msg: "You asked to amend the most recent commit, but doing so would make\nit empty. You can repeat your command with --allow-empty, or you can\nremove the commit entirely with \"git reset HEAD^\".".into(),
                code: 1,
            });
        }
        return Ok(1);
    }
    let mut message = if !msgs.is_empty() {
        cleanup(&msgs.join("\n\n"), false)
    } else if amend && (no_edit || msgs.is_empty()) {
        parent_commit.as_ref().unwrap().message.clone()
    } else {
        return Err(Fail {
            msg: "error: Terminal is dumb, but EDITOR unset\nPlease supply the message using either -m or -F option.".into(),
            code: 1,
        });
    };
    if message.is_empty() {
        return Err(Fail {
            msg: "Aborting commit due to empty commit message.".into(),
            code: 1,
        });
    }
    let committer = ident(&g.repo, "COMMITTER")?;
    let picked_author = match picking {
        Some(p) if std::fs::metadata(g.repo.git_dir.join("CHERRY_PICK_HEAD")).is_ok() => {
            Some(g.repo.commit(&p)?.author)
        }
        _ => None,
    };
    let mut author = if amend && author_arg.is_none() {
        parent_commit.as_ref().unwrap().author.clone()
    } else if let Some(a) = picked_author {
        a
    } else {
        ident(&g.repo, "AUTHOR")?
    };
    if let Some(a) = &author_arg {
        let i = parse_ident(&author);
        let (t, tz) = (i.time, i.tz.to_string());
        let a = a.trim();
        if !a.contains('<') {
            return Err(fatal(format!(
                "--author '{a}' is not 'Name <email>' and matches no existing author"
            )));
        }
        author = format!("{} {t} {tz}", a);
    }
    if let Some(d) = &date_arg {
        let (t, tz) =
            super::parse_date(d).ok_or_else(|| fatal(format!("invalid date format: {d}")))?;
        let i = parse_ident(&author);
        author = format!("{} <{}> {t} {tz}", i.name, i.email);
    }
    if signoff {
        let c = parse_ident(&committer);
        let line = format!("Signed-off-by: {} <{}>", c.name, c.email);
        if !message.contains(&line) {
            let trailer_block = message
                .trim_end()
                .rsplit("\n\n")
                .next()
                .is_some_and(|p| p.lines().all(|l| l.contains(": ")));
            message = format!(
                "{}{}{line}\n",
                message.trim_end(),
                if trailer_block && message.trim_end().contains("\n\n") {
                    "\n"
                } else {
                    "\n\n"
                }
            );
        }
    }
    let tree = g.repo.write_tree(&tree_files)?;
    let parents = if amend {
        parent_commit.as_ref().unwrap().parents.clone()
    } else {
        st.head.into_iter().chain(merging).collect()
    };
    let c = Commit {
        tree,
        parents: parents.clone(),
        author: author.clone(),
        committer: committer.clone(),
        message,
    };
    let id = g.repo.write(Kind::Commit, &c.encode())?;
    g.repo.write_index(&st.index)?;
    g.repo.set_head(&id)?;
    super::merge::clear_merge_state(g);
    for f in ["CHERRY_PICK_HEAD", "REVERT_HEAD"] {
        let _ = std::fs::remove_file(g.repo.git_dir.join(f));
    }
    let kind = if amend {
        "commit (amend)"
    } else if merging.is_some() {
        "commit (merge)"
    } else if parents.is_empty() {
        "commit (initial)"
    } else {
        "commit"
    };
    g.repo.reflog(
        st.head,
        &id,
        &committer,
        &format!("{kind}: {}", c.subject()),
        true,
    );
    if quiet {
        return Ok(0);
    }
    let branch = g.repo.branch().unwrap_or_else(|| "detached HEAD".into());
    let root = if parents.is_empty() {
        " (root-commit)"
    } else {
        ""
    };
    g.say(&format!(
        "[{branch}{root} {}] {}\n",
        g.repo.abbrev(&id),
        c.subject()
    ));
    let (ai, ci) = (parse_ident(&author), parse_ident(&committer));
    if (ai.name, ai.email) != (ci.name, ci.email) {
        g.say(&format!(" Author: {} <{}>\n", ai.name, ai.email));
    }
    if amend || date_arg.is_some() || picking.is_some() {
        g.say(&format!(
            " Date: {}\n",
            format_date(ai.time, ai.tz, "default")
        ));
    }
    let mut out = Vec::new();
    if merging.is_none() {
        diff::shortstat(g, &changes, Source::Objects, &mut out);
        diff::summary(&changes, &mut out);
    }
    g.out.extend_from_slice(&out);
    Ok(0)
}

// ---------------------------------------------------------------- status

fn label(d: &Delta) -> &'static str {
    match d.letter() {
        'A' => "new file:   ",
        'D' => "deleted:    ",
        'R' => "renamed:    ",
        'T' => "typechange: ",
        _ => "modified:   ",
    }
}

pub(super) fn branch_line(g: &Git) -> String {
    match g.repo.branch() {
        Some(b) => format!("On branch {b}\n"),
        None => match g.repo.head() {
            Some(h) => format!("HEAD detached at {}\n", g.repo.abbrev(&h)),
            None => "Not currently on any branch.\n".into(),
        },
    }
}

/// Git's words and short-format letters for an unmerged path, from which of its base,
/// ours and theirs exist.
fn unmerged_label(stages: &[Option<(u32, Id)>; 3]) -> (&'static str, &'static str) {
    match (
        stages[0].is_some(),
        stages[1].is_some(),
        stages[2].is_some(),
    ) {
        (true, true, true) => ("both modified:", "UU"),
        (false, true, true) => ("both added:", "AA"),
        (true, true, false) => ("deleted by them:", "UD"),
        (true, false, true) => ("deleted by us:", "DU"),
        (false, true, false) => ("added by us:", "AU"),
        (false, false, true) => ("added by them:", "UA"),
        _ => ("both deleted:", "DD"),
    }
}

/// How untracked files show in the long format.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Untracked {
    No,
    /// `-unormal`: a directory with nothing tracked is one `dir/` line.
    Normal,
    All,
}

/// The long format of `git status`; `for_commit` gives the wording `git commit` uses when
/// it has nothing to commit ("Initial commit").
pub(super) fn print_long_status(
    g: &mut Git,
    st: &State,
    untracked: Untracked,
    for_commit: bool,
    footer: bool,
) {
    let mut s = branch_line(g);
    s.push_str(&super::remote::tracking_long(g).unwrap_or_default());
    let merging = g.repo.git_dir.join("MERGE_HEAD").exists();
    if merging && !st.index.conflicts.is_empty() {
        s.push_str("You have unmerged paths.\n  (fix conflicts and run \"git commit\")\n  (use \"git merge --abort\" to abort the merge)\n\n");
    } else if merging {
        s.push_str("All conflicts fixed but you are still merging.\n  (use \"git commit\" to conclude merge)\n\n");
    }
    for (file, verb, doing) in [
        ("CHERRY_PICK_HEAD", "cherry-pick", "cherry-picking"),
        ("REVERT_HEAD", "revert", "reverting"),
    ] {
        if let Some(id) = std::fs::read_to_string(g.repo.git_dir.join(file))
            .ok()
            .and_then(|t| store::parse_hex(t.trim()))
        {
            let short = g.repo.abbrev(&id);
            if st.index.conflicts.is_empty() {
                s.push_str(&format!("You are currently {doing} commit {short}.\n  (all conflicts fixed: run \"git {verb} --continue\")\n  (use \"git {verb} --skip\" to skip this patch)\n  (use \"git {verb} --abort\" to cancel the {verb} operation)\n\n"));
            } else {
                s.push_str(&format!("You are currently {doing} commit {short}.\n  (fix conflicts and run \"git {verb} --continue\")\n  (use \"git {verb} --skip\" to skip this patch)\n  (use \"git {verb} --abort\" to cancel the {verb} operation)\n\n"));
            }
        }
    }
    if st.head.is_none() {
        s.push_str(if for_commit {
            "\nInitial commit\n\n"
        } else {
            "\nNo commits yet\n\n"
        });
    }
    if !st.staged.is_empty() {
        s.push_str("Changes to be committed:\n");
        if merging {
            // Git gives no hint while a merge is being concluded.
        } else if st.head.is_some() {
            s.push_str("  (use \"git restore --staged <file>...\" to unstage)\n");
        } else {
            s.push_str("  (use \"git rm --cached <file>...\" to unstage)\n");
        }
        for d in &st.staged {
            let p = match &d.from {
                Some(f) => format!(
                    "{} -> {}",
                    quote_path(&g.relative(f), false),
                    quote_path(&g.relative(&d.path), false)
                ),
                None => quote_path(&g.relative(&d.path), false),
            };
            s.push_str(&format!("\t{}{p}\n", label(d)));
        }
        s.push('\n');
    }
    if !st.index.conflicts.is_empty() {
        s.push_str("Unmerged paths:\n  (use \"git add <file>...\" to mark resolution)\n");
        for (p, stages) in &st.index.conflicts {
            let (label, _) = unmerged_label(stages);
            s.push_str(&format!(
                "\t{label:<17}{}\n",
                quote_path(&g.relative(p), false)
            ));
        }
        s.push('\n');
    }
    if !st.unstaged.is_empty() {
        s.push_str("Changes not staged for commit:\n");
        if st.unstaged.iter().any(|d| d.new.is_none()) {
            s.push_str("  (use \"git add/rm <file>...\" to update what will be committed)\n");
        } else {
            s.push_str("  (use \"git add <file>...\" to update what will be committed)\n");
        }
        s.push_str("  (use \"git restore <file>...\" to discard changes in working directory)\n");
        for d in &st.unstaged {
            s.push_str(&format!(
                "\t{}{}\n",
                label(d),
                quote_path(&g.relative(&d.path), false)
            ));
        }
        s.push('\n');
    }
    let shown = match untracked {
        Untracked::No => Vec::new(),
        Untracked::Normal => ignore::collapse(&st.untracked, &tracked_dirs(&st.index)),
        Untracked::All => st.untracked.clone(),
    };
    if !shown.is_empty() {
        s.push_str("Untracked files:\n  (use \"git add <file>...\" to include in what will be committed)\n");
        for p in &shown {
            s.push_str(&format!("\t{}\n", quote_path(&g.relative(p), false)));
        }
        s.push('\n');
    }
    if untracked == Untracked::No && !st.staged.is_empty() {
        s.push_str("Untracked files not listed (use -u option to show untracked files)\n");
    }
    if st.staged.is_empty() && footer {
        if !st.unstaged.is_empty() || !st.index.conflicts.is_empty() {
            s.push_str("no changes added to commit (use \"git add\" and/or \"git commit -a\")\n");
        } else if !shown.is_empty() {
            s.push_str(
                "nothing added to commit but untracked files present (use \"git add\" to track)\n",
            );
        } else if st.head.is_none() {
            s.push_str("nothing to commit (create/copy files and use \"git add\" to track)\n");
        } else if untracked == Untracked::No {
            s.push_str("nothing to commit (use -u to show untracked files)\n");
        } else {
            s.push_str("nothing to commit, working tree clean\n");
        }
    }
    g.say(&s);
}

fn status(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let (mut short, mut porcelain, mut show_branch, mut untracked_mode) =
        (false, false, false, "normal".to_string());
    let mut paths = after.unwrap_or_default();
    for a in opts {
        match a.as_str() {
            "-s" | "--short" => short = true,
            "--porcelain" | "--porcelain=v1" | "--porcelain=1" => porcelain = true,
            "-b" | "--branch" => show_branch = true,
            "--long" | "--no-renames" | "--renames" | "-v" | "--ahead-behind"
            | "--no-ahead-behind" => {}
            "-u" | "-uall" | "--untracked-files" | "--untracked-files=all" => {
                untracked_mode = "all".into()
            }
            "-uno" | "--untracked-files=no" => untracked_mode = "no".into(),
            "-unormal" | "--untracked-files=normal" => untracked_mode = "normal".into(),
            "--ignored" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(a),
        }
    }
    let sp = specs(g, &paths)?;
    let mut st = state(g, untracked_mode != "no")?;
    st.staged
        .retain(|d| matches(&sp, &d.path) || d.from.as_deref().is_some_and(|f| matches(&sp, f)));
    st.unstaged.retain(|d| matches(&sp, &d.path));
    st.untracked.retain(|p| matches(&sp, p));
    if !short && !porcelain {
        let mode = match untracked_mode.as_str() {
            "no" => Untracked::No,
            "all" => Untracked::All,
            _ => Untracked::Normal,
        };
        print_long_status(g, &st, mode, false, true);
        return Ok(0);
    }
    let rel = |g: &Git, p: &str| {
        if porcelain {
            quote_path(p, true)
        } else {
            quote_path(&g.relative(p), true)
        }
    };
    if show_branch {
        let b = match (g.repo.branch(), st.head) {
            (Some(b), None) => format!("## No commits yet on {b}\n"),
            (Some(b), Some(h)) => match super::remote::tracking_short(g, &b, Some(h))? {
                Some((up, counts)) if counts.is_empty() => format!("## {b}...{up}\n"),
                Some((up, counts)) => format!("## {b}...{up} [{counts}]\n"),
                None => format!("## {b}\n"),
            },
            (None, _) => "## HEAD (no branch)\n".into(),
        };
        g.say(&b);
    }
    let mut rows: BTreeMap<String, (char, char, Option<String>)> = BTreeMap::new();
    for d in &st.staged {
        rows.insert(d.path.clone(), (d.letter(), ' ', d.from.clone()));
    }
    for d in &st.unstaged {
        let y = if d.new.is_none() { 'D' } else { d.letter() };
        rows.entry(d.path.clone()).or_insert((' ', ' ', None)).1 = y;
    }
    for (p, stages) in &st.index.conflicts {
        let (_, xy) = unmerged_label(stages);
        let mut c = xy.chars();
        rows.insert(p.clone(), (c.next().unwrap(), c.next().unwrap(), None));
    }
    for (p, (x, y, from)) in &rows {
        let shown = match from {
            Some(f) => format!("{} -> {}", rel(g, f), rel(g, p)),
            None => rel(g, p),
        };
        g.say(&format!("{x}{y} {shown}\n"));
    }
    let shown = if untracked_mode == "all" {
        st.untracked.clone()
    } else {
        ignore::collapse(&st.untracked, &tracked_dirs(&st.index))
    };
    for p in shown {
        g.say(&format!("?? {}\n", rel(g, &p)));
    }
    Ok(0)
}

// ---------------------------------------------------------------- diff

struct DiffOpts {
    out: Output,
    /// A format option was given (otherwise the command's default applies).
    chosen: bool,
    no_patch: bool,
    show: Show,
    quiet: bool,
    exit_code: bool,
}

impl DiffOpts {
    fn new() -> DiffOpts {
        DiffOpts {
            out: Output::default(),
            chosen: false,
            no_patch: false,
            show: Show::default(),
            quiet: false,
            exit_code: false,
        }
    }

    /// What to print, given the command's default (a patch for `diff` and `show`).
    fn output(&self, default_patch: bool) -> Output {
        if self.no_patch {
            return Output {
                patch: false,
                ..self.out
            };
        }
        if !self.chosen {
            return Output {
                patch: default_patch,
                ..Output::default()
            };
        }
        self.out
    }
}

/// Options shared by `diff`, `log` and `show`; returns whether `a` was one.
fn diff_option(a: &str, o: &mut DiffOpts) -> bool {
    let listing = match a {
        "--stat" => Some(Listing::Stat),
        a if a.starts_with("--stat=") => Some(Listing::Stat),
        "--numstat" => Some(Listing::Numstat),
        "--shortstat" => Some(Listing::Shortstat),
        "--name-only" => Some(Listing::NameOnly),
        "--name-status" => Some(Listing::NameStatus),
        _ => None,
    };
    if let Some(l) = listing {
        o.out.listing = Some(l);
        o.chosen = true;
        return true;
    }
    match a {
        "-p" | "-u" | "--patch" => {
            o.out.patch = true;
            o.chosen = true;
        }
        "--summary" => {
            o.out.summary = true;
            o.chosen = true;
        }
        "-s" | "--no-patch" => o.no_patch = true,
        "--quiet" => {
            o.quiet = true;
            o.exit_code = true;
        }
        "--exit-code" => o.exit_code = true,
        "--no-color" | "--color=never" | "--no-ext-diff" | "--no-textconv" | "-M"
        | "--find-renames" | "--no-renames" | "--full-index" | "--binary" | "--color=auto"
        | "--color" | "--color=always" => {}
        "--no-prefix" => {
            o.show.src_prefix.clear();
            o.show.dst_prefix.clear();
        }
        a if a.starts_with("-U") || a.starts_with("--unified=") => {
            o.show.context = a
                .trim_start_matches("-U")
                .trim_start_matches("--unified=")
                .parse()
                .unwrap_or(3);
            o.out.patch = true;
            o.chosen = true;
        }
        a if a.starts_with("--src-prefix=") => o.show.src_prefix = a[13..].to_string(),
        a if a.starts_with("--dst-prefix=") => o.show.dst_prefix = a[13..].to_string(),
        _ => return false,
    }
    true
}

fn diff_cmd(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let mut o = DiffOpts::new();
    let mut cached = false;
    let mut filter: Option<String> = None;
    let mut revs: Vec<String> = Vec::new();
    let mut paths = after.clone().unwrap_or_default();
    for a in opts {
        if diff_option(&a, &mut o) {
            continue;
        }
        match a.as_str() {
            "--cached" | "--staged" => cached = true,
            s if s.starts_with("--diff-filter=") => filter = Some(s[14..].to_string()),
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => {
                if after.is_none() && !paths.is_empty() {
                    paths.push(a);
                } else if a.contains("..") || g.resolve(&a).is_some() {
                    revs.push(a);
                } else if after.is_none() && g.work_path(&g.repo_path(&a)?).exists() {
                    paths.push(a);
                } else if after.is_none() {
                    return Err(super::bad_revision(&a));
                } else {
                    return Err(fatal(format!("bad revision '{a}'")));
                }
            }
        }
    }
    let sp = specs(g, &paths)?;
    let tree_of = |g: &Git, rev: &str| -> R<Files> {
        let (_, c) = g.commit_of(rev)?;
        g.repo.flatten(&c.tree)
    };
    if revs.len() == 1 && revs[0].contains("..") {
        let r = revs.remove(0);
        let (a, b) = r.split_once("..").unwrap();
        let b = b.trim_start_matches('.');
        revs = vec![
            if a.is_empty() {
                "HEAD".into()
            } else {
                a.to_string()
            },
            if b.is_empty() {
                "HEAD".into()
            } else {
                b.to_string()
            },
        ];
    }
    let (mut ds, src) = match (cached, revs.len()) {
        (true, n) if n <= 1 => {
            let base = match revs.first() {
                Some(r) => tree_of(g, r)?,
                None => g.head_files()?,
            };
            let index = g.repo.read_index()?;
            (diff::compare(&base, &index.files(), true), Source::Objects)
        }
        (false, 0) => {
            let st = state(g, false)?;
            (st.unstaged, Source::Worktree)
        }
        (false, 1) => {
            // A commit against the working tree: the index's view of the files, with the
            // working tree's changes over it.
            let base = tree_of(g, &revs[0])?;
            let st = state(g, false)?;
            let mut files = st.index.files();
            let mut from_work = BTreeSet::new();
            for d in &st.unstaged {
                match d.new {
                    Some(n) => {
                        files.insert(d.path.clone(), n);
                        from_work.insert(d.path.clone());
                    }
                    None => {
                        files.remove(&d.path);
                    }
                }
            }
            let ds = diff::compare(&base, &files, false);
            // Content of changed files comes from the working tree; unchanged-in-work
            // files have their blob in the object store.
            let mut out = Vec::new();
            for d in ds {
                if from_work.contains(&d.path) {
                    out.push((d, Source::Worktree));
                } else {
                    out.push((d, Source::Objects));
                }
            }
            out.retain(|(d, _)| matches(&sp, &d.path));
            return finish_mixed_diff(g, out, &o);
        }
        (false, 2) => {
            let (a, b) = (tree_of(g, &revs[0])?, tree_of(g, &revs[1])?);
            (diff::compare(&a, &b, true), Source::Objects)
        }
        _ => {
            return Err(usage(
                "usage: git diff [<options>] [<commit>] [--] [<path>...]".into(),
            ));
        }
    };
    ds.retain(|d| matches(&sp, &d.path) || d.from.as_deref().is_some_and(|f| matches(&sp, f)));
    if let Some(f) = &filter {
        // Upper-case letters keep those kinds, lower-case ones drop them; `U` is the paths
        // a merge left unresolved.
        let (keep, drop): (String, String) = f.chars().partition(|c| c.is_ascii_uppercase());
        ds.retain(|d| {
            let l = d.letter();
            (keep.is_empty() || keep.contains(l)) && !drop.to_ascii_uppercase().contains(l)
        });
        if keep.contains('U') {
            let index = g.repo.read_index()?;
            for p in index.conflicts.keys().filter(|p| matches(&sp, p)) {
                ds.push(Delta {
                    path: p.clone(),
                    from: None,
                    old: None,
                    new: None,
                });
            }
            ds.sort_by(|a, b| a.path.cmp(&b.path));
        }
    }
    if !o.quiet {
        let mut out = Vec::new();
        diff::write(g, &ds, src, &o.output(true), &o.show, &mut out);
        g.out.extend_from_slice(&out);
    }
    Ok(if o.exit_code && !ds.is_empty() { 1 } else { 0 })
}

fn finish_mixed_diff(g: &mut Git, ds: Vec<(Delta, Source)>, o: &DiffOpts) -> R<i32> {
    if !o.quiet {
        let mut out = Vec::new();
        let work: BTreeSet<String> = ds
            .iter()
            .filter(|(_, s)| *s == Source::Worktree)
            .map(|(d, _)| d.path.clone())
            .collect();
        let all: Vec<Delta> = ds.into_iter().map(|(d, _)| d).collect();
        let src = |d: &Delta| {
            if work.contains(&d.path) {
                Source::Worktree
            } else {
                Source::Objects
            }
        };
        diff::write_with(g, &all, &src, &o.output(true), &o.show, &mut out);
        g.out.extend_from_slice(&out);
        return Ok(if o.exit_code && !all.is_empty() { 1 } else { 0 });
    }
    Ok(if o.exit_code && !ds.is_empty() { 1 } else { 0 })
}

// ---------------------------------------------------------------- log, show

struct LogOpts {
    diff: DiffOpts,
    /// `show` prints a patch unless told otherwise; `log` does not.
    default_patch: bool,
    pretty: String,
    abbrev_commit: bool,
    date: String,
    decorate: bool,
    graph: bool,
}

/// Names to show beside commits (`--decorate`), in git's order: `HEAD` (joined with its
/// branch, `HEAD -> main`), then tags, remote-tracking refs and other branches, each group
/// in reverse name order.
fn decorations(g: &Git) -> BTreeMap<Id, Vec<String>> {
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

fn indent_message(msg: &str) -> String {
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
fn pretty(g: &Git, id: &Id, c: &Commit, o: &LogOpts, decor: &BTreeMap<Id, Vec<String>>) -> String {
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

fn expand(g: &Git, id: &Id, c: &Commit, fmt: &str, date: &str, dec: &str) -> String {
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

fn parse_log_opts(
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

fn log(g: &mut Git, args: Vec<String>) -> R<i32> {
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
    let (mut since, mut until) = (None::<i64>, None::<i64>);
    let (revs, paths) = parse_log_opts(g, &args, &mut o, &mut |x, a| {
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
        for (long, is_since) in [
            ("--since", true),
            ("--after", true),
            ("--until", false),
            ("--before", false),
        ] {
            if let Some(v) = a.value(x, "", long)? {
                let (t, _) =
                    super::parse_date(&v).ok_or_else(|| fatal(format!("invalid date: {v}")))?;
                if is_since {
                    since = Some(t);
                } else {
                    until = Some(t);
                }
                return Ok(true);
            }
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
    let mut include = Vec::new();
    let mut exclude = Vec::new();
    let mut named = false;
    for r in &revs {
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
        named = true;
    }
    if all {
        for id in g.repo.refs("refs/heads/").values() {
            include.push(*id);
        }
        include.extend(g.repo.head());
        named = true;
    }
    if !named {
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
    let mut commits = walk(g, &include, &exclude, first_parent)?;
    if !sp.is_empty() {
        let mut kept = Vec::new();
        for (id, c) in commits {
            if commit_changes(g, &c)?.iter().any(|d| {
                matches(&sp, &d.path) || d.from.as_deref().is_some_and(|f| matches(&sp, f))
            }) {
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
    if since.is_some() || until.is_some() {
        commits.retain(|(_, c)| {
            let t = parse_ident(&c.committer).time;
            since.is_none_or(|s| t >= s) && until.is_none_or(|u| t <= u)
        });
    }
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

fn print_commits(g: &mut Git, commits: &[(Id, Commit)], o: &LogOpts, sp: &[String]) -> R<i32> {
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
                ds.retain(|d| {
                    matches(sp, &d.path) || d.from.as_deref().is_some_and(|f| matches(sp, f))
                });
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

fn show(g: &mut Git, args: Vec<String>) -> R<i32> {
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

// ---------------------------------------------------------------- rev-parse

fn rev_parse(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut short: Option<usize> = None;
    let mut verify = false;
    let mut quiet = false;
    let mut abbrev_ref = false;
    let mut out = String::new();
    let mut failed: Option<String> = None;
    for a in &args {
        match a.as_str() {
            "--show-toplevel" => out.push_str(&format!("{}\n", g.repo.work.display())),
            "--git-dir" => {
                let gd = &g.repo.git_dir;
                if g.prefix.is_empty() && gd == &g.repo.work.join(".git") {
                    out.push_str(".git\n");
                } else {
                    out.push_str(&format!("{}\n", gd.display()));
                }
            }
            "--absolute-git-dir" | "--git-common-dir" => {
                out.push_str(&format!("{}\n", g.repo.git_dir.display()))
            }
            "--is-inside-work-tree" => {
                let cwd = std::env::current_dir().unwrap_or_default();
                let in_git_dir = cwd.starts_with(&g.repo.git_dir);
                out.push_str(if in_git_dir { "false\n" } else { "true\n" });
            }
            "--is-inside-git-dir" => {
                let cwd = std::env::current_dir().unwrap_or_default();
                let inside = cwd.starts_with(&g.repo.git_dir);
                out.push_str(if inside { "true\n" } else { "false\n" });
            }
            "--is-bare-repository" | "--is-shallow-repository" => out.push_str("false\n"),
            "--show-prefix" => out.push_str(&format!("{}\n", g.prefix)),
            "--show-cdup" => {
                let ups = g.prefix.matches('/').count();
                out.push_str(&format!("{}\n", "../".repeat(ups)));
            }
            "--short" => short = Some(0),
            "--verify" => verify = true,
            "-q" | "--quiet" => quiet = true,
            "--abbrev-ref" | "--abbrev-ref=strict" | "--abbrev-ref=loose" => abbrev_ref = true,
            "--symbolic-full-name" => abbrev_ref = false,
            "--" => {}
            s if s.starts_with("--short=") => short = s[8..].parse().ok(),
            s if s.starts_with('-') && s.len() > 1 => out.push_str(&format!("{s}\n")),
            rev => {
                if abbrev_ref {
                    let name = if rev == "HEAD" || rev == "@" {
                        g.repo.branch().unwrap_or_else(|| "HEAD".into())
                    } else if g.resolve(rev).is_some() {
                        rev.to_string()
                    } else {
                        failed = Some(rev.into());
                        break;
                    };
                    if rev == "HEAD" && g.repo.head().is_none() {
                        failed = Some(rev.into());
                        break;
                    }
                    out.push_str(&format!("{name}\n"));
                    continue;
                }
                let (name, peel) = match rev
                    .strip_suffix("^{commit}")
                    .or_else(|| rev.strip_suffix("^{}"))
                {
                    Some(n) => (n, true),
                    None => (rev, false),
                };
                let id = g
                    .resolve(name)
                    .and_then(|id| if peel { g.peel(&id) } else { Some(id) });
                match id {
                    Some(id) => match short {
                        Some(n) => out.push_str(&format!("{}\n", g.repo.abbrev_len(&id, n))),
                        None => out.push_str(&format!("{}\n", hex(&id))),
                    },
                    None => {
                        failed = Some(rev.into());
                        break;
                    }
                }
            }
        }
    }
    if let Some(rev) = failed {
        if verify || short.is_some() {
            g.say(&out);
            if quiet {
                return Ok(1);
            }
            return Err(fatal("Needed a single revision".into()));
        }
        out.push_str(&format!("{rev}\n"));
        g.say(&out);
        return Err(super::bad_revision(&rev));
    }
    g.say(&out);
    Ok(0)
}

// ---------------------------------------------------------------- branch, tag

fn valid_ref_name(n: &str) -> bool {
    !n.is_empty()
        && !n.starts_with('-')
        && !n.starts_with('/')
        && !n.ends_with('/')
        && !n.ends_with(".lock")
        && !n.ends_with('.')
        && !n.contains("..")
        && !n.contains("@{")
        && !n.contains("//")
        && n != "@"
        && !n
            .chars()
            .any(|c| c.is_ascii_control() || " ~^:?*[\\".contains(c))
}

fn branch(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut a = Args::new(args);
    // (local branches, remote-tracking ones)
    let mut listing = (true, false);
    // --merged / --no-merged, and the commit they are about (HEAD by default).
    let mut merged: Option<(bool, Option<String>)> = None;
    let (mut delete, mut force, mut rename, mut verbose, mut show_current, mut copy) =
        (false, false, false, 0, false, false);
    let mut names = Vec::new();
    while let Some(x) = a.next() {
        match x.as_str() {
            "-d" | "--delete" => delete = true,
            "-D" => {
                delete = true;
                force = true;
            }
            "-f" | "--force" => force = true,
            "-m" | "--move" => rename = true,
            "-M" => {
                rename = true;
                force = true;
            }
            "-c" | "--copy" => copy = true,
            "-v" | "--verbose" => verbose += 1,
            "-vv" => verbose += 2,
            "--show-current" => show_current = true,
            "--merged" | "--no-merged" => merged = Some((x == "--merged", None)),
            s if s.starts_with("--merged=") || s.starts_with("--no-merged=") => {
                let (flag, rev) = s.split_once('=').unwrap();
                merged = Some((flag == "--merged", Some(rev.to_string())));
            }
            "-a" | "--all" => listing = (true, true),
            "-r" | "--remotes" => listing = (false, true),
            "-l" | "--list" | "--no-color" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => names.push(x),
        }
    }
    let cur = g.repo.branch();
    if show_current {
        if let Some(b) = cur {
            g.say(&format!("{b}\n"));
        }
        return Ok(0);
    }
    if delete {
        if names.is_empty() {
            return Err(fatal("branch name required".into()));
        }
        let mut code = 0;
        for n in names {
            let r = format!("refs/heads/{n}");
            let Some(id) = g.repo.ref_id(&r) else {
                eprintln!("error: branch '{n}' not found");
                code = 1;
                continue;
            };
            if cur.as_deref() == Some(n.as_str()) {
                eprintln!(
                    "error: cannot delete branch '{n}' used by worktree at '{}'",
                    g.repo.work.display()
                );
                code = 1;
                continue;
            }
            if !force {
                let head = g.repo.head();
                let merged = match head {
                    Some(h) => walk(g, &[h], &[], false)?.iter().any(|(c, _)| *c == id),
                    None => false,
                };
                if !merged {
                    eprintln!(
                        "error: the branch '{n}' is not fully merged\nhint: If you are sure you want to delete it, run 'git branch -D {n}'\nhint: Disable this message with \"git config advice.forceDeleteBranch false\""
                    );
                    code = 1;
                    continue;
                }
            }
            g.repo.delete_ref(&r)?;
            g.say(&format!(
                "Deleted branch {n} (was {}).\n",
                g.repo.abbrev(&id)
            ));
        }
        return Ok(code);
    }
    if rename || copy {
        let (old, new) = match names.len() {
            1 => (
                cur.clone().ok_or_else(|| {
                    fatal("cannot rename the current branch while not on any".into())
                })?,
                names[0].clone(),
            ),
            2 => (names[0].clone(), names[1].clone()),
            _ => return Err(fatal("too many arguments for a rename operation".into())),
        };
        if !valid_ref_name(&new) {
            return Err(fatal(format!("'{new}' is not a valid branch name")));
        }
        let new_ref = format!("refs/heads/{new}");
        if g.repo.ref_id(&new_ref).is_some() && !force && old != new {
            return Err(fatal(format!("a branch named '{new}' already exists")));
        }
        let old_ref = format!("refs/heads/{old}");
        match g.repo.ref_id(&old_ref) {
            Some(id) => {
                g.repo.set_ref(&new_ref, &id)?;
                if !copy && old != new {
                    g.repo.delete_ref(&old_ref)?;
                }
            }
            None if cur.as_deref() == Some(old.as_str()) && g.repo.head().is_none() => {}
            None => {
                return Err(error(format!(
                    "refname refs/heads/{old} not found\nfatal: branch rename failed"
                )));
            }
        }
        if !copy && cur.as_deref() == Some(old.as_str()) {
            let p = g.repo.git_dir.join("HEAD");
            std::fs::write(&p, format!("ref: {new_ref}\n")).map_err(|e| io_fail(&p, e))?;
        }
        return Ok(0);
    }
    if let Some(n) = names.first() {
        if !valid_ref_name(n) {
            return Err(fatal(format!("'{n}' is not a valid branch name")));
        }
        let r = format!("refs/heads/{n}");
        if g.repo.ref_id(&r).is_some() && !force {
            return Err(fatal(format!("a branch named '{n}' already exists")));
        }
        let start = names.get(1).map_or("HEAD", String::as_str);
        let id = match g.resolve(start).and_then(|i| g.peel(&i)) {
            Some(id) => id,
            None if start == "HEAD" => {
                return Err(fatal(format!(
                    "not a valid object name: '{}'",
                    cur.unwrap_or_else(|| "HEAD".into())
                )));
            }
            None => return Err(fatal(format!("not a valid object name: '{start}'"))),
        };
        g.repo.set_ref(&r, &id)?;
        return Ok(0);
    }
    // List: (shown name, current, tip, upstream bracket for -vv, symbolic target).
    let mut rows: Vec<(String, bool, Option<Id>, Option<String>)> = Vec::new();
    if listing.0 {
        if cur.is_none()
            && let Some(h) = g.repo.head()
        {
            rows.push((
                format!("(HEAD detached at {})", g.repo.abbrev(&h)),
                true,
                Some(h),
                None,
            ));
        }
        let reachable: Option<(bool, BTreeSet<Id>)> = match &merged {
            Some((want, rev)) => {
                let tip = match rev {
                    Some(r) => g.commit_of(r)?.0,
                    None => g
                        .repo
                        .head()
                        .ok_or_else(|| fatal("malformed object name HEAD".into()))?,
                };
                Some((
                    *want,
                    walk(g, &[tip], &[], false)?
                        .into_iter()
                        .map(|(id, _)| id)
                        .collect(),
                ))
            }
            None => None,
        };
        for (name, id) in g.repo.refs("refs/heads/") {
            if let Some((want, set)) = &reachable
                && set.contains(&id) != *want
            {
                continue;
            }
            let short = name.trim_start_matches("refs/heads/").to_string();
            let is_cur = cur.as_deref() == Some(short.as_str());
            let bracket = match super::remote::tracking_short(g, &short, Some(id))? {
                Some((up, c)) if verbose > 1 && c.is_empty() => Some(format!("[{up}] ")),
                Some((up, c)) if verbose > 1 => Some(format!("[{up}: {c}] ")),
                Some((_, c)) if verbose == 1 && !c.is_empty() => Some(format!("[{c}] ")),
                _ => None,
            };
            rows.push((short, is_cur, Some(id), bracket));
        }
    }
    let mut symbolic: Vec<(String, String)> = Vec::new();
    if listing.1 {
        let prefix = if listing.0 { "remotes/" } else { "" };
        for (name, id, target) in super::remote::remote_refs(g) {
            match target {
                Some(t) => symbolic.push((format!("{prefix}{name}"), t)),
                None => rows.push((format!("{prefix}{name}"), false, Some(id), None)),
            }
        }
    }
    let width = rows
        .iter()
        .map(|r| r.0.chars().count())
        .chain(symbolic.iter().map(|r| r.0.chars().count()))
        .max()
        .unwrap_or(0);
    let mut lines: Vec<(String, String)> = Vec::new();
    for (name, is_cur, id, bracket) in rows {
        let mark = if is_cur { "* " } else { "  " };
        let line = match id {
            Some(id) if verbose > 0 => {
                let c = g.repo.commit(&id)?;
                format!(
                    "{mark}{name:<width$} {} {}{}\n",
                    g.repo.abbrev(&id),
                    bracket.unwrap_or_default(),
                    c.subject()
                )
            }
            _ => format!("{mark}{name}\n"),
        };
        lines.push((name, line));
    }
    for (name, target) in symbolic {
        lines.push((name.clone(), format!("  {name} -> {target}\n")));
    }
    // Local branches first (the detached line before them), then remote-tracking ones by
    // name.
    let local_count = lines
        .iter()
        .filter(|(n, _)| !n.starts_with("remotes/"))
        .count();
    if listing.0 && listing.1 {
        lines[local_count..].sort_by(|a, b| a.0.cmp(&b.0));
    } else if !listing.0 {
        lines.sort_by(|a, b| a.0.cmp(&b.0));
    }
    for (_, l) in lines {
        g.say(&l);
    }
    Ok(0)
}

fn tag(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut a = Args::new(args);
    let (mut delete, mut annotate, mut force, mut list) = (false, false, false, false);
    let mut msgs = Vec::new();
    let mut names = Vec::new();
    while let Some(x) = a.next() {
        if let Some(v) = a.value(&x, "-m", "--message")? {
            msgs.push(v);
            annotate = true;
            continue;
        }
        match x.as_str() {
            "-d" | "--delete" => delete = true,
            "-a" | "--annotate" => annotate = true,
            "-f" | "--force" => force = true,
            "-l" | "--list" => list = true,
            "-n" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => names.push(x),
        }
    }
    if delete {
        for n in &names {
            let r = format!("refs/tags/{n}");
            match g.repo.ref_id(&r) {
                Some(id) => {
                    g.repo.delete_ref(&r)?;
                    g.say(&format!("Deleted tag '{n}' (was {})\n", g.repo.abbrev(&id)));
                }
                None => return Err(error(format!("tag '{n}' not found."))),
            }
        }
        return Ok(0);
    }
    if names.is_empty() || list {
        for name in g.repo.refs("refs/tags/").keys() {
            let short = name.trim_start_matches("refs/tags/");
            if names.is_empty() || names.iter().any(|p| glob(p, short)) {
                g.say(&format!("{short}\n"));
            }
        }
        return Ok(0);
    }
    let n = &names[0];
    if !valid_ref_name(n) {
        return Err(fatal(format!("'{n}' is not a valid tag name.")));
    }
    let r = format!("refs/tags/{n}");
    if g.repo.ref_id(&r).is_some() && !force {
        return Err(fatal(format!("tag '{n}' already exists")));
    }
    let target = names.get(1).map_or("HEAD", String::as_str);
    let id = g
        .resolve(target)
        .ok_or_else(|| fatal(format!("Failed to resolve '{target}' as a valid ref.")))?;
    let id = if annotate {
        if msgs.is_empty() {
            return Err(Fail {
                msg: "error: Terminal is dumb, but EDITOR unset\nPlease supply the message using either -m or -F option.".into(),
                code: 1,
            });
        }
        let tagger = ident(&g.repo, "COMMITTER")?;
        let kind = g.repo.read(&id)?.0;
        let body = format!(
            "object {}\ntype {}\ntag {n}\ntagger {tagger}\n\n{}",
            hex(&id),
            kind.name(),
            cleanup(&msgs.join("\n\n"), false)
        );
        g.repo.write(Kind::Tag, body.as_bytes())?
    } else {
        id
    };
    g.repo.set_ref(&r, &id)?;
    Ok(0)
}

fn check_ignore(g: &mut Git, args: Vec<String>) -> R<i32> {
    let quiet = args.iter().any(|a| a == "-q" || a == "--quiet");
    let paths: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if paths.is_empty() {
        return Err(fatal("no path specified".into()));
    }
    let index = g.repo.read_index()?;
    let mut any = false;
    for arg in paths {
        let p = g.repo_path(arg)?;
        // Rules of every directory on the way down apply.
        let mut ig = Ignore::new(&g.repo);
        let mut at = 0;
        while let Some(i) = p[at..].find('/') {
            let dir = &p[..at + i + 1];
            ig.add_file(&g.work_path(dir).join(".gitignore"), dir);
            at += i + 1;
        }
        let is_dir = g.work_path(&p).is_dir();
        if !index.entries.contains_key(&p) && (ig.ignored(&p, is_dir) || ancestors_ignored(&ig, &p))
        {
            any = true;
            if !quiet {
                g.say(&format!("{arg}\n"));
            }
        }
    }
    Ok(if any { 0 } else { 1 })
}

fn show_ref(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut any = false;
    let mut all: Vec<(String, Id)> = Vec::new();
    for prefix in ["refs/heads/", "refs/tags/", "refs/remotes/"] {
        all.extend(g.repo.refs(prefix));
    }
    let (heads, tags) = (
        args.iter().any(|a| a == "--heads" || a == "--branches"),
        args.iter().any(|a| a == "--tags"),
    );
    let pats: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    for (name, id) in all {
        if (heads || tags)
            && !((heads && name.starts_with("refs/heads/"))
                || (tags && name.starts_with("refs/tags/")))
        {
            continue;
        }
        if !pats.is_empty()
            && !pats
                .iter()
                .any(|p| name == **p || name.ends_with(&format!("/{p}")))
        {
            continue;
        }
        any = true;
        g.say(&format!("{} {name}\n", hex(&id)));
    }
    Ok(if any { 0 } else { 1 })
}

fn symbolic_ref(g: &mut Git, args: Vec<String>) -> R<i32> {
    let short = args.iter().any(|a| a == "--short");
    let rest: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    match rest.as_slice() {
        [name] if name.as_str() == "HEAD" => match g.repo.head_ref() {
            Some(r) => {
                let shown = if short {
                    r.trim_start_matches("refs/heads/").to_string()
                } else {
                    r
                };
                g.say(&format!("{shown}\n"));
                Ok(0)
            }
            None => Err(fatal("ref HEAD is not a symbolic ref".into())),
        },
        [name, target] if name.as_str() == "HEAD" && target.starts_with("refs/") => {
            let p = g.repo.git_dir.join("HEAD");
            std::fs::write(&p, format!("ref: {target}\n")).map_err(|e| io_fail(&p, e))?;
            Ok(0)
        }
        _ => Err(usage(
            "usage: git symbolic-ref [-q] [--short] HEAD [<ref>]".into(),
        )),
    }
}

// ---------------------------------------------------------------- checkout, switch, restore, reset

/// Moves the index and working tree from HEAD's files to `target`'s, keeping local changes
/// to files the two commits agree on, and refusing (before touching anything) when a local
/// change or an untracked file would be lost.
fn move_tree(g: &mut Git, target: &Files, force: bool) -> R<Vec<Delta>> {
    let st = state(g, true)?;
    if !st.index.conflicts.is_empty() {
        return Err(Fail {
            msg: format!(
                "error: you need to resolve your current index first\n{}",
                st.index
                    .conflicts
                    .keys()
                    .map(|p| format!("{p}: needs merge"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
            code: 1,
        });
    }
    let cur = &st.head_files;
    let mut index = st.index;
    let mut dirty = Vec::new();
    let mut untracked_hit = Vec::new();
    let paths: BTreeSet<&String> = cur.keys().chain(target.keys()).collect();
    for p in &paths {
        let (c, t) = (cur.get(*p), target.get(*p));
        if c == t {
            continue;
        }
        let staged = index.entries.get(*p).map(|e| (e.mode, e.id)).as_ref() != c;
        let unstaged = st.unstaged.iter().any(|d| &d.path == *p);
        let index_is_target = index.entries.get(*p).map(|e| (e.mode, e.id)).as_ref() == t;
        if (staged || unstaged) && !index_is_target && !force {
            dirty.push((*p).clone());
        }
        if c.is_none() && !index.entries.contains_key(*p) && st.untracked.contains(p) && !force {
            let same = read_work_file(&g.work_path(p), g.filemode())
                .ok()
                .is_some_and(|(_, d)| t.is_some_and(|t| hash_object("blob", &d) == t.1));
            if !same {
                untracked_hit.push((*p).clone());
            }
        }
    }
    if !dirty.is_empty() {
        return Err(Fail {
            msg: format!(
                "error: Your local changes to the following files would be overwritten by checkout:\n{}\nPlease commit your changes or stash them before you switch branches.\nAborting",
                dirty
                    .iter()
                    .map(|p| format!("\t{p}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
            code: 1,
        });
    }
    if !untracked_hit.is_empty() {
        return Err(Fail {
            msg: format!(
                "error: The following untracked working tree files would be overwritten by checkout:\n{}\nPlease move or remove them before you switch branches.\nAborting",
                untracked_hit
                    .iter()
                    .map(|p| format!("\t{p}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
            code: 1,
        });
    }
    for p in &paths {
        let (c, t) = (cur.get(*p), target.get(*p));
        if c == t && !force {
            continue;
        }
        match t {
            Some(t) => write_file(g, &mut index, p, t)?,
            None => {
                if index.entries.remove(*p).is_some() || force {
                    let _ = std::fs::remove_file(g.work_path(p));
                    remove_empty_parents(g, p);
                }
            }
        }
    }
    if force {
        // Staged files that neither commit has go too.
        let extra: Vec<String> = index
            .entries
            .keys()
            .filter(|p| !target.contains_key(*p))
            .cloned()
            .collect();
        for p in extra {
            index.entries.remove(&p);
            let _ = std::fs::remove_file(g.work_path(&p));
            remove_empty_parents(g, &p);
        }
    }
    g.repo.write_index(&index)?;
    // What stays modified, for the `M\tpath` lines.
    let after = state(g, false)?;
    let mut left = diff::compare(target, &after.index.files(), false);
    for d in after.unstaged {
        if !left.iter().any(|x| x.path == d.path) {
            left.push(d);
        }
    }
    left.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(left)
}

/// Writes a blob to the working tree and records it in the index.
pub(super) fn write_file(g: &Git, index: &mut Index, path: &str, (mode, id): &(u32, Id)) -> R<()> {
    let full = g.work_path(path);
    let data = g.repo.read(id)?.1;
    write_file_data(&full, *mode, &data)?;
    let stat = std::fs::symlink_metadata(&full)
        .map(|m| Stat::of(&m))
        .unwrap_or_default();
    index.entries.insert(
        path.to_string(),
        IndexEntry {
            mode: *mode,
            id: *id,
            stat,
        },
    );
    Ok(())
}

/// Puts `data` at `full` as a file of git's `mode` (a symlink for 120000, executable for
/// 100755), replacing a directory or file in the way and making its parents.
pub(super) fn write_file_data(full: &Path, mode: u32, data: &[u8]) -> R<()> {
    if let Some(d) = full.parent()
        && !d.as_os_str().is_empty()
    {
        if d.is_file() {
            let _ = std::fs::remove_file(d);
        }
        std::fs::create_dir_all(d).map_err(|e| io_fail(d, e))?;
    }
    if full.is_dir() && !full.is_symlink() {
        let _ = std::fs::remove_dir_all(full);
    }
    let _ = std::fs::remove_file(full);
    if mode == 0o120000 {
        let target = String::from_utf8_lossy(data).into_owned();
        crate::archive::symlink(&target, full).map_err(|e| {
            fatal(format!(
                "unable to create symlink '{}': {}",
                full.display(),
                guest_support::cli::reason(&e)
            ))
        })?;
    } else {
        std::fs::write(full, data).map_err(|e| io_fail(full, e))?;
        if mode == 0o100755 {
            let _ = guest_support::set_file_mode(&full.to_string_lossy(), 0o755);
        }
    }
    Ok(())
}

fn say_left(g: &mut Git, left: &[Delta]) {
    for d in left {
        let l = if d.new.is_none() { 'D' } else { d.letter() };
        g.say(&format!("{l}\t{}\n", d.path));
    }
}

enum Target {
    Branch(String),
    NewBranch(String, bool),
    Detach,
}

fn switch_to(g: &mut Git, rev: Option<&str>, target: Target, force: bool, quiet: bool) -> R<i32> {
    let cur_branch = g.repo.branch();
    let id = match rev {
        Some(r) => Some(
            g.commit_of(r)
                .map_err(|_| match &target {
                    Target::NewBranch(..) => fatal(format!(
                        "'{r}' is not a commit and a branch cannot be created from it"
                    )),
                    _ => fatal(format!("invalid reference: {r}")),
                })?
                .0,
        ),
        None => g.repo.head(),
    };
    if let Target::NewBranch(n, reset) = &target {
        if !valid_ref_name(n) {
            return Err(fatal(format!("'{n}' is not a valid branch name")));
        }
        if g.repo.ref_id(&format!("refs/heads/{n}")).is_some() && !reset {
            return Err(fatal(format!("a branch named '{n}' already exists")));
        }
    }
    let target_files = match id {
        Some(id) => g.repo.flatten(&g.repo.commit(&id)?.tree)?,
        None => Files::new(),
    };
    let left = if id == g.repo.head() && !force {
        let st = state(g, false)?;
        let mut l = st.staged.clone();
        for d in st.unstaged {
            if !l.iter().any(|x| x.path == d.path) {
                l.push(d);
            }
        }
        l.sort_by(|a, b| a.path.cmp(&b.path));
        l
    } else {
        move_tree(g, &target_files, force)?
    };
    let head_path = g.repo.git_dir.join("HEAD");
    let from = cur_branch
        .clone()
        .or_else(|| g.repo.head().map(|h| hex(&h)))
        .unwrap_or_else(|| "HEAD".into());
    let to = match &target {
        Target::Branch(b) | Target::NewBranch(b, _) => b.clone(),
        Target::Detach => rev.unwrap_or("HEAD").to_string(),
    };
    if let (Some(new), Ok(who)) = (id, ident(&g.repo, "COMMITTER")) {
        g.repo.reflog(
            g.repo.head(),
            &new,
            &who,
            &format!("checkout: moving from {from} to {to}"),
            false,
        );
    }
    match &target {
        Target::Branch(b) => {
            std::fs::write(&head_path, format!("ref: refs/heads/{b}\n"))
                .map_err(|e| io_fail(&head_path, e))?;
            if !quiet {
                say_left(g, &left);
            }
            if !quiet {
                g.flush();
                if cur_branch.as_deref() == Some(b.as_str()) {
                    eprintln!("Already on '{b}'");
                } else {
                    eprintln!("Switched to branch '{b}'");
                }
            }
        }
        Target::NewBranch(n, reset) => {
            if let Some(id) = id {
                g.repo.set_ref(&format!("refs/heads/{n}"), &id)?;
            }
            std::fs::write(&head_path, format!("ref: refs/heads/{n}\n"))
                .map_err(|e| io_fail(&head_path, e))?;
            if !quiet {
                say_left(g, &left);
                g.flush();
                if *reset && cur_branch.as_deref() == Some(n.as_str()) {
                    eprintln!("Reset branch '{n}'");
                } else if *reset {
                    eprintln!("Switched to and reset branch '{n}'");
                } else {
                    eprintln!("Switched to a new branch '{n}'");
                }
            }
        }
        Target::Detach => {
            let id = id.ok_or_else(|| fatal("You are on a branch yet to be born".into()))?;
            let was_detached = cur_branch.is_none();
            std::fs::write(&head_path, format!("{}\n", hex(&id)))
                .map_err(|e| io_fail(&head_path, e))?;
            if !quiet {
                say_left(g, &left);
                g.flush();
                let c = g.repo.commit(&id)?;
                if !was_detached {
                    eprintln!(
                        "Note: switching to '{}'.\n\nYou are in 'detached HEAD' state. You can look around, make experimental\nchanges and commit them, and you can discard any commits you make in this\nstate without impacting any branches by switching back to a branch.\n\nIf you want to create a new branch to retain commits you create, you may\ndo so (now or later) by using -c with the switch command. Example:\n\n  git switch -c <new-branch-name>\n\nOr undo this operation with:\n\n  git switch -\n\nTurn off this advice by setting config variable advice.detachedHead to false\n",
                        rev.unwrap_or("HEAD")
                    );
                }
                eprintln!("HEAD is now at {} {}", g.repo.abbrev(&id), c.subject());
            }
        }
    }
    Ok(0)
}

fn checkout(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let mut a = Args::new(opts);
    let (mut new_branch, mut force, mut quiet, mut detach) =
        (None::<(String, bool)>, false, false, false);
    let mut rest = Vec::new();
    while let Some(x) = a.next() {
        match x.as_str() {
            "-b" | "-B" => {
                let n = a.next().ok_or_else(|| {
                    usage(format!("error: switch `{}' requires a value", &x[1..]))
                })?;
                new_branch = Some((n, x == "-B"));
            }
            "-f" | "--force" => force = true,
            "-q" | "--quiet" => quiet = true,
            "--detach" => detach = true,
            "--no-track" | "--track" | "-t" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => rest.push(x),
        }
    }
    previous_for_dash(g, &mut rest)?;
    // Paths: `checkout [rev] -- paths`, or names that are not revisions.
    if after.is_some()
        || (rest.len() > 1 && new_branch.is_none())
        || (rest.len() == 1 && new_branch.is_none() && g.resolve(&rest[0]).is_none())
    {
        let dashdash = after.is_some();
        let (source, paths) = match after {
            Some(p) => (rest.first().cloned(), p),
            None => {
                if g.resolve(&rest[0]).is_some() {
                    (Some(rest[0].clone()), rest[1..].to_vec())
                } else {
                    (None, rest.clone())
                }
            }
        };
        if paths.is_empty() {
            if let Some(s) = source {
                return switch_like(g, &s, new_branch, force, quiet, detach);
            }
            return Ok(0);
        }
        let only = match rest.first() {
            Some(r) if rest.len() == 1 && source.is_none() => Some(g.repo_path(r)?),
            _ => None,
        };
        if let Some(spec) = only
            && !g.work_path(&spec).exists()
            && g.repo
                .read_index()?
                .entries
                .keys()
                .all(|p| !matches(std::slice::from_ref(&spec), p))
        {
            return Err(error(format!(
                "pathspec '{}' did not match any file(s) known to git",
                rest[0]
            )));
        }
        let n = restore_paths(g, source.as_deref(), &paths, source.is_some(), true)?;
        // Git counts the paths only when they were not after `--`.
        if !quiet && !dashdash {
            g.flush();
            eprintln!(
                "Updated {n} path{} from {}",
                if n == 1 { "" } else { "s" },
                if let Some(src) = source.as_deref() {
                    g.repo.abbrev(&g.commit_of(src)?.1.tree)
                } else {
                    "the index".to_string()
                }
            );
        }
        return Ok(0);
    }
    let target = rest.first().cloned();
    match (new_branch, target) {
        (Some((n, reset)), start) => switch_to(
            g,
            start.as_deref(),
            Target::NewBranch(n, reset),
            force,
            quiet,
        ),
        (None, Some(t)) => switch_like(g, &t, None, force, quiet, detach),
        (None, None) => {
            let st = state(g, false)?;
            let mut l = st.staged.clone();
            for d in st.unstaged {
                if !l.iter().any(|x| x.path == d.path) {
                    l.push(d);
                }
            }
            l.sort_by(|a, b| a.path.cmp(&b.path));
            say_left(g, &l);
            Ok(0)
        }
    }
}

/// `switch NAME` / `checkout NAME` where only one remote has a branch NAME: a new branch
/// there, set to track it (git's `--guess`).
fn track_remote(g: &mut Git, t: &str, quiet: bool) -> R<Option<i32>> {
    let hits: Vec<(String, Id)> = super::remote::remote_refs(g)
        .into_iter()
        .filter(|(n, _, target)| target.is_none() && n.split_once('/').is_some_and(|(_, b)| b == t))
        .map(|(n, id, _)| (n, id))
        .collect();
    let [(name, _)] = hits.as_slice() else {
        return Ok(None);
    };
    let remote = name.split_once('/').unwrap().0.to_string();
    let code = switch_to(
        g,
        Some(name),
        Target::NewBranch(t.to_string(), false),
        false,
        true,
    )?;
    let config = g.repo.git_dir.join("config");
    store::set_config(&config, &format!("branch.{t}.remote"), Some(&remote))?;
    store::set_config(
        &config,
        &format!("branch.{t}.merge"),
        Some(&format!("refs/heads/{t}")),
    )?;
    if !quiet {
        g.say(&format!("branch '{t}' set up to track '{name}'.\n"));
        g.flush();
        eprintln!("Switched to a new branch '{t}'");
    }
    Ok(Some(code))
}

fn switch_like(
    g: &mut Git,
    t: &str,
    _nb: Option<(String, bool)>,
    force: bool,
    quiet: bool,
    detach: bool,
) -> R<i32> {
    if !detach && g.repo.ref_id(&format!("refs/heads/{t}")).is_some() {
        return switch_to(g, Some(t), Target::Branch(t.to_string()), force, quiet);
    }
    if !detach
        && g.resolve(t).is_none()
        && let Some(r) = track_remote(g, t, quiet)?
    {
        return Ok(r);
    }
    if !detach && g.repo.head().is_none() && g.repo.branch().as_deref() == Some(t) {
        return switch_to(g, None, Target::Branch(t.to_string()), force, quiet);
    }
    if g.resolve(t).and_then(|i| g.peel(&i)).is_none() {
        return Err(error(format!(
            "pathspec '{t}' did not match any file(s) known to git"
        )));
    }
    switch_to(g, Some(t), Target::Detach, force, quiet)
}

/// `-` names the branch (or commit) of the checkout before the last one.
fn previous_for_dash(g: &Git, rest: &mut [String]) -> R<()> {
    if let Some(first) = rest.first_mut()
        && first == "-"
    {
        *first = g
            .repo
            .previous_checkout()
            .ok_or_else(|| fatal("invalid reference: @{-1}".into()))?;
    }
    Ok(())
}

fn switch(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut a = Args::new(args);
    let (mut create, mut force, mut quiet, mut detach) =
        (None::<(String, bool)>, false, false, false);
    let mut rest = Vec::new();
    while let Some(x) = a.next() {
        match x.as_str() {
            "-c" | "-C" | "--create" | "--force-create" => {
                let n = a.next().ok_or_else(|| {
                    usage(format!(
                        "error: switch `{}' requires a value",
                        x.trim_start_matches('-')
                    ))
                })?;
                create = Some((n, x == "-C" || x == "--force-create"));
            }
            "-f" | "--force" | "--discard-changes" => force = true,
            "-q" | "--quiet" => quiet = true,
            "-d" | "--detach" => detach = true,
            "--no-track" | "--track" | "-t" | "--" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => rest.push(x),
        }
    }
    previous_for_dash(g, &mut rest)?;
    if let Some((n, reset)) = create {
        return switch_to(
            g,
            rest.first().map(String::as_str),
            Target::NewBranch(n, reset),
            force,
            quiet,
        );
    }
    let Some(t) = rest.first().cloned() else {
        return Err(fatal("missing branch or commit argument".into()));
    };
    if detach {
        return switch_to(g, Some(&t), Target::Detach, force, quiet);
    }
    if g.repo.ref_id(&format!("refs/heads/{t}")).is_none() {
        if let Some(r) = track_remote(g, &t, quiet)? {
            return Ok(r);
        }
        if g.resolve(&t).is_some() {
            return Err(fatal(format!(
                "a branch is expected, got commit '{t}'\nhint: If you want to detach HEAD at the commit, try again with the --detach option."
            )));
        }
        return Err(fatal(format!("invalid reference: {t}")));
    }
    switch_to(g, Some(&t), Target::Branch(t.clone()), force, quiet)
}

/// Points the index entry of `path` at a blob from a tree; its stat data goes unless the
/// blob is the same, so the next look at the working tree compares content.
fn set_entry(index: &mut Index, path: &str, (mode, id): &(u32, Id)) {
    let stat = match index.entries.get(path) {
        Some(e) if e.id == *id && e.mode == *mode => e.stat.clone(),
        _ => Stat::default(),
    };
    index.entries.insert(
        path.to_string(),
        IndexEntry {
            mode: *mode,
            id: *id,
            stat,
        },
    );
}

/// The index takes `from`'s version of every path `sp` matches, and loses those `from`
/// lacks (`reset -- paths`, `restore --staged`).
pub(super) fn set_entries(index: &mut Index, from: &Files, sp: &[String]) {
    let all: BTreeSet<String> = from
        .keys()
        .chain(index.entries.keys())
        .filter(|p| matches(sp, p))
        .cloned()
        .collect();
    for p in all {
        match from.get(&p) {
            Some(t) => set_entry(index, &p, t),
            None => {
                index.entries.remove(&p);
            }
        }
    }
}

/// Copies `paths` from a commit (or the index) to the index (`staged`) and/or the working
/// tree; returns how many files were written.
fn restore_paths(
    g: &mut Git,
    source: Option<&str>,
    paths: &[String],
    staged: bool,
    worktree: bool,
) -> R<usize> {
    let sp = specs(g, paths)?;
    let mut index = g.repo.read_index()?;
    let from: Files = match source {
        Some(r) => {
            let (_, c) = g.commit_of(r)?;
            g.repo.flatten(&c.tree)?
        }
        None if staged && !worktree => g.head_files()?,
        None => index.files(),
    };
    for (arg, s) in paths.iter().zip(&sp) {
        let hit = from.keys().any(|p| matches(std::slice::from_ref(s), p))
            || index
                .entries
                .keys()
                .any(|p| matches(std::slice::from_ref(s), p));
        if !hit {
            return Err(error(format!(
                "pathspec '{arg}' did not match any file(s) known to git"
            )));
        }
    }
    let mut n = 0;
    let targets: BTreeSet<String> = from
        .keys()
        .chain(index.entries.keys())
        .filter(|p| matches(&sp, p))
        .cloned()
        .collect();
    for p in targets {
        match from.get(&p) {
            Some(t) => {
                if worktree {
                    let mut scratch = Index::default();
                    write_file(g, &mut scratch, &p, t)?;
                    if staged || source.is_some() {
                        index
                            .entries
                            .insert(p.clone(), scratch.entries.remove(&p).unwrap());
                    } else if let Some(e) = index.entries.get_mut(&p) {
                        e.stat = scratch.entries.remove(&p).unwrap().stat;
                    }
                } else {
                    set_entry(&mut index, &p, t);
                }
                n += 1;
            }
            None => {
                if staged || source.is_some() {
                    index.entries.remove(&p);
                    if worktree {
                        let _ = std::fs::remove_file(g.work_path(&p));
                    }
                }
            }
        }
    }
    g.repo.write_index(&index)?;
    Ok(n)
}

fn restore(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let mut a = Args::new(opts);
    let (mut staged, mut worktree, mut source) = (false, false, None::<String>);
    let mut paths = after.unwrap_or_default();
    while let Some(x) = a.next() {
        if let Some(v) = a.value(&x, "-s", "--source")? {
            source = Some(v);
            continue;
        }
        match x.as_str() {
            "-S" | "--staged" => staged = true,
            "-W" | "--worktree" => worktree = true,
            "-q" | "--quiet" | "--no-overlay" | "--overlay" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(x),
        }
    }
    if paths.is_empty() {
        return Err(fatal("you must specify path(s) to restore".into()));
    }
    if !staged {
        worktree = true;
    }
    let src = source
        .clone()
        .or_else(|| (staged && g.repo.head().is_some()).then(|| "HEAD".to_string()));
    if staged && !worktree {
        // Unstage: the index takes the source's version (or loses a file HEAD lacks).
        let sp = specs(g, &paths)?;
        let mut index = g.repo.read_index()?;
        let from = match &src {
            Some(r) => g.repo.flatten(&g.commit_of(r)?.1.tree)?,
            None => Files::new(),
        };
        for (arg, s) in paths.iter().zip(&sp) {
            if !from
                .keys()
                .chain(index.entries.keys())
                .any(|p| matches(std::slice::from_ref(s), p))
            {
                return Err(error(format!(
                    "pathspec '{arg}' did not match any file(s) known to git"
                )));
            }
        }
        set_entries(&mut index, &from, &sp);
        g.repo.write_index(&index)?;
        return Ok(0);
    }
    restore_paths(g, src.as_deref(), &paths, staged, worktree)?;
    Ok(0)
}

fn reset(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let (mut mode, mut quiet) = ("mixed", false);
    let mut rest = Vec::new();
    for a in opts {
        match a.as_str() {
            "--soft" => mode = "soft",
            "--mixed" => mode = "mixed",
            "--hard" => mode = "hard",
            "--keep" | "--merge" => mode = "keep",
            "-q" | "--quiet" => quiet = true,
            "--no-refresh" | "--refresh" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => rest.push(a),
        }
    }
    let mut paths = after.unwrap_or_default();
    let rev = match rest.first() {
        Some(r) if g.resolve(r).is_some() => {
            let r = r.clone();
            paths.extend(rest[1..].iter().cloned());
            Some(r)
        }
        Some(_) => {
            paths.extend(rest.iter().cloned());
            None
        }
        None => None,
    };
    if !paths.is_empty() {
        if mode != "mixed" {
            return Err(fatal(format!("Cannot do {mode} reset with paths.")));
        }
        let sp = specs(g, &paths)?;
        let from = match &rev {
            Some(r) => g.repo.flatten(&g.commit_of(r)?.1.tree)?,
            None => g.head_files()?,
        };
        let mut index = g.repo.read_index()?;
        set_entries(&mut index, &from, &sp);
        g.repo.write_index(&index)?;
        if !quiet {
            unstaged_after_reset(g)?;
        }
        return Ok(0);
    }
    let target = match &rev {
        Some(r) => g.commit_of(r)?.0,
        None => {
            match g.repo.head() {
                Some(h) => h,
                None => {
                    // Before the first commit, a reset empties the index.
                    if mode == "mixed" {
                        g.repo.write_index(&Index::default())?;
                        return Ok(0);
                    }
                    return Err(fatal("ambiguous argument 'HEAD': unknown revision or path not in the working tree.".into()));
                }
            }
        }
    };
    let c = g.repo.commit(&target)?;
    let files = g.repo.flatten(&c.tree)?;
    match mode {
        "soft" => {}
        "mixed" => {
            let mut index = g.repo.read_index()?;
            index.conflicts.clear();
            set_entries(&mut index, &files, &[]);
            g.repo.write_index(&index)?;
        }
        _ => {
            let st = state(g, false)?;
            let mut index = st.index;
            for p in std::mem::take(&mut index.conflicts).into_keys() {
                if !files.contains_key(&p) {
                    let _ = std::fs::remove_file(g.work_path(&p));
                }
            }
            let keep = mode == "keep";
            for (p, t) in &files {
                if index.entries.get(p).map(|e| (e.mode, e.id)) != Some(*t)
                    || st.unstaged.iter().any(|d| &d.path == p)
                {
                    write_file(g, &mut index, p, t)?;
                }
            }
            let extra: Vec<String> = index
                .entries
                .keys()
                .filter(|p| !files.contains_key(*p))
                .cloned()
                .collect();
            for p in extra {
                index.entries.remove(&p);
                let _ = std::fs::remove_file(g.work_path(&p));
                remove_empty_parents(g, &p);
            }
            let _ = keep;
            g.repo.write_index(&index)?;
        }
    }
    let before = g.repo.head();
    if mode != "soft" {
        super::merge::clear_merge_state(g);
    }
    g.repo.set_head(&target)?;
    if let Ok(who) = ident(&g.repo, "COMMITTER") {
        let to = rev.as_deref().unwrap_or("HEAD");
        g.repo.reflog(
            before,
            &target,
            &who,
            &format!("reset: moving to {to}"),
            true,
        );
    }
    if !quiet {
        if mode == "hard" {
            g.say(&format!(
                "HEAD is now at {} {}\n",
                g.repo.abbrev(&target),
                c.subject()
            ));
        } else if mode == "mixed" {
            unstaged_after_reset(g)?;
        }
    }
    Ok(0)
}

fn unstaged_after_reset(g: &mut Git) -> R<()> {
    let st = state(g, false)?;
    if !st.unstaged.is_empty() {
        g.say("Unstaged changes after reset:\n");
        for d in &st.unstaged {
            let l = if d.new.is_none() { 'D' } else { 'M' };
            g.say(&format!("{l}\t{}\n", d.path));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- plumbing

fn ls_files(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (opts, after) = split_dashdash(&args);
    let (
        mut others,
        mut stage,
        mut modified,
        mut deleted,
        mut exclude_std,
        mut cached,
        mut zero,
        mut full_name,
    ) = (false, false, false, false, false, false, false, false);
    let mut paths = after.unwrap_or_default();
    for a in opts {
        match a.as_str() {
            "-o" | "--others" => others = true,
            "-s" | "--stage" => stage = true,
            "-m" | "--modified" => modified = true,
            "-d" | "--deleted" => deleted = true,
            "-c" | "--cached" => cached = true,
            "--exclude-standard" => exclude_std = true,
            "-z" => zero = true,
            "--full-name" => full_name = true,
            "--directory" | "--no-empty-directory" | "-t" | "-v" | "--error-unmatch" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => paths.push(a),
        }
    }
    let sp = if paths.is_empty() && !g.prefix.is_empty() {
        vec![g.prefix.trim_end_matches('/').to_string()]
    } else {
        specs(g, &paths)?
    };
    let end = if zero { "\0" } else { "\n" };
    let show = |g: &Git, p: &str| {
        if full_name {
            p.to_string()
        } else {
            quote_path(&g.relative(p), false)
        }
    };
    let st = state(g, others)?;
    if !others && !modified && !deleted {
        cached = true;
    }
    let mut out = String::new();
    if cached {
        for (p, e) in &st.index.entries {
            if matches(&sp, p) {
                if stage {
                    out.push_str(&format!(
                        "{:06o} {} 0\t{}{end}",
                        e.mode,
                        hex(&e.id),
                        show(g, p)
                    ));
                } else {
                    out.push_str(&format!("{}{end}", show(g, p)));
                }
            }
        }
    }
    if deleted {
        for d in &st.unstaged {
            if d.new.is_none() && matches(&sp, &d.path) {
                out.push_str(&format!("{}{end}", show(g, &d.path)));
            }
        }
    }
    if modified {
        for d in &st.unstaged {
            if matches(&sp, &d.path) {
                out.push_str(&format!("{}{end}", show(g, &d.path)));
            }
        }
    }
    if others {
        let list = if exclude_std {
            st.untracked.clone()
        } else {
            let mut v = Vec::new();
            let mut ig = Ignore::default();
            let entries = &st.index.entries;
            ignore::untracked(
                &g.repo.work,
                "",
                &mut ig,
                &|p| entries.contains_key(p),
                &mut v,
            );
            v
        };
        for p in list {
            if matches(&sp, &p) {
                out.push_str(&format!("{}{end}", show(g, &p)));
            }
        }
    }
    g.say(&out);
    Ok(0)
}

fn ls_tree(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (mut recursive, mut name_only, mut tree_only) = (false, false, false);
    let mut rest = Vec::new();
    for a in args {
        match a.as_str() {
            "-r" => recursive = true,
            "--name-only" | "--name-status" => name_only = true,
            "-d" => tree_only = true,
            "--full-tree" | "--full-name" | "-t" | "--" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => rest.push(a),
        }
    }
    let rev = rest
        .first()
        .ok_or_else(|| usage("usage: git ls-tree [<options>] <tree-ish> [<path>...]".into()))?;
    let id = g
        .resolve(rev)
        .ok_or_else(|| fatal("Not a valid object name ".to_string() + rev))?;
    let tree = match g.repo.read(&id)?.0 {
        Kind::Commit => g.repo.commit(&id)?.tree,
        Kind::Tree => id,
        _ => return Err(fatal("not a tree object".into())),
    };
    let sp: Vec<String> = rest[1..].iter().map(|p| g.repo_path(p)).collect::<R<_>>()?;
    let mut out = String::new();
    // Depth first, in tree order: a stack of entries still to show.
    let mut stack: Vec<(String, super::store::TreeEntry)> = g
        .repo
        .tree(&tree)?
        .into_iter()
        .rev()
        .map(|e| (String::new(), e))
        .collect();
    while let Some((prefix, e)) = stack.pop() {
        let path = format!("{prefix}{}", e.name);
        let is_tree = e.mode == 0o40000;
        if !sp.is_empty()
            && !sp.iter().any(|s| {
                path == *s
                    || path.starts_with(&format!("{s}/"))
                    || s.starts_with(&format!("{path}/"))
            })
        {
            continue;
        }
        if is_tree && recursive && !tree_only {
            let inner = format!("{path}/");
            stack.extend(
                g.repo
                    .tree(&e.id)?
                    .into_iter()
                    .rev()
                    .map(|c| (inner.clone(), c)),
            );
            continue;
        }
        if tree_only && !is_tree {
            continue;
        }
        if name_only {
            out.push_str(&format!("{}\n", quote_path(&path, false)));
        } else {
            let kind = match e.mode {
                0o40000 => "tree",
                0o160000 => "commit",
                _ => "blob",
            };
            out.push_str(&format!(
                "{:06o} {kind} {}\t{}\n",
                e.mode,
                hex(&e.id),
                quote_path(&path, false)
            ));
        }
    }
    g.say(&out);
    Ok(0)
}

fn cat_file(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (flag, obj) = match args.as_slice() {
        [f, o] if f.starts_with('-') => (f.as_str(), o.clone()),
        [kind, o] => {
            // `git cat-file blob ID`: the object, which must be of that type.
            let id = g.resolve(o).ok_or_else(|| fatal(format!("Not a valid object name {o}")))?;
            let (k, data) = g.repo.read(&id)?;
            if k.name() != kind {
                return Err(fatal(format!("git cat-file {o}: bad file")));
            }
            g.out.extend_from_slice(&data);
            return Ok(0);
        }
        _ => return Err(usage("usage: git cat-file <type> <object>\n   or: git cat-file (-e | -p) <object>\n   or: git cat-file (-t | -s) <object>".into())),
    };
    let id = match obj.split_once(':') {
        Some((rev, path)) if !rev.is_empty() && !flag.is_empty() => {
            let files = g.repo.flatten(&g.commit_of(rev)?.1.tree)?;
            files.get(path).map(|x| x.1)
        }
        _ => g.resolve(&obj),
    };
    let Some(id) = id else {
        if flag == "-e" {
            return Ok(1);
        }
        return Err(fatal(format!("Not a valid object name {obj}")));
    };
    let (kind, data) = g.repo.read(&id)?;
    match flag {
        "-t" => g.say(&format!("{}\n", kind.name())),
        "-s" => g.say(&format!("{}\n", data.len())),
        "-e" => {}
        "-p" => match kind {
            Kind::Tree => {
                for e in g.repo.tree(&id)? {
                    let k = match e.mode {
                        0o40000 => "tree",
                        0o160000 => "commit",
                        _ => "blob",
                    };
                    g.say(&format!("{:06o} {k} {}\t{}\n", e.mode, hex(&e.id), e.name));
                }
            }
            _ => g.out.extend_from_slice(&data),
        },
        f => {
            return Err(usage(format!(
                "error: unknown switch `{}'",
                f.trim_start_matches('-')
            )));
        }
    }
    Ok(0)
}

fn hash_object_cmd(args: Vec<String>, overrides: &[(String, String)]) -> R<i32> {
    let write = args.iter().any(|a| a == "-w");
    let stdin = args.iter().any(|a| a == "--stdin");
    let mut datas = Vec::new();
    if stdin {
        let mut d = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut d);
        datas.push(d);
    }
    let mut skip = false;
    for (i, a) in args.iter().enumerate() {
        if skip {
            skip = false;
            continue;
        }
        if a == "-t" {
            skip = true;
            continue;
        }
        if a.starts_with('-') {
            continue;
        }
        let _ = i;
        datas.push(std::fs::read(a).map_err(|e| {
            fatal(format!(
                "could not open '{a}' for reading: {}",
                guest_support::cli::reason(&e)
            ))
        })?);
    }
    let g = if write {
        Some(Git::open(overrides)?)
    } else {
        None
    };
    for d in datas {
        let id = match &g {
            Some(g) => g.repo.write(Kind::Blob, &d)?,
            None => hash_object("blob", &d),
        };
        println!("{}", hex(&id));
    }
    Ok(0)
}

/// `git diff --no-index A B`: two paths, in or out of a repository, as a git patch; exit 1
/// when they differ.
fn diff_no_index(args: Vec<String>) -> R<i32> {
    let mut o = DiffOpts::new();
    let mut paths = Vec::new();
    for a in args {
        if a == "--no-index" || a == "--" || diff_option(&a, &mut o) {
            continue;
        }
        if a.starts_with('-') && a.len() > 1 {
            return Err(unknown_option(&a));
        }
        paths.push(a);
    }
    if paths.len() != 2 {
        return Err(usage(
            "usage: git diff --no-index [<options>] <path> <path>".into(),
        ));
    }
    let side = |p: &str| -> R<Option<(u32, Vec<u8>)>> {
        if p == "/dev/null" {
            return Ok(None);
        }
        read_work_file(Path::new(p), true)
            .map(Some)
            .map_err(|_| Fail {
                msg: format!("error: Could not access '{p}'"),
                code: 1,
            })
    };
    let (a, b) = (side(&paths[0])?, side(&paths[1])?);
    if a.as_ref().map(|x| &x.1) == b.as_ref().map(|x| &x.1)
        && a.as_ref().map(|x| x.0) == b.as_ref().map(|x| x.0)
    {
        return Ok(0);
    }
    let name = |p: &str| p.trim_start_matches("./").to_string();
    let old = a.as_ref().map(|(m, d)| (*m, hash_object("blob", d)));
    let new = b.as_ref().map(|(m, d)| (*m, hash_object("blob", d)));
    let d = Delta {
        path: if b.is_some() {
            name(&paths[1])
        } else {
            name(&paths[0])
        },
        from: (a.is_some() && b.is_some()).then(|| name(&paths[0])),
        old,
        new,
    };
    let mut show = o.show;
    show.plain_names = true;
    let mut out = Vec::new();
    let empty = Vec::new();
    let short = |id: &Id| hex(id)[..7].to_string();
    diff::patch_with(
        &d,
        a.as_ref().map_or(&empty, |x| &x.1),
        b.as_ref().map_or(&empty, |x| &x.1),
        &short,
        &show,
        &mut out,
    );
    if !o.quiet {
        use std::io::Write;
        let _ = std::io::stdout().write_all(&out);
    }
    Ok(1)
}

/// `git describe`: the nearest tag (annotated, or any with `--tags`) from a commit, as
/// `TAG`, or `TAG-N-gID` N commits later; `--always` falls back to the id, `--dirty`
/// marks local changes.
fn describe(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (mut tags, mut always, mut long, mut dirty, mut abbrev) =
        (false, false, false, None::<String>, None::<usize>);
    let mut revs = Vec::new();
    for a in args {
        match a.as_str() {
            "--tags" => tags = true,
            "--always" => always = true,
            "--long" => long = true,
            "--dirty" => dirty = Some("-dirty".into()),
            s if s.starts_with("--dirty=") => dirty = Some(s[8..].to_string()),
            s if s.starts_with("--abbrev=") => abbrev = s[9..].parse().ok(),
            "--first-parent" | "--exact-match" => {}
            s if s.starts_with('-') && s.len() > 1 => return Err(unknown_option(s)),
            _ => revs.push(a),
        }
    }
    let rev = revs.first().map_or("HEAD", String::as_str);
    let (id, _) = g.commit_of(rev)?;
    // Per commit: (annotated, name); an annotated tag wins over a lightweight one.
    let mut named: BTreeMap<Id, (bool, String)> = BTreeMap::new();
    let mut lightweight = false;
    for (name, tid) in g.repo.refs("refs/tags/") {
        let annotated = g.repo.read(&tid).map(|x| x.0 == Kind::Tag).unwrap_or(false);
        if !annotated {
            lightweight = true;
        }
        if (annotated || tags)
            && let Some(c) = g.peel(&tid)
        {
            let short = name.trim_start_matches("refs/tags/").to_string();
            let e = named.entry(c).or_insert((annotated, short.clone()));
            if annotated && !e.0 {
                *e = (true, short);
            }
        }
    }
    let short = |g: &Git, x: &Id| match abbrev {
        Some(n) => g.repo.abbrev_len(x, n),
        None => g.repo.abbrev(x),
    };
    let history = walk(g, &[id], &[], false)?;
    let found = history.iter().find(|(c, _)| named.contains_key(c));
    let mut text = match found {
        Some((c, _)) => {
            let tag = named[c].1.clone();
            let depth = walk(g, &[id], &[*c], false)?.len();
            if depth == 0 && !long {
                tag
            } else {
                format!("{tag}-{depth}-g{}", short(g, &id))
            }
        }
        None if always => short(g, &id),
        None if named.is_empty() && lightweight && !tags => {
            return Err(fatal(format!(
                "No annotated tags can describe '{}'.\nHowever, there were unannotated tags: try --tags.",
                hex(&id)
            )));
        }
        None => return Err(fatal("No names found, cannot describe anything.".into())),
    };
    if let Some(mark) = dirty {
        let st = state(g, false)?;
        if !st.staged.is_empty() || !st.unstaged.is_empty() {
            text.push_str(&mark);
        }
    }
    g.say(&format!("{text}\n"));
    Ok(0)
}
