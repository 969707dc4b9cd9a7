//! Waking waiters on `LISTEN/NOTIFY`: one listener connection per store, feeding the
//! core's [`WakeHub`].
//!
//! The statement that releases (or deletes) a lease calls `pg_notify(channel,
//! '<version> <name>')` itself, so the notification is sent exactly when that write
//! commits. One background task per store holds a `LISTEN` connection (its own, opened
//! with the pool's connect options, so it takes no slot of the user's pool) and announces
//! each release to the hub, which wakes **one** acquirer of that name (and every observer) and passes the
//! wake-up on if it goes unused (see [`WakeHub`]). A payload that does not parse (anyone
//! may NOTIFY on the channel) is ignored.
//!
//! When the listener connection is lost (notifications may have been dropped) every
//! waiter wakes; when it cannot be opened, waiters sleep for their [`Wait::after`] like a
//! polling store.

use std::sync::Arc;
use std::time::Duration;

use leasehold_core::LeaseName;
use leasehold_core::store::{Version, Wait, WakeHub};
use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::task::JoinHandle;

/// How long opening the listener connection may take before waiters fall back to sleeping.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause after a listener error before trying again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

#[derive(Debug)]
struct Listening {
    task: JoinHandle<()>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The waiters of one store.
#[derive(Debug)]
pub(crate) struct Waiters {
    pool: PgPool,
    channel: String,
    /// Outlives listener connections: waiters stay registered across a reconnect.
    hub: WakeHub,
    state: tokio::sync::Mutex<Option<Arc<Listening>>>,
}

impl Waiters {
    pub(crate) fn new(pool: PgPool, channel: String) -> Self {
        Self {
            pool,
            channel,
            hub: WakeHub::new(),
            state: tokio::sync::Mutex::new(None),
        }
    }

    /// The running listener, starting it if needed; `true` when it was just started.
    async fn listening(&self) -> Option<(Arc<Listening>, bool)> {
        let mut state = self.state.lock().await;
        if let Some(l) = state.as_ref().filter(|l| !l.task.is_finished()) {
            return Some((l.clone(), false));
        }
        match tokio::time::timeout(CONNECT_TIMEOUT, self.start()).await {
            Ok(Ok(l)) => {
                let l = Arc::new(l);
                *state = Some(l.clone());
                Some((l, true))
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "LISTEN connection failed; waiters poll");
                None
            }
            Err(_) => {
                tracing::debug!("LISTEN connection timed out; waiters poll");
                None
            }
        }
    }

    async fn start(&self) -> Result<Listening, sqlx::Error> {
        let options = (*self.pool.connect_options()).clone();
        let own = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .acquire_timeout(CONNECT_TIMEOUT)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_lazy_with(options);
        let mut listener = PgListener::connect_with(&own).await?;
        listener.ignore_pool_close_event(true);
        listener.listen(&self.channel).await?;
        // Waiters registered while no listener ran may have missed announcements.
        self.hub.wake_all();
        let task = tokio::spawn(run(listener, self.hub.clone()));
        Ok(Listening { task })
    }

    /// Waits until `name` may have changed from `seen` in the way `wait` asks for, or
    /// until it is time to look again.
    pub(crate) async fn wait(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) {
        let deadline = tokio::time::Instant::now() + wait.after();
        let Some((_listening, fresh)) = self.listening().await else {
            tokio::time::sleep_until(deadline).await;
            return;
        };
        if fresh {
            // Anything announced before LISTEN took effect was missed: look again now.
            return;
        }
        let seen = seen.map_or(0, position);
        self.hub.wait(name.as_str(), seen, wait).await;
    }

    /// A write through this store showed `name` at `version` (its outcome): a waiter
    /// woken by a release did what the wake-up was for if that is a newer version.
    pub(crate) fn claimed(&self, name: &LeaseName, version: &Version) {
        self.hub.claimed(name.as_str(), position(version));
    }
}

/// A version's position in the name's history (the row's `version` counter).
fn position(version: &Version) -> u64 {
    u64::try_from(leasehold_sql::row::version_arg(version)).unwrap_or(0)
}

async fn run(mut listener: PgListener, hub: WakeHub) {
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                let Some((version, name)) = n.payload().split_once(' ') else {
                    continue;
                };
                match version.parse::<u64>() {
                    Ok(version) => hub.announce(name, version, true),
                    Err(_) => tracing::debug!(payload = n.payload(), "ignored a notification that is not ours"),
                }
            }
            Ok(None) => {
                // The connection was lost and re-established: announcements may be lost.
                hub.wake_all();
            }
            Err(e) => {
                tracing::debug!(error = %e, "LISTEN connection error");
                hub.wake_all();
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

#[async_trait::async_trait]
impl leasehold_sql::ChangeFeed for Waiters {
    fn claimed(&self, name: &LeaseName, version: &Version) {
        Waiters::claimed(self, name, version);
    }

    async fn wait(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) {
        Waiters::wait(self, name, seen, wait).await;
    }
}
