//! `tar`: the tar crate, compressed by `-z`, `-j`, `-J`, `--lzma` or `-a`, detected by its
//! magic when reading; GNU tar's options, messages and exit codes.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use guest_support::cli::{Opts, glob, mode_string, reason};

use super::{broken, mode_of, mtime_of, safe_member_path, set_mode, set_mtime, symlink, walk};
use crate::codec::Codec;

pub fn tar(mut args: Vec<String>) -> i32 {
    // Old-style bundled first argument: `tar czf out.tgz dir`.
    if args
        .get(1)
        .is_some_and(|a| !a.starts_with('-') && a.chars().all(|c| c.is_ascii_alphabetic()))
    {
        args[1] = format!("-{}", args[1]);
    }
    let with_value = [
        "f",
        "file",
        "C",
        "directory",
        "strip-components",
        "exclude",
        "T",
        "files-from",
        "transform",
        "owner",
        "group",
        "mode",
        "mtime",
        "xform",
        "b",
        "blocking-factor",
        "format",
        "H",
    ];
    let o = Opts::parse(&args[1..], &with_value);
    let flags = &o.flags;
    let known = [
        "c",
        "create",
        "x",
        "extract",
        "get",
        "t",
        "list",
        "f",
        "file",
        "z",
        "gzip",
        "gunzip",
        "ungzip",
        "j",
        "bzip2",
        "J",
        "xz",
        "lzma",
        "v",
        "verbose",
        "C",
        "directory",
        "strip-components",
        "exclude",
        "O",
        "to-stdout",
        "p",
        "preserve-permissions",
        "same-permissions",
        "k",
        "keep-old-files",
        "overwrite",
        "a",
        "auto-compress",
        "h",
        "dereference",
        "no-same-owner",
        "no-same-permissions",
        "same-owner",
        "m",
        "touch",
        "T",
        "files-from",
        "owner",
        "group",
        "mode",
        "mtime",
        "numeric-owner",
        "sort",
        "format",
        "H",
        "b",
        "blocking-factor",
        "wildcards",
        "no-recursion",
        "help",
        "version",
        "j",
        "J",
        "bzip2",
        "xz",
        "zstd",
        "lzma",
        "transform",
        "xform",
        "skip-old-files",
        "one-file-system",
        "totals",
        "show-transformed-names",
        "no-overwrite-dir",
        "checkpoint",
        "warning",
        "ignore-zeros",
        "i",
    ];
    if let Some(e) = o.unknown("tar", &known) {
        eprintln!("{e}\nTry 'tar --help' or 'tar --usage' for more information.");
        return 2;
    }
    if o.has(&["help"]) {
        println!(
            "Usage: tar [OPTION...] [FILE]...\n  -c, --create               create a new archive\n  -x, --extract, --get       extract files from an archive\n  -t, --list                 list the contents of an archive\n  -f, --file=ARCHIVE         use archive file ARCHIVE (- is standard input/output)\n  -z, --gzip                 filter the archive through gzip\n  -j, --bzip2                filter the archive through bzip2\n  -J, --xz                   filter the archive through xz\n      --lzma                 filter the archive through lzma\n  -a, --auto-compress        use archive suffix to determine the compression\n  -C, --directory=DIR        change to directory DIR\n  -v, --verbose              verbosely list files processed\n  -O, --to-stdout            extract files to standard output\n  -k, --keep-old-files       don't replace existing files when extracting\n      --strip-components=N   strip N leading components from file names\n      --exclude=PATTERN      exclude files, given as a PATTERN\n  -T, --files-from=FILE      get names to extract or create from FILE"
        );
        return 0;
    }
    if o.has(&["version"]) {
        println!("tar (GNU tar) 1.34\n(wasbox, tar crate)");
        return 0;
    }
    if o.has(&["zstd"]) {
        eprintln!(
            "tar: zstd compression is not available in this sandbox (gzip -z, bzip2 -j, xz -J and --lzma are)"
        );
        return 2;
    }
    let modes: Vec<char> = flags
        .iter()
        .filter_map(|(n, _)| match n.as_str() {
            "c" | "create" => Some('c'),
            "x" | "extract" | "get" => Some('x'),
            "t" | "list" => Some('t'),
            _ => None,
        })
        .collect();
    let mode = match modes.as_slice() {
        [] => {
            eprintln!(
                "tar: You must specify one of the '-Acdtrux', '--delete' or '--test-label' options\nTry 'tar --help' or 'tar --usage' for more information."
            );
            return 2;
        }
        [m, rest @ ..] if rest.iter().all(|r| r == m) => *m,
        _ => {
            eprintln!(
                "tar: You may not specify more than one '-Acdtrux', '--delete' or  '--test-label' option\nTry 'tar --help' or 'tar --usage' for more information."
            );
            return 2;
        }
    };
    let archive = o.value(&["f", "file"]).unwrap_or("-").to_string();
    // The last compression option wins, as in GNU tar; `-a` goes by the archive's name.
    let mut codec = flags.iter().rev().find_map(|(n, _)| match n.as_str() {
        "z" | "gzip" | "gunzip" | "ungzip" => Some(Codec::Gzip),
        "j" | "bzip2" => Some(Codec::Bzip2),
        "J" | "xz" => Some(Codec::Xz),
        "lzma" => Some(Codec::Lzma),
        _ => None,
    });
    if o.has(&["a", "auto-compress"]) && mode == 'c' {
        codec = Codec::by_name(&archive).or(codec);
    }
    let verbose = flags
        .iter()
        .filter(|(n, _)| n == "v" || n == "verbose")
        .count();
    let dir = o.value(&["C", "directory"]).map(PathBuf::from);
    let strip: usize = match o.value(&["strip-components"]).map(str::parse) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("tar: Invalid number for --strip-components");
            return 2;
        }
    };
    let excludes: Vec<String> = flags
        .iter()
        .filter(|(n, _)| n == "exclude")
        .filter_map(|(_, v)| v.clone())
        .collect();
    let mut names = o.operands.clone();
    if let Some(list) = o.value(&["T", "files-from"]) {
        match fs::read_to_string(list) {
            Ok(t) => names.extend(t.lines().filter(|l| !l.is_empty()).map(String::from)),
            Err(e) => {
                eprintln!("tar: {list}: Cannot open: {}", reason(&e));
                return 2;
            }
        }
    }
    let opts = TarOpts {
        verbose,
        dir,
        strip,
        excludes,
        to_stdout: o.has(&["O", "to-stdout"]),
        keep_old: o.has(&["k", "keep-old-files", "skip-old-files"]),
        touch: o.has(&["m", "touch"]),
        recursion: !o.has(&["no-recursion"]),
        archive_on_stdout: archive == "-",
    };
    match mode {
        'c' => tar_create(&archive, codec, &names, &opts),
        _ => tar_read(&archive, mode == 'x', &names, &opts),
    }
}

