//! The ShedLock-table store against the real Postgres (`LEASEHOLD_PG_URL`): the
//! conformance suite on a fenced table, the unfenced mode, and exclusion with a
//! simulated Java ShedLock instance that runs ShedLock's own SQL.
#![cfg(feature = "shedlock-postgres")]
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::conformance::Fixture;
use leasehold_core::testing::{FaultPlan, FaultStore};
use leasehold_core::{
    ClientConfig, FencingToken, LeaseClient, LeaseName,
    store::{CasStore, Grade},
};
use leasehold_jobs::shedlock::{ShedlockConfig, ShedlockStore};
use leasehold_jobs::{LockConfig, LockingExecutor, RunOutcome};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Row};
use tokio::time::Instant;

const SCHEMA: &str = "lease_jobs_test";

fn pg_url() -> String {
    std::env::var("LEASEHOLD_PG_URL")
        .unwrap_or_else(|_| panic!("LEASEHOLD_PG_URL is not set: run `eval \"$(scripts/stores.sh env)\"`"))
}

async fn pool() -> PgPool {
    PgPoolOptions::new()
        .max_connections(6)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&pg_url())
        .await
        .unwrap_or_else(|e| panic!("Postgres at LEASEHOLD_PG_URL unreachable: {e}"))
}

static SEQ: AtomicU64 = AtomicU64::new(0);
static CLEANED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Drops the tables earlier runs of these tests left in this crate's own schema: those
/// whose creating process (the pid in the name) is gone.
async fn drop_tables_of_finished_runs(pool: &PgPool) {
    if CLEANED.swap(true, Ordering::SeqCst) {
        return;
    }
    let Ok(rows) = sqlx::query("SELECT tablename::text FROM pg_tables WHERE schemaname = $1")
        .bind(SCHEMA)
        .fetch_all(pool)
        .await
    else {
        return;
    };
    for row in rows {
        let table: String = row.get(0);
        let pid = table.strip_prefix("shedlock_").and_then(|r| r.split('_').next());
        let finished = pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists());
        if finished {
            let _ = sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS {SCHEMA}.\"{table}\"")))
                .execute(pool)
                .await;
        }
    }
}

/// A fresh ShedLock table in this crate's own schema.
async fn fresh_table(pool: &PgPool, fence: bool) -> String {
    let table = fresh_name(pool).await;
    ShedlockStore::provision(pool, &table, fence)
        .await
        .expect("create table");
    table
}

/// A table name no other test uses, in this crate's own schema (created if missing).
async fn fresh_name(pool: &PgPool) -> String {
    // Concurrent `CREATE SCHEMA IF NOT EXISTS` can collide; serialized, it cannot.
    leasehold_postgres::run_ddl_serialized(pool, &[&format!("CREATE SCHEMA IF NOT EXISTS {SCHEMA}")])
        .await
        .unwrap_or_else(|e| panic!("create schema: {e}"));
    drop_tables_of_finished_runs(pool).await;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{SCHEMA}.shedlock_{}_{}_{nanos}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

async fn store_on(pool: &PgPool, table: &str) -> ShedlockStore {
    ShedlockStore::new(pool.clone(), ShedlockConfig::table(table))
        .await
        .expect("open shedlock store")
}

struct Fenced {
    pool: PgPool,
    table: String,
}

impl Fenced {
    async fn new() -> Self {
        let pool = pool().await;
        let table = fresh_table(&pool, true).await;
        Self { pool, table }
    }
}

#[async_trait]
impl Fixture for Fenced {
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(store_on(&self.pool, &self.table).await)
    }
    async fn corrupt(&self, name: &LeaseName) {
        // A negative fence: no token was ever that.
        sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO {} (name, lock_until, locked_at, locked_by, fence) \
             VALUES ($1, timezone('utc', now()) + interval '1 hour', timezone('utc', now()), 'x', -5)",
            self.table
        )))
        .bind(name.as_str())
        .execute(&self.pool)
        .await
        .expect("insert corrupt row");
    }
}

mod conformance_fenced {
    use super::*;
    leasehold_core::conformance::conformance_tests!(Fenced::new().await);
}

/// ShedLock's own statements (`PostgresSqlServerTimeStatementsSource`, used with
/// `usingDbTime()`), run as a Java instance would.
struct JavaShedLock {
    pool: PgPool,
    table: String,
    locked_by: String,
}

impl JavaShedLock {
    const NOW: &'static str = "timezone('utc', CURRENT_TIMESTAMP)";

    fn interval(d: Duration) -> String {
        format!("{} milliseconds", d.as_millis())
    }

