//! The few `/proc` and `/sys` files Linux programs read about the machine they run on
//! (`uptime`, `free`, Python's and node's libraries, E2B's SDK reading the boot id), with
//! the sandbox's values, never the host's: its own boot id, the time since it was made, its
//! memory budget and use, its processes, one CPU.
//!
//! They are names in the read-only root (the root tree of `rootfs`); opening one gives a
//! read-only file holding what it says at that moment, as reading `/proc` does.

use std::io::{Seek as _, Write as _};

/// A file of `/proc` or `/sys` the sandbox has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcFile {
    Uptime,
    Loadavg,
    Meminfo,
    Cpuinfo,
    Version,
    BootId,
    Uuid,
    Hostname,
    OsRelease,
    CgroupMemoryMax,
    CgroupMemoryCurrent,
    CgroupCpuMax,
    CgroupPidsMax,
}

/// Every such file, by its path in the root.
pub(crate) const FILES: &[(&str, ProcFile)] = &[
    ("proc/uptime", ProcFile::Uptime),
    ("proc/loadavg", ProcFile::Loadavg),
    ("proc/meminfo", ProcFile::Meminfo),
    ("proc/cpuinfo", ProcFile::Cpuinfo),
    ("proc/version", ProcFile::Version),
    ("proc/sys/kernel/random/boot_id", ProcFile::BootId),
    ("proc/sys/kernel/random/uuid", ProcFile::Uuid),
    ("proc/sys/kernel/hostname", ProcFile::Hostname),
    ("proc/sys/kernel/osrelease", ProcFile::OsRelease),
    ("sys/fs/cgroup/memory.max", ProcFile::CgroupMemoryMax),
    (
        "sys/fs/cgroup/memory.current",
        ProcFile::CgroupMemoryCurrent,
    ),
    ("sys/fs/cgroup/cpu.max", ProcFile::CgroupCpuMax),
    ("sys/fs/cgroup/pids.max", ProcFile::CgroupPidsMax),
];

/// What `uname -r` says (the image's coreutils say the same).
pub(crate) const RELEASE: &str = "6.1.0-wasbox";

impl ProcFile {
    /// The file at `path` (relative to the root, normalized), if it is one.
    pub(crate) fn at(path: &str) -> Option<ProcFile> {
        FILES.iter().find(|(p, _)| *p == path).map(|(_, f)| *f)
    }

    /// A number that tells the files apart (their inode in `stat`).
    pub(crate) fn index(self) -> u64 {
        FILES.iter().position(|(_, f)| *f == self).unwrap_or(0) as u64 + 1
    }
}

/// The sandbox's facts the files tell.
pub(crate) struct Facts {
    pub(crate) boot_id: String,
    pub(crate) uptime: std::time::Duration,
    pub(crate) hostname: &'static str,
    /// The sandbox's memory budget and what its processes hold now, in bytes.
    pub(crate) memory_limit: u64,
    pub(crate) memory_used: u64,
    pub(crate) processes: u32,
    pub(crate) max_processes: u32,
    pub(crate) last_pid: u32,
}

/// What `file` holds now.
pub(crate) fn content(file: ProcFile, f: &Facts) -> String {
    let kib = |b: u64| b / 1024;
    let up = f.uptime.as_secs_f64();
    match file {
        ProcFile::Uptime => format!("{up:.2} {up:.2}\n"),
        ProcFile::Loadavg => format!(
            "0.00 0.00 0.00 {}/{} {}\n",
            f.processes.max(1),
            f.processes.max(1),
            f.last_pid
        ),
        ProcFile::Meminfo => {
            let total = kib(f.memory_limit);
            let free = kib(f.memory_limit.saturating_sub(f.memory_used));
            format!(
                "MemTotal:       {total:>8} kB\nMemFree:        {free:>8} kB\n\
                 MemAvailable:   {free:>8} kB\nBuffers:               0 kB\n\
                 Cached:                0 kB\nSwapCached:            0 kB\n\
                 SwapTotal:             0 kB\nSwapFree:              0 kB\n\
                 Shmem:                 0 kB\n"
            )
        }
        ProcFile::Cpuinfo => "processor\t: 0\nvendor_id\t: wasbox\ncpu family\t: 0\n\
                              model\t\t: 0\nmodel name\t: WebAssembly (wasm32)\n\
                              cpu MHz\t\t: 0.000\ncpu cores\t: 1\nsiblings\t: 1\n\
                              flags\t\t: \nbogomips\t: 0.00\n\n"
            .to_string(),
        ProcFile::Version => {
            format!("Linux version {RELEASE} (wasbox@wasbox) (WebAssembly sandbox) #1 SMP\n")
        }
        ProcFile::BootId => format!("{}\n", f.boot_id),
        ProcFile::Uuid => format!("{}\n", uuid_v4()),
        ProcFile::Hostname => format!("{}\n", f.hostname),
        ProcFile::OsRelease => format!("{RELEASE}\n"),
        ProcFile::CgroupMemoryMax => format!("{}\n", f.memory_limit),
        ProcFile::CgroupMemoryCurrent => format!("{}\n", f.memory_used),
        ProcFile::CgroupCpuMax => "100000 100000\n".to_string(),
        ProcFile::CgroupPidsMax => format!("{}\n", f.max_processes),
    }
}

/// A random UUID, as the kernel writes one (version 4).
pub(crate) fn uuid_v4() -> String {
    let mut b = [0u8; 16];
    // SAFETY: getrandom writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        b = t.to_le_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A read-only file holding `text` (an anonymous memory file: nothing on a disk).
pub(crate) fn file_of(text: &str) -> std::io::Result<std::fs::File> {
    // SAFETY: memfd_create takes a NUL-terminated name and flags.
    let fd = unsafe { libc::memfd_create(c"wasbox-proc".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nothing else owns.
    let mut file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    file.write_all(text.as_bytes())?;
    file.rewind()?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    fn facts() -> Facts {
        Facts {
            boot_id: "0f4e3c9a-1b2c-4d5e-8f90-123456789abc".into(),
            uptime: std::time::Duration::from_millis(12_340),
            hostname: "sbx",
            memory_limit: 1 << 30,
            memory_used: 64 << 20,
            processes: 2,
            max_processes: 64,
            last_pid: 7,
        }
    }

    #[test]
    fn files_say_the_sandboxs_values() {
        let f = facts();
        assert_eq!(content(ProcFile::Uptime, &f), "12.34 12.34\n");
        let mem = content(ProcFile::Meminfo, &f);
        assert!(mem.starts_with("MemTotal:        1048576 kB\n"), "{mem}");
        assert!(mem.contains("MemAvailable:     983040 kB\n"), "{mem}");
        assert_eq!(content(ProcFile::Loadavg, &f), "0.00 0.00 0.00 2/2 7\n");
        assert_eq!(content(ProcFile::BootId, &f), format!("{}\n", f.boot_id));
        assert_eq!(content(ProcFile::CgroupMemoryMax, &f), "1073741824\n");
        assert_eq!(
            content(ProcFile::Cpuinfo, &f).matches("processor").count(),
            1
        );
        let a = content(ProcFile::Uuid, &f);
        assert_eq!(a.len(), 37);
        assert_ne!(a, content(ProcFile::Uuid, &f), "a new one at each read");
        assert_eq!(
            ProcFile::at("proc/sys/kernel/random/boot_id"),
            Some(ProcFile::BootId)
        );
        assert_eq!(ProcFile::at("proc/self/status"), None);
    }

    #[test]
    fn a_file_holds_its_text() {
        let mut f = file_of("12.34 12.34\n").unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "12.34 12.34\n");
    }
}
