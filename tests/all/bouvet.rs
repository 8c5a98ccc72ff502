//! `wasbox bouvet serve`, the real binary on a Unix socket: bouvet's documented client usage,
//! every method and error code as the reference agent answers them, many connections at
//! once, malformed and oversized lines, a client that goes away mid-command, and the call
//! timeout.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasbox::bouvet::client::{AgentClient, ClientError, FileEntry};

use crate::support::runtime::{spawn_server, wasbox};

/// A running `wasbox bouvet serve --uds`, killed when dropped.
pub struct BouvetServer {
    pub socket: PathBuf,
    pub workspace: PathBuf,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl BouvetServer {
    pub fn start(extra: &[&str]) -> BouvetServer {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("v.sock");
        let workspace = dir.path().join("ws");
        let log = dir.path().join("server.log");
        let mut cmd = wasbox();
        cmd.args(["bouvet", "serve", "--uds"])
            .arg(&socket)
            .arg("--workdir")
            .arg(&workspace)
            .args(extra)
            .env("WASBOX_LOG", "info");
        let (child, line) = spawn_server(cmd, &log);
        assert!(line.contains("listening on unix:"), "{line}");
        BouvetServer {
            socket,
            workspace,
            child,
            log,
            _dir: dir,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A raw connection, after the handshake.
    pub fn connect(&self) -> Lines {
        let mut c = Lines::open(&self.socket);
        assert_eq!(c.send("CONNECT 52"), "OK 52");
        c
    }
}

impl Drop for BouvetServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- server log ---\n{}", self.log());
        }
    }
}

/// Newline-delimited lines over a Unix socket.
pub struct Lines {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Lines {
    pub fn open(path: &Path) -> Lines {
        let s = UnixStream::connect(path).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
        Lines {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
        }
    }

    pub fn send(&mut self, line: &str) -> String {
        self.writer.write_all(line.as_bytes()).unwrap();
        self.writer.write_all(b"\n").unwrap();
        self.read()
    }

    pub fn read(&mut self) -> String {
        let mut answer = String::new();
        self.reader.read_line(&mut answer).unwrap();
        answer.trim_end_matches('\n').to_string()
    }

    /// A JSON-RPC call; the whole response.
    pub fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let answer = self.send(&req.to_string());
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer}"))
    }
}

