//! What the torture tests share: one run at a time per test binary, the seed, the
//! worker executable, the assertions every bounded run makes, and the two runs every
//! store has (every fault; skewed and jumping client clocks).
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};

use leasehold_tests::stores::StoreKind;
use leasehold_tests::torture::{self, FaultMix, RunConfig, RunReport};

/// Runs of one test binary go one at a time (2 cores; timing matters for liveness).
pub async fn serial() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::const_new(());
    ONE.lock().await
}

/// The seed: `LEASEHOLD_TORTURE_SEED` to replay a run's fault schedule, else `default`.
pub fn seed(default: u64) -> u64 {
    match std::env::var("LEASEHOLD_TORTURE_SEED") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|e| panic!("LEASEHOLD_TORTURE_SEED={s:?}: {e}")),
        Err(_) => default,
    }
}

/// The worker executable cargo built for these tests.
pub fn worker_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_torture-worker"))
}

/// What every bounded run must show besides a clean check: it did something.
pub struct Expect {
    pub min_cycles: u64,
    pub min_accepted: usize,
    /// At least this many deposed holders' writes refused by the fence.
    pub min_stale_refused: usize,
    /// Prefixes of fault kinds each injected at least once.
    pub fault_kinds: &'static [&'static str],
    pub kill_samples: usize,
}

impl Expect {
    /// At least `min_cycles` takeovers, `min_accepted` writes accepted and
    /// `min_stale_refused` deposed holders' writes refused, each of `fault_kinds`
    /// injected, and a takeover timed after kill -9.
    pub const fn new(
        min_cycles: u64,
        min_accepted: usize,
        min_stale_refused: usize,
        fault_kinds: &'static [&'static str],
    ) -> Self {
        Self {
            min_cycles,
            min_accepted,
            min_stale_refused,
            fault_kinds,
            kill_samples: 1,
        }
    }
}

/// Shows a run's report on the real stderr, so CI logs have the counts even when
/// the test passes (libtest captures `println!`, not direct writes).
pub fn show(r: &RunReport) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{r}");
}

/// Shows the report and asserts a clean, active run.
pub fn assert_clean_run(r: &RunReport, e: &Expect) {
    show(r);
    assert!(r.check.violations.is_empty(), "the checker found violations:\n{r}");
    assert!(r.cycles() >= e.min_cycles, "only {} takeover cycles:\n{r}", r.cycles());
    assert!(
        r.check.writes_accepted >= e.min_accepted,
        "only {} writes accepted:\n{r}",
        r.check.writes_accepted
    );
    assert!(
        r.check.stale.refused >= e.min_stale_refused,
        "the fence refused only {} stale writes:\n{r}",
        r.check.stale.refused
    );
    for k in e.fault_kinds {
        assert!(r.faults_of(k) >= 1, "no {k} fault was injected:\n{r}");
    }
    assert!(
        r.takeover_after_kill_ms.len() >= e.kill_samples,
        "too few takeover samples after kill -9:\n{r}"
    );
    // The files the run kept judge the same (`torture --recheck`): histories, rows, and a
    // semaphore run's slots and permits.
    let (again, permits) =
        torture::recheck(&r.out_dir).unwrap_or_else(|err| panic!("recheck {}: {err}", r.out_dir.display()));
    let verdict = |c: &leasehold_tests::checker::Report| {
        (
            c.grants,
            c.writes_accepted,
            c.writes_refused,
            c.stale.refused,
            c.violations.len(),
        )
    };
    assert_eq!(
        (verdict(&again), permits),
        (verdict(&r.check), r.permits),
        "the checker again over {} judged otherwise:\n{r}",
        r.out_dir.display()
    );
}

/// Runs `cfg` alone ([`serial`]), then shows its report and asserts a clean, active run
/// ([`assert_clean_run`]).
async fn clean_run(cfg: RunConfig, expect: &Expect) -> RunReport {
    let _one = serial().await;
    let r = torture::run(cfg).await;
    assert_clean_run(&r, expect);
    r
}

/// Where and how long a bounded run goes: its default seed (`LEASEHOLD_TORTURE_SEED`
/// replaces it), the dedicated store's port (21000-21999, one range per run) and the
/// length of its fault phase.
pub struct Plan {
    pub kind: StoreKind,
    pub seed: u64,
    pub port: u16,
    pub secs: u64,
}

impl Plan {
    /// A plan for `kind`: default seed `seed`, dedicated port `port`, `secs` of faults.
    pub const fn new(kind: StoreKind, seed: u64, port: u16, secs: u64) -> Self {
        Self { kind, seed, port, secs }
    }

    fn config(&self) -> RunConfig {
        RunConfig::new(
            self.kind,
            seed(self.seed),
            self.port,
            worker_exe(),
            Duration::from_secs(self.secs),
        )
    }
}

/// Every fault kind, the store's own restart among them.
pub const EVERY_FAULT: &[&str] = &[
    "pause",
    "pause_window",
    "kill9",
    "store_restart",
    "proxy_delay",
    "proxy_blackhole",
    "proxy_drop",
    "proxy_drop_replies",
    "resource_",
];

/// The bounded run with every fault: clean, at least `min_cycles` takeovers, every
/// kind injected, a deposed holder's write refused, a takeover timed after kill -9.
pub async fn every_fault_run(plan: Plan, min_cycles: u64) -> RunReport {
    clean_run(plan.config(), &Expect::new(min_cycles, 20, 1, EVERY_FAULT)).await
}

/// Workers whose wall clocks are off by +10 or -10 TTLs or jump within that, under
/// pauses and kills (no restarts): a clean run (no early takeover, no double grant),
/// no grant anomaly of any kind, and some clock jumped.
pub async fn skew_run(plan: Plan) -> RunReport {
    let mut cfg = plan.config();
    cfg.skew = true;
    cfg.faults = FaultMix::TAKEOVERS;
    let r = clean_run(cfg, &Expect::new(2, 10, 0, &["pause", "kill9"])).await;
    assert!(r.check.explained.is_empty(), "no restart, yet grant anomalies:\n{r}");
    assert!(r.clock_jumps >= 1, "no clock jumped:\n{r}");
    r
}

/// Permit holders of a semaphore of 2, five workers, under pauses (either kind) and
/// kill -9 of permit holders: clean (per slot: the lease rules; across slots: never more
/// than 2 holders at once), both permits held at once at some moment, a deposed permit
/// holder's write refused by its slot's fence, a slot taken over after a kill.
pub async fn semaphore_run(plan: Plan) -> RunReport {
    let mut cfg = plan.config();
    cfg.permits = Some(2);
    cfg.workers = 5;
    cfg.faults = FaultMix::TAKEOVERS;
    let r = clean_run(cfg, &Expect::new(2, 20, 1, &["pause", "pause_window", "kill9"])).await;
    assert_eq!(r.permits, Some((2, 2)), "both permits were never held at once:\n{r}");
    r
}

/// Test functions, each a multi-threaded tokio test awaiting one run:
/// `name => run_expression;`.
macro_rules! torture_tests {
    ($($name:ident => $run:expr;)+) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $run.await;
            }
        )+
    };
}
pub(crate) use torture_tests;
