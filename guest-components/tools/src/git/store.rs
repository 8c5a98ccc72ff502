//! The repository on disk, in git's own formats so that a real git can read what this one
//! writes and the other way round: loose objects (zlib), pack files (`.idx` version 2 and
//! deltas, read only), the index (versions 2 and 3), refs (loose and `packed-refs`) and
//! config files.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha1::{Digest, Sha1};

use super::{Fail, R, fatal};

pub type Id = [u8; 20];
pub const NULL_ID: Id = [0; 20];

pub fn hex(id: &Id) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn parse_hex(s: &str) -> Option<Id> {
    if s.len() != 40 {
        return None;
    }
    let mut id = [0u8; 20];
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(id)
}

/// The id git gives `data` as an object of `kind`.
pub fn hash_object(kind: &str, data: &[u8]) -> Id {
    let mut h = Sha1::new();
    h.update(format!("{kind} {}\0", data.len()).as_bytes());
    h.update(data);
    h.finalize().into()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Commit,
    Tree,
    Blob,
    Tag,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Commit => "commit",
            Kind::Tree => "tree",
            Kind::Blob => "blob",
            Kind::Tag => "tag",
        }
    }
    fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "commit" => Kind::Commit,
            "tree" => Kind::Tree,
            "blob" => Kind::Blob,
            "tag" => Kind::Tag,
            _ => return None,
        })
    }
}

struct Pack {
    idx: Vec<u8>,
    data: Vec<u8>,
    count: usize,
}

