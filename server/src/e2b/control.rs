//! The control plane's sandbox routes: create, info, kill, timeout, refresh, connect, list
//! and metrics, and what making and resuming a sandbox takes (pause, resume and fork, in
//! `lifecycle`, use them).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use wasbox_runtime::sync::lock;
use wasbox_runtime::{Limits, SandboxConfig, SessionConfig, SessionRefused};

use super::*;

pub(super) async fn read_json<T: DeserializeOwned + Default>(
    e2b: &E2b,
    body: Body,
) -> Result<T, Response> {
    let max = e2b.node.config().max_request_bytes;
    let bytes = axum::body::to_bytes(body, max).await.map_err(|_| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is more than {max} bytes"),
        )
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            format!("invalid request body: {e}"),
        )
    })
}

pub(super) fn check_timeout(t: Option<i64>, default: i64) -> Result<Duration, Response> {
    let t = t.unwrap_or(default);
    if !(1..=MAX_TIMEOUT_SECS).contains(&t) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!("timeout must be 1 to {MAX_TIMEOUT_SECS} seconds (got {t})"),
        ));
    }
    Ok(Duration::from_secs(t as u64))
}

/// `POST /sandboxes` and `POST /v2/sandboxes`.
pub(super) async fn create(State(e2b): State<SharedE2b>, body: Body) -> Response {
    match create_inner(&e2b, body).await {
        Ok(s) => (StatusCode::CREATED, axum::Json(s.created())).into_response(),
        Err(r) => r,
    }
}

