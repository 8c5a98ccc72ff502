//! `zip` and `unzip`: the zip crate (stored and deflated entries) with Info-ZIP's options,
//! messages and exit codes.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use guest_support::cli::{Opts, glob, reason};

use super::{broken, mode_of, mtime_of, safe_member_path, set_mode, set_mtime, symlink, walk};

fn zip_time(secs: u64) -> zip::DateTime {
    let (y, mo, d, h, mi, s, _) = guest_support::civil_time(secs as i64);
    zip::DateTime::from_date_and_time(
        y.clamp(1980, 2107) as u16,
        mo as u8,
        d as u8,
        h as u8,
        mi as u8,
        s as u8,
    )
    .unwrap_or_default()
}

pub fn zip(args: Vec<String>) -> i32 {
    let o = Opts::parse(&args[1..], &["x", "exclude", "i", "include"]);
    let (flags, operands) = (&o.flags, &o.operands);
    let known = [
        "r",
        "recurse-paths",
        "q",
        "quiet",
        "j",
        "junk-paths",
        "0",
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
        "8",
        "9",
        "x",
        "exclude",
        "i",
        "include",
        "v",
        "y",
        "symlinks",
        "D",
        "no-dir-entries",
        "m",
        "move",
        "u",
        "update",
        "f",
        "freshen",
        "d",
        "delete",
        "X",
        "h",
        "help",
    ];
    if let Some((n, _)) = flags.iter().find(|(n, _)| !known.contains(&n.as_str())) {
        eprintln!("zip error: Invalid command arguments (no such option: {n})");
        return 16;
    }
    if o.has(&["h", "help"]) || operands.is_empty() {
        println!(
            "Usage: zip [-options] zipfile list\n  -r   recurse into directories     -j   junk (don't record) directory names\n  -0   store only                   -1 .. -9  compression level\n  -q   quiet operation              -x   exclude the following names\n  -y   store symbolic links as the link\n  -d   delete entries in zipfile    -m   move into zipfile (delete OS files)\n  -D   do not add directory entries"
        );
        return 0;
    }
    let mut zipname = operands[0].clone();
    if !zipname.contains('.') || Path::new(&zipname).extension().is_none() {
        zipname.push_str(".zip");
    }
    let recurse = o.has(&["r", "recurse-paths"]);
    let quiet = o.has(&["q", "quiet"]);
    let junk = o.has(&["j", "junk-paths"]);
    let symlinks = o.has(&["y", "symlinks"]);
    let no_dirs = o.has(&["D", "no-dir-entries"]);
    let delete = o.has(&["d", "delete"]);
    let move_files = o.has(&["m", "move"]);
    let store = o.has(&["0"]);
    let excludes: Vec<String> = flags
        .iter()
        .filter(|(n, _)| n == "x" || n == "exclude")
        .filter_map(|(_, v)| v.clone())
        .collect();
    let level: Option<i64> = flags.iter().rev().find_map(|(n, _)| {
        (n.len() == 1 && n.as_bytes()[0].is_ascii_digit()).then(|| n.parse().unwrap_or(6))
    });

    // Existing entries, kept unless replaced (or deleted with -d).
    let mut existing: Vec<ZipEntry> = Vec::new();
    if let Ok(bytes) = fs::read(&zipname) {
        match zip::ZipArchive::new(io::Cursor::new(bytes)) {
            Ok(mut ar) => {
                for i in 0..ar.len() {
                    let Ok(mut f) = ar.by_index(i) else { continue };
                    let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
                    let mut buf = Vec::new();
                    let _ = f.read_to_end(&mut buf);
                    let mtime = f.last_modified().unwrap_or_default();
                    existing.push((name, buf, f.unix_mode(), mtime, f.is_dir(), f.is_symlink()));
                }
            }
            Err(_) => {
                eprintln!("zip error: Zip file structure invalid ({zipname})");
                return 3;
            }
        }
    }
    let mut status = 0;
    let files = &operands[1..];
    if delete {
        let before = existing.len();
        existing.retain(|(name, ..)| {
            let gone = files.iter().any(|p| glob(p, name));
            if gone && !quiet {
                println!("deleting: {name}");
            }
            !gone
        });
        if before == existing.len() {
            eprintln!("zip warning: nothing to do!");
            return 12;
        }
        return write_zip(&zipname, &existing, &[], store, level);
    }
    let mut added: Vec<(String, PathBuf, bool)> = Vec::new();
    for f in files {
        let p = Path::new(f);
        if fs::symlink_metadata(p).is_err() {
            eprintln!("\tzip warning: name not matched: {f}");
            status = 12;
            continue;
        }
        let mut push = |path: &Path, is_dir: bool| {
            let mut name = if junk {
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            } else {
                let s = path.to_string_lossy();
                s.trim_start_matches("./")
                    .trim_start_matches('/')
                    .to_string()
            };
            if is_dir {
                if junk || no_dirs {
                    return;
                }
                name.push('/');
            }
            if excludes.iter().any(|x| glob(x, &name)) {
                return;
            }
            added.push((name, path.to_path_buf(), is_dir));
        };
        let is_link = fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
        if p.is_dir() && !(is_link && symlinks) {
            if recurse {
                walk(p, &mut |q, d| push(q, d));
            } else {
                push(p, true);
            }
        } else {
            push(p, false);
        }
    }
    if added.is_empty() && status != 0 {
        eprintln!("\nzip error: Nothing to do! ({zipname})");
        return 12;
    }
    let mut new_entries = Vec::new();
    for (name, path, is_dir) in &added {
        let meta = match fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) => {
                eprintln!(
                    "\tzip warning: could not open for reading: {}: {}",
                    path.display(),
                    reason(&e)
                );
                continue;
            }
        };
        let link = meta.file_type().is_symlink() && symlinks;
        let data = if *is_dir {
            Vec::new()
        } else if link {
            fs::read_link(path)
                .map(|t| t.to_string_lossy().into_owned().into_bytes())
                .unwrap_or_default()
        } else {
            match fs::read(path) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!(
                        "\tzip warning: could not open for reading: {}: {}",
                        path.display(),
                        reason(&e)
                    );
                    status = 18;
                    continue;
                }
            }
        };
        let replacing = existing.iter().position(|e| e.0 == *name);
        if let Some(i) = replacing {
            existing.remove(i);
        }
        if !quiet {
            let verb = if replacing.is_some() {
                "updating"
            } else {
                "  adding"
            };
            let how = if *is_dir || data.is_empty() || store || level == Some(0) {
                "stored 0%".to_string()
            } else {
                let compressed = deflated_size(&data, level);
                if compressed >= data.len() {
                    "stored 0%".to_string()
                } else {
                    format!(
                        "deflated {:.0}%",
                        100.0 * (1.0 - compressed as f64 / data.len() as f64)
                    )
                }
            };
            println!("{verb}: {name} ({how})");
        }
        let mode = mode_of(path).unwrap_or(if *is_dir { 0o755 } else { 0o644 });
        let mtime = zip_time(mtime_of(&meta));
        new_entries.push((name.clone(), data, Some(mode), mtime, *is_dir, link));
    }
    let code = write_zip(&zipname, &existing, &new_entries, store, level);
    if code != 0 {
        return code;
    }
    if move_files {
        for (_, path, is_dir) in added.iter().rev() {
            let _ = if *is_dir {
                fs::remove_dir(path)
            } else {
                fs::remove_file(path)
            };
        }
    }
    status
}

