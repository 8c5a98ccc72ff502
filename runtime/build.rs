//! Builds the guest components of the built-in image (`guest-components/`, its own Cargo
//! workspace, target `wasm32-wasip2`) and hands them to the crate through `OUT_DIR`.
//!
//! The guests are built into `target/guests` (shared by every profile, so a test build and
//! a release build compile them once) by a nested `cargo build --release`. If the
//! `wasm32-wasip2` target is missing it is installed with rustup, or the build stops saying
//! what to run.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";
const GUESTS: &[&str] = &["sh", "coreutils", "node"];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    let guests = root.join("guest-components");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!(
        "cargo:rerun-if-changed={}",
        guests.join("Cargo.toml").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        guests.join("Cargo.lock").display()
    );
    for dir in ["sh", "coreutils", "node", "guest-support"] {
        println!("cargo:rerun-if-changed={}", guests.join(dir).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    println!("cargo:rerun-if-env-changed=WASBOX_GUESTS_DIR");

    // A directory of prebuilt guests (e.g. from a packaging step) skips the nested build.
    let built = match std::env::var_os("WASBOX_GUESTS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            ensure_target();
            let target_dir = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"))
                .join("guests");
            build_guests(&guests, &target_dir);
            target_dir.join(TARGET).join("release")
        }
    };
    for g in GUESTS {
        let from = built.join(format!("{g}.wasm"));
        let to = out_dir.join(format!("{g}.wasm"));
        copy_if_changed(&from, &to);
    }
}

fn ensure_target() {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == TARGET)
        })
        .unwrap_or(false);
    if installed {
        return;
    }
    println!(
        "cargo:warning=installing the {TARGET} target with rustup (needed to build the guest programs)"
    );
    let ok = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        panic!(
            "the Rust target {TARGET} is missing and could not be installed; run `rustup target add {TARGET}` and build again"
        );
    }
}

fn build_guests(guests: &Path, target_dir: &Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(guests)
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            TARGET,
            "--target-dir",
        ])
        .arg(target_dir);
    // The outer build's settings are for the host, not for the guests.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().to_string();
        if key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_NET_OFFLINE"
            || key == "RUSTFLAGS"
            || key == "RUSTC_WRAPPER"
            || key == "RUSTC_WORKSPACE_WRAPPER"
            || key == "RUSTDOCFLAGS"
        {
            cmd.env_remove(&key);
        }
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running cargo to build the guest programs: {e}"));
    if !status.success() {
        panic!(
            "building the guest programs in {} failed (see the output above)",
            guests.display()
        );
    }
}

fn copy_if_changed(from: &Path, to: &Path) {
    let new = std::fs::read(from)
        .unwrap_or_else(|e| panic!("reading guest program {}: {e}", from.display()));
    if std::fs::read(to).ok().as_deref() != Some(&new[..]) {
        std::fs::write(to, &new).unwrap_or_else(|e| panic!("writing {}: {e}", to.display()));
    }
}