impl Pack {
    fn name(&self, i: usize) -> &[u8] {
        &self.idx[8 + 1024 + 20 * i..8 + 1024 + 20 * (i + 1)]
    }
    fn find(&self, id: &Id) -> Option<usize> {
        let fan = |b: usize| -> usize {
            if b == 0 {
                0
            } else {
                be32(&self.idx[8 + 4 * (b - 1)..]) as usize
            }
        };
        let (mut lo, mut hi) = (
            fan(id[0] as usize).min(self.count),
            fan(id[0] as usize + 1).min(self.count),
        );
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.name(mid).cmp(&id[..]) {
                std::cmp::Ordering::Equal => return Some(self.offset(mid)),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        None
    }
    fn offset(&self, i: usize) -> usize {
        let base = 8 + 1024 + 24 * self.count;
        let o = be32(&self.idx[base + 4 * i..]);
        if o & 0x8000_0000 == 0 {
            o as usize
        } else {
            let big = base + 4 * self.count + 8 * (o & 0x7fff_ffff) as usize;
            match self.idx.get(big..big + 8) {
                Some(b) => ((be32(b) as u64) << 32 | be32(&b[4..]) as u64) as usize,
                // Past the end of the pack: `unpack` then reports it corrupt.
                None => usize::MAX,
            }
        }
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

pub struct Repo {
    pub git_dir: PathBuf,
    /// The top of the working tree.
    pub work: PathBuf,
    packs: std::cell::OnceCell<Vec<Pack>>,
    /// Every object id, sorted, read once per command (for abbreviations and prefixes).
    ids: std::cell::RefCell<Option<Vec<Id>>>,
    pub config: Config,
}

impl Repo {
    pub fn open(git_dir: PathBuf, work: PathBuf, overrides: &[(String, String)]) -> R<Repo> {
        let mut config = Config::load(&git_dir);
        for (k, v) in overrides {
            config.values.push((k.clone(), v.clone()));
        }
        if let Some(v) = config.get("core.repositoryformatversion")
            && v.trim() != "0"
            && v.trim() != "1"
        {
            return Err(fatal(format!(
                "Expected git repo version <= 1, found {}",
                v.trim()
            )));
        }
        Ok(Repo {
            git_dir,
            work,
            packs: std::cell::OnceCell::new(),
            ids: std::cell::RefCell::new(None),
            config,
        })
    }

    fn packs(&self) -> &Vec<Pack> {
        self.packs.get_or_init(|| {
            let mut out = Vec::new();
            let dir = self.git_dir.join("objects/pack");
            let Ok(rd) = std::fs::read_dir(&dir) else {
                return out;
            };
            let mut names: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
            names.sort();
            for p in names {
                if p.extension().is_some_and(|e| e == "idx")
                    && let (Ok(idx), Ok(data)) =
                        (std::fs::read(&p), std::fs::read(p.with_extension("pack")))
                    && idx.len() >= 8 + 1024
                    && idx[..8] == [0xff, b't', b'O', b'c', 0, 0, 0, 2]
                {
                    let count = be32(&idx[8 + 1020..]) as usize;
                    // Names, checksums and offsets must all be there (a short file is
                    // skipped, its objects then missing, rather than read past its end).
                    if idx.len() >= 8 + 1024 + 28 * count + 40 {
                        out.push(Pack { idx, data, count });
                    }
                }
            }
            out
        })
    }

    fn loose_path(&self, id: &Id) -> PathBuf {
        let h = hex(id);
        self.git_dir.join("objects").join(&h[..2]).join(&h[2..])
    }

    pub fn has(&self, id: &Id) -> bool {
        self.loose_path(id).exists() || self.packs().iter().any(|p| p.find(id).is_some())
    }

    pub fn read(&self, id: &Id) -> R<(Kind, Vec<u8>)> {
        if let Ok(raw) = std::fs::read(self.loose_path(id)) {
            let mut data = Vec::new();
            flate2::read::ZlibDecoder::new(&raw[..])
                .read_to_end(&mut data)
                .map_err(|_| fatal(format!("loose object {} is corrupt", hex(id))))?;
            let nul = data.iter().position(|&b| b == 0).unwrap_or(0);
            let head = String::from_utf8_lossy(&data[..nul]).into_owned();
            let kind = head
                .split(' ')
                .next()
                .and_then(Kind::parse)
                .ok_or_else(|| fatal(format!("loose object {} is corrupt", hex(id))))?;
            return Ok((kind, data[nul + 1..].to_vec()));
        }
        for p in self.packs() {
            if let Some(off) = p.find(id) {
                return self.unpack(p, off, 0);
            }
        }
        Err(fatal(format!("bad object {}", hex(id))))
    }

    fn unpack(&self, p: &Pack, mut off: usize, depth: usize) -> R<(Kind, Vec<u8>)> {
        let corrupt = || fatal("pack file is corrupt".to_string());
        if depth > 64 || off >= p.data.len() {
            return Err(corrupt());
        }
        let start = off;
        let mut c = p.data[off];
        off += 1;
        let t = (c >> 4) & 7;
        let mut size = (c & 15) as usize;
        let mut shift = 4;
        while c & 0x80 != 0 {
            c = *p.data.get(off).ok_or_else(corrupt)?;
            off += 1;
            size |= ((c & 0x7f) as usize) << shift;
            shift += 7;
        }
        let inflate = |at: usize, size: usize| -> R<Vec<u8>> {
            // The size is the pack's claim: reserve no more than a modest amount up front.
            let mut out = Vec::with_capacity(size.min(1 << 20));
            flate2::bufread::ZlibDecoder::new(p.data.get(at..).ok_or_else(corrupt)?)
                .take(size as u64)
                .read_to_end(&mut out)
                .map_err(|_| corrupt())?;
            Ok(out)
        };
        match t {
            1..=4 => {
                let kind = [Kind::Commit, Kind::Tree, Kind::Blob, Kind::Tag][t as usize - 1];
                Ok((kind, inflate(off, size)?))
            }
            6 => {
                let mut c = *p.data.get(off).ok_or_else(corrupt)?;
                off += 1;
                let mut back = (c & 0x7f) as usize;
                while c & 0x80 != 0 {
                    c = *p.data.get(off).ok_or_else(corrupt)?;
                    off += 1;
                    back = ((back + 1) << 7) | (c & 0x7f) as usize;
                }
                let base_off = start.checked_sub(back).ok_or_else(corrupt)?;
                let (kind, base) = self.unpack(p, base_off, depth + 1)?;
                Ok((
                    kind,
                    apply_delta(&base, &inflate(off, size)?).ok_or_else(corrupt)?,
                ))
            }
            7 => {
                let base_id: Id = p
                    .data
                    .get(off..off + 20)
                    .ok_or_else(corrupt)?
                    .try_into()
                    .map_err(|_| corrupt())?;
                let (kind, base) = self.read(&base_id)?;
                Ok((
                    kind,
                    apply_delta(&base, &inflate(off + 20, size)?).ok_or_else(corrupt)?,
                ))
            }
            _ => Err(corrupt()),
        }
    }

    pub fn read_kind(&self, id: &Id, want: Kind) -> R<Vec<u8>> {
        let (kind, data) = self.read(id)?;
        if kind != want {
            return Err(fatal(format!(
                "object {} is a {}, not a {}",
                hex(id),
                kind.name(),
                want.name()
            )));
        }
        Ok(data)
    }

    pub fn write(&self, kind: Kind, data: &[u8]) -> R<Id> {
        let id = hash_object(kind.name(), data);
        if self.has(&id) {
            return Ok(id);
        }
        let path = self.loose_path(&id);
        let dir = path.parent().unwrap();
        std::fs::create_dir_all(dir).map_err(|e| io_fail(dir, e))?;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        let _ = z.write_all(format!("{} {}\0", kind.name(), data.len()).as_bytes());
        let _ = z.write_all(data);
        let bytes = z.finish().unwrap_or_default();
        if let Some(ids) = self.ids.borrow_mut().as_mut() {
            let at = ids.partition_point(|o| *o < id);
            ids.insert(at, id);
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = dir.join(format!("tmp_obj_{}_{nanos}", &hex(&id)[2..10]));
        std::fs::write(&tmp, bytes).map_err(|e| io_fail(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io_fail(&path, e))?;
        Ok(id)
    }

    /// Every object id the repository holds, sorted (for abbreviations).
    pub fn all_ids(&self) -> std::cell::Ref<'_, Vec<Id>> {
        if self.ids.borrow().is_none() {
            let mut out = Vec::new();
            if let Ok(rd) = std::fs::read_dir(self.git_dir.join("objects")) {
                for d in rd.flatten() {
                    let dn = d.file_name().to_string_lossy().into_owned();
                    if dn.len() != 2 {
                        continue;
                    }
                    if let Ok(files) = std::fs::read_dir(d.path()) {
                        for f in files.flatten() {
                            if let Some(id) =
                                parse_hex(&format!("{dn}{}", f.file_name().to_string_lossy()))
                            {
                                out.push(id);
                            }
                        }
                    }
                }
            }
            for p in self.packs() {
                for i in 0..p.count {
                    out.push(p.name(i).try_into().unwrap());
                }
            }
            out.sort();
            out.dedup();
            *self.ids.borrow_mut() = Some(out);
        }
        std::cell::Ref::map(self.ids.borrow(), |o| o.as_ref().unwrap())
    }

    /// The ids that start with a hex prefix.
    pub fn ids_with_prefix(&self, prefix: &str) -> Vec<Id> {
        let all = self.all_ids();
        let mut lo = [0u8; 20];
        for (i, c) in prefix.as_bytes().chunks(2).enumerate() {
            let h = std::str::from_utf8(c).unwrap_or("0");
            let v = if h.len() == 2 {
                u8::from_str_radix(h, 16).unwrap_or(0)
            } else {
                u8::from_str_radix(h, 16).unwrap_or(0) << 4
            };
            lo[i] = v;
        }
        let start = all.partition_point(|id| *id < lo);
        all[start..]
            .iter()
            .take_while(|id| hex(id).starts_with(prefix))
            .copied()
            .collect()
    }

    /// The shortest unique prefix of `id`, at least git's automatic length (7 for a
    /// repository of fewer than 2^16 objects, growing with its size).
    pub fn abbrev(&self, id: &Id) -> String {
        self.abbrev_len(id, 0)
    }

    /// The shortest unique prefix of `id` of at least `min` hex digits (git's floor of 4),
    /// or with `min` 0 of `core.abbrev`'s or the automatic length.
    pub fn abbrev_len(&self, id: &Id, min: usize) -> String {
        let all = self.all_ids();
        let bits = 64 - (all.len() as u64).leading_zeros() as usize;
        let configured = self
            .config
            .get("core.abbrev")
            .and_then(|v| v.parse::<usize>().ok());
        let mut len = match (min, configured) {
            (0, Some(n)) => n.max(4),
            (0, None) => 7.max(bits.div_ceil(2)),
            (n, _) => n.max(4),
        };
        // Only the sorted neighbours can share a longer prefix.
        let at = all.partition_point(|o| o < id);
        let h = hex(id);
        let common = |o: &Id| {
            hex(o)
                .bytes()
                .zip(h.bytes())
                .take_while(|(a, b)| a == b)
                .count()
        };
        for o in [
            at.checked_sub(1).and_then(|i| all.get(i)),
            all.get(at),
            all.get(at + 1),
        ]
        .into_iter()
        .flatten()
        {
            if o != id {
                len = len.max(common(o) + 1);
            }
        }
        h[..len.min(40)].to_string()
    }

    // ---- refs ----

    pub fn head_ref(&self) -> Option<String> {
        let s = std::fs::read_to_string(self.git_dir.join("HEAD")).ok()?;
        s.strip_prefix("ref: ").map(|r| r.trim().to_string())
    }

    pub fn branch(&self) -> Option<String> {
        self.head_ref()
            .and_then(|r| r.strip_prefix("refs/heads/").map(str::to_string))
    }

    pub fn packed_refs(&self) -> BTreeMap<String, Id> {
        let mut out = BTreeMap::new();
        if let Ok(s) = std::fs::read_to_string(self.git_dir.join("packed-refs")) {
            for l in s.lines() {
                if let Some((id, name)) = l.split_once(' ')
                    && let Some(id) = parse_hex(id)
                {
                    out.insert(name.to_string(), id);
                }
            }
        }
        out
    }

    /// A ref's target (`refs/heads/main`, `HEAD`), following symbolic refs.
    pub fn ref_id(&self, name: &str) -> Option<Id> {
        let mut name = name.to_string();
        for _ in 0..5 {
            match std::fs::read_to_string(self.git_dir.join(&name)) {
                Ok(s) => {
                    let s = s.trim();
                    if let Some(r) = s.strip_prefix("ref: ") {
                        name = r.to_string();
                        continue;
                    }
                    return parse_hex(s);
                }
                Err(_) => return self.packed_refs().get(&name).copied(),
            }
        }
        None
    }

    pub fn head(&self) -> Option<Id> {
        self.ref_id("HEAD")
    }

    pub fn set_ref(&self, name: &str, id: &Id) -> R<()> {
        let p = self.git_dir.join(name);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| io_fail(d, e))?;
        }
        std::fs::write(&p, format!("{}\n", hex(id))).map_err(|e| io_fail(&p, e))
    }

    /// Points HEAD's branch (or a detached HEAD) at `id`.
    pub fn set_head(&self, id: &Id) -> R<()> {
        let r = self.head_ref().unwrap_or_else(|| "HEAD".into());
        self.set_ref(&r, id)
    }

    /// Appends to HEAD's reflog (and, for a commit, its branch's), as git does with
    /// `core.logAllRefUpdates`: `OLD NEW IDENT\tMESSAGE`.
    pub fn reflog(&self, old: Option<Id>, new: &Id, who: &str, msg: &str, branch_too: bool) {
        let line = format!(
            "{} {} {who}\t{msg}\n",
            hex(&old.unwrap_or(NULL_ID)),
            hex(new)
        );
        let mut logs = vec![self.git_dir.join("logs/HEAD")];
        if let Some(r) = self.head_ref().filter(|_| branch_too) {
            logs.push(self.git_dir.join("logs").join(r));
        }
        for p in logs {
            if let Some(d) = p.parent() {
                let _ = std::fs::create_dir_all(d);
            }
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&p)
            {
                let _ = f.write_all(line.as_bytes());
            }
        }
    }

    /// The branch (or commit) HEAD was on before the last checkout, for `checkout -`.
    pub fn previous_checkout(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.git_dir.join("logs/HEAD")).ok()?;
        text.lines().rev().find_map(|l| {
            let msg = l.split_once('\t')?.1;
            let rest = msg.strip_prefix("checkout: moving from ")?;
            Some(rest.rsplit_once(" to ")?.0.to_string())
        })
    }

