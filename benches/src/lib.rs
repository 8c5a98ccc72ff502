//! Shared pieces of the wasbox benchmarks: the release binary the end-to-end drivers run,
//! percentiles, and reading criterion's medians back to print them side by side with their
//! native baselines.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Cargo's target directory.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// Builds the release `wasbox` (a no-op when it is up to date) and returns its path.
pub fn release_wasbox() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = std::process::Command::new(cargo)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args(["build", "--release", "--quiet", "-p", "wasbox"])
        .status()
        .expect("cargo build");
    assert!(built.success(), "building wasbox failed");
    target_dir().join("release/wasbox")
}

/// The `q` quantile (0 to 1) of sorted latencies; zero for none.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Criterion's output directory (`target/criterion`).
pub fn criterion_dir() -> PathBuf {
    target_dir().join("criterion")
}

/// The median (in nanoseconds) criterion measured for `group/id`, if it ran.
pub fn median_ns(group: &str, id: &str) -> Option<f64> {
    // Criterion names a group's directory after the group with `/` replaced by `_`.
    let dir = group.replace('/', "_");
    let path = criterion_dir()
        .join(dir)
        .join(id)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

fn human(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.1} us", ns / 1e3)
    }
}

/// Prints one table row per (group, wasbox id, native id): both medians and native/wasbox.
pub fn print_ratios(rows: &[(&str, &str, &str)]) {
    println!();
    println!(
        "{:<36} {:>12} {:>12} {:>16}",
        "benchmark (medians)", "wasbox", "native", "native / wasbox"
    );
    for (group, ours, native) in rows {
        let label = format!("{group} {ours}");
        match (median_ns(group, ours), median_ns(group, native)) {
            (Some(a), Some(b)) => println!(
                "{:<36} {:>12} {:>12} {:>15.1}x",
                label,
                human(a),
                human(b),
                b / a
            ),
            _ => println!("{label:<36} (not measured in this run)"),
        }
    }
}

/// Prints the medians of benchmarks that have no native counterpart.
pub fn print_medians(rows: &[(&str, &str)]) {
    for (group, id) in rows {
        let label = format!("{group} {id}");
        match median_ns(group, id) {
            Some(a) => println!("{label:<36} {:>12} {:>12} {:>16}", human(a), "-", "-"),
            None => println!("{label:<36} (not measured in this run)"),
        }
    }
}
