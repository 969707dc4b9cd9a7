//! Waking SQLite waiters without sleeping out a TTL, across processes.
//!
//! SQLite has no notifications, but every connection can ask `PRAGMA data_version`,
//! which changes whenever *another* connection (of this process or of any other on the
//! host) has committed to the file since it last asked. While any waiter of a store
//! waits, one poller task asks it every [`POLL`] on a connection of its own (a local
//! file read that writes nothing) and, when it changes, reads the version of each name that
//! has waiters (one `SELECT` each) and announces it to the store's [`WakeHub`]: a
//! released (vacant) or deleted record wakes **one** acquirer (every change, every
//! observer), and waiters to claim wait
//! in line, as on the stores that push. A waiter looks once after it registered, so a
//! release that landed just before it started is not missed. With nobody waiting for
//! [`IDLE_CLOSE`], the poller stops and closes its connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::LeaseName;
use leasehold_core::fence::Dialect;
use leasehold_core::store::{Version, Wait, WakeHub};
use leasehold_sql::{ChangeFeed, LeaseTable};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{AssertSqlSafe, Connection, SqlitePool};

/// How often the poller reads `PRAGMA data_version` while someone waits.
pub(crate) const POLL: Duration = Duration::from_millis(5);

/// How long the poller keeps running after the last waiter left.
const IDLE_CLOSE: Duration = Duration::from_secs(1);

/// A store's waiters on one SQLite file.
pub(crate) struct DataVersionFeed {
    pool: SqlitePool,
    options: SqliteConnectOptions,
    /// `SELECT` of one name's row version, whether it is deleted, and whether it is
    /// free to take (released or deleted).
    version_sql: String,
    /// The waiters, woken by the changes the poller announces.
    hub: WakeHub,
    state: Mutex<PollerState>,
    me: Weak<Self>,
}

#[derive(Default)]
struct PollerState {
    running: bool,
    /// Waiters per name.
    waiting: HashMap<LeaseName, usize>,
}

/// A name's row as the poller reads it: `None` when there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Now(Option<Row>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Row {
    version: i64,
    /// Deleted: the store reads it as absent.
    deleted: bool,
    /// Free to take: released (vacant) or deleted.
    free: bool,
}

impl DataVersionFeed {
    pub(crate) fn new(pool: &SqlitePool, table: &LeaseTable) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            pool: pool.clone(),
            options: (*pool.connect_options()).clone(),
            version_sql: format!(
                "SELECT version, deleted <> 0, deleted <> 0 OR holder IS NULL FROM {} WHERE name = ?1",
                table.quoted(Dialect::Sqlite)
            ),
            hub: WakeHub::new(),
            state: Mutex::new(PollerState::default()),
            me: me.clone(),
        })
    }

    fn me(&self) -> Option<Arc<Self>> {
        self.me.upgrade()
    }

    fn lock(&self) -> MutexGuard<'_, PollerState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `name`'s record now, or `Err` if it could not be read.
    async fn current(&self, name: &LeaseName) -> Result<Now, sqlx::Error> {
        let row: Option<(i64, bool, bool)> = sqlx::query_as(AssertSqlSafe(self.version_sql.clone()))
            .bind(name.as_str())
            .fetch_optional(&self.pool)
            .await?;
        Ok(Now(row.map(|(version, deleted, free)| Row { version, deleted, free })))
    }

    /// Announces what each name with waiters shows now (after a commit to the file).
    async fn announce_all(&self) {
        let names: Vec<LeaseName> = self.lock().waiting.keys().cloned().collect();
        for name in names {
            match self.current(&name).await {
                Ok(now) => self.announce(&name, now),
                Err(e) => {
                    tracing::debug!(lease = %name, error = %e, "cannot read the lease's version; waking every waiter");
                    self.hub.wake_all();
                    return;
                }
            }
        }
    }

    fn announce(&self, name: &LeaseName, now: Now) {
        // No row: nothing happened to announce.
        let Some(row) = now.0 else { return };
        let Ok(at) = u64::try_from(row.version) else { return };
        if row.deleted {
            self.hub.announce_deleted(name.as_str(), at);
        } else {
            self.hub.announce(name.as_str(), at, row.free);
        }
    }

    /// Stops the poller if nobody waits (decided under the lock [`Self::enter`] takes).
    fn stop_if_idle(&self) -> bool {
        let mut st = self.lock();
        if !st.waiting.is_empty() {
            return false;
        }
        st.running = false;
        true
    }
}

