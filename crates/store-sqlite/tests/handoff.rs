//! A release on a shared SQLite file reaches a waiter at once, not a TTL later: by the
//! library's release through another pool, and by a commit of another process (the
//! `sqlite3` command-line client). Before the change feed, a waiter slept out the
//! holder's remaining TTL (p50 476 ms at a 500 ms TTL; here the TTL is 20 s).
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::testing::CountingStore;
use leasehold_core::{FencingToken, LeaseClient};
use leasehold_sqlite::SqliteStore;
use leasehold_testkit::waiters::{parked, spawn_acquire};
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(20);
/// What a handoff may take: far below the TTL a waiter without a push sleeps out.
const HANDOFF: Duration = Duration::from_millis(500);

/// Two stores on one file through two pools (two processes' worth of connections).
async fn two_stores(tag: &str) -> (SqliteStore, SqliteStore, common::TempDb) {
    let db = common::db_path(tag);
    let a = common::store_on(&common::pool(db.path()).await, "leasehold_leases").await;
    let b = common::store_on(&common::pool(db.path()).await, "leasehold_leases").await;
    (a, b, db)
}

/// Starts a waiter for `name` on `b` and, once it waits for a change (a push: without
/// one it would sleep its backoff, seconds), runs `release`; returns the waiter's lease
/// and how long after the release it came.
async fn wait_through(
    b: &SqliteStore,
    name: &str,
    release: impl std::future::Future<Output = ()>,
) -> (leasehold_core::Lease, Duration) {
    let counting = CountingStore::new(b.clone());
    let waiter = spawn_acquire(LeaseClient::new(counting.clone()), name, TTL, Duration::from_secs(10));
    parked(
        &counting,
        1,
        Duration::from_secs(5),
        "the waiter (the store pushes nothing)",
    )
    .await;
    release.await;
    let released = Instant::now();
    let lease = waiter.await.expect("waiter task").expect("the waiter is granted");
    (lease, released.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_through_another_pool_wakes_the_waiter() {
    let (a, b, _db) = two_stores("handoff-pool").await;
    let held = LeaseClient::new(a.clone()).acquire("job", TTL).await.expect("acquire");
    let (next, after) = wait_through(&b, "job", async move { held.release().await.expect("release") }).await;
    assert_eq!(next.token(), FencingToken::new(2));
    assert!(after < HANDOFF, "the waiter got the lease {after:?} after the release");
    next.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_by_another_process_wakes_the_waiter() {
    let (a, b, db) = two_stores("handoff-process").await;
    let held = LeaseClient::new(a.clone()).acquire("job", TTL).await.expect("acquire");
    let path = db.path().display().to_string();
    let vacate = async move {
        // Another process vacates the row, the way an operator's sqlite3 would.
        leasehold_testkit::foreign::cli(
            "sqlite3",
            &[
                "-cmd",
                ".timeout 5000",
                &path,
                "UPDATE leasehold_leases SET holder = NULL, version = version + 1 WHERE name = 'job'",
            ],
        );
    };
    let (next, after) = wait_through(&b, "job", vacate).await;
    assert_eq!(next.token(), FencingToken::new(2));
    assert!(
        after < HANDOFF,
        "the waiter got the lease {after:?} after the other process's commit"
    );
    drop(held);
    next.release().await.expect("release");
}
