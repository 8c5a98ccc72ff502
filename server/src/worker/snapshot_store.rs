//! Where a node keeps its snapshots: tars in `<state_dir>/snapshots` (`<id>.tar` and its
//! digest in `<id>.sha256`), which never expire on their own, and the newest as frozen trees
//! in memory so that restore and fork need no tar.

use std::collections::VecDeque;
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Mutex, MutexGuard};

use wasbox_runtime::Snapshot;

/// Snapshots kept as frozen trees in memory besides their tars (the newest), and the most
/// file data they may hold together (a tree holds its files' memory once its session has
/// changed or dropped them).
const CACHED_TREES: usize = 16;
const CACHED_BYTES: u64 = 1 << 30;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The node's snapshots: see the module documentation.
pub struct SnapshotStore {
    pub(super) dir: PathBuf,
    /// The newest snapshots' frozen trees, by id.
    trees: Mutex<VecDeque<(String, Snapshot)>>,
    /// Serializes what changes the directory's set of snapshots (count checks).
    pub(super) writing: Mutex<()>,
}

impl SnapshotStore {
    pub fn at(state_dir: &FsPath) -> SnapshotStore {
        SnapshotStore {
            dir: state_dir.join("snapshots"),
            trees: Mutex::new(VecDeque::new()),
            writing: Mutex::new(()),
        }
    }

    pub(super) fn tar_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.tar"))
    }

    pub(super) fn digest_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.sha256"))
    }

    pub(super) fn ids(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".tar"))
                    .filter(|n| valid_id(n))
                    .map(str::to_string)
            })
            .collect();
        ids.sort();
        ids
    }

    /// What the stored tars take together.
    pub(super) fn bytes(&self) -> u64 {
        self.ids()
            .iter()
            .filter_map(|id| std::fs::metadata(self.tar_path(id)).ok())
            .map(|m| m.len())
            .sum()
    }

    pub(super) fn cache(&self, id: &str, snapshot: Snapshot) {
        let mut trees = lock(&self.trees);
        trees.retain(|(i, _)| i != id);
        trees.push_front((id.to_string(), snapshot));
        trees.truncate(CACHED_TREES);
        let mut total = 0u64;
        let keep = trees
            .iter()
            .take_while(|(_, s)| {
                total = total.saturating_add(s.manifest().bytes);
                total <= CACHED_BYTES
            })
            .count()
            .max(1);
        trees.truncate(keep);
    }

    pub(super) fn cached(&self, id: &str) -> Option<Snapshot> {
        lock(&self.trees)
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, s)| s.clone())
    }

    pub(super) fn forget(&self, id: &str) {
        lock(&self.trees).retain(|(i, _)| i != id);
    }
}

/// A snapshot id as this node makes them (`snap-` and hex): nothing else names a file.
pub(super) fn valid_id(id: &str) -> bool {
    id.strip_prefix("snap-")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A new snapshot id.
pub(super) fn new_id() -> String {
    format!("snap-{}", crate::ids::hex::<16>())
}
