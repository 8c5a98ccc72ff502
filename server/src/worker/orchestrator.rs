//! The node's side of a CyNodeAI orchestrator (worker_node.md, "Registration and
//! Bootstrap", "Capability Reporting", "Configuration Delivery"; payloads in
//! worker_node_payloads.md): register with the PSK and a capability report, fetch the node
//! configuration with the node JWT, apply what wasbox can honour and acknowledge it, then
//! report capabilities (and poll for new configuration) at an interval. The node reports
//! ready only once its configuration is applied; an orchestrator that is away is retried
//! with a growing pause, and a refused JWT or one about to expire means registering again.

use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;
use serde_json::{Value, json};

use super::SharedNode;
use super::config::{Granted, OrchestratorConfig};
use super::telemetry::{self, host};

/// Pause after a failed attempt: doubles from the first to the last.
const FIRST_RETRY: Duration = Duration::from_secs(1);
const LAST_RETRY: Duration = Duration::from_secs(60);
/// Register again this long before the node JWT expires.
const JWT_MARGIN: Duration = Duration::from_secs(60);
/// The largest answer read from the orchestrator.
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// What a registration returned (`node_bootstrap_payload_v1`).
#[derive(Debug)]
struct Bootstrap {
    jwt: String,
    expires: Option<SystemTime>,
    report_url: String,
    config_url: String,
}

