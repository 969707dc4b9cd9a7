//! Running a job on one instance only: ShedLock's `LockingTaskExecutor`, fenced.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt as _;

use leasehold_core::{
    AcquireOutcome, Error, FencingToken, HolderId, Lease, LeaseClient, LeaseName, LossCause, Result, Ttl, Validity,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::marker::{self, Finished, Marker};
use crate::{LockAtMost, Slot};

/// How long a run holds its lock: ShedLock's `LockConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockConfig {
    /// The lease name.
    pub name: String,
    /// The lease TTL: renewed while the job runs, so it bounds how long a crashed or
    /// frozen runner blocks the job, not how long a job may run, unless
    /// [`LockConfig::at_most`] is [`LockAtMost::Absolute`].
    pub lock_at_most_for: Duration,
    /// What `lock_at_most_for` bounds (default [`LockAtMost::Renewed`]; see there why).
    pub at_most: LockAtMost,
    /// The lease stays taken, on the store's clock, at least this long after the run
    /// started, even if the job finished sooner: instances whose schedules fire a
    /// little later (clock skew, start-up) find it taken and skip.
    pub lock_at_least_for: Duration,
}

impl LockConfig {
    /// A lock on `name` held at most `lock_at_most_for` past the last renewal, and
    /// released as soon as the job ends (`lock_at_least_for` zero).
    pub fn new(name: impl Into<String>, lock_at_most_for: Duration) -> Self {
        Self {
            name: name.into(),
            lock_at_most_for,
            at_most: LockAtMost::default(),
            lock_at_least_for: Duration::ZERO,
        }
    }

    crate::setters! {
        /// Sets [`LockConfig::at_most`]: `LockAtMost::Absolute` for ShedLock's meaning of
        /// `lock_at_most_for` (never longer than it, even while the job is alive).
        at_most: LockAtMost;
        /// Keeps the lock at least `d` after the start.
        lock_at_least_for: Duration;
    }

    /// Checks the values.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad name or TTL, or `lock_at_least_for` above
    /// [`Ttl::MAX`].
    pub fn validate(&self) -> Result<()> {
        LeaseName::new(&self.name)?;
        Ttl::new(self.lock_at_most_for)?;
        if self.lock_at_least_for > Ttl::MAX {
            return Err(Error::invalid("lock_at_least_for", "longer than 7 days"));
        }
        Ok(())
    }
}

/// What a job receives: the run's fencing token, a cancellation that fires when the
/// lease is lost (or the scheduler shuts down), and the slot it runs for.
#[derive(Debug, Clone)]
pub struct JobContext {
    name: LeaseName,
    holder: HolderId,
    token: FencingToken,
    validity: Validity,
    slot: Option<Slot>,
    started: Instant,
}

impl JobContext {
    pub(crate) fn new(lease: &Lease, slot: Option<Slot>, started: Instant) -> Self {
        Self {
            name: lease.name().clone(),
            holder: lease.holder().clone(),
            token: lease.token(),
            validity: lease.validity(),
            slot,
            started,
        }
    }

    /// The lease name of this run (`<job>/<slot>` for scheduled slots).
    pub fn name(&self) -> &LeaseName {
        &self.name
    }

    /// This run's holder id.
    pub fn holder(&self) -> &HolderId {
        &self.holder
    }

    /// The fencing token: carry it on every write the job makes.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The slot this run is for (`None` for [`LockingExecutor::run`]).
    pub fn slot(&self) -> Option<Slot> {
        self.slot
    }

    /// When the run was granted its lease (monotonic).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The cancellation: fires when the lease is lost or the scheduler stops.
    pub fn cancellation(&self) -> &CancellationToken {
        self.validity.cancellation()
    }

    /// Completes when the run must stop.
    pub async fn cancelled(&self) {
        self.validity.cancelled().await;
    }

    /// True until the run must stop: its cancellation has not fired and the lease's
    /// validity deadline is ahead. A run that froze past that deadline reads `false` as
    /// soon as it runs again, before the renewal driver has had a turn to end the lease,
    /// and that first `false` cancels this context (and its clones): the run must stop,
    /// even should a renewal sent before the deadline be answered after it. A `true`
    /// answer can be stale by the time a write lands: the fence decides.
    pub fn is_valid(&self) -> bool {
        self.validity.is_valid()
    }

    /// Until when the run may trust its lease (monotonic clock): it moves on with every
    /// renewal, never past the lease's `hold_until` (with [`LockAtMost::Absolute`]).
    /// Once the run must stop it may still lie ahead: [`JobContext::is_valid`] is what
    /// says whether the run may go on.
    pub fn valid_until(&self) -> Instant {
        self.validity.valid_until()
    }
}

/// The result of [`LockingExecutor::run`].
#[derive(Debug)]
pub enum RunOutcome<T> {
    /// The job ran here.
    Ran(Ran<T>),
    /// Another instance holds the lock (or kept it for its `lock_at_least_for`), or
    /// another run through the same [`LeaseClient`] holds it now; the job did not run.
    Skipped {
        /// The current holder (a marker holder id while a finished run keeps it; `None`
        /// when it is another run through the same client, or not known).
        holder: Option<HolderId>,
        /// Its token.
        token: FencingToken,
        /// When the lock can be free again.
        retry_after: Duration,
    },
}

