//! The corpora: snippets with the stdout and exit code the real tools give, run in wasbox in
//! a fresh copy of the fixture workspace, with the pass rate reported by category.
//!
//! - `tests/corpus/cases.txt`: shell command lines, against bash 5 and the GNU tools.
//! - `tests/corpus/agents.txt`: agent-style command lines (text, edits, errors, Python and
//!   Node one-liners, scripts, archives), the same way.
//! - `tests/corpus/node.txt`: JavaScript, against Node.js, run by the `wasbox run` binary
//!   as `node -e CODE` and through `sh -c` with a pipe.
//! - `tests/corpus/python.txt`: Python, against the host's CPython, the same two ways.
//!
//! The expected answers (`expected.json`, `node.json`) are recorded, not written by hand:
//! `WASBOX_RECORD_CORPUS=1 cargo test -p wasbox --test all corpus` runs every case with the
//! host's programs in bubblewrap, the fixture copy mounted at `/workspace`, and rewrites the
//! files. Cases marked `$!` are known to differ today; the test fails if one of them starts
//! passing, so the list stays true.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use wasbox_runtime::{JobSpec, SandboxConfig};

use crate::support::runtime::{run_bounded, runtime, text, wasbox};

struct Case {
    category: String,
    script: String,
    known_to_differ: bool,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus")
}

fn parse(src: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let mut category = String::new();
    for line in src.lines() {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            category = name.to_string();
        } else if let Some(script) = line.strip_prefix("$ ") {
            cases.push(Case {
                category: category.clone(),
                script: script.to_string(),
                known_to_differ: false,
            });
        } else if let Some(script) = line.strip_prefix("$! ") {
            cases.push(Case {
                category: category.clone(),
                script: script.to_string(),
                known_to_differ: true,
            });
        } else if let Some(more) = line.strip_prefix("> ").or(line.strip_prefix('>')) {
            let case = cases
                .last_mut()
                .expect("a continuation line follows a case");
            case.script.push('\n');
            case.script.push_str(more);
        } else {
            assert!(
                line.is_empty() || line.starts_with('#'),
                "cases.txt: cannot read line {line:?}"
            );
        }
    }
    cases
}

/// Copies the fixture to `to`, permissions included.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn fresh_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&corpus_dir().join("fixture"), dir.path());
    dir
}

/// Runs one case with the host's program in bubblewrap (recording only).
fn record_one(argv: &[&str]) -> (String, i32) {
    let dir = fresh_fixture();
    let mut cmd = Command::new("bwrap");
    cmd.args(["--dev-bind", "/", "/", "--bind"])
        .arg(dir.path())
        .args(["/workspace", "--chdir", "/workspace", "--clearenv"])
        .args(["--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin"])
        .args([
            "--setenv",
            "HOME",
            "/workspace",
            "--setenv",
            "PWD",
            "/workspace",
        ])
        .args(["--setenv", "SHELL", "/bin/sh", "--setenv", "LC_ALL", "C"])
        .args(["--setenv", "TZ", "UTC"])
        .args(argv)
        .stdin(Stdio::null());
    let out = run_bounded(cmd, Duration::from_secs(20));
    (text(&out.stdout), out.status.code().unwrap_or(-1))
}

fn record(cases: &[Case], argv: fn(&str) -> Vec<&str>, file: &str) {
    let mut map = serde_json::Map::new();
    for case in cases {
        let (stdout, exit) = record_one(&argv(&case.script));
        map.insert(
            case.script.clone(),
            json!({"stdout": stdout, "exit_code": exit}),
        );
    }
    let path = corpus_dir().join(file);
    let mut body = serde_json::to_string_pretty(&Value::Object(map)).unwrap();
    body.push('\n');
    std::fs::write(path, body).unwrap();
}

/// What one way of running a case printed and returned.
struct Got {
    stdout: String,
    exit_code: i32,
    stderr: String,
}

