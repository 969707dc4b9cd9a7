//! The results of a run as data: what `leasehold-bench run` writes to
//! `docs/performance.json` and what `leasehold-bench render` fills the tables of
//! `docs/PERFORMANCE.md` from ([`crate::render`]).
//!
//! Every figure a table shows is here as a number (durations in µs or s, shares in %),
//! computed from the exact measurements when they were taken: ratios, gaps and
//! verdicts too, so that rendering only formats and never recomputes from rounded
//! figures. The texts here are facts of the run (versions, settings, what each side
//! sends), never explanations: those are written beside the tables in the document.
//!
//! A file can hold rows of more than one run: `leasehold-bench run --merge` re-measures
//! some stores and replaces only their rows. [`Results::runs`] lists the runs; a row's
//! `run` is its index there (0, the run the document names, is left out of the file),
//! and the tables mark the rows of later runs.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::backends::StoreInfo;
use crate::contention::ContentionResult;
use crate::handoff::HandoffResult;
use crate::machine::Machine;
use crate::overhead::{Op, OpResult, OverheadResult};
use crate::peers::PeerResult;
use crate::scale::ScaleResult;
use crate::stats::{Summary, micros, ratio};
use crate::{Plan, Report, Result, StoreKind, fail};

/// The layout version of the file; a file of another version is refused.
pub const FORMAT: u32 = 1;

/// Everything `docs/performance.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Results {
    /// [`FORMAT`].
    pub format: u32,
    /// The counts and durations every run of the file followed.
    pub plan: Plan,
    /// The overhead table's target, which the verdicts were taken against.
    pub target: Target,
    /// The runs the rows come from, the one the document names first.
    pub runs: Vec<Run>,
    /// Each store's version and settings, in report order.
    pub stores: Vec<StoreInfo>,
    /// The overhead table, one entry per store.
    pub overhead: Vec<Overhead>,
    /// The peers table, one entry per store with a peer.
    pub peers: Vec<Peer>,
    /// The scale table.
    pub scale: Vec<Scale>,
    /// The handoff table.
    pub handoff: Vec<Handoff>,
    /// The contention table.
    pub contention: Vec<Contention>,
}

/// The target of the overhead table: p50 ratio at most `p50_ratio` or at most
/// `p50_abs_us` slower, and p99 ratio at most `p99_ratio`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Largest p50 ratio that meets the target.
    pub p50_ratio: f64,
    /// Largest p50 gap (µs) that meets the target whatever the ratio.
    pub p50_abs_us: f64,
    /// Largest p99 ratio that meets the target.
    pub p99_ratio: f64,
}

impl Target {
    /// The target the benchmarks hold the library to.
    pub const CURRENT: Target = Target {
        p50_ratio: 1.10,
        p50_abs_us: 25.0,
        p99_ratio: 1.2,
    };

    /// Whether the library's p50 meets the target against the floor's.
    pub fn p50_met(&self, library: &Summary, floor: &Summary) -> bool {
        ratio(library.p50, floor.p50) <= self.p50_ratio
            || micros(library.p50.saturating_sub(floor.p50)) <= self.p50_abs_us
    }

    /// Whether the library's p99 meets the target against the floor's.
    pub fn p99_met(&self, library: &Summary, floor: &Summary) -> bool {
        ratio(library.p99, floor.p99) <= self.p99_ratio
    }
}

/// One run of the benchmarks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Run {
    /// The command as it was run.
    pub command: String,
    /// The day it ran (UTC, `YYYY-MM-DD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// The stores it measured.
    pub stores: Vec<StoreKind>,
    /// Wall time of the measurements (after the build), in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// The machine it ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// What the footnote of its rows adds (written by hand into the file, if at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Latencies of one side of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    /// Samples.
    pub n: usize,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Operations per second of one caller (1 / mean latency).
    pub ops_per_sec: f64,
}

impl From<&Summary> for Latency {
    fn from(s: &Summary) -> Self {
        Self {
            n: s.n,
            p50_us: micros(s.p50),
            p99_us: micros(s.p99),
            ops_per_sec: s.ops_per_sec,
        }
    }
}

/// The overhead table of one store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overhead {
    /// The store.
    pub store: StoreKind,
    /// Index of the run in [`Results::runs`].
    #[serde(default, skip_serializing_if = "is_first")]
    pub run: usize,
    /// TTL of the planted leases of the takeover loop, ms.
    pub takeover_ttl_ms: u64,
    /// One row per operation, in report order.
    pub ops: Vec<OpRow>,
}