    pub fn delete_ref(&self, name: &str) -> R<()> {
        let _ = std::fs::remove_file(self.git_dir.join(name));
        let packed = self.packed_refs();
        if packed.contains_key(name) {
            let s = std::fs::read_to_string(self.git_dir.join("packed-refs")).unwrap_or_default();
            let kept: String = s
                .lines()
                .filter(|l| !l.ends_with(&format!(" {name}")))
                .map(|l| format!("{l}\n"))
                .collect();
            let p = self.git_dir.join("packed-refs");
            std::fs::write(&p, kept).map_err(|e| io_fail(&p, e))?;
        }
        Ok(())
    }

    /// Refs under `prefix` (`refs/heads/`), loose and packed, by name.
    pub fn refs(&self, prefix: &str) -> BTreeMap<String, Id> {
        let mut out: BTreeMap<String, Id> = self
            .packed_refs()
            .into_iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .collect();
        fn walk(dir: &Path, name: &str, out: &mut BTreeMap<String, Id>) {
            let Ok(rd) = std::fs::read_dir(dir) else {
                return;
            };
            for e in rd.flatten() {
                let n = format!("{name}{}", e.file_name().to_string_lossy());
                if e.path().is_dir() {
                    walk(&e.path(), &format!("{n}/"), out);
                } else if let Ok(s) = std::fs::read_to_string(e.path())
                    && let Some(id) = parse_hex(s.trim())
                {
                    out.insert(n, id);
                }
            }
        }
        walk(&self.git_dir.join(prefix), prefix, &mut out);
        out
    }

