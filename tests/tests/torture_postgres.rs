//! Torture on Postgres (`leasehold-postgres`, linearizable, server clock): a bounded seeded
//! run with every fault, a run with skewed and jumping client clocks, and the two
//! mutant runs the checker must fail.
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use std::time::Duration;

use common::{Plan, every_fault_run, seed, serial, show, skew_run, worker_exe};
use leasehold_tests::stores::StoreKind;
use leasehold_tests::torture::{self, FaultMix, Mutant, RunConfig, RunReport};

const KIND: StoreKind = StoreKind::Postgres;

/// A 15 s run of `mutant` under pauses (default seed `seed_default`, port `port`), shown.
async fn mutant_run(mutant: Mutant, seed_default: u64, port: u16) -> RunReport {
    let _one = serial().await;
    let mut cfg = RunConfig::new(KIND, seed(seed_default), port, worker_exe(), Duration::from_secs(15));
    cfg.mutant = mutant;
    cfg.faults = FaultMix::PAUSES;
    let r = torture::run(cfg).await;
    show(&r);
    r
}

common::torture_tests! {
    bounded_run_with_every_fault_is_clean => every_fault_run(Plan::new(KIND, 101, 21010, 40), 3);
    skewed_and_jumping_client_clocks_cause_no_early_takeover => skew_run(Plan::new(KIND, 102, 21020, 20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_catches_a_resource_without_its_fence() {
    let r = mutant_run(Mutant::NoFence, 103, 21030).await;
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
    let r = mutant_run(Mutant::BlindRelease, 104, 21040).await;
    assert!(
        !r.check.violations.is_empty(),
        "deposed holders vacated their successors' leases, and the checker did not see it:\n{r}"
    );
}