/// One operation: library against floor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpRow {
    /// Which operation.
    pub op: Op,
    /// Through the library.
    pub library: Latency,
    /// The bare store operation.
    pub floor: Latency,
    /// Library p50 ÷ floor p50.
    pub p50_ratio: f64,
    /// Library p99 ÷ floor p99.
    pub p99_ratio: f64,
    /// Library p50 − floor p50, µs (0 when the library is faster).
    pub p50_gap_us: f64,
    /// Whether the p50 meets [`Results::target`].
    pub p50_met: bool,
    /// Whether the p99 meets [`Results::target`].
    pub p99_met: bool,
    /// `CasStore` calls per library operation.
    pub store_calls: f64,
    /// The store crate's call alone (acquire and release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<Direct>,
    /// Untimed attempts that found the lease not yet expired (takeover).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<Retries>,
}

/// The store crate's `CasStore` call timed alone: where the library's p50 goes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Direct {
    /// Its p50, µs.
    pub p50_us: f64,
    /// Library p50 − its p50 (the lease client's part), µs.
    pub client_us: f64,
    /// Its p50 − floor p50 (the store operation's part), µs.
    pub store_op_us: f64,
}

/// Takeover attempts that found the lease still held.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retries {
    /// Of the library.
    pub library: usize,
    /// Of the floor.
    pub floor: usize,
}

/// The library against the peer lock on one store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    /// The store both run on.
    pub store: StoreKind,
    /// Index of the run in [`Results::runs`].
    #[serde(default, skip_serializing_if = "is_first")]
    pub run: usize,
    /// The peer (crate, version, calls).
    pub peer: String,
    /// Acquire of a free lock.
    pub acquire: PeerRow,
    /// Its release.
    pub release: PeerRow,
    /// Acquire + release.
    pub cycle: PeerRow,
    /// Where the library's writes are durable and the peer's are not: one WAL flush.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wal_flush: Option<WalFlush>,
    /// Where the library issues a fencing token and the peer does not: the least a
    /// fenced lock sends, interleaved with both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fenced_floor: Option<FencedFloor>,
}

/// The least a fenced lock sends on the peer's store (the Redis peer comparison): its
/// acquire, release and whole cycle, measured in the same rounds as library and peer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FencedFloor {
    /// Acquire of a free lock.
    pub acquire: Latency,
    /// Its release.
    pub release: Latency,
    /// Acquire + release.
    pub cycle: Latency,
    /// Its acquire + release p50 ÷ the peer's: what the token costs.
    pub peer_ratio: f64,
    /// The library's acquire + release p50 ÷ its own: what the library adds to a token.
    pub library_ratio: f64,
}

/// What one WAL flush costs (the Postgres peer comparison).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalFlush {
    /// An upsert committed durably (`synchronous_commit = on`).
    pub durable: Latency,
    /// The same upsert with `synchronous_commit = off`.
    pub unflushed: Latency,
    /// Durable p50 − unflushed p50, µs: one WAL flush.
    pub flush_p50_us: f64,
    /// The library's acquire + release p50 minus two flushes (one per write), µs.
    pub cycle_without_flushes_p50_us: f64,
    /// That ÷ the peer's acquire + release p50.
    pub ratio: f64,
}

/// One step of the peer comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerRow {
    /// The library's side.
    pub library: Latency,
    /// The peer's side.
    pub peer: Latency,
    /// Library p50 ÷ peer p50.
    pub p50_ratio: f64,
    /// Library p99 ÷ peer p99.
    pub p99_ratio: f64,
}

/// One row of the scale table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scale {
    /// The store.
    pub store: StoreKind,
    /// Index of the run in [`Results::runs`].
    #[serde(default, skip_serializing_if = "is_first")]
    pub run: usize,
    /// Leases held.
    pub leases: usize,
    /// Their TTL, s.
    pub ttl_s: f64,
    /// The renewal interval (a third of the TTL), s.
    pub renew_every_s: f64,
    /// Time to grant them all, s.
    pub grant_all_s: f64,
    /// CPU time of the process over wall time, % of one core.
    pub cpu_percent: f64,
    /// CPU per renewal, µs.
    pub cpu_per_renewal_us: f64,
    /// Resident memory added per lease, bytes.
    pub memory_per_lease_bytes: f64,
    /// Store requests per second while renewing (a batch of renewals is one).
    pub store_ops_per_sec: f64,
    /// Leases renewed per second (runs before batched renewals: as many as requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewals_per_sec: Option<f64>,
    /// Leases ÷ renewal interval.
    pub expected_ops_per_sec: f64,
    /// Measured ÷ expected renewals.
    pub measured_over_expected: f64,
    /// Leases lost while renewing.
    pub lost: usize,
}

