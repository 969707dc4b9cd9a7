//! The scheduler: runs a job at each slot of its schedule, on one instance, once.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use leasehold_core::{
    AcquireOutcome, FencingToken, HolderId, LeaseClient, LossCause, Result,
    clock::{SystemWallClock, WallClock},
};
use rand::Rng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::due::DueClock;
use crate::executor::{execute, panicked};
use crate::first_start::{self, Began, StartRecord};
use crate::marker::{self, Finished, Marker};
use crate::sweep::{self, Sweeper};
use crate::{JobContext, JobSpec, LockNaming, MissedSlots, Slot, SlotOutcome};

/// The most slots one pass enumerates (a long catch-up window over a fast schedule is
/// worked through over several passes).
const MAX_SLOTS_PER_PASS: usize = 10_000;
/// The longest sleep between passes, so a jump of the wall clock is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// How many store errors in a row make an outage that is reported
/// ([`SlotEvent::StoreUnavailable`]).
const STORE_ERRORS_REPORTED: u32 = 3;

/// What happened to a slot, or to the scheduler's store, reported to
/// [`Scheduler::on_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlotEvent {
    /// The job ran here and committed the slot's effect (it returned
    /// [`SlotOutcome::Committed`], or `Ok(())`). Reported by the committing instance
    /// only, even if its lease was lost after the commit (the protected data says the
    /// slot is done; whoever takes the slot over finds it so).
    Ran {
        /// The slot.
        slot: Slot,
        /// The run's token.
        token: FencingToken,
        /// How late the run started after the fire time (wall clock).
        late: Duration,
    },
    /// The job ran here and returned an error or panicked; the slot will be tried
    /// again after [`JobSpec::retry_failed_after`], unless this run gives it up
    /// ([`SlotEvent::GivenUp`] follows).
    Failed {
        /// The slot.
        slot: Slot,
        /// The run's token.
        token: FencingToken,
        /// The error, as text (for a panic: `the job panicked: ` and its message).
        error: String,
    },
    /// This instance stops trying a slot whose job failed: its runs of the slot failed
    /// [`JobSpec::max_tries`] times, or the slot's next try would come after it leaves
    /// the catch-up window ([`JobSpec::catch_up`]). A run that gives the slot up keeps
    /// its failed record for [`JobSpec::keep_done_for`], so no instance runs the slot
    /// again. An instance that finds another's failed record reports it too once the
    /// slot leaves its window (with `failed_runs` 0).
    GivenUp {
        /// The slot.
        slot: Slot,
        /// How many of this instance's runs of the slot failed.
        failed_runs: u32,
    },
    /// The lease was lost while the job ran and the job did not report the slot done
    /// (it returned an error), or before a failed run was recorded; whoever takes the
    /// slot over completes it.
    Lost {
        /// The slot.
        slot: Slot,
        /// Why.
        cause: LossCause,
    },
    /// Another instance completed the slot: this instance found the slot's done
    /// record, or its run found the slot done in the protected data
    /// ([`SlotOutcome::AlreadyDone`]) and committed nothing.
    DoneElsewhere {
        /// The slot.
        slot: Slot,
    },
    /// Another instance holds the slot (running it, or keeping it after a failure);
    /// this instance looks again when that lease can have run out.
    HeldElsewhere {
        /// The slot.
        slot: Slot,
        /// The holder (`None` when it is another scheduler on the same client).
        holder: Option<HolderId>,
    },
    /// Nobody started the slot within the grace period, and the missed-slot policy
    /// skips it.
    Missed {
        /// The slot.
        slot: Slot,
    },
    /// The slot fell out of the catch-up window and the store holds no record of it:
    /// no instance started it. Never reported for a slot another instance ran (one
    /// read of the slot's record says so first).
    Abandoned {
        /// The slot.
        slot: Slot,
    },
    /// The job has neither a start record that has not run out nor any slot record:
    /// this instance takes it as new, writes down when it began, and runs no slot from
    /// before that, whatever the missed-slot policy. Reported at start-up by each
    /// instance that finds it so: for a job deployed for the first time, and, on the
    /// stores whose records go by themselves, for one no instance of which ran for
    /// [`JobSpec::keep_done_for`] (see the crate docs, "A new job"). Per-slot naming
    /// only ([`crate::LockNaming::PerSlot`]).
    NewJob {
        /// When the job began: this instance's start, rounded down to the second, on
        /// the clock that says which slots are due.
        since: Slot,
    },
    /// The scheduler's calls to the store failed several times in a row (3): the store
    /// is unreachable or failing, and the scheduler keeps retrying. Reported once per
    /// outage: again only after the store answered a call in between.
    StoreUnavailable {
        /// The last error, as text.
        error: String,
    },
}

