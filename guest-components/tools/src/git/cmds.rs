//! The entry of every command: bundled short options split, the command dispatched (each
//! lives in the module of its kind), and the argument parsing the commands share.

use super::checkout::{checkout, reset, restore, switch};
use super::commit::commit;
use super::diffcmd::diff_cmd;
use super::history::{log, show};
use super::plumbing::{cat_file, describe, diff_no_index, hash_object_cmd, ls_files, ls_tree};
use super::refs::{branch, check_ignore, rev_parse, show_ref, symbolic_ref, tag};
use super::setup::{config, init};
use super::staging::{add, mv, rm};
use super::status::status;
use super::store::hex;
use super::{Fail, Git, MISSING, R, VERSION, fatal, usage};

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

This git reaches remotes over HTTP(S) only (clone, fetch, pull, push, ls-remote: what the
sandbox's network policy allows), and has no rebase.
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
        "clone" => super::transport::clone(args),
        "ls-remote" => super::transport::ls_remote(args),
        "fetch" => with_repo(super::transport::fetch),
        "pull" => with_repo(super::transport::pull),
        "push" => with_repo(super::transport::push),
        c if MISSING.contains(&c) => Err(fatal(format!(
            "'{c}' is not available in this sandbox's git"
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
