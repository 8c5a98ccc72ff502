//! `wasbox bench`: what isolation costs on this machine, measured side by side. The same
//! workloads run under every mechanism available here (a native process is the baseline),
//! alternating the mechanisms within each round so that drift of the machine affects all
//! alike; the report (Markdown), the raw samples (JSON) and a chart (SVG) go to `--out`.
//! Figures published by systems that cannot run here are a separate table, never mixed in.

mod density;
#[path = "../../../guest-components/bench-compute/src/kernel.rs"]
mod kernel;
mod mechanisms;
mod report;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context as _, Result};
use clap::Args;
use serde::Serialize;

use mechanisms::{Bench, Mechanism, Work};

/// Measure what isolation costs here: start-up, pipelines, Python, compute, files and
/// density under a native process, bubblewrap, wasbox in process, `wasbox run` and wasbox
/// over HTTP, side by side.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// A short run (5 samples per cell, small inputs): under a minute.
    #[arg(long)]
    pub quick: bool,
    /// Where the report, the samples and the chart go [default: target/wasbox-bench].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Samples per cell [default: 20, or 5 with --quick].
    #[arg(long, value_name = "N")]
    pub runs: Option<usize>,
    /// The memory budget of the density measurement, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 4096)]
    pub density_budget_mib: usize,
    /// Most wasbox sandboxes the density measurement makes [default: 10000, or 200 with
    /// --quick].
    #[arg(long, value_name = "N")]
    pub density_max: Option<usize>,
    /// Only these workloads (comma-separated names or prefixes, e.g. start,compute).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub only: Vec<String>,
}

/// `wasbox bench-kernel ARGS`: a compute kernel, natively (the baseline of the wasm one).
#[derive(Args, Debug)]
pub struct KernelArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

pub fn kernel_main(args: KernelArgs) -> Result<i32> {
    match kernel::run(&args.args) {
        Ok(out) => {
            println!("{out}");
            Ok(0)
        }
        Err(e) => anyhow::bail!("bench-kernel: {e}"),
    }
}

/// One workload: what to run and what it must print.
struct Workload {
    name: &'static str,
    what: String,
    work: Work,
    expect: Expect,
}

enum Expect {
    Exactly(String),
    /// The same output under every mechanism (computed by the native run).
    Consistent,
}

fn workloads(quick: bool) -> Vec<Workload> {
    let cmd = |v: &[&str]| Work::Command(v.iter().map(|s| s.to_string()).collect());
    let kernel = |v: &[&str]| Work::Kernel(v.iter().map(|s| s.to_string()).collect());
    let (mib, records, rounds, files, js_scale) = if quick {
        ("16", "1000", "5", "200", "0.25")
    } else {
        ("64", "2000", "20", "1000", "4")
    };
    let mut all = vec![
        Workload {
            name: "start/true",
            what: "`sh -c 'true'`".into(),
            work: cmd(&["sh", "-c", "true"]),
            expect: Expect::Exactly(String::new()),
        },
        Workload {
            name: "start/echo",
            what: "`sh -c 'echo hello'`".into(),
            work: cmd(&["sh", "-c", "echo hello"]),
            expect: Expect::Exactly("hello\n".into()),
        },
        Workload {
            name: "pipeline",
            what: "`seq 1 100000 | sort -n | tail -1`".into(),
            work: cmd(&["sh", "-c", "seq 1 100000 | sort -n | tail -1"]),
            expect: Expect::Exactly("100000\n".into()),
        },
        Workload {
            name: "python/print",
            what: "`python3 -c 'print(2+2)'`".into(),
            work: cmd(&["python3", "-c", "print(2+2)"]),
            expect: Expect::Exactly("4\n".into()),
        },
        Workload {
            name: "python/loop",
            what: "a 200k-iteration Python loop building a dict".into(),
            work: cmd(&[
                "python3",
                "-c",
                "d = {}\nfor i in range(200000):\n    d[i] = i * 2\nprint(len(d))",
            ]),
            expect: Expect::Exactly("200000\n".into()),
        },
        Workload {
            name: "node/print",
            what: "`node -e 'console.log(2+2)'`".into(),
            work: cmd(&["node", "-e", "console.log(2+2)"]),
            expect: Expect::Exactly("4\n".into()),
        },
        Workload {
            name: "compute/sha256",
            what: format!("SHA-256 over {mib} MiB (the same Rust, native and wasm)"),
            work: kernel(&["sha256", mib]),
            expect: Expect::Consistent,
        },
        Workload {
            name: "compute/json",
            what: format!(
                "JSON serialise and parse of {records} records, {rounds} times (same Rust)"
            ),
            work: kernel(&["json", records, rounds]),
            expect: Expect::Consistent,
        },
        Workload {
            name: "files",
            what: format!("write {files} files of 4 KiB, read them back (same Rust)"),
            work: kernel(&["files", files, "4096"]),
            expect: Expect::Consistent,
        },
    ];
    // JavaScript kernels (kernels.js): the same source under native node and in a sandbox.
    for (name, what) in JS_KERNELS {
        all.push(Workload {
            name,
            what: format!(
                "JavaScript: {what} (`node -e KERNELS {} {js_scale}`)",
                &name[3..]
            ),
            work: cmd(&["node", "-e", JS_SOURCE, &name[3..], js_scale]),
            expect: Expect::Consistent,
        });
    }
    all
}

