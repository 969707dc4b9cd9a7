//! What a scheduled job tells the scheduler about its slot.

/// What a scheduled job's run did with its slot, as the job itself knows it: it
/// committed the slot's effect, or it found the slot already done in the protected
/// data (another instance committed it, and this run wrote nothing).
///
/// The scheduler reports [`crate::SlotEvent::Ran`] only for [`SlotOutcome::Committed`]
/// and [`crate::SlotEvent::DoneElsewhere`] for [`SlotOutcome::AlreadyDone`]. A job
/// returning `Ok(())` says `Committed` (`()` converts into it).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{LeaseClient, MemoryStore};
/// use leasehold_jobs::{JobSpec, Schedule, Scheduler, SlotOutcome, TokioWallClock};
/// use tokio_util::sync::CancellationToken;
///
/// // The job's transaction: `INSERT INTO job_runs(job, slot, token) ... ON CONFLICT DO
/// // UPDATE ... WHERE NOT job_runs.done` touched no row: another run committed the slot.
/// async fn commit(_slot: u64) -> Result<bool, std::io::Error> { Ok(false) }
///
/// let spec = JobSpec::new("report", Schedule::every(Duration::from_secs(10))?, Duration::from_secs(5));
/// let shutdown = CancellationToken::new();
/// let stop = shutdown.clone();
/// Scheduler::new(LeaseClient::new(MemoryStore::new()))
///     .with_wall_clock(TokioWallClock::starting_at(1_800_000_000_000))
///     .run(spec, move |ctx| {
///         let stop = stop.clone();
///         async move {
///             let committed = commit(ctx.slot().map_or(0, |s| s.unix_ms())).await?;
///             stop.cancel();
///             Ok::<_, std::io::Error>(if committed { SlotOutcome::Committed } else { SlotOutcome::AlreadyDone })
///         }
///     }, shutdown)
///     .await?;
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SlotOutcome {
    /// This run committed the slot's effect (what `Ok(())` means).
    #[default]
    Committed,
    /// The slot was already done in the protected data; this run committed nothing.
    AlreadyDone,
}

impl From<()> for SlotOutcome {
    fn from((): ()) -> Self {
        Self::Committed
    }
}
