//! What the SQLite tests share: database files under a temporary directory, a lease
//! table, and the frozen-holder backend.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::{Result, store::CasStore};
use leasehold_sql::testing::Backend;
use leasehold_sql::{RowWrite, SqlValue};
use leasehold_sqlite::{SqliteConfig, SqliteStore, connect_options};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{AssertSqlSafe, Connection, Row, SqlitePool};

/// A database file in a fresh directory under the system temp dir, removed on drop.
pub struct TempDb(PathBuf);

impl TempDb {
    /// The database file.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A fresh database file path in a directory of its own under the system temp dir.
pub fn db_path(prefix: &str) -> TempDb {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir()
        .join("leasehold-store-sqlite-tests")
        .join(format!("{prefix}-{}-{nanos:x}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    TempDb(dir.join("leases.db"))
}

/// A pool on `path` with the recommended options.
pub async fn pool(path: &std::path::Path) -> SqlitePool {
    SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(connect_options(path))
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// Creates (if needed) and opens a lease table.
pub async fn store_on(pool: &SqlitePool, table: &str) -> SqliteStore {
    let config = SqliteConfig::new().table(table).expect("table name");
    SqliteStore::provision(pool, &config).await.expect("create schema");
    SqliteStore::new(pool.clone(), config).await.expect("open store")
}

/// Runs one statement.
pub async fn exec(pool: &SqlitePool, sql: &str) {
    sqlx::query(AssertSqlSafe(sql.to_owned()))
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The frozen-holder scenario's view of SQLite.
pub struct Lite {
    path: PathBuf,
    pool: SqlitePool,
    store: SqliteStore,
}

fn bind_all<'q>(
    mut q: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    args: Vec<SqlValue>,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    for a in args {
        q = match a {
            SqlValue::Int(v) => q.bind(v),
            SqlValue::Text(v) => q.bind(v),
            other => panic!("unsupported test value {other:?}"),
        };
    }
    q
}

#[async_trait]
impl Backend for Lite {
    type Db = sqlx::Sqlite;

    fn target() -> String {
        let db = db_path("frozen");
        let target = db.path().display().to_string();
        std::mem::forget(db); // removed by `cleanup` at the end of the scenario
        target
    }

    async fn open(target: &str, lease_table: &str) -> Self {
        let path = PathBuf::from(target);
        let pool = pool(&path).await;
        let store = store_on(&pool, lease_table).await;
        Self { path, pool, store }
    }

    fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.store.clone())
    }

    async fn execute(&self, sql: &str, args: Vec<SqlValue>) -> Result<u64> {
        let q = bind_all(sqlx::query(AssertSqlSafe(sql.to_owned())), args);
        q.execute(&self.pool)
            .await
            .map(|r| r.rows_affected())
            .map_err(|e| leasehold_core::Error::unavailable(format!("{sql}: {e}"), e))
    }

    async fn query_ints(&self, sql: &str, args: Vec<SqlValue>) -> Result<Vec<Vec<i64>>> {
        let q = bind_all(sqlx::query(AssertSqlSafe(sql.to_owned())), args);
        let rows = q
            .fetch_all(&self.pool)
            .await
            .map_err(|e| leasehold_core::Error::unavailable(format!("{sql}: {e}"), e))?;
        rows.iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.try_get::<i64, _>(i))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| leasehold_core::Error::unavailable(format!("{sql}: {e}"), e))
            })
            .collect()
    }

    async fn fenced(&self, write: &RowWrite<'_, Self::Db>) -> Result<u64> {
        write.execute(&self.pool).await.map(|o| o.applied().unwrap_or(0))
    }

    async fn cleanup(&self, _tables: &[&str]) {
        self.pool.close().await;
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    async fn quiescent(&self) -> bool {
        // Can a write transaction start right now, without waiting?
        let options = SqliteConnectOptions::new()
            .filename(&self.path)
            .busy_timeout(Duration::ZERO);
        let Ok(mut conn) = sqlx::SqliteConnection::connect_with(&options).await else {
            return false;
        };
        let free = sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await.is_ok();
        if free {
            let _ = sqlx::query("ROLLBACK").execute(&mut conn).await;
        }
        let _ = conn.close().await;
        free
    }
}
