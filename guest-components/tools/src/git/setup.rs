//! `git init` and `git config`.

use std::path::Path;

use super::cmds::{Args, unknown_option};
use super::store::{self, Config, io_fail};
use super::{Fail, R, fatal, usage};

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