pub(super) async fn create_inner(e2b: &SharedE2b, body: Body) -> Result<Arc<Sbx>, Response> {
    let node = &e2b.node;
    if node.is_shutting_down() {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the node is shutting down",
        ));
    }
    if let Some(reason) = node.not_ready() {
        return Err(error(StatusCode::SERVICE_UNAVAILABLE, reason));
    }
    let req: wire::NewSandbox = read_json(e2b, body).await?;
    let template = req
        .template_id
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| "base".into());
    // A snapshot of the snapshot API, by id or name: new sandboxes start from it.
    let from = super::snapshots::find(e2b, &template);
    let an_image = node.runtime.image_names().contains(&template.as_str());
    // Else one of the operator's templates (`wasbox template build`).
    let built = match &from {
        None if !an_image && node.templates.exists(&template) => {
            let (n, name) = (node.clone(), template.clone());
            tokio::task::spawn_blocking(move || n.templates.get(&n.runtime, &name))
                .await
                .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
                .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")))?
        }
        _ => None,
    };
    let image = if from.is_some() || built.is_some() || an_image {
        template.clone()
    } else if let Some(i) = node.config().image_for(&template) {
        i.to_string()
    } else {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!(
                "template '{template}' not found: this node runs {}",
                node.runtime.image_names().join(", ")
            ),
        ));
    };
    let lifetime = check_timeout(req.timeout, DEFAULT_TIMEOUT_SECS)?;
    let id = node
        .config()
        .fleet
        .own(&format!("i{}", crate::ids::hex::<10>()));
    let mut env: Vec<(String, String)> = vec![
        ("HOME".into(), HOME.into()),
        ("USER".into(), "user".into()),
        ("LOGNAME".into(), "user".into()),
        ("E2B_SANDBOX".into(), "true".into()),
        ("E2B_SANDBOX_ID".into(), id.clone()),
        ("E2B_TEMPLATE_ID".into(), template.clone()),
    ];
    if let Some(k) = &from {
        // The snapshot's environment, this sandbox's own ids over it.
        for (name, value) in &k.env {
            if !env.iter().any(|(n, _)| n == name) {
                env.push((name.clone(), value.clone()));
            }
        }
    }
    for (k, v) in req.env_vars.unwrap_or_default() {
        if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!("envVars: {k:?} is not a valid variable"),
            ));
        }
        env.retain(|(name, _)| *name != k);
        env.push((k, v));
    }
    let metadata = req.metadata.unwrap_or_default();
    let network = match &from {
        Some(k) if req.allow_internet_access.is_none() && req.network.is_none() => {
            k.network.clone()
        }
        _ => super::network::policy(req.allow_internet_access, req.network.as_ref())?,
    };
    let memory = req.auto_pause_memory.unwrap_or(true);
    if req.auto_resume.is_some_and(|a| a.enabled) && !(req.auto_pause == Some(true) && memory) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "autoResume needs autoPause with its memory kept",
        ));
    }
    let on_timeout = if req.auto_pause == Some(true) {
        OnTimeout::Pause { memory }
    } else {
        OnTimeout::Kill
    };
    // The volumes to attach, under the workspace the sandbox will have.
    let mount = match (&from, &built) {
        (Some(k), _) => k.snapshot.manifest().mount.clone(),
        (None, Some(t)) => t.manifest().mount.clone(),
        (None, None) => HOME.to_string(),
    };
    let volumes = super::volumes::mounts(
        e2b,
        req.volume_mounts.as_deref().unwrap_or_default(),
        &mount,
    )?;
    let label = format!("e2b {id}");
    let sbx = start(
        e2b,
        Start {
            id,
            token: None,
            template,
            lifetime,
            env,
            metadata,
            on_timeout,
            start_command: built.as_ref().and_then(crate::template::start_of),
        },
        || {
            if let Some(k) = &from {
                let s = node
                    .runtime
                    .restore_with(&k.snapshot, Some(sandbox_limits()), volumes)?;
                s.set_network(network);
                return Ok(s);
            }
            if let Some(t) = &built {
                let s = node
                    .runtime
                    .restore_with(t, Some(sandbox_limits()), volumes)?;
                s.set_network(network);
                return Ok(s);
            }
            let mut config = SandboxConfig::default()
                .image(image)
                .mount(HOME)
                .limits(sandbox_limits());
            config.network = network;
            config.label = Some(label);
            config.volumes = volumes;
            node.runtime.sandbox(config)
        },
    )?;
    if let Err(e) = crate::template::start_command(&sbx.session).await {
        lock(&e2b.sandboxes).remove(&sbx.id);
        node.sessions().end(
            sbx.session.id(),
            "the template's start command did not start",
        );
        return Err(error(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")));
    }
    Ok(sbx)
}

/// What a new E2B sandbox is made of.
pub(super) struct Start {
    pub(super) id: String,
    /// The envd access token (a new one when `None`).
    pub(super) token: Option<String>,
    pub(super) template: String,
    pub(super) lifetime: Duration,
    pub(super) env: Vec<(String, String)>,
    pub(super) metadata: BTreeMap<String, String>,
    pub(super) on_timeout: OnTimeout,
    /// Its template's start command (see [`crate::template::start_command`]), started by
    /// the caller once the sandbox is made.
    pub(super) start_command: Option<String>,
}

/// The limits of every E2B sandbox.
pub(super) fn sandbox_limits() -> Limits {
    Limits::default()
        .timeout(Duration::from_secs(MAX_TIMEOUT_SECS as u64))
        .max_output_bytes(1 << 20)
}

/// Makes the session of a new E2B sandbox (its sandbox from `make`) and records it.
pub(super) fn start(
    e2b: &SharedE2b,
    new: Start,
    make: impl FnOnce() -> anyhow::Result<wasbox_runtime::Sandbox>,
) -> Result<Arc<Sbx>, Response> {
    let node = &e2b.node;
    let Start {
        id,
        token,
        template,
        lifetime,
        env,
        metadata,
        on_timeout,
        start_command,
    } = new;
    let token = token.unwrap_or_else(crate::ids::hex::<24>);
    let mut config = SessionConfig::new(format!("e2b-{id}"));
    config.lifetime = lifetime;
    // An E2B sandbox lives until its timeout, whether used or not.
    config.idle = wasbox_runtime::MAX_SESSION_LIMIT;
    config.env = env;
    config.max_ptys = MAX_PROCESSES;
    // Processes live as long as the sandbox, however often its timeout is moved.
    config.deadline_from_lifetime = false;
    config.labels.insert("task_id".into(), format!("e2b:{id}"));
    config.labels.insert("image_ref".into(), template.clone());
    if let Some(start) = start_command {
        config
            .labels
            .insert(crate::template::LABEL_START.into(), start);
    }
    let session = node.sessions().create(config, make).map_err(|e| match e {
        SessionRefused::Full(n) => {
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                format!("the node is at its limit of {n} sandboxes"),
            );
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static("5"));
            r
        }
        other => error(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
    })?;
    node.telemetry
        .started(&crate::worker::telemetry::Sandbox::session(
            session.id(),
            &format!("e2b:{id}"),
            &template,
            session.created_at(),
        ));
    let sbx = Arc::new(Sbx {
        id: id.clone(),
        template,
        token,
        session,
        metadata,
        started_at: SystemTime::now(),
        procs: process::Table::default(),
        watchers: fs::Watchers::default(),
        contexts: Default::default(),
        on_timeout,
        pause_tries: Default::default(),
    });
    lock(&e2b.sandboxes).insert(id.clone(), sbx.clone());
    tracing::info!(sandbox_id = %id, template = %sbx.template, "e2b sandbox created");
    Ok(sbx)
}

