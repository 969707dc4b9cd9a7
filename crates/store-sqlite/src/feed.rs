//! Waking SQLite waiters without sleeping out a TTL, across processes.
//!
//! SQLite has no notifications, but every connection can ask `PRAGMA data_version`,
//! which changes whenever *another* connection (of this process or of any other on the
//! host) has committed to the file since it last asked. While any waiter of a store
//! waits, one poller task asks it every [`POLL`] on a connection of its own (a local
//! file read, microseconds) and, when it changes, wakes the store's waiters; each reads
//! its lease's version (one `SELECT`) and returns only if it moved from the one it saw.
//! The first look comes before any wait, so a release that landed just before the
//! waiter started is not missed. With nobody waiting for [`IDLE_CLOSE`], the poller
//! stops and closes its connection.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::LeaseName;
use leasehold_core::fence::Dialect;
use leasehold_core::store::{Version, Wait};
use leasehold_sql::{ChangeFeed, LeaseTable};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{AssertSqlSafe, Connection, SqlitePool};
use tokio::sync::watch;

/// How often the poller reads `PRAGMA data_version` while someone waits.
pub(crate) const POLL: Duration = Duration::from_millis(5);

/// How long the poller keeps running after the last waiter left.
const IDLE_CLOSE: Duration = Duration::from_secs(1);

/// A store's waiters on one SQLite file.
pub(crate) struct DataVersionFeed {
    pool: SqlitePool,
    options: SqliteConnectOptions,
    /// `SELECT` of one name's current version (`NULL`: absent or deleted).
    version_sql: String,
    /// Counts the changes the poller saw; waiters wait for it to move.
    changes: watch::Sender<u64>,
    state: Mutex<PollerState>,
    me: Weak<Self>,
}

#[derive(Default)]
struct PollerState {
    running: bool,
    waiting: usize,
}

impl DataVersionFeed {
    pub(crate) fn new(pool: &SqlitePool, table: &LeaseTable) -> Arc<Self> {
        let (changes, _) = watch::channel(0);
        Arc::new_cyclic(|me| Self {
            pool: pool.clone(),
            options: (*pool.connect_options()).clone(),
            version_sql: format!(
                "SELECT CASE WHEN deleted <> 0 THEN NULL ELSE version END FROM {} WHERE name = ?1",
                table.quoted(Dialect::Sqlite)
            ),
            changes,
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

    /// `name`'s version now, or `Err` if it could not be read.
    async fn current(&self, name: &LeaseName) -> Result<Option<String>, sqlx::Error> {
        let v: Option<Option<i64>> = sqlx::query_scalar(AssertSqlSafe(self.version_sql.clone()))
            .bind(name.as_str())
            .fetch_optional(&self.pool)
            .await?;
        Ok(v.flatten().map(|v| v.to_string()))
    }

    /// Stops the poller if nobody waits (decided under the lock [`Self::enter`] takes).
    fn stop_if_idle(&self) -> bool {
        let mut st = self.lock();
        if st.waiting > 0 {
            return false;
        }
        st.running = false;
        true
    }
}

/// One waiter, registered while it lives (a dropped wait leaves too).
struct Waiting(Arc<DataVersionFeed>);

impl Waiting {
    /// Registers a waiter, starting the poller if it is not running.
    fn enter(feed: &Arc<DataVersionFeed>) -> Self {
        let mut st = feed.lock();
        st.waiting += 1;
        if !st.running {
            st.running = true;
            tokio::spawn(poll(Arc::downgrade(feed)));
        }
        drop(st);
        Self(feed.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.waiting = st.waiting.saturating_sub(1);
    }
}

/// The poller: reads `PRAGMA data_version` every [`POLL`] while anyone waits.
///
/// Each (re)opened connection starts from a baseline it has not compared with anything:
/// a commit just before it would go unseen, so the waiters are woken once then (they read
/// their lease again and, if nothing changed, wait on the baseline).
async fn poll(feed: Weak<DataVersionFeed>) {
    let mut conn: Option<SqliteConnection> = None;
    let mut last: Option<i64> = None;
    let mut idle_since: Option<tokio::time::Instant> = None;
    loop {
        let Some(f) = feed.upgrade() else { return };
        if f.lock().waiting == 0 {
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
                        // A change, or a new baseline (see above): wake the waiters.
                        f.changes.send_modify(|n| *n += 1);
                    }
                    last = Some(v);
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
    fn claimed(&self, _name: &LeaseName, _version: &Version) {}

    async fn wait(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) {
        // `wait` is called on the store's `Arc`; the poller holds only a `Weak`.
        let Some(me) = self.me() else {
            tokio::time::sleep(wait.after()).await;
            return;
        };
        let deadline = tokio::time::Instant::now() + wait.after();
        let mut rx = self.changes.subscribe();
        let _waiting = Waiting::enter(&me);
        // Look first: a change that landed after the caller's read and before the
        // subscription would otherwise be missed. Then look again at each commit to the
        // file, and return only when the lease's version moved: a commit of another name,
        // or a refused attempt (which rewrites a row without changing its version), wakes
        // nobody up for good, so waiters never wake each other in turn.
        loop {
            match self.current(name).await {
                Ok(now) if now.as_deref() != seen.map(Version::as_str) => return,
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(lease = %name, error = %e, "cannot read the lease's version; waking");
                    return;
                }
            }
            if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
                return;
            }
        }
    }
}
