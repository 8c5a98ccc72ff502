//! Nothing inside a sandbox reaches a host file outside its workspace: each attempt fails
//! with an ordinary shell error and the host is unharmed.

use crate::support::runtime::sh_in;

struct Fixture {
    _root: tempfile::TempDir,
    workspace: std::path::PathBuf,
    secret: std::path::PathBuf,
}

/// A workspace with a secret file beside it (outside) and a host symlink inside pointing
/// at that secret.
fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let secret = root.path().join("secret.txt");
    std::fs::write(&secret, "top secret\n").unwrap();
    std::os::unix::fs::symlink(&secret, workspace.join("hostlink")).unwrap();
    Fixture {
        _root: root,
        workspace,
        secret,
    }
}

async fn attempt(script: &str) {
    let f = fixture();
    let out = sh_in(&f.workspace, script).await;
    assert_ne!(out.exit_code, 0, "{script}: should fail\n{out:?}");
    assert!(
        !out.stdout.contains("top secret"),
        "{script}: leaked {out:?}"
    );
    assert!(!out.stdout.contains("root:"), "{script}: leaked {out:?}");
    assert!(
        out.stderr.starts_with("sh: ") || out.stderr.contains(": "),
        "{script}: expected a shell error, got {out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&f.secret).unwrap(),
        "top secret\n",
        "{script}"
    );
    assert_eq!(
        std::fs::read_dir(f.secret.parent().unwrap())
            .unwrap()
            .count(),
        2,
        "{script}: something was created outside the workspace"
    );
}

#[tokio::test]
async fn reading_etc_passwd_fails() {
    attempt("cat /etc/passwd").await;
}

#[tokio::test]
async fn dot_dot_out_of_the_workspace_fails() {
    attempt("cat ../secret.txt").await;
    attempt("cat /workspace/../secret.txt").await;
    attempt("echo pwned > ../secret.txt").await;
    attempt("echo pwned > ../new.txt").await;
}

#[tokio::test]
async fn host_symlink_pointing_out_fails() {
    attempt("cat hostlink").await;
    attempt("cat < hostlink").await;
    attempt("echo pwned > hostlink").await;
}

#[tokio::test]
async fn guest_made_symlink_pointing_out_fails() {
    attempt("ln -s ../secret.txt mine && cat mine").await;
    attempt("ln -s /etc/passwd mine && cat mine").await;
}

#[tokio::test]
async fn absolute_paths_outside_fail() {
    attempt("echo pwned > /var/wasbox-pwned").await;
    attempt("mkdir /etc/wasbox-pwned").await;
    attempt("cat /tmp/../etc/passwd").await;
    attempt("echo pwned > /tmp/../wasbox-pwned").await;
    assert!(!std::path::Path::new("/var/wasbox-pwned").exists());
}

/// `/tmp` inside a sandbox is its own: kept across its jobs, invisible to other sandboxes
/// and to the host's `/tmp`, and gone with the sandbox.
#[tokio::test]
async fn tmp_is_private_to_the_sandbox() {
    use wasbox_runtime::{JobSpec, SandboxConfig};
    let rt = crate::support::runtime::runtime();
    let name = format!("wasbox-private-{}", std::process::id());
    let a = rt.sandbox(SandboxConfig::default()).unwrap();
    let b = rt.sandbox(SandboxConfig::default()).unwrap();
    let out = a
        .run(JobSpec::shell(format!(
            "echo mine > /tmp/{name}; d=$(mktemp -d); echo x > $d/f; cat /tmp/{name} $d/f"
        )))
        .await
        .unwrap();
    assert_eq!(
        (out.exit_code, out.stdout.as_str()),
        (0, "mine\nx\n"),
        "{out:?}"
    );
    let out = a
        .run(JobSpec::shell(format!("cat /tmp/{name}")))
        .await
        .unwrap();
    assert_eq!(
        out.stdout, "mine\n",
        "a later job of the same sandbox sees it"
    );
    let out = b
        .run(JobSpec::shell(format!("cat /tmp/{name}")))
        .await
        .unwrap();
    assert_eq!(out.exit_code, 1, "another sandbox does not: {out:?}");
    assert!(!std::path::Path::new("/tmp").join(&name).exists());
    // Fresh sandboxes live side by side in the runtime's scratch directory.
    let scratch = a.workspace().parent().unwrap().to_path_buf();
    let host_dirs = || {
        std::fs::read_dir(&scratch)
            .unwrap()
            .flatten()
            .filter(|e| e.path().join(&name).exists())
            .count()
    };
    assert_eq!(
        host_dirs(),
        1,
        "the sandbox's /tmp is a host directory of its own"
    );
    drop(a);
    assert_eq!(host_dirs(), 0, "and it goes with the sandbox");
}

#[tokio::test]
async fn cd_to_root_then_listing_fails() {
    attempt("cd / && ls").await;
    attempt("ls /").await;
    attempt("ls /workspace/..").await;
}

#[tokio::test]
async fn the_workspace_itself_works() {
    let f = fixture();
    let out = sh_in(
        &f.workspace,
        "echo ok > a && mkdir -p /workspace/d/e && cat /workspace/a && ls",
    )
    .await;
    assert_eq!(out.exit_code, 0, "{out:?}");
    assert_eq!(out.stdout, "ok\na\nd\nhostlink\n");
}

/// What the host sees of a file's mode.
fn host_mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[tokio::test]
async fn a_guest_never_makes_setuid_files() {
    let f = fixture();
    let out = sh_in(
        &f.workspace,
        "echo x > f; chmod 4755 f; stat -c %a f; chmod 6777 f; stat -c %a f; chmod u+s,g+s f; \
         stat -c %a f; mkdir d; chmod 3777 d; stat -c %a d; chmod 1755 d; stat -c %a d",
    )
    .await;
    assert_eq!(out.stdout, "755\n777\n777\n1777\n1755\n", "{out:?}");
    assert_eq!(host_mode(&f.workspace.join("f")), 0o777);
    assert_eq!(host_mode(&f.workspace.join("d")), 0o1755);
}

#[tokio::test]
async fn the_mount_points_keep_the_operators_modes() {
    let f = fixture();
    let before = host_mode(&f.workspace);
    let out = sh_in(
        &f.workspace,
        "chmod 777 /workspace; echo $?; chmod 0 .; echo $?; ln -s . self; chmod 777 self; \
         echo $?; ln -s /workspace abs; chmod 4777 abs; echo $?; chmod 777 /tmp; echo $?; \
         mkdir sub; chmod 0 sub; echo $?",
    )
    .await;
    assert_eq!(out.stdout, "1\n1\n1\n1\n1\n0\n", "{out:?}");
    assert!(out.stderr.contains("Operation not permitted"), "{out:?}");
    assert_eq!(host_mode(&f.workspace), before);
}
