//! Acquire of a free lease, renew and release are one statement each, counted three
//! ways: by the leasehold-core `CountingStore` (calls into the store), by sqlx's own
//! per-statement events (every statement a connection executed, below the store), and
//! by the MariaDB server itself: its general query log (`log_output = TABLE`), which
//! records every command a client sends (`Prepare`, `Execute`, `Query`) with the
//! connection's id. A refused acquire costs the write and the client's read: two.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::testing::CountingStore;
use leasehold_core::testing::process::poll;
use leasehold_core::{AcquireOutcome, LeaseClient, store::CasStore};
use leasehold_sql::testing::StatementLog;
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::{Executor, Row};

/// The commands one connection sent, as the server's general log recorded them.
struct ServerLog {
    conn_id: i64,
    pool: MySqlPool,
    reader: MySqlPool,
    seq: u32,
}

impl ServerLog {
    async fn new(pool: &MySqlPool) -> Self {
        let reader = common::pool_of(2).await;
        // Server-wide and idempotent; this instance is the tests' own (stores.sh).
        reader
            .execute("SET GLOBAL log_output = 'TABLE', general_log = 1")
            .await
            .expect("turn on the general log (needs SUPER on the tests' own server)");
        let conn_id: i64 = sqlx::query("SELECT CAST(CONNECTION_ID() AS SIGNED)")
            .fetch_one(pool)
            .await
            .expect("connection id")
            .get(0);
        Self {
            conn_id,
            pool: pool.clone(),
            reader,
            seq: 0,
        }
    }

    /// Turns the general log off again and empties it (the server is the tests' own;
    /// the later test binaries need not pay for it).
    async fn stop(&self) {
        self.reader
            .execute("SET GLOBAL general_log = 0")
            .await
            .expect("turn off the general log");
        self.reader
            .execute("TRUNCATE TABLE mysql.general_log")
            .await
            .expect("empty the general log");
    }

    async fn marker(&mut self) -> String {
        self.seq += 1;
        let m = format!("lh-count-mark-{}-{}", self.conn_id, self.seq);
        self.pool
            .execute(sqlx::AssertSqlSafe(format!("SELECT '{m}'")))
            .await
            .expect("marker");
        m
    }

