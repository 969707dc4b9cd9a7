//! A job's start record lasts while an instance of it runs, however far apart its
//! slots are. On the stores that remove records by themselves (Redis, etcd), a job
//! whose slots come less often than `keep_done_for` has no slot record left between
//! them; an outage over its next slot must not make it look new, which would skip that
//! slot. One instance runs two slots and on until just before the third; the next
//! starts 1.3 s after it, and runs it late.
//!
//! It lasts through a run longer than `keep_done_for`, too: an instance that stopped
//! in such a run would otherwise leave a job that looks new, and the slot it owed
//! would be skipped.
#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{LeaseClient, NamePrefix};
use leasehold_jobs::{JobContext, JobSpec, Schedule, Scheduler, Slot, SlotEvent, SlotOutcome};
use tokio_util::sync::CancellationToken;

const PERIOD: Duration = Duration::from_secs(10);
const KEEP: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Seen {
    ran: BTreeSet<Slot>,
    new_job: bool,
}

fn now_ms() -> u64 {
    u64::try_from(std::time::UNIX_EPOCH.elapsed().unwrap().as_millis()).unwrap()
}

/// Starts `spec` on a fresh client of `place`: what it ran and whether it took the job
/// for new, and the shutdown that stops it.
async fn start(
    place: &common::Place,
    spec: &JobSpec,
) -> (Arc<Mutex<Seen>>, CancellationToken, tokio::task::JoinHandle<()>) {
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let shutdown = CancellationToken::new();
    let job = common::slot_job({
        let seen = seen.clone();
        move |slot| {
            seen.lock().unwrap().ran.insert(slot);
            SlotOutcome::Committed
        }
    });
    let events = seen.clone();
    let scheduler = Scheduler::new(place.client().await).on_event(move |e| {
        if matches!(e, SlotEvent::NewJob { .. }) {
            events.lock().unwrap().new_job = true;
        }
    });
    let task = tokio::spawn({
        let (spec, shutdown) = (spec.clone(), shutdown.clone());
        async move { scheduler.run(spec, job, shutdown).await.unwrap() }
    });
    (seen, shutdown, task)
}

async fn a_sparse_job_stays_known_between_its_slots(kind: common::Kind) {
    let place = common::Place::new(kind).await;
    let name = format!("sparse-{}", leasehold_testkit::unique_suffix());
    let spec = JobSpec::new(name, Schedule::every(PERIOD).unwrap(), Duration::from_millis(500))
        .grace(Duration::from_millis(200))
        .catch_up(Duration::from_secs(4))
        .keep_done_for(KEEP)
        .clock_skew(Duration::from_millis(200));
    let (first, stop, task) = start(&place, &spec).await;
    common::wait_until(Duration::from_secs(30), "the first instance runs two slots", || {
        first.lock().unwrap().ran.len() >= 2
    })
    .await;
    assert!(first.lock().unwrap().new_job, "a job new to the store");
    // Its slot records ran out (KEEP after each run) long before the next slot.
    let next = spec.schedule.next_after(now_ms()).unwrap();
    common::wait_until(PERIOD, "just before the next slot", || now_ms() + 600 >= next.unix_ms()).await;
    stop.cancel();
    task.await.unwrap();
    assert!(!first.lock().unwrap().ran.contains(&next), "ran {next} early");
    // Late by more than a new job's cut allows (its start's second, less the skew).
    common::wait_until(PERIOD, "1.3 s after the slot", || now_ms() >= next.unix_ms() + 1_300).await;
    let (second, stop, task) = start(&place, &spec).await;
    common::wait_until(
        Duration::from_secs(30),
        "the second instance to run the slot, or take the job for new",
        || {
            let s = second.lock().unwrap();
            s.ran.contains(&next) || s.new_job
        },
    )
    .await;
    stop.cancel();
    task.await.unwrap();
    let s = second.lock().unwrap();
    assert!(!s.new_job, "the job was taken for new");
    assert!(s.ran.contains(&next), "{next} was not run");
}

on_stores!(a_sparse_job_stays_known_between_its_slots; redis Redis, etcd Etcd);

/// Whether a start record of `job` is there and has time left, by the store's clock.
async fn start_record_lives(client: &LeaseClient, job: &str) -> bool {
    let store = client.store();
    let names = store.list(&NamePrefix::new(format!("{job}/@")).unwrap()).await.unwrap();
    for name in names {
        if let Some(stored) = store.read(&name).await.unwrap() {
            if stored.remaining.is_some_and(|left| !left.is_zero()) {
                return true;
            }
        }
    }
    false
}

async fn a_start_record_lasts_through_a_long_run(kind: common::Kind) {
    const SHORT_KEEP: Duration = Duration::from_millis(800);
    let name = format!("long-run-{}", leasehold_testkit::unique_suffix());
    // Its runs renewed (the default), lasting longer than lock_at_most_for.
    let every = Schedule::every(Duration::from_secs(1)).unwrap();
    let spec = JobSpec::new(name.clone(), every, Duration::from_millis(300))
        .grace(Duration::from_millis(100))
        .catch_up(Duration::from_millis(200))
        .keep_done_for(SHORT_KEEP)
        .clock_skew(Duration::from_millis(100));
    let place = common::Place::new(kind).await;
    let reader = place.client().await;
    // Seen from inside the first run, over four times as long as the record was
    // written to last (five quarters of keep_done_for, plus the skew; on etcd, whose
    // leases count whole seconds, about twice) in: was it there?
    let seen: Arc<Mutex<Option<bool>>> = Arc::default();
    let job = {
        let seen = seen.clone();
        move |_ctx: JobContext| {
            let (seen, reader, name) = (seen.clone(), reader.clone(), name.clone());
            async move {
                if seen.lock().unwrap().is_none() {
                    tokio::time::sleep(SHORT_KEEP * 6).await;
                    let lives = start_record_lives(&reader, &name).await;
                    *seen.lock().unwrap() = Some(lives);
                }
                Ok::<_, String>(SlotOutcome::Committed)
            }
        }
    };
    let shutdown = CancellationToken::new();
    let scheduler = Scheduler::new(place.client().await);
    let task = tokio::spawn({
        let (spec, shutdown) = (spec.clone(), shutdown.clone());
        async move { scheduler.run(spec, job, shutdown).await.unwrap() }
    });
    common::wait_until(Duration::from_secs(20), "the first run to look", || {
        seen.lock().unwrap().is_some()
    })
    .await;
    shutdown.cancel();
    task.await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        Some(true),
        "the start record ran out during a long run"
    );
}

on_stores!(a_start_record_lasts_through_a_long_run; postgres Postgres, redis Redis, etcd Etcd);
