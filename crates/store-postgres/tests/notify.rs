//! Waiting without polling: a release wakes a blocked acquire through LISTEN/NOTIFY at
//! once, while renewals wake nobody.
#![allow(missing_docs)]

mod common;

use std::time::{Duration, Instant};

use leasehold_core::store::{CasStore, Wait};
use leasehold_core::testing::CountingStore;
use leasehold_core::{ClientConfig, LeaseClient, LeaseName};
use leasehold_testkit::waiters::{parked, spawn_acquire};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_a_blocked_acquire_at_once() {
    let (pool, table, store, ()) = common::shared::fresh_store::<common::Pg>("lh_notify").await;
    assert!(store.capabilities().notifies_waiters);
    // The waiter has its own store (its own LISTEN connection) and would otherwise sleep
    // at least 20 s between attempts: only a notification can wake it sooner.
    let waiter_store = CountingStore::new(common::store_on(&common::pool().await, &table).await);
    let holder = LeaseClient::new(store.clone());
    let config = ClientConfig::builder()
        .max_acquire_backoff(Duration::from_secs(20))
        .build()
        .expect("client config");
    let waiter = LeaseClient::with_config(waiter_store.clone(), config).expect("client");
    let lease = holder
        .acquire("notify/release", Duration::from_secs(30))
        .await
        .expect("hold");
    let task = spawn_acquire(
        waiter,
        "notify/release",
        Duration::from_secs(30),
        Duration::from_secs(25),
    );
    // The first wait returns at once (the listener just started); the second is a real
    // wait on the notification.
    parked(&waiter_store, 2, Duration::from_secs(10), "the waiter").await;
    let released = Instant::now();
    lease.release().await.expect("release");
    let granted = leasehold_testkit::joined(Duration::from_secs(10), task, "the waiter was not woken")
        .await
        .expect("granted");
    let handoff = released.elapsed();
    assert!(
        handoff < Duration::from_secs(2),
        "handoff took {handoff:?}: not woken by the release"
    );
    assert_eq!(granted.token(), leasehold_core::FencingToken::new(2));
    granted.release().await.expect("release");
    common::exec(&pool, &format!("DROP TABLE \"{table}\"")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_wake_nobody_and_a_release_wakes_the_wait() {
    let (pool, table, store, ()) = common::shared::fresh_store::<common::Pg>("lh_notify").await;
    let name = LeaseName::new("notify/renewals").expect("name");
    let holder = LeaseClient::new(store.clone());
    let lease = holder
        .acquire(name.as_str(), Duration::from_millis(300))
        .await
        .expect("hold");
    let seen = store.read(&name).await.expect("read").expect("present").version;
    // Start the listener (its first wait returns at once, by design).
    store
        .wait_for_change(&name, Some(&seen), Wait::Change(Duration::from_secs(1)))
        .await
        .expect("wait");
    // Renewals every 100 ms change the version but announce nothing.
    let started = Instant::now();
    store
        .wait_for_change(&name, Some(&seen), Wait::Change(Duration::from_millis(700)))
        .await
        .expect("wait");
    assert!(
        started.elapsed() >= Duration::from_millis(650),
        "woken after {:?} without a release",
        started.elapsed()
    );
    let now = store.read(&name).await.expect("read").expect("present");
    assert_ne!(now.version, seen, "the lease was renewed meanwhile");
    // A release announces itself.
    let releaser = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        lease.release().await
    });
    let started = Instant::now();
    store
        .wait_for_change(&name, Some(&now.version), Wait::Change(Duration::from_secs(10)))
        .await
        .expect("wait");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the release did not wake the wait ({:?})",
        started.elapsed()
    );
    releaser.await.expect("task").expect("release");
    common::exec(&pool, &format!("DROP TABLE \"{table}\"")).await;
}
