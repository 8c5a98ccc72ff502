//! The isolation mechanisms `wasbox bench` compares, each able to run a workload once and
//! say how long it took: a native process (the baseline), bubblewrap, wasbox in process, a
//! whole `wasbox run` process, and wasbox over HTTP (`jobs:run` of a `wasbox serve` started
//! on loopback). A mechanism that is not available here says why.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use wasbox_runtime::{BENCH_IMAGE, JobSpec, JobStatus, Runtime, SandboxConfig};

/// What to run: a command of the image, or a compute kernel (`bench-compute ARGS`, built
/// natively into wasbox as `wasbox bench-kernel ARGS`).
#[derive(Clone, Debug)]
pub enum Work {
    Command(Vec<String>),
    Kernel(Vec<String>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    Native,
    Bwrap,
    WasboxInProcess,
    WasboxRun,
    WasboxHttp,
    MicroVm,
}

impl Mechanism {
    pub const ALL: [Mechanism; 6] = [
        Mechanism::Native,
        Mechanism::Bwrap,
        Mechanism::WasboxInProcess,
        Mechanism::WasboxRun,
        Mechanism::WasboxHttp,
        Mechanism::MicroVm,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Native => "native process",
            Mechanism::Bwrap => "bubblewrap",
            Mechanism::WasboxInProcess => "wasbox in process",
            Mechanism::WasboxRun => "wasbox run (whole process)",
            Mechanism::WasboxHttp => "wasbox over HTTP",
            Mechanism::MicroVm => "KVM microVM",
        }
    }

    pub fn key(self) -> &'static str {
        match self {
            Mechanism::Native => "native",
            Mechanism::Bwrap => "bwrap",
            Mechanism::WasboxInProcess => "wasbox",
            Mechanism::WasboxRun => "wasbox-run",
            Mechanism::WasboxHttp => "wasbox-http",
            Mechanism::MicroVm => "microvm",
        }
    }
}

/// The things every mechanism needs, made once.
pub struct Bench {
    pub exe: PathBuf,
    pub runtime: Runtime,
    pub tokio: tokio::runtime::Runtime,
    /// The real `python3` interpreter (not a launcher script in front of it).
    python3: Option<PathBuf>,
    /// Node.js, the baseline of the `node` rows.
    node: bool,
    bwrap: Result<PathBuf, String>,
    server: Result<Server, String>,
    scratch: tempfile::TempDir,
}

/// A `wasbox serve` on loopback, stopped when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    token: String,
    /// A kept-alive connection.
    conn: std::cell::RefCell<Option<BufReader<TcpStream>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_python3() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    p.is_file().then_some(p)
}

