//! Disk quotas: the bytes and inodes a sandbox may add to its workspace and `/tmp`, enforced
//! in the host's implementation of `wasi:filesystem/types`. A write, truncate-up, create,
//! `mkdir` or `symlink` that would pass the quota fails in the guest with `ENOSPC`
//! (`insufficient-space`), before anything is written; removing files gives their bytes and
//! inodes back.
//!
//! The implementation wraps wasmtime-wasi's own: every call is passed on, and those that
//! grow or shrink the tree are charged first. Sizes are apparent sizes (a sparse file counts
//! whole), so a guest cannot promise itself a terabyte with `ftruncate`.

use std::sync::Arc;

use bytes::Bytes;
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::{
    DynInputStream, DynOutputStream, FsError, FsResult, OutputStream, Pollable, StreamError,
};

use super::process::Stdio;
use crate::limits::Quota;
use crate::linktarget;
use crate::rootfs::{Device, DirView};
use crate::sandbox::{SandboxState, Tree};

/// `wasi:filesystem/types` with the sandbox's quota: see the module documentation.
pub(crate) struct QuotaFs;

impl HasData for QuotaFs {
    type Data<'a> = QuotaFsView<'a>;
}

pub(crate) struct QuotaFsView<'a> {
    pub(crate) fs: WasiFilesystemCtxView<'a>,
    pub(crate) sandbox: Arc<SandboxState>,
    pub(crate) std: &'a mut StdFiles,
    /// The process's own streams, which `StdFiles` stand for.
    pub(crate) stdio: &'a Stdio,
}

/// `/dev/stdin`, `/dev/stdout` and `/dev/stderr` as a process opened them: each is a
/// descriptor of the host's null device in the table (so that `stat` and `close` work as
/// for any file), whose reads and writes go to the process's own stream instead.
///
/// It also keeps which descriptors were opened under an attached volume (see
/// [`crate::volume`]), whose changes are charged to the volume's quota.
#[derive(Default)]
pub(crate) struct StdFiles {
    /// The open ones: descriptor (its table index) and which stream.
    open: Vec<(u32, Device)>,
    /// Descriptors opened under a volume, and which (its index in the sandbox's list).
    in_volume: Vec<(u32, usize)>,
}

impl StdFiles {
    fn of(&self, fd: &Resource<types::Descriptor>) -> Option<Device> {
        let rep = fd.rep();
        self.open.iter().find(|(r, _)| *r == rep).map(|(_, d)| *d)
    }
}

/// The sandbox's directories, shared: every process gets the same descriptors (a live
/// process holds no file descriptor of its own).
impl preopens::Host for QuotaFsView<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let mut out = Vec::new();
        for (dir, name) in self.sandbox.preopens() {
            out.push((self.fs.table.push(Descriptor::Dir(dir))?, name));
        }
        Ok(out)
    }
}

/// A second handle on a table entry, for one call that does not consume it.
fn borrowed(r: &Resource<types::Descriptor>) -> Resource<types::Descriptor> {
    Resource::new_borrow(r.rep())
}

fn no_space() -> FsError {
    ErrorCode::InsufficientSpace.into()
}

/// The size and link count of what `fd` (a file) is now.
fn file_size(fs: &mut WasiFilesystemCtxView<'_>, fd: &Resource<types::Descriptor>) -> Option<u64> {
    match fs.table.get(fd).ok()? {
        // A device (`/dev/null`) never grows: nothing written to it is charged.
        Descriptor::File(f) => f
            .file
            .metadata()
            .ok()
            .map(|m| if m.is_file() { m.len() } else { u64::MAX }),
        Descriptor::Dir(_) => None,
    }
}

/// What `path` under directory `fd` is, without following a final symlink.
fn entry_at(
    fs: &mut WasiFilesystemCtxView<'_>,
    fd: &Resource<types::Descriptor>,
    path: &str,
) -> Option<cap_std::fs::Metadata> {
    match fs.table.get(fd).ok()? {
        // cap-std resolves the path inside the directory, as the call itself will.
        Descriptor::Dir(d) => DirView::of(&d.dir).symlink_metadata(path).ok(),
        Descriptor::File(_) => None,
    }
}

