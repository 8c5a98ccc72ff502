//! Builds the guest components of the built-in image (`guest-components/`, its own Cargo
//! workspace, target `wasm32-wasip2`) and hands them to the crate through `OUT_DIR`.
//!
//! The guests are built into `target/guests` by a nested `cargo build`: with the guest
//! workspace's `release` profile for release builds (and benches), and with its
//! `test-guests` profile (optimised, without LTO: half the compile time on a 2-core machine)
//! for test and debug builds, whose tests check what the programs do, not how fast. If the
//! `wasm32-wasip2` target is missing it is installed with rustup, or the build stops saying
//! what to run.
//!
//! `python3` is CPython made into a component by componentize-py (from PyPI, pinned by version
//! and the SHA-256 of its wheels, `guest-components/python/componentize-py.sha256`): the build
//! installs it into a virtual environment under `target/guests` with the host's `python3`,
//! gathers the WIT it needs (WASI's, from the wasmtime-wasi crate, and ours) and runs it on
//! `guest-components/python/main.py`, again only when an input changed.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::Digest as _;

const TARGET: &str = "wasm32-wasip2";
const GUESTS: &[&str] = &["sh", "coreutils", "tools", "node", "bench-compute"];

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
    for dir in [
        "sh",
        "coreutils",
        "tools",
        "node",
        "guest-support",
        "python",
        "agents",
        "bench-compute",
    ] {
        println!("cargo:rerun-if-changed={}", guests.join(dir).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    println!("cargo:rerun-if-env-changed=WASBOX_GUESTS_DIR");
    println!("cargo:rerun-if-env-changed=CLIPPY_ARGS");

    // A directory of prebuilt guests (e.g. from a packaging step) skips the nested build.
    let (built, python) = match std::env::var_os("WASBOX_GUESTS_DIR") {
        Some(dir) => (PathBuf::from(&dir), PathBuf::from(dir).join("python.wasm")),
        None => {
            ensure_target();
            let target_dir = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"))
                .join("guests");
            let profile = match std::env::var("PROFILE").as_deref() {
                Ok("release") => "release",
                _ => "test-guests",
            };
            let cc = c_compiler(&target_dir);
            build_guests(&guests, &target_dir, profile, &cc);
            let python = build_python(&root, &target_dir);
            (target_dir.join(TARGET).join(profile), python)
        }
    };
    println!("cargo:rustc-env=WASBOX_BUILT_GUESTS={}", built.display());
    // The example term agents are components of their own worlds, not programs of the image.
    for g in GUESTS.iter().chain(&[
        "python",
        "llm_agent",
        "llm_agent_term1",
        "bouvet_agent",
        "sidecar_tool_echo",
        "sidecar_chat",
    ]) {
        let from = if *g == "python" {
            python.clone()
        } else {
            built.join(format!("{g}.wasm"))
        };
        let to = out_dir.join(format!("{g}.wasm"));
        let bytes = copy_if_changed(&from, &to);
        // Its SHA-256, so that the compile cache finds its entry without hashing the
        // program at every start.
        write_if_changed(
            &out_dir.join(format!("{g}.wasm.sha256")),
            &sha2::Sha256::digest(&bytes),
        );
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

/// zig, from PyPI's `ziglang` (pinned by version and the SHA-256 of its wheels): its clang
/// and wasi-libc headers compile the guests' C (QuickJS, for `node`) for wasm32; Rust's own
/// linker and wasi-libc link it.
const ZIG: &str = "0.14.1";
const ZIG_SHA256: &[&str] = &[
    // manylinux x86_64
    "6eb9d4d759b292c83810dbee2e9e8e3fbfbf01d864e6e9811bae711fd74e1c2f",
    // manylinux aarch64
    "7994b27f3cbfcedea43f9b7552e38b45857bdf0e9a45065474092dd74e7048cf",
];

/// Installs zig under `target_dir` when missing and returns the environment that makes the
/// guests' build use it (the `cc` crate's compiler and archiver for the target, and zig's
/// caches under `target_dir` too).
fn c_compiler(target_dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let home = target_dir.join(format!("zig-{ZIG}"));
    let zig = home.join("ziglang/zig");
    if !zig.is_file() {
        println!(
            "cargo:warning=installing zig {ZIG} (ziglang) from PyPI into {}",
            home.display()
        );
        std::fs::create_dir_all(target_dir).expect("creating the guests' target directory");
        let python = std::env::var("WASBOX_PYTHON").unwrap_or_else(|_| "python3".into());
        let mut pip = Command::new(python);
        pip.args(["-m", "pip"]);
        pip_install(pip, "ziglang", ZIG, ZIG_SHA256, Some(&home), target_dir);
    }
    // A wheel's files may come without their mode bits.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&zig, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("making {} executable: {e}", zig.display()));
    // The `cc` crate names the target its way (`--target=wasm32-wasip2`); zig's own name for
    // the same C target is wasm32-wasi.
    let cc = target_dir.join("zig-cc");
    write_if_changed(
        &cc,
        format!(
            "#!/bin/sh\n\
             for a; do shift; case \"$a\" in --target=*) ;; *) set -- \"$@\" \"$a\" ;; esac; done\n\
             exec '{}' cc -target wasm32-wasi \"$@\"\n",
            zig.display()
        )
        .as_bytes(),
    );
    let ar = target_dir.join("zig-ar");
    write_if_changed(
        &ar,
        format!("#!/bin/sh\nexec '{}' ar \"$@\"\n", zig.display()).as_bytes(),
    );
    for f in [&cc, &ar] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("making {} executable: {e}", f.display()));
    }
    let cache = target_dir.join("zig-cache");
    vec![
        ("CC_wasm32_wasip2", cc),
        ("AR_wasm32_wasip2", ar),
        // rquickjs would otherwise download a wasi-sdk from outside the package registries.
        ("RQUICKJS_SYS_NO_WASI_SDK", "1".into()),
        ("ZIG_GLOBAL_CACHE_DIR", cache.clone()),
        ("ZIG_LOCAL_CACHE_DIR", cache),
    ]
}

fn build_guests(guests: &Path, target_dir: &Path, profile: &str, cc: &[(&str, PathBuf)]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(guests)
        .args([
            "build",
            "--profile",
            profile,
            "--locked",
            "--target",
            TARGET,
            "--target-dir",
        ])
        .arg(target_dir);
    // The outer build's settings are for the host, not for the guests; but a build that
    // lints while it compiles (`.ci/run`: clippy-driver as the workspace's rustc wrapper, with
    // CLIPPY_ARGS) lints the guests' own crates the same way as they are built.
    let linting = std::env::var_os("CLIPPY_ARGS").is_some();
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().to_string();
        if key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_NET_OFFLINE"
            || key == "RUSTFLAGS"
            || key == "RUSTC_WRAPPER"
            || key == "RUSTC_WORKSPACE_WRAPPER" && !linting
            || key == "RUSTDOCFLAGS"
        {
            cmd.env_remove(&key);
        }
    }
    cmd.envs(cc.iter().map(|(k, v)| (k, v)));
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

/// Copies a guest program into `OUT_DIR` (leaving an unchanged copy alone, so that nothing
/// that includes it is rebuilt); returns its bytes.
fn copy_if_changed(from: &Path, to: &Path) -> Vec<u8> {
    let new = std::fs::read(from)
        .unwrap_or_else(|e| panic!("reading guest program {}: {e}", from.display()));
    write_if_changed(to, &new);
    new
}

fn write_if_changed(to: &Path, new: &[u8]) {
    if std::fs::read(to).ok().as_deref() != Some(new) {
        std::fs::write(to, new).unwrap_or_else(|e| panic!("writing {}: {e}", to.display()));
    }
}

fn run(cmd: &mut Command, what: &str) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("{what}: cannot start {:?}: {e}", cmd.get_program()));
    if !status.success() {
        panic!("{what} failed (see the output above)");
    }
}

