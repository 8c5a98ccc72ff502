//! The node's telemetry store: one SQLite database under `${state_dir}/telemetry/` with the
//! schema of CyNodeAI's worker telemetry spec (V1) and wasbox's own table of retained job
//! results.
//!
//! Writes never wait on the disk in a request: they go over a queue bounded in bytes to one
//! writer thread. The writer keeps one transaction open, writes each record into it as it
//! comes, and commits once a second, or at once when someone waits for a record (a durable
//! job result, a flush). A commit writes every page the transaction touched, and records of
//! random ids (`job-{uuid}`) touch a page of each index apiece: the fewer commits, the fewer
//! times each such page is written. Each record the writer takes is also appended to a
//! journal beside the database (`journal`, a JSON line each, one `write` for all the writer
//! took at once, before it sleeps or commits; emptied by each commit): a node whose process
//! is killed before the commit loses nothing the writer took, and the next start commits the
//! journal first. (Like the WAL under `synchronous=NORMAL`, the journal is not synced: a
//! power cut can lose the last second.)
//!
//! Telemetry is best effort: when the queue is full a record is dropped and counted. A job
//! result is not: its sender waits for room. Reads use their own connection (WAL lets them
//! run beside the writer); a reader that must see everything recorded so far flushes first.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use wasbox_runtime::sync::lock;

use anyhow::{Context, Result};
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::rfc3339;

/// Bytes of records queued for the writer at most; past it telemetry is dropped (and
/// counted) and a job result waits for room.
const QUEUE_BYTES: usize = 64 << 20;
/// What a queued record costs besides its strings.
const OP_BYTES: usize = 256;
/// The longest message one log row keeps.
pub const MAX_MESSAGE_BYTES: usize = 16 << 10;

/// The schema of the telemetry spec, word for word, and wasbox's result table.
const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS schema_version (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  version INTEGER NOT NULL,
  applied_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS node_boot (
  boot_id TEXT PRIMARY KEY,
  booted_at TEXT NOT NULL,
  node_slug TEXT NOT NULL,
  build_version TEXT NOT NULL,
  platform_os TEXT NOT NULL,
  platform_arch TEXT NOT NULL,
  kernel_version TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS container_inventory (
  container_id TEXT PRIMARY KEY,
  container_name TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('managed', 'sandbox')),
  runtime TEXT NOT NULL,
  image_ref TEXT NOT NULL,
  created_at TEXT NOT NULL,
  last_seen_at TEXT NOT NULL,
  status TEXT NOT NULL,
  exit_code INTEGER,
  task_id TEXT,
  job_id TEXT,
  labels_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_container_inventory_kind_status
  ON container_inventory(kind, status);
CREATE INDEX IF NOT EXISTS idx_container_inventory_task_job
  ON container_inventory(task_id, job_id);
CREATE TABLE IF NOT EXISTS container_event (
  event_id TEXT PRIMARY KEY,
  occurred_at TEXT NOT NULL,
  container_id TEXT NOT NULL,
  action TEXT NOT NULL,
  status TEXT NOT NULL,
  exit_code INTEGER,
  task_id TEXT,
  job_id TEXT,
  details_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_container_event_container_time
  ON container_event(container_id, occurred_at);
CREATE INDEX IF NOT EXISTS idx_container_event_task_job
  ON container_event(task_id, job_id);
CREATE TABLE IF NOT EXISTS log_event (
  log_id TEXT PRIMARY KEY,
  occurred_at TEXT NOT NULL,
  source_kind TEXT NOT NULL CHECK (source_kind IN ('service', 'container')),
  source_name TEXT NOT NULL,
  container_id TEXT,
  stream TEXT CHECK (stream IN ('stdout', 'stderr')),
  level TEXT,
  message TEXT NOT NULL,
  fields_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_log_event_source_time
  ON log_event(source_kind, source_name, occurred_at);
CREATE INDEX IF NOT EXISTS idx_log_event_container_time
  ON log_event(container_id, occurred_at);
CREATE TABLE IF NOT EXISTS wasbox_job_result (
  job_id TEXT PRIMARY KEY,
  task_id TEXT NOT NULL,
  stored_at TEXT NOT NULL,
  status TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  result_json TEXT
);
CREATE INDEX IF NOT EXISTS idx_wasbox_job_result_stored
  ON wasbox_job_result(stored_at);
"#;
const SCHEMA_VERSION: i64 = 1;

/// How long each kind of record is kept, and how much result data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    pub log_days: u64,
    pub container_event_days: u64,
    pub inventory_days: u64,
    /// Results the orchestrator never confirmed are dropped after this long...
    pub result_hours: u64,
    /// ...or, oldest first, when all of them together pass this many bytes.
    pub result_bytes: u64,
    /// The database's pages in use at most: past it the oldest fifth of the logs, events
    /// and finished sandboxes go (a tenant flooding jobs or output cannot fill the disk).
    pub max_db_bytes: u64,
}

impl Default for Retention {
    /// The telemetry spec's required defaults (7 days of logs, 30 of events and
    /// inventory); results for a week, 512 MiB.
    fn default() -> Self {
        Retention {
            log_days: 7,
            container_event_days: 30,
            inventory_days: 30,
            result_hours: 24 * 7,
            result_bytes: 512 << 20,
            max_db_bytes: 2 << 30,
        }
    }
}

/// A row of `log_event`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct LogRow {
    pub occurred_at: String,
    pub source_kind: Cow<'static, str>,
    pub source_name: String,
    pub container_id: Option<String>,
    pub stream: Option<Cow<'static, str>>,
    pub level: Option<Cow<'static, str>>,
    pub message: String,
    pub fields: serde_json::Value,
}

/// A row of `container_inventory`: what a sandbox is now.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ContainerRow {
    pub container_id: String,
    pub container_name: String,
    pub kind: String,
    pub runtime: String,
    pub image_ref: String,
    pub created_at: String,
    pub last_seen_at: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    #[schema(value_type = Object)]
    pub labels: serde_json::Map<String, serde_json::Value>,
}

/// A row of `container_event`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct EventRow {
    pub occurred_at: String,
    pub container_id: String,
    pub action: Cow<'static, str>,
    pub status: Cow<'static, str>,
    pub exit_code: Option<i64>,
    pub task_id: Option<String>,
    pub job_id: Option<String>,
    pub details: serde_json::Value,
}