/// One row of the handoff table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Handoff {
    /// The store.
    pub store: StoreKind,
    /// Index of the run in [`Results::runs`].
    #[serde(default, skip_serializing_if = "is_first")]
    pub run: usize,
    /// How waiters learn of a release.
    pub wakes_by: String,
    /// Waiters at each release.
    pub waiters: usize,
    /// Handoffs timed.
    pub handoffs: usize,
    /// Median release-to-grant time, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// `CasStore` round trips per handoff.
    pub calls_per_handoff: f64,
    /// `wait_for_change` calls per handoff.
    pub waits_per_handoff: f64,
}

impl Handoff {
    /// True when the store's waiters poll: it pushes no change to them.
    pub fn polls(&self) -> bool {
        self.wakes_by == self.store.wake_mechanism(false)
    }
}

/// One row of the contention table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contention {
    /// The store.
    pub store: StoreKind,
    /// Index of the run in [`Results::runs`].
    #[serde(default, skip_serializing_if = "is_first")]
    pub run: usize,
    /// Workers.
    pub workers: usize,
    /// Lease names (1: the hot name).
    pub names: usize,
    /// Grants per second.
    pub grants_per_sec: f64,
    /// Refused attempts per grant.
    pub refused_per_grant: f64,
    /// Store round trips per grant.
    pub trips_per_grant: f64,
    /// Attempts that failed with a store error.
    pub errors: u64,
}

fn is_first(run: &usize) -> bool {
    *run == 0
}

/// A row of a table that merging replaces store by store.
trait Row {
    fn store(&self) -> StoreKind;
    fn run_mut(&mut self) -> &mut usize;
}

macro_rules! row {
    ($($t:ty),*) => {$(
        impl Row for $t {
            fn store(&self) -> StoreKind {
                self.store
            }
            fn run_mut(&mut self) -> &mut usize {
                &mut self.run
            }
        }
    )*};
}
row!(Overhead, Peer, Scale, Handoff, Contention);

/// Replaces the rows of `measured` stores by `newer` (of run `run`), in report order.
fn merge_rows<T: Row>(rows: &mut Vec<T>, newer: Vec<T>, measured: &[StoreKind], run: usize) {
    rows.retain(|r| !measured.contains(&r.store()));
    rows.extend(newer.into_iter().map(|mut r| {
        *r.run_mut() = run;
        r
    }));
    rows.sort_by_key(Row::store);
}

impl Results {
    /// What `report` measured, as one run of `command`.
    pub fn from_report(report: &Report, command: &str) -> Self {
        let target = Target::CURRENT;
        Self {
            format: FORMAT,
            plan: report.plan.clone(),
            target,
            runs: vec![Run {
                command: command.to_owned(),
                date: Some(today()),
                stores: report.stores.iter().map(|s| s.kind).collect(),
                elapsed_s: Some(report.elapsed.as_secs_f64()),
                machine: Some(report.machine.clone()),
                note: None,
            }],
            stores: report.stores.clone(),
            overhead: report.overhead.iter().map(|r| overhead(&target, r)).collect(),
            peers: report.peers.iter().map(peer).collect(),
            scale: report.scale.iter().map(scale).collect(),
            handoff: report.handoff.iter().map(handoff).collect(),
            contention: report.contention.iter().map(contention).collect(),
        }
    }

