//! The ShedLock-table store against the real Postgres (`LEASEHOLD_PG_URL`): the
//! conformance suite on a fenced table, the unfenced mode, and exclusion with a
//! simulated Java ShedLock instance that runs ShedLock's own SQL
//! (`PostgresSqlServerTimeStatementsSource`, used with `usingDbTime()`). The cases are
//! the ones every ShedLock-table store passes ([`shedlock::cases`]).
#![cfg(feature = "shedlock-postgres")]
#![allow(missing_docs)]

mod shedlock;

use std::time::Duration;

use async_trait::async_trait;
use leasehold_jobs::shedlock::ShedlockStore;
use sqlx::AssertSqlSafe;
use sqlx::postgres::PgPool;

use shedlock::Dialect;
use shedlock::java::JavaShedLock;

/// This crate's own schema, where every test table lives.
const SCHEMA: &str = "lease_jobs_test";

shedlock::store_calls!(ShedlockStore, sqlx::Postgres, "LEASEHOLD_PG_URL");

#[async_trait]
impl Dialect for ShedlockStore {
    const PREFIX: &'static str = "lease_jobs_test.shedlock_";
    const DDL_ROUNDS: usize = 5;
    const CLOCK: &'static str = "clock_timestamp()";
    const TIMESTAMP: &'static str = "TIMESTAMPTZ";
    const UTC_NOW: &'static str = "timezone('utc', now())";

    /// Schema-qualified names of lowercase identifiers need no quotes.
    fn quoted(table: &str) -> String {
        table.to_owned()
    }

    async fn make_room(pool: &PgPool) {
        // Concurrent `CREATE SCHEMA IF NOT EXISTS` can collide; serialized, it cannot.
        leasehold_postgres::run_ddl_serialized(pool, &[&format!("CREATE SCHEMA IF NOT EXISTS {SCHEMA}")])
            .await
            .unwrap_or_else(|e| panic!("create schema: {e}"));
    }

    fn reader(user: &str, visible: &str) -> (Vec<String>, Vec<String>) {
        let create = vec![
            format!("CREATE ROLE {user} LOGIN PASSWORD 'pw'"),
            format!("GRANT USAGE ON SCHEMA {SCHEMA} TO {user}"),
            format!("GRANT SELECT ON {visible} TO {user}"),
        ];
        (
            create,
            vec![format!("DROP OWNED BY {user}"), format!("DROP ROLE {user}")],
        )
    }

    async fn test_tables(pool: &PgPool) -> Vec<String> {
        sqlx::query_scalar("SELECT schemaname::text || '.' || tablename::text FROM pg_tables WHERE schemaname = $1")
            .bind(SCHEMA)
            .fetch_all(pool)
            .await
            .unwrap_or_default()
    }

    /// ShedLock's insert is an upsert that takes an expired row over.
    async fn java_lock(java: &JavaShedLock<Self>, name: &str, at_most: Duration, first: bool) -> bool {
        let (t, now) = (java.table.as_str(), JAVA_NOW);
        let tname = t.rsplit('.').next().unwrap_or(t);
        let update_clause = format!(
            " SET lock_until = {now} + cast($2 as interval), locked_at = {now}, locked_by = $3 \
             WHERE {tname}.name = $1 AND {tname}.lock_until <= {now}"
        );
        let sql = if first {
            format!(
                "INSERT INTO {t} AS {tname}(name, lock_until, locked_at, locked_by) \
                 VALUES($1, {now} + cast($2 as interval), {now}, $3) ON CONFLICT (name) DO UPDATE{update_clause}"
            )
        } else {
            format!("UPDATE {t} AS {tname}{update_clause}")
        };
        java_run(java, sql, name, at_most, "java lock").await == 1
    }

    async fn java_unlock(java: &JavaShedLock<Self>, name: &str, at_least: Duration) {
        let table = &java.table;
        let at_least_expr = "locked_at + cast($2 as interval)";
        let sql = format!(
            "UPDATE {table} SET lock_until = CASE WHEN {at_least_expr} > {JAVA_NOW} THEN {at_least_expr} \
             ELSE {JAVA_NOW} END WHERE name = $1 AND locked_by = $3"
        );
        java_run(java, sql, name, at_least, "java unlock").await;
    }
}

/// The database's clock as ShedLock's Postgres statements read it.
const JAVA_NOW: &str = "timezone('utc', CURRENT_TIMESTAMP)";

/// Runs one of ShedLock's statements as `java` sends them: `$1` the lock name, `$2`
/// the interval `d`, `$3` the instance's `locked_by`; returns the rows it changed.
async fn java_run(java: &JavaShedLock<ShedlockStore>, sql: String, name: &str, d: Duration, what: &str) -> u64 {
    sqlx::query(AssertSqlSafe(sql))
        .bind(name)
        .bind(format!("{} milliseconds", d.as_millis()))
        .bind(&java.locked_by)
        .execute(&java.db.pool)
        .await
        .expect(what)
        .rows_affected()
}

shedlock::shedlock_cases!(ShedlockStore);
