//! What a scheduled job is: its schedule, its locks and its policies.

use std::time::Duration;

use leasehold_core::{AcquireOptions, Error, LeaseName, Result, Ttl};

use crate::{Schedule, Slot};

/// What happens to a slot that nobody started on time.
///
/// A slot is *missed* when an instance first considers it more than
/// [`JobSpec::grace`] after its fire time and finds no record of it at all (nobody
/// started it): every instance was down, or busy, or the schedule was paused. A slot
/// that *was* started but whose runner died is never missed: it is taken over and
/// completed, whatever the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedSlots {
    /// Run every missed slot late, once each, oldest first, as far back as
    /// [`JobSpec::catch_up`] (the default: no slot in the window is lost).
    #[default]
    RunLateOnce,
    /// Run only the most recent missed slot, once; skip the older ones (like a
    /// Kubernetes CronJob or anacron catching up after downtime).
    RunLatestOnly,
    /// Skip missed slots (like Spring's `@Scheduled`); only slots started within the
    /// grace period run.
    Skip,
}

/// What `lock_at_most_for` bounds: how long a *dead* runner blocks the job (the
/// default), or how long any run may hold its lease at all (ShedLock's meaning).
///
/// The default is [`LockAtMost::Renewed`], chosen on purpose. `lock_at_most_for` is
/// also the lease TTL, which decides how soon a crashed or frozen runner is replaced,
/// so it is best kept short; cutting every run off at it would make any job longer
/// than that TTL lose its lease on every try and never complete its slot. And what
/// keeps a stuck or late runner harmless is the fence on its writes, not the cap. Opt
/// in to [`LockAtMost::Absolute`] for jobs with a known longest run, where a run still
/// going at the cap is stuck and another instance should complete the slot, or to
/// share a lock with Java ShedLock instances, for which it means exactly this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LockAtMost {
    /// The lease TTL, renewed while the run goes on (the default): a runner that dies
    /// or freezes is replaced about `lock_at_most_for` after its last renewal; a live
    /// run keeps its lease as long as it runs, stuck or not.
    #[default]
    Renewed,
    /// Never longer than `lock_at_most_for` from the run's start, even while the runner
    /// is alive: the lease is not renewed past it, the run's context is cancelled with
    /// [`leasehold_core::LossCause::MaxHoldReached`] when its hold ends (at the cap, or
    /// a margin before it, [`leasehold_core::AcquireOptions::max_hold`]), and the
    /// store frees the name at the cap. A stuck run thus loses its slot, and another
    /// instance may take the slot over and complete it; the stuck run's late writes
    /// are refused by the fence.
    Absolute,
}

impl LockAtMost {
    /// The acquire options of a run whose lock is held at most `lock_at_most_for`.
    pub(crate) fn options(self, lock_at_most_for: Duration) -> AcquireOptions {
        let options = AcquireOptions::new(lock_at_most_for);
        match self {
            Self::Renewed => options,
            Self::Absolute => options.max_hold(lock_at_most_for),
        }
    }
}

/// How a scheduled job names its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LockNaming {
    /// One lease per slot, `<job>/<slot>` (the default): exactly once per slot.
    #[default]
    PerSlot,
    /// One lease for the job, named exactly [`JobSpec::name`], as ShedLock does: the
    /// lock keeps instances apart and `lock_at_least_for` keeps a late instance from
    /// rerunning a fire time, but a fire time can still run twice if instances' clocks
    /// differ by more than `lock_at_least_for`. Use it to share a lock with Java
    /// ShedLock instances; missed slots are skipped.
    JobName,
}

