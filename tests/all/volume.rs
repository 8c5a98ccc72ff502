//! Volumes: named directories that outlive the sandboxes they are attached to, with a
//! quota of their own, attached read-write or read-only (see `wasbox_runtime::volume`).
//! Driven with the real runtime and the image's real programs; the front-ends' routes are
//! tested over HTTP with the real binary below.

use std::sync::Arc;

use wasbox_runtime::volume::{OpenVolume, VolumeLimits, VolumeMount, Volumes};
use wasbox_runtime::{JobSpec, JobStatus, Limits, SandboxConfig};

fn store(dir: &std::path::Path) -> Volumes {
    Volumes::at(dir.join("volumes"), VolumeLimits::default()).unwrap()
}

fn mount(volume: &Arc<OpenVolume>, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        volume: volume.clone(),
        path: path.to_string(),
        read_only,
    }
}

async fn sh(sandbox: &wasbox_runtime::Sandbox, script: &str) -> wasbox_runtime::JobOutput {
    sandbox.run(JobSpec::shell(script)).await.unwrap()
}

/// What one sandbox writes to a volume with the shell, coreutils, python3 and node, another
/// sandbox reads after the first is gone, and the store made again on the same directory
/// (a node's restart) still holds.
#[tokio::test]
async fn a_volume_outlives_its_sandboxes() {
    let runtime = crate::support::runtime::runtime();
    let t = tempfile::tempdir().unwrap();
    let volumes = store(t.path());
    volumes.create("data", Some(8 << 20)).unwrap();
    {
        let v = volumes.open("data").unwrap();
        let writer = runtime
            .sandbox(SandboxConfig::default().volume(mount(&v, "/data", false)))
            .unwrap();
        let out = sh(
            &writer,
            "set -e; echo hello > /data/a.txt; mkdir -p /data/d/e; cd /data/d; echo deep > e/f.txt; \
             ln -s /data/a.txt /data/link; cp /data/a.txt /data/d/copy.txt; \
             python3 -c \"open('/data/py.txt','w').write('from python')\"; \
             node -e \"require('fs').writeFileSync('/data/js.txt', 'from node')\"; \
             echo ws > /workspace/w.txt; mv /workspace/w.txt /data/moved.txt; \
             mv /data/d/copy.txt /workspace/back.txt; ls /workspace; ls /data",
        )
        .await;
        assert_eq!(out.status, JobStatus::Completed, "{out:?}");
        assert_eq!(
            out.stdout, "back.txt\na.txt\nd\njs.txt\nlink\nmoved.txt\npy.txt\n",
            "{out:?}"
        );
    }
    // Nothing holds it now: a new store on the same directory is a restarted node.
    assert_eq!(volumes.info("data").unwrap().attached, 0);
    drop(volumes);
    let volumes = store(t.path());
    let v = volumes.open("data").unwrap();
    let reader = runtime
        .sandbox(SandboxConfig::default().volume(mount(&v, "/mnt/in", true)))
        .unwrap();
    // Its mount point is in the tree: `ls` of its parent shows it.
    let out = sh(
        &reader,
        "ls /mnt; ls -d /mnt/in; test -d /mnt/in && echo dir",
    )
    .await;
    assert_eq!(out.stdout, "in\n/mnt/in\ndir\n", "{out:?}");
    let out = sh(
        &reader,
        "cd /mnt/in && cat a.txt d/e/f.txt py.txt js.txt moved.txt; readlink link; \
         cat link; test -e d/copy.txt || echo copy moved; find . -type f | sort | wc -l",
    )
    .await;
    assert_eq!(
        out.stdout,
        // An absolute symlink is kept relative to the link, so it leads to the same file
        // wherever the volume is attached.
        "hello\ndeep\nfrom pythonfrom nodews\n/mnt/in/a.txt\nhello\ncopy moved\n5\n",
        "{out:?}"
    );
    // The usage counted when it was opened is what the writer left.
    let (bytes, inodes) = v.used();
    assert_eq!(
        (bytes, inodes),
        (6 + 5 + 11 + 9 + 3, 8),
        "a.txt d d/e d/e/f.txt link py.txt js.txt moved.txt"
    );
}

