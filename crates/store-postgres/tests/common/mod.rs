//! What the Postgres tests share: the server from `LEASEHOLD_PG_URL` and a lease table
//! of their own.
#![allow(dead_code, unreachable_pub)]

use leasehold_postgres::PostgresStore;
use sqlx::postgres::PgPool;

#[path = "../../../store-sqlite/tests/shared/mod.rs"]
pub mod shared;

/// The server under test; panics with a clear message without it.
pub fn pg_url() -> String {
    leasehold_testkit::pg_url()
}

/// A small pool on the server under test.
pub async fn pool() -> PgPool {
    shared::db::server_pool(&pg_url(), 8).await
}

/// A table name no other test run uses.
pub use shared::db::unique_table;

/// Creates (if needed) and opens a lease table.
pub async fn store_on(pool: &PgPool, table: &str) -> PostgresStore {
    shared::store_on(pool, table).await
}

/// Runs one statement.
#[allow(unused_imports)] // not every test binary runs statements
pub use shared::exec;

/// `SET` clauses that plant an expiry no write of the library makes: beyond the TTL, and
/// at the edge of the column's type.
pub const IMPOSSIBLE_EXPIRIES: &[(&str, &str)] = &[
    ("an expiry 100 years ahead", "expires_at = now() + interval '100 years'"),
    ("an infinite expiry", "expires_at = 'infinity'"),
];

/// A store on a lease table of its own, for the foreign-writer tests: the store, the
/// table's name, and what must live as long as the test (nothing, here).
pub async fn foreign_store() -> (PostgresStore, String, ()) {
    let table = unique_table("lh_foreign");
    (store_on(&pool().await, &table).await, table, ())
}

/// Runs `sql` with `psql` on the server under test, as an operator would.
pub fn operator(_: &(), sql: &str) {
    leasehold_testkit::foreign::cli("psql", &[&pg_url(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql]);
}

/// Postgres as the shared SQL cases see it.
pub struct Pg;

impl shared::db::TestDb for Pg {
    type B = leasehold_postgres::PgBackend;
    type Keep = ();

    async fn fresh(_prefix: &str) -> (PgPool, ()) {
        (pool().await, ())
    }

    const GOOD_COLUMNS: &'static str = "name VARCHAR(200) PRIMARY KEY, holder VARCHAR(128), fence_token BIGINT NOT NULL, \
        version BIGINT NOT NULL, ttl_ms BIGINT NOT NULL, acquired_at TIMESTAMPTZ NOT NULL, expires_at TIMESTAMPTZ NOT NULL, \
        wall_expires_at_ms BIGINT, deleted BOOLEAN NOT NULL DEFAULT FALSE";

    const WRONG_COLUMNS: &'static [(&'static str, &'static str, &'static str)] = &[
        ("token as text", "fence_token BIGINT", "fence_token TEXT"),
        ("holder not null", "holder VARCHAR(128)", "holder VARCHAR(128) NOT NULL"),
        ("expiry as bigint", "expires_at TIMESTAMPTZ", "expires_at BIGINT"),
    ];

    fn insert_expired(table: &str, name: &str, values: &str) -> String {
        format!(
            "INSERT INTO \"{table}\" (name, holder, fence_token, ttl_ms, wall_expires_at_ms, version, acquired_at, expires_at) \
             VALUES ('{name}', {values}, 1, now() - interval '1 hour', now() - interval '1 minute')"
        )
    }

    /// A negative token and a holder with a space.
    fn corrupt_held_row(table: &str) -> String {
        format!(
            "INSERT INTO \"{table}\" (name, holder, fence_token, version, ttl_ms, acquired_at, expires_at) \
             VALUES ($1, 'not a holder', -3, 1, 3600000, now(), now() + interval '1 hour')"
        )
    }

    fn snapshot(table: &str, name: &str) -> String {
        format!("SELECT row_to_json(t)::text FROM \"{table}\" t WHERE name = '{name}'")
    }
}

/// One `UPDATE … FROM unnest(…)` per batch of renewals.
impl shared::batched::Batches for Pg {
    const MARKER: &'static str = "unnest(";
    const STATEMENTS_PER_BATCH: u64 = 1;
}

impl shared::request_timeout::Served for Pg {
    fn url() -> String {
        pg_url()
    }
}
