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

/// A job deployed for the first time runs from its first start on, none of the
/// catch-up window's slots before it (they come from before the job existed, less the
/// clock skew allowed), and says so. Stopped soon after and started again 10 s later, it catches up the slots since
/// its first start, and only those.
#[tokio::test(start_paused = true)]
async fn a_new_job_runs_from_its_first_start_and_catches_up_only_since() {
    let mem = MemoryStore::new();
    let spec = every_second("new")
        .catch_up(Duration::from_secs(30))
        .clock_skew(Duration::from_millis(1_500));
    let table: Shared = Arc::default();
    let run = Duration::from_millis(2_500);
    let first = run_one(mem.clone(), spec.clone(), job(table.clone(), "first"), T0 + 300, run).await;
    let new: Vec<&SlotEvent> = first.iter().filter(|e| matches!(e, SlotEvent::NewJob { .. })).collect();
    assert_eq!(
        new,
        [&SlotEvent::NewJob {
            since: Slot::from_unix_ms(T0)
        }]
    );
    let run = Duration::from_millis(1_500);
    let second = run_one(mem, spec, job(table.clone(), "second"), T0 + 10_300, run).await;
    assert!(
        !second.iter().any(|e| matches!(e, SlotEvent::NewJob { .. })),
        "{second:?}"
    );
    let t = table.lock().unwrap();
    let ran: Vec<(i64, &str)> = t
        .effects
        .iter()
        .map(|(s, _, who)| {
            (
                (i64::try_from(s.unix_ms()).expect("ms") - i64::try_from(T0).expect("ms")) / 1_000,
                *who,
            )
        })
        .collect();
    // From the start's second, less the clock skew allowed (1.5 s): T0 - 1 s on.
    let expected: Vec<(i64, &str)> = (-1..=11)
        .map(|s| (s, if s <= 2 { "first" } else { "second" }))
        .collect();
    assert_eq!(ran, expected);
}

/// A start record written by an instance whose clock ran an hour fast cuts no slot
/// after another instance's own start: that one runs its slots from its start on.
#[tokio::test(start_paused = true)]
async fn a_start_record_from_a_fast_clock_cuts_nothing_after_an_instances_start() {
    let mem = MemoryStore::new();
    let spec = every_second("fast").clock_skew(Duration::from_millis(200));
    let table: Shared = Arc::default();
    let run = Duration::from_millis(1_500);
    let fast = run_one(
        mem.clone(),
        spec.clone(),
        job(table.clone(), "fast"),
        T0 + 3_600_000,
        run,
    )
    .await;
    assert!(fast.iter().any(|e| matches!(e, SlotEvent::NewJob { .. })), "{fast:?}");
    table.lock().unwrap().effects.clear();
    let events = run_one(
        mem,
        spec,
        job(table.clone(), "true"),
        T0 + 300,
        Duration::from_millis(3_000),
    )
    .await;
    assert!(
        !events.iter().any(|e| matches!(e, SlotEvent::NewJob { .. })),
        "{events:?}"
    );
    let t = table.lock().unwrap();
    let ran: Vec<u64> = t.effects.iter().map(|(s, _, _)| (s.unix_ms() - T0) / SEC).collect();
    assert_eq!(ran, [1, 2, 3], "the slots after the true instance's start");
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

/// Calls of an always-failing job, by slot.
type Calls = Arc<Mutex<BTreeMap<Slot, u32>>>;

/// A job that counts its calls by slot and always fails (its downstream is down).
fn always_failing(calls: Calls) -> impl FnMut(JobContext) -> Ready + Send {
    move |ctx: JobContext| {
        let calls = calls.clone();
        Box::pin(async move {
            *calls.lock().unwrap().entry(ctx.slot().expect("slot")).or_default() += 1;
            Err("downstream is down".to_owned())
        })
    }
}

/// Runs `spec` with `job` on one instance (wall clock starting at `wall_ms`) over
/// `store` for `run_for` of paused time; returns its events.
async fn run_one<F, Fut>(
    store: impl leasehold_core::store::Linearizable,
    spec: JobSpec,
    job: F,
    wall_ms: u64,
    run_for: Duration,
) -> Vec<SlotEvent>
where
    F: FnMut(JobContext) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<SlotOutcome, String>> + Send,
{
    let events: Arc<Mutex<Vec<SlotEvent>>> = Arc::default();
    let s = scheduler(LeaseClient::new(store), wall_ms, Some(events.clone()));
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { s.run(spec, job, shutdown).await }
    });
    tokio::time::sleep(run_for).await;
    shutdown.cancel();
    task.await.expect("the scheduler's task").expect("scheduler");
    events.lock().unwrap().clone()
}

