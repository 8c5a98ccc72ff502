//! Network egress end to end: `curl` and `wget` in a sandbox against HTTP and HTTPS servers
//! the test starts on loopback, under `--allow-net`, the worker API's and E2B's per-sandbox
//! policies, and the attacks a policy must refuse (each with curl's exit 7 and no
//! connection reaching the server).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::Digest;

use crate::e2b::Sbx;
use crate::support::http::{Server, request};
use crate::support::runtime::{run_bounded, text, wasbox};
use crate::support::tls::Certificates;

/// The blob the origin serves: 1 MiB that no compression shortens much.
fn blob() -> Vec<u8> {
    let mut x: u32 = 0x1234_5678;
    (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

trait Conn: Read + Write + Send {}
impl<T: Read + Write + Send> Conn for T {}

/// An HTTP(S) server of the test's own on 127.0.0.1, counting the connections it gets.
pub(crate) struct Origin {
    pub(crate) addr: SocketAddr,
    tls: bool,
    connections: Arc<AtomicUsize>,
}

impl Origin {
    pub(crate) fn start(tls: Option<Arc<rustls::ServerConfig>>) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let (count, secure) = (connections.clone(), tls.is_some());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let tls = tls.clone();
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(20)));
                    let conn: Box<dyn Conn> = match tls {
                        Some(config) => {
                            let session = rustls::ServerConnection::new(config).unwrap();
                            Box::new(rustls::StreamOwned::new(session, conn))
                        }
                        None => Box::new(conn),
                    };
                    Origin::answer(BufReader::new(conn));
                });
            }
        });
        Origin {
            addr,
            tls: secure,
            connections,
        }
    }

    /// A plain server and a TLS one with the test's own certificates (`None`: skipped, see
    /// [`Certificates::make`]).
    fn pair() -> Option<(Origin, Origin, Certificates)> {
        let plain = Origin::start(None);
        let certs = Certificates::make()?;
        let secure = Origin::start(Some(certs.server_config()));
        Some((plain, secure, certs))
    }

    pub(crate) fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.addr)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Answers one request, then closes.
    fn answer(mut r: BufReader<Box<dyn Conn>>) {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_string();
        let target = parts.next().unwrap_or_default().to_string();
        let mut headers = serde_json::Map::new();
        let mut len = 0usize;
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let k = k.trim().to_ascii_lowercase();
                if k == "content-length" {
                    len = v.trim().parse().unwrap_or(0);
                }
                headers.insert(k, Value::String(v.trim().to_string()));
            }
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let mut extra = String::new();
        let (status, content) = match path {
            "/hello" => (200, b"hello\n".to_vec()),
            "/blob" => (200, blob()),
            "/echo" => (
                200,
                serde_json::to_vec(&json!({
                    "method": method,
                    "target": target,
                    "headers": headers,
                    "body": String::from_utf8_lossy(&body),
                }))
                .unwrap(),
            ),
            "/redirect" => {
                let to = query.strip_prefix("to=").unwrap_or("/hello");
                extra = format!("Location: {to}\r\n");
                (302, b"moved\n".to_vec())
            }
            "/gzip" => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(b"compressed hello\n").unwrap();
                extra = "Content-Encoding: gzip\r\n".into();
                (200, e.finish().unwrap())
            }
            "/files/report.txt" => (200, b"report\n".to_vec()),
            _ => (404, b"not here\n".to_vec()),
        };
        let reason = match status {
            200 => "OK",
            302 => "Found",
            _ => "Not Found",
        };
        let mut out = r.into_inner();
        let head = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n{extra}Connection: close\r\n\r\n",
            content.len()
        );
        let _ = out.write_all(head.as_bytes());
        if method != "HEAD" {
            let _ = out.write_all(&content);
        }
        let _ = out.flush();
    }
}