    /// `StorageBasedLockProvider.lock`: the insert (first use of a name) or the update.
    async fn lock(&self, name: &str, at_most: Duration, first: bool) -> bool {
        let (t, now) = (&self.table, Self::NOW);
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
        self.run(sql, name, at_most, "java lock").await == 1
    }

    /// `unlock`: keeps the lock until `locked_at + lockAtLeastFor` if that is later.
    async fn unlock(&self, name: &str, at_least: Duration) {
        let (t, now) = (&self.table, Self::NOW);
        let at_least_expr = "locked_at + cast($2 as interval)";
        let sql = format!(
            "UPDATE {t} SET lock_until = CASE WHEN {at_least_expr} > {now} THEN {at_least_expr} ELSE {now} END \
             WHERE name = $1 AND locked_by = $3"
        );
        self.run(sql, name, at_least, "java unlock").await;
    }

    /// Runs one of ShedLock's statements with its parameters: `$1` the lock name, `$2`
    /// the interval `d`, `$3` this instance's `locked_by`; returns the rows it changed.
    async fn run(&self, sql: String, name: &str, d: Duration, what: &str) -> u64 {
        sqlx::query(AssertSqlSafe(sql))
            .bind(name)
            .bind(Self::interval(d))
            .bind(&self.locked_by)
            .execute(&self.pool)
            .await
            .expect(what)
            .rows_affected()
    }
}

/// A log of who held the lock when, stamped by the database clock, to check that
/// no two holders ever overlapped.
async fn log_table(pool: &PgPool) -> String {
    let t = format!("{}_log", fresh_table(pool, false).await);
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE {t} (id BIGSERIAL PRIMARY KEY, who TEXT NOT NULL, token BIGINT, \
         started TIMESTAMPTZ NOT NULL, ended TIMESTAMPTZ)"
    )))
    .execute(pool)
    .await
    .expect("log table");
    t
}

async fn log_start(pool: &PgPool, log: &str, who: &str, token: Option<FencingToken>) -> i64 {
    let token = token.map(|t| t.to_i64().expect("token"));
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO {log} (who, token, started) VALUES ($1, $2, clock_timestamp()) RETURNING id"
    )))
    .bind(who)
    .bind(token)
    .fetch_one(pool)
    .await
    .expect("log start")
    .get(0)
}

async fn log_end(pool: &PgPool, log: &str, id: i64) {
    sqlx::query(AssertSqlSafe(format!(
        "UPDATE {log} SET ended = clock_timestamp() WHERE id = $1"
    )))
    .bind(id)
    .execute(pool)
    .await
    .expect("log end");
}

/// Two Rust instances and one Java ShedLock instance contend for one lock for four
/// seconds: each gets it, and no two holding periods overlap (database clock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_java_shedlock_exclude_each_other() {
    for fenced in [true, false] {
        let pool = pool().await;
        let table = fresh_table(&pool, fenced).await;
        let log = log_table(&pool).await;
        let name = "reportJob";
        let deadline = Instant::now() + Duration::from_secs(4);
        let mut tasks = Vec::new();
        for who in ["rust-1", "rust-2"] {
            let store = store_on(&pool, &table).await;
            assert_eq!(store.is_fenced(), fenced);
            let executor = LockingExecutor::new(
                store
                    .lease_client(ClientConfig::builder().label(who).build().expect("client config"))
                    .expect("client"),
            );
            let (pool, log) = (pool.clone(), log.clone());
            tasks.push(tokio::spawn(async move {
                let lock = LockConfig::new(name, Duration::from_secs(2));
                let mut runs = 0;
                while Instant::now() < deadline {
                    let out = executor
                        .run(&lock, |ctx| {
                            let (pool, log) = (pool.clone(), log.clone());
                            async move {
                                let id = log_start(&pool, &log, who, Some(ctx.token())).await;
                                tokio::time::sleep(Duration::from_millis(30)).await;
                                log_end(&pool, &log, id).await;
                            }
                        })
                        .await
                        .expect("rust run");
                    if let RunOutcome::Ran(_) = out {
                        runs += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(7)).await;
                }
                runs
            }));
        }
        let java = JavaShedLock {
            pool: pool.clone(),
            table: table.clone(),
            locked_by: "java-host-1".into(),
        };
        let java_task = tokio::spawn({
            let (pool, log) = (pool.clone(), log.clone());
            async move {
                let mut runs = 0;
                let mut first = true;
                while Instant::now() < deadline {
                    if java.lock(name, Duration::from_secs(2), first).await {
                        let id = log_start(&pool, &log, "java", None).await;
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        log_end(&pool, &log, id).await;
                        java.unlock(name, Duration::ZERO).await;
                        runs += 1;
                    }
                    first = false;
                    tokio::time::sleep(Duration::from_millis(7)).await;
                }
                runs
            }
        });
        let mut rust_runs = 0;
        for t in tasks {
            rust_runs += t.await.expect("task");
        }
        let java_runs = java_task.await.expect("java");
        let overlaps: i64 = sqlx::query(AssertSqlSafe(format!(
            "SELECT count(*) FROM {log} a JOIN {log} b ON a.id < b.id \
             WHERE a.started < b.ended AND b.started < a.ended"
        )))
        .fetch_one(&pool)
        .await
        .expect("overlaps")
        .get(0);
        let total: i64 = sqlx::query(AssertSqlSafe(format!(
            "SELECT count(*) FROM {log} WHERE ended IS NOT NULL"
        )))
        .fetch_one(&pool)
        .await
        .expect("count")
        .get(0);
        eprintln!("fenced={fenced}: rust runs {rust_runs}, java runs {java_runs}, overlaps {overlaps}");
        assert_eq!(overlaps, 0, "fenced={fenced}: holders overlapped");
        assert!(rust_runs >= 5 && java_runs >= 5, "rust {rust_runs}, java {java_runs}");
        assert_eq!(total, rust_runs + java_runs);
        // Rust tokens strictly increase across Rust tenures.
        let tokens: Vec<i64> = sqlx::query(AssertSqlSafe(format!(
            "SELECT token FROM {log} WHERE token IS NOT NULL ORDER BY started"
        )))
        .fetch_all(&pool)
        .await
        .expect("tokens")
        .iter()
        .map(|r| r.get(0))
        .collect();
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "fenced={fenced}: tokens {tokens:?}"
        );
    }
}

