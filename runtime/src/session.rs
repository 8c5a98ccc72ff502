//! Sessions: a sandbox that lives across many jobs (exec rounds) and PTYs, ended on request,
//! at the end of its lifetime, or after an idle period. A front-end keeps them in a
//! [`Sessions`] table (bounded) and only translates its wire format to these calls.

use crate::sync::lock;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Result, bail};

use crate::capacity::Refused;
use crate::host::{StartFailure, StartHeard};
use crate::job::{JobOutput, JobSpec, StopSignal};
use crate::pty::{Pty, PtyConfig};
use crate::runtime::Sandbox;

/// Longest lifetime or idle limit a session may have: a limit beyond this is taken as this
/// (about ten years, far inside what `Instant` arithmetic can hold).
pub const MAX_SESSION_LIMIT: Duration = Duration::from_secs(10 * 366 * 24 * 3600);
/// PTYs one session may have open by default.
pub const DEFAULT_MAX_PTYS: usize = 8;

/// Most jobs a session starts in the background (see [`Session::start_background`]).
const MAX_BACKGROUND: usize = 8;

/// How to make a session.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// Its id, unique in its table.
    pub id: String,
    /// Ended this long after it was created.
    pub lifetime: Duration,
    /// Ended after this long without a request while nothing runs in it.
    pub idle: Duration,
    /// Variables every exec and PTY gets (on top of the sandbox's).
    pub env: Vec<(String, String)>,
    /// What the front-end wants to remember with it (the worker API's `task_id`).
    pub labels: BTreeMap<String, String>,
    pub max_ptys: usize,
    /// Each exec and PTY gets the session's remaining lifetime as its deadline (true by
    /// default). When false, they run until their own deadline or the session's end,
    /// whichever comes first, so that a lifetime moved later ([`Session::set_remaining`])
    /// moves them too.
    pub deadline_from_lifetime: bool,
}

impl SessionConfig {
    pub fn new(id: impl Into<String>) -> Self {
        SessionConfig {
            id: id.into(),
            lifetime: Duration::from_secs(3600),
            idle: Duration::from_secs(600),
            env: Vec::new(),
            labels: BTreeMap::new(),
            max_ptys: DEFAULT_MAX_PTYS,
            deadline_from_lifetime: true,
        }
    }
}

/// A sandbox that lives across jobs. See the module documentation.
pub struct Session {
    config: SessionConfig,
    sandbox: Sandbox,
    created: Instant,
    created_at: SystemTime,
    /// Its lifetime in milliseconds from `created`; a front-end may change it.
    lifetime_ms: AtomicU64,
    idle: Duration,
    last_activity: Mutex<Instant>,
    execs: AtomicU64,
    /// Stop signals of the execs running now.
    running: Mutex<Vec<StopSignal>>,
    /// Stop signals of the jobs started in the background (see
    /// [`Session::start_background`]); those that ended stay until the session does.
    background: Mutex<Vec<StopSignal>>,
    ptys: Mutex<HashMap<String, Arc<Pty>>>,
    ended: AtomicBool,
}

/// Why a PTY could not be opened.
#[derive(Debug, PartialEq, Eq)]
pub enum PtyRefused {
    /// The session already has its most PTYs open.
    TooMany(usize),
    /// The session has ended.
    Ended,
    /// The node cannot start another process now.
    Capacity(Refused),
    /// The program was admitted but could not start (its instance could not be made: the
    /// memory budget, the address space, a program that failed to load).
    Start(StartFailure),
}

impl std::fmt::Display for PtyRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PtyRefused::TooMany(n) => write!(f, "a session may have at most {n} open PTYs"),
            PtyRefused::Ended => f.write_str("the session has ended"),
            PtyRefused::Capacity(why) => write!(f, "cannot start the program: {why}"),
            PtyRefused::Start(why) => write!(f, "cannot start the program: {why}"),
        }
    }
}

impl std::error::Error for PtyRefused {}

/// Removes an exec's stop signal from the running list however the exec ends (even when its
/// caller stops waiting).
struct Running<'a> {
    session: &'a Session,
    stop: StopSignal,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        lock(&self.session.running).retain(|s| !s.same_as(&self.stop));
        self.session.touch();
    }
}