    // ---- objects with structure ----

    pub fn commit(&self, id: &Id) -> R<Commit> {
        Commit::parse(&self.read_kind(id, Kind::Commit)?)
    }

    pub fn tree(&self, id: &Id) -> R<Vec<TreeEntry>> {
        let data = self.read_kind(id, Kind::Tree)?;
        let mut out = Vec::new();
        let mut i = 0;
        while i < data.len() {
            let sp = data[i..]
                .iter()
                .position(|&b| b == b' ')
                .ok_or_else(bad_tree)?
                + i;
            let nul = data[sp..]
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(bad_tree)?
                + sp;
            let mode = u32::from_str_radix(&String::from_utf8_lossy(&data[i..sp]), 8)
                .map_err(|_| bad_tree())?;
            let name = String::from_utf8_lossy(&data[sp + 1..nul]).into_owned();
            let id: Id = data
                .get(nul + 1..nul + 21)
                .ok_or_else(bad_tree)?
                .try_into()
                .unwrap();
            out.push(TreeEntry { mode, name, id });
            i = nul + 21;
        }
        Ok(out)
    }

    /// Every file of a tree, by path.
    pub fn flatten(&self, tree: &Id) -> R<BTreeMap<String, (u32, Id)>> {
        let mut out = BTreeMap::new();
        self.flatten_into(tree, "", &mut out)?;
        Ok(out)
    }