/// A Java holder's lockAtLeastFor is honoured by Rust, and a Rust holder's by Java;
/// a lease released by Rust is free for Java at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_at_least_for_is_honoured_both_ways() {
    let pool = pool().await;
    let table = fresh_table(&pool, true).await;
    let store = store_on(&pool, &table).await;
    let rust = LockingExecutor::new(store.lease_client(ClientConfig::default()).expect("client"));
    let java = JavaShedLock {
        pool: pool.clone(),
        table: table.clone(),
        locked_by: "java-host-2".into(),
    };
    let name = "nightlyJob";

    // Java runs a short job with lockAtLeastFor = 1.5 s.
    assert!(java.lock(name, Duration::from_secs(10), true).await);
    let java_started = Instant::now();
    java.unlock(name, Duration::from_millis(1_500)).await;
    let lock = LockConfig::new(name, Duration::from_secs(5));
    loop {
        match rust.run(&lock, |ctx| async move { ctx.token() }).await.expect("rust") {
            RunOutcome::Skipped { holder, .. } => {
                assert_eq!(holder.as_ref().map(|h| h.as_str()), Some("java-host-2"));
                assert!(java_started.elapsed() < Duration::from_millis(1_600), "held too long");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            RunOutcome::Ran(r) => {
                assert!(
                    java_started.elapsed() >= Duration::from_millis(1_400),
                    "rust ran {:?} after java's start",
                    java_started.elapsed()
                );
                // The row Java created had no token: Rust's first grant takes 2.
                assert_eq!(r.output, FencingToken::new(2));
                break;
            }
        }
    }
    // Rust runs with lock_at_least_for = 1 s: Java is refused until then.
    let kept = LockConfig::new(name, Duration::from_secs(5)).lock_at_least_for(Duration::from_secs(1));
    let rust_started = Instant::now();
    let ran = rust
        .run(&kept, |ctx| async move { ctx.token() })
        .await
        .expect("rust")
        .ran()
        .expect("ran");
    assert_eq!(ran.output, FencingToken::new(3));
    assert!(ran.kept_for.is_some());
    while !java.lock(name, Duration::from_secs(10), false).await {
        assert!(
            rust_started.elapsed() < Duration::from_secs(3),
            "java never got the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        rust_started.elapsed() >= Duration::from_millis(950),
        "java got it {:?} after rust's start",
        rust_started.elapsed()
    );
    java.unlock(name, Duration::ZERO).await;
    // Released by Rust (no lock_at_least_for): Java's plain UPDATE takes it at once.
    let quick = LockConfig::new(name, Duration::from_secs(5));
    rust.run(&quick, |_| async {}).await.expect("rust").ran().expect("ran");
    assert!(
        java.lock(name, Duration::from_secs(10), false).await,
        "released row not free for java"
    );
}

/// A Rust holder whose store connection hangs loses its lease before Java can take
/// the row over (Java's `lock_until <= now`), and its next token is fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_rust_holder_is_replaced_by_java_after_expiry() {
    let pool = pool().await;
    let table = fresh_table(&pool, true).await;
    let hung = FaultStore::new(store_on(&pool, &table).await, 3);
    let client = LeaseClient::from_dyn(Arc::new(hung.clone()), ClientConfig::default()).expect("client");
    let lease = client
        .acquire("frozenJob", Duration::from_millis(800))
        .await
        .expect("acquire");
    hung.set_plan(FaultPlan::hang());
    let valid_until = lease.valid_until();
    let java = JavaShedLock {
        pool: pool.clone(),
        table,
        locked_by: "java-host-3".into(),
    };
    let mut first = true;
    while !java.lock("frozenJob", Duration::from_secs(10), first).await {
        first = false;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let java_at = Instant::now();
    assert!(
        java_at >= valid_until,
        "java took over before the rust holder's validity ended"
    );
    tokio::time::timeout(Duration::from_secs(1), lease.lost())
        .await
        .expect("rust holder saw the loss");
}

/// Unfenced tables: the store says it is efficiency-only, tokens come from the
/// database clock at each grant, stay fixed across renewals and grow at each grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfenced_table_is_efficiency_only_with_growing_tokens() {
    let pool = pool().await;
    let table = fresh_table(&pool, false).await;
    let store = store_on(&pool, &table).await;
    assert!(!store.is_fenced());
    assert_eq!(store.capabilities().grade, Grade::EfficiencyOnly);
    assert!(LeaseClient::from_dyn(Arc::new(store.clone()), ClientConfig::default()).is_err());
    let client = store.lease_client(ClientConfig::default()).expect("client");
    let mut last = FencingToken::ZERO;
    for _ in 0..5 {
        let lease = client
            .acquire("unfenced", Duration::from_secs(2))
            .await
            .expect("acquire");
        assert!(lease.token() > last, "{} after {last}", lease.token());
        last = lease.token();
        let first_deadline = lease.valid_until();
        // Wait for a renewal: the token must not change.
        let renewed =
            leasehold_core::testing::process::poll(Duration::from_secs(5), || lease.valid_until() != first_deadline)
                .await;
        assert!(
            renewed,
            "no renewal within 5 s of a 2 s lease: {:?}",
            lease.loss_cause()
        );
        let name = LeaseName::new("unfenced").expect("name");
        let now = client.store().read(&name).await.expect("read").expect("present");
        assert_eq!(now.record.token, lease.token(), "renewal changed an unfenced token");
        lease.release().await.expect("release");
    }
}

