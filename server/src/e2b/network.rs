//! E2B's network options as policies: `allow_internet_access` and
//! `network.allowOut`/`denyOut` when a sandbox is created or its rules are replaced
//! (`PUT /sandboxes/{id}/network`, in `control`), and how they read back in the sandbox's
//! details. All of it within the node's own egress
//! policy (`--allow-net`): E2B's "all traffic" is whatever the node allows.

use axum::http::StatusCode;
use axum::response::Response;
use wasbox_runtime::{NetRule, NetworkPolicy};

use super::error;
use super::wire::{NetworkConfig, NetworkInfo};

/// E2B's sentinel for every destination (`ALL_TRAFFIC` in its SDKs).
const ALL_TRAFFIC: &str = "0.0.0.0/0";

fn rules(list: &[String], field: &str) -> Result<Vec<NetRule>, Response> {
    list.iter()
        .map(|entry| {
            if entry.trim() == ALL_TRAFFIC || entry.trim() == "::/0" {
                return Ok(NetRule::any());
            }
            entry
                .parse()
                .map_err(|e| error(StatusCode::BAD_REQUEST, format!("network.{field}: {e}")))
        })
        .collect()
}

/// The policy of E2B's options: what `allowOut` names is reachable, else what `denyOut`
/// does not cover (allow wins, as in E2B); `allow_internet_access: false` denies all
/// traffic, as `denyOut: ["0.0.0.0/0"]` does.
pub(super) fn policy(
    allow_internet_access: Option<bool>,
    network: Option<&NetworkConfig>,
) -> Result<NetworkPolicy, Response> {
    let allow = rules(
        network
            .and_then(|n| n.allow_out.as_deref())
            .unwrap_or_default(),
        "allowOut",
    )?;
    let mut deny = rules(
        network
            .and_then(|n| n.deny_out.as_deref())
            .unwrap_or_default(),
        "denyOut",
    )?;
    if allow_internet_access == Some(false) {
        deny.push(NetRule::any());
    }
    if allow.is_empty() && deny.is_empty() {
        return Ok(NetworkPolicy::Node);
    }
    if allow.is_empty() && deny.iter().any(NetRule::is_everything) {
        return Ok(NetworkPolicy::None);
    }
    Ok(NetworkPolicy::Rules { allow, deny })
}

/// The sandbox's `allowInternetAccess` and `network` as E2B reports them.
pub(super) fn describe(policy: &NetworkPolicy) -> (bool, Option<NetworkInfo>) {
    let shown = |rules: &[NetRule]| -> Vec<String> {
        rules
            .iter()
            .map(|r| {
                if r.is_everything() {
                    ALL_TRAFFIC.to_string()
                } else {
                    r.to_string()
                }
            })
            .collect()
    };
    match policy {
        NetworkPolicy::Node => (true, None),
        NetworkPolicy::Rules { allow, deny } => {
            let all_denied = deny.iter().any(NetRule::is_everything);
            (
                !all_denied,
                Some(NetworkInfo {
                    allow_out: shown(allow),
                    deny_out: shown(deny),
                }),
            )
        }
        _ => (
            false,
            Some(NetworkInfo {
                allow_out: Vec::new(),
                deny_out: vec![ALL_TRAFFIC.to_string()],
            }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(allow: &[&str], deny: &[&str]) -> NetworkConfig {
        NetworkConfig {
            allow_out: Some(allow.iter().map(|s| s.to_string()).collect()),
            deny_out: Some(deny.iter().map(|s| s.to_string()).collect()),
            allow_internet_access: None,
        }
    }

    #[test]
    fn e2b_options_become_policies() {
        assert_eq!(policy(None, None).ok(), Some(NetworkPolicy::Node));
        assert_eq!(policy(Some(false), None).ok(), Some(NetworkPolicy::None));
        let only = policy(None, Some(&cfg(&["api.example.org"], &[ALL_TRAFFIC]))).ok();
        let Some(NetworkPolicy::Rules { allow, deny }) = only else {
            panic!("rules expected");
        };
        assert_eq!(allow[0].to_string(), "api.example.org");
        assert!(deny[0].is_everything());
        assert!(policy(None, Some(&cfg(&["bad host"], &[]))).is_err());
        let (internet, info) = describe(&NetworkPolicy::Rules { allow, deny });
        assert!(!internet);
        assert_eq!(info.unwrap().deny_out, vec![ALL_TRAFFIC]);
    }
}
