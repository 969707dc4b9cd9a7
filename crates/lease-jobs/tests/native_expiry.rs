//! Where the store has an expiry of its own (Redis, etcd), the done records of a job's
//! slots go with their token counters once `keep_done_for` (plus the skew) has passed,
//! even when no scheduler is left to sweep them: every instance stopped, or all fell
//! behind. (On Redis a done record ran out by its `PX` before, but its counter hash
//! stayed; on etcd the fence counter stayed.)
#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_jobs::{JobSpec, Schedule, Scheduler, Slot, SlotOutcome};
use tokio_util::sync::CancellationToken;

const SLOTS: usize = 8;
const KEEP: Duration = Duration::from_millis(1_500);
const SKEW: Duration = Duration::from_millis(200);

async fn done_records_go_with_no_scheduler_left(kind: common::Kind) {
    let place = common::Place::new(kind).await;
    let name = format!("expiring-{}", leasehold_testkit::unique_suffix());
    let prefix = format!("{name}/");
    let spec = JobSpec::new(
        name,
        Schedule::every(Duration::from_millis(200)).unwrap(),
        Duration::from_millis(500),
    )
    .catch_up(Duration::from_millis(100))
    .keep_done_for(KEEP)
    .clock_skew(SKEW);
    let committed: Arc<Mutex<BTreeSet<Slot>>> = Arc::default();
    let shutdown = CancellationToken::new();
    let job = common::slot_job({
        let committed = committed.clone();
        move |slot| {
            committed.lock().unwrap().insert(slot);
            SlotOutcome::Committed
        }
    });
    let scheduler = Scheduler::new(place.client().await);
    let task = {
        let (spec, shutdown) = (spec.clone(), shutdown.clone());
        tokio::spawn(async move { scheduler.run(spec, job, shutdown).await })
    };
    common::wait_until(Duration::from_secs(30), "the slots to complete", || {
        committed.lock().unwrap().len() >= SLOTS
    })
    .await;
    shutdown.cancel();
    task.await.unwrap().unwrap();
    let counter = place.client().await;
    let left = place.count_records(&counter, &prefix).await;
    assert!(left > 0, "no record of the slots just done: nothing to show");
    common::wait_for(
        KEEP + SKEW + Duration::from_secs(10),
        "every key of the job to go",
        || {
            let (place, counter, prefix) = (place.clone(), counter.clone(), prefix.clone());
            async move { place.count_records(&counter, &prefix).await == 0 }
        },
    )
    .await;
    eprintln!(
        "{kind:?}: {left} keys when the scheduler stopped, none {:?} later",
        KEEP + SKEW
    );
}

on_stores!(done_records_go_with_no_scheduler_left; redis Redis, etcd Etcd);