/// bubblewrap, if it is installed and can make namespaces here.
fn find_bwrap() -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
        .ok_or("bwrap is not installed (Debian: apt-get install bubblewrap)")?;
    let out = Command::new(&path)
        .args(bwrap_args(Path::new("/tmp"), None))
        .args(["true"])
        .output()
        .map_err(|e| format!("bwrap does not run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "bwrap cannot make namespaces here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(path)
}

/// bubblewrap's options: the host's root read-only, a private /tmp, `dir` as the writable
/// working directory `/tmp/workspace`, no network, a new namespace of every kind. `program`,
/// the file run inside, is bound read-only where it is, so that one under the host's `/tmp`
/// (a checkout there) is not hidden by the private one.
pub fn bwrap_args(dir: &Path, program: Option<&Path>) -> Vec<String> {
    let mut v: Vec<String> = [
        "--unshare-all",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--bind",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(dir.to_string_lossy().into_owned());
    v.push("/tmp/workspace".into());
    if let Some(p) = program.filter(|p| p.is_absolute()) {
        let p = p.to_string_lossy().into_owned();
        v.extend(["--ro-bind".into(), p.clone(), p]);
    }
    v.extend(["--chdir", "/tmp/workspace", "--"].map(String::from));
    v
}

fn start_server(exe: &Path) -> Result<Server> {
    let token = crate::worker::config::generate_token()?;
    let mut child = Command::new(exe)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("WASBOX_TOKEN", &token)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting wasbox serve")?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("no stdout")?).read_line(&mut line)?;
    let addr: SocketAddr = line
        .trim()
        .rsplit("http://")
        .next()
        .and_then(|a| a.parse().ok())
        .with_context(|| format!("no address in {line:?}"))?;
    let server = Server {
        child,
        addr,
        token,
        conn: std::cell::RefCell::new(None),
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if let Ok((200, _)) = server.request("GET", "/readyz", "") {
            return Ok(server);
        }
        if Instant::now() > deadline {
            bail!("wasbox serve did not become ready");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Server {
    /// One request on the kept-alive connection (made again when needed).
    fn request(&self, method: &str, path: &str, body: &str) -> Result<(u16, String)> {
        let mut conn = self.conn.borrow_mut();
        if conn.is_none() {
            let s = TcpStream::connect(self.addr)?;
            s.set_nodelay(true)?;
            *conn = Some(BufReader::new(s));
        }
        let c = conn.as_mut().expect("made above");
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            self.token,
            body.len()
        );
        let result = (|| -> Result<(u16, String)> {
            c.get_mut().write_all(head.as_bytes())?;
            c.get_mut().write_all(body.as_bytes())?;
            let mut line = String::new();
            c.read_line(&mut line)?;
            let status: u16 = line
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .context("bad status line")?;
            let mut len = 0;
            loop {
                line.clear();
                c.read_line(&mut line)?;
                let l = line.trim_end();
                if l.is_empty() {
                    break;
                }
                if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse()?;
                }
            }
            let mut buf = vec![0; len];
            c.read_exact(&mut buf)?;
            Ok((status, String::from_utf8_lossy(&buf).into_owned()))
        })();
        if result.is_err() {
            *conn = None;
        }
        result
    }
}

impl Bench {
    pub fn new(http: bool) -> Result<Bench> {
        let exe = std::env::current_exe().context("finding the wasbox binary")?;
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let runtime = Runtime::builder()
            .image(wasbox_runtime::bench_image())
            .build()?;
        tokio.block_on(runtime.preload())?;
        Ok(Bench {
            runtime,
            tokio,
            python3: find_python3(),
            node: Command::new("node")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success()),
            bwrap: find_bwrap(),
            server: if http {
                start_server(&exe).map_err(|e| format!("{e:#}"))
            } else {
                Err("not measured in this run".into())
            },
            exe,
            scratch: tempfile::Builder::new().prefix("wasbox-bench-").tempdir()?,
        })
    }

    /// bubblewrap, or why it cannot be used here.
    pub fn bwrap_path(&self) -> Result<PathBuf, String> {
        self.bwrap.clone()
    }

    /// Why a mechanism cannot run `work` here, if it cannot.
    pub fn unavailable(&self, m: Mechanism, work: &Work) -> Option<String> {
        match (m, work) {
            (Mechanism::Bwrap, _) if self.bwrap.is_err() => self.bwrap.as_ref().err().cloned(),
            (Mechanism::WasboxHttp, Work::Kernel(_)) => {
                Some("the served image has no compute kernels".into())
            }
            (Mechanism::WasboxHttp, _) => self.server.as_ref().err().cloned(),
            (Mechanism::WasboxRun, Work::Kernel(_)) => {
                Some("`wasbox run` runs the built-in image, which has no compute kernels".into())
            }
            (Mechanism::MicroVm, _) => Some(
                "not measured: this version of the bench has no microVM runner (see the \
                 published figures below)"
                    .into(),
            ),
            (Mechanism::Native | Mechanism::Bwrap, Work::Command(argv))
                if argv[0] == "python3" && self.python3.is_none() =>
            {
                Some("no python3 on this machine".into())
            }
            (Mechanism::Native | Mechanism::Bwrap, Work::Command(argv))
                if argv[0] == "node" && !self.node =>
            {
                Some("no node on this machine".into())
            }
            _ => None,
        }
    }

    /// A fresh working directory, as each run of a job gets.
    fn fresh_dir(&self) -> Result<tempfile::TempDir> {
        Ok(tempfile::Builder::new()
            .prefix("run-")
            .tempdir_in(self.scratch.path())?)
    }

    fn native_argv(&self, work: &Work) -> Vec<String> {
        match work {
            Work::Command(argv) if argv[0] == "python3" => {
                let mut v = argv.clone();
                if let Some(p) = &self.python3 {
                    v[0] = p.to_string_lossy().into_owned();
                }
                v
            }
            Work::Command(argv) => argv.clone(),
            Work::Kernel(args) => {
                let mut v = vec![
                    self.exe.to_string_lossy().into_owned(),
                    "bench-kernel".into(),
                ];
                v.extend(args.iter().cloned());
                v
            }
        }
    }

    /// Runs `work` once under `m`; its wall time and stdout.
    pub fn run(&self, m: Mechanism, work: &Work) -> Result<(Duration, String)> {
        match m {
            Mechanism::Native => {
                let dir = self.fresh_dir()?;
                let argv = self.native_argv(work);
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..]).current_dir(dir.path());
                time_process(cmd)
            }
            Mechanism::Bwrap => {
                let bwrap = self.bwrap.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
                let dir = self.fresh_dir()?;
                let argv = self.native_argv(work);
                let mut cmd = Command::new(bwrap);
                cmd.args(bwrap_args(dir.path(), Some(Path::new(&argv[0]))))
                    .args(&argv);
                time_process(cmd)
            }
            Mechanism::WasboxInProcess => self.tokio.block_on(async {
                let started = Instant::now();
                let (config, argv) = match work {
                    Work::Command(argv) => (SandboxConfig::default(), argv.clone()),
                    Work::Kernel(args) => {
                        let mut v = vec!["bench-compute".to_string()];
                        v.extend(args.iter().cloned());
                        (SandboxConfig::default().image(BENCH_IMAGE), v)
                    }
                };
                let sandbox = self.runtime.sandbox(config)?;
                let out = sandbox.run(JobSpec::new(argv)).await?;
                drop(sandbox);
                let t = started.elapsed();
                check_status(out.status == JobStatus::Completed, out.stderr.as_bytes())?;
                Ok((t, out.stdout))
            }),
            Mechanism::WasboxRun => {
                let Work::Command(argv) = work else {
                    bail!("not available");
                };
                let mut cmd = Command::new(&self.exe);
                cmd.arg("run").arg("--").args(argv);
                time_process(cmd)
            }
            Mechanism::WasboxHttp => {
                let server = self.server.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
                let Work::Command(argv) = work else {
                    bail!("not available");
                };
                let body = serde_json::json!({
                    "version": 1, "task_id": "bench", "job_id": new_job_id(),
                    "sandbox": {"image": "bench", "command": argv}
                })
                .to_string();
                let started = Instant::now();
                let (status, text) = server.request("POST", "/v1/worker/jobs:run", &body)?;
                let t = started.elapsed();
                let v: serde_json::Value = serde_json::from_str(&text)?;
                if status != 200 || v["status"] != "completed" {
                    bail!("jobs:run answered {status}: {text}");
                }
                Ok((t, v["stdout"].as_str().unwrap_or("").to_string()))
            }
            Mechanism::MicroVm => bail!("not available"),
        }
    }
}

fn new_job_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "bench-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs a process to its end with no input; its wall time and stdout.
fn time_process(mut cmd: Command) -> Result<(Duration, String)> {
    let started = Instant::now();
    let out = cmd.stdin(Stdio::null()).output()?;
    let t = started.elapsed();
    check_status(out.status.success(), &out.stderr)?;
    Ok((t, String::from_utf8_lossy(&out.stdout).into_owned()))
}

fn check_status(ok: bool, stderr: &[u8]) -> Result<()> {
    if !ok {
        bail!(
            "it failed: {}",
            String::from_utf8_lossy(stderr)
                .chars()
                .take(300)
                .collect::<String>()
        );
    }
    Ok(())
}
