//! envd's and the E2B control plane's messages as plain serde structs. envd's are the
//! protojson form of `process.proto` and `filesystem.proto`: lowerCamelCase names (the proto
//! names are accepted too), bytes as base64, 64-bit integers as strings, enums by name (or
//! number), absent fields as defaults.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

// ----- process.proto -----

#[derive(Deserialize, Serialize, Default, Clone, Debug)]
#[serde(rename_all = "camelCase", default)]
pub struct ProcessConfig {
    pub cmd: String,
    pub args: Vec<String>,
    pub envs: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

#[derive(Deserialize, Default, Clone, Copy, Debug)]
#[serde(default)]
pub struct PtySize {
    pub cols: u32,
    pub rows: u32,
}

#[derive(Deserialize, Default, Clone, Copy, Debug)]
#[serde(default)]
pub struct Pty {
    pub size: Option<PtySize>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct StartRequest {
    pub process: Option<ProcessConfig>,
    pub pty: Option<Pty>,
    pub tag: Option<String>,
    pub stdin: Option<bool>,
}

#[derive(Deserialize, Default, Clone, Debug)]
#[serde(default)]
pub struct ProcessSelector {
    pub pid: Option<u32>,
    pub tag: Option<String>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct SelectRequest {
    pub process: Option<ProcessSelector>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct UpdateRequest {
    pub process: Option<ProcessSelector>,
    pub pty: Option<Pty>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct ProcessInput {
    #[serde(deserialize_with = "opt_b64")]
    pub stdin: Option<Vec<u8>>,
    #[serde(deserialize_with = "opt_b64")]
    pub pty: Option<Vec<u8>>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct SendInputRequest {
    pub process: Option<ProcessSelector>,
    pub input: Option<ProcessInput>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct StreamInputStart {
    pub process: Option<ProcessSelector>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct StreamInputData {
    pub input: Option<ProcessInput>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct StreamInputRequest {
    pub start: Option<StreamInputStart>,
    pub data: Option<StreamInputData>,
    pub keepalive: Option<serde_json::Value>,
}

/// `process.Signal`: by name or number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Signal {
    #[default]
    Unspecified,
    Term,
    Kill,
}

impl<'de> Deserialize<'de> for Signal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Ok(match (&v, v.as_u64()) {
            (serde_json::Value::String(s), _) if s == "SIGNAL_SIGTERM" => Signal::Term,
            (serde_json::Value::String(s), _) if s == "SIGNAL_SIGKILL" => Signal::Kill,
            (_, Some(15)) => Signal::Term,
            (_, Some(9)) => Signal::Kill,
            _ => Signal::Unspecified,
        })
    }
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct SendSignalRequest {
    pub process: Option<ProcessSelector>,
    pub signal: Signal,
}

/// One event of a process stream (`ProcessEvent`, wrapped as `{"event": ...}`).
#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub enum ProcessEvent {
    Start { pid: u32 },
    Data(DataEvent),
    End(EndEvent),
    Keepalive {},
}

#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub enum DataEvent {
    #[serde(serialize_with = "b64")]
    Stdout(Vec<u8>),
    #[serde(serialize_with = "b64")]
    Stderr(Vec<u8>),
    #[serde(serialize_with = "b64")]
    Pty(Vec<u8>),
}

#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct EndEvent {
    pub exit_code: i32,
    pub exited: bool,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Serialize)]
pub struct EventMessage<'a> {
    pub event: &'a ProcessEvent,
}

#[derive(Serialize, Debug)]
pub struct ProcessInfo {
    pub config: ProcessConfig,
    pub pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

// ----- filesystem.proto -----

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct PathRequest {
    pub path: String,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct ListDirRequest {
    pub path: String,
    pub depth: u32,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct MoveRequest {
    pub source: String,
    pub destination: String,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default, rename_all = "camelCase")]
pub struct WatchRequest {
    pub path: String,
    pub recursive: bool,
    #[serde(alias = "include_entry")]
    pub include_entry: bool,
    #[serde(alias = "allow_network_mounts")]
    pub allow_network_mounts: bool,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default, rename_all = "camelCase")]
pub struct WatcherRequest {
    #[serde(alias = "watcher_id")]
    pub watcher_id: String,
}

#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EntryInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub path: String,
    /// int64: a string in protojson.
    pub size: String,
    pub mode: u32,
    pub permissions: String,
    pub owner: String,
    pub group: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symlink_target: Option<String>,
    pub is_symlink: bool,
    /// Metadata given at upload (`X-Metadata-*`), kept as `user.e2b.*` extended attributes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FilesystemEvent {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<EntryInfo>,
}

fn b64<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(data))
}

