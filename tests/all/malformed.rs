//! Malformed input to every HTTP route of `wasbox serve`: each route of the worker API's
//! OpenAPI document (read from the running server) and each route of E2B's API gets bad ids,
//! bad query values (a `%` before a character of several bytes, bytes that are no UTF-8,
//! numbers out of range, times with junk offsets), bad bodies (cut JSON, wrong types, deep
//! nesting, binary, Connect envelopes with lying lengths) and bad credentials. Every request
//! must be answered (a panicking handler drops its connection), with no 5xx but a 503 that
//! says when to retry, and the server must log no panic and go on serving.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::http::{Server, TOKEN, request};

/// Ids: escapes that decode to no UTF-8, a `%` before a multi-byte character, traversal,
/// NUL, slashes, emoji, numbers, a long one.
fn ids() -> Vec<String> {
    let mut v: Vec<String> = [
        "%25a%C3%A9",
        "%C3%28",
        "%FF%FE",
        "..%2F..%2Fetc%2Fpasswd",
        "%2E%2E",
        "%00",
        "a%2Fb",
        "%F0%9F%98%80",
        "%e9",
        "-1",
        "99999999999999999999999",
        "%",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("x".repeat(2000));
    v
}

/// Query values, each sent for every parameter a route takes and a few it does not.
const VALUES: &[&str] = &[
    "%25a%C3%A9",
    "%FF",
    "",
    "-1",
    "0",
    "1e400",
    "18446744073709551616",
    "2026-01-01T00:00:00%2B0%C3%A900",
    "2026-01-01T00:00:00%2B%C3%A9:0",
    "%00",
    "a%3Db%26%25zz%3D%C3",
    "asc,desc,running,%C3",
];

/// Query names every route gets besides its own (E2B's and the worker API's common ones).
const COMMON_QUERY: &[&str] = &[
    "metadata",
    "state",
    "limit",
    "nextToken",
    "startedAfter",
    "order",
    "template",
    "start",
    "end",
    "path",
    "username",
    "signature",
    "signature_expiration",
    "since",
    "until",
    "tail",
    "follow",
];

/// Bodies: empty, cut, wrong types, deeply nested, not UTF-8, huge numbers.
fn bodies() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        &b""[..],
        b"{",
        b"null",
        b"[]",
        b"\"x\"",
        b"{\"a\":",
        b"\xff\xfe\xfd\x00",
        b"{\"version\":\"x\",\"task_id\":1,\"job_id\":[],\"session_id\":{}}",
        b"{\"version\":1,\"task_id\":\"\\u00e9\\ud800\",\"job_id\":\"%25a%C3%A9\"}",
        b"{\"timeout\":1e400,\"templateID\":7,\"metadata\":[1]}",
        b"{\"timeout\":-1,\"templateID\":\"%25a\\u00e9\",\"metadata\":{\"%\":\"\\u00e9\"}}",
        b"{\"path\":\"../../../etc/passwd\",\"cmd\":\"\",\"argv\":[]}",
    ]
    .iter()
    .map(|b| b.to_vec())
    .collect();
    v.push([b"[".repeat(100_000), b"]".repeat(100_000)].concat());
    v.push(format!("{{\"a\":\"{}\"}}", "\u{e9}".repeat(50_000)).into_bytes());
    // Connect envelopes: a length past the body, an unknown flag, a compressed flag.
    v.push(b"\x00\xff\xff\xff\xff{}".to_vec());
    v.push(b"\x07\x00\x00\x00\x02{}".to_vec());
    v.push(b"\x01\x00\x00\x00\x02{}".to_vec());
    v
}

const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/connect+json",
    "application/octet-stream",
    "multipart/form-data; boundary=x",
    "text/plain; charset=%C3",
];

/// Status and headers of one request, or why there was none; the body is not waited for
/// (some answers are streams).
fn exchange(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<(u16, Vec<(String, String)>), String> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // Head and body are two writes (see `support::http::request`).
    s.set_nodelay(true).unwrap();
    let mut head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    // An answer may come (and the connection close) before the body is read.
    let _ = s.write_all(body);
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).map_err(|e| format!("read: {e}"))?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no answer (status line {line:?})"))?;
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).unwrap_or(0) == 0 || l.trim_end().is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    Ok((status, headers))
}

