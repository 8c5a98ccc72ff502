//! Snapshots, restores and forks: in the runtime (copy-on-write independence, the tar form,
//! hostile tars) and over the worker API (`:snapshot`, `sessions:restore`, `:fork`,
//! download, upload to another server).

use std::time::Duration;

use serde_json::{Value, json};
use wasbox_runtime::{JobSpec, Runtime, SnapshotError, TarLimits};

use crate::support::http::{Server, request};
use crate::support::runtime::{cache_dir, runtime};

const LIMITS: TarLimits = TarLimits {
    max_bytes: 1 << 30,
    max_entries: 100_000,
    links_may_leave: false,
};

async fn sh(sb: &wasbox_runtime::Sandbox, script: &str) -> String {
    let out = sb.run(JobSpec::shell(script)).await.expect("job");
    assert_eq!(out.exit_code, 0, "{script}: {}", out.stderr);
    out.stdout
}

/// Files of several kinds, modes and a symlink.
const PREPARE: &str = "mkdir -p src/deep/er && echo one > a.txt && printf 'x%.0s' $(seq 1 5000) > src/big \
    && echo '#!/bin/sh' > run.sh && chmod 755 run.sh && ln -s a.txt link && echo deep > src/deep/er/f \
    && chmod 700 src/deep && ln a.txt hard";
const LISTING: &str = "ls -la . src src/deep; cat a.txt link src/deep/er/f; wc -c src/big";

#[tokio::test]
async fn forks_are_independent_copies_sharing_unchanged_files() {
    let rt = runtime();
    let sb = rt
        .sandbox(wasbox_runtime::SandboxConfig::default().env("MODE", "forked"))
        .unwrap();
    sh(&sb, PREPARE).await;
    let before = sh(&sb, LISTING).await;
    let forks = rt.fork(&sb, 3).unwrap();
    for f in &forks {
        assert_eq!(sh(f, LISTING).await, before);
        assert_eq!(sh(f, "echo $MODE").await, "forked\n");
    }
    // Every way of changing a file, in one fork: none shows anywhere else.
    sh(
        &forks[0],
        "echo two > a.txt; echo more >> src/deep/er/f; chmod 600 run.sh; rm src/big; \
         touch -d '2001-01-01' hard; mkdir new; echo n > new/file",
    )
    .await;
    // Writing through a symlink, in another fork.
    sh(&forks[1], "echo via-link > link").await;
    // And in the source, after the fork.
    sh(&sb, "echo source >> a.txt").await;

    assert_eq!(sh(&forks[2], LISTING).await, before);
    assert_eq!(
        sh(
            &forks[0],
            "cat a.txt src/deep/er/f; ls src; ls new; stat -c %a run.sh"
        )
        .await,
        "two\ndeep\nmore\ndeep\nfile\n600\n"
    );
    // `hard` is the guest's own second name of `a.txt`: it follows the copy.
    assert_eq!(
        sh(&forks[1], "cat a.txt hard").await,
        "via-link\nvia-link\n"
    );
    assert_eq!(sh(&sb, "cat a.txt").await, "one\nsource\n");
    // Written through its second name, in the fork nobody changed yet.
    assert_eq!(sh(&forks[2], "echo w >> hard; cat a.txt").await, "one\nw\n");
}

