//! End-to-end driver for the `datasci` image: E2B's code interpreter SDK on `wasbox serve`
//! (release), numpy and pandas in the sandbox against the same Python code natively.
//!
//! `cargo bench -p wasbox-benches --bench datasci` (builds `wasbox` in release mode first;
//! needs the code interpreter SDK the tests install under `target/e2b-sdk/`, `cargo test
//! e2b`). Measured in one run:
//! - `run_code("1+1")` round trip (p50, p90 of 200) in a context already used;
//! - a new context's first `import numpy, pandas` (five contexts);
//! - a 1M-row pandas groupby and a 500x500 float64 matmul, timed inside the cell (best of
//!   five), and the same code in the host's python3 with numpy and pandas from PyPI
//!   (installed under `target/bench-native` on the first run; numpy 2.4.6, the newest for
//!   the host's Python 3.11, against the sandbox's 2.5.2; pandas 3.0.6 on both);
//! - the sandbox's memory once numpy and pandas are imported (its cgroup `memory.current`,
//!   as the kernel reads it);
//! - `python3 -c "import numpy, pandas"` and `python3 -c pass` in an existing sandbox (the
//!   shell's `time`, median of 7), beside `python3 -c pass` of the base image's python3.
//!
//! The server's cache is warmed first (`wasbox serve --warm-cache`: every program compiled
//! and the datasci python3's pre-initialised snapshot made), as an operator's would be.
//!
//! Loopback only; every phase is bounded by the SDK's own timeouts.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use wasbox_benches::release_wasbox;

const TOKEN: &str = "bench-token";

/// The work both sides run; prints one JSON object.
const KERNELS: &str = r#"
import json, time
import numpy as np, pandas as pd
def best(fn, n=5):
    out = []
    for _ in range(n):
        t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
    return min(out)
rng = np.random.default_rng(1)
df = pd.DataFrame({"k": rng.integers(0, 1000, 1_000_000), "v": rng.random(1_000_000)})
a = rng.random((500, 500)); b = rng.random((500, 500))
print(json.dumps({"groupby": best(lambda: df.groupby("k")["v"].mean()),
                  "matmul": best(lambda: a @ b)}))
"#;

fn main() {
    let sdk =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/e2b-sdk/code-interpreter-2.11.5");
    if !sdk.join(".installed").exists() {
        eprintln!(
            "E2B's code interpreter SDK is not installed under {} (run `cargo test e2b` once): nothing to measure",
            sdk.display()
        );
        return;
    }
    let bin = release_wasbox();
    let warm = Command::new(&bin)
        .args(["serve", "--warm-cache", "--token", TOKEN])
        .status()
        .expect("wasbox serve --warm-cache");
    assert!(warm.success(), "wasbox serve --warm-cache failed");
    let state = tempfile::tempdir().unwrap();
    let mut server = Command::new(&bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--token", TOKEN])
        .env("WASBOX_STORAGE_STATE_DIR", state.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start wasbox serve");
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    let key = wasbox::e2b::api_key_for(TOKEN);

    let script = format!(
        r#"
import json, re, time
from e2b_code_interpreter import Sandbox
def start(sbx, cmd):
    out = []
    for _ in range(7):
        r = sbx.commands.run("time " + cmd)
        m = re.search(r"real\s+(\d+)m([\d.]+)s", r.stderr)
        out.append(int(m[1]) * 60 + float(m[2]))
    out.sort()
    return out[3]
for _ in range(600):
    try:
        s = Sandbox.create(timeout=600)
        break
    except Exception:
        time.sleep(0.5)
assert s.run_code("1+1").text == "2"
lat = []
for _ in range(200):
    t = time.perf_counter(); r = s.run_code("1+1"); lat.append(time.perf_counter() - t)
    assert r.text == "2"
lat.sort()
imports = []
for _ in range(5):
    c = s.create_code_context()
    t = time.perf_counter(); r = s.run_code("import numpy, pandas", context=c)
    imports.append(time.perf_counter() - t)
    assert r.error is None, r.error
imports.sort()
r = s.run_code({kernels:?})
assert r.error is None, r.error
k = json.loads(r.logs.stdout[0])
mem = s.run_code("int(open('/sys/fs/cgroup/memory.current').read())")
start_import = start(s, "python3 -c 'import numpy, pandas'")
start_pass = start(s, "python3 -c pass")
b = Sandbox.create(template="base", timeout=600)
start_base = start(b, "python3 -c pass")
b.kill()
print(json.dumps({{"p50": lat[100], "p90": lat[180], "import": imports[2],
                  "groupby": k["groupby"], "matmul": k["matmul"], "memory": int(mem.text),
                  "start_import": start_import, "start_pass": start_pass,
                  "start_base": start_base}}))
s.kill()
"#,
        kernels = KERNELS
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .env("PYTHONPATH", &sdk)
        .env("E2B_API_URL", format!("http://{addr}"))
        .env("E2B_SANDBOX_URL", format!("http://{addr}"))
        .env("E2B_API_KEY", &key)
        .output()
        .expect("python3");
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ms = |k: &str| v[k].as_f64().unwrap() * 1000.0;

    let native = Command::new("python3")
        .args(["-c", KERNELS])
        .env("PYTHONPATH", native_numpy())
        .output();
    let native: Option<serde_json::Value> = native
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| serde_json::from_slice(&o.stdout).ok());

    println!("datasci image, E2B's code interpreter SDK 2.11.5, release build:");
    println!(
        "  run_code(\"1+1\") round trip     p50 {:7.2} ms   p90 {:7.2} ms",
        ms("p50"),
        ms("p90")
    );
    println!(
        "  import numpy, pandas (new context, median of 5)   {:7.0} ms",
        ms("import")
    );
    println!(
        "  sandbox memory with numpy and pandas imported     {:7.0} MiB",
        v["memory"].as_f64().unwrap() / (1 << 20) as f64
    );
    println!(
        "  python3 -c \"import numpy, pandas\" (median of 7)  {:7.1} ms",
        ms("start_import")
    );
    println!(
        "  python3 -c pass (median of 7)   datasci {:6.1} ms   base image {:6.1} ms",
        ms("start_pass"),
        ms("start_base")
    );
    for (k, what) in [
        ("groupby", "1M-row groupby mean"),
        ("matmul", "500x500 float64 matmul"),
    ] {
        match &native {
            Some(n) => {
                let native_ms = n[k].as_f64().unwrap() * 1000.0;
                println!(
                    "  {what:<28} sandbox {:8.1} ms   native {:8.1} ms   ratio {:5.1}x",
                    ms(k),
                    native_ms,
                    ms(k) / native_ms
                );
            }
            None => println!(
                "  {what:<28} sandbox {:8.1} ms   native: no numpy and pandas for the host's python3",
                ms(k)
            ),
        }
    }
}

/// A directory with native numpy and pandas for the host's python3, installed once from PyPI.
fn native_numpy() -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-native");
    if !dir.join("pandas").is_dir() {
        let ok = Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg("--target")
            .arg(&dir)
            .args(["numpy==2.4.6", "pandas==3.0.6"])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("could not install numpy and pandas for the native rows");
        }
    }
    dir
}