pub(super) fn not_found(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("sandbox \"{id}\" doesn't exist or you don't have access to it"),
    )
}

/// `GET /sandboxes/{id}`.
pub(super) async fn info(State(e2b): State<SharedE2b>, Path(id): Path<String>) -> Response {
    if let Some(s) = e2b.get(&id) {
        return axum::Json(s.detail(true)).into_response();
    }
    match e2b.paused(&id) {
        Some(p) => axum::Json(p.detail(&id)).into_response(),
        None => not_found(&id),
    }
}

/// `DELETE /sandboxes/{id}`: the sandbox ends now (its processes are stopped).
pub(super) async fn kill(State(e2b): State<SharedE2b>, Path(id): Path<String>) -> Response {
    let Some(s) = e2b.get(&id) else {
        if lock(&e2b.paused).remove(&id).is_some() {
            return StatusCode::NO_CONTENT.into_response();
        }
        return not_found(&id);
    };
    lock(&e2b.sandboxes).remove(&id);
    e2b.node
        .sessions()
        .end(s.session.id(), "killed by the client");
    StatusCode::NO_CONTENT.into_response()
}

/// `POST /sandboxes/{id}/timeout`: the sandbox now ends `timeout` seconds from now.
pub(super) async fn set_timeout(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let Some(s) = e2b.get(&id) else {
        return not_found(&id);
    };
    let req: wire::TimeoutRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    if req.timeout.is_none() {
        return error(StatusCode::BAD_REQUEST, "timeout is required");
    }
    // 0: the timeout is now (E2B's SDK forces a timeout's pause or end this way).
    if req.timeout == Some(0) {
        s.session.set_remaining(Duration::ZERO);
        e2b.node.sessions().reap();
        e2b.live();
        return StatusCode::NO_CONTENT.into_response();
    }
    match check_timeout(req.timeout, 0) {
        Ok(t) => {
            s.session.set_remaining(t);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(r) => r,
    }
}

/// `POST /sandboxes/{id}/refreshes`: at least `duration` seconds (default 60) more.
pub(super) async fn refresh(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let Some(s) = e2b.get(&id) else {
        return not_found(&id);
    };
    let req: wire::RefreshRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    match check_timeout(req.duration, 60) {
        Ok(t) => {
            if s.session.remaining() < t {
                s.session.set_remaining(t);
            }
            StatusCode::NO_CONTENT.into_response()
        }
        Err(r) => r,
    }
}

/// Brings the paused sandbox `id` back (same id and access token, its files, environment
/// and metadata) with a lifetime of `timeout` seconds (E2B's default when `None`).
pub(super) async fn resume_paused(e2b: &SharedE2b, id: &str, timeout: Option<i64>) -> Response {
    let Some(p) = lock(&e2b.paused).remove(id) else {
        return not_found(id);
    };
    let lifetime = match check_timeout(timeout, DEFAULT_TIMEOUT_SECS) {
        Ok(t) => t,
        Err(r) => {
            lock(&e2b.paused).insert(id.to_string(), p);
            return r;
        }
    };
    let e2b2 = e2b.clone();
    let (id2, p2) = (id.to_string(), p.clone());
    let made = tokio::task::spawn_blocking(move || {
        let new = Start {
            id: id2,
            token: Some(p2.token.clone()),
            template: p2.template.clone(),
            lifetime,
            env: p2.env.clone(),
            metadata: p2.metadata.clone(),
            on_timeout: p2.on_timeout,
            start_command: p2.start_command.clone(),
        };
        start(&e2b2, new, || {
            e2b2.node
                .runtime
                .restore_with(&p2.snapshot, Some(sandbox_limits()), p2.volumes.clone())
                .inspect(|s| {
                    s.set_network(p2.network.clone());
                    if let Some(id) = &p2.boot_id {
                        s.set_boot_id(id.clone());
                    }
                })
                .map_err(anyhow::Error::from)
        })
    })
    .await;
    match made {
        Ok(Ok(s)) => {
            // Its template's start command, which the pause stopped, runs again.
            if let Err(e) = crate::template::start_command(&s.session).await {
                tracing::warn!(sandbox_id = %id, "resumed without its start command: {e:#}");
            }
            tracing::info!(sandbox_id = %id, "e2b sandbox resumed");
            (StatusCode::CREATED, axum::Json(s.created())).into_response()
        }
        Ok(Err(r)) => {
            // Still paused: it may be resumed later.
            lock(&e2b.paused).insert(id.to_string(), p);
            r
        }
        Err(e) => {
            lock(&e2b.paused).insert(id.to_string(), p);
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("resume failed: {e}"),
            )
        }
    }
}