impl Session {
    fn new(config: SessionConfig, sandbox: Sandbox) -> Session {
        Session {
            lifetime_ms: AtomicU64::new(config.lifetime.min(MAX_SESSION_LIMIT).as_millis() as u64),
            idle: config.idle.min(MAX_SESSION_LIMIT),
            config,
            sandbox,
            created: Instant::now(),
            created_at: SystemTime::now(),
            last_activity: Mutex::new(Instant::now()),
            execs: AtomicU64::new(0),
            running: Mutex::new(Vec::new()),
            background: Mutex::new(Vec::new()),
            ptys: Mutex::new(HashMap::new()),
            ended: AtomicBool::new(false),
        }
    }

    pub fn id(&self) -> &str {
        &self.config.id
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.config.labels.get(key).map(String::as_str)
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    pub fn env(&self) -> &[(String, String)] {
        &self.config.env
    }

    pub fn created_at(&self) -> SystemTime {
        self.created_at
    }

    /// When its lifetime ends.
    pub fn expires_at(&self) -> SystemTime {
        self.created_at + self.lifetime()
    }

    pub fn lifetime(&self) -> Duration {
        Duration::from_millis(self.lifetime_ms.load(Ordering::Acquire))
    }

    /// Makes the session end `left` from now (its lifetime is changed to fit, never past
    /// [`MAX_SESSION_LIMIT`]). Execs and PTYs already running keep the deadline they
    /// started with.
    pub fn set_remaining(&self, left: Duration) {
        let total = (self.created.elapsed() + left).min(MAX_SESSION_LIMIT);
        self.lifetime_ms
            .store(total.as_millis() as u64, Ordering::Release);
    }

    pub fn idle_limit(&self) -> Duration {
        self.idle
    }

    /// Time left before the session's lifetime ends.
    pub fn remaining(&self) -> Duration {
        (self.created + self.lifetime()).saturating_duration_since(Instant::now())
    }

    /// Execs finished so far.
    pub fn exec_count(&self) -> u64 {
        self.execs.load(Ordering::Relaxed)
    }

    /// Execs running now.
    pub fn running_execs(&self) -> usize {
        lock(&self.running).len()
    }

    pub fn is_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Counts as activity (resets the idle clock).
    pub fn touch(&self) {
        *lock(&self.last_activity) = Instant::now();
    }

    /// `spec` as the session runs it: stopped by `stop`, the session's environment before
    /// its own, and no deadline past the session's lifetime (when the session says so).
    fn prepared(&self, mut spec: JobSpec, stop: &StopSignal) -> JobSpec {
        spec.stop = Some(stop.clone());
        let mut env = self.config.env.clone();
        env.append(&mut spec.env);
        spec.env = env;
        if self.config.deadline_from_lifetime {
            let remaining = self.remaining();
            spec.timeout = Some(spec.timeout.map_or(remaining, |t| t.min(remaining)));
        }
        spec
    }

    /// Runs one job in the session's sandbox, with the session's environment before the
    /// job's own, and never past the session's lifetime. Ending the session stops it.
    pub async fn exec(&self, mut spec: JobSpec) -> Result<JobOutput> {
        if self.is_ended() {
            bail!("session `{}` has ended", self.id());
        }
        self.touch();
        let stop = spec.stop.clone().unwrap_or_default();
        spec = self.prepared(spec, &stop);
        lock(&self.running).push(stop.clone());
        let _running = Running {
            session: self,
            stop: stop.clone(),
        };
        // An end that came between the check above and the push is seen here.
        if self.is_ended() {
            stop.stop();
        }
        let out = self.sandbox.run(spec).await;
        if out.is_ok() {
            self.execs.fetch_add(1, Ordering::Relaxed);
        }
        out
    }

    /// Starts a job that runs beside the session's execs (a template's start command: a
    /// server, a watcher), with the session's environment and never past its lifetime,
    /// stopped when the session ends. It is no activity: the session still idles out
    /// while it runs. Answers once its first process has started, or why it could not;
    /// the job's output comes from the handle when it ends.
    pub async fn start_background(
        &self,
        spec: JobSpec,
    ) -> Result<tokio::task::JoinHandle<Result<JobOutput>>> {
        if self.is_ended() {
            bail!("session `{}` has ended", self.id());
        }
        if lock(&self.background).len() >= MAX_BACKGROUND {
            bail!("a session starts at most {MAX_BACKGROUND} background jobs");
        }
        let stop = StopSignal::default();
        let mut spec = self.prepared(spec, &stop);
        let (report, started) = tokio::sync::oneshot::channel();
        spec.started = Some(report);
        lock(&self.background).push(stop.clone());
        if self.is_ended() {
            stop.stop();
        }
        let sandbox = self.sandbox.clone();
        let job = tokio::spawn(async move { sandbox.run(spec).await });
        match started.await {
            Ok(Ok(())) => Ok(job),
            Ok(Err(why)) => bail!("{why}"),
            // The job ended before its first process was told about (it could not start).
            Err(_) => match job.await {
                Ok(Err(e)) => Err(e),
                Ok(Ok(out)) => bail!("it ended at once with status {}", out.exit_code),
                Err(e) => bail!("{e}"),
            },
        }
    }

    /// Stops the jobs started in the background (see [`Session::start_background`]) and
    /// forgets them; how many there were (those that had ended already included).
    pub fn stop_background(&self) -> usize {
        let stops: Vec<StopSignal> = lock(&self.background).drain(..).collect();
        for stop in &stops {
            stop.stop();
        }
        stops.len()
    }

    /// Opens a PTY running `config.argv` (with the session's environment) for at most the
    /// session's remaining lifetime. Answers once the program has started: a program that
    /// could not get its instance is a refusal, never a PTY whose program is already dead.
    pub async fn open_pty(&self, id: String, config: PtyConfig) -> Result<Arc<Pty>, PtyRefused> {
        let (pty, started) = self.start_pty(id.clone(), config)?;
        let refused = match started.await {
            Ok(Ok(())) => return Ok(pty),
            Ok(Err(why)) => PtyRefused::Start(why),
            // The job ended before its program was asked to start: the session is ending.
            Err(_) => PtyRefused::Ended,
        };
        let mut ptys = lock(&self.ptys);
        if ptys.get(&id).is_some_and(|p| Arc::ptr_eq(p, &pty)) {
            ptys.remove(&id);
        }
        drop(ptys);
        pty.close();
        Err(refused)
    }

    fn start_pty(
        &self,
        id: String,
        mut config: PtyConfig,
    ) -> Result<(Arc<Pty>, StartHeard), PtyRefused> {
        let mut ptys = lock(&self.ptys);
        if self.is_ended() {
            return Err(PtyRefused::Ended);
        }
        if ptys.len() >= self.config.max_ptys {
            return Err(PtyRefused::TooMany(self.config.max_ptys));
        }
        let mut env = self.config.env.clone();
        env.append(&mut config.env);
        config.env = env;
        if self.config.deadline_from_lifetime {
            config.timeout = config.timeout.min(self.remaining());
        }
        let admission = self
            .sandbox
            .try_admit_interactive()
            .map_err(PtyRefused::Capacity)?;
        self.touch();
        let (pty, started) = Pty::start(&self.sandbox, id.clone(), config, admission);
        ptys.insert(id, pty.clone());
        Ok((pty, started))
    }

    pub fn pty(&self, id: &str) -> Option<Arc<Pty>> {
        lock(&self.ptys).get(id).cloned()
    }

    /// Closes a PTY (its program ends) and forgets it.
    pub fn close_pty(&self, id: &str) -> Option<Arc<Pty>> {
        let pty = lock(&self.ptys).remove(id)?;
        pty.close();
        Some(pty)
    }

    pub fn pty_count(&self) -> usize {
        lock(&self.ptys).len()
    }

    /// Stops whatever runs in it and closes its PTYs; its workspace goes when the last
    /// reference does. Returns false when it had already ended.
    pub fn end(&self, reason: &str) -> bool {
        if self.ended.swap(true, Ordering::AcqRel) {
            return false;
        }
        for stop in lock(&self.running).drain(..) {
            stop.stop();
        }
        self.stop_background();
        for (_, pty) in lock(&self.ptys).drain() {
            pty.close();
        }
        tracing::info!(session_id = %self.id(), reason, "session ended");
        true
    }

    /// Why the session should end now, if it should.
    fn expired(&self, now: Instant) -> Option<&'static str> {
        if now >= self.created + self.lifetime() {
            return Some("max lifetime reached");
        }
        let idle_for = now.saturating_duration_since(*lock(&self.last_activity));
        if idle_for >= self.idle && lock(&self.running).is_empty() {
            return Some("idle timeout reached");
        }
        None
    }

