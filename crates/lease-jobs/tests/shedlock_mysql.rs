//! The ShedLock-table store against the real MariaDB (`LEASEHOLD_MYSQL_URL`): the
//! conformance suite on a fenced table, the unfenced mode, and exclusion with a
//! simulated Java ShedLock instance that runs ShedLock's own MySQL statements
//! (`MySqlServerTimeStatementsSource`, used with `usingDbTime()`).
#![cfg(feature = "shedlock-mysql")]
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::conformance::Fixture;
use leasehold_core::{
    ClientConfig, FencingToken, LeaseClient, LeaseName,
    store::{CasStore, Grade},
};
use leasehold_jobs::shedlock::{ShedlockConfig, ShedlockMySqlStore};
use leasehold_jobs::{LockConfig, LockingExecutor, RunOutcome};
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, Row};
use tokio::time::Instant;

fn mysql_url() -> String {
    leasehold_testkit::env("LEASEHOLD_MYSQL_URL")
}

async fn pool() -> MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(6)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&mysql_url())
        .await
        .unwrap_or_else(|e| panic!("MariaDB at LEASEHOLD_MYSQL_URL unreachable: {e}"))
}

static SEQ: AtomicU64 = AtomicU64::new(0);
static CLEANED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Drops the tables earlier runs of these tests left: those whose creating process
/// (the pid in the name) is gone.
async fn drop_tables_of_finished_runs(pool: &MySqlPool) {
    if CLEANED.swap(true, Ordering::SeqCst) {
        return;
    }
    let Ok(rows) = sqlx::query(
        "SELECT CAST(TABLE_NAME AS CHAR) FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'jshedlock\\_%'",
    )
    .fetch_all(pool)
    .await
    else {
        return;
    };
    for row in rows {
        let table: String = row.get(0);
        let pid = table.strip_prefix("jshedlock_").and_then(|r| r.split('_').next());
        if pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS `{table}`")))
                .execute(pool)
                .await;
        }
    }
}

/// A table name no other test uses.
async fn fresh_name(pool: &MySqlPool) -> String {
    drop_tables_of_finished_runs(pool).await;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "jshedlock_{}_{}_{nanos}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// A fresh ShedLock table (ShedLock's MySQL DDL), with the fence column if `fence`.
async fn fresh_table(pool: &MySqlPool, fence: bool) -> String {
    let table = fresh_name(pool).await;
    ShedlockMySqlStore::provision(pool, &table, fence)
        .await
        .expect("create table");
    table
}

async fn store_on(pool: &MySqlPool, table: &str) -> ShedlockMySqlStore {
    ShedlockMySqlStore::new(pool.clone(), ShedlockConfig::table(table))
        .await
        .expect("open shedlock store")
}

async fn exec(pool: &MySqlPool, sql: String) {
    sqlx::query(AssertSqlSafe(sql.clone()))
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

struct Fenced {
    pool: MySqlPool,
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
            "INSERT INTO `{}` (name, lock_until, locked_at, locked_by, fence) \
             VALUES (?, UTC_TIMESTAMP(3) + INTERVAL 1 HOUR, UTC_TIMESTAMP(3), 'x', -5)",
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

/// ShedLock's own MySQL statements (`MySqlServerTimeStatementsSource`), run as a Java
/// instance would: `UTC_TIMESTAMP(3)` and microsecond intervals.
struct JavaShedLock {
    pool: MySqlPool,
    table: String,
    locked_by: String,
}

impl JavaShedLock {
    fn micros(d: Duration) -> i64 {
        i64::try_from(d.as_micros()).expect("micros")
    }

    /// `StorageBasedLockProvider.lock`: the insert (first use of a name), and the
    /// update when the insert did not apply.
    async fn lock(&self, name: &str, at_most: Duration, first: bool) -> bool {
        let t = &self.table;
        let until = "TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3))";
        if first {
            let inserted = sqlx::query(AssertSqlSafe(format!(
                "INSERT IGNORE INTO `{t}` (name, lock_until, locked_at, locked_by) \
                 VALUES (?, {until}, UTC_TIMESTAMP(3), ?)"
            )))
            .bind(name)
            .bind(Self::micros(at_most))
            .bind(&self.locked_by)
            .execute(&self.pool)
            .await
            .expect("java insert")
            .rows_affected();
            if inserted == 1 {
                return true;
            }
        }
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE `{t}` SET lock_until = {until}, locked_at = UTC_TIMESTAMP(3), locked_by = ? \
             WHERE name = ? AND lock_until <= UTC_TIMESTAMP(3)"
        )))
        .bind(Self::micros(at_most))
        .bind(&self.locked_by)
        .bind(name)
        .execute(&self.pool)
        .await
        .expect("java update")
        .rows_affected()
            == 1
    }

    /// `unlock`: keeps the lock until `locked_at + lockAtLeastFor` if that is later.
    async fn unlock(&self, name: &str, at_least: Duration) {
        let t = &self.table;
        let kept = "TIMESTAMPADD(MICROSECOND, ?, locked_at)";
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE `{t}` SET lock_until = IF({kept} > UTC_TIMESTAMP(3), {kept}, UTC_TIMESTAMP(3)) \
             WHERE name = ? AND locked_by = ?"
        )))
        .bind(Self::micros(at_least))
        .bind(Self::micros(at_least))
        .bind(name)
        .bind(&self.locked_by)
        .execute(&self.pool)
        .await
        .expect("java unlock");
    }
}

