//! A term agent instance at work: set up, given tasks (term2) or requests (term1), cleaned
//! up. The host enforces the SDK's limits: a task's global timeout ends the agent wherever
//! it is (in a command, waiting for the LLM, or spinning in its own code), and an instance
//! the host had to stop is dropped; the next call makes a fresh one and sets it up first.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use wasmtime::Store;

use super::context::TermHost;
use super::load::{Pre, TermAgent};
use super::monitor::{TaskEvent, TaskMonitor, TaskSnapshot, TaskStatus};
use super::{
    AgentEnv, CLEANUP_TIMEOUT, Keystrokes, SETUP_TIMEOUT, SOLVE_TIMEOUT, SolveRequest,
    SolveResponse, TaskSpec, TermVersion,
};
use crate::agent::llm::{LlmCall, LlmHost, LlmObserver};
use crate::agent::{self, failure, interrupted};
use crate::bindings::{term1, term2};
use crate::host::HostState;

impl agent::Instantiate<TermHost> for Pre {
    type Instance = Bindings;
    async fn instantiate(
        &self,
        store: &mut wasmtime::Store<HostState<TermHost>>,
    ) -> wasmtime::Result<Bindings> {
        Ok(match self {
            Pre::Term2(pre) => Bindings::Term2(pre.instantiate_async(store).await?),
            Pre::Term1(pre) => Bindings::Term1(pre.instantiate_async(store).await?),
        })
    }
}

pub(super) enum Bindings {
    Term2(term2::Agent),
    Term1(term1::Agent),
}

struct Live {
    store: Store<HostState<TermHost>>,
    bindings: Bindings,
}

/// One agent instance at work. See the module documentation.
pub struct AgentRunner {
    agent: TermAgent,
    env: AgentEnv,
    monitor: Arc<TaskMonitor>,
    live: Option<Live>,
    /// How long one `solve` may take.
    pub solve_timeout: Duration,
}

impl AgentRunner {
    pub fn new(agent: TermAgent, env: AgentEnv, monitor: Arc<TaskMonitor>) -> Self {
        AgentRunner {
            agent,
            env,
            monitor,
            live: None,
            solve_timeout: SOLVE_TIMEOUT,
        }
    }

    pub fn monitor(&self) -> &Arc<TaskMonitor> {
        &self.monitor
    }

    pub fn version(&self) -> TermVersion {
        self.agent.version()
    }

    /// Tells the environment's event sink about something that happened in the task.
    pub fn emit(&self, event: &TaskEvent) {
        if let Some(f) = &self.env.on_event {
            f(event);
        }
    }

    async fn instantiate(&mut self) -> Result<Live> {
        let on_call = self.env.on_event.clone().map(|f| {
            Arc::new(move |call: &LlmCall| {
                f(&TaskEvent::Llm {
                    ok: call.ok,
                    detail: call.detail.clone(),
                })
            }) as LlmObserver
        });
        let host = TermHost {
            env: self.env.clone(),
            monitor: self.monitor.clone(),
            deadline: None,
            fatal: None,
            llm: LlmHost::new(Arc::new(self.env.llm.clone()), on_call),
        };
        let job = agent::job(&self.env.sandbox, None);
        let (store, bindings) = agent::start(
            &self.env.sandbox,
            &job,
            &self.agent.name,
            &self.env.env,
            self.env.log.clone(),
            host,
            &*self.agent.pre,
        )
        .await?;
        Ok(Live { store, bindings })
    }

    /// Makes an instance (if none is alive) and calls its `setup`.
    pub async fn setup(&mut self) -> Result<(), String> {
        if self.live.is_some() {
            return Ok(());
        }
        let mut live = self
            .instantiate()
            .await
            .map_err(|e| format!("cannot start the agent: {e:#}"))?;
        let Live { store, bindings } = &mut live;
        let call = async {
            match bindings {
                Bindings::Term2(b) => b.call_setup(&mut *store).await,
                Bindings::Term1(b) => b.call_setup(&mut *store).await,
            }
        };
        match tokio::time::timeout(SETUP_TIMEOUT, call).await {
            Ok(Ok(Ok(()))) => {
                self.live = Some(live);
                Ok(())
            }
            Ok(Ok(Err(e))) => Err(format!("setup failed: {e}")),
            Ok(Err(trap)) => Err(format!("setup failed: {}", failure(&trap))),
            Err(_) => Err(format!(
                "setup did not return within {}s",
                SETUP_TIMEOUT.as_secs()
            )),
        }
    }

