//! Configuration of `wasbox serve`: the node startup YAML, the node configuration payload's
//! constraints (JSON), `WASBOX_*` environment variables and command-line flags, in rising
//! order of precedence. Every default is here, with the spec rule it follows.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::telemetry::Retention;

/// Default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:12090";
/// CyNodeAI's current worker API spec, timeout rules: the node default when the YAML sets
/// none (1 hour; the older snapshot in docs/specs said 900 s).
pub const NODE_DEFAULT_JOB_TIMEOUT_SECS: u64 = 3600;
/// ...and the node maximum (3 hours; the snapshot said 3600 s).
pub const NODE_MAX_JOB_TIMEOUT_SECS: u64 = 10800;
/// worker-api-node.md, request size limits: 10 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 10 << 20;
/// worker-api-node.md, capture limits: 256 KiB per stream.
pub const MAX_OUTPUT_BYTES: usize = 256 << 10;
/// Jobs and session execs running at once; more get 429.
pub const DEFAULT_MAX_CONCURRENT: usize = 128;
/// How long a job or exec waits for a place, then for memory other sandboxes hold, before
/// 429 (the runtime's wait for room, as every other start has).
pub const ADMISSION_WAIT: Duration = wasbox_runtime::capacity::ROOM_WAIT;

/// Sessions alive at once when the configuration sets none (more get 429): each session
/// with a shell holds a live process, and `max_concurrent` processes stay free for jobs.
pub fn default_max_sessions(max_instances: usize, max_concurrent: usize) -> usize {
    max_instances.saturating_sub(max_concurrent).max(1)
}
/// A session's lifetime and idle limits when its create request gives none.
pub const DEFAULT_SESSION_LIFETIME_SECS: u64 = 3600;
pub const DEFAULT_SESSION_IDLE_SECS: u64 = 600;
/// How long `wasbox serve` waits for running jobs at shutdown before stopping them.
pub const JOB_DRAIN_GRACE: Duration = Duration::from_secs(30);

/// Everything `wasbox serve` runs with.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub token: String,
    /// The token was generated at start (printed once) rather than configured.
    pub token_generated: bool,
    pub default_timeout_secs: u64,
    pub max_timeout_secs: u64,
    /// `constraints.max_job_timeout_seconds` of the node configuration payload.
    pub constraint_timeout_secs: Option<u64>,
    pub max_request_bytes: usize,
    pub max_concurrent: usize,
    pub max_sessions: usize,
    /// Live sandbox processes (job processes, shells, their children) all together.
    pub max_instances: usize,
    /// `vm.max_map_count` to raise the kernel's limit to at start (`--vm-max-map-count`).
    pub vm_max_map_count: Option<usize>,
    /// Linear memory all sandboxes may hold together, in MiB (`--node-memory-mib`); the
    /// runtime's default (80% of the machine's memory) when `None`.
    pub node_memory_mib: Option<usize>,
    /// HTTP connections held open at once, and the deadlines for a request's head and body.
    pub http: crate::http::Limits,
    pub images: Vec<ImageRule>,
    /// Where sandboxes may connect at most (`sandbox.network`, `--allow-net`, `--deny-net`,
    /// `--ca-cert`): nowhere by default.
    pub egress: Egress,
    pub cache_dir: Option<PathBuf>,
    /// Where the telemetry database and retained job results live (`storage.state_dir`).
    pub state_dir: PathBuf,
    /// How many volumes the node keeps and how large each may be (`storage.volumes.*`).
    pub volumes: wasbox_runtime::volume::VolumeLimits,
    /// The node's name in telemetry (`node.id`; the host name by default).
    pub node_slug: String,
    pub retention: Retention,
    /// `/metrics` answers without the bearer token (`metrics.public`; off by default).
    pub metrics_public: bool,
    pub log: LogConfig,
    /// Registration with a CyNodeAI orchestrator (`orchestrator.url`), when configured.
    pub orchestrator: Option<OrchestratorConfig>,
    /// What the orchestrator's node configuration granted (its token, its image policy);
    /// kept across reloads of the local files.
    pub granted: Granted,
    /// The node's place in a fleet behind a proxy (`fleet.node`, `fleet.drain_delay_seconds`).
    pub fleet: Fleet,
}

/// A node of a fleet: every id it hands out begins with its name and `-`, so that a proxy
/// sends each request naming an id to the node that owns it (docs/OPERATIONS.md, "A fleet
/// behind one endpoint").
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fleet {
    /// The node's name in ids (`fleet.node`, `--fleet-node`): a DNS label, the StatefulSet
    /// pod's name in Kubernetes. `None`: a node on its own, ids as they always were.
    pub node: Option<String>,
    /// How long a node stays up after SIGTERM with `/readyz` failing and creates refused
    /// (503) while its sandboxes are still served, so that the proxy's health checks take it
    /// out of the creates' rotation before it ends them.
    pub drain_delay: Duration,
}

impl Fleet {
    /// An id this node hands out: `rest` behind the node's name.
    pub fn own(&self, rest: &str) -> String {
        match &self.node {
            Some(node) => format!("{node}-{rest}"),
            None => rest.to_string(),
        }
    }

    /// Whether an id routes to this node (always, for a node on its own).
    pub fn owns(&self, id: &str) -> bool {
        self.unowned(id).is_some()
    }

    /// The part of an id behind this node's name; `None` when it routes elsewhere.
    pub fn unowned<'a>(&self, id: &'a str) -> Option<&'a str> {
        match &self.node {
            Some(node) => id.strip_prefix(node.as_str())?.strip_prefix('-'),
            None => Some(id),
        }
    }
}

/// A fleet node's name: a DNS label (lowercase letters, digits and inner `-`), at most 40
/// characters, so that an id stays inside a host name's label (E2B's `PORT-ID.DOMAIN`).
fn check_fleet_node(name: &str) -> Result<()> {
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 40
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-';
    if !ok {
        bail!(
            "fleet node name `{name}` is not a DNS label of at most 40 characters \
             (lowercase letters, digits, `-` inside)"
        );
    }
    Ok(())
}

