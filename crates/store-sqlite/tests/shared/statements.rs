//! Acquire of a free lease, renew, release and re-acquire are one statement each, on
//! every SQL store, counted three ways: by the leasehold-core `CountingStore` (calls
//! into the store), by sqlx's own per-statement events (every statement a connection
//! executed, below the store), and by the database server itself, where there is one
//! ([`ServerLog`]: Postgres's statement log, MariaDB's general log). A refused acquire
//! and each takeover attempt cost what [`Counted`] states for the database.

use std::future::Future;
use std::time::Duration;

use leasehold_core::testing::CountingStore;
use leasehold_core::testing::process::poll;
use leasehold_core::{FencingToken, LeaseClient};
use leasehold_sql::testing::StatementLog;

use super::db::{DbOf, PoolOf, Shell, TestDb, q};

/// The statements a database server logged for one connection.
#[allow(async_fn_in_trait)]
pub trait ServerLog {
    /// Every statement the connection executed so far, oldest first, as the server
    /// logged it (each line holds the statement's text).
    async fn statements(&self) -> Vec<String>;

    /// Ends the logging (the server is the tests' own: later tests need not pay for it).
    async fn stop(&self) {}
}

/// No server: SQLite runs in the test process, and only sqlx's events count.
pub struct NoServer;

