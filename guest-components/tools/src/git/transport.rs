//! Git's smart HTTP protocol (version 0/1 over HTTP(S), as `git http-backend` and the
//! hosting services serve it): `clone`, `fetch`, `pull`, `push` and `ls-remote`. Requests go
//! through the host's HTTP client, so the sandbox's network policy decides where they may
//! go. Credentials come from the URL (`https://user:token@host/...`) or `http.extraHeader`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;

use super::cmds::Args;
use super::store::{self, Id, Kind, NULL_ID, hex, parse_hex};
use super::{Git, R, error, fatal};
use crate::net::{Failure, Request, Target, Url, base64, send};

const AGENT: &str = "agent=git/2.47.3";

/// A remote repository's URL, with what requests to it need.
struct Remote {
    url: Url,
    /// The URL as shown in messages (without credentials).
    shown: String,
    headers: Vec<(String, String)>,
}

impl Remote {
    fn new(text: &str, extra_headers: &[String]) -> R<Remote> {
        let url =
            Url::parse(text).map_err(|(_, m)| fatal(format!("unable to access '{text}': {m}")))?;
        let mut headers = vec![
            ("User-Agent".to_string(), "git/2.47.3".to_string()),
            ("Git-Protocol".to_string(), "version=1".to_string()),
        ];
        if let Some((u, p)) = &url.userinfo {
            headers.push((
                "Authorization".into(),
                format!("Basic {}", base64(format!("{u}:{p}").as_bytes())),
            ));
        }
        for h in extra_headers {
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let mut shown = url.clone();
        shown.userinfo = None;
        Ok(Remote {
            shown: shown.to_text().trim_end_matches('/').to_string(),
            url,
            headers,
        })
    }

    /// One request to `PATH` under the repository's URL: (status, body).
    fn call(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&[u8]>,
    ) -> R<Vec<u8>> {
        let base = self
            .url
            .path
            .split('?')
            .next()
            .unwrap_or("/")
            .trim_end_matches('/');
        let full = format!("{base}/{path}");
        let authority = self.url.authority();
        let mut headers = self.headers.clone();
        if let Some(t) = content_type {
            headers.push(("Content-Type".into(), t.into()));
            headers.push(("Accept".into(), t.replace("-request", "-result")));
        }
        if let Some(b) = body {
            headers.push(("Content-Length".into(), b.len().to_string()));
        }
        let req = Request {
            method,
            target: Target {
                https: self.url.https,
                authority: &authority,
                path: &full,
            },
            headers: &headers,
            body,
            deadline: None,
            connect_timeout: None,
        };
        let shown = format!("{}/", self.shown);
        let mut response = send(&req).map_err(|f| self.failure(f))?;
        let mut data = Vec::new();
        while let Some(piece) = response.chunk().map_err(|f| self.failure(f))? {
            data.extend_from_slice(&piece);
        }
        match response.status {
            200 => Ok(data),
            401 if self.url.userinfo.is_none() => Err(fatal(format!(
                "could not read Username for '{}': terminal prompts disabled",
                self.origin()
            ))),
            401 | 403 => Err(fatal(format!("Authentication failed for '{shown}'"))),
            404 => Err(fatal(format!("repository '{shown}' not found"))),
            s => Err(fatal(format!(
                "unable to access '{shown}': The requested URL returned error: {s}"
            ))),
        }
    }

    fn origin(&self) -> String {
        format!(
            "{}://{}",
            if self.url.https { "https" } else { "http" },
            self.url.authority()
        )
    }

    fn failure(&self, f: Failure) -> super::Fail {
        use wasip2::http::types::ErrorCode;
        let host = self.url.host.trim_start_matches('[').trim_end_matches(']');
        let port = self.url.port_or_default();
        let why = match f {
            Failure::Http(ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited) => {
                format!(
                    "Failed to connect to {host} port {port}: blocked by the sandbox network policy"
                )
            }
            Failure::Http(ErrorCode::DnsError(_) | ErrorCode::DnsTimeout) => {
                format!("Could not resolve host: {host}")
            }
            Failure::Http(ErrorCode::ConnectionRefused | ErrorCode::DestinationUnavailable) => {
                format!(
                    "Failed to connect to {host} port {port} after 0 ms: Couldn't connect to server"
                )
            }
            Failure::Http(ErrorCode::TlsCertificateError) => {
                "SSL certificate problem: unable to get local issuer certificate".into()
            }
            Failure::Http(code) => format!("{code:?}"),
            Failure::Timeout => "Operation timed out".into(),
            Failure::Other(m) => m,
        };
        fatal(format!("unable to access '{}/': {why}", self.shown))
    }

    /// The refs the server advertises for `service` and its capabilities.
    fn discover(&self, service: &str) -> R<(Vec<(String, Id)>, String)> {
        let body = self.call("GET", &format!("info/refs?service={service}"), None, None)?;
        let not_git = || {
            fatal(format!(
                "{}/info/refs not valid: is this a git repository?",
                self.shown
            ))
        };
        let lines = pkt_lines(&body).ok_or_else(not_git)?;
        let smart = lines.first().and_then(|l| l.as_deref()).is_some_and(|l| {
            l.strip_suffix(b"\n").unwrap_or(l) == format!("# service={service}").as_bytes()
        });
        if !smart {
            return Err(not_git());
        }
        let mut refs = Vec::new();
        let mut caps = String::new();
        for line in lines.into_iter().flatten() {
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches('\n');
            if text.starts_with("# service=") || text == "version 1" {
                continue;
            }
            let (head, cap) = match text.split_once('\0') {
                Some((h, c)) => (h, Some(c)),
                None => (text, None),
            };
            if let Some(c) = cap {
                caps = c.to_string();
            }
            if let Some((id, name)) = head.split_once(' ')
                && let Some(id) = parse_hex(id)
                && name != "capabilities^{}"
            {
                refs.push((name.to_string(), id));
            }
        }
        Ok((refs, caps))
    }

    fn bad(&self) -> super::Fail {
        fatal(format!(
            "repository '{}/' answered something that is not git's protocol",
            self.shown
        ))
    }

    /// Fetches the objects of `wants` (having `haves`) into `g`'s repository.
    fn fetch_pack(&self, g: &Git, wants: &[Id], haves: &[Id], caps: &str) -> R<usize> {
        if wants.is_empty() {
            return Ok(0);
        }
        let mut ours = vec!["ofs-delta", AGENT];
        if caps.split(' ').any(|c| c == "side-band-64k") {
            ours.insert(0, "side-band-64k");
        }
        let mut req = Vec::new();
        for (i, w) in wants.iter().enumerate() {
            let line = if i == 0 {
                format!("want {} {}\n", hex(w), ours.join(" "))
            } else {
                format!("want {}\n", hex(w))
            };
            pkt(&mut req, line.as_bytes());
        }
        req.extend_from_slice(b"0000");
        for h in haves.iter().take(256) {
            pkt(&mut req, format!("have {}\n", hex(h)).as_bytes());
        }
        pkt(&mut req, b"done\n");
        let body = self.call(
            "POST",
            "git-upload-pack",
            Some("application/x-git-upload-pack-request"),
            Some(&req),
        )?;
        // NAK or ACK lines, then the pack: in side-band packets when asked for.
        let mut at = 0;
        loop {
            let (line, next) = one_pkt(&body, at).ok_or_else(|| self.bad())?;
            match line {
                Some(l) if l.starts_with(b"NAK") || l.starts_with(b"ACK") => at = next,
                _ => break,
            }
        }
        let pack = if ours[0] == "side-band-64k" {
            let mut pack = Vec::new();
            while let Some((line, next)) = one_pkt(&body, at) {
                at = next;
                let Some(l) = line else { break };
                match l.first() {
                    Some(1) => pack.extend_from_slice(&l[1..]),
                    Some(2) => {}
                    Some(3) => {
                        return Err(fatal(format!(
                            "remote error: {}",
                            String::from_utf8_lossy(&l[1..]).trim()
                        )));
                    }
                    _ => return Err(self.bad()),
                }
            }
            pack
        } else {
            body[at..].to_vec()
        };
        unpack_into(g, &pack)
    }
}

/// Appends one pkt-line.
fn pkt(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(format!("{:04x}", data.len() + 4).as_bytes());
    out.extend_from_slice(data);
}

/// The pkt-line at `at`: `Some(data)`, or `None` for a flush; and where the next starts.
fn one_pkt(body: &[u8], at: usize) -> Option<(Option<Vec<u8>>, usize)> {
    let len = usize::from_str_radix(std::str::from_utf8(body.get(at..at + 4)?).ok()?, 16).ok()?;
    if len == 0 || len == 1 || len == 2 {
        return Some((None, at + 4));
    }
    if len < 4 {
        return None;
    }
    Some((Some(body.get(at + 4..at + len)?.to_vec()), at + len))
}

/// Every pkt-line of a body (`None` for flushes).
fn pkt_lines(body: &[u8]) -> Option<Vec<Option<Vec<u8>>>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < body.len() {
        let (line, next) = one_pkt(body, at)?;
        out.push(line);
        at = next;
    }
    Some(out)
}

