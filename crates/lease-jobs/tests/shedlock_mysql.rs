//! The ShedLock-table store against the real MariaDB (`LEASEHOLD_MYSQL_URL`): the
//! conformance suite on a fenced table, the unfenced mode, and exclusion with a
//! simulated Java ShedLock instance that runs ShedLock's own MySQL statements
//! (`MySqlServerTimeStatementsSource`, used with `usingDbTime()`). The cases every
//! ShedLock-table store passes are [`shedlock::cases`]; the ones here are MySQL's own.
#![cfg(feature = "shedlock-mysql")]
#![allow(missing_docs)]

mod shedlock;

use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::store::CasStore;
use leasehold_core::{ClientConfig, LeaseName};
use leasehold_jobs::shedlock::{ShedlockConfig, ShedlockMySqlStore};
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, Row};

use shedlock::java::JavaShedLock;
use shedlock::{Db, Dialect, assert_misconfigured};

fn mysql_url() -> String {
    leasehold_testkit::env("LEASEHOLD_MYSQL_URL")
}

/// A bound microsecond count after the server's UTC clock (ShedLock's `lock_until`).
const JAVA_UNTIL: &str = "TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3))";

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).expect("micros")
}

shedlock::store_calls!(ShedlockMySqlStore, sqlx::MySql, "LEASEHOLD_MYSQL_URL");

#[async_trait]
impl Dialect for ShedlockMySqlStore {
    const PREFIX: &'static str = "jshedlock_";
    const DDL_ROUNDS: usize = 3;
    const CLOCK: &'static str = "SYSDATE(6)";
    const TIMESTAMP: &'static str = "DATETIME(6)";
    const UTC_NOW: &'static str = "UTC_TIMESTAMP(3)";

    fn quoted(table: &str) -> String {
        format!("`{table}`")
    }

    /// The tables live in the URL's database, which exists.
    async fn make_room(_: &MySqlPool) {}

    fn reader(user: &str, visible: &str) -> (Vec<String>, Vec<String>) {
        let create = vec![
            format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'"),
            format!("GRANT SELECT ON `{visible}` TO '{user}'@'%'"),
        ];
        (create, vec![format!("DROP USER '{user}'@'%'")])
    }

    async fn test_tables(pool: &MySqlPool) -> Vec<String> {
        sqlx::query_scalar(
            "SELECT CAST(TABLE_NAME AS CHAR) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'jshedlock\\_%'",
        )
        .fetch_all(pool)
        .await
        .unwrap_or_default()
    }

    /// ShedLock's insert ignores an existing row; the update follows when it did.
    async fn java_lock(java: &JavaShedLock<Self>, name: &str, at_most: Duration, first: bool) -> bool {
        let (pool, table, locked_by) = (&java.db.pool, &java.table, &java.locked_by);
        if first {
            let inserted = sqlx::query(AssertSqlSafe(format!(
                "INSERT IGNORE INTO `{table}` (name, lock_until, locked_at, locked_by) \
                 VALUES (?, {JAVA_UNTIL}, UTC_TIMESTAMP(3), ?)"
            )))
            .bind(name)
            .bind(micros(at_most))
            .bind(locked_by)
            .execute(pool)
            .await
            .expect("java insert")
            .rows_affected();
            if inserted == 1 {
                return true;
            }
        }
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE `{table}` SET lock_until = {JAVA_UNTIL}, locked_at = UTC_TIMESTAMP(3), locked_by = ? \
             WHERE name = ? AND lock_until <= UTC_TIMESTAMP(3)"
        )))
        .bind(micros(at_most))
        .bind(locked_by)
        .bind(name)
        .execute(pool)
        .await
        .expect("java update")
        .rows_affected()
            == 1
    }

    async fn java_unlock(java: &JavaShedLock<Self>, name: &str, at_least: Duration) {
        let (pool, table, locked_by) = (&java.db.pool, &java.table, &java.locked_by);
        let kept = "TIMESTAMPADD(MICROSECOND, ?, locked_at)";
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE `{table}` SET lock_until = IF({kept} > UTC_TIMESTAMP(3), {kept}, UTC_TIMESTAMP(3)) \
             WHERE name = ? AND locked_by = ?"
        )))
        .bind(micros(at_least))
        .bind(micros(at_least))
        .bind(name)
        .bind(locked_by)
        .execute(pool)
        .await
        .expect("java unlock");
    }
}

shedlock::shedlock_cases!(ShedlockMySqlStore);

/// A MyISAM table or a session off UTC is a misconfiguration, never a grant (beyond
/// the missing tables and mistyped columns of the shared cases).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn myisam_tables_and_sessions_off_utc_are_misconfigured() {
    let db = Db::<ShedlockMySqlStore>::connect().await;
    let myisam = db.fresh_table(true).await;
    db.exec(format!("ALTER TABLE `{myisam}` ENGINE=MyISAM")).await;
    assert_misconfigured(db.open(&myisam).await, "MyISAM table");
    let fenced = db.fresh_table(true).await;
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
    assert_misconfigured(
        ShedlockMySqlStore::new(off_utc, ShedlockConfig::table(&fenced)).await,
        "session on +02:00",
    );
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
    let admin = Db::<ShedlockMySqlStore>::connect().await;
    let table = admin.fresh_table(true).await;
    admin
        .exec("SET GLOBAL log_output = 'TABLE', general_log = 1".to_owned())
        .await;
    let one = Db::<ShedlockMySqlStore>::session().await;
    let conn_id = one.count("SELECT CAST(CONNECTION_ID() AS SIGNED)".to_owned()).await;
    let store = one.store_on(&table).await;
    let client = store.clone().lease_client(ClientConfig::default()).expect("client");
    let name = LeaseName::new("counted").expect("name");
    let mut counts = Vec::new();
    let mut seen = logged(&admin.pool, conn_id).await.len();
    let mut step = |what: &'static str, all: Vec<String>| {
        counts.push((what, all[seen..].to_vec()));
        seen = all.len();
    };
    let lease = client
        .acquire(name.as_str(), Duration::from_secs(30))
        .await
        .expect("acquire");
    step("acquire", logged(&admin.pool, conn_id).await);
    store.read(&name).await.expect("read").expect("present");
    step("read", logged(&admin.pool, conn_id).await);
    lease.release().await.expect("release");
    step("release", logged(&admin.pool, conn_id).await);
    admin.exec("SET GLOBAL general_log = 0".to_owned()).await;
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
    admin.exec(format!("DROP TABLE `{table}`")).await;
}