/// A volume attached read-only can be read and not changed, by any program or the host's
/// files API; a write says `Read-only file system`.
#[tokio::test]
async fn a_read_only_volume_refuses_every_change() {
    let runtime = crate::support::runtime::runtime();
    let t = tempfile::tempdir().unwrap();
    let volumes = store(t.path());
    volumes.create("ro", None).unwrap();
    std::fs::write(t.path().join("volumes/ro/data/keep.txt"), "kept\n").unwrap();
    let v = volumes.open("ro").unwrap();
    let sandbox = runtime
        .sandbox(SandboxConfig::default().volume(mount(&v, "/ro", true)))
        .unwrap();
    for (script, says) in [
        ("echo x > /ro/new", "Read-only file system"),
        ("echo x >> /ro/keep.txt", "Read-only file system"),
        ("touch /ro/new", "Read-only file system"),
        ("mkdir /ro/d", "Read-only file system"),
        ("rm /ro/keep.txt", "Read-only file system"),
        ("mv /ro/keep.txt /ro/k2", "Read-only file system"),
        ("ln -s x /ro/l", "Read-only file system"),
        ("chmod 600 /ro/keep.txt", "Read-only file system"),
        (
            "python3 -c \"open('/ro/keep.txt','a').write('x')\"",
            "Read-only file system",
        ),
    ] {
        let out = sh(&sandbox, script).await;
        assert_ne!(out.exit_code, 0, "{script}: {out:?}");
        assert!(out.stderr.contains(says), "{script}: {out:?}");
    }
    let out = sh(&sandbox, "cat /ro/keep.txt; ls /ro").await;
    assert_eq!(out.stdout, "kept\nkeep.txt\n", "{out:?}");
    assert!(sandbox.write_file("/ro/x", b"x").is_err());
    assert_eq!(sandbox.read_file("/ro/keep.txt", 100).unwrap(), b"kept\n");
    assert_eq!(v.used(), (5, 1));
}

/// Writes to a volume are charged to its quota, not the sandbox's: a volume's quota
/// refuses what would pass it (`No space left on device`), and its files stay within it.
#[tokio::test]
async fn a_volume_has_a_quota_of_its_own() {
    let runtime = crate::support::runtime::runtime();
    let t = tempfile::tempdir().unwrap();
    let volumes = store(t.path());
    volumes.create("small", Some(256 << 10)).unwrap();
    let v = volumes.open("small").unwrap();
    let sandbox = runtime
        .sandbox(
            SandboxConfig::default()
                .limits(Limits::default().disk_bytes(64 << 10))
                .volume(mount(&v, "/vol", false)),
        )
        .unwrap();
    // `df` shows the volume as a file system of its own, with its own size.
    let out = sh(
        &sandbox,
        "df -k /vol/. | tail -n 1; df | wc -l; df -k /tmp | tail -n 1",
    )
    .await;
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{out:?}");
    let vol: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        (vol[0], vol[1], vol[5]),
        ("volume:small", "256", "/vol"),
        "{out:?}"
    );
    assert_eq!(
        lines[1], "3",
        "a header, the sandbox and the volume: {out:?}"
    );
    assert!(
        lines[2].starts_with("sandbox") && lines[2].ends_with(" /"),
        "{out:?}"
    );
    // 128 KiB: past the sandbox's own 64 KiB, within the volume's 256 KiB.
    let out = sh(
        &sandbox,
        "head -c 131072 /dev/zero > /vol/a && wc -c < /vol/a",
    )
    .await;
    assert_eq!(out.stdout, "131072\n", "{out:?}");
    let out = sh(&sandbox, "head -c 200000 /dev/zero > /vol/b").await;
    assert_ne!(out.exit_code, 0, "{out:?}");
    assert!(
        out.stderr.contains("No space left on device") || out.stderr.contains("volume `small`"),
        "{out:?}"
    );
    assert!(v.used().0 <= 256 << 10, "{:?}", v.used());
    let out = sh(
        &sandbox,
        "python3 -c \"open('/vol/c','wb').write(b'x'*300000)\"",
    )
    .await;
    assert_ne!(out.exit_code, 0, "{out:?}");
    assert!(v.used().0 <= 256 << 10, "{:?}", v.used());
    // Removing gives it back.
    let out = sh(
        &sandbox,
        "rm -f /vol/b /vol/c /vol/a; head -c 200000 /dev/zero > /vol/d",
    )
    .await;
    assert_eq!(out.exit_code, 0, "{out:?}");
    assert_eq!(v.used(), (200_000, 1));
    // The sandbox's own quota still holds for its workspace.
    let out = sh(&sandbox, "head -c 131072 /dev/zero > /workspace/big").await;
    assert_ne!(out.exit_code, 0, "{out:?}");
}

