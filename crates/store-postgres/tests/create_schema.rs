//! `PostgresStore::provision` and `run_ddl_serialized` called by many sessions at the same moment.
//!
//! CI once failed here: fourteen conformance cases created one table at once, and
//! Postgres's `CREATE TABLE IF NOT EXISTS` answered one of them `42710 type … already
//! exists`. Each round below gives sixteen sessions, connected in advance and released
//! together by a barrier, one fresh table to create.
#![allow(missing_docs)]

mod common;

use std::sync::Arc;

use leasehold_postgres::{PostgresConfig, PostgresStore, run_ddl_serialized};
use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio::sync::Barrier;

const SESSIONS: usize = 16;
const ROUNDS: usize = 5;

/// `SESSIONS` pools of one connection each, connected before they are used.
async fn sessions() -> Vec<PgPool> {
    let mut pools = Vec::with_capacity(SESSIONS);
    for _ in 0..SESSIONS {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .connect(&common::pg_url())
            .await
            .expect("connect");
        pools.push(pool);
    }
    pools
}

async fn columns(pool: &PgPool, table: &str) -> Vec<String> {
    sqlx::query("SELECT attname::text AS name FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 ORDER BY attnum")
        .bind(format!("\"{table}\""))
        .fetch_all(pool)
        .await
        .expect("columns")
        .iter()
        .map(|r| r.get::<String, _>("name"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_sessions_creating_one_lease_table_at_once_all_succeed() {
    let pools = sessions().await;
    for round in 0..ROUNDS {
        let table = common::unique_table("create_race");
        let barrier = Arc::new(Barrier::new(SESSIONS));
        let mut tasks = Vec::new();
        for pool in &pools {
            let (pool, table, barrier) = (pool.clone(), table.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                let config = PostgresConfig::new().with_table(&table).expect("table name");
                barrier.wait().await;
                PostgresStore::provision(&pool, &config).await
            }));
        }
        for (i, task) in tasks.into_iter().enumerate() {
            let result = task.await.expect("task");
            assert!(result.is_ok(), "round {round}, session {i}: {result:?}");
        }
        let config = PostgresConfig::new().with_table(&table).expect("table name");
        PostgresStore::new(pools[0].clone(), config)
            .await
            .expect("the table every session created opens");
        common::exec(&pools[0], &format!("DROP TABLE \"{table}\"")).await;
    }
}

/// Half the sessions are creators that take no lock (a migration tool, Java ShedLock)
/// and retry on their own; the other half run `CREATE` then `ADD COLUMN` through
/// `run_ddl_serialized`. Every serialized call succeeds and the column is always added,
/// even when its `CREATE` lost a race to an unlocked creator.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serialized_ddl_racing_unlocked_creators_still_runs_every_statement() {
    let pools = sessions().await;
    for round in 0..ROUNDS {
        let table = common::unique_table("ddl_race");
        let create = format!("CREATE TABLE IF NOT EXISTS \"{table}\" (name TEXT PRIMARY KEY)");
        let add = format!("ALTER TABLE \"{table}\" ADD COLUMN IF NOT EXISTS fence BIGINT");
        let barrier = Arc::new(Barrier::new(SESSIONS));
        let mut serialized = Vec::new();
        let mut unlocked = Vec::new();
        for (i, pool) in pools.iter().enumerate() {
            let (pool, create, add, barrier) = (pool.clone(), create.clone(), add.clone(), barrier.clone());
            if i % 2 == 0 {
                serialized.push(tokio::spawn(async move {
                    barrier.wait().await;
                    run_ddl_serialized(&pool, &[&create, &add]).await
                }));
            } else {
                unlocked.push(tokio::spawn(async move {
                    barrier.wait().await;
                    // What a tool without the lock does: try, and try once more if the
                    // first attempt collided.
                    if sqlx::query(sqlx::AssertSqlSafe(create.clone()))
                        .execute(&pool)
                        .await
                        .is_err()
                    {
                        sqlx::query(sqlx::AssertSqlSafe(create))
                            .execute(&pool)
                            .await
                            .expect("retry create");
                    }
                }));
            }
        }
        for (i, task) in serialized.into_iter().enumerate() {
            let result = task.await.expect("task");
            assert!(result.is_ok(), "round {round}, serialized caller {i}: {result:?}");
        }
        for task in unlocked {
            task.await.expect("unlocked creator");
        }
        assert_eq!(columns(&pools[0], &table).await, ["name", "fence"], "round {round}");
        common::exec(&pools[0], &format!("DROP TABLE \"{table}\"")).await;
    }
}

#[tokio::test]
async fn a_statement_that_is_not_a_race_fails_and_commits_nothing() {
    let pool = common::pool().await;
    let table = common::unique_table("ddl_fail");
    let create = format!("CREATE TABLE \"{table}\" (name TEXT PRIMARY KEY)");
    let err = run_ddl_serialized(&pool, &[&create, "ALTER TABLE no_such_table_here ADD COLUMN x INT"])
        .await
        .expect_err("a missing table is an error");
    assert!(err.to_string().contains("no_such_table_here"), "{err}");
    assert!(
        columns(&pool, &table).await.is_empty(),
        "the CREATE before it was rolled back"
    );
}
