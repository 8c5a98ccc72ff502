//! `wasbox run`: the real binary, its output, exit codes and options.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use crate::support::runtime::{run_bounded, text, wasbox};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn run_streams_output_and_exits_with_the_job_code() {
    let mut cmd = wasbox();
    cmd.args(["run", "--", "sh", "-c", "echo out; echo err >&2; exit 3"]);
    let out = run_bounded(cmd, LIMIT);
    assert_eq!(text(&out.stdout), "out\n");
    assert_eq!(text(&out.stderr), "err\n");
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn run_without_double_dash_and_with_env() {
    let mut cmd = wasbox();
    cmd.args([
        "run",
        "--env",
        "GREETING=hi there",
        "sh",
        "-c",
        "echo \"$GREETING\" \"$PWD\"",
    ]);
    let out = run_bounded(cmd, LIMIT);
    assert_eq!(text(&out.stdout), "hi there /workspace\n");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn run_times_out_with_124() {
    let mut cmd = wasbox();
    cmd.args([
        "run",
        "--timeout",
        "1",
        "--",
        "sh",
        "-c",
        "while :; do :; done",
    ]);
    let started = std::time::Instant::now();
    let out = run_bounded(cmd, LIMIT);
    assert_eq!(out.status.code(), Some(124));
    assert!(
        text(&out.stderr).contains("timed out"),
        "{}",
        text(&out.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn run_uses_the_given_workspace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.txt"), "from the host\n").unwrap();
    let mut cmd = wasbox();
    cmd.arg("run").arg("--workspace").arg(dir.path()).args([
        "--",
        "sh",
        "-c",
        "cat in.txt > out.txt; echo made >> out.txt",
    ]);
    let out = run_bounded(cmd, LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
    assert_eq!(written, "from the host\nmade\n");
}

#[test]
fn run_passes_piped_stdin() {
    let mut cmd = wasbox();
    cmd.args(["run", "--", "wc", "-l"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"a\nb\nc\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(text(&out.stdout).trim(), "3");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn run_unknown_program_is_127() {
    let mut cmd = wasbox();
    cmd.args(["run", "--", "no-such-program", "x"]);
    let out = run_bounded(cmd, LIMIT);
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(
        text(&out.stderr),
        "sh: no-such-program: command not found\n"
    );
}

#[test]
fn run_rejects_bad_arguments() {
    for args in [
        vec!["run"],
        vec!["run", "--timeout", "soon", "--", "true"],
        vec!["run", "--env", "NOEQUALS", "--", "true"],
        vec!["run", "--bogus", "--", "true"],
        vec!["frobnicate"],
    ] {
        let mut cmd = wasbox();
        cmd.args(&args);
        let out = run_bounded(cmd, LIMIT);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains("--help"), "{args:?}: {err}");
    }
    // A timeout too large for any clock is refused, not a panic.
    let mut cmd = wasbox();
    cmd.args(["run", "--timeout", "1e19", "--", "true"]);
    let out = run_bounded(cmd, LIMIT);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("maximum"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn help_and_version() {
    let help = |args: &[&str]| {
        let mut cmd = wasbox();
        cmd.args(args);
        let out = run_bounded(cmd, LIMIT);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        text(&out.stdout)
    };
    let top = help(&["--help"]);
    for cmd in ["serve", "run", "term"] {
        assert!(top.contains(cmd), "{top}");
    }
    assert_eq!(
        help(&["--version"]).trim(),
        format!("wasbox {}", env!("CARGO_PKG_VERSION"))
    );
    let run = help(&["run", "--help"]);
    assert!(
        run.contains("--timeout") && run.contains("exit code 124"),
        "{run}"
    );
    // `-h` before the program is wasbox's, not the guest's.
    assert!(help(&["run", "-h"]).contains("--timeout"));
    let serve = help(&["serve", "--help"]);
    for option in ["--listen", "--token-file", "--config", "--max-concurrent"] {
        assert!(serve.contains(option), "{option}: {serve}");
    }
    let term = help(&["term", "--help"]);
    for sub in ["serve", "stdio", "run", "build"] {
        assert!(term.contains(sub), "{term}");
    }
    assert!(help(&["term", "serve", "--help"]).contains("--workdir"));
    // After the program, options are the guest's.
    let mut cmd = wasbox();
    cmd.args(["run", "--", "sh", "-c", "echo \"$@\"", "sh", "--help", "-h"]);
    let out = run_bounded(cmd, LIMIT);
    assert_eq!(text(&out.stdout), "--help -h\n");
}

#[test]
fn run_stops_a_flood_at_max_output() {
    let mut cmd = wasbox();
    cmd.args(["run", "--max-output", "1M", "--", "yes"]);
    let out = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
    assert_eq!(out.stdout.len(), 1 << 20, "exactly the limit is written");
    assert!(
        text(&out.stderr).contains("more than --max-output 1048576 bytes"),
        "{}",
        text(&out.stderr)
    );
    // Without a terminal the default is finite; a small job is untouched by it.
    let mut cmd = wasbox();
    cmd.args(["run", "--", "sh", "-c", "echo fine"]);
    let out = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), "fine\n".into())
    );
    let mut cmd = wasbox();
    cmd.args(["run", "--max-output", "lots", "--", "true"]);
    let out = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn run_prepares_an_environment_once_and_starts_from_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("env.tar");
    let snap = snap.to_str().unwrap();
    let mut cmd = wasbox();
    cmd.args([
        "run",
        "--mount",
        "/src",
        "--env",
        "STAGE=prepared",
        "--snapshot-out",
        snap,
        "--",
        "sh",
        "-c",
        "mkdir -p lib && echo 'def f(): return 42' > lib/m.py && ln -s /usr/bin/python3 py",
    ]);
    let out = run_bounded(cmd, LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // An ordinary tar: the manifest first, then the workspace.
    let list = std::process::Command::new("tar")
        .args(["tf", snap])
        .output()
        .unwrap();
    let names = text(&list.stdout);
    assert!(
        names.starts_with("wasbox-snapshot.json\nworkspace\n")
            && names.contains("workspace/lib/m.py"),
        "{names}"
    );

    for round in 0..2 {
        let mut cmd = wasbox();
        cmd.args([
            "run",
            "--from-snapshot",
            snap,
            "--",
            "sh",
            "-c",
            "echo $STAGE $PWD; cd lib && python3 -c 'import m; print(m.f())'; echo x >> m.py",
        ]);
        let out = run_bounded(cmd, LIMIT);
        assert_eq!(
            text(&out.stdout),
            "prepared /src\n42\n",
            "round {round}: {}",
            text(&out.stderr)
        );
    }
    // Compressed with zstd when the name says so; read back whichever it is.
    let zst = dir.path().join("env.tar.zst");
    let mut cmd = wasbox();
    cmd.args(["run", "--from-snapshot", snap, "--snapshot-out"])
        .arg(&zst)
        .args(["--", "sh", "-c", "echo more > more.txt"]);
    let out = run_bounded(cmd, LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list = std::process::Command::new("tar")
        .arg("--zstd")
        .arg("-tf")
        .arg(&zst)
        .output()
        .unwrap();
    assert!(
        text(&list.stdout).contains("workspace/more.txt"),
        "{list:?}"
    );
    let mut cmd = wasbox();
    cmd.arg("run").arg("--from-snapshot").arg(&zst).args([
        "--",
        "sh",
        "-c",
        "cat more.txt; echo $STAGE",
    ]);
    let out = run_bounded(cmd, LIMIT);
    assert_eq!(
        text(&out.stdout),
        "more\nprepared\n",
        "{}",
        text(&out.stderr)
    );
    // A file that is not a snapshot: a clear error, and no job.
    let junk = dir.path().join("junk.tar");
    std::fs::write(&junk, b"not a tar at all").unwrap();
    let mut cmd = wasbox();
    cmd.args([
        "run",
        "--from-snapshot",
        junk.to_str().unwrap(),
        "--",
        "true",
    ]);
    let out = run_bounded(cmd, LIMIT);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("snapshot"),
        "{}",
        text(&out.stderr)
    );
}
