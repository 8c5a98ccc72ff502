//! Where a node keeps its snapshots: tars in `<state_dir>/snapshots` (`<id>.tar` and its
//! digest in `<id>.sha256`), which never expire on their own, and the newest as frozen trees
//! in memory so that restore and fork need no tar.

use std::collections::VecDeque;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Mutex;

use axum::http::StatusCode;
use wasbox_runtime::Snapshot;
use wasbox_runtime::sync::lock;

use crate::problem::Problem;

/// Snapshots a node keeps at most; more are refused until some are deleted.
pub const MAX_STORED_SNAPSHOTS: usize = 256;
/// What the stored tars may take together on the node's disk.
pub const MAX_STORED_BYTES: u64 = 16 << 30;

/// Snapshots kept as frozen trees in memory besides their tars (the newest), and the most
/// file data they may hold together (a tree holds its files' memory once its session has
/// changed or dropped them).
const CACHED_TREES: usize = 16;
const CACHED_BYTES: u64 = 1 << 30;

/// The node's snapshots: see the module documentation. Only this type names their files.
pub struct SnapshotStore {
    dir: PathBuf,
    /// The newest snapshots' frozen trees, by id.
    trees: Mutex<VecDeque<(String, Snapshot)>>,
    /// Serializes what changes the directory's set of snapshots (count checks).
    writing: Mutex<()>,
    /// Ids are the node's (its fleet name first); files are named by the rest, so that a
    /// node that joins a fleet or changes its name keeps its snapshots.
    fleet: super::config::Fleet,
}

/// A stored snapshot's tar, open, with the digest recorded when it was taken.
pub(super) struct StoredTar {
    pub file: std::fs::File,
    pub digest: String,
    pub size: u64,
}

impl SnapshotStore {
    pub fn at(state_dir: &FsPath, fleet: super::config::Fleet) -> SnapshotStore {
        SnapshotStore {
            dir: state_dir.join("snapshots"),
            trees: Mutex::new(VecDeque::new()),
            writing: Mutex::new(()),
            fleet,
        }
    }

    /// Whether `id` is a snapshot id as this node makes them (its fleet name, `snap-` and
    /// hex): nothing else names a file.
    pub(super) fn valid_id(&self, id: &str) -> bool {
        self.fleet.unowned(id).is_some_and(valid_file_id)
    }

    /// The file name part of a valid id.
    fn file_id<'a>(&self, id: &'a str) -> &'a str {
        self.fleet.unowned(id).unwrap_or(id)
    }

    fn tar_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{}.tar", self.file_id(id)))
    }

    fn digest_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{}.sha256", self.file_id(id)))
    }

    fn ids(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".tar"))
                    .filter(|n| valid_file_id(n))
                    .map(|n| self.fleet.own(n))
            })
            .collect();
        ids.sort();
        ids
    }

    /// What the stored tars take together.
    fn bytes(&self) -> u64 {
        self.ids()
            .iter()
            .filter_map(|id| std::fs::metadata(self.tar_path(id)).ok())
            .map(|m| m.len())
            .sum()
    }

    /// The digest recorded for `id` ("" when there is none).
    fn digest(&self, id: &str) -> String {
        std::fs::read_to_string(self.digest_path(id))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// Takes a snapshot with `take` and stores its tar under a new id (written aside, then
    /// renamed into place, so that no reader sees half a tar), or refuses when the store
    /// holds [`MAX_STORED_SNAPSHOTS`] (before taking it) or would pass [`MAX_STORED_BYTES`].
    /// Returns the new id, the stored tar's digest and size, and the snapshot.
    pub(super) fn put(
        &self,
        take: impl FnOnce() -> Result<Snapshot, Problem>,
    ) -> Result<(String, String, u64, Snapshot), Problem> {
        let _w = lock(&self.writing);
        if self.ids().len() >= MAX_STORED_SNAPSHOTS {
            return Err(Problem::with_status(
                StatusCode::INSUFFICIENT_STORAGE,
                format!(
                    "the node keeps at most {MAX_STORED_SNAPSHOTS} snapshots: delete some first"
                ),
            ));
        }
        let snap = take()?;
        // Its tar: the files' bytes, a header and padding per entry.
        let m = snap.manifest();
        let estimate = m.bytes + (m.entries + 2) * 1024;
        let stored = self.bytes();
        if stored.saturating_add(estimate) > MAX_STORED_BYTES {
            return Err(Problem::with_status(
                StatusCode::INSUFFICIENT_STORAGE,
                format!(
                    "the node's snapshots take {stored} of at most {MAX_STORED_BYTES} bytes, \
                     this one about {estimate} more: delete some first"
                ),
            ));
        }
        let id = self.fleet.own(&new_file_id());
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| Problem::internal(&anyhow::anyhow!("creating the snapshot store: {e}")))?;
        let tmp = self.dir.join(format!(".{}.tar.part", self.file_id(&id)));
        let written = (|| -> std::io::Result<(String, u64)> {
            let file = std::fs::File::create(&tmp)?;
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            let digest = snap.write_tar(&mut out)?;
            let file = out.into_inner().map_err(|e| e.into_error())?;
            let size = file.metadata()?.len();
            std::fs::write(self.digest_path(&id), &digest)?;
            std::fs::rename(&tmp, self.tar_path(&id))?;
            Ok((digest, size))
        })();
        let (digest, size) = written.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_file(self.digest_path(&id));
            Problem::internal(&anyhow::anyhow!("writing the snapshot: {e}"))
        })?;
        self.cache(&id, snap.clone());
        Ok((id, digest, size, snap))
    }

    /// The stored tar of `id`, open; `None` when no such snapshot is stored.
    pub(super) fn open(&self, id: &str) -> Option<StoredTar> {
        if !self.valid_id(id) {
            return None;
        }
        let file = std::fs::File::open(self.tar_path(id)).ok()?;
        let size = file.metadata().map_or(0, |m| m.len());
        Some(StoredTar {
            file,
            digest: self.digest(id),
            size,
        })
    }

    /// Every stored snapshot: (id, digest, size of its tar), by id.
    pub(super) fn list(&self) -> Vec<(String, String, u64)> {
        self.ids()
            .into_iter()
            .map(|id| {
                let size = std::fs::metadata(self.tar_path(&id)).map_or(0, |m| m.len());
                (self.digest(&id), size, id)
            })
            .map(|(digest, size, id)| (id, digest, size))
            .collect()
    }

    /// Deletes `id`'s tar and digest; false when no such snapshot is stored.
    pub(super) fn remove(&self, id: &str) -> bool {
        let _w = lock(&self.writing);
        if !self.valid_id(id) || std::fs::remove_file(self.tar_path(id)).is_err() {
            return false;
        }
        let _ = std::fs::remove_file(self.digest_path(id));
        self.forget(id);
        true
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

    fn forget(&self, id: &str) {
        lock(&self.trees).retain(|(i, _)| i != id);
    }
}

/// A snapshot's file name (`snap-` and hex).
fn valid_file_id(id: &str) -> bool {
    id.strip_prefix("snap-")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A new snapshot's file name.
fn new_file_id() -> String {
    format!("snap-{}", crate::ids::hex::<16>())
}
