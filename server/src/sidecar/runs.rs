//! The sidecar's runs: each with its numbered events (the last [`REPLAY`] kept for
//! `Last-Event-ID`), its control (tool results, cancel), and its end. Finished runs are kept
//! for [`RETENTION`] (their events can still be read), then forgotten: `410 RUN_NOT_FOUND`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use wasbox_runtime::sync::lock;

use tokio::sync::watch;
use wasbox_runtime::agent::sidecar::{RunControl, RunEvent};

use super::wire;

/// Events of a run kept for replay.
pub const REPLAY: usize = 100;
/// How long a finished run can still be read.
pub const RETENTION: Duration = Duration::from_secs(600);
/// Finished runs kept at most (the oldest go first).
const MAX_FINISHED: usize = 1000;

/// One event as sent: its id, name and data.
#[derive(Clone, Debug)]
pub struct Stored {
    pub id: u64,
    pub name: &'static str,
    pub data: String,
    pub terminal: bool,
}

#[derive(Default)]
struct Log {
    events: VecDeque<Stored>,
    next_id: u64,
    finished_at: Option<Instant>,
}

/// A run and what it has said so far.
pub struct Run {
    pub id: String,
    pub agent: String,
    control: RunControl,
    log: Mutex<Log>,
    latest: watch::Sender<u64>,
}

impl Run {
    pub fn control(&self) -> &RunControl {
        &self.control
    }

    /// Appends an event (numbered from 1).
    pub fn push(&self, event: &RunEvent) {
        let timestamp = crate::rfc3339::format(SystemTime::now());
        let (name, data) = wire::event(&self.id, &timestamp, event);
        let id = {
            let mut log = lock(&self.log);
            if log.finished_at.is_some() {
                return; // nothing follows a terminal event
            }
            log.next_id += 1;
            let id = log.next_id;
            log.events.push_back(Stored {
                id,
                name,
                data: data.to_string(),
                terminal: event.is_terminal(),
            });
            if log.events.len() > REPLAY {
                log.events.pop_front();
            }
            if event.is_terminal() {
                log.finished_at = Some(Instant::now());
            }
            id
        };
        self.latest.send_replace(id);
    }

    /// The kept events after `last`, and whether the run has ended.
    pub fn after(&self, last: u64) -> (Vec<Stored>, bool) {
        let log = lock(&self.log);
        let events = log.events.iter().filter(|e| e.id > last).cloned().collect();
        (events, log.finished_at.is_some())
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }

    pub fn is_finished(&self) -> bool {
        lock(&self.log).finished_at.is_some()
    }
}

/// Why a run could not start.
pub enum Refused {
    /// A run of this id exists (or existed recently).
    Conflict,
    /// At the limit of runs at once.
    TooMany(usize),
}

/// Every run the sidecar knows of.
pub struct Runs {
    runs: Mutex<HashMap<String, Arc<Run>>>,
    max_running: usize,
}

impl Runs {
    pub fn new(max_running: usize) -> Self {
        Runs {
            runs: Mutex::new(HashMap::new()),
            max_running,
        }
    }

    pub fn max_running(&self) -> usize {
        self.max_running
    }

    /// Forgets finished runs past their retention (and the oldest beyond the cap).
    fn expire(runs: &mut HashMap<String, Arc<Run>>) {
        let now = Instant::now();
        runs.retain(|_, r| {
            lock(&r.log)
                .finished_at
                .is_none_or(|t| now.duration_since(t) < RETENTION)
        });
        let mut finished: Vec<(Instant, String)> = runs
            .iter()
            .filter_map(|(id, r)| lock(&r.log).finished_at.map(|t| (t, id.clone())))
            .collect();
        if finished.len() > MAX_FINISHED {
            finished.sort();
            for (_, id) in finished.iter().take(finished.len() - MAX_FINISHED) {
                runs.remove(id);
            }
        }
    }

    /// Registers a new run, refused when its id is taken or too many run already.
    pub fn start(&self, id: &str, agent: &str) -> Result<Arc<Run>, Refused> {
        let mut runs = lock(&self.runs);
        Self::expire(&mut runs);
        if runs.contains_key(id) {
            return Err(Refused::Conflict);
        }
        let running = runs.values().filter(|r| !r.is_finished()).count();
        if running >= self.max_running {
            return Err(Refused::TooMany(self.max_running));
        }
        let run = Arc::new(Run {
            id: id.to_string(),
            agent: agent.to_string(),
            control: RunControl::new(),
            log: Mutex::new(Log::default()),
            latest: watch::channel(0).0,
        });
        runs.insert(id.to_string(), run.clone());
        Ok(run)
    }

    pub fn get(&self, id: &str) -> Option<Arc<Run>> {
        let mut runs = lock(&self.runs);
        Self::expire(&mut runs);
        runs.get(id).cloned()
    }

    pub fn running(&self) -> usize {
        lock(&self.runs)
            .values()
            .filter(|r| !r.is_finished())
            .count()
    }

    /// Cancels every run (the server is stopping).
    pub fn cancel_all(&self, reason: &str) {
        for r in lock(&self.runs).values() {
            r.control.cancel(reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_numbered_kept_for_replay_and_end_with_the_terminal_one() {
        let runs = Runs::new(1);
        let run = runs.start("r1", "chat").ok().unwrap();
        assert!(matches!(runs.start("r1", "chat"), Err(Refused::Conflict)));
        assert!(matches!(runs.start("r2", "chat"), Err(Refused::TooMany(1))));
        run.push(&RunEvent::Started);
        for i in 0..150 {
            run.push(&RunEvent::Thought {
                text: format!("t{i}"),
            });
        }
        let (events, finished) = run.after(0);
        assert_eq!(events.len(), REPLAY);
        assert_eq!(events.first().unwrap().id, 52);
        assert_eq!(events.last().unwrap().id, 151);
        assert!(!finished);
        let (events, _) = run.after(149);
        assert_eq!(events.iter().map(|e| e.id).collect::<Vec<_>>(), [150, 151]);
        run.push(&RunEvent::Completed {
            response: "done".into(),
            metadata: None,
        });
        run.push(&RunEvent::Thought {
            text: "late".into(),
        });
        let (events, finished) = run.after(151);
        assert!(finished);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].name, "run.completed");
        assert!(
            events[0].data.contains(r#""runId":"r1""#),
            "{}",
            events[0].data
        );
        // The finished run no longer counts against the limit.
        assert!(runs.start("r2", "chat").is_ok());
    }
}