/// Where cargo keeps the wasmtime-wasi-http sources this build uses: their `wit/deps` is
/// WASI's packages, `wasi:http` among them, at the version the host serves.
fn wasi_wit(root: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root)
        .args(["metadata", "--format-version", "1", "--locked"])
        .output()
        .expect("running cargo metadata");
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("reading cargo metadata");
    let manifest = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "wasmtime-wasi-http")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("wasmtime-wasi-http in cargo metadata");
    Path::new(manifest).parent().unwrap().join("wit/deps")
}

/// The `tzdata` release bundled with python3 (PyPI's packaging of the IANA database), and the
/// SHA-256 of its wheel.
const TZDATA: &str = "2026.6";
const TZDATA_SHA256: &str = "0a10eec6e13ef16b627fabed9a5f2ba61a62b1c67f327305f4e7e412a70b4aec";

/// Installs `name==version` from PyPI with pip into `target` (a virtual environment's
/// `site-packages` when `None`), refusing any file whose SHA-256 is not one of `hashes`.
fn pip_install(
    mut cmd: Command,
    name: &str,
    version: &str,
    hashes: &[&str],
    target: Option<&Path>,
    scratch: &Path,
) {
    let pins: String = hashes
        .iter()
        .map(|h| format!(" --hash=sha256:{h}"))
        .collect();
    let requirements = scratch.join(format!("{name}-requirements.txt"));
    std::fs::write(&requirements, format!("{name}=={version}{pins}\n"))
        .unwrap_or_else(|e| panic!("writing {}: {e}", requirements.display()));
    cmd.args([
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--require-hashes",
        "-r",
    ])
    .arg(&requirements);
    if let Some(target) = target {
        cmd.args(["--no-compile", "--target"]).arg(target);
    }
    run(&mut cmd, &format!("installing {name} {version} from PyPI"));
}

