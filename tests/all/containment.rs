//! Nothing inside a sandbox reaches a host file outside its workspace: each attempt fails
//! with an ordinary shell error and the host is unharmed. Around the workspace and `/tmp` a
//! sandbox sees its own read-only root (`/etc`, `/usr/bin`, `/dev`), never the host's.

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
    for line in host_only_passwd_lines() {
        assert!(!out.stdout.contains(&line), "{script}: leaked {out:?}");
    }
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

/// Lines of the host's `/etc/passwd` that the sandbox's own does not have.
fn host_only_passwd_lines() -> Vec<String> {
    let host = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    host.lines()
        .filter(|l| !SANDBOX_PASSWD.contains(*l))
        .map(str::to_string)
        .collect()
}

const SANDBOX_PASSWD: &str =
    "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n";

#[tokio::test]
async fn etc_passwd_is_the_sandboxs_own() {
    let f = fixture();
    for script in [
        "cat /etc/passwd",
        "cat /tmp/../etc/passwd",
        "cd ../.. && cat etc/passwd",
        "cat < /etc/passwd",
    ] {
        let out = sh_in(&f.workspace, script).await;
        assert_eq!(
            (out.exit_code, out.stdout.as_str()),
            (0, SANDBOX_PASSWD),
            "{script}: {out:?}"
        );
    }
    assert!(
        !host_only_passwd_lines().is_empty(),
        "the host has users the sandbox does not"
    );
}

/// `/`, `/etc`, `/usr/bin` and `/dev` can be read and listed, never changed; the host tree
/// behind them stays as the runtime made it.
#[tokio::test]
async fn the_root_is_read_only() {
    let f = fixture();
    let out = sh_in(
        &f.workspace,
        "ls /; cd /usr/bin && ls | grep -cx -e sh -e ls -e python3",
    )
    .await;
    assert_eq!(
        out.stdout, "bin\ndev\netc\nhome\nproc\nroot\nsys\ntmp\nusr\nworkspace\n3\n",
        "{out:?}"
    );
    for script in [
        "echo x > /etc/passwd",
        "echo x >> /etc/hosts",
        "touch /x",
        "mkdir /usr/local/bin/d",
        "rm -f /etc/passwd",
        "rm -rf /usr",
        "mv /etc/hostname /etc/h",
        "ln -s /workspace /usr/bin/w",
        "chmod 777 /etc/passwd",
        "echo x > /dev/sda",
        "cat /dev/sda",
        "cat /dev/mem",
        "cat /dev/../etc/../../proc/self/environ",
        "python3 -c \"open('/etc/passwd', 'a').write('x')\"",
        "node -e \"require('fs').writeFileSync('/etc/x', 'x')\"",
    ] {
        let out = sh_in(&f.workspace, script).await;
        assert_ne!(out.exit_code, 0, "{script}: {out:?}");
    }
    let out = sh_in(
        &f.workspace,
        "cat /etc/passwd; ls /usr/bin | wc -l; ls /dev | tr '\\n' ' '; echo; ls -l /dev | cut -c1 | sort -u",
    )
    .await;
    assert!(out.stdout.starts_with(SANDBOX_PASSWD), "{out:?}");
    // The five devices and the process's three streams, listed as character devices.
    assert!(
        out.stdout
            .contains("\nfull null random stderr stdin stdout urandom zero \n"),
        "{out:?}"
    );
    assert!(out.stdout.ends_with("\nc\nt\n"), "{out:?}");
    assert!(!out.stdout.contains("sda"), "{out:?}");
}

/// The five devices of `/dev` are the host's, opened for the guest; nothing written to
/// them counts against the disk quota.
#[tokio::test]
async fn dev_null_zero_and_urandom_work() {
    let f = fixture();
    let out = sh_in(
        &f.workspace,
        "cat /dev/null; wc -c < /dev/null; head -c 5 /dev/zero | od -An -tx1; \
         head -c 32 /dev/urandom | wc -c; test -c /dev/null && echo char; \
         echo gone > /dev/null; echo full > /dev/full; echo $?; \
         python3 -c \"import os; print(len(open('/dev/urandom','rb').read(16)), os.path.exists(os.devnull))\"; \
         dd if=/dev/zero of=/dev/null bs=1M count=64 status=none; echo $?; \
         yes | head -c 10000000 > /dev/null; echo $?",
    )
    .await;
    assert_eq!(
        out.stdout, "0\n 00 00 00 00 00\n32\nchar\n1\n16 True\n0\n0\n",
        "{out:?}"
    );
}

