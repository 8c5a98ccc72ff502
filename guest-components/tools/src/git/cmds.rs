//! The commands: each parses git's options, acts on the repository and writes git's output
//! and messages.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use guest_support::cli::glob;

use super::checkout::*;
use super::diff::{self, Delta, Files, Listing, Output, Show, Source, Ws};
use super::history::*;
use super::ignore::{self, Ignore};
use super::refs::*;
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
pub(super) fn unbundle(cmd: &str, args: Vec<String>) -> Vec<String> {
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
        "blame" => ("selnfwMC", ""),
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
        "merge-base" => with_repo(super::merge::merge_base_cmd),
        "shortlog" => with_repo(super::history::shortlog),
        "rev-list" => with_repo(super::history::rev_list),
        "for-each-ref" => with_repo(super::refs::for_each_ref),
        "cherry-pick" => with_repo(|g, a| super::merge::pick(g, a, false)),
        "revert" => with_repo(|g, a| super::merge::pick(g, a, true)),
        "apply" => super::apply::apply(args),
        "log" => with_repo(log),
        "blame" => with_repo(super::blame::blame),
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
            "'{c}' is not available in this sandbox's git: it keeps history locally (no network, no rebase)"
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
pub(super) struct Args {
    pub(super) items: Vec<String>,
    pub(super) i: usize,
}

impl Args {
    pub(super) fn new(items: Vec<String>) -> Args {
        Args { items, i: 0 }
    }
    pub(super) fn next(&mut self) -> Option<String> {
        let a = self.items.get(self.i).cloned();
        self.i += 1;
        a
    }
    pub(super) fn value(&mut self, a: &str, short: &str, long: &str) -> R<Option<String>> {
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

pub(super) fn init(args: Vec<String>) -> R<i32> {
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

pub(super) fn normalize(p: &Path) -> std::path::PathBuf {
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

pub(super) fn config(args: Vec<String>, overrides: &[(String, String)]) -> R<i32> {
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

pub(super) fn add(g: &mut Git, args: Vec<String>) -> R<i32> {
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
    // A directory holding a repository of its own is not added (git would add a gitlink,
    // a submodule, which this git does not keep).
    names.retain(|(p, _)| {
        let nested = p.ends_with('/');
        if nested {
            eprintln!(
                "warning: skipping embedded git repository: {}\nhint: this git does not keep submodules",
                p.trim_end_matches('/')
            );
        }
        !nested
    });
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

pub(super) fn ancestors_ignored(ig: &Ignore, path: &str) -> bool {
    let mut at = 0;
    while let Some(i) = path[at..].find('/') {
        if ig.ignored(&path[..at + i], true) {
            return true;
        }
        at += i + 1;
    }
    false
}

pub(super) fn walk_all(g: &Git, dir: &str, out: &mut Vec<(String, bool)>) {
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

pub(super) fn rm(g: &mut Git, args: Vec<String>) -> R<i32> {
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

pub(super) fn mv(g: &mut Git, args: Vec<String>) -> R<i32> {
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

pub(super) fn commit(g: &mut Git, args: Vec<String>) -> R<i32> {
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
    // `git commit PATHS` commits HEAD with only those paths as they are now (git's
    // `--only`); the rest of the index stays staged for later.
    let tree_files = if paths.is_empty() {
        st.index.files()
    } else {
        let sp = specs(g, &paths)?;
        let index_files = st.index.files();
        let mut files = base_files.clone();
        for p in base_files.keys().chain(index_files.keys()) {
            if matches(&sp, p) {
                match index_files.get(p) {
                    Some(v) => files.insert(p.clone(), *v),
                    None => files.remove(p),
                };
            }
        }
        files
    };
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
        diff::shortstat(g, &changes, Source::Objects, Ws::Exact, &mut out);
        diff::summary(&changes, &mut out);
    }
    g.out.extend_from_slice(&out);
    Ok(0)
}

// ---------------------------------------------------------------- status

pub(super) fn label(d: &Delta) -> &'static str {
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
pub(super) fn unmerged_label(stages: &[Option<(u32, Id)>; 3]) -> (&'static str, &'static str) {
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

pub(super) fn status(g: &mut Git, args: Vec<String>) -> R<i32> {
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

pub(super) struct DiffOpts {
    pub(super) out: Output,
    /// A format option was given (otherwise the command's default applies).
    pub(super) chosen: bool,
    pub(super) no_patch: bool,
    pub(super) show: Show,
    pub(super) quiet: bool,
    pub(super) exit_code: bool,
}

impl DiffOpts {
    pub(super) fn new() -> DiffOpts {
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
    pub(super) fn output(&self, default_patch: bool) -> Output {
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
pub(super) fn diff_option(a: &str, o: &mut DiffOpts) -> bool {
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
        "-w" | "--ignore-all-space" => o.show.ws = Ws::All,
        "-b" | "--ignore-space-change" => o.show.ws = Ws::Change,
        "--ignore-space-at-eol" => o.show.ws = Ws::AtEol,
        "--ignore-cr-at-eol" => o.show.ws = Ws::CrAtEol,
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

pub(super) fn diff_cmd(g: &mut Git, args: Vec<String>) -> R<i32> {
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
        // git names the whole range when an end of it is not a revision.
        for end in [a, b] {
            if !end.is_empty() && g.resolve(end).is_none() {
                return Err(super::bad_revision(&r));
            }
        }
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

pub(super) fn finish_mixed_diff(g: &mut Git, ds: Vec<(Delta, Source)>, o: &DiffOpts) -> R<i32> {
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

// ---------------------------------------------------------------- plumbing

pub(super) fn ls_files(g: &mut Git, args: Vec<String>) -> R<i32> {
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

pub(super) fn ls_tree(g: &mut Git, args: Vec<String>) -> R<i32> {
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

pub(super) fn cat_file(g: &mut Git, args: Vec<String>) -> R<i32> {
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

pub(super) fn hash_object_cmd(args: Vec<String>, overrides: &[(String, String)]) -> R<i32> {
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
pub(super) fn diff_no_index(args: Vec<String>) -> R<i32> {
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
pub(super) fn describe(g: &mut Git, args: Vec<String>) -> R<i32> {
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
