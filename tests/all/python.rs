//! `python3` as an ordinary program of the image: scripts from files and stdin, `-m`, files
//! that later commands see, pipes, and the limits every program has. Language and library
//! behaviour is checked against CPython by the corpus (`tests/corpus/python.txt`).

use std::time::{Duration, Instant};

use wasbox_runtime::{JobSpec, JobStatus, Limits, SandboxConfig};

use crate::support::runtime::{runtime, sandbox_with, sh};

/// The first use of CPython compiles it; do that outside the short deadlines below.
async fn warm() {
    assert_eq!(sh("python3 -c 'print(1)'").await.stdout, "1\n");
}

#[tokio::test]
async fn scripts_files_stdin_and_modules() {
    warm().await;
    let sandbox = runtime().sandbox(SandboxConfig::default()).unwrap();
    let run = |script: &'static str| {
        let sandbox = sandbox.clone();
        async move { sandbox.run(JobSpec::shell(script)).await.unwrap() }
    };
    let out = run("printf 'import sys\\nfor a in sys.argv: print(a)\\n' > a.py; python3 a.py x 'y z' | wc -l; python a.py q").await;
    assert_eq!(out.stdout, "3\na.py\nq\n", "{out:?}");
    let out = run("echo 'import sys; print(\"stdin\", sys.argv)' | python3 - extra").await;
    assert_eq!(out.stdout, "stdin ['-', 'extra']\n", "{out:?}");
    let out = run("echo '{\"b\": 1, \"a\": [2]}' | python3 -m json.tool --sort-keys").await;
    assert_eq!(
        out.stdout, "{\n    \"a\": [\n        2\n    ],\n    \"b\": 1\n}\n",
        "{out:?}"
    );
    let out = run(
        "python3 -c 'open(\"made.txt\", \"w\").write(\"by python\\n\")'; cat made.txt | tr a-z A-Z",
    )
    .await;
    assert_eq!(out.stdout, "BY PYTHON\n", "{out:?}");
    let out = run("python3 -V; python3 -u -B -c 'print(\"flags\")'").await;
    assert!(out.stdout.starts_with("Python 3."), "{out:?}");
    assert!(out.stdout.ends_with("flags\n"), "{out:?}");
    let out = run("python3 nope.py; echo $?").await;
    assert_eq!(out.stdout, "2\n");
    assert!(out.stderr.contains("can't open file"), "{out:?}");
    // Popen runs programs of the sandbox (more in `popen_and_file_modes_like_cpython`).
    let out = run("python3 -c 'import subprocess; print(subprocess.Popen([\"ls\"]).wait())'").await;
    assert_eq!(out.stdout, "a.py\nmade.txt\n0\n", "{out:?}");
}

