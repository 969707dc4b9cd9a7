//! Acquire of a free lease, renew and release are one statement each, counted three
//! ways: by the leasehold-core `CountingStore` (calls into the store), by sqlx's own
//! per-statement events (every statement a connection executed, below the store), and
//! by the Postgres server itself (`log_statement = 'all'` for this test's session, read
//! back from the server log by backend pid). A refused acquire is one statement too, and
//! tells who holds the lease and for how long.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::testing::CountingStore;
use leasehold_core::testing::process::poll;
use leasehold_core::{LeaseClient, store::CasStore};
use leasehold_sql::testing::StatementLog;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Executor, PgPool, Row};

/// Counts, in the server's log, the statements one backend executed between two
/// marker statements.
struct ServerLog {
    path: std::path::PathBuf,
    pid: i32,
    pool: PgPool,
    reader: PgPool,
    seq: u32,
}

impl ServerLog {
    async fn new(pool: &PgPool) -> Self {
        let dir = std::env::var("LEASEHOLD_STORES_DIR")
            .unwrap_or_else(|_| panic!("LEASEHOLD_STORES_DIR is not set: eval \"$(scripts/stores.sh env)\""));
        let path = std::path::Path::new(&dir).join("postgres").join("postgres.log");
        let pid: i32 = sqlx::query("SELECT pg_backend_pid()")
            .fetch_one(pool)
            .await
            .expect("backend pid")
            .get(0);
        Self {
            path,
            pid,
            pool: pool.clone(),
            reader: common::pool().await,
            seq: 0,
        }
    }

    async fn log_text(&self) -> String {
        match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            // Not readable by this OS user: let the server read its own log.
            Err(_) => sqlx::query("SELECT pg_read_file($1)")
                .bind(self.path.display().to_string())
                .fetch_one(&self.reader)
                .await
                .unwrap_or_else(|e| panic!("cannot read the server log {}: {e}", self.path.display()))
                .get(0),
        }
    }

    async fn marker(&mut self) -> String {
        self.seq += 1;
        let m = format!("lh-count-mark-{}-{}", self.pid, self.seq);
        let sql = format!("SELECT '{m}'");
        self.pool.execute(sqlx::AssertSqlSafe(sql)).await.expect("marker");
        m
    }

    /// Runs `op` between two markers and returns the statements the backend logged
    /// between them.
    async fn count<F: std::future::Future<Output = ()>>(&mut self, op: F) -> Vec<String> {
        let start = self.marker().await;
        op.await;
        let end = self.marker().await;
        let tag = format!("[{}] LOG:  ", self.pid);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.log_text().await;
            let lines: Vec<&str> = text.lines().filter(|l| l.contains(&tag)).collect();
            let from = lines.iter().position(|l| l.contains(&start));
            let to = lines.iter().position(|l| l.contains(&end));
            if let (Some(from), Some(to)) = (from, to) {
                return lines[from + 1..to]
                    .iter()
                    .filter(|l| l.contains("LOG:  execute ") || l.contains("LOG:  statement: "))
                    .map(|l| (*l).to_owned())
                    .collect();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "markers {start}/{end} never appeared in {}",
                self.path.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// What one operation cost: one store call (since the last reset), one statement
/// through sqlx (`driver`), one statement on the server.
fn one_of_each<S: CasStore>(counting: &CountingStore<S>, driver: &[String], on_server: &[String]) {
    assert_eq!(
        counting.counts().round_trips(),
        1,
        "store calls: {:?}",
        counting.counts()
    );
    assert_eq!(driver.len(), 1, "statements sqlx ran: {driver:#?}");
    assert_eq!(on_server.len(), 1, "statements the server ran: {on_server:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_renew_release_are_one_statement_each() {
    let log = StatementLog::install();
    let url = common::pg_url();
    // One connection, so one backend pid carries every statement of the store.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute("SET log_statement = 'all'").await?;
                Ok(())
            })
        })
        .connect(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot reach Postgres at {url}: {e}"));
    let table = common::unique_table("lh_count");
    let store = common::store_on(&pool, &table).await;
    let counting = CountingStore::new(store.clone());
    let client = LeaseClient::new(counting.clone());
    let rival = LeaseClient::new(store.clone());
    let mut server = ServerLog::new(&pool).await;
    let name = "count/one-statement";

    // Acquire of a free lease.
    let mark = log.mark();
    counting.reset();
    let mut lease = None;
    let on_server = server
        .count(async {
            lease = client
                .try_acquire(name, Duration::from_millis(900))
                .await
                .expect("acquire")
                .granted();
        })
        .await;
    let lease = lease.expect("a free lease is granted");
    one_of_each(&counting, &log.since(mark, &table), &on_server);
    assert!(on_server[0].contains("INSERT INTO") && on_server[0].contains("ON CONFLICT (name) DO UPDATE"));

    // A refused acquire: one statement, and the answer names the holder and its time.
    let mark = log.mark();
    let on_server = server
        .count(async {
            let outcome = rival.try_acquire(name, Duration::from_secs(5)).await.expect("rival");
            common::shared::assert_held_by(outcome, &lease, Duration::from_millis(900));
        })
        .await;
    assert_eq!(log.since(mark, &table).len(), 1);
    assert_eq!(on_server.len(), 1, "refused acquire on the server: {on_server:#?}");

    // One renewal (the client renews at a third of the TTL).
    let mark = log.mark();
    counting.reset();
    let first = lease.valid_until();
    let on_server = server
        .count(async {
            assert!(
                poll(Duration::from_secs(5), || lease.valid_until() > first).await,
                "no renewal"
            );
        })
        .await;
    assert_eq!(counting.counts().renews, 1, "store calls: {:?}", counting.counts());
    one_of_each(&counting, &log.since(mark, &table), &on_server);
    assert!(on_server[0].contains("UPDATE"));

    // Release.
    let mark = log.mark();
    counting.reset();
    let on_server = server
        .count(async {
            lease.release().await.expect("release");
        })
        .await;
    one_of_each(&counting, &log.since(mark, &table), &on_server);

    // Takeover of an expired lease (its holder stopped answering): one statement too.
    let held = common::shared::frozen_holder(store.clone(), "count/expired", Duration::from_millis(300)).await;
    common::shared::take_over(&held, async || {
        let mark = log.mark();
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
        assert_eq!(log.since(mark, &table).len(), 1, "one statement per attempt");
        assert_eq!(
            on_server.len(),
            1,
            "one statement per attempt on the server: {on_server:#?}"
        );
        granted
    })
    .await;
    println!(
        "statements per operation (CountingStore / sqlx / server log): acquire 1/1/1, refused 1/1/1, renew 1/1/1, release 1/1/1, takeover 1/1/1"
    );
    common::exec(&pool, &format!("DROP TABLE \"{table}\"")).await;
}
