//! `wasbox agent ...`: term-challenge agents as components.
//!
//! - `serve`: the SDK 2.0 HTTP server (see [`http`]).
//! - `stdio`: the SDK 1.x agent side, one JSON request line in, one response line out.
//! - `run`: a whole episode locally, for either SDK; for SDK 1.x agents wasbox is also the
//!   harness (it runs each command with the harness's cwd tracking).
//! - `build`: a Python agent written against the term SDK, made a component.

mod http;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use tokio::io::AsyncBufReadExt as _;
use wasbox_runtime::stdio::OutputSink;
use wasbox_runtime::term::{
    AgentEnv, AgentKind, AgentRunner, BUILTIN_AGENTS, LlmProxy, SolveRequest, SolveResponse,
    TaskEvent, TaskMonitor, TaskSpec, TaskStatus, TermAgent, builtin_agent,
};
use wasbox_runtime::{JobSpec, JobStatus, Limits, Runtime, Sandbox, SandboxConfig};

/// Where the task directory appears inside the sandbox.
pub const TASK_MOUNT: &str = "/app";
/// `AGENT_PORT` when unset.
pub const DEFAULT_AGENT_PORT: u16 = 8765;
/// How long `agent serve` lets a running task go on after SIGTERM or SIGINT.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// The harness's per-command timeout for SDK 1.x agents.
const HARNESS_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

pub const USAGE: &str = "\
Usage:
  wasbox agent serve AGENT [--workdir DIR] [--listen ADDR]
  wasbox agent stdio AGENT [--workdir DIR]
  wasbox agent run AGENT --instruction TEXT [--workdir DIR] [--max-steps N] [--timeout SECS]
  wasbox agent build AGENT.py -o AGENT.wasm

AGENT is a component file (world wasbox:term/agent@2.0.0 or wasbox:term/agent-v1@1.0.0)
or the name of a built-in example agent: llm-agent (SDK 2.0), llm-agent-v1 (SDK 1.x).

  serve   SDK 2.0 over HTTP: GET|POST /health, POST /start, GET /status, on
          0.0.0.0:$AGENT_PORT (default 8765) unless --listen says otherwise.
  stdio   SDK 1.x: one JSON request per line on stdin, one response per line on stdout;
          the agent's logs go to stderr.
  run     one episode on this machine, printing a transcript; exits 0 only when the agent
          completed (default 200 steps, 300 s).
  build   a Python agent (`from term_sdk import Agent, AgentContext, run`) made a component
          with componentize-py.

--workdir DIR is the task directory, mounted at /app (default: a fresh empty directory).
The LLM is reached only through the host's LLM_PROXY_URL (POST {url}/llm/proxy), billed to
TERM_AGENT_HASH and TERM_TASK_ID; LLM_MODEL names the model when the agent names none.
";

struct AgentArgs {
    agent: String,
    workdir: Option<PathBuf>,
    listen: Option<String>,
    instruction: Option<String>,
    max_steps: Option<u32>,
    timeout: Option<Duration>,
    output: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<AgentArgs> {
    let mut out = AgentArgs {
        agent: String::new(),
        workdir: None,
        listen: None,
        instruction: None,
        max_steps: None,
        timeout: None,
        output: None,
    };
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let mut value = || -> Result<String> {
            i += 1;
            args.get(i)
                .cloned()
                .with_context(|| format!("{a} needs a value"))
        };
        match a {
            "--workdir" => out.workdir = Some(PathBuf::from(value()?)),
            "--listen" => out.listen = Some(value()?),
            "--instruction" => out.instruction = Some(value()?),
            "-o" | "--output" => out.output = Some(PathBuf::from(value()?)),
            "--max-steps" => {
                let v = value()?;
                out.max_steps = Some(
                    v.parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .with_context(|| format!("--max-steps: `{v}` is not a positive number"))?,
                );
            }
            "--timeout" => out.timeout = Some(crate::cli::parse_seconds(a, &value()?)?),
            _ if a.starts_with('-') => bail!("unknown option `{a}`"),
            _ if out.agent.is_empty() => out.agent = a.to_string(),
            _ => bail!("unexpected argument `{a}`"),
        }
        i += 1;
    }
    if out.agent.is_empty() {
        bail!("no agent given\n\n{USAGE}");
    }
    Ok(out)
}