/// `wasbox run` with `flags`, running `script` in `sh`: (exit code, stdout, stderr).
fn run(flags: &[&str], script: &str) -> (i32, String, String) {
    let mut cmd: Command = wasbox();
    cmd.arg("run").args(flags).args(["--", "sh", "-c", script]);
    let out = run_bounded(cmd, Duration::from_secs(120));
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

const BLOCKED: &str = "blocked by the sandbox network policy";

#[test]
fn nothing_leaves_a_sandbox_without_a_flag() {
    let origin = Origin::start(None);
    let url = origin.url("/hello");
    let (code, out, err) = run(
        &[],
        &format!("curl -sS {url}; echo \"curl=$?\"; wget -q -O- {url}; echo \"wget=$?\""),
    );
    assert!(out.contains("curl=7"), "{out}\n{err}");
    assert!(out.contains("wget=4"), "{out}\n{err}");
    assert!(err.contains(BLOCKED), "{err}");
    assert_eq!(code, 0);
    assert_eq!(origin.connections(), 0, "a request reached the server");
}

#[test]
fn curl_and_wget_download_from_allowed_servers() {
    let Some((plain, secure, certs)) = Origin::pair() else {
        return;
    };
    let allow = format!(
        "127.0.0.1:{},127.0.0.1:{}",
        plain.addr.port(),
        secure.addr.port()
    );
    let ca = certs.ca.display().to_string();
    let want = hex(&sha2::Sha256::digest(blob()));
    let script = format!(
        r#"
curl -fsSL {blob} | sha256sum
curl -fsSL {sblob} | sha256sum
curl -s -o got.bin -w '%{{http_code}} %{{size_download}}\n' {blob}
sha256sum got.bin
curl -sSL {redirect}
curl -s -w '%{{http_code}}\n' {redirect}
curl -fsS {missing}; echo "fail=$?"
curl -s -X PUT -H 'X-Test: yes' -u ann:secret -d 'a=1' -d 'b=2' {echo}
echo
curl -sS --data-binary @got.bin -o /dev/null -w '%{{http_code}}\n' {echo}
curl -sI {hello}
curl -s --compressed {gzip}
curl -sO {report} && cat report.txt
wget -q -O- {shello}
wget -q {report} && cat report.txt.1
"#,
        blob = plain.url("/blob"),
        sblob = secure.url("/blob"),
        redirect = plain.url("/redirect?to=/hello"),
        missing = plain.url("/missing"),
        echo = plain.url("/echo"),
        hello = plain.url("/hello"),
        gzip = plain.url("/gzip"),
        report = plain.url("/files/report.txt"),
        shello = secure.url("/hello"),
    );
    let (code, out, err) = run(&["--allow-net", &allow, "--ca-cert", &ca], &script);
    assert_eq!(code, 0, "{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("{want}  -"), "{out}\n{err}");
    assert_eq!(lines[1], format!("{want}  -"), "https: {out}\n{err}");
    assert_eq!(lines[2], "200 1048576", "{out}");
    assert_eq!(lines[3], format!("{want}  got.bin"));
    assert_eq!(lines[4], "hello", "-L follows: {out}");
    assert_eq!(lines[5], "moved", "without -L: {out}");
    assert_eq!(lines[6], "302");
    assert_eq!(lines[7], "fail=22", "{out}\n{err}");
    let echo: Value = serde_json::from_str(lines[8]).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(echo["method"], "PUT");
    assert_eq!(echo["body"], "a=1&b=2");
    assert_eq!(echo["headers"]["x-test"], "yes");
    assert_eq!(echo["headers"]["authorization"], "Basic YW5uOnNlY3JldA==");
    assert_eq!(
        echo["headers"]["content-type"],
        "application/x-www-form-urlencoded"
    );
    assert_eq!(lines[9], "200", "a 1 MiB upload: {out}");
    assert_eq!(lines[10], "HTTP/1.1 200 OK", "{out}");
    assert!(out.contains("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.contains("content-length: 6\r\n"), "{out}");
    assert!(out.contains("compressed hello\n"), "{out}");
    assert!(out.contains("report\nhello\nreport\n"), "{out}\n{err}");
}

/// Python's `urllib` and `http.client`, and node's `fetch`, through the same host client.
#[test]
fn python_and_node_reach_allowed_servers() {
    let Some((plain, secure, certs)) = Origin::pair() else {
        return;
    };
    let allow = format!(
        "127.0.0.1:{},127.0.0.1:{}",
        plain.addr.port(),
        secure.addr.port()
    );
    let ca = certs.ca.display().to_string();
    let want = hex(&sha2::Sha256::digest(blob()));
    let python = format!(
        r#"
import hashlib, http.client, json, urllib.request, urllib.error
print(hashlib.sha256(urllib.request.urlopen("{blob}").read()).hexdigest())
print(urllib.request.urlopen("{shello}").read().decode(), end="")
print(urllib.request.urlopen("{redirect}").read().decode(), end="")
c = http.client.HTTPConnection("127.0.0.1", {port})
c.request("POST", "/echo", body=json.dumps({{"a": 1}}), headers={{"Content-Type": "application/json"}})
r = c.getresponse()
echo = json.loads(r.read())
print(r.status, echo["method"], echo["body"], echo["headers"]["content-type"])
try:
    urllib.request.urlopen("{missing}")
except urllib.error.HTTPError as e:
    print("HTTPError", e.code)
try:
    urllib.request.urlopen("http://169.254.169.254/latest/meta-data/")
except urllib.error.URLError as e:
    print("URLError", e.reason)
"#,
        blob = plain.url("/blob"),
        shello = secure.url("/hello"),
        redirect = plain.url("/redirect?to=/hello"),
        missing = plain.url("/missing"),
        port = plain.addr.port(),
    );
    let node = format!(
        r#"
(async () => {{
  const r = await fetch("{hello}");
  console.log(r.status, r.ok, JSON.stringify(await r.text()));
  const s = await fetch("{shello}");
  console.log(await s.text());
  const e = await fetch("{echo}", {{ method: "POST", body: JSON.stringify({{ b: 2 }}), headers: {{ "Content-Type": "application/json" }} }});
  const j = await e.json();
  console.log(j.method, j.body, j.headers["content-length"]);
  const d = await fetch("{redirect}");
  console.log(d.redirected, await d.text());
  try {{ await fetch("http://10.1.2.3/"); }} catch (err) {{ console.log(err.message, err.cause.code); }}
  // Bodies are bytes: a binary download, a file of it, a binary upload, http.get's chunks.
  const fs = require("fs"), crypto = require("crypto");
  const sha = (b) => crypto.createHash("sha256").update(b).digest("hex");
  const buf = Buffer.from(await (await fetch("{blob}")).arrayBuffer());
  fs.writeFileSync("blob.bin", buf);
  console.log(buf.length, sha(buf), fs.readFileSync("blob.bin").equals(buf));
  const up = await fetch("{echo}", {{ method: "POST", body: new Uint8Array([255, 0, 65]) }});
  console.log((await up.json()).headers["content-length"]);
  await new Promise((done) => require("http").get("{blob}", (res) => {{
    const parts = [];
    res.on("data", (c) => parts.push(c));
    res.on("end", () => {{ console.log(sha(Buffer.concat(parts))); done(); }});
  }}));
}})();
"#,
        blob = plain.url("/blob"),
        hello = plain.url("/hello"),
        shello = secure.url("/hello"),
        echo = plain.url("/echo"),
        redirect = plain.url("/redirect?to=/hello"),
    );
    let script = "python3 check.py; node check.js; sha256sum blob.bin";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("check.py"), python).unwrap();
    std::fs::write(dir.path().join("check.js"), node).unwrap();
    let workspace = dir.path().display().to_string();
    let (code, out, err) = run(
        &[
            "--allow-net",
            &allow,
            "--ca-cert",
            &ca,
            "--workspace",
            &workspace,
        ],
        script,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let expected = format!(
        "{want}\nhello\nhello\n200 POST {{\"a\": 1}} application/json\nHTTPError 404\n\
         URLError [Errno 111] Connection refused: {BLOCKED}\n\
         200 true \"hello\\n\"\nhello\n\nPOST {{\"b\":2}} 7\ntrue hello\n\n\
         fetch failed ECONNREFUSED\n\
         1048576 {want} true\n3\n{want}\n{want}  blob.bin\n"
    );
    assert_eq!(out, expected, "{err}");
}

/// A package index of the test's own: wheels it builds, served by Python's `http.server`
/// (PEP 503 pages) on loopback. Killed when dropped.
struct Index {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Index {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const BUILD_INDEX: &str = r#"
import hashlib, os, sys, zipfile
root = sys.argv[1]
os.makedirs(os.path.join(root, "files"))
def wheel(name, version, code, requires=(), tag="py3-none-any"):
    fname = "%s-%s-%s.whl" % (name, version, tag)
    info = "%s-%s.dist-info" % (name, version)
    meta = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
    meta += "".join("Requires-Dist: %s\n" % r for r in requires)
    files = {name + "/__init__.py": code, info + "/METADATA": meta,
             info + "/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: %s\n" % tag}
    files[info + "/RECORD"] = "".join("%s,,\n" % f for f in files) + info + "/RECORD,,\n"
    path = os.path.join(root, "files", fname)
    with zipfile.ZipFile(path, "w") as z:
        for f, text in files.items():
            z.writestr(f, text)
    return fname, hashlib.sha256(open(path, "rb").read()).hexdigest()
projects = {
    "alpha": [wheel("alpha", "0.9", "VALUE = 'old'\n"),
              wheel("alpha", "1.0", "from beta import B\nfrom gamma import G\nVALUE = 'alpha'\n",
                    ["beta>=2", "gamma"])],
    "beta": [wheel("beta", "1.0", "B = 'beta1'\n"), wheel("beta", "2.0", "B = 'beta2'\n")],
    "gamma": [wheel("gamma", "1.0", "G = 'gamma'\n")],
    "native": [wheel("native", "1.0", "", tag="cp314-cp314-manylinux_2_17_x86_64")],
}
fname, _ = wheel("tampered", "1.0", "X = 1\n")
projects["tampered"] = [(fname, "0" * 64)]
for name, files in projects.items():
    os.makedirs(os.path.join(root, "simple", name))
    with open(os.path.join(root, "simple", name, "index.html"), "w") as f:
        f.write("<html><body>\n")
        for fname, sha in files:
            f.write('<a href="../../files/%s#sha256=%s">%s</a><br>\n' % (fname, sha, fname))
        f.write("</body></html>\n")
os.makedirs(os.path.join(root, "simple", "srconly"))
with open(os.path.join(root, "simple", "srconly", "index.html"), "w") as f:
    f.write('<a href="../../files/srconly-1.0.tar.gz">srconly-1.0.tar.gz</a>\n')
"#;

impl Index {
    fn start() -> Index {
        let dir = tempfile::tempdir().unwrap();
        let built = Command::new("python3")
            .args(["-c", BUILD_INDEX])
            .arg(dir.path())
            .status()
            .expect("python3");
        assert!(built.success());
        let (child, port) = python_server(dir.path(), &[]);
        Index {
            child,
            port,
            _dir: dir,
        }
    }
}

/// `pip install` from an index with dependencies, requirements files, PIP_INDEX_URL and
/// pip.conf; hashes checked; clear errors for native wheels, sdists and a refused index.
#[test]
fn pip_installs_from_an_index() {
    let index = Index::start();
    let url = format!("http://127.0.0.1:{}/simple", index.port);
    let allow = format!("127.0.0.1:{}", index.port);
    let script = format!(
        r#"
pip install -q --index-url {url} alpha && python3 -c "import alpha; print(alpha.VALUE, alpha.B, alpha.G)"
pip list 2>/dev/null | grep -E '^(alpha|beta|gamma) '
pip uninstall -q -y alpha beta gamma
printf -- '-i {url}
alpha==0.9
' > req.txt
pip install -q -r req.txt && python3 -c "import alpha; print(alpha.VALUE)"
pip uninstall -q -y alpha
PIP_INDEX_URL={url} pip install -q 'beta<2' && python3 -c "import beta; print(beta.B)"
mkdir -p ~/.config/pip && printf '[global]
index-url = {url}
' > ~/.config/pip/pip.conf
pip install -q gamma && python3 -c "import gamma; print(gamma.G)"
pip install -q tampered; echo "tampered=$?"
pip install -q native; echo "native=$?"
pip install -q srconly; echo "srconly=$?"
pip install -q nosuchthing; echo "missing=$?"
echo "downloads left=$(ls /tmp | grep -c pip-download-)"
"#
    );
    let (code, out, err) = run(&["--allow-net", &allow], &script);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        out,
        "alpha beta2 gamma\nalpha   1.0\nbeta    2.0\ngamma   1.0\nold\nbeta1\ngamma\n\
         tampered=1\nnative=1\nsrconly=1\nmissing=1\ndownloads left=0\n",
        "{err}"
    );
    assert!(err.contains("DO NOT MATCH THE HASHES"), "{err}");
    assert!(err.contains("none-any"), "{err}");
    // Its index lists an sdist it does not serve.
    assert!(err.contains("Could not download"), "{err}");
    assert!(
        err.contains("No matching distribution found for nosuchthing"),
        "{err}"
    );

    // Without the index allowed: a clear refusal, nothing installed.
    let (_, out, err) = run(
        &[],
        &format!("pip install --index-url {url} alpha; echo \"rc=$?\""),
    );
    assert!(out.contains("rc=1"), "{out}");
    assert!(err.contains(BLOCKED), "{err}");
}

/// Starts `python3 -u -m http.server ARGS` in `dir` on 127.0.0.1 and reads its port.
/// Builds the index of `pip_builds_from_source`: sdists with flit_core and with a legacy
/// setup.py (setuptools), one with a C extension, and the backends' wheels.
const BUILD_SOURCE_INDEX: &str = r#"
import hashlib, io, os, shutil, sys, tarfile
root, wheels = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(root, "files"))
def sdist(name, version, files):
    fname = "%s-%s.tar.gz" % (name, version)
    path = os.path.join(root, "files", fname)
    with tarfile.open(path, "w:gz") as t:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo("%s-%s/%s" % (name, version, rel))
            info.size, info.mtime = len(data), 1700000000
            t.addfile(info, io.BytesIO(data))
    return fname
flit = """[build-system]
requires = ["flit_core>=3.2,<4"]
build-backend = "flit_core.buildapi"
[project]
name = "srcpkg"
version = "1.0"
description = "built from source"
dependencies = ["legacy>=1"]
[project.scripts]
srcpkg-hello = "srcpkg:hello"
"""
files = {
    "srcpkg": [sdist("srcpkg", "1.0", {
        "pyproject.toml": flit,
        "PKG-INFO": "Metadata-Version: 2.1\nName: srcpkg\nVersion: 1.0\n",
        "srcpkg/__init__.py": "from legacy import L\ndef hello():\n    print('hello from srcpkg', L)\n"})],
    "legacy": [sdist("legacy", "1.0", {
        "setup.py": "from setuptools import setup\nsetup(name='legacy', version='1.0', py_modules=['legacy'])\n",
        "PKG-INFO": "Metadata-Version: 1.0\nName: legacy\nVersion: 1.0\n",
        "legacy.py": "L = 'legacy'\n"})],
    "cpkg": [sdist("cpkg", "1.0", {
        "setup.py": "from setuptools import setup, Extension\nsetup(name='cpkg', version='1.0', ext_modules=[Extension('cpkg', ['cpkg.c'])])\n",
        "cpkg.c": "int cpkg;\n"})],
}
for w in os.listdir(wheels):
    shutil.copy(os.path.join(wheels, w), os.path.join(root, "files", w))
    files.setdefault(w.split("-")[0].lower().replace("_", "-"), []).append(w)
for name, names in files.items():
    os.makedirs(os.path.join(root, "simple", name))
    with open(os.path.join(root, "simple", name, "index.html"), "w") as f:
        for fname in names:
            sha = hashlib.sha256(open(os.path.join(root, "files", fname), "rb").read()).hexdigest()
            f.write('<a href="../../files/%s#sha256=%s">%s</a><br>\n' % (fname, sha, fname))
"#;

/// `pip install` of what has no wheel: sdists from an index (flit_core's and setuptools'
/// backends, installed from the index into an isolated build directory first), a source
/// tree (`pip install .`, `-e .`), and a clear refusal for a C extension.
#[test]
fn pip_builds_from_source() {
    let wheels =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/pytools/build-wheels");
    if !wheels.join("flit_core-3.10.1-py3-none-any.whl").is_file()
        || !wheels.join("setuptools-80.9.0-py3-none-any.whl").is_file()
    {
        crate::support::skip(&format!(
            "the build backends' wheels are not in {} (.ci/run downloads them)",
            wheels.display()
        ));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let built = Command::new("python3")
        .args(["-c", BUILD_SOURCE_INDEX])
        .arg(dir.path())
        .arg(&wheels)
        .status()
        .expect("python3");
    assert!(built.success());
    let (child, port) = python_server(dir.path(), &[]);
    let _index = Index {
        child,
        port,
        _dir: tempfile::tempdir().unwrap(),
    };
    let url = format!("http://127.0.0.1:{port}/simple");
    let script = format!(
        r#"
export PIP_INDEX_URL={url} PATH=$HOME/.local/bin:$PATH
pip install -q srcpkg 2>/dev/null && srcpkg-hello
pip list 2>/dev/null | grep -E '^(srcpkg|legacy|flit|setuptools)'
pip install -q cpkg; echo "cpkg=$?"
pip install -q --only-binary :all: legacy==0.1; echo "only-binary=$?"
mkdir -p proj/tree && printf '[build-system]\nrequires = ["flit_core>=3.2"]\nbuild-backend = "flit_core.buildapi"\n[project]\nname = "tree"\nversion = "0.1"\ndescription = "d"\n' > proj/pyproject.toml
echo 'V = 1' > proj/tree/__init__.py
pip install -q -e ./proj 2>/dev/null && python3 -c 'import tree; print("tree", tree.V)'
echo 'V = 22' > proj/tree/__init__.py
python3 -c 'import tree; print("edited", tree.V)'
pip uninstall -q -y tree && pip install -q ./proj 2>/dev/null && echo 'V = 333' > proj/tree/__init__.py && python3 -c 'import tree; print("copied", tree.V)'
echo "left=$(ls /tmp | grep -c pip-)"
"#
    );
    let (code, out, err) = run(&["--allow-net", &format!("127.0.0.1:{port}")], &script);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        out,
        "hello from srcpkg legacy\nlegacy  1.0\nsrcpkg  1.0\ncpkg=1\nonly-binary=1\n\
         tree 1\nedited 22\ncopied 22\nleft=0\n",
        "{err}"
    );
    assert!(err.contains("needs a compiler"), "{err}");
}

fn python_server(dir: &std::path::Path, args: &[&str]) -> (std::process::Child, u16) {
    let mut child = Command::new("python3")
        .args(["-u", "-m", "http.server", "0", "--bind", "127.0.0.1"])
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 -m http.server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .split(" port ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    (child, port)
}

/// A git smart-HTTP server of the test's own: `git http-backend` behind Python's CGI server.
struct GitServer {
    child: std::process::Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for GitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn host_git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Host")
        .env("GIT_AUTHOR_EMAIL", "host@example.org")
        .env("GIT_COMMITTER_NAME", "Host")
        .env("GIT_COMMITTER_EMAIL", "host@example.org")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

impl GitServer {
    /// A bare repository `proj.git` with three commits (packed, with deltas) and a tag.
    fn start() -> Option<GitServer> {
        if Command::new("git").arg("--version").output().is_err() {
            crate::support::skip("git is not installed");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("cgi-bin")).unwrap();
        std::fs::create_dir_all(root.join("repos")).unwrap();
        host_git(
            root,
            &["init", "-q", "--bare", "-b", "main", "repos/proj.git"],
        );
        host_git(
            &root.join("repos/proj.git"),
            &["config", "http.receivepack", "true"],
        );
        host_git(root, &["clone", "-q", "repos/proj.git", "seed"]);
        let seed = root.join("seed");
        std::fs::write(seed.join("a.txt"), "hello\n").unwrap();
        let numbers: String = (1..=1000).map(|i| format!("{i}\n")).collect();
        std::fs::write(seed.join("n.txt"), &numbers).unwrap();
        host_git(&seed, &["add", "."]);
        host_git(&seed, &["commit", "-qm", "first"]);
        for i in 1..=2 {
            std::fs::write(seed.join("n.txt"), format!("{numbers}{i}\n")).unwrap();
            host_git(&seed, &["commit", "-qam", &format!("change {i}")]);
        }
        host_git(&seed, &["tag", "v1"]);
        host_git(&seed, &["push", "-q", "origin", "main", "--tags"]);
        host_git(&root.join("repos/proj.git"), &["repack", "-adq"]);
        std::fs::write(
            root.join("cgi-bin/git"),
            format!(
                "#!/bin/sh\nexport GIT_PROJECT_ROOT={} GIT_HTTP_EXPORT_ALL=1 GIT_CONFIG_COUNT=1 \
                 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'\nexec git http-backend\n",
                root.join("repos").display()
            ),
        )
        .unwrap();
        // Python's CGI server runs scripts as `nobody` when started by root.
        let chmod = Command::new("chmod")
            .args(["-R", "a+rwX"])
            .arg(root)
            .status()
            .unwrap();
        assert!(chmod.success());
        let chmod = Command::new("chmod")
            .arg("a+rx")
            .arg(root.join("cgi-bin/git"))
            .status()
            .unwrap();
        assert!(chmod.success());
        let (child, port) = python_server(root, &["--cgi"]);
        Some(GitServer { child, port, dir })
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/cgi-bin/git/proj.git", self.port)
    }

    fn bare(&self) -> std::path::PathBuf {
        self.dir.path().join("repos/proj.git")
    }
}

/// `git clone`, `log`, `commit`, `push`, then `pull` of a commit pushed elsewhere, a push
/// rejected for being behind, and `ls-remote`, against `git http-backend` on loopback; the
/// server's own git checks what was pushed.
#[test]
fn git_clones_and_pushes_over_http() {
    let Some(server) = GitServer::start() else {
        return;
    };
    let url = server.url();
    let allow = format!("127.0.0.1:{}", server.port);
    let work = tempfile::tempdir().unwrap();
    let workspace = work.path().display().to_string();
    let flags = ["--allow-net", &allow, "--workspace", &workspace];
    let script = format!(
        r#"
git ls-remote {url} | cut -f2
git clone -q {url} && cd proj && git log --format=%s && cat a.txt && git branch -a
git config user.email sandbox@example.org && git config user.name Sandbox
echo more >> a.txt && git commit -qam "from the sandbox" && git push -q && echo pushed
"#
    );
    let (code, out, err) = run(&flags, &script);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        out,
        "HEAD\nrefs/heads/main\nrefs/tags/v1\nchange 2\nchange 1\nfirst\nhello\n* main\n  \
         remotes/origin/HEAD -> origin/main\n  remotes/origin/main\npushed\n",
        "{err}"
    );
    let bare = server.bare();
    assert_eq!(
        host_git(&bare, &["log", "-1", "--format=%s"]),
        "from the sandbox\n"
    );
    host_git(&bare, &["fsck", "--strict"]);
    assert_eq!(host_git(&bare, &["show", "main:a.txt"]), "hello\nmore\n");

    // A commit pushed from elsewhere comes in with pull; a push behind the remote is refused.
    let other = tempfile::tempdir().unwrap();
    host_git(other.path(), &["clone", "-q", bare.to_str().unwrap(), "o"]);
    let o = other.path().join("o");
    std::fs::write(o.join("b.txt"), "from the host\n").unwrap();
    host_git(&o, &["add", "b.txt"]);
    host_git(&o, &["commit", "-qm", "from the host"]);
    host_git(&o, &["push", "-q"]);
    let (code, out, err) = run(
        &flags,
        "cd proj && git pull -q && git log -1 --format=%s && cat b.txt && git status -sb | head -1",
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        out, "from the host\nfrom the host\n## main...origin/main\n",
        "{err}"
    );
    std::fs::write(o.join("c.txt"), "again\n").unwrap();
    host_git(&o, &["add", "c.txt"]);
    host_git(&o, &["commit", "-qm", "again"]);
    host_git(&o, &["push", "-q"]);
    let (_, out, err) = run(
        &flags,
        "cd proj && echo x > x.txt && git add x.txt && git commit -qm local && git push; echo \"push=$?\"",
    );
    assert!(out.contains("push=1"), "{out}\n{err}");
    assert!(
        err.contains("! [rejected]        main -> main (fetch first)"),
        "{err}"
    );

    // Without the server allowed: git's own error, the policy named.
    let (_, out, err) = run(&[], &format!("git clone {url}; echo \"clone=$?\""));
    assert!(out.contains("clone=128"), "{out}");
    assert!(err.contains(BLOCKED), "{err}");
}

/// An npm-style registry of the test's own: packuments and tarballs it builds, served by
/// Python's `http.server` (a package's document is `NAME/index.html`).
const BUILD_REGISTRY: &str = r#"
import base64, hashlib, io, json, os, sys, tarfile
root, base = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(root, "-"))
def pkg(name, version, files, deps=None, bin=None, tamper=False):
    meta = {"name": name, "version": version, "main": "index.js"}
    if deps: meta["dependencies"] = deps
    if bin: meta["bin"] = bin
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for fname, text in dict(files, **{"package.json": json.dumps(meta)}).items():
            data = text.encode()
            info = tarfile.TarInfo("package/" + fname)
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))
    data = buf.getvalue()
    tgz = "%s-%s.tgz" % (name.split("/")[-1], version)
    open(os.path.join(root, "-", tgz), "wb").write(data)
    digest = hashlib.sha512(b"x" if tamper else data).digest()
    meta["dist"] = {"tarball": base + "/-/" + tgz,
                    "integrity": "sha512-" + base64.b64encode(digest).decode()}
    return meta
registry = {}
def publish(meta):
    doc = registry.setdefault(meta["name"], {"name": meta["name"], "versions": {}, "dist-tags": {}})
    doc["versions"][meta["version"]] = meta
    doc["dist-tags"]["latest"] = meta["version"]
publish(pkg("beta", "1.0.0", {"index.js": "module.exports = 'beta1';"}))
publish(pkg("beta", "2.1.0", {"index.js": "module.exports = 'beta2';"}))
publish(pkg("beta", "3.0.0-rc.1", {"index.js": "module.exports = 'beta3rc';"}))
publish(pkg("alpha", "1.0.0", {"index.js": "module.exports = 'alpha+' + require('beta');"},
            deps={"beta": "^2.0.0"}))
publish(pkg("@scope/gamma", "1.2.0", {"index.js": "module.exports = 'gamma';",
            "cli.js": "console.log('gamma cli', process.argv.slice(2).join(' '));"},
            bin={"gamma-cli": "cli.js"}))
publish(pkg("tampered", "1.0.0", {"index.js": ""}, tamper=True))
for name, doc in registry.items():
    os.makedirs(os.path.join(root, name))
    open(os.path.join(root, name, "index.html"), "w").write(json.dumps(doc))
"#;

/// `npm install` from a registry with dependencies (semver ranges, a conflicting version
/// nested), a scoped package with a bin, integrity checked; `require` finds node_modules;
/// `npm ls`, `npm run`; node's `http.get`.
#[test]
fn npm_installs_from_a_registry() {
    let dir = tempfile::tempdir().unwrap();
    let (child, port) = python_server(dir.path(), &[]);
    let _server = Index {
        child,
        port,
        _dir: tempfile::tempdir().unwrap(),
    };
    let base = format!("http://127.0.0.1:{port}");
    let built = Command::new("python3")
        .args(["-c", BUILD_REGISTRY])
        .arg(dir.path())
        .arg(&base)
        .status()
        .expect("python3");
    assert!(built.success());
    let allow = format!("127.0.0.1:{port}");
    let script = format!(
        r#"
export npm_config_registry={base}/
npm init -y >/dev/null
npm install alpha @scope/gamma
node -e 'console.log(require("alpha"), require("@scope/gamma"))'
npm install -s beta@1 && node -e 'console.log(require("beta"), require("alpha"))'
npm ls
node -e 'const p = require("./package.json"); console.log(JSON.stringify(p.dependencies))'
node -e 'const p = require("./package.json"); p.scripts = {{hi: "gamma-cli there"}}; require("fs").writeFileSync("package.json", JSON.stringify(p))'
npm run hi
node -e 'const l = require("./package-lock.json"), a = l.packages["node_modules/alpha"]; console.log(l.lockfileVersion, Object.keys(l.packages).join(","), a.version, a.integrity.slice(0, 7), a.resolved.endsWith("alpha-1.0.0.tgz"))'
rm -rf node_modules && npm ci -s && node -e 'console.log(require("beta"), require("alpha"), require("@scope/gamma"))'
cp package.json saved.json
node -e 'const p = require("./package.json"); p.dependencies.delta = "^9.0.0"; require("fs").writeFileSync("package.json", JSON.stringify(p))'
npm ci; echo "ci=$?"
mv saved.json package.json
npm install tampered; echo "tampered=$?"
npm install nosuch; echo "nosuch=$?"
node -e 'require("http").get("{base}/beta/", (r) => {{ let d = ""; r.setEncoding("utf8"); r.on("data", (c) => d += c); r.on("end", () => console.log(r.statusCode, JSON.parse(d).name)); }})'
"#
    );
    let (code, out, err) = run(&["--allow-net", &allow], &script);
    assert_eq!(code, 0, "{out}\n{err}");
    let want = "\nadded 3 packages in 1s\nalpha+beta2 gamma\nbeta1 alpha+beta2\n\
                workspace@1.0.0 /workspace\n├── @scope/gamma@1.2.0\n├── alpha@1.0.0\n└── beta@1.0.0\n\n\
                {\"@scope/gamma\":\"^1.2.0\",\"alpha\":\"^1.0.0\",\"beta\":\"^1.0.0\"}\n\n\
                > workspace@1.0.0 hi\n> gamma-cli there\n\ngamma cli there\n\
                3 ,node_modules/@scope/gamma,node_modules/alpha,node_modules/alpha/node_modules/beta,node_modules/beta 1.0.0 sha512- true\n\
                beta1 alpha+beta2 gamma\nci=1\ntampered=1\nnosuch=1\n200 beta\n";
    // npm's timing varies: compare with the seconds normalised.
    let normal = |s: &str| {
        s.split(" in ")
            .enumerate()
            .map(|(i, p)| {
                if i == 0 {
                    p.to_string()
                } else {
                    format!("in {}", p.split_once('s').map_or(p, |x| x.1))
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(normal(&out), normal(want), "{err}");
    assert!(err.contains("EINTEGRITY"), "{err}");
    assert!(
        err.contains("Missing: delta@^9.0.0 from lock file"),
        "{err}"
    );
    assert!(err.contains("'nosuch@*' is not in this registry"), "{err}");

    // Without the registry allowed: npm's error, the policy named.
    let (_, out, err) = run(
        &[],
        &format!("npm_config_registry={base}/ npm install alpha; echo \"npm=$?\""),
    );
    assert!(out.contains("npm=1"), "{out}");
    assert!(err.contains(BLOCKED), "{err}");
}

/// `requests` (installed with pip from an index of its real wheels, which `.ci/run`
/// downloads) over HTTP and HTTPS: urllib3 gets the host's connections.
#[test]
fn requests_and_httpx_work_once_installed() {
    let wheels =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/pytools/requests-wheels");
    if !wheels.join("requests-2.32.3-py3-none-any.whl").is_file()
        || !wheels.join("httpx-0.28.1-py3-none-any.whl").is_file()
    {
        crate::support::skip(&format!(
            "requests' and httpx's wheels are not in {} (.ci/run downloads them)",
            wheels.display()
        ));
        return;
    }
    // A PEP 503 index of the wheels.
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let mut projects: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for entry in std::fs::read_dir(&wheels).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let data = std::fs::read(&path).unwrap();
        std::fs::write(files.join(&name), &data).unwrap();
        let project = name
            .split('-')
            .next()
            .unwrap()
            .to_lowercase()
            .replace('_', "-");
        let sha = hex(&sha2::Sha256::digest(&data));
        projects.entry(project).or_default().push(format!(
            "<a href=\"../../files/{name}#sha256={sha}\">{name}</a>"
        ));
    }
    for (project, links) in &projects {
        let d = dir.path().join("simple").join(project);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("index.html"), links.join("\n")).unwrap();
    }
    let (child, port) = python_server(dir.path(), &[]);
    let _index = Index {
        child,
        port,
        _dir: tempfile::tempdir().unwrap(),
    };
    let Some((plain, secure, certs)) = Origin::pair() else {
        return;
    };
    let allow = format!(
        "127.0.0.1:{port},127.0.0.1:{},127.0.0.1:{}",
        plain.addr.port(),
        secure.addr.port()
    );
    let ca = certs.ca.display().to_string();
    let script = format!(
        r#"
pip install -q --index-url http://127.0.0.1:{port}/simple requests httpx 2>/dev/null
python3 -c '
import hashlib, requests
r = requests.get("{hello}")
print(r.status_code, r.text.strip(), r.headers["content-type"])
print(hashlib.sha256(requests.get("{sblob}").content).hexdigest())
e = requests.post("{echo}", json={{"k": [1, 2]}}).json()
print(e["method"], e["body"], e["headers"]["content-type"])
s = requests.Session()
print(s.get("{redirect}").text.strip(), s.get("{missing}").status_code)
try:
    requests.get("http://169.254.169.254/latest/meta-data/", timeout=5)
except requests.ConnectionError as err:
    print("ConnectionError", "blocked by the sandbox network policy" in str(err))
'
cat > h.py <<'EOF'
import asyncio, hashlib, httpx
r = httpx.get("{hello}")
print(r.status_code, r.text.strip(), r.http_version)
print(hashlib.sha256(httpx.get("{sblob}").content).hexdigest())
with httpx.Client(base_url="{base}", follow_redirects=True) as c:
    e = c.post("/echo", json={{"k": 1}}, headers={{"x-k": "v"}}).json()
    print(e["method"], e["body"], e["headers"]["x-k"])
    print(c.get("/redirect?to=/hello").text.strip(), c.get("/missing").status_code)
async def main():
    async with httpx.AsyncClient() as c:
        r = await c.get("{sblob}")
        print("async", r.status_code, len(r.content))
asyncio.run(main())
try:
    httpx.get("http://169.254.169.254/latest/meta-data/", timeout=5)
except httpx.ConnectError as err:
    print("ConnectError", "blocked by the sandbox network policy" in str(err))
EOF
python3 h.py
"#,
        hello = plain.url("/hello"),
        sblob = secure.url("/blob"),
        echo = plain.url("/echo"),
        redirect = plain.url("/redirect?to=/hello"),
        missing = plain.url("/missing"),
        base = plain.url(""),
    );
    let want = hex(&sha2::Sha256::digest(blob()));
    let (code, out, err) = run(&["--allow-net", &allow, "--ca-cert", &ca], &script);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        out,
        format!(
            "200 hello text/plain\n{want}\nPOST {{\"k\": [1, 2]}} application/json\nhello 404\n\
             ConnectionError True\n\
             200 hello HTTP/1.1\n{want}\nPOST {{\"k\":1}} v\nhello 404\nasync 200 {}\n\
             ConnectError True\n",
            blob().len()
        ),
        "{err}"
    );
}

#[test]
fn https_without_the_tests_root_is_a_certificate_error() {
    let Some(certs) = Certificates::make() else {
        return;
    };
    let secure = Origin::start(Some(certs.server_config()));
    let allow = format!("127.0.0.1:{}", secure.addr.port());
    let (_, out, err) = run(
        &["--allow-net", &allow],
        &format!("curl -sS {}; echo \"curl=$?\"", secure.url("/hello")),
    );
    assert!(out.contains("curl=60"), "{out}\n{err}");
    assert!(err.contains("SSL certificate problem"), "{err}");
}

/// Every trick for reaching the host's loopback, link-local metadata or a private range
/// from a sandbox allowed "everything public" fails as a denied destination, and nothing
/// reaches the server listening on loopback.
#[test]
fn attacks_on_private_addresses_are_refused() {
    let origin = Origin::start(None);
    let port = origin.addr.port();
    let other = Origin::start(None);
    let targets = [
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0177.0.0.1:{port}/"),
        format!("http://0x7f.1:{port}/"),
        format!("http://127.1:{port}/"),
        format!("http://127.0.0.1.:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://[::ffff:7f00:1]:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://0.0.0.0:{port}/"),
        format!("http://user@127.0.0.1:{port}/"),
        format!("http://evil.example@127.0.0.1:{port}/"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[fd00:ec2::254]/latest/meta-data/".to_string(),
        "http://10.0.0.1/".to_string(),
        "http://192.168.1.1/".to_string(),
    ];
    let mut script = String::new();
    for t in &targets {
        script.push_str(&format!("curl -sS --max-time 5 '{t}'; echo \"$?\"\n"));
    }
    // Allowed is only the other server; it redirects to the first: the hop is checked too.
    script.push_str(&format!(
        "curl -sSL '{}'; echo \"$?\"\n",
        other.url(&format!("/redirect?to=http://127.0.0.1:{port}/hello"))
    ));
    let allow = format!("*,127.0.0.1:{}", other.addr.port());
    let (_, out, err) = run(&["--allow-net", &allow], &script);
    let codes: Vec<&str> = out.lines().collect();
    assert_eq!(codes.len(), targets.len() + 1, "{out}\n{err}");
    for (i, code) in codes.iter().enumerate() {
        let what = targets.get(i).map_or("the redirect", |t| t.as_str());
        assert_eq!(*code, "7", "{what}: {out}\n{err}");
    }
    assert_eq!(err.matches(BLOCKED).count(), targets.len() + 1, "{err}");
    assert_eq!(origin.connections(), 0, "a request reached loopback");
    assert_eq!(other.connections(), 1, "the allowed server answered once");
}

/// TLS on a program's own socket: Python's `ssl.SSLContext.wrap_socket` gives a socket a
/// connection the host makes to the same peer, with the peer's certificate verified for the
/// name given, against the roots of `--ca-cert`; a refused destination stays refused.
#[test]
fn python_tls_on_its_own_socket() {
    let Some((_plain, secure, certs)) = Origin::pair() else {
        return;
    };
    let port = secure.addr.port();
    let script = format!(
        r#"cat > t.py <<'EOF'
import socket, ssl
ctx = ssl.create_default_context()
def get(name):
    raw = socket.create_connection(("127.0.0.1", {port}), timeout=10)
    with ctx.wrap_socket(raw, server_hostname=name) as s:
        s.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        f = s.makefile("rb")
        status = f.readline().decode().strip()
        body = f.read().split(b"\r\n\r\n", 1)[1].decode().strip()
        return s.version() in ("TLSv1.2", "TLSv1.3"), status, body
def attempt(what, f):
    try:
        print(what, "ok", f())
    except OSError as e:
        print(what, type(e).__name__)
attempt("verified", lambda: get("127.0.0.1"))
attempt("wrong-name", lambda: get("example.org"))
def unconnected(host):
    s = ctx.wrap_socket(socket.socket(), server_hostname="127.0.0.1")
    s.connect((host, 443))
attempt("private", lambda: unconnected("10.1.2.3"))
attempt("metadata", lambda: unconnected("169.254.169.254"))
EOF
python3 t.py"#
    );
    let allow = format!("127.0.0.1:{port}");
    let ca = certs.ca.display().to_string();
    let (code, out, err) = run(&["--allow-net", &allow, "--ca-cert", &ca], &script);
    assert_eq!(code, 0, "{out}\n{err}");
    for expected in [
        "verified ok (True, 'HTTP/1.1 200 OK', 'hello')",
        "wrong-name SSLCertVerificationError",
        "private ConnectionRefusedError",
        "metadata ConnectionRefusedError",
    ] {
        assert!(out.contains(expected), "{expected}: {out}\n{err}");
    }
}

/// A program's own sockets (`wasi:sockets` TCP, here Python's `socket` module): connected
/// where the rules allow, by address or by a name the host resolved; refused elsewhere,
/// before any packet leaves; no listening, no UDP.
#[test]
fn python_sockets_follow_the_same_rules() {
    let origin = Origin::start(None);
    let other = Origin::start(None);
    let (port, other_port) = (origin.addr.port(), other.addr.port());
    let script = format!(
        r#"cat > s.py <<'EOF'
import socket
def get(host, port, family=socket.AF_INET):
    s = socket.socket(family)
    s.settimeout(5)
    s.connect((host, port))
    s.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while chunk := s.recv(4096):
        data += chunk
    s.close()
    return data.split(b"\r\n\r\n", 1)[1].decode().strip()
def attempt(what, f):
    try:
        print(what, "ok", f())
    except OSError as e:
        print(what, type(e).__name__)
attempt("address", lambda: get("127.0.0.1", {port}))
attempt("name", lambda: get("localhost", {port}))
attempt("create_connection", lambda: socket.create_connection(("127.0.0.1", {port})).close())
attempt("other-port", lambda: get("127.0.0.1", {other_port}))
attempt("mapped", lambda: get("::ffff:127.0.0.1", {other_port}, socket.AF_INET6))
attempt("metadata", lambda: get("169.254.169.254", 80))
attempt("private", lambda: get("10.0.0.1", 80))
attempt("lookup", lambda: socket.getaddrinfo("secret.attacker.example", 80))
def listen():
    s = socket.socket()
    s.bind(("0.0.0.0", 0))
    s.listen()
attempt("listen", listen)
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {port})))
EOF
python3 s.py"#
    );
    let allow = format!("127.0.0.1:{port}");
    let (code, out, err) = run(&["--allow-net", &allow], &script);
    assert_eq!(code, 0, "{out}\n{err}");
    for expected in [
        "address ok hello",
        "name ok hello",
        "create_connection ok None",
        "other-port PermissionError",
        "metadata PermissionError",
        "private PermissionError",
        "lookup gaierror",
        "listen PermissionError",
        "udp PermissionError",
    ] {
        assert!(out.contains(expected), "{expected}: {out}\n{err}");
    }
    // IPv4-mapped IPv6 is refused too (wasmtime-wasi takes it for an invalid argument).
    assert!(out.contains("mapped OSError"), "{out}\n{err}");
    assert_eq!(origin.connections(), 3, "{out}");
    assert_eq!(other.connections(), 0, "a refused socket reached a server");

    // Without a flag, no socket at all, as before.
    let (_, out, err) = run(&[], &script);
    assert!(out.contains("address PermissionError"), "{out}\n{err}");
    assert_eq!(origin.connections(), 3);
}

#[test]
fn deny_net_wins_over_allow_net() {
    let origin = Origin::start(None);
    let allow = format!("127.0.0.1:{}", origin.addr.port());
    let (_, out, err) = run(
        &["--allow-net", &allow, "--deny-net", "127.0.0.0/8"],
        &format!("curl -sS {}; echo \"$?\"", origin.url("/hello")),
    );
    assert_eq!(out.trim(), "7", "{out}\n{err}");
    assert_eq!(origin.connections(), 0);
}

#[test]
fn bad_rules_are_refused_at_start() {
    let mut cmd = wasbox();
    cmd.args(["run", "--allow-net", "example.org:99999", "--", "true"]);
    let out = run_bounded(cmd, Duration::from_secs(60));
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("port"), "{}", text(&out.stderr));
}