    /// Reads and checks a results file.
    ///
    /// # Errors
    /// It cannot be read, is not a results file of [`FORMAT`], or names a run it does
    /// not list.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
        Self::from_json(&text).map_err(|e| fail(format!("{}: {e}", path.display())))
    }

    /// Parses and checks the text of a results file.
    ///
    /// # Errors
    /// As [`Results::load`].
    pub fn from_json(text: &str) -> Result<Self> {
        let format = serde_json::from_str::<serde_json::Value>(text)?
            .get("format")
            .and_then(serde_json::Value::as_u64);
        if format != Some(u64::from(FORMAT)) {
            return Err(fail(format!(
                "not a results file of format {FORMAT} (its \"format\" is {format:?})"
            )));
        }
        let results: Self = serde_json::from_str(text)?;
        results.check()?;
        Ok(results)
    }

    /// The file's text (pretty JSON, one trailing newline).
    ///
    /// # Errors
    /// A figure is not a finite number (JSON has none), or a row names a run the file
    /// does not list.
    pub fn to_json(&self) -> Result<String> {
        self.check()?;
        // serde_json writes a non-finite number as null; no field here is ever null.
        if let Some(at) = null_at(&serde_json::to_value(self)?, "") {
            return Err(fail(format!("{at} is not a finite number")));
        }
        Ok(serde_json::to_string_pretty(self)? + "\n")
    }

    /// Writes [`Results::to_json`] to `path`.
    ///
    /// # Errors
    /// As [`Results::to_json`], or the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = self.to_json()?;
        std::fs::write(path, text).map_err(|e| fail(format!("cannot write {}: {e}", path.display())))
    }

    /// Checks what the types cannot: at least one run, and every row's run listed.
    ///
    /// # Errors
    /// The first problem found.
    pub fn check(&self) -> Result<()> {
        let runs = self.runs.len();
        if runs == 0 {
            return Err(fail("no run listed in \"runs\""));
        }
        match self.row_runs().find(|&r| r >= runs) {
            Some(r) => Err(fail(format!("a row names run {r}, but \"runs\" lists {runs}"))),
            None => Ok(()),
        }
    }

    /// The run index of every row.
    fn row_runs(&self) -> impl Iterator<Item = usize> + '_ {
        let overhead = self.overhead.iter().map(|r| r.run);
        let peers = self.peers.iter().map(|r| r.run);
        let scale = self.scale.iter().map(|r| r.run);
        let handoff = self.handoff.iter().map(|r| r.run);
        let contention = self.contention.iter().map(|r| r.run);
        overhead.chain(peers).chain(scale).chain(handoff).chain(contention)
    }

    /// Renumbers the run index of every row.
    fn renumber_runs(&mut self, new: &[usize]) {
        self.overhead.iter_mut().for_each(|r| r.run = new[r.run]);
        self.peers.iter_mut().for_each(|r| r.run = new[r.run]);
        self.scale.iter_mut().for_each(|r| r.run = new[r.run]);
        self.handoff.iter_mut().for_each(|r| r.run = new[r.run]);
        self.contention.iter_mut().for_each(|r| r.run = new[r.run]);
    }

    /// Whether a run of `plan` against `target` can be merged into these results: only
    /// if they followed the same, or its rows would not compare with the others.
    ///
    /// # Errors
    /// Another plan (a smoke run into a full one, say) or target.
    pub fn can_merge(&self, plan: &Plan, target: &Target) -> Result<()> {
        let kind = |p: &Plan| if p.smoke { "smoke" } else { "full" };
        if *plan == self.plan && *target == self.target {
            Ok(())
        } else if plan.smoke != self.plan.smoke {
            Err(fail(format!(
                "the results are of a {} run and this is a {} run: measure every store instead of merging",
                kind(&self.plan),
                kind(plan)
            )))
        } else {
            Err(fail(
                "the results followed other counts, durations or targets than this run: measure every store \
                 instead of merging",
            ))
        }
    }

    /// `newer` (one run, of some stores) merged in: its stores' rows replace theirs, the
    /// other stores' rows stay with their runs, and runs no row comes from any more are
    /// dropped.
    ///
    /// # Errors
    /// `newer` is not one run, or followed another plan or target (a smoke run into a
    /// full one, say): its rows would not compare with the others.
    pub fn merge(mut self, newer: Results) -> Result<Self> {
        self.can_merge(&newer.plan, &newer.target)?;
        let Ok([run]) = <[Run; 1]>::try_from(newer.runs) else {
            return Err(fail("only the results of one run can be merged"));
        };
        let measured = run.stores.clone();
        let index = self.runs.len();
        self.runs.push(run);
        self.stores.retain(|s| !measured.contains(&s.kind));
        self.stores.extend(newer.stores);
        self.stores.sort_by_key(|s| s.kind);
        merge_rows(&mut self.overhead, newer.overhead, &measured, index);
        merge_rows(&mut self.peers, newer.peers, &measured, index);
        merge_rows(&mut self.scale, newer.scale, &measured, index);
        merge_rows(&mut self.handoff, newer.handoff, &measured, index);
        merge_rows(&mut self.contention, newer.contention, &measured, index);

        let mut used = vec![false; self.runs.len()];
        for r in self.row_runs() {
            used[r] = true;
        }
        let mut next = 0;
        let renumber: Vec<usize> = used
            .iter()
            .map(|&u| {
                let i = next;
                next += usize::from(u);
                i
            })
            .collect();
        self.renumber_runs(&renumber);
        self.runs = std::mem::take(&mut self.runs)
            .into_iter()
            .zip(used)
            .filter_map(|(run, u)| u.then_some(run))
            .collect();
        Ok(self)
    }
}

