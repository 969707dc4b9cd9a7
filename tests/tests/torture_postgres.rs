//! Torture on Postgres (`store-postgres`, linearizable, server clock): a bounded seeded
//! run with every fault, a run with skewed and jumping client clocks, and the two
//! mutant runs the checker must fail.
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use std::time::Duration;

use common::{Expect, assert_clean_run, seed, serial, show, worker_exe};
use leasehold_tests::stores::StoreKind;
use leasehold_tests::torture::{self, FaultMix, Mutant, RunConfig};

const KIND: StoreKind = StoreKind::Postgres;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_run_with_every_fault_is_clean() {
    let _one = serial().await;
    let cfg = RunConfig::new(KIND, seed(101), 21010, worker_exe(), Duration::from_secs(40));
    let r = torture::run(cfg).await;
    assert_clean_run(
        &r,
        &Expect {
            min_cycles: 3,
            min_accepted: 20,
            min_stale_refused: 1,
            fault_kinds: &[
                "pause",
                "pause_window",
                "kill9",
                "store_restart_postgres_immediate",
                "proxy_delay",
                "proxy_blackhole",
                "proxy_drop",
                "proxy_drop_replies",
                "resource_",
            ],
            kill_samples: 1,
        },
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_and_jumping_client_clocks_cause_no_early_takeover() {
    let _one = serial().await;
    let mut cfg = RunConfig::new(KIND, seed(102), 21020, worker_exe(), Duration::from_secs(20));
    cfg.skew = true;
    cfg.faults = FaultMix::TAKEOVERS;
    let r = torture::run(cfg).await;
    assert_clean_run(
        &r,
        &Expect {
            min_cycles: 2,
            min_accepted: 10,
            min_stale_refused: 0,
            fault_kinds: &["pause", "kill9"],
            kill_samples: 1,
        },
    );
    assert!(r.clock_jumps >= 1, "no clock jumped:\n{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_catches_a_resource_without_its_fence() {
    let _one = serial().await;
    let mut cfg = RunConfig::new(KIND, seed(103), 21030, worker_exe(), Duration::from_secs(15));
    cfg.mutant = Mutant::NoFence;
    cfg.faults = FaultMix::PAUSES;
    let r = torture::run(cfg).await;
    show(&r);
    assert!(
        r.check
            .violations
            .iter()
            .any(|v| v.starts_with("resource accepted token")),
        "a holder's write after its successor's was accepted, and the checker did not see it:\n{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_catches_a_release_that_ignores_the_holder() {
    let _one = serial().await;
    let mut cfg = RunConfig::new(KIND, seed(104), 21040, worker_exe(), Duration::from_secs(15));
    cfg.mutant = Mutant::BlindRelease;
    cfg.faults = FaultMix::PAUSES;
    let r = torture::run(cfg).await;
    show(&r);
    assert!(
        !r.check.violations.is_empty(),
        "deposed holders vacated their successors' leases, and the checker did not see it:\n{r}"
    );
}
