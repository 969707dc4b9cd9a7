//! A simulated Java ShedLock instance on a [`Db`], and the log of who held a lock
//! when, stamped by the database clock.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use leasehold_core::FencingToken;

use super::{Db, Dialect};

/// A Java ShedLock instance (`JdbcTemplateLockProvider` with `usingDbTime()`),
/// running ShedLock's own statements for the database.
pub struct JavaShedLock<S: Dialect> {
    /// The database.
    pub db: Db<S>,
    /// The ShedLock table, as the instance names it in its statements.
    pub table: String,
    /// The instance's host name, which it writes in `locked_by`.
    pub locked_by: String,
    /// The names this instance has tried to insert, as ShedLock's `LockRecordRegistry`
    /// keeps them: only a name's first attempt inserts its row.
    tried: Mutex<HashSet<String>>,
}

impl<S: Dialect> JavaShedLock<S> {
    /// An instance with host name `locked_by` on `table`.
    pub fn new(db: &Db<S>, table: &str, locked_by: &str) -> Self {
        Self {
            db: db.clone(),
            table: table.to_owned(),
            locked_by: locked_by.to_owned(),
            tried: Mutex::default(),
        }
    }

    /// `StorageBasedLockProvider.lock`: the insert (first use of a name here), or the
    /// update of an expired row; whether it took the lock.
    pub async fn lock(&self, name: &str, at_most: Duration) -> bool {
        let first = self.tried.lock().expect("tried").insert(name.to_owned());
        S::java_lock(self, name, at_most, first).await
    }

    /// `unlock`: keeps the lock until `locked_at + lockAtLeastFor` if that is later.
    pub async fn unlock(&self, name: &str, at_least: Duration) {
        S::java_unlock(self, name, at_least).await;
    }
}

/// A log of who held the lock when, stamped by the database clock at each call
/// ([`Dialect::CLOCK`]), to check that no two holders ever overlapped.
pub struct HolderLog<S: Dialect> {
    db: Db<S>,
    table: String,
    /// The last tenure's id.
    last: AtomicI64,
}

impl<S: Dialect> HolderLog<S> {
    /// A fresh log table.
    pub async fn new(db: &Db<S>) -> Self {
        let table = S::quoted(&format!("{}_log", db.fresh_name().await));
        let time = S::TIMESTAMP;
        db.exec(format!(
            "CREATE TABLE {table} (id BIGINT PRIMARY KEY, who VARCHAR(64) NOT NULL, token BIGINT, \
             started {time} NOT NULL, ended {time})"
        ))
        .await;
        Self {
            db: db.clone(),
            table,
            last: AtomicI64::new(0),
        }
    }

    /// Holds for 30 ms as `who` (a plain label; with `token` if a Rust holder), logged.
    pub async fn hold(&self, who: &str, token: Option<FencingToken>) {
        let (log, clock) = (&self.table, S::CLOCK);
        let id = self.last.fetch_add(1, Ordering::Relaxed) + 1;
        let token = token.map_or_else(|| "NULL".to_owned(), |t| t.to_i64().expect("token").to_string());
        self.db
            .exec(format!(
                "INSERT INTO {log} (id, who, token, started) VALUES ({id}, '{who}', {token}, {clock})"
            ))
            .await;
        tokio::time::sleep(Duration::from_millis(30)).await;
        self.db
            .exec(format!("UPDATE {log} SET ended = {clock} WHERE id = {id}"))
            .await;
    }

    /// How many logged tenures overlapped another.
    pub async fn overlaps(&self) -> i64 {
        let log = &self.table;
        self.db
            .count(format!(
                "SELECT COUNT(*) FROM {log} a JOIN {log} b ON a.id < b.id \
                 WHERE a.started < b.ended AND b.started < a.ended"
            ))
            .await
    }

    /// How many tenures ended.
    pub async fn ended(&self) -> i64 {
        let log = &self.table;
        self.db
            .count(format!("SELECT COUNT(*) FROM {log} WHERE ended IS NOT NULL"))
            .await
    }

    /// The Rust holders' tokens, in the order their tenures started.
    pub async fn tokens(&self) -> Vec<i64> {
        let log = &self.table;
        self.db
            .i64s(format!(
                "SELECT token FROM {log} WHERE token IS NOT NULL ORDER BY started"
            ))
            .await
    }
}
