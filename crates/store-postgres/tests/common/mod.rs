//! What the Postgres tests share: the server from `LEASEHOLD_PG_URL`, a lease table of
//! their own, and the frozen-holder backend.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::{Result, store::CasStore};
use leasehold_postgres::{PostgresConfig, PostgresStore};
use leasehold_sql::testing::Backend;
use leasehold_sql::{RowWrite, SqlValue};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Row};

/// The server under test; panics with a clear message without it.
pub fn pg_url() -> String {
    leasehold_testkit::pg_url()
}

/// A small pool on the server under test.
pub async fn pool() -> PgPool {
    let url = pg_url();
    PgPoolOptions::new()
        .max_connections(8)
        .acquire_timeout(std::time::Duration::from_secs(10))
        .connect(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot reach Postgres at {url}: {e}"))
}

/// A table name no other test run uses.
pub fn unique_table(prefix: &str) -> String {
    format!("{prefix}_{}", leasehold_testkit::unique_suffix().replace('-', "_"))
}

/// Creates (if needed) and opens a lease table.
pub async fn store_on(pool: &PgPool, table: &str) -> PostgresStore {
    let config = PostgresConfig::new().table(table).expect("table name");
    PostgresStore::provision(pool, &config).await.expect("create schema");
    PostgresStore::new(pool.clone(), config).await.expect("open store")
}

/// Runs one statement.
pub async fn exec(pool: &PgPool, sql: &str) {
    sqlx::query(AssertSqlSafe(sql.to_owned()))
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The frozen-holder scenario's view of Postgres.
pub struct Pg {
    pool: PgPool,
    store: PostgresStore,
}

fn bind_all<'q>(
    mut q: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    args: Vec<SqlValue>,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
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
impl Backend for Pg {
    type Db = sqlx::Postgres;

    fn target() -> String {
        pg_url()
    }

    async fn open(target: &str, lease_table: &str) -> Self {
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect(target)
            .await
            .unwrap_or_else(|e| panic!("cannot reach Postgres at {target}: {e}"));
        let store = store_on(&pool, lease_table).await;
        Self { pool, store }
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
}
