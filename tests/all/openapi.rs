//! The worker API's OpenAPI 3.1 document (`GET /openapi.json`, generated from the code):
//! it is a valid document (`openapi-spec-validator`, installed by `.ci/run`), it names every
//! route the server has, and the real answers of a running server to a set of requests, the
//! error answers included, match the schemas it gives for them.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::http::{Reply, Server, request};
use crate::support::runtime::{run_bounded, text};

fn job(job_id: &str, script: &str) -> Value {
    json!({
        "version": 1,
        "task_id": "t-openapi",
        "job_id": job_id,
        "sandbox": {"image": "bash:latest", "command": ["sh", "-c", script]},
    })
}

/// The document's path template that `path` (without its query) matches.
fn template<'a>(doc: &'a Value, path: &str) -> &'a str {
    let path = path.split('?').next().unwrap();
    let segs: Vec<&str> = path.split('/').collect();
    doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|t| {
            let ts: Vec<&str> = t.split('/').collect();
            ts.len() == segs.len()
                && ts.iter().zip(&segs).all(|(t, s)| {
                    if let Some(start) = t.find('{') {
                        // `{id}` alone, or a literal suffix after it (`{id}` then `:x`).
                        let end = t.find('}').unwrap();
                        s.starts_with(&t[..start]) && s.ends_with(&t[end + 1..])
                    } else {
                        t == s
                    }
                })
        })
        // The most specific template (`{id}:fork` before `{id}`).
        .max_by_key(|t| t.len())
        .unwrap_or_else(|| panic!("no path of the document matches {path}"))
}

/// Checks one real answer against the document: its status (or `default`) is documented
/// for the operation, with the answer's content type, and a JSON body matches the schema.
pub(crate) fn conforms(doc: &Value, method: &str, path: &str, reply: &Reply) {
    let t = template(doc, path);
    let op = &doc["paths"][t][method.to_ascii_lowercase()];
    assert!(op.is_object(), "{method} {t} is not documented");
    let status = reply.status.to_string();
    let response = if op["responses"][&status].is_object() {
        &op["responses"][&status]
    } else {
        &op["responses"]["default"]
    };
    // A response shared by many operations is a reference to the document's components.
    let response = match response["$ref"].as_str() {
        Some(r) => {
            let name = r
                .strip_prefix("#/components/responses/")
                .unwrap_or_else(|| panic!("{method} {t}: a reference outside the document: {r}"));
            &doc["components"]["responses"][name]
        }
        None => response,
    };
    assert!(
        response.is_object(),
        "{method} {t} answered {status}, which the document does not give"
    );
    let Some(content) = response["content"].as_object() else {
        assert!(
            reply.body.is_empty(),
            "{method} {t} {status}: a body where none is documented"
        );
        return;
    };
    let kind = reply
        .header("content-type")
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap()
        .trim();
    let media = content.get(kind).unwrap_or_else(|| {
        panic!("{method} {t} {status}: content type {kind} not documented ({content:?})")
    });
    if !kind.ends_with("json") {
        return;
    }
    let schema = json!({
        "allOf": [media["schema"]],
        "components": doc["components"],
    });
    let body: Value = reply.json();
    let errors = crate::support::schema::errors(&schema, &schema, &body);
    assert!(
        errors.is_empty(),
        "{method} {path} {status}: {errors:?}\n{body}"
    );
}