/// A fork's directories are filled when first reached: every way of reaching one (a path
/// through `..`, a symlink to a directory, `cd`, a rename, removal, the host's own file
/// calls, a fork of the fork) sees the whole directory, never an empty stand-in.
#[tokio::test]
async fn a_forks_directories_are_whole_however_they_are_reached() {
    let rt = runtime();
    let sb = rt.sandbox(Default::default()).unwrap();
    sh(&sb, PREPARE).await;
    sh(
        &sb,
        "ln -s src/deep dl && mkdir -p x/y/z && echo z > x/y/z/f",
    )
    .await;
    let tree = "find . | sort; ls -la src src/deep x x/y";
    let before = sh(&sb, tree).await;
    let forks = rt.fork(&sb, 8).unwrap();
    assert_eq!(sh(&forks[0], tree).await, before);
    assert_eq!(sh(&forks[1], "cat dl/er/f").await, "deep\n");
    assert_eq!(sh(&forks[2], "cat src/deep/../deep/er/f").await, "deep\n");
    assert_eq!(
        sh(&forks[3], "cd x/y/z && cat f && ls ../..").await,
        "z\ny\n"
    );
    let out = forks[4]
        .run(JobSpec::shell("rmdir src/deep"))
        .await
        .unwrap();
    assert_ne!(out.exit_code, 0, "a full directory was removed");
    assert!(out.stderr.contains("not empty"), "{}", out.stderr);
    assert_eq!(
        sh(&forks[4], "mv src moved && cat moved/deep/er/f && ls moved").await,
        "deep\nbig\ndeep\n"
    );
    // The host's own calls.
    assert_eq!(forks[5].read_file("x/y/z/f", 100).unwrap(), b"z\n");
    let listed: Vec<String> = forks[6]
        .list_dir("src", 3)
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert!(
        listed.iter().any(|p| p.ends_with("src/deep/er/f")),
        "{listed:?}"
    );
    // A fork of a fork that nothing reached yet.
    let grandchild = rt.fork(&forks[7], 1).unwrap().pop().unwrap();
    assert_eq!(sh(&grandchild, tree).await, before);
    assert_eq!(sh(&forks[7], tree).await, before);
}

#[tokio::test]
async fn a_snapshot_round_trips_through_its_tar() {
    let rt = runtime();
    let sb = rt
        .sandbox(wasbox_runtime::SandboxConfig::default().env("K", "v"))
        .unwrap();
    sh(&sb, PREPARE).await;
    let before = sh(&sb, LISTING).await;
    let mut labels = std::collections::BTreeMap::new();
    labels.insert("task".to_string(), "t1".to_string());
    let snap = rt.snapshot(&sb, labels.clone()).unwrap();
    assert_eq!(snap.manifest().files, 5, "{:?}", snap.manifest());
    let mut tar = Vec::new();
    let digest = snap.write_tar(&mut tar).unwrap();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    // The same tree gives the same tar.
    let mut again = Vec::new();
    assert_eq!(snap.write_tar(&mut again).unwrap(), digest);
    assert_eq!(tar, again);

    let read = rt.read_snapshot(tar.as_slice(), LIMITS).unwrap();
    assert_eq!(read.digest(), Some(digest.as_str()));
    // The manifest names the image and its digest (over its programs).
    let image_digest = &snap.manifest().image_digest;
    assert!(
        image_digest.starts_with("sha256:") && image_digest.len() == 71,
        "{image_digest}"
    );
    assert_eq!(&read.manifest().image_digest, image_digest);
    assert_eq!(read.manifest().labels, labels);
    let restored = rt.restore(&read, None).unwrap();
    assert_eq!(sh(&restored, LISTING).await, before);
    assert_eq!(sh(&restored, "echo $K").await, "v\n");
    // A change in the snapshot's sandbox after it was taken is not in it.
    sh(&sb, "echo changed > a.txt").await;
    let from_memory = rt.restore(&snap, None).unwrap();
    assert_eq!(sh(&from_memory, "cat a.txt").await, "one\n");
}