/// protojson bytes: standard or URL-safe base64, padded or not.
pub fn decode_b64(s: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    STANDARD
        .decode(s)
        .or_else(|_| STANDARD_NO_PAD.decode(s))
        .or_else(|_| URL_SAFE.decode(s))
        .or_else(|_| URL_SAFE_NO_PAD.decode(s))
        .ok()
}

fn opt_b64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    match s {
        None => Ok(None),
        Some(s) => decode_b64(&s)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom("bytes are not base64")),
    }
}

// ----- the control plane (openapi.yml) -----

/// `NewSandbox` (v1) and `NewSandboxV2`: what wasbox uses of them.
#[derive(Deserialize, Default, Debug)]
#[serde(default, rename_all = "camelCase")]
pub struct NewSandbox {
    #[serde(rename = "templateID")]
    pub template_id: Option<String>,
    pub timeout: Option<i64>,
    pub metadata: Option<BTreeMap<String, String>>,
    pub env_vars: Option<BTreeMap<String, String>>,
    #[serde(rename = "allow_internet_access")]
    pub allow_internet_access: Option<bool>,
    pub network: Option<NetworkConfig>,
    /// Pause (rather than kill) when the timeout comes.
    #[serde(rename = "autoPause")]
    pub auto_pause: Option<bool>,
    /// Whether that pause keeps the running state (true, the default) or only the files.
    #[serde(rename = "autoPauseMemory")]
    pub auto_pause_memory: Option<bool>,
    #[serde(rename = "autoResume")]
    pub auto_resume: Option<AutoResume>,
    /// Volumes to attach: `[{name, path}]` (E2B's `SandboxVolumeMount`).
    #[serde(rename = "volumeMounts")]
    pub volume_mounts: Option<Vec<VolumeMountWire>>,
}

/// One of `volumeMounts`.
#[derive(Deserialize, Debug, Clone)]
pub struct VolumeMountWire {
    pub name: String,
    pub path: String,
    /// Attached read-only (wasbox's own addition; E2B's SDK sends no such field).
    #[serde(default, rename = "readOnly")]
    pub read_only: bool,
}

/// `autoResume` of `NewSandbox`.
#[derive(Deserialize, Default, Debug, Clone, Copy)]
#[serde(default)]
pub struct AutoResume {
    pub enabled: bool,
}

/// `network` of `NewSandbox`, and the body of `PUT /sandboxes/{id}/network`
/// (`SandboxNetworkUpdateConfig`, which also carries `allow_internet_access`).
#[derive(Deserialize, Default, Debug)]
#[serde(default, rename_all = "camelCase")]
pub struct NetworkConfig {
    pub allow_out: Option<Vec<String>>,
    pub deny_out: Option<Vec<String>>,
    #[serde(rename = "allow_internet_access")]
    pub allow_internet_access: Option<bool>,
}

/// `network` of `SandboxDetail`.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInfo {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_out: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny_out: Vec<String>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct TimeoutRequest {
    pub timeout: Option<i64>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default, rename_all = "camelCase")]
