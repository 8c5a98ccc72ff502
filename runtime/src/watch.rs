//! Watching a directory of a sandbox's tree for changes, with the kernel's inotify: every
//! writer (the sandbox's processes, the host's own file operations) is seen, however short
//! the life of what it made. One inotify instance serves the whole process (a user may own
//! only a few), read by one thread that hands each event to the watches of its directory.
//!
//! A directory is opened through the sandbox's cap-std handle (which keeps it inside the
//! tree) and watched through `/proc/self/fd/N`, so a symlink a guest planted never points a
//! watch outside the sandbox.

use crate::sync::lock;
use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use tokio::sync::mpsc;

use crate::sandbox::{FileError, SandboxState};

/// What happened to an entry of a watched directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Create,
    Write,
    Remove,
    /// Moved away (its new name, if still watched, comes as a `Create`).
    Rename,
    Chmod,
}

/// One change: the entry's path relative to the watched directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub name: String,
    pub kind: ChangeKind,
}

/// Changes a watch holds for its reader before it drops the newest (and says so once).
const QUEUE: usize = 4096;
/// Deepest a recursive watch goes.
const MAX_DEPTH: usize = 64;
/// Most directories one watch covers: the node's inotify watches are shared by all its
/// sandboxes, so no one watch may take them all. Directories past this are not watched.
pub const MAX_WATCHED_DIRS: usize = 4096;

/// A live watch: changes arrive on [`Watch::recv`]; dropping it removes its inotify watches.
pub struct Watch {
    rx: mpsc::Receiver<Change>,
    inner: Arc<WatchInner>,
}

struct WatchInner {
    id: u64,
    sandbox: Arc<SandboxState>,
    /// The watched directory's sandbox path.
    root: String,
    recursive: bool,
    tx: mpsc::Sender<Change>,
    /// The watched directory itself is gone.
    gone: AtomicBool,
    /// Directories it watches (see [`MAX_WATCHED_DIRS`]).
    dirs: std::sync::atomic::AtomicUsize,
}

impl Watch {
    /// The next change; `None` once the watched directory is gone.
    pub async fn recv(&mut self) -> Option<Change> {
        self.rx.recv().await
    }

    /// A change if one is waiting.
    pub fn try_recv(&mut self) -> Option<Change> {
        self.rx.try_recv().ok()
    }

    /// Whether the watched directory has been removed (no more changes will come).
    pub fn is_gone(&self) -> bool {
        self.inner.gone.load(Ordering::Acquire)
    }

    /// Waits (a few milliseconds at most, blocking) until every change the kernel has
    /// queued so far has reached the watches, so that a change made before this call is
    /// seen by the next [`try_recv`](Self::try_recv).
    pub fn settle(&self) {
        let Ok(n) = notifier_result() else {
            return;
        };
        let idle = || {
            let mut queued: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int.
            let r = unsafe { libc::ioctl(n.fd.as_raw_fd(), libc::FIONREAD, &mut queued) };
            (r != 0 || queued == 0) && !DISPATCHING.load(Ordering::Acquire)
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(20);
        let mut calm = 0;
        while calm < 2 && std::time::Instant::now() < deadline {
            if idle() {
                calm += 1;
            } else {
                calm = 0;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        notifier().remove_all(self.inner.id);
    }
}

/// The process's inotify instance and who listens to which of its watch descriptors.
struct Notifier {
    fd: OwnedFd,
    subs: Mutex<HashMap<i32, Vec<Sub>>>,
}

struct Sub {
    watch: Weak<WatchInner>,
    id: u64,
    /// This directory's path relative to the watch's root ("" for the root).
    prefix: String,
}

static NOTIFIER: OnceLock<Result<Notifier, String>> = OnceLock::new();
/// The reader thread holds events it has read and not yet handed out.
static DISPATCHING: AtomicBool = AtomicBool::new(false);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn notifier_result() -> &'static Result<Notifier, String> {
    NOTIFIER.get_or_init(|| {
        // SAFETY: a plain syscall; the descriptor is owned right after.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(format!(
                "inotify is not available: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: `fd` is a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        std::thread::Builder::new()
            .name("wasbox-inotify".into())
            .spawn(move || read_loop(raw))
            .map_err(|e| e.to_string())?;
        Ok(Notifier {
            fd,
            subs: Mutex::new(HashMap::new()),
        })
    })
}

fn notifier() -> &'static Notifier {
    match notifier_result() {
        Ok(n) => n,
        Err(_) => unreachable!("a watch exists only when the notifier does"),
    }
}

const MASK: u32 = libc::IN_CREATE
    | libc::IN_MODIFY
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_ATTRIB
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR;

impl Notifier {
    /// Watches the directory `rel` (inside `dir`) for `watch`, as `prefix`.
    fn add(
        &self,
        dir: &cap_std::fs::Dir,
        rel: &std::path::Path,
        watch: &Arc<WatchInner>,
        prefix: String,
    ) -> std::io::Result<()> {
        if watch.dirs.fetch_add(1, Ordering::AcqRel) >= MAX_WATCHED_DIRS {
            watch.dirs.fetch_sub(1, Ordering::AcqRel);
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let opened = dir.open_dir(rel)?;
        let path = CString::new(format!("/proc/self/fd/{}", opened.as_raw_fd()))
            .map_err(std::io::Error::other)?;
        // SAFETY: valid descriptor and NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), path.as_ptr(), MASK) };
        if wd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut subs = lock(&self.subs);
        let list = subs.entry(wd).or_default();
        if !list.iter().any(|s| s.id == watch.id && s.prefix == prefix) {
            list.push(Sub {
                watch: Arc::downgrade(watch),
                id: watch.id,
                prefix,
            });
        }
        Ok(())
    }

    /// Forgets every directory of watch `id`; a descriptor nobody listens to is removed.
    fn remove_all(&self, id: u64) {
        let mut subs = lock(&self.subs);
        subs.retain(|wd, list| {
            list.retain(|s| s.id != id);
            if list.is_empty() {
                // SAFETY: plain syscall on our own descriptor.
                unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), *wd) };
                false
            } else {
                true
            }
        });
    }
}

