//! What the machine is and how loaded it is, read from the kernel (`uname`, `/proc`,
//! `statvfs`), for `node:info` and `node:stats`.

use std::path::Path;

/// The kernel's release string (`uname -r`).
pub fn kernel_version() -> String {
    // SAFETY: `uname` fills the zeroed struct; its fields are NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "unknown".into();
        }
        std::ffi::CStr::from_ptr(u.release.as_ptr())
            .to_string_lossy()
            .into_owned()
    }
}

/// The machine's host name, or `wasbox-node` when it has none.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer and its length match; the result is NUL-terminated on success.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let name = if ok {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    };
    if name.is_empty() {
        "wasbox-node".into()
    } else {
        name
    }
}

/// 1, 5 and 15 minute load averages.
pub fn load() -> (f64, f64, f64) {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap_or(0.0));
    (
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
    )
}

/// Total and available memory in MiB (`MemTotal`, `MemAvailable` of /proc/meminfo).
pub fn memory_mb() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0)
            / 1024
    };
    (field("MemTotal:"), field("MemAvailable:"))
}

/// Free (to unprivileged users) and total MiB of the file system holding `dir`.
pub fn disk_mb(dir: &Path) -> (u64, u64) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return (0, 0);
    };
    // SAFETY: `c` is a valid NUL-terminated path; `s` is written by the call.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut s) != 0 {
            return (0, 0);
        }
        let unit = s.f_frsize as u64;
        (
            (s.f_bavail as u64 * unit) >> 20,
            (s.f_blocks as u64 * unit) >> 20,
        )
    }
}

/// The resident memory of this process in bytes (`VmRSS` of /proc/self/status).
pub fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_reads_as_a_machine() {
        assert!(!kernel_version().is_empty());
        let (total, avail) = memory_mb();
        assert!(total > 0 && avail <= total);
        let (free, all) = disk_mb(Path::new("/"));
        assert!(all > 0 && free <= all);
        assert!(resident_bytes() > 0);
    }
}
