//! Snapshot, restore and fork of a sandbox holding 1,000 files / 50 MiB, in process, beside
//! the baseline of copying the same workspace natively (`cp -a`, what a sandbox without
//! copy-on-write must do per copy).
//!
//! `cargo bench -p wasbox-benches --bench snapshot` prints medians over ROUNDS runs:
//! - `fork x100`: `Runtime::fork(sandbox, 100)`, then the 100 copies are dropped (not timed);
//! - `snapshot`: `Runtime::snapshot` (the frozen, linked tree);
//! - `snapshot + tar`: the same and the portable tar written to a file beside it;
//! - `restore`: a new sandbox from the frozen snapshot; `restore from tar`: from the tar;
//! - `cp -a x1` and `cp -a x100`: the native copy of the workspace, once and 100 times.
//!
//! Then the memory the 100 forks take (tmpfs pages and kernel slab), against the workspace's
//! size. Everything is bounded; nothing leaves the machine.

use std::process::Command;
use std::time::{Duration, Instant};

use wasbox_benches::percentile;
use wasbox_runtime::{Runtime, SandboxConfig, TarLimits};

const FILES: usize = 1000;
const FILE_BYTES: usize = 50 * 1024 * 1024 / FILES;
const ROUNDS: usize = 15;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    percentile(&v, 0.5)
}

fn time(rounds: usize, mut f: impl FnMut() -> Duration) -> Duration {
    median((0..rounds).map(|_| f()).collect())
}

/// Bytes in use on the file system holding `path`.
fn used(path: &std::path::Path) -> u64 {
    let out = Command::new("df")
        .args(["-B1", "--output=used"])
        .arg(path)
        .output()
        .expect("df");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0)
}

