//! A release wakes one waiter, and that wake-up reaches a waiter that takes the lease
//! even when the first one woken does not take it.
//!
//! An election observer (`wait_for_change` in a read loop) and the same process's
//! campaign (`acquire`) wait on one watch. Before the baton pass, a release or a
//! session expiry that woke the observer left the acquirer asleep until its own
//! `max_wait` (the holder's remaining TTL): new leaders at 2 × TTL in 2 of 10 runs of
//! the examples' etcd leader-election test. Here the holder's TTL is 30 s, so an
//! acquirer that is not handed the wake-up sleeps ~30 s and the 5 s limit fails.
#![allow(missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leasehold_core::testing::CountingStore;
use leasehold_core::testing::process::poll;
use leasehold_core::{ClientConfig, Lease, LeaseClient, LeaseName, store::CasStore};
use leasehold_etcd::EtcdStore;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const HOLDER_TTL: Duration = Duration::from_secs(30);
/// Far below `HOLDER_TTL`, far above a read and a write on a loopback etcd plus the
/// 500 ms after which a wake-up nobody used is passed on.
const LIMIT: Duration = Duration::from_secs(5);

struct Setup {
    store: EtcdStore,
    counting: CountingStore<EtcdStore>,
    name: LeaseName,
    lease: Lease,
}

async fn held_lease(tag: &str) -> Setup {
    let store = common::store(tag).await;
    let counting = CountingStore::new(store.clone());
    let name = LeaseName::new(tag).expect("name");
    let lease = LeaseClient::new(store.clone())
        .acquire(name.as_str(), HOLDER_TTL)
        .await
        .expect("holder");
    Setup {
        store,
        counting,
        name,
        lease,
    }
}

/// Parks an acquirer (after its one read and write) that would otherwise sleep up to
/// the holder's remaining TTL, and waits until `waits` waits have been registered.
async fn park_acquirer(s: &Setup, waits: u64) -> JoinHandle<leasehold_core::Result<Lease>> {
    let config = ClientConfig::builder()
        .max_acquire_backoff(Duration::from_secs(60))
        .build()
        .expect("client config");
    let client = LeaseClient::with_config(s.counting.clone(), config).expect("client");
    let name = s.name.clone();
    let task = tokio::spawn(async move {
        client
            .acquire_timeout(name.as_str(), HOLDER_TTL, Duration::from_secs(60))
            .await
    });
    assert!(
        poll(Duration::from_secs(10), || s.counting.counts().waits >= waits).await,
        "the acquirer never parked: {:?}",
        s.counting.counts()
    );
    task
}

/// Releases, then returns how long the parked acquirer took to be granted.
async fn release_and_time(s: Setup, acquirer: JoinHandle<leasehold_core::Result<Lease>>) -> Duration {
    let released = Instant::now();
    s.lease.release().await.expect("release");
    let granted = tokio::time::timeout(LIMIT, acquirer).await;
    let took = released.elapsed();
    let lease = match granted {
        Ok(joined) => joined.expect("task").expect("granted"),
        Err(_) => panic!("the acquirer was not granted the released lease within {LIMIT:?}"),
    };
    lease.release().await.expect("release");
    common::cleanup(&s.store).await;
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_woken_by_a_release_hands_the_wake_up_to_the_acquirer() {
    let s = held_lease("baton-observer").await;
    // The observer parks first, so it is the longest waiting and gets the wake-up.
    let reads = Arc::new(AtomicU64::new(0));
    let observer = {
        let (store, name, reads) = (s.counting.clone(), s.name.clone(), reads.clone());
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
    assert!(
        poll(Duration::from_secs(10), || s.counting.counts().waits >= 1).await,
        "the observer never parked"
    );
    let acquirer = park_acquirer(&s, 2).await;
    let took = release_and_time(s, acquirer).await;
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_up_whose_waiter_went_away_is_passed_on() {
    let s = held_lease("baton-gone").await;
    // A waiter that is woken and then never reads nor waits again (its task ends).
    let woken = {
        let (store, name) = (s.counting.clone(), s.name.clone());
        let seen = store.read(&name).await.expect("read").map(|c| c.version);
        tokio::spawn(async move {
            let at = Instant::now();
            let _ = store
                .wait_for_change(&name, seen.as_ref(), Duration::from_secs(60))
                .await;
            at.elapsed()
        })
    };
    assert!(
        poll(Duration::from_secs(10), || s.counting.counts().waits >= 1).await,
        "the first waiter never parked"
    );
    let acquirer = park_acquirer(&s, 2).await;
    let took = release_and_time(s, acquirer).await;
    let first_waited = woken.await.expect("first waiter");
    println!("first waiter gone after its wake-up: acquirer granted {took:?} after the release");
    assert!(
        first_waited < HOLDER_TTL,
        "the first waiter was not the one woken by the release ({first_waited:?})"
    );
}
