//! One release wakes one waiter of a store, and that wake-up reaches a waiter that takes
//! the lease even when the first one woken does not.
//!
//! The holder has its own store; the waiters share another (one `LISTEN` connection),
//! as the waiters of one process do. Its TTL is 30 s, so a waiter that is neither woken
//! nor handed the wake-up sleeps ~30 s and the 5 s limits below fail.
#![allow(missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leasehold_core::testing::CountingStore;
use leasehold_core::testing::process::poll;
use leasehold_core::{ClientConfig, Lease, LeaseClient, LeaseName, store::CasStore};
use leasehold_postgres::PostgresStore;
use sqlx::PgPool;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const HOLDER_TTL: Duration = Duration::from_secs(30);
const LIMIT: Duration = Duration::from_secs(5);

struct Setup {
    pool: PgPool,
    table: String,
    waiters: CountingStore<PostgresStore>,
    name: LeaseName,
}

/// The setup, and the holder's lease.
async fn held_lease(tag: &str) -> (Setup, Lease) {
    let pool = common::pool().await;
    let table = common::unique_table(tag);
    let holder_store = common::store_on(&pool, &table).await;
    let waiters = CountingStore::new(common::store_on(&common::pool().await, &table).await);
    let name = LeaseName::new(tag).expect("name");
    let lease = LeaseClient::new(holder_store)
        .acquire(name.as_str(), HOLDER_TTL)
        .await
        .expect("holder");
    // Start the waiters' store's listener: its first wait returns at once, by design.
    let seen = waiters.read(&name).await.expect("read").map(|s| s.version);
    waiters
        .wait_for_change(&name, seen.as_ref(), Duration::from_secs(1))
        .await
        .expect("start listening");
    waiters.reset();
    let s = Setup {
        pool,
        table,
        waiters,
        name,
    };
    (s, lease)
}

fn acquirer(s: &Setup) -> JoinHandle<leasehold_core::Result<Lease>> {
    let config = ClientConfig::builder()
        .max_acquire_backoff(Duration::from_secs(60))
        .build()
        .expect("client config");
    let client = LeaseClient::with_config(s.waiters.clone(), config).expect("client");
    let name = s.name.clone();
    tokio::spawn(async move {
        client
            .acquire_timeout(name.as_str(), HOLDER_TTL, Duration::from_secs(60))
            .await
    })
}

async fn parked(s: &Setup, waits: u64) {
    assert!(
        poll(Duration::from_secs(10), || s.waiters.counts().waits >= waits).await,
        "waiters never parked: {:?}",
        s.waiters.counts()
    );
}

/// Releases; returns the granted lease and how long after the release it came.
async fn release_and_take(
    s: &Setup,
    lease: Lease,
    acquirer: JoinHandle<leasehold_core::Result<Lease>>,
) -> (Lease, Duration) {
    let released = Instant::now();
    lease.release().await.expect("release");
    match tokio::time::timeout(LIMIT, acquirer).await {
        Ok(joined) => (joined.expect("task").expect("granted"), released.elapsed()),
        Err(_) => panic!(
            "no acquirer was granted the released lease within {LIMIT:?}: {:?}",
            s.waiters.counts()
        ),
    }
}

async fn drop_table(s: &Setup) {
    common::exec(&s.pool, &format!("DROP TABLE \"{}\"", s.table)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_waiters_one_release_is_not_a_thundering_herd() {
    const WAITERS: u64 = 50;
    let (s, lease) = held_lease("wake_herd").await;
    let tasks: Vec<_> = (0..WAITERS).map(|_| acquirer(&s)).collect();
    parked(&s, WAITERS).await;
    let before = s.waiters.counts();
    assert_eq!(
        before.reads + before.writes,
        WAITERS,
        "one attempt each before waiting: {before:?}"
    );
    s.waiters.reset();

    let released = Instant::now();
    lease.release().await.expect("release");
    assert!(
        poll(LIMIT, || tasks.iter().filter(|t| t.is_finished()).count() == 1).await,
        "no waiter was granted the released lease: {:?}",
        s.waiters.counts()
    );
    let took = released.elapsed();
    // Measurement window: twice the time after which an unused wake-up moves on, so a
    // wake-up passed on (or a herd) would show in the counts.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let calls = s.waiters.counts();
    println!("{WAITERS} waiters, one release: granted after {took:?}; store calls {calls:?}");
    assert_eq!(
        tasks.iter().filter(|t| t.is_finished()).count(),
        1,
        "more than one waiter returned"
    );
    assert!(calls.reads + calls.writes <= 3, "calls after one release: {calls:?}");
    for t in tasks {
        if t.is_finished() {
            t.await
                .expect("task")
                .expect("granted")
                .release()
                .await
                .expect("release");
        } else {
            t.abort();
        }
    }
    drop_table(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_woken_by_a_release_hands_the_wake_up_to_the_acquirer() {
    let (s, lease) = held_lease("wake_observer").await;
    let reads = Arc::new(AtomicU64::new(0));
    // The observer parks first, so it is the longest waiting and gets the wake-up.
    let observer = {
        let (store, name, reads) = (s.waiters.clone(), s.name.clone(), reads.clone());
        tokio::spawn(async move {
            loop {
                let seen = store.read(&name).await.expect("observer read").map(|c| c.version);
                reads.fetch_add(1, Ordering::SeqCst);
                let _ = store
                    .wait_for_change(&name, seen.as_ref(), Duration::from_secs(60))
                    .await;
            }
        })
    };
    parked(&s, 1).await;
    let task = acquirer(&s);
    parked(&s, 2).await;
    let (granted, took) = release_and_take(&s, lease, task).await;
    let woken = poll(Duration::from_secs(2), || reads.load(Ordering::SeqCst) >= 2).await;
    observer.abort();
    println!(
        "observer woken first: acquirer granted {took:?} after the release (observer reads: {})",
        reads.load(Ordering::SeqCst)
    );
    assert!(
        woken,
        "the observer was never woken: the test did not exercise the hand-over"
    );
    granted.release().await.expect("release");
    drop_table(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_up_whose_waiter_went_away_is_passed_on() {
    let (s, lease) = held_lease("wake_gone").await;
    // A waiter that is woken and then neither claims nor waits again (its task ends).
    let woken = {
        let (store, name) = (s.waiters.clone(), s.name.clone());
        let seen = store.read(&name).await.expect("read").map(|c| c.version);
        tokio::spawn(async move {
            let at = Instant::now();
            let _ = store
                .wait_for_change(&name, seen.as_ref(), Duration::from_secs(60))
                .await;
            at.elapsed()
        })
    };
    parked(&s, 1).await;
    let task = acquirer(&s);
    parked(&s, 2).await;
    let (granted, took) = release_and_take(&s, lease, task).await;
    let first_waited = woken.await.expect("first waiter");
    println!("first waiter gone after its wake-up: acquirer granted {took:?} after the release");
    assert!(
        first_waited < HOLDER_TTL,
        "the first waiter was not woken by the release ({first_waited:?})"
    );
    granted.release().await.expect("release");
    drop_table(&s).await;
}