struct Route {
    method: String,
    /// With `{name}` placeholders.
    path: String,
    query: Vec<String>,
}

/// Every operation of the OpenAPI document.
fn openapi_routes(doc: &Value) -> Vec<Route> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if !["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                continue;
            }
            let query = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "query")
                .filter_map(|p| p["name"].as_str().map(str::to_string))
                .collect();
            out.push(Route {
                method: method.to_uppercase(),
                path: path.clone(),
                query,
            });
        }
    }
    out
}

/// E2B's control plane and envd routes (`server/src/e2b`), with the Connect methods the SDKs
/// call and one that does not exist.
fn e2b_routes() -> Vec<Route> {
    let mut out: Vec<Route> = [
        ("POST", "/sandboxes"),
        ("GET", "/sandboxes"),
        ("POST", "/v2/sandboxes"),
        ("GET", "/v2/sandboxes"),
        ("GET", "/sandboxes/{id}"),
        ("DELETE", "/sandboxes/{id}"),
        ("POST", "/sandboxes/{id}/timeout"),
        ("POST", "/sandboxes/{id}/refreshes"),
        ("POST", "/sandboxes/{id}/connect"),
        ("POST", "/v2/sandboxes/{id}/connect"),
        ("GET", "/sandboxes/{id}/metrics"),
        ("POST", "/sandboxes/{id}/pause"),
        ("POST", "/sandboxes/{id}/resume"),
        ("POST", "/sandboxes/{id}/snapshots"),
        ("POST", "/sandboxes/{id}/fork"),
        ("GET", "/snapshots"),
        ("DELETE", "/templates/{id}"),
        ("GET", "/health"),
        ("GET", "/files"),
        ("POST", "/files"),
        ("POST", "/execute"),
        ("POST", "/contexts"),
        ("GET", "/contexts"),
        ("DELETE", "/contexts/{id}"),
        ("POST", "/contexts/{id}/restart"),
    ]
    .iter()
    .map(|(m, p)| Route {
        method: m.to_string(),
        path: p.to_string(),
        query: Vec::new(),
    })
    .collect();
    for method in [
        "process.Process/Start",
        "process.Process/Connect",
        "process.Process/List",
        "process.Process/SendInput",
        "process.Process/StreamInput",
        "process.Process/SendSignal",
        "process.Process/Update",
        "process.Process/CloseStdin",
        "filesystem.Filesystem/Stat",
        "filesystem.Filesystem/MakeDir",
        "filesystem.Filesystem/Move",
        "filesystem.Filesystem/ListDir",
        "filesystem.Filesystem/Remove",
        "filesystem.Filesystem/WatchDir",
        "filesystem.Filesystem/CreateWatcher",
        "filesystem.Filesystem/GetWatcherEvents",
        "filesystem.Filesystem/RemoveWatcher",
        "filesystem.Filesystem/%C3%A9",
    ] {
        out.push(Route {
            method: "POST".into(),
            path: format!("/{method}"),
            query: Vec::new(),
        });
    }
    out
}

