//! Waking waiters on `LISTEN/NOTIFY`: one listener connection per store, fanned out.
//!
//! The statement that releases (or deletes) a lease calls `pg_notify(channel,
//! '<version> <name>')` itself, so the notification is sent exactly when that write
//! commits. One background task per store holds a `LISTEN` connection (its own, opened
//! with the pool's connect options, so it takes no slot of the user's pool), remembers
//! the last version announced per name, and wakes the waiters of that name.
//!
//! A waiter first subscribes, then checks whether a version newer than the one it saw
//! was announced already, so a release between its refused attempt and its wait is not
//! missed. When the listener connection is lost (notifications may have been dropped)
//! every waiter wakes; when it cannot be opened, waiters sleep for their `max_wait` like
//! a polling store. Spurious wake-ups are allowed by the contract; missed ones only cost
//! up to `max_wait`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lease_core::{LeaseName, Version};
use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

/// The most names whose last announced version is remembered before the map is cleared.
const MAX_REMEMBERED: usize = 16_384;
/// How long opening the listener connection may take before waiters fall back to sleeping.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause after a listener error before trying again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

#[derive(Debug, Clone)]
enum Wake {
    Name(Arc<str>),
    All,
}

#[derive(Debug)]
struct Listening {
    tx: broadcast::Sender<Wake>,
    announced: Arc<Mutex<HashMap<String, i64>>>,
    task: JoinHandle<()>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Listening {
    fn announced(&self, name: &str) -> Option<i64> {
        self.announced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .copied()
    }
}

/// The waiters of one store.
#[derive(Debug)]
pub(crate) struct Waiters {
    pool: PgPool,
    channel: String,
    state: tokio::sync::Mutex<Option<Arc<Listening>>>,
}

impl Waiters {
    pub(crate) fn new(pool: PgPool, channel: String) -> Self {
        Self {
            pool,
            channel,
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
        let (tx, _) = broadcast::channel(1024);
        let announced = Arc::new(Mutex::new(HashMap::new()));
        let task = tokio::spawn(run(listener, tx.clone(), announced.clone()));
        Ok(Listening { tx, announced, task })
    }

    /// Waits until `name` may have changed from `seen`, or `max_wait` passed.
    pub(crate) async fn wait(&self, name: &LeaseName, seen: Option<&Version>, max_wait: Duration) {
        let deadline = tokio::time::Instant::now() + max_wait;
        let Some((listening, fresh)) = self.listening().await else {
            tokio::time::sleep_until(deadline).await;
            return;
        };
        if fresh {
            // Anything announced before LISTEN took effect was missed: look again now.
            return;
        }
        let mut rx = listening.tx.subscribe();
        let seen = seen.map_or(0, sql_lease::row::version_arg);
        if listening.announced(name.as_str()).is_some_and(|v| v > seen) {
            return;
        }
        let woken = async {
            loop {
                match rx.recv().await {
                    Ok(Wake::Name(n)) if *n == *name.as_str() => return,
                    Ok(Wake::Name(_)) => {}
                    Ok(Wake::All) | Err(broadcast::error::RecvError::Lagged(_)) => return,
                    Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        let _ = tokio::time::timeout_at(deadline, woken).await;
    }
}

async fn run(mut listener: PgListener, tx: broadcast::Sender<Wake>, announced: Arc<Mutex<HashMap<String, i64>>>) {
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                let Some((version, name)) = n.payload().split_once(' ') else {
                    continue;
                };
                let version = version.parse::<i64>().unwrap_or(i64::MAX);
                {
                    let mut map = announced.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    if map.len() >= MAX_REMEMBERED && !map.contains_key(name) {
                        map.clear();
                    }
                    let v = map.entry(name.to_owned()).or_insert(version);
                    *v = (*v).max(version);
                }
                let _ = tx.send(Wake::Name(Arc::from(name)));
            }
            Ok(None) => {
                // The connection was lost and re-established: announcements may be lost.
                let _ = tx.send(Wake::All);
            }
            Err(e) => {
                tracing::debug!(error = %e, "LISTEN connection error");
                let _ = tx.send(Wake::All);
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}