/// A volume attached inside the workspace: its mount point is a directory of the
/// workspace, paths to it lead into the volume however they are written, a snapshot of
/// the sandbox holds none of the volume's files, and a fork's copies have it attached too.
#[tokio::test]
async fn a_volume_inside_the_workspace_is_shared_not_copied() {
    let runtime = crate::support::runtime::runtime();
    let t = tempfile::tempdir().unwrap();
    let volumes = store(t.path());
    volumes.create("shared", None).unwrap();
    let v = volumes.open("shared").unwrap();
    let parent = runtime
        .sandbox(SandboxConfig::default().volume(mount(&v, "/workspace/vol", false)))
        .unwrap();
    let out = sh(
        &parent,
        "echo one > vol/one; mkdir sub; echo two > sub/../vol/two; echo own > mine; \
         ls; ls vol; ls /workspace/vol",
    )
    .await;
    assert_eq!(
        out.stdout, "mine\nsub\nvol\none\ntwo\none\ntwo\n",
        "{out:?}"
    );
    assert_eq!(v.used().1, 2);
    let snapshot = runtime.snapshot(&parent, Default::default()).unwrap();
    let restored = runtime.restore(&snapshot, None).unwrap();
    let out = sh(&restored, "ls vol | wc -l; cat mine").await;
    assert_eq!(
        out.stdout, "0\nown\n",
        "a snapshot copied the volume: {out:?}"
    );
    let children = runtime.fork(&parent, 2).unwrap();
    let out = sh(&children[0], "echo from-child > vol/three; cat vol/one").await;
    assert_eq!(out.stdout, "one\n", "{out:?}");
    let out = sh(&children[1], "cat vol/three").await;
    assert_eq!(out.stdout, "from-child\n", "{out:?}");
    let out = sh(&parent, "cat vol/three").await;
    assert_eq!(out.stdout, "from-child\n", "{out:?}");
    assert_eq!(volumes.info("shared").unwrap().attached, 3);
    drop(children);
    drop(restored);
    drop(parent);
    assert_eq!(volumes.info("shared").unwrap().attached, 0);
}

/// Mount paths that would lead out, hide the system's or the workspace's directories, or
/// overlap are refused, and no sandbox is made.
#[tokio::test]
async fn hostile_mount_paths_are_refused() {
    let runtime = crate::support::runtime::runtime();
    let t = tempfile::tempdir().unwrap();
    let volumes = store(t.path());
    volumes.create("v", None).unwrap();
    let v = volumes.open("v").unwrap();
    for path in [
        "data",
        "/",
        "/../etc",
        "/a/../../b",
        "/usr/bin",
        "/tmp",
        "/proc",
        "/dev/x",
        "/workspace",
    ] {
        let made = runtime.sandbox(SandboxConfig::default().volume(mount(&v, path, false)));
        assert!(made.is_err(), "{path:?} accepted");
    }
    let made = runtime.sandbox(
        SandboxConfig::default()
            .volume(mount(&v, "/a", false))
            .volume(mount(&v, "/a/b", false)),
    );
    assert!(made.is_err(), "nested mounts accepted");
    assert_eq!(volumes.info("v").unwrap().attached, 0);
}