/// Runs `spec` with [`always_failing`] on one instance over `store` for `run_for`:
/// the job's calls by slot, and the events.
async fn run_failing(store: MemoryStore, spec: JobSpec, run_for: Duration) -> (BTreeMap<Slot, u32>, Vec<SlotEvent>) {
    let calls: Calls = Arc::default();
    let events = run_one(store, spec, always_failing(calls.clone()), T0, run_for).await;
    let calls = calls.lock().unwrap().clone();
    (calls, events)
}

/// A job that always fails, on a 1 s schedule for 60 s, retried every second with a
/// catch-up window of 30 s: each slot runs at most `max_tries` (3) times and is then
/// given up, so the calls grow with the slots, not with their square.
#[tokio::test(start_paused = true)]
async fn a_slot_whose_job_keeps_failing_is_given_up_after_max_tries() {
    let spec = every_second("always-fails")
        .catch_up(Duration::from_secs(30))
        .retry_failed_after(Duration::from_secs(1));
    assert_eq!(spec.max_tries, 3, "the default");
    let (calls, events) = run_failing(MemoryStore::new(), spec, Duration::from_secs(60)).await;
    let total: u32 = calls.values().sum();
    // The 30 slots of the catch-up window and the 60 of the run.
    assert!(calls.len() >= 89, "{} slots run", calls.len());
    assert!(
        total <= 3 * u32::try_from(calls.len()).expect("a count"),
        "{total} calls for {} slots: {calls:?}",
        calls.len()
    );
    let given_up: BTreeMap<Slot, u32> = events
        .iter()
        .filter_map(|e| match e {
            SlotEvent::GivenUp { slot, failed_runs } => Some((*slot, *failed_runs)),
            _ => None,
        })
        .collect();
    // Every slot with room for its three tries (about 2.2 s) in the window and the run
    // was given up after three runs.
    let tried_in_full = |s: &Slot| s.unix_ms() > T0 - 27 * SEC && s.unix_ms() + 4 * SEC < T0 + 60 * SEC;
    for (slot, n) in calls.iter().filter(|(s, _)| tried_in_full(s)) {
        assert_eq!(*n, 3, "slot {slot}: calls");
        assert_eq!(given_up.get(slot), Some(&3), "slot {slot}: given up");
    }
}

/// With more tries allowed than the catch-up window holds, a failing slot is given up
/// when its next try would come after it leaves the window.
#[tokio::test(start_paused = true)]
async fn a_failing_slot_is_given_up_when_it_leaves_the_catch_up_window() {
    let spec = every_second("fails-in-window")
        .catch_up(Duration::from_secs(5))
        .retry_failed_after(Duration::from_secs(1))
        .max_tries(1_000);
    let store = MemoryStore::new();
    let (calls, events) = run_failing(store.clone(), spec.clone(), Duration::from_secs(30)).await;
    assert!(calls.len() >= 34, "{} slots run", calls.len());
    // Tries at about 0, 1.05, 2.1, 3.15 and 4.2 s after the slot: five at most.
    assert!(calls.values().all(|n| *n <= 5), "{calls:?}");
    for slot in calls.keys().filter(|s| s.unix_ms() + 7 * SEC < T0 + 30 * SEC) {
        assert!(
            events.iter().any(
                |e| matches!(e, SlotEvent::GivenUp { slot: s, failed_runs } if s == slot && *failed_runs == calls[slot])
            ),
            "slot {slot} not given up: {events:?}"
        );
        // Given up by its last failed run, which kept its failed record (for
        // `keep_done_for`, 600 s): no instance runs it again. (A slot given up only
        // later, when it was looked at again out of the window, had a record that
        // lasted one retry interval, and another instance could run it again.)
        use leasehold_core::store::CasStore as _;
        let stored = store
            .read(&spec.lease_name(*slot).expect("name"))
            .await
            .expect("read")
            .unwrap_or_else(|| panic!("slot {slot}: its failed record is gone"));
        let holder = stored.record.holder.expect("a holder");
        assert_eq!(
            leasehold_jobs::Marker::of(&holder),
            Some(leasehold_jobs::Marker::Failed),
            "slot {slot}"
        );
    }
}