    /// Closes PTYs nobody has used for the session's idle limit.
    fn reap_ptys(&self, now: Instant) {
        let idle: Vec<String> = lock(&self.ptys)
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.last_activity()) >= self.idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            if self.close_pty(&id).is_some() {
                tracing::info!(session_id = %self.id(), pty_id = %id, "pty idle timeout");
            }
        }
    }
}

/// Why a session could not be made.
#[derive(Debug)]
pub enum SessionRefused {
    /// A session with this id exists.
    Exists(String),
    /// The table is full.
    Full(usize),
    /// The sandbox could not be made.
    Sandbox(anyhow::Error),
}

impl std::fmt::Display for SessionRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionRefused::Exists(id) => write!(f, "session `{id}` already exists"),
            SessionRefused::Full(n) => write!(f, "at the limit of {n} sessions"),
            SessionRefused::Sandbox(e) => write!(f, "cannot make the sandbox: {e:#}"),
        }
    }
}

impl std::error::Error for SessionRefused {}

/// The live sessions of a front-end, bounded in number.
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    max: std::sync::atomic::AtomicUsize,
    /// Told of every session that ends, whatever ended it (a request, its limits, shutdown).
    on_end: std::sync::OnceLock<EndObserver>,
}

/// What [`Sessions::on_end`] calls: the session and why it ended.
pub type EndObserver = Box<dyn Fn(&Session, &str) + Send + Sync>;