/// A route's path with every placeholder replaced by `id`.
fn with_id(path: &str, id: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
        out.push_str(id);
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

/// A 5xx is the server's fault, but for the answers a protocol defines: a 503 that says when
/// to retry, the 501 of a feature wasbox does not offer (E2B's template snapshots; the SDK
/// turns it into its message), and the 502 of an envd route for a sandbox that is gone or
/// not named (what E2B's edge answers, and what the SDK reads as "not running").
fn bad_answer(status: u16, headers: &[(String, String)], route: &Route) -> bool {
    let retry = status == 503 && headers.iter().any(|(k, _)| k == "retry-after");
    let not_offered = status == 501 && route.path.ends_with("/snapshots");
    let envd = [
        "/health",
        "/files",
        "/process.",
        "/filesystem.",
        "/execute",
        "/contexts",
    ]
    .iter()
    .any(|p| route.path.starts_with(p));
    let gone = status == 502 && envd;
    status >= 500 && !retry && !not_offered && !gone
}

#[test]
fn every_route_answers_malformed_input_without_a_panic_or_a_5xx() {
    let server = Server::start(&[]);
    let addr = server.addr;
    let doc = request(addr, "GET", "/openapi.json", &[], b"").json();
    let mut routes = openapi_routes(&doc);
    assert!(
        routes.len() > 20,
        "the document names {} routes",
        routes.len()
    );
    routes.extend(e2b_routes());
    // What ends the real session and sandbox goes last, so that the rest reach them.
    routes.sort_by_key(|r| {
        r.method == "DELETE"
            || r.path.ends_with("/pause")
            || r.path.ends_with("/end")
            || r.path.contains("stop-all")
    });

    // Real ids, so that bad queries and bodies reach the handlers behind the id checks.
    let bearer = format!("Bearer {TOKEN}");
    let session = request(
        addr,
        "POST",
        "/v1/worker/sessions",
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
        ],
        &serde_json::to_vec(
            &json!({"version": 1, "task_id": "t", "session_id": "malformed", "image": "bash"}),
        )
        .unwrap(),
    );
    assert_eq!(session.status, 200, "{}", session.text());
    let key = wasbox::e2b::api_key_for(TOKEN);
    let sandbox = request(
        addr,
        "POST",
        "/v2/sandboxes",
        &[("X-API-KEY", &key), ("Content-Type", "application/json")],
        br#"{"templateID": "base", "timeout": 300}"#,
    )
    .json();
    let sandbox_id = sandbox["sandboxID"].as_str().unwrap().to_string();
    let access = sandbox["envdAccessToken"].as_str().unwrap().to_string();

    let mut failures = Vec::new();
    let mut sent = 0usize;
    let mut send = |route: &Route, target: &str, headers: &[(&str, &str)], body: &[u8]| {
        sent += 1;
        match exchange(addr, &route.method, target, headers, body) {
            Ok((status, h)) if bad_answer(status, &h, route) => failures.push(format!(
                "{} {target} ({} body bytes): {status}",
                route.method,
                body.len()
            )),
            Ok(_) => {}
            Err(why) => failures.push(format!(
                "{} {target} ({} body bytes): {why}",
                route.method,
                body.len()
            )),
        }
    };
    let auth: Vec<(&str, &str)> = vec![
        ("Authorization", &bearer),
        ("X-API-KEY", &key),
        ("E2b-Sandbox-Id", &sandbox_id),
        ("X-Access-Token", &access),
    ];
    for route in &routes {
        // The id itself.
        for id in ids() {
            let target = with_id(&route.path, &id);
            send(route, &target, &auth, b"");
            send(route, &target, &[], b"{}");
        }
        // Bad query values, behind the real ids.
        let real = route
            .path
            .replace("{session_id}", "malformed")
            .replace("{id}", &sandbox_id);
        let real = with_id(&real, "malformed");
        let names: Vec<&str> = route
            .query
            .iter()
            .map(String::as_str)
            .chain(COMMON_QUERY.iter().copied())
            .collect();
        for name in &names {
            for value in VALUES {
                send(route, &format!("{real}?{name}={value}"), &auth, b"");
            }
        }
        send(route, &format!("{real}?%=%&&==&%C3=%C3&a[]=1"), &auth, b"");
        // Bad bodies, under each content type.
        if route.method != "GET" {
            for body in bodies() {
                for ct in CONTENT_TYPES {
                    let mut h = auth.clone();
                    h.push(("Content-Type", ct));
                    h.push(("Connect-Protocol-Version", "1"));
                    send(route, &real, &h, &body);
                }
            }
        }
        // Bad credentials and headers.
        for (name, value) in [
            ("Authorization", "Bearer"),
            ("Authorization", "Bearer \u{e9}"),
            ("Authorization", "Basic %C3"),
            ("X-API-KEY", "e2b_zz"),
            ("X-Access-Token", "\u{e9}"),
            ("E2b-Sandbox-Id", "%25a%C3%A9"),
            ("Last-Event-ID", "-1"),
            ("Range", "bytes=9-1"),
        ] {
            send(route, &real, &[(name, value)], b"");
        }
    }

    // The server is still there for everyone else, and nothing panicked.
    let r = request(addr, "GET", "/healthz", &[], b"");
    assert_eq!(r.status, 200);
    let log = server.log();
    failures.truncate(40);
    assert!(
        failures.is_empty(),
        "{} requests; bad answers:\n{}",
        sent,
        failures.join("\n")
    );
    assert!(!log.contains("panicked"), "a handler panicked:\n{log}");
    eprintln!("{sent} malformed requests answered");
}
