//! The Jepsen-style lost-update workload (seed 004 §17.7, "etcd 3.4.3: locks are
//! leases"): several processes increment a shared counter under the lock, with a 2 s TTL,
//! while the holder is paused at random past its TTL.
//!
//! Each increment reads the counter, works a little, and writes counter + 1 together
//! with a log key of its own (one transaction), so etcd itself records every
//! acknowledged increment: `lost = log keys - counter`.
//!
//! - Unfenced (the write is a plain transaction, after checking the lease before the
//!   read): a holder paused between its read and its write wakes up after another holder
//!   has incremented, and overwrites them. The test asserts that updates ARE lost: this
//!   is what proves the workload can fail.
//! - Fenced (the write compares the lease record's revision, `EtcdStore::fenced_txn`):
//!   no update is lost, and the paused holder's write is refused.
//!
//! Both run at once on separate names; the run is bounded (about 20 s) and the counts
//! are printed. (A custom harness: this binary is also the worker.)
#![allow(missing_docs)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::worker::Worker;
use etcd_client::GetOptions;
use leasehold_core::testing::process::{freeze, resume};
use leasehold_core::{LeaseName, store::CasStore};
use leasehold_etcd::EtcdStore;
use rand::Rng;
use tokio::time::Instant;

const WORKERS: usize = 3;
const PAUSES: usize = 4;
const TTL_MS: u64 = 2000;

fn main() {
    if common::worker::run_if_worker() {
        return;
    }
    let rt = leasehold_testkit::runtime();
    let started = Instant::now();
    let (unfenced, fenced) = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(90), async {
            tokio::join!(workload(false), workload(true))
        })
        .await
        .unwrap_or_else(|_| panic!("the lost-update workload did not finish within 90 s"))
    });
    println!("lost-update workload ({WORKERS} processes each, {PAUSES} random pauses of the holder, TTL {TTL_MS} ms):");
    println!("  unfenced: {unfenced}");
    println!("  fenced:   {fenced}");
    assert!(unfenced.increments > 0 && fenced.increments > 0, "no progress");
    assert!(
        unfenced.lost > 0,
        "the unfenced run lost no update: the workload did not exercise a paused holder ({unfenced})"
    );
    assert_eq!(fenced.lost, 0, "the fenced run lost updates ({fenced})");
    assert!(
        fenced.refused > 0,
        "no fenced write was refused: no pause hit a holder mid-update ({fenced})"
    );
    println!("lost_update: passed in {:?}", started.elapsed());
}

#[derive(Debug)]
struct Outcome {
    increments: u64,
    counter: u64,
    lost: u64,
    refused: usize,
    expired: usize,
    grants: usize,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} acknowledged increments, counter {}, lost {}, {} writes refused by the fence, {} leases run out between writes, {} grants",
            self.increments, self.counter, self.lost, self.refused, self.expired, self.grants
        )
    }
}

async fn workload(fenced: bool) -> Outcome {
    let tag = if fenced {
        "lost-update-fenced"
    } else {
        "lost-update-unfenced"
    };
    let store = common::store(tag).await;
    let prefix = store.config().prefix().to_owned();
    let name = LeaseName::new("counter-lock").unwrap_or_else(|e| panic!("{e}"));
    let counter = format!("{prefix}data/counter");
    let log = format!("{prefix}data/log/");
    let env = HashMap::from([
        ("LH_ENDPOINTS", common::endpoints().join(",")),
        ("LH_PREFIX", prefix.clone()),
        ("LH_NAME", name.as_str().to_owned()),
        ("LH_TTL_MS", TTL_MS.to_string()),
        ("LH_FENCED", if fenced { "1" } else { "0" }.to_owned()),
        ("LH_COUNTER", counter.clone()),
        ("LH_LOG", log.clone()),
        ("LH_WORK_MS", "40".to_owned()),
    ]);
    let workers: Vec<Worker> = (0..WORKERS).map(|_| Worker::spawn("increment", &env)).collect();
    assert!(
        leasehold_core::testing::process::poll(Duration::from_secs(15), || workers.iter().any(|w| w.count("ok") >= 5))
            .await,
        "no worker made progress"
    );

    for _ in 0..PAUSES {
        let settle = Duration::from_millis(rand::rng().random_range(300..800));
        tokio::time::sleep(settle).await;
        // Pause whoever holds the lock now, at a random moment of its loop.
        let holder = current_holder(&store, &name, &workers).await;
        let pause = Duration::from_millis(rand::rng().random_range(3000..3600));
        freeze(holder).await.expect("freeze the holder");
        let w = workers
            .iter()
            .find(|w| w.pid == holder)
            .unwrap_or_else(|| panic!("holder {holder}"));
        let reported = w.lines().len();
        tokio::time::sleep(pause).await;
        resume(holder).expect("resume");
        // Its pending step (the write it was about to make, or the next read) reports
        // before the next pause.
        assert!(
            leasehold_core::testing::process::poll(Duration::from_secs(10), || w.lines().len() > reported).await,
            "the resumed holder {holder} never reported; its last lines: {:?}",
            w.lines().iter().rev().take(8).rev().collect::<Vec<_>>()
        );
    }
    let mut lines = Vec::new();
    for w in workers {
        lines.extend(w.kill().await);
    }

    let mut kv = store.client().kv_client();
    let value = kv.get(counter.clone(), None).await.expect("read counter");
    let counter_value = value
        .kvs()
        .first()
        .and_then(|kv| std::str::from_utf8(kv.value()).ok()?.parse::<u64>().ok())
        .unwrap_or(0);
    let logged = kv
        .get(log.clone(), Some(GetOptions::new().with_prefix().with_count_only()))
        .await
        .expect("count log")
        .count();
    let increments = u64::try_from(logged).unwrap_or(0);
    let outcome = Outcome {
        increments,
        counter: counter_value,
        lost: increments.saturating_sub(counter_value),
        refused: lines.iter().filter(|l| l.starts_with("rejected ")).count(),
        expired: lines.iter().filter(|l| l.starts_with("expired ")).count(),
        grants: lines.iter().filter(|l| l.starts_with("granted ")).count(),
    };
    assert!(
        counter_value <= increments,
        "the counter exceeds the acknowledged increments: {outcome}"
    );
    common::cleanup(&store).await;
    outcome
}

/// The pid of the worker holding `name` now (holder ids start with `pid-<pid>#`), and
/// that holds it still in its own eyes: its last report is a grant or an increment. A
/// worker whose lease ran out meanwhile (it said `expired`, or a write of it failed) is
/// waiting in `acquire` while its record lives on until the store expires it; paused
/// there, it has no step to report when it resumes.
async fn current_holder(store: &EtcdStore, name: &LeaseName, workers: &[Worker]) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(s)) = store.read(name).await {
            if let Some(h) = &s.record.holder {
                let pid = h
                    .as_str()
                    .strip_prefix("pid-")
                    .and_then(|r| r.split('#').next())
                    .and_then(|p| p.parse::<u32>().ok());
                let holding = |w: &Worker| {
                    w.lines()
                        .last()
                        .is_some_and(|l| l.starts_with("granted ") || l.starts_with("ok "))
                };
                if let Some(pid) = pid.filter(|p| workers.iter().any(|w| w.pid == *p && holding(w))) {
                    return pid;
                }
            }
        }
        assert!(Instant::now() < deadline, "nobody holds {name} for 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