#[tokio::test]
async fn a_busy_loop_ends_at_the_deadline() {
    warm().await;
    let sandbox = sandbox_with(Limits::default().timeout(Duration::from_millis(800)));
    let started = Instant::now();
    let out = sandbox
        .run(JobSpec::new([
            "python3",
            "-c",
            "print('spinning', flush=True)\nwhile True: pass",
        ]))
        .await
        .unwrap();
    assert_eq!(out.status, JobStatus::Timeout, "{out:?}");
    assert_eq!(out.stdout, "spinning\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(sh("python3 -c 'print(2+2)'").await.stdout, "4\n");
}

#[tokio::test]
async fn a_memory_bomb_fails_its_own_job() {
    warm().await;
    let sandbox = sandbox_with(Limits::default().memory_bytes(96 << 20));
    let out = sandbox
        .run(JobSpec::new([
            "python3",
            "-c",
            "a = []\nwhile True: a.append(bytearray(1 << 20))",
        ]))
        .await
        .unwrap();
    assert_eq!(out.status, JobStatus::Failed, "{out:?}");
    assert_ne!(out.exit_code, 0, "{out:?}");
    assert_eq!(sh("python3 -c 'print(3+3)'").await.stdout, "6\n");
}

#[tokio::test]
async fn subprocess_captures_both_streams_whatever_their_size() {
    warm().await;
    // Two megabytes on stderr, more than a pipe holds, while stdout is captured too: the
    // parent drains whichever stream has data, so neither side waits for the other.
    let out = sh("python3 -c '
import subprocess
r = subprocess.run([\"sh\", \"-c\", \"yes e | head -c 2000000 >&2; echo out; exit 3\"],
                   capture_output=True)
print(r.returncode, len(r.stderr), r.stdout)
r = subprocess.run(\"cat | tr a-z A-Z\", shell=True, input=\"piped\", capture_output=True, text=True)
print(r.stdout)
'")
    .await;
    assert_eq!(out.stdout, "3 2000000 b'out\\n'\nPIPED\n", "{out:?}");
}

/// `subprocess.Popen` as CPython documents it: PIPE, DEVNULL, STDOUT, files, inherited
/// streams, text mode, communicate, streaming reads and writes, poll, wait with a timeout,
/// kill and terminate (-signal), a missing program; and file modes through `os.stat` (so
/// `shutil.copy` keeps +x). Expected output: the host's CPython running the same script.
#[tokio::test]
async fn popen_and_file_modes_like_cpython() {
    warm().await;
    let sandbox = runtime().sandbox(SandboxConfig::default()).unwrap();
    sandbox
        .write_file("t.py", "import subprocess, sys, os, stat, shutil, io\np = subprocess.Popen([\"cat\"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)\nprint(p.communicate(b\"xyz\"))\nprint(p.returncode)\np = subprocess.Popen(\"echo out; echo err >&2; exit 3\", shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)\nout, err = p.communicate()\nprint(repr(out), repr(err), p.returncode)\np = subprocess.Popen([\"sh\", \"-c\", \"echo a; echo b >&2\"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)\nprint(sorted(p.stdout.read().split()), p.wait())\nwith subprocess.Popen([\"seq\", \"3\"], stdout=subprocess.PIPE, text=True) as p:\n    for line in p.stdout:\n        print(\"line\", line.strip())\nprint(p.returncode)\np = subprocess.Popen([\"sleep\", \"5\"])\nprint(p.poll())\np.kill(); print(p.wait())\np = subprocess.Popen([\"sleep\", \"5\"])\ntry:\n    p.wait(timeout=0.2)\nexcept subprocess.TimeoutExpired as e:\n    print(\"timeout\", type(e).__name__)\np.terminate(); print(p.wait())\nwith open(\"o.txt\", \"w\") as f:\n    subprocess.Popen([\"echo\", \"to-file\"], stdout=f).wait()\nprint(open(\"o.txt\").read().strip())\np = subprocess.Popen([\"tr\", \"a-z\", \"A-Z\"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)\np.stdin.write(\"hello\\n\"); p.stdin.close(); print(p.stdout.read().strip(), p.wait())\np = subprocess.Popen([\"true\"], stdout=subprocess.DEVNULL); print(p.wait())\ntry:\n    subprocess.Popen([\"no-such-prog\"])\nexcept FileNotFoundError as e:\n    print(\"FNF\", e.errno)\nprint(subprocess.run([\"sh\", \"-c\", \"exit 4\"]).returncode)\nopen(\"s.sh\", \"w\").write(\"#!/bin/sh\\necho script\\n\"); os.chmod(\"s.sh\", 0o755)\nprint(oct(stat.S_IMODE(os.stat(\"s.sh\").st_mode)), os.access(\"s.sh\", os.X_OK))\nshutil.copy(\"s.sh\", \"s2.sh\"); print(oct(stat.S_IMODE(os.stat(\"s2.sh\").st_mode)))\nprint(subprocess.check_output([\"./s2.sh\"]).decode().strip())\nprint(oct(stat.S_IMODE(os.lstat(\"o.txt\").st_mode)), stat.S_ISREG(os.stat(\"o.txt\").st_mode))\nfrom pathlib import Path; print(oct(Path(\"s.sh\").stat().st_mode & 0o777))\n".as_bytes())
        .unwrap();
    let out = sandbox
        .run(JobSpec::new(["python3", "t.py"]))
        .await
        .unwrap();
    assert_eq!(
        out.stdout,
        "(b'xyz', None)\n0\n'out\\n' 'err\\n' 3\n[b'a', b'b'] 0\nline 1\nline 2\nline 3\n0\nNone\n-9\ntimeout TimeoutExpired\n-15\nto-file\nHELLO 0\n0\nFNF 2\n4\n0o755 True\n0o755\nscript\n0o644 True\n0o755\n",
        "{out:?}"
    );
    assert_eq!(out.exit_code, 0, "{out:?}");
}

/// `zoneinfo` finds the IANA database (the `tzdata` package bundled with python3): offsets
/// with daylight saving, names, `available_timezones`, and CPython's error for a key that
/// does not exist.
#[tokio::test]
async fn zoneinfo_has_the_iana_database() {
    warm().await;
    let out = sh("python3 -c '
import datetime as d
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones
ny = ZoneInfo(\"America/New_York\")
print(d.datetime(2024, 7, 1, 12, tzinfo=ny).utcoffset(), d.datetime(2024, 1, 1, tzinfo=ny).tzname())
print(d.datetime(2024, 3, 31, 1, 30, tzinfo=d.timezone.utc).astimezone(ZoneInfo(\"Europe/Paris\")))
print(\"Asia/Tokyo\" in available_timezones(), len(available_timezones()) > 400)
try:
    ZoneInfo(\"Nowhere/Town\")
except ZoneInfoNotFoundError as e:
    print(type(e).__name__)
'")
    .await;
    assert_eq!(
        out.stdout,
        "-1 day, 20:00:00 EST\n2024-03-31 03:30:00+02:00\nTrue True\nZoneInfoNotFoundError\n",
        "{out:?}"
    );
}

/// `bz2` and `lzma` as the Python documentation describes them (one-shot and incremental
/// codecs, `open` in text and binary modes, concatenated streams, `unused_data`, `eof`,
/// `needs_input`, `max_length`, their errors) and as `tarfile` and `shutil` use them; what
/// they write, the image's `bzip2` and `xz` read, and the other way round.
#[tokio::test]
async fn bz2_and_lzma_like_cpython() {
    warm().await;
    let out = sh(r#"seq 3 | bzip2 > m.bz2 && seq 4 5 | bzip2 >> m.bz2 && seq 3 | xz > m.xz && seq 4 5 | xz >> m.xz && python3 -c '
import bz2, lzma, io, os, shutil, tarfile
d = b"hello " * 500
print(bz2.decompress(bz2.compress(d, 1)) == d, lzma.decompress(lzma.compress(d)) == d)
print(lzma.decompress(lzma.compress(d, format=lzma.FORMAT_ALONE)) == d)
print(bz2.decompress(open("m.bz2", "rb").read()).split(), lzma.open("m.xz").read().split())
x = bz2.BZ2Decompressor()
s = bz2.compress(d) + b"tail"
print(x.decompress(s[:20]), x.eof, x.needs_input)
print(len(x.decompress(s[20:], 100)), x.eof, x.needs_input)
print(len(x.decompress(b"")), x.eof, x.unused_data)
try:
    x.decompress(b"more")
except EOFError as e:
    print("EOFError", e)
for bad in (lambda: bz2.decompress(b"not bz2"), lambda: lzma.decompress(b"garbage data here")):
    try:
        bad()
    except Exception as e:
        print(type(e).__name__, e)
try:
    bz2.decompress(bz2.compress(d)[:-10])
except ValueError as e:
    print(type(e).__name__, e)
with bz2.open("t.bz2", "wt") as f:
    f.write("one\ntwo\n")
with lzma.open("t.xz", "w", check=lzma.CHECK_SHA256) as f:
    f.write(b"three\n")
print(bz2.open("t.bz2", "rt").readlines(), lzma.LZMAFile(io.BytesIO(open("t.xz", "rb").read())).read())
os.mkdir("d"); open("d/a", "w").write("hi\n")
with tarfile.open("a.tar.bz2", "w:bz2") as t:
    t.add("d")
with tarfile.open("a.tar.xz", "w:xz") as t:
    t.add("d")
print(tarfile.open("a.tar.bz2").getnames(), tarfile.open("a.tar.xz", "r:xz").extractfile("d/a").read())
print(os.path.basename(shutil.make_archive("z", "xztar", ".", "d")), "bztar" in dict(shutil.get_archive_formats()))
' && bzcat t.bz2 && xz -dc t.xz && tar -tf z.tar.xz"#)
    .await;
    assert_eq!(
        out.stdout,
        "True True\nTrue\n[b'1', b'2', b'3', b'4', b'5'] [b'1', b'2', b'3', b'4', b'5']\n\
         b'' False True\n100 False False\n2900 True b'tail'\n\
         EOFError End of stream already reached\n\
         OSError Invalid data stream\nLZMAError Input format not supported by decoder\n\
         ValueError Compressed data ended before the end-of-stream marker was reached\n\
         ['one\\n', 'two\\n'] b'three\\n'\n['d', 'd/a'] b'hi\\n'\nz.tar.xz True\n\
         one\ntwo\nthree\nd/\nd/a\n",
        "{out:?}"
    );
}

/// What a wasm process cannot do fails with a message saying so: new processes through
/// `multiprocessing` and process pools, threads; asyncio has no sockets to watch.
#[tokio::test]
async fn what_a_sandbox_lacks_fails_cleanly() {
    warm().await;
    let sandbox = runtime().sandbox(SandboxConfig::default()).unwrap();
    for (code, want) in [
        (
            "import multiprocessing\nwith multiprocessing.Pool(2) as p: p.map(abs, [1])",
            "OSError: [Errno 38] multiprocessing is not available in this sandbox",
        ),
        (
            "import multiprocessing\nmultiprocessing.Process(target=print).start()",
            "OSError: [Errno 38] multiprocessing is not available in this sandbox",
        ),
        (
            "import concurrent.futures as f\nf.ProcessPoolExecutor()",
            "OSError: [Errno 38] multiprocessing is not available in this sandbox",
        ),
        (
            "import threading\nthreading.Thread(target=print).start()",
            "RuntimeError: can't start new thread",
        ),
        (
            "import asyncio, socket\nasync def m():\n    await asyncio.open_connection('127.0.0.1', 9)\nasyncio.run(m())",
            "Error",
        ),
    ] {
        let out = sandbox
            .run(JobSpec::new(["python3", "-c", code]))
            .await
            .unwrap();
        assert_eq!(out.exit_code, 1, "{code}: {out:?}");
        assert!(out.stderr.contains(want), "{code}: {out:?}");
        assert!(out.stderr.contains("Traceback"), "{code}: {out:?}");
    }
}

/// The user and the host as `id`, `whoami` and `hostname` give them: `pwd`, `grp`,
/// `os.getuid()` and friends, `getpass.getuser()`, `socket.gethostname()` (CPython's own
/// interface and errors, over the sandbox's `/etc/passwd` and `/etc/group`).
#[tokio::test]
async fn users_groups_and_the_host_name() {
    warm().await;
    let script = r#"
import getpass, grp, os, platform, pwd, socket
me = pwd.getpwuid(os.getuid())
print(me.pw_name, me.pw_uid, me.pw_gid, me.pw_dir, me[0], len(me))
print(pwd.getpwnam("user").pw_uid, sorted(p.pw_name for p in pwd.getpwall()))
print(grp.getgrgid(os.getgid()).gr_name, grp.getgrnam("user").gr_gid, os.getgroups())
print(os.geteuid(), os.getegid(), os.getlogin(), getpass.getuser())
print(socket.gethostname(), platform.node(), os.uname().nodename)
for call in (lambda: pwd.getpwuid(4242), lambda: pwd.getpwnam("nobody"), lambda: grp.getgrgid(7)):
    try:
        call()
    except KeyError as e:
        print("KeyError", e)
"#;
    let out = sh(&format!("python3 -c '{script}'; USER=user python3 -c 'import os, pwd; print(os.getuid(), pwd.getpwuid(os.getuid()).pw_dir)'"))
        .await;
    assert_eq!(
        out.stdout,
        "root 0 0 /root root 7\n\
         1000 ['root', 'user']\n\
         root 1000 [0]\n\
         0 0 root root\n\
         wasbox wasbox wasbox\n\
         KeyError 'getpwuid(): uid not found: 4242'\n\
         KeyError \"getpwnam(): name not found: 'nobody'\"\n\
         KeyError 'getgrgid(): gid not found: 7'\n\
         1000 /home/user\n",
        "{out:?}"
    );
}

/// Builds wheels in the workspace with the sandbox's own python3 (zipfile): `greet` 1.0,
/// 1.1 and 2.0b1, `hello_app` (needs `greet>=1.0,<2`, has a console script), a wheel for
/// another platform, and one whose paths climb out of the site directory.
const MAKE_WHEELS: &str = r#"
import os, zipfile
def wheel(name, ver, files, requires=(), entry=None, tag="py3-none-any"):
    os.makedirs("wheels", exist_ok=True)
    info = "%s-%s.dist-info" % (name, ver)
    with zipfile.ZipFile("wheels/%s-%s-%s.whl" % (name, ver, tag), "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
        meta = "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\n" % (name, ver, name)
        meta += "".join("Requires-Dist: %s\n" % r for r in requires)
        z.writestr(info + "/METADATA", meta)
        z.writestr(info + "/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: %s\n" % tag)
        if entry:
            z.writestr(info + "/entry_points.txt", "[console_scripts]\n%s\n" % entry)
        z.writestr(info + "/RECORD", "")
for v, word in (("1.0", "old"), ("1.1", "hello"), ("2.0b1", "beta")):
    wheel("greet", v, {"greet/__init__.py": "def hi(n): return %r + ' ' + n\n" % word})
wheel("hello_app", "0.1", {
    "hello_app/__init__.py": "import greet\ndef main():\n    print(greet.hi('world'))\n",
    "hello_app/__main__.py": "from hello_app import main\nmain()\n",
}, requires=["greet>=1.0,<2", "pywin32; sys_platform == 'win32'", "extra-dep; extra == 'x'"],
   entry="hello = hello_app:main")
wheel("native", "1.0", {"native/__init__.py": ""}, tag="cp314-cp314-linux_x86_64")
wheel("evil", "1.0", {"../../../../escaped.py": "x = 1\n"})
"#;

/// `pip` installs pure-Python wheels from local files (the sandbox has no network) with
/// their dependencies and scripts into the user site, which `python3` puts on `sys.path`;
/// `PYTHONPATH` works as in CPython.
#[tokio::test]
async fn pip_installs_local_wheels_and_pythonpath_extends_the_path() {
    warm().await;
    let sandbox = runtime().sandbox(SandboxConfig::default()).unwrap();
    sandbox
        .write_file("make_wheels.py", MAKE_WHEELS.as_bytes())
        .unwrap();
    let run = |script: &'static str| {
        let sandbox = sandbox.clone();
        async move { sandbox.run(JobSpec::shell(script)).await.unwrap() }
    };
    let out =
        run("python3 make_wheels.py && pip install --no-index --find-links wheels hello_app").await;
    assert_eq!(out.exit_code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("Successfully installed greet-1.1 hello_app-0.1"),
        "{out:?}"
    );
    assert!(out.stderr.contains("not on PATH"), "{out:?}");
    let out = run(
        "python3 -c 'import hello_app, importlib.metadata as m; hello_app.main(); print(m.version(\"greet\"))'; \
         ~/.local/bin/hello; python3 -m hello_app; pip freeze; pip show greet | grep -E '^(Name|Required-by)'",
    )
    .await;
    assert_eq!(
        out.stdout,
        "hello world\n1.1\nhello world\nhello world\ngreet==1.1\nhello_app==0.1\nName: greet\nRequired-by: hello_app\n",
        "{out:?}"
    );
    // Nothing to fetch from (pypi.org is not allowed): pip's own messages, and why.
    let out = run("pip install requests").await;
    assert_eq!(out.exit_code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("No matching distribution found for requests")
            && out.stderr.contains("blocked by the sandbox network policy"),
        "{out:?}"
    );
    let out = run("pip install -f wheels native").await;
    assert_eq!(out.exit_code, 1, "{out:?}");
    assert!(out.stderr.contains("(from versions: none)"), "{out:?}");
    let out =
        run("pip install -f wheels evil >/dev/null; ls / ~ ~/.local/lib | grep -c escaped").await;
    assert!(out.stderr.contains("unsafe path"), "{out:?}");
    assert_eq!(out.stdout, "0\n", "{out:?}");
    // Pre-releases only with --pre; an upgrade replaces the old version; a requirements
    // file pins one.
    let out = run("pip install -q -U -f wheels greet; pip install -U --pre -f wheels greet").await;
    assert!(
        out.stdout.contains("Successfully uninstalled greet-1.1")
            && out.stdout.contains("Successfully installed greet-2.0b1"),
        "{out:?}"
    );
    // The new greet breaks hello_app's requirement: `pip check` says so.
    let out = run("pip check; echo $?").await;
    assert_eq!(
        out.stdout, "hello_app 0.1 has requirement greet<2,>=1.0, but you have greet 2.0b1.\n1\n",
        "{out:?}"
    );
    let out = run(
        "echo 'greet<1.1' > c.txt; pip install --dry-run -f wheels -c c.txt -U greet | tail -1; \
         pip install --dry-run -f wheels -U greet | tail -1",
    )
    .await;
    assert_eq!(
        out.stdout, "Would install greet-1.0\nWould install greet-1.1\n",
        "{out:?}"
    );
    let out = run(
        "echo 'greet==1.0  # pinned' > req.txt; pip install -q -f wheels -r req.txt; \
         python3 -c 'import greet; print(greet.hi(\"x\"))'",
    )
    .await;
    assert_eq!(out.stdout, "old x\n", "{out:?}");
    // Another directory, on PYTHONPATH; -E ignores the variable.
    let out = run("pip install -q -t vendored -f wheels 'greet==1.1'; \
         PYTHONPATH=vendored python3 -c 'import greet; print(greet.hi(\"y\"))'; \
         mkdir -p lib/pkg && echo 'X = 5' > lib/pkg/__init__.py; \
         PYTHONPATH=lib:vendored python3 -c 'import pkg; print(pkg.X)'; \
         PYTHONPATH=lib python3 -E -c 'import pkg' 2>&1 | tail -1")
    .await;
    assert_eq!(
        out.stdout, "hello y\n5\nModuleNotFoundError: No module named 'pkg'\n",
        "{out:?}"
    );
    let out = run(
        "pip uninstall -y hello_app greet; python3 -c 'import greet' 2>&1 | tail -1; \
         ls ~/.local/bin; ls ~/.local/lib/python3*/site-packages; pip list",
    )
    .await;
    assert!(
        out.stdout
            .contains("Successfully uninstalled hello_app-0.1")
            && out
                .stdout
                .ends_with("ModuleNotFoundError: No module named 'greet'\n"),
        "{out:?}"
    );
    // A virtual environment: `python3 -m venv`, `source bin/activate`, pip installs into
    // it, its scripts start its python; outside it the packages are not there.
    let out = run(
        "python3 -m venv .venv && . .venv/bin/activate && echo $VIRTUAL_ENV && which python && \
         pip install -q --no-index -f wheels hello_app && hello && \
         python -c 'import sys, greet; print(sys.prefix, greet.__file__)' && deactivate && \
         python3 -c 'import greet' 2>&1 | tail -1; .venv/bin/python -c 'import greet; print(1)'; \
         .venv/bin/hello; head -1 .venv/bin/hello",
    )
    .await;
    assert_eq!(
        out.stdout,
        "/workspace/.venv\n/workspace/.venv/bin/python\nhello world\n\
         /workspace/.venv /workspace/.venv/lib/python3.14/site-packages/greet/__init__.py\n\
         ModuleNotFoundError: No module named 'greet'\n1\nhello world\n\
         #!/workspace/.venv/bin/python\n",
        "{out:?}"
    );
}

const PYTEST_FILE: &str = r#"
import pytest

@pytest.fixture
def numbers():
    return [1, 2, 3]

def test_sum(numbers):
    assert sum(numbers) == 6

@pytest.mark.parametrize("a,b", [(1, 2), (3, 4)])
def test_order(a, b):
    assert a < b

def test_output(capsys, tmp_path):
    (tmp_path / "f.txt").write_text("data")
    print("captured")
    assert capsys.readouterr().out == "captured\n"
    assert (tmp_path / "f.txt").read_text() == "data"

def test_fails():
    assert [1, 2] == [1, 3]
"#;

/// pytest, installed offline from its wheels (which `.ci/run` downloads into
/// `target/pytools/wheels`), runs a test file: fixtures, parametrize, capsys, tmp_path, a
/// failure reported with its diff and exit status 1.
#[tokio::test]
async fn pytest_installs_offline_and_runs_tests() {
    let wheels = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/pytools/wheels");
    if !wheels.join("pytest-9.2.0-py3-none-any.whl").is_file() {
        crate::support::skip(&format!(
            "pytest's wheels are not in {} (.ci/run downloads them)",
            wheels.display()
        ));
        return;
    }
    warm().await;
    let sandbox = runtime().sandbox(SandboxConfig::default()).unwrap();
    for entry in std::fs::read_dir(&wheels).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        sandbox
            .write_file(&format!("wheels/{name}"), &std::fs::read(&path).unwrap())
            .unwrap();
    }
    sandbox
        .write_file("test_calc.py", PYTEST_FILE.as_bytes())
        .unwrap();
    let run = |script: &'static str| {
        let sandbox = sandbox.clone();
        async move { sandbox.run(JobSpec::shell(script)).await.unwrap() }
    };
    let out = run("pip install -q --no-index -f wheels pytest 2>/dev/null; pip list | grep -c -i -E '^(pytest|pluggy|iniconfig|packaging|pygments) '").await;
    assert_eq!(out.stdout, "5\n", "{out:?}");
    let out = run("python3 -m pytest -q test_calc.py").await;
    assert_eq!(out.exit_code, 1, "{out:?}");
    assert!(
        out.stdout.contains("1 failed, 4 passed") && out.stdout.contains("assert [1, 2] == [1, 3]"),
        "{out:?}"
    );
    let out = run("~/.local/bin/pytest -q -k 'not fails' test_calc.py").await;
    assert_eq!(out.exit_code, 0, "{out:?}");
    assert!(out.stdout.contains("4 passed, 1 deselected"), "{out:?}");
}
