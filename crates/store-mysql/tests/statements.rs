//! The shared statement counts (`shared/statements.rs`) on the real MariaDB: the
//! server's own count comes from its general query log (`log_output = TABLE`), which
//! records every command a client sends (`Prepare`, `Execute`, `Query`) with the
//! connection's id; the statements are its `Execute`s and `Query`s (a `Prepare` is the
//! per-connection setup sqlx caches). A refused acquire costs the write and the
//! client's read: two. And MySQL's own: the claim's reply carries the token.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use common::shared::statements::{Counted, ServerLog};
use leasehold_core::store::CasStore;
use sqlx::mysql::MySqlPool;
use sqlx::{Executor, Row};

/// The statements one connection executed, from the server's general log.
pub struct GeneralLog {
    conn_id: i64,
    reader: MySqlPool,
}

impl ServerLog for GeneralLog {
    async fn statements(&self) -> Vec<String> {
        sqlx::query(
            "SELECT CAST(argument AS CHAR) FROM mysql.general_log \
             WHERE thread_id = ? AND command_type IN ('Execute', 'Query')",
        )
        .bind(self.conn_id)
        .fetch_all(&self.reader)
        .await
        .expect("read the general log")
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect()
    }

    /// Turns the general log off again and empties it.
    async fn stop(&self) {
        for sql in ["SET GLOBAL general_log = 0", "TRUNCATE TABLE mysql.general_log"] {
            self.reader.execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
}

impl Counted for common::My {
    type Log = GeneralLog;
    const CLAIM: &'static str = "ON DUPLICATE KEY UPDATE";
    const REFUSED: usize = 2;
    const TAKEOVER: usize = 2;

    async fn logged_pool() -> (MySqlPool, Option<GeneralLog>, ()) {
        let reader = common::pool_of(2).await;
        // Server-wide and idempotent; this instance is the tests' own (stores.sh).
        reader
            .execute("SET GLOBAL log_output = 'TABLE', general_log = 1")
            .await
            .expect("turn on the general log (needs SUPER on the tests' own server)");
        let pool = common::pool_of(1).await;
        let conn_id: i64 = sqlx::query("SELECT CAST(CONNECTION_ID() AS SIGNED)")
            .fetch_one(&pool)
            .await
            .expect("connection id")
            .get(0);
        (pool, Some(GeneralLog { conn_id, reader }), ())
    }
}

common::shared::sql_tests!(statements, common::My);

/// The claim's reply carries the token: under the general log it is one `Execute`, and
/// the `LAST_INSERT_ID()` it sets is the token the store returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_reply_carries_the_token() {
    let pool = common::pool_of(1).await;
    let table = common::unique_table("lh_insert_id");
    let store = common::store_on(&pool, &table).await;
    let name = leasehold_core::LeaseName::new("t").expect("name");
    let holder = leasehold_core::HolderId::new("h").expect("holder");
    let ttl = leasehold_core::Ttl::from_millis(50).expect("ttl");
    for want in 1..=3u64 {
        let rec = leasehold_core::store::LeaseRecord::held(holder.clone(), leasehold_core::FencingToken::ZERO, ttl);
        let written = loop {
            match store
                .write(&name, &leasehold_core::store::Precondition::Claimable, &rec)
                .await
                .expect("claim")
            {
                leasehold_core::store::CasOutcome::Written(s) => break s,
                // Held until its 50 ms run out on the server's clock.
                leasehold_core::store::CasOutcome::Conflict(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        assert_eq!(written.record.token.get(), want);
        let last: i64 = sqlx::query("SELECT CAST(LAST_INSERT_ID() AS SIGNED)")
            .fetch_one(&pool)
            .await
            .expect("last insert id")
            .get(0);
        let row: (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT fence_token, version FROM `{table}` WHERE name = 't'"
        )))
        .fetch_one(&pool)
        .await
        .expect("row");
        assert_eq!(last, row.0, "LAST_INSERT_ID() is the token the claim wrote");
        assert_eq!(row.0, i64::try_from(want).expect("token"));
        assert_eq!(
            written.version.as_str(),
            row.1.to_string(),
            "the version is the bound write id"
        );
    }
    common::exec(&pool, &format!("DROP TABLE `{table}`")).await;
}
