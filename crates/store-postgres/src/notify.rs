//! Waking waiters on `LISTEN/NOTIFY`: one listener connection per store, fanned out.
//!
//! The statement that releases (or deletes) a lease calls `pg_notify(channel,
//! '<version> <name>')` itself, so the notification is sent exactly when that write
//! commits. One background task per store holds a `LISTEN` connection (its own, opened
//! with the pool's connect options, so it takes no slot of the user's pool), remembers
//! the last version announced per name, and wakes **one** waiter of that name: the
//! longest waiting that has not seen that version.
//!
//! That wake-up is a baton, as in leasehold-etcd's watch: the woken waiter should take the
//! lease. It passes to the next waiter when a waiter waits again having seen the
//! released version (an election observer, not an acquirer), or when nobody in this
//! store has claimed the name [`BATON_PASS`] after the wake-up (the woken waiter went
//! away). A write through this store that shows a version newer than the release (a
//! grant, or a conflict with someone else's grant), or a waiter that has seen one, ends
//! it. So N waiters in one process cost O(1) calls per release instead of N (every one
//! of them trying once, one winning). The price: a waiter that is not woken (an
//! observer behind the acquirer that took the lease) learns of the change at its own
//! `max_wait`, as on etcd.
//!
//! Announcements are kept as the latest per name (NOTIFY arrives in commit order, so a
//! table recreated with versions starting again heals); a payload that does not parse
//! (anyone may NOTIFY on the channel) is ignored.
//!
//! A waiter first subscribes, then checks whether a version newer than the one it saw
//! was announced already, so a release between its refused attempt and its wait is not
//! missed. When the listener connection is lost (notifications may have been dropped)
//! every waiter wakes; when it cannot be opened, waiters sleep for their `max_wait` like
//! a polling store. Spurious wake-ups are allowed by the contract; missed ones only cost
//! up to `max_wait`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use leasehold_core::{LeaseName, store::Version};
use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The most names remembered before those without waiters are forgotten.
const MAX_REMEMBERED: usize = 16_384;
/// How long opening the listener connection may take before waiters fall back to sleeping.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause after a listener error before trying again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How long a waiter woken by a release has to try to claim the lease before the next
/// waiter is woken too (a read and a write take a millisecond or two on a healthy server).
pub(crate) const BATON_PASS: Duration = Duration::from_millis(500);

struct Waiter {
    id: u64,
    seen: i64,
    wake: oneshot::Sender<()>,
}

/// One name's waiters and what was announced for it.
#[derive(Default)]
struct Name {
    /// The version the latest release or delete of the name announced.
    announced: i64,
    waiters: VecDeque<Waiter>,
    /// Bumped by every wake-up; a baton timer only acts if it is still current.
    baton: u64,
    /// Whether a woken waiter holds the baton (nobody has claimed since).
    baton_out: bool,
}

impl Name {
    /// Wakes the longest-waiting waiter that has not seen the announced version and
    /// hands it the baton; `Some(generation)` for the timer that passes it on.
    fn wake_one(&mut self) -> Option<u64> {
        self.baton_out = false;
        while let Some(i) = self.waiters.iter().position(|w| w.seen < self.announced) {
            let Some(w) = self.waiters.remove(i) else { break };
            if w.wake.send(()).is_ok() {
                self.baton += 1;
                self.baton_out = true;
                return Some(self.baton);
            }
        }
        None
    }
}

/// What the listener task and the waiters share.
#[derive(Default)]
struct Board {
    names: Mutex<HashMap<String, Name>>,
    next_id: AtomicU64,
}

impl Board {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Name>> {
        self.names.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A release or delete of `name` at `version` committed.
    fn announce(self: &Arc<Self>, name: &str, version: i64) {
        let mut names = self.lock();
        if names.len() >= MAX_REMEMBERED && !names.contains_key(name) {
            names.retain(|_, n| !n.waiters.is_empty());
        }
        let n = names.entry(name.to_owned()).or_default();
        n.announced = version;
        let timer = n.wake_one();
        drop(names);
        self.pass_later(name, timer);
    }

    /// Announcements may have been missed: every waiter looks again.
    fn wake_all(&self) {
        for n in self.lock().values_mut() {
            n.baton_out = false;
            for w in n.waiters.drain(..) {
                let _ = w.wake.send(());
            }
        }
    }

    /// A write through this store showed `name` at `version`: newer than the release,
    /// the lease was claimed and the baton did its work.
    fn claimed(&self, name: &str, version: i64) {
        if let Some(n) = self.lock().get_mut(name) {
            if version > n.announced {
                n.baton_out = false;
            }
        }
    }

