//! Templates: named snapshots an operator builds once and sandboxes start from by name.
//!
//! `wasbox template build NAME` makes one from a snapshot tar (`wasbox run --snapshot-out`, a
//! worker API snapshot) or from a short manifest (files copied from the host, commands run in
//! a sandbox, its environment and mount point); `wasbox template ls` and `rm` list and delete
//! them. They live in `<state_dir>/templates` as `<NAME>.tar` beside `<NAME>.sha256` (the
//! tar's digest when it was written, checked when it is read). A node reads a template the
//! first time a sandbox names it (the worker API's `image`, E2B's `templateID`, after the
//! node's own images) and keeps its frozen tree in memory: every sandbox made from it then
//! starts as a restored snapshot does, its files shared copy-on-write.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Deserialize;
use wasbox_runtime::{JobSpec, Limits, Runtime, SandboxConfig, Snapshot, TarLimits};

/// The label a template's snapshot carries: its name.
pub const LABEL_TEMPLATE: &str = "wasbox.template";

/// The label holding a template's start command (see [`start_command`]).
pub const LABEL_START: &str = "wasbox.template.start";

/// How much of a start command's output is kept (its end), to be logged when it ends.
const START_OUTPUT_KEPT: usize = 4096;

/// Most templates a node keeps in memory at once (the least recently used are read again
/// from disk when named).
const CACHED: usize = 16;

/// A node's templates: see the module documentation.
pub struct Templates {
    dir: PathBuf,
    /// Frozen trees of the templates read so far, newest use first.
    loaded: Mutex<Vec<(String, Snapshot)>>,
}

/// A stored template, as `template ls` and the listing show it.
#[derive(Debug, serde::Serialize)]
pub struct TemplateInfo {
    pub name: String,
    pub digest: String,
    pub size_bytes: u64,
}

/// Whether `name` may name a template: 1 to 63 of `a-z 0-9 . _ -`, starting with a letter or
/// digit (so that it is a file name of its own, never `..` or a path).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = (1..=63).contains(&name.len())
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a template name: 1 to 63 of a-z, 0-9, `.`, `_` and `-`, starting \
             with a letter or digit"
        ))
    }
}

impl Templates {
    /// The templates under `state_dir`.
    pub fn at(state_dir: &Path) -> Templates {
        Templates {
            dir: state_dir.join("templates"),
            loaded: Mutex::new(Vec::new()),
        }
    }