    fn flatten_into(
        &self,
        tree: &Id,
        prefix: &str,
        out: &mut BTreeMap<String, (u32, Id)>,
    ) -> R<()> {
        // Git's `core.maxTreeDepth` default: deeper trees are refused, not recursed into.
        if prefix.matches('/').count() > 4096 {
            return Err(fatal(format!("tree at '{prefix}' is nested too deeply")));
        }
        for e in self.tree(tree)? {
            if !safe_name(&e.name) {
                return Err(Fail {
                    msg: format!("error: invalid path '{prefix}{}'", e.name),
                    code: 128,
                });
            }
            let path = format!("{prefix}{}", e.name);
            if e.mode == 0o40000 {
                self.flatten_into(&e.id, &format!("{path}/"), out)?;
            } else {
                out.insert(path, (e.mode, e.id));
            }
        }
        Ok(())
    }

    /// Writes the trees of a set of files (path -> mode, blob) and returns the root's id.
    pub fn write_tree(&self, files: &BTreeMap<String, (u32, Id)>) -> R<Id> {
        let mut entries: Vec<(String, u32, Id)> = Vec::new();
        let mut subdirs: BTreeMap<String, BTreeMap<String, (u32, Id)>> = BTreeMap::new();
        for (path, (mode, id)) in files {
            match path.split_once('/') {
                Some((dir, rest)) => {
                    subdirs
                        .entry(dir.to_string())
                        .or_default()
                        .insert(rest.to_string(), (*mode, *id));
                }
                None => entries.push((path.clone(), *mode, *id)),
            }
        }
        for (dir, files) in subdirs {
            let id = self.write_tree(&files)?;
            entries.push((dir, 0o40000, id));
        }
        // Git's order: a tree sorts as if its name ended in '/'.
        let key = |e: &(String, u32, Id)| {
            let mut k = e.0.as_bytes().to_vec();
            if e.1 == 0o40000 {
                k.push(b'/');
            }
            k
        };
        entries.sort_by_key(key);
        let mut data = Vec::new();
        for (name, mode, id) in entries {
            data.extend_from_slice(format!("{mode:o} {name}\0").as_bytes());
            data.extend_from_slice(&id);
        }
        self.write(Kind::Tree, &data)
    }

    // ---- index ----

    pub fn index_path(&self) -> PathBuf {
        self.git_dir.join("index")
    }

    pub fn read_index(&self) -> R<Index> {
        let data = match std::fs::read(self.index_path()) {
            Ok(d) => d,
            Err(_) => return Ok(Index::default()),
        };
        let bad = || fatal("index file corrupt".to_string());
        if data.len() < 12 || &data[..4] != b"DIRC" {
            return Err(bad());
        }
        let version = be32(&data[4..]);
        if version == 4 {
            return Err(fatal(
                "index version 4 is not supported here; run `git update-index --index-version 2` where the repository was made"
                    .into(),
            ));
        }
        if !(2..=3).contains(&version) {
            return Err(fatal(format!("bad index version {version}")));
        }
        let count = be32(&data[8..]) as usize;
        let mut entries = BTreeMap::new();
        let mut conflicts: BTreeMap<String, [Option<(u32, Id)>; 3]> = BTreeMap::new();
        let mut i = 12;
        for _ in 0..count {
            let f = |k: usize| -> R<u32> {
                data.get(i + 4 * k..i + 4 * k + 4).map(be32).ok_or_else(bad)
            };
            let stat = Stat {
                ctime: (f(0)?, f(1)?),
                mtime: (f(2)?, f(3)?),
                dev: f(4)?,
                ino: f(5)?,
                uid: f(7)?,
                gid: f(8)?,
                size: f(9)?,
            };
            let mode = f(6)?;
            let id: Id = data
                .get(i + 40..i + 60)
                .ok_or_else(bad)?
                .try_into()
                .unwrap();
            let flags = data
                .get(i + 60..i + 62)
                .map(|b| u16::from_be_bytes([b[0], b[1]]))
                .ok_or_else(bad)?;
            let mut name_at = i + 62;
            if flags & 0x4000 != 0 {
                name_at += 2;
            }
            let nul = data
                .get(name_at..)
                .ok_or_else(bad)?
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(bad)?
                + name_at;
            let path = String::from_utf8_lossy(&data[name_at..nul]).into_owned();
            let len = nul - i;
            i += (len + 8) & !7;
            let stage = (flags >> 12) & 3;
            if stage == 0 {
                entries.insert(path, IndexEntry { mode, id, stat });
            } else {
                conflicts.entry(path).or_insert([None; 3])[stage as usize - 1] = Some((mode, id));
            }
        }
        Ok(Index { entries, conflicts })
    }