/// `POST /sandboxes/{id}/connect` and `POST /v2/sandboxes/{id}/connect`: the sandbox's
/// connection details; a timeout given extends (never shortens) its life.
pub(super) async fn connect_sandbox(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let req: wire::TimeoutRequest = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let Some(s) = e2b.get(&id) else {
        // A paused sandbox is resumed by a connect.
        return resume_paused(&e2b, &id, req.timeout).await;
    };
    if req.timeout.is_some() {
        match check_timeout(req.timeout, 0) {
            Ok(t) if s.session.remaining() < t => s.session.set_remaining(t),
            Ok(_) => {}
            Err(r) => return r,
        }
    }
    (StatusCode::OK, axum::Json(s.created())).into_response()
}

/// `GET /sandboxes` and `GET /v2/sandboxes`: running sandboxes, newest first (`order=asc`
/// for oldest first), filtered by `metadata` (`k=v&k2=v2`, URL-encoded), `state`,
/// `startedAfter` and `template`, `limit` per page with `x-next-token`.
pub(super) async fn list(
    State(e2b): State<SharedE2b>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let wanted = q
        .get("metadata")
        .map(|m| metadata_filter(m))
        .unwrap_or_default();
    let states: Vec<&str> = q
        .get("state")
        .map(|s| s.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let running = states.is_empty() || states.contains(&"running");
    let paused = states.is_empty() || states.contains(&"paused");
    let page = match Page::of(&q) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let after = match q.get("startedAfter").filter(|v| !v.is_empty()) {
        None => None,
        Some(t) => match crate::rfc3339::parse(t) {
            Some(t) => Some(t),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "startedAfter is not an RFC 3339 time",
                );
            }
        },
    };
    let template = q.get("template").filter(|t| !t.is_empty());
    // Newest first unless asked otherwise (E2B's default).
    let ascending = match q.get("order").map(String::as_str) {
        None | Some("" | "desc") => false,
        Some("asc") => true,
        Some(o) => return error(StatusCode::BAD_REQUEST, format!("order {o:?}: asc or desc")),
    };
    // (started, id, template, metadata, detail) of every sandbox the states name.
    let mut all: Vec<(SystemTime, String, wire::SandboxDetail)> = Vec::new();
    if running {
        all.extend(
            e2b.live()
                .iter()
                .map(|s| (s.started_at, s.id.clone(), s.detail(false))),
        );
    }
    if paused {
        let held = lock(&e2b.paused);
        all.extend(
            held.iter()
                .map(|(id, p)| (p.started_at, id.clone(), p.detail(id))),
        );
    }
    all.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    if !ascending {
        all.reverse();
    }
    let matching: Vec<wire::SandboxDetail> = all
        .into_iter()
        .filter(|(started, _, d)| {
            wanted
                .iter()
                .all(|(k, v)| d.metadata.get(k).is_some_and(|m| m == v))
                && after.is_none_or(|a| *started >= a)
                && template.is_none_or(|t| *t == d.template_id)
        })
        .map(|(_, _, d)| d)
        .collect();
    page.answer(matching)
}

/// A page of a list (`limit`, 100 by default, and `nextToken`, the offset the previous page
/// named in `x-next-token`).
pub(super) struct Page {
    limit: usize,
    offset: usize,
}