    fn tar_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.tar"))
    }

    fn digest_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.sha256"))
    }

    /// Whether a template of that name is stored.
    pub fn exists(&self, name: &str) -> bool {
        check_name(name).is_ok() && self.tar_path(name).is_file()
    }

    /// Stores `snapshot` as template `name`, replacing one of the same name (written aside,
    /// then renamed into place: a node reading it sees the old one or the new one).
    pub fn save(&self, name: &str, snapshot: &Snapshot) -> anyhow::Result<TemplateInfo> {
        check_name(name).map_err(anyhow::Error::msg)?;
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let tmp = self
            .dir
            .join(format!(".{name}.{}.part", crate::ids::hex::<8>()));
        let written = (|| -> anyhow::Result<(String, u64)> {
            let file = std::fs::File::create(&tmp)?;
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            let digest = snapshot.write_tar(&mut out)?;
            let file = out.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            let size = file.metadata()?.len();
            std::fs::write(self.digest_path(name), &digest)?;
            std::fs::rename(&tmp, self.tar_path(name))?;
            Ok((digest, size))
        })();
        let (digest, size_bytes) = written.inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })?;
        self.forget(name);
        Ok(TemplateInfo {
            name: name.to_string(),
            digest,
            size_bytes,
        })
    }

    /// Every stored template, by name.
    pub fn list(&self) -> Vec<TemplateInfo> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut all: Vec<TemplateInfo> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.strip_suffix(".tar")?.to_string();
                check_name(&name).ok()?;
                let size_bytes = e.metadata().ok()?.len();
                let digest = std::fs::read_to_string(self.digest_path(&name))
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                Some(TemplateInfo {
                    name,
                    digest,
                    size_bytes,
                })
            })
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Deletes template `name`; false when there is none. Sandboxes made from it keep their
    /// files.
    pub fn remove(&self, name: &str) -> anyhow::Result<bool> {
        check_name(name).map_err(anyhow::Error::msg)?;
        match std::fs::remove_file(self.tar_path(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e).context(format!("removing template `{name}`")),
        }
        let _ = std::fs::remove_file(self.digest_path(name));
        self.forget(name);
        Ok(true)
    }

    fn forget(&self, name: &str) {
        lock(&self.loaded).retain(|(n, _)| n != name);
    }

    /// Template `name`'s frozen tree (read from disk the first time, its digest checked),
    /// or `None` when there is no such template.
    pub fn get(&self, runtime: &Runtime, name: &str) -> anyhow::Result<Option<Snapshot>> {
        if check_name(name).is_err() {
            return Ok(None);
        }
        {
            let mut loaded = lock(&self.loaded);
            if let Some(i) = loaded.iter().position(|(n, _)| n == name) {
                let entry = loaded.remove(i);
                let snap = entry.1.clone();
                loaded.insert(0, entry);
                return Ok(Some(snap));
            }
        }
        let file = match std::fs::File::open(self.tar_path(name)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).context(format!("opening template `{name}`")),
        };
        let recorded = std::fs::read_to_string(self.digest_path(name))
            .unwrap_or_default()
            .trim()
            .to_string();
        let snap = runtime
            .read_snapshot(
                std::io::BufReader::with_capacity(1 << 20, file),
                operator_tar_limits(),
            )
            .with_context(|| format!("reading template `{name}`"))?;
        if snap.digest() != Some(recorded.as_str()) {
            bail!("template `{name}` is corrupt: its digest does not match the recorded one");
        }
        let mut loaded = lock(&self.loaded);
        loaded.retain(|(n, _)| n != name);
        loaded.insert(0, (name.to_string(), snap.clone()));
        loaded.truncate(CACHED);
        Ok(Some(snap))
    }
}

impl Templates {
    /// Reads the stored templates (as many as are kept in memory), so that the first
    /// sandbox of each starts as fast as the next; one that cannot be read is logged and
    /// read again when named.
    pub fn preload(&self, runtime: &Runtime) {
        for t in self.list().into_iter().take(CACHED) {
            match self.get(runtime, &t.name) {
                Ok(_) => tracing::info!(template = %t.name, "template read"),
                Err(e) => {
                    tracing::warn!(template = %t.name, error = %format!("{e:#}"), "template not read")
                }
            }
        }
    }
}