struct TarOpts {
    verbose: usize,
    dir: Option<PathBuf>,
    strip: usize,
    excludes: Vec<String>,
    to_stdout: bool,
    keep_old: bool,
    touch: bool,
    recursion: bool,
    archive_on_stdout: bool,
}

impl TarOpts {
    fn excluded(&self, name: &str) -> bool {
        let trimmed = name.trim_end_matches('/');
        self.excludes
            .iter()
            .any(|pat| trimmed.split('/').any(|part| glob(pat, part)) || glob(pat, trimmed))
    }
}

fn tar_create(archive: &str, codec: Option<Codec>, names: &[String], o: &TarOpts) -> i32 {
    if names.is_empty() {
        eprintln!(
            "tar: Cowardly refusing to create an empty archive\nTry 'tar --help' or 'tar --usage' for more information."
        );
        return 2;
    }
    let base = o.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    let mut status = 0;
    let mut stripped_slash = false;
    for name in names {
        let member_root = name.trim_start_matches('/');
        if member_root.len() != name.len() && !stripped_slash {
            eprintln!("tar: Removing leading `/' from member names");
            stripped_slash = true;
        }
        let on_disk = if name.starts_with('/') {
            PathBuf::from(name)
        } else {
            base.join(name)
        };
        if fs::symlink_metadata(&on_disk).is_err() {
            eprintln!("tar: {name}: Cannot stat: No such file or directory");
            status = 2;
            continue;
        }
        let mut entries: Vec<(PathBuf, bool)> = Vec::new();
        if o.recursion {
            walk(&on_disk, &mut |p, is_dir| {
                entries.push((p.to_path_buf(), is_dir))
            });
        } else {
            let is_dir = on_disk.is_dir();
            entries.push((on_disk.clone(), is_dir));
        }
        for (path, is_dir) in entries {
            let rel = path.strip_prefix(&on_disk).unwrap_or(Path::new(""));
            let mut member = PathBuf::from(if member_root.is_empty() {
                "."
            } else {
                member_root
            });
            if !rel.as_os_str().is_empty() {
                member.push(rel);
            }
            let mut member = member.to_string_lossy().into_owned();
            if is_dir && !member.ends_with('/') {
                member.push('/');
            }
            if o.excluded(&member) {
                continue;
            }
            if let Err(e) = append(&mut builder, &path, &member, is_dir) {
                eprintln!("tar: {}: {}", path.display(), reason(&e));
                status = 2;
                continue;
            }
            if o.verbose > 0 {
                if o.archive_on_stdout {
                    eprintln!("{member}");
                } else {
                    println!("{member}");
                }
            }
        }
    }
    let bytes = match builder.into_inner() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("tar: {}", reason(&e));
            return 2;
        }
    };
    let bytes = if let Some(codec) = codec {
        match codec.encode(&bytes, if codec == Codec::Bzip2 { 9 } else { 6 }) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("tar: {}", reason(&e));
                return 2;
            }
        }
    } else {
        bytes
    };
    let written = if archive == "-" {
        io::stdout().lock().write_all(&bytes)
    } else {
        fs::write(archive, &bytes)
    };
    if let Err(e) = written {
        eprintln!("tar: {archive}: Cannot write: {}", reason(&e));
        return 2;
    }
    if status != 0 {
        eprintln!("tar: Exiting with failure status due to previous errors");
    }
    status
}