/// `/proc` and `/sys` hold the sandbox's own machine facts (boot id, uptime, memory, one
/// CPU), never the host's, read-only; anything else of them does not exist.
#[tokio::test]
async fn proc_files_tell_the_sandbox_not_the_host() {
    let f = fixture();
    let out = sh_in(
        &f.workspace,
        "a=$(cat /proc/sys/kernel/random/boot_id); b=$(cat /proc/sys/kernel/random/boot_id); \
         test \"$a\" = \"$b\" && echo same-boot; \
         test \"$(cat /proc/sys/kernel/random/uuid)\" != \"$(cat /proc/sys/kernel/random/uuid)\" && echo new-uuid; \
         grep -c processor /proc/cpuinfo; grep -q WebAssembly /proc/cpuinfo && echo wasm-cpu; \
         awk '{print ($1 < 60)}' /proc/uptime; head -1 /proc/meminfo; cat /sys/fs/cgroup/memory.max; \
         test -f /proc/uptime && echo regular; ls /proc | head -3; \
         echo x > /proc/uptime; echo \"write=$?\"; cat /proc/self/status; echo \"self=$?\"; \
         python3 -c \"print(open('/proc/sys/kernel/random/boot_id').read().strip() == '$a')\"",
    )
    .await;
    let memory = 1024 * 1024; // the sandbox's default budget, in kB
    assert_eq!(
        out.stdout,
        format!(
            "same-boot\nnew-uuid\n1\nwasm-cpu\n1\nMemTotal:        {memory} kB\n{}\nregular\n\
             cpuinfo\nloadavg\nmeminfo\nwrite=1\nself=1\nTrue\n",
            memory * 1024
        ),
        "{out:?}"
    );
    let host_boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    assert!(host_boot.is_empty() || !out.stdout.contains(host_boot.trim()));
}

/// `/dev/stdin`, `/dev/stdout` and `/dev/stderr` are the opening process's own streams:
/// what is written there is its output (a pipe here), never a host file, and takes no
/// quota; stdin cannot be written.
#[tokio::test]
async fn dev_std_streams_are_the_process_own() {
    let f = fixture();
    let out = sh_in(
        &f.workspace,
        "echo in | cat /dev/stdin; echo out > /dev/stdout; \
         python3 -c \"open('/dev/stderr', 'w').write('err\\n')\"; \
         a=$(df -k . | awk 'NR==2{print $3}'); \
         dd if=/dev/zero of=/dev/stdout bs=1M count=8 status=none | wc -c; \
         b=$(df -k . | awk 'NR==2{print $3}'); [ \"$a\" = \"$b\" ] && echo no-quota; \
         python3 -c \"open('/dev/stdin', 'w')\" 2>/dev/null; echo $?",
    )
    .await;
    assert_eq!(out.stdout, "in\nout\n8388608\nno-quota\n1\n", "{out:?}");
    assert_eq!(out.stderr, "err\n", "{out:?}");
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
    attempt("ln -s ../../../../../../etc/passwd mine && cat mine").await;
    attempt("ln -s /workspace/../secret.txt mine && cat mine").await;
    attempt("ln -s /workspace/../../../../etc/passwd mine && cat mine").await;
    attempt("python3 -c \"import os; os.symlink('/workspace/../secret.txt', 'm'); open('m')\"")
        .await;
}