/// A scheduled singleton job.
///
/// ```
/// use std::time::Duration;
/// use leasehold_jobs::{JobSpec, MissedSlots, Schedule};
/// let spec = JobSpec::new("nightly-payout", Schedule::cron("0 2 * * *")?, Duration::from_secs(60))
///     .lock_at_least_for(Duration::from_secs(30))
///     .missed(MissedSlots::RunLatestOnly)
///     .catch_up(Duration::from_secs(6 * 3600));
/// spec.validate()?;
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The job's name: its slots' leases are `<name>/<slot>` (or `<name>` with
    /// [`LockNaming::JobName`]). Lease-name characters; at most 175 bytes.
    pub name: String,
    /// When it fires.
    pub schedule: Schedule,
    /// The lease TTL while a run goes on (renewed meanwhile): a runner that dies is
    /// replaced about this long after its last renewal. With [`LockAtMost::Absolute`]
    /// ([`JobSpec::at_most`]), also the longest any run holds its slot.
    pub lock_at_most_for: Duration,
    /// What `lock_at_most_for` bounds (default [`LockAtMost::Renewed`]; see there why).
    pub at_most: LockAtMost,
    /// The lease stays taken at least this long after a run started, on the store's
    /// clock (see [`crate::LockConfig::lock_at_least_for`]).
    pub lock_at_least_for: Duration,
    /// The missed-slot policy.
    pub missed: MissedSlots,
    /// How far back an instance looks for slots that are not done (at start-up and
    /// after a pause); older slots nobody started are abandoned, and a slot whose job
    /// failed is given up once its next try would come after it leaves this window
    /// ([`crate::SlotEvent::GivenUp`]). Default: one hour.
    pub catch_up: Duration,
    /// How late a slot may first be tried before it counts as missed. Default:
    /// `lock_at_most_for`.
    pub grace: Duration,
    /// How long a done slot's record stays, on the store's clock. Must exceed
    /// `catch_up + grace + lock_at_most_for`, so no instance looks back at a slot
    /// whose record is gone. Past it (plus [`JobSpec::clock_skew`] on the wall-clock
    /// stores) the scheduler purges the record (see the crate docs: the store stays
    /// bounded). Default: one day.
    pub keep_done_for: Duration,
    /// After a failed run, how long until the slot may be tried again (within
    /// [`JobSpec::max_tries`] and [`JobSpec::catch_up`]). Default: `lock_at_most_for`.
    pub retry_failed_after: Duration,
    /// How many times one instance runs a slot whose job fails before it gives the
    /// slot up ([`crate::SlotEvent::GivenUp`]). The run that gives it up keeps the
    /// slot's failed record for `keep_done_for`, as a done slot's record is kept, so no
    /// instance runs the slot again; the record is then purged like a done one. Each
    /// instance counts its own runs: with `n` instances a slot runs at most `n` times
    /// this. At least 1. Default: 3.
    pub max_tries: u32,
    /// Lease naming.
    pub naming: LockNaming,
    /// The worst difference between the instances' wall clocks, where slots are due on
    /// the wall clock (stores without a clock to read: etcd, ZooKeeper, DynamoDB, S3): a slot may
    /// start up to this much early on an instance whose clock is ahead, and a done
    /// slot's record is purged only `keep_done_for` plus this after the slot. Where
    /// slots are due on the store's clock it is not used. Default: one minute.
    pub clock_skew: Duration,
}

impl JobSpec {
    /// The longest job name accepted (a slot lease name adds 25 bytes).
    pub const MAX_NAME_LEN: usize = 175;

    /// A job with default policies.
    pub fn new(name: impl Into<String>, schedule: Schedule, lock_at_most_for: Duration) -> Self {
        Self {
            name: name.into(),
            schedule,
            lock_at_most_for,
            at_most: LockAtMost::default(),
            lock_at_least_for: Duration::ZERO,
            missed: MissedSlots::default(),
            catch_up: Duration::from_secs(3600),
            grace: lock_at_most_for,
            keep_done_for: Duration::from_secs(86_400),
            retry_failed_after: lock_at_most_for,
            max_tries: 3,
            naming: LockNaming::default(),
            clock_skew: Duration::from_secs(60),
        }
    }

    crate::setters! {
        /// Sets [`JobSpec::lock_at_least_for`].
        lock_at_least_for: Duration;
        /// Sets [`JobSpec::at_most`]: `LockAtMost::Absolute` for ShedLock's meaning of
        /// `lock_at_most_for`.
        at_most: LockAtMost;
        /// Sets the missed-slot policy.
        missed: MissedSlots;
        /// Sets [`JobSpec::catch_up`].
        catch_up: Duration;
        /// Sets [`JobSpec::grace`].
        grace: Duration;
        /// Sets [`JobSpec::keep_done_for`].
        keep_done_for: Duration;
        /// Sets [`JobSpec::retry_failed_after`].
        retry_failed_after: Duration;
        /// Sets [`JobSpec::max_tries`].
        max_tries: u32;
        /// Sets the lease naming.
        naming: LockNaming;
        /// Sets [`JobSpec::clock_skew`].
        clock_skew: Duration;
    }

    /// The lease name of `slot`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if the job name makes an invalid lease name.
    pub fn lease_name(&self, slot: Slot) -> Result<LeaseName> {
        match self.naming {
            LockNaming::PerSlot => LeaseName::new(format!("{}/{}", self.name, slot.key())),
            LockNaming::JobName => LeaseName::new(&self.name),
        }
    }

    /// Checks the values.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the first bad value.
    pub fn validate(&self) -> Result<()> {
        if self.name.len() > Self::MAX_NAME_LEN {
            return Err(Error::invalid(
                "job name",
                format!("longer than {} bytes", Self::MAX_NAME_LEN),
            ));
        }
        LeaseName::new(&self.name)?;
        Ttl::new(self.lock_at_most_for)?;
        if self.max_tries == 0 {
            return Err(Error::invalid("max_tries", "must be at least 1"));
        }
        for (what, d) in [
            ("lock_at_least_for", self.lock_at_least_for),
            ("retry_failed_after", self.retry_failed_after),
            ("keep_done_for", self.keep_done_for),
            ("clock_skew", self.clock_skew),
        ] {
            if d > Ttl::MAX {
                return Err(Error::invalid(what, "longer than 7 days"));
            }
        }
        if self.naming == LockNaming::PerSlot {
            let needed = self.catch_up + self.grace + self.lock_at_most_for;
            if self.keep_done_for <= needed {
                return Err(Error::invalid(
                    "keep_done_for",
                    format!(
                        "must exceed catch_up + grace + lock_at_most_for ({needed:?}), or a done slot could be run again"
                    ),
                ));
            }
        }
        Ok(())
    }
}
