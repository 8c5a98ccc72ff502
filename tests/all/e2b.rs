//! E2B's API on `wasbox serve`: the wire (control plane, envd's HTTP API and Connect
//! framing) spoken by hand here, and E2B's own SDKs, pinned, installed from the package
//! registries into `target/e2b-sdk/` and run unchanged (`tests/e2b/sdk_check.py` and
//! `.mjs`). Without a registry the SDK tests are skipped with a message, unless
//! WASBOX_REQUIRE_TOOLS is set (as `.ci/run` does), when they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::http::{Reply, Server, TOKEN, request};
use crate::support::runtime::run_bounded;

/// The Python SDK at its newest release, and at an older one that creates sandboxes with
/// the v1 route (`POST /sandboxes`) and checks the key's `e2b_` form.
const PY_NEWEST: &str = "2.63.0";
const PY_OLDER: &str = "2.45.1";
const NPM_VERSION: &str = "2.51.0";
/// E2B's code interpreter SDK (with the newest `e2b` above).
const INTERPRETER_VERSION: &str = "2.11.5";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The node's token in E2B's key form.
pub(crate) fn api_key() -> String {
    wasbox::e2b::api_key_for(TOKEN)
}

fn skip(why: &str) -> Option<PathBuf> {
    crate::support::skip(why);
    None
}

