//! Density: how many live sandboxes, each holding an interactive shell that answers, fit in
//! a memory budget, and what one costs in resident memory. wasbox's are real sessions with
//! a PTY (the runtime's `Session::open_pty`); native and bubblewrap shells are processes
//! whose proportional set size (PSS: shared pages split among their users) is summed.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use wasbox_runtime::{PtyConfig, Runtime, SandboxConfig, SessionConfig, Sessions};

/// What one mechanism reached.
#[derive(Clone, Debug, Serialize)]
pub struct Density {
    pub mechanism: &'static str,
    /// Sandboxes alive at once when the measurement stopped.
    pub live: usize,
    /// Why it stopped there.
    pub stopped: String,
    /// Resident memory per sandbox, in KiB.
    pub kib_per_sandbox: f64,
    /// How many would fit in the budget at that cost (`live` when measured up to it).
    pub fit_in_budget: usize,
    pub measured_up_to_budget: bool,
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as usize } else { 4096 }
}

/// This process's resident set, read from a `/proc/self/statm` opened once: past the limit
/// of open files (one of the ways a density run ends) it can still be read.
struct OwnRss(Option<std::fs::File>);

impl OwnRss {
    fn open() -> OwnRss {
        OwnRss(std::fs::File::open("/proc/self/statm").ok())
    }

    /// In bytes; 0 when it cannot be read.
    fn now(&self) -> usize {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 256];
        let Some(n) = self.0.as_ref().and_then(|f| f.read_at(&mut buf, 0).ok()) else {
            return 0;
        };
        std::str::from_utf8(&buf[..n])
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
            .map_or(0, |pages| pages * page_size())
    }
}

/// The proportional set size of a process, in bytes.
fn pss(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<usize>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// Lines of a `/proc` file opened once (readable past the open-file limit), read from its
/// start each time.
fn count_lines(file: Option<&std::fs::File>) -> usize {
    use std::io::{Read as _, Seek as _};
    let Some(mut f) = file else { return 0 };
    // Read from the start, in order: `/proc/self/maps` read at byte offsets (`pread`)
    // skips records, which counted 1.1 mappings per shell where there are 7.
    if f.seek(std::io::SeekFrom::Start(0)).is_err() {
        return 0;
    }
    let mut buf = vec![0u8; 1 << 16];
    let mut lines = 0;
    while let Ok(n) = f.read(&mut buf) {
        if n == 0 {
            break;
        }
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
    }
    lines
}

/// Every process's parent, read once from `/proc`.
fn parents() -> Vec<(u32, u32)> {
    let mut parents = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
                continue;
            };
            // The field after the command name (which may hold spaces) ends in `)`.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parents.push((p, ppid));
            }
        }
    }
    parents
}

/// `pid` and every process below it, in the `parents` snapshot.
fn tree(pid: u32, parents: &[(u32, u32)]) -> Vec<u32> {
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found
}

/// What each wasbox sandbox of a density run holds.
#[derive(Clone, Copy)]
pub enum Holding {
    /// An interactive shell, answering.
    Shell,
    /// The shell, and a node program it started that stays alive after answering.
    Node,
}

/// wasbox: sessions with an interactive shell each (and what `holding` adds), until `max`,
/// the budget, or a refusal.
pub fn wasbox(
    tokio: &tokio::runtime::Runtime,
    runtime: &Runtime,
    holding: Holding,
    max: usize,
    budget: usize,
) -> Density {
    let _entered = tokio.enter();
    let sessions = Sessions::new(max.max(1));
    let rss = OwnRss::open();
    let maps = std::fs::File::open("/proc/self/maps").ok();
    let mappings_before = count_lines(maps.as_ref());
    let before = rss.now();
    let mut live = 0;
    let mut stopped = format!("reached the {max} asked for");
    let mut at_budget = false;
    let mut keep = Vec::new();
    while live < max {
        let used = rss.now().saturating_sub(before);
        if used >= budget {
            stopped = format!("reached the budget of {} MiB", budget >> 20);
            at_budget = true;
            break;
        }
        let id = format!("d{live}");
        let made = sessions.create(SessionConfig::new(id.clone()), || {
            runtime.sandbox(SandboxConfig::default())
        });
        let session = match made {
            Ok(s) => s,
            Err(e) => {
                stopped = format!("refused: {e}");
                break;
            }
        };
        let pty = match tokio.block_on(session.open_pty(format!("{id}-pty"), PtyConfig::default()))
        {
            Ok(p) => p,
            Err(e) => {
                stopped = format!("refused: {e}");
                break;
            }
        };
        // The shell must answer, or it is not a live sandbox. The answer is `ok2`, which the
        // terminal's echo of the typed line (`ok$((1+1))`) does not hold; a node program
        // answers the same way and then stays alive.
        let mut answered = tokio.block_on(answer(&pty, b"echo ok$((1+1))\n"));
        if answered.is_ok() && matches!(holding, Holding::Node) {
            answered = tokio.block_on(answer(
                &pty,
                b"node -e 'console.log(\"ok\" + (1 + 1)); setInterval(() => {}, 3600000)'\n",
            ));
        }
        if let Err(why) = answered {
            stopped = format!(
                "the next shell did not start: {}",
                why.lines().last().unwrap_or("")
            );
            break;
        }
        keep.push((session, pty));
        live += 1;
    }
    let used = rss.now().saturating_sub(before);
    let per = if live > 0 {
        used as f64 / live as f64
    } else {
        0.0
    };
    if live > 0 {
        // What bounds a node besides memory: vm.max_map_count counts these.
        let mappings = count_lines(maps.as_ref()).saturating_sub(mappings_before);
        stopped = format!(
            "{stopped}; {:.1} memory mappings per sandbox",
            mappings as f64 / live as f64
        );
    }
    sessions.end_all("density measured");
    drop(keep);
    let mechanism = match holding {
        Holding::Shell => "wasbox in process",
        Holding::Node => "wasbox in process, a live node in each",
    };
    finish(mechanism, live, stopped, at_budget, per, budget)
}