type EventSink = Arc<dyn Fn(&SlotEvent) + Send + Sync>;

/// Runs scheduled jobs: each slot of the schedule on one instance, once.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{LeaseClient, MemoryStore};
/// use leasehold_jobs::{JobSpec, Schedule, Scheduler, TokioWallClock};
/// use tokio_util::sync::CancellationToken;
///
/// let spec = JobSpec::new("compact", Schedule::every(Duration::from_secs(10))?, Duration::from_secs(5));
/// let scheduler = Scheduler::new(LeaseClient::new(MemoryStore::new()))
///     .with_wall_clock(TokioWallClock::starting_at(1_800_000_000_000));
/// let shutdown = CancellationToken::new();
/// let stop = shutdown.clone();
/// scheduler
///     .run(spec, move |ctx| {
///         let stop = stop.clone();
///         async move {
///             // ctx.slot() is the fire time; ctx.token() fences the job's writes.
///             println!("compacting for {:?} with token {}", ctx.slot(), ctx.token());
///             stop.cancel();
///             Ok::<(), std::io::Error>(())
///         }
///     }, shutdown)
///     .await?;
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct Scheduler {
    client: LeaseClient,
    wall: Arc<dyn WallClock>,
    events: Option<EventSink>,
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("client", &self.client)
            .field("wall", &self.wall)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    recheck_at: Instant,
    /// Somebody started this slot (a record exists): never missed, never abandoned.
    started: bool,
    /// Store errors in a row on this slot: they lengthen its back-off.
    store_errors: u32,
    /// This instance's runs of the slot that failed.
    failed_runs: u32,
    /// The job failed on this slot, here or on another instance (whose failed record
    /// this instance found): the slot is given up once it leaves the catch-up window.
    failed: bool,
}

impl Pending {
    fn new() -> Self {
        Self {
            recheck_at: Instant::now(),
            started: false,
            store_errors: 0,
            failed_runs: 0,
            failed: false,
        }
    }
}

/// What a per-slot scheduler keeps between passes.
#[derive(Debug, Default)]
struct Books {
    /// The slots not done yet.
    pending: BTreeMap<Slot, Pending>,
    /// The store's answers of late.
    store: StoreHealth,
    /// The job's start record, kept while this scheduler runs (none if the store
    /// could not say at start-up whether the job is new).
    start: Option<StartRecord>,
}

/// Whether the store answers: store errors in a row across all of a scheduler's calls,
/// so that an outage is reported once.
#[derive(Debug, Default)]
struct StoreHealth {
    errors_in_row: u32,
    reported: bool,
}

impl StoreHealth {
    /// A call failed: true if this makes an outage to report now (once per outage).
    fn failed(&mut self) -> bool {
        self.errors_in_row = self.errors_in_row.saturating_add(1);
        let report = self.errors_in_row >= STORE_ERRORS_REPORTED && !self.reported;
        self.reported |= report;
        report
    }

    /// The store answered a call: true if that ends a reported outage.
    fn answered(&mut self) -> bool {
        let ended = self.reported;
        *self = Self::default();
        ended
    }
}

impl Scheduler {
    /// A scheduler taking its leases through `client`: slots are due on the store's
    /// clock where it has one, else on the system wall clock.
    pub fn new(client: LeaseClient) -> Self {
        Self {
            client,
            wall: Arc::new(SystemWallClock),
            events: None,
        }
    }

    /// Reads `wall` instead of the system clock (tests, simulations of skew) where slots
    /// are due on the wall clock: on stores without a clock to read (etcd, DynamoDB,
    /// S3). Where the store has one, slots are due on the store's clock and `wall` is
    /// not read (see the crate docs).
    #[must_use]
    pub fn with_wall_clock(mut self, wall: impl WallClock) -> Self {
        self.wall = Arc::new(wall);
        self
    }