/// Why a conversation with the orchestrator ended.
enum Ended {
    /// The JWT was refused or is about to expire: register again now.
    Reregister(String),
    /// Anything else: register again after a pause.
    Failed(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Ended {
    fn from(e: E) -> Self {
        Ended::Failed(e.into())
    }
}

/// Registers `node` with its orchestrator and keeps it registered until the process ends.
pub async fn run(node: SharedNode, cfg: OrchestratorConfig) {
    let client = match client(&cfg) {
        Ok(c) => c,
        Err(e) => {
            let why = format!("cannot reach the orchestrator: {e:#}");
            tracing::error!(error = %why, "orchestrator registration disabled");
            node.set_registration(Some(why));
            return;
        }
    };
    let mut peer = Peer {
        node,
        cfg,
        client,
        applied: None,
        distro: distro(),
        cpu_model: cpu_model(),
    };
    let mut pause = FIRST_RETRY;
    loop {
        match peer.converse().await {
            Ended::Reregister(why) => {
                tracing::info!(reason = %why, "registering with the orchestrator again");
                pause = FIRST_RETRY;
            }
            Ended::Failed(e) => {
                let why = format!("{e:#}");
                tracing::warn!(orchestrator = %peer.cfg.url, error = %why, retry_in_s = pause.as_secs(), "orchestrator registration failed");
                if peer.applied.is_none() {
                    peer.node.set_registration(Some(format!(
                        "not yet registered with the orchestrator at {}: {why}",
                        peer.cfg.url
                    )));
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LAST_RETRY);
            }
        }
        if peer.node.is_shutting_down() {
            return;
        }
    }
}

fn client(cfg: &OrchestratorConfig) -> Result<reqwest::Client> {
    // The process's TLS cryptography (reqwest is built without a provider of its own); an
    // error only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = reqwest::Client::builder()
        .connect_timeout(cfg.connect_timeout)
        .timeout(cfg.request_timeout)
        // The PSK and the JWT go only where the configuration says.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("wasbox/", env!("CARGO_PKG_VERSION")));
    if let Some(path) = &cfg.ca_bundle {
        let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .with_context(|| format!("{}: not a PEM certificate bundle", path.display()))?;
        if certs.is_empty() {
            bail!("{}: holds no certificate", path.display());
        }
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    Ok(b.build()?)
}

struct Peer {
    node: SharedNode,
    cfg: OrchestratorConfig,
    client: reqwest::Client,
    /// The `config_version` applied last (kept across registrations).
    applied: Option<String>,
    /// What does not change while the process runs (read once, not at every report).
    distro: Option<String>,
    cpu_model: Option<String>,
}

impl Peer {
    /// One registration and what follows it, until it needs doing again.
    async fn converse(&mut self) -> Ended {
        match self.registered().await {
            Ok(never) => match never {},
            Err(e) => e,
        }
    }

    async fn registered(&mut self) -> Result<std::convert::Infallible, Ended> {
        let boot = self.register().await?;
        tracing::info!(orchestrator = %self.cfg.url, node_slug = %self.node.config().node_slug, "registered with the orchestrator");
        self.node.telemetry.service(
            telemetry::NODE_MANAGER,
            "info",
            "registered with the orchestrator",
            json!({ "orchestrator": self.cfg.url }),
        );
        let mut dynamic = self.cfg.dynamic_config;
        // At every registration the configuration is fetched (worker_node.md: on startup),
        // whatever was applied before.
        let config = self.fetch_config(&boot).await?;
        dynamic |= self.apply(&boot, config, true).await?;
        loop {
            self.report(&boot).await?;
            let wake = self.next_wake(&boot);
            tokio::time::sleep(wake).await;
            if let Some(e) = boot.expires
                && SystemTime::now() + JWT_MARGIN >= e
            {
                return Err(Ended::Reregister("the node JWT is about to expire".into()));
            }
            if dynamic || self.granted_token_expired() {
                let config = self.fetch_config(&boot).await?;
                dynamic = self.apply(&boot, config, false).await? || self.cfg.dynamic_config;
            }
        }
    }

    /// The next interval, shortened to the JWT's renewal or the granted token's expiry.
    fn next_wake(&self, boot: &Bootstrap) -> Duration {
        let now = SystemTime::now();
        let until = |t: SystemTime| t.duration_since(now).unwrap_or_default();
        let mut wake = self.cfg.interval;
        if let Some(e) = boot.expires {
            wake = wake.min(until(e.checked_sub(JWT_MARGIN).unwrap_or(e)));
        }
        if let Some(e) = self.node.config().granted.token_expires {
            let left = until(e);
            if !left.is_zero() {
                wake = wake.min(left);
            }
        }
        wake.max(Duration::from_millis(100))
    }

    fn granted_token_expired(&self) -> bool {
        self.node
            .config()
            .granted
            .token_expires
            .is_some_and(|e| SystemTime::now() >= e)
    }

    /// `POST {url}/v1/nodes/register` with the PSK and a capability report.
    async fn register(&self) -> Result<Bootstrap, Ended> {
        let body = json!({ "psk": self.cfg.psk, "capability": self.capability() });
        let url = format!("{}/v1/nodes/register", self.cfg.url);
        let req = self.client.post(&url).json(&body);
        let text = exchange(req, "registration refused", &[200, 201], false).await?;
        Ok(parse_bootstrap(&text)?)
    }

    /// `GET node_config_url` with the node JWT.
    async fn fetch_config(&self, boot: &Bootstrap) -> Result<Value, Ended> {
        let req = self.client.get(&boot.config_url).bearer_auth(&boot.jwt);
        let text = exchange(req, "node configuration", &[200], true).await?;
        Ok(serde_json::from_str(&text).context("the node configuration is not JSON")?)
    }

    /// Applies a node configuration payload when it is new (or `always`), and acknowledges
    /// it; returns whether the payload asks for configuration polling.
    async fn apply(
        &mut self,
        boot: &Bootstrap,
        config: Value,
        always: bool,
    ) -> Result<bool, Ended> {
        let version = config
            .get("config_version")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let dynamic = config
            .pointer("/policy/updates/enable_dynamic_config")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        // config_version only grows (compared as text); an older or equal one is old news.
        if !always
            && self
                .applied
                .as_ref()
                .is_some_and(|done| version.as_str() <= done.as_str())
        {
            return Ok(dynamic);
        }
        let slug = self.node.config().node_slug.clone();
        let outcome = check_config(&config, &slug);
        let services = service_status(&config);
        let mut ack = json!({
            "version": 1,
            "node_slug": slug,
            "config_version": version,
            "ack_at": crate::rfc3339::format(SystemTime::now()),
        });
        match &outcome {
            Ok(granted) => {
                ack["status"] = "applied".into();
                ack["effective_config_hash"] = config_hash(granted).into();
            }
            Err(e) => {
                ack["status"] = "failed".into();
                ack["error"] = json!({ "type": e.kind, "message": e.message });
            }
        }
        if let Some(s) = &services {
            ack["managed_services_status"] = s.clone();
        }
        // A configuration is in effect before its acknowledgement says "applied": the
        // orchestrator may use the new token the moment it reads the ack.
        let outcome = outcome.map(|granted| self.node.grant(granted));
        let req = self
            .client
            .post(&boot.config_url)
            .bearer_auth(&boot.jwt)
            .json(&ack);
        exchange(req, "configuration acknowledgement", &[200, 204], true).await?;
        match outcome {
            Ok(()) => {
                self.node.telemetry.service(
                    telemetry::NODE_MANAGER,
                    "info",
                    "node configuration applied",
                    json!({ "config_version": version }),
                );
                tracing::info!(config_version = %version, "node configuration applied");
                self.applied = Some(version);
                self.node.set_registration(None);
            }
            Err(e) => {
                tracing::error!(config_version = %version, error = %e.message, "node configuration refused");
                self.node.telemetry.service(
                    telemetry::NODE_MANAGER,
                    "error",
                    "node configuration refused",
                    json!({ "config_version": version, "error": e.message }),
                );
                if self.applied.is_none() {
                    self.node.set_registration(Some(format!(
                        "the orchestrator's node configuration {version} was refused: {}",
                        e.message
                    )));
                }
                // A refused version is not asked again until a newer one comes.
                self.applied = Some(version).max(self.applied.take());
            }
        }
        Ok(dynamic)
    }

    /// `POST node_report_url` with a capability report; 204 expected.
    async fn report(&self, boot: &Bootstrap) -> Result<(), Ended> {
        let req = self
            .client
            .post(&boot.report_url)
            .bearer_auth(&boot.jwt)
            .json(&self.capability());
        exchange(req, "capability report", &[200, 204], true).await?;
        Ok(())
    }

    /// `node_capability_report_v1`, factual: a wasbox node runs sandboxes (no container
    /// engine, no GPU, no inference, no service containers, no network for its guests).
    fn capability(&self) -> Value {
        let config = self.node.config();
        let egress = !config.egress.allow.is_empty();
        let boot = self.node.telemetry.boot();
        let (ram_mb, _) = host::memory_mb();
        let (free_mb, _) = host::disk_mb(&config.state_dir);
        let mut node = json!({ "node_slug": config.node_slug });
        if let Some(n) = &self.cfg.node_name {
            node["name"] = n.clone().into();
        }
        if !self.cfg.node_labels.is_empty() {
            node["labels"] = json!(self.cfg.node_labels);
        }
        let mut platform = json!({
            "os": boot.os,
            "arch": boot.arch,
            "kernel_version": boot.kernel_version,
        });
        if let Some(d) = &self.distro {
            platform["distro"] = d.clone().into();
        }
        let mut compute = json!({
            "cpu_cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
            "ram_mb": ram_mb,
            "storage_free_mb": free_mb,
        });
        if let Some(m) = &self.cpu_model {
            compute["cpu_model"] = m.clone().into();
        }
        let mut report = json!({
            "version": 1,
            "reported_at": crate::rfc3339::format(SystemTime::now()),
            "node": node,
            "platform": platform,
            // The runtime is wasbox itself, as in telemetry's node:stats; rootless always.
            "container_runtime": {
                "runtime": "wasbox",
                "version": boot.build_version,
                "rootless_supported": true,
                "rootless_enabled": true,
            },
            "compute": compute,
            "gpu": { "present": false },
            "sandbox": {
                "supported": true,
                "features": ["wasm_component", "wasi_p2", if egress { "egress_allowlist" } else { "no_network" }, "memory_limits", "fuel_or_epoch_timeouts"],
                "max_concurrency": config.max_concurrent,
            },
            "network": {
                "orchestrator_reachable": true,
                // Nothing leaves a sandbox unless the operator allowed destinations
                // (`--allow-net`); then jobs may reach those named in their policy.
                "outbound_policy": if egress { "allowlist" } else { "none" },
            },
            "inference": { "supported": false, "existing_service": false, "running": false },
            "managed_services": { "supported": false },
            "worker_api": { "base_url": self.cfg.public_base_url },
        });
        if self.cfg.url.starts_with("https://") {
            report["tls"] = json!({ "trust_material_status": "ok" });
        }
        report
    }
}

/// Sends a request to the orchestrator; the answer's body when its status is one of `ok`,
/// else why: a refusal of the node JWT (`with_jwt`: 401 or 403) means registering again.
async fn exchange(
    req: reqwest::RequestBuilder,
    what: &str,
    ok: &[u16],
    with_jwt: bool,
) -> Result<String, Ended> {
    let res = req.send().await?;
    let status = res.status();
    let text = read_answer(res).await?;
    if ok.contains(&status.as_u16()) {
        return Ok(text);
    }
    let why = format!("{what}: {}", refusal(status, &text));
    Err(if with_jwt && matches!(status.as_u16(), 401 | 403) {
        Ended::Reregister(why)
    } else {
        Ended::Failed(anyhow!(why))
    })
}

/// Reads an answer, at most [`MAX_ANSWER_BYTES`].
async fn read_answer(mut res: reqwest::Response) -> Result<String> {
    let mut body = Vec::new();
    while let Some(chunk) = res.chunk().await? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            bail!("the orchestrator's answer is larger than {MAX_ANSWER_BYTES} bytes");
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// A refusal in a line: the status and the problem's detail (or the start of the body).
fn refusal(status: reqwest::StatusCode, body: &str) -> String {
    let detail = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v.get("detail")
                .or_else(|| v.get("title"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| body.chars().take(200).collect());
    format!("{status} {detail}").trim().to_string()
}

fn parse_bootstrap(text: &str) -> Result<Bootstrap> {
    #[derive(Deserialize)]
    struct Wire {
        version: i64,
        orchestrator: Orch,
        auth: Auth,
    }
    #[derive(Deserialize)]
    struct Orch {
        endpoints: Endpoints,
    }
    #[derive(Deserialize)]
    struct Endpoints {
        #[serde(default)]
        node_report_url: String,
        #[serde(default)]
        node_config_url: String,
    }
    #[derive(Deserialize)]
    struct Auth {
        #[serde(default)]
        node_jwt: String,
        expires_at: Option<String>,
    }
    let w: Wire = serde_json::from_str(text).context("the bootstrap payload is not valid")?;
    if w.version != 1 {
        bail!("unsupported bootstrap payload version {}", w.version);
    }
    if w.auth.node_jwt.is_empty() {
        bail!("the bootstrap payload has no auth.node_jwt");
    }
    for (name, url) in [
        ("node_report_url", &w.orchestrator.endpoints.node_report_url),
        ("node_config_url", &w.orchestrator.endpoints.node_config_url),
    ] {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!("the bootstrap payload's orchestrator.endpoints.{name} is not an http(s) URL");
        }
    }
    Ok(Bootstrap {
        jwt: w.auth.node_jwt,
        expires: w.auth.expires_at.as_deref().and_then(crate::rfc3339::parse),
        report_url: w.orchestrator.endpoints.node_report_url,
        config_url: w.orchestrator.endpoints.node_config_url,
    })
}

/// Why a node configuration cannot be applied (the acknowledgement's `error`).
#[derive(Debug)]
struct Refused {
    kind: &'static str,
    message: String,
}

/// What a `node_configuration_payload_v1` grants, or why wasbox cannot apply it. What a
/// wasbox node has no use for (registries, the model cache) is ignored; what it cannot do
/// when asked (start an inference backend) refuses the whole payload, as the spec's
/// atomic application wants.
fn check_config(config: &Value, slug: &str) -> Result<Granted, Refused> {
    let invalid = |message: String| Refused {
        kind: "invalid",
        message,
    };
    if config.get("version").and_then(Value::as_i64) != Some(1) {
        return Err(invalid(format!(
            "unsupported node configuration version {}",
            config.get("version").unwrap_or(&Value::Null)
        )));
    }
    if config
        .get("config_version")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(invalid(
            "the node configuration has no config_version".into(),
        ));
    }
    if let Some(s) = config.get("node_slug").and_then(Value::as_str)
        && s != slug
    {
        return Err(invalid(format!(
            "the node configuration is for node `{s}`, this node is `{slug}`"
        )));
    }
    if config
        .pointer("/inference_backend/enabled")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return Err(Refused {
            kind: "unsupported",
            message: "wasbox runs no inference backend (its capability report says \
                      inference.supported=false)"
                .into(),
        });
    }
    let text = |p: &str| -> Result<Option<String>, Refused> {
        match config.pointer(p) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(invalid(format!("{p} is not a string"))),
        }
    };
    let token = text("/worker_api/orchestrator_bearer_token")?.filter(|t| !t.is_empty());
    let token_expires = match text("/worker_api/orchestrator_bearer_token_expires_at")? {
        None => None,
        Some(t) => Some(crate::rfc3339::parse(&t).ok_or_else(|| {
            invalid(format!(
                "worker_api.orchestrator_bearer_token_expires_at `{t}` is not an RFC 3339 time"
            ))
        })?),
    };
    if token_expires.is_some_and(|e| e <= SystemTime::now()) {
        return Err(invalid(
            "worker_api.orchestrator_bearer_token has already expired".into(),
        ));
    }
    let allowed_images = match config.pointer("/policy/sandbox/allowed_images") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|v| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        invalid("policy.sandbox.allowed_images holds a non-string".into())
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => {
            return Err(invalid(
                "policy.sandbox.allowed_images is not an array".into(),
            ));
        }
    };
    Ok(Granted {
        token,
        token_expires,
        allowed_images,
    })
}