/// Installs a package once per target directory (into a fresh directory renamed into
/// place, so concurrent tests never see half an install).
fn installed(name: &str, install: impl FnOnce(&Path) -> Command) -> Option<PathBuf> {
    let dir = root().join("target/e2b-sdk").join(name);
    if dir.join(".installed").exists() {
        return Some(dir);
    }
    // One install at a time in this process: tests that want the same SDK would otherwise
    // share the temporary directory below (it is named by the process) and remove it under
    // each other. The second finds the first's.
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    if dir.join(".installed").exists() {
        return Some(dir);
    }
    let tmp = root()
        .join("target/e2b-sdk")
        .join(format!(".{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let out = run_bounded(install(&tmp), Duration::from_secs(600));
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        return skip(&format!(
            "could not install {name} from the package registry: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    std::fs::write(tmp.join(".installed"), "").unwrap();
    if std::fs::rename(&tmp, &dir).is_err() {
        // Another test installed it meanwhile.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Some(dir)
}

/// `pip install --target DIR` of `packages`, with the host's python3.
fn pip_target(dir: &Path, packages: &[String]) -> Command {
    let mut c = Command::new("python3");
    c.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--target",
    ])
    .arg(dir)
    .args(packages);
    c
}

fn python_sdk(version: &str) -> Option<PathBuf> {
    installed(&format!("python-{version}"), |dir| {
        pip_target(dir, &[format!("e2b=={version}")])
    })
}

fn sdk_env(server: &Server) -> Vec<(String, String)> {
    let url = format!("http://{}", server.addr);
    vec![
        ("E2B_API_URL".into(), url.clone()),
        ("E2B_VOLUME_API_URL".into(), url.clone()),
        ("E2B_SANDBOX_URL".into(), url),
        ("E2B_API_KEY".into(), api_key()),
    ]
}

fn run_python_check(version: &str) {
    let Some(sdk) = python_sdk(version) else {
        return;
    };
    // A server of the test's own that sandboxes may reach (the egress checks).
    let origin = crate::egress::Origin::start(None);
    let allow = format!("127.0.0.1:{}", origin.addr.port());
    let server = Server::start(&["--allow-net", &allow]);
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("tests/e2b/sdk_check.py"))
        .env("WASBOX_TEST_ORIGIN", origin.url(""))
        .env("PYTHONPATH", &sdk)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(sdk_env(&server));
    let out = run_bounded(cmd, Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "E2B's Python SDK {version} failed:\n{stdout}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
    assert!(stdout.contains("all passed"), "{stdout}");
}

#[test]
fn python_sdk_newest_runs_unchanged() {
    run_python_check(PY_NEWEST);
}

/// E2B's volumes through the newest Python SDK: the control plane's volume routes, the
/// content API with the volume's token, and sandboxes made with `volume_mounts`.
#[test]
fn python_sdk_volumes_run_unchanged() {
    let Some(sdk) = python_sdk(PY_NEWEST) else {
        return;
    };
    let server = Server::start(&[]);
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("tests/e2b/volume_check.py"))
        .env("PYTHONPATH", &sdk)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(sdk_env(&server));
    let out = run_bounded(cmd, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("all passed"),
        "E2B's volumes failed ({}):\n{stdout}\n{}\nserver log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
}

#[test]
fn python_sdk_older_with_the_v1_routes_runs_unchanged() {
    run_python_check(PY_OLDER);
}

/// E2B's code interpreter SDK with the newest `e2b` beside it, installed once.
pub(crate) fn interpreter_sdk() -> Option<PathBuf> {
    installed(&format!("code-interpreter-{INTERPRETER_VERSION}"), |dir| {
        pip_target(
            dir,
            &[
                format!("e2b-code-interpreter=={INTERPRETER_VERSION}"),
                format!("e2b=={PY_NEWEST}"),
            ],
        )
    })
}

/// Runs `tests/e2b/SCRIPT` with E2B's code interpreter SDK against a server of its own; it
/// must print "all passed".
fn run_interpreter_check(script: &str) {
    let Some(sdk) = interpreter_sdk() else {
        return;
    };
    crate::support::runtime::datasci_cache_dir();
    let server = Server::start(&[]);
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("tests/e2b").join(script))
        .env("PYTHONPATH", &sdk)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(sdk_env(&server));
    let out = run_bounded(cmd, Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all passed"),
        "E2B's code interpreter SDK failed ({script}, {}):\n{stdout}\n{}\nserver log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
}

/// E2B's code interpreter SDK, unchanged: `run_code` with its state, streams, errors,
/// rich results, contexts side by side, bash, a timeout (tests/e2b/interpreter_check.py).
#[test]
fn code_interpreter_sdk_runs_unchanged() {
    run_interpreter_check("interpreter_check.py");
}

/// E2B's code interpreter SDK, unchanged, on the `datasci` template: a CSV loaded with
/// pandas, a summary (text and html), numpy, a chart shown as a PNG of the right size
/// (tests/e2b/datasci_check.py).
#[test]
fn code_interpreter_sdk_draws_a_chart_on_datasci() {
    run_interpreter_check("datasci_check.py");
}

/// The code interpreter's wire, by hand: its refusals in E2B's error shape, and the
/// events of a run, one JSON object a line.
#[test]
fn code_interpreter_answers_its_wire() {
    let server = Server::start(&[]);
    let r = control(
        &server,
        "POST",
        "/v2/sandboxes",
        &json!({"templateID": "base", "timeout": 60}),
    );
    let created = r.json();
    assert_eq!(
        created["trafficAccessToken"], created["envdAccessToken"],
        "{created}"
    );
    let s = create(&server);
    let call = |path: &str, method: &str, token: Option<(&str, &str)>, body: &str| -> Reply {
        let mut headers = vec![
            ("E2b-Sandbox-Id", s.id.as_str()),
            ("E2b-Sandbox-Port", "49999"),
            ("Content-Type", "application/json"),
        ];
        headers.extend(token);
        request(server.addr, method, path, &headers, body.as_bytes())
    };
    let token = Some(("X-Access-Token", s.token.as_str()));
    let traffic = Some(("E2B-Traffic-Access-Token", s.token.as_str()));

    // Refusals.
    let r = call("/execute", "POST", None, r#"{"code": "1"}"#);
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(r.json()["code"], 401);
    let r = call("/execute", "POST", Some(("X-Access-Token", "wrong")), "{}");
    assert_eq!(r.status, 401);
    for (body, status) in [
        ("not json", 400),
        (r#"{"language": "python"}"#, 400),
        (
            r#"{"code": "1", "language": "python", "context_id": "x"}"#,
            400,
        ),
        (r#"{"code": "1", "context_id": "nope"}"#, 404),
        (r#"{"code": "1", "language": "cobol"}"#, 400),
        (r#"{"code": "1", "env_vars": {"A=B": "x"}}"#, 400),
    ] {
        let r = call("/execute", "POST", token, body);
        assert_eq!(r.status, status, "{body}: {}", r.text());
        assert!(r.json()["message"].is_string(), "{body}: {}", r.text());
    }
    let r = call("/contexts", "POST", token, r#"{"cwd": "/nowhere"}"#);
    assert_eq!(r.status, 400, "{}", r.text());
    let r = call("/contexts/nope", "DELETE", token, "");
    assert_eq!(r.status, 404, "{}", r.text());
    let r = call("/contexts/nope/restart", "POST", token, "");
    assert_eq!(r.status, 404, "{}", r.text());
    let gone = request(
        server.addr,
        "POST",
        "/execute",
        &[("E2b-Sandbox-Id", "nosuchsandbox"), ("X-Access-Token", "x")],
        br#"{"code": "1"}"#,
    );
    assert_eq!(gone.status, 502, "{}", gone.text());

    // A run: its events, one JSON object a line, the traffic token accepted.
    let r = call(
        "/execute",
        "POST",
        traffic,
        r#"{"code": "print('hi')\n6 * 7", "env_vars": {"A": "b"}}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let events: Vec<Value> = r
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[0]["type"], "stdout");
    assert_eq!(events[0]["text"], "hi\n");
    assert!(events[0]["timestamp"].as_u64().unwrap() > 0);
    assert_eq!(events[1]["type"], "result");
    assert_eq!(events[1]["text"], "42");
    assert_eq!(events[1]["is_main_result"], true);
    assert_eq!(events[2]["type"], "number_of_executions");
    assert_eq!(events[2]["execution_count"], 1);

    // Contexts are bounded.
    let mut made = 1; // the default Python context, used above
    loop {
        let r = call("/contexts", "POST", token, r#"{"language": "python"}"#);
        if r.status != 200 {
            assert_eq!(r.status, 429, "{}", r.text());
            break;
        }
        assert!(r.json()["id"].is_string());
        made += 1;
        assert!(made <= 16, "more than 16 contexts");
    }
    assert_eq!(made, 16);
    let list = call("/contexts", "GET", token, "").json();
    assert_eq!(list.as_array().unwrap().len(), 16, "{list}");
}

#[test]
fn js_sdk_runs_unchanged() {
    if Command::new("node").arg("--version").output().is_err()
        || Command::new("npm").arg("--version").output().is_err()
    {
        skip("node and npm are not installed");
        return;
    }
    let Some(dir) = installed(&format!("npm-{NPM_VERSION}"), |dir| {
        let mut c = Command::new("npm");
        c.args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(dir)
            .arg(format!("e2b@{NPM_VERSION}"));
        c
    }) else {
        return;
    };
    // ES modules resolve `e2b` from node_modules beside the script.
    let script = dir.join("sdk_check.mjs");
    std::fs::copy(root().join("tests/e2b/sdk_check.mjs"), &script).unwrap();
    let server = Server::start(&[]);
    let mut cmd = Command::new("node");
    cmd.arg(&script).envs(sdk_env(&server));
    let out = run_bounded(cmd, Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "E2B's JS SDK failed:\n{stdout}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
}

// ----- the wire, by hand -----

pub(crate) fn control(server: &Server, method: &str, path: &str, body: &Value) -> Reply {
    let key = api_key();
    request(
        server.addr,
        method,
        path,
        &[("X-API-KEY", &key), ("Content-Type", "application/json")],
        &serde_json::to_vec(body).unwrap(),
    )
}

pub(crate) struct Sbx {
    pub(crate) id: String,
    pub(crate) token: String,
}

/// Runs `script` in `bash -c` in the sandbox through envd's `process.Process/Start`: its
/// stdout.
pub(crate) fn run_command(server: &Server, s: &Sbx, script: &str) -> String {
    let start = json!({"process": {"cmd": "/bin/bash", "args": ["-c", script]}});
    let msgs = stream(server, s, "/process.Process/Start", &start, &[]);
    msgs.iter()
        .filter_map(|(_, m)| m["event"]["data"]["stdout"].as_str())
        .map(|d| {
            use base64::Engine as _;
            String::from_utf8(base64::engine::general_purpose::STANDARD.decode(d).unwrap()).unwrap()
        })
        .collect()
}

pub(crate) fn create(server: &Server) -> Sbx {
    create_from(server, "base")
}

/// A sandbox of `template` (an image or a template's name), created as the SDK does.
pub(crate) fn create_from(server: &Server, template: &str) -> Sbx {
    let r = control(
        server,
        "POST",
        "/v2/sandboxes",
        &json!({"templateID": template, "timeout": 60}),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    assert_eq!(v["envdVersion"], wasbox::e2b::ENVD_VERSION);
    Sbx {
        id: v["sandboxID"].as_str().unwrap().into(),
        token: v["envdAccessToken"].as_str().unwrap().into(),
    }
}

fn envd(
    server: &Server,
    s: &Sbx,
    path: &str,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut headers = vec![
        ("E2b-Sandbox-Id", s.id.as_str()),
        ("X-Access-Token", s.token.as_str()),
        ("Content-Type", content_type),
    ];
    headers.extend_from_slice(extra);
    request(server.addr, "POST", path, &headers, body)
}

fn unary(server: &Server, s: &Sbx, method: &str, body: &Value) -> Reply {
    envd(
        server,
        s,
        method,
        "application/json",
        &[],
        &serde_json::to_vec(body).unwrap(),
    )
}

fn envelope(flags: u8, msg: &[u8]) -> Vec<u8> {
    let mut v = vec![flags];
    v.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    v.extend_from_slice(msg);
    v
}

/// The messages of a stream answer, the end-of-stream one last (flag 2).
fn envelopes(body: &[u8]) -> Vec<(u8, Value)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 5 <= body.len() {
        let len = u32::from_be_bytes(body[at + 1..at + 5].try_into().unwrap()) as usize;
        out.push((
            body[at],
            serde_json::from_slice(&body[at + 5..at + 5 + len]).unwrap(),
        ));
        at += 5 + len;
    }
    assert_eq!(at, body.len(), "trailing bytes in the stream");
    out
}

pub(crate) fn stream(
    server: &Server,
    s: &Sbx,
    method: &str,
    body: &Value,
    extra: &[(&str, &str)],
) -> Vec<(u8, Value)> {
    let r = envd(
        server,
        s,
        method,
        "application/connect+json",
        extra,
        &envelope(0, &serde_json::to_vec(body).unwrap()),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/connect+json"));
    envelopes(&r.body)
}

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn control_plane_answers_e2b_errors() {
    // Templates are the node's image rules: here only `python:*` (and the image's own name).
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("node.yaml");
    std::fs::write(
        &config,
        "sandbox:\n  images:\n    - match: \"python:*\"\n      image: base\n",
    )
    .unwrap();
    let server = Server::start(&["--max-sessions", "2", "--config", config.to_str().unwrap()]);
    // No key, a wrong key: 401 with E2B's error body.
    let r = request(server.addr, "POST", "/v2/sandboxes", &[], b"{}");
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["code"], 401);
    let r = request(
        server.addr,
        "GET",
        "/sandboxes",
        &[("X-API-KEY", "e2b_00")],
        b"",
    );
    assert_eq!(r.status, 401);
    // The raw token works too, as a key and as a bearer token.
    let r = request(
        server.addr,
        "GET",
        "/sandboxes",
        &[("X-API-KEY", TOKEN)],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let bearer = format!("Bearer {TOKEN}");
    let r = request(
        server.addr,
        "GET",
        "/v2/sandboxes",
        &[("Authorization", &bearer)],
        b"",
    );
    assert_eq!(r.status, 200);
    // A route E2B's API has and wasbox does not (a newer SDK's): E2B's error shape, which
    // the SDKs read; the worker API's own paths keep their problem documents.
    for path in ["/sandboxes/x/nosuch", "/v3/templates", "/teams"] {
        let r = control(&server, "GET", path, &json!({}));
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        assert_eq!(r.json()["code"], 404, "{path}: {}", r.text());
        assert!(r.json()["message"].is_string());
    }
    let r = request(
        server.addr,
        "GET",
        "/v1/worker/nosuch",
        &[("Authorization", &bearer)],
        b"",
    );
    assert_eq!(r.status, 404);
    assert!(r.json()["title"].is_string(), "{}", r.text());
    // Bad requests.
    for body in [
        json!({"autoResume": {"enabled": true}}),
        json!({"autoPause": true, "autoPauseMemory": false, "autoResume": {"enabled": true}}),
    ] {
        let r = control(&server, "POST", "/v2/sandboxes", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert!(r.json()["message"].as_str().unwrap().contains("autoResume"));
    }
    let r = control(
        &server,
        "POST",
        "/v2/sandboxes",
        &json!({"templateID": "no-such-template"}),
    );
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("no-such-template")
    );
    for timeout in [json!(0), json!(-5), json!(86_401)] {
        let r = control(
            &server,
            "POST",
            "/v2/sandboxes",
            &json!({"timeout": timeout}),
        );
        assert_eq!(r.status, 400, "{timeout}: {}", r.text());
    }
    let key = api_key();
    let r = request(
        server.addr,
        "POST",
        "/sandboxes",
        &[("X-API-KEY", &key)],
        b"{not json",
    );
    assert_eq!(r.status, 400);
    let r = control(
        &server,
        "POST",
        "/v2/sandboxes",
        &json!({"envVars": {"A=B": "1"}}),
    );
    assert_eq!(r.status, 400);
    let r = control(
        &server,
        "POST",
        "/v2/sandboxes",
        &json!({"templateID": "python:3.12"}),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let mapped = r.json()["sandboxID"].as_str().unwrap().to_string();
    assert_eq!(
        control(
            &server,
            "DELETE",
            &format!("/sandboxes/{mapped}"),
            &json!({})
        )
        .status,
        204
    );
    // Two sandboxes fill this node; the third is 429 with Retry-After, not a failure.
    let a = create(&server);
    let b = create(&server);
    let r = control(
        &server,
        "POST",
        "/sandboxes",
        &json!({"templateID": "base"}),
    );
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(r.header("retry-after").is_some());
    // Info, list with a metadata filter and paging, timeout, kill.
    let r = control(&server, "GET", &format!("/sandboxes/{}", a.id), &json!({}));
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["state"], "running");
    let r = control(&server, "GET", "/v2/sandboxes?limit=1", &json!({}));
    assert_eq!(r.json().as_array().unwrap().len(), 1);
    assert_eq!(r.header("x-next-token"), Some("1"));
    let r = control(&server, "GET", "/v2/sandboxes?metadata=k%3Dv", &json!({}));
    assert_eq!(r.json(), json!([]));
    let r = control(
        &server,
        "POST",
        &format!("/sandboxes/{}/timeout", a.id),
        &json!({"timeout": -1}),
    );
    assert_eq!(r.status, 400);
    let r = control(
        &server,
        "POST",
        &format!("/sandboxes/{}/timeout", a.id),
        &json!({"timeout": 30}),
    );
    assert_eq!(r.status, 204);
    // Pause keeps the files; resume brings the sandbox back under its id; what cannot be
    // kept is refused.
    let pause = |body: Value| {
        control(
            &server,
            "POST",
            &format!("/sandboxes/{}/pause", a.id),
            &body,
        )
    };
    assert_eq!(pause(json!({})).status, 204);
    assert_eq!(pause(json!({})).status, 409);
    let r = control(&server, "GET", &format!("/sandboxes/{}", a.id), &json!({}));
    assert_eq!(r.json()["state"], "paused");
    let r = control(
        &server,
        "POST",
        &format!("/sandboxes/{}/resume", a.id),
        &json!({}),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let r = control(
        &server,
        "POST",
        &format!("/sandboxes/{}/resume", a.id),
        &json!({}),
    );
    assert_eq!(r.status, 409);
    let r = control(&server, "POST", "/sandboxes/nope/pause", &json!({}));
    assert_eq!(r.status, 404);
    let r = control(
        &server,
        "POST",
        &format!("/sandboxes/{}/snapshots", a.id),
        &json!({"name": "bad name!"}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let r = control(
        &server,
        "POST",
        &format!("/sandboxes/{}/snapshots", a.id),
        &json!({}),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let snap = r.json()["snapshotID"].as_str().unwrap().to_string();
    let r = control(&server, "DELETE", &format!("/templates/{snap}"), &json!({}));
    assert_eq!(r.status, 204);
    let r = control(&server, "DELETE", &format!("/templates/{snap}"), &json!({}));
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["code"], 404);
    let r = control(
        &server,
        "DELETE",
        &format!("/sandboxes/{}", b.id),
        &json!({}),
    );
    assert_eq!(r.status, 204);
    let r = control(
        &server,
        "DELETE",
        &format!("/sandboxes/{}", b.id),
        &json!({}),
    );
    assert_eq!(r.status, 404);
    // The killed sandbox's envd is gone (502); its slot is free again.
    let r = request(
        server.addr,
        "GET",
        "/health",
        &[("E2b-Sandbox-Id", &b.id), ("X-Access-Token", &b.token)],
        b"",
    );
    assert_eq!(r.status, 502);
    create(&server);
    // The worker API beside it is untouched.
    assert_eq!(server.get("/v1/worker/telemetry/node:info").status, 200);
    // A timeout of 0 is "now" (how E2B's SDK forces what a timeout does): it ends.
    let r = control(
        &server,
        "POST",
        &format!("/sandboxes/{}/timeout", a.id),
        &json!({"timeout": 0}),
    );
    assert_eq!(r.status, 204);
    let r = control(&server, "GET", &format!("/sandboxes/{}", a.id), &json!({}));
    assert_eq!(r.status, 404, "{}", r.text());
}

#[test]
fn envd_speaks_connect_with_the_json_codec() {
    let server = Server::start(&[]);
    let s = create(&server);
    let other = create(&server);
    // Health: the sandbox's own token only.
    let health = |id: &str, token: &str| {
        request(
            server.addr,
            "GET",
            "/health",
            &[("E2b-Sandbox-Id", id), ("X-Access-Token", token)],
            b"",
        )
        .status
    };
    assert_eq!(health(&s.id, &s.token), 204);
    assert_eq!(health(&s.id, &other.token), 401);
    assert_eq!(health(&s.id, ""), 401);
    assert_eq!(health("inosuchsandbox", &s.token), 502);
    let swapped = Sbx {
        id: other.id.clone(),
        token: s.token.clone(),
    };
    let r = unary(&server, &swapped, "/process.Process/List", &json!({}));
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (401, json!("unauthenticated"))
    );

    // Unary calls and their errors.
    let r = unary(&server, &s, "/process.Process/List", &json!({}));
    assert_eq!((r.status, r.json()), (200, json!({"processes": []})));
    let r = envd(
        &server,
        &s,
        "/process.Process/List",
        "text/plain",
        &[],
        b"{}",
    );
    assert_eq!(r.status, 415);
    let r = envd(
        &server,
        &s,
        "/process.Process/List",
        "application/json",
        &[],
        b"{nope",
    );
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (400, json!("invalid_argument"))
    );
    // A method the service does not have: envd's Connect handler does not serve the path.
    let r = unary(&server, &s, "/process.Process/Fly", &json!({}));
    assert_eq!((r.status, r.text().as_str()), (404, "404 page not found\n"));
    let r = unary(
        &server,
        &s,
        "/filesystem.Filesystem/Stat",
        &json!({"path": "/home/user/none"}),
    );
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (404, json!("not_found"))
    );
    let r = unary(
        &server,
        &s,
        "/filesystem.Filesystem/Stat",
        &json!({"path": "/etc/passwd"}),
    );
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (403, json!("permission_denied"))
    );
    let r = unary(
        &server,
        &s,
        "/process.Process/SendSignal",
        &json!({"process": {"pid": 99999}, "signal": "SIGNAL_SIGKILL"}),
    );
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (404, json!("not_found"))
    );
    let r = envd(
        &server,
        &s,
        "/process.Process/List",
        "application/json",
        &[("Connect-Timeout-Ms", "soon")],
        b"{}",
    );
    assert_eq!(r.status, 400);

    // A server stream: start, output, end, end of stream.
    let start = json!({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo hi; echo err >&2; exit 3"]}});
    let msgs = stream(&server, &s, "/process.Process/Start", &start, &[]);
    assert!(
        msgs[0].1["event"]["start"]["pid"].as_u64().is_some(),
        "{msgs:?}"
    );
    let text = |key: &str| -> String {
        msgs.iter()
            .filter_map(|(_, m)| m["event"]["data"][key].as_str())
            .map(|d| {
                use base64::Engine as _;
                String::from_utf8(base64::engine::general_purpose::STANDARD.decode(d).unwrap())
                    .unwrap()
            })
            .collect()
    };
    assert_eq!(text("stdout"), "hi\n");
    assert_eq!(text("stderr"), "err\n");
    let n = msgs.len();
    assert_eq!(
        msgs[n - 2].1["event"]["end"],
        json!({"exitCode": 3, "exited": true, "status": "exit status 3"})
    );
    assert_eq!(msgs[n - 1], (2, json!({})));

    // A request that is not enveloped: HTTP 200, and the error in the end of stream.
    let r = envd(
        &server,
        &s,
        "/process.Process/Start",
        "application/connect+json",
        &[],
        b"{}",
    );
    assert_eq!(r.status, 200);
    let msgs = envelopes(&r.body);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].0, 2);
    assert_eq!(msgs[0].1["error"]["code"], "invalid_argument");

    // The client's deadline ends the stream, not the process; Connect streams it again.
    let start = json!({"process": {"cmd": "/bin/bash", "args": ["-c", "sleep 1; echo late"]}, "tag": "slow"});
    let msgs = stream(
        &server,
        &s,
        "/process.Process/Start",
        &start,
        &[("Connect-Timeout-Ms", "200")],
    );
    let pid = msgs[0].1["event"]["start"]["pid"].as_u64().unwrap();
    assert_eq!(
        msgs.last().unwrap().1["error"]["code"],
        "deadline_exceeded",
        "{msgs:?}"
    );
    let r = unary(&server, &s, "/process.Process/List", &json!({}));
    assert_eq!(r.json()["processes"][0]["pid"], pid);
    assert_eq!(r.json()["processes"][0]["tag"], "slow");
    let msgs = stream(
        &server,
        &s,
        "/process.Process/Connect",
        &json!({"process": {"tag": "slow"}}),
        &[],
    );
    assert_eq!(msgs[0].1["event"]["start"]["pid"], pid);
    assert!(
        msgs.iter()
            .any(|(_, m)| m["event"]["data"]["stdout"] == b64("late\n")),
        "{msgs:?}"
    );
    assert_eq!(msgs[msgs.len() - 2].1["event"]["end"]["exitCode"], 0);

    // Input to stdin, then its end; a kill ends a process with `signal: killed`.
    let r = envd(
        &server,
        &s,
        "/process.Process/Start",
        "application/connect+json",
        &[("Connect-Timeout-Ms", "300")],
        &envelope(0, br#"{"process":{"cmd":"cat"},"stdin":true}"#),
    );
    let pid = envelopes(&r.body)[0].1["event"]["start"]["pid"]
        .as_u64()
        .unwrap();
    let r = unary(
        &server,
        &s,
        "/process.Process/SendInput",
        &json!({"process": {"pid": pid}, "input": {"stdin": b64("abc")}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        unary(
            &server,
            &s,
            "/process.Process/CloseStdin",
            &json!({"process": {"pid": pid}})
        )
        .status,
        200
    );
    let msgs = stream(
        &server,
        &s,
        "/process.Process/Start",
        &json!({"process": {"cmd": "sleep", "args": ["30"]}}),
        &[("Connect-Timeout-Ms", "300")],
    );
    let sleeper = msgs[0].1["event"]["start"]["pid"].as_u64().unwrap();
    let r = unary(
        &server,
        &s,
        "/process.Process/SendSignal",
        &json!({"process": {"pid": sleeper}, "signal": "SIGNAL_SIGKILL"}),
    );
    assert_eq!(r.status, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let procs = unary(&server, &s, "/process.Process/List", &json!({})).json();
        let pids: Vec<u64> = procs["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pid"].as_u64().unwrap())
            .collect();
        if !pids.contains(&sleeper) && !pids.contains(&pid) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // A cwd in the read-only root (`/`, `/etc`) is a directory like any other.
    for (cwd, want) in [
        ("/", "/\n"),
        ("/etc", "/etc\n"),
        ("/home/user/..", "/home\n"),
    ] {
        let start = json!({"process": {"cmd": "/bin/bash", "args": ["-c", "pwd"], "cwd": cwd}});
        let msgs = stream(&server, &s, "/process.Process/Start", &start, &[]);
        let out: String = msgs
            .iter()
            .filter_map(|(_, m)| m["event"]["data"]["stdout"].as_str())
            .map(|d| {
                use base64::Engine as _;
                String::from_utf8(base64::engine::general_purpose::STANDARD.decode(d).unwrap())
                    .unwrap()
            })
            .collect();
        assert_eq!(out, want, "{cwd}: {msgs:?}");
    }

    // A bad cwd, a NUL in an argument: refused before anything runs.
    let msgs = stream(
        &server,
        &s,
        "/process.Process/Start",
        &json!({"process": {"cmd": "ls", "cwd": "/home/user/none"}}),
        &[],
    );
    assert_eq!(msgs[0].1["error"]["code"], "invalid_argument");
    let msgs = stream(
        &server,
        &s,
        "/process.Process/Start",
        &json!({"process": {"cmd": "ls", "args": ["a\u{0}b"]}}),
        &[],
    );
    assert_eq!(msgs[0].1["error"]["code"], "invalid_argument");

    // The filesystem service: MakeDir, ListDir with depth, Move, Remove.
    let r = unary(
        &server,
        &s,
        "/filesystem.Filesystem/MakeDir",
        &json!({"path": "a/b/c"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["entry"]["path"], "/home/user/a/b/c");
    assert_eq!(r.json()["entry"]["type"], "FILE_TYPE_DIRECTORY");
    let r = unary(
        &server,
        &s,
        "/filesystem.Filesystem/MakeDir",
        &json!({"path": "a/b/c"}),
    );
    assert_eq!(r.json()["code"], "already_exists");
    let r = unary(
        &server,
        &s,
        "/filesystem.Filesystem/ListDir",
        &json!({"path": "/home/user/a", "depth": 3}),
    );
    let paths: Vec<String> = r.json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(paths, ["/home/user/a/b", "/home/user/a/b/c"]);
    let r = unary(
        &server,
        &s,
        "/filesystem.Filesystem/Move",
        &json!({"source": "a/b", "destination": "/tmp/moved"}),
    );
    assert_eq!(r.json()["entry"]["path"], "/tmp/moved", "{}", r.text());
    let r = unary(
        &server,
        &s,
        "/filesystem.Filesystem/Remove",
        &json!({"path": "/home/user"}),
    );
    assert_eq!(
        r.json()["code"],
        "permission_denied",
        "the home directory itself stays"
    );
}

#[test]
fn envd_files_upload_and_download() {
    let server = Server::start(&[]);
    let s = create(&server);
    let auth = [
        ("E2b-Sandbox-Id", s.id.as_str()),
        ("X-Access-Token", s.token.as_str()),
    ];
    // Octet stream, gzip-encoded.
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut z, b"zipped body").unwrap();
    let gz = z.finish().unwrap();
    let mut h = auth.to_vec();
    h.extend([
        ("Content-Type", "application/octet-stream"),
        ("Content-Encoding", "gzip"),
    ]);
    let r = request(server.addr, "POST", "/files?path=dir/z.txt", &h, &gz);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!([{"name": "z.txt", "type": "file", "path": "/home/user/dir/z.txt"}])
    );
    let r = request(
        server.addr,
        "GET",
        "/files?path=%2Fhome%2Fuser%2Fdir%2Fz.txt",
        &auth,
        b"",
    );
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, b"zipped body".as_slice())
    );
    // Multipart with two files named by their paths.
    let body = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/home/user/m/1.txt\"\r\n\r\none\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/2.txt\"\r\n\r\ntwo\r\n--XyZ--\r\n";
    let mut h = auth.to_vec();
    h.push(("Content-Type", "multipart/form-data; boundary=XyZ"));
    let r = request(server.addr, "POST", "/files", &h, body.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json().as_array().unwrap().len(), 2);
    let r = request(server.addr, "GET", "/files?path=/tmp/2.txt", &auth, b"");
    assert_eq!(r.text(), "two");
    // Errors: not found, outside the sandbox's tree, a broken gzip body, no token.
    let r = request(server.addr, "GET", "/files?path=none.txt", &auth, b"");
    assert_eq!((r.status, r.json()["code"].clone()), (404, json!(404)));
    let r = request(server.addr, "GET", "/files?path=/etc/passwd", &auth, b"");
    assert_eq!(r.status, 400);
    let mut h = auth.to_vec();
    h.extend([
        ("Content-Type", "application/octet-stream"),
        ("Content-Encoding", "gzip"),
    ]);
    let r = request(server.addr, "POST", "/files?path=x", &h, b"not gzip");
    assert_eq!(r.status, 400);
    let r = request(
        server.addr,
        "GET",
        "/files?path=dir/z.txt",
        &[("E2b-Sandbox-Id", s.id.as_str())],
        b"",
    );
    assert_eq!(r.status, 401);
    let mut h = auth.to_vec();
    h.push(("Content-Type", "application/octet-stream"));
    let r = request(
        server.addr,
        "GET",
        "/files?path=dir/z.txt&username=mallory",
        &h,
        b"",
    );
    assert_eq!(r.status, 401);
}