/// The node's egress ceiling as configured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Egress {
    pub allow: Vec<wasbox_runtime::NetRule>,
    pub deny: Vec<wasbox_runtime::NetRule>,
    pub ca_certs: Vec<PathBuf>,
}

impl Egress {
    pub fn runtime_config(&self) -> wasbox_runtime::EgressConfig {
        wasbox_runtime::EgressConfig::default()
            .allow(self.allow.clone())
            .deny(self.deny.clone())
            .ca_certs(self.ca_certs.clone())
    }
}

/// How `wasbox serve` registers with its orchestrator (worker_node.md, "Node Startup YAML"
/// and "Registration and Bootstrap").
#[derive(Clone, Debug, PartialEq)]
pub struct OrchestratorConfig {
    /// The orchestrator's base URL (`orchestrator.url`); `/v1/nodes/register` is under it.
    pub url: String,
    /// The registration pre-shared key (from `orchestrator.registration_psk_file` or the
    /// variable `orchestrator.registration_psk_env` names; never printed).
    pub psk: String,
    /// PEM certificates trusted for the orchestrator besides the system's
    /// (`orchestrator.tls.ca_bundle_path`).
    pub ca_bundle: Option<PathBuf>,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// The Worker API address sent in capability reports (`worker_api.public_base_url`).
    pub public_base_url: String,
    /// `node.name` and `node.labels` of the capability report.
    pub node_name: Option<String>,
    pub node_labels: Vec<String>,
    /// Poll for configuration updates (`updates.enable_dynamic_config`); the orchestrator's
    /// own `policy.updates.enable_dynamic_config` turns it on too.
    pub dynamic_config: bool,
    /// How often capability reports (and configuration polls) go out
    /// (`updates.poll_interval_seconds`).
    pub interval: Duration,
}

/// Environment variable holding the registration PSK when the YAML names no other.
pub const DEFAULT_PSK_ENV: &str = "WASBOX_REGISTRATION_PSK";
/// Capability reports (and configuration polls) when the YAML sets no interval.
pub const DEFAULT_REPORT_INTERVAL: Duration = Duration::from_secs(60);

/// What an applied node configuration payload grants the node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Granted {
    /// `worker_api.orchestrator_bearer_token`, accepted beside the node's own token until
    /// its `orchestrator_bearer_token_expires_at`.
    pub token: Option<String>,
    pub token_expires: Option<std::time::SystemTime>,
    /// `policy.sandbox.allowed_images`: when present, an image reference must match one of
    /// these patterns too (the node's own `sandbox.images` rules still apply).
    pub allowed_images: Option<Vec<String>>,
}

impl Granted {
    /// Whether the granted token is `given` and has not expired.
    pub fn token_matches(&self, given: &str) -> bool {
        let Some(t) = &self.token else { return false };
        let live = self
            .token_expires
            .is_none_or(|e| std::time::SystemTime::now() < e);
        crate::auth::constant_time_eq(given.as_bytes(), t.as_bytes()) && live
    }
}

/// Logging of `wasbox serve` (`logging.level`, `logging.format`).
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// A tracing filter (`info`, `wasbox=debug`); `WASBOX_LOG` wins over it.
    pub level: Option<String>,
    pub json: bool,
}

/// Maps image references (`alpine:latest`) to wasbox images; the first match wins. A
/// reference no rule matches is refused.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct ImageRule {
    /// A pattern with `*` wildcards, matched against the whole reference.
    #[serde(rename = "match")]
    pub pattern: String,
    /// The wasbox image it runs on.
    pub image: String,
}

impl ServeConfig {
    /// The effective timeout of a job (worker-api-node.md, "Timeout rules").
    pub fn job_timeout(&self, requested: Option<u64>) -> Duration {
        let mut t = requested
            .unwrap_or(self.default_timeout_secs)
            .min(self.max_timeout_secs);
        if let Some(c) = self.constraint_timeout_secs {
            t = t.min(c);
        }
        Duration::from_secs(t)
    }

    /// Whether the orchestrator's policy (when it set one) allows the image reference.
    pub fn policy_allows(&self, reference: &str) -> bool {
        self.granted
            .allowed_images
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|p| wildcard(p, reference)))
    }

    /// The wasbox image for an image reference, or `None` when it is not allowed (by the
    /// node's rules, or by the orchestrator's policy).
    pub fn image_for(&self, reference: &str) -> Option<&str> {
        if !self.policy_allows(reference) {
            return None;
        }
        self.images
            .iter()
            .find(|r| wildcard(&r.pattern, reference))
            .map(|r| r.image.as_str())
    }
}

fn wildcard(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == s,
        Some((head, rest)) => {
            let Some(s) = s.strip_prefix(head) else {
                return false;
            };
            (0..=s.len())
                .filter(|&i| s.is_char_boundary(i))
                .any(|i| wildcard(rest, &s[i..]))
        }
    }
}