/// `wasbox agent SUBCOMMAND ...`.
pub fn main(args: &[String]) -> Result<i32> {
    let Some(sub) = args.first() else {
        eprint!("{USAGE}");
        return Ok(2);
    };
    if matches!(sub.as_str(), "help" | "--help" | "-h") {
        print!("{USAGE}");
        return Ok(0);
    }
    let parsed = parse(&args[1..])?;
    if sub == "build" {
        let source = PathBuf::from(&parsed.agent);
        let output = parsed
            .output
            .clone()
            .unwrap_or_else(|| source.with_extension("wasm"));
        eprintln!(
            "wasbox: building {} with componentize-py (this takes a while)",
            source.display()
        );
        wasbox_runtime::term::build_python_agent(&source, &output)?;
        // Load what was built: it must link as an agent, and its compiled code lands in the
        // cache, so the first `serve` answers /health in milliseconds.
        let rt = tokio::runtime::Runtime::new()?;
        let agent = rt.block_on(load(&runtime()?, &output.to_string_lossy()))?;
        println!(
            "wasbox: built {}, an {} agent",
            output.display(),
            agent.kind().as_str()
        );
        return Ok(0);
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        match sub.as_str() {
            "serve" => serve(parsed).await,
            "stdio" => stdio(parsed).await,
            "run" => run(parsed).await,
            other => bail!("unknown agent command `{other}`\n\n{USAGE}"),
        }
    })
}

/// The component bytes for AGENT: a file, else a built-in example agent.
fn agent_bytes(agent: &str) -> Result<(String, Vec<u8>)> {
    let path = PathBuf::from(agent);
    if path.is_file() {
        let bytes = std::fs::read(&path).with_context(|| format!("reading {agent}"))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| agent.to_string());
        return Ok((name, bytes));
    }
    match builtin_agent(agent) {
        Some(bytes) => Ok((agent.to_string(), bytes.to_vec())),
        None => bail!(
            "`{agent}` is neither a file nor a built-in agent (built-in: {})",
            BUILTIN_AGENTS.join(", ")
        ),
    }
}

async fn load(runtime: &Runtime, agent: &str) -> Result<TermAgent> {
    let (name, bytes) = agent_bytes(agent)?;
    runtime.term_agent(&name, bytes).await
}

/// The task sandbox: the work directory at `/app`; commands are bounded by their own
/// timeouts, so the sandbox's own limit is only a backstop.
fn task_sandbox(runtime: &Runtime, workdir: Option<PathBuf>) -> Result<Sandbox> {
    let mut config = SandboxConfig::default()
        .mount(TASK_MOUNT)
        .limits(Limits::default().timeout(Duration::from_secs(366 * 24 * 3600)));
    if let Some(dir) = workdir {
        config = config.workspace(dir);
    }
    runtime.sandbox(config)
}