#[tokio::test]
async fn a_snapshot_waits_for_no_process_and_holds_new_ones_back() {
    let rt = runtime();
    let sb = rt.sandbox(Default::default()).unwrap();
    let running = tokio::spawn({
        let sb = sb.clone();
        async move { sb.run(JobSpec::shell("sleep 2")).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    match rt.snapshot(&sb, Default::default()) {
        // The shell and its `sleep`.
        Err(SnapshotError::Busy(n)) if n >= 1 => {}
        other => panic!("expected Busy, got {:?}", other.err()),
    }
    running.await.unwrap().unwrap();
    assert!(rt.snapshot(&sb, Default::default()).is_ok());
}

/// One ustar header and its data, padded.
fn entry(out: &mut Vec<u8>, name: &str, kind: u8, mode: u32, data: &[u8], size: u64, link: &str) {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    let octal = |h: &mut [u8; 512], at: usize, len: usize, v: u64| {
        let s = format!("{v:0w$o}\0", w = len - 1);
        h[at..at + len].copy_from_slice(s.as_bytes());
    };
    octal(&mut h, 100, 8, u64::from(mode));
    octal(&mut h, 108, 8, 0);
    octal(&mut h, 116, 8, 0);
    octal(&mut h, 124, 12, size);
    octal(&mut h, 136, 12, 0);
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    let s = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(s.as_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

fn manifest(image: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"format": 1, "image": image, "mount": "/workspace", "env": [],
        "limits": {"disk_bytes": 1u64 << 30, "disk_inodes": 100000}}),
    )
    .unwrap()
}

/// A tar with the manifest, the workspace root and `rest`.
fn tar_with(rest: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    tar_of(&manifest("base"), rest)
}

/// A tar with manifest `m`, the workspace root and `rest`.
fn tar_of(m: &[u8], rest: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut t = Vec::new();
    entry(
        &mut t,
        "wasbox-snapshot.json",
        b'0',
        0o644,
        m,
        m.len() as u64,
        "",
    );
    entry(&mut t, "workspace/", b'5', 0o755, b"", 0, "");
    rest(&mut t);
    t.extend_from_slice(&[0u8; 1024]);
    t
}

#[test]
fn hostile_tars_are_refused_and_leave_nothing_behind() {
    let scratch = tempfile::tempdir().unwrap();
    let rt = Runtime::builder()
        .cache_dir(cache_dir())
        .temp_dir(scratch.path())
        .build()
        .unwrap();
    let ok = tar_with(|t| entry(t, "workspace/f", b'0', 0o4755, b"hi", 2, ""));
    let snap = rt.read_snapshot(ok.as_slice(), LIMITS).unwrap();
    assert_eq!(snap.manifest().files, 1);
    drop(snap);
    let mut z = Vec::new();
    wasbox_runtime::compress(ok.as_slice(), &mut z, 3).unwrap();
    let snap = rt.read_snapshot(z.as_slice(), LIMITS).unwrap();
    assert_eq!(snap.manifest().files, 1);
    drop(snap);

    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "traversal",
            tar_with(|t| entry(t, "workspace/../evil", b'0', 0o644, b"x", 1, "")),
        ),
        (
            "outside",
            tar_with(|t| entry(t, "evil", b'0', 0o644, b"x", 1, "")),
        ),
        (
            "absolute",
            tar_with(|t| entry(t, "/workspace/x", b'0', 0o644, b"x", 1, "")),
        ),
        (
            "symlink escape",
            tar_with(|t| entry(t, "workspace/a/l", b'2', 0o777, b"", 0, "../../etc")),
        ),
        (
            "absolute symlink",
            tar_with(|t| entry(t, "workspace/l", b'2', 0o777, b"", 0, "/etc/passwd")),
        ),
        (
            "through a symlink",
            tar_with(|t| {
                entry(t, "workspace/l", b'2', 0o777, b"", 0, "d");
                entry(t, "workspace/d/", b'5', 0o755, b"", 0, "");
                entry(t, "workspace/l/f", b'0', 0o644, b"x", 1, "");
            }),
        ),
        (
            "device",
            tar_with(|t| entry(t, "workspace/null", b'3', 0o666, b"", 0, "")),
        ),
        (
            "fifo",
            tar_with(|t| entry(t, "workspace/p", b'6', 0o666, b"", 0, "")),
        ),
        (
            "hard link",
            tar_with(|t| entry(t, "workspace/h", b'1', 0o644, b"", 0, "/etc/passwd")),
        ),
        (
            "hard link to nothing",
            tar_with(|t| entry(t, "workspace/h", b'1', 0o644, b"", 0, "workspace/none")),
        ),
        (
            "sparse",
            tar_with(|t| entry(t, "workspace/s", b'S', 0o644, b"", 0, "")),
        ),
        (
            "huge",
            tar_with(|t| entry(t, "workspace/huge", b'0', 0o644, b"", 1 << 32, "")),
        ),
        (
            "duplicate",
            tar_with(|t| {
                entry(t, "workspace/f", b'0', 0o644, b"a", 1, "");
                entry(t, "workspace/f", b'0', 0o644, b"b", 1, "");
            }),
        ),
        (
            "bomb",
            tar_with(|t| {
                for i in 0..2000 {
                    entry(t, &format!("workspace/{i}"), b'0', 0o644, b"", 0, "");
                }
            }),
        ),
        ("no manifest", {
            let mut t = Vec::new();
            entry(&mut t, "workspace/f", b'0', 0o644, b"x", 1, "");
            t
        }),
        ("foreign image", {
            let mut t = Vec::new();
            let m = manifest("not-an-image");
            entry(
                &mut t,
                "wasbox-snapshot.json",
                b'0',
                0o644,
                &m,
                m.len() as u64,
                "",
            );
            t
        }),
        ("a working directory that climbs out", {
            let m = serde_json::to_vec(&json!({"format": 1, "image": "base",
                "mount": "/workspace", "cwd": "/workspace/../etc", "env": [],
                "limits": {"disk_bytes": 1u64 << 30, "disk_inodes": 100000}}))
            .unwrap();
            tar_of(&m, |_| {})
        }),
        ("not a tar", b"garbage".repeat(100)),
        // Compressed: a stream that is not zstd after its magic number, and 64 MiB of
        // zeros squeezed into a few bytes.
        ("broken zstd", {
            let mut z = vec![0x28, 0xb5, 0x2f, 0xfd];
            z.extend(b"garbage".repeat(100));
            z
        }),
        ("zstd bomb", {
            let mut z = Vec::new();
            wasbox_runtime::compress(&vec![0u8; 64 << 20][..], &mut z, 19).unwrap();
            z
        }),
    ];
    // Every case again, compressed: the same refusal.
    let cases: Vec<(&str, Vec<u8>)> = cases
        .into_iter()
        .flat_map(|(what, tar)| {
            let mut z = Vec::new();
            wasbox_runtime::compress(tar.as_slice(), &mut z, 3).unwrap();
            [(what, tar), (what, z)]
        })
        .collect();
    let small = TarLimits {
        max_bytes: 1 << 20,
        max_entries: 1000,
        links_may_leave: false,
    };
    for (what, tar) in cases {
        let r = rt.read_snapshot(tar.as_slice(), small);
        let e = match r {
            Ok(_) => panic!("{what}: accepted"),
            Err(e) => e,
        };
        match (what, &e) {
            ("huge" | "bomb", SnapshotError::TooLarge(_)) => {}
            ("foreign image", SnapshotError::ForeignImage(_)) => {}
            ("a working directory that climbs out", SnapshotError::Invalid(why)) => {
                assert!(why.contains("cwd"), "{why}");
            }
            (_, SnapshotError::Invalid(_)) => {}
            _ => panic!("{what}: unexpected {e:?}"),
        }
        let left: Vec<_> = std::fs::read_dir(scratch.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().starts_with("wasbox-snap-"))
            .collect();
        assert!(left.is_empty(), "{what}: left {left:?}");
    }
    // Set-user-id bits never survive.
    let snap = rt.read_snapshot(ok.as_slice(), LIMITS).unwrap();
    let sb = rt.restore(&snap, None).unwrap();
    let mode = std::fs::metadata(sb.workspace().join("f")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o7777,
        0o755
    );
}