fn deflated_size(data: &[u8], level: Option<i64>) -> usize {
    let mut enc = flate2::write::DeflateEncoder::new(
        Vec::new(),
        Compression::new(level.unwrap_or(6).clamp(0, 9) as u32),
    );
    let _ = enc.write_all(data);
    enc.finish().map(|v| v.len()).unwrap_or(usize::MAX)
}

type ZipEntry = (String, Vec<u8>, Option<u32>, zip::DateTime, bool, bool);

fn write_zip(
    zipname: &str,
    existing: &[ZipEntry],
    new: &[ZipEntry],
    store: bool,
    level: Option<i64>,
) -> i32 {
    let mut w = zip::ZipWriter::new(io::Cursor::new(Vec::new()));
    for (name, data, mode, mtime, is_dir, link) in existing.iter().chain(new) {
        let method = if store
            || *is_dir
            || data.is_empty()
            || level == Some(0)
            || deflated_size(data, level) >= data.len()
        {
            zip::CompressionMethod::Stored
        } else {
            zip::CompressionMethod::Deflated
        };
        let mut opts = zip::write::SimpleFileOptions::default()
            .compression_method(method)
            .last_modified_time(*mtime);
        if method == zip::CompressionMethod::Deflated {
            opts = opts.compression_level(level);
        }
        if let Some(m) = mode {
            opts = opts.unix_permissions(m & 0o777);
        }
        let r = if *is_dir {
            w.add_directory(name.trim_end_matches('/'), opts)
        } else if *link {
            w.add_symlink(name, String::from_utf8_lossy(data), opts)
        } else {
            w.start_file(name, opts)
                .and_then(|_| w.write_all(data).map_err(zip::result::ZipError::from))
        };
        if let Err(e) = r {
            eprintln!("zip error: {e}");
            return 15;
        }
    }
    match w.finish() {
        Ok(c) => match fs::write(zipname, c.into_inner()) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!(
                    "zip error: Could not create output file ({zipname}): {}",
                    reason(&e)
                );
                15
            }
        },
        Err(e) => {
            eprintln!("zip error: {e}");
            15
        }
    }
}