/// The path of the first null in `v` (a non-finite number serialized), if any.
fn null_at(v: &serde_json::Value, at: &str) -> Option<String> {
    match v {
        serde_json::Value::Null => Some(at.to_owned()),
        serde_json::Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| null_at(x, &format!("{at}[{i}]"))),
        serde_json::Value::Object(o) => o.iter().find_map(|(k, x)| null_at(x, &format!("{at}.{k}"))),
        _ => None,
    }
}

fn overhead(target: &Target, r: &OverheadResult) -> Overhead {
    Overhead {
        store: r.store,
        run: 0,
        takeover_ttl_ms: u64::try_from(r.takeover_ttl.as_millis()).unwrap_or(u64::MAX),
        ops: r.ops.iter().map(|x| op_row(target, x)).collect(),
    }
}

fn op_row(target: &Target, x: &OpResult) -> OpRow {
    let (p50_ratio, p99_ratio) = x.library.ratios(&x.floor);
    OpRow {
        op: x.op,
        library: (&x.library).into(),
        floor: (&x.floor).into(),
        p50_ratio,
        p99_ratio,
        p50_gap_us: micros(x.library.p50.saturating_sub(x.floor.p50)),
        p50_met: target.p50_met(&x.library, &x.floor),
        p99_met: target.p99_met(&x.library, &x.floor),
        store_calls: x.store_calls,
        direct: x.direct.as_ref().map(|d| Direct {
            p50_us: micros(d.p50),
            client_us: micros(x.library.p50) - micros(d.p50),
            store_op_us: micros(d.p50) - micros(x.floor.p50),
        }),
        retries: (x.op == Op::Takeover).then_some(Retries {
            library: x.retries.0,
            floor: x.retries.1,
        }),
    }
}

fn peer_row(library: &Summary, peer: &Summary) -> PeerRow {
    let (p50_ratio, p99_ratio) = library.ratios(peer);
    PeerRow {
        library: library.into(),
        peer: peer.into(),
        p50_ratio,
        p99_ratio,
    }
}

fn peer(p: &PeerResult) -> Peer {
    let [acquire, release, cycle] = [0, 1, 2].map(|i| peer_row(&p.library[i], &p.other[i]));
    Peer {
        store: p.store,
        run: 0,
        peer: p.peer.clone(),
        acquire,
        release,
        cycle,
        wal_flush: p.flush.as_ref().map(|[durable, unflushed]| {
            let flush = (micros(durable.p50) - micros(unflushed.p50)).max(0.0);
            let without = cycle.library.p50_us - 2.0 * flush;
            WalFlush {
                durable: durable.into(),
                unflushed: unflushed.into(),
                flush_p50_us: flush,
                cycle_without_flushes_p50_us: without,
                ratio: without / cycle.peer.p50_us,
            }
        }),
        fenced_floor: p.fenced_floor.as_ref().map(|[acquire, release, whole]| {
            let whole = Latency::from(whole);
            FencedFloor {
                acquire: acquire.into(),
                release: release.into(),
                cycle: whole,
                peer_ratio: whole.p50_us / cycle.peer.p50_us,
                library_ratio: cycle.library.p50_us / whole.p50_us,
            }
        }),
    }
}

fn scale(s: &ScaleResult) -> Scale {
    Scale {
        store: s.store,
        run: 0,
        leases: s.leases,
        ttl_s: s.ttl.as_secs_f64(),
        renew_every_s: s.ttl.as_secs_f64() / 3.0,
        grant_all_s: s.acquire_time.as_secs_f64(),
        cpu_percent: s.cpu_share * 100.0,
        cpu_per_renewal_us: if s.renewals_per_sec > 0.0 {
            s.cpu_share / s.renewals_per_sec * 1e6
        } else {
            0.0
        },
        memory_per_lease_bytes: s.rss_per_lease,
        store_ops_per_sec: s.ops_per_sec,
        renewals_per_sec: Some(s.renewals_per_sec),
        expected_ops_per_sec: s.expected_ops_per_sec,
        measured_over_expected: s.renewals_per_sec / s.expected_ops_per_sec,
        lost: s.lost,
    }
}