pub(crate) fn exec(s: &Server, id: &str, cmd: &str) -> Value {
    let r = s.post(
        &format!("/v1/worker/sessions/{id}/exec"),
        &json!({"version": 1, "command": cmd}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

pub(crate) fn stdout(s: &Server, id: &str, cmd: &str) -> String {
    let v = exec(s, id, cmd);
    assert_eq!(v["exit_code"], 0, "{v}");
    v["stdout"].as_str().unwrap().to_string()
}

fn problem(r: &crate::support::http::Reply, status: u16) -> Value {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    r.json()
}

#[test]
fn worker_api_snapshots_restores_and_forks_sessions() {
    let s = Server::start(&[]);
    let create = json!({"version": 1, "task_id": "t", "session_id": "base-1", "image": "bash:latest", "env": {"MODE": "session"}});
    assert_eq!(s.post("/v1/worker/sessions", &create).status, 200);
    stdout(&s, "base-1", PREPARE);
    let before = stdout(&s, "base-1", LISTING);

    let snap = s.post(
        "/v1/worker/sessions/base-1:snapshot",
        &json!({"version": 1}),
    );
    assert_eq!(snap.status, 200, "{}", snap.text());
    let snap = snap.json();
    let snap_id = snap["snapshot_id"].as_str().unwrap().to_string();
    assert!(
        snap["digest"].as_str().unwrap().starts_with("sha256:")
            && snap["image_digest"]
                .as_str()
                .unwrap()
                .starts_with("sha256:"),
        "{snap}"
    );
    assert_eq!(snap["files"], 5);
    stdout(&s, "base-1", "echo later > a.txt");

    // Restore by id: the session as it was, its environment too.
    let r = s.post(
        "/v1/worker/sessions:restore",
        &json!({"version": 1, "snapshot_id": snap_id, "session_id": "restored-1"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["task_id"], "t");
    assert_eq!(stdout(&s, "restored-1", LISTING), before);
    assert_eq!(stdout(&s, "restored-1", "echo $MODE"), "session\n");
    problem(
        &s.post(
            "/v1/worker/sessions:restore",
            &json!({"version": 1, "snapshot_id": snap_id, "session_id": "restored-1"}),
        ),
        409,
    );

    // Fork: n independent sessions.
    let f = s.post(
        "/v1/worker/sessions/restored-1:fork",
        &json!({"version": 1, "count": 3}),
    );
    assert_eq!(f.status, 200, "{}", f.text());
    let ids: Vec<String> = f.json()["session_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 3);
    stdout(&s, &ids[0], "echo mine > a.txt; rm src/big");
    assert_eq!(stdout(&s, &ids[1], LISTING), before);
    assert_eq!(stdout(&s, &ids[0], "cat a.txt"), "mine\n");
    assert_eq!(stdout(&s, "restored-1", "cat a.txt"), "one\n");

    // The tar, downloaded, restores on another server.
    let dl = s.post(
        "/v1/worker/sessions/restored-1:snapshot?download=1",
        &json!({}),
    );
    assert_eq!(dl.status, 200);
    assert_eq!(dl.header("content-type"), Some("application/x-tar"));
    let digest = dl.header("x-snapshot-digest").unwrap().to_string();
    let other = Server::start(&[]);
    let up = other.post_bytes(
        "/v1/worker/sessions:restore?session_id=elsewhere",
        "application/x-tar",
        &dl.body,
    );
    assert_eq!(up.status, 200, "{}", up.text());
    assert_eq!(stdout(&other, "elsewhere", LISTING), before);
    let listed = s.get("/v1/worker/snapshots").json();
    let stored = listed["snapshots"].as_array().unwrap();
    assert_eq!(stored.len(), 2, "{listed}");
    assert!(stored.iter().any(|x| x["digest"] == digest.as_str()));
    let got = s.get(&format!("/v1/worker/snapshots/{snap_id}"));
    assert_eq!(got.status, 200);
    assert_eq!(got.header("x-snapshot-digest"), snap["digest"].as_str());
    // Compressed with zstd on the way out: smaller, the same digest (the tar's), readable
    // by the zstd tool, and restorable.
    let z = s.get(&format!("/v1/worker/snapshots/{snap_id}?compression=zstd"));
    assert_eq!(z.status, 200);
    assert_eq!(z.header("content-type"), Some("application/zstd"));
    assert_eq!(z.header("x-snapshot-digest"), snap["digest"].as_str());
    assert!(z.body.len() < got.body.len() / 2, "{} bytes", z.body.len());
    let mut unz = std::process::Command::new("zstd")
        .args(["-d", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("zstd");
    let mut input = unz.stdin.take().unwrap();
    let body = z.body.clone();
    let feeder = std::thread::spawn(move || std::io::Write::write_all(&mut input, &body));
    let plain = unz.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    assert_eq!(plain.stdout, got.body, "zstd -d gives the tar back");
    let up = other.post_bytes(
        "/v1/worker/sessions:restore?session_id=from-zstd",
        "application/zstd",
        &z.body,
    );
    assert_eq!(up.status, 200, "{}", up.text());
    assert_eq!(stdout(&other, "from-zstd", LISTING), before);
    let dz = s.post(
        "/v1/worker/sessions/restored-1:snapshot?download=1&compression=zstd",
        &json!({}),
    );
    assert_eq!(dz.header("content-type"), Some("application/zstd"));
    assert!(dz.body.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]));
    problem(
        &s.get(&format!("/v1/worker/snapshots/{snap_id}?compression=lz4")),
        400,
    );

    // Refusals, each a problem; the server keeps serving.
    problem(
        &s.post("/v1/worker/sessions/nope:snapshot", &json!({})),
        404,
    );
    problem(
        &s.post(
            "/v1/worker/sessions/base-1:fork",
            &json!({"version": 1, "count": 0}),
        ),
        400,
    );
    problem(
        &s.post(
            "/v1/worker/sessions/base-1:fork",
            &json!({"version": 1, "count": 101}),
        ),
        400,
    );
    problem(
        &s.post("/v1/worker/sessions/base-1:fork", &json!({"version": 1})),
        400,
    );
    problem(
        &s.post("/v1/worker/sessions/base-1:explode", &json!({})),
        404,
    );
    problem(
        &s.post(
            "/v1/worker/sessions:restore",
            &json!({"version": 1, "snapshot_id": "snap-0123", "session_id": "x"}),
        ),
        404,
    );
    let corrupt = s.post_bytes(
        "/v1/worker/sessions:restore?session_id=bad",
        "application/x-tar",
        &dl.body[..dl.body.len() / 2],
    );
    problem(&corrupt, 422);
    let hostile = tar_with(|t| entry(t, "workspace/l", b'2', 0o777, b"", 0, "/etc/passwd"));
    let r = s.post_bytes(
        "/v1/worker/sessions:restore?session_id=bad",
        "application/x-tar",
        &hostile,
    );
    problem(&r, 422);
    assert_eq!(s.get("/v1/worker/sessions/bad").status, 404);
    let unauthenticated = request(
        s.addr,
        "POST",
        "/v1/worker/sessions/base-1:snapshot",
        &[],
        b"",
    );
    assert_eq!(unauthenticated.status, 401);
    assert_eq!(
        s.call("DELETE", &format!("/v1/worker/snapshots/{snap_id}"), b"")
            .status,
        204
    );
    problem(
        &s.call("DELETE", &format!("/v1/worker/snapshots/{snap_id}"), b""),
        404,
    );
    problem(
        &s.post(
            "/v1/worker/sessions:restore",
            &json!({"version": 1, "snapshot_id": snap_id, "session_id": "gone"}),
        ),
        404,
    );
    assert_eq!(stdout(&s, "base-1", "cat a.txt"), "later\n");
}

#[test]
fn stored_snapshots_outlive_the_server_and_a_corrupt_one_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let mut s = Server::start(&["--state-dir", dir]);
    let create =
        json!({"version": 1, "task_id": "t", "session_id": "keep", "image": "bash:latest"});
    assert_eq!(s.post("/v1/worker/sessions", &create).status, 200);
    // A symlink out of the workspace, as a Python venv has: kept in the node's own tars.
    stdout(&s, "keep", "echo kept > f; ln -s /usr/bin/python3 py");
    let listing = stdout(&s, "keep", "cat f; readlink py; ls -l py | cut -c1");
    let take = |s: &Server| {
        let r = s.post("/v1/worker/sessions/keep:snapshot", &json!({}));
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["snapshot_id"].as_str().unwrap().to_string()
    };
    let (good, bad) = (take(&s), take(&s));
    assert!(s.terminate().success());

    // Flip a byte of the file's data in the second tar.
    let tar = state.path().join("snapshots").join(format!("{bad}.tar"));
    let mut bytes = std::fs::read(&tar).unwrap();
    let at = bytes.windows(5).position(|w| w == b"kept\n").unwrap();
    bytes[at] = b'K';
    std::fs::write(&tar, bytes).unwrap();

    let s = Server::start(&["--state-dir", dir]);
    let restore = |id: &str, session: &str| {
        s.post(
            "/v1/worker/sessions:restore",
            &json!({"version": 1, "snapshot_id": id, "session_id": session}),
        )
    };
    let r = restore(&good, "back");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        stdout(&s, "back", "cat f; readlink py; ls -l py | cut -c1"),
        listing
    );
    let p = problem(&restore(&bad, "broken"), 422);
    assert!(p["detail"].as_str().unwrap().contains("corrupt"), "{p}");
    assert_eq!(s.get("/v1/worker/sessions/broken").status, 404);
}

#[test]
fn the_snapshot_store_is_bounded() {
    let s = Server::start(&[]);
    let create =
        json!({"version": 1, "task_id": "t", "session_id": "many", "image": "bash:latest"});
    assert_eq!(s.post("/v1/worker/sessions", &create).status, 200);
    stdout(&s, "many", "echo x > f");
    let mut first = None;
    for i in 0..256 {
        let r = s.post("/v1/worker/sessions/many:snapshot", &json!({}));
        assert_eq!(r.status, 200, "snapshot {i}: {}", r.text());
        first.get_or_insert_with(|| r.json()["snapshot_id"].as_str().unwrap().to_string());
    }
    let p = problem(
        &s.post("/v1/worker/sessions/many:snapshot", &json!({})),
        507,
    );
    assert!(p["detail"].as_str().unwrap().contains("256"), "{p}");
    let first = first.unwrap();
    assert_eq!(
        s.call("DELETE", &format!("/v1/worker/snapshots/{first}"), b"")
            .status,
        204
    );
    assert_eq!(
        s.post("/v1/worker/sessions/many:snapshot", &json!({}))
            .status,
        200
    );
    assert_eq!(
        s.get("/v1/worker/snapshots").json()["snapshots"]
            .as_array()
            .unwrap()
            .len(),
        256
    );
}

/// Host writes (the files API) racing snapshots: each snapshot holds one whole version of
/// the file, never a mix, and none fails.
#[test]
fn host_writes_racing_snapshots_land_whole() {
    let rt = runtime();
    let sb = rt.sandbox(Default::default()).unwrap();
    let versions: Vec<Vec<u8>> = (b'a'..=b'd').map(|c| vec![c; 256 << 10]).collect();
    sb.write_file("f", &versions[0]).unwrap();
    sb.make_dir("d").unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    // The writer stops however the snapshots end (a failed one too).
    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                sb.write_file("f", &versions[i % versions.len()]).unwrap();
                // Entries that come and go while the tree is listed.
                let name = format!("d/e{}", i % 7);
                let _ = sb.write_file(&name, b"x");
                let _ = sb.remove(&format!("d/e{}", (i + 3) % 7));
                i += 1;
            }
        });
        let _stop = Stop(&stop);
        for _ in 0..40 {
            let snap = rt.snapshot(&sb, Default::default()).expect("snapshot");
            let copy = rt.restore(&snap, None).unwrap();
            let got = copy.read_file("f", 1 << 20).unwrap();
            assert!(versions.contains(&got), "a mixed or partial file");
        }
    });
}