fn read_loop(fd: i32) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        // SAFETY: reading into our own buffer from our own descriptor.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        DISPATCHING.store(true, Ordering::Release);
        let n = n as usize;
        let mut at = 0;
        let head = std::mem::size_of::<libc::inotify_event>();
        while at + head <= n {
            // SAFETY: the kernel wrote whole events; read the header unaligned.
            let ev: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
            let name_bytes = &buf[at + head..(at + head + ev.len as usize).min(n)];
            let name = String::from_utf8_lossy(name_bytes)
                .trim_end_matches('\0')
                .to_string();
            dispatch(ev.wd, ev.mask, &name);
            at += head + ev.len as usize;
        }
        DISPATCHING.store(false, Ordering::Release);
    }
}

fn dispatch(wd: i32, mask: u32, name: &str) {
    let Ok(n) = notifier_result() else {
        return;
    };
    if mask & libc::IN_IGNORED != 0 {
        // The kernel dropped this watch (its directory is gone): so does the table.
        if let Some(list) = lock(&n.subs).remove(&wd) {
            for s in list.iter().filter(|s| s.prefix.is_empty()) {
                if let Some(w) = s.watch.upgrade() {
                    w.gone.store(true, Ordering::Release);
                }
            }
        }
        return;
    }
    let targets: Vec<(Arc<WatchInner>, String)> = lock(&n.subs)
        .get(&wd)
        .map(|list| {
            list.iter()
                .filter_map(|s| Some((s.watch.upgrade()?, s.prefix.clone())))
                .collect()
        })
        .unwrap_or_default();
    for (watch, prefix) in targets {
        if mask & (libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) != 0 {
            if prefix.is_empty() {
                watch.gone.store(true, Ordering::Release);
                n.remove_all(watch.id);
            }
            continue;
        }
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}/{name}")
        };
        let is_dir = mask & libc::IN_ISDIR != 0;
        let kind = if mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0 {
            if is_dir && watch.recursive {
                add_tree(&watch, &path);
            }
            ChangeKind::Create
        } else if mask & libc::IN_MODIFY != 0 {
            ChangeKind::Write
        } else if mask & libc::IN_DELETE != 0 {
            ChangeKind::Remove
        } else if mask & libc::IN_MOVED_FROM != 0 {
            ChangeKind::Rename
        } else if mask & libc::IN_ATTRIB != 0 {
            ChangeKind::Chmod
        } else {
            continue;
        };
        // A reader that falls behind loses the newest changes, never the process.
        let _ = watch.tx.try_send(Change { name: path, kind });
    }
}

/// Watches the directory `rel_path` (relative to the watch's root) and, the watch being
/// recursive, every directory below it.
fn add_tree(watch: &Arc<WatchInner>, rel_path: &str) {
    let Ok(n) = notifier_result() else {
        return;
    };
    let root = format!("{}/{rel_path}", watch.root.trim_end_matches('/'));
    let Some((dir, rel)) = watch.sandbox.resolve(&watch.sandbox.mount, &root) else {
        return;
    };
    let mut pending = vec![(rel, rel_path.to_string(), 0usize)];
    while let Some((rel, prefix, depth)) = pending.pop() {
        if n.add(&dir, &rel, watch, prefix.clone()).is_err()
            || !watch.recursive
            || depth >= MAX_DEPTH
        {
            continue;
        }
        let Ok(entries) = dir.read_dir(&rel) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let name = e.file_name().to_string_lossy().into_owned();
                let child = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}/{name}")
                };
                pending.push((rel.join(&name), child, depth + 1));
            }
        }
    }
}

impl SandboxState {
    /// Starts watching the directory `path` (and, `recursive`, the directories below it).
    pub(crate) fn watch(self: &Arc<Self>, path: &str, recursive: bool) -> Result<Watch, FileError> {
        let n = notifier_result()
            .as_ref()
            .map_err(|e| FileError::Io(e.clone()))?;
        if recursive {
            // Directories filled later would be reported as created.
            self.fill_all().map_err(|e| FileError::from_io(path, &e))?;
        }
        let (dir, rel) = self
            .resolve(&self.mount, path)
            .ok_or_else(|| FileError::OutsideWorkspace(path.to_string()))?;
        let meta = dir
            .metadata(&rel)
            .map_err(|e| FileError::from_io(path, &e))?;
        if !meta.is_dir() {
            return Err(FileError::NotADirectory(path.to_string()));
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        let inner = Arc::new(WatchInner {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            sandbox: self.clone(),
            root: self.absolute(path),
            recursive,
            tx,
            gone: AtomicBool::new(false),
            dirs: std::sync::atomic::AtomicUsize::new(0),
        });
        n.add(&dir, &rel, &inner, String::new()).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOSPC) {
                FileError::NoSpace(format!("{path}: the node's inotify watches are used up"))
            } else {
                FileError::from_io(path, &e)
            }
        })?;
        if recursive && let Ok(entries) = dir.read_dir(&rel) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    add_tree(&inner, &e.file_name().to_string_lossy());
                }
            }
        }
        Ok(Watch { rx, inner })
    }
}