/// A missing table or a badly typed column is a misconfiguration, never a grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_mistyped_tables_are_misconfigured() {
    let pool = pool().await;
    let err = ShedlockStore::new(pool.clone(), ShedlockConfig::table(format!("{SCHEMA}.no_such_table_x")))
        .await
        .expect_err("missing table");
    assert!(matches!(err, leasehold_core::Error::Misconfigured { .. }), "{err}");
    let table = fresh_table(&pool, false).await;
    sqlx::query(AssertSqlSafe(format!("ALTER TABLE {table} ADD COLUMN fence TEXT")))
        .execute(&pool)
        .await
        .expect("alter");
    let err = ShedlockStore::new(pool.clone(), ShedlockConfig::table(&table))
        .await
        .expect_err("text fence");
    assert!(matches!(err, leasehold_core::Error::Misconfigured { .. }), "{err}");
    let store = store_on(&pool, &fresh_table(&pool, true).await).await;
    let long = LeaseName::new("x".repeat(65)).expect("name");
    assert!(matches!(
        store.read(&long).await,
        Err(leasehold_core::Error::InvalidInput { .. })
    ));
}

/// Sixteen sessions, connected in advance and released together, create one fenced
/// ShedLock table (`CREATE` then `ADD COLUMN fence`): every call succeeds and the
/// table has its fence column. Unserialized, these collide with `42P07` / `42710` /
/// `23505` / `42701` (CI once failed on the lease table's equivalent).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_sessions_creating_one_fenced_table_at_once_all_succeed() {
    let admin = pool().await;
    let mut sessions = Vec::new();
    for _ in 0..16 {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .connect(&pg_url())
            .await
            .expect("connect");
        sessions.push(pool);
    }
    for round in 0..5 {
        let table = fresh_name(&admin).await;
        let barrier = Arc::new(tokio::sync::Barrier::new(sessions.len()));
        let tasks: Vec<_> = sessions
            .iter()
            .map(|pool| {
                let (pool, table, barrier) = (pool.clone(), table.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    ShedlockStore::provision(&pool, &table, true).await
                })
            })
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            let result = task.await.expect("task");
            assert!(result.is_ok(), "round {round}, session {i}: {result:?}");
        }
        assert!(
            store_on(&admin, &table).await.is_fenced(),
            "round {round}: fence column added"
        );
    }
}
