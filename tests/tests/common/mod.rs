//! What the torture tests share: one run at a time per test binary, the seed, the
//! worker executable, and the assertions every bounded run makes.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::path::PathBuf;

use tokio::sync::{Mutex, MutexGuard};

use leasehold_tests::torture::RunReport;

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
    pub fault_kinds: &'static [&'static str],
    pub kill_samples: usize,
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
}