/// A failing slot whose next try comes later than `retry_failed_after` (here the rest
/// of `lock_at_least_for`, 1.2 s, plus jitter) is given up by the run whose next try
/// would fall outside the window, and that run keeps its failed record. (The decision
/// used to count `retry_failed_after` alone: about half of these slots were given up
/// later, out of the window, with a record that lasted one retry, which another
/// instance could then run again.)
#[tokio::test(start_paused = true)]
async fn a_slot_given_up_at_the_edge_of_the_window_keeps_its_failed_record() {
    let spec = every_second("fails-at-the-edge")
        .catch_up(Duration::from_secs(5))
        .retry_failed_after(Duration::from_secs(1))
        .lock_at_least_for(Duration::from_millis(1_200))
        .max_tries(1_000);
    let store = MemoryStore::new();
    let (calls, events) = run_failing(store.clone(), spec.clone(), Duration::from_secs(30)).await;
    let given_up: Vec<Slot> = events
        .iter()
        .filter_map(|e| match e {
            SlotEvent::GivenUp { slot, .. } => Some(*slot),
            _ => None,
        })
        .collect();
    assert!(
        given_up.len() >= 20,
        "{} slots given up of {}",
        given_up.len(),
        calls.len()
    );
    use leasehold_core::store::CasStore as _;
    for slot in given_up {
        let stored = store.read(&spec.lease_name(slot).expect("name")).await.expect("read");
        let left = stored.as_ref().and_then(|s| s.remaining);
        let marker = stored
            .and_then(|s| s.record.holder)
            .and_then(|h| leasehold_jobs::Marker::of(&h));
        assert_eq!(
            marker,
            Some(leasehold_jobs::Marker::Failed),
            "slot {slot}: its failed record"
        );
        // Kept for `keep_done_for` (600 s), not for one retry interval.
        assert!(
            left.is_some_and(|l| l > Duration::from_secs(60)),
            "slot {slot}: kept {left:?}"
        );
    }
}

/// The records of given-up slots go as done records do: a job that always fails keeps
/// about `keep_done_for / interval` records, not one per slot forever.
#[tokio::test(start_paused = true)]
async fn failed_slot_records_are_purged_like_done_ones() {
    let store = MemoryStore::new();
    let spec = every_second("failing-purged")
        .catch_up(Duration::from_secs(2))
        .retry_failed_after(Duration::from_millis(500))
        .keep_done_for(Duration::from_secs(10))
        .clock_skew(Duration::from_secs(1));
    run_one(
        store.clone(),
        spec,
        always_failing(Calls::default()),
        T0,
        Duration::from_secs(60),
    )
    .await;
    use leasehold_core::store::CasStore as _;
    let records = store
        .list(&leasehold_core::NamePrefix::new("failing-purged/").expect("prefix"))
        .await
        .expect("list")
        .len();
    // A given-up slot's record lasts 10 s, and is purged within a second or so after.
    assert!(records <= 15, "{records} records after 60 slots");
}

/// A job that panics fails its slot (with the panic's message) and never ends the
/// scheduler: later slots still run.
#[tokio::test(start_paused = true)]
async fn a_panicking_job_fails_its_slot_and_later_slots_still_run() {
    let table: Shared = Arc::default();
    let bad = Slot::from_unix_ms(T0 + 2 * SEC);
    let job = {
        let table = table.clone();
        move |ctx: JobContext| -> Ready {
            let table = table.clone();
            Box::pin(async move {
                let slot = ctx.slot().expect("slot");
                if slot == bad {
                    panic!("the job broke on slot {slot}");
                }
                Ok(table.lock().unwrap().outcome(slot, ctx.token(), "a"))
            })
        }
    };
    let events = run_one(
        MemoryStore::new(),
        every_second("panics"),
        job,
        T0,
        Duration::from_secs(10),
    )
    .await;
    let failed: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            SlotEvent::Failed { slot, error, .. } if *slot == bad => Some(error),
            _ => None,
        })
        .collect();
    assert!(!failed.is_empty(), "no Failed event for the slot: {events:?}");
    assert!(
        failed
            .iter()
            .all(|e| e.starts_with("the job panicked: ") && e.contains("the job broke on slot")),
        "{failed:?}"
    );
    let t = table.lock().unwrap();
    for k in 3..=9 {
        let slot = Slot::from_unix_ms(T0 + k * SEC);
        assert!(t.rows.get(&slot).is_some_and(|r| r.1), "slot {slot} did not run");
    }
    assert!(!t.rows.contains_key(&bad));
}

/// A scheduler's task.
type Running = tokio::task::JoinHandle<leasehold_core::Result<()>>;
/// The events a scheduler reported.
type Events = Arc<Mutex<Vec<SlotEvent>>>;

/// Starts one instance (wall clock T0) running `every_second(name)` with a job that
/// records its effects in `table`, over `store`: its task, the token that shuts it
/// down, and its events.
fn start(
    store: impl leasehold_core::store::Linearizable,
    name: &str,
    table: &Shared,
) -> (Running, CancellationToken, Events) {
    let events: Arc<Mutex<Vec<SlotEvent>>> = Arc::default();
    let s = scheduler(LeaseClient::new(store), T0, Some(events.clone()));
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let (shutdown, job, spec) = (shutdown.clone(), job(table.clone(), "a"), every_second(name));
        async move { s.run(spec, job, shutdown).await }
    });
    (task, shutdown, events)
}

