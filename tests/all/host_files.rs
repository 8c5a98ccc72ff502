//! The runtime's host file operations and watches on a sandbox's tree (what E2B's envd API
//! and other front-ends use): every path stays inside the sandbox, the disk quota is charged
//! and credited, and a watch sees what any writer did, however briefly a file lived.

use std::time::Duration;

use wasbox_runtime::{ChangeKind, FileError, FileKind, JobSpec, Limits, Watch};

use crate::support::runtime::sandbox_with;

async fn changes(
    w: &mut Watch,
    until: impl Fn(&[(String, ChangeKind)]) -> bool,
) -> Vec<(String, ChangeKind)> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !until(&seen) {
        match tokio::time::timeout_at(deadline, w.recv()).await {
            Ok(Some(c)) => seen.push((c.name, c.kind)),
            _ => break,
        }
    }
    seen
}

#[tokio::test]
async fn watches_see_short_lived_files_and_new_directories() {
    let sb = sandbox_with(Limits::default());
    sb.make_dir("w").unwrap();
    let mut w = sb.watch("/workspace/w", true).unwrap();
    // A guest makes, writes and removes a file in one breath, and makes a directory.
    let out = sb
        .run(JobSpec::shell(
            "cd w && echo a > f && echo b >> f && rm f && mkdir d && sleep 0.2 && echo x > d/g",
        ))
        .await
        .unwrap();
    assert_eq!(out.exit_code, 0, "{}", out.stderr);
    let seen = changes(&mut w, |s| s.iter().any(|(n, _)| n == "d/g")).await;
    let has = |name: &str, kind| seen.iter().any(|(n, k)| n == name && *k == kind);
    assert!(has("f", ChangeKind::Create), "{seen:?}");
    assert!(has("f", ChangeKind::Write), "{seen:?}");
    assert!(has("f", ChangeKind::Remove), "{seen:?}");
    assert!(has("d", ChangeKind::Create), "{seen:?}");
    assert!(
        has("d/g", ChangeKind::Create),
        "a file in a new directory: {seen:?}"
    );
    // The host's own operations are seen too; a rename is its old name's event.
    sb.write_file("/workspace/w/h", b"1").unwrap();
    sb.rename("/workspace/w/h", "/workspace/w/i").unwrap();
    let seen = changes(&mut w, |s| s.iter().any(|(n, _)| n == "i")).await;
    assert!(seen.contains(&("h".into(), ChangeKind::Rename)), "{seen:?}");
    assert!(seen.contains(&("i".into(), ChangeKind::Create)), "{seen:?}");
    // Removing the watched directory ends the watch.
    sb.remove("/workspace/w").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !w.is_gone() {
        assert!(
            std::time::Instant::now() < deadline,
            "the watch did not see its end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn host_operations_stay_inside_and_keep_the_quota() {
    let sb = sandbox_with(Limits::default().disk_bytes(64 << 10));
    let (start, _) = sb.disk_in_use();
    // A guest writes, the host removes: the bytes come back.
    sb.run(JobSpec::shell(
        "mkdir -p t/u && head -c 40000 /dev/zero > t/u/big || yes | head -c 40000 > t/u/big",
    ))
    .await
    .unwrap();
    assert!(sb.disk_in_use().0 >= start + 40_000);
    let info = sb.stat("t/u/big").unwrap();
    assert_eq!(
        (info.kind, info.size, info.path.as_str()),
        (FileKind::File, 40_000, "/workspace/t/u/big")
    );
    let list = sb.list_dir("/workspace/t", 2).unwrap();
    let paths: Vec<&str> = list.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(paths, ["/workspace/t/u", "/workspace/t/u/big"]);
    assert_eq!(sb.list_dir("/workspace/t", 1).unwrap().len(), 1);
    sb.remove("/workspace/t").unwrap();
    assert_eq!(sb.disk_in_use().0, start, "removing gives the bytes back");
    // Past the quota: the host's write fails as the guest's would.
    assert!(matches!(
        sb.write_file("x", &vec![0; 70 << 10]),
        Err(FileError::NoSpace(_))
    ));
    // Directories: made once, then they exist.
    assert!(sb.make_dir("a/b").unwrap());
    assert!(!sb.make_dir("a/b").unwrap());
    assert!(matches!(
        sb.make_dir("/etc/x"),
        Err(FileError::OutsideWorkspace(_))
    ));
    // The mount point and /tmp stay; nothing outside is reached, through `..` or a link.
    assert!(sb.remove("/workspace").is_err());
    assert!(sb.remove("/tmp").is_err());
    assert!(matches!(
        sb.stat("/workspace/../etc/passwd"),
        Err(FileError::OutsideWorkspace(_))
    ));
    sb.run(JobSpec::shell("ln -s ../../../../etc out"))
        .await
        .unwrap();
    let link = sb.stat("out").unwrap();
    assert!(link.is_symlink);
    assert_eq!(
        link.kind,
        FileKind::Symlink,
        "a link out of the sandbox leads nowhere"
    );
    assert!(sb.list_dir("out", 1).is_err());
    assert!(sb.watch("out", false).is_err());
    assert!(sb.read_file("out/passwd", 1 << 20).is_err());
    assert!(sb.open_read("out/passwd").is_err());
    // /tmp is the sandbox's own, and a move between it and the workspace works.
    sb.write_file("/tmp/t.txt", b"tmp").unwrap();
    let moved = sb.rename("/tmp/t.txt", "/workspace/a/t.txt").unwrap();
    assert_eq!(moved.path, "/workspace/a/t.txt");
    assert_eq!(sb.read_file("a/t.txt", 10).unwrap(), b"tmp");
}
