//! Slot events say what happened, on every real store: `Ran` only from the instance
//! whose run committed the slot, `DoneElsewhere` from an instance whose run found the
//! slot done, and `Abandoned` never for a slot another instance ran.
#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::clock::WallClock;
use leasehold_jobs::{JobContext, JobSpec, LockAtMost, Schedule, Scheduler, Slot, SlotEvent, SlotOutcome};
use tokio_util::sync::CancellationToken;

/// The protected data: one row per slot, done in the same (mutex) transaction as the
/// effect; a second run of a slot finds it done and commits nothing.
#[derive(Default)]
struct Table {
    committed: BTreeMap<Slot, &'static str>,
    /// The run that committed and then held on until its lease was cut off.
    hung: Option<(Slot, &'static str)>,
    events: Vec<(&'static str, SlotEvent)>,
}

type Shared = Arc<Mutex<Table>>;

/// The job of instance `who`: commits the slot unless it is done. The first run from
/// `hang_from` on (both instances are running by then) commits, then keeps running until its context is cancelled at the
/// `lock_at_most_for` cap: its lease is lost after the commit, another instance takes
/// the slot over, and this instance's loop stays busy for longer than `catch_up`.
fn job(
    table: Shared,
    who: &'static str,
    first: Arc<AtomicBool>,
    hang_from: u64,
) -> impl FnMut(JobContext) -> std::pin::Pin<Box<dyn Future<Output = Result<SlotOutcome, String>> + Send>> + Send {
    move |ctx: JobContext| {
        let (table, first) = (table.clone(), first.clone());
        Box::pin(async move {
            let slot = ctx.slot().ok_or("no slot")?;
            let fresh = {
                let mut t = table.lock().unwrap();
                let fresh = !t.committed.contains_key(&slot);
                if fresh {
                    t.committed.insert(slot, who);
                }
                fresh
            };
            if !fresh {
                return Ok(SlotOutcome::AlreadyDone);
            }
            if slot.unix_ms() >= hang_from && !first.swap(true, Ordering::SeqCst) {
                table.lock().unwrap().hung = Some((slot, who));
                ctx.cancelled().await;
            }
            Ok(SlotOutcome::Committed)
        })
    }
}

async fn events_say_what_happened(kind: common::Kind) {
    let place = common::Place::new(kind).await;
    let name = format!("events-{}", leasehold_testkit::unique_suffix());
    let spec = JobSpec::new(
        name,
        Schedule::every(Duration::from_millis(200)).unwrap(),
        Duration::from_millis(1_500),
    )
    .at_most(LockAtMost::Absolute)
    .catch_up(Duration::from_millis(800))
    .keep_done_for(Duration::from_secs(30));
    let table: Shared = Arc::default();
    let first = Arc::new(AtomicBool::new(false));
    let shutdown = CancellationToken::new();
    let mut tasks = Vec::new();
    let clients = [place.client().await, place.client().await];
    let hang_from = leasehold_core::clock::SystemWallClock.now_ms() + 1_000;
    for (who, client) in ["a", "b"].into_iter().zip(clients) {
        let t = table.clone();
        let scheduler = Scheduler::new(client).on_event(move |e| t.lock().unwrap().events.push((who, e.clone())));
        let job = job(table.clone(), who, first.clone(), hang_from);
        let (spec, shutdown) = (spec.clone(), shutdown.clone());
        tasks.push(tokio::spawn(async move { scheduler.run(spec, job, shutdown).await }));
    }
    // The first run's slot: committed by one instance, its lease lost at the cap, taken
    // over by the other, which finds it done; then the first instance works through
    // the slots that passed while it was busy.
    let hung = || table.lock().unwrap().hung;
    common::wait_until(
        Duration::from_secs(30),
        "the first slot is taken over and found done",
        || {
            let Some((slot, who)) = hung() else { return false };
            let t = table.lock().unwrap();
            let found_done = t
                .events
                .iter()
                .any(|(w, e)| *w != who && *e == SlotEvent::DoneElsewhere { slot });
            let caught_up = t.events.iter().any(|(w, e)| {
                *w == who && !matches!(e, SlotEvent::Ran { .. }) && slot_of(e).unix_ms() > slot.unix_ms() + 2_000
            });
            found_done && caught_up
        },
    )
    .await;
    shutdown.cancel();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let (hung_slot, hung_by) = hung().unwrap();
    let t = table.lock().unwrap();
    let ran: Vec<(&str, Slot)> = t
        .events
        .iter()
        .filter_map(|(w, e)| match e {
            SlotEvent::Ran { slot, .. } => Some((*w, *slot)),
            _ => None,
        })
        .collect();
    // `Ran` exactly from the committing instance, once per committed slot.
    let mut want: Vec<(&str, Slot)> = t.committed.iter().map(|(s, w)| (*w, *s)).collect();
    let mut got = ran.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want, "Ran events against the committed rows");
    assert!(
        ran.contains(&(hung_by, hung_slot)),
        "the run that committed before losing its lease reports Ran"
    );
    for (who, e) in &t.events {
        if let SlotEvent::Abandoned { slot } = e {
            assert!(
                !t.committed.contains_key(slot),
                "{who} reported Abandoned for {slot}, which {} ran",
                t.committed[slot]
            );
        }
        if let SlotEvent::Lost { slot, .. } = e {
            assert!(
                t.committed.get(slot) != Some(who),
                "{who} reported Lost for {slot}, which it committed"
            );
        }
    }
    // The busy instance came back to slots the other had run past its window: it says
    // they were done elsewhere.
    let behind = t.events.iter().any(|(w, e)| {
        *w == hung_by
            && matches!(e, SlotEvent::DoneElsewhere { slot } if slot.unix_ms() > hung_slot.unix_ms() + 1_000
                && t.committed.get(slot).is_some_and(|c| *c != hung_by))
    });
    assert!(behind, "events: {:?}", t.events);
}

fn slot_of(e: &SlotEvent) -> Slot {
    match e {
        SlotEvent::Ran { slot, .. }
        | SlotEvent::Failed { slot, .. }
        | SlotEvent::Lost { slot, .. }
        | SlotEvent::DoneElsewhere { slot }
        | SlotEvent::HeldElsewhere { slot, .. }
        | SlotEvent::Missed { slot }
        | SlotEvent::Abandoned { slot } => *slot,
        _ => Slot::from_unix_ms(0),
    }
}

on_every_store!(events_say_what_happened);