/// Runs a corpus: every case by every runner, compared with the recording.
async fn check(
    cases_file: &str,
    expected_file: &str,
    record_argv: fn(&str) -> Vec<&str>,
    runners: &[(&str, Runner)],
) {
    let cases = parse(&std::fs::read_to_string(corpus_dir().join(cases_file)).unwrap());
    if std::env::var_os("WASBOX_RECORD_CORPUS").is_some() {
        record(&cases, record_argv, expected_file);
    }
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(corpus_dir().join(expected_file)).unwrap())
            .unwrap();

    let mut by_category: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut newly_passing = Vec::new();
    for case in &cases {
        let want = expected.get(&case.script).unwrap_or_else(|| {
            panic!(
                "no recorded answer for {:?}; record with WASBOX_RECORD_CORPUS=1",
                case.script
            )
        });
        let mut pass = true;
        for (how, run) in runners {
            let dir = fresh_fixture();
            let got = run(dir.path().to_path_buf(), case.script.clone()).await;
            let ok = got.stdout == want["stdout"].as_str().unwrap()
                && i64::from(got.exit_code) == want["exit_code"].as_i64().unwrap();
            if !ok && !case.known_to_differ {
                failures.push(format!(
                    "[{}] ({how}) {:?}\n  want exit {} {:?}\n  got  exit {} {:?}\n  stderr {:?}",
                    case.category,
                    case.script,
                    want["exit_code"],
                    want["stdout"].as_str().unwrap(),
                    got.exit_code,
                    got.stdout,
                    got.stderr
                ));
            }
            pass &= ok;
        }
        let entry = by_category.entry(&case.category).or_default();
        entry.1 += 1;
        if pass {
            entry.0 += 1;
            if case.known_to_differ {
                newly_passing.push(case.script.clone());
            }
        }
    }

    let (mut passed, mut total) = (0, 0);
    let mut report = format!("{cases_file}\ncategory        pass/total\n");
    for (category, (p, t)) in &by_category {
        report.push_str(&format!("{category:<15} {p:>4}/{t}\n"));
        passed += p;
        total += t;
    }
    report.push_str(&format!(
        "all             {passed:>4}/{total} ({:.1}%)\n",
        100.0 * passed as f64 / total as f64
    ));
    println!("{report}");
    assert!(
        failures.is_empty() && newly_passing.is_empty(),
        "{report}\n{} differ:\n{}\n\nmarked `$!` but now pass (mark them `$ `): {newly_passing:?}",
        failures.len(),
        failures.join("\n")
    );
}

type Runner = fn(PathBuf, String) -> std::pin::Pin<Box<dyn std::future::Future<Output = Got>>>;

/// `bash -c SCRIPT` in a sandbox of the in-process runtime on the fixture copy `dir`.
fn bash_in_sandbox(
    dir: PathBuf,
    script: String,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Got>>> {
    Box::pin(async move { run_on(&dir, JobSpec::new(["bash", "-c", &script])).await })
}

/// `spec` in a sandbox of the in-process runtime on the fixture copy `dir`, within 20 s.
async fn run_on(dir: &std::path::Path, spec: JobSpec) -> Got {
    let sandbox = runtime()
        .sandbox(SandboxConfig::default().workspace(dir))
        .unwrap();
    let out = sandbox
        .run(spec.timeout(Duration::from_secs(20)))
        .await
        .unwrap();
    Got {
        stdout: out.stdout,
        exit_code: out.exit_code,
        stderr: out.stderr,
    }
}

#[tokio::test]
async fn corpus() {
    check(
        "cases.txt",
        "expected.json",
        |s| vec!["bash", "-c", s],
        &[("bash -c", bash_in_sandbox)],
    )
    .await;
}

/// The agent-style corpus (`tests/corpus/agents.txt`), run the same way as `cases.txt`.
#[tokio::test]
async fn agents_corpus() {
    check(
        "agents.txt",
        "agents.json",
        |s| vec!["bash", "-c", s],
        &[("bash -c", bash_in_sandbox)],
    )
    .await;
}

/// The real `wasbox run` binary on the workspace: `wasbox run -- PROGRAM FLAG CODE`.
fn wasbox_run(
    dir: PathBuf,
    argv: [&'static str; 2],
    script: String,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Got>>> {
    Box::pin(async move {
        let mut cmd = wasbox();
        cmd.arg("run")
            .arg("--workspace")
            .arg(&dir)
            .arg("--")
            .args(argv)
            .arg(&script);
        let out = tokio::task::spawn_blocking(move || run_bounded(cmd, Duration::from_secs(120)))
            .await
            .unwrap();
        Got {
            stdout: text(&out.stdout),
            exit_code: out.status.code().unwrap_or(-1),
            stderr: text(&out.stderr),
        }
    })
}

/// `sh -c 'set -o pipefail; PROGRAM FLAG "$CODE" | cat'` in process.
fn through_sh(
    dir: PathBuf,
    line: &'static str,
    script: String,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Got>>> {
    Box::pin(
        async move { run_on(&dir, JobSpec::new(["sh", "-c", line]).env("CODE", &script)).await },
    )
}

#[tokio::test]
async fn node_corpus() {
    check(
        "node.txt",
        "node.json",
        |s| vec!["node", "-e", s],
        &[
            ("wasbox run -- node -e", |dir, script| {
                wasbox_run(dir, ["node", "-e"], script)
            }),
            ("sh -c 'node -e \"$CODE\" | cat'", |dir, script| {
                through_sh(dir, "set -o pipefail; node -e \"$CODE\" | cat", script)
            }),
        ],
    )
    .await;
}

#[tokio::test]
async fn python_corpus() {
    // Compile CPython once before the cases (the first use compiles it).
    let _ = crate::support::runtime::sh("python3 -c pass").await;
    check(
        "python.txt",
        "python.json",
        |s| vec!["python3", "-c", s],
        &[
            ("wasbox run -- python3 -c", |dir, script| {
                wasbox_run(dir, ["python3", "-c"], script)
            }),
            ("sh -c 'python3 -c \"$CODE\" | cat'", |dir, script| {
                through_sh(dir, "set -o pipefail; python3 -c \"$CODE\" | cat", script)
            }),
        ],
    )
    .await;
}