    pub fn write_index(&self, index: &Index) -> R<()> {
        let mut data = Vec::new();
        data.extend_from_slice(b"DIRC");
        data.extend_from_slice(&2u32.to_be_bytes());
        // Entries by path, then stage: a resolved path at stage 0, an unresolved one at
        // the stages it has.
        let mut all: Vec<(&String, u16, &IndexEntry)> = Vec::new();
        let conflict_entries: Vec<(&String, u16, IndexEntry)> = index
            .conflicts
            .iter()
            .filter(|(p, _)| !index.entries.contains_key(*p))
            .flat_map(|(p, stages)| {
                stages.iter().enumerate().filter_map(move |(k, s)| {
                    s.map(|(mode, id)| {
                        (
                            p,
                            k as u16 + 1,
                            IndexEntry {
                                mode,
                                id,
                                stat: Stat::default(),
                            },
                        )
                    })
                })
            })
            .collect();
        all.extend(index.entries.iter().map(|(p, e)| (p, 0, e)));
        all.extend(conflict_entries.iter().map(|(p, k, e)| (*p, *k, e)));
        all.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()).then(a.1.cmp(&b.1)));
        data.extend_from_slice(&(all.len() as u32).to_be_bytes());
        for (path, stage, e) in all {
            let start = data.len();
            let s = &e.stat;
            for v in [
                s.ctime.0, s.ctime.1, s.mtime.0, s.mtime.1, s.dev, s.ino, e.mode, s.uid, s.gid,
                s.size,
            ] {
                data.extend_from_slice(&v.to_be_bytes());
            }
            data.extend_from_slice(&e.id);
            data.extend_from_slice(&((path.len().min(0xfff) as u16) | (stage << 12)).to_be_bytes());
            data.extend_from_slice(path.as_bytes());
            let len = data.len() - start;
            let padded = (len + 8) & !7;
            data.resize(start + padded, 0);
        }
        let sum: [u8; 20] = Sha1::digest(&data).into();
        data.extend_from_slice(&sum);
        let p = self.index_path();
        let tmp = self.git_dir.join("index.lock");
        std::fs::write(&tmp, data).map_err(|e| io_fail(&tmp, e))?;
        std::fs::rename(&tmp, &p).map_err(|e| io_fail(&p, e))
    }
}

/// A tree entry name git would check out: not empty, `.`, `..` or `.git` (in any case), and
/// without a slash. A hostile repository's other names are refused, as git refuses them.
pub fn safe_name(name: &str) -> bool {
    !matches!(name, "" | "." | "..") && !name.eq_ignore_ascii_case(".git") && !name.contains('/')
}

/// A path from a patch or the command line that stays inside the working tree.
pub fn safe_path(path: &str) -> bool {
    !path.starts_with('/') && path.split('/').all(safe_name)
}

fn bad_tree() -> Fail {
    fatal("corrupt tree object".into())
}

pub fn io_fail(p: &Path, e: std::io::Error) -> Fail {
    fatal(format!(
        "{}: {}",
        p.display(),
        guest_support::cli::reason(&e)
    ))
}

pub fn apply_delta(base: &[u8], delta: &[u8]) -> Option<Vec<u8>> {
    let mut i = 0;
    let mut varint = || -> Option<usize> {
        let mut v = 0usize;
        let mut shift = 0;
        loop {
            let c = *delta.get(i)?;
            i += 1;
            v |= ((c & 0x7f) as usize) << shift;
            shift += 7;
            if c & 0x80 == 0 {
                return Some(v);
            }
        }
    };
    let src = varint()?;
    let dst = varint()?;
    if src != base.len() {
        return None;
    }
    let mut out = Vec::with_capacity(dst.min(1 << 20));
    while i < delta.len() {
        let op = delta[i];
        i += 1;
        if op & 0x80 != 0 {
            let (mut off, mut size) = (0usize, 0usize);
            for b in 0..4 {
                if op & (1 << b) != 0 {
                    off |= (*delta.get(i)? as usize) << (8 * b);
                    i += 1;
                }
            }
            for b in 0..3 {
                if op & (0x10 << b) != 0 {
                    size |= (*delta.get(i)? as usize) << (8 * b);
                    i += 1;
                }
            }
            if size == 0 {
                size = 0x10000;
            }
            out.extend_from_slice(base.get(off..off + size)?);
        } else if op != 0 {
            out.extend_from_slice(delta.get(i..i + op as usize)?);
            i += op as usize;
        } else {
            return None;
        }
    }
    (out.len() == dst).then_some(out)
}

pub struct TreeEntry {
    pub mode: u32,
    pub name: String,
    pub id: Id,
}

#[derive(Clone, Default, Debug)]
pub struct Stat {
    pub ctime: (u32, u32),
    pub mtime: (u32, u32),
    pub dev: u32,
    pub ino: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u32,
}

impl Stat {
    pub fn of(meta: &std::fs::Metadata) -> Stat {
        let t = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .unwrap_or_default();
        let m = (t.as_secs() as u32, t.subsec_nanos());
        Stat {
            ctime: m,
            mtime: m,
            size: meta.len() as u32,
            ..Stat::default()
        }
    }
}

#[derive(Clone, Debug)]
pub struct IndexEntry {
    pub mode: u32,
    pub id: Id,
    pub stat: Stat,
}

#[derive(Default)]
pub struct Index {
    pub entries: BTreeMap<String, IndexEntry>,
    /// Paths a merge left unresolved: their base, ours and theirs (index stages 1-3).
    pub conflicts: BTreeMap<String, [Option<(u32, Id)>; 3]>,
}