/// A store that fails every call is reported once per outage (not per retry), and
/// again after it answered and failed anew.
#[tokio::test(start_paused = true)]
async fn a_failing_store_is_reported_once_per_outage() {
    let store = FaultStore::new(MemoryStore::new(), 11);
    store.set_plan(FaultPlan::down());
    let table: Shared = Arc::default();
    let (task, shutdown, events) = start(store.clone(), "outage", &table);
    let reports = || {
        events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| matches!(e, SlotEvent::StoreUnavailable { .. }))
            .count()
    };
    tokio::time::sleep(Duration::from_secs(10)).await;
    let failed_calls = store.injected();
    assert!(failed_calls >= 20, "{failed_calls} calls failed");
    assert_eq!(reports(), 1, "{failed_calls} failed calls reported {} times", reports());
    assert!(
        events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, SlotEvent::StoreUnavailable { error } if error.contains("injected")))
    );

    // The store answers again: slots run, and nothing more is reported.
    store.set_plan(FaultPlan::none());
    let ran_before = table.lock().unwrap().effects.len();
    let deadline = Instant::now() + Duration::from_secs(5);
    while table.lock().unwrap().effects.len() == ran_before {
        assert!(Instant::now() < deadline, "no slot ran after the store came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(reports(), 1);

    // A new outage is reported again, once.
    store.set_plan(FaultPlan::down());
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(reports(), 2, "{:?}", events.lock().unwrap());
    shutdown.cancel();
    task.await.expect("task").expect("scheduler");
}

/// A store with a clock to read (`store_now_ms`, T0 at the start) that fails every
/// read of it while `down` is set; everything else goes to a `MemoryStore`.
#[derive(Debug, Clone)]
struct ClockDown {
    inner: MemoryStore,
    clock: TokioWallClock,
    down: Arc<std::sync::atomic::AtomicBool>,
    reads: Arc<std::sync::atomic::AtomicU32>,
}

#[async_trait::async_trait]
impl leasehold_core::store::CasStore for ClockDown {
    fn capabilities(&self) -> leasehold_core::store::Capabilities {
        self.inner.capabilities()
    }
    async fn read(
        &self,
        name: &leasehold_core::LeaseName,
    ) -> leasehold_core::Result<Option<leasehold_core::store::Stored>> {
        self.inner.read(name).await
    }
    async fn write(
        &self,
        name: &leasehold_core::LeaseName,
        expect: &leasehold_core::store::Precondition,
        record: &leasehold_core::store::LeaseRecord,
    ) -> leasehold_core::Result<leasehold_core::store::CasOutcome> {
        self.inner.write(name, expect, record).await
    }
    async fn delete(
        &self,
        name: &leasehold_core::LeaseName,
        version: &leasehold_core::store::Version,
    ) -> leasehold_core::Result<leasehold_core::store::DeleteOutcome> {
        self.inner.delete(name, version).await
    }
    async fn store_now_ms(&self) -> leasehold_core::Result<Option<u64>> {
        use leasehold_core::clock::WallClock as _;
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(leasehold_core::Error::Unavailable {
                message: "the database is unreachable".into(),
                source: None,
            });
        }
        Ok(Some(self.clock.now_ms()))
    }
}

impl leasehold_core::store::Linearizable for ClockDown {}

/// At start-up the store's clock cannot be read (the database is unreachable): the
/// scheduler keeps trying, and says so once, not at every try.
#[tokio::test(start_paused = true)]
async fn an_unreachable_store_at_start_up_is_reported_once() {
    let store = ClockDown {
        inner: MemoryStore::new(),
        clock: TokioWallClock::starting_at(T0),
        down: Arc::new(true.into()),
        reads: Arc::default(),
    };
    let table: Shared = Arc::default();
    let (task, shutdown, events) = start(store.clone(), "start-up", &table);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let reads = store.reads.load(std::sync::atomic::Ordering::SeqCst);
    assert!(reads >= 10, "{reads} reads of the store's clock");
    assert_eq!(
        *events.lock().unwrap(),
        vec![SlotEvent::StoreUnavailable {
            error: "store unavailable: the database is unreachable".to_owned()
        }]
    );
    store.down.store(false, std::sync::atomic::Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(5);
    while table.lock().unwrap().effects.is_empty() {
        assert!(Instant::now() < deadline, "no slot ran once the store answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.cancel();
    task.await.expect("task").expect("scheduler");
}

/// A slot must get at least one try.
#[test]
fn max_tries_of_zero_is_refused() {
    let spec = every_second("no-tries").max_tries(0);
    assert!(
        matches!(spec.validate(), Err(leasehold_core::Error::InvalidInput { .. })),
        "{:?}",
        spec.validate()
    );
    assert!(every_second("one-try").max_tries(1).validate().is_ok());
}
