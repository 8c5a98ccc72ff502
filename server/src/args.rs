//! Value parsers and argument groups the front-ends' command lines share.

use std::path::PathBuf;
use std::time::Duration;

/// Where sandboxes may connect: `--allow-net`, `--deny-net`, `--ca-cert` (`wasbox serve`
/// reads the same from its configuration file and environment too, where these flags win).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct NetArgs {
    /// Let sandboxes connect to these destinations at most (repeatable, comma lists):
    /// `example.org`, `*.example.org`, `10.1.2.3`, `10.0.0.0/8`, `[::1]`, `*`, each with an
    /// optional `:port`. Loopback, private and link-local addresses and this node's own
    /// need an address rule of their own [env: WASBOX_SANDBOX_NETWORK_ALLOW (serve)]
    /// [default: nowhere].
    #[arg(long = "allow-net", value_name = "RULES")]
    pub allow_net: Vec<String>,
    /// Destinations no sandbox reaches, whatever allows them (same syntax)
    /// [env: WASBOX_SANDBOX_NETWORK_DENY (serve)].
    #[arg(long = "deny-net", value_name = "RULES")]
    pub deny_net: Vec<String>,
    /// PEM file of extra trusted roots for sandboxes' HTTPS (repeatable)
    /// [env: WASBOX_SANDBOX_NETWORK_CA_CERTS (serve)].
    #[arg(long = "ca-cert", value_name = "FILE")]
    pub ca_cert: Vec<PathBuf>,
}

/// Longest duration a command-line option takes (ten years): more is refused, not wrapped.
pub const MAX_SECONDS: f64 = 10.0 * 366.0 * 24.0 * 3600.0;

/// A positive number of seconds (fractions allowed), at most [`MAX_SECONDS`].
pub fn seconds(v: &str) -> Result<Duration, String> {
    let secs: f64 = v
        .trim()
        .parse()
        .ok()
        .filter(|s: &f64| *s > 0.0 && s.is_finite())
        .ok_or_else(|| format!("`{v}` is not a positive number of seconds"))?;
    if secs > MAX_SECONDS {
        return Err(format!(
            "`{v}` seconds is more than the maximum of {MAX_SECONDS} (ten years)"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A number of bytes, with an optional K, M or G suffix (powers of 1024).
pub fn bytes(v: &str) -> Result<u64, String> {
    let t = v.trim();
    let (digits, shift) = match t.as_bytes().last() {
        Some(b'K' | b'k') => (&t[..t.len() - 1], 10),
        Some(b'M' | b'm') => (&t[..t.len() - 1], 20),
        Some(b'G' | b'g') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("`{v}` is not a number of bytes (e.g. 1048576, 512K, 64M, 1G)"))
}

/// `KEY=VALUE`, with a non-empty key free of `=` and NUL.
pub fn key_value(v: &str) -> Result<(String, String), String> {
    let (k, val) = v
        .split_once('=')
        .ok_or_else(|| format!("`{v}` is not KEY=VALUE"))?;
    if k.is_empty() || k.contains('\0') || val.contains('\0') {
        return Err(format!("`{v}` is not KEY=VALUE"));
    }
    Ok((k.to_string(), val.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_positive_and_bounded() {
        assert_eq!(seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert!(seconds("0").is_err());
        assert!(seconds("-3").is_err());
        assert!(seconds("nan").is_err());
        assert!(seconds("1e19").unwrap_err().contains("maximum"));
        assert!(seconds("inf").is_err());
    }

    #[test]
    fn byte_counts() {
        assert_eq!(bytes("512"), Ok(512));
        assert_eq!(bytes("4K"), Ok(4096));
        assert_eq!(bytes("1G"), Ok(1 << 30));
        assert!(bytes("-1").is_err());
        assert!(bytes("1T").is_err());
        assert!(bytes("99999999999999999999G").is_err());
    }

    #[test]
    fn key_values() {
        assert_eq!(key_value("A=b=c"), Ok(("A".into(), "b=c".into())));
        assert!(key_value("=x").is_err());
        assert!(key_value("novalue").is_err());
        assert!(key_value("A\0B=1").is_err());
    }
}