/// What the agent component's environment gets from the validator's: identifiers and
/// modes, never the proxy URL (the host holds the only way out).
fn agent_env() -> Vec<(String, String)> {
    [
        "TERM_AGENT_HASH",
        "TERM_TASK_ID",
        "EVALUATION_MODE",
        "TEST_DIR",
        "LLM_MODEL",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
    .collect()
}

/// Bytes of its own output (logs) an agent may write to wasbox's stderr; a flood beyond this
/// is dropped, with one note, so it cannot fill the operator's disk.
const MAX_AGENT_LOG_BYTES: usize = 16 << 20;

/// The agent's logs: wasbox's stderr, up to [`MAX_AGENT_LOG_BYTES`].
fn stderr_sink() -> OutputSink {
    OutputSink::Writer(Arc::new(Mutex::new(Box::new(CappedLog {
        inner: std::io::stderr(),
        left: MAX_AGENT_LOG_BYTES,
    }))))
}

struct CappedLog<W> {
    inner: W,
    left: usize,
}

impl<W: std::io::Write> std::io::Write for CappedLog<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Ok(buf.len());
        }
        let n = buf.len().min(self.left);
        self.inner.write_all(&buf[..n])?;
        self.left -= n;
        if self.left == 0 {
            writeln!(
                self.inner,
                "\n[wasbox] the agent wrote more than {} MiB of logs; the rest is dropped",
                MAX_AGENT_LOG_BYTES >> 20
            )?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn env_for(
    sandbox: Sandbox,
    log: OutputSink,
    on_event: Option<wasbox_runtime::term::EventSink>,
) -> AgentEnv {
    AgentEnv {
        sandbox,
        llm: LlmProxy::from_env(),
        log,
        env: agent_env(),
        on_event,
    }
}

fn runtime() -> Result<Runtime> {
    Runtime::builder().build()
}

/// Compiles (or loads from the cache) the image's programs while the agent starts, so that
/// its first commands do not wait for the compiler.
fn preload_in_background(runtime: &Runtime) {
    let runtime = runtime.clone();
    tokio::spawn(async move {
        if let Err(e) = runtime.preload().await {
            tracing::warn!(error = %format!("{e:#}"), "could not load the image's programs");
        }
    });
}

// ---------------------------------------------------------------------------------------
// serve
// ---------------------------------------------------------------------------------------

async fn serve(args: AgentArgs) -> Result<i32> {
    let listen: SocketAddr = match &args.listen {
        Some(l) => l
            .parse()
            .with_context(|| format!("--listen: `{l}` is not IP:PORT"))?,
        None => {
            let port = match std::env::var("AGENT_PORT") {
                Ok(p) => p
                    .parse()
                    .with_context(|| format!("AGENT_PORT: `{p}` is not a port number"))?,
                Err(_) => DEFAULT_AGENT_PORT,
            };
            SocketAddr::from(([0, 0, 0, 0], port))
        }
    };
    let runtime = runtime()?;
    let sandbox = task_sandbox(&runtime, args.workdir)?;
    let monitor = TaskMonitor::new();
    let (server, tasks) = http::AgentServer::new(monitor.clone());
    // Listen first: `/health` answers 503 while the agent compiles and sets up.
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let addr = listener.local_addr()?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "wasbox: term agent server listening on http://{addr}")?;
        out.flush()?;
    }
    let app = http::router(server.clone());
    let http = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(crate::serve::shutdown_signal())
            .await
    });

    let agent = load(&runtime, &args.agent).await?;
    if agent.kind() != AgentKind::Sdk2 {
        bail!(
            "`{}` is an {} agent; `agent serve` needs an SDK 2.0 agent (use `agent stdio`)",
            args.agent,
            agent.kind().as_str()
        );
    }
    let log = stderr_sink();
    let mut runner = AgentRunner::new(agent, env_for(sandbox.clone(), log, None), monitor);
    if let Err(e) = runner.setup().await {
        bail!("the agent could not start: {e}");
    }
    server.set_ready();
    preload_in_background(&runtime);
    tracing::info!(agent = %args.agent, workdir = %sandbox.workspace().display(), "term agent ready");
    eprintln!(
        "wasbox: term agent {} ready, task directory {}",
        args.agent,
        sandbox.workspace().display()
    );
    let mut worker = tokio::spawn(http::run_tasks(runner, tasks));
    let served = http.await.context("the HTTP server panicked")?;
    served.context("serving the agent")?;
    // The server is gone, so is the sender: the worker ends after the running task, which
    // gets a short grace period and is then stopped (its commands with it).
    drop(server);
    match tokio::time::timeout(SHUTDOWN_GRACE, &mut worker).await {
        Ok(Ok(mut runner)) => runner.cleanup().await,
        Ok(Err(e)) => tracing::warn!(error = %e, "the agent runner failed"),
        Err(_) => {
            tracing::warn!("shutting down with a task still running: stopping it");
            worker.abort();
        }
    }
    Ok(0)
}

// ---------------------------------------------------------------------------------------
// stdio
// ---------------------------------------------------------------------------------------

/// What the reference agent prints when it cannot go on.
const GIVE_UP: &str = r#"{"command":null,"task_complete":true}"#;

fn say(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}

/// A request line of SDK 1.x; the null fields may be missing.
pub fn parse_request(line: &str) -> Result<SolveRequest, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}"))?;
    let obj = value.as_object().ok_or("a request must be a JSON object")?;
    let text = |k: &str| -> Result<Option<String>, String> {
        match obj.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("`{k}` must be a string or null")),
        }
    };
    let instruction = text("instruction")?.ok_or("`instruction` is missing")?;
    let step = match obj.get("step") {
        None | Some(Value::Null) => 1,
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or("`step` must be a positive integer")?,
    };
    let exit_code = match obj.get("exit_code") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or("`exit_code` must be an integer or null")?,
        ),
    };
    Ok(SolveRequest {
        instruction,
        step,
        last_command: text("last_command")?,
        output: text("output")?,
        exit_code,
        cwd: text("cwd")?.unwrap_or_else(|| TASK_MOUNT.to_string()),
    })
}