/// A log of who held the lock when, stamped by the database clock (`SYSDATE(6)`: the
/// time of the call), to check that no two holders ever overlapped.
async fn log_table(pool: &MySqlPool) -> String {
    let t = format!("{}_log", fresh_name(pool).await);
    exec(
        pool,
        format!(
            "CREATE TABLE `{t}` (id BIGINT AUTO_INCREMENT PRIMARY KEY, who VARCHAR(64) NOT NULL, token BIGINT, \
             started DATETIME(6) NOT NULL, ended DATETIME(6)) ENGINE=InnoDB"
        ),
    )
    .await;
    t
}

async fn log_start(pool: &MySqlPool, log: &str, who: &str, token: Option<FencingToken>) -> u64 {
    let token = token.map(|t| t.to_i64().expect("token"));
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO `{log}` (who, token, started) VALUES (?, ?, SYSDATE(6))"
    )))
    .bind(who)
    .bind(token)
    .execute(pool)
    .await
    .expect("log start")
    .last_insert_id()
}

async fn log_end(pool: &MySqlPool, log: &str, id: u64) {
    sqlx::query(AssertSqlSafe(format!(
        "UPDATE `{log}` SET ended = SYSDATE(6) WHERE id = ?"
    )))
    .bind(id)
    .execute(pool)
    .await
    .expect("log end");
}

async fn count(pool: &MySqlPool, sql: String) -> i64 {
    sqlx::query(AssertSqlSafe(sql))
        .fetch_one(pool)
        .await
        .expect("count")
        .get(0)
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
        let overlaps = count(
            &pool,
            format!(
                "SELECT COUNT(*) FROM `{log}` a JOIN `{log}` b ON a.id < b.id \
                 WHERE a.started < b.ended AND b.started < a.ended"
            ),
        )
        .await;
        let total = count(&pool, format!("SELECT COUNT(*) FROM `{log}` WHERE ended IS NOT NULL")).await;
        eprintln!("fenced={fenced}: rust runs {rust_runs}, java runs {java_runs}, overlaps {overlaps}");
        assert_eq!(overlaps, 0, "fenced={fenced}: holders overlapped");
        assert!(rust_runs >= 5 && java_runs >= 5, "rust {rust_runs}, java {java_runs}");
        assert_eq!(total, rust_runs + java_runs);
        // Rust tokens strictly increase across Rust tenures.
        let tokens: Vec<i64> = sqlx::query(AssertSqlSafe(format!(
            "SELECT token FROM `{log}` WHERE token IS NOT NULL ORDER BY started"
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

/// A missing table, a badly typed column, a MyISAM table or a session off UTC is a
/// misconfiguration, never a grant; a name longer than the column is bad input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_mistyped_or_unsuitable_tables_are_misconfigured() {
    let pool = pool().await;
    let misconfigured = |r: leasehold_core::Result<ShedlockMySqlStore>, what: &str| match r {
        Err(leasehold_core::Error::Misconfigured { .. }) => {}
        other => panic!("{what}: {other:?}"),
    };
    misconfigured(
        ShedlockMySqlStore::new(pool.clone(), ShedlockConfig::table("no_such_table_x")).await,
        "missing table",
    );
    let table = fresh_table(&pool, false).await;
    exec(&pool, format!("ALTER TABLE `{table}` ADD COLUMN fence TEXT")).await;
    misconfigured(
        ShedlockMySqlStore::new(pool.clone(), ShedlockConfig::table(&table)).await,
        "text fence",
    );
    let myisam = fresh_table(&pool, true).await;
    exec(&pool, format!("ALTER TABLE `{myisam}` ENGINE=MyISAM")).await;
    misconfigured(
        ShedlockMySqlStore::new(pool.clone(), ShedlockConfig::table(&myisam)).await,
        "MyISAM table",
    );
    let fenced = fresh_table(&pool, true).await;
    let off_utc = MySqlPoolOptions::new()
        .max_connections(1)
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::query("SET time_zone = '+02:00'").execute(conn).await?;
                Ok(())
            })
        })
        .connect(&mysql_url())
        .await
        .expect("connect");
    misconfigured(
        ShedlockMySqlStore::new(off_utc, ShedlockConfig::table(&fenced)).await,
        "session on +02:00",
    );
    let store = store_on(&pool, &fenced).await;
    let long = LeaseName::new("x".repeat(65)).expect("name");
    assert!(matches!(
        store.read(&long).await,
        Err(leasehold_core::Error::InvalidInput { .. })
    ));
    assert_eq!(
        count(&pool, format!("SELECT COUNT(*) FROM `{fenced}`")).await,
        0,
        "nothing was written"
    );
}