/// Reads a pack stream and writes each of its objects (deltas resolved) as a loose object.
fn unpack_into(g: &Git, pack: &[u8]) -> R<usize> {
    let corrupt = || fatal("fetch-pack: invalid index-pack output (the pack is corrupt)".into());
    if pack.len() < 32 || &pack[..4] != b"PACK" {
        return Err(corrupt());
    }
    let count = u32::from_be_bytes([pack[8], pack[9], pack[10], pack[11]]) as usize;
    let mut off = 12;
    let mut objects: Vec<(Kind, Vec<u8>)> = Vec::with_capacity(count.min(1 << 16));
    let mut at_offset: HashMap<usize, usize> = HashMap::new();
    let mut by_id: HashMap<Id, usize> = HashMap::new();
    for _ in 0..count {
        let start = off;
        let mut c = *pack.get(off).ok_or_else(corrupt)?;
        off += 1;
        let t = (c >> 4) & 7;
        let mut size = (c & 15) as usize;
        let mut shift = 4;
        while c & 0x80 != 0 {
            c = *pack.get(off).ok_or_else(corrupt)?;
            off += 1;
            size |= ((c & 0x7f) as usize) << shift;
            shift += 7;
        }
        let (kind, data) = match t {
            1..=4 => {
                let (data, used) =
                    inflate(pack.get(off..).ok_or_else(corrupt)?, size).ok_or_else(corrupt)?;
                off += used;
                (
                    [Kind::Commit, Kind::Tree, Kind::Blob, Kind::Tag][t as usize - 1],
                    data,
                )
            }
            6 => {
                let mut c = *pack.get(off).ok_or_else(corrupt)?;
                off += 1;
                let mut back = (c & 0x7f) as usize;
                while c & 0x80 != 0 {
                    c = *pack.get(off).ok_or_else(corrupt)?;
                    off += 1;
                    back = ((back + 1) << 7) | (c & 0x7f) as usize;
                }
                let base = start
                    .checked_sub(back)
                    .and_then(|b| at_offset.get(&b))
                    .ok_or_else(corrupt)?;
                let (delta, used) =
                    inflate(pack.get(off..).ok_or_else(corrupt)?, size).ok_or_else(corrupt)?;
                off += used;
                let (kind, base) = &objects[*base];
                (*kind, store::apply_delta(base, &delta).ok_or_else(corrupt)?)
            }
            7 => {
                let base_id: Id = pack
                    .get(off..off + 20)
                    .ok_or_else(corrupt)?
                    .try_into()
                    .map_err(|_| corrupt())?;
                off += 20;
                let (delta, used) =
                    inflate(pack.get(off..).ok_or_else(corrupt)?, size).ok_or_else(corrupt)?;
                off += used;
                let (kind, base) = match by_id.get(&base_id) {
                    Some(i) => objects[*i].clone(),
                    None => g.repo.read(&base_id)?,
                };
                (kind, store::apply_delta(&base, &delta).ok_or_else(corrupt)?)
            }
            _ => return Err(corrupt()),
        };
        let id = g.repo.write(kind, &data)?;
        at_offset.insert(start, objects.len());
        by_id.insert(id, objects.len());
        objects.push((kind, data));
    }
    Ok(count)
}