/// `managed_services_status` for the services a configuration directs here: wasbox runs
/// no service containers, so each is reported in `error` with the reason.
fn service_status(config: &Value) -> Option<Value> {
    let services = config.pointer("/managed_services/services")?.as_array()?;
    if services.is_empty() {
        return None;
    }
    let list: Vec<Value> = services
        .iter()
        .map(|s| {
            json!({
                "service_id": s.get("service_id").cloned().unwrap_or(Value::Null),
                "service_type": s.get("service_type").cloned().unwrap_or(Value::Null),
                "state": "error",
                "last_error": "wasbox runs no service containers (its capability report says managed_services.supported=false)",
            })
        })
        .collect();
    Some(json!({ "services": list }))
}

/// `sha256:` over what was applied (the token itself is not in it).
fn config_hash(g: &Granted) -> String {
    use sha2::Digest as _;
    let text = json!({
        "orchestrator_bearer_token": g.token.is_some(),
        "orchestrator_bearer_token_expires_at": g.token_expires.map(crate::rfc3339::format),
        "allowed_images": g.allowed_images,
    })
    .to_string();
    let digest = sha2::Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `ID` of /etc/os-release.
fn distro() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("ID="))
        .map(|v| v.trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
}

/// `model name` of /proc/cpuinfo.
fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bootstrap_payload_needs_its_jwt_and_urls() {
        let good = r#"{"version":1,"issued_at":"2026-01-01T00:00:00Z",
            "orchestrator":{"base_url":"http://o","endpoints":{"worker_registration_url":"http://o/v1/nodes/register",
            "node_report_url":"http://o/v1/nodes/capability","node_config_url":"http://o/v1/nodes/config"}},
            "auth":{"node_jwt":"j","expires_at":"2030-01-01T00:00:00Z"}}"#;
        let b = parse_bootstrap(good).unwrap();
        assert_eq!(b.jwt, "j");
        assert_eq!(b.config_url, "http://o/v1/nodes/config");
        assert!(b.expires.is_some());
        for bad in [
            good.replace("\"version\":1", "\"version\":2"),
            good.replace("\"node_jwt\":\"j\"", "\"node_jwt\":\"\""),
            good.replace("http://o/v1/nodes/config", "file:///etc/passwd"),
            "{}".to_string(),
        ] {
            assert!(parse_bootstrap(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_configuration_is_checked_before_anything_is_granted() {
        let base = json!({
            "version": 1, "config_version": "01J0000000000000000000000A", "node_slug": "n1",
            "worker_api": { "orchestrator_bearer_token": "t0k" },
            "policy": { "sandbox": { "allowed_images": ["python:*"] } },
        });
        let g = check_config(&base, "n1").unwrap();
        assert_eq!(g.token.as_deref(), Some("t0k"));
        assert_eq!(g.allowed_images, Some(vec!["python:*".to_string()]));
        assert!(g.token_matches("t0k") && !g.token_matches("t0"));

        let with = |p: &str, v: Value| {
            let mut c = base.clone();
            let (parent, key) = p.rsplit_once('/').unwrap();
            let mut at = &mut c;
            for part in parent.split('/').filter(|s| !s.is_empty()) {
                at = at
                    .as_object_mut()
                    .unwrap()
                    .entry(part)
                    .or_insert_with(|| json!({}));
            }
            at[key] = v;
            c
        };
        for (c, kind) in [
            (with("/version", json!(2)), "invalid"),
            (with("/node_slug", json!("other")), "invalid"),
            (with("/config_version", json!("")), "invalid"),
            (
                with(
                    "/worker_api/orchestrator_bearer_token_expires_at",
                    json!("2001-01-01T00:00:00Z"),
                ),
                "invalid",
            ),
            (
                with(
                    "/worker_api/orchestrator_bearer_token_expires_at",
                    json!("soon"),
                ),
                "invalid",
            ),
            (
                with("/policy/sandbox/allowed_images", json!("x")),
                "invalid",
            ),
            (
                with("/inference_backend/enabled", json!(true)),
                "unsupported",
            ),
        ] {
            assert_eq!(check_config(&c, "n1").unwrap_err().kind, kind, "{c}");
        }
        let expired = Granted {
            token: Some("t".into()),
            token_expires: Some(SystemTime::now() - Duration::from_secs(1)),
            allowed_images: None,
        };
        assert!(!expired.token_matches("t"));
    }
}