/// A response line: `command` and `task_complete` always, `text` and the legacy fields
/// only when the agent set them.
pub fn response_line(r: &SolveResponse) -> String {
    let mut obj = Map::new();
    obj.insert("command".into(), json!(r.command));
    obj.insert("task_complete".into(), json!(r.task_complete));
    let mut optional = |key: &str, v: &Option<String>| {
        if let Some(s) = v.as_ref().filter(|s| !s.is_empty()) {
            obj.insert(key.into(), json!(s));
        }
    };
    optional("text", &r.text);
    optional("analysis", &r.analysis);
    optional("plan", &r.plan);
    if !r.commands.is_empty() {
        obj.insert(
            "commands".into(),
            Value::Array(
                r.commands
                    .iter()
                    .map(|k| match k.duration {
                        Some(d) => json!({"keystrokes": k.keystrokes, "duration": d}),
                        None => json!({"keystrokes": k.keystrokes}),
                    })
                    .collect(),
            ),
        );
    }
    Value::Object(obj).to_string()
}

async fn stdio(args: AgentArgs) -> Result<i32> {
    let runtime = runtime()?;
    let sandbox = task_sandbox(&runtime, args.workdir)?;
    let agent = load(&runtime, &args.agent).await?;
    if agent.kind() != AgentKind::Sdk1 {
        bail!(
            "`{}` is an {} agent; `agent stdio` needs an SDK 1.x agent (use `agent serve`)",
            args.agent,
            agent.kind().as_str()
        );
    }
    // stdout is the protocol: the agent's own output goes to stderr.
    let mut runner = AgentRunner::new(
        agent,
        env_for(sandbox, stderr_sink(), None),
        TaskMonitor::new(),
    );
    preload_in_background(&runtime);
    if let Err(e) = runner.setup().await {
        eprintln!("[wasbox] agent setup failed: {e}");
        say(GIVE_UP)?;
        return Ok(1);
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await.context("reading stdin")? {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let request = match parse_request(line) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("[wasbox] invalid request: {e}");
                say(GIVE_UP)?;
                runner.cleanup().await;
                return Ok(1);
            }
        };
        match runner.solve(&request).await {
            Ok(response) => {
                say(&response_line(&response))?;
                if response.task_complete {
                    break;
                }
            }
            Err(e) => {
                eprintln!("[wasbox] agent error: {e}");
                say(GIVE_UP)?;
                runner.cleanup().await;
                return Ok(1);
            }
        }
    }
    runner.cleanup().await;
    Ok(0)
}

// ---------------------------------------------------------------------------------------
// run
// ---------------------------------------------------------------------------------------

/// Prints the transcript of an episode.
fn transcript(event: &TaskEvent) {
    let mut out = std::io::stdout().lock();
    let _ = match event {
        TaskEvent::Command { step, command } => writeln!(out, "\n[{step}] $ {command}"),
        TaskEvent::Output {
            stdout,
            stderr,
            exit_code,
            ..
        } => {
            let _ = out.write_all(stdout.as_bytes());
            if !stdout.is_empty() && !stdout.ends_with('\n') {
                let _ = writeln!(out);
            }
            let _ = out.write_all(stderr.as_bytes());
            if !stderr.is_empty() && !stderr.ends_with('\n') {
                let _ = writeln!(out);
            }
            writeln!(out, "[exit {exit_code}]")
        }
        TaskEvent::Log(m) => writeln!(out, "[log] {m}"),
        TaskEvent::Llm { ok: true, detail } => writeln!(out, "[llm] {detail}"),
        TaskEvent::Llm { ok: false, detail } => writeln!(out, "[llm] error: {detail}"),
    };
    let _ = out.flush();
}