impl Page {
    pub(super) fn of(q: &HashMap<String, String>) -> Result<Page, Response> {
        let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
            None => 100,
            Some(Ok(l)) if (1..=1000).contains(&l) => l,
            Some(_) => return Err(error(StatusCode::BAD_REQUEST, "limit must be 1 to 1000")),
        };
        let offset = match q.get("nextToken").map(|t| t.parse::<usize>()) {
            None => 0,
            Some(Ok(o)) => o,
            Some(Err(_)) => return Err(error(StatusCode::BAD_REQUEST, "nextToken is not valid")),
        };
        Ok(Page { limit, offset })
    }

    /// The page of `all` as the answer, `x-next-token` naming the next when there is one.
    pub(super) fn answer<T: serde::Serialize>(&self, all: Vec<T>) -> Response {
        let total = all.len();
        let page: Vec<T> = all.into_iter().skip(self.offset).take(self.limit).collect();
        let mut res = axum::Json(page).into_response();
        let next = self.offset + self.limit;
        if next < total
            && let Ok(v) = HeaderValue::from_str(&next.to_string())
        {
            res.headers_mut().insert("x-next-token", v);
        }
        res
    }
}

/// The pairs of a `metadata` filter, itself URL-encoded (`k=v&k2=v2`, `+` for a space);
/// bytes that do not decode to UTF-8 become U+FFFD, as everywhere else in a query.
pub(super) fn metadata_filter(m: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(m.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// `GET /sandboxes/{id}/metrics`: one sample now (memory of its processes, disk of its
/// workspace).
pub(super) async fn metrics(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some(s) = e2b.get(&id) else {
        return not_found(&id);
    };
    let secs = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs()
    };
    let bound = |k: &str| q.get(k).map(|v| v.parse::<u64>());
    let (start, end) = match (bound("start"), bound("end")) {
        (Some(Err(_)), _) | (_, Some(Err(_))) => {
            return error(
                StatusCode::BAD_REQUEST,
                "start and end are Unix times in seconds",
            );
        }
        (a, b) => (
            a.and_then(Result::ok).unwrap_or(0),
            b.and_then(Result::ok).unwrap_or(u64::MAX),
        ),
    };
    // One sample, of now, dated within the range asked for; none when the range is
    // outside the sandbox's life.
    let unix = secs(SystemTime::now()).min(end);
    if unix < start.max(secs(s.started_at)) {
        return axum::Json(serde_json::json!([])).into_response();
    }
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(unix);
    let sandbox = s.session.sandbox();
    let (mem_used, mem_total) = sandbox.memory_in_use();
    let (disk_used, disk_total) = sandbox.disk_in_use();
    axum::Json(serde_json::json!([{
        "timestamp": crate::rfc3339::format(now),
        "timestampUnix": unix,
        "cpuCount": 1,
        "cpuUsedPct": 0.0,
        "memUsed": mem_used,
        "memTotal": mem_total,
        "memCache": 0,
        "diskUsed": disk_used,
        "diskTotal": disk_total,
    }]))
    .into_response()
}

/// `PUT /sandboxes/{id}/network`: replaces the sandbox's egress rules at once (fields left
/// out are cleared, as E2B does); requests from now on follow them. 204.
pub(super) async fn update_network(
    State(e2b): State<SharedE2b>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let Some(sbx) = e2b.get(&id) else {
        return not_found(&id);
    };
    let req: wire::NetworkConfig = match read_json(&e2b, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    match super::network::policy(req.allow_internet_access, Some(&req)) {
        Ok(p) => {
            tracing::info!(sandbox_id = %id, policy = ?p, "e2b sandbox network replaced");
            sbx.session.sandbox().set_network(p);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(r) => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_filters_are_percent_decoded() {
        let one = |m: &str| metadata_filter(m);
        assert_eq!(one("a%20b+c%3D=1"), [("a b c=".into(), "1".into())]);
        assert_eq!(
            one("k=100%&&x"),
            [("k".into(), "100%".into()), ("x".into(), String::new())]
        );
        assert_eq!(one("k=%zz"), [("k".into(), "%zz".into())]);
        // A `%` before a character of several bytes, and a byte that is no UTF-8.
        assert_eq!(
            one("%a\u{e9}=%ff"),
            [("%a\u{e9}".into(), "\u{fffd}".into())]
        );
    }
}