/// The node startup YAML (only the keys wasbox reads; others are ignored).
#[derive(Default, Deserialize)]
#[serde(default)]
struct StartupYaml {
    orchestrator: OrchestratorYaml,
    updates: UpdatesYaml,
    node: NodeYaml,
    worker_api: WorkerApiYaml,
    sandbox: SandboxYaml,
    storage: StorageYaml,
    telemetry: TelemetryYaml,
    logging: LoggingYaml,
    metrics: MetricsYaml,
    fleet: FleetYaml,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct FleetYaml {
    node: Option<String>,
    drain_delay_seconds: Option<u64>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct NodeYaml {
    id: Option<String>,
    name: Option<String>,
    labels: Option<Vec<String>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct OrchestratorYaml {
    url: Option<String>,
    registration_psk_env: Option<String>,
    registration_psk_file: Option<PathBuf>,
    tls: OrchestratorTlsYaml,
    timeouts: OrchestratorTimeoutsYaml,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct OrchestratorTlsYaml {
    ca_bundle_path: Option<PathBuf>,
    pinned_sha256: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct OrchestratorTimeoutsYaml {
    connect_seconds: Option<u64>,
    request_seconds: Option<u64>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct UpdatesYaml {
    enable_dynamic_config: Option<bool>,
    poll_interval_seconds: Option<u64>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct StorageYaml {
    state_dir: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    results: ResultsYaml,
    volumes: VolumesYaml,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct VolumesYaml {
    max_count: Option<usize>,
    default_bytes: Option<u64>,
    max_bytes: Option<u64>,
    max_inodes: Option<u64>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct ResultsYaml {
    max_age_hours: Option<u64>,
    max_bytes: Option<u64>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct TelemetryYaml {
    retention: RetentionYaml,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RetentionYaml {
    max_db_bytes: Option<u64>,
    log_days: Option<u64>,
    container_event_days: Option<u64>,
    inventory_days: Option<u64>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct LoggingYaml {
    level: Option<String>,
    format: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct MetricsYaml {
    public: Option<bool>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct WorkerApiYaml {
    listen: Option<String>,
    listen_host: Option<String>,
    listen_port: Option<u16>,
    bearer_token: Option<String>,
    token: Option<String>,
    public_base_url: Option<String>,
    max_request_bytes: Option<usize>,
    max_concurrent_jobs: Option<usize>,
    max_sessions: Option<usize>,
    max_instances: Option<usize>,
    vm_max_map_count: Option<usize>,
    node_memory_mib: Option<usize>,
    max_connections: Option<usize>,
    header_timeout_seconds: Option<usize>,
    body_timeout_seconds: Option<usize>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct SandboxYaml {
    timeouts: TimeoutsYaml,
    network: NetworkYaml,
    images: Option<Vec<ImageRule>>,
    max_concurrency: Option<usize>,
}

/// `sandbox.network`: the node's egress ceiling. Each key is a list, or one string of
/// comma-separated values (as its environment variable gives it).
#[derive(Default, Deserialize)]
#[serde(default)]
struct NetworkYaml {
    allow: Option<TextList>,
    deny: Option<TextList>,
    ca_certs: Option<TextList>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TextList {
    One(String),
    Many(Vec<String>),
}

impl TextList {
    fn values(self) -> Vec<String> {
        match self {
            TextList::One(s) => s
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect(),
            TextList::Many(v) => v,
        }
    }
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct TimeoutsYaml {
    default_seconds: Option<u64>,
    max_seconds: Option<u64>,
}

/// `constraints` of the node configuration payload (the whole payload or just the object).
#[derive(Default, Deserialize)]
#[serde(default)]
struct Constraints {
    max_job_timeout_seconds: Option<u64>,
    max_request_bytes: Option<usize>,
}

/// Values given on the command line (highest precedence).
#[derive(Default, Debug, Clone)]
pub struct Flags {
    pub listen: Option<String>,
    pub token: Option<String>,
    pub token_file: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub constraints: Option<PathBuf>,
    pub max_concurrent: Option<usize>,
    pub max_sessions: Option<usize>,
    pub max_instances: Option<usize>,
    pub vm_max_map_count: Option<usize>,
    pub node_memory_mib: Option<usize>,
    pub max_connections: Option<usize>,
    pub header_timeout: Option<usize>,
    pub body_timeout: Option<usize>,
    pub cache_dir: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub log_format: Option<String>,
    /// `--allow-net`, `--deny-net` and `--ca-cert` (each replaces the YAML's and the
    /// environment's list when given).
    pub allow_net: Vec<String>,
    pub deny_net: Vec<String>,
    pub ca_certs: Vec<PathBuf>,
    pub fleet_node: Option<String>,
    pub drain_delay: Option<u64>,
}

/// Every key of the startup YAML wasbox reads, and whether its value is text (an
/// environment variable for a text key is never read as a number). Each can also be set by
/// `WASBOX_` and the key in capitals with `_` for `.` (`storage.state_dir` is
/// `WASBOX_STORAGE_STATE_DIR`).
pub const KEYS: &[(&str, bool)] = &[
    ("orchestrator.url", true),
    ("orchestrator.registration_psk_env", true),
    ("orchestrator.registration_psk_file", true),
    ("orchestrator.tls.ca_bundle_path", true),
    ("orchestrator.timeouts.connect_seconds", false),
    ("orchestrator.timeouts.request_seconds", false),
    ("updates.enable_dynamic_config", false),
    ("updates.poll_interval_seconds", false),
    ("node.id", true),
    ("node.name", true),
    ("node.labels", false),
    ("worker_api.listen", true),
    ("worker_api.listen_host", true),
    ("worker_api.listen_port", false),
    ("worker_api.bearer_token", true),
    ("worker_api.public_base_url", true),
    ("worker_api.max_request_bytes", false),
    ("worker_api.max_concurrent_jobs", false),
    ("worker_api.max_sessions", false),
    ("worker_api.max_instances", false),
    ("worker_api.vm_max_map_count", false),
    ("worker_api.node_memory_mib", false),
    ("worker_api.max_connections", false),
    ("worker_api.header_timeout_seconds", false),
    ("worker_api.body_timeout_seconds", false),
    ("sandbox.max_concurrency", false),
    ("sandbox.timeouts.default_seconds", false),
    ("sandbox.timeouts.max_seconds", false),
    ("sandbox.images", false),
    ("sandbox.network.allow", true),
    ("sandbox.network.deny", true),
    ("sandbox.network.ca_certs", true),
    ("storage.state_dir", true),
    ("storage.cache_dir", true),
    ("storage.results.max_age_hours", false),
    ("storage.results.max_bytes", false),
    ("storage.volumes.max_count", false),
    ("storage.volumes.default_bytes", false),
    ("storage.volumes.max_bytes", false),
    ("storage.volumes.max_inodes", false),
    ("telemetry.retention.max_db_bytes", false),
    ("telemetry.retention.log_days", false),
    ("telemetry.retention.container_event_days", false),
    ("telemetry.retention.inventory_days", false),
    ("logging.level", true),
    ("logging.format", true),
    ("metrics.public", false),
    ("fleet.node", true),
    ("fleet.drain_delay_seconds", false),
];

/// The environment variable of a YAML key.
pub fn env_name(key: &str) -> String {
    format!("WASBOX_{}", key.replace('.', "_").to_ascii_uppercase())
}

/// Sets the keys given by environment variables in the YAML tree; returns the variables
/// used.
fn overlay_env(
    tree: &mut serde_norway::Value,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Vec<String>> {
    use serde_norway::Value;
    let mut used = Vec::new();
    for (key, text) in KEYS {
        let var = env_name(key);
        let Some(raw) = env(&var) else { continue };
        let value = if *text {
            Value::String(raw)
        } else {
            serde_norway::from_str(&raw)
                .with_context(|| format!("{var}=`{raw}` is not a valid value for {key}"))?
        };
        let mut at = &mut *tree;
        let parts: Vec<&str> = key.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            if !matches!(at, Value::Mapping(_)) {
                *at = Value::Mapping(Default::default());
            }
            let Value::Mapping(map) = at else {
                unreachable!()
            };
            let k = Value::String(part.to_string());
            if i + 1 == parts.len() {
                map.insert(k, value);
                break;
            }
            at = map.entry(k).or_insert(Value::Null);
        }
        used.push(format!("{var} ({key})"));
    }
    Ok(used)
}

/// The default state directory of this process's environment (see [`default_state_dir`]).
pub(crate) fn default_state_dir_of_process() -> PathBuf {
    default_state_dir(&|k| std::env::var(k).ok())
}

/// The default state directory: `$XDG_STATE_HOME/wasbox`, else `~/.local/state/wasbox`,
/// else `/var/lib/wasbox`.
fn default_state_dir(env: &impl Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(x) = env("XDG_STATE_HOME").filter(|v| v.starts_with('/')) {
        return PathBuf::from(x).join("wasbox");
    }
    match env("HOME").filter(|v| v.starts_with('/') && v != "/") {
        Some(h) => PathBuf::from(h).join(".local/state/wasbox"),
        None => PathBuf::from("/var/lib/wasbox"),
    }
}

/// A count from the flag, else the environment variable `var`, else the YAML.
fn count(
    flag: Option<usize>,
    env: &impl Fn(&str) -> Option<String>,
    var: &str,
    yaml: Option<usize>,
) -> Result<Option<usize>> {
    if flag.is_some() {
        return Ok(flag);
    }
    match env(var) {
        Some(v) => Ok(Some(
            v.parse()
                .with_context(|| format!("{var}=`{v}` is not a number"))?,
        )),
        None => Ok(yaml),
    }
}

/// Builds the configuration from the files, the environment (`env` looks a variable up)
/// and the flags.
pub fn load(flags: Flags, env: impl Fn(&str) -> Option<String>) -> Result<ServeConfig> {
    let config_path = flags
        .config
        .clone()
        .or_else(|| env("WASBOX_CONFIG").map(PathBuf::from));
    // The file is checked alone first, so that an error names its line.
    let mut tree = match &config_path {
        Some(p) => {
            let text = read(p)?;
            serde_norway::from_str::<StartupYaml>(&text)
                .with_context(|| format!("{}: not a valid node startup YAML", p.display()))?;
            serde_norway::from_str::<serde_norway::Value>(&text)?
        }
        None => serde_norway::Value::Null,
    };
    if tree.is_null() {
        tree = serde_norway::Value::Mapping(Default::default());
    }
    let used = overlay_env(&mut tree, &env)?;
    let mut yaml: StartupYaml = serde_norway::from_value(tree).with_context(|| {
        format!(
            "the configuration with the environment's {} is not valid",
            used.join(", ")
        )
    })?;
    let constraints_path = flags
        .constraints
        .clone()
        .or_else(|| env("WASBOX_CONSTRAINTS").map(PathBuf::from));
    let constraints = match &constraints_path {
        Some(p) => parse_constraints(&read(p)?)
            .with_context(|| format!("{}: not a valid node configuration payload", p.display()))?,
        None => Constraints::default(),
    };

    let host_port = match (&yaml.worker_api.listen_host, yaml.worker_api.listen_port) {
        (None, None) => None,
        (host, port) => {
            let host = host.as_deref().unwrap_or("127.0.0.1");
            let port = port.unwrap_or(12090);
            Some(if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            })
        }
    };
    let listen = flags
        .listen
        .or_else(|| env("WASBOX_LISTEN"))
        .or(yaml.worker_api.listen.clone())
        .or(host_port)
        .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let listen: SocketAddr = listen
        .parse()
        .with_context(|| format!("listen address `{listen}` is not IP:PORT"))?;

    let node_slug = yaml
        .node
        .id
        .clone()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(super::telemetry::host::hostname);
    let orchestrator = orchestrator_config(&yaml, listen, &env)?;
    let fleet = Fleet {
        node: match flags.fleet_node.clone().or(yaml.fleet.node.clone()) {
            Some(n) if n.is_empty() => None,
            Some(n) => {
                check_fleet_node(&n)?;
                Some(n)
            }
            None => None,
        },
        drain_delay: Duration::from_secs(
            flags
                .drain_delay
                .or(yaml.fleet.drain_delay_seconds)
                .unwrap_or(0)
                .min(600),
        ),
    };
    let token_file = flags
        .token_file
        .or_else(|| env("WASBOX_TOKEN_FILE").map(PathBuf::from));
    let token_from_file = match (&flags.token, token_file) {
        (None, Some(p)) => Some(read_token(&p)?),
        _ => None,
    };
    let token = flags
        .token
        .or(token_from_file)
        .or_else(|| env("WASBOX_TOKEN"))
        .or(yaml.worker_api.bearer_token)
        .or(yaml.worker_api.token)
        .filter(|t| !t.is_empty());
    let (token, token_generated) = match token {
        Some(t) => (t, false),
        None => (generate_token()?, true),
    };

    let mut max_request_bytes = yaml
        .worker_api
        .max_request_bytes
        .unwrap_or(DEFAULT_MAX_REQUEST_BYTES);
    if let Some(c) = constraints.max_request_bytes {
        max_request_bytes = max_request_bytes.min(c);
    }
    let max_concurrent = count(
        flags.max_concurrent,
        &env,
        "WASBOX_MAX_CONCURRENT_JOBS",
        yaml.worker_api
            .max_concurrent_jobs
            .or(yaml.sandbox.max_concurrency),
    )?
    .unwrap_or(DEFAULT_MAX_CONCURRENT);
    if max_concurrent == 0 {
        bail!("the job concurrency limit must be at least 1");
    }
    let vm_max_map_count = count(
        flags.vm_max_map_count,
        &env,
        "WASBOX_VM_MAX_MAP_COUNT",
        yaml.worker_api.vm_max_map_count,
    )?;
    let node_memory_mib = count(
        flags.node_memory_mib,
        &env,
        "WASBOX_NODE_MEMORY_MIB",
        yaml.worker_api.node_memory_mib,
    )?;
    if node_memory_mib == Some(0) {
        bail!("the node's memory budget must be at least 1 MiB");
    }
    let max_instances = count(
        flags.max_instances,
        &env,
        "WASBOX_MAX_INSTANCES",
        yaml.worker_api.max_instances,
    )?
    .unwrap_or_else(|| {
        wasbox_runtime::capacity::default_max_instances_with(
            vm_max_map_count,
            wasbox_runtime::limits::DEFAULT_PROCESS_MEMORY,
        )
    });
    if max_instances == 0 {
        bail!("the live process limit must be at least 1");
    }
    let max_sessions = count(
        flags.max_sessions,
        &env,
        "WASBOX_MAX_SESSIONS",
        yaml.worker_api.max_sessions,
    )?
    .unwrap_or_else(|| default_max_sessions(max_instances, max_concurrent));
    let max_connections = count(
        flags.max_connections,
        &env,
        "WASBOX_MAX_CONNECTIONS",
        yaml.worker_api.max_connections,
    )?
    .unwrap_or(crate::http::DEFAULT_MAX_CONNECTIONS);
    if max_connections == 0 {
        bail!("the connection limit must be at least 1");
    }
    let seconds = |flag, var, yaml, default: Duration| -> Result<Duration> {
        let secs = count(flag, &env, var, yaml)?;
        match secs {
            Some(0) => bail!("{var}: a read deadline must be at least 1 second"),
            Some(n) => Ok(Duration::from_secs(n.min(86_400) as u64)),
            None => Ok(default),
        }
    };
    let http = crate::http::Limits {
        max_connections,
        header_timeout: seconds(
            flags.header_timeout,
            "WASBOX_HEADER_TIMEOUT",
            yaml.worker_api.header_timeout_seconds,
            crate::http::DEFAULT_HEADER_TIMEOUT,
        )?,
        body_timeout: seconds(
            flags.body_timeout,
            "WASBOX_BODY_TIMEOUT",
            yaml.worker_api.body_timeout_seconds,
            crate::http::DEFAULT_BODY_TIMEOUT,
        )?,
    };
    let network = std::mem::take(&mut yaml.sandbox.network);
    let rules = |flag: &[String],
                 yaml: Option<TextList>,
                 what: &str|
     -> Result<Vec<wasbox_runtime::NetRule>> {
        let values = if flag.is_empty() {
            yaml.map(TextList::values).unwrap_or_default()
        } else {
            flag.to_vec()
        };
        wasbox_runtime::net::parse_rules(&values).with_context(|| format!("sandbox.network.{what}"))
    };
    let egress = Egress {
        allow: rules(&flags.allow_net, network.allow, "allow")?,
        deny: rules(&flags.deny_net, network.deny, "deny")?,
        ca_certs: if flags.ca_certs.is_empty() {
            network
                .ca_certs
                .map(TextList::values)
                .unwrap_or_default()
                .into_iter()
                .map(PathBuf::from)
                .collect()
        } else {
            flags.ca_certs.clone()
        },
    };
    // `datasci` and E2B's code interpreter templates get the scientific python3;
    // everything else the base image.
    let images = yaml.sandbox.images.unwrap_or_else(|| {
        vec![
            ImageRule {
                pattern: wasbox_runtime::DATASCI_IMAGE.into(),
                image: wasbox_runtime::DATASCI_IMAGE.into(),
            },
            ImageRule {
                pattern: "code-interpreter*".into(),
                image: wasbox_runtime::DATASCI_IMAGE.into(),
            },
            ImageRule {
                pattern: "*".into(),
                image: wasbox_runtime::BASE_IMAGE.into(),
            },
        ]
    });
    Ok(ServeConfig {
        listen,
        token,
        token_generated,
        default_timeout_secs: yaml
            .sandbox
            .timeouts
            .default_seconds
            .unwrap_or(NODE_DEFAULT_JOB_TIMEOUT_SECS),
        max_timeout_secs: yaml
            .sandbox
            .timeouts
            .max_seconds
            .unwrap_or(NODE_MAX_JOB_TIMEOUT_SECS),
        constraint_timeout_secs: constraints.max_job_timeout_seconds,
        max_request_bytes,
        max_concurrent,
        max_sessions,
        max_instances,
        vm_max_map_count,
        node_memory_mib,
        http,
        images,
        egress,
        cache_dir: flags
            .cache_dir
            .or_else(|| env("WASBOX_CACHE_DIR").map(PathBuf::from))
            .or(yaml.storage.cache_dir),
        state_dir: flags
            .state_dir
            .or(yaml.storage.state_dir)
            .unwrap_or_else(|| default_state_dir(&env)),
        volumes: {
            let d = wasbox_runtime::volume::VolumeLimits::default();
            let v = &yaml.storage.volumes;
            let max_bytes = v.max_bytes.unwrap_or(d.max_bytes);
            wasbox_runtime::volume::VolumeLimits {
                max_volumes: v.max_count.unwrap_or(d.max_volumes),
                default_bytes: v.default_bytes.unwrap_or(d.default_bytes).min(max_bytes),
                max_bytes,
                inodes: v.max_inodes.unwrap_or(d.inodes),
            }
        },
        node_slug,
        retention: {
            let d = Retention::default();
            let r = &yaml.telemetry.retention;
            let res = &yaml.storage.results;
            // The spec's retention is a ceiling: a YAML may only make it stricter.
            Retention {
                log_days: r.log_days.unwrap_or(d.log_days).min(d.log_days),
                container_event_days: r
                    .container_event_days
                    .unwrap_or(d.container_event_days)
                    .min(d.container_event_days),
                inventory_days: r
                    .inventory_days
                    .unwrap_or(d.inventory_days)
                    .min(d.inventory_days),
                result_hours: res.max_age_hours.unwrap_or(d.result_hours),
                result_bytes: res.max_bytes.unwrap_or(d.result_bytes),
                max_db_bytes: r.max_db_bytes.unwrap_or(d.max_db_bytes),
            }
        },
        metrics_public: yaml.metrics.public.unwrap_or(false),
        log: LogConfig {
            level: yaml.logging.level,
            json: match flags.log_format.or(yaml.logging.format).as_deref() {
                None | Some("text") => false,
                Some("json") => true,
                Some(other) => bail!("log format `{other}` is neither `text` nor `json`"),
            },
        },
        orchestrator,
        granted: Granted::default(),
        fleet,
    })
}

/// The registration settings, when `orchestrator.url` is set: the PSK must be found, the
/// URLs must be http(s) URLs, and what wasbox cannot honour is refused by name.
fn orchestrator_config(
    yaml: &StartupYaml,
    listen: SocketAddr,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<OrchestratorConfig>> {
    let o = &yaml.orchestrator;
    let Some(url) = o.url.as_deref().map(str::trim).filter(|u| !u.is_empty()) else {
        return Ok(None);
    };
    let url = url.trim_end_matches('/').to_string();
    check_http_url("orchestrator.url", &url)?;
    if o.tls.pinned_sha256.is_some() {
        bail!(
            "orchestrator.tls.pinned_sha256 is not supported by wasbox; trust the orchestrator's \
             certificate with orchestrator.tls.ca_bundle_path"
        );
    }
    let psk = match (&o.registration_psk_file, &o.registration_psk_env) {
        (Some(file), _) => read_token(file).context("orchestrator.registration_psk_file")?,
        (None, var) => {
            let var = var.as_deref().unwrap_or(DEFAULT_PSK_ENV);
            env(var).filter(|v| !v.is_empty()).with_context(|| {
                format!(
                    "orchestrator.url is set but the registration PSK is not: set {var}, or \
                     orchestrator.registration_psk_env / orchestrator.registration_psk_file"
                )
            })?
        }
    };
    if let Some(ca) = &o.tls.ca_bundle_path
        && !ca.is_file()
    {
        bail!(
            "orchestrator.tls.ca_bundle_path: {} is not a readable file",
            ca.display()
        );
    }
    let public_base_url = match &yaml.worker_api.public_base_url {
        Some(u) => {
            let u = u.trim().trim_end_matches('/').to_string();
            check_http_url("worker_api.public_base_url", &u)?;
            u
        }
        // Without one, the listen address: a wildcard address becomes the host name.
        None if listen.ip().is_unspecified() => format!(
            "http://{}:{}",
            super::telemetry::host::hostname(),
            listen.port()
        ),
        None => format!("http://{listen}"),
    };
    let secs = |v: Option<u64>, key: &str, default: u64| -> Result<Duration> {
        match v {
            Some(0) => bail!("{key} must be at least 1"),
            Some(n) => Ok(Duration::from_secs(n.min(86_400))),
            None => Ok(Duration::from_secs(default)),
        }
    };
    Ok(Some(OrchestratorConfig {
        url,
        psk,
        ca_bundle: o.tls.ca_bundle_path.clone(),
        connect_timeout: secs(
            o.timeouts.connect_seconds,
            "orchestrator.timeouts.connect_seconds",
            5,
        )?,
        request_timeout: secs(
            o.timeouts.request_seconds,
            "orchestrator.timeouts.request_seconds",
            30,
        )?,
        public_base_url,
        node_name: yaml.node.name.clone().filter(|n| !n.trim().is_empty()),
        node_labels: yaml.node.labels.clone().unwrap_or_default(),
        dynamic_config: yaml.updates.enable_dynamic_config.unwrap_or(false),
        interval: secs(
            yaml.updates.poll_interval_seconds,
            "updates.poll_interval_seconds",
            DEFAULT_REPORT_INTERVAL.as_secs(),
        )?,
    }))
}

/// An `http://` or `https://` URL with a host.
fn check_http_url(key: &str, url: &str) -> Result<()> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .with_context(|| format!("{key}: `{url}` is not an http:// or https:// URL"))?;
    if rest.is_empty() || rest.starts_with('/') {
        bail!("{key}: `{url}` has no host");
    }
    Ok(())
}

/// The effective configuration in the startup YAML's shape (`wasbox serve --print-config`);
/// the token is never shown.
pub fn effective_yaml(c: &ServeConfig) -> String {
    let v = serde_json::json!({
        "orchestrator": c.orchestrator.as_ref().map(|o| serde_json::json!({
            "url": o.url,
            "registration_psk": "<set, not shown>",
            "tls": { "ca_bundle_path": o.ca_bundle },
            "timeouts": {
                "connect_seconds": o.connect_timeout.as_secs(),
                "request_seconds": o.request_timeout.as_secs(),
            },
        })),
        "updates": c.orchestrator.as_ref().map(|o| serde_json::json!({
            "enable_dynamic_config": o.dynamic_config,
            "poll_interval_seconds": o.interval.as_secs(),
        })),
        "node": {
            "id": c.node_slug,
            "name": c.orchestrator.as_ref().and_then(|o| o.node_name.clone()),
            "labels": c.orchestrator.as_ref().map(|o| o.node_labels.clone()),
        },
        "worker_api": {
            "listen": c.listen.to_string(),
            "public_base_url": c.orchestrator.as_ref().map(|o| o.public_base_url.clone()),
            "bearer_token": if c.token_generated { "<generated at start>" } else { "<set, not shown>" },
            "max_request_bytes": c.max_request_bytes,
            "max_concurrent_jobs": c.max_concurrent,
            "max_sessions": c.max_sessions,
            "max_instances": c.max_instances,
            "vm_max_map_count": c.vm_max_map_count,
            "node_memory_mib": c.node_memory_mib,
            "max_connections": c.http.max_connections,
            "header_timeout_seconds": c.http.header_timeout.as_secs(),
            "body_timeout_seconds": c.http.body_timeout.as_secs(),
        },
        "sandbox": {
            "timeouts": {
                "default_seconds": c.default_timeout_secs,
                "max_seconds": c.max_timeout_secs,
            },
            "constraints_max_job_timeout_seconds": c.constraint_timeout_secs,
            "images": c.images,
            "network": {
                "allow": c.egress.allow.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "deny": c.egress.deny.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "ca_certs": c.egress.ca_certs,
            },
        },
        "storage": {
            "state_dir": c.state_dir,
            "cache_dir": c.cache_dir,
            "results": {
                "max_age_hours": c.retention.result_hours,
                "max_bytes": c.retention.result_bytes,
            },
            "volumes": {
                "max_count": c.volumes.max_volumes,
                "default_bytes": c.volumes.default_bytes,
                "max_bytes": c.volumes.max_bytes,
                "max_inodes": c.volumes.inodes,
            },
        },
        "telemetry": { "retention": {
            "max_db_bytes": c.retention.max_db_bytes,
            "log_days": c.retention.log_days,
            "container_event_days": c.retention.container_event_days,
            "inventory_days": c.retention.inventory_days,
        }},
        "logging": {
            "level": c.log.level,
            "format": if c.log.json { "json" } else { "text" },
        },
        "metrics": { "public": c.metrics_public },
        "fleet": {
            "node": c.fleet.node,
            "drain_delay_seconds": c.fleet.drain_delay.as_secs(),
        },
    });
    serde_norway::to_string(&v).unwrap_or_default()
}

/// The first line of a token file, which must not be empty.
fn read_token(p: &Path) -> Result<String> {
    let text = read(p)?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        bail!("{}: the token file is empty", p.display());
    }
    Ok(token)
}

fn read(p: &Path) -> Result<String> {
    std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))
}

fn parse_constraints(text: &str) -> Result<Constraints> {
    let v: serde_json::Value = serde_json::from_str(text)?;
    let obj = v.get("constraints").cloned().unwrap_or(v);
    Ok(serde_json::from_value(obj)?)
}

/// 32 random bytes from the kernel, hex-encoded.
pub fn generate_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").context("opening /dev/urandom")?,
        &mut bytes,
    )?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str, constraints: Option<&str>) -> ServeConfig {
        let dir = tempfile::tempdir().unwrap();
        let y = dir.path().join("node.yaml");
        std::fs::write(&y, yaml).unwrap();
        let mut flags = Flags {
            config: Some(y),
            ..Flags::default()
        };
        if let Some(c) = constraints {
            let p = dir.path().join("c.json");
            std::fs::write(&p, c).unwrap();
            flags.constraints = Some(p);
        }
        load(flags, |_| None).unwrap()
    }

    /// The timeout rules of worker-api-node.md, row by row.
    #[test]
    fn timeout_rules() {
        let d = config("", None);
        assert_eq!(d.job_timeout(None).as_secs(), 3600);
        assert_eq!(d.job_timeout(Some(30)).as_secs(), 30);
        assert_eq!(d.job_timeout(Some(20_000)).as_secs(), 10800);
        let y = config(
            "sandbox:\n  timeouts:\n    default_seconds: 120\n    max_seconds: 600\n",
            None,
        );
        assert_eq!(y.job_timeout(None).as_secs(), 120);
        assert_eq!(y.job_timeout(Some(700)).as_secs(), 600);
        let small_max = config(
            "sandbox:\n  timeouts:\n    default_seconds: 900\n    max_seconds: 60\n",
            None,
        );
        assert_eq!(small_max.job_timeout(None).as_secs(), 60);
        let c = config(
            "",
            Some(r#"{"constraints":{"max_job_timeout_seconds":45}}"#),
        );
        assert_eq!(c.job_timeout(None).as_secs(), 45);
        assert_eq!(c.job_timeout(Some(10)).as_secs(), 10);
        assert_eq!(c.job_timeout(Some(100)).as_secs(), 45);
    }

    #[test]
    fn request_limit_is_the_minimum() {
        assert_eq!(config("", None).max_request_bytes, 10 << 20);
        let y = config("worker_api:\n  max_request_bytes: 2048\n", None);
        assert_eq!(y.max_request_bytes, 2048);
        let c = config(
            "worker_api:\n  max_request_bytes: 2048\n",
            Some(r#"{"max_request_bytes": 1024}"#),
        );
        assert_eq!(c.max_request_bytes, 1024);
    }

    #[test]
    fn token_precedence() {
        let dir = tempfile::tempdir().unwrap();
        let y = dir.path().join("node.yaml");
        std::fs::write(&y, "worker_api:\n  bearer_token: from-yaml\n").unwrap();
        let flags = || Flags {
            config: Some(y.clone()),
            ..Flags::default()
        };
        assert_eq!(load(flags(), |_| None).unwrap().token, "from-yaml");
        let env = |k: &str| (k == "WASBOX_TOKEN").then(|| "from-env".to_string());
        assert_eq!(load(flags(), env).unwrap().token, "from-env");
        let mut f = flags();
        f.token = Some("from-flag".into());
        assert_eq!(load(f, env).unwrap().token, "from-flag");
        let file = dir.path().join("token");
        std::fs::write(&file, "from-file\n").unwrap();
        let mut f = flags();
        f.token_file = Some(file.clone());
        assert_eq!(load(f, env).unwrap().token, "from-file");
        let file_env =
            |k: &str| (k == "WASBOX_TOKEN_FILE").then(|| file.to_string_lossy().into_owned());
        assert_eq!(load(flags(), file_env).unwrap().token, "from-file");
        std::fs::write(&file, "\n").unwrap();
        assert!(
            load(flags(), file_env).is_err(),
            "an empty token file is refused"
        );
        let generated = load(Flags::default(), |_| None).unwrap();
        assert!(generated.token_generated);
        assert_eq!(generated.token.len(), 64);
    }

    /// Every YAML key can come from the environment, typed as the YAML would be, and an
    /// environment variable wins over the file.
    #[test]
    fn every_key_has_an_environment_variable() {
        let dir = tempfile::tempdir().unwrap();
        let y = dir.path().join("node.yaml");
        std::fs::write(
            &y,
            "node:\n  id: from-yaml\nworker_api:\n  max_sessions: 7\nstorage:\n  state_dir: /yaml\n",
        )
        .unwrap();
        let flags = || Flags {
            config: Some(y.clone()),
            ..Flags::default()
        };
        let c = load(flags(), |_| None).unwrap();
        assert_eq!((c.node_slug.as_str(), c.max_sessions), ("from-yaml", 7));
        assert_eq!(c.state_dir, PathBuf::from("/yaml"));
        let env = |k: &str| match k {
            "WASBOX_NODE_ID" => Some("12345".to_string()),
            "WASBOX_WORKER_API_MAX_SESSIONS" => Some("9".into()),
            "WASBOX_STORAGE_STATE_DIR" => Some("/env".into()),
            "WASBOX_SANDBOX_TIMEOUTS_MAX_SECONDS" => Some("60".into()),
            "WASBOX_TELEMETRY_RETENTION_LOG_DAYS" => Some("2".into()),
            "WASBOX_LOGGING_FORMAT" => Some("json".into()),
            "WASBOX_SANDBOX_IMAGES" => Some(r#"[{"match": "py*", "image": "base"}]"#.into()),
            _ => None,
        };
        let c = load(flags(), env).unwrap();
        assert_eq!(c.node_slug, "12345", "a text key stays text");
        assert_eq!(c.max_sessions, 9);
        assert_eq!(c.state_dir, PathBuf::from("/env"));
        assert_eq!(c.max_timeout_secs, 60);
        assert_eq!(c.retention.log_days, 2);
        assert!(c.log.json);
        assert_eq!(c.image_for("python:3"), Some("base"));
        assert_eq!(c.image_for("alpine"), None);
        let default = load(flags(), |_| None).unwrap();
        assert_eq!(default.image_for("datasci"), Some("datasci"));
        assert_eq!(default.image_for("code-interpreter-v1"), Some("datasci"));
        assert_eq!(default.image_for("python:3.12"), Some("base"));
        let bad = |k: &str| (k == "WASBOX_WORKER_API_MAX_SESSIONS").then(|| "many".to_string());
        let e = format!("{:#}", load(flags(), bad).unwrap_err());
        assert!(
            e.contains("WASBOX_WORKER_API_MAX_SESSIONS") && e.contains("max_sessions"),
            "{e}"
        );
        // The spec's retention is a ceiling.
        let lax = |k: &str| (k == "WASBOX_TELEMETRY_RETENTION_LOG_DAYS").then(|| "90".to_string());
        assert_eq!(load(flags(), lax).unwrap().retention.log_days, 7);
        for (key, _) in KEYS {
            assert!(env_name(key).starts_with("WASBOX_"));
        }
        let shown = effective_yaml(&load(flags(), env).unwrap());
        assert!(
            shown.contains("state_dir: /env") && !shown.contains("from-yaml"),
            "{shown}"
        );
    }

    #[test]
    fn a_bad_file_is_named_with_its_key_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let y = dir.path().join("node.yaml");
        std::fs::write(&y, "worker_api:\n  max_sessions: lots\n").unwrap();
        let e = load(
            Flags {
                config: Some(y),
                ..Flags::default()
            },
            |_| None,
        )
        .unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("worker_api.max_sessions") && e.contains("line 2"),
            "{e}"
        );
    }

    #[test]
    fn images_map_by_pattern() {
        let all = config("", None);
        assert_eq!(all.image_for("alpine:latest"), Some("base"));
        let some = config(
            "sandbox:\n  images:\n    - match: \"bash:*\"\n      image: base\n    - match: \"registry.example.com/*\"\n      image: base\n",
            None,
        );
        assert_eq!(some.image_for("bash:5"), Some("base"));
        assert_eq!(
            some.image_for("registry.example.com/cynode/base:1"),
            Some("base")
        );
        assert_eq!(some.image_for("alpine:latest"), None);
    }

    /// A fleet node's ids begin with its name and `-`; it owns those alone, a node on its
    /// own owns every id; names that are no DNS label are refused.
    #[test]
    fn fleet_ids_route_by_the_node_s_name() {
        let f = Fleet {
            node: Some("wasbox-1".into()),
            drain_delay: Duration::ZERO,
        };
        assert_eq!(f.own("i12"), "wasbox-1-i12");
        assert!(f.owns("wasbox-1-x") && f.owns("wasbox-1-snap-1"));
        for other in ["wasbox-10-x", "wasbox-1", "wasbox-1x", "x", "wasbox-0-x"] {
            assert!(!f.owns(other), "{other}");
        }
        assert_eq!(f.unowned("wasbox-1-snap-9"), Some("snap-9"));
        assert_eq!(Fleet::default().own("x"), "x");
        assert!(Fleet::default().owns("anything"));
        for bad in ["-a", "a-", "Wasbox", "a.b", "a_b", "a b", &"a".repeat(41)] {
            let flags = Flags {
                token: Some("t".into()),
                fleet_node: Some(bad.into()),
                ..Flags::default()
            };
            assert!(load(flags, |_| None).is_err(), "{bad}");
        }
        let flags = Flags {
            token: Some("t".into()),
            fleet_node: Some("wasbox-0".into()),
            ..Flags::default()
        };
        let c = load(flags, |k| {
            (k == "WASBOX_FLEET_DRAIN_DELAY_SECONDS").then(|| "7".into())
        })
        .unwrap();
        assert_eq!(c.fleet.node.as_deref(), Some("wasbox-0"));
        assert_eq!(c.fleet.drain_delay, Duration::from_secs(7));
    }
}