fn append(
    b: &mut tar::Builder<Vec<u8>>,
    path: &Path,
    member: &str,
    is_dir: bool,
) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    let mut h = tar::Header::new_gnu();
    h.set_mtime(mtime_of(&meta));
    h.set_uid(0);
    h.set_gid(0);
    let _ = h.set_username("root");
    let _ = h.set_groupname("root");
    // The tar crate drops `.` components from names; GNU tar keeps `./x` as given (`tar
    // -C dir -cf a.tar .`), so such a name short enough for the header goes in as it is.
    let verbatim = member.starts_with("./") && member.len() <= 100;
    if meta.file_type().is_symlink() {
        let target = fs::read_link(path)?;
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_mode(0o777);
        h.set_size(0);
        if verbatim {
            h.set_link_name(&target)?;
            raw_name(&mut h, member);
            return b.append(&h, io::empty());
        }
        b.append_link(&mut h, member, target)
    } else if is_dir {
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(mode_of(path).unwrap_or(0o755) & 0o7777);
        h.set_size(0);
        if verbatim {
            raw_name(&mut h, member);
            return b.append(&h, io::empty());
        }
        b.append_data(&mut h, member, io::empty())
    } else {
        let data = fs::read(path)?;
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(mode_of(path).unwrap_or(0o644) & 0o7777);
        h.set_size(data.len() as u64);
        if verbatim {
            raw_name(&mut h, member);
            return b.append(&h, &data[..]);
        }
        b.append_data(&mut h, member, &data[..])
    }
}

