//! The scheduler on `MemoryStore` with paused time and injected wall clocks: exactly
//! once per slot across skewed instances, takeover of a dead runner, missed-slot
//! policies, retries, cron, and the ShedLock-compatible naming.
#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::testing::{FaultPlan, FaultStore};
use leasehold_core::{AcquireOutcome, FencingToken, LeaseClient, MemoryStore};
use leasehold_jobs::{
    JobContext, JobSpec, LockNaming, MissedSlots, Schedule, Scheduler, Slot, SlotEvent, SlotOutcome, TokioWallClock,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// 2027-01-15T08:00:00Z: a round number, so slots line up with whole seconds.
const T0: u64 = 1_800_000_000_000;
const SEC: u64 = 1_000;

/// The protected data: one row per slot, written with the slot's "done" flag in the
/// same (here: mutex-protected) transaction, fenced by the run's token. `effects`
/// counts every committed effect: a duplicate would show here.
#[derive(Default)]
struct Table {
    rows: BTreeMap<Slot, (FencingToken, bool)>,
    effects: Vec<(Slot, FencingToken, &'static str)>,
    bodies: BTreeMap<Slot, u32>,
}

type Shared = Arc<Mutex<Table>>;

impl Table {
    /// The job's transaction: refused if the slot is done or a newer token wrote it.
    fn commit(&mut self, slot: Slot, token: FencingToken, who: &'static str) -> bool {
        let row = self.rows.entry(slot).or_insert((token, false));
        if row.1 || row.0 > token {
            return false;
        }
        *row = (token, true);
        self.effects.push((slot, token, who));
        true
    }

    /// [`Table::commit`], as the job reports it: a slot it did not commit was done.
    fn outcome(&mut self, slot: Slot, token: FencingToken, who: &'static str) -> SlotOutcome {
        if self.commit(slot, token, who) {
            SlotOutcome::Committed
        } else {
            SlotOutcome::AlreadyDone
        }
    }
}

type Ready = std::pin::Pin<Box<dyn std::future::Future<Output = Result<SlotOutcome, String>> + Send>>;

fn job(table: Shared, who: &'static str) -> impl FnMut(JobContext) -> Ready + Send {
    move |ctx: JobContext| {
        let table = table.clone();
        Box::pin(async move {
            let slot = ctx.slot().expect("slot");
            *table.lock().unwrap().bodies.entry(slot).or_default() += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(table.lock().unwrap().outcome(slot, ctx.token(), who))
        })
    }
}

fn scheduler(client: LeaseClient, wall_ms: u64, events: Option<Arc<Mutex<Vec<SlotEvent>>>>) -> Scheduler {
    let s = Scheduler::new(client).with_wall_clock(TokioWallClock::starting_at(wall_ms));
    match events {
        Some(ev) => s.on_event(move |e| ev.lock().unwrap().push(e.clone())),
        None => s,
    }
}

fn every_second(name: &str) -> JobSpec {
    JobSpec::new(
        name,
        Schedule::every(Duration::from_secs(1)).expect("schedule"),
        Duration::from_secs(2),
    )
    .catch_up(Duration::from_millis(2_500))
    .keep_done_for(Duration::from_secs(600))
}

/// Runs one scheduler per `(who, skew)` on one fresh store (wall clock T0 + skew), each running
/// `spec` with the job `make_job(who)` gives, for `run_for`; then shuts them all down and
/// waits for them.
async fn run_instances<F, Fut>(
    instances: &[(&'static str, i64)],
    events: Option<&Arc<Mutex<Vec<SlotEvent>>>>,
    spec: &JobSpec,
    run_for: Duration,
    make_job: impl Fn(&'static str) -> F,
) where
    F: FnMut(JobContext) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<SlotOutcome, String>> + Send,
{
    let store = MemoryStore::new();
    let shutdown = CancellationToken::new();
    let mut tasks = Vec::new();
    for &(who, skew) in instances {
        let s = scheduler(
            LeaseClient::new(store.clone()),
            T0.saturating_add_signed(skew),
            events.cloned(),
        );
        let (spec, job, shutdown) = (spec.clone(), make_job(who), shutdown.clone());
        tasks.push(tokio::spawn(async move { s.run(spec, job, shutdown).await }));
    }
    tokio::time::sleep(run_for).await;
    shutdown.cancel();
    for t in tasks {
        t.await.expect("task").expect("scheduler");
    }
}

/// [`run_instances`] of [`job`]; returns the table the jobs wrote.
async fn run_each(instances: &[(&'static str, i64)], spec: &JobSpec, run_for: Duration) -> Shared {
    let table: Shared = Arc::default();
    run_instances(instances, None, spec, run_for, |who| job(table.clone(), who)).await;
    table
}

/// Three instances whose clocks disagree by up to a second run a 1 s schedule for
/// 40 s: every slot runs exactly once, and no job body ever runs twice.
#[tokio::test(start_paused = true)]
async fn three_skewed_instances_run_every_slot_exactly_once() {
    let table = run_each(
        &[("a", 0), ("b", 300), ("c", -700)],
        &every_second("skewed"),
        Duration::from_secs(40),
    )
    .await;
    let t = table.lock().unwrap();
    // The instance furthest ahead reaches T0 + 40.3 s; all slots up to T0 + 38 s are
    // surely done; slots from the catch-up window before T0 are included.
    let expected: Vec<Slot> = (-2..=38)
        .map(|k: i64| Slot::from_unix_ms(T0.saturating_add_signed(k * 1_000)))
        .collect();
    for slot in &expected {
        let n = t.effects.iter().filter(|(s, _, _)| s == slot).count();
        assert_eq!(n, 1, "slot {slot} committed {n} times");
        assert_eq!(
            t.bodies.get(slot),
            Some(&1),
            "slot {slot} body ran {:?} times",
            t.bodies.get(slot)
        );
    }
    let by: BTreeMap<&str, usize> = t.effects.iter().fold(BTreeMap::new(), |mut m, (_, _, w)| {
        *m.entry(*w).or_default() += 1;
        m
    });
    // The instance whose clock is ahead fires first and takes almost every slot.
    assert!(by.get("b").copied().unwrap_or(0) >= 35, "runs by instance: {by:?}");
}

/// A runner dies mid-job (its store stops answering and its task never returns):
/// another instance that saw the slot taken completes it within the lease TTL.
#[tokio::test(start_paused = true)]
async fn a_dead_runners_slot_is_taken_over_within_the_ttl() {
    let mem = MemoryStore::new();
    let hung = FaultStore::new(mem.clone(), 9);
    let table: Shared = Arc::default();
    let shutdown = CancellationToken::new();
    let died_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let victim = Slot::from_unix_ms(T0 + 3 * SEC);

    // a's clock is 500 ms ahead, so it takes each slot first; at the victim slot it dies.
    let a = scheduler(LeaseClient::new(hung.clone()), T0 + 500, None);
    let a_task = tokio::spawn({
        let (table, shutdown, hung, died_at) = (table.clone(), shutdown.clone(), hung.clone(), died_at.clone());
        async move {
            a.run(
                every_second("takeover"),
                move |ctx: JobContext| {
                    let (table, hung, died_at) = (table.clone(), hung.clone(), died_at.clone());
                    async move {
                        let slot = ctx.slot().expect("slot");
                        if slot == victim {
                            hung.set_plan(FaultPlan::hang());
                            *died_at.lock().unwrap() = Some(Instant::now());
                            std::future::pending::<()>().await;
                        }
                        table.lock().unwrap().commit(slot, ctx.token(), "a");
                        Ok::<(), String>(())
                    }
                },
                shutdown,
            )
            .await
        }
    });
    let events: Arc<Mutex<Vec<SlotEvent>>> = Arc::default();
    let b = scheduler(LeaseClient::new(mem.clone()), T0, Some(events.clone()));
    let ran_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let b_task = tokio::spawn({
        let (table, shutdown, ran_at) = (table.clone(), shutdown.clone(), ran_at.clone());
        async move {
            b.run(
                every_second("takeover"),
                move |ctx: JobContext| {
                    let (table, ran_at) = (table.clone(), ran_at.clone());
                    async move {
                        let slot = ctx.slot().expect("slot");
                        if slot == victim {
                            *ran_at.lock().unwrap() = Some(Instant::now());
                        }
                        table.lock().unwrap().commit(slot, ctx.token(), "b");
                        Ok::<(), String>(())
                    }
                },
                shutdown,
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_secs(12)).await;
    shutdown.cancel();
    b_task.await.expect("task").expect("b");
    a_task.abort();

    let died = died_at.lock().unwrap().expect("a died");
    let ran = ran_at.lock().unwrap().expect("b ran the victim slot");
    let took = ran - died;
    // a's last renewal was at most a third of the TTL before it died: b takes over
    // within one TTL (2 s) of the death, plus the retry jitter.
    assert!(took <= Duration::from_millis(2_300), "takeover took {took:?}");
    let t = table.lock().unwrap();
    let victim_rows: Vec<_> = t.effects.iter().filter(|(s, _, _)| *s == victim).collect();
    assert_eq!(victim_rows.len(), 1, "{victim_rows:?}");
    assert_eq!(victim_rows[0].2, "b");
    assert_eq!(
        victim_rows[0].1,
        FencingToken::new(2),
        "takeover runs with the next token"
    );
    // Every slot from T0 - 2 s to T0 + 10 s exactly once.
    for k in -2..=10_i64 {
        let slot = Slot::from_unix_ms(T0.saturating_add_signed(k * 1_000));
        assert_eq!(
            t.effects.iter().filter(|(s, _, _)| *s == slot).count(),
            1,
            "slot {slot}"
        );
    }
    assert!(
        events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, SlotEvent::HeldElsewhere { slot, .. } if *slot == victim)),
        "b saw the victim slot taken first"
    );
}

/// An instance starts 5.3 s after the last of several slots nobody ran; one earlier
/// slot was started by a runner that died. Each policy, stated in `MissedSlots`.
#[tokio::test(start_paused = true)]
async fn missed_slot_policies() {
    for policy in [MissedSlots::RunLateOnce, MissedSlots::RunLatestOnly, MissedSlots::Skip] {
        let mem = MemoryStore::new();
        let spec = JobSpec::new(
            "missed",
            Schedule::every(Duration::from_secs(1)).expect("schedule"),
            Duration::from_secs(1),
        )
        .catch_up(Duration::from_millis(5_500))
        .grace(Duration::from_millis(200))
        .keep_done_for(Duration::from_secs(600))
        .missed(policy);
        // Slot T0 - 3 s was started by a runner that died at once.
        let orphan = Slot::from_unix_ms(T0 - 3 * SEC);
        let dead = FaultStore::new(mem.clone(), 1);
        let dead_client = LeaseClient::new(dead.clone());
        let lease = match dead_client
            .try_acquire(spec.lease_name(orphan).expect("name"), Duration::from_secs(1))
            .await
            .expect("acquire")
        {
            AcquireOutcome::Granted(l) => l,
            AcquireOutcome::Held { .. } => panic!("orphan slot not granted"),
        };
        dead.set_plan(FaultPlan::hang());
        std::mem::forget(lease);

        let table: Shared = Arc::default();
        let events: Arc<Mutex<Vec<SlotEvent>>> = Arc::default();
        let s = scheduler(LeaseClient::new(mem.clone()), T0 + 300, Some(events.clone()));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let (table, shutdown) = (table.clone(), shutdown.clone());
            async move { s.run(spec, job(table, "x"), shutdown).await }
        });
        tokio::time::sleep(Duration::from_millis(3_000)).await;
        shutdown.cancel();
        task.await.expect("task").expect("scheduler");

        let t = table.lock().unwrap();
        let ran: Vec<i64> = t
            .effects
            .iter()
            .map(|(s, _, _)| (i64::try_from(s.unix_ms()).expect("ms") - i64::try_from(T0).expect("ms")) / 1_000)
            .collect();
        // Past slots in the window: T0-5 .. T0; on time after start: T0+1, T0+2, T0+3.
        let expected: Vec<i64> = match policy {
            MissedSlots::RunLateOnce => vec![-5, -4, -3, -2, -1, 0, 1, 2, 3],
            // The latest missed slot (T0) runs late, the orphan is completed, the rest skipped.
            MissedSlots::RunLatestOnly => vec![-3, 0, 1, 2, 3],
            MissedSlots::Skip => vec![-3, 1, 2, 3],
        };
        let mut sorted = ran.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, expected, "{policy:?}: ran {ran:?}");
        let missed = events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| matches!(e, SlotEvent::Missed { .. }))
            .count();
        assert_eq!(missed, 6 - (expected.len() - 3), "{policy:?}: missed count");
        // The orphan's takeover carries the next token.
        let orphan_row = t
            .effects
            .iter()
            .find(|(s, _, _)| *s == orphan)
            .expect("orphan completed");
        assert_eq!(orphan_row.1, FencingToken::new(2));
    }
}

/// A job that fails is retried after `retry_failed_after`, by some instance, until it
/// succeeds; the slot is then done once.
#[tokio::test(start_paused = true)]
async fn a_failed_slot_is_retried_then_done_once() {
    let attempts: Arc<Mutex<BTreeMap<Slot, u32>>> = Arc::default();
    let table: Shared = Arc::default();
    let events: Arc<Mutex<Vec<SlotEvent>>> = Arc::default();
    run_instances(
        &[("a", 0), ("b", 200)],
        Some(&events),
        &every_second("retry").retry_failed_after(Duration::from_millis(700)),
        Duration::from_secs(8),
        |who| {
            let (table, attempts) = (table.clone(), attempts.clone());
            move |ctx: JobContext| {
                let (table, attempts) = (table.clone(), attempts.clone());
                async move {
                    let slot = ctx.slot().expect("slot");
                    let n = {
                        let mut a = attempts.lock().unwrap();
                        let n = a.entry(slot).or_default();
                        *n += 1;
                        *n
                    };
                    // Every slot fails twice before it succeeds.
                    if n <= 2 {
                        return Err(format!("attempt {n} failed"));
                    }
                    Ok(table.lock().unwrap().outcome(slot, ctx.token(), who))
                }
            }
        },
    )
    .await;
    let t = table.lock().unwrap();
    let attempts = attempts.lock().unwrap();
    for k in 1..=5_u64 {
        let slot = Slot::from_unix_ms(T0 + k * SEC);
        assert_eq!(
            t.effects.iter().filter(|(s, _, _)| *s == slot).count(),
            1,
            "slot {slot}"
        );
        assert_eq!(attempts.get(&slot), Some(&3), "slot {slot}: attempts");
    }
    let ev = events.lock().unwrap();
    assert!(ev.iter().any(|e| matches!(e, SlotEvent::Failed { .. })));
}

/// A cron schedule with seconds runs on its slots only, each once, on two instances.
#[tokio::test(start_paused = true)]
async fn cron_schedule_fires_on_its_slots() {
    let spec = JobSpec::new(
        "cron",
        Schedule::cron("*/3 * * * * *").expect("cron"),
        Duration::from_secs(1),
    )
    .catch_up(Duration::from_millis(500))
    .keep_done_for(Duration::from_secs(600));
    let table = run_each(&[("a", 0), ("b", -400)], &spec, Duration::from_millis(13_500)).await;
    let t = table.lock().unwrap();
    let keys: Vec<String> = t.effects.iter().map(|(s, _, _)| s.key()).collect();
    // T0 is 08:00:00 UTC: a multiple of three seconds.
    assert_eq!(
        keys,
        vec![
            "2027-01-15T08:00:00.000Z",
            "2027-01-15T08:00:03.000Z",
            "2027-01-15T08:00:06.000Z",
            "2027-01-15T08:00:09.000Z",
            "2027-01-15T08:00:12.000Z"
        ]
    );
}

/// ShedLock-compatible naming (one lease per job) relies on lock_at_least_for
/// exceeding the clock skew: with 800 ms of skew and 200 ms of lock_at_least_for a
/// fire time runs twice; per-slot naming runs it once under the same skew.
#[tokio::test(start_paused = true)]
async fn per_slot_naming_survives_skew_that_breaks_job_name_locks() {
    for (naming, expect_duplicates) in [(LockNaming::JobName, true), (LockNaming::PerSlot, false)] {
        let spec = every_second("skew")
            .lock_at_least_for(Duration::from_millis(200))
            .naming(naming);
        let table = run_each(&[("a", 0), ("b", -800)], &spec, Duration::from_secs(10)).await;
        let t = table.lock().unwrap();
        let dup = t.bodies.values().filter(|n| **n > 1).count();
        if expect_duplicates {
            assert!(dup >= 5, "{naming:?}: expected fire times run twice, got {dup}");
        } else {
            assert_eq!(dup, 0, "{naming:?}: {:?}", t.bodies);
        }
    }
}

/// With a job-name lock and lock_at_least_for above the skew, each fire time runs once.
#[tokio::test(start_paused = true)]
async fn job_name_lock_with_enough_lock_at_least_for_runs_each_fire_time_once() {
    let spec = every_second("shedlock-style")
        .lock_at_least_for(Duration::from_millis(800))
        .naming(LockNaming::JobName);
    let table = run_each(&[("a", 0), ("b", -300), ("c", 250)], &spec, Duration::from_secs(10)).await;
    let t = table.lock().unwrap();
    assert!(t.bodies.len() >= 9, "{:?}", t.bodies);
    assert!(t.bodies.values().all(|n| *n == 1), "{:?}", t.bodies);
}

/// Shutdown cancels a running job's context; the scheduler waits for it to return.
#[tokio::test(start_paused = true)]
async fn shutdown_cancels_the_running_job() {
    let store = MemoryStore::new();
    let s = scheduler(LeaseClient::new(store), T0 - 100, None);
    let shutdown = CancellationToken::new();
    let saw_cancel: Arc<Mutex<bool>> = Arc::default();
    let task = tokio::spawn({
        let (shutdown, saw) = (shutdown.clone(), saw_cancel.clone());
        async move {
            s.run(
                every_second("shutdown"),
                move |ctx: JobContext| {
                    let saw = saw.clone();
                    async move {
                        ctx.cancelled().await;
                        *saw.lock().unwrap() = true;
                        Ok::<(), String>(())
                    }
                },
                shutdown,
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .expect("scheduler stopped")
        .expect("task")
        .expect("run");
    assert!(*saw_cancel.lock().unwrap());
}

/// What one stuck-run scenario observed.
struct Stuck {
    table: Shared,
    events: Arc<Mutex<Vec<SlotEvent>>>,
    /// When the stuck run's context was cancelled, after its start.
    cancelled_after: Option<Duration>,
}

/// Instance "a" takes the 60 s job's first slot and gets stuck in it (it ignores its
/// cancellation) for `stuck_for` (under a minute: one slot is in play); instance "b", on its own client with a clock 300 ms
/// behind, runs the same job normally. When "a" wakes, it tries to commit too.
async fn stuck_run(at_most: leasehold_jobs::LockAtMost, stuck_for: Duration) -> Stuck {
    let store = MemoryStore::new();
    let spec = JobSpec::new(
        "stuck",
        Schedule::every(Duration::from_secs(60)).expect("schedule"),
        Duration::from_secs(5),
    )
    .at_most(at_most)
    .catch_up(Duration::from_secs(1));
    let table: Shared = Arc::default();
    let events = Arc::new(Mutex::new(Vec::new()));
    let cancelled_after = Arc::new(Mutex::new(None));
    let shutdown = CancellationToken::new();
    let a = scheduler(LeaseClient::new(store.clone()), T0 - 100, Some(events.clone()));
    let b = scheduler(LeaseClient::new(store.clone()), T0 - 400, Some(events.clone()));
    let stuck_job = {
        let (table, cancelled_after) = (table.clone(), cancelled_after.clone());
        move |ctx: JobContext| -> Ready {
            let (table, cancelled_after) = (table.clone(), cancelled_after.clone());
            Box::pin(async move {
                let started = Instant::now();
                let watch = {
                    let ctx = ctx.clone();
                    tokio::spawn(async move {
                        ctx.cancelled().await;
                        *cancelled_after.lock().unwrap() = Some(started.elapsed());
                    })
                };
                // Stuck: deaf to the cancellation until it wakes by itself.
                tokio::time::sleep(stuck_for).await;
                let committed = table
                    .lock()
                    .unwrap()
                    .commit(ctx.slot().expect("slot"), ctx.token(), "a");
                watch.abort();
                if committed {
                    Ok(SlotOutcome::Committed)
                } else {
                    Err("refused by the fence".to_owned())
                }
            })
        }
    };
    let ta = tokio::spawn({
        let (spec, shutdown) = (spec.clone(), shutdown.clone());
        async move { a.run(spec, stuck_job, shutdown).await }
    });
    let tb = tokio::spawn({
        let (spec, shutdown, job) = (spec.clone(), shutdown.clone(), job(table.clone(), "b"));
        async move { b.run(spec, job, shutdown).await }
    });
    tokio::time::sleep(stuck_for + Duration::from_secs(5)).await;
    shutdown.cancel();
    ta.await.expect("task").expect("a");
    tb.await.expect("task").expect("b");
    let cancelled_after = *cancelled_after.lock().unwrap();
    Stuck {
        table,
        events,
        cancelled_after,
    }
}

/// ShedLock's meaning, opted in: a run stuck past `lock_at_most_for` is told at the
/// cap, loses its slot lease, and another instance completes the slot with the next
/// token; the stuck run's late commit is refused by the fence.
#[tokio::test(start_paused = true)]
async fn a_stuck_run_loses_its_slot_at_the_cap_and_another_instance_completes_it() {
    let s = stuck_run(leasehold_jobs::LockAtMost::Absolute, Duration::from_secs(30)).await;
    let slot = Slot::from_unix_ms(T0);
    let cancelled = s.cancelled_after.expect("the stuck run was never told to stop");
    // Held at most 5 s: its hold ends at the 5 s cap, or the 5% margin before it.
    assert!(
        cancelled >= Duration::from_millis(4_750) && cancelled <= Duration::from_secs(5),
        "the stuck run was told after {cancelled:?}"
    );
    let t = s.table.lock().unwrap();
    assert_eq!(
        t.effects,
        vec![(slot, FencingToken::new(2), "b")],
        "one effect, by the instance that took over"
    );
    assert_eq!(t.bodies.get(&slot), Some(&1), "b ran the slot once");
    let events = s.events.lock().unwrap();
    assert!(events.contains(&SlotEvent::Lost {
        slot,
        cause: leasehold_core::LossCause::MaxHoldReached
    }));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, SlotEvent::Ran { slot: s, token, .. } if *s == slot && token.get() == 2))
    );
}

/// The default, for contrast: `lock_at_most_for` is a renewed TTL, so a live run keeps
/// its slot however long it takes, and nobody else runs the slot meanwhile.
#[tokio::test(start_paused = true)]
async fn by_default_a_live_run_keeps_its_slot_however_long_it_takes() {
    let s = stuck_run(leasehold_jobs::LockAtMost::default(), Duration::from_secs(30)).await;
    let slot = Slot::from_unix_ms(T0);
    assert_eq!(s.cancelled_after, None, "a live run's lease was cut off by default");
    let t = s.table.lock().unwrap();
    assert_eq!(t.effects, vec![(slot, FencingToken::new(1), "a")]);
    assert_eq!(t.bodies.get(&slot), None, "b ran the slot while a's run was alive");
}