/// An absolute target reads back as it was written (the host keeps it relative to the link,
/// see the runtime's `linktarget`), and one that names a path of the host, even the real
/// path of a file beside the workspace, still reaches nothing there.
#[tokio::test]
async fn absolute_symlink_targets_read_back_but_never_reach_out() {
    let f = fixture();
    let secret = f.secret.display().to_string();
    let out = sh_in(
        &f.workspace,
        &format!(
            "ln -s {secret} mine; readlink mine; cat mine; echo rc=$?; \
             mkdir -p d; echo in > d/f; ln -s /workspace/d/f d/abs; readlink d/abs; cat d/abs"
        ),
    )
    .await;
    assert_eq!(
        out.stdout,
        format!("{secret}\nrc=1\n/workspace/d/f\nin\n"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("top secret"), "{out:?}");
    let on_disk = std::fs::read_link(f.workspace.join("mine")).unwrap();
    assert!(on_disk.is_relative(), "stored as {on_disk:?}");
    assert_eq!(std::fs::read_to_string(&f.secret).unwrap(), "top secret\n");
}

#[tokio::test]
async fn absolute_paths_outside_fail() {
    attempt("echo pwned > /var/wasbox-pwned").await;
    attempt("mkdir /etc/wasbox-pwned").await;
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
async fn the_parent_of_the_workspace_is_the_sandboxs_root() {
    let f = fixture();
    for script in ["cd / && ls", "ls /", "ls /workspace/..", "cd ../.. && ls"] {
        let out = sh_in(&f.workspace, script).await;
        assert_eq!(
            out.stdout, "bin\ndev\netc\nhome\nproc\nroot\nsys\ntmp\nusr\nworkspace\n",
            "{script}: {out:?}"
        );
    }
    attempt("cd / && cat ../secret.txt").await;
    attempt("cd / && cat ../../secret.txt").await;
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

/// An ended sandbox's emptied workspace directory is kept for the next sandbox (on a tmpfs,
/// where one `fstat` shows it is empty): the next one finds nothing of it, not even its
/// times. A workspace left with files in it is removed, never handed on.
#[tokio::test]
async fn an_ended_sandbox_leaves_nothing_to_the_next() {
    use wasbox_runtime::{JobSpec, Runtime, SandboxConfig};
    let shm = std::path::Path::new("/dev/shm");
    let tmpfs = std::process::Command::new("stat")
        .args(["-f", "-c", "%T", "/dev/shm"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "tmpfs");
    let base = if tmpfs {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let root = tempfile::tempdir_in(base).unwrap();
    let runtime = Runtime::builder().temp_dir(root.path()).build().unwrap();
    let ls = "ls -A; echo end";

    // Wrote, then removed everything: its directory goes to the next sandbox, empty.
    let a = runtime.sandbox(SandboxConfig::default()).unwrap();
    let a_dir = a.workspace().to_path_buf();
    let out = a
        .run(JobSpec::shell(
            "mkdir d && echo x > d/f && rm -r d && echo done",
        ))
        .await
        .unwrap();
    assert_eq!(out.stdout, "done\n", "{out:?}");
    let a_changed = std::fs::metadata(&a_dir).unwrap().modified().unwrap();
    drop(a);
    // Past a tick of the kernel's coarse clock, which stamps file times.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let b = runtime.sandbox(SandboxConfig::default()).unwrap();
    let out = b.run(JobSpec::shell(ls)).await.unwrap();
    assert_eq!(out.stdout, "end\n", "{out:?}");
    let times = std::fs::metadata(b.workspace()).unwrap();
    if tmpfs {
        assert_eq!(
            b.workspace(),
            a_dir,
            "an empty workspace is reused on a tmpfs"
        );
        assert!(times.modified().unwrap() > a_changed, "{times:?}");
    }
    drop(b);

    // Left a file: removed with its sandbox; the next sandbox gets another directory.
    let c = runtime.sandbox(SandboxConfig::default()).unwrap();
    let c_dir = c.workspace().to_path_buf();
    c.run(JobSpec::shell("echo secret > kept")).await.unwrap();
    drop(c);
    assert!(!c_dir.exists(), "{c_dir:?} was not removed");
    let d = runtime.sandbox(SandboxConfig::default()).unwrap();
    assert_ne!(d.workspace(), c_dir);
    let out = d.run(JobSpec::shell(ls)).await.unwrap();
    assert_eq!(out.stdout, "end\n", "{out:?}");
    drop(d);

    // The runtime takes its spares with it.
    drop(runtime);
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}
