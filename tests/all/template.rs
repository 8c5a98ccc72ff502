//! Templates: `wasbox template build/ls/rm` on the command line, and sandboxes of the worker
//! API and of E2B started from one by name; hostile recipes and names change nothing.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use wasbox_runtime::{JobSpec, SessionConfig, Sessions};

use crate::snapshot::stdout as exec;
use crate::support::http::Server;
use crate::support::runtime::{run_bounded, wasbox};

fn template(state: &Path, args: &[&str]) -> std::process::Output {
    let mut c = wasbox();
    c.arg("template").args(args).arg("--state-dir").arg(state);
    run_bounded(c, std::time::Duration::from_secs(300))
}

/// A recipe in `dir`: an `app` directory copied from the host (a script that stays
/// executable, a data file), a command that writes beside them, and a variable.
fn recipe(dir: &Path, mount: &str) -> std::path::PathBuf {
    let app = dir.join("app");
    std::fs::create_dir_all(app.join("lib")).unwrap();
    std::fs::write(
        app.join("run.sh"),
        "#!/bin/sh\necho \"run $GREETING $(cat lib/data.txt)\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(app.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(app.join("lib/data.txt"), "forty-two\n").unwrap();
    let file = dir.join("recipe.yaml");
    std::fs::write(
        &file,
        format!(
            "mount: {mount}\nenv:\n  GREETING: hello\nfiles:\n  - from: app\n    to: app\nrun:\n  \
             - echo built > app/built.txt\n  - ln -s {mount}/app/lib/data.txt app/data\n"
        ),
    )
    .unwrap();
    file
}

/// A snapshot of session `from` through the worker API, restored as session `to`.
fn snapshot_and_restore(s: &Server, from: &str, to: &str) {
    let r = s.post(
        &format!("/v1/worker/sessions/{from}:snapshot"),
        &json!({"version": 1}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let snap = r.json()["snapshot_id"].as_str().unwrap().to_string();
    let r = s.post(
        "/v1/worker/sessions:restore",
        &json!({"version": 1, "snapshot_id": snap, "session_id": to}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn templates_are_built_listed_and_removed_and_hostile_input_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = recipe(dir.path(), "/workspace");
    let built = template(
        &state,
        &["build", "web", "--recipe", file.to_str().unwrap()],
    );
    assert!(built.status.success(), "{}", text(&built));

    // From a snapshot tar as well: `wasbox run --snapshot-out`.
    let tar = dir.path().join("s.tar");
    let mut run = wasbox();
    run.args(["run", "--snapshot-out"])
        .arg(&tar)
        .args(["--", "sh", "-c", "echo from-tar > f.txt"]);
    let ran = run_bounded(run, std::time::Duration::from_secs(120));
    assert!(ran.status.success(), "{}", text(&ran));
    let built = template(
        &state,
        &["build", "tarred", "--from-snapshot", tar.to_str().unwrap()],
    );
    assert!(built.status.success(), "{}", text(&built));

    let ls = template(&state, &["ls"]);
    let names: Vec<String> = String::from_utf8_lossy(&ls.stdout)
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    assert_eq!(names, ["tarred", "web"], "{}", text(&ls));

    // Hostile names and recipes: a clear error, and nothing new in the store.
    let before = std::fs::read_dir(state.join("templates")).unwrap().count();
    let bad_recipe = |body: &str| {
        let f = dir.path().join("bad.yaml");
        std::fs::write(&f, body).unwrap();
        template(&state, &["build", "bad", "--recipe", f.to_str().unwrap()])
    };
    for (out, says) in [
        (
            template(
                &state,
                &["build", "../x", "--recipe", file.to_str().unwrap()],
            ),
            "not a template name",
        ),
        (
            template(
                &state,
                &["build", "a/b", "--recipe", file.to_str().unwrap()],
            ),
            "not a template name",
        ),
        (
            bad_recipe("files:\n  - from: app\n    to: ../outside\n"),
            "must stay inside the workspace",
        ),
        (
            bad_recipe("files:\n  - from: app\n    to: /etc/app\n"),
            "must be a path relative to the workspace",
        ),
        (
            bad_recipe("run:\n  - echo no >&2; exit 3\n"),
            "exited with 3: no",
        ),
        (bad_recipe("starts: x\n"), "unknown field"),
        (
            bad_recipe("workdir: ../x\n"),
            "must stay inside the workspace",
        ),
        (
            bad_recipe("workdir: /etc\n"),
            "must be inside the workspace",
        ),
        (bad_recipe("start: \"  \"\n"), "is not a command"),
        (
            template(
                &state,
                &["build", "y", "--from-snapshot", "/nonexistent.tar"],
            ),
            "opening /nonexistent.tar",
        ),
    ] {
        assert!(!out.status.success(), "{}", text(&out));
        assert!(text(&out).contains(says), "wanted `{says}`: {}", text(&out));
    }
    assert_eq!(
        std::fs::read_dir(state.join("templates")).unwrap().count(),
        before
    );
    assert!(!dir.path().join("outside").exists() && !dir.path().join("x.tar").exists());

    let rm = template(&state, &["rm", "tarred"]);
    assert!(rm.status.success(), "{}", text(&rm));
    let again = template(&state, &["rm", "tarred"]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    let ls = template(&state, &["ls"]);
    assert!(String::from_utf8_lossy(&ls.stdout).starts_with("web\t"));
}

#[test]
fn sessions_jobs_and_e2b_sandboxes_start_from_a_template_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let built = template(
        &state,
        &[
            "build",
            "web",
            "--recipe",
            recipe(dir.path(), "/workspace").to_str().unwrap(),
        ],
    );
    assert!(built.status.success(), "{}", text(&built));
    let e2b_dir = dir.path().join("e2b");
    std::fs::create_dir_all(&e2b_dir).unwrap();
    let built = template(
        &state,
        &[
            "build",
            "e2b-web",
            "--recipe",
            recipe(&e2b_dir, "/home/user").to_str().unwrap(),
        ],
    );
    assert!(built.status.success(), "{}", text(&built));
    let s = Server::start(&["--state-dir", state.to_str().unwrap()]);

    // Two sessions of the template: its files, variable, modes and links; each one's writes
    // its own.
    for id in ["one", "two"] {
        let r = s.post(
            "/v1/worker/sessions",
            &json!({"version": 1, "task_id": "t", "session_id": id, "image": "web"}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(
        exec(
            &s,
            "one",
            "cat app/built.txt; cd app && ./run.sh; readlink data; echo mine > own.txt"
        ),
        "built\nrun hello forty-two\n/workspace/app/lib/data.txt\n"
    );
    assert_eq!(
        exec(
            &s,
            "two",
            "ls app; cat app/data; test -e app/own.txt || echo independent"
        ),
        "built.txt\ndata\nlib\nrun.sh\nforty-two\nindependent\n"
    );

    // A session made from a template snapshots and restores as any other.
    snapshot_and_restore(&s, "one", "three");
    assert_eq!(
        exec(&s, "three", "cat app/own.txt app/built.txt"),
        "mine\nbuilt\n"
    );

    // A one-shot job names it the same way.
    let r = s.post(
        "/v1/worker/jobs:run",
        &json!({"version": 1, "task_id": "t", "job_id": "j1",
                "sandbox": {"image": "web", "command": ["sh", "-c", "cat app/lib/data.txt"]}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["stdout"], "forty-two\n", "{}", r.text());

    // E2B's templateID.
    let sbx = crate::e2b::create_from(&s, "e2b-web");
    assert_eq!(
        crate::e2b::run_command(&s, &sbx, "cd /home/user/app && cat built.txt && ./run.sh"),
        "built\nrun hello forty-two\n"
    );
}

/// Waits (bounded) until `file` has content, then prints it: what a start command wrote
/// shortly after the sandbox was answered for.
const WAIT_STARTED: &str =
    "for i in $(seq 200); do test -s started.log && break; sleep 0.05; done; cat started.log";

#[test]
fn a_templates_working_directory_and_start_command_reach_its_sandboxes() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("srv.yaml");
    std::fs::write(
        &file,
        "env:\n  GREETING: hi\nworkdir: /workspace/app\nrun:\n  - pwd > where.txt\n\
         start: echo \"up $GREETING $PWD\" >> started.log; sleep 600\n",
    )
    .unwrap();
    let built = template(
        &state,
        &["build", "srv", "--recipe", file.to_str().unwrap()],
    );
    assert!(built.status.success(), "{}", text(&built));
    let s = Server::start(&["--state-dir", state.to_str().unwrap()]);

    // A session: its commands start in the working directory, where the build's ran, and
    // the start command runs beside them (once per sandbox).
    let r = s.post(
        "/v1/worker/sessions",
        &json!({"version": 1, "task_id": "t", "session_id": "a", "image": "srv"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        exec(
            &s,
            "a",
            &format!("pwd; cat where.txt; {WAIT_STARTED}; pgrep -f -x 'sleep 600' | wc -l")
        ),
        "/workspace/app\n/workspace/app\nup hi /workspace/app\n1\n"
    );
    // A command naming its own directory runs there.
    let r = s.post(
        "/v1/worker/sessions/a/exec",
        &json!({"version": 1, "command": "pwd", "cwd": "/workspace"}),
    );
    assert_eq!(r.json()["stdout"], "/workspace\n", "{}", r.text());
    // A snapshot is taken while no process runs: not while the start command does.
    let r = s.post("/v1/worker/sessions/a:snapshot", &json!({"version": 1}));
    assert_eq!(r.status, 409, "{}", r.text());
    assert!(
        r.text().contains("process(es) run in the sandbox"),
        "{}",
        r.text()
    );
    // Once it has ended, the snapshot keeps the working directory; a restore starts no
    // start command (the snapshot is the session's, not the template).
    exec(&s, "a", "pkill -f -x 'sleep 600'");
    snapshot_and_restore(&s, "a", "b");
    assert_eq!(
        exec(&s, "b", "pwd; pgrep -f -x 'sleep 600' | wc -l"),
        "/workspace/app\n0\n"
    );

    // An E2B sandbox of the template: the same.
    let sbx = crate::e2b::create_from(&s, "srv");
    assert_eq!(
        crate::e2b::run_command(&s, &sbx, &format!("pwd; {WAIT_STARTED}")),
        "/workspace/app\nup hi /workspace/app\n"
    );
    // A pause stops the start command (a pause keeps files, not running processes) and is
    // not refused for it; the resumed sandbox runs it again.
    let r = crate::e2b::control(
        &s,
        "POST",
        &format!("/sandboxes/{}/pause", sbx.id),
        &json!({}),
    );
    assert_eq!(r.status, 204, "{}", r.text());
    let r = crate::e2b::control(
        &s,
        "POST",
        &format!("/sandboxes/{}/resume", sbx.id),
        &json!({}),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        crate::e2b::run_command(
            &s,
            &sbx,
            "for i in $(seq 200); do test \"$(wc -l < started.log)\" -ge 2 && break; \
             sleep 0.05; done; cat started.log; pgrep -f -x 'sleep 600' | wc -l"
        ),
        "up hi /workspace/app\nup hi /workspace/app\n1\n"
    );
}

/// A job started in a session's background (a template's start command) runs beside its
/// execs, is no activity (the session still idles out), and is stopped when it ends.
#[tokio::test]
async fn a_background_job_is_no_activity_and_ends_with_its_session() {
    let runtime = crate::support::runtime::runtime();
    let sessions = Sessions::new(4);
    let mut config = SessionConfig::new("bg");
    config.idle = Duration::from_millis(500);
    let session = sessions
        .create(config, || runtime.sandbox(Default::default()))
        .unwrap();
    let job = session
        .start_background(JobSpec::shell("echo up > started.log; sleep 600"))
        .await
        .unwrap();
    let out = session
        .exec(JobSpec::shell(format!(
            "{WAIT_STARTED}; pgrep -f -x 'sleep 600' | wc -l"
        )))
        .await
        .unwrap();
    assert_eq!(out.stdout, "up\n1\n", "{out:?}");
    tokio::time::sleep(Duration::from_millis(700)).await;
    sessions.reap();
    assert!(
        sessions.get("bg").is_none(),
        "the background job kept it alive"
    );
    let out = tokio::time::timeout(Duration::from_secs(30), job)
        .await
        .expect("the background job outlived its session")
        .unwrap()
        .unwrap();
    assert_ne!(out.exit_code, 0, "{out:?}");
    let refused = session.start_background(JobSpec::shell("true")).await;
    assert!(refused.is_err(), "an ended session started a job");
}