/// Inflates one zlib stream of `size` bytes at the start of `data`: (bytes, input used).
fn inflate(data: &[u8], size: usize) -> Option<(Vec<u8>, usize)> {
    let mut z = flate2::Decompress::new(true);
    let mut out = Vec::with_capacity(size + 64);
    loop {
        let before = z.total_in() as usize;
        let status = z
            .decompress_vec(&data[before..], &mut out, flate2::FlushDecompress::Finish)
            .ok()?;
        match status {
            flate2::Status::StreamEnd => break,
            _ if out.len() > size + (1 << 20) => return None,
            _ if z.total_in() as usize == data.len() && out.len() == out.capacity() => {
                out.reserve(4096)
            }
            _ if z.total_in() as usize == data.len() => return None,
            _ => out.reserve(4096),
        }
    }
    (out.len() == size).then_some((out, z.total_in() as usize))
}

/// Builds a pack (no deltas) of `ids`.
fn build_pack(g: &Git, ids: &[Id]) -> R<Vec<u8>> {
    use sha1::Digest;
    let mut pack = Vec::new();
    pack.extend_from_slice(b"PACK");
    pack.extend_from_slice(&2u32.to_be_bytes());
    pack.extend_from_slice(&(ids.len() as u32).to_be_bytes());
    for id in ids {
        let (kind, data) = g.repo.read(id)?;
        let t: u8 = match kind {
            Kind::Commit => 1,
            Kind::Tree => 2,
            Kind::Blob => 3,
            Kind::Tag => 4,
        };
        let mut size = data.len();
        let mut c = (t << 4) | (size & 15) as u8;
        size >>= 4;
        while size > 0 {
            pack.push(c | 0x80);
            c = (size & 0x7f) as u8;
            size >>= 7;
        }
        pack.push(c);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        let _ = z.write_all(&data);
        pack.extend_from_slice(&z.finish().unwrap_or_default());
    }
    let sum = sha1::Sha1::digest(&pack);
    pack.extend_from_slice(&sum);
    Ok(pack)
}

