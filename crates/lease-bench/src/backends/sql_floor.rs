//! The hand-written lock of the SQL floors, one for every sqlx database: an upsert that
//! takes a free or expired row and returns its token, and guarded updates for renew and
//! release. Each backend brings its statements (placeholders, clock) and its pool.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::{AssertSqlSafe, Database, Decode, Encode, Executor, IntoArguments, Pool, Type};

use super::{Floor, RawLock, lost, ttl_ms};
use crate::Result;

/// The floor's three statements, bound as `(name, holder, ttl_ms[, token])`.
pub(super) struct SqlFloor<DB: Database> {
    pub(super) pool: Pool<DB>,
    /// `"postgres"`, `"sqlite"`: for messages.
    pub(super) label: &'static str,
    /// `(name, holder, ttl_ms)` → the token, or no row when held (acquire, plant and
    /// takeover alike).
    pub(super) acquire: String,
    /// `(name, holder, ttl_ms, token)` → one row when still held.
    pub(super) renew: String,
    /// `(name, holder, token)` → one row when still held.
    pub(super) release: String,
    /// The driver's `rows_affected` (an inherent method of each `QueryResult`).
    pub(super) rows_affected: fn(&DB::QueryResult) -> u64,
}

impl<DB: Database> SqlFloor<DB> {
    fn held(&self, done: &DB::QueryResult, lock: &RawLock) -> Result<()> {
        if (self.rows_affected)(done) == 1 {
            Ok(())
        } else {
            Err(lost(self.label, &lock.key))
        }
    }
}

#[async_trait]
impl<DB> Floor for SqlFloor<DB>
where
    DB: Database,
    <DB as Database>::Arguments: IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'r> (i64,): sqlx::FromRow<'r, DB::Row>,
{
    fn label(&self) -> &'static str {
        self.label
    }

    async fn take(&self, key: &str, holder: &str, ttl: Duration) -> Result<Option<RawLock>> {
        let token: Option<i64> = sqlx::query_scalar(AssertSqlSafe(self.acquire.as_str()))
            .bind(key)
            .bind(holder)
            .bind(ttl_ms(ttl))
            .fetch_optional(&self.pool)
            .await?;
        Ok(token.map(|t| RawLock {
            key: key.to_owned(),
            holder: holder.to_owned(),
            version: t.to_string(),
        }))
    }

    async fn renew(&self, lock: &mut RawLock, ttl: Duration) -> Result<()> {
        let token: i64 = lock.version.parse()?;
        let done = sqlx::query(AssertSqlSafe(self.renew.as_str()))
            .bind(lock.key.as_str())
            .bind(lock.holder.as_str())
            .bind(ttl_ms(ttl))
            .bind(token)
            .execute(&self.pool)
            .await?;
        self.held(&done, lock)
    }

    async fn release(&self, lock: RawLock) -> Result<()> {
        let token: i64 = lock.version.parse()?;
        let done = sqlx::query(AssertSqlSafe(self.release.as_str()))
            .bind(lock.key.as_str())
            .bind(lock.holder.as_str())
            .bind(token)
            .execute(&self.pool)
            .await?;
        self.held(&done, &lock)
    }
}