    /// Calls `f` with every [`SlotEvent`] (for metrics and logs).
    #[must_use]
    pub fn on_event(mut self, f: impl Fn(&SlotEvent) + Send + Sync + 'static) -> Self {
        self.events = Some(Arc::new(f));
        self
    }

    /// The client.
    pub fn client(&self) -> &LeaseClient {
        &self.client
    }

    fn emit(&self, event: SlotEvent) {
        tracing::debug!(?event, "slot event");
        if let Some(f) = &self.events {
            f(&event);
        }
    }

    /// A store call failed with a retryable or indeterminate error `e`: the outage is
    /// reported once it has lasted [`STORE_ERRORS_REPORTED`] calls.
    fn store_failed(&self, spec: &JobSpec, health: &mut StoreHealth, e: &leasehold_core::Error) {
        if health.failed() {
            tracing::warn!(job = %spec.name, error = %e, "the store is unavailable ({STORE_ERRORS_REPORTED} calls in a row failed); retrying");
            self.emit(SlotEvent::StoreUnavailable { error: e.to_string() });
        }
    }

    /// The store answered a call.
    fn store_answered(spec: &JobSpec, health: &mut StoreHealth) {
        if health.answered() {
            tracing::info!(job = %spec.name, "the store answers again");
        }
    }