impl<T> RunOutcome<T> {
    /// The run, if the job ran.
    pub fn ran(self) -> Option<Ran<T>> {
        match self {
            Self::Ran(r) => Some(r),
            Self::Skipped { .. } => None,
        }
    }
}

/// A job that ran.
#[derive(Debug)]
pub struct Ran<T> {
    /// What the job returned.
    pub output: T,
    /// The token it ran with.
    pub token: FencingToken,
    /// Set if the lease was lost while the job ran: its writes after that moment were
    /// refused by the fence (if they carried the token).
    pub lost: Option<LossCause>,
    /// Set if the lock was kept after the job for the rest of `lock_at_least_for`.
    /// Not set if a store error left that unknown (logged): the lock may then be free
    /// before `lock_at_least_for` has passed.
    pub kept_for: Option<Duration>,
}

/// Runs jobs under a lock so that one instance runs them at a time.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{LeaseClient, MemoryStore};
/// use leasehold_jobs::{LockConfig, LockingExecutor, RunOutcome};
///
/// let store = MemoryStore::new();
/// let a = LockingExecutor::new(LeaseClient::new(store.clone()));
/// let b = LockingExecutor::new(LeaseClient::new(store));
/// let lock = LockConfig::new("reports/daily", Duration::from_secs(30))
///     .lock_at_least_for(Duration::from_secs(60));
/// let ran = a.run(&lock, |ctx| async move { ctx.token() }).await?.ran().expect("ran");
/// // The job took no time, but the lock stays taken for a minute after the start:
/// assert!(matches!(b.run(&lock, |_| async {}).await?, RunOutcome::Skipped { .. }));
/// # let _ = ran;
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct LockingExecutor {
    client: LeaseClient,
}

impl LockingExecutor {
    /// An executor taking its locks through `client`.
    pub fn new(client: LeaseClient) -> Self {
        Self { client }
    }

    /// The client.
    pub fn client(&self) -> &LeaseClient {
        &self.client
    }

    /// Tries the lock once; if granted, runs `job` (renewing the lock meanwhile), then
    /// keeps the lock for the rest of `lock_at_least_for` or releases it.
    ///
    /// Round trips: one to take a free lock (at most two for a takeover), one per
    /// renewal while the job runs, then one to release, or two to keep the lock for
    /// the rest of `lock_at_least_for` (a read for the version and the final write).
    ///
    /// # Errors
    /// Invalid configuration, store errors while taking the lock, and store errors
    /// retrying cannot fix while keeping it. Once the job has run, a store error
    /// retrying could fix is logged and the run returned: the job's output is never
    /// lost to one.
    ///
    /// # Panics
    /// If the job panics: its panic is passed on once the lock is released (or kept
    /// for the rest of `lock_at_least_for`).
    pub async fn run<F, Fut, T>(&self, config: &LockConfig, job: F) -> Result<RunOutcome<T>>
    where
        F: FnOnce(JobContext) -> Fut,
        Fut: Future<Output = T>,
    {
        config.validate()?;
        let options = config.at_most.options(config.lock_at_most_for);
        let lease = match self.client.try_acquire_with(&config.name, &options).await {
            Ok(AcquireOutcome::Granted(lease)) => lease,
            Ok(AcquireOutcome::Held {
                holder,
                token,
                retry_after,
            }) => {
                return Ok(RunOutcome::Skipped {
                    holder,
                    token,
                    retry_after,
                });
            }
            // Another run of this executor's client holds the lock right now: this
            // process is the other instance, and the job is skipped the same way.
            Err(Error::AlreadyHeld { token, .. }) => {
                return Ok(RunOutcome::Skipped {
                    holder: None,
                    token,
                    retry_after: config.lock_at_most_for,
                });
            }
            Err(e) => return Err(e),
        };
        // Measured after the grant's answer arrived, which is after the store applied
        // it: keeping the lock until `started + lock_at_least_for` on this clock keeps
        // it at least that long after the store's own start.
        let started = Instant::now();
        let token = lease.token();
        let output = execute(&lease, None, started, None, job).await;
        let ended = self.end_run(lease, started, config.lock_at_least_for).await;
        let output = output.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let (lost, kept_for) = ended?;
        Ok(RunOutcome::Ran(Ran {
            output,
            token,
            lost,
            kept_for,
        }))
    }