async fn run(args: AgentArgs) -> Result<i32> {
    let instruction = args
        .instruction
        .clone()
        .filter(|i| !i.is_empty())
        .context("`agent run` needs --instruction TEXT")?;
    let mut task = TaskSpec::new(instruction);
    if let Some(n) = args.max_steps {
        task.max_steps = n;
    }
    if let Some(t) = args.timeout {
        task.timeout = t;
    }
    let runtime = runtime()?;
    let sandbox = task_sandbox(&runtime, args.workdir.clone())?;
    let agent = load(&runtime, &args.agent).await?;
    println!(
        "wasbox: agent {}, {}, task directory {} at {TASK_MOUNT}\ntask: {}",
        args.agent,
        agent.kind().as_str(),
        sandbox.workspace().display(),
        task.instruction
    );
    // The programs the agent's commands will run: compiled (first time on this machine)
    // or loaded from the cache before the task's clock starts.
    runtime
        .preload()
        .await
        .context("loading the programs of the image")?;
    let started = Instant::now();
    let (ok, steps, error) = match agent.kind() {
        AgentKind::Sdk2 => {
            let env = env_for(sandbox, stderr_sink(), Some(Arc::new(transcript)));
            let mut runner = AgentRunner::new(agent, env, TaskMonitor::new());
            let end = runner.run_task(&task).await;
            runner.cleanup().await;
            (end.status == TaskStatus::Completed, end.steps, end.error)
        }
        AgentKind::Sdk1 => {
            let env = env_for(sandbox.clone(), stderr_sink(), Some(Arc::new(transcript)));
            let mut runner = AgentRunner::new(agent, env, TaskMonitor::new());
            let r = harness(&mut runner, &sandbox, &task).await;
            runner.cleanup().await;
            r
        }
    };
    let secs = started.elapsed().as_secs_f64();
    match error {
        None if ok => {
            println!("\nwasbox: completed in {steps} steps ({secs:.1}s)");
            Ok(0)
        }
        e => {
            println!(
                "\nwasbox: failed after {steps} steps ({secs:.1}s): {}",
                e.unwrap_or_else(|| "the agent did not complete".into())
            );
            Ok(1)
        }
    }
}

/// The SDK 1.x harness: ask, run the command with cwd tracking, feed back the result.
/// Returns (completed, steps, error).
async fn harness(
    runner: &mut AgentRunner,
    sandbox: &Sandbox,
    task: &TaskSpec,
) -> (bool, u32, Option<String>) {
    let deadline = Instant::now() + task.timeout;
    let timeout_error = || format!("Global timeout ({}s) exceeded", task.timeout.as_secs());
    let setup = tokio::time::timeout_at(deadline.into(), runner.setup())
        .await
        .unwrap_or_else(|_| Err(timeout_error()));
    if let Err(e) = setup {
        return (false, 0, Some(format!("the agent's setup failed: {e}")));
    }
    let mut cwd = TASK_MOUNT.to_string();
    let mut request = SolveRequest {
        instruction: task.instruction.clone(),
        step: 1,
        cwd: cwd.clone(),
        ..SolveRequest::default()
    };
    let mut steps = 0;
    loop {
        let response = match tokio::time::timeout_at(deadline.into(), runner.solve(&request)).await
        {
            Err(_) => return (false, steps, Some(timeout_error())),
            Ok(Err(e)) => return (false, steps, Some(format!("agent error: {e}"))),
            Ok(Ok(r)) => r,
        };
        if let Some(text) = response.text.as_ref().filter(|t| !t.is_empty()) {
            transcript(&TaskEvent::Log(text.clone()));
        }
        let command = response.command_to_run();
        if let Some(command) = &command {
            if steps >= task.max_steps {
                return (
                    false,
                    steps,
                    Some(format!("Max steps ({}) exceeded", task.max_steps)),
                );
            }
            steps += 1;
            transcript(&TaskEvent::Command {
                step: steps,
                command: command.clone(),
            });
            let remaining = deadline.saturating_duration_since(Instant::now());
            let (output, exit_code) = match tokio::time::timeout(
                remaining,
                run_tracked(sandbox, &mut cwd, command),
            )
            .await
            {
                Ok(r) => r,
                Err(_) => return (false, steps, Some(timeout_error())),
            };
            transcript(&TaskEvent::Output {
                step: steps,
                stdout: output.clone(),
                stderr: String::new(),
                exit_code,
            });
            request = SolveRequest {
                instruction: task.instruction.clone(),
                step: request.step + 1,
                last_command: Some(command.clone()),
                output: Some(output),
                exit_code: Some(exit_code),
                cwd: cwd.clone(),
            };
        } else {
            request = SolveRequest {
                instruction: task.instruction.clone(),
                step: request.step + 1,
                cwd: cwd.clone(),
                ..SolveRequest::default()
            };
        }
        if response.task_complete {
            return (true, steps, None);
        }
        if command.is_none() && request.step > task.max_steps.saturating_add(1) {
            return (
                false,
                steps,
                Some(format!("Max steps ({}) exceeded", task.max_steps)),
            );
        }
    }
}