/// The worker API: `network_policy` of a job and a session, within `--allow-net`; the node's
/// own port stays out of reach; `/metrics` counts what happened.
#[test]
fn worker_api_policies_narrow_the_node() {
    let origin = Origin::start(None);
    let port = origin.addr.port();
    let allow = format!("127.0.0.1:{port}");
    // Loopback is allowed, every port: the node's own port still needs naming.
    let server = Server::start(&["--allow-net", "127.0.0.1"]);
    let _ = allow;
    let job = |id: &str, policy: Value, script: &str| -> Value {
        let mut sandbox = json!({"image": "python:3.12", "command": ["sh", "-c", script]});
        if !policy.is_null() {
            sandbox["network_policy"] = policy;
        }
        let r = server.post(
            "/v1/worker/jobs:run",
            &json!({"version": 1, "task_id": "t-net", "job_id": id, "sandbox": sandbox}),
        );
        assert!(r.status == 200 || r.status == 400, "{}", r.text());
        if r.status == 400 {
            return json!({"status": 400, "detail": r.json()["detail"]});
        }
        r.json()
    };
    let curl = format!("curl -sS {}; echo \"rc=$?\"", origin.url("/hello"));
    let none = job("j1", Value::Null, &curl);
    assert!(none["stdout"].as_str().unwrap().contains("rc=7"), "{none}");
    let restricted = job("j2", json!("restricted"), &curl);
    assert!(
        restricted["stdout"].as_str().unwrap().contains("rc=7"),
        "{restricted}"
    );
    let allowed = job("j3", json!(format!("allow:127.0.0.1:{port}")), &curl);
    assert_eq!(allowed["stdout"], "hello\nrc=0\n", "{allowed}");
    let everything = job("j4", json!("allow:*"), &curl);
    assert_eq!(everything["stdout"], "hello\nrc=0\n", "{everything}");
    let elsewhere = job("j5", json!("allow:example.org"), &curl);
    assert!(
        elsewhere["stdout"].as_str().unwrap().contains("rc=7"),
        "{elsewhere}"
    );
    let bad = job("j6", json!("allow:not a host"), &curl);
    assert_eq!(bad["status"], 400, "{bad}");
    let bad = job("j7", json!("open"), &curl);
    assert_eq!(bad["status"], 400, "{bad}");
    assert_eq!(origin.connections(), 2);

    // The node's own API: loopback is allowed (127.0.0.2 only), the port is not named.
    let own = format!(
        "curl -sS http://127.0.0.1:{}/healthz; echo \"rc=$?\"",
        server.addr.port()
    );
    let own = job("j8", json!("allow:*"), &own);
    assert!(own["stdout"].as_str().unwrap().contains("rc=7"), "{own}");

    // A program's own socket: refused under the default policy, let through by the rule.
    let socket = format!(
        "python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {port})); \
         s.sendall(b'GET /hello HTTP/1.0\\r\\n\\r\\n'); print(s.recv(100)[:12])\""
    );
    let refused = job("j9", Value::Null, &socket);
    assert!(
        refused["stderr"]
            .as_str()
            .unwrap()
            .contains("PermissionError"),
        "{refused}"
    );
    let allowed = job("j10", json!(format!("allow:127.0.0.1:{port}")), &socket);
    assert_eq!(allowed["stdout"], "b'HTTP/1.1 200'\n", "{allowed}");

    // A session keeps its policy across execs.
    let r = server.post(
        "/v1/worker/sessions",
        &json!({"version": 1, "task_id": "t-net", "session_id": "s-net",
                "sandbox": {"image": "python:3.12", "network_policy": format!("allow:127.0.0.1:{port}")}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = server.post(
        "/v1/worker/sessions/s-net/exec",
        &json!({"version": 1, "command": ["sh", "-c", curl]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["stdout"], "hello\nrc=0\n", "{}", r.text());

    let metrics = server.get("/metrics").text();
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(&format!("wasbox_{name} ")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing:\n{metrics}"))
    };
    assert!(value("egress_connections_total") >= 3.0, "{metrics}");
    assert!(value("egress_denied_total") >= 4.0, "{metrics}");
    assert!(value("egress_received_bytes_total") > 0.0, "{metrics}");
    assert!(
        server.log().contains("wasbox::egress"),
        "connections are logged"
    );
    // And recorded in the telemetry store's service logs (written in the background).
    let mut events = Vec::new();
    for _ in 0..100 {
        let v = server
            .get("/v1/worker/telemetry/logs?source_kind=service&source_name=egress")
            .json();
        events = v["events"].as_array().cloned().unwrap_or_default();
        if events.iter().any(|e| e["fields"]["allowed"] == true)
            && events.iter().any(|e| e["fields"]["allowed"] == false)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let closed = events
        .iter()
        .find(|e| e["fields"]["allowed"] == true && e["fields"]["sandbox"] == "job t-net/j3")
        .unwrap_or_else(|| panic!("no connection recorded: {events:?}"));
    assert!(
        closed["fields"]["bytes_in"].as_u64().unwrap() > 0,
        "{closed}"
    );
    let refused = events
        .iter()
        .find(|e| e["fields"]["allowed"] == false)
        .unwrap();
    assert!(refused["fields"]["reason"].is_string(), "{refused}");
}

/// E2B's options through its REST API: `allow_internet_access`, `network` on create, the
/// sandbox's details, and `PUT /sandboxes/{id}/network` on a running sandbox.
#[test]
fn e2b_network_options() {
    let origin = Origin::start(None);
    let port = origin.addr.port();
    let server = Server::start(&["--allow-net", &format!("127.0.0.1:{port}")]);
    let key = crate::e2b::api_key();
    let control = |method: &str, path: &str, body: &Value| {
        request(
            server.addr,
            method,
            path,
            &[("X-API-KEY", &key), ("Content-Type", "application/json")],
            &serde_json::to_vec(body).unwrap(),
        )
    };
    let curl = format!("curl -sS {}; echo \"rc=$?\"", origin.url("/hello"));
    let run_in = |s: &Sbx| -> String { crate::e2b::run_command(&server, s, &curl) };
    let create = |body: Value| -> Sbx {
        let r = control("POST", "/sandboxes", &body);
        assert_eq!(r.status, 201, "{}", r.text());
        let v = r.json();
        Sbx {
            id: v["sandboxID"].as_str().unwrap().to_string(),
            token: v["envdAccessToken"].as_str().unwrap().to_string(),
        }
    };
    let open = create(json!({"templateID": "base"}));
    assert_eq!(run_in(&open), "hello\nrc=0\n");
    let closed = create(json!({"templateID": "base", "allow_internet_access": false}));
    assert!(run_in(&closed).contains("rc=7"));
    let info = control("GET", &format!("/sandboxes/{}", closed.id), &Value::Null).json();
    assert_eq!(info["allowInternetAccess"], false, "{info}");
    let listed = create(json!({"templateID": "base",
        "network": {"allowOut": ["127.0.0.1"], "denyOut": ["0.0.0.0/0"]}}));
    assert_eq!(run_in(&listed), "hello\nrc=0\n");
    let info = control("GET", &format!("/sandboxes/{}", listed.id), &Value::Null).json();
    assert_eq!(info["network"]["allowOut"], json!(["127.0.0.1"]), "{info}");
    assert_eq!(info["network"]["denyOut"], json!(["0.0.0.0/0"]), "{info}");

    // Replaced while it runs.
    let r = control(
        "PUT",
        &format!("/sandboxes/{}/network", open.id),
        &json!({"denyOut": ["127.0.0.0/8"]}),
    );
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(run_in(&open).contains("rc=7"));
    let r = control(
        "PUT",
        &format!("/sandboxes/{}/network", open.id),
        &json!({}),
    );
    assert_eq!(r.status, 204);
    assert_eq!(run_in(&open), "hello\nrc=0\n");
    let r = control(
        "PUT",
        &format!("/sandboxes/{}/network", open.id),
        &json!({"allowOut": ["not a host"]}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.json()["code"].is_number(),
        "E2B's error shape: {}",
        r.text()
    );
    let r = control("PUT", "/sandboxes/inope/network", &json!({}));
    assert_eq!(r.status, 404);
    assert_eq!(origin.connections(), 3);
}