/// One waiter of a name, registered while it lives (a dropped wait leaves too).
struct Waiting(Arc<DataVersionFeed>, LeaseName);

impl Waiting {
    /// Registers a waiter of `name`, starting the poller if it is not running.
    fn enter(feed: &Arc<DataVersionFeed>, name: &LeaseName) -> Self {
        let mut st = feed.lock();
        *st.waiting.entry(name.clone()).or_default() += 1;
        if !st.running {
            st.running = true;
            tokio::spawn(poll(Arc::downgrade(feed)));
        }
        drop(st);
        Self(feed.clone(), name.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        if let Some(n) = st.waiting.get_mut(&self.1) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                st.waiting.remove(&self.1);
            }
        }
    }
}

/// The poller: reads `PRAGMA data_version` every [`POLL`] while anyone waits.
///
/// Each (re)opened connection starts from a baseline it has not compared with anything:
/// a commit just before it would go unseen, so the names with waiters are read and
/// announced then too (a waiter whose lease did not change is not woken).
async fn poll(feed: Weak<DataVersionFeed>) {
    let mut conn: Option<SqliteConnection> = None;
    let mut last: Option<i64> = None;
    let mut idle_since: Option<tokio::time::Instant> = None;
    loop {
        let Some(f) = feed.upgrade() else { return };
        if f.lock().waiting.is_empty() {
            let since = *idle_since.get_or_insert_with(tokio::time::Instant::now);
            if since.elapsed() >= IDLE_CLOSE && f.stop_if_idle() {
                return;
            }
        } else {
            idle_since = None;
        }
        if conn.is_none() {
            match SqliteConnection::connect_with(&f.options).await {
                Ok(c) => conn = Some(c),
                Err(e) => tracing::debug!(error = %e, "the SQLite change poller cannot open the file; retrying"),
            }
            last = None;
        }
        if let Some(c) = conn.as_mut() {
            match sqlx::query_scalar::<_, i64>("PRAGMA data_version")
                .fetch_one(&mut *c)
                .await
            {
                Ok(v) => {
                    if last != Some(v) {
                        // A change, or a new baseline (see above).
                        last = Some(v);
                        f.announce_all().await;
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "PRAGMA data_version failed; reopening");
                    conn = None;
                }
            }
        }
        drop(f);
        tokio::time::sleep(POLL).await;
    }
}

#[async_trait]
impl ChangeFeed for DataVersionFeed {
    fn claimed(&self, name: &LeaseName, version: &Version) {
        if let Ok(at) = version.as_str().parse::<u64>() {
            self.hub.claimed(name.as_str(), at);
        }
    }

    async fn wait(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) {
        // `wait` is called on the store's `Arc`; the poller holds only a `Weak`.
        let Some(me) = self.me() else {
            tokio::time::sleep(wait.after()).await;
            return;
        };
        let seen_at = seen.and_then(|v| v.as_str().parse::<u64>().ok()).unwrap_or(0);
        let _waiting = Waiting::enter(&me, name);
        let mut waiting = std::pin::pin!(self.hub.wait(name.as_str(), seen_at, wait));
        // Registered first (or a change the caller has not seen was announced already),
        // then a look: a change that landed after the caller's read and before the
        // poller's next read would otherwise be missed. What the look finds is announced
        // like the poller's reads, so the hub still wakes the waiters for it (this one,
        // if it is an observer or the first claimer). After that, the poller announces each commit's effect on the
        // name: a commit of another name, or a refused attempt (which rewrites a row
        // without changing its version), wakes nobody.
        if futures::poll!(waiting.as_mut()).is_ready() {
            return;
        }
        match self.current(name).await {
            Ok(now) => self.announce(name, now),
            Err(e) => {
                tracing::debug!(lease = %name, error = %e, "cannot read the lease's version; waking");
                return;
            }
        }
        waiting.await;
    }
}