/// How a template's tar is read: the operator's own file (given to `template build`, or
/// written by it and checked by its digest), so a symlink leaving the workspace (a venv's
/// python) is kept, as in a node's snapshots; a sandbox's disk limits bound it.
fn operator_tar_limits() -> TarLimits {
    let defaults = Limits::default();
    TarLimits {
        max_bytes: defaults.disk_bytes,
        max_entries: defaults.disk_inodes,
        links_may_leave: true,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A template's recipe (YAML or JSON): files copied from the host into the workspace, then
/// commands run in it in order, with the template's environment and mount point.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// Where the workspace appears (default `/workspace`; E2B's sandboxes use `/home/user`).
    pub mount: Option<String>,
    /// Variables every process of a sandbox made from it gets.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Host files or directories (relative to the recipe's directory) and where they go in
    /// the workspace (relative to it).
    #[serde(default)]
    pub files: Vec<CopyFile>,
    /// Shell commands run in the workspace in order; the first that fails fails the build.
    #[serde(default)]
    pub run: Vec<String>,
    /// Seconds each command may take (default 600).
    pub timeout_seconds: Option<u64>,
    /// The working directory of the commands above and of every sandbox made from it
    /// (relative to the workspace, or an absolute path inside it; made when missing).
    pub workdir: Option<String>,
    /// A shell command started in the background of every session and E2B sandbox made from
    /// it (a server, a watcher), in the working directory; the sandbox is answered for once
    /// it has started, and it is stopped when the sandbox ends.
    pub start: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CopyFile {
    pub from: PathBuf,
    pub to: String,
}

/// `to` as a path inside the workspace: relative, no `..`, not empty.
fn workspace_path(to: &str) -> anyhow::Result<String> {
    let p = Path::new(to);
    if to.is_empty() || p.is_absolute() {
        bail!("files: `to: {to}` must be a path relative to the workspace");
    }
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => parts.push(n.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => bail!("files: `to: {to}` must stay inside the workspace (no `..`)"),
        }
    }
    if parts.is_empty() {
        bail!("files: `to: {to}` names the workspace itself");
    }
    Ok(parts.join("/"))
}

/// Builds a template's snapshot from `recipe` (read from a file in `base`): a fresh sandbox,
/// the files copied in, the commands run. Every path is checked before anything is copied.
pub async fn build_from_recipe(
    runtime: &Runtime,
    recipe: Recipe,
    base: &Path,
    name: &str,
) -> anyhow::Result<Snapshot> {
    let copies: Vec<(PathBuf, String)> = recipe
        .files
        .iter()
        .map(|f| Ok((base.join(&f.from), workspace_path(&f.to)?)))
        .collect::<anyhow::Result<_>>()?;
    for (k, v) in &recipe.env {
        if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
            bail!("env: `{k}` is not a valid variable");
        }
    }
    let mount = recipe
        .mount
        .clone()
        .unwrap_or_else(|| wasbox_runtime::DEFAULT_MOUNT.to_string());
    let workdir = recipe
        .workdir
        .as_deref()
        .map(|w| workdir_path(w, &mount))
        .transpose()?;
    if let Some(start) = &recipe.start
        && (start.trim().is_empty() || start.contains('\0'))
    {
        bail!("start: `{start}` is not a command");
    }
    let timeout = Duration::from_secs(recipe.timeout_seconds.unwrap_or(600));
    let mut config = SandboxConfig::default()
        .mount(mount.clone())
        .limits(Limits::default().timeout(timeout));
    config.env = recipe.env.clone().into_iter().collect();
    if let Some(w) = &workdir {
        config = config.workdir(w.clone());
    }
    let sandbox = runtime.sandbox(config)?;
    for (from, to) in &copies {
        copy_in(&sandbox, from, to)
            .with_context(|| format!("copying {} to {to}", from.display()))?;
    }
    if let Some(w) = workdir.as_ref().filter(|w| *w != ".") {
        sandbox
            .make_dir(w)
            .map_err(|e| anyhow::anyhow!("workdir: {e}"))?;
    }
    // What the node's egress rules allow is the build's to use (`pip install`).
    sandbox.set_network(wasbox_runtime::NetworkPolicy::Node);
    for command in &recipe.run {
        let out = sandbox.run(JobSpec::shell(command.clone())).await?;
        if out.exit_code != 0 {
            bail!(
                "`{command}` exited with {}: {}",
                out.exit_code,
                tail(&out.stderr, &out.stdout)
            );
        }
    }
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_TEMPLATE.to_string(), name.to_string());
    if let Some(start) = recipe.start {
        labels.insert(LABEL_START.to_string(), start);
    }
    Ok(runtime.snapshot(&sandbox, labels)?)
}

/// `workdir` as a path inside the workspace (relative to it; `.` is the workspace itself),
/// given relative to it or as an absolute path under `mount`.
fn workdir_path(workdir: &str, mount: &str) -> anyhow::Result<String> {
    let mount = mount.trim_end_matches('/');
    let rel = if workdir.starts_with('/') {
        match workdir.strip_prefix(mount) {
            Some("") => ".",
            Some(rest) if rest.starts_with('/') => rest.trim_start_matches('/'),
            _ => bail!("workdir: `{workdir}` must be inside the workspace ({mount})"),
        }
    } else {
        workdir
    };
    if rel.is_empty() || rel.trim_matches('/') == "." || rel.trim_end_matches('/').is_empty() {
        return Ok(".".to_string());
    }
    workspace_path(rel).map_err(|_| {
        anyhow::anyhow!("workdir: `{workdir}` must stay inside the workspace (no `..`)")
    })
}

/// The start command of the template `snapshot` was built from, if it has one.
pub fn start_of(snapshot: &Snapshot) -> Option<String> {
    snapshot.manifest().labels.get(LABEL_START).cloned()
}

