//! Plumbing and inspection: `ls-files`, `ls-tree`, `cat-file`, `hash-object`, `diff
//! --no-index` and `describe`.

use std::collections::BTreeMap;
use std::path::Path;

use super::cmds::{split_dashdash, unknown_option};
use super::diff::{self, Delta};
use super::diffcmd::{DiffOpts, diff_option};
use super::history::walk;
use super::ignore::{self, Ignore};
use super::staging::{matches, specs, state};
use super::store::{Id, Kind, hash_object, hex, read_work_file};
use super::{Fail, Git, R, fatal, quote_path, usage};

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