/// Runs one harness command: `cd X` alone moves the tracked directory when X exists;
/// anything else runs as `sh -c "cd CWD && CMD"`. Output is stdout then stderr.
async fn run_tracked(sandbox: &Sandbox, cwd: &mut String, command: &str) -> (String, i32) {
    if let Some(target) = lone_cd(command) {
        let dest = resolve(cwd, &target);
        if sandbox.is_dir(&dest) {
            *cwd = dest;
            return (String::new(), 0);
        }
    }
    let script = format!("cd {} && {command}", shell_quote(cwd));
    match sandbox
        .run(JobSpec::shell(script).timeout(HARNESS_COMMAND_TIMEOUT))
        .await
    {
        Ok(out) if out.status == JobStatus::Timeout => (
            format!(
                "Command timed out after {}s",
                HARNESS_COMMAND_TIMEOUT.as_secs()
            ),
            -1,
        ),
        Ok(out) => (format!("{}{}", out.stdout, out.stderr), out.exit_code),
        Err(e) => (format!("{e:#}"), -1),
    }
}

/// `X` when the command is just `cd X` (or `cd` alone: the task directory).
fn lone_cd(command: &str) -> Option<String> {
    let c = command.trim();
    let rest = c.strip_prefix("cd")?;
    if rest.is_empty() {
        return Some(TASK_MOUNT.to_string());
    }
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let arg = rest.trim();
    if arg.is_empty() {
        return Some(TASK_MOUNT.to_string());
    }
    let unquoted = if arg.len() >= 2
        && ((arg.starts_with('\'') && arg.ends_with('\''))
            || (arg.starts_with('"') && arg.ends_with('"')))
    {
        &arg[1..arg.len() - 1]
    } else {
        arg
    };
    let special = |ch: char| ";&|<>()$`\\\"' \t\n*?[]{}~".contains(ch);
    if unquoted.is_empty() || (unquoted == arg && arg.chars().any(special)) {
        return None;
    }
    Some(unquoted.to_string())
}

/// `path` against `cwd`, with `.` and `..` resolved.
fn resolve(cwd: &str, path: &str) -> String {
    let full = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for p in full.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_logs_are_capped() {
        use std::io::Write as _;
        let mut log = CappedLog {
            inner: Vec::new(),
            left: 10,
        };
        log.write_all(b"0123456").unwrap();
        log.write_all(b"789abcdef").unwrap();
        log.write_all(b"more").unwrap();
        let text = String::from_utf8(log.inner).unwrap();
        assert!(
            text.starts_with("0123456789\n[wasbox] the agent wrote more than"),
            "{text}"
        );
        assert!(!text.contains("abc"));
        assert_eq!(text.matches("more").count(), 1, "{text}");
    }

    #[test]
    fn lone_cd_is_recognised() {
        assert_eq!(lone_cd("cd src").as_deref(), Some("src"));
        assert_eq!(lone_cd("  cd '/tmp/a b'  ").as_deref(), Some("/tmp/a b"));
        assert_eq!(lone_cd("cd").as_deref(), Some("/app"));
        assert_eq!(lone_cd("cd src && ls"), None);
        assert_eq!(lone_cd("cdx"), None);
        assert_eq!(lone_cd("cd $HOME"), None);
        assert_eq!(resolve("/app/x", "../y/./z"), "/app/y/z");
    }

    #[test]
    fn requests_may_omit_null_fields() {
        let r = parse_request(r#"{"instruction":"do","step":1,"cwd":"/app"}"#).unwrap();
        assert_eq!(r.last_command, None);
        assert_eq!(r.exit_code, None);
        let r = parse_request(
            r#"{"instruction":"do","step":2,"last_command":"ls","output":"a","exit_code":0,"cwd":"/app"}"#,
        )
        .unwrap();
        assert_eq!((r.step, r.exit_code), (2, Some(0)));
        assert!(parse_request("nope").is_err());
        assert!(parse_request("[1]").is_err());
    }

    #[test]
    fn responses_carry_text_only_when_set() {
        let r = SolveResponse {
            command: Some("ls".into()),
            ..SolveResponse::default()
        };
        assert_eq!(
            response_line(&r),
            r#"{"command":"ls","task_complete":false}"#
        );
        let r = SolveResponse {
            task_complete: true,
            text: Some("done".into()),
            ..SolveResponse::default()
        };
        assert_eq!(
            response_line(&r),
            r#"{"command":null,"task_complete":true,"text":"done"}"#
        );
    }
}