/// Every object reachable from `tips` (commits, trees, blobs, tags), stopping at `stop`.
fn reachable(g: &Git, tips: &[Id], stop: &HashSet<Id>) -> R<Vec<Id>> {
    let mut seen: HashSet<Id> = HashSet::new();
    let mut out = Vec::new();
    let mut commits: Vec<Id> = tips.to_vec();
    let mut trees: Vec<Id> = Vec::new();
    while let Some(c) = commits.pop() {
        if stop.contains(&c) || !seen.insert(c) {
            continue;
        }
        let (kind, data) = g.repo.read(&c)?;
        out.push(c);
        match kind {
            Kind::Commit => {
                let commit = g.repo.commit(&c)?;
                trees.push(commit.tree);
                commits.extend(commit.parents);
            }
            Kind::Tag => {
                let text = String::from_utf8_lossy(&data);
                if let Some(t) = text
                    .lines()
                    .next()
                    .and_then(|l| l.strip_prefix("object "))
                    .and_then(parse_hex)
                {
                    commits.push(t);
                }
            }
            _ => {}
        }
    }
    while let Some(t) = trees.pop() {
        if stop.contains(&t) || !seen.insert(t) {
            continue;
        }
        out.push(t);
        for e in g.repo.tree(&t)? {
            if e.mode == 0o040000 {
                trees.push(e.id);
            } else if e.mode != 0o160000 && !stop.contains(&e.id) && seen.insert(e.id) {
                out.push(e.id);
            }
        }
    }
    Ok(out)
}

/// Trees and blobs of commits reachable from `tips` that are in the repository (what a
/// remote that has `tips` has too).
fn known_objects(g: &Git, tips: &[Id]) -> HashSet<Id> {
    let have: Vec<Id> = tips.iter().copied().filter(|t| g.repo.has(t)).collect();
    reachable(g, &have, &HashSet::new())
        .map(|v| v.into_iter().collect())
        .unwrap_or_default()
}

fn extra_headers(g: Option<&Git>) -> Vec<String> {
    let mut out = Vec::new();
    let mut cfg = store::Config::default();
    for p in store::Config::user_files() {
        cfg.read_file(&p);
    }
    let mut from = |c: &store::Config| {
        for (k, v) in &c.values {
            if k == "http.extraheader" && !v.is_empty() {
                out.push(v.clone());
            }
        }
    };
    from(&cfg);
    if let Some(g) = g {
        from(&g.repo.config);
    }
    out
}

/// The URL of a remote name (or the argument itself when it is a URL).
fn remote_url(g: Option<&Git>, name: &str) -> R<String> {
    if name.contains("://") {
        return Ok(name.to_string());
    }
    g.and_then(|g| g.repo.config.get(&format!("remote.{name}.url")).map(str::to_string))
        .ok_or_else(|| {
            fatal(format!(
                "'{name}' does not appear to be a git repository\nfatal: Could not read from remote repository.\n\nPlease make sure you have the correct access rights\nand the repository exists."
            ))
        })
}

