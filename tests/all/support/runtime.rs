//! Shared helpers: one runtime per test binary (so programs compile once), a compile cache
//! under `target/`, and a way to run the real `wasbox` binary.

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use wasbox_runtime::{JobOutput, JobSpec, Limits, Runtime, SandboxConfig};

/// Where compiled components are cached for every test (and every `wasbox` the tests start).
///
/// The first call compiles every program of the built-in image into it, once, while the
/// other tests wait. Otherwise the first tests of a clean build each compile the same large
/// programs at the same time, on their own deadlines.
pub fn cache_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wasbox-cache");
    static WARM: OnceLock<()> = OnceLock::new();
    WARM.get_or_init(|| {
        with_runtime_of(&dir, |runtime| async move {
            runtime
                .preload()
                .await
                .expect("compiling the image's programs")
        })
    });
    dir
}

/// Runs `work` with a runtime on the cache `dir`, on a thread of its own (the caller may be
/// inside a tokio runtime already), and waits for it.
fn with_runtime_of<F: std::future::Future<Output = ()>>(
    dir: &Path,
    work: impl FnOnce(Runtime) -> F + Send + 'static,
) {
    let dir = dir.to_path_buf();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let runtime = Runtime::builder().cache_dir(&dir).build().expect("runtime");
            work(runtime).await
        });
    })
    .join()
    .expect("a runtime's work on the compile cache");
}

/// [`cache_dir`], with the pre-initialised form of the `datasci` image's python3 in it too
/// (made once, by the first test that asks, while the tests that ask too wait). Every test
/// that runs that python3 asks first, so that no runtime or server it starts finds the
/// cache without it and makes its own in the background.
pub fn datasci_cache_dir() -> PathBuf {
    let dir = cache_dir();
    static MADE: OnceLock<()> = OnceLock::new();
    MADE.get_or_init(|| {
        with_runtime_of(&dir, |runtime| async move {
            runtime
                .preinitialise()
                .await
                .expect("pre-initialising the datasci image's python3")
        })
    });
    dir
}

/// The runtime the in-process tests share.
pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        Runtime::builder()
            .cache_dir(cache_dir())
            .limits(Limits::default().timeout(Duration::from_secs(30)))
            .build()
            .expect("runtime")
    })
}

/// Runs `sh -c SCRIPT` in a fresh sandbox.
pub async fn sh(script: &str) -> JobOutput {
    runtime().run(JobSpec::shell(script)).await.expect("job")
}

/// Runs `sh -c SCRIPT` in a sandbox on `dir`.
pub async fn sh_in(dir: &std::path::Path, script: &str) -> JobOutput {
    let sandbox = runtime()
        .sandbox(SandboxConfig::default().workspace(dir))
        .expect("sandbox");
    sandbox.run(JobSpec::shell(script)).await.expect("job")
}

/// A sandbox with its own limits.
pub fn sandbox_with(limits: Limits) -> wasbox_runtime::Sandbox {
    runtime()
        .sandbox(SandboxConfig::default().limits(limits))
        .expect("sandbox")
}

/// The `wasbox` binary, with the shared compile cache.
pub fn wasbox() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wasbox"));
    c.env("WASBOX_CACHE_DIR", cache_dir());
    c.stdin(Stdio::null());
    c
}

/// Starts a server: its stderr goes to the file `log`; returns it and the first line it
/// printed on stdout (where it says where it listens). The rest of its stdout is read in
/// the background, so that it never blocks on a full pipe.
pub fn spawn_server(mut cmd: Command, log: &Path) -> (Child, String) {
    cmd.stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap());
    let mut child = cmd.spawn().expect("start the server");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = out.read_to_string(&mut rest);
    });
    (child, line)
}

/// Runs the binary to completion, killing it if it takes longer than `limit`.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    use std::io::Read;
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn wasbox");
    let mut out_pipe = child.stdout.take().expect("stdout");
    let mut err_pipe = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out_pipe.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_pipe.read_to_end(&mut v);
        v
    });
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "wasbox did not finish within {limit:?}\nstdout: {}\nstderr: {}",
                text(&out.join().unwrap_or_default()),
                text(&err.join().unwrap_or_default())
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