/// The source of the js/* workloads.
const JS_SOURCE: &str = include_str!("kernels.js");

/// The js/* workloads: name (`js/` and a kernel of kernels.js) and what it does.
const JS_KERNELS: &[(&str, &str)] = &[
    ("js/recursion", "recursive calls (fib)"),
    ("js/objects", "object literals made and read"),
    ("js/sort", "sort with a comparator"),
    ("js/strings", "string building, split and join"),
    ("js/json", "JSON stringify and parse"),
    ("js/regex", "regular expressions: exec, test, replace"),
    ("js/classes", "class instances and methods"),
    ("js/closures", "closures made and called"),
];

/// The samples of one cell, or why it has none.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    pub workload: &'static str,
    pub mechanism: &'static str,
    /// Wall times in microseconds, in the order taken.
    pub samples_us: Vec<f64>,
    pub median_us: Option<f64>,
    pub p90_us: Option<f64>,
    /// median / the native median.
    pub ratio_to_native: Option<f64>,
    pub skipped: Option<String>,
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// A progress line on stderr: redrawn in place on a terminal, one line per step otherwise.
struct Progress {
    total: usize,
    done: usize,
    tty: bool,
    started: Instant,
}

impl Progress {
    fn step(&mut self, what: &str) {
        self.done += 1;
        let width = 24;
        let filled = width * self.done / self.total.max(1);
        let bar = format!("{}{}", "#".repeat(filled), "-".repeat(width - filled));
        let line = format!(
            "[{bar}] {}/{} {:>4.0}s {what}",
            self.done,
            self.total,
            self.started.elapsed().as_secs_f64()
        );
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

pub fn main(args: BenchArgs) -> Result<i32> {
    let runs = args.runs.unwrap_or(if args.quick { 5 } else { 20 }).max(1);
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/wasbox-bench"));
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let selected: Vec<Workload> = workloads(args.quick)
        .into_iter()
        .filter(|w| {
            args.only.is_empty()
                || args
                    .only
                    .iter()
                    .any(|o| w.name == o || w.name.starts_with(o.as_str()))
        })
        .collect();
    let density_wanted = args.only.is_empty() || args.only.iter().any(|o| o == "density");
    let needs_http = selected.iter().any(|w| matches!(w.work, Work::Command(_)));
    eprintln!("wasbox bench: preparing (the first run compiles the programs once)");
    let bench = Bench::new(needs_http)?;

    let started = Instant::now();
    let mut progress = Progress {
        total: selected.len() * (runs + 1) + usize::from(density_wanted) * 4,
        done: 0,
        tty: std::io::stderr().is_terminal(),
        started,
    };
    let mut cells: Vec<Cell> = Vec::new();
    for w in &selected {
        let mechs: Vec<(Mechanism, Option<String>)> = Mechanism::ALL
            .iter()
            .map(|&m| (m, bench.unavailable(m, &w.work)))
            .collect();
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); mechs.len()];
        let mut failed: Vec<Option<String>> = mechs.iter().map(|(_, why)| why.clone()).collect();
        let mut reference: Option<String> = None;
        // One round more than measured: the first warms every mechanism and is dropped.
        for round in 0..=runs {
            progress.step(&format!("{} (round {round}/{runs})", w.name));
            for (i, (m, _)) in mechs.iter().enumerate() {
                if failed[i].is_some() {
                    continue;
                }
                match bench.run(*m, &w.work) {
                    Ok((t, stdout)) => {
                        let expected = match &w.expect {
                            Expect::Exactly(s) => Some(s.clone()),
                            Expect::Consistent => reference.clone(),
                        };
                        match expected {
                            Some(e) if e != stdout => {
                                failed[i] = Some(format!(
                                    "wrong output: {:?} (expected {:?})",
                                    stdout.chars().take(80).collect::<String>(),
                                    e.chars().take(80).collect::<String>()
                                ));
                                continue;
                            }
                            None => reference = Some(stdout),
                            _ => {}
                        }
                        if round > 0 {
                            samples[i].push(t.as_secs_f64() * 1e6);
                        }
                    }
                    Err(e) => failed[i] = Some(format!("{e:#}")),
                }
            }
        }
        // Median and p90 of each mechanism that ran to the end; ratios against native's.
        let stats: Vec<Option<(f64, f64)>> = samples
            .iter()
            .zip(&failed)
            .map(|(v, why)| {
                let mut sorted = v.clone();
                sorted.sort_by(f64::total_cmp);
                (why.is_none() && !sorted.is_empty())
                    .then(|| (percentile(&sorted, 0.5), percentile(&sorted, 0.9)))
            })
            .collect();
        let native_median = stats[0].map(|(median, _)| median);
        for (i, (m, _)) in mechs.iter().enumerate() {
            let median = stats[i].map(|(median, _)| median);
            cells.push(Cell {
                workload: w.name,
                mechanism: m.key(),
                samples_us: std::mem::take(&mut samples[i]),
                median_us: median,
                p90_us: stats[i].map(|(_, p90)| p90),
                ratio_to_native: median.zip(native_median).map(|(a, b)| a / b),
                skipped: failed[i].take(),
            });
        }
    }