/// `git clone URL [DIR]`.
pub fn clone(args: Vec<String>) -> R<i32> {
    let mut a = Args::new(args);
    let (mut quiet, mut branch, mut pos) = (false, None, Vec::new());
    while let Some(x) = a.next() {
        if let Some(v) = a.value(&x, "-b", "--branch")? {
            branch = Some(v);
            continue;
        }
        if a.value(&x, "--depth", "--depth")?.is_some()
            || a.value(&x, "-o", "--origin")?.is_some()
            || a.value(&x, "--filter", "--filter")?.is_some()
        {
            continue; // a whole clone serves these as well
        }
        match x.as_str() {
            "-q" | "--quiet" => quiet = true,
            "--single-branch"
            | "--no-single-branch"
            | "--progress"
            | "--no-tags"
            | "--recursive"
            | "--recurse-submodules"
            | "--shallow-submodules"
            | "-v"
            | "--verbose" => {}
            "--bare" | "--mirror" => {
                return Err(fatal(
                    "bare repositories are not supported by this git".into(),
                ));
            }
            s if s.starts_with('-') => return Err(super::cmds::unknown_option(s)),
            _ => pos.push(x),
        }
    }
    let Some(url) = pos.first().cloned() else {
        return Err(super::usage("fatal: You must specify a repository to clone.\n\nusage: git clone [<options>] [--] <repo> [<dir>]".into()));
    };
    if !url.contains("://") {
        return Err(fatal(format!(
            "repository '{url}' does not exist (only http:// and https:// repositories can be cloned in this sandbox)"
        )));
    }
    let dir = pos.get(1).cloned().unwrap_or_else(|| {
        let path = url
            .split(['?', '#'])
            .next()
            .unwrap_or_default()
            .trim_end_matches('/');
        let last = path.rsplit('/').next().unwrap_or("repo");
        last.strip_suffix(".git").unwrap_or(last).to_string()
    });
    let target = std::path::Path::new(&dir);
    if target.exists()
        && std::fs::read_dir(target)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(fatal(format!(
            "destination path '{dir}' already exists and is not an empty directory."
        )));
    }
    let remote = Remote::new(&url, &extra_headers(None))?;
    if !quiet {
        eprintln!("Cloning into '{dir}'...");
    }
    let (refs, caps) = remote.discover("git-upload-pack")?;
    let default = caps
        .split(' ')
        .find_map(|c| c.strip_prefix("symref=HEAD:refs/heads/"))
        .map(str::to_string);
    let heads: BTreeMap<String, Id> = refs
        .iter()
        .filter_map(|(n, id)| n.strip_prefix("refs/heads/").map(|b| (b.to_string(), *id)))
        .collect();
    let chosen = match &branch {
        Some(b) => {
            if !heads.contains_key(b) {
                return Err(fatal(format!(
                    "Remote branch {b} not found in upstream origin"
                )));
            }
            Some(b.clone())
        }
        None => default.clone().or_else(|| heads.keys().next().cloned()),
    };
    let init_branch = chosen.clone().unwrap_or_else(|| "main".into());
    super::setup::init(vec![
        "-q".into(),
        "-b".into(),
        init_branch.clone(),
        dir.clone(),
    ])?;
    std::env::set_current_dir(&dir).map_err(|e| fatal(format!("cannot change to '{dir}': {e}")))?;
    let g = Git::open(&[])?;
    let config = g.repo.git_dir.join("config");
    store::set_config(&config, "remote.origin.url", Some(&url))?;
    store::set_config(
        &config,
        "remote.origin.fetch",
        Some("+refs/heads/*:refs/remotes/origin/*"),
    )?;
    if refs.is_empty() {
        eprintln!("warning: You appear to have cloned an empty repository.");
        return Ok(0);
    }
    let mut wants: Vec<Id> = refs
        .iter()
        .filter(|(n, _)| {
            n.starts_with("refs/heads/") || (n.starts_with("refs/tags/") && !n.ends_with("^{}"))
        })
        .map(|(_, id)| *id)
        .collect();
    wants.sort();
    wants.dedup();
    remote.fetch_pack(&g, &wants, &[], &caps)?;
    for (name, id) in &refs {
        if let Some(b) = name.strip_prefix("refs/heads/") {
            g.repo.set_ref(&format!("refs/remotes/origin/{b}"), id)?;
        } else if name.starts_with("refs/tags/") && !name.ends_with("^{}") {
            g.repo.set_ref(name, id)?;
        }
    }
    if let Some(d) = &default {
        let p = g.repo.git_dir.join("refs/remotes/origin/HEAD");
        std::fs::write(&p, format!("ref: refs/remotes/origin/{d}\n"))
            .map_err(|e| store::io_fail(&p, e))?;
    }
    if let Some(b) = &chosen {
        let id = heads[b];
        g.repo.set_ref(&format!("refs/heads/{b}"), &id)?;
        store::set_config(&config, &format!("branch.{b}.remote"), Some("origin"))?;
        store::set_config(
            &config,
            &format!("branch.{b}.merge"),
            Some(&format!("refs/heads/{b}")),
        )?;
        let mut g = Git::open(&[])?;
        super::checkout::reset(&mut g, vec!["--hard".into(), "-q".into()])?;
        g.flush();
    }
    Ok(0)
}

/// `git ls-remote [--heads] [--tags] [REPO]`.
pub fn ls_remote(args: Vec<String>) -> R<i32> {
    let g = Git::open(&[]).ok();
    let (mut heads, mut tags, mut pos) = (false, false, Vec::new());
    for a in args {
        match a.as_str() {
            "--heads" | "-h" | "--branches" | "-b" => heads = true,
            "--tags" | "-t" => tags = true,
            "-q" | "--quiet" | "--refs" => {}
            s if s.starts_with('-') => return Err(super::cmds::unknown_option(s)),
            _ => pos.push(a),
        }
    }
    let name = pos.first().cloned().unwrap_or_else(|| "origin".into());
    let remote = Remote::new(&remote_url(g.as_ref(), &name)?, &extra_headers(g.as_ref()))?;
    let (refs, caps) = remote.discover("git-upload-pack")?;
    let mut out = String::new();
    if !heads
        && !tags
        && let Some(d) = caps.split(' ').find_map(|c| c.strip_prefix("symref=HEAD:"))
        && let Some((_, id)) = refs.iter().find(|(n, _)| n == d)
        && !refs.iter().any(|(n, _)| n == "HEAD")
    {
        out.push_str(&format!("{}\tHEAD\n", hex(id)));
    }
    for (n, id) in &refs {
        let keep = (!heads && !tags)
            || (heads && n.starts_with("refs/heads/"))
            || (tags && n.starts_with("refs/tags/"));
        if keep {
            out.push_str(&format!("{}\t{n}\n", hex(id)));
        }
    }
    print!("{out}");
    Ok(0)
}