impl ServerLog for NoServer {
    async fn statements(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A [`TestDb`] whose statements can be counted, and what each operation costs on it.
#[allow(async_fn_in_trait)]
pub trait Counted: TestDb {
    /// The server's log of one connection.
    type Log: ServerLog;

    /// What the claim statement contains (`ON CONFLICT`, `ON DUPLICATE KEY`).
    const CLAIM: &'static str;

    /// Statements of a refused acquire by a client that never saw the lease.
    const REFUSED: usize = 1;

    /// Statements of one takeover attempt, at most.
    const TAKEOVER: usize = 1;

    /// A pool of one connection, so that one server-side session carries every
    /// statement of the store, and the server's log of it (`None`: no server).
    async fn logged_pool() -> (PoolOf<Self>, Option<Self::Log>, Self::Keep);
}

/// What one operation ran: through sqlx, and on the server (if it has a log).
struct Ran {
    sqlx: Vec<String>,
    server: Option<Vec<String>>,
}

impl Ran {
    fn assert_at_most(&self, what: &str, n: usize) -> usize {
        assert!(self.sqlx.len() <= n, "{what} through sqlx: {:#?}", self.sqlx);
        if let Some(server) = &self.server {
            assert!(server.len() <= n, "{what} on the server: {server:#?}");
        }
        self.sqlx.len()
    }

    fn assert_exactly(&self, what: &str, n: usize) {
        assert_eq!(self.sqlx.len(), n, "{what} through sqlx: {:#?}", self.sqlx);
        if let Some(server) = &self.server {
            assert_eq!(server.len(), n, "{what} on the server: {server:#?}");
        }
    }
}

/// Counts what the store's connection runs, between two marker statements.
struct Counter<T: Counted> {
    pool: PoolOf<T>,
    server: Option<T::Log>,
    sqlx: StatementLog,
    table: String,
    seq: u32,
}

impl<T: Counted> Counter<T> {
    async fn marker(&mut self) -> String {
        self.seq += 1;
        let m = format!("lh-count-mark-{}-{}", std::process::id(), self.seq);
        <DbOf<T>>::run(&self.pool, &format!("SELECT '{m}'")).await;
        m
    }

    /// Runs `op` and returns what it ran.
    async fn around<F: Future>(&mut self, op: F) -> (F::Output, Ran) {
        let mark = self.sqlx.mark();
        let start = self.marker().await;
        let out = op.await;
        let end = self.marker().await;
        let sqlx = self.sqlx.since(mark, &self.table);
        let Some(log) = &self.server else {
            return (out, Ran { sqlx, server: None });
        };
        // The server writes its log as it runs each statement: poll, with a deadline.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let lines = log.statements().await;
            let from = lines.iter().position(|l| l.contains(&start));
            let to = lines.iter().position(|l| l.contains(&end));
            if let (Some(from), Some(to)) = (from, to) {
                let server = Some(lines[from + 1..to].to_vec());
                return (out, Ran { sqlx, server });
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "markers {start}/{end} never appeared in the server's log"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Acquire of a free lease, renew, release, re-acquire: one statement each (and one
/// store call); a refused acquire and a takeover attempt: what [`Counted`] says.
pub async fn acquire_renew_release_are_one_statement_each<T: Counted>() {
    let (pool, server, _keep) = T::logged_pool().await;
    let table = T::table("lh_count");
    let store = super::store_on::<T::B>(&pool, &table).await;
    let counting = CountingStore::new(store.clone());
    let client = LeaseClient::new(counting.clone());
    let mut count = Counter::<T> {
        pool: pool.clone(),
        server,
        sqlx: StatementLog::install(),
        table: table.clone(),
        seq: 0,
    };
    // Warm up: sqlx prepares each statement once per connection.
    let warm = client.acquire("warm", Duration::from_millis(600)).await.expect("warm");
    let first = warm.valid_until();
    assert!(
        poll(Duration::from_secs(5), || warm.valid_until() > first).await,
        "no renewal"
    );
    warm.release().await.expect("release");

    counting.reset();
    let (lease, ran) = count
        .around(client.try_acquire("counted", Duration::from_millis(900)))
        .await;
    let lease = lease.expect("acquire").granted().expect("a free lease is granted");
    assert_eq!(counting.counts().round_trips(), 1, "acquire: {:?}", counting.counts());
    ran.assert_exactly("acquire of a free lease", 1);
    assert!(ran.sqlx[0].contains(T::CLAIM), "{:?}", ran.sqlx);

    counting.reset();
    let first = lease.valid_until();
    let (renewed, ran) = count
        .around(poll(Duration::from_secs(5), || lease.valid_until() > first))
        .await;
    assert!(renewed, "no renewal");
    // Counted as soon as the first renewal landed: the next is ~300 ms away.
    assert_eq!(counting.counts().renews, 1, "renewal: {:?}", counting.counts());
    ran.assert_exactly("one renewal", 1);

    counting.reset();
    let (released, ran) = count.around(lease.release()).await;
    released.expect("release");
    assert_eq!(counting.counts().round_trips(), 1, "release: {:?}", counting.counts());
    ran.assert_exactly("release", 1);

    // Re-acquire of the released lease, held for 30 s: no renewal falls in what follows.
    let (again, ran) = count.around(client.acquire("counted", Duration::from_secs(30))).await;
    let again = again.expect("again");
    assert_eq!(again.token(), FencingToken::new(2));
    ran.assert_exactly("claim of a released lease", 1);

    // A refused acquire by a client that never saw the lease: it names the holder.
    let rival = LeaseClient::new(store.clone());
    let (outcome, ran) = count
        .around(rival.try_acquire("counted", Duration::from_millis(600)))
        .await;
    super::assert_held_by(outcome.expect("rival"), &again, Duration::from_secs(30));
    ran.assert_exactly("refused acquire", T::REFUSED);
    again.release().await.expect("release");

    // A new client's (a new process's: every `leasehold run`) first acquire of the
    // released lease: still one statement, the claim judged by the database.
    let newcomer = LeaseClient::new(store.clone());
    let (third, ran) = count.around(newcomer.acquire("counted", Duration::from_secs(30))).await;
    let third = third.expect("a new client");
    assert_eq!(third.token(), FencingToken::new(3));
    ran.assert_exactly("a new client's claim of a released lease", 1);
    third.release().await.expect("release");

    // Takeover of an expired lease (its holder stopped answering).
    let held = super::frozen_holder(store.clone(), "count/expired", Duration::from_millis(300)).await;
    let mut most = 0;
    super::take_over(&held, async || {
        let (granted, ran) = count
            .around(client.try_acquire("count/expired", Duration::from_secs(5)))
            .await;
        most = most.max(ran.assert_at_most("a takeover attempt", T::TAKEOVER));
        granted.expect("takeover").granted()
    })
    .await;
    let counters = if count.server.is_some() {
        "CountingStore, sqlx, server log"
    } else {
        "CountingStore, sqlx"
    };
    println!(
        "statements per operation ({counters}): acquire 1, renew 1, release 1, re-acquire 1, \
         a new client's first acquire 1, refused acquire {}, takeover attempt at most {most}",
        T::REFUSED
    );
    if let Some(server) = &count.server {
        server.stop().await;
    }
    <DbOf<T>>::run(&pool, &format!("DROP TABLE {}", q::<DbOf<T>>(&table))).await;
}