impl Index {
    pub fn files(&self) -> BTreeMap<String, (u32, Id)> {
        self.entries
            .iter()
            .map(|(p, e)| (p.clone(), (e.mode, e.id)))
            .collect()
    }
}

#[derive(Clone)]
pub struct Commit {
    pub tree: Id,
    pub parents: Vec<Id>,
    pub author: String,
    pub committer: String,
    pub message: String,
}

impl Commit {
    fn parse(data: &[u8]) -> R<Commit> {
        let s = String::from_utf8_lossy(data);
        let (head, message) = s.split_once("\n\n").unwrap_or((&s, ""));
        let mut c = Commit {
            tree: NULL_ID,
            parents: Vec::new(),
            author: String::new(),
            committer: String::new(),
            message: message.to_string(),
        };
        for l in head.lines() {
            match l.split_once(' ') {
                Some(("tree", v)) => c.tree = parse_hex(v).unwrap_or(NULL_ID),
                Some(("parent", v)) => c.parents.extend(parse_hex(v)),
                Some(("author", v)) => c.author = v.to_string(),
                Some(("committer", v)) => c.committer = v.to_string(),
                _ => {}
            }
        }
        Ok(c)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!("tree {}\n", hex(&self.tree));
        for p in &self.parents {
            s.push_str(&format!("parent {}\n", hex(p)));
        }
        s.push_str(&format!(
            "author {}\ncommitter {}\n\n{}",
            self.author, self.committer, self.message
        ));
        s.into_bytes()
    }

    /// The first paragraph, its lines joined with spaces (git's `%s`).
    pub fn subject(&self) -> String {
        let mut parts = Vec::new();
        for l in self.message.lines() {
            if l.trim().is_empty() {
                if parts.is_empty() {
                    continue;
                }
                break;
            }
            parts.push(l.trim_end());
        }
        parts.join(" ")
    }

    /// What follows the subject's paragraph (git's `%b`).
    pub fn body(&self) -> String {
        let mut lines = self.message.lines().skip_while(|l| l.trim().is_empty());
        for l in lines.by_ref() {
            if l.trim().is_empty() {
                break;
            }
        }
        let rest: Vec<&str> = lines.skip_while(|l| l.trim().is_empty()).collect();
        if rest.is_empty() {
            String::new()
        } else {
            format!("{}\n", rest.join("\n"))
        }
    }
}

/// `Name <email> 1700000000 +0000` split into its parts.
pub struct Ident<'a> {
    pub name: &'a str,
    pub email: &'a str,
    pub time: i64,
    pub tz: &'a str,
}

pub fn parse_ident(s: &str) -> Ident<'_> {
    let (name, rest) = s.split_once(" <").unwrap_or((s, ""));
    let (email, rest) = rest
        .split_once("> ")
        .unwrap_or((rest.trim_end_matches('>'), ""));
    let (time, tz) = rest.split_once(' ').unwrap_or((rest, "+0000"));
    Ident {
        name,
        email,
        time: time.parse().unwrap_or(0),
        tz,
    }
}

/// Git's config files: the user's (`$HOME/.gitconfig`, `$XDG_CONFIG_HOME/git/config`) then
/// the repository's, later values winning. Keys are `section.name` or
/// `section.subsection.name`, section and name in lower case.
#[derive(Default)]
pub struct Config {
    pub values: Vec<(String, String)>,
}

impl Config {
    pub fn load(git_dir: &Path) -> Config {
        let mut c = Config::default();
        for p in Config::user_files() {
            c.read_file(&p);
        }
        c.read_file(&git_dir.join("config"));
        c
    }

    pub fn user_files() -> Vec<PathBuf> {
        let mut v = Vec::new();
        let xdg = std::env::var("XDG_CONFIG_HOME")
            .ok()
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var("HOME")
                    .ok()
                    .map(|h| Path::new(&h).join(".config"))
            });
        if let Some(x) = xdg {
            v.push(x.join("git/config"));
        }
        if let Ok(h) = std::env::var("HOME") {
            v.push(Path::new(&h).join(".gitconfig"));
        }
        v
    }

    pub fn global_file() -> PathBuf {
        Path::new(&std::env::var("HOME").unwrap_or_else(|_| "/".into())).join(".gitconfig")
    }

    pub fn read_file(&mut self, p: &Path) {
        if let Ok(s) = std::fs::read_to_string(p) {
            self.values.extend(parse_config(&s));
        }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        let key = normal_key(key);
        self.values
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key).map(|v| {
            matches!(
                v.to_ascii_lowercase().as_str(),
                "true" | "yes" | "on" | "1" | ""
            )
        })
    }
}

/// `Section.Sub.Name` -> `section.Sub.name` (subsections keep their case).
pub fn normal_key(key: &str) -> String {
    match (key.find('.'), key.rfind('.')) {
        (Some(a), Some(b)) if a != b => format!(
            "{}{}{}",
            key[..a].to_ascii_lowercase(),
            &key[a..b],
            key[b..].to_ascii_lowercase()
        ),
        _ => key.to_ascii_lowercase(),
    }
}