    /// Ends a ShedLock-style run: keeps the name taken for the rest of `at_least`
    /// (a final record), or releases it.
    async fn end_run(
        &self,
        lease: Lease,
        started: Instant,
        at_least: Duration,
    ) -> Result<(Option<LossCause>, Option<Duration>)> {
        if let Some(cause) = lease.loss_cause() {
            return Ok((Some(cause), None));
        }
        let rest = at_least.saturating_sub(started.elapsed());
        if rest.is_zero() {
            if let Err(e) = lease.release().await {
                tracing::warn!(error = %e, "release failed; the lock expires on its own");
            }
            return Ok((None, None));
        }
        let name = lease.name().clone();
        match keep_taken(&self.client, lease, rest).await {
            Ok(true) => Ok((None, Some(rest))),
            Ok(false) => Ok((Some(LossCause::Expired), None)),
            // The job ran: its output is the caller's. The lease handle is gone, and
            // the lock is free when its release lands or its record expires.
            Err(e) if e.is_retryable() || e.is_indeterminate() => {
                tracing::warn!(lease = %name, error = %e, "could not keep the lock for the rest of lock_at_least_for");
                Ok((None, None))
            }
            Err(e) => Err(e),
        }
    }
}

/// Ends `lease` but keeps its name taken `rest` longer, by nobody: ShedLock's
/// `lockAtLeastFor` for a run that ended early, as [`LockingExecutor::run`] keeps it.
/// The lease's record is rewritten, in one conditional write on its current version,
/// as held by the [`Marker::Held`] holder for `rest`; nobody renews it, and nobody is
/// granted the name before it runs out on the store's clock (on stores without one,
/// before a challenger watched it unchanged that long). Two round trips: a read for the
/// version, the write (for a lease no longer valid, its release instead).
///
/// On etcd and ZooKeeper the kept record lives on one of this process's sessions: it
/// lasts `rest` while the process runs, but once the process has exited only as long
/// as that session (etcd: its lease's TTL from its last keep-alive; ZooKeeper: its
/// timeout, at most the ensemble's `maxSessionTimeout`). A process that exits at once
/// and wants the name kept there
/// ([`Capabilities::held_outlives_writer`](leasehold_core::store::Capabilities::held_outlives_writer)
/// false) stays until `rest` has passed, as `leasehold run --at-least` does.
///
/// `Ok(true)` once the name is kept; `Ok(false)` if the lease was lost or is past its
/// validity (its loss not noticed yet, as after a freeze: it is released), or if the
/// record no longer named this lease (another holder has it): nothing was kept.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{AcquireOutcome, LeaseClient, MemoryStore};
///
/// let store = MemoryStore::new();
/// let a = LeaseClient::new(store.clone());
/// let lease = a.try_acquire("reports/daily", Duration::from_secs(30)).await?.granted().expect("free");
/// // The job is done at once; the name stays taken for another minute.
/// assert!(leasehold_jobs::keep_taken(&a, lease, Duration::from_secs(60)).await?);
/// let b = LeaseClient::new(store);
/// assert!(matches!(b.try_acquire("reports/daily", Duration::from_secs(30)).await?, AcquireOutcome::Held { .. }));
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
///
/// # Errors
/// Store errors of the keep. After one that retrying could fix, whether the name is
/// kept is not known: it is free at the latest when the lease's record expires. (A
/// failed release of a lease no longer valid is logged, and answers `Ok(false)`.)
pub async fn keep_taken(client: &LeaseClient, lease: Lease, rest: Duration) -> Result<bool> {
    // Its tenure is over even where the store still names it: released, not kept.
    if !lease.is_valid() {
        let name = lease.name().clone();
        tracing::warn!(lease = %name, "not kept: the lease was lost or past its validity when its run ended");
        if let Err(e) = lease.release().await {
            tracing::warn!(lease = %name, error = %e, "release failed; the lease expires on its own");
        }
        return Ok(false);
    }
    Ok(matches!(
        marker::finish(client, lease, Marker::Held, rest).await?,
        Finished::Kept(_)
    ))
}

/// Runs `job` with a context for `lease`; cancels the context if `stop` fires, and
/// still waits for the job to return. A panic of the job is caught: `Err` with its
/// payload.
pub(crate) async fn execute<F, Fut, T>(
    lease: &Lease,
    slot: Option<Slot>,
    started: Instant,
    stop: Option<&CancellationToken>,
    job: F,
) -> std::thread::Result<T>
where
    F: FnOnce(JobContext) -> Fut,
    Fut: Future<Output = T>,
{
    let ctx = JobContext::new(lease, slot, started);
    let cancel = ctx.cancellation().clone();
    // After a panic the run's future is dropped and only the payload is looked at; a
    // scheduler calls its job again for the next slot, as after any failure.
    let fut = std::panic::catch_unwind(AssertUnwindSafe(|| job(ctx)))?;
    let mut fut = std::pin::pin!(AssertUnwindSafe(fut).catch_unwind());
    match stop {
        Some(stop) => {
            tokio::select! {
                out = &mut fut => out,
                () = stop.cancelled() => {
                    cancel.cancel();
                    fut.await
                }
            }
        }
        None => fut.await,
    }
}

/// The text of a job's panic, for [`crate::SlotEvent::Failed`].
pub(crate) fn panicked(payload: &(dyn Any + Send)) -> String {
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a payload that is not text)");
    format!("the job panicked: {message}")
}
