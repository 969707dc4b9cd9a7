//! The callback style of Kubernetes client-go's `leaderelection` package, fenced.

use std::fmt;
use std::future::Future;

use futures::StreamExt;
use futures::future::BoxFuture;
use leasehold_core::{LossCause, Result};
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::{Election, Leader, LeaderContext};

type Started = Box<dyn FnMut(LeaderContext) -> BoxFuture<'static, ()> + Send>;
type Stopped = Box<dyn FnMut(LossCause) + Send>;
type NewLeader = Box<dyn FnMut(Option<Leader>) + Send>;

/// What [`Election::run`] calls: client-go's `OnStartedLeading`, `OnStoppedLeading`
/// and `OnNewLeader`.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{LeaseClient, MemoryStore};
/// use leasehold_election::{Callbacks, Election};
/// use tokio_util::sync::CancellationToken;
///
/// let election = Election::new(LeaseClient::new(MemoryStore::new()), "controller", Duration::from_secs(2))?;
/// let shutdown = CancellationToken::new();
/// let stop = shutdown.clone();
/// let callbacks = Callbacks::new(move |ctx| {
///     let stop = stop.clone();
///     async move {
///         // Lead until the context is cancelled; every write carries ctx.token().
///         println!("leading with token {}", ctx.token());
///         stop.cancel(); // (the example stops at once)
///         ctx.cancelled().await;
///     }
/// })
/// .on_stopped_leading(|cause| println!("stopped leading: {cause}"))
/// .on_new_leader(|leader| println!("leader is now {leader:?}"));
/// election.run(callbacks, shutdown).await?;
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
pub struct Callbacks {
    started: Started,
    stopped: Stopped,
    new_leader: Option<NewLeader>,
}

impl fmt::Debug for Callbacks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callbacks")
            .field("on_new_leader", &self.new_leader.is_some())
            .finish_non_exhaustive()
    }
}

impl Callbacks {
    /// Callbacks whose leader work is `on_started_leading`: it runs as a task each time
    /// this candidate becomes leader, with a [`LeaderContext`] carrying the token and a
    /// cancellation that fires when the tenure ends. It must return soon after the
    /// cancellation fires; returning earlier resigns leadership (and this candidate
    /// then waits one [`crate::ElectionConfig::observe_interval`] before campaigning
    /// again, so the others get a turn). A panic in it ends [`Election::run`] with that
    /// panic, once the lease is released.
    pub fn new<F, Fut>(mut on_started_leading: F) -> Self
    where
        F: FnMut(LeaderContext) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Self {
            started: Box::new(move |ctx| Box::pin(on_started_leading(ctx))),
            stopped: Box::new(|_| {}),
            new_leader: None,
        }
    }

    /// Called when a tenure ends, once its work has stopped and the lease was let go,
    /// with the cause ([`LossCause::Released`] for a resignation or shutdown).
    #[must_use]
    pub fn on_stopped_leading(mut self, f: impl FnMut(LossCause) + Send + 'static) -> Self {
        self.stopped = Box::new(f);
        self
    }

    /// Called with each change of leader seen by [`Election::observe`] (including this
    /// candidate's own tenures), `None` while nobody leads.
    #[must_use]
    pub fn on_new_leader(mut self, f: impl FnMut(Option<Leader>) + Send + 'static) -> Self {
        self.new_leader = Some(Box::new(f));
        self
    }
}

