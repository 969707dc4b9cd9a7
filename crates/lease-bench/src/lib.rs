//! # leasehold-bench
//!
//! The benchmarks of leasehold, run on the real stores by one command,
//! `scripts/bench.sh`, which starts the stores the way `scripts/test.sh` does, runs the
//! `leasehold-bench` binary of this crate in release mode, writes what it measured to
//! `docs/performance.json` ([`data`]) and renders that into the tables of
//! `docs/PERFORMANCE.md` ([`render`]). Every figure in those tables comes from the
//! results file; the explanations around them are Markdown written by hand, outside the
//! regions the renderer fills (`<!-- bench:table overhead postgres -->` …
//! `<!-- /bench:table -->`, see [`markers`]).
//!
//! What is measured (one module each):
//!
//! | module | table |
//! |---|---|
//! | [`overhead`] | per store: acquire of a free lease, renewal, release and takeover through the library, interleaved with the bare store operation a hand-written lock would send, and their ratio |
//! | [`peers`] | acquire + release against `rslock` (Redis, beside a fenced floor: the least a lock with a token sends), etcd's lock RPC with an explicit lease, and sqlx's `PgAdvisoryLock` (Postgres), interleaved |
//! | [`scale`] | one client holding 1,000 and 10,000 leases (and 100,000 on MemoryStore): CPU share of one core, resident memory per lease, and renewals and store requests per second while renewing |
//! | [`handoff`] | N = 1, 10, 100 waiters on one lease: time from a release until the next waiter holds it, store calls per handoff |
//! | [`contention`] | M workers on K names (independent names, one hot name): grants per second and failed attempts per grant |
//!
//! Outside those results, [`backends::redis_server_time`] reads what the Redis scripts
//! cost the server itself (`INFO commandstats`), beside a one-key design the store did not
//! take, the fenced floor's and the classic lock's (`leasehold-bench redis-server-time`,
//! run by `scripts/redis-server-time.sh`), and
//! [`client_cpu`] what the lease client costs the caller's process in CPU on top of the
//! store crate's own calls (`leasehold-bench client-cpu STORE`).
//!
//! Machines are noisy (the reference machine has two cores shared with other work), so
//! every comparison is taken **interleaved in the same run**: library and floor (or
//! peer) alternate sample by sample, in a random order per pair, and the report leads
//! with their ratio. Absolute times drift between runs; ratios hold.
//!
//! The stores come from the environment `scripts/stores.sh env` prints
//! (`LEASEHOLD_PG_URL`, `LEASEHOLD_MYSQL_URL`, `LEASEHOLD_REDIS_URL`,
//! `LEASEHOLD_ETCD_ENDPOINTS`, `LEASEHOLD_ZK_ADDR`, `LEASEHOLD_ZK_TICK_MS`,
//! `LEASEHOLD_MOTO_ENDPOINT`, `LEASEHOLD_VENV`, `LEASEHOLD_STORES_DIR`); a missing variable or an
//! unreachable store is an error, never a skipped table. Every run uses names, tables,
//! prefixes and buckets of its own and removes what it created in Postgres, Redis and
//! etcd at the end; the shared servers are never flushed or restarted.
//!
//! The smoke test (`cargo test -p leasehold-bench`) runs every benchmark with tiny counts
//! against the real stores and renders its results into a copy of the document, so the
//! benchmarks and the renderer cannot rot; the full run is the documented command, not
//! part of CI's time.
//!
//! ```no_run
//! # async fn demo() -> leasehold_bench::Result<()> {
//! use leasehold_bench::{Plan, StoreKind, data::Results, render, run};
//! let report = run(&Plan::smoke(), &StoreKind::ALL).await?;
//! let results = Results::from_report(&report, "cargo test -p leasehold-bench");
//! let doc = std::fs::read_to_string("docs/PERFORMANCE.md")?;
//! let rendered = render::render(&doc, &results)?;
//! assert!(rendered.contains("Overhead against the floor"));
//! # Ok(()) }
//! ```

pub mod backends;
pub mod charts;
pub mod client_cpu;
pub mod contention;
pub mod data;
pub mod handoff;
pub mod machine;
pub mod markers;
pub mod overhead;
pub mod peers;
mod plan;
pub mod render;
pub mod scale;
pub mod stats;

use std::sync::Arc;

use leasehold_core::{
    ClientConfig, LeaseClient,
    store::{CasStore, Grade},
};

pub use backends::{Backend, Opened, StoreKind};
pub use plan::Plan;

/// Any error of a benchmark run (store errors, unexpected outcomes), with its message.
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

/// The result of a benchmark step.
pub type Result<T> = std::result::Result<T, BenchError>;