/// Sixteen sessions create one fenced ShedLock table at once (`CREATE` then
/// `ADD COLUMN fence`): every call succeeds and the table has its fence column.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_sessions_creating_one_fenced_table_at_once_all_succeed() {
    let admin = pool().await;
    let mut sessions = Vec::new();
    for _ in 0..16 {
        let pool = MySqlPoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .connect(&mysql_url())
            .await
            .expect("connect");
        sessions.push(pool);
    }
    for round in 0..3 {
        let table = fresh_name(&admin).await;
        let barrier = Arc::new(tokio::sync::Barrier::new(sessions.len()));
        let tasks: Vec<_> = sessions
            .iter()
            .map(|pool| {
                let (pool, table, barrier) = (pool.clone(), table.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    ShedlockMySqlStore::provision(&pool, &table, true).await
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

/// The statements connection `conn_id` sent, from the server's general log
/// (`log_output = TABLE`): its `Execute`s and `Query`s, in order.
async fn logged(reader: &MySqlPool, conn_id: i64) -> Vec<String> {
    sqlx::query(
        "SELECT CAST(argument AS CHAR) FROM mysql.general_log \
         WHERE thread_id = ? AND command_type IN ('Execute', 'Query') ORDER BY event_time",
    )
    .bind(conn_id)
    .fetch_all(reader)
    .await
    .expect("read the general log")
    .iter()
    .map(|r| r.get::<String, _>(0))
    .collect()
}

/// The round trips the crate docs state, counted at the server (its general log) for a
/// store on one connection: a write (a grant, a renewal, a release) is four — `BEGIN`,
/// the row read `FOR UPDATE` with the server's clock, the write, `COMMIT` — and a read
/// is one `SELECT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_four_round_trips_and_reads_one() {
    let admin = pool().await;
    let table = fresh_table(&admin, true).await;
    exec(&admin, "SET GLOBAL log_output = 'TABLE', general_log = 1".to_owned()).await;
    let one = MySqlPoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&mysql_url())
        .await
        .expect("one connection");
    let conn_id: i64 = sqlx::query("SELECT CAST(CONNECTION_ID() AS SIGNED)")
        .fetch_one(&one)
        .await
        .expect("connection id")
        .get(0);
    let store = store_on(&one, &table).await;
    let client = store.clone().lease_client(ClientConfig::default()).expect("client");
    let name = LeaseName::new("counted").expect("name");
    let mut counts = Vec::new();
    let mut seen = logged(&admin, conn_id).await.len();
    let mut step = |what: &'static str, all: Vec<String>| {
        counts.push((what, all[seen..].to_vec()));
        seen = all.len();
    };
    let lease = client
        .acquire(name.as_str(), Duration::from_secs(30))
        .await
        .expect("acquire");
    step("acquire", logged(&admin, conn_id).await);
    store.read(&name).await.expect("read").expect("present");
    step("read", logged(&admin, conn_id).await);
    lease.release().await.expect("release");
    step("release", logged(&admin, conn_id).await);
    exec(&admin, "SET GLOBAL general_log = 0".to_owned()).await;
    for (what, statements) in &counts {
        let want = if *what == "read" { 1 } else { 4 };
        assert_eq!(
            statements.len(),
            want,
            "{what}: {} statements at the server, not {want}: {statements:#?}",
            statements.len()
        );
    }
    let acquire = &counts[0].1;
    assert!(acquire[0].eq_ignore_ascii_case("BEGIN"), "{acquire:#?}");
    assert!(acquire[1].contains("FOR UPDATE"), "{acquire:#?}");
    assert!(acquire[3].eq_ignore_ascii_case("COMMIT"), "{acquire:#?}");
    exec(&admin, format!("DROP TABLE `{table}`")).await;
}