impl Sessions {
    pub fn new(max: usize) -> Self {
        Sessions {
            map: Mutex::new(HashMap::new()),
            max: std::sync::atomic::AtomicUsize::new(max),
            on_end: std::sync::OnceLock::new(),
        }
    }

    /// Sets the function told of every session that ends (once; later calls are ignored).
    pub fn on_end(&self, f: impl Fn(&Session, &str) + Send + Sync + 'static) {
        let _ = self.on_end.set(Box::new(f));
    }

    fn ended(&self, session: &Session, reason: &str) {
        if session.end(reason)
            && let Some(f) = self.on_end.get()
        {
            f(session, reason);
        }
    }

    pub fn max(&self) -> usize {
        self.max.load(Ordering::Relaxed)
    }

    /// Changes the limit; sessions beyond a lowered limit live on, new ones wait for room.
    pub fn set_max(&self, max: usize) {
        self.max.store(max, Ordering::Relaxed);
    }

    /// Makes a session whose sandbox `make` creates (only when the id is free and the
    /// table has room).
    pub fn create(
        &self,
        config: SessionConfig,
        make: impl FnOnce() -> Result<Sandbox>,
    ) -> Result<Arc<Session>, SessionRefused> {
        let mut map = lock(&self.map);
        if map.contains_key(&config.id) {
            return Err(SessionRefused::Exists(config.id));
        }
        let max = self.max();
        if map.len() >= max {
            return Err(SessionRefused::Full(max));
        }
        let sandbox = make().map_err(SessionRefused::Sandbox)?;
        let session = Arc::new(Session::new(config, sandbox));
        map.insert(session.id().to_string(), session.clone());
        Ok(session)
    }

    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.map).get(id).cloned()
    }

    pub fn len(&self) -> usize {
        lock(&self.map).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every live session.
    pub fn all(&self) -> Vec<Arc<Session>> {
        lock(&self.map).values().cloned().collect()
    }

    /// Removes a session and ends it.
    pub fn end(&self, id: &str, reason: &str) -> Option<Arc<Session>> {
        let session = lock(&self.map).remove(id)?;
        self.ended(&session, reason);
        Some(session)
    }

    /// Ends every session.
    pub fn end_all(&self, reason: &str) {
        let all: Vec<_> = lock(&self.map).drain().map(|(_, s)| s).collect();
        for s in all {
            self.ended(&s, reason);
        }
    }

    /// Ends the sessions past their lifetime or idle limit and closes idle PTYs.
    pub fn reap(&self) {
        let now = Instant::now();
        let expired: Vec<(Arc<Session>, &'static str)> = {
            let mut map = lock(&self.map);
            let ids: Vec<(String, &'static str)> = map
                .iter()
                .filter_map(|(id, s)| s.expired(now).map(|why| (id.clone(), why)))
                .collect();
            ids.into_iter()
                .filter_map(|(id, why)| map.remove(&id).map(|s| (s, why)))
                .collect()
        };
        for (session, why) in expired {
            self.ended(&session, why);
        }
        let live: Vec<Arc<Session>> = lock(&self.map).values().cloned().collect();
        for s in live {
            s.reap_ptys(now);
        }
    }

    /// Reaps every `every` for as long as the table lives.
    pub async fn reap_every(self: Arc<Self>, every: Duration) {
        let weak = Arc::downgrade(&self);
        drop(self);
        loop {
            tokio::time::sleep(every).await;
            match weak.upgrade() {
                Some(sessions) => sessions.reap(),
                None => return,
            }
        }
    }
}
