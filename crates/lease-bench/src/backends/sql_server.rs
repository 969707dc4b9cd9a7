//! The shared SQL servers of the Postgres and MySQL backends: the server a `LEASEHOLD_*`
//! URL names, the library's and the floor's tables of this run on it, and pools of
//! their own for the library, the floor and the peer.

use std::time::Duration;

use sqlx::pool::PoolOptions;
use sqlx::{AssertSqlSafe, Database, Executor, IntoArguments, Pool};

use super::env;
use crate::{Result, fail};

/// Connections per pool of the library, the floor and the peer (the shared servers
/// allow 200 (Postgres) and 300 (MySQL) for every helper and test).
pub(super) const POOL_SIZE: u32 = 10;

/// One shared server, with the tables of this run.
pub(super) struct SqlServer<DB: Database> {
    /// The server's URL.
    pub(super) url: String,
    /// The library's table (the backend provisions it).
    pub(super) lib_table: String,
    /// The floor's table.
    pub(super) raw_table: String,
    /// Two connections for setup, the report's description and cleanup.
    pub(super) admin: Pool<DB>,
}

impl<DB> SqlServer<DB>
where
    DB: Database,
    <DB as Database>::Arguments: IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
{
    /// Connects to the server whose URL is in `$var` and names the tables of the run
    /// tagged `tag`; creates the floor's with the statement `create` returns for its name.
    pub(super) async fn open(var: &str, tag: &str, create: impl FnOnce(&str) -> String) -> Result<Self> {
        let url = env(var)?;
        let admin = pool(&url, 2).await?;
        let raw_table = format!("lhbench_raw_{tag}");
        sqlx::query(AssertSqlSafe(create(&raw_table))).execute(&admin).await?;
        Ok(Self {
            url,
            lib_table: format!("lhbench_{tag}"),
            raw_table,
            admin,
        })
    }

    /// A new pool of `size` connections to the server.
    pub(super) async fn pool(&self, size: u32) -> Result<Pool<DB>> {
        pool(&self.url, size).await
    }

    /// Drops both tables, their names quoted with `quote` (`""` or a backtick).
    pub(super) async fn drop_tables(&self, quote: &str) -> Result<()> {
        for t in [&self.lib_table, &self.raw_table] {
            sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS {quote}{t}{quote}")))
                .execute(&self.admin)
                .await?;
        }
        Ok(())
    }
}

/// A pool of `size` connections to `url`.
async fn pool<DB: Database>(url: &str, size: u32) -> Result<Pool<DB>> {
    PoolOptions::<DB>::new()
        .max_connections(size)
        .acquire_timeout(Duration::from_secs(10))
        .connect(url)
        .await
        .map_err(|e| fail(format!("cannot reach {} at {url}: {e}", DB::NAME)))
}
