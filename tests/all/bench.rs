//! `wasbox bench`: the harness itself, run quickly on the mechanisms this machine has. Every
//! (workload, mechanism) cell is either measured or skipped with a reason; native and wasbox
//! (present everywhere) are always measured; the three outputs are written. No timing is
//! asserted here: performance is reported by the bench, not tested.

use std::time::Duration;

use crate::support::runtime::{run_bounded, wasbox};

#[test]
fn quick_bench_fills_or_explains_every_cell() {
    let out = tempfile::tempdir().unwrap();
    let mut cmd = wasbox();
    cmd.args([
        "bench",
        "--quick",
        "--runs",
        "2",
        "--density-max",
        "20",
        "--out",
    ])
    .arg(out.path());
    let run = run_bounded(cmd, Duration::from_secs(600));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "bench failed: {stderr}");
    // The progress bar said what ran.
    assert!(stderr.contains("compute/sha256"), "{stderr}");

    let samples: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("samples.json")).unwrap()).unwrap();
    let workloads = samples["workloads"].as_array().unwrap();
    let cells = samples["cells"].as_array().unwrap();
    let mechanisms = [
        "native",
        "bwrap",
        "wasbox",
        "wasbox-run",
        "wasbox-http",
        "microvm",
    ];
    assert_eq!(workloads.len(), 17, "{workloads:?}");
    assert_eq!(cells.len(), workloads.len() * mechanisms.len());
    for w in workloads {
        let name = w[0].as_str().unwrap();
        for m in mechanisms {
            let cell = cells
                .iter()
                .find(|c| c["workload"] == name && c["mechanism"] == m)
                .unwrap_or_else(|| panic!("no cell for {name} under {m}"));
            let measured = cell["median_us"].is_number();
            let why = cell["skipped"].as_str().unwrap_or("");
            assert!(
                measured == why.is_empty(),
                "{name} under {m}: measured or skipped with a reason, exactly one: {cell}"
            );
            if measured {
                assert_eq!(cell["samples_us"].as_array().unwrap().len(), 2, "{cell}");
                assert!(cell["p90_us"].as_f64().unwrap() >= cell["median_us"].as_f64().unwrap());
                assert!(cell["ratio_to_native"].as_f64().unwrap() > 0.0, "{cell}");
            }
            let always = m == "native" || m == "wasbox";
            let python_missing = name.starts_with("python") && m == "native" && !measured;
            let node_missing = (name.starts_with("node") || name.starts_with("js/"))
                && m == "native"
                && why == "no node on this machine"
                && std::env::var_os("WASBOX_REQUIRE_TOOLS").is_none();
            if always && !python_missing && !node_missing {
                assert!(measured, "{name} must run under {m}: {cell}");
            }
        }
    }
    // Where bubblewrap runs at all, it runs whatever runs natively, wherever this checkout
    // lives (one under /tmp included, which bubblewrap's private /tmp would hide).
    let cell = |w: &serde_json::Value, m: &str| {
        cells
            .iter()
            .find(|c| c["workload"] == w[0] && c["mechanism"] == m)
            .unwrap()
            .clone()
    };
    let bwrap_works = workloads
        .iter()
        .any(|w| w[0] == "start/true" && cell(w, "bwrap")["median_us"].is_number());
    if bwrap_works {
        for w in workloads {
            if cell(w, "native")["median_us"].is_number() {
                let c = cell(w, "bwrap");
                assert!(c["median_us"].is_number(), "{} under bwrap: {c}", w[0]);
            }
        }
    }
    let density = samples["density"].as_array().unwrap();
    let wasbox_density = density
        .iter()
        .find(|d| d["mechanism"] == "wasbox in process")
        .expect("a wasbox density row");
    assert_eq!(wasbox_density["live"], 20, "{wasbox_density}");
    assert!(wasbox_density["kib_per_sandbox"].as_f64().unwrap() > 0.0);
    let node_density = density
        .iter()
        .find(|d| d["mechanism"] == "wasbox in process, a live node in each")
        .expect("a density row of live node instances");
    assert_eq!(node_density["live"], 20, "{node_density}");

    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    for part in [
        "| start/true |",
        "## Density",
        "## Goals",
        "## Published figures",
    ] {
        assert!(md.contains(part), "report.md lacks {part}:\n{md}");
    }
    let svg = std::fs::read_to_string(out.path().join("report.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("wasbox in process"));
}

#[test]
fn bench_kernel_runs_natively_and_rejects_bad_arguments() {
    let ok = run_bounded(
        {
            let mut c = wasbox();
            c.args(["bench-kernel", "sha256", "0"]);
            c
        },
        Duration::from_secs(60),
    );
    assert!(ok.status.success());
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout).trim(),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    let bad = run_bounded(
        {
            let mut c = wasbox();
            c.args(["bench-kernel", "sha256", "lots"]);
            c
        },
        Duration::from_secs(60),
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("MIB must be a number"));
}

#[test]
fn a_density_only_run_ends_with_its_report() {
    // No timed cell at all: the chart once had no axis to draw and never finished.
    let out = tempfile::tempdir().unwrap();
    let mut cmd = wasbox();
    cmd.args(["bench", "--only", "density", "--density-max", "3", "--out"])
        .arg(out.path());
    let run = run_bounded(cmd, Duration::from_secs(120));
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(report.contains("| wasbox in process | 3 |"), "{report}");
    assert!(
        report.contains("| wasbox in process, a live node in each | 3 |"),
        "{report}"
    );
    assert!(out.path().join("report.svg").exists());
}
