//! Torture on Redis (`leasehold-redis`): efficiency-only by its own statement, because a
//! restart without persistence forgets leases and token counters. The bounded run
//! restarts Redis (kill -9) among the other faults: grants across a restart may overlap
//! and reuse tokens (counted as explained by the data loss), but the resource must
//! refuse every regression, never accept one. Between restarts, and in the clock-skew
//! run (no restarts), the strict rules hold. Workers re-seed the token counter from the
//! resource's high-water mark after a refusal (the leasehold-redis remedy).
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use common::{Plan, every_fault_run, skew_run};
use leasehold_tests::stores::StoreKind;

const KIND: StoreKind = StoreKind::Redis;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_run_with_restarts_never_accepts_a_regression() {
    let r = every_fault_run(Plan::new(KIND, 201, 21110, 35), 3).await;
    assert!(r.check.epochs >= 2, "no restart lost Redis's data:\n{r}");
    assert_eq!(
        r.check.reissued.accepted, 0,
        "a token below the resource's high-water mark was accepted:\n{r}"
    );
}

common::torture_tests! {
    skewed_and_jumping_client_clocks_cause_no_early_takeover => skew_run(Plan::new(KIND, 202, 21120, 20));
}
