//! Directories a sandbox holds open only while they are in use: its workspace and its
//! private `/tmp`.
//!
//! Every process finds at those mount points one of two node-wide placeholders ([`Kind`]),
//! which the host's `wasi:filesystem` swaps for the sandbox's own directory at each call.
//! The sandbox's directory is opened at its first use, kept open while it is used, and
//! closed [`KEEP`] after its last use. So an idle sandbox holds no open file, and a node's
//! open-file limit does not bound how many sandboxes it keeps alive.
//!
//! Idle directories are closed by a sweep over the open ones every half [`KEEP`], on a thread
//! of its own, started once more than [`UNSWEPT`] have been opened since the last sweep (so a
//! `wasbox run` of one sandbox never starts it). The directories held open at once are
//! bounded too (half the open-file limit); past that, an operation opens its directory for
//! itself alone.

use crate::sync::lock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use wasmtime_wasi::filesystem::Dir;

/// How long a directory stays open after its last use.
pub(crate) const KEEP: Duration = Duration::from_secs(2);

/// A directory opened when needed: see the module documentation.
pub(crate) struct LazyDir {
    slot: Arc<Slot>,
}

#[derive(Default)]
struct Slot {
    open: Mutex<Option<(Dir, Instant)>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let open = self.open.get_mut().unwrap_or_else(|e| e.into_inner());
        if open.take().is_some() {
            HELD.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Directories held open now by every [`LazyDir`] of the process.
static HELD: AtomicUsize = AtomicUsize::new(0);
/// The slots that hold a directory (and some that no longer do, or are gone), for the sweep.
static OPEN: Mutex<Vec<Weak<Slot>>> = Mutex::new(Vec::new());
/// Slots a process may list (held open, or made and gone since) without the sweeping thread.
const UNSWEPT: usize = 8;
/// The most directories held open at once: half the open-file limit, read again at every
/// sweep (the limit is raised when a server starts).
static MOST: AtomicUsize = AtomicUsize::new(0);

fn most() -> usize {
    match MOST.load(Ordering::Relaxed) {
        0 => {
            let n = (crate::capacity::open_file_limit() / 2).max(64);
            MOST.store(n, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

impl LazyDir {
    /// A directory not open yet.
    pub(crate) fn closed() -> Self {
        LazyDir {
            slot: Arc::default(),
        }
    }

    /// A directory already open (a spare workspace's handle), kept while used.
    pub(crate) fn open(dir: Dir) -> Self {
        let lazy = LazyDir::closed();
        let mut open = lock(&lazy.slot.open);
        lazy.hold(&mut open, &dir, Instant::now());
        drop(open);
        lazy
    }

    /// The directory for one operation: the one held open, or `open`ed now (and held, when
    /// there is room).
    pub(crate) fn get(&self, open: impl FnOnce() -> std::io::Result<Dir>) -> std::io::Result<Dir> {
        let now = Instant::now();
        let mut slot = lock(&self.slot.open);
        if let Some((dir, used)) = slot.as_mut() {
            *used = now;
            return Ok(dir.clone());
        }
        let dir = open()?;
        self.hold(&mut slot, &dir, now);
        Ok(dir)
    }

    /// Keeps `dir` open in the (empty) slot when fewer than [`most`] are.
    fn hold(&self, slot: &mut Option<(Dir, Instant)>, dir: &Dir, now: Instant) {
        if HELD.fetch_add(1, Ordering::Relaxed) >= most() {
            HELD.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        *slot = Some((dir.clone(), now));
        let mut open = lock(&OPEN);
        open.push(Arc::downgrade(&self.slot));
        // Only the sweep forgets the slots of sandboxes gone: a process that makes many, even
        // one at a time, needs it.
        if open.len() > UNSWEPT {
            drop(open);
            start_sweeping();
        }
    }

    /// The directory held open now, taken out (its holder is going).
    pub(crate) fn take(&self) -> Option<Dir> {
        let taken = lock(&self.slot.open).take();
        taken.map(|(dir, _)| {
            HELD.fetch_sub(1, Ordering::Relaxed);
            dir
        })
    }

    /// Whether the directory is held open now.
    #[cfg(test)]
    fn is_open(&self) -> bool {
        lock(&self.slot.open).is_some()
    }
}

/// Starts the thread that runs [`sweep`] every half [`KEEP`] (once per process).
fn start_sweeping() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("wasbox-dirs".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(KEEP / 2);
                    sweep(Instant::now());
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "starting the thread that closes idle directories");
        }
    });
}

/// Closes the directories unused for [`KEEP`] and forgets the slots that hold none.
fn sweep(now: Instant) {
    MOST.store(0, Ordering::Relaxed);
    // Taken out, so that those who open a directory meanwhile are not kept waiting.
    let slots = std::mem::take(&mut *lock(&OPEN));
    let mut kept = Vec::with_capacity(slots.len());
    for weak in slots {
        let Some(slot) = weak.upgrade() else { continue };
        let mut open = lock(&slot.open);
        match open.as_ref() {
            Some((_, used)) if now.saturating_duration_since(*used) >= KEEP => {
                *open = None;
                HELD.fetch_sub(1, Ordering::Relaxed);
            }
            Some(_) => kept.push(weak),
            None => {}
        }
    }
    lock(&OPEN).extend(kept);
}

/// The two placeholders, by what they stand for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Workspace,
    Tmp,
}

struct Placeholders {
    workspace: Dir,
    tmp: Dir,
}

static PLACEHOLDERS: OnceLock<Placeholders> = OnceLock::new();

/// Makes the placeholders (once per process) in `temp_root`: empty directories removed at
/// once and read-only, so that a call that reached one unswapped would find nothing and could
/// make nothing.
pub(crate) fn make_placeholders(temp_root: &std::path::Path) -> std::io::Result<()> {
    if PLACEHOLDERS.get().is_some() {
        return Ok(());
    }
    let empty = || -> std::io::Result<Dir> {
        let t = tempfile::Builder::new()
            .prefix("wasbox-empty-")
            .tempdir_in(temp_root)?;
        let dir = std::fs::File::open(t.path())?;
        drop(t);
        Ok(Dir::new(
            dir,
            wasmtime_wasi::FsPerms::ReadOnly,
            wasmtime_wasi::OpenMode::READ,
            true,
        ))
    };
    let _ = PLACEHOLDERS.set(Placeholders {
        workspace: empty()?,
        tmp: empty()?,
    });
    Ok(())
}

/// The placeholder of `kind` (made by [`make_placeholders`]).
pub(crate) fn placeholder(kind: Kind) -> Option<Dir> {
    PLACEHOLDERS.get().map(|p| match kind {
        Kind::Workspace => p.workspace.clone(),
        Kind::Tmp => p.tmp.clone(),
    })
}

/// Which placeholder `dir` is, if it is one.
pub(crate) fn placeholder_of(dir: &Arc<std::fs::File>) -> Option<Kind> {
    let p = PLACEHOLDERS.get()?;
    if Arc::ptr_eq(dir, &p.workspace.dir) {
        Some(Kind::Workspace)
    } else if Arc::ptr_eq(dir, &p.tmp.dir) {
        Some(Kind::Tmp)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(path: &std::path::Path) -> std::io::Result<Dir> {
        Ok(Dir::new(
            std::fs::File::open(path)?,
            wasmtime_wasi::FsPerms::ReadOnly,
            wasmtime_wasi::OpenMode::READ,
            true,
        ))
    }

    #[test]
    fn opened_once_while_used_and_closed_after_keep() {
        let t = tempfile::tempdir().unwrap();
        let lazy = LazyDir::closed();
        let mut opens = 0;
        let a = lazy
            .get(|| {
                opens += 1;
                dir(t.path())
            })
            .unwrap();
        let b = lazy.get(|| panic!("opened a second time")).unwrap();
        assert_eq!(opens, 1);
        assert!(Arc::ptr_eq(&a.dir, &b.dir));
        assert!(lazy.is_open());
        // A sweep soon after the last use keeps it; one a KEEP later closes it.
        sweep(Instant::now());
        assert!(lazy.is_open());
        sweep(Instant::now() + KEEP);
        assert!(!lazy.is_open());
        // Closed, it is opened again by the next use.
        let c = lazy.get(|| dir(t.path())).unwrap();
        assert!(!Arc::ptr_eq(&a.dir, &c.dir));
        assert!(lazy.take().is_some());
        assert!(!lazy.is_open());
    }

    #[test]
    fn placeholders_are_told_apart() {
        let t = tempfile::tempdir().unwrap();
        make_placeholders(t.path()).unwrap();
        let w = placeholder(Kind::Workspace).unwrap();
        let tmp = placeholder(Kind::Tmp).unwrap();
        assert_eq!(placeholder_of(&w.dir), Some(Kind::Workspace));
        assert_eq!(placeholder_of(&tmp.dir), Some(Kind::Tmp));
        assert_eq!(placeholder_of(&dir(t.path()).unwrap().dir), None);
    }
}