pub fn parse_config(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for raw in s.lines() {
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(rest) = l.strip_prefix('[') {
            let head = rest.split(']').next().unwrap_or("");
            section = match head.split_once(' ') {
                Some((s, sub)) => format!(
                    "{}.{}",
                    s.to_ascii_lowercase(),
                    sub.trim().trim_matches('"')
                ),
                None => head.to_ascii_lowercase(),
            };
            continue;
        }
        let (name, value) = match l.split_once('=') {
            Some((n, v)) => (n.trim(), config_value(v.trim())),
            None => (l, "true".to_string()),
        };
        out.push((format!("{section}.{}", name.to_ascii_lowercase()), value));
    }
    out
}

fn config_value(v: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(c) => out.push(c),
                None => {}
            },
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    if !v.ends_with('"') {
        let t = out.trim_end().len();
        out.truncate(t);
    }
    out
}

/// Sets (or with `None` removes) `key` in the config file at `path`, keeping the rest.
pub fn set_config(path: &Path, key: &str, value: Option<&str>) -> R<bool> {
    let key = normal_key(key);
    let (section, name) = key.rsplit_once('.').unwrap();
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut current = String::new();
    let mut section_end: Option<usize> = None;
    let mut found: Option<usize> = None;
    for (i, raw) in lines.iter().enumerate() {
        let l = raw.trim();
        if l.starts_with('[') {
            current = parse_config(&format!("{l}\nx=1"))
                .pop()
                .map(|(k, _)| k.trim_end_matches(".x").to_string())
                .unwrap_or_default();
            continue;
        }
        if current == section {
            section_end = Some(i + 1);
            let n = l
                .split('=')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if !l.is_empty() && !l.starts_with('#') && n == name {
                found = Some(i);
            }
        }
    }
    let quoted = |v: &str| {
        if v.starts_with(' ') || v.ends_with(' ') || v.contains(['#', ';', '"', '\\']) {
            format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
        } else {
            v.to_string()
        }
    };
    let header_done = lines.iter().any(|l| {
        let l = l.trim();
        l.starts_with('[')
            && parse_config(&format!("{l}\nx=1"))
                .pop()
                .is_some_and(|(k, _)| k.trim_end_matches(".x") == section)
    });
    match (value, found) {
        (None, None) => return Ok(false),
        (None, Some(i)) => {
            lines.remove(i);
            // A section left with no entries goes too, as git leaves it.
            let header = (0..i).rev().find(|&h| lines[h].trim().starts_with('['));
            let next = (i..lines.len())
                .find(|&h| lines[h].trim().starts_with('['))
                .unwrap_or(lines.len());
            if let Some(h) = header
                && lines[h + 1..next].iter().all(|l| {
                    let t = l.trim();
                    t.is_empty() || t.starts_with('#') || t.starts_with(';')
                })
            {
                lines.drain(h..next);
            }
        }
        (Some(v), Some(i)) => lines[i] = format!("\t{name} = {}", quoted(v)),
        (Some(v), None) => {
            let entry = format!("\t{name} = {}", quoted(v));
            match (header_done, section_end) {
                (true, Some(at)) => lines.insert(at, entry),
                (true, None) => {
                    let at = lines
                        .iter()
                        .position(|l| {
                            parse_config(&format!("{}\nx=1", l.trim()))
                                .pop()
                                .is_some_and(|(k, _)| {
                                    l.trim().starts_with('[') && k.trim_end_matches(".x") == section
                                })
                        })
                        .map_or(lines.len(), |p| p + 1);
                    lines.insert(at, entry);
                }
                (false, _) => {
                    let header = match section.split_once('.') {
                        Some((s, sub)) => format!("[{s} \"{sub}\"]"),
                        None => format!("[{section}]"),
                    };
                    lines.push(header);
                    lines.push(entry);
                }
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    std::fs::write(path, out).map_err(|e| io_fail(path, e))?;
    Ok(true)
}

/// Content of a working-tree file as git stores it (a symlink's target for a link) and its
/// mode.
pub fn read_work_file(path: &Path, filemode: bool) -> std::io::Result<(u32, Vec<u8>)> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        let t = std::fs::read_link(path)?;
        return Ok((0o120000, t.to_string_lossy().into_owned().into_bytes()));
    }
    let data = std::fs::read(path)?;
    Ok((file_mode(path, &meta, filemode), data))
}

/// 100755 for an executable file (when `core.filemode` holds), 100644 otherwise, 120000 for
/// a symlink.
pub fn file_mode(path: &Path, meta: &std::fs::Metadata, filemode: bool) -> u32 {
    if meta.file_type().is_symlink() {
        return 0o120000;
    }
    let exec = filemode
        && guest_support::file_mode(&path.to_string_lossy()).is_some_and(|m| m & 0o100 != 0);
    if exec { 0o100755 } else { 0o100644 }
}
