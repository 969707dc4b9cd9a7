//! `LockingExecutor` on `MemoryStore`, with paused time but for the frozen run (real
//! time): exclusion, lock_at_most_for, lock_at_least_for, loss and round trips.
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use leasehold_core::testing::{CountingStore, FaultPlan, FaultStore};
use leasehold_core::{FencingToken, LeaseClient, LossCause, MemoryStore};
use leasehold_jobs::{LockConfig, LockingExecutor, Marker, RunOutcome};
use tokio::time::Instant;

fn exec(store: impl leasehold_core::store::Linearizable) -> LockingExecutor {
    LockingExecutor::new(LeaseClient::new(store))
}

#[tokio::test(start_paused = true)]
async fn one_instance_runs_at_a_time_and_the_lock_is_renewed_meanwhile() {
    let store = MemoryStore::new();
    let a = exec(store.clone());
    let b = exec(store.clone());
    // The job runs five times longer than lock_at_most_for: renewals keep it.
    let lock = LockConfig::new("jobs/long", Duration::from_secs(1));
    let running = Arc::new(AtomicU32::new(0));
    let job = |running: Arc<AtomicU32>| {
        move |ctx: leasehold_jobs::JobContext| async move {
            assert_eq!(running.fetch_add(1, Ordering::SeqCst), 0, "two runs at once");
            tokio::time::sleep(Duration::from_secs(5)).await;
            assert!(ctx.is_valid(), "lost the lock while the store answered");
            running.fetch_sub(1, Ordering::SeqCst);
            ctx.token()
        }
    };
    let ra = tokio::spawn({
        let (a, lock, running) = (a.clone(), lock.clone(), running.clone());
        async move { a.run(&lock, job(running)).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut skipped = 0;
    for _ in 0..9 {
        match b.run(&lock, job(running.clone())).await.expect("b") {
            RunOutcome::Skipped { token, retry_after, .. } => {
                assert_eq!(token, FencingToken::new(1));
                assert!(retry_after <= Duration::from_secs(1));
                skipped += 1;
            }
            RunOutcome::Ran(_) => panic!("b ran while a held the lock"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(skipped, 9);
    let ran = ra.await.expect("task").expect("a").ran().expect("a ran");
    assert_eq!(ran.output, FencingToken::new(1));
    assert!(ran.lost.is_none() && ran.kept_for.is_none());
    // Released at once: the next run gets the lock with the next token.
    let next = b.run(&lock, |ctx| async move { ctx.token() }).await.expect("b again");
    assert_eq!(next.ran().expect("ran").output, FencingToken::new(2));
}

/// A job shorter than lock_at_least_for leaves the lock taken until start +
/// lock_at_least_for, on a store with a clock and on one judged by observation, and
/// when the job fails too.
#[tokio::test(start_paused = true)]
async fn lock_at_least_for_keeps_the_lock_after_a_short_job() {
    for (label, store) in [
        ("store clock", MemoryStore::new()),
        ("observation", MemoryStore::observation()),
    ] {
        for fails in [false, true] {
            let a = exec(store.clone());
            let b = exec(store.clone());
            let name = format!("jobs/at-least-{}-{fails}", label.replace(' ', "-"));
            let lock = LockConfig::new(&name, Duration::from_secs(2)).lock_at_least_for(Duration::from_secs(5));
            let started = Instant::now();
            let ran = a
                .run(&lock, |_| async move {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if fails { Err("boom") } else { Ok(()) }
                })
                .await
                .expect("a")
                .ran()
                .expect("a ran");
            assert_eq!(ran.output.is_err(), fails);
            let kept = ran.kept_for.expect("kept for the rest of lock_at_least_for");
            assert!(
                kept <= Duration::from_millis(4_900) && kept >= Duration::from_millis(4_800),
                "{kept:?}"
            );
            // b polls every 250 ms until it gets the lock.
            let granted_at = loop {
                match b.run(&lock, |ctx| async move { ctx.token() }).await.expect("b") {
                    RunOutcome::Ran(r) => {
                        assert_eq!(r.output, FencingToken::new(2), "{label}");
                        break Instant::now();
                    }
                    RunOutcome::Skipped { holder, .. } => {
                        let marker = holder.as_ref().and_then(Marker::of);
                        assert_eq!(marker, Some(Marker::Held), "{label}: held by {holder:?}");
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                }
            };
            let after = granted_at - started;
            assert!(
                after >= Duration::from_secs(5),
                "{label}: lock free {after:?} after the start"
            );
            assert!(
                after <= Duration::from_secs(7),
                "{label}: lock kept too long: {after:?}"
            );
        }
    }
}

/// The runner's store stops answering mid-job: the job's cancellation fires before
/// another instance is granted the lock, and the next token fences the old runner.
#[tokio::test(start_paused = true)]
async fn a_runner_that_loses_the_lock_is_cancelled_before_the_takeover() {
    let mem = MemoryStore::new();
    let hung = FaultStore::new(mem.clone(), 5);
    let a = exec(hung.clone());
    let b = exec(mem.clone());
    let lock = LockConfig::new("jobs/frozen", Duration::from_secs(1));
    let ra = tokio::spawn({
        let hung = hung.clone();
        let lock = lock.clone();
        async move {
            a.run(&lock, |ctx| async move {
                tokio::time::sleep(Duration::from_millis(1_500)).await;
                hung.set_plan(FaultPlan::hang());
                ctx.cancelled().await;
                Instant::now()
            })
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let granted_at = loop {
        match b.run(&lock, |ctx| async move { ctx.token() }).await.expect("b") {
            RunOutcome::Ran(r) => {
                assert_eq!(r.output, FencingToken::new(2));
                break Instant::now();
            }
            RunOutcome::Skipped { retry_after, .. } => tokio::time::sleep(retry_after).await,
        }
    };
    let ran = ra.await.expect("task").expect("a").ran().expect("a ran");
    assert!(
        ran.output + Duration::from_millis(50) <= granted_at,
        "a's job cancelled at {:?}, b granted at {:?}",
        ran.output,
        granted_at
    );
    assert!(matches!(
        ran.lost,
        Some(LossCause::OutcomeUnknown | LossCause::StoreUnreachable)
    ));
}

/// Round trips of one run: take the lock (1), release (1); with lock_at_least_for:
/// take (1), read + final write (2), and the handle's release finds the final record
/// and leaves it (1 write that conflicts).
#[tokio::test(start_paused = true)]
async fn round_trips_per_run() {
    let store = CountingStore::new(MemoryStore::new());
    let e = exec(store.clone());
    let quick = LockConfig::new("jobs/rt", Duration::from_secs(10));
    e.run(&quick, |_| async {}).await.expect("run").ran().expect("ran");
    assert_eq!(store.counts().round_trips(), 2, "{:?}", store.counts());

    store.reset();
    let kept = LockConfig::new("jobs/rt2", Duration::from_secs(10)).lock_at_least_for(Duration::from_secs(60));
    e.run(&kept, |_| async {}).await.expect("run").ran().expect("ran");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let n = store.counts();
    assert_eq!((n.reads, n.writes, n.renews), (1, 3, 0), "{n:?}");
    let rec = store
        .read(&leasehold_core::LeaseName::new("jobs/rt2").expect("name"))
        .await
        .expect("read")
        .expect("present");
    assert_eq!(rec.record.holder.as_ref().and_then(Marker::of), Some(Marker::Held));
    assert_eq!(rec.record.token, FencingToken::new(1));
}

use leasehold_core::store::CasStore as _;

/// Two runs of one job at once through one executor (one client): the second is
/// skipped as if another instance held the lock, not an error and never a wait.
#[tokio::test(start_paused = true)]
async fn a_second_run_through_the_same_client_is_skipped_at_once() {
    let store = MemoryStore::new();
    let a = exec(store.clone());
    let lock = LockConfig::new("jobs/same-client", Duration::from_secs(3));
    let first = tokio::spawn({
        let (a, lock) = (a.clone(), lock.clone());
        async move {
            a.run(&lock, |ctx| async move {
                tokio::time::sleep(Duration::from_secs(10)).await;
                ctx.token()
            })
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let asked = Instant::now();
    match a
        .run(&lock, |_| async { panic!("ran twice at once") })
        .await
        .expect("second")
    {
        RunOutcome::Skipped { holder, token, .. } => {
            assert_eq!((holder, token), (None, FencingToken::new(1)));
        }
        RunOutcome::Ran(_) => unreachable!(),
    }
    assert_eq!(Instant::now(), asked, "the second run waited");
    let ran = first.await.expect("task").expect("first").ran().expect("first ran");
    assert_eq!(ran.output, FencingToken::new(1));
    // Once the first run released the lock, the same executor runs the job again.
    let again = a.run(&lock, |ctx| async move { ctx.token() }).await.expect("again");
    assert_eq!(again.ran().expect("ran").output, FencingToken::new(2));
}

/// ShedLock's meaning of lock_at_most_for, opted in: never longer than it, even while
/// the job is alive. The job's context is cancelled at the cap (a 5% margin before it,
/// TTL and cap being equal), nothing is renewed, and another instance gets the lock
/// when the store frees it at the cap.
#[tokio::test(start_paused = true)]
async fn an_absolute_lock_at_most_for_ends_a_live_run_at_the_cap() {
    let store = CountingStore::new(MemoryStore::new());
    let a = exec(store.clone());
    let b = exec(store.clone());
    let lock = LockConfig::new("jobs/capped", Duration::from_secs(3)).at_most(leasehold_jobs::LockAtMost::Absolute);
    let started = Instant::now();
    let run = tokio::spawn({
        let (a, lock) = (a.clone(), lock.clone());
        async move {
            a.run(&lock, |ctx| async move {
                ctx.cancelled().await;
                let told = Instant::now();
                // Still busy for a while after being told.
                tokio::time::sleep(Duration::from_secs(10)).await;
                told
            })
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    // b polls: it is skipped until the store frees the lock at the cap.
    let taken = loop {
        match b.run(&lock, |ctx| async move { ctx.token() }).await.expect("b") {
            RunOutcome::Ran(r) => break (Instant::now(), r.output),
            RunOutcome::Skipped { .. } => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let after = taken.0 - started;
    assert!(
        after >= Duration::from_secs(3) && after <= Duration::from_millis(3_110),
        "b got the lock {after:?} after the start, not at the 3 s cap"
    );
    assert_eq!(taken.1, FencingToken::new(2));
    let ran = run.await.expect("task").expect("a").ran().expect("a ran");
    assert_eq!(
        ran.output - started,
        Duration::from_millis(2_850),
        "told at the hold's end"
    );
    assert_eq!(ran.lost, Some(LossCause::MaxHoldReached));
    assert_eq!(
        store.counts().renews,
        0,
        "a capped lock is not renewed: {:?}",
        store.counts()
    );
}

/// The job ran, and the store fails the call that would keep the lock for the rest of
/// lock_at_least_for (before it is sent, or after it applied): the run still returns
/// the job's output, with the lock not known to be kept.
#[tokio::test(start_paused = true)]
async fn a_store_error_after_the_job_keeps_its_output() {
    let plans = [
        FaultPlan::down(),
        FaultPlan {
            apply_then_fail: 1.0,
            ..FaultPlan::none()
        },
    ];
    for (i, plan) in plans.into_iter().enumerate() {
        let store = FaultStore::new(MemoryStore::new(), 3);
        let e = exec(store.clone());
        let lock = LockConfig::new(format!("jobs/after-{i}"), Duration::from_secs(10))
            .lock_at_least_for(Duration::from_secs(60));
        let outcome = e
            .run(&lock, |ctx| {
                let (store, plan) = (store.clone(), plan.clone());
                async move {
                    // The job's work is done; from now on the store fails.
                    store.set_plan(plan);
                    ctx.token()
                }
            })
            .await;
        let ran = outcome
            .unwrap_or_else(|e| panic!("plan {i}: the job ran, but its run returned {e}"))
            .ran()
            .expect("ran");
        assert_eq!(ran.output, FencingToken::new(1), "plan {i}");
        assert_eq!((ran.lost, ran.kept_for), (None, None), "plan {i}");
        assert!(store.injected() >= 1, "plan {i}: no call failed");
    }
}

/// A run frozen past its lease's validity deadline (its whole runtime blocked, as a
/// stopped process is) reads that it must stop the moment it runs again, before the
/// renewal driver has had a turn to fire its cancellation. Real time on one thread.
#[tokio::test]
async fn a_run_frozen_past_its_validity_is_not_valid_when_it_wakes() {
    let exec = exec(MemoryStore::new());
    let lock = LockConfig::new("jobs/frozen", Duration::from_secs(1));
    let outcome = exec
        .run(&lock, |ctx: leasehold_jobs::JobContext| async move {
            let valid_before = ctx.is_valid();
            let deadline = ctx.valid_until();
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()) + Duration::from_millis(5));
            let cancelled = ctx.cancellation().is_cancelled();
            let valid_after = ctx.is_valid();
            (valid_before, cancelled, valid_after, ctx.cancellation().is_cancelled())
        })
        .await
        .expect("run");
    let RunOutcome::Ran(ran) = outcome else {
        panic!("not run: {outcome:?}")
    };
    let (valid_before, cancelled, valid_after, cancelled_after) = ran.output;
    assert!(valid_before, "not valid at the start");
    assert!(!cancelled, "the driver ran during the freeze");
    assert!(!valid_after, "the run trusts a lease past its deadline");
    // The first `false` ends the run for good, and tells work waiting on the cancellation.
    assert!(cancelled_after, "the context was not cancelled by its own expiry");
}

/// A run frozen past its lease's validity that returns before the driver has had a turn
/// to count the lease lost is not kept for `lock_at_least_for`: the store still names
/// it, but its tenure is over. The lock is released, and another instance runs at once.
/// Real time on one thread.
#[tokio::test]
async fn a_run_frozen_past_its_validity_is_not_kept_for_lock_at_least_for() {
    let store = MemoryStore::new();
    let a = exec(store.clone());
    let lock = LockConfig::new("jobs/frozen-kept", Duration::from_secs(1)).lock_at_least_for(Duration::from_secs(60));
    let outcome = a
        .run(&lock, |ctx: leasehold_jobs::JobContext| async move {
            std::thread::sleep(ctx.valid_until().saturating_duration_since(Instant::now()) + Duration::from_millis(5));
        })
        .await
        .expect("run");
    let ran = outcome.ran().expect("ran");
    assert_eq!(ran.kept_for, None, "kept a lease past its validity");
    assert!(ran.lost.is_some(), "a run past its validity is not counted lost");
    let again = exec(store).run(&lock, |_ctx| async {}).await.expect("run");
    assert!(again.ran().is_some(), "the lock stayed taken after a lapsed run");
}