/// A retained job: its result (JSON) once it has one.
#[derive(Clone, Debug)]
pub struct StoredResult {
    pub task_id: String,
    pub status: String,
    pub result_json: Option<String>,
}

/// How long the writer's transaction stays open when nobody waits for a record.
const COMMIT_EVERY: Duration = Duration::from_secs(1);
/// How long the writer lets records gather between takes when nobody waits for one.
const GATHER: Duration = Duration::from_millis(10);

/// A record for the writer. The records are also the journal's lines (JSON); what only
/// concerns this process (a waiter, a flush, a retention pass) is not journaled.
#[derive(serde::Serialize, serde::Deserialize)]
enum Op {
    Log(LogRow),
    Container(ContainerRow),
    Event(EventRow),
    Result {
        job_id: String,
        task_id: String,
        status: String,
        json: Option<String>,
        #[serde(skip)]
        done: Option<oneshot::Sender<()>>,
    },
    DeleteResult(String),
    #[serde(skip)]
    Retention,
    #[serde(skip)]
    Vacuum,
    #[serde(skip)]
    Flush(oneshot::Sender<()>),
}

impl Op {
    /// Whether a caller waits for this record to be committed.
    fn awaited(&self) -> bool {
        matches!(self, Op::Flush(_) | Op::Result { done: Some(_), .. })
    }

    /// What the record takes of the queue's budget (never more than all of it).
    fn weight(&self) -> usize {
        let strings = match self {
            Op::Log(r) => {
                r.occurred_at.len()
                    + r.source_name.len()
                    + r.container_id.as_ref().map_or(0, String::len)
                    + r.message.len()
            }
            Op::Container(r) => r.container_id.len() * 3 + r.image_ref.len() + 128,
            Op::Event(r) => r.container_id.len() * 2 + r.occurred_at.len(),
            Op::Result { json, .. } => json.as_ref().map_or(0, String::len),
            _ => 0,
        };
        (OP_BYTES + strings).min(QUEUE_BYTES)
    }
}

/// Identity of this boot of the node, written to `node_boot`.
#[derive(Clone, Debug)]
pub struct Boot {
    pub boot_id: String,
    pub booted_at: String,
    pub node_slug: String,
    pub build_version: String,
    pub os: String,
    pub arch: String,
    pub kernel_version: String,
}

pub struct Store {
    path: PathBuf,
    tx: mpsc::UnboundedSender<(Op, u32)>,
    /// The queue's room, in bytes: taken by a sender, given back by the writer.
    room: Arc<Semaphore>,
    read: Mutex<Connection>,
    dropped: AtomicU64,
}

/// A reader's page cache, in KiB (SQLite's default is 2 MiB).
const READER_CACHE_KIB: i64 = 16 << 10;

/// A connection with a page cache of `cache_kib` that reads through a map of the file
/// instead of a copy per page fetched.
fn open(path: &Path, cache_kib: i64) -> Result<Connection> {
    let conn = Connection::open(path).with_context(|| format!("opening {}", path.display()))?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "cache_size", -cache_kib)?;
    conn.pragma_update(None, "mmap_size", 256i64 << 20)?;
    Ok(conn)
}

