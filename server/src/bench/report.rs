//! The report of `wasbox bench`: a Markdown table of medians, p90s and ratios to native, the
//! density results, the goals met or missed, the published figures of systems that cannot
//! run here (a separate table, with sources), and an SVG chart of the start-up medians.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::Cell;
use super::density::Density;
use super::mechanisms::Mechanism;

#[derive(Serialize)]
pub struct Report {
    pub date: String,
    pub machine: String,
    pub runs_per_cell: usize,
    pub quick: bool,
    pub elapsed_s: f64,
    pub density_budget_mib: usize,
    pub workloads: Vec<(&'static str, String)>,
    pub cells: Vec<Cell>,
    pub density: Vec<Density>,
}

/// A figure published by a system that cannot be measured here, with where it comes from.
struct Published {
    system: &'static str,
    figure: &'static str,
    source: &'static str,
}

const PUBLISHED: &[Published] = &[
    Published {
        system: "Firecracker microVM",
        figure: "boots to guest user space in as little as 125 ms; under 5 MiB of memory overhead per microVM",
        source: "Firecracker project README and website (firecracker-microvm.github.io)",
    },
    Published {
        system: "Hyperlight micro-VM",
        figure: "about 0.0009 s to create a micro-VM and run a function",
        source: "Microsoft open source blog, Hyperlight, 2025-02-11",
    },
    Published {
        system: "bouvet (Firecracker sandboxes for agents)",
        figure: "a sandbox from its warm pool in about 150 ms, about 500 ms cold",
        source: "bouvet docs/CONFIG.md (warm pool section)",
    },
];

fn fmt_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{us:.0} µs")
    }
}

fn today() -> String {
    crate::rfc3339::format(std::time::SystemTime::now())
        .split('T')
        .next()
        .unwrap_or_default()
        .to_string()
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or("? GiB".into(), |kib| {
            format!("{:.0} GiB", kib as f64 / 1048576.0)
        });
    format!("{cores} cores ({cpu}), {mem}, {}", std::env::consts::ARCH)
}

impl Report {
    pub fn new(
        workloads: &[(&'static str, String)],
        cells: Vec<Cell>,
        density: Vec<Density>,
        runs: usize,
        quick: bool,
        elapsed: Duration,
        density_budget_mib: usize,
    ) -> Report {
        Report {
            date: today(),
            machine: machine(),
            runs_per_cell: runs,
            quick,
            elapsed_s: elapsed.as_secs_f64(),
            density_budget_mib,
            workloads: workloads.to_vec(),
            cells,
            density,
        }
    }

    fn cell(&self, workload: &str, m: Mechanism) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.workload == workload && c.mechanism == m.key())
    }