    /// Runs one task of a term2 agent to its end and returns its final state. The task
    /// must have been started on the monitor ([`TaskMonitor::try_start`]); it is started
    /// here if it was not. The global timeout ends the agent wherever it is.
    pub async fn run_task(&mut self, task: &TaskSpec) -> TaskSnapshot {
        if self.monitor.status() != TaskStatus::Running {
            let _ = self.monitor.try_start(task);
        }
        let error = self.run_task_inner(task).await;
        self.monitor.finish(error);
        self.monitor.snapshot()
    }

    async fn run_task_inner(&mut self, task: &TaskSpec) -> Option<String> {
        if self.agent.version() != TermVersion::Term2 {
            return Some("this agent is a term1 agent: it has no `run`".into());
        }
        let deadline = crate::job::deadline_after(task.timeout);
        let timeout_message = format!("Global timeout ({}s) exceeded", task.timeout.as_secs());
        if let Err(e) = tokio::time::timeout_at(deadline.into(), self.setup())
            .await
            .unwrap_or_else(|_| Err(timeout_message.clone()))
        {
            self.live = None;
            return Some(e);
        }
        let mut live = self.live.take()?;
        // The task's own job: at the deadline the instance is interrupted even if it never
        // calls the host again.
        let job = agent::job(&self.env.sandbox, Some(deadline));
        let data = live.store.data_mut();
        data.set_job(job);
        data.ext.deadline = Some(deadline);
        data.ext.fatal = None;
        let wit_task = term2::wasbox::term::types::Task {
            instruction: task.instruction.clone(),
            max_steps: task.max_steps,
            timeout_secs: task.timeout.as_secs(),
        };
        let Live { store, bindings } = &mut live;
        let Bindings::Term2(agent) = bindings else {
            return Some("not a term2 agent".into());
        };
        let result =
            tokio::time::timeout_at(deadline.into(), agent.call_run(&mut *store, &wit_task)).await;
        let fatal = store.data_mut().ext.take_fatal();
        store.data_mut().ext.deadline = None;
        match result {
            Err(_) => Some(fatal.unwrap_or(timeout_message)),
            Ok(Err(trap)) if interrupted(&trap) && Instant::now() >= deadline => {
                Some(fatal.unwrap_or(timeout_message))
            }
            Ok(Err(trap)) => Some(fatal.unwrap_or_else(|| failure(&trap))),
            Ok(Ok(outcome)) => {
                // The instance is healthy: keep it for the next task, on a job without a
                // deadline until then.
                live.store
                    .data_mut()
                    .set_job(agent::job(&self.env.sandbox, None));
                self.live = Some(live);
                outcome.err()
            }
        }
    }

    /// Answers one term1 request. An error (the agent's, a trap, or the solve timeout)
    /// drops the instance.
    pub async fn solve(&mut self, request: &SolveRequest) -> Result<SolveResponse, String> {
        if self.agent.version() != TermVersion::Term1 {
            return Err("this agent is a term2 agent: it has no `solve`".into());
        }
        self.setup().await?;
        let mut live = self.live.take().ok_or("the agent is not running")?;
        let req = term1::wasbox::term::types::Request {
            instruction: request.instruction.clone(),
            step: request.step,
            last_command: request.last_command.clone(),
            output: request.output.clone(),
            exit_code: request.exit_code,
            cwd: request.cwd.clone(),
        };
        let Live { store, bindings } = &mut live;
        let Bindings::Term1(agent) = bindings else {
            return Err("not a term1 agent".into());
        };
        let result =
            tokio::time::timeout(self.solve_timeout, agent.call_solve(&mut *store, &req)).await;
        let fatal = store.data_mut().ext.take_fatal();
        match result {
            Err(_) => Err(format!(
                "the agent did not answer within {}s",
                self.solve_timeout.as_secs()
            )),
            Ok(Err(trap)) => Err(fatal.unwrap_or_else(|| failure(&trap))),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Ok(Ok(r))) => {
                self.live = Some(live);
                Ok(SolveResponse {
                    command: r.command,
                    task_complete: r.task_complete,
                    text: r.text,
                    analysis: r.analysis,
                    plan: r.plan,
                    commands: r
                        .commands
                        .into_iter()
                        .map(|k| Keystrokes {
                            keystrokes: k.keystrokes,
                            duration: k.duration,
                        })
                        .collect(),
                })
            }
        }
    }

    /// Calls `cleanup` on a live instance and drops it.
    pub async fn cleanup(&mut self) {
        let Some(mut live) = self.live.take() else {
            return;
        };
        let Live { store, bindings } = &mut live;
        let call = async {
            match bindings {
                Bindings::Term2(b) => b.call_cleanup(&mut *store).await,
                Bindings::Term1(b) => b.call_cleanup(&mut *store).await,
            }
        };
        match tokio::time::timeout(CLEANUP_TIMEOUT, call).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %failure(&e), "agent cleanup failed"),
            Err(_) => tracing::warn!("agent cleanup did not return in time"),
        }
    }
}