    /// Runs `job` at every slot of `spec`'s schedule until `shutdown` is cancelled.
    ///
    /// With [`LockNaming::PerSlot`] (the default) each slot runs exactly once across
    /// all instances, as long as the job records its effect together with its slot
    /// (see the crate docs). A job returning `Err` or panicking has failed its slot;
    /// the slot is tried again after [`JobSpec::retry_failed_after`], at most
    /// [`JobSpec::max_tries`] times on this instance and while it is in the catch-up
    /// window, then given up ([`SlotEvent::GivenUp`]). The job's context is cancelled
    /// when its lease is lost or at shutdown; the scheduler still waits for the job to
    /// return.
    ///
    /// # Errors
    /// An invalid spec, or a store error retrying cannot fix (misconfiguration, a
    /// corrupt record). Transient store errors are retried (and reported,
    /// [`SlotEvent::StoreUnavailable`]).
    pub async fn run<F, Fut, T, E>(&self, spec: JobSpec, job: F, shutdown: CancellationToken) -> Result<()>
    where
        F: FnMut(JobContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        T: Into<SlotOutcome>,
        E: fmt::Display + Send,
    {
        spec.validate()?;
        tracing::info!(job = %spec.name, schedule = %spec.schedule.describe(), "scheduler started");
        match spec.naming {
            LockNaming::PerSlot => self.run_slots(&spec, job, &shutdown).await,
            LockNaming::JobName => self.run_job_lock(&spec, job, &shutdown).await,
        }
    }

    async fn run_slots<F, Fut, T, E>(&self, spec: &JobSpec, mut job: F, shutdown: &CancellationToken) -> Result<()>
    where
        F: FnMut(JobContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        T: Into<SlotOutcome>,
        E: fmt::Display + Send,
    {
        let catch_up_ms = millis(spec.catch_up);
        let grace_ms = millis(spec.grace);
        let mut clock = DueClock::new(self.client.store().clone(), self.wall.clone());
        let mut books = Books::default();
        let Some(start_ms) = self.due_now(spec, &mut clock, &mut books.store, shutdown).await? else {
            return Ok(());
        };
        let skew = clock.skew(spec.clock_skew);
        let (began, listed) = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            found = async {
                let listed = sweep::list_job(self.client.store().as_ref(), spec).await;
                (first_start::began(&self.client, spec, listed.as_deref(), start_ms, skew).await, listed)
            } => found,
        };
        let mut sweeper = Sweeper::new(listed.unwrap_or_default());
        // No slot from before the job began (nor from before this start, if a start
        // record's clock ran ahead): a slot at the start's second counts as after it;
        // where slots are due on the wall clock, the instances' clocks may disagree by
        // the skew allowed.
        let cut = |since: u64| since.min(start_ms).saturating_sub(1 + millis(skew));
        let mut frontier = start_ms.saturating_sub(catch_up_ms);
        let since = match began {
            Began::At(since) => Some(since),
            Began::New => {
                let since = first_start::whole_second(start_ms);
                tracing::info!(job = %spec.name, since = %Slot::from_unix_ms(since), "no start record of the job that has not run out, and no slot record: a new job, no slot from before it runs");
                self.emit(SlotEvent::NewJob {
                    since: Slot::from_unix_ms(since),
                });
                Some(since)
            }
            // It began before the window: a start record there cuts nothing.
            Began::Before => Some(first_start::whole_second(frontier)),
            Began::Unknown => None,
        };
        if let Some(since) = since {
            frontier = frontier.max(cut(since));
        }
        books.start = match since {
            Some(since) => StartRecord::keep(&self.client, spec, since, skew).await,
            None => None,
        };
        loop {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            let Some(now_ms) = self.due_now(spec, &mut clock, &mut books.store, shutdown).await? else {
                return Ok(());
            };
            // Before the pass's runs, which may be long.
            if let Some(record) = books.start.as_mut() {
                record.tick(&self.client, spec, skew).await;
            }
            let mut enumerated = 0;
            for slot in spec.schedule.slots_between(frontier, now_ms) {
                books.pending.entry(slot).or_insert_with(Pending::new);
                frontier = slot.unix_ms();
                enumerated += 1;
                if enumerated >= MAX_SLOTS_PER_PASS {
                    break;
                }
            }
            if enumerated < MAX_SLOTS_PER_PASS {
                frontier = frontier.max(now_ms);
            }
            let horizon = now_ms.saturating_sub(catch_up_ms);
            let out_of_window: Vec<Slot> = books
                .pending
                .iter()
                .filter(|(s, p)| s.unix_ms() < horizon && (!p.started || p.failed) && p.recheck_at <= Instant::now())
                .map(|(s, _)| *s)
                .collect();
            self.leave_behind(spec, out_of_window, &mut books).await?;
            let now = Instant::now();
            let due: Vec<Slot> = books
                .pending
                .iter()
                .filter(|(_, p)| p.recheck_at <= now)
                .map(|(s, _)| *s)
                .collect();
            let due = self
                .apply_missed_policy(spec, due, &mut books, now_ms, grace_ms)
                .await?;
            for slot in due {
                if shutdown.is_cancelled() {
                    return Ok(());
                }
                self.attempt(spec, slot, &clock, &mut books, &mut job, shutdown).await?;
            }
            match sweeper
                .pass(
                    self.client.store().as_ref(),
                    spec,
                    clock.now_ms().unwrap_or(now_ms),
                    clock.skew(spec.clock_skew),
                )
                .await
            {
                Ok(true) => Self::store_answered(spec, &mut books.store),
                Err(e) if e.is_retryable() || e.is_indeterminate() => self.store_failed(spec, &mut books.store, &e),
                Ok(false) | Err(_) => {}
            }
            let mut wake = Instant::now() + MAX_SLEEP;
            if let Some(next) = spec.schedule.next_after(frontier) {
                let until = next.unix_ms().saturating_sub(clock.now_ms().unwrap_or(now_ms)) + 1;
                wake = wake.min(Instant::now() + Duration::from_millis(until));
            }
            if let Some(r) = books.pending.values().map(|p| p.recheck_at).min() {
                wake = wake.min(r);
            }
            if let Some(record) = books.start.as_ref() {
                wake = wake.min(record.next());
            }
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Now on the clock that says which slots are due ([`DueClock`]), read afresh where
    /// it is the store's. While the store's clock cannot be read and was never read,
    /// waits and tries again; `None` at shutdown.
    async fn due_now(
        &self,
        spec: &JobSpec,
        clock: &mut DueClock,
        health: &mut StoreHealth,
        shutdown: &CancellationToken,
    ) -> Result<Option<u64>> {
        let mut failures = 0u32;
        loop {
            match clock.refresh().await {
                Ok(true) => Self::store_answered(spec, health),
                Ok(false) => {}
                Err(e) if e.is_retryable() || e.is_indeterminate() => {
                    tracing::debug!(job = %spec.name, error = %e, "could not read the store's clock");
                    self.store_failed(spec, health, &e);
                }
                Err(e) => return Err(e),
            }
            if let Some(now) = clock.now_ms() {
                return Ok(Some(now));
            }
            failures = failures.saturating_add(1);
            let wait = Duration::from_millis(10)
                .saturating_mul(1 << failures.min(7))
                .min(crate::due::RESYNC);
            tokio::select! {
                () = shutdown.cancelled() => return Ok(None),
                () = tokio::time::sleep(jitter(wait)) => {}
            }
        }
    }

    /// Slots that fell out of the catch-up window before this instance started them,
    /// and failed slots that fell out of it: one read each says what became of them.
    /// Nobody started it: `Abandoned`. Done: `DoneElsewhere`. Failed (its failed record,
    /// or no record left of a slot known to have failed): `GivenUp`. Started and not
    /// done: it stays pending and is completed like any started slot.
    async fn leave_behind(&self, spec: &JobSpec, slots: Vec<Slot>, books: &mut Books) -> Result<()> {
        for slot in slots {
            let stored = match self.client.store().read(&spec.lease_name(slot)?).await {
                Ok(stored) => stored,
                Err(e) if e.is_retryable() || e.is_indeterminate() => {
                    self.back_off(spec, slot, books, &e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            Self::store_answered(spec, &mut books.store);
            let Some(p) = books.pending.get_mut(&slot) else {
                continue;
            };
            let event = match stored.as_ref().map(|s| s.record.holder.as_ref().and_then(Marker::of)) {
                Some(Some(Marker::Done)) => SlotEvent::DoneElsewhere { slot },
                // Its failed record, or none left (a store that expires records). The
                // record of a failed run meant to be retried lasts one retry interval:
                // given up now, out of the window, it is kept as long as a done record
                // is, so that an instance whose clock is behind does not run it again.
                Some(Some(Marker::Failed)) => {
                    if let Some(stored) = stored.as_ref().filter(|_| p.failed) {
                        let name = spec.lease_name(slot)?;
                        let keep = spec.keep_done_for;
                        if let Some(version) = marker::keep_longer(&self.client, &name, stored, keep).await {
                            sweep::expire(self.client.store().as_ref(), &name, &version, keep + spec.clock_skew).await;
                        }
                    }
                    SlotEvent::GivenUp {
                        slot,
                        failed_runs: p.failed_runs,
                    }
                }
                None if p.failed => SlotEvent::GivenUp {
                    slot,
                    failed_runs: p.failed_runs,
                },
                None => SlotEvent::Abandoned { slot },
                Some(_) => {
                    p.started = true;
                    continue;
                }
            };
            books.pending.remove(&slot);
            self.emit(event);
        }
        Ok(())
    }

    /// Applies the missed-slot policy to the due slots: late slots nobody started are
    /// skipped (all, or all but the latest) unless the policy runs them late.
    async fn apply_missed_policy(
        &self,
        spec: &JobSpec,
        due: Vec<Slot>,
        books: &mut Books,
        now_ms: u64,
        grace_ms: u64,
    ) -> Result<Vec<Slot>> {
        if spec.missed == MissedSlots::RunLateOnce {
            return Ok(due);
        }
        let mut run = Vec::new();
        let mut unstarted = Vec::new();
        for slot in due {
            let started = books.pending.get(&slot).is_some_and(|p| p.started);
            let late = now_ms.saturating_sub(slot.unix_ms()) > grace_ms;
            if started || !late {
                run.push(slot);
                continue;
            }
            // One read tells whether anybody ever started it.
            match self.client.store().read(&spec.lease_name(slot)?).await {
                Ok(Some(_)) => {
                    Self::store_answered(spec, &mut books.store);
                    if let Some(p) = books.pending.get_mut(&slot) {
                        p.started = true;
                    }
                    run.push(slot);
                }
                Ok(None) => {
                    Self::store_answered(spec, &mut books.store);
                    unstarted.push(slot);
                }
                Err(e) if e.is_retryable() || e.is_indeterminate() => {
                    self.back_off(spec, slot, books, &e);
                }
                Err(e) => return Err(e),
            }
        }
        if spec.missed == MissedSlots::RunLatestOnly {
            if let Some(latest) = unstarted.pop() {
                run.push(latest);
            }
        }
        for slot in unstarted {
            books.pending.remove(&slot);
            self.emit(SlotEvent::Missed { slot });
        }
        run.sort_unstable();
        Ok(run)
    }

    /// A store call on `slot` failed with a retryable or indeterminate error `e`: the
    /// slot is tried again after a back-off that grows with each error in a row.
    fn back_off(&self, spec: &JobSpec, slot: Slot, books: &mut Books, e: &leasehold_core::Error) {
        tracing::debug!(job = %spec.name, %slot, error = %e, "store error; retrying the slot later");
        self.store_failed(spec, &mut books.store, e);
        if let Some(p) = books.pending.get_mut(&slot) {
            p.store_errors = p.store_errors.saturating_add(1);
            let cap = spec.lock_at_most_for.max(Duration::from_millis(20));
            let base = Duration::from_millis(10)
                .saturating_mul(1 << p.store_errors.min(10))
                .min(cap);
            p.recheck_at = Instant::now() + jitter(base);
        }
    }

    /// One attempt at one slot.
    async fn attempt<F, Fut, T, E>(
        &self,
        spec: &JobSpec,
        slot: Slot,
        clock: &DueClock,
        books: &mut Books,
        job: &mut F,
        shutdown: &CancellationToken,
    ) -> Result<()>
    where
        F: FnMut(JobContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        T: Into<SlotOutcome>,
        E: fmt::Display + Send,
    {
        let name = spec.lease_name(slot)?;
        let options = spec.at_most.options(spec.lock_at_most_for);
        let acquired = self.client.try_acquire_with(&name, &options).await;
        if matches!(acquired, Ok(_) | Err(leasehold_core::Error::AlreadyHeld { .. })) {
            Self::store_answered(spec, &mut books.store);
        }
        let lease = match acquired {
            Ok(AcquireOutcome::Granted(lease)) => lease,
            Ok(AcquireOutcome::Held {
                holder, retry_after, ..
            }) => {
                let marker = holder.as_ref().and_then(Marker::of);
                if marker == Some(Marker::Done) {
                    books.pending.remove(&slot);
                    self.emit(SlotEvent::DoneElsewhere { slot });
                } else if let Some(p) = books.pending.get_mut(&slot) {
                    let first = !p.started;
                    p.started = true;
                    p.store_errors = 0;
                    p.failed |= marker == Some(Marker::Failed);
                    let wait = retry_after.min(spec.lock_at_most_for).max(Duration::from_millis(1));
                    p.recheck_at = Instant::now() + jitter(wait);
                    if first {
                        self.emit(SlotEvent::HeldElsewhere { slot, holder });
                    }
                }
                return Ok(());
            }
            // Another scheduler on this process's client runs the slot now: held
            // elsewhere, as far as this one is concerned; look again when it can be over.
            Err(leasehold_core::Error::AlreadyHeld { .. }) => {
                if let Some(p) = books.pending.get_mut(&slot) {
                    let first = !p.started;
                    p.started = true;
                    p.store_errors = 0;
                    p.recheck_at = Instant::now() + jitter(spec.lock_at_most_for.max(Duration::from_millis(1)));
                    if first {
                        self.emit(SlotEvent::HeldElsewhere { slot, holder: None });
                    }
                }
                return Ok(());
            }
            Err(e) if e.is_retryable() || e.is_indeterminate() => {
                self.back_off(spec, slot, books, &e);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let started = Instant::now();
        let late = Duration::from_millis(clock.now_ms().unwrap_or(0).saturating_sub(slot.unix_ms()));
        let token = lease.token();
        let run = execute(&lease, Some(slot), started, Some(shutdown), job);
        let skew = clock.skew(spec.clock_skew);
        let result = match StartRecord::alongside(books.start.as_mut(), run, &self.client, spec, skew).await {
            Ok(Ok(outcome)) => Ok(outcome.into()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(panic) => Err(panicked(panic.as_ref())),
        };
        let rest = spec.lock_at_least_for.saturating_sub(started.elapsed());
        let error = match result {
            // The slot is done in the protected data, by this run or by an earlier one:
            // the event says which, and the done record keeps the other instances off it
            // (if the lease was lost meanwhile, whoever takes the slot over writes it).
            Ok(outcome) => {
                let event = match outcome {
                    SlotOutcome::Committed => SlotEvent::Ran { slot, token, late },
                    SlotOutcome::AlreadyDone => SlotEvent::DoneElsewhere { slot },
                };
                if lease.loss_cause().is_some() {
                    drop(lease);
                } else {
                    let keep = spec.keep_done_for.max(rest);
                    let name = lease.name().clone();
                    match marker::finish(&self.client, lease, Marker::Done, keep).await {
                        Ok(Finished::Kept(version)) => {
                            Self::store_answered(spec, &mut books.store);
                            let after = keep + clock.skew(spec.clock_skew);
                            sweep::expire(self.client.store().as_ref(), &name, &version, after).await;
                        }
                        Ok(Finished::NotOurs) => Self::store_answered(spec, &mut books.store),
                        Err(e) if e.is_retryable() || e.is_indeterminate() => {
                            tracing::warn!(job = %spec.name, %slot, error = %e, "could not write the done record; the next taker writes it");
                            self.store_failed(spec, &mut books.store, &e);
                        }
                        Err(e) => return Err(e),
                    }
                }
                books.pending.remove(&slot);
                self.emit(event);
                return Ok(());
            }
            Err(error) => error,
        };
        if let Some(cause) = lease.loss_cause() {
            drop(lease);
            if let Some(p) = books.pending.get_mut(&slot) {
                p.started = true;
                p.recheck_at = Instant::now() + jitter(spec.lock_at_most_for.max(Duration::from_millis(1)));
            }
            self.emit(SlotEvent::Lost { slot, cause });
            return Ok(());
        }
        // The job failed while this instance held the slot: one more failed run. The
        // slot is given up after `max_tries` of them, or if its next try would come
        // after it leaves the catch-up window; its failed record then stays as long as a
        // done record would, so that no instance runs it again.
        let failed_runs = books.pending.get(&slot).map_or(1, |p| p.failed_runs.saturating_add(1));
        // When the next try would come: chosen now, jitter and all, so that a slot whose
        // next try falls outside the window is given up here, with its record kept.
        let retry = jitter(spec.retry_failed_after.max(rest));
        let leaves_window = clock.now_ms().is_some_and(|now| {
            slot.unix_ms().saturating_add(millis(spec.catch_up)) < now.saturating_add(millis(retry))
        });
        let give_up = failed_runs >= spec.max_tries || leaves_window;
        let keep = if give_up { spec.keep_done_for.max(rest) } else { retry };
        let name = lease.name().clone();
        let kept = match marker::finish(&self.client, lease, Marker::Failed, keep).await {
            Ok(Finished::Kept(version)) => {
                Self::store_answered(spec, &mut books.store);
                self.emit(SlotEvent::Failed { slot, token, error });
                Some(version)
            }
            Ok(Finished::NotOurs) => {
                Self::store_answered(spec, &mut books.store);
                self.emit(SlotEvent::Lost {
                    slot,
                    cause: LossCause::Expired,
                });
                None
            }
            Err(e) if e.is_retryable() || e.is_indeterminate() => {
                // The run's lease expires on its own; whoever takes the slot next runs it.
                self.store_failed(spec, &mut books.store, &e);
                self.emit(SlotEvent::Lost {
                    slot,
                    cause: LossCause::StoreUnreachable,
                });
                None
            }
            Err(e) => return Err(e),
        };
        if give_up {
            books.pending.remove(&slot);
            if let Some(version) = kept {
                let after = keep + clock.skew(spec.clock_skew);
                sweep::expire(self.client.store().as_ref(), &name, &version, after).await;
            }
            tracing::warn!(job = %spec.name, %slot, failed_runs, "the job keeps failing on this slot; giving it up");
            self.emit(SlotEvent::GivenUp { slot, failed_runs });
        } else if let Some(p) = books.pending.get_mut(&slot) {
            p.started = true;
            p.failed = true;
            p.failed_runs = failed_runs;
            p.recheck_at = Instant::now()
                + if kept.is_some() {
                    retry
                } else {
                    jitter(spec.lock_at_most_for.max(Duration::from_millis(1)))
                };
        }
        Ok(())
    }

    /// ShedLock-compatible mode: one lease named after the job, tried at each fire
    /// time; missed fire times are skipped.
    async fn run_job_lock<F, Fut, T, E>(&self, spec: &JobSpec, mut job: F, shutdown: &CancellationToken) -> Result<()>
    where
        F: FnMut(JobContext) -> Fut + Send,
        Fut: Future<Output = std::result::Result<T, E>> + Send,
        T: Into<SlotOutcome>,
        E: fmt::Display + Send,
    {
        let name = spec.lease_name(Slot::from_unix_ms(0))?;
        let mut clock = DueClock::new(self.client.store().clone(), self.wall.clone());
        let mut health = StoreHealth::default();
        let Some(mut frontier) = self.due_now(spec, &mut clock, &mut health, shutdown).await? else {
            return Ok(());
        };
        loop {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            let Some(now_ms) = self.due_now(spec, &mut clock, &mut health, shutdown).await? else {
                return Ok(());
            };
            let latest = spec.schedule.slots_between(frontier, now_ms).last();
            frontier = frontier.max(now_ms);
            if let Some(slot) = latest {
                let acquired = self
                    .client
                    .try_acquire_with(&name, &spec.at_most.options(spec.lock_at_most_for))
                    .await;
                if matches!(acquired, Ok(_) | Err(leasehold_core::Error::AlreadyHeld { .. })) {
                    Self::store_answered(spec, &mut health);
                }
                match acquired {
                    Ok(AcquireOutcome::Granted(lease)) => {
                        let started = Instant::now();
                        let late = Duration::from_millis(clock.now_ms().unwrap_or(0).saturating_sub(slot.unix_ms()));
                        let token = lease.token();
                        let result = match execute(&lease, Some(slot), started, Some(shutdown), &mut job).await {
                            Ok(Ok(outcome)) => Ok(outcome.into()),
                            Ok(Err(e)) => Err(e.to_string()),
                            Err(panic) => Err(panicked(panic.as_ref())),
                        };
                        let event = match (result, lease.loss_cause()) {
                            (Ok(SlotOutcome::Committed), _) => SlotEvent::Ran { slot, token, late },
                            (Ok(SlotOutcome::AlreadyDone), _) => SlotEvent::DoneElsewhere { slot },
                            (Err(_), Some(cause)) => SlotEvent::Lost { slot, cause },
                            (Err(error), None) => SlotEvent::Failed { slot, token, error },
                        };
                        let rest = spec.lock_at_least_for.saturating_sub(started.elapsed());
                        if lease.loss_cause().is_some() {
                            drop(lease);
                        } else if rest.is_zero() {
                            if let Err(e) = lease.release().await {
                                tracing::warn!(job = %spec.name, error = %e, "release failed; the lock expires");
                            }
                        } else {
                            match marker::finish(&self.client, lease, Marker::Held, rest).await {
                                Ok(_) => Self::store_answered(spec, &mut health),
                                Err(e) if e.is_retryable() || e.is_indeterminate() => {
                                    tracing::warn!(job = %spec.name, error = %e, "could not keep the lock");
                                    self.store_failed(spec, &mut health, &e);
                                }
                                Err(e) => return Err(e),
                            }
                        }
                        self.emit(event);
                    }
                    Ok(AcquireOutcome::Held { holder, .. }) => {
                        self.emit(SlotEvent::HeldElsewhere { slot, holder });
                    }
                    // Another scheduler on this process's client runs the job now.
                    Err(leasehold_core::Error::AlreadyHeld { .. }) => {
                        self.emit(SlotEvent::HeldElsewhere { slot, holder: None });
                    }
                    Err(e) if e.is_retryable() || e.is_indeterminate() => {
                        tracing::warn!(job = %spec.name, %slot, error = %e, "store error; skipping this fire time");
                        self.store_failed(spec, &mut health, &e);
                    }
                    Err(e) => return Err(e),
                }
            }
            let mut wake = Instant::now() + MAX_SLEEP;
            if let Some(next) = spec.schedule.next_after(frontier) {
                let until = next.unix_ms().saturating_sub(clock.now_ms().unwrap_or(now_ms)) + 1;
                wake = wake.min(Instant::now() + Duration::from_millis(until));
            }
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `d` stretched by a random 0–10%, so instances do not retry in step.
fn jitter(d: Duration) -> Duration {
    d + d.mul_f64(rand::rng().random_range(0.0..0.1))
}
