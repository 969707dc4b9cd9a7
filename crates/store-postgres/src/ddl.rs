//! `CREATE … IF NOT EXISTS` that several processes may run at once.
//!
//! Postgres's `IF NOT EXISTS` checks the catalog before inserting into it, so two
//! sessions creating the same table at the same moment can both pass the check and one
//! then fails on the catalog's unique index: `42P07 duplicate_table`, `23505
//! unique_violation` on `pg_type`, or `42710 duplicate_object` for the table's row type
//! (seen in this project's CI: fourteen test cases opening one table at once). An
//! `ADD COLUMN IF NOT EXISTS` races the same way (`42701 duplicate_column`).
//!
//! [`run_ddl_serialized`] runs the statements in one transaction that first takes a
//! transaction-scoped advisory lock, so leasehold's own creators queue instead of
//! colliding; a collision with a creator that does not take the lock (a migration tool,
//! Java ShedLock) is retried, and the retry finds the object made.

use sqlx::{AssertSqlSafe, PgPool};

use leasehold_sql::errors::postgres::{code_of, sqlstate};

/// The advisory lock every leasehold DDL transaction takes: the two-key form
/// (`'lhld'` as a big-endian `int4`, 1), a key space apart from single-`bigint`
/// advisory locks.
const DDL_LOCK_SQL: &str = "SELECT pg_advisory_xact_lock(1818782820, 1)";

/// Runs `statements` (idempotent DDL such as `CREATE TABLE IF NOT EXISTS`) in one
/// transaction, serialized with every other call of this function on the database by an
/// advisory lock held until the transaction ends. An error that only says a concurrent
/// creator (one that does not take the lock) got there first (`42P07`, `42710`, `42701`,
/// `23505`) rolls the transaction back and runs it again, so every statement after the
/// colliding one still runs; up to three attempts.
///
/// Used by [`PostgresStore::provision`](crate::PostgresStore::provision) and by
/// `leasehold-jobs`' ShedLock table; public so a service can create its fence tables the
/// same way.
///
/// Every statement must be allowed inside a transaction (not `CREATE INDEX
/// CONCURRENTLY`). A genuine `23505` from a statement is retried like a race, then
/// returned.
///
/// # Errors
/// A database or connection error other than a lost creation race, or the race's own
/// error after the third attempt; nothing is committed.
///
/// ```no_run
/// # async fn demo(pool: sqlx::PgPool) -> Result<(), sqlx::Error> {
/// leasehold_postgres::run_ddl_serialized(
///     &pool,
///     &["CREATE TABLE IF NOT EXISTS payouts (id BIGINT PRIMARY KEY, last_token BIGINT NOT NULL)"],
/// )
/// .await
/// # }
/// ```
pub async fn run_ddl_serialized(pool: &PgPool, statements: &[&str]) -> Result<(), sqlx::Error> {
    let mut attempt = 1;
    loop {
        match run(pool, statements).await {
            Err(e) if attempt < ATTEMPTS && lost_a_creation_race(&e) => attempt += 1,
            other => return other,
        }
    }
}

/// Attempts of [`run_ddl_serialized`]: a race lost to an unlocked creator is followed by
/// an attempt that finds the object made, so two suffice; three leave room for two such
/// creators.
const ATTEMPTS: u32 = 3;

async fn run(pool: &PgPool, statements: &[&str]) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query(DDL_LOCK_SQL).execute(&mut *tx).await?;
    for sql in statements {
        sqlx::query(AssertSqlSafe(*sql)).execute(&mut *tx).await?;
    }
    tx.commit().await
}

/// Whether `err` only says that a concurrent creator made the object first.
fn lost_a_creation_race(err: &sqlx::Error) -> bool {
    matches!(
        code_of(err).as_deref(),
        Some(
            sqlstate::DUPLICATE_TABLE
                | sqlstate::DUPLICATE_OBJECT
                | sqlstate::DUPLICATE_COLUMN
                | sqlstate::UNIQUE_VIOLATION
        )
    )
}
