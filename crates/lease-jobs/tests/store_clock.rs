//! Slots are due on the store's clock where the store has one (Postgres, MySQL, Redis,
//! SQLite's host): an instance whose wall clock runs 2 s fast starts no slot before
//! its time, as the effect rows' commit times show.
#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use leasehold_jobs::{JobContext, JobSpec, Schedule, Scheduler, SlotOutcome, TokioWallClock};
use tokio_util::sync::CancellationToken;

/// How far the skewed instance's wall clock runs ahead.
const SKEW_MS: i64 = 2_000;

async fn a_fast_clock_starts_no_slot_early(kind: common::Kind) {
    let place = common::Place::new(kind).await;
    let effects = Arc::new(common::Effects::open().await);
    let name = format!("skew-{}", leasehold_testkit::unique_suffix());
    let spec = JobSpec::new(
        name.clone(),
        Schedule::every(Duration::from_millis(200)).unwrap(),
        Duration::from_secs(2),
    )
    .catch_up(Duration::from_millis(500))
    .keep_done_for(Duration::from_secs(30));
    let shutdown = CancellationToken::new();
    let mut tasks = Vec::new();
    for (who, skew) in [("fast", SKEW_MS), ("true", 0)] {
        let scheduler = Scheduler::new(place.client().await).with_wall_clock(TokioWallClock::system_shifted(skew));
        let job = {
            let (effects, name) = (effects.clone(), name.clone());
            move |ctx: JobContext| {
                let (effects, name) = (effects.clone(), name.clone());
                async move {
                    let slot = ctx.slot().ok_or("no slot")?;
                    Ok::<_, String>(
                        if effects.commit(&name, slot.unix_ms(), ctx.token().get(), who).await? {
                            SlotOutcome::Committed
                        } else {
                            SlotOutcome::AlreadyDone
                        },
                    )
                }
            }
        };
        let (spec, shutdown) = (spec.clone(), shutdown.clone());
        tasks.push(tokio::spawn(async move { scheduler.run(spec, job, shutdown).await }));
    }
    // Both instances take slots (the fast one would take nearly all of them, early,
    // if its wall clock said when they are due).
    common::wait_for(Duration::from_secs(30), "both instances ran slots", || async {
        let rows = effects.rows(&name).await;
        let by = |w: &str| rows.iter().filter(|(_, i, _)| i == w).count();
        rows.len() >= 20 && by("fast") >= 3 && by("true") >= 3
    })
    .await;
    shutdown.cancel();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let rows = effects.rows(&name).await;
    for (slot, who, at) in &rows {
        assert!(
            at >= slot,
            "{who} committed slot {slot} at {at}, {} ms before its time",
            slot - at
        );
    }
    let fast = rows.iter().filter(|(_, w, _)| w == "fast").count();
    eprintln!(
        "{kind:?}: {} slots, {fast} by the instance 2 s fast, none early",
        rows.len()
    );
}

on_stores!(a_fast_clock_starts_no_slot_early; postgres Postgres, sqlite Sqlite, mysql MySql, redis Redis);
