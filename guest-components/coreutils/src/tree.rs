//! `tree`: a directory's contents as an indented tree, as the `tree` program prints them
//! (`-a`, `-d`, `-L LEVEL`, `-I PATTERN`, `-P PATTERN`, `-f`, `-F`, `--noreport`,
//! `--dirsfirst`), with the "N directories, M files" report.

use std::ffi::OsString;
use std::path::Path;

#[derive(Default)]
struct Opts {
    all: bool,
    dirs_only: bool,
    max_depth: Option<usize>,
    ignore: Vec<String>,
    only: Vec<String>,
    full_path: bool,
    classify: bool,
    noreport: bool,
    dirs_first: bool,
}

pub fn main(args: std::vec::IntoIter<OsString>) -> i32 {
    let args: Vec<String> = args
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut o = Opts::default();
    let mut roots = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let mut value = |name: &str| -> Option<String> {
            i += 1;
            let v = args.get(i - 1).cloned();
            if v.is_none() {
                eprintln!("tree: Missing argument to {name} option.");
            }
            v
        };
        match a.as_str() {
            "-a" => o.all = true,
            "-d" => o.dirs_only = true,
            "-f" => o.full_path = true,
            "-F" => o.classify = true,
            "--noreport" => o.noreport = true,
            "--dirsfirst" => o.dirs_first = true,
            "-n" | "-C" | "--charset" | "-N" => {}
            "-L" => match value("-L").and_then(|v| v.parse::<usize>().ok()) {
                Some(n) if n > 0 => o.max_depth = Some(n),
                _ => {
                    eprintln!("tree: Invalid level, must be greater than 0.");
                    return 1;
                }
            },
            "-I" => match value("-I") {
                Some(p) => o.ignore.extend(p.split('|').map(String::from)),
                None => return 1,
            },
            "-P" => match value("-P") {
                Some(p) => o.only.extend(p.split('|').map(String::from)),
                None => return 1,
            },
            "--help" => {
                println!(
                    "usage: tree [-adfFL] [-L level] [-I pattern] [-P pattern] [--noreport] [--dirsfirst] [<directory list>]"
                );
                return 0;
            }
            s if s.starts_with('-') && s.len() > 1 => {
                eprintln!("tree: Invalid argument `{s}'.");
                return 1;
            }
            _ => roots.push(a.clone()),
        }
    }
    if roots.is_empty() {
        roots.push(".".into());
    }
    let (mut dirs, mut files) = (0usize, 0usize);
    let mut status = 0;
    let mut out = String::new();
    for root in &roots {
        let p = Path::new(root);
        if !p.is_dir() {
            if p.exists() {
                out.push_str(&format!("{root} [error opening dir]\n"));
            } else {
                out.push_str(&format!("{root}  [error opening dir]\n"));
            }
            status = 2;
            continue;
        }
        out.push_str(root);
        out.push('\n');
        walk(&o, p, root, "", 1, &mut out, &mut dirs, &mut files);
    }
    if !o.noreport {
        let d = if dirs == 1 {
            "directory"
        } else {
            "directories"
        };
        if o.dirs_only {
            out.push_str(&format!("\n{dirs} {d}\n"));
        } else {
            let f = if files == 1 { "file" } else { "files" };
            out.push_str(&format!("\n{dirs} {d}, {files} {f}\n"));
        }
    }
    print!("{out}");
    status
}

#[allow(clippy::too_many_arguments)]
fn walk(
    o: &Opts,
    dir: &Path,
    shown: &str,
    prefix: &str,
    depth: usize,
    out: &mut String,
    dirs: &mut usize,
    files: &mut usize,
) {
    if o.max_depth.is_some_and(|m| depth > m) {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<(String, bool, Option<String>)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if !o.all && name.starts_with('.') {
                return None;
            }
            let path = e.path();
            let link = std::fs::read_link(&path)
                .ok()
                .map(|t| t.to_string_lossy().into_owned());
            let is_dir = path.is_dir();
            if o.dirs_only && !is_dir {
                return None;
            }
            if o.ignore.iter().any(|p| guest_support::cli::glob(p, &name)) {
                return None;
            }
            if !is_dir
                && !o.only.is_empty()
                && !o.only.iter().any(|p| guest_support::cli::glob(p, &name))
            {
                return None;
            }
            Some((name, is_dir, link))
        })
        .collect();
    entries.sort_by(|a, b| {
        if o.dirs_first && a.1 != b.1 {
            return b.1.cmp(&a.1);
        }
        a.0.cmp(&b.0)
    });
    let n = entries.len();
    // Line drawing as tree does: Unicode in a UTF-8 locale, ASCII otherwise.
    let (tee, corner, bar) = if crate::own::utf8_locale() {
        ("├── ", "└── ", "│\u{a0}\u{a0} ")
    } else {
        ("|-- ", "`-- ", "|   ")
    };
    for (k, (name, is_dir, link)) in entries.into_iter().enumerate() {
        let last = k + 1 == n;
        let branch = if last { corner } else { tee };
        let path = format!("{}/{name}", shown.trim_end_matches('/'));
        let mut label = if o.full_path {
            path.clone()
        } else {
            name.clone()
        };
        if let Some(t) = &link {
            label.push_str(&format!(" -> {t}"));
        }
        if o.classify && is_dir && link.is_none() {
            label.push('/');
        }
        out.push_str(&format!("{prefix}{branch}{label}\n"));
        if is_dir {
            *dirs += 1;
            // A symlink to a directory is listed, not entered (tree without -l).
            if link.is_none() {
                let next = format!("{prefix}{}", if last { "    " } else { bar });
                walk(
                    o,
                    &dir.join(&name),
                    &path,
                    &next,
                    depth + 1,
                    out,
                    dirs,
                    files,
                );
            }
        } else {
            *files += 1;
        }
    }
}
