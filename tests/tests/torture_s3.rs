//! Torture on S3 (`store-s3`, linearizable conditional writes, expiry by observation) on moto: a bounded seeded run with every fault, and a run with skewed and
//! jumping client clocks (no restarts).
//! moto runs behind one lock (`stores::MOTO_SERIALIZED`): its own threaded server lets two
//! racing conditional PUTs both succeed, which S3 never does. A moto restart (`kill -9`)
//! loses the bucket and every lease object: a real S3 never does that, so the checker
//! treats it as a data-loss epoch, like a Redis restart; the resource must still refuse
//! every regression.
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use std::time::Duration;

use common::{Expect, assert_clean_run, seed, serial, worker_exe};
use leasehold_tests::stores::StoreKind;
use leasehold_tests::torture::{self, FaultMix, RunConfig};

const KIND: StoreKind = StoreKind::S3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_run_with_every_fault_is_clean() {
    let _one = serial().await;
    let cfg = RunConfig::new(KIND, seed(501), 21410, worker_exe(), Duration::from_secs(40));
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
                "store_restart_moto_kill9",
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
    let mut cfg = RunConfig::new(KIND, seed(502), 21420, worker_exe(), Duration::from_secs(25));
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