    let mut densities = Vec::new();
    if density_wanted {
        let budget = args.density_budget_mib << 20;
        let max = args
            .density_max
            .unwrap_or(if args.quick { 200 } else { 10_000 });
        let sample = if args.quick { 20 } else { 200 };
        progress.step("density: native shells");
        densities.push(density::processes(
            "native process",
            density::native_shell,
            sample,
            budget,
        ));
        progress.step("density: bubblewrap shells");
        match bench.bwrap_path() {
            Ok(bwrap) => {
                let dir = tempfile::tempdir()?;
                let bargs = mechanisms::bwrap_args(dir.path(), None);
                densities.push(density::processes(
                    "bubblewrap",
                    || density::bwrap_shell(&bwrap, &bargs),
                    sample,
                    budget,
                ));
            }
            Err(why) => densities.push(density::Density::skipped("bubblewrap", &why)),
        }
        for (holding, step) in [
            (
                density::Holding::Shell,
                "density: wasbox sessions with a shell",
            ),
            (
                density::Holding::Node,
                "density: wasbox sessions with a shell and a live node",
            ),
        ] {
            progress.step(step);
            densities.push(density::wasbox(
                &bench.tokio,
                &bench.runtime,
                holding,
                max,
                budget,
            ));
        }
    }
    progress.finish();

    let elapsed = started.elapsed();
    let data = report::Report::new(
        &selected_descriptions(&selected),
        cells,
        densities,
        runs,
        args.quick,
        elapsed,
        args.density_budget_mib,
    );
    let md = data.markdown();
    std::fs::write(out_dir.join("report.md"), &md)?;
    std::fs::write(
        out_dir.join("samples.json"),
        serde_json::to_string_pretty(&data)?,
    )?;
    std::fs::write(out_dir.join("report.svg"), data.svg())?;
    println!("{md}");
    println!(
        "wasbox bench: wrote {0}/report.md, {0}/samples.json and {0}/report.svg in {1:.0}s",
        out_dir.display(),
        elapsed.as_secs_f64()
    );
    Ok(0)
}

fn selected_descriptions(w: &[Workload]) -> Vec<(&'static str, String)> {
    w.iter().map(|w| (w.name, w.what.clone())).collect()
}