/// Makes `python.wasm` (the same for every profile: componentize-py's CPython) and returns
/// where it is.
fn build_python(root: &Path, target_dir: &Path) -> PathBuf {
    let src = root.join("guest-components/python");
    // The one place the componentize-py version is written (`wasbox term build` reads it too).
    let version_file = src.join("componentize-py.version");
    println!("cargo:rerun-if-changed={}", version_file.display());
    let componentize_py = std::fs::read_to_string(&version_file)
        .unwrap_or_else(|e| panic!("reading {}: {e}", version_file.display()));
    let componentize_py = componentize_py.trim();
    let hash_file = src.join("componentize-py.sha256");
    println!("cargo:rerun-if-changed={}", hash_file.display());
    let hashes = std::fs::read_to_string(&hash_file)
        .unwrap_or_else(|e| panic!("reading {}: {e}", hash_file.display()));
    let hashes: Vec<&str> = hashes
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let out = target_dir.join("python/python.wasm");
    let stamp_file = target_dir.join("python.stamp");
    let mut stamp =
        format!("componentize-py {componentize_py} {hashes:?}\ntzdata {TZDATA} {TZDATA_SHA256}\n");
    for f in [
        src.join("main.py"),
        src.join("wasbox_pip.py"),
        src.join("wasbox_sqlite3.py"),
        src.join("wasbox_compress.py"),
        src.join("wasbox_http.py"),
        src.join("wasbox_ssl.py"),
        src.join("wasbox_kernel.py"),
        src.join("wit/world.wit"),
        root.join("wit/sandbox/process.wit"),
    ] {
        let text =
            std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
        stamp.push_str(&text);
    }
    let venv = target_dir.join("python-venv");
    let tool = venv.join("bin/componentize-py");
    // `wasbox agent build` uses the same componentize-py for Python agents.
    println!(
        "cargo:rustc-env=WASBOX_BUILD_COMPONENTIZE_PY={}",
        tool.display()
    );
    if out.exists() && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(&stamp) {
        return out;
    }

    let have = Command::new(&tool)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(componentize_py))
        .unwrap_or(false);
    if !have {
        println!(
            "cargo:warning=installing componentize-py {componentize_py} from PyPI into {}",
            venv.display()
        );
        let python = std::env::var("WASBOX_PYTHON").unwrap_or_else(|_| "python3".into());
        run(
            Command::new(&python).args(["-m", "venv"]).arg(&venv),
            "creating a Python virtual environment for componentize-py (needs python3 with venv)",
        );
        pip_install(
            Command::new(venv.join("bin/pip")),
            "componentize-py",
            componentize_py,
            &hashes,
            None,
            target_dir,
        );
    }

    // The IANA time zone database as the `tzdata` package (what `zoneinfo` falls back to
    // when the system has none, as in a sandbox), bundled beside the standard library.
    let tzdata = target_dir.join(format!("python-tzdata-{TZDATA}"));
    if !tzdata.join("tzdata/zoneinfo").is_dir() {
        println!(
            "cargo:warning=installing tzdata {TZDATA} from PyPI into {}",
            tzdata.display()
        );
        pip_install(
            Command::new(venv.join("bin/pip")),
            "tzdata",
            TZDATA,
            &[TZDATA_SHA256],
            Some(&tzdata),
            target_dir,
        );
    }

    // WIT: WASI's packages, ours, and the python world.
    let wit = target_dir.join("python-wit");
    let _ = std::fs::remove_dir_all(&wit);
    std::fs::create_dir_all(wit.join("deps")).expect("creating the python WIT directory");
    for entry in std::fs::read_dir(wasi_wit(root)).expect("reading WASI's WIT") {
        let entry = entry.expect("reading WASI's WIT");
        std::fs::copy(entry.path(), wit.join("deps").join(entry.file_name()))
            .expect("copying WASI's WIT");
    }
    std::fs::copy(
        root.join("wit/sandbox/process.wit"),
        wit.join("deps/sandbox.wit"),
    )
    .expect("copying process.wit");
    std::fs::copy(src.join("wit/world.wit"), wit.join("world.wit")).expect("copying world.wit");

    // The sources, copied: componentize-py imports them with an interpreter of its own that
    // writes a `__pycache__` beside them whatever the environment says, and one in
    // `guest-components/` would make the next cargo run this script (and rebuild every crate
    // above it) again.
    let staged = target_dir.join("python-src");
    let _ = std::fs::remove_dir_all(&staged);
    std::fs::create_dir_all(&staged).expect("creating the python source copy");
    for entry in std::fs::read_dir(&src).expect("reading the python sources") {
        let path = entry.expect("reading the python sources").path();
        if path.extension().is_some_and(|e| e == "py") {
            std::fs::copy(&path, staged.join(path.file_name().unwrap()))
                .unwrap_or_else(|e| panic!("copying {}: {e}", path.display()));
        }
    }
    std::fs::create_dir_all(out.parent().unwrap()).expect("creating the guest output directory");
    run(
        Command::new(&tool)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .arg("-d")
            .arg(&wit)
            .args(["-w", "wasbox:python/python", "componentize", "-p"])
            .arg(&staged)
            .arg("-p")
            .arg(&tzdata)
            .args(["main", "-o"])
            .arg(&out),
        "building the python3 component with componentize-py",
    );
    std::fs::write(&stamp_file, stamp).expect("writing the python stamp");
    out
}