/// Shared memory (tmpfs pages) and kernel slab (inodes, directory entries) in bytes, from
/// /proc/meminfo.
fn meminfo() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (field("Shmem:"), field("Slab:"))
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let rt = Runtime::new().expect("runtime");
    let sandbox = rt
        .sandbox(SandboxConfig::default().env("BENCH", "1"))
        .expect("sandbox");
    let data: Vec<u8> = (0..FILE_BYTES).map(|i| (i % 251) as u8).collect();
    for i in 0..FILES {
        sandbox
            .write_file(&format!("d{}/f{i}", i % 20), &data)
            .expect("write");
    }
    let ws = sandbox.workspace().to_path_buf();
    let scratch = ws.parent().unwrap().to_path_buf();

    let fork = time(ROUNDS, || {
        let t = Instant::now();
        let forks = rt.fork(&sandbox, 100).expect("fork");
        let d = t.elapsed();
        drop(forks);
        d
    });
    // A fork's directories are filled when first reached: the cost of using the copies.
    let fork_read = time(ROUNDS, || {
        let t = Instant::now();
        let forks = rt.fork(&sandbox, 100).expect("fork");
        for f in &forks {
            f.read_file("d7/f7", FILE_BYTES as u64).expect("read");
        }
        let d = t.elapsed();
        drop(forks);
        d
    });
    let fork_whole = time(ROUNDS, || {
        let t = Instant::now();
        let forks = rt.fork(&sandbox, 100).expect("fork");
        for f in &forks {
            let _ = f.workspace();
        }
        let d = t.elapsed();
        drop(forks);
        d
    });
    let before = used(&scratch);
    let (shm0, slab0) = meminfo();
    let forks = rt.fork(&sandbox, 100).expect("fork");
    // The worst case: every directory of every copy filled.
    for f in &forks {
        let _ = f.workspace();
    }
    let fork_memory = used(&scratch).saturating_sub(before);
    let (shm1, slab1) = meminfo();
    // One fork writes 1 MiB: only that is new data.
    forks[0]
        .write_file("d0/f0", &vec![7u8; 1 << 20])
        .expect("write");
    let (shm2, _) = meminfo();
    drop(forks);

    let snapshot = time(ROUNDS, || {
        let t = Instant::now();
        let s = rt.snapshot(&sandbox, Default::default()).expect("snapshot");
        let d = t.elapsed();
        drop(s);
        d
    });
    let out_dir = tempfile::tempdir().unwrap();
    let tar_path = out_dir.path().join("s.tar");
    let snapshot_tar = time(ROUNDS, || {
        let t = Instant::now();
        let s = rt.snapshot(&sandbox, Default::default()).expect("snapshot");
        let f =
            std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tar_path).unwrap());
        s.write_tar(f).expect("tar");
        t.elapsed()
    });
    let zst_path = out_dir.path().join("s.tar.zst");
    let snapshot_zst = time(ROUNDS, || {
        let t = Instant::now();
        let s = rt.snapshot(&sandbox, Default::default()).expect("snapshot");
        let f =
            std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&zst_path).unwrap());
        s.write_tar_zstd(f, 3).expect("tar");
        t.elapsed()
    });
    let snap = rt.snapshot(&sandbox, Default::default()).expect("snapshot");
    let restore = time(ROUNDS, || {
        let t = Instant::now();
        let r = rt.restore(&snap, None).expect("restore");
        let d = t.elapsed();
        drop(r);
        d
    });
    let limits = TarLimits {
        max_bytes: 1 << 30,
        max_entries: 100_000,
        links_may_leave: false,
    };
    let restore_tar = time(ROUNDS, || {
        let t = Instant::now();
        let f = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(&tar_path).unwrap());
        let s = rt.read_snapshot(f, limits).expect("read");
        let r = rt.restore(&s, None).expect("restore");
        let d = t.elapsed();
        drop(r);
        d
    });
    let restore_zst = time(ROUNDS, || {
        let t = Instant::now();
        let f = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(&zst_path).unwrap());
        let s = rt.read_snapshot(f, limits).expect("read");
        let r = rt.restore(&s, None).expect("restore");
        let d = t.elapsed();
        drop(r);
        d
    });
    let copies = tempfile::tempdir_in(&scratch).unwrap();
    let cp = |n: usize| {
        let t = Instant::now();
        for i in 0..n {
            let ok = Command::new("cp")
                .arg("-a")
                .arg(&ws)
                .arg(copies.path().join(format!("c{i}")))
                .status()
                .expect("cp")
                .success();
            assert!(ok);
        }
        let d = t.elapsed();
        for i in 0..n {
            let _ = std::fs::remove_dir_all(copies.path().join(format!("c{i}")));
        }
        d
    };
    let cp1 = time(ROUNDS, || cp(1));
    let cp100 = time(3, || cp(100));

    println!(
        "\nsnapshot bench: {FILES} files, {} MiB, scratch on {} ({ROUNDS} rounds, medians)",
        (FILES * FILE_BYTES) >> 20,
        scratch.display()
    );
    println!(
        "{:<22} {:>12} {:>22}",
        "operation", "wasbox", "native cp -a (ratio)"
    );
    let row = |name: &str, d: Duration, base: Duration| {
        println!(
            "{name:<22} {:>12} {:>12} ({:.1}x)",
            ms(d),
            ms(base),
            base.as_secs_f64() / d.as_secs_f64()
        );
    };
    row("fork x100", fork, cp100);
    row("  + a read in each", fork_read, cp100);
    row("  + every dir filled", fork_whole, cp100);
    row("snapshot", snapshot, cp1);
    row("snapshot + tar", snapshot_tar, cp1);
    row("restore", restore, cp1);
    row("restore from tar", restore_tar, cp1);
    row("snapshot + tar.zst", snapshot_zst, cp1);
    row("restore from tar.zst", restore_zst, cp1);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let size = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
    // The bench's files repeat one pattern: zstd's ratio here is far above a real tree's.
    println!(
        "tar {} KiB, tar.zst {} KiB (repetitive data)",
        size(&tar_path) >> 10,
        size(&zst_path) >> 10
    );
    println!(
        "memory of 100 forks, every directory filled: tmpfs {:.1} MiB (df), shared memory {:.1} MiB, kernel slab {:.1} MiB \
         (the workspace: {} MiB; 100 copies: {} MiB); one fork rewriting a file with 1 MiB: +{:.1} MiB",
        mib(fork_memory),
        mib(shm1.saturating_sub(shm0)),
        mib(slab1.saturating_sub(slab0)),
        (FILES * FILE_BYTES) >> 20,
        (100 * FILES * FILE_BYTES) >> 20,
        mib(shm2.saturating_sub(shm1)),
    );
}