/// Writes `name` (at most 100 bytes) into the header's name field as it is, and the
/// checksum after it.
fn raw_name(h: &mut tar::Header, name: &str) {
    let field = &mut h.as_old_mut().name;
    field.fill(0);
    field[..name.len()].copy_from_slice(name.as_bytes());
    h.set_cksum();
}

fn tar_read(archive: &str, extract: bool, names: &[String], o: &TarOpts) -> i32 {
    let mut data = Vec::new();
    let read = if archive == "-" {
        io::stdin().read_to_end(&mut data).map(|_| ())
    } else {
        fs::read(archive).map(|d| data = d)
    };
    if let Err(e) = read {
        eprintln!(
            "tar: {archive}: Cannot open: {}\ntar: Error is not recoverable: exiting now",
            reason(&e)
        );
        return 2;
    }
    // Compressed archives are recognised by their magic, whatever the options said.
    if let Some(codec) = Codec::sniff(&data) {
        match codec.decode(&data) {
            Ok(out) => data = out,
            Err(_) => {
                eprintln!(
                    "tar: Child returned status 1\ntar: Error is not recoverable: exiting now"
                );
                return 2;
            }
        }
    }
    // A tar starts with a header block: ustar magic, an old-style header with a checksum,
    // or the zero blocks of an empty archive.
    let looks_like_tar = data.get(..512).is_some_and(|head| {
        let h = tar::Header::from_byte_slice(head);
        &head[257..262] == b"ustar"
            || head.iter().all(|&b| b == 0)
            || (h.as_old().cksum.iter().any(|&b| b != 0) && h.cksum().is_ok())
    });
    if !looks_like_tar {
        eprintln!(
            "tar: This does not look like a tar archive\ntar: Exiting with failure status due to previous errors"
        );
        return 2;
    }
    let base = o.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let mut ar = tar::Archive::new(&data[..]);
    let entries = match ar.entries() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("tar: {}", reason(&e));
            return 2;
        }
    };
    let mut status = 0;
    let mut matched = vec![false; names.len()];
    let mut stripped_slash = false;
    let mut dir_times: Vec<(PathBuf, u64)> = Vec::new();
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                eprintln!("tar: Unexpected EOF in archive: {}", reason(&e));
                status = 2;
                break;
            }
        };
        let raw_name = entry
            .path()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let kind = entry.header().entry_type();
        let shown = if kind.is_dir() && !raw_name.ends_with('/') {
            format!("{raw_name}/")
        } else {
            raw_name.clone()
        };
        if !names.is_empty() {
            let trimmed = shown.trim_end_matches('/');
            let hit = names.iter().position(|n| {
                let n = n.trim_end_matches('/');
                trimmed == n || trimmed.starts_with(&format!("{n}/"))
            });
            match hit {
                Some(i) => matched[i] = true,
                None => continue,
            }
        }
        if o.excluded(&shown) {
            continue;
        }
        let mode = entry.header().mode().unwrap_or(0o644);
        let size = entry.header().size().unwrap_or(0);
        let mtime = entry.header().mtime().unwrap_or(0);
        let link = entry
            .link_name()
            .ok()
            .flatten()
            .map(|l| l.to_string_lossy().into_owned());
        if !extract || o.verbose > 0 {
            let line = if (!extract && o.verbose > 0) || o.verbose > 1 {
                let (y, mo, d, h, mi, _, _) = guest_support::civil_time(mtime as i64);
                let user = entry
                    .header()
                    .username()
                    .ok()
                    .flatten()
                    .unwrap_or("root")
                    .to_string();
                let group = entry
                    .header()
                    .groupname()
                    .ok()
                    .flatten()
                    .unwrap_or("root")
                    .to_string();
                let ug = format!("{user}/{group}");
                let kc = if kind.is_dir() {
                    'd'
                } else if kind.is_symlink() {
                    'l'
                } else if kind.is_hard_link() {
                    'h'
                } else {
                    '-'
                };
                let width = 18usize.saturating_sub(ug.len()).max(1);
                let mut l = format!(
                    "{} {ug} {size:>width$} {y:04}-{mo:02}-{d:02} {h:02}:{mi:02} {shown}",
                    mode_string(mode, if kc == 'h' { '-' } else { kc })
                );
                if let Some(t) = &link {
                    if kind.is_symlink() {
                        l.push_str(&format!(" -> {t}"));
                    } else if kind.is_hard_link() {
                        l.push_str(&format!(" link to {t}"));
                    }
                }
                l
            } else {
                shown.clone()
            };
            if extract && o.to_stdout {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
        }
        if !extract {
            continue;
        }
        let Some(rel) = safe_member_path(&raw_name) else {
            eprintln!("tar: {raw_name}: Member name contains '..'");
            status = 2;
            continue;
        };
        if raw_name.starts_with('/') && !stripped_slash {
            eprintln!("tar: Removing leading `/' from member names");
            stripped_slash = true;
        }
        let rel: PathBuf = rel.components().skip(o.strip).collect();
        if rel.as_os_str().is_empty() {
            continue;
        }
        if o.to_stdout {
            if kind.is_file() {
                let mut buf = Vec::new();
                let _ = entry.read_to_end(&mut buf);
                if let Err(e) = io::stdout().lock().write_all(&buf) {
                    return broken("tar", &e);
                }
            }
            continue;
        }
        let target = base.join(&rel);
        if let Some(parent) = target.parent() {
            let _ = fs::create_dir_all(parent);
        }
        let result: io::Result<()> = if kind.is_dir() {
            let r = match fs::create_dir(&target) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && target.is_dir() => Ok(()),
                r => r,
            };
            if r.is_ok() {
                set_mode(&target, mode);
                dir_times.push((target.clone(), mtime));
            }
            r
        } else if o.keep_old && fs::symlink_metadata(&target).is_ok() {
            continue;
        } else if kind.is_symlink() {
            let _ = fs::remove_file(&target);
            symlink(link.as_deref().unwrap_or(""), &target)
        } else if kind.is_hard_link() {
            let from = link
                .as_deref()
                .and_then(safe_member_path)
                .map(|p| base.join(p.components().skip(o.strip).collect::<PathBuf>()));
            match from {
                Some(from) => {
                    let _ = fs::remove_file(&target);
                    fs::copy(&from, &target).map(|_| ())
                }
                None => Err(io::Error::other("Cannot hard link outside the archive")),
            }
        } else if kind.is_file() || kind == tar::EntryType::Continuous {
            let mut buf = Vec::new();
            entry.read_to_end(&mut buf).and_then(|_| {
                let _ = fs::remove_file(&target);
                fs::write(&target, &buf)?;
                set_mode(&target, mode);
                if !o.touch {
                    set_mtime(&target, mtime);
                }
                Ok(())
            })
        } else {
            // Devices, fifos and other special files are not made in a sandbox.
            eprintln!("tar: {raw_name}: special file not extracted");
            status = 2;
            continue;
        };
        if let Err(e) = result {
            eprintln!("tar: {}: Cannot open: {}", rel.display(), reason(&e));
            status = 2;
        }
    }
    if !o.touch {
        for (d, t) in dir_times.iter().rev() {
            set_mtime(d, *t);
        }
    }
    for (n, hit) in names.iter().zip(&matched) {
        if !hit {
            eprintln!("tar: {n}: Not found in archive");
            status = 2;
        }
    }
    if status != 0 {
        eprintln!("tar: Exiting with failure status due to previous errors");
    }
    status
}
