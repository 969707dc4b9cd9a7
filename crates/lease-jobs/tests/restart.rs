//! A restart runs no slot twice, on every real store: an instance runs a job's slots
//! and stops (its client, its connections and its sessions closed, as a redeployed
//! process's are), then the next instance starts with a catch-up window that covers
//! every slot the first one ran. It finds them done and runs only the slots that came
//! after.
//!
//! The job is new to the store: the first instance runs no slot from before its start
//! (none of the window before it), and says so; the second, which finds its start
//! record, does not.
#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_jobs::{JobSpec, Schedule, Scheduler, Slot, SlotEvent, SlotOutcome};
use tokio_util::sync::CancellationToken;

/// Which instance ran each slot, and how many runs each slot had.
#[derive(Default)]
struct Table {
    ran_by: BTreeMap<Slot, Vec<&'static str>>,
    /// The instances that reported the job new.
    new_to: Vec<&'static str>,
}

type Shared = Arc<Mutex<Table>>;

/// Runs `spec` on one fresh client of `place` as instance `who` until `stop` says so,
/// then drops the client.
async fn instance(place: &common::Place, spec: &JobSpec, table: &Shared, who: &'static str, stop: impl AsyncFnOnce()) {
    let client = place.client().await;
    let shutdown = CancellationToken::new();
    let job = common::slot_job({
        let table = table.clone();
        move |slot| {
            table.lock().unwrap().ran_by.entry(slot).or_default().push(who);
            SlotOutcome::Committed
        }
    });
    let task = tokio::spawn({
        let t = table.clone();
        let scheduler = Scheduler::new(client).on_event(move |e| {
            if matches!(e, SlotEvent::NewJob { .. }) {
                t.lock().unwrap().new_to.push(who);
            }
        });
        let (spec, shutdown) = (spec.clone(), shutdown.clone());
        async move { scheduler.run(spec, job, shutdown).await }
    });
    stop().await;
    shutdown.cancel();
    task.await.unwrap().unwrap();
}

async fn a_restart_runs_no_slot_twice(kind: common::Kind) {
    let place = common::Place::new(kind).await;
    let name = format!("restart-{}", leasehold_testkit::unique_suffix());
    // Moto answers one request at a time, in milliseconds: a slower schedule there.
    let interval = match kind {
        common::Kind::DynamoDb | common::Kind::S3 => Duration::from_millis(500),
        _ => Duration::from_millis(200),
    };
    let spec = JobSpec::new(name, Schedule::every(interval).unwrap(), Duration::from_secs(5))
        .catch_up(Duration::from_secs(20))
        .keep_done_for(Duration::from_secs(60))
        .clock_skew(Duration::from_millis(200));
    let table: Shared = Arc::default();
    let ran = |who: &str| {
        let t = table.lock().unwrap();
        t.ran_by.values().filter(|w| w.contains(&who)).count()
    };
    let started_ms = u64::try_from(std::time::UNIX_EPOCH.elapsed().unwrap().as_millis()).unwrap();
    instance(&place, &spec, &table, "first", async || {
        common::wait_until(Duration::from_secs(30), "the first instance runs 5 slots", || {
            ran("first") >= 5
        })
        .await;
    })
    .await;
    let first_ran: Vec<Slot> = {
        let t = table.lock().unwrap();
        t.ran_by.keys().copied().collect()
    };
    // Three slots of its own, and every slot from the first run to the last (a slot
    // retried after a store error is waited for).
    let every_slot = || {
        let t = table.lock().unwrap();
        let (Some(first), Some(last)) = (t.ran_by.keys().next(), t.ran_by.keys().next_back()) else {
            return false;
        };
        spec.schedule.slots_between(first.unix_ms() - 1, last.unix_ms()).count() == t.ran_by.len()
    };
    instance(&place, &spec, &table, "second", async || {
        common::wait_until(
            Duration::from_secs(30),
            "the second instance runs 3 slots, and none is missing",
            || ran("second") >= 3 && every_slot(),
        )
        .await;
    })
    .await;
    let t = table.lock().unwrap();
    let twice: Vec<_> = t.ran_by.iter().filter(|(_, w)| w.len() > 1).collect();
    assert!(twice.is_empty(), "slots run more than once: {twice:?}");
    for s in &first_ran {
        assert_eq!(t.ran_by[s], ["first"], "{s} was run by the first instance alone");
    }
    // From the start's second on, less the clock skew allowed (and a second for the
    // store's clock against this host's).
    let from = started_ms - started_ms % 1_000 - 200 - 1_000;
    let earliest = t.ran_by.keys().next().unwrap();
    assert!(
        earliest.unix_ms() >= from,
        "{earliest} ran, from before the job's first start"
    );
    assert_eq!(t.new_to, ["first"], "the instances that took the job for new");
    // And none lost from there on: the first instance's, the gap's, the second's.
    let latest = t.ran_by.keys().next_back().unwrap();
    let due: Vec<Slot> = spec
        .schedule
        .slots_between(earliest.unix_ms() - 1, latest.unix_ms())
        .collect();
    let ran: Vec<Slot> = t.ran_by.keys().copied().collect();
    assert_eq!(ran, due, "every slot from the first run to the last");
}

on_every_store!(a_restart_runs_no_slot_twice);
