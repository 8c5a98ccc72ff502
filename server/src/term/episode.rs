//! `wasbox term run`: one episode on this machine, with a transcript. A term2 agent gets the
//! task as `/start` would give it; for a term1 agent wasbox is also the harness.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use wasbox_runtime::term::{
    AgentRunner, TASK_MOUNT, TaskEvent, TaskMonitor, TaskSpec, TaskStatus, TermVersion, harness,
};

use super::EpisodeArgs;
use super::agent::{env_for, load, runtime, stderr_sink, task_sandbox};

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

/// Plays the episode and prints its transcript; 0 when the agent completed.
pub async fn main(args: EpisodeArgs) -> Result<i32> {
    if args.instruction.is_empty() {
        bail!("`term run` needs a non-empty --instruction");
    }
    let task = TaskSpec {
        instruction: args.instruction.clone(),
        max_steps: args.max_steps,
        timeout: args.timeout,
    };
    let runtime = runtime()?;
    let sandbox = task_sandbox(&runtime, args.workdir.clone())?;
    let agent = load(&runtime, &args.agent).await?;
    println!(
        "wasbox: agent {}, {}, task directory {} at {TASK_MOUNT}\ntask: {}",
        args.agent,
        agent.version().as_str(),
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
    let (ok, steps, error) = match agent.version() {
        TermVersion::Term2 => {
            let env = env_for(sandbox, stderr_sink(), Some(Arc::new(transcript)));
            let mut runner = AgentRunner::new(agent, env, TaskMonitor::new());
            let end = runner.run_task(&task).await;
            runner.cleanup().await;
            (end.status == TaskStatus::Completed, end.steps, end.error)
        }
        TermVersion::Term1 => {
            let env = env_for(sandbox.clone(), stderr_sink(), Some(Arc::new(transcript)));
            let mut runner = AgentRunner::new(agent, env, TaskMonitor::new());
            let end = harness::play(&mut runner, &sandbox, &task).await;
            runner.cleanup().await;
            (end.completed, end.steps, end.error)
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
