//! The compile cache holds native code: `wasbox run` never loads an entry it did not write
//! itself (a corrupt or planted `.cwasm` is compiled again), and refuses a cache directory
//! other users can write or that a sandbox's workspace contains.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::runtime::{cache_dir, run_bounded, text, wasbox};

const LIMIT: Duration = Duration::from_secs(120);

fn run_with_cache(cache: &Path, extra: &[&str]) -> std::process::Output {
    let mut cmd = wasbox();
    cmd.env("WASBOX_CACHE_DIR", cache)
        .arg("run")
        .args(extra)
        .args(["--", "sh", "-c", "echo ok"]);
    run_bounded(cmd, LIMIT)
}

/// The cached shell of a cache directory.
fn cached_sh(cache: &Path) -> PathBuf {
    std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("sh-") && name.ends_with(".cwasm")
        })
        .unwrap_or_else(|| panic!("no cached sh in {}", cache.display()))
}

#[test]
fn corrupt_and_planted_entries_are_compiled_again() {
    let base = tempfile::tempdir().unwrap();
    let cache = base.path().join("cache");
    let out = run_with_cache(&cache, &[]);
    assert_eq!(text(&out.stdout), "ok\n", "{}", text(&out.stderr));
    let entry = cached_sh(&cache);
    let good = std::fs::read(&entry).unwrap();

    // Garbage in place of the compiled shell: compiled again, and the job runs.
    std::fs::write(&entry, b"\x7fELF not what it seems").unwrap();
    let out = run_with_cache(&cache, &[]);
    assert_eq!(text(&out.stdout), "ok\n", "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&entry).unwrap().len(), good.len());

    // An entry and stamp from another cache (another key, another file): not trusted.
    let foreign = cached_sh(&cache_dir());
    std::fs::copy(&foreign, &entry).unwrap();
    let mut stamp = entry.clone().into_os_string();
    stamp.push(".stamp");
    let mut foreign_stamp = foreign.clone().into_os_string();
    foreign_stamp.push(".stamp");
    std::fs::copy(&foreign_stamp, &stamp).unwrap();
    let mut cmd = wasbox();
    cmd.env("WASBOX_CACHE_DIR", &cache)
        .env("WASBOX_LOG", "warn")
        .args(["run", "--", "sh", "-c", "echo ok"]);
    let out = run_bounded(cmd, LIMIT);
    assert_eq!(text(&out.stdout), "ok\n");
    assert!(
        text(&out.stderr).contains("no valid stamp"),
        "{}",
        text(&out.stderr)
    );
    // A stamp of this cache's own now stands beside the rebuilt entry.
    let out = run_with_cache(&cache, &[]);
    assert_eq!(text(&out.stdout), "ok\n");
}

#[test]
fn a_cache_other_users_can_write_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let cache = base.path().join("open");
    std::fs::create_dir(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = run_with_cache(&cache, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("refusing the compile cache"), "{err}");
    assert!(err.contains("other users can write it"), "{err}");
    assert!(
        std::fs::read_dir(&cache).unwrap().next().is_none(),
        "nothing was written"
    );
}

#[test]
fn a_workspace_holding_the_cache_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let cache = base.path().join("project/.cache");
    let out = run_with_cache(
        &cache,
        &["--workspace", base.path().join("project").to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("holds the compile cache"),
        "{}",
        text(&out.stderr)
    );
}