/// Starts the start command a session was made with (its [`LABEL_START`] label, see
/// [`Recipe::start`]), if any: once it has started this answers; when it ends, the end of its
/// output is logged with its status.
pub async fn start_command(session: &wasbox_runtime::Session) -> anyhow::Result<()> {
    let Some(command) = session.label(LABEL_START) else {
        return Ok(());
    };
    let tail = Tail::default();
    let spec = JobSpec::shell(command.to_string())
        .stdout(wasbox_runtime::Output::Stream(Box::new(tail.clone())))
        .stderr(wasbox_runtime::Output::Stream(Box::new(tail.clone())));
    let job = session
        .start_background(spec)
        .await
        .with_context(|| format!("the template's start command `{command}` did not start"))?;
    let id = session.id().to_string();
    tokio::spawn(async move {
        let status = match job.await {
            Ok(Ok(out)) => out.exit_code.to_string(),
            Ok(Err(e)) => format!("{e:#}"),
            Err(e) => e.to_string(),
        };
        let output = String::from_utf8_lossy(&lock(&tail.0)).into_owned();
        tracing::info!(session_id = %id, %status, %output, "the template's start command ended");
    });
    Ok(())
}

/// The last [`START_OUTPUT_KEPT`] bytes written to it.
#[derive(Clone, Default)]
struct Tail(std::sync::Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Tail {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut kept = lock(&self.0);
        kept.extend_from_slice(&buf[buf.len().saturating_sub(START_OUTPUT_KEPT)..]);
        let over = kept.len().saturating_sub(START_OUTPUT_KEPT);
        kept.drain(..over);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The last lines of what a failed command said.
fn tail(stderr: &str, stdout: &str) -> String {
    let text = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    };
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

/// Copies the host file or directory `from` to `to` in the workspace (modes kept: an
/// executable stays one). Symlinks on the host are refused, not followed.
fn copy_in(sandbox: &wasbox_runtime::Sandbox, from: &Path, to: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        bail!("{} is a symlink: copy what it points to", from.display());
    }
    if let Some((parent, _)) = to.rsplit_once('/') {
        // Made with its missing parents.
        sandbox
            .make_dir(parent)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    if meta.is_dir() {
        sandbox.make_dir(to).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut names: Vec<_> = std::fs::read_dir(from)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<std::io::Result<_>>()?;
        names.sort();
        for n in names {
            let name = n.to_string_lossy();
            copy_in(sandbox, &from.join(&n), &format!("{to}/{name}"))?;
        }
    } else if meta.is_file() {
        let data = std::fs::read(from)?;
        sandbox
            .write_file(to, &data)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    } else {
        bail!("{} is neither a file nor a directory", from.display());
    }
    sandbox
        .set_permissions(to, meta.permissions().mode() & 0o777)
        .map_err(anyhow::Error::msg)?;
    Ok(())
}

/// `wasbox template ...`.
#[derive(clap::Args, Debug)]
pub struct TemplateArgs {
    /// The node's state directory, where its templates live (as `wasbox serve
    /// --state-dir`) [env: WASBOX_STORAGE_STATE_DIR].
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: TemplateCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum TemplateCommand {
    /// Build template NAME from a snapshot tar or from a recipe (YAML or JSON: `mount`,
    /// `env`, `files` [{from, to}], `run` [commands], `timeout_seconds`, `workdir`, `start`).
    Build {
        name: String,
        /// A snapshot tar (`wasbox run --snapshot-out`, a worker API snapshot; plain or
        /// zstd-compressed).
        #[arg(
            long,
            value_name = "FILE",
            conflicts_with = "recipe",
            required_unless_present = "recipe"
        )]
        from_snapshot: Option<PathBuf>,
        /// A recipe file.
        #[arg(long, value_name = "FILE")]
        recipe: Option<PathBuf>,
        #[command(flatten)]
        net: crate::args::NetArgs,
    },
    /// List the templates.
    Ls,
    /// Delete template NAME.
    Rm { name: String },
}

/// Runs `wasbox template ...`; returns the exit code.
pub fn main(args: TemplateArgs) -> anyhow::Result<i32> {
    let state_dir = args
        .state_dir
        .or_else(|| std::env::var_os("WASBOX_STORAGE_STATE_DIR").map(PathBuf::from))
        .unwrap_or_else(crate::worker::config::default_state_dir_of_process);
    let templates = Templates::at(&state_dir);
    match args.command {
        TemplateCommand::Ls => {
            let all = templates.list();
            if all.is_empty() {
                eprintln!("no templates in {}", state_dir.join("templates").display());
            }
            for t in all {
                println!("{}\t{}\t{}", t.name, t.size_bytes, t.digest);
            }
            Ok(0)
        }
        TemplateCommand::Rm { name } => {
            if templates.remove(&name)? {
                Ok(0)
            } else {
                eprintln!("wasbox template rm: no template `{name}`");
                Ok(1)
            }
        }
        TemplateCommand::Build {
            name,
            from_snapshot,
            recipe,
            net,
        } => {
            check_name(&name).map_err(anyhow::Error::msg)?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let egress = wasbox_runtime::EgressConfig::default()
                .allow(wasbox_runtime::net::parse_rules(&net.allow_net).context("--allow-net")?)
                .deny(wasbox_runtime::net::parse_rules(&net.deny_net).context("--deny-net")?)
                .ca_certs(net.ca_cert);
            let started = std::time::Instant::now();
            let info = rt.block_on(async {
                let runtime = Runtime::builder().pool_slots(0).egress(egress).build()?;
                let snapshot = match (&from_snapshot, &recipe) {
                    (Some(file), _) => {
                        let f = std::fs::File::open(file)
                            .with_context(|| format!("opening {}", file.display()))?;
                        runtime
                            .read_snapshot(std::io::BufReader::new(f), operator_tar_limits())
                            .with_context(|| format!("reading the snapshot {}", file.display()))?
                    }
                    (None, Some(file)) => {
                        let text = std::fs::read_to_string(file)
                            .with_context(|| format!("reading {}", file.display()))?;
                        let recipe: Recipe = serde_norway::from_str(&text)
                            .with_context(|| format!("{} is not a recipe", file.display()))?;
                        let base = file
                            .parent()
                            .filter(|p| !p.as_os_str().is_empty())
                            .unwrap_or(Path::new("."));
                        build_from_recipe(&runtime, recipe, base, &name).await?
                    }
                    (None, None) => bail!("give --from-snapshot FILE or --recipe FILE"),
                };
                templates.save(&name, &snapshot)
            })?;
            eprintln!(
                "template `{}` built in {:.1} s: {} bytes, {}",
                info.name,
                started.elapsed().as_secs_f64(),
                info.size_bytes,
                info.digest
            );
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_file_names_of_their_own() {
        for ok in ["py", "data-science", "v1.2_x", "0abc"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "..",
            ".hidden",
            "a/b",
            "A",
            "x y",
            "../etc",
            &"a".repeat(64),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn recipe_paths_stay_inside_the_workspace() {
        assert_eq!(workspace_path("app/./main.py").unwrap(), "app/main.py");
        for bad in ["/etc/passwd", "../x", "a/../../x", "", "."] {
            assert!(workspace_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_workdir_stays_inside_the_workspace() {
        let ok = [
            ("app", "app"),
            ("app/./src/", "app/src"),
            (".", "."),
            ("/workspace", "."),
            ("/workspace/", "."),
            ("/workspace/app", "app"),
        ];
        for (given, want) in ok {
            assert_eq!(workdir_path(given, "/workspace").unwrap(), want, "{given}");
        }
        for bad in [
            "/etc",
            "/workspaces/x",
            "../x",
            "app/../../x",
            "/workspace/../etc",
        ] {
            assert!(workdir_path(bad, "/workspace").is_err(), "{bad}");
        }
    }

    #[test]
    fn a_recipe_refuses_what_it_does_not_know() {
        assert!(serde_norway::from_str::<Recipe>("files: []\nrun: [ls]\n").is_ok());
        assert!(serde_norway::from_str::<Recipe>("starts: x\n").is_err());
        assert!(serde_norway::from_str::<Recipe>("start: x\nworkdir: app\n").is_ok());
    }
}
