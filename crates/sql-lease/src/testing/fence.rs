//! The conformance fence cases on a row of a table of the test's own, for any
//! [`SqlDatabase`]: each resource is a fresh table, written with the insert-or-fenced-
//! update of a [`RowFence`], read with a plain `SELECT`, and its round trips counted
//! from sqlx's own statement events ([`StatementLog`]).

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use leasehold_core::conformance::{FenceFixture, FencedResource};
use leasehold_core::fence::{FenceMode, FencedUpdate, Ident};
use leasehold_core::{FencingToken, Result};
use sqlx::{AssertSqlSafe, Database, Executor, IntoArguments, Pool};

use super::StatementLog;
use crate::{RowFence, SqlDatabase};

/// The fence cases' fixture on `pool`: every resource is a new table `lh_fence_*`.
pub struct RowFixture<DB: Database> {
    pool: Pool<DB>,
    log: StatementLog,
}

impl<DB: Database> RowFixture<DB> {
    /// A fixture on `pool`. Installs the process's [`StatementLog`].
    pub fn new(pool: Pool<DB>) -> Self {
        Self {
            pool,
            log: StatementLog::install(),
        }
    }
}

/// One protected row: `id = 1` of its own table.
pub struct FencedRow<DB: Database> {
    pool: Pool<DB>,
    log: StatementLog,
    table: String,
    mark: usize,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// `table` quoted for `DB` (`"t"`, or `` `t` `` on MySQL). The fixture's names are
/// made of letters, digits and `_`.
fn quoted<DB: SqlDatabase>(table: &str) -> String {
    Ident::table(table).map_or_else(|e| panic!("fence test table {table:?}: {e}"), |t| t.quoted(DB::DIALECT))
}

#[async_trait]
impl<DB> FenceFixture for RowFixture<DB>
where
    DB: SqlDatabase,
    FencedRow<DB>: FencedResource,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
{
    async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        self.row(&format!("{case}_{}_{n}", std::process::id())).await
    }
}

impl<DB> RowFixture<DB>
where
    DB: SqlDatabase,
    FencedRow<DB>: FencedResource,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
{
    /// The row called `name` (in table `lh_fence_<name>`, created if missing): the same
    /// one from every process on the same database.
    pub async fn row(&self, name: &str) -> Box<dyn FencedResource> {
        let name: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let table = format!("lh_fence_{name}");
        let ddl = format!(
            "CREATE TABLE IF NOT EXISTS {} (id BIGINT PRIMARY KEY, value BIGINT NOT NULL, last_token BIGINT NOT NULL DEFAULT 0)",
            quoted::<DB>(&table)
        );
        self.pool
            .execute(AssertSqlSafe(ddl))
            .await
            .unwrap_or_else(|e| panic!("create the fence test table {table}: {e}"));
        Box::new(FencedRow {
            pool: self.pool.clone(),
            log: self.log.clone(),
            mark: self.log.mark(),
            table,
        })
    }
}

#[async_trait]
impl<DB> FencedResource for FencedRow<DB>
where
    DB: SqlDatabase,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    for<'a> <DB as Database>::Arguments: IntoArguments<DB>,
    for<'r> (i64, i64): sqlx::FromRow<'r, DB::Row>,
{
    async fn write(&self, token: FencingToken, mode: FenceMode, value: i64) -> Result<()> {
        let fence = RowFence::<DB>::upsert(
            &FencedUpdate::new(&self.table, "last_token")?
                .set("value")?
                .key("id")?
                .mode(mode),
        )?;
        let outcome = fence
            .write(token)
            .value("value", value)
            .key("id", 1_i64)
            .execute(&self.pool)
            .await?;
        assert!(outcome.is_applied(), "a SQL fence has no caller condition: {outcome:?}");
        Ok(())
    }

    async fn read(&self) -> Option<(FencingToken, i64)> {
        let sql = format!(
            "SELECT last_token, value FROM {} WHERE id = 1",
            quoted::<DB>(&self.table)
        );
        let row: Option<(i64, i64)> = sqlx::query_as(AssertSqlSafe(sql))
            .fetch_optional(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("read {}: {e}", self.table));
        row.map(|(mark, value)| {
            let mark = u64::try_from(mark).unwrap_or_else(|_| panic!("negative mark {mark}"));
            (FencingToken::new(mark), value)
        })
    }

    fn round_trips(&self) -> u64 {
        let written = self.log.since(self.mark, &quoted::<DB>(&self.table));
        let writes = written.iter().filter(|s| !s.trim_start().starts_with("SELECT")).count();
        u64::try_from(writes).unwrap_or(u64::MAX)
    }
}
