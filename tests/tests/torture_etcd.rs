//! Torture on etcd (`store-etcd`, linearizable, etcd's lease clock) on a three-member
//! cluster of its own: a bounded seeded run with every fault, and a run with skewed and
//! jumping client clocks (no restarts).
//! The store fault is `kill -9` of one member (the leader about half the time), restarted
//! after 1-4 s: the cluster keeps its quorum and its data, so every rule holds strictly.
//! TTL 2 s (etcd sessions are whole seconds, at least 1.5 election timeouts).
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use std::time::Duration;

use common::{Expect, assert_clean_run, seed, serial, worker_exe};
use leasehold_tests::stores::StoreKind;
use leasehold_tests::torture::{self, FaultMix, RunConfig};

const KIND: StoreKind = StoreKind::Etcd;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_run_with_every_fault_is_clean() {
    let _one = serial().await;
    let cfg = RunConfig::new(KIND, seed(301), 21210, worker_exe(), Duration::from_secs(50));
    let r = torture::run(cfg).await;
    assert_clean_run(
        &r,
        &Expect {
            min_cycles: 2,
            min_accepted: 20,
            min_stale_refused: 1,
            fault_kinds: &[
                "pause",
                "pause_window",
                "kill9",
                "store_restart_etcd_kill9",
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
    let mut cfg = RunConfig::new(KIND, seed(302), 21230, worker_exe(), Duration::from_secs(22));
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
