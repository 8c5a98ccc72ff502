//! `wasbox serve` registering with a CyNodeAI orchestrator over loopback HTTP: the control
//! plane's node endpoints (`/v1/nodes/register`, `GET`/`POST /v1/nodes/config`,
//! `/v1/nodes/capability`) are served here with the checks CyNodeAI's own handlers make
//! (PSK, payload versions, node JWT, ack status), and the real binary talks to them.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use crate::support::http::{Server, TOKEN, request};

const PSK: &str = "registration-psk-42";
const SLUG: &str = "wasbox-e2e-node";

#[derive(Default)]
struct Control {
    /// Registrations are answered 503 until this is set (the control plane still starting).
    accepting: bool,
    attempts: usize,
    registrations: Vec<Value>,
    issued: usize,
    /// JWTs the control plane accepts.
    valid: Vec<String>,
    config: Value,
    config_gets: Vec<String>,
    acks: Vec<Value>,
    reports: Vec<Value>,
}

type Shared = Arc<Mutex<Control>>;

fn problem(status: StatusCode, detail: &str) -> Response {
    (
        status,
        [("content-type", "application/problem+json")],
        json!({ "type": "about:blank", "title": status.canonical_reason(), "status": status.as_u16(), "detail": detail }).to_string(),
    )
        .into_response()
}

fn node_jwt(c: &Control, headers: &HeaderMap) -> Option<String> {
    let t = headers
        .get("authorization")?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")?;
    c.valid.iter().any(|v| v == t).then(|| t.to_string())
}

async fn register(State(s): State<Shared>, Json(body): Json<Value>) -> Response {
    let mut c = s.lock().unwrap();
    c.attempts += 1;
    if !c.accepting {
        return problem(StatusCode::SERVICE_UNAVAILABLE, "control plane starting");
    }
    if body["psk"] != PSK {
        return problem(StatusCode::UNAUTHORIZED, "Invalid registration PSK");
    }
    if body["capability"]["version"] != 1 {
        return problem(StatusCode::BAD_REQUEST, "Unsupported capability version");
    }
    if body["capability"]["node"]["node_slug"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        return problem(StatusCode::BAD_REQUEST, "Node slug is required");
    }
    c.registrations.push(body);
    c.issued += 1;
    let jwt = format!("node-jwt-{}", c.issued);
    c.valid.push(jwt.clone());
    let base = "http://".to_string() + &ADDR.lock().unwrap().unwrap().to_string();
    (
        StatusCode::CREATED,
        Json(json!({
            "version": 1,
            "issued_at": "2026-11-25T00:00:00Z",
            "orchestrator": { "base_url": base, "endpoints": {
                "worker_registration_url": format!("{base}/v1/nodes/register"),
                "node_report_url": format!("{base}/v1/nodes/capability"),
                "node_config_url": format!("{base}/v1/nodes/config"),
            }},
            "auth": { "node_jwt": jwt, "expires_at": "2099-01-01T00:00:00Z" },
        })),
    )
        .into_response()
}

async fn get_config(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let mut c = s.lock().unwrap();
    let Some(jwt) = node_jwt(&c, &headers) else {
        return problem(StatusCode::UNAUTHORIZED, "Node authentication required");
    };
    c.config_gets.push(jwt);
    Json(c.config.clone()).into_response()
}

async fn ack(State(s): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let mut c = s.lock().unwrap();
    if node_jwt(&c, &headers).is_none() {
        return problem(StatusCode::UNAUTHORIZED, "Node authentication required");
    }
    if body["version"] != 1 {
        return problem(StatusCode::BAD_REQUEST, "Unsupported config ack version");
    }
    if body["node_slug"] != SLUG {
        return problem(
            StatusCode::BAD_REQUEST,
            "node_slug does not match authenticated node",
        );
    }
    if body["status"] != "applied" && body["status"] != "failed" {
        return problem(StatusCode::BAD_REQUEST, "status must be applied or failed");
    }
    c.acks.push(body);
    StatusCode::NO_CONTENT.into_response()
}

async fn capability(
    State(s): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut c = s.lock().unwrap();
    if node_jwt(&c, &headers).is_none() {
        return problem(StatusCode::UNAUTHORIZED, "Node authentication required");
    }
    c.reports.push(body);
    StatusCode::NO_CONTENT.into_response()
}

/// The control plane's address, for the bootstrap payload's URLs.
static ADDR: Mutex<Option<SocketAddr>> = Mutex::new(None);

/// Serves the control plane's node endpoints on 127.0.0.1 from a thread of its own.
fn control_plane(state: Shared) -> SocketAddr {
    let app = Router::new()
        .route("/v1/nodes/register", post(register))
        .route("/v1/nodes/config", axum::routing::get(get_config).post(ack))
        .route("/v1/nodes/capability", post(capability))
        .with_state(state);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    *ADDR.lock().unwrap() = Some(addr);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    addr
}