/// An error with a message (an outcome the benchmark did not expect).
pub fn fail(msg: impl Into<String>) -> BenchError {
    msg.into().into()
}

/// A lease client on `store`: a correctness client for linearizable stores, an
/// efficiency-only one (by name) for Redis.
///
/// # Errors
/// As [`LeaseClient::from_dyn`].
pub fn client_for(store: Arc<dyn CasStore>, config: ClientConfig) -> Result<LeaseClient> {
    Ok(if store.capabilities().grade == Grade::Linearizable {
        LeaseClient::from_dyn(store, config)?
    } else {
        LeaseClient::efficiency_only(store, config)?
    })
}

/// The `--scale-child` entry point: one scale configuration in this (fresh) process,
/// printed as one line for the parent.
///
/// # Errors
/// As [`scale::run`].
pub async fn scale_child(kind: StoreKind, leases: usize, ttl: std::time::Duration) -> Result<String> {
    let plan = Plan {
        scale_ttl: ttl,
        ..Plan::smoke()
    };
    let backend = backends::open(kind, &run_tag()).await?;
    let result = scale::run(&plan, &backend, leases).await;
    let cleaned = backend.cleanup().await;
    let line = scale::to_line(&result?);
    cleaned?;
    Ok(line)
}

/// A tag no other run uses (process id and start time), for names, prefixes, tables.
pub fn run_tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("b{}x{:x}", std::process::id(), nanos % (1u128 << 40))
}

/// Everything one run measured, exactly; [`data::Results::from_report`] makes the
/// results file of it.
#[derive(Debug, Default)]
pub struct Report {
    /// The machine it ran on (load averages at the start and the end of the run).
    pub machine: machine::Machine,
    /// Each store's version and settings.
    pub stores: Vec<backends::StoreInfo>,
    /// The overhead table, one entry per store.
    pub overhead: Vec<overhead::OverheadResult>,
    /// The peers table.
    pub peers: Vec<peers::PeerResult>,
    /// The scale table.
    pub scale: Vec<scale::ScaleResult>,
    /// The handoff table.
    pub handoff: Vec<handoff::HandoffResult>,
    /// The contention table.
    pub contention: Vec<contention::ContentionResult>,
    /// The plan the run followed.
    pub plan: Plan,
    /// Wall time of the whole run.
    pub elapsed: std::time::Duration,
}

/// Runs every benchmark of `plan` on `stores`, store by store, and collects the report.
///
/// # Errors
/// The first store or benchmark that fails (a missing environment variable, an
/// unreachable store, an outcome a benchmark did not expect).
pub async fn run(plan: &Plan, stores: &[StoreKind]) -> Result<Report> {
    let started = std::time::Instant::now();
    let tag = run_tag();
    let mut report = Report {
        machine: machine::Machine::probe(),
        plan: plan.clone(),
        ..Report::default()
    };
    for &kind in stores {
        let backend = backends::open(kind, &tag).await?;
        eprintln!("leasehold-bench: {} ...", kind.label());
        let result = run_store(plan, &backend, &mut report).await;
        let cleaned = backend.cleanup().await;
        result?;
        cleaned?;
    }
    report.machine.load_end = machine::load_average();
    report.elapsed = started.elapsed();
    Ok(report)
}

async fn run_store(plan: &Plan, backend: &Opened, report: &mut Report) -> Result<()> {
    let kind = backend.kind();
    report.stores.push(backend.describe().await?);
    eprintln!("leasehold-bench: {}: overhead", kind.label());
    report.overhead.push(overhead::run(plan, backend).await?);
    if let Some(p) = peers::run(plan, backend).await? {
        eprintln!("leasehold-bench: {}: peer", kind.label());
        report.peers.push(p);
    }
    if kind.scales() {
        let more: &[usize] = if kind == StoreKind::Memory {
            &plan.scale_sizes_memory
        } else {
            &[]
        };
        for &n in plan.scale_sizes.iter().chain(more) {
            eprintln!("leasehold-bench: {}: scale {n}", kind.label());
            report.scale.push(match &plan.child_exe {
                Some(exe) => scale::run_in_child(exe, plan, kind, n).await?,
                None => scale::run(plan, backend, n).await?,
            });
        }
    }
    for &n in &plan.handoff_waiters {
        eprintln!("leasehold-bench: {}: handoff {n}", kind.label());
        report.handoff.push(handoff::run(plan, backend, n).await?);
    }
    for hot in [false, true] {
        eprintln!("leasehold-bench: {}: contention hot={hot}", kind.label());
        report.contention.push(contention::run(plan, backend, hot).await?);
    }
    Ok(())
}