fn error_of(v: &Value) -> (i64, String) {
    assert!(v.get("result").is_none(), "{v}");
    (
        v["error"]["code"].as_i64().unwrap(),
        v["error"]["message"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn the_documented_usage_example() {
    let server = BouvetServer::start(&[]);
    // As bouvet's own code does it: connect (retrying until the agent answers), then call.
    let mut client = AgentClient::connect(&server.socket).await.unwrap();
    client.ping().await.unwrap();
    let result = client.exec("echo 'Hello, World!'").await.unwrap();
    assert_eq!(result.stdout, "Hello, World!\n");
    assert!(result.success());
    let code_result = client.exec_code("python", "print(2 + 2)").await.unwrap();
    assert!(code_result.success(), "{code_result:?}");
    assert_eq!(code_result.stdout, "4\n");
    client.write_file("/tmp/test.txt", "content").await.unwrap();
    assert_eq!(client.read_file("/tmp/test.txt").await.unwrap(), "content");
    let entries = client.list_dir("/tmp").await.unwrap();
    assert_eq!(
        entries,
        [FileEntry {
            name: "test.txt".into(),
            is_dir: false,
            size: 7
        }]
    );
    // Errors come back as the documented variant, with the agent's code and message.
    match client.read_file("/tmp/missing.txt").await {
        Err(ClientError::Rpc { code, message }) => {
            assert_eq!(code, -32603);
            assert_eq!(
                message,
                "failed to stat '/tmp/missing.txt': No such file or directory (os error 2)"
            );
        }
        other => panic!("{other:?}"),
    }
    // The workspace is the working directory; its files are the host directory's.
    client.write_file("notes/a.md", "# a").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(server.workspace.join("notes/a.md")).unwrap(),
        "# a"
    );
    let out = client.exec("pwd; cat notes/a.md").await.unwrap();
    assert_eq!(out.stdout, "/workspace\n# a");
}

#[test]
fn every_method_and_error_code_like_the_reference() {
    let server = BouvetServer::start(&[]);
    // Without a handshake, the first line is already a request.
    let mut c = Lines::open(&server.socket);
    let v = c.call(1, "ping", json!({}));
    assert_eq!(
        v,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"pong": true}})
    );
    // Parse errors: id 0, code -32700, `parse error: ...`.
    for line in [
        "{not json",
        r#"{"id": 3, "method": "ping"}"#,
        r#"{"jsonrpc": "2.0", "method": "ping"}"#,
        r#"{"jsonrpc": "2.0", "id": "7", "method": "ping"}"#,
        r#"{"jsonrpc": "2.0", "id": -1, "method": "ping"}"#,
        r#"[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]"#,
    ] {
        let v: Value = serde_json::from_str(&c.send(line)).unwrap();
        assert_eq!(v["id"], 0, "{line}: {v}");
        let (code, message) = error_of(&v);
        assert_eq!(code, -32700, "{line}");
        assert!(message.starts_with("parse error: "), "{line}: {message}");
    }
    // Blank lines are skipped: the next answer is the next request's.
    c.writer.write_all(b"\n   \n").unwrap();
    assert_eq!(c.call(2, "ping", json!(null))["result"]["pong"], true);
    // `jsonrpc`'s value is not checked.
    assert_eq!(
        c.send(r#"{"jsonrpc": "1.0", "id": 3, "method": "ping"}"#),
        r#"{"jsonrpc":"2.0","id":3,"result":{"pong":true}}"#
    );
    assert_eq!(
        error_of(&c.call(4, "shutdown", json!({}))),
        (-32601, "method not found: shutdown".into())
    );
    for (method, params, message) in [
        (
            "exec",
            json!(null),
            "invalid params: invalid type: null, expected struct ExecParams",
        ),
        (
            "exec",
            json!({"command": "ls"}),
            "invalid params: missing field `cmd`",
        ),
        (
            "exec_code",
            json!({"lang": "sh"}),
            "invalid params: missing field `code`",
        ),
        (
            "read_file",
            json!({}),
            "invalid params: missing field `path`",
        ),
        (
            "write_file",
            json!({"path": "/tmp/x"}),
            "invalid params: missing field `content`",
        ),
        (
            "list_dir",
            json!({"path": 5}),
            "invalid params: invalid type: integer `5`, expected a string",
        ),
    ] {
        let v = c.call(5, method, params);
        assert_eq!(error_of(&v), (-32602, message.to_string()), "{method}");
    }

    // exec: `sh -c`, an empty stdin, the real exit code, stdout and stderr apart.
    let v = c.call(
        6,
        "exec",
        json!({"cmd": "cat; echo out; echo err >&2; exit 7"}),
    );
    assert_eq!(
        v["result"],
        json!({"exit_code": 7, "stdout": "out\n", "stderr": "err\n"})
    );
    assert_eq!(
        c.send(r#"{"jsonrpc":"2.0","id":7,"method":"exec","params":{"cmd":"printf 'a\\xffb'"}}"#),
        r#"{"jsonrpc":"2.0","id":7,"result":{"exit_code":0,"stdout":"a\ufffdb","stderr":""}}"#
            .replace("\\ufffd", "\u{fffd}")
    );
    // Each stream is cut at 1 MiB on a character boundary, with the reference's marker.
    let v = c.call(
        8,
        "exec",
        json!({"cmd": "yes é | head -c 3000000; yes x | head -c 2000000 >&2"}),
    );
    let out = v["result"]["stdout"].as_str().unwrap();
    let err = v["result"]["stderr"].as_str().unwrap();
    for s in [out, err] {
        assert!(
            s.ends_with("\n... [output truncated]"),
            "{}",
            &s[s.len() - 40..]
        );
        assert!(s.len() <= (1 << 20) + 30);
    }
    assert!(out.len() > (1 << 20) - 4);

    // Files.
    let v = c.call(
        9,
        "write_file",
        json!({"path": "/tmp/deep/er/f.txt", "content": "hé"}),
    );
    assert_eq!(v["result"], json!({"success": true}));
    assert_eq!(
        c.call(10, "read_file", json!({"path": "/tmp/deep/er/f.txt"}))["result"],
        json!({"content": "hé"})
    );
    let (code, message) = error_of(&c.call(11, "read_file", json!({"path": "/tmp/deep"})));
    assert_eq!(code, -32603);
    assert_eq!(
        message,
        "failed to read '/tmp/deep': Is a directory (os error 21)"
    );
    c.call(
        12,
        "exec",
        json!({"cmd": "printf '\\377\\376' > /tmp/bin; yes | head -c 10485761 > /tmp/big"}),
    );
    let (code, message) = error_of(&c.call(13, "read_file", json!({"path": "/tmp/bin"})));
    assert_eq!(
        (code, message.as_str()),
        (
            -32603,
            "failed to read '/tmp/bin': stream did not contain valid UTF-8"
        )
    );
    let (code, message) = error_of(&c.call(14, "read_file", json!({"path": "/tmp/big"})));
    assert_eq!(code, -32603);
    assert_eq!(
        message,
        "file '/tmp/big' is too large (10485761 bytes, max 10485760 bytes)"
    );
    // list_dir: sorted by name, dotfiles included, 0 for anything not a regular file,
    // symlinks not followed.
    c.call(15, "exec", json!({"cmd": "mkdir -p /tmp/l/sub; printf 12345 > /tmp/l/b; touch /tmp/l/.hidden; ln -s b /tmp/l/a-link; ln -s sub /tmp/l/dir-link"}));
    let v = c.call(16, "list_dir", json!({"path": "/tmp/l"}));
    assert_eq!(
        v["result"]["entries"],
        json!([
            {"name": ".hidden", "is_dir": false, "size": 0},
            {"name": "a-link", "is_dir": false, "size": 0},
            {"name": "b", "is_dir": false, "size": 5},
            {"name": "dir-link", "is_dir": false, "size": 0},
            {"name": "sub", "is_dir": true, "size": 0},
        ])
    );
    let (code, message) = error_of(&c.call(17, "list_dir", json!({"path": "/tmp/l/b"})));
    assert_eq!(
        (code, message.as_str()),
        (
            -32603,
            "failed to read directory '/tmp/l/b': Not a directory (os error 20)"
        )
    );
    let (code, _) = error_of(&c.call(18, "list_dir", json!({"path": "/tmp/none"})));
    assert_eq!(code, -32603);
    // Outside the workspace there is only the sandbox's own read-only root.
    let (code, _) = error_of(&c.call(19, "read_file", json!({"path": "/etc/shadow"})));
    assert_eq!(code, -32603);
    let passwd = c.call(19, "read_file", json!({"path": "/etc/passwd"}));
    assert!(
        passwd["result"]["content"]
            .as_str()
            .is_some_and(|p| p.starts_with("root:x:0:0:root:/root:/bin/sh\n")),
        "{passwd}"
    );

    // A second connection with a handshake whose port is not a number: `OK 52`.
    let mut d = Lines::open(&server.socket);
    assert_eq!(d.send("CONNECT vsock"), "OK 52");
    assert_eq!(d.call(1, "ping", json!({}))["result"]["pong"], true);
}

#[test]
fn exec_code_in_each_language() {
    // On a cold cache the first python3 waits for its program to compile (tens of seconds on
    // a busy 2-core machine); this test is about the outputs, not that wait.
    let server = BouvetServer::start(&["--exec-timeout", "280"]);
    let mut c = server.connect();
    for (i, (lang, code, out)) in [
        ("python", "import sys; print(sys.version_info[0])", "3\n"),
        ("python3", "print('py3')", "py3\n"),
        ("PYTHON", "print('upper')", "upper\n"),
        ("node", "console.log(6 * 7)", "42\n"),
        ("javascript", "console.log([1, 2].length)", "2\n"),
        ("js", "console.log('js')", "js\n"),
        ("bash", "a=(x y z); echo ${#a[@]}", "3\n"),
        ("sh", "echo $((1 + 1))", "2\n"),
    ]
    .into_iter()
    .enumerate()
    {
        let v = c.call(
            i as u64 + 1,
            "exec_code",
            json!({"lang": lang, "code": code}),
        );
        assert_eq!(v["result"]["stdout"], out, "{lang}: {v}");
        assert_eq!(v["result"]["exit_code"], 0, "{lang}: {v}");
    }
    let v = c.call(
        20,
        "exec_code",
        json!({"lang": "python", "code": "raise SystemExit(4)"}),
    );
    assert_eq!(v["result"]["exit_code"], 4, "{v}");
    let v = c.call(
        21,
        "exec_code",
        json!({"lang": "Cobol", "code": "DISPLAY 'HI'"}),
    );
    assert_eq!(
        v["result"],
        json!({"exit_code": -1, "stdout": "", "stderr": "unsupported language: Cobol"})
    );
}

/// A command that a signal ends has no exit code: bouvet's agent answers -1 (Rust's
/// `ExitStatus::code()` is `None`); an exit of its own keeps its code, even 137, and a
/// shell that saw its child signalled reports 128 + the signal, as it does.
#[test]
fn a_command_ended_by_a_signal_answers_minus_one() {
    let server = BouvetServer::start(&[]);
    let mut c = server.connect();
    for (id, cmd, code, out) in [
        (1, "echo before; kill -9 $$; echo after", -1, "before\n"),
        (2, "kill -TERM $$", -1, ""),
        (3, "exit 137", 137, ""),
        (4, "sh -c 'kill -9 $$'; echo $?", 0, "137\n"),
        (5, "sleep 5 & kill -9 $!; wait $!; echo $?", 0, "137\n"),
    ] {
        let v = c.call(id, "exec", json!({"cmd": cmd}));
        assert_eq!(v["result"]["exit_code"], code, "{cmd}: {v}");
        assert_eq!(v["result"]["stdout"], out, "{cmd}: {v}");
    }
}

#[test]
fn fifty_connections_at_once() {
    let server = BouvetServer::start(&[]);
    // Warm: the first command loads the programs.
    server.connect().call(1, "exec", json!({"cmd": "true"}));
    let socket = server.socket.clone();
    let started = Instant::now();
    let workers: Vec<_> = (0..50)
        .map(|n| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut c = Lines::open(&socket);
                assert_eq!(c.send("CONNECT 52"), "OK 52");
                for round in 0..4u64 {
                    let id = round * 10;
                    let path = format!("/workspace/c{n}/r{round}.txt");
                    let v = c.call(
                        id + 1,
                        "write_file",
                        json!({"path": path, "content": format!("{n}-{round}")}),
                    );
                    assert_eq!(v["id"], id + 1);
                    let v = c.call(
                        id + 2,
                        "exec",
                        json!({"cmd": format!("cat {path} | tr - +")}),
                    );
                    assert_eq!(v["result"]["stdout"], format!("{n}+{round}"), "{v}");
                    assert_eq!(v["id"], id + 2);
                    let v = c.call(
                        id + 3,
                        "list_dir",
                        json!({"path": format!("/workspace/c{n}")}),
                    );
                    assert_eq!(
                        v["result"]["entries"].as_array().unwrap().len() as u64,
                        round + 1
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert!(started.elapsed() < Duration::from_secs(120));
    let dirs = std::fs::read_dir(&server.workspace).unwrap().count();
    assert_eq!(dirs, 50);
}

#[test]
fn malformed_and_oversized_lines_are_answered_and_the_connection_goes_on() {
    let server = BouvetServer::start(&["--max-line-bytes", "4096"]);
    let mut c = server.connect();
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"exec","params":{{"cmd":"echo {}"}}}}"#,
        "x".repeat(100_000)
    );
    let v: Value = serde_json::from_str(&c.send(&huge)).unwrap();
    assert_eq!(v["id"], 0);
    assert_eq!(
        error_of(&v),
        (
            -32700,
            "parse error: request line longer than 4096 bytes".into()
        )
    );
    c.writer.write_all(b"\xff\xfe not utf-8\n").unwrap();
    let v: Value = serde_json::from_str(&c.read()).unwrap();
    assert_eq!(error_of(&v).0, -32700);
    assert_eq!(
        c.call(2, "exec", json!({"cmd": "echo fine"}))["result"]["stdout"],
        "fine\n"
    );
}

#[test]
fn a_client_that_goes_away_stops_its_command() {
    let server = BouvetServer::start(&[]);
    server.connect().call(1, "exec", json!({"cmd": "true"}));
    {
        let mut c = server.connect();
        let req = json!({"jsonrpc": "2.0", "id": 2, "method": "exec",
            "params": {"cmd": "i=0; while [ $i -lt 300 ]; do echo $i >> /workspace/ticks; i=$((i+1)); sleep 0.1; done"}});
        c.writer.write_all(format!("{req}\n").as_bytes()).unwrap();
        let ticks = server.workspace.join("ticks");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::fs::read_to_string(&ticks).map_or(0, |t| t.lines().count()) < 3 {
            assert!(Instant::now() < deadline, "the command never started");
            std::thread::sleep(Duration::from_millis(50));
        }
    } // the connection is closed here, mid-command
    std::thread::sleep(Duration::from_millis(800));
    let ticks = server.workspace.join("ticks");
    let before = std::fs::read_to_string(&ticks).unwrap().lines().count();
    std::thread::sleep(Duration::from_millis(1000));
    let after = std::fs::read_to_string(&ticks).unwrap().lines().count();
    assert_eq!(before, after, "the command went on after its client left");
    assert!(before < 100);
    // The server lives on.
    assert_eq!(
        server.connect().call(3, "ping", json!({}))["result"]["pong"],
        true
    );
}

#[test]
fn a_client_that_only_stops_writing_still_gets_its_answer() {
    let server = BouvetServer::start(&[]);
    let mut c = server.connect();
    let req = json!({"jsonrpc": "2.0", "id": 5, "method": "exec", "params": {"cmd": "sleep 0.5; echo late"}});
    c.writer.write_all(format!("{req}\n").as_bytes()).unwrap();
    c.writer.shutdown(std::net::Shutdown::Write).unwrap();
    let v: Value = serde_json::from_str(&c.read()).unwrap();
    assert_eq!(v["result"]["stdout"], "late\n");
}

#[test]
fn a_command_past_the_timeout_ends_with_minus_one_and_the_ids_stay_in_step() {
    let server = BouvetServer::start(&["--exec-timeout", "1.5"]);
    let mut c = server.connect();
    c.call(1, "exec", json!({"cmd": "true"}));
    let started = Instant::now();
    let v = c.call(
        2,
        "exec",
        json!({"cmd": "echo before; sleep 20; echo after"}),
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(v["id"], 2);
    assert_eq!(v["result"]["exit_code"], -1, "{v}");
    assert_eq!(v["result"]["stdout"], "before\n", "{v}");
    assert!(
        v["result"]["stderr"]
            .as_str()
            .unwrap()
            .contains("timed out after 1.5s"),
        "{v}"
    );
    // The next call is answered with its own id, and works.
    let v = c.call(3, "exec", json!({"cmd": "echo next"}));
    assert_eq!(
        (v["id"].as_u64(), v["result"]["stdout"].as_str()),
        (Some(3), Some("next\n"))
    );
    // A busy loop in the shell itself is stopped the same way.
    let v = c.call(
        4,
        "exec_code",
        json!({"lang": "python", "code": "while True: pass"}),
    );
    assert_eq!(v["result"]["exit_code"], -1, "{v}");
    assert_eq!(c.call(5, "ping", json!({}))["id"], 5);
}

#[test]
fn connections_past_the_limit_are_refused_clearly() {
    let server = BouvetServer::start(&["--max-connections", "1"]);
    let mut first = server.connect();
    assert_eq!(first.call(1, "ping", json!({}))["result"]["pong"], true);
    let mut second = Lines::open(&server.socket);
    let reply = second.send("CONNECT 52");
    assert!(reply.starts_with("BUSY"), "{reply}");
    let mut third = Lines::open(&server.socket);
    let v: Value =
        serde_json::from_str(&third.send(r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#)).unwrap();
    assert_eq!(v["id"], 9);
    assert_eq!(error_of(&v).0, -32603);
    drop(first);
    // Once the first is gone, a new client is served.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = Lines::open(&server.socket);
        if c.send("CONNECT 52") == "OK 52" {
            assert_eq!(c.call(1, "ping", json!({}))["result"]["pong"], true);
            break;
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_stale_socket_is_replaced_and_a_foreign_file_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let mut cmd = wasbox();
    cmd.args(["bouvet", "serve", "--uds"]).arg(&stale);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening on unix:"), "{line}");
    let _ = child.kill();
    let _ = child.wait();
    let file = dir.path().join("file");
    std::fs::write(&file, "precious").unwrap();
    let mut cmd = wasbox();
    cmd.args(["bouvet", "serve", "--uds"]).arg(&file);
    let out = crate::support::runtime::run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a socket"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious");
}

#[tokio::test]
async fn the_client_skips_late_answers_and_refuses_foreign_ids() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    // A peer that answers request 2 with a late answer to request 1 first (as an agent
    // does after a call timed out), then request 3 with an id from nowhere.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("peer.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let (rd, mut wr) = stream.into_split();
        let mut lines = tokio::io::BufReader::new(rd).lines();
        assert_eq!(lines.next_line().await.unwrap().unwrap(), "CONNECT 52");
        wr.write_all(b"OK 52\n").await.unwrap();
        for _ in 0..3 {
            let req: Value =
                serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
            let id = req["id"].as_u64().unwrap();
            let answer = match id {
                1 => json!({"jsonrpc": "2.0", "id": 1, "result": {"pong": true}}).to_string(),
                2 => format!(
                    "{}\n{}",
                    json!({"jsonrpc": "2.0", "id": 1, "result": {"exit_code": 0, "stdout": "stale", "stderr": ""}}),
                    json!({"jsonrpc": "2.0", "id": 2, "result": {"content": "fresh"}})
                ),
                _ => json!({"jsonrpc": "2.0", "id": 99, "result": {"pong": true}}).to_string(),
            };
            wr.write_all(format!("{answer}\n").as_bytes())
                .await
                .unwrap();
        }
    });
    let mut client = AgentClient::connect(&path).await.unwrap();
    client.ping().await.unwrap();
    assert_eq!(client.read_file("/x").await.unwrap(), "fresh");
    match client.ping().await {
        Err(ClientError::Rpc { code: -1, message }) => {
            assert!(message.contains("does not match request id 3"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn vsock_and_a_unix_socket_at_once() {
    if !Path::new("/dev/vsock").exists() {
        crate::support::skip("this machine has no AF_VSOCK (/dev/vsock)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("v.sock");
    // A port unlikely to be taken; vsock has no loopback here, so only the listening is
    // checked, and the Unix socket is served beside it.
    let port = 40_000 + std::process::id() % 20_000;
    let mut cmd = wasbox();
    cmd.args(["bouvet", "serve", "--uds"])
        .arg(&socket)
        .args(["--vsock-port", &port.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    struct Killed(Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Killed(cmd.spawn().unwrap());
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let (mut a, mut b) = (String::new(), String::new());
    out.read_line(&mut a).unwrap();
    out.read_line(&mut b).unwrap();
    assert!(a.contains("unix:"), "{a}");
    assert!(b.contains(&format!("vsock port {port}")), "{b}");
    let mut c = Lines::open(&socket);
    assert_eq!(c.send("CONNECT 52"), "OK 52");
    assert_eq!(c.call(1, "ping", json!({}))["result"]["pong"], true);
}

#[test]
fn fuzz_json_rpc_lines() {
    use crate::support::fuzz;
    const KEYS: &[&str] = &[
        "jsonrpc", "id", "method", "params", "cmd", "lang", "code", "path", "content",
    ];
    let server = BouvetServer::start(&["--exec-timeout", "10"]);
    let c = std::cell::RefCell::new(server.connect());
    let templates = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "exec", "params": {"cmd": "echo hi"}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "exec_code",
               "params": {"lang": "bash", "code": "echo hi"}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "write_file",
               "params": {"path": "/workspace/a.txt", "content": "x"}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "read_file",
               "params": {"path": "/workspace/a.txt"}}),
        json!({"jsonrpc": "2.0", "id": 6, "method": "list_dir", "params": {"path": "/workspace"}}),
    ];
    for template in templates {
        fuzz::runner()
            .run(&fuzz::body(template, KEYS), |bytes| {
                // One request per line: a raw newline would make two.
                let line = String::from_utf8_lossy(&bytes).replace(['\n', '\r'], " ");
                if line.trim().is_empty() {
                    return Ok(());
                }
                let answer = c.borrow_mut().send(&line);
                let v: Value = serde_json::from_str(&answer)
                    .unwrap_or_else(|e| panic!("{e}: {line} -> {answer}"));
                assert_eq!(v["jsonrpc"], "2.0", "{line} -> {v}");
                assert!(v.get("id").is_some(), "{line} -> {v}");
                assert!(
                    v.get("result").is_some() != v.get("error").is_some(),
                    "{line} -> {v}"
                );
                if let Some(e) = v.get("error") {
                    assert!(e["code"].is_i64() && e["message"].is_string(), "{v}");
                }
                Ok(())
            })
            .unwrap();
    }
    // The connection and the agent still work.
    assert_eq!(
        c.borrow_mut().call(99, "exec", json!({"cmd": "echo fine"}))["result"]["stdout"],
        "fine\n"
    );
}