/// Waits (bounded) until `done` holds of the control plane's records.
fn wait_for(state: &Shared, what: &str, server: &Server, done: impl Fn(&Control) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(&state.lock().unwrap()) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; server log:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn run_job(server: &Server, token: &str, image: &str) -> u16 {
    let body = json!({
        "version": 1, "task_id": "t", "job_id": format!("j-{}", rand_id()),
        "sandbox": { "image": image, "command": ["sh", "-c", "echo hi"] },
    });
    let r = request(
        server.addr,
        "POST",
        "/v1/worker/jobs:run",
        &[
            ("Authorization", &format!("Bearer {token}")),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    );
    if r.status == 200 {
        assert_eq!(r.json()["stdout"], "hi\n", "{}", r.text());
    }
    r.status
}

fn rand_id() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn config(version: &str, token: &str, extra: Value) -> Value {
    let mut c = json!({
        "version": 1,
        "config_version": version,
        "issued_at": "2026-11-25T00:00:00Z",
        "node_slug": SLUG,
        "orchestrator": { "base_url": "http://orchestrator", "endpoints": {
            "worker_api_target_url": "http://127.0.0.1:1", "node_report_url": "http://orchestrator/v1/nodes/capability" } },
        "model_cache": { "cache_url": "" },
        "worker_api": { "orchestrator_bearer_token": token },
        "policy": { "updates": { "enable_dynamic_config": true } },
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

#[test]
fn registers_applies_configuration_and_reports_capabilities() {
    let state: Shared = Arc::default();
    let orch = control_plane(state.clone());
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, format!("{PSK}\n")).unwrap();
    let yaml = dir.path().join("node.yaml");
    std::fs::write(
        &yaml,
        format!(
            "orchestrator:\n  url: http://{orch}/\n  registration_psk_file: {}\n\
             node:\n  id: {SLUG}\n  name: E2E node\n  labels: [sandbox_only]\n\
             worker_api:\n  public_base_url: http://worker-01.example.com:12090\n\
             updates:\n  poll_interval_seconds: 1\n",
            psk.display()
        ),
    )
    .unwrap();
    let server = Server::start_unready(&["--config", yaml.to_str().unwrap()]);

    // Until it has registered and applied a configuration, the node is not ready, and says
    // why (the control plane answers 503 for now).
    wait_for(&state, "a registration attempt", &server, |c| {
        c.attempts >= 1
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let r = request(server.addr, "GET", "/readyz", &[], b"");
        assert_eq!(r.status, 503, "{}", r.text());
        // Once the image is loaded, the reason is the registration, with the refusal (the
        // orchestrator counts the attempt a moment before the node reads its answer).
        if r.text()
            .contains("not yet registered with the orchestrator")
            && r.text().contains("control plane starting")
        {
            break;
        }
        assert!(Instant::now() < deadline, "{}", r.text());
        std::thread::sleep(Duration::from_millis(50));
    }

    {
        let mut c = state.lock().unwrap();
        c.config = config(
            "01JA0000000000000000000001",
            "orch-token-1",
            json!({
                "policy": { "sandbox": { "allowed_images": ["python:*"] },
                            "updates": { "enable_dynamic_config": true } },
                "managed_services": { "services": [
                    { "service_id": "pma-main", "service_type": "pma", "image": "ghcr.io/x/pma:1" } ] },
            }),
        );
        c.accepting = true;
    }
    server.wait_ready();

    // What the node sent: the PSK and a factual capability report.
    let reg = state.lock().unwrap().registrations[0].clone();
    assert_eq!(reg["psk"], PSK);
    let cap = &reg["capability"];
    assert_eq!(cap["version"], 1);
    assert_eq!(cap["node"]["node_slug"], SLUG);
    assert_eq!(cap["node"]["name"], "E2E node");
    assert_eq!(cap["node"]["labels"], json!(["sandbox_only"]));
    assert_eq!(
        cap["worker_api"]["base_url"],
        "http://worker-01.example.com:12090"
    );
    assert_eq!(cap["platform"]["os"], "linux");
    assert!(cap["compute"]["cpu_cores"].as_u64().unwrap() >= 1, "{cap}");
    assert!(cap["compute"]["ram_mb"].as_u64().unwrap() > 0, "{cap}");
    assert_eq!(cap["container_runtime"]["runtime"], "wasbox");
    assert_eq!(cap["inference"]["supported"], false);
    assert_eq!(cap["managed_services"]["supported"], false);
    assert_eq!(cap["sandbox"]["supported"], true);
    let at = cap["reported_at"].as_str().unwrap();
    assert!(
        at.len() >= 20 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
        "{cap}"
    );

    // The configuration was fetched with the node JWT and acknowledged; the service it
    // directed here is reported as not started, with the reason.
    {
        let c = state.lock().unwrap();
        assert_eq!(c.config_gets, vec!["node-jwt-1".to_string()]);
        let ack = &c.acks[0];
        assert_eq!(ack["status"], "applied", "{ack}");
        assert_eq!(ack["config_version"], "01JA0000000000000000000001");
        assert!(
            ack["effective_config_hash"]
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );
        let svc = &ack["managed_services_status"]["services"][0];
        assert_eq!(svc["service_id"], "pma-main");
        assert_eq!(svc["state"], "error");
        assert!(
            svc["last_error"]
                .as_str()
                .unwrap()
                .contains("no service containers")
        );
        assert!(
            !ack.to_string().contains("orch-token-1"),
            "the ack must not echo the token"
        );
    }

    // The orchestrator's token opens the worker API beside the node's own; its image
    // policy narrows what jobs may name.
    assert_eq!(run_job(&server, "orch-token-1", "python:3.12"), 200);
    assert_eq!(run_job(&server, TOKEN, "python:3.12"), 200);
    assert_eq!(run_job(&server, "orch-token-2", "python:3.12"), 401);
    assert_eq!(run_job(&server, "orch-token-1", "alpine:3"), 400);

    // Capability reports follow at the configured interval.
    wait_for(&state, "two capability reports", &server, |c| {
        c.reports.len() >= 2
    });
    assert_eq!(state.lock().unwrap().reports[0]["node"]["node_slug"], SLUG);

    // A newer configuration (dynamic updates on) replaces the token and the policy.
    state.lock().unwrap().config = config("01JA0000000000000000000002", "orch-token-2", json!({}));
    wait_for(&state, "the second configuration's ack", &server, |c| {
        c.acks.len() >= 2
    });
    assert_eq!(
        state.lock().unwrap().acks[1]["config_version"],
        "01JA0000000000000000000002"
    );
    assert_eq!(run_job(&server, "orch-token-1", "python:3.12"), 401);
    assert_eq!(run_job(&server, "orch-token-2", "alpine:3"), 200);

    // A configuration asking for what wasbox cannot do is refused as a whole and says why;
    // what was applied before stays.
    state.lock().unwrap().config = config(
        "01JA0000000000000000000003",
        "orch-token-3",
        json!({ "inference_backend": { "enabled": true, "variant": "cpu" } }),
    );
    wait_for(&state, "the refusal", &server, |c| c.acks.len() >= 3);
    {
        let c = state.lock().unwrap();
        let ack = &c.acks[2];
        assert_eq!(ack["status"], "failed", "{ack}");
        assert_eq!(ack["error"]["type"], "unsupported", "{ack}");
        assert!(
            ack["error"]["message"]
                .as_str()
                .unwrap()
                .contains("inference")
        );
    }
    assert_eq!(run_job(&server, "orch-token-3", "alpine:3"), 401);
    assert_eq!(run_job(&server, "orch-token-2", "alpine:3"), 200);
    // The refused version is not acknowledged again and again.
    let acks = state.lock().unwrap().acks.len();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(state.lock().unwrap().acks.len(), acks);

    // The control plane forgets the node's JWT: the node registers again, fetches its
    // configuration with the new JWT, and stays ready meanwhile.
    {
        let mut c = state.lock().unwrap();
        c.config = config("01JA0000000000000000000004", "orch-token-4", json!({}));
        c.valid.clear();
    }
    wait_for(&state, "a second registration", &server, |c| {
        c.registrations.len() >= 2 && c.config_gets.iter().any(|j| j == "node-jwt-2")
    });
    wait_for(&state, "the fourth configuration's ack", &server, |c| {
        c.acks
            .iter()
            .any(|a| a["config_version"] == "01JA0000000000000000000004")
    });
    assert_eq!(request(server.addr, "GET", "/readyz", &[], b"").status, 200);
    assert_eq!(run_job(&server, "orch-token-4", "alpine:3"), 200);
    assert_eq!(run_job(&server, "orch-token-2", "alpine:3"), 401);
    // The PSK never appears in the node's own log.
    assert!(!server.log().contains(PSK), "{}", server.log());
}

#[test]
fn registration_settings_are_checked_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("node.yaml");
    let check = |text: &str, env: &[(&str, &str)], expect: &str| {
        std::fs::write(&yaml, text).unwrap();
        let out = crate::support::runtime::wasbox()
            .args([
                "serve",
                "--print-config",
                "--config",
                yaml.to_str().unwrap(),
            ])
            .env_remove("WASBOX_REGISTRATION_PSK")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(all.contains(expect), "{text}: {all}");
        (out.status.success(), all)
    };
    // No PSK anywhere: a clear error naming where it may come from.
    let (ok, _) = check(
        "orchestrator:\n  url: http://127.0.0.1:9\n",
        &[],
        "WASBOX_REGISTRATION_PSK",
    );
    assert!(!ok);
    let (ok, _) = check(
        "orchestrator:\n  url: ftp://x\n",
        &[("WASBOX_REGISTRATION_PSK", "p")],
        "not an http:// or https:// URL",
    );
    assert!(!ok);
    let (ok, _) = check(
        "orchestrator:\n  url: https://o.example\n  tls:\n    pinned_sha256: ab\n",
        &[("WASBOX_REGISTRATION_PSK", "p")],
        "pinned_sha256 is not supported",
    );
    assert!(!ok);
    // From a named variable, and the effective configuration never shows the PSK.
    let (ok, all) = check(
        "orchestrator:\n  url: https://o.example\n  registration_psk_env: MY_PSK\n",
        &[("MY_PSK", "very-secret-psk")],
        "https://o.example",
    );
    assert!(ok, "{all}");
    assert!(!all.contains("very-secret-psk"), "{all}");
    // Each key can come from the environment too.
    let (ok, all) = check(
        "{}\n",
        &[
            ("WASBOX_ORCHESTRATOR_URL", "http://10.0.0.1:12082"),
            ("WASBOX_REGISTRATION_PSK", "p"),
            ("WASBOX_UPDATES_POLL_INTERVAL_SECONDS", "15"),
        ],
        "http://10.0.0.1:12082",
    );
    assert!(ok && all.contains("poll_interval_seconds: 15"), "{all}");
}

/// A control plane served over HTTPS with a certificate from a CA of its own: the node trusts
/// it through the operator's CA bundle (`orchestrator.tls.ca_bundle_path`) and registers over
/// TLS; without the bundle, it refuses the certificate and says so in `/readyz`.
#[test]
fn registration_reaches_an_https_control_plane_trusted_through_the_ca_bundle() {
    // A CA of the test's own, and the control plane's certificate signed by it.
    let Some(tls) = crate::support::tls::Certificates::make() else {
        return;
    };
    let (key, cert, ca) = (&tls.key, &tls.cert, &tls.ca);
    // A TLS server that answers every registration 503 and prints what it received.
    let script = r#"
import http.server, json, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        print("POST", self.path, body.get("psk"), flush=True)
        answer = b'{"type":"about:blank","status":503,"detail":"tls control plane starting"}'
        self.send_response(503)
        self.send_header("content-type", "application/problem+json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;
    let mut control = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(cert)
        .arg(key)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3");
    let mut lines =
        std::io::BufRead::lines(std::io::BufReader::new(control.stdout.take().unwrap()));
    let port = lines.next().unwrap().unwrap();
    let (seen_tx, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = seen_tx.send(line);
        }
    });
    let dir = &tls.dir;
    let psk = dir.path().join("psk");
    std::fs::write(&psk, PSK).unwrap();
    let node = |bundle: Option<&std::path::Path>| {
        let yaml = dir.path().join("node.yaml");
        let tls = bundle.map_or(String::new(), |b| {
            format!("  tls:\n    ca_bundle_path: {}\n", b.display())
        });
        std::fs::write(
            &yaml,
            format!(
                "orchestrator:\n  url: https://127.0.0.1:{port}/\n  registration_psk_file: {}\n{tls}\
                 node:\n  id: {SLUG}\n",
                psk.display()
            ),
        )
        .unwrap();
        Server::start_unready(&["--config", yaml.to_str().unwrap()])
    };
    let readyz_says = |server: &Server, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = request(server.addr, "GET", "/readyz", &[], b"");
            if r.status == 503 && r.text().contains(what) {
                return;
            }
            assert!(Instant::now() < deadline, "{}\n{}", r.text(), server.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    };

    // Without the bundle the certificate is nobody's: no request reaches the control plane.
    let mut untrusted = node(None);
    readyz_says(&untrusted, "invalid peer certificate");
    untrusted.terminate();
    assert!(
        seen.try_recv().is_err(),
        "a request got through unverified TLS"
    );

    let mut trusted = node(Some(ca));
    let line = seen
        .recv_timeout(Duration::from_secs(60))
        .expect("no registration arrived over TLS");
    assert_eq!(line, format!("POST /v1/nodes/register {PSK}"));
    readyz_says(&trusted, "tls control plane starting");
    trusted.terminate();
    let _ = control.kill();
    let _ = control.wait();
}