/// `git fetch [REMOTE]`: the remote's branches into `refs/remotes/REMOTE/`, and its tags.
pub fn fetch(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut quiet = false;
    let mut pos = Vec::new();
    for a in args {
        match a.as_str() {
            "-q" | "--quiet" => quiet = true,
            "--all" | "--prune" | "-p" | "--tags" | "-t" | "--progress" | "--no-tags" | "-v" => {}
            s if s.starts_with("--depth") => {}
            s if s.starts_with('-') => return Err(super::cmds::unknown_option(s)),
            _ => pos.push(a),
        }
    }
    let name = pos.first().cloned().unwrap_or_else(|| "origin".into());
    fetch_remote(g, &name, quiet).map(|_| 0)
}

fn fetch_remote(g: &mut Git, name: &str, quiet: bool) -> R<()> {
    let url = remote_url(Some(g), name)?;
    let remote = Remote::new(&url, &extra_headers(Some(g)))?;
    let (refs, caps) = remote.discover("git-upload-pack")?;
    let mut wants: Vec<Id> = refs
        .iter()
        .filter(|(n, _)| {
            n.starts_with("refs/heads/") || (n.starts_with("refs/tags/") && !n.ends_with("^{}"))
        })
        .map(|(_, id)| *id)
        .filter(|id| !g.repo.has(id))
        .collect();
    wants.sort();
    wants.dedup();
    let haves: Vec<Id> = g.repo.refs("refs/").values().copied().collect();
    remote.fetch_pack(g, &wants, &haves, &caps)?;
    let prefix = if name.contains("://") {
        None
    } else {
        Some(name)
    };
    let mut lines = Vec::new();
    for (n, id) in &refs {
        if let Some(b) = n.strip_prefix("refs/heads/") {
            let Some(p) = prefix else { continue };
            let local = format!("refs/remotes/{p}/{b}");
            let old = g.repo.ref_id(&local);
            if old == Some(*id) {
                continue;
            }
            g.repo.set_ref(&local, id)?;
            lines.push(match old {
                None => format!(" * [new branch]      {b:<10} -> {p}/{b}"),
                Some(o) => format!(
                    "   {}..{}  {b:<10} -> {p}/{b}",
                    &hex(&o)[..7],
                    &hex(id)[..7]
                ),
            });
        } else if n.starts_with("refs/tags/") && !n.ends_with("^{}") && g.repo.ref_id(n).is_none() {
            g.repo.set_ref(n, id)?;
            let t = &n["refs/tags/".len()..];
            lines.push(format!(" * [new tag]         {t:<10} -> {t}"));
        }
    }
    if !quiet && !lines.is_empty() {
        eprintln!("From {}", remote.shown);
        for l in lines {
            eprintln!("{l}");
        }
    }
    Ok(())
}