pub struct PauseRequest {
    /// `false`: E2B's "filesystem" mode (running processes are dropped).
    pub memory: Option<bool>,
    pub require_healthy_guest: Option<bool>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct ForkRequest {
    pub timeout: Option<i64>,
    pub count: Option<i64>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct RefreshRequest {
    pub duration: Option<i64>,
}

/// The create and connect answer (`Sandbox`).
#[derive(Serialize, Debug)]
pub struct SandboxWire {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(rename = "clientID")]
    pub client_id: String,
    #[serde(rename = "envdVersion")]
    pub envd_version: &'static str,
    #[serde(rename = "envdAccessToken")]
    pub envd_access_token: String,
    /// What the SDK sends on requests to the sandbox's ports (the code interpreter's).
    #[serde(rename = "trafficAccessToken")]
    pub traffic_access_token: String,
    pub domain: Option<String>,
}

/// `SandboxDetail` and `ListedSandbox`.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct SandboxDetail {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(rename = "clientID")]
    pub client_id: String,
    pub alias: String,
    pub started_at: String,
    pub end_at: String,
    pub envd_version: &'static str,
    pub cpu_count: u32,
    #[serde(rename = "memoryMB")]
    pub memory_mb: u64,
    #[serde(rename = "diskSizeMB")]
    pub disk_size_mb: u64,
    pub state: &'static str,
    pub metadata: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub envd_access_token: Option<String>,
    pub domain: Option<String>,
    pub allow_internet_access: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkInfo>,
    /// The volumes attached: `[{name, path}]`.
    #[serde(rename = "volumeMounts")]
    pub volume_mounts: Vec<BTreeMap<&'static str, String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_accept_protojson_and_proto_names() {
        let r: StartRequest = serde_json::from_str(
            r#"{"process":{"cmd":"/bin/bash","args":["-l","-c","ls"],"envs":{"A":"1"},"cwd":"/tmp"},"stdin":true,"pty":{"size":{"cols":80,"rows":24}}}"#,
        )
        .unwrap();
        let p = r.process.unwrap();
        assert_eq!(
            (p.cmd.as_str(), p.args.len(), p.cwd.as_deref()),
            ("/bin/bash", 3, Some("/tmp"))
        );
        assert_eq!(r.stdin, Some(true));
        assert_eq!(r.pty.unwrap().size.unwrap().cols, 80);
        let w: WatchRequest =
            serde_json::from_str(r#"{"path":"/x","include_entry":true}"#).unwrap();
        assert!(w.include_entry);
        let w: WatchRequest = serde_json::from_str(r#"{"path":"/x","includeEntry":true}"#).unwrap();
        assert!(w.include_entry);
        let s: SendSignalRequest =
            serde_json::from_str(r#"{"process":{"pid":3},"signal":"SIGNAL_SIGKILL"}"#).unwrap();
        assert_eq!((s.process.unwrap().pid, s.signal), (Some(3), Signal::Kill));
        let s: SendSignalRequest = serde_json::from_str(r#"{"signal":15}"#).unwrap();
        assert_eq!(s.signal, Signal::Term);
    }

    #[test]
    fn bytes_are_base64_both_ways() {
        let i: SendInputRequest =
            serde_json::from_str(r#"{"process":{"pid":1},"input":{"stdin":"aGk-_w"}}"#).unwrap();
        assert_eq!(i.input.unwrap().stdin.unwrap(), b"hi>\xff");
        assert!(serde_json::from_str::<SendInputRequest>(r#"{"input":{"stdin":"%%"}}"#).is_err());
        let e = ProcessEvent::Data(DataEvent::Stdout(b"hi\n".to_vec()));
        assert_eq!(
            serde_json::to_string(&EventMessage { event: &e }).unwrap(),
            r#"{"event":{"data":{"stdout":"aGkK"}}}"#
        );
        let e = ProcessEvent::Keepalive {};
        assert_eq!(
            serde_json::to_string(&EventMessage { event: &e }).unwrap(),
            r#"{"event":{"keepalive":{}}}"#
        );
    }

    #[test]
    fn entries_use_protojson_types() {
        let e = EntryInfo {
            name: "a".into(),
            kind: "FILE_TYPE_FILE",
            path: "/home/user/a".into(),
            size: "12".into(),
            mode: 0o100644,
            permissions: "-rw-r--r--".into(),
            owner: "user".into(),
            group: "user".into(),
            modified_time: None,
            symlink_target: None,
            is_symlink: false,
            metadata: None,
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "FILE_TYPE_FILE");
        assert_eq!(v["size"], "12");
        assert_eq!(v["isSymlink"], false);
        assert!(v.get("metadata").is_none());
        let tagged = EntryInfo {
            metadata: Some([("author".to_string(), "mish".to_string())].into()),
            ..e
        };
        assert_eq!(
            serde_json::to_value(&tagged).unwrap()["metadata"]["author"],
            "mish"
        );
    }
}
