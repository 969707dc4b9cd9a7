//! Torture on Redis (`store-redis`): efficiency-only by its own statement, because a
//! restart without persistence forgets leases and token counters. The bounded run
//! restarts Redis (kill -9) among the other faults: grants across a restart may overlap
//! and reuse tokens (counted as explained by the data loss), but the resource must
//! refuse every regression, never accept one. Between restarts, and in the clock-skew
//! run (no restarts), the strict rules hold. Workers re-seed the token counter from the
//! resource's high-water mark after a refusal (the store-redis remedy).
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use std::time::Duration;

use common::{Expect, assert_clean_run, seed, serial, worker_exe};
use leasehold_tests::stores::StoreKind;
use leasehold_tests::torture::{self, FaultMix, RunConfig};

const KIND: StoreKind = StoreKind::Redis;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_run_with_restarts_never_accepts_a_regression() {
    let _one = serial().await;
    let cfg = RunConfig::new(KIND, seed(201), 21110, worker_exe(), Duration::from_secs(35));
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
                "store_restart_redis_kill9",
                "proxy_delay",
                "proxy_blackhole",
                "proxy_drop",
                "proxy_drop_replies",
                "resource_",
            ],
            kill_samples: 1,
        },
    );
    assert!(r.check.epochs >= 2, "no restart lost Redis's data:\n{r}");
    assert_eq!(
        r.check.reissued.accepted, 0,
        "a token below the resource's high-water mark was accepted:\n{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_and_jumping_client_clocks_cause_no_early_takeover() {
    let _one = serial().await;
    let mut cfg = RunConfig::new(KIND, seed(202), 21120, worker_exe(), Duration::from_secs(20));
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
    assert!(r.check.explained.is_empty(), "no restart, yet grant anomalies:\n{r}");
    assert!(r.clock_jumps >= 1, "no clock jumped:\n{r}");
}