pub fn unzip(args: Vec<String>) -> i32 {
    let o = Opts::parse(&args[1..], &["d", "x"]);
    let (flags, operands) = (&o.flags, &o.operands);
    let known = [
        "l", "o", "n", "q", "qq", "d", "p", "t", "j", "v", "x", "Z", "1", "h", "hh", "a", "L", "X",
        "C",
    ];
    if let Some((n, _)) = flags.iter().find(|(n, _)| !known.contains(&n.as_str())) {
        eprintln!("error:  -{n}: unknown option");
        return 10;
    }
    let Some(zipname) = operands.first().cloned() else {
        println!(
            "UnZip 6.00 (wasbox). Usage: unzip [-Z] [-opts[modifiers]] file[.zip] [list] [-x xlist] [-d exdir]\n  -p  extract files to pipe, no messages     -l  list files (short format)\n  -t  test compressed archive data            -d  extract files into exdir\n  -o  overwrite files WITHOUT prompting       -n  never overwrite existing files\n  -j  junk paths (do not make directories)    -q  quiet mode (-qq => quieter)\n  -x  exclude files that follow (in xlist)"
        );
        return 0;
    };
    let zipname = if !Path::new(&zipname).exists() && Path::new(&format!("{zipname}.zip")).exists()
    {
        format!("{zipname}.zip")
    } else {
        zipname
    };
    let bytes = match fs::read(&zipname) {
        Ok(b) => b,
        Err(_) => {
            eprintln!("unzip:  cannot find or open {zipname}, {zipname}.zip or {zipname}.ZIP.");
            return 9;
        }
    };
    let mut ar = match zip::ZipArchive::new(io::Cursor::new(bytes)) {
        Ok(a) => a,
        Err(_) => {
            println!("Archive:  {zipname}");
            eprintln!(
                "  End-of-central-directory signature not found.  Either this file is not\n  a zipfile, or it constitutes one disk of a multi-part archive.  In the\n  latter case the central directory and zipfile comment will be found on\n  the last disk(s) of this archive.\nunzip:  cannot find zipfile directory in one of {zipname} or\n        {zipname}.zip, and cannot find {zipname}.ZIP, period."
            );
            return 9;
        }
    };
    let quiet = flags.iter().filter(|(n, _)| n.starts_with('q')).count();
    let list = o.has(&["l", "v", "Z", "1"]);
    let pipe = o.has(&["p"]);
    let test = o.has(&["t"]);
    let overwrite = o.has(&["o"]);
    let never = o.has(&["n"]);
    let junk = o.has(&["j"]);
    let dest = PathBuf::from(o.value(&["d"]).unwrap_or("."));
    let mut excludes: Vec<String> = flags
        .iter()
        .filter(|(n, _)| n == "x")
        .filter_map(|(_, v)| v.clone())
        .collect();
    // `-x` also takes the operands after it.
    let mut members: Vec<String> = Vec::new();
    let mut after_x = false;
    for (i, a) in args.iter().enumerate().skip(1) {
        if a == "-x" {
            after_x = true;
            continue;
        }
        // The list after -x ends at the next option.
        if a.starts_with('-') {
            after_x = false;
        } else if after_x
            && args.get(i.saturating_sub(1)).map(String::as_str) != Some("-d")
            && !excludes.contains(a)
        {
            excludes.push(a.clone());
        }
    }
    for m in &operands[1..] {
        if !excludes.contains(m) {
            members.push(m.clone());
        }
    }
    let wanted = |name: &str| {
        (members.is_empty() || members.iter().any(|m| glob(m, name)))
            && !excludes.iter().any(|x| glob(x, name))
    };
    // `-Z1` (zipinfo -1): the names alone, one per line, nothing else.
    if o.has(&["Z"]) && o.has(&["1"]) {
        for i in 0..ar.len() {
            let Ok(f) = ar.by_index(i) else { continue };
            let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
            if wanted(&name) {
                println!("{name}");
            }
        }
        return 0;
    }
    if !pipe && (quiet == 0 || list) {
        println!("Archive:  {zipname}");
    }
    if list {
        println!("  Length      Date    Time    Name\n---------  ---------- -----   ----");
        let (mut total, mut count) = (0u64, 0usize);
        for i in 0..ar.len() {
            let Ok(f) = ar.by_index(i) else { continue };
            let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
            if !wanted(&name) {
                continue;
            }
            let t = f.last_modified().unwrap_or_default();
            println!(
                "{:>9}  {:04}-{:02}-{:02} {:02}:{:02}   {name}",
                f.size(),
                t.year(),
                t.month(),
                t.day(),
                t.hour(),
                t.minute()
            );
            total += f.size();
            count += 1;
        }
        println!(
            "---------                     -------\n{total:>9}                     {count} file{}",
            if count == 1 { "" } else { "s" }
        );
        return 0;
    }
    let mut status = 0;
    let mut all: Option<bool> = None;
    for i in 0..ar.len() {
        let mut f = match ar.by_index(i) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: {e}");
                status = 2;
                continue;
            }
        };
        let name = f.name().map(|n| n.into_owned()).unwrap_or_default();
        if !wanted(&name) {
            continue;
        }
        let mut data = Vec::new();
        if !f.is_dir()
            && let Err(e) = f.read_to_end(&mut data)
        {
            eprintln!("  error:  invalid compressed data to inflate {name} ({e})");
            status = 2;
            continue;
        }
        if test {
            if quiet == 0 {
                println!("    testing: {name:<24} OK");
            }
            continue;
        }
        if pipe {
            if !f.is_dir()
                && let Err(e) = io::stdout().lock().write_all(&data)
            {
                return broken("unzip", &e);
            }
            continue;
        }
        let Some(rel) = safe_member_path(&name) else {
            eprintln!("warning:  skipped \"../\" path component(s) in {name}");
            status = 1;
            continue;
        };
        let rel = if junk {
            match rel.file_name() {
                Some(n) if !f.is_dir() => PathBuf::from(n),
                _ => continue,
            }
        } else {
            rel
        };
        let target = dest.join(&rel);
        if f.is_dir() {
            if !target.is_dir() {
                if quiet == 0 {
                    println!("   creating: {}", shown_path(&dest, &name));
                }
                if let Err(e) = fs::create_dir_all(&target) {
                    eprintln!(
                        "checkdir error:  cannot create {}\n                 {}",
                        target.display(),
                        reason(&e)
                    );
                    status = 1;
                    continue;
                }
            }
            if let Some(m) = f.unix_mode() {
                set_mode(&target, m);
            }
            continue;
        }
        if let Some(parent) = target.parent()
            && !parent.as_os_str().is_empty()
            && !parent.is_dir()
        {
            if quiet == 0 && !junk {
                println!("   creating: {}/", parent.display());
            }
            let _ = fs::create_dir_all(parent);
        }
        if fs::symlink_metadata(&target).is_ok() && !overwrite {
            if never || all == Some(false) {
                continue;
            }
            if all != Some(true) {
                eprint!(
                    "replace {}? [y]es, [n]o, [A]ll, [N]one, [r]ename: ",
                    target.display()
                );
                let mut answer = String::new();
                let got = io::stdin().read_line(&mut answer).unwrap_or(0);
                match answer.trim() {
                    _ if got == 0 => {
                        eprintln!(" NULL\n(EOF or read error, treating as \"[N]one\" ...)");
                        all = Some(false);
                        status = 1;
                        continue;
                    }
                    "y" | "yes" => {}
                    "A" => all = Some(true),
                    "N" => {
                        all = Some(false);
                        continue;
                    }
                    _ => continue,
                }
            }
        }
        let verb = if f.is_symlink() {
            "    linking"
        } else if f.compression() == zip::CompressionMethod::Stored {
            " extracting"
        } else {
            "  inflating"
        };
        let _ = fs::remove_file(&target);
        let result = if f.is_symlink() {
            symlink(&String::from_utf8_lossy(&data), &target)
        } else {
            fs::write(&target, &data)
        };
        if let Err(e) = result {
            eprintln!(
                "error:  cannot create {}\n        {}",
                target.display(),
                reason(&e)
            );
            status = 1;
            continue;
        }
        if quiet == 0 {
            if f.is_symlink() {
                println!(
                    "{verb}: {} -> {}",
                    shown_path(&dest, &rel.to_string_lossy()),
                    String::from_utf8_lossy(&data)
                );
            } else {
                println!("{verb}: {:<23} ", shown_path(&dest, &rel.to_string_lossy()));
            }
        }
        if !f.is_symlink() {
            if let Some(m) = f.unix_mode() {
                set_mode(&target, m);
            }
            if let Some(t) = f.last_modified() {
                let secs = civil_to_unix(t);
                set_mtime(&target, secs);
            }
        }
    }
    if test && status == 0 {
        println!("No errors detected in compressed data of {zipname}.");
    }
    if !members.is_empty() && status == 0 {
        for m in &members {
            let found = (0..ar.len()).any(|i| {
                ar.by_index(i)
                    .ok()
                    .and_then(|f| f.name().ok().map(|n| glob(m, &n)))
                    .unwrap_or(false)
            });
            if !found {
                eprintln!("caution: filename not matched:  {m}");
                status = 11;
            }
        }
    }
    status
}

fn shown_path(dest: &Path, name: &str) -> String {
    if dest == Path::new(".") {
        name.to_string()
    } else {
        format!("{}/{name}", dest.display())
    }
}

fn civil_to_unix(t: zip::DateTime) -> u64 {
    // Days from civil (inverse of guest_support::civil_time).
    let (y, m, d) = (t.year() as i64, t.month() as i64, t.day() as i64);
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    (days * 86_400 + t.hour() as i64 * 3600 + t.minute() as i64 * 60 + t.second() as i64).max(0)
        as u64
}