fn handoff(h: &HandoffResult) -> Handoff {
    Handoff {
        store: h.store,
        run: 0,
        wakes_by: h.store.wake_mechanism(h.notifies).to_owned(),
        waiters: h.waiters,
        handoffs: h.latency.n,
        p50_us: micros(h.latency.p50),
        p99_us: micros(h.latency.p99),
        calls_per_handoff: h.calls_per_handoff,
        waits_per_handoff: h.waits_per_handoff,
    }
}

fn contention(c: &ContentionResult) -> Contention {
    Contention {
        store: c.store,
        run: 0,
        workers: c.workers,
        names: c.names,
        grants_per_sec: c.grants_per_sec(),
        refused_per_grant: c.refused_per_grant(),
        trips_per_grant: c.trips_per_grant(),
        errors: c.errors,
    }
}

/// Today's date (UTC) as `YYYY-MM-DD`.
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    civil_date(days)
}

/// The date `days` after 1970-01-01 (proleptic Gregorian; H. Hinnant's algorithm).
fn civil_date(days: u64) -> String {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(19_782), "2024-02-29");
        assert_eq!(civil_date(20_454), "2026-01-01");
    }

    fn run(stores: &[StoreKind]) -> Results {
        let row = |store| Contention {
            store,
            run: 0,
            workers: 2,
            names: 2,
            grants_per_sec: 1.0,
            refused_per_grant: 0.0,
            trips_per_grant: 2.0,
            errors: 0,
        };
        Results {
            format: FORMAT,
            plan: Plan::smoke(),
            target: Target::CURRENT,
            runs: vec![Run {
                command: format!("bench {stores:?}"),
                date: None,
                stores: stores.to_vec(),
                elapsed_s: None,
                machine: None,
                note: None,
            }],
            stores: Vec::new(),
            overhead: Vec::new(),
            peers: Vec::new(),
            scale: Vec::new(),
            handoff: Vec::new(),
            contention: stores.iter().map(|&s| row(s)).collect(),
        }
    }

    fn stores_and_runs(r: &Results) -> Vec<(StoreKind, usize)> {
        r.contention.iter().map(|c| (c.store, c.run)).collect()
    }

    #[test]
    fn merge_replaces_the_measured_stores_only() {
        use StoreKind::{Etcd, Memory, Postgres, Redis};
        let all = run(&[Memory, Postgres, Etcd, Redis]);
        let merged = all
            .clone()
            .merge(run(&[Etcd, Postgres]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            stores_and_runs(&merged),
            [(Memory, 0), (Postgres, 1), (Etcd, 1), (Redis, 0)]
        );
        assert_eq!(merged.runs.len(), 2);
        // A second merge of the same stores leaves the first merged run unused.
        let again = merged.merge(run(&[Postgres, Etcd])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again.runs.len(), 2);
        assert_eq!(again.runs[1].command, "bench [Postgres, Etcd]");
        // Every store re-measured: the new run is the only one.
        let fresh = again
            .merge(run(&[Memory, Postgres, Etcd, Redis]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(fresh.runs.len(), 1);
        assert!(fresh.contention.iter().all(|c| c.run == 0));

        let mut full = run(&[Redis]);
        full.plan = Plan::full();
        assert!(all.merge(full).is_err(), "a full run does not merge into smoke results");
    }

    #[test]
    fn json_round_trip_and_checks() {
        let r = run(&[StoreKind::Memory]);
        let text = r.to_json().unwrap_or_else(|e| panic!("{e}"));
        assert!(!text.contains("\"run\""), "run 0 is left out:\n{text}");
        assert_eq!(Results::from_json(&text).unwrap_or_else(|e| panic!("{e}")), r);

        let mut bad = r.clone();
        bad.contention[0].grants_per_sec = f64::NAN;
        let e = bad.to_json().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(".contention[0].grants_per_sec"), "{e}");

        let mut bad = r;
        bad.contention[0].run = 3;
        assert!(bad.to_json().is_err(), "a row of a run not listed");
        assert!(Results::from_json(r#"{"format": 99}"#).is_err());
    }
}