    fn median(&self, workload: &str, m: Mechanism) -> Option<f64> {
        self.cell(workload, m).and_then(|c| c.median_us)
    }

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# wasbox bench\n");
        let _ = writeln!(
            s,
            "{} on {}; {} runs per cell{} after one warm-up round, mechanisms alternated within \
             each round; {:.0} s in all.\n",
            self.date,
            self.machine,
            self.runs_per_cell,
            if self.quick { " (--quick)" } else { "" },
            self.elapsed_s
        );
        let _ = writeln!(
            s,
            "Each cell: median (p90) wall time, and the ratio of the median to the native \
             process's. Lower is better.\n"
        );
        let _ = write!(s, "| workload |");
        for m in Mechanism::ALL {
            let _ = write!(s, " {} |", m.name());
        }
        let _ = writeln!(s);
        let _ = write!(s, "|---|");
        for _ in Mechanism::ALL {
            let _ = write!(s, "---|");
        }
        let _ = writeln!(s);
        let mut notes: Vec<String> = Vec::new();
        for (w, _) in &self.workloads {
            let _ = write!(s, "| {w} |");
            for m in Mechanism::ALL {
                match self.cell(w, m) {
                    Some(Cell {
                        median_us: Some(med),
                        p90_us: Some(p90),
                        ratio_to_native,
                        ..
                    }) => {
                        let ratio =
                            ratio_to_native.map_or(String::new(), |r| format!(" · {r:.2}x"));
                        let _ = write!(s, " {} ({}){ratio} |", fmt_us(*med), fmt_us(*p90));
                    }
                    Some(Cell {
                        skipped: Some(why), ..
                    }) => {
                        let n = match notes.iter().position(|n| n == why) {
                            Some(i) => i + 1,
                            None => {
                                notes.push(why.clone());
                                notes.len()
                            }
                        };
                        let _ = write!(s, " skipped [{n}] |");
                    }
                    _ => {
                        let _ = write!(s, " – |");
                    }
                }
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s);
        for (i, n) in notes.iter().enumerate() {
            let _ = writeln!(s, "[{}] {}  ", i + 1, n.replace('\n', " "));
        }
        let _ = writeln!(s, "\nWorkloads:\n");
        for (w, what) in &self.workloads {
            let _ = writeln!(s, "- {w}: {what}");
        }

        if !self.density.is_empty() {
            let _ = writeln!(
                s,
                "\n## Density\n\nLive sandboxes, each holding an interactive `sh` that answered \
                 `echo ok`, within a budget of {} MiB (and, in the row that says so, a `node` \
                 program started from that shell that answered and stays alive: the difference \
                 between the two wasbox rows is what a live node instance costs). wasbox: its \
                 own resident memory growth divided by the sessions; processes: the PSS of each \
                 shell's process tree.\n",
                self.density_budget_mib
            );
            let _ = writeln!(
                s,
                "| mechanism | live | per sandbox | would fit in the budget | stopped because |"
            );
            let _ = writeln!(s, "|---|---|---|---|---|");
            for d in &self.density {
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.0} KiB | {} | {} |",
                    d.mechanism,
                    d.live,
                    d.kib_per_sandbox,
                    d.fit_in_budget,
                    d.stopped.replace('|', "/").replace('\n', " ")
                );
            }
        }

        let _ = writeln!(s, "\n## Goals\n");
        for (goal, verdict) in self.goals() {
            let _ = writeln!(s, "- {verdict}: {goal}");
        }

        let _ = writeln!(
            s,
            "\n## Published figures (not measured here)\n\nSystems that cannot run on this \
             machine, as their authors describe them. Not comparable cell by cell with the \
             table above.\n"
        );
        let _ = writeln!(s, "| system | published figure | source |");
        let _ = writeln!(s, "|---|---|---|");
        for p in PUBLISHED {
            let _ = writeln!(s, "| {} | {} | {} |", p.system, p.figure, p.source);
        }
        s
    }

    /// The issue's goals, each with "met", "MISSED" or "not measured" and the numbers.
    fn goals(&self) -> Vec<(String, String)> {
        let mut v = Vec::new();
        let verdict = |ok: bool| if ok { "met" } else { "MISSED" }.to_string();
        let nm = || "not measured".to_string();
        // start: in process ≥10x faster than native, ≥30x faster than bubblewrap.
        let start = ["start/true", "start/echo"];
        for w in start {
            let wb = self.median(w, Mechanism::WasboxInProcess);
            match (wb, self.median(w, Mechanism::Native)) {
                (Some(a), Some(b)) => v.push((
                    format!(
                        "{w}: wasbox in process at least 10x faster than native (it is {:.1}x)",
                        b / a
                    ),
                    verdict(b / a >= 10.0),
                )),
                _ => v.push((
                    format!("{w}: wasbox in process 10x faster than native"),
                    nm(),
                )),
            }
            match (wb, self.median(w, Mechanism::Bwrap)) {
                (Some(a), Some(b)) => v.push((
                    format!(
                        "{w}: wasbox in process at least 30x faster than bubblewrap (it is {:.1}x)",
                        b / a
                    ),
                    verdict(b / a >= 30.0),
                )),
                _ => v.push((
                    format!("{w}: wasbox in process 30x faster than bubblewrap"),
                    nm(),
                )),
            }
            match (
                self.median(w, Mechanism::WasboxRun),
                self.median(w, Mechanism::Bwrap),
            ) {
                (Some(a), Some(b)) => v.push((
                    format!(
                        "{w}: a whole `wasbox run` no slower than bubblewrap ({} vs {})",
                        fmt_us(a),
                        fmt_us(b)
                    ),
                    verdict(a <= b),
                )),
                _ => v.push((format!("{w}: `wasbox run` no slower than bubblewrap"), nm())),
            }
        }
        for w in ["compute/sha256", "compute/json"] {
            match (
                self.median(w, Mechanism::WasboxInProcess),
                self.median(w, Mechanism::Native),
            ) {
                (Some(a), Some(b)) => v.push((
                    format!("{w}: wasm within 1.3x of native (it is {:.2}x)", a / b),
                    verdict(a / b <= 1.3),
                )),
                _ => v.push((format!("{w}: wasm within 1.3x of native"), nm())),
            }
        }
        match self.density.iter().find(|d| d.mechanism.starts_with("wasbox")) {
            Some(d) => v.push((
                format!(
                    "density: at least 10,000 live sandboxes under 480 KiB each ({} live, {:.0} KiB each; {})",
                    d.live, d.kib_per_sandbox, d.stopped
                ),
                verdict(d.live >= 10_000 && d.kib_per_sandbox <= 480.0),
            )),
            None => v.push(("density: 10,000 live sandboxes under 480 KiB".into(), nm())),
        }
        v
    }

    /// A bar chart of the medians of every workload, one bar per mechanism, on a log scale
    /// (the workloads span microseconds to seconds).
    pub fn svg(&self) -> String {
        const COLORS: [&str; 6] = [
            "#555555", "#c0504d", "#4f81bd", "#8064a2", "#4bacc6", "#f79646",
        ];
        let mechs: Vec<Mechanism> = Mechanism::ALL.to_vec();
        let rows: Vec<&str> = self.workloads.iter().map(|(w, _)| *w).collect();
        let bar_h = 9.0;
        let group_h = bar_h * mechs.len() as f64 + 12.0;
        let (left, top, width) = (150.0, 50.0, 620.0);
        let height = top + group_h * rows.len() as f64 + 40.0;
        let values: Vec<f64> = self
            .cells
            .iter()
            .filter_map(|c| c.median_us)
            .filter(|v| v.is_finite())
            .collect();
        let hi = values.iter().copied().fold(1.0, f64::max);
        // No timed cell (a density-only run): an axis of one decade, not an endless one.
        let lo = values
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
            .min(hi)
            .max(1.0);
        let (l0, l1) = (
            lo.log10().floor(),
            hi.log10().ceil().max(lo.log10().floor() + 1.0),
        );
        let x = |us: f64| left + (us.max(1.0).log10() - l0) / (l1 - l0) * width;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="sans-serif" font-size="11">"#,
            left + width + 190.0
        );
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="10" y="20" font-size="14">wasbox bench, median wall time (log scale), {}</text>"#,
            self.date
        );
        let mut decade = l0;
        while decade <= l1 {
            let px = x(10f64.powf(decade));
            let _ = writeln!(
                s,
                r##"<line x1="{px}" y1="{}" x2="{px}" y2="{}" stroke="#dddddd"/><text x="{px}" y="{}" text-anchor="middle">{}</text>"##,
                top - 10.0,
                height - 30.0,
                height - 15.0,
                fmt_us(10f64.powf(decade))
            );
            decade += 1.0;
        }
        for (r, w) in rows.iter().enumerate() {
            let y0 = top + r as f64 * group_h;
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" text-anchor="end">{w}</text>"#,
                left - 8.0,
                y0 + group_h / 2.0
            );
            for (i, m) in mechs.iter().enumerate() {
                let y = y0 + i as f64 * bar_h;
                if let Some(med) = self.median(w, *m) {
                    let _ = writeln!(
                        s,
                        r#"<rect x="{left}" y="{y}" width="{:.1}" height="{}" fill="{}"><title>{}: {}</title></rect>"#,
                        (x(med) - left).max(1.0),
                        bar_h - 1.0,
                        COLORS[i],
                        m.name(),
                        fmt_us(med)
                    );
                }
            }
        }
        for (i, m) in mechs.iter().enumerate() {
            let y = top + i as f64 * 16.0;
            let lx = left + width + 20.0;
            let _ = writeln!(
                s,
                r#"<rect x="{lx}" y="{y}" width="10" height="10" fill="{}"/><text x="{}" y="{}">{}</text>"#,
                COLORS[i],
                lx + 14.0,
                y + 9.0,
                m.name()
            );
        }
        let _ = writeln!(s, "</svg>");
        s
    }
}
