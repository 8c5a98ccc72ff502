//! Prometheus metrics of a node (`GET /metrics`, text exposition format): requests by route
//! and status with their latency, requests refused and why, jobs by outcome with their
//! duration, and at scrape time the live sessions, PTYs, sandbox instances and memory
//! against their limits.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: String,
    pub route: String,
    pub code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteOnly {
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Reason {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    pub status: &'static str,
}

fn latency() -> Histogram {
    // 100 µs to about 100 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 21))
}

/// The node's metrics; cheap to update from any handler.
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RouteLabels, Counter>,
    pub request_seconds: Family<RouteOnly, Histogram, fn() -> Histogram>,
    pub rejected: Family<Reason, Counter>,
    pub jobs_started: Counter,
    pub jobs_finished: Family<Outcome, Counter>,
    pub job_seconds: Histogram,
    sessions: Gauge,
    sessions_max: Gauge,
    ptys: Gauge,
    jobs_running: Gauge,
    instances: Gauge,
    instances_max: Gauge,
    instances_compact: Gauge,
    memory: Gauge,
    memory_max: Gauge,
    resident: Gauge,
    telemetry_dropped: Gauge,
    egress_allowed: Counter,
    egress_denied: Counter,
    egress_open: Gauge,
    egress_bytes_out: Counter,
    egress_bytes_in: Counter,
    /// Held while the egress counters catch up with the runtime's totals (two scrapes at
    /// once would add the same difference twice).
    egress_sync: std::sync::Mutex<()>,
}

/// What a scrape reads from the node at that moment.
pub struct Snapshot {
    pub sessions: usize,
    pub sessions_max: usize,
    pub ptys: usize,
    pub jobs_running: usize,
    pub instances: (usize, usize),
    /// Of them, those with compact memories (bounds-checked code).
    pub instances_compact: usize,
    pub memory: (usize, usize),
    pub resident_bytes: u64,
    pub telemetry_dropped: u64,
    /// What sandboxes did on the network.
    pub egress: wasbox_runtime::EgressStats,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("wasbox");
        let m = Metrics {
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(latency as fn() -> Histogram),
            rejected: Family::default(),
            jobs_started: Counter::default(),
            jobs_finished: Family::default(),
            job_seconds: latency(),
            sessions: Gauge::default(),
            sessions_max: Gauge::default(),
            ptys: Gauge::default(),
            jobs_running: Gauge::default(),
            instances: Gauge::default(),
            instances_max: Gauge::default(),
            instances_compact: Gauge::default(),
            memory: Gauge::default(),
            memory_max: Gauge::default(),
            resident: Gauge::default(),
            telemetry_dropped: Gauge::default(),
            egress_allowed: Counter::default(),
            egress_denied: Counter::default(),
            egress_open: Gauge::default(),
            egress_bytes_out: Counter::default(),
            egress_bytes_in: Counter::default(),
            egress_sync: std::sync::Mutex::new(()),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "http_requests",
            "HTTP requests answered, by method, route and status code",
            m.requests.clone(),
        );
        r.register(
            "http_request_duration_seconds",
            "Time to answer an HTTP request, by route",
            m.request_seconds.clone(),
        );
        r.register(
            "requests_rejected",
            "Requests refused, by reason (unauthorized, invalid, too_large, busy, unavailable, timeout, not_found, conflict, internal)",
            m.rejected.clone(),
        );
        r.register("jobs_started", "Jobs started", m.jobs_started.clone());
        r.register(
            "jobs_finished",
            "Jobs finished, by status (completed, failed, timeout, error)",
            m.jobs_finished.clone(),
        );
        r.register(
            "job_duration_seconds",
            "Time from a job's start to its result",
            m.job_seconds.clone(),
        );
        r.register(
            "sessions_live",
            "Session sandboxes alive",
            m.sessions.clone(),
        );
        r.register(
            "sessions_max",
            "Session sandboxes allowed",
            m.sessions_max.clone(),
        );
        r.register("ptys_live", "PTYs open in all sessions", m.ptys.clone());
        r.register("jobs_running", "Jobs running now", m.jobs_running.clone());
        r.register(
            "instances_in_use",
            "Sandbox processes (component instances) alive",
            m.instances.clone(),
        );
        r.register(
            "instances_compact",
            "Sandbox processes with compact memories: past the address space's room for 4 GiB reservations, their code checks bounds",
            m.instances_compact.clone(),
        );
        r.register(
            "instances_max",
            "Sandbox processes allowed on the node",
            m.instances_max.clone(),
        );
        r.register(
            "sandbox_memory_bytes",
            "Linear memory reserved by live sandbox processes",
            m.memory.clone(),
        );
        r.register(
            "sandbox_memory_max_bytes",
            "The node's memory budget for sandbox processes",
            m.memory_max.clone(),
        );
        r.register(
            "process_resident_memory_bytes",
            "Resident memory of the wasbox process",
            m.resident.clone(),
        );
        r.register(
            "telemetry_dropped_records",
            "Telemetry records dropped because the store fell behind",
            m.telemetry_dropped.clone(),
        );
        r.register(
            "egress_connections",
            "Connections sandboxes made to the network (the egress policy allowed them)",
            m.egress_allowed.clone(),
        );
        r.register(
            "egress_denied",
            "Sandbox network requests refused by a policy or a limit",
            m.egress_denied.clone(),
        );
        r.register(
            "egress_connections_open",
            "Sandbox network connections open now",
            m.egress_open.clone(),
        );
        r.register(
            "egress_sent_bytes",
            "Bytes sandboxes sent over the network",
            m.egress_bytes_out.clone(),
        );
        r.register(
            "egress_received_bytes",
            "Bytes sandboxes received over the network",
            m.egress_bytes_in.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Counts a refused request by the status it got.
    pub fn rejected_with(&self, code: u16) {
        let reason = match code {
            400 | 422 => "invalid",
            401 | 403 => "unauthorized",
            404 => "not_found",
            405 => "method_not_allowed",
            408 => "timeout",
            409 => "conflict",
            413 => "too_large",
            429 => "busy",
            503 => "unavailable",
            c if c >= 500 => "internal",
            _ => "other",
        };
        self.rejected.get_or_create(&Reason { reason }).inc();
    }

    /// The text exposition, with the gauges set from `now`.
    pub fn encode(&self, now: Snapshot) -> String {
        let g = |gauge: &Gauge, v: u64| {
            gauge.set(v.min(i64::MAX as u64) as i64);
        };
        g(&self.sessions, now.sessions as u64);
        g(&self.sessions_max, now.sessions_max as u64);
        g(&self.ptys, now.ptys as u64);
        g(&self.jobs_running, now.jobs_running as u64);
        g(&self.instances, now.instances.0 as u64);
        g(&self.instances_max, now.instances.1 as u64);
        g(&self.instances_compact, now.instances_compact as u64);
        g(&self.memory, now.memory.0 as u64);
        g(&self.memory_max, now.memory.1 as u64);
        g(&self.resident, now.resident_bytes);
        g(&self.telemetry_dropped, now.telemetry_dropped);
        g(&self.egress_open, now.egress.open);
        // The runtime counts; the counters here follow its totals.
        let _sync = wasbox_runtime::sync::lock(&self.egress_sync);
        let c = |counter: &Counter, total: u64| {
            counter.inc_by(total.saturating_sub(counter.get()));
        };
        c(&self.egress_allowed, now.egress.allowed);
        c(&self.egress_denied, now.egress.denied);
        c(&self.egress_bytes_out, now.egress.bytes_out);
        c(&self.egress_bytes_in, now.egress.bytes_in);
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