/// Gives back what removing the entry `meta` of `tree` frees: its bytes when it was the
/// last link of a file (or this sandbox's link of a file shared with a snapshot or fork),
/// and its inode.
fn give_back(sandbox: &SandboxState, tree: Tree, meta: &cap_std::fs::Metadata) {
    use cap_std::fs::MetadataExt as _;
    let quota: &Quota = sandbox.quota_of(tree);
    if meta.nlink() <= 1 || (tree == Tree::Own && sandbox.shared.holds(meta)) {
        if meta.is_file() {
            quota.release_bytes(meta.len());
        }
        quota.release_inodes(1);
    }
}

impl types::Host for QuotaFsView<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        types::Host::convert_error_code(&mut self.fs, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        types::Host::filesystem_error_code(&mut self.fs, err)
    }
}

/// Calls `$here` with `$fd` and `$path`, or, for a path that climbs out of the workspace or
/// `/tmp`, with the directory and path it really leads to (see `QuotaFsView::reroute`).
macro_rules! rerouted {
    ($view:ident, $fd:ident, $path:ident, $here:ident ( $($before:expr),* ; $($after:expr),* )) => {
        match $view.reroute(&$fd, &$path)? {
            None => $view.$here($fd, $($before,)* $path, $($after),*).await,
            Some((at, rel)) => {
                let r = $view.$here(borrowed(&at), $($before,)* rel, $($after),*).await;
                $view.fs.table.delete(at)?;
                r
            }
        }
    };
}

/// Runs `$body` with each named descriptor made real: the `/tmp` placeholder every process
/// finds (see `crate::sandbox::Tmp`) becomes the sandbox's own `/tmp`, opened for this call
/// and closed after it.
macro_rules! on_real {
    ($view:ident, [$($fd:ident),+], $body:expr) => {{
        let mut opened = Vec::new();
        $(
            let $fd = match $view.real(&$fd)? {
                Some(t) => {
                    let b = borrowed(&t);
                    opened.push(t);
                    b
                }
                None => $fd,
            };
        )+
        let r = async { $body }.await;
        for t in opened {
            $view.fs.table.delete(t)?;
        }
        r
    }};
}