#[test]
fn the_document_is_valid_complete_and_matches_real_answers() {
    let server = Server::start(&[]);
    let r = request(server.addr, "GET", "/openapi.json", &[], b"");
    assert_eq!(r.status, 200, "served without a token");
    let doc = r.json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );

    // Valid as OpenAPI 3.1 (by a validator made for it).
    let tools = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/pytools");
    if tools.join("openapi_spec_validator").is_dir() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("openapi.json");
        std::fs::write(&file, &r.body).unwrap();
        let mut cmd = std::process::Command::new("python3");
        cmd.args([
            "-c",
            "import json,sys; from openapi_spec_validator import validate; validate(json.load(open(sys.argv[1])))",
        ])
        .arg(&file)
        .env("PYTHONPATH", &tools);
        let out = run_bounded(cmd, Duration::from_secs(120));
        assert!(out.status.success(), "{}", text(&out.stderr));
    } else {
        crate::support::skip(
            "openapi-spec-validator is not in target/pytools (.ci/run installs it)",
        );
    }

    // Every route the server has is in it.
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/v1/worker/jobs:run",
        "/v1/worker/jobs:submit",
        "/v1/worker/jobs/{job_id}",
        "/v1/worker/jobs:stop",
        "/v1/worker/admin/stop-all-orchestrator-directed",
        "/v1/worker/sessions",
        "/v1/worker/sessions/{id}",
        "/v1/worker/sessions/{id}/exec",
        "/v1/worker/sessions/{id}/end",
        "/v1/worker/sessions/{id}/files",
        "/v1/worker/sessions/{id}/pty:open",
        "/v1/worker/sessions/{id}/pty:send",
        "/v1/worker/sessions/{id}/pty:recv",
        "/v1/worker/sessions/{id}/pty:resize",
        "/v1/worker/sessions/{id}/pty:close",
        "/v1/worker/sessions/{id}:snapshot",
        "/v1/worker/sessions/{id}:fork",
        "/v1/worker/sessions:restore",
        "/v1/worker/snapshots",
        "/v1/worker/snapshots/{id}",
        "/v1/worker/telemetry/node:info",
        "/v1/worker/telemetry/node:stats",
        "/v1/worker/telemetry/containers",
        "/v1/worker/telemetry/containers/{id}",
        "/v1/worker/telemetry/logs",
    ] {
        assert!(
            doc["paths"][path].is_object(),
            "{path} is missing from the document"
        );
    }

    // Real answers, good and bad, against the schemas.
    let mut seen = 0;
    let mut check = |method: &str, path: &str, reply: Reply| {
        conforms(&doc, method, path, &reply);
        seen += 1;
        reply
    };
    let id = "00000000-0000-4000-8000-0000000000a1";
    check(
        "POST",
        "/v1/worker/jobs:run",
        server.post("/v1/worker/jobs:run", &job(id, "echo hi; exit 2")),
    );
    check(
        "POST",
        "/v1/worker/jobs:run",
        server.post("/v1/worker/jobs:run", &json!({"version": 2})),
    );
    check(
        "POST",
        "/v1/worker/jobs:run",
        request(server.addr, "POST", "/v1/worker/jobs:run", &[], b"{}"),
    );
    let slow = "00000000-0000-4000-8000-0000000000a2";
    let r = check(
        "POST",
        "/v1/worker/jobs:submit",
        server.post("/v1/worker/jobs:submit", &job(slow, "sleep 30")),
    );
    assert_eq!(r.status, 202);
    check(
        "GET",
        &format!("/v1/worker/jobs/{slow}"),
        server.get(&format!("/v1/worker/jobs/{slow}")),
    );
    check(
        "DELETE",
        &format!("/v1/worker/jobs/{slow}"),
        server.call("DELETE", &format!("/v1/worker/jobs/{slow}"), b""),
    );
    check(
        "POST",
        "/v1/worker/jobs:stop",
        server.post(
            "/v1/worker/jobs:stop",
            &json!({"version": 1, "task_id": "t-openapi", "job_id": slow}),
        ),
    );
    check(
        "GET",
        &format!("/v1/worker/jobs/{id}"),
        server.get(&format!("/v1/worker/jobs/{id}")),
    );
    check(
        "GET",
        "/v1/worker/jobs/nope",
        server.get("/v1/worker/jobs/nope"),
    );
    check(
        "POST",
        "/v1/worker/jobs:submit",
        server.post("/v1/worker/jobs:submit", &job(id, "true")),
    );
    check(
        "DELETE",
        &format!("/v1/worker/jobs/{id}"),
        server.call("DELETE", &format!("/v1/worker/jobs/{id}"), b""),
    );

    let s = "/v1/worker/sessions/s-oa";
    check(
        "POST",
        "/v1/worker/sessions",
        server.post(
            "/v1/worker/sessions",
            &json!({"version": 1, "task_id": "t", "session_id": "s-oa", "image": "bash:latest"}),
        ),
    );
    check(
        "POST",
        "/v1/worker/sessions",
        server.post(
            "/v1/worker/sessions",
            &json!({"version": 1, "task_id": "t", "session_id": "s-oa", "image": "bash:latest"}),
        ),
    );
    check("GET", s, server.get(s));
    let snap = server.post(&format!("{s}:snapshot"), &json!({"version": 1}));
    let snap_id = snap.json()["snapshot_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    check("POST", &format!("{s}:snapshot"), snap);
    check(
        "POST",
        "/v1/worker/sessions/nope:snapshot",
        server.post("/v1/worker/sessions/nope:snapshot", &json!({})),
    );
    check(
        "POST",
        &format!("{s}:fork"),
        server.post(&format!("{s}:fork"), &json!({"version": 1, "count": 1})),
    );
    check(
        "POST",
        &format!("{s}:fork"),
        server.post(&format!("{s}:fork"), &json!({"version": 1, "count": 0})),
    );
    check(
        "POST",
        "/v1/worker/sessions:restore",
        server.post(
            "/v1/worker/sessions:restore",
            &json!({"version": 1, "snapshot_id": snap_id, "session_id": "s-oa-restored"}),
        ),
    );
    check(
        "POST",
        "/v1/worker/sessions:restore",
        server.post("/v1/worker/sessions:restore", &json!({"version": 1})),
    );
    check(
        "GET",
        "/v1/worker/snapshots",
        server.get("/v1/worker/snapshots"),
    );
    check(
        "DELETE",
        &format!("/v1/worker/snapshots/{snap_id}"),
        server.call("DELETE", &format!("/v1/worker/snapshots/{snap_id}"), b""),
    );
    check(
        "POST",
        &format!("{s}/exec"),
        server.post(
            &format!("{s}/exec"),
            &json!({"version": 1, "command": ["sh", "-c", "echo x"]}),
        ),
    );
    check(
        "POST",
        &format!("{s}/exec"),
        server.post(&format!("{s}/exec"), &json!({"version": 1})),
    );
    check(
        "PUT",
        &format!("{s}/files?path=a.txt"),
        server.put(&format!("{s}/files?path=a.txt"), b"data"),
    );
    check(
        "GET",
        &format!("{s}/files?path=a.txt"),
        server.get(&format!("{s}/files?path=a.txt")),
    );
    check(
        "GET",
        &format!("{s}/files?path=missing"),
        server.get(&format!("{s}/files?path=missing")),
    );
    let open = check(
        "POST",
        &format!("{s}/pty:open"),
        server.post(
            &format!("{s}/pty:open"),
            &json!({"version": 1, "task_id": "t", "cols": 80, "rows": 24}),
        ),
    );
    let pty_id = open.json()["pty_id"].as_str().unwrap().to_string();
    let data = base64::engine::general_purpose::STANDARD.encode("echo hi\n");
    check(
        "POST",
        &format!("{s}/pty:send"),
        server.post(
            &format!("{s}/pty:send"),
            &json!({"version": 1, "task_id": "t", "pty_id": pty_id, "data_b64": data}),
        ),
    );
    check(
        "GET",
        &format!("{s}/pty:recv"),
        server.get(&format!(
            "{s}/pty:recv?version=1&task_id=t&pty_id={pty_id}&wait_ms=200"
        )),
    );
    check(
        "POST",
        &format!("{s}/pty:resize"),
        server.post(
            &format!("{s}/pty:resize"),
            &json!({"version": 1, "task_id": "t", "pty_id": pty_id, "cols": 100, "rows": 30}),
        ),
    );
    check(
        "POST",
        &format!("{s}/pty:close"),
        server.post(
            &format!("{s}/pty:close"),
            &json!({"version": 1, "task_id": "t", "pty_id": pty_id}),
        ),
    );
    check(
        "POST",
        &format!("{s}/end"),
        server.post(&format!("{s}/end"), &json!({"version": 1})),
    );
    check("GET", s, server.get(s));

    for path in [
        "/v1/worker/telemetry/node:info",
        "/v1/worker/telemetry/node:stats",
        "/v1/worker/telemetry/containers?limit=1",
        "/v1/worker/telemetry/containers/session-s-oa",
        "/v1/worker/telemetry/containers/nothing",
        "/v1/worker/telemetry/logs?source_kind=service&source_name=worker_api",
        "/v1/worker/telemetry/logs",
    ] {
        check("GET", path, server.get(path));
    }
    check(
        "POST",
        "/v1/worker/admin/stop-all-orchestrator-directed",
        server.post(
            "/v1/worker/admin/stop-all-orchestrator-directed",
            &json!({}),
        ),
    );
    check("GET", "/metrics", server.get("/metrics"));
    check("GET", "/healthz", server.get("/healthz"));
    check("GET", "/readyz", server.get("/readyz"));
    assert!(seen >= 35, "{seen}");
}