/// `git pull [REMOTE [BRANCH]]`: fetch, then merge the branch's upstream.
pub fn pull(g: &mut Git, args: Vec<String>) -> R<i32> {
    let mut quiet = false;
    let mut merge_args = Vec::new();
    let mut pos = Vec::new();
    for a in args {
        match a.as_str() {
            "-q" | "--quiet" => quiet = true,
            "--ff-only" | "--no-ff" | "--ff" | "--no-edit" => merge_args.push(a),
            "--rebase" | "-r" => {
                return Err(fatal(
                    "pull --rebase is not available in this sandbox's git".into(),
                ));
            }
            "--no-rebase" | "--progress" | "--no-progress" | "-v" => {}
            s if s.starts_with('-') => return Err(super::cmds::unknown_option(s)),
            _ => pos.push(a),
        }
    }
    let branch = g
        .repo
        .branch()
        .ok_or_else(|| fatal("You are not currently on a branch.".into()))?;
    let name = pos
        .first()
        .cloned()
        .or_else(|| {
            g.repo
                .config
                .get(&format!("branch.{branch}.remote"))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "origin".into());
    let theirs = pos.get(1).cloned().or_else(|| {
        g.repo
            .config
            .get(&format!("branch.{branch}.merge"))
            .map(|m| m.trim_start_matches("refs/heads/").to_string())
    });
    let Some(theirs) = theirs else {
        return Err(fatal(
            "There is no tracking information for the current branch.\nPlease specify which \
             branch you want to merge with."
                .to_string(),
        ));
    };
    fetch_remote(g, &name, quiet)?;
    if quiet {
        merge_args.push("-q".into());
    }
    merge_args.push(format!("{name}/{theirs}"));
    g.flush();
    super::merge::merge(g, merge_args)
}

/// `git push [-u] [-f] [REMOTE [REFSPEC...]]`.
pub fn push(g: &mut Git, args: Vec<String>) -> R<i32> {
    let (mut set_upstream, mut force, mut quiet, mut tags, mut delete) =
        (false, false, false, false, false);
    let mut pos = Vec::new();
    for a in args {
        match a.as_str() {
            "-u" | "--set-upstream" => set_upstream = true,
            "-f" | "--force" | "--force-with-lease" => force = true,
            "-q" | "--quiet" => quiet = true,
            "--tags" => tags = true,
            "-d" | "--delete" => delete = true,
            "--progress" | "--no-progress" | "-v" | "--verbose" | "--no-verify" => {}
            s if s.starts_with("--force-with-lease=") => force = true,
            s if s.starts_with('-') => return Err(super::cmds::unknown_option(s)),
            _ => pos.push(a),
        }
    }
    let current = g.repo.branch();
    let name = pos.first().cloned().unwrap_or_else(|| {
        current
            .as_ref()
            .and_then(|b| {
                g.repo
                    .config
                    .get(&format!("branch.{b}.remote"))
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "origin".into())
    });
    let url = remote_url(Some(g), &name)?;
    // (local ref or None to delete, remote ref)
    let mut updates: Vec<(Option<String>, String)> = Vec::new();
    for spec in pos.iter().skip(1) {
        let spec = spec.trim_start_matches('+');
        if spec.starts_with('+') {
            force = true;
        }
        let (src, dst) = match spec.split_once(':') {
            Some((s, d)) => (s.to_string(), d.to_string()),
            None => (spec.to_string(), spec.to_string()),
        };
        let full = |n: &str| {
            if n.starts_with("refs/") {
                n.to_string()
            } else if g.repo.ref_id(&format!("refs/tags/{n}")).is_some()
                && g.repo.ref_id(&format!("refs/heads/{n}")).is_none()
            {
                format!("refs/tags/{n}")
            } else {
                format!("refs/heads/{n}")
            }
        };
        if delete || src.is_empty() {
            updates.push((None, full(&dst)));
        } else {
            updates.push((Some(full(&src)), full(&dst)));
        }
    }
    if updates.is_empty() && !tags {
        let Some(b) = &current else {
            return Err(fatal("You are not currently on a branch.".into()));
        };
        let dst = g
            .repo
            .config
            .get(&format!("branch.{b}.merge"))
            .map(str::to_string)
            .unwrap_or_else(|| format!("refs/heads/{b}"));
        updates.push((Some(format!("refs/heads/{b}")), dst));
    }
    if tags {
        for (t, _) in g.repo.refs("refs/tags/") {
            let n = format!("refs/tags/{t}");
            updates.push((Some(n.clone()), n));
        }
    }
    let remote = Remote::new(&url, &extra_headers(Some(g)))?;
    let (refs, caps) = remote.discover("git-receive-pack")?;
    let theirs: HashMap<String, Id> = refs.iter().cloned().collect();
    let mut commands = Vec::new();
    let mut report = Vec::new();
    let mut rejected = false;
    let mut tips = Vec::new();
    for (src, dst) in &updates {
        let old = theirs.get(dst).copied().unwrap_or(NULL_ID);
        let short = dst
            .trim_start_matches("refs/heads/")
            .trim_start_matches("refs/tags/")
            .to_string();
        let new = match src {
            Some(s) => g.repo.ref_id(s).ok_or_else(|| {
                error(format!(
                    "src refspec {} does not match any",
                    s.trim_start_matches("refs/heads/")
                ))
            })?,
            None => NULL_ID,
        };
        if old == new {
            if !tags {
                report.push("Everything up-to-date".to_string());
            }
            continue;
        }
        if old != NULL_ID && new != NULL_ID && !force && !dst.starts_with("refs/tags/") {
            let fast_forward =
                g.repo.has(&old) && super::merge::merge_base(g, &old, &new)? == Some(old);
            if !fast_forward {
                let why = if g.repo.has(&old) {
                    "non-fast-forward"
                } else {
                    "fetch first"
                };
                report.push(format!(" ! [rejected]        {short} -> {short} ({why})"));
                rejected = true;
                continue;
            }
        }
        if dst.starts_with("refs/tags/") && old != NULL_ID && !force {
            report.push(format!(
                " ! [rejected]        {short} -> {short} (already exists)"
            ));
            rejected = true;
            continue;
        }
        let line = match (old == NULL_ID, new == NULL_ID) {
            (_, true) => format!(" - [deleted]         {short}"),
            (true, _) if dst.starts_with("refs/tags/") => {
                format!(" * [new tag]         {short} -> {short}")
            }
            (true, _) => format!(" * [new branch]      {short} -> {short}"),
            _ if force => format!(
                " + {}...{} {short} -> {short} (forced update)",
                &hex(&old)[..7],
                &hex(&new)[..7]
            ),
            _ => format!(
                "   {}..{}  {short} -> {short}",
                &hex(&old)[..7],
                &hex(&new)[..7]
            ),
        };
        report.push(line);
        commands.push((old, new, dst.clone(), src.clone()));
        if new != NULL_ID {
            tips.push(new);
        }
    }
    if !commands.is_empty() {
        let stop = known_objects(g, &theirs.values().copied().collect::<Vec<_>>());
        let objects = reachable(g, &tips, &stop)?;
        let mut body = Vec::new();
        let mut ours = vec!["report-status"];
        if caps.split(' ').any(|c| c == "delete-refs") {
            ours.push("delete-refs");
        }
        ours.push(AGENT);
        for (i, (old, new, dst, _)) in commands.iter().enumerate() {
            let line = if i == 0 {
                format!("{} {} {dst}\0{}\n", hex(old), hex(new), ours.join(" "))
            } else {
                format!("{} {} {dst}\n", hex(old), hex(new))
            };
            pkt(&mut body, line.as_bytes());
        }
        body.extend_from_slice(b"0000");
        if !tips.is_empty() {
            body.extend_from_slice(&build_pack(g, &objects)?);
        }
        let answer = remote.call(
            "POST",
            "git-receive-pack",
            Some("application/x-git-receive-pack-request"),
            Some(&body),
        )?;
        let lines = pkt_lines(&answer).ok_or_else(|| remote.bad())?;
        let texts: Vec<String> = lines
            .into_iter()
            .flatten()
            .map(|l| String::from_utf8_lossy(&l).trim_end().to_string())
            .collect();
        if let Some(u) = texts
            .iter()
            .find(|t| t.starts_with("unpack ") && *t != "unpack ok")
        {
            return Err(error(format!("remote unpack failed: {}", &u[7..])));
        }
        for t in texts.iter().filter(|t| t.starts_with("ng ")) {
            let mut parts = t[3..].splitn(2, ' ');
            let r = parts.next().unwrap_or_default();
            let why = parts.next().unwrap_or_default();
            let short = r.trim_start_matches("refs/heads/");
            report.retain(|l| !l.contains(&format!(" {short} -> ")));
            report.push(format!(" ! [remote rejected] {short} -> {short} ({why})"));
            rejected = true;
        }
        for (_, new, dst, src) in &commands {
            if texts.iter().any(|t| t == &format!("ok {dst}")) {
                if let Some(b) = dst.strip_prefix("refs/heads/")
                    && !name.contains("://")
                {
                    if *new == NULL_ID {
                        let _ = g.repo.delete_ref(&format!("refs/remotes/{name}/{b}"));
                    } else {
                        g.repo.set_ref(&format!("refs/remotes/{name}/{b}"), new)?;
                    }
                }
                if set_upstream
                    && let Some(s) = src.as_deref().and_then(|s| s.strip_prefix("refs/heads/"))
                {
                    let config = g.repo.git_dir.join("config");
                    store::set_config(&config, &format!("branch.{s}.remote"), Some(&name))?;
                    store::set_config(&config, &format!("branch.{s}.merge"), Some(dst))?;
                    report.push(format!(
                        "branch '{s}' set up to track '{name}/{}'.",
                        dst.trim_start_matches("refs/heads/")
                    ));
                }
            }
        }
    }
    if !quiet || rejected {
        let up_to_date = report.iter().all(|l| l == "Everything up-to-date");
        if up_to_date {
            eprintln!("Everything up-to-date");
        } else {
            eprintln!("To {}", remote.shown);
            for l in report
                .iter()
                .filter(|l| *l != "Everything up-to-date" && !l.starts_with("branch '"))
            {
                eprintln!("{l}");
            }
            for l in report.iter().filter(|l| l.starts_with("branch '")) {
                println!("{l}");
            }
        }
    }
    if rejected {
        eprintln!("error: failed to push some refs to '{}'", remote.shown);
        if report
            .iter()
            .any(|l| l.contains("(fetch first)") || l.contains("(non-fast-forward)"))
        {
            eprintln!(
                "hint: Updates were rejected because the tip of your current branch is behind\nhint: its remote counterpart. If you want to integrate the remote changes,\nhint: use 'git pull' before pushing again."
            );
        }
        return Ok(1);
    }
    Ok(0)
}
