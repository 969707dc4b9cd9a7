//! The renewal driver learns of grants and releases without being woken on the caller's
//! path (`mailbox.rs`), and still renews every grant on time: a short lease granted while
//! the driver sleeps for a long one wakes it; a released lease is never renewed again.
//! Paused time: every instant is exact.
#![cfg(feature = "testing")]
#![allow(missing_docs)]

use std::time::Duration;

use leasehold_core::testing::CountingStore;
use leasehold_core::{LeaseClient, MemoryStore};

const MS: fn(u64) -> Duration = Duration::from_millis;

fn counted() -> (CountingStore<MemoryStore>, LeaseClient) {
    let store = CountingStore::new(MemoryStore::new());
    let client = LeaseClient::new(store.clone());
    (store, client)
}

#[tokio::test(start_paused = true)]
async fn a_short_lease_granted_while_the_driver_sleeps_for_a_long_one_is_renewed() {
    let (store, client) = counted();
    // The driver then sleeps until this one's renewal, twenty minutes away.
    let long = client
        .acquire("wakeups/long", Duration::from_secs(3600))
        .await
        .expect("long");
    tokio::time::sleep(MS(50)).await;
    let short = client.acquire("wakeups/short", MS(600)).await.expect("short");
    store.reset();
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(short.is_valid(), "the short lease ran out: {:?}", short.loss_cause());
    assert!(long.is_valid());
    // A renewal about every 200 ms: 30 in 6 s.
    let renewals = store.counts().renewals;
    assert!(
        (25..=35).contains(&renewals),
        "{renewals} renewals in 6 s of a 600 ms lease"
    );
}

#[tokio::test(start_paused = true)]
async fn a_grant_wakes_an_idle_driver() {
    let (store, client) = counted();
    let first = client.acquire("wakeups/first", MS(600)).await.expect("first");
    first.release().await.expect("release");
    // The driver drops the released lease at its renewal time, then has nothing to do.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let lease = client.acquire("wakeups/second", MS(600)).await.expect("second");
    store.reset();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(lease.is_valid(), "the lease ran out: {:?}", lease.loss_cause());
    assert!(store.counts().renewals >= 12, "{:?}", store.counts());
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_not_renewed_and_its_name_is_free() {
    let (store, client) = counted();
    let _keep = client.acquire("wakeups/keep", MS(3000)).await.expect("keep");
    for round in 0..300 {
        let lease = client.acquire("wakeups/churn", MS(600)).await.expect("churn");
        assert_eq!(lease.token().get(), round + 1);
        lease.release().await.expect("release");
    }
    store.reset();
    tokio::time::sleep(Duration::from_secs(6)).await;
    // Only the kept lease is renewed: about every second.
    let renewals = store.counts().renewals;
    assert!(
        (5..=7).contains(&renewals),
        "{renewals} renewals in 6 s: released leases were renewed"
    );
}