    /// Runs `op` between two markers and returns the commands (`Prepare`, `Execute`,
    /// `Query`, with their text) the connection sent between them.
    async fn count<F: std::future::Future<Output = ()>>(&mut self, op: F) -> Vec<(String, String)> {
        let start = self.marker().await;
        op.await;
        let end = self.marker().await;
        // The log table is written as the server runs each command: poll it, with a deadline.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let rows = sqlx::query(
                "SELECT CAST(command_type AS CHAR) AS command, CAST(argument AS CHAR) AS text \
                 FROM mysql.general_log WHERE thread_id = ?",
            )
            .bind(self.conn_id)
            .fetch_all(&self.reader)
            .await
            .expect("read the general log");
            let rows: Vec<(String, String)> = rows
                .iter()
                .map(|r| (r.get::<String, _>("command"), r.get::<String, _>("text")))
                .collect();
            let from = rows.iter().position(|(_, t)| t.contains(&start));
            let to = rows.iter().position(|(_, t)| t.contains(&end));
            if let (Some(from), Some(to)) = (from, to) {
                return rows[from + 1..to].to_vec();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "markers {start}/{end} never appeared in mysql.general_log"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The statements the server executed: `Execute` of a prepared statement, or a plain
/// `Query` (a `Prepare` is the per-connection setup sqlx caches, not a statement).
fn executed(commands: &[(String, String)]) -> Vec<&(String, String)> {
    commands
        .iter()
        .filter(|(c, _)| c == "Execute" || c == "Query")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_renew_release_are_one_statement_each() {
    let log = StatementLog::install();
    // One connection, so one connection id carries every statement of the store.
    let pool = MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&common::mysql_url())
        .await
        .expect("connect");
    let table = common::unique_table("lh_count");
    let store = common::store_on(&pool, &table).await;
    let mut server = ServerLog::new(&pool).await;
    let counting = CountingStore::new(store.clone());
    let client = LeaseClient::new(counting.clone());
    let needle = format!("`{table}`");

    // Warm up: sqlx prepares each statement once per connection.
    let warm = client.acquire("warm", Duration::from_millis(600)).await.expect("warm");
    let first = warm.valid_until();
    assert!(
        poll(Duration::from_secs(5), || warm.valid_until() > first).await,
        "no renewal"
    );
    warm.release().await.expect("release");
    let rival = LeaseClient::new(store.clone());
    let warm = rival.acquire("warm", Duration::from_millis(600)).await.expect("warm");
    let _ = client
        .try_acquire("warm", Duration::from_millis(600))
        .await
        .expect("refused");
    warm.release().await.expect("release");

    let mut lease = None;
    counting.reset();
    let mark = log.mark();
    let on_server = server
        .count(async {
            lease = Some(
                client
                    .acquire("counted", Duration::from_millis(600))
                    .await
                    .expect("acquire"),
            );
        })
        .await;
    let lease = lease.expect("lease");
    assert_eq!(counting.counts().round_trips(), 1, "acquire: {:?}", counting.counts());
    assert_eq!(log.since(mark, &needle).len(), 1, "acquire through sqlx");
    let done = executed(&on_server);
    assert_eq!(done.len(), 1, "acquire of a free lease on the server: {on_server:#?}");
    assert!(done[0].1.contains("ON DUPLICATE KEY UPDATE"), "{done:?}");

    counting.reset();
    let mark = log.mark();
    let first = lease.valid_until();
    let on_server = server
        .count(async {
            assert!(
                poll(Duration::from_secs(5), || lease.valid_until() > first).await,
                "no renewal"
            );
        })
        .await;
    // Counted as soon as the first renewal landed: the next is ~200 ms away.
    assert_eq!(counting.counts().renews, 1, "renewal: {:?}", counting.counts());
    assert_eq!(log.since(mark, &needle).len(), 1, "renewal through sqlx");
    let done = executed(&on_server);
    assert_eq!(done.len(), 1, "one renewal on the server: {on_server:#?}");
    assert!(done[0].1.starts_with("UPDATE"), "{done:?}");

    counting.reset();
    let mark = log.mark();
    let on_server = server
        .count(async {
            lease.release().await.expect("release");
        })
        .await;
    assert_eq!(counting.counts().round_trips(), 1, "release: {:?}", counting.counts());
    assert_eq!(log.since(mark, &needle).len(), 1, "release through sqlx");
    assert_eq!(executed(&on_server).len(), 1, "release on the server: {on_server:#?}");

    // Re-acquire of the released lease: one claim.
    let mut again = None;
    let on_server = server
        .count(async {
            again = Some(
                client
                    .acquire("counted", Duration::from_millis(600))
                    .await
                    .expect("again"),
            );
        })
        .await;
    let again = again.expect("again");
    assert_eq!(again.token(), leasehold_core::FencingToken::new(2));
    assert_eq!(
        executed(&on_server).len(),
        1,
        "claim of a released lease: {on_server:#?}"
    );

    // A refused acquire by a client that never saw the lease: the claim, then a read.
    let rival = LeaseClient::new(store.clone());
    let _ = rival
        .try_acquire("warm-rival", Duration::from_millis(600))
        .await
        .expect("warm rival");
    let mut outcome = None;
    let on_server = server
        .count(async {
            outcome = Some(
                rival
                    .try_acquire("counted", Duration::from_millis(600))
                    .await
                    .expect("try"),
            );
        })
        .await;
    match outcome.expect("outcome") {
        AcquireOutcome::Held { token, .. } => assert_eq!(token, again.token()),
        AcquireOutcome::Granted(_) => panic!("granted while held"),
    }
    let done = executed(&on_server);
    // (A renewal of `again` may land in the window; it is the only other statement.)
    let not_renewals: Vec<_> = done.iter().filter(|(_, t)| !t.starts_with("UPDATE")).collect();
    assert_eq!(not_renewals.len(), 2, "refused acquire: {on_server:#?}");
    again.release().await.expect("release");

    // Takeover of an expired lease (its holder stopped answering): at most two.
    let held = common::shared::frozen_holder(store.clone(), "count/expired", Duration::from_millis(300)).await;
    let mut most = 0;
    common::shared::take_over(&held, async || {
        let mut granted = None;
        let on_server = server
            .count(async {
                granted = client
                    .try_acquire("count/expired", Duration::from_secs(5))
                    .await
                    .expect("takeover")
                    .granted();
            })
            .await;
        let n = executed(&on_server).len();
        most = most.max(n);
        assert!(n <= 2, "a takeover attempt on the server: {on_server:#?}");
        granted
    })
    .await;
    println!(
        "statements on the server (general log, Execute/Query): acquire 1, renew 1, release 1, \
         re-acquire 1, refused acquire 2 (claim + read), takeover attempt at most {most}"
    );
    server.stop().await;
    common::exec(&common::pool().await, &format!("DROP TABLE `{table}`")).await;
}

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
