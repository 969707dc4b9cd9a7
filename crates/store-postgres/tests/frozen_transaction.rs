//! A holder frozen between its fenced `UPDATE` and its `COMMIT` holds the row's lock.
//! Without a bound, its successor's first fenced write waits for the whole freeze; with
//! `idle_in_transaction_session_timeout` below the TTL on the holders' sessions,
//! Postgres ends the frozen session (rolling its write back) before the successor is
//! even granted, and the successor writes at once. A real process, really SIGSTOPped.
//!
//! Run by cargo as a plain `main` (`harness = false`): the binary re-executes itself as
//! the holder process.
#![allow(missing_docs)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use leasehold_core::fence::FencedUpdate;
use leasehold_core::testing::process::{freeze, resume};
use leasehold_core::{Error, LeaseClient};
use leasehold_sql::RowFence;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Executor, Postgres};
use tokio::time::Instant;

const TTL: Duration = Duration::from_millis(1000);
/// The bound the guarded run puts on an idle transaction: below the TTL.
const IDLE_BOUND_MS: u64 = 300;
/// What the successor's fenced write may wait for a row lock (`lock_timeout`).
const LOCK_WAIT: Duration = Duration::from_millis(1500);

fn fence(resource: &str) -> RowFence<Postgres> {
    let update = FencedUpdate::new(resource, "last_token")
        .and_then(|u| u.set("value"))
        .and_then(|u| u.key("id"))
        .expect("fenced update");
    RowFence::<Postgres>::update(&update).expect("fence")
}

/// A pool whose sessions end a transaction left idle for `idle_ms` (0: never).
async fn pool_with_idle_bound(idle_ms: u64) -> PgPool {
    PgPoolOptions::new()
        .max_connections(4)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                let sql = format!("SET idle_in_transaction_session_timeout = {idle_ms}");
                conn.execute(sqlx::AssertSqlSafe(sql)).await.map(|_| ())
            })
        })
        .connect(&common::pg_url())
        .await
        .unwrap_or_else(|e| panic!("cannot reach Postgres: {e}"))
}

/// The holder process: takes the lease, writes the row in a transaction, says so on
/// stdout, and waits (the parent freezes it here) before committing.
async fn holder(table: &str, resource: &str, idle_ms: u64) {
    let pool = pool_with_idle_bound(idle_ms).await;
    let store = common::store_on(&pool, table).await;
    let lease = LeaseClient::new(store)
        .acquire("frozen-tx", TTL)
        .await
        .expect("acquire");
    let mut tx = pool.begin().await.expect("begin");
    let applied = fence(resource)
        .write(lease.token())
        .value("value", "stale")
        .key("id", "row")
        .execute(&mut *tx)
        .await
        .expect("the holder's fenced write")
        .is_applied();
    assert!(applied);
    println!("in-transaction");
    tokio::time::sleep(Duration::from_secs(30)).await;
    let committed = tx.commit().await.is_ok();
    println!("committed={committed}");
}

/// One run: the holder process frozen inside its transaction, the successor's write.
/// Returns how long the successor's write took after its grant, and its result.
async fn run(idle_ms: u64) -> (Duration, Result<(), Error>) {
    let table = common::unique_table("lh_frozen_tx");
    let resource = common::unique_table("lh_frozen_tx_res");
    let pool = pool_with_idle_bound(0).await;
    let store = common::store_on(&pool, &table).await;
    common::exec(
        &pool,
        &format!("CREATE TABLE {resource} (id text PRIMARY KEY, value text, last_token bigint NOT NULL DEFAULT 0)"),
    )
    .await;
    common::exec(&pool, &format!("INSERT INTO {resource} (id) VALUES ('row')")).await;

    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .env("LH_FROZEN_TX_HOLDER", format!("{table} {resource} {idle_ms}"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the holder");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().and_then(Result::ok);
    assert_eq!(first.as_deref(), Some("in-transaction"), "the holder did not write");
    freeze(child.id()).await.expect("SIGSTOP the holder");

    let lease = LeaseClient::new(store)
        .acquire_timeout("frozen-tx", TTL, Duration::from_secs(10))
        .await
        .expect("the successor is granted once the frozen holder's TTL ran out");
    let granted = Instant::now();
    let mut conn = pool.acquire().await.expect("connection");
    let sql = format!("SET lock_timeout = {}", LOCK_WAIT.as_millis());
    conn.execute(sqlx::AssertSqlSafe(sql)).await.expect("lock_timeout");
    let written = fence(&resource)
        .write(lease.token())
        .value("value", "successor")
        .key("id", "row")
        .execute(&mut *conn)
        .await
        .map(|_| ());
    let took = granted.elapsed();
    drop(conn);

    resume(child.id()).expect("SIGCONT the holder");
    let _ = child.kill();
    let _ = child.wait();
    lease.release().await.expect("release");
    (took, written)
}

fn main() -> ExitCode {
    let rt = leasehold_testkit::runtime();
    if let Ok(args) = std::env::var("LH_FROZEN_TX_HOLDER") {
        let mut parts = args.split(' ');
        let (table, resource) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let idle_ms = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        rt.block_on(holder(table, resource, idle_ms));
        return ExitCode::SUCCESS;
    }
    rt.block_on(async {
        // Unbounded: the frozen transaction keeps the row locked; the successor's write
        // waits until its own lock_timeout gives up (nothing written: Unavailable).
        let (took, written) = run(0).await;
        println!("test without idle_in_transaction_session_timeout: the successor's write {written:?} after {took:?}");
        assert!(
            matches!(written, Err(Error::Unavailable { .. })),
            "the successor's write was not blocked by the frozen transaction: {written:?}"
        );
        assert!(took >= LOCK_WAIT, "{took:?}");
        // Bounded below the TTL: the frozen session is gone before the successor's grant.
        let (took, written) = run(IDLE_BOUND_MS).await;
        println!(
            "test with idle_in_transaction_session_timeout = {IDLE_BOUND_MS} ms: the successor's write {written:?} after {took:?}"
        );
        assert!(written.is_ok(), "{written:?}");
        assert!(took < Duration::from_millis(500), "the successor still waited {took:?}");
    });
    println!("test result: ok. 2 runs");
    ExitCode::SUCCESS
}