    /// Forgets waiter `id` (woken, timed out or cancelled), and the name too when
    /// nothing about it is left to remember.
    fn leave(&self, name: &str, id: u64) {
        let mut names = self.lock();
        if let Some(n) = names.get_mut(name) {
            n.waiters.retain(|w| w.id != id);
            if n.waiters.is_empty() && n.announced == 0 && !n.baton_out {
                names.remove(name);
            }
        }
    }

    /// Passes the baton of wake-up `generation` on if nobody claimed within `BATON_PASS`.
    fn pass_later(self: &Arc<Self>, name: &str, generation: Option<u64>) {
        let Some(generation) = generation else { return };
        let board: Weak<Self> = Arc::downgrade(self);
        let name = name.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(BATON_PASS).await;
            let Some(board) = board.upgrade() else { return };
            let timer = {
                let mut names = board.lock();
                let Some(n) = names.get_mut(&name) else { return };
                if !(n.baton_out && n.baton == generation) {
                    return;
                }
                n.wake_one()
            };
            board.pass_later(&name, timer);
        });
    }
}

#[derive(Debug)]
struct Listening {
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Board").field("names", &self.lock().len()).finish()
    }
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
    board: Arc<Board>,
    state: tokio::sync::Mutex<Option<Arc<Listening>>>,
}

impl Waiters {
    pub(crate) fn new(pool: PgPool, channel: String) -> Self {
        Self {
            pool,
            channel,
            board: Arc::new(Board::default()),
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
        self.board.wake_all();
        let task = tokio::spawn(run(listener, self.board.clone()));
        Ok(Listening { task })
    }

    /// Waits until `name` may have changed from `seen`, or `max_wait` passed.
    pub(crate) async fn wait(&self, name: &LeaseName, seen: Option<&Version>, max_wait: Duration) {
        let deadline = tokio::time::Instant::now() + max_wait;
        let Some((_listening, fresh)) = self.listening().await else {
            tokio::time::sleep_until(deadline).await;
            return;
        };
        if fresh {
            // Anything announced before LISTEN took effect was missed: look again now.
            return;
        }
        let seen = seen.map_or(0, leasehold_sql::row::version_arg);
        let board = &self.board;
        let id = board.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let timer = {
            let mut names = board.lock();
            let n = names.entry(name.as_str().to_owned()).or_default();
            if n.announced > seen {
                // Released after the caller looked: look again now.
                return;
            }
            let timer = if n.baton_out && seen == n.announced && seen > 0 {
                // The caller saw the released record and waits rather than claiming it
                // (an observer): the baton goes to a waiter that has not seen it.
                n.wake_one()
            } else {
                if seen > n.announced {
                    // The caller saw a newer record than the release: it was claimed.
                    n.baton_out = false;
                }
                None
            };
            n.waiters.push_back(Waiter { id, seen, wake: tx });
            timer
        };
        board.pass_later(name.as_str(), timer);
        // Removes the registration however this future ends, dropped included.
        let _leave = Leave {
            board,
            name: name.as_str(),
            id,
        };
        let _ = tokio::time::timeout_at(deadline, rx).await;
    }

    /// A write through this store showed `name` at `version` (its outcome): a waiter
    /// woken by a release did what the wake-up was for if that is a newer version.
    pub(crate) fn claimed(&self, name: &LeaseName, version: &Version) {
        self.board
            .claimed(name.as_str(), leasehold_sql::row::version_arg(version));
    }
}

/// Drop guard of one registered wait.
struct Leave<'a> {
    board: &'a Board,
    name: &'a str,
    id: u64,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.board.leave(self.name, self.id);
    }
}

async fn run(mut listener: PgListener, board: Arc<Board>) {
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                let Some((version, name)) = n.payload().split_once(' ') else {
                    continue;
                };
                match version.parse::<i64>() {
                    Ok(version) => board.announce(name, version),
                    Err(_) => tracing::debug!(payload = n.payload(), "ignored a notification that is not ours"),
                }
            }
            Ok(None) => {
                // The connection was lost and re-established: announcements may be lost.
                board.wake_all();
            }
            Err(e) => {
                tracing::debug!(error = %e, "LISTEN connection error");
                board.wake_all();
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

    async fn wait(&self, name: &LeaseName, seen: Option<&Version>, max_wait: Duration) {
        Waiters::wait(self, name, seen, max_wait).await;
    }
}