/// Types `line` into the terminal and waits up to 10 s for `ok2` on a line of its own.
async fn answer(pty: &wasbox_runtime::Pty, line: &[u8]) -> Result<(), String> {
    pty.send(line).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let out = pty.recv(64 << 10, Duration::from_millis(200)).await;
        seen.extend_from_slice(&out.data);
        if seen.windows(5).any(|w| w == b"ok2\r\n") {
            return Ok(());
        }
        if out.exited {
            return Err(String::from_utf8_lossy(&seen).trim().to_string());
        }
    }
    Err("no answer within 10 s".to_string())
}

impl Density {
    /// A mechanism that could not be measured here, and why.
    pub fn skipped(mechanism: &'static str, why: &str) -> Density {
        Density {
            mechanism,
            live: 0,
            stopped: format!("skipped: {why}"),
            kib_per_sandbox: 0.0,
            fit_in_budget: 0,
            measured_up_to_budget: false,
        }
    }
}

fn finish(
    mechanism: &'static str,
    live: usize,
    stopped: String,
    measured_up_to_budget: bool,
    per: f64,
    budget: usize,
) -> Density {
    Density {
        mechanism,
        live,
        stopped,
        kib_per_sandbox: per / 1024.0,
        fit_in_budget: if measured_up_to_budget || per <= 0.0 {
            live
        } else {
            (budget as f64 / per) as usize
        },
        measured_up_to_budget,
    }
}

/// Native or bubblewrap shells: `count` of them, each answering, then their PSS summed.
pub fn processes(
    mechanism: &'static str,
    spawn: impl Fn() -> std::io::Result<Child>,
    count: usize,
    budget: usize,
) -> Density {
    let mut children = Vec::new();
    let mut stopped = format!("measured {count} (a sample; the fit is computed from it)");
    for _ in 0..count {
        let mut child = match spawn() {
            Ok(c) => c,
            Err(e) => {
                stopped = format!("could not start another: {e}");
                break;
            }
        };
        let answered = (|| -> std::io::Result<bool> {
            let mut stdin = child.stdin.take().ok_or(std::io::ErrorKind::BrokenPipe)?;
            stdin.write_all(b"echo ok\n")?;
            let mut out =
                BufReader::new(child.stdout.take().ok_or(std::io::ErrorKind::BrokenPipe)?);
            let mut line = String::new();
            out.read_line(&mut line)?;
            child.stdin = Some(stdin);
            Ok(line.trim() == "ok")
        })();
        if !matches!(answered, Ok(true)) {
            stopped = "a shell did not answer".into();
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        children.push(child);
    }
    let live = children.len();
    let parents = parents();
    let total: usize = children
        .iter()
        .map(|c| tree(c.id(), &parents).into_iter().map(pss).sum::<usize>())
        .sum();
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
    let per = if live > 0 {
        total as f64 / live as f64
    } else {
        0.0
    };
    finish(mechanism, live, stopped, false, per, budget)
}

/// An interactive `sh` reading commands from a pipe.
pub fn native_shell() -> std::io::Result<Child> {
    Command::new("sh")
        .arg("-i")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
}

/// The same under bubblewrap, in its own directory.
pub fn bwrap_shell(bwrap: &Path, args: &[String]) -> std::io::Result<Child> {
    Command::new(bwrap)
        .args(args)
        .args(["sh", "-i"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
}