/// The task of a tenure's work, aborted when dropped: a `run` future dropped while it
/// leads (a `select!`, a timeout) asks the work to stop before the lease's release is
/// sent (the task stops at its next await, or when it is next polled).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Election {
    /// Campaigns, leads and campaigns again until `shutdown` is cancelled, calling
    /// `callbacks` (the client-go `RunOrDie` loop, with `ReleaseOnCancel`).
    ///
    /// Each tenure ends when the lease is lost, when the started-leading work returns,
    /// or at shutdown; in every case the work's context is cancelled first and the work
    /// is given [`crate::ElectionConfig::stop_grace`] to return before its task is
    /// aborted, while the lease is still held; then the lease is let go (at shutdown and
    /// when the work returned, released, so another candidate takes over at once), and
    /// only then is `on_stopped_leading` called. After a loss the lease keeps others out
    /// only until its TTL runs out: work that needs longer than the margin to stop may
    /// overlap the next leader's, which the fencing token guards against.
    ///
    /// Dropping the future while it leads aborts the work's task (it stops at its next
    /// await) and then releases the lease in the background, without waiting for the
    /// work to stop and without calling `on_stopped_leading`: cancel `shutdown` for an
    /// orderly end.
    ///
    /// # Panics
    /// With the panic of the started-leading work, once the lease is released and
    /// `on_stopped_leading` called (leading again would only panic again).
    ///
    /// # Errors
    /// A store error retrying cannot fix (a misconfigured store, a corrupt record).
    pub async fn run(&self, mut callbacks: Callbacks, shutdown: CancellationToken) -> Result<()> {
        let running = CancellationToken::new();
        let _stop_observer = running.clone().drop_guard();
        if let Some(mut on_new) = callbacks.new_leader.take() {
            let stream = self.observe();
            let name = self.name().clone();
            tokio::spawn(async move {
                let mut stream = std::pin::pin!(stream);
                loop {
                    tokio::select! {
                        () = running.cancelled() => break,
                        item = stream.next() => match item {
                            Some(Ok(leader)) => on_new(leader),
                            Some(Err(e)) => {
                                tracing::warn!(election = %name, error = %e, "observing the leader failed");
                                break;
                            }
                            None => break,
                        },
                    }
                }
            });
        }
        loop {
            let leadership = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                won = self.campaign() => won?,
            };
            tracing::info!(election = %self.name(), token = %leadership.token(), "started leading");
            // Declared after `leadership`: should `run` be dropped here, the work is
            // aborted before the lease is released.
            let mut work = AbortOnDrop(tokio::spawn((callbacks.started)(leadership.context())));
            let mut ended = None;
            let cause = tokio::select! {
                biased;
                cause = leadership.lost() => Some(cause),
                () = shutdown.cancelled() => None,
                done = &mut work.0 => { ended = Some(done); None }
            };
            // The work may have returned because the loss cancelled its context.
            let cause = cause.or_else(|| leadership.loss_cause());
            // The work stops first, while the lease is still held (or, lost, still
            // keeps others out until its TTL): its context is cancelled, and it has
            // `stop_grace` to return before its task is aborted. Only then is the lease
            // let go, so the next leader's work does not start beside it.
            leadership.cancel_context();
            let by_itself = ended.is_some();
            let ended = match ended {
                Some(done) => Some(done),
                None => self.stop_work(&mut work.0).await,
            };
            let cause = match cause {
                Some(cause) => {
                    drop(leadership);
                    cause
                }
                None => {
                    // A store that does not answer must not hold up the loop (the lease
                    // then expires).
                    match tokio::time::timeout(self.config().ttl, leadership.resign()).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            tracing::warn!(election = %self.name(), error = %e, "resign failed; the lease will expire");
                        }
                        Err(_) => {
                            tracing::warn!(election = %self.name(), "resign timed out; the lease will expire");
                        }
                    }
                    LossCause::Released
                }
            };
            tracing::info!(election = %self.name(), cause = cause.label(), detail = %cause, "stopped leading");
            (callbacks.stopped)(cause);
            if let Some(Err(e)) = ended {
                if e.is_panic() {
                    // As if the work had run in the caller's task: leading again would
                    // only panic again, in a loop of grants and releases.
                    std::panic::resume_unwind(e.into_panic());
                }
            }
            if shutdown.is_cancelled() {
                return Ok(());
            }
            if by_itself {
                // The work returned by itself: give other candidates a turn before
                // campaigning again, rather than taking the lease straight back.
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(self.config().observe_interval) => {}
                }
            }
        }
    }

    /// Waits for leader work whose context was cancelled, for
    /// [`crate::ElectionConfig::stop_grace`]; aborts it if it has not returned by then,
    /// and waits as long again for the abort to take effect (at its next await). Its
    /// outcome, if it ended.
    async fn stop_work(&self, work: &mut JoinHandle<()>) -> Option<std::result::Result<(), JoinError>> {
        let grace = self.config().stop_grace;
        if let Ok(done) = tokio::time::timeout(grace, &mut *work).await {
            return Some(done);
        }
        tracing::warn!(election = %self.name(), "leader work ignored its cancellation; aborting it");
        work.abort();
        let done = tokio::time::timeout(grace, &mut *work).await.ok();
        if done.is_none() {
            tracing::warn!(election = %self.name(), "aborted leader work has not stopped (blocking code?); letting the lease go");
        }
        done
    }
}