// The front-ends, over HTTP and the command line, with the real binary.

use crate::snapshot::exec;
use crate::support::http::Server;
use serde_json::json;

fn session(s: &Server, id: &str, volumes: serde_json::Value) -> crate::support::http::Reply {
    s.post(
        "/v1/worker/sessions",
        &json!({"version": 1, "task_id": "t", "session_id": id, "image": "base",
                "sandbox": {"volumes": volumes}}),
    )
}

/// The worker API's volume routes: made, listed, attached to sessions and jobs (read-write
/// and read-only), kept over a restart of the node, refused for hostile names, paths and
/// sizes, full at their quota, and removed only when nothing has them attached.
#[test]
fn worker_api_volumes_outlive_sessions_and_the_node() {
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap().to_string();
    let mut s = Server::start(&["--state-dir", &state_dir]);

    let made = s.post(
        "/v1/worker/volumes",
        &json!({"version": 1, "name": "cache", "size_bytes": 1 << 20}),
    );
    assert_eq!(made.status, 201, "{}", made.text());
    let v = made.json();
    assert_eq!(
        (v["name"].as_str(), v["size_bytes"].as_u64()),
        (Some("cache"), Some(1 << 20))
    );
    assert!(v["volume_id"].as_str().unwrap().starts_with("vol-"), "{v}");
    for (body, status) in [
        (json!({"version": 1, "name": "cache"}), 409),
        (json!({"version": 1, "name": "../etc"}), 400),
        (json!({"version": 1, "name": "a/b"}), 400),
        (json!({"version": 1, "name": ".."}), 400),
        (
            json!({"version": 1, "name": "big", "size_bytes": 1u64 << 50}),
            400,
        ),
        (json!({"version": 1}), 400),
    ] {
        let r = s.post("/v1/worker/volumes", &body);
        assert_eq!(r.status, status, "{body}: {}", r.text());
        assert!(
            r.header("content-type")
                .unwrap_or_default()
                .contains("problem+json"),
            "{body}"
        );
    }
    assert_eq!(s.get("/v1/worker/volumes/nope").status, 404);

    // Hostile mounts and unknown volumes are the client's error; nothing is made.
    for (volumes, status) in [
        (json!([{"name": "cache", "path": "/../etc"}]), 400),
        (json!([{"name": "cache", "path": "/usr/bin"}]), 400),
        (json!([{"name": "cache", "path": "/workspace"}]), 400),
        (json!([{"name": "cache", "path": "relative"}]), 400),
        (json!([{"name": "nope", "path": "/data"}]), 400),
    ] {
        let r = session(&s, "bad", volumes.clone());
        assert_eq!(r.status, status, "{volumes}: {}", r.text());
    }
    assert_eq!(s.get("/v1/worker/sessions/bad").status, 404);

    let r = session(&s, "w", json!([{"name": "cache", "path": "/data"}]));
    assert_eq!(r.status, 200, "{}", r.text());
    let out = exec(
        &s,
        "w",
        "mkdir -p /data/pkgs && echo v1 > /data/pkgs/lock && ls -R /data",
    );
    assert_eq!(out["exit_code"], 0, "{out}");
    // Past its quota: the write fails in the job, the volume keeps what fit.
    let out = exec(&s, "w", "head -c 2000000 /dev/zero > /data/huge");
    assert_ne!(out["exit_code"], 0, "{out}");
    assert!(
        out["stderr"]
            .as_str()
            .unwrap()
            .contains("No space left on device")
            || out["stderr"].as_str().unwrap().contains("volume `cache`"),
        "{out}"
    );
    let out = exec(&s, "w", "rm -f /data/huge; cat /data/pkgs/lock");
    assert_eq!(out["stdout"], "v1\n", "{out}");
    let v = s.get("/v1/worker/volumes/cache").json();
    assert_eq!(
        (v["attached"].as_u64(), v["used_inodes"].as_u64()),
        (Some(1), Some(2)),
        "{v}"
    );
    assert_eq!(v["used_bytes"].as_u64(), Some(3), "{v}");
    // Attached: not removable.
    let r = s.call("DELETE", "/v1/worker/volumes/cache", b"");
    assert_eq!(r.status, 409, "{}", r.text());
    // A job attaches it read-only: it reads, and cannot write.
    let job = s.post(
        "/v1/worker/jobs:run",
        &json!({"version": 1, "task_id": "t", "job_id": "j1",
                "sandbox": {"image": "base", "command": ["sh", "-c", "cat /cache/pkgs/lock; touch /cache/x"],
                            "volumes": [{"name": "cache", "path": "/cache", "read_only": true}]}}),
    );
    assert_eq!(job.status, 200, "{}", job.text());
    let result = &job.json();
    assert_eq!(result["stdout"], "v1\n", "{result}");
    assert!(
        result["stderr"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{result}"
    );
    // A fork's copies have the volume; a restore of a snapshot attaches the volumes it names.
    let fork = s.post(
        "/v1/worker/sessions/w:fork",
        &json!({"version": 1, "count": 1}),
    );
    assert_eq!(fork.status, 200, "{}", fork.text());
    let child = fork.json()["session_ids"][0].as_str().unwrap().to_string();
    let out = exec(&s, &child, "cat /data/pkgs/lock");
    assert_eq!(out["stdout"], "v1\n", "{out}");
    let snap = s.post("/v1/worker/sessions/w:snapshot", &json!({"version": 1}));
    assert_eq!(snap.status, 200, "{}", snap.text());
    let snap_id = snap.json()["snapshot_id"].as_str().unwrap().to_string();
    let restored = s.post(
        "/v1/worker/sessions:restore",
        &json!({"version": 1, "snapshot_id": snap_id, "session_id": "back",
                "volumes": [{"name": "cache", "path": "/again", "read_only": true}]}),
    );
    assert_eq!(restored.status, 200, "{}", restored.text());
    let out = exec(
        &s,
        "back",
        "cat /again/pkgs/lock; test -e /data/pkgs || echo not at /data",
    );
    assert_eq!(out["stdout"], "v1\nnot at /data\n", "{out}");
    let bad = s.post(
        "/v1/worker/sessions:restore",
        &json!({"version": 1, "snapshot_id": snap_id, "session_id": "bad2",
                "volumes": [{"name": "cache", "path": "/etc"}]}),
    );
    assert_eq!(bad.status, 400, "{}", bad.text());
    // So does a restore from an uploaded tar (`volumes=NAME:PATH[:ro],...` in the query).
    let tar = s.post("/v1/worker/sessions/w:snapshot?download=1", &json!({}));
    assert_eq!(tar.status, 200, "{}", tar.text());
    let upload = |query: &str| {
        s.post_bytes(
            &format!("/v1/worker/sessions:restore?{query}"),
            "application/x-tar",
            &tar.body,
        )
    };
    let up = upload("session_id=up&volumes=cache:/vol/c:ro,cache:/workspace/rw");
    assert_eq!(up.status, 200, "{}", up.text());
    let out = exec(
        &s,
        "up",
        "cat /vol/c/pkgs/lock rw/pkgs/lock; touch /vol/c/x 2>/dev/null || echo ro; touch rw/y && echo rw",
    );
    assert_eq!(out["stdout"], "v1\nv1\nro\nrw\n", "{out}");
    for query in [
        "session_id=up2&volumes=cache",
        "session_id=up2&volumes=../x:/d",
        "session_id=up2&volumes=cache:/etc",
        "session_id=up2&volumes=nope:/d",
    ] {
        let r = upload(query);
        assert_eq!(r.status, 400, "{query}: {}", r.text());
        assert_eq!(s.get("/v1/worker/sessions/up2").status, 404, "{query}");
    }
    for id in ["w", &child, "back", "up"] {
        let r = s.post(
            &format!("/v1/worker/sessions/{id}/end"),
            &json!({"version": 1}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }

    // The node restarts: the volume and its files are still there.
    s.terminate();
    drop(s);
    let s = Server::start(&["--state-dir", &state_dir]);
    let list = s.get("/v1/worker/volumes").json();
    assert_eq!(list["volumes"][0]["name"], "cache", "{list}");
    assert_eq!(list["volumes"][0]["used_bytes"], 3, "{list}");
    let r = session(
        &s,
        "r",
        json!([{"name": "cache", "path": "/workspace/cache"}]),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let out = exec(&s, "r", "cat cache/pkgs/lock; ls");
    assert_eq!(out["stdout"], "v1\ncache\n", "{out}");
    let r = s.post("/v1/worker/sessions/r/end", &json!({"version": 1}));
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.call("DELETE", "/v1/worker/volumes/cache", b"");
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(s.get("/v1/worker/volumes/cache").status, 404);
    assert_eq!(s.get("/v1/worker/volumes").json()["volumes"], json!([]));
}

/// `wasbox run --volume NAME:PATH[:ro]` and `wasbox volume create|ls|rm`.
#[test]
fn the_command_line_runs_with_volumes() {
    use crate::support::runtime::{text, wasbox};
    let state = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = wasbox()
            .arg("run")
            .arg("--state-dir")
            .arg(state.path())
            .args(args)
            .output()
            .unwrap();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let volume = |args: &[&str]| {
        let out = wasbox()
            .arg("volume")
            .arg("--state-dir")
            .arg(state.path())
            .args(args)
            .output()
            .unwrap();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    // Made on first use, as `docker run -v` does.
    let (code, _, err) = run(&[
        "--volume",
        "notes:/notes",
        "--",
        "sh",
        "-c",
        "echo kept > /notes/a",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = run(&[
        "--volume",
        "notes:/mnt/n:ro",
        "--",
        "sh",
        "-c",
        "cat /mnt/n/a; rm /mnt/n/a",
    ]);
    assert_eq!((code, out.as_str()), (Some(1), "kept\n"), "{err}");
    assert!(err.contains("Read-only file system"), "{err}");
    let (code, out, _) = volume(&["ls"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("notes\t1073741824\t5\t1\tvol-"), "{out}");
    let (code, _, err) = volume(&["create", "small", "--size", "4K"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run(&[
        "--volume",
        "small:/s",
        "--",
        "sh",
        "-c",
        "head -c 8192 /dev/zero > /s/f",
    ]);
    assert_ne!(code, Some(0), "{err}");
    for bad in ["../x:/d", "notes", "notes:/etc", "notes:/d:rx"] {
        let (code, _, err) = run(&["--volume", bad, "--", "true"]);
        assert_ne!(code, Some(0), "{bad} accepted");
        assert!(!err.is_empty(), "{bad}: no message");
    }
    let (code, _, err) = volume(&["create", "../x"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("volume name"), "{err}");
    let (code, _, _) = volume(&["rm", "notes"]);
    assert_eq!(code, Some(0));
    let (code, _, err) = volume(&["rm", "notes"]);
    assert_eq!(code, Some(1), "{err}");
}

/// E2B's volume content API against hostile requests: no token or another's, paths that
/// climb out or name the volume itself, a symlink a sandbox planted to lead out, an upload
/// past the quota (507, the old file intact), and the control plane without its key.
#[test]
fn e2b_volume_content_refuses_hostile_requests() {
    use crate::e2b::control;
    use crate::support::http::request;
    let s = Server::start(&[]);
    let r = request(
        s.addr,
        "POST",
        "/volumes",
        &[("Content-Type", "application/json")],
        br#"{"name":"x"}"#,
    );
    assert_eq!(r.status, 401, "{}", r.text());
    // A small volume (the worker API takes a size), seen by E2B's API by its id.
    let made = s.post(
        "/v1/worker/volumes",
        &json!({"version": 1, "name": "small", "size_bytes": 4096}),
    );
    assert_eq!(made.status, 201, "{}", made.text());
    let id = made.json()["volume_id"].as_str().unwrap().to_string();
    let info = control(&s, "GET", &format!("/volumes/{id}"), &json!({}));
    assert_eq!(info.status, 200, "{}", info.text());
    let token = info.json()["token"].as_str().unwrap().to_string();
    let bearer = format!("Bearer {token}");
    let content = |method: &str, what: &str, path: &str, body: &[u8], auth: &str| {
        let path = path.replace('/', "%2F");
        request(
            s.addr,
            method,
            &format!("/volumecontent/{id}/{what}?path={path}"),
            &[("Authorization", auth)],
            body,
        )
    };
    let r = content("PUT", "file", "/keep.txt", b"old", &bearer);
    assert_eq!(r.status, 201, "{}", r.text());
    for auth in [
        "",
        "Bearer nope",
        &format!("Bearer {}", crate::support::http::TOKEN),
    ] {
        let r = content("GET", "file", "/keep.txt", b"", auth);
        assert_eq!(r.status, 401, "{auth:?}: {}", r.text());
    }
    let r = request(
        s.addr,
        "GET",
        "/volumecontent/vol-0000000000000000/file?path=keep.txt",
        &[("Authorization", &bearer)],
        b"",
    );
    assert_eq!(r.status, 401, "another volume's id: {}", r.text());
    for (method, what, path, status) in [
        ("GET", "file", "/../../etc/passwd", 400),
        ("PUT", "file", "../x", 400),
        ("PUT", "file", "/", 400),
        ("DELETE", "path", "/", 400),
        ("POST", "dir", "/a/../../b", 400),
        ("GET", "path", "/nope", 404),
    ] {
        let r = content(method, what, path, b"x", &bearer);
        assert_eq!(r.status, status, "{method} {what} {path}: {}", r.text());
        assert!(r.json()["message"].is_string(), "{}", r.text());
    }
    // Past the quota: refused, nothing half-written, the old file as it was.
    let r = content("PUT", "file", "/keep.txt", &[b'x'; 8192], &bearer);
    assert_eq!(r.status, 507, "{}", r.text());
    assert_eq!(
        content("GET", "file", "/keep.txt", b"", &bearer).text(),
        "old"
    );
    let listing = content("GET", "dir", "/", b"", &bearer).json();
    assert_eq!(listing.as_array().map(Vec::len), Some(1), "{listing}");
    // A symlink planted by a sandbox leads nowhere outside the volume.
    let sbx = control(
        &s,
        "POST",
        "/sandboxes",
        &json!({"templateID": "base", "volumeMounts": [{"name": "small", "path": "/mnt/v"}]}),
    );
    assert_eq!(sbx.status, 201, "{}", sbx.text());
    let sbx_id = sbx.json()["sandboxID"].as_str().unwrap().to_string();
    let sbx_token = sbx.json()["envdAccessToken"].as_str().unwrap().to_string();
    let out = crate::e2b::run_command(
        &s,
        &crate::e2b::Sbx {
            id: sbx_id.clone(),
            token: sbx_token,
        },
        "ln -s / /mnt/v/root; ln -s ../../../../etc /mnt/v/etc; ls /mnt; cat /mnt/v/keep.txt",
    );
    assert_eq!(out, "v\nold", "{out}");
    for path in ["/root/etc/passwd", "/etc/passwd"] {
        let r = content("GET", "file", path, b"", &bearer);
        assert!(
            matches!(r.status, 403 | 404),
            "{path}: {} {}",
            r.status,
            r.text()
        );
        assert!(!r.text().contains("root:"), "{path} read the host's file");
    }
    let r = content("GET", "dir", "/root", b"", &bearer);
    assert!(
        matches!(r.status, 400 | 403 | 404),
        "{} {}",
        r.status,
        r.text()
    );
    let r = control(&s, "DELETE", &format!("/volumes/{id}"), &json!({}));
    assert_eq!(r.status, 409, "attached: {}", r.text());
    let r = control(&s, "DELETE", &format!("/sandboxes/{sbx_id}"), &json!({}));
    assert_eq!(r.status, 204, "{}", r.text());
    let r = control(&s, "DELETE", &format!("/volumes/{id}"), &json!({}));
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(
        control(&s, "GET", &format!("/volumes/{id}"), &json!({})).status,
        404
    );
}
