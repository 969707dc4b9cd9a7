//! What the Postgres tests share: the server from `LEASEHOLD_PG_URL` and a lease table
//! of their own.
#![allow(dead_code, unreachable_pub)]

use leasehold_postgres::{PostgresConfig, PostgresStore};
use sqlx::AssertSqlSafe;
use sqlx::postgres::{PgPool, PgPoolOptions};

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
