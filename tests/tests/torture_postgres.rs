//! Torture on Postgres (`leasehold-postgres`, linearizable, server clock): a bounded seeded
//! run with every fault, a run with skewed and jumping client clocks, and the two
//! mutant runs the checker must fail.
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use std::time::Duration;

use common::{Plan, every_fault_run, seed, serial, show, skew_run, worker_exe};
use leasehold_tests::stores::StoreKind;
use leasehold_tests::torture::{self, FaultMix, Mutant, RunConfig};

const KIND: StoreKind = StoreKind::Postgres;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_run_with_every_fault_is_clean() {
    every_fault_run(
        Plan {
            kind: KIND,
            seed: 101,
            port: 21010,
            secs: 40,
        },
        3,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_and_jumping_client_clocks_cause_no_early_takeover() {
    skew_run(Plan {
        kind: KIND,
        seed: 102,
        port: 21020,
        secs: 20,
    })
    .await;
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