/// The writer's page cache, in KiB: a sixty-fourth of the node's memory budget, between
/// 16 and 256 MiB (SQLite takes it as pages are used, so a small store keeps it small).
/// Records with random ids dirty a page of each job-keyed index apiece; the dirty pages of a
/// second's transaction that do not fit are spilled into the WAL before the commit and
/// read back when touched again. With 16 MiB a 2-core node ran 2,750-3,700 random-id jobs
/// a second once its store passed 550 MB, with 256 MiB 3,550-5,700.
fn writer_cache_kib() -> i64 {
    let bytes = (wasbox_runtime::limits::default_node_memory() / 64).clamp(16 << 20, 256 << 20);
    (bytes >> 10) as i64
}

/// `telemetry/telemetry.db` under the state directory, which is made (mode 0700) when missing.
pub fn db_path(state_dir: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = state_dir.join("telemetry");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("creating the state directory {}", dir.display()))?;
    Ok(dir.join("telemetry.db"))
}

impl Store {
    /// Opens (creating or migrating) the database, records this boot, marks results of
    /// jobs that were running when the node last stopped as interrupted, applies retention,
    /// and starts the writer thread.
    pub fn open(state_dir: &Path, boot: &Boot, retention: Retention) -> Result<Store> {
        let path = db_path(state_dir)?;
        let mut conn = open(&path, writer_cache_kib())?;
        migrate(&mut conn)?;
        conn.execute(
            "INSERT OR REPLACE INTO node_boot VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                boot.boot_id,
                boot.booted_at,
                boot.node_slug,
                boot.build_version,
                boot.os,
                boot.arch,
                boot.kernel_version
            ],
        )?;
        // What a killed node took but never committed goes in first.
        let mut writer = Writer::new(conn, Journal::open(&path)?, retention);
        writer.replay()?;
        let conn = &writer.conn;
        interrupt_unfinished(conn, &boot.booted_at)?;
        // Sandboxes of an earlier run of the node are gone with it.
        conn.execute(
            "UPDATE container_inventory SET status = 'exited', last_seen_at = ?1 \
             WHERE status IN ('created', 'running')",
            params![boot.booted_at],
        )?;
        apply_retention(conn, retention, SystemTime::now())?;
        writer.count_results();
        let read = open(&path, READER_CACHE_KIB)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let room = writer.room.clone();
        std::thread::Builder::new()
            .name("wasbox-telemetry".into())
            .spawn(move || writer.run(rx))
            .context("starting the telemetry writer")?;
        Ok(Store {
            path,
            tx,
            room,
            read: Mutex::new(read),
            dropped: AtomicU64::new(0),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Telemetry records dropped because the writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Queues a record that may be dropped when the queue is full.
    fn offer(&self, op: Op) {
        let w = op.weight();
        match self.room.try_acquire_many(w as u32) {
            Ok(p) => {
                p.forget();
                if self.tx.send((op, w as u32)).is_err() {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(_) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Queues a record that is never dropped: waits for room. False when the writer is gone.
    async fn send(&self, op: Op) -> bool {
        let w = op.weight();
        match self.room.acquire_many(w as u32).await {
            Ok(p) => p.forget(),
            Err(_) => return false,
        }
        self.tx.send((op, w as u32)).is_ok()
    }

    pub fn log(&self, row: LogRow) {
        self.offer(Op::Log(row));
    }

    pub fn container(&self, row: ContainerRow) {
        self.offer(Op::Container(row));
    }

    pub fn event(&self, row: EventRow) {
        self.offer(Op::Event(row));
    }

    /// Records a job as accepted (no result yet) or its result. Never dropped: waits for
    /// room in the queue, and with `durable` until the record is committed.
    pub async fn put_result(
        &self,
        job_id: &str,
        task_id: &str,
        status: &str,
        json: Option<String>,
        durable: bool,
    ) {
        let (done, wait) = oneshot::channel();
        let op = Op::Result {
            job_id: job_id.into(),
            task_id: task_id.into(),
            status: status.into(),
            json,
            done: durable.then_some(done),
        };
        if self.send(op).await && durable {
            let _ = wait.await;
        }
    }

    /// Forgets a result the orchestrator has confirmed.
    pub async fn delete_result(&self, job_id: &str) {
        let _ = self.send(Op::DeleteResult(job_id.into())).await;
    }

    /// Waits until everything queued so far is committed.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.send(Op::Flush(done)).await {
            let _ = wait.await;
        }
    }

    pub fn enforce_retention(&self) {
        self.offer(Op::Retention);
    }

    pub fn vacuum(&self) {
        self.offer(Op::Vacuum);
    }

    /// Runs `f` on the read connection.
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T> {
        let conn = lock(&self.read);
        Ok(f(&conn)?)
    }

    pub fn result(&self, job_id: &str) -> Result<Option<StoredResult>> {
        self.read(|c| {
            c.prepare_cached(
                "SELECT task_id, status, result_json FROM wasbox_job_result WHERE job_id = ?1",
            )?
            .query_row(params![job_id], |r| {
                Ok(StoredResult {
                    task_id: r.get(0)?,
                    status: r.get(1)?,
                    result_json: r.get(2)?,
                })
            })
            .optional()
        })
    }

    /// The result kept for `job_id`, one still in the writer's open transaction included.
    pub async fn result_now(&self, job_id: &str) -> Result<Option<StoredResult>> {
        if let Some(r) = self.result(job_id)? {
            return Ok(Some(r));
        }
        self.flush().await;
        self.result(job_id)
    }

    /// The job ids the store holds results for.
    pub fn result_ids(&self) -> Result<Vec<String>> {
        self.read(|c| {
            c.prepare("SELECT job_id FROM wasbox_job_result")?
                .query_map([], |r| r.get(0))?
                .collect()
        })
    }

    pub fn boot(&self) -> Result<Option<Boot>> {
        self.read(|c| {
            c.query_row(
                "SELECT boot_id, booted_at, node_slug, build_version, platform_os, \
                 platform_arch, kernel_version FROM node_boot ORDER BY booted_at DESC LIMIT 1",
                [],
                |r| {
                    Ok(Boot {
                        boot_id: r.get(0)?,
                        booted_at: r.get(1)?,
                        node_slug: r.get(2)?,
                        build_version: r.get(3)?,
                        os: r.get(4)?,
                        arch: r.get(5)?,
                        kernel_version: r.get(6)?,
                    })
                },
            )
            .optional()
        })
    }
}

fn migrate(conn: &mut Connection) -> Result<()> {
    let tx = conn.transaction()?;
    tx.execute_batch(SCHEMA)?;
    let have: Option<i64> = tx
        .query_row("SELECT version FROM schema_version WHERE id = 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    match have {
        None => {
            tx.execute(
                "INSERT INTO schema_version (id, version, applied_at) VALUES (1, ?1, ?2)",
                params![SCHEMA_VERSION, rfc3339::format(SystemTime::now())],
            )?;
        }
        Some(v) if v > SCHEMA_VERSION => anyhow::bail!(
            "the telemetry database has schema version {v}, newer than this wasbox knows ({SCHEMA_VERSION})"
        ),
        Some(_) => {}
    }
    tx.commit()?;
    Ok(())
}

/// The answer a job gets when the node stopped while it ran.
fn interrupt_unfinished(conn: &Connection, now: &str) -> Result<()> {
    let mut stmt =
        conn.prepare("SELECT job_id, task_id FROM wasbox_job_result WHERE result_json IS NULL")?;
    let rows: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (job_id, task_id) in rows {
        let json = serde_json::json!({
            "version": 1,
            "task_id": task_id,
            "job_id": job_id,
            "status": "failed",
            "exit_code": -1,
            "stdout": "",
            "stderr": "wasbox: the node stopped while this job ran; it did not finish\n",
            "started_at": now,
            "ended_at": now,
            "truncated": {"stdout": false, "stderr": false},
        })
        .to_string();
        conn.execute(
            "UPDATE wasbox_job_result SET status = 'failed', result_json = ?2, bytes = ?3 \
             WHERE job_id = ?1",
            params![job_id, json, json.len() as i64],
        )?;
    }
    Ok(())
}

fn ago(now: SystemTime, d: Duration) -> String {
    rfc3339::format(now.checked_sub(d).unwrap_or(SystemTime::UNIX_EPOCH))
}

const DAY: u64 = 86_400;

fn apply_retention(conn: &Connection, r: Retention, now: SystemTime) -> Result<()> {
    conn.execute(
        "DELETE FROM log_event WHERE occurred_at < ?1",
        params![ago(now, Duration::from_secs(r.log_days * DAY))],
    )?;
    conn.execute(
        "DELETE FROM container_event WHERE occurred_at < ?1",
        params![ago(now, Duration::from_secs(r.container_event_days * DAY))],
    )?;
    conn.execute(
        "DELETE FROM container_inventory WHERE last_seen_at < ?1 \
         AND status NOT IN ('created', 'running')",
        params![ago(now, Duration::from_secs(r.inventory_days * DAY))],
    )?;
    conn.execute(
        "DELETE FROM wasbox_job_result WHERE stored_at < ?1 AND result_json IS NOT NULL",
        params![ago(now, Duration::from_secs(r.result_hours * 3600))],
    )?;
    trim_results(conn, r.result_bytes)?;
    Ok(())
}

/// Drops the oldest finished results until all together fit in `max` bytes.
fn trim_results(conn: &Connection, max: u64) -> Result<()> {
    let total: i64 = conn.query_row(
        "SELECT COALESCE(SUM(bytes), 0) FROM wasbox_job_result",
        [],
        |r| r.get(0),
    )?;
    if total as u64 <= max {
        return Ok(());
    }
    let mut over = total as u64 - max;
    let mut stmt = conn.prepare(
        "SELECT job_id, bytes FROM wasbox_job_result WHERE result_json IS NOT NULL \
         ORDER BY stored_at",
    )?;
    let rows: Vec<(String, i64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, bytes) in rows {
        if over == 0 {
            break;
        }
        conn.execute(
            "DELETE FROM wasbox_job_result WHERE job_id = ?1",
            params![id],
        )?;
        over = over.saturating_sub(bytes as u64);
    }
    Ok(())
}

/// Bytes of the pages the database uses (its free pages excluded).
fn used_bytes(conn: &Connection) -> Result<u64> {
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
    let size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok(((pages - free).max(0) * size) as u64)
}

/// Past `max` bytes in use, drops the oldest fifth of the log rows, the events and the
/// inventory of sandboxes that ended, until under it (their pages are reused).
fn enforce_size(conn: &Connection, max: u64) -> Result<()> {
    for _ in 0..8 {
        if used_bytes(conn)? <= max {
            return Ok(());
        }
        tracing::warn!(
            max_bytes = max,
            "telemetry store at its size limit: dropping the oldest fifth of its records"
        );
        for (table, only) in [
            ("log_event", ""),
            ("container_event", ""),
            (
                "container_inventory",
                " WHERE status NOT IN ('created', 'running')",
            ),
        ] {
            conn.execute(
                &format!(
                    "DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table}{only} \
                     ORDER BY rowid LIMIT (SELECT COUNT(*) / 5 + 1 FROM {table}))"
                ),
                [],
            )?;
        }
    }
    Ok(())
}

/// The writer thread's state: its connection, the open transaction and what waits for its
/// commit.
struct Writer {
    conn: Connection,
    /// Results (and their deletions) of the open transaction, for a restart.
    journal: Journal,
    retention: Retention,
    room: Arc<Semaphore>,
    result_bytes: u64,
    ids: RowIds,
    /// When the open transaction began (None: none is open).
    opened: Option<Instant>,
    /// Updates of sandboxes since the last commit, one row each: a job's start and stop
    /// in one transaction become one row write.
    containers: HashMap<String, ContainerRow>,
    order: Vec<String>,
    acks: Vec<oneshot::Sender<()>>,
    /// Retention passes asked for (true: with a VACUUM), run after the commit.
    after: Vec<bool>,
}

impl Writer {
    fn new(conn: Connection, journal: Journal, retention: Retention) -> Writer {
        Writer {
            conn,
            journal,
            retention,
            room: Arc::new(Semaphore::new(QUEUE_BYTES)),
            result_bytes: 0,
            ids: RowIds::new(),
            opened: None,
            containers: HashMap::new(),
            order: Vec::new(),
            acks: Vec::new(),
            after: Vec::new(),
        }
    }

    /// Commits what the journal holds from a node that was killed before its commit.
    fn replay(&mut self) -> Result<()> {
        let entries = self.journal.take_left()?;
        if entries.is_empty() {
            return Ok(());
        }
        tracing::info!(
            records = entries.len(),
            "telemetry journal replayed (the node stopped before committing them)"
        );
        for op in entries {
            self.write(op)?;
        }
        self.try_commit()
    }

    fn count_results(&mut self) {
        self.result_bytes = self
            .conn
            .query_row(
                "SELECT COALESCE(SUM(bytes), 0) FROM wasbox_job_result",
                [],
                |r| r.get::<_, i64>(0),
            )
            .unwrap_or(0) as u64;
    }

    fn run(mut self, mut rx: mpsc::UnboundedReceiver<(Op, u32)>) {
        // However the writer ends, a sender waiting for room is let go instead of hanging.
        struct Close(Arc<Semaphore>);
        impl Drop for Close {
            fn drop(&mut self) {
                self.0.close();
            }
        }
        let _close = Close(self.room.clone());
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!(error = %e, "the telemetry writer could not start");
                return;
            }
        };
        loop {
            // Wait for a record, or (with a transaction open) until it is time to commit.
            let next = match self.opened {
                None => rt.block_on(rx.recv()).map(Some),
                Some(at) => {
                    let left = COMMIT_EVERY.saturating_sub(at.elapsed());
                    match rt.block_on(async { tokio::time::timeout(left, rx.recv()).await }) {
                        Ok(op) => op.map(Some),
                        Err(_) => Some(None),
                    }
                }
            };
            let Some(next) = next else {
                break;
            };
            let mut now = false;
            if let Some((op, w)) = next {
                now |= self.take(op, w);
                // Whatever queued meanwhile goes in too, before the clock is looked at.
                for _ in 0..4096 {
                    match rx.try_recv() {
                        Ok((op, w)) => now |= self.take(op, w),
                        Err(_) => break,
                    }
                }
                // What was taken is in the journal file before the writer sleeps or commits.
                if let Err(e) = self.journal.write() {
                    tracing::warn!(error = %format!("{e:#}"), "writing the telemetry journal");
                }
            }
            let due = self.opened.is_none_or(|at| at.elapsed() >= COMMIT_EVERY);
            if now || due {
                self.commit();
            } else {
                // Let records gather: a writer woken for each one costs its senders a
                // wake-up apiece.
                std::thread::sleep(GATHER);
            }
        }
        self.commit();
    }

    /// Writes one record into the open transaction (opening one); true when someone waits
    /// for it to be committed.
    fn take(&mut self, op: Op, weight: u32) -> bool {
        self.room.add_permits(weight as usize);
        let now = op.awaited() || matches!(op, Op::Retention | Op::Vacuum);
        self.journal.push(&op);
        if let Err(e) = self.write(op) {
            tracing::warn!(error = %format!("{e:#}"), "telemetry write failed");
            if self.opened.is_some() && self.conn.is_autocommit() {
                // SQLite rolled the whole transaction back (a full disk, an I/O error).
                tracing::warn!("telemetry records since the last commit are lost");
                self.opened = None;
            }
        }
        now
    }

    fn begin(&mut self) -> Result<()> {
        if self.opened.is_none() {
            self.conn.execute_batch("BEGIN")?;
            self.opened = Some(Instant::now());
        }
        Ok(())
    }

    fn write(&mut self, op: Op) -> Result<()> {
        match op {
            Op::Flush(done) => self.acks.push(done),
            Op::Retention => self.after.push(false),
            Op::Vacuum => self.after.push(true),
            Op::Container(r) => {
                self.begin()?;
                match self.containers.get_mut(&r.container_id) {
                    Some(prev) => {
                        let created = std::mem::take(&mut prev.created_at);
                        *prev = r;
                        prev.created_at = created;
                    }
                    None => {
                        self.order.push(r.container_id.clone());
                        self.containers.insert(r.container_id.clone(), r);
                    }
                }
            }
            Op::Log(r) => {
                self.begin()?;
                self.conn
                    .prepare_cached(
                        "INSERT INTO log_event VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    )?
                    .execute(params![
                        self.ids.next(),
                        r.occurred_at,
                        r.source_kind,
                        r.source_name,
                        r.container_id,
                        r.stream,
                        r.level,
                        r.message,
                        r.fields.to_string()
                    ])?;
            }
            Op::Event(r) => {
                self.begin()?;
                self.conn
                    .prepare_cached(
                        "INSERT INTO container_event VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    )?
                    .execute(params![
                        self.ids.next(),
                        r.occurred_at,
                        r.container_id,
                        r.action,
                        r.status,
                        r.exit_code,
                        r.task_id,
                        r.job_id,
                        r.details.to_string()
                    ])?;
            }
            Op::Result {
                job_id,
                task_id,
                status,
                json,
                done,
            } => {
                let bytes = json.as_ref().map_or(0, |j| j.len()) as u64;
                self.result_bytes += bytes;
                self.begin()?;
                self.conn.prepare_cached(
                    "INSERT INTO wasbox_job_result (job_id, task_id, stored_at, status, bytes, result_json) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(job_id) DO UPDATE SET \
                     task_id = excluded.task_id, stored_at = excluded.stored_at, \
                     status = excluded.status, bytes = excluded.bytes, result_json = excluded.result_json",
                )?
                .execute(params![
                    job_id,
                    task_id,
                    rfc3339::format(SystemTime::now()),
                    status,
                    bytes as i64,
                    json
                ])?;
                self.acks.extend(done);
            }
            Op::DeleteResult(id) => {
                self.begin()?;
                self.conn
                    .prepare_cached("DELETE FROM wasbox_job_result WHERE job_id = ?1")?
                    .execute(params![id])?;
            }
        }
        Ok(())
    }

    /// Commits the open transaction (with the sandboxes' rows), then runs what waited for
    /// it. A failed commit loses its records (logged); whoever waited is let go.
    fn commit(&mut self) {
        if let Err(e) = self.try_commit() {
            tracing::warn!(error = %format!("{e:#}"), "telemetry commit failed");
            if !self.conn.is_autocommit() {
                let _ = self.conn.execute_batch("ROLLBACK");
            }
        }
        self.opened = None;
        for vacuum in std::mem::take(&mut self.after) {
            let r = apply_retention(&self.conn, self.retention, SystemTime::now()).and_then(|()| {
                if vacuum {
                    self.conn.execute_batch("VACUUM")?;
                }
                Ok(())
            });
            if let Err(e) = r {
                tracing::warn!(error = %format!("{e:#}"), "telemetry retention failed");
            }
        }
        for a in self.acks.drain(..) {
            let _ = a.send(());
        }
    }

    fn try_commit(&mut self) -> Result<()> {
        let containers = std::mem::take(&mut self.containers);
        let order = std::mem::take(&mut self.order);
        if !order.is_empty() {
            self.begin()?;
            let mut upsert = self.conn.prepare_cached(
                "INSERT INTO container_inventory VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
                 ON CONFLICT(container_id) DO UPDATE SET last_seen_at = excluded.last_seen_at, \
                 status = excluded.status, exit_code = excluded.exit_code",
            )?;
            for id in &order {
                let r = &containers[id];
                upsert.execute(params![
                    r.container_id,
                    r.container_name,
                    r.kind,
                    r.runtime,
                    r.image_ref,
                    r.created_at,
                    r.last_seen_at,
                    r.status,
                    r.exit_code,
                    r.task_id,
                    r.job_id,
                    serde_json::Value::Object(r.labels.clone()).to_string()
                ])?;
            }
        }
        if self.opened.is_none() {
            return Ok(());
        }
        if self.result_bytes > self.retention.result_bytes {
            trim_results(&self.conn, self.retention.result_bytes)?;
            self.result_bytes = self.conn.query_row(
                "SELECT COALESCE(SUM(bytes), 0) FROM wasbox_job_result",
                [],
                |r| r.get::<_, i64>(0),
            )? as u64;
        }
        self.conn.execute_batch("COMMIT")?;
        self.opened = None;
        self.journal.clear()?;
        enforce_size(&self.conn, self.retention.max_db_bytes)
    }
}

/// `journal` beside the database: every record the writer has taken since its last commit,
/// appended as JSON lines and emptied by each commit.
struct Journal {
    file: std::fs::File,
    /// Lines not yet written.
    pending: Vec<u8>,
    /// Whether the file holds lines.
    dirty: bool,
}

impl Journal {
    fn open(db: &Path) -> Result<Journal> {
        let path = db.with_file_name("journal");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Journal {
            file,
            pending: Vec::new(),
            dirty: false,
        })
    }

    /// What a killed node left in the journal, which is emptied. A line cut short by the
    /// kill is skipped.
    fn take_left(&mut self) -> Result<Vec<Op>> {
        use std::io::Read;
        let mut text = String::new();
        (&self.file)
            .read_to_string(&mut text)
            .context("reading the telemetry journal")?;
        let entries = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        self.file
            .set_len(0)
            .context("emptying the telemetry journal")?;
        Ok(entries)
    }

    fn push(&mut self, op: &Op) {
        if !matches!(op, Op::Flush(_) | Op::Retention | Op::Vacuum)
            && serde_json::to_writer(&mut self.pending, op).is_ok()
        {
            self.pending.push(b'\n');
        }
    }

    fn write(&mut self) -> Result<()> {
        use std::io::Write;
        if self.pending.is_empty() {
            return Ok(());
        }
        self.dirty = true;
        let r = (&self.file).write_all(&self.pending);
        self.pending.clear();
        Ok(r?)
    }

    /// Empties the journal: all it held is committed.
    fn clear(&mut self) -> Result<()> {
        self.pending.clear();
        if self.dirty {
            self.file.set_len(0)?;
            self.dirty = false;
        }
        Ok(())
    }
}

/// Ids of the rows this process writes: the boot's random prefix and a sequence, so that
/// new rows go to the end of the primary-key index instead of anywhere in it.
struct RowIds {
    prefix: String,
    next: u64,
}

impl RowIds {
    fn new() -> RowIds {
        RowIds {
            prefix: crate::ids::hex::<8>(),
            next: 0,
        }
    }

    fn next(&mut self) -> String {
        self.next += 1;
        format!("{}-{:012x}", self.prefix, self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn boot() -> Boot {
        Boot {
            boot_id: "b1".into(),
            booted_at: rfc3339::format(SystemTime::now()),
            node_slug: "n".into(),
            build_version: "dev".into(),
            os: "linux".into(),
            arch: "x86_64".into(),
            kernel_version: "6".into(),
        }
    }

    fn log_at(t: SystemTime) -> LogRow {
        LogRow {
            occurred_at: rfc3339::format(t),
            source_kind: "service".into(),
            source_name: "worker_api".into(),
            container_id: None,
            stream: Some("stdout".into()),
            level: Some("info".into()),
            message: "m".into(),
            fields: serde_json::json!({}),
        }
    }

    fn count(s: &Store, table: &str) -> i64 {
        s.read(|c| c.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0)))
            .unwrap()
    }

    #[tokio::test]
    async fn retention_drops_old_rows_and_results_past_the_byte_budget() {
        let dir = tempfile::tempdir().unwrap();
        let r = Retention {
            result_bytes: 1000,
            ..Retention::default()
        };
        let s = Store::open(dir.path(), &boot(), r).unwrap();
        let old = SystemTime::now() - Duration::from_secs(8 * DAY);
        s.log(log_at(old));
        s.log(log_at(SystemTime::now()));
        for i in 0..5 {
            let json = format!("{{\"x\":\"{}\"}}", "a".repeat(300));
            s.put_result(&format!("j{i}"), "t", "completed", Some(json), true)
                .await;
        }
        s.flush().await;
        assert_eq!(count(&s, "log_event"), 2);
        let kept = count(&s, "wasbox_job_result");
        assert!(kept <= 3, "results past 1000 bytes are trimmed: {kept}");
        assert!(s.result("j4").unwrap().is_some(), "the newest is kept");
        s.enforce_retention();
        s.flush().await;
        assert_eq!(count(&s, "log_event"), 1, "the 8-day-old log row is gone");
    }

    #[tokio::test]
    async fn the_database_stays_under_its_size_limit() {
        let dir = tempfile::tempdir().unwrap();
        let r = Retention {
            max_db_bytes: 2 << 20,
            ..Retention::default()
        };
        let s = Store::open(dir.path(), &boot(), r).unwrap();
        for _ in 0..40 {
            for _ in 0..100 {
                let mut row = log_at(SystemTime::now());
                row.message = "x".repeat(2000);
                s.log(row);
            }
            s.flush().await;
        }
        let used = s.read(|c| Ok(used_bytes(c).unwrap())).unwrap();
        assert!(used <= 2 << 20, "{used}");
        let rows = count(&s, "log_event");
        assert!(
            rows > 100 && rows < 4000,
            "the newest are kept, the oldest dropped: {rows}"
        );
    }

    #[tokio::test]
    async fn records_are_journaled_before_their_commit_and_replayed_after_a_kill() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("telemetry/journal");
        {
            let s = Store::open(dir.path(), &boot(), Retention::default()).unwrap();
            s.put_result(
                "a",
                "t",
                "completed",
                Some("{\"x\":\"a\\n\"}".into()),
                false,
            )
            .await;
            // The writer appends it at once, and commits it within a second.
            let deadline = Instant::now() + Duration::from_millis(500);
            while std::fs::metadata(&journal).unwrap().len() == 0 {
                assert!(
                    Instant::now() < deadline,
                    "the result never reached the journal"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            s.flush().await;
            assert_eq!(
                std::fs::metadata(&journal).unwrap().len(),
                0,
                "a commit empties it"
            );
            assert!(s.result("a").unwrap().is_some());
        }
        // What a node killed before its commit leaves: two results, a deletion of one, a
        // log row, a sandbox started and stopped, and a line cut short.
        let mut left = Journal::open(&journal.with_file_name("telemetry.db")).unwrap();
        let result = |id: &str| Op::Result {
            job_id: id.into(),
            task_id: "t".into(),
            status: "completed".into(),
            json: Some(format!("{{\"id\":\"{id}\"}}")),
            done: None,
        };
        let container = |status: &str| ContainerRow {
            container_id: "job-c".into(),
            container_name: "wasbox-job-c".into(),
            kind: "sandbox".into(),
            runtime: "wasbox".into(),
            image_ref: "i".into(),
            created_at: rfc3339::format(SystemTime::now()),
            last_seen_at: rfc3339::format(SystemTime::now()),
            status: status.into(),
            exit_code: None,
            task_id: Some("t".into()),
            job_id: Some("c".into()),
            labels: serde_json::Map::new(),
        };
        for op in [
            result("b"),
            result("c"),
            Op::DeleteResult("b".into()),
            Op::Log(log_at(SystemTime::now())),
            Op::Container(container("running")),
            Op::Container(container("exited")),
        ] {
            left.push(&op);
        }
        left.write().unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&journal)
            .unwrap()
            .write_all(b"{\"Result\":{\"job_id\":\"d\",\"task")
            .unwrap();
        let s = Store::open(dir.path(), &boot(), Retention::default()).unwrap();
        assert!(
            s.result("b").unwrap().is_none(),
            "deleted after it was written"
        );
        let c = s.result("c").unwrap().expect("replayed");
        assert_eq!(c.result_json.as_deref(), Some("{\"id\":\"c\"}"));
        assert_eq!(c.task_id, "t");
        assert!(s.result("d").unwrap().is_none());
        assert!(s.result("a").unwrap().is_some());
        assert_eq!(count(&s, "log_event"), 1);
        let status: String = s
            .read(|c| {
                c.query_row(
                    "SELECT status FROM container_inventory WHERE container_id = 'job-c'",
                    [],
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert_eq!(status, "exited");
        assert_eq!(
            std::fs::metadata(&journal).unwrap().len(),
            0,
            "replayed and emptied"
        );
    }

    #[tokio::test]
    async fn a_reader_that_flushes_sees_what_was_recorded_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), &boot(), Retention::default()).unwrap();
        s.log(log_at(SystemTime::now()));
        s.put_result("j", "t", "completed", Some("{}".into()), false)
            .await;
        assert!(s.result_now("j").await.unwrap().is_some());
        s.flush().await;
        assert_eq!(count(&s, "log_event"), 1);
    }

    #[tokio::test]
    async fn an_unfinished_job_reads_as_interrupted_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = Store::open(dir.path(), &boot(), Retention::default()).unwrap();
            s.put_result("j", "t", "accepted", None, true).await;
        }
        let s = Store::open(dir.path(), &boot(), Retention::default()).unwrap();
        let r = s.result("j").unwrap().unwrap();
        assert_eq!(r.status, "failed");
        let v: serde_json::Value = serde_json::from_str(&r.result_json.unwrap()).unwrap();
        assert_eq!(v["exit_code"], -1);
        assert_eq!(v["job_id"], "j");
    }
}