impl HostDescriptor for QuotaFsView<'_> {
    async fn stat_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        self.reach(
            &fd,
            &path,
            path_flags.contains(types::PathFlags::SYMLINK_FOLLOW),
        )?;
        let at = borrowed(&fd);
        let again = path.clone();
        let mut st = rerouted!(self, at, again, stat_at_here(path_flags;))?;
        // A symlink's size is its target's length, the one the guest reads back.
        if st.type_ == types::DescriptorType::SymbolicLink
            && let Some(link) = self.sandbox_path(&fd, &path)?
            && let Ok(stored) = rerouted!(self, fd, path, readlink_at_here(;))
        {
            st.size = linktarget::decode(&link, &stored).len() as u64;
        }
        Ok(st)
    }

    async fn open_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<types::Descriptor>> {
        self.reach(
            &fd,
            &path,
            path_flags.contains(types::PathFlags::SYMLINK_FOLLOW),
        )?;
        rerouted!(self, fd, path, open_at_here(path_flags; oflags, flags))
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        self.reach(
            &fd,
            &path,
            path_flags.contains(types::PathFlags::SYMLINK_FOLLOW),
        )?;
        rerouted!(self, fd, path, metadata_hash_at_here(path_flags;))
    }

    async fn readlink_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<String> {
        self.reach(&fd, &path, false)?;
        let link = self.sandbox_path(&fd, &path)?;
        let stored = rerouted!(self, fd, path, readlink_at_here(;))?;
        Ok(match link {
            Some(link) => linktarget::decode(&link, &stored),
            None => linktarget::decode_unplaced(&stored),
        })
    }

    async fn advise(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        HostDescriptor::advise(&mut self.fs, fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: Resource<types::Descriptor>) -> FsResult<()> {
        on_real!(self, [fd], {
            HostDescriptor::sync_data(&mut self.fs, fd).await
        })
    }

    async fn get_flags(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<types::DescriptorFlags> {
        on_real!(self, [fd], {
            HostDescriptor::get_flags(&mut self.fs, fd).await
        })
    }

    async fn get_type(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<types::DescriptorType> {
        HostDescriptor::get_type(&mut self.fs, fd).await
    }

    async fn set_size(
        &mut self,
        fd: Resource<types::Descriptor>,
        size: types::Filesize,
    ) -> FsResult<()> {
        let quota = self.writable(&fd)?;
        let before = file_size(&mut self.fs, &fd).unwrap_or(size);
        if size > before && !quota.reserve_bytes(size - before) {
            return Err(no_space());
        }
        let r = HostDescriptor::set_size(&mut self.fs, fd, size).await;
        match (&r, size > before) {
            (Err(_), true) => quota.release_bytes(size - before),
            (Ok(()), false) => quota.release_bytes(before - size),
            _ => {}
        }
        r
    }

    async fn set_times(
        &mut self,
        fd: Resource<types::Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.writable(&fd)?;
        on_real!(self, [fd], {
            // A file shared with a snapshot or fork is copied before a change by its path; one
            // reached only through a descriptor cannot be, so its times stay.
            if let Descriptor::File(f) = self.fs.table.get(&fd)?
                && let Ok(meta) = f.file.metadata()
                && self.sandbox.shared.holds_file(&meta)
            {
                return Err(ErrorCode::NotPermitted.into());
            }
            HostDescriptor::set_times(&mut self.fs, fd, atim, mtim).await
        })
    }

    async fn read(
        &mut self,
        fd: Resource<types::Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        if let Some(device) = self.std.of(&fd) {
            return self.std_read(device, len).await;
        }
        HostDescriptor::read(&mut self.fs, fd, len, offset).await
    }

    async fn write(
        &mut self,
        fd: Resource<types::Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        if let Some(device) = self.std.of(&fd) {
            return self.std_write(device, &buf).await;
        }
        let quota = self.writable(&fd)?;
        let size = file_size(&mut self.fs, &fd).unwrap_or(u64::MAX);
        let end = offset.saturating_add(buf.len() as u64);
        let growth = end.saturating_sub(size);
        if growth > 0 && !quota.reserve_bytes(growth) {
            return Err(no_space());
        }
        let r = HostDescriptor::write(&mut self.fs, fd, buf, offset).await;
        let grown = match &r {
            Ok(n) => offset.saturating_add(*n).saturating_sub(size),
            Err(_) => 0,
        };
        quota.release_bytes(growth.saturating_sub(grown));
        r
    }

    async fn read_directory(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        on_real!(self, [fd], {
            HostDescriptor::read_directory(&mut self.fs, fd).await
        })
    }

    async fn sync(&mut self, fd: Resource<types::Descriptor>) -> FsResult<()> {
        on_real!(self, [fd], HostDescriptor::sync(&mut self.fs, fd).await)
    }

    async fn create_directory_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<()> {
        on_real!(self, [fd], {
            let quota = self.writable(&fd)?;
            self.reach(&fd, &path, false)?;
            if !quota.reserve_inodes(1) {
                return Err(no_space());
            }
            let r = HostDescriptor::create_directory_at(&mut self.fs, fd, path).await;
            if r.is_err() {
                quota.release_inodes(1);
            }
            r
        })
    }

    async fn stat(&mut self, fd: Resource<types::Descriptor>) -> FsResult<types::DescriptorStat> {
        on_real!(self, [fd], HostDescriptor::stat(&mut self.fs, fd).await)
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        on_real!(self, [fd], {
            self.writable(&fd)?;
            let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
            self.reach(&fd, &path, follow)?;
            self.unshare_at(&fd, &path, follow)?;
            HostDescriptor::set_times_at(&mut self.fs, fd, path_flags, path, atim, mtim).await
        })
    }

    async fn link_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: Resource<types::Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        on_real!(self, [fd, new_descriptor], {
            self.same_tree(&fd, &new_descriptor)?;
            let follow = old_path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
            self.reach(&fd, &old_path, follow)?;
            self.reach(&new_descriptor, &new_path, false)?;
            // A second name for the same inode: nothing new to store.
            HostDescriptor::link_at(
                &mut self.fs,
                fd,
                old_path_flags,
                old_path,
                new_descriptor,
                new_path,
            )
            .await
        })
    }

    fn drop(&mut self, fd: Resource<types::Descriptor>) -> wasmtime::Result<()> {
        let rep = fd.rep();
        self.std.open.retain(|(r, _)| *r != rep);
        self.std.in_volume.retain(|(r, _)| *r != rep);
        HostDescriptor::drop(&mut self.fs, fd)
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<()> {
        on_real!(self, [fd], {
            let quota = self.writable(&fd)?;
            // A directory waiting to be filled is not empty.
            self.reach(&fd, &path, false)?;
            let r = HostDescriptor::remove_directory_at(&mut self.fs, fd, path).await;
            if r.is_ok() {
                quota.release_inodes(1);
            }
            r
        })
    }

    async fn rename_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        old_path: String,
        new_fd: Resource<types::Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        on_real!(self, [fd, new_fd], {
            let tree = self.same_tree(&fd, &new_fd)?;
            self.reach(&fd, &old_path, false)?;
            self.reach(&new_fd, &new_path, false)?;
            // A file renamed over another replaces it: the replaced one is freed.
            let replaced = entry_at(&mut self.fs, &new_fd, &new_path).filter(|m| !m.is_dir());
            let r = HostDescriptor::rename_at(&mut self.fs, fd, old_path, new_fd, new_path).await;
            if r.is_ok()
                && let Some(meta) = replaced
            {
                give_back(&self.sandbox, tree, &meta);
            }
            r
        })
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        // An absolute target is stored relative to the link (see `crate::linktarget`); one
        // made through a descriptor that is no placeholder keeps its absolute target, which
        // cap-std refuses.
        let src_path = match self.sandbox_path(&fd, &dest_path)? {
            Some(link) => linktarget::encode(&link, &src_path),
            None if src_path.starts_with('/') => src_path,
            None => linktarget::encode(&[], &src_path),
        };
        on_real!(self, [fd], {
            let quota = self.writable(&fd)?;
            self.reach(&fd, &dest_path, false)?;
            if !quota.reserve_inodes(1) {
                return Err(no_space());
            }
            let r = HostDescriptor::symlink_at(&mut self.fs, fd, src_path, dest_path).await;
            if r.is_err() {
                quota.release_inodes(1);
            }
            r
        })
    }

    async fn unlink_file_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<()> {
        on_real!(self, [fd], {
            self.writable(&fd)?;
            let tree = self.tree_of(&fd);
            self.reach(&fd, &path, false)?;
            let meta = entry_at(&mut self.fs, &fd, &path);
            let r = HostDescriptor::unlink_file_at(&mut self.fs, fd, path).await;
            if r.is_ok()
                && let Some(meta) = meta
            {
                give_back(&self.sandbox, tree, &meta);
            }
            r
        })
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        if let Some(device) = self.std.of(&fd) {
            use wasmtime_wasi::cli::StdinStream as _;
            if device != Device::Stdin {
                return Err(ErrorCode::BadDescriptor.into());
            }
            let stream: DynInputStream = self.stdio.stdin.p2_stream();
            return Ok(self.fs.table.push(stream)?);
        }
        HostDescriptor::read_via_stream(&mut self.fs, fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.counted_stream(fd, Some(offset))
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.counted_stream(fd, None)
    }

    async fn is_same_object(
        &mut self,
        a: Resource<types::Descriptor>,
        b: Resource<types::Descriptor>,
    ) -> wasmtime::Result<bool> {
        on_real!(self, [a, b], {
            HostDescriptor::is_same_object(&mut self.fs, a, b).await
        })
    }

    async fn metadata_hash(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<types::MetadataHashValue> {
        on_real!(self, [fd], {
            HostDescriptor::metadata_hash(&mut self.fs, fd).await
        })
    }
}

impl QuotaFsView<'_> {
    /// The tree `fd` is in: an attached volume's (its directory, or a descriptor opened
    /// under it) or the sandbox's own.
    fn tree_of(&mut self, fd: &Resource<types::Descriptor>) -> Tree {
        if self.sandbox.volumes.is_empty() {
            return Tree::Own;
        }
        let rep = fd.rep();
        if let Some((_, i)) = self.std.in_volume.iter().find(|(r, _)| *r == rep) {
            return Tree::Volume(*i);
        }
        match self.fs.table.get(fd) {
            Ok(Descriptor::Dir(d)) => self
                .sandbox
                .volume_of_dir(&d.dir)
                .map_or(Tree::Own, Tree::Volume),
            _ => Tree::Own,
        }
    }

    /// The quota a change through `fd` is charged to, or `read-only` for a volume attached
    /// read-only.
    fn writable(&mut self, fd: &Resource<types::Descriptor>) -> FsResult<Arc<Quota>> {
        let tree = self.tree_of(fd);
        if self.sandbox.read_only(tree) {
            return Err(ErrorCode::ReadOnly.into());
        }
        Ok(self.sandbox.quota_of(tree).clone())
    }

    /// The tree both descriptors are in, writable; a move or link between two trees (the
    /// workspace and a volume, two volumes) is refused as one across devices (`EXDEV`), which
    /// `mv` answers by copying.
    fn same_tree(
        &mut self,
        a: &Resource<types::Descriptor>,
        b: &Resource<types::Descriptor>,
    ) -> FsResult<Tree> {
        let tree = self.tree_of(a);
        if self.tree_of(b) != tree {
            return Err(ErrorCode::CrossDevice.into());
        }
        self.writable(a)?;
        Ok(tree)
    }

    /// For the placeholder of the workspace or `/tmp`, a descriptor of the sandbox's own
    /// directory for one call (the caller deletes it); `None` for any other descriptor.
    fn real(
        &mut self,
        fd: &Resource<types::Descriptor>,
    ) -> FsResult<Option<Resource<types::Descriptor>>> {
        let swapped = match self.fs.table.get(fd)? {
            Descriptor::Dir(d) => self.sandbox.swap(&d.dir)?,
            Descriptor::File(_) => None,
        };
        match swapped {
            Some(dir) => Ok(Some(self.fs.table.push(Descriptor::Dir(dir))?)),
            None => Ok(None),
        }
    }

    /// The sandbox path (its components) of `path` under `fd` when `fd` is the workspace's
    /// or `/tmp`'s placeholder; `None` for any other descriptor.
    fn sandbox_path(
        &mut self,
        fd: &Resource<types::Descriptor>,
        path: &str,
    ) -> FsResult<Option<Vec<String>>> {
        Ok(match self.fs.table.get(fd)? {
            Descriptor::Dir(d) => self.sandbox.sandbox_path(&d.dir, path),
            Descriptor::File(_) => None,
        })
    }

    /// A path that climbs out of the workspace or `/tmp` through `..`, taken where it
    /// leads (see [`SandboxState::reroute`]): a descriptor for this call only (the caller
    /// deletes it) and the path under it.
    fn reroute(
        &mut self,
        fd: &Resource<types::Descriptor>,
        path: &str,
    ) -> FsResult<Option<(Resource<types::Descriptor>, String)>> {
        let to = match self.fs.table.get(fd)? {
            Descriptor::Dir(d) => self.sandbox.reroute(&d.dir, path)?,
            Descriptor::File(_) => None,
        };
        Ok(match to {
            Some((dir, rel)) => Some((self.fs.table.push(Descriptor::Dir(dir))?, rel)),
            None => None,
        })
    }

    async fn stat_at_here(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        if let Some(device) = self.device_at(&fd, &path) {
            return Ok(types::DescriptorStat {
                // A file of /proc is a regular file of size 0, as Linux shows them.
                type_: if matches!(device, Device::Proc(_)) {
                    types::DescriptorType::RegularFile
                } else {
                    types::DescriptorType::CharacterDevice
                },
                link_count: 1,
                size: 0,
                data_access_timestamp: None,
                data_modification_timestamp: None,
                status_change_timestamp: None,
            });
        }
        HostDescriptor::stat_at(&mut self.fs, fd, path_flags, path).await
    }

    async fn open_at_here(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<types::Descriptor>> {
        if let Some(device) = self.device_at(&fd, &path) {
            return self.open_device(device, oflags, flags);
        }
        let creates = oflags.contains(types::OpenFlags::CREATE);
        let truncates = oflags.contains(types::OpenFlags::TRUNCATE);
        let tree = self.tree_of(&fd);
        let quota = self.sandbox.quota_of(tree).clone();
        if truncates || flags.contains(types::DescriptorFlags::WRITE) {
            if self.sandbox.read_only(tree) {
                return Err(ErrorCode::ReadOnly.into());
            }
            let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
            self.unshare_at(&fd, &path, follow)?;
        }
        let existing = if creates || truncates {
            entry_at(&mut self.fs, &fd, &path)
        } else {
            None
        };
        let new_inode = creates && existing.is_none();
        if new_inode && self.sandbox.read_only(tree) {
            return Err(ErrorCode::ReadOnly.into());
        }
        if new_inode && !quota.reserve_inodes(1) {
            return Err(no_space());
        }
        let r = HostDescriptor::open_at(&mut self.fs, fd, path_flags, path, oflags, flags).await;
        match &r {
            Err(_) if new_inode => quota.release_inodes(1),
            Ok(_) if truncates => {
                if let Some(meta) = existing.filter(|m| m.is_file()) {
                    quota.release_bytes(meta.len());
                }
            }
            _ => {}
        }
        if let (Ok(opened), Tree::Volume(i)) = (&r, tree) {
            self.std.in_volume.push((opened.rep(), i));
        }
        r
    }

    async fn metadata_hash_at_here(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        if let Some(device) = self.device_at(&fd, &path) {
            let (lower, upper) = device.identity();
            return Ok(types::MetadataHashValue { lower, upper });
        }
        HostDescriptor::metadata_hash_at(&mut self.fs, fd, path_flags, path).await
    }

    async fn readlink_at_here(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<String> {
        HostDescriptor::readlink_at(&mut self.fs, fd, path).await
    }

    /// Fills the workspace's directories on the way of `path` under `fd`, or where it
    /// really leads when it climbs out (see `crate::cow::Shared::reach`).
    fn reach(
        &mut self,
        fd: &Resource<types::Descriptor>,
        path: &str,
        follow: bool,
    ) -> FsResult<()> {
        if !self.sandbox.shared.waits() || self.tree_of(fd) != Tree::Own {
            return Ok(());
        }
        if let Descriptor::Dir(d) = self.fs.table.get(fd)? {
            let (dir, rel) = match self.sandbox.reroute(&d.dir, path)? {
                Some((to, rel)) => (to.dir, rel),
                None => (d.dir.clone(), path.to_string()),
            };
            // A volume is never a snapshot's: nothing in it waits to be filled.
            if self.sandbox.volume_of_dir(&dir).is_some() {
                return Ok(());
            }
            self.sandbox
                .shared
                .reach(&DirView::of(&dir), std::path::Path::new(&rel), follow)
                .map_err(FsError::from)?;
        }
        Ok(())
    }

    /// Makes the file `path` under `fd` private to this sandbox before it is changed (see
    /// `crate::cow`).
    fn unshare_at(
        &mut self,
        fd: &Resource<types::Descriptor>,
        path: &str,
        follow: bool,
    ) -> FsResult<()> {
        if self.tree_of(fd) != Tree::Own {
            return Ok(());
        }
        if let Descriptor::Dir(d) = self.fs.table.get(fd)? {
            let dir = DirView::of(&d.dir);
            let root = self.sandbox.workspace_view()?;
            self.sandbox
                .shared
                .unshare(&root, &dir, std::path::Path::new(path), follow)
                .map_err(FsError::from)?;
        }
        Ok(())
    }

    /// The device of the sandbox's read-only root that `path` under `fd` names, if any.
    fn device_at(&mut self, fd: &Resource<types::Descriptor>, path: &str) -> Option<Device> {
        let root = self.sandbox.root.as_ref()?;
        match self.fs.table.get(fd).ok()? {
            // Only the root tree is read-only; the workspace and `/tmp` never name a device.
            Descriptor::Dir(d) if d.perms.write_not_permitted() => root.device_at(&d.dir, path),
            _ => None,
        }
    }

    /// Opens the host's device for a guest, with the access it asked for.
    fn open_device(
        &mut self,
        device: Device,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<types::Descriptor>> {
        use wasmtime_wasi::{FsPerms, OpenMode};
        if oflags.contains(types::OpenFlags::DIRECTORY) {
            return Err(ErrorCode::NotDirectory.into());
        }
        if oflags.contains(types::OpenFlags::CREATE | types::OpenFlags::EXCLUSIVE) {
            return Err(ErrorCode::Exist.into());
        }
        if device.is_std() {
            return self.open_std(device, flags);
        }
        let read = flags.contains(types::DescriptorFlags::READ);
        let write = flags.contains(types::DescriptorFlags::WRITE);
        let file = match device {
            Device::Proc(f) => {
                if write || oflags.contains(types::OpenFlags::TRUNCATE) {
                    return Err(ErrorCode::Access.into());
                }
                let text = crate::procfs::content(f, &self.sandbox.machine_facts());
                crate::procfs::file_of(&text).map_err(FsError::from)?
            }
            _ => device.open(read, write).map_err(FsError::from)?,
        };
        let mut mode = OpenMode::empty();
        if read || !write {
            mode |= OpenMode::READ;
        }
        let perms = if write {
            mode |= OpenMode::WRITE;
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        let file = wasmtime_wasi::filesystem::File::new(file, perms, mode, true);
        Ok(self.fs.table.push(Descriptor::File(file))?)
    }

    /// The process's own output stream a `/dev/stdout` or `/dev/stderr` descriptor writes
    /// to.
    fn std_sink(&self, device: Device) -> FsResult<&crate::io::OutputSink> {
        match device {
            Device::Stdout => Ok(&self.stdio.stdout),
            Device::Stderr => Ok(&self.stdio.stderr),
            _ => Err(ErrorCode::BadDescriptor.into()),
        }
    }

    async fn std_read(&mut self, device: Device, len: u64) -> FsResult<(Vec<u8>, bool)> {
        use tokio::io::AsyncReadExt as _;
        use wasmtime_wasi::cli::StdinStream as _;
        if device != Device::Stdin {
            return Err(ErrorCode::BadDescriptor.into());
        }
        let mut buf = vec![0; len.min(1 << 20) as usize];
        let mut stream = std::pin::Pin::from(self.stdio.stdin.async_stream());
        let n = stream.read(&mut buf).await.map_err(FsError::from)?;
        buf.truncate(n);
        Ok((buf, n == 0 && len > 0))
    }

    async fn std_write(&mut self, device: Device, buf: &[u8]) -> FsResult<types::Filesize> {
        let sink = self.std_sink(device)?.clone();
        sink.write_all(buf).await.map_err(FsError::from)?;
        Ok(buf.len() as u64)
    }

    /// Opens `/dev/stdin`, `/dev/stdout` or `/dev/stderr`: a placeholder descriptor whose
    /// reads and writes go to the process's stream.
    fn open_std(
        &mut self,
        device: Device,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<types::Descriptor>> {
        use wasmtime_wasi::{FsPerms, OpenMode};
        let write = flags.contains(types::DescriptorFlags::WRITE);
        if write == (device == Device::Stdin) {
            // Written stdin or read stdout: what Linux gives for a pipe's wrong end.
            return Err(ErrorCode::Access.into());
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map_err(FsError::from)?;
        let (mode, perms) = if write {
            (OpenMode::WRITE, FsPerms::ReadWrite)
        } else {
            (OpenMode::READ, FsPerms::ReadOnly)
        };
        let file = wasmtime_wasi::filesystem::File::new(file, perms, mode, true);
        let fd = self.fs.table.push(Descriptor::File(file))?;
        self.std.open.push((fd.rep(), device));
        Ok(fd)
    }

    /// wasmtime-wasi's stream for `fd`, replaced in the table by one that charges growth.
    fn counted_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: Option<u64>,
    ) -> FsResult<Resource<DynOutputStream>> {
        if let Some(device) = self.std.of(&fd) {
            use wasmtime_wasi::cli::StdoutStream as _;
            let stream: DynOutputStream = self.std_sink(device)?.p2_stream();
            return Ok(self.fs.table.push(stream)?);
        }
        let quota = self.writable(&fd)?;
        let file = match self.fs.table.get(&fd)? {
            Descriptor::File(f) => f.file.clone(),
            Descriptor::Dir(_) => return Err(ErrorCode::IsDirectory.into()),
        };
        let stream = match offset {
            Some(o) => HostDescriptor::write_via_stream(&mut self.fs, fd, o)?,
            None => HostDescriptor::append_via_stream(&mut self.fs, fd)?,
        };
        if file.metadata().is_ok_and(|m| !m.is_file()) {
            // A device: what is written to it takes no space.
            return Ok(stream);
        }
        let inner = self.fs.table.delete(stream)?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let counted = CountedOutput {
            inner,
            quota,
            file,
            position: offset,
            charged_end: size,
        };
        let stream: DynOutputStream = Box::new(counted);
        Ok(self.fs.table.push(stream)?)
    }
}

impl HostDirectoryEntryStream for QuotaFsView<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        HostDirectoryEntryStream::read_directory_entry(&mut self.fs, stream).await
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        HostDirectoryEntryStream::drop(&mut self.fs, stream)
    }
}

/// A file's output stream that charges the bytes it adds past the file's end.
struct CountedOutput {
    inner: DynOutputStream,
    quota: Arc<Quota>,
    file: Arc<std::fs::File>,
    /// Where the next write lands; `None` for an append stream (always at the end).
    position: Option<u64>,
    /// The file's end as far as this stream has charged it.
    charged_end: u64,
}

impl CountedOutput {
    /// Charges `len` bytes written at the current position, or refuses them.
    fn charge(&mut self, len: usize) -> Result<(), StreamError> {
        let start = match self.position {
            Some(p) => p,
            None => self
                .file
                .metadata()
                .map(|m| m.len())
                .unwrap_or(self.charged_end)
                .max(self.charged_end),
        };
        let end = start.saturating_add(len as u64);
        let growth = end.saturating_sub(self.charged_end);
        if growth > 0 && !self.quota.reserve_bytes(growth) {
            let e = std::io::Error::from_raw_os_error(libc::ENOSPC);
            return Err(StreamError::LastOperationFailed(e.into()));
        }
        self.charged_end = self.charged_end.max(end);
        if let Some(p) = &mut self.position {
            *p = end;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Pollable for CountedOutput {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[async_trait::async_trait]
impl OutputStream for CountedOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.charge(bytes.len())?;
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        self.inner.check_write()
    }

    async fn blocking_write_and_flush(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.charge(bytes.len())?;
        self.inner.blocking_write_and_flush(bytes).await
    }

    async fn write_ready(&mut self) -> Result<usize, StreamError> {
        self.inner.write_ready().await
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}
