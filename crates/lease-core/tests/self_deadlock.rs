//! A client never waits on a lease it holds itself: a second acquire of a held name is
//! `Error::AlreadyHeld` at once, also under concurrency, and the name is free again
//! once the lease is released, dropped or lost.
#![cfg(feature = "testing")]
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::testing::{CountingStore, FaultPlan, FaultStore};
use leasehold_core::{AcquireOutcome, Error, FencingToken, Lease, LeaseClient, MemoryStore};
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(30);

fn already_held(result: Result<impl std::fmt::Debug, Error>, name: &str, token: FencingToken) {
    match result {
        Err(Error::AlreadyHeld { name: n, token: t }) => {
            assert_eq!((n.as_str(), t), (name, token), "AlreadyHeld must name the lease held");
        }
        other => panic!("expected AlreadyHeld for {name}, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn every_acquire_of_a_held_name_is_refused_at_once_without_a_round_trip() {
    let store = CountingStore::new(MemoryStore::new());
    let client = LeaseClient::new(store.clone());
    let lease = client.acquire("held", TTL).await.expect("first acquire");
    store.reset();
    let started = Instant::now();
    already_held(client.try_acquire("held", TTL).await, "held", lease.token());
    already_held(client.acquire("held", TTL).await, "held", lease.token());
    already_held(
        client.acquire_timeout("held", TTL, Duration::from_secs(10)).await,
        "held",
        lease.token(),
    );
    assert_eq!(Instant::now(), started, "a refusal must not wait");
    assert_eq!(store.counts().round_trips(), 0, "a refusal must not reach the store");
    let err = client.try_acquire("held", TTL).await.unwrap_err();
    assert!(!err.is_retryable() && !err.is_indeterminate(), "{err:?}");
    assert!(lease.is_valid(), "the refusal must leave the held lease alone");
    // Another client is still refused the ordinary way: held by someone else.
    let other = LeaseClient::new(store.clone());
    assert!(matches!(
        other.try_acquire("held", TTL).await.expect("other"),
        AcquireOutcome::Held { .. }
    ));
    // Clones share the client, and with it the table of held names.
    already_held(client.clone().try_acquire("held", TTL).await, "held", lease.token());
}

/// Runs `n` tasks of one client acquiring `name` at once; returns the grants and the
/// number of `AlreadyHeld` answers (any other answer fails the test).
async fn race(client: &LeaseClient, name: &str, n: usize) -> (Vec<Lease>, usize) {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (client, name) = (client.clone(), name.to_owned());
            tokio::spawn(async move { client.acquire_timeout(&name, TTL, Duration::from_secs(60)).await })
        })
        .collect();
    let (mut grants, mut refused) = (Vec::new(), 0);
    for t in tasks {
        match t.await.expect("task") {
            Ok(l) => grants.push(l),
            Err(Error::AlreadyHeld { .. }) => refused += 1,
            Err(e) => panic!("unexpected: {e:?}"),
        }
    }
    (grants, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_acquires_in_one_client_exactly_one_is_granted() {
    // A slow store widens the window in which the attempts overlap.
    let (_, _slow, client) = common::slowed(5, Duration::from_millis(5));
    for round in 0..20 {
        let name = format!("race/{round}");
        let (grants, refused) = tokio::time::timeout(Duration::from_secs(20), race(&client, &name, 6))
            .await
            .expect("concurrent acquires of one client deadlocked");
        assert_eq!(grants.len(), 1, "round {round}: {} grants", grants.len());
        assert_eq!(refused, 5, "round {round}");
        assert_eq!(grants[0].token(), FencingToken::FIRST);
    }
}

#[tokio::test(start_paused = true)]
async fn tasks_of_one_client_wait_for_another_holder_and_then_one_wins() {
    let store = MemoryStore::new();
    let holder = LeaseClient::new(store.clone());
    let held = holder.acquire("busy", TTL).await.expect("holder");
    let client = LeaseClient::new(store.clone());
    let racing = tokio::spawn({
        let client = client.clone();
        async move { race(&client, "busy", 3).await }
    });
    // Both keep waiting while the other client holds it...
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        !racing.is_finished(),
        "a waiter gave up while another client held the lease"
    );
    held.release().await.expect("release");
    // ...and once it is free, one is granted and the others are told at once.
    let (grants, refused) = tokio::time::timeout(Duration::from_secs(10), racing)
        .await
        .expect("the waiters did not settle after the release")
        .expect("task");
    assert_eq!((grants.len(), refused), (1, 2));
    assert_eq!(grants[0].token().get(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_released_dropped_or_lost_lease_can_be_acquired_again() {
    let mem = MemoryStore::new();
    let store = FaultStore::new(mem.clone(), 11);
    let client = LeaseClient::new(store.clone());
    let wait = Duration::from_secs(120);

    let first = client.acquire("again", TTL).await.expect("first");
    first.release().await.expect("release");
    let second = client.acquire_timeout("again", TTL, wait).await.expect("after release");
    assert_eq!(second.token().get(), 2);

    // Dropped: the name is free for this client at once; the store frees it when the
    // background release lands, which `acquire` waits for.
    drop(second);
    let third = client.acquire_timeout("again", TTL, wait).await.expect("after drop");
    assert_eq!(third.token().get(), 3);

    // Lost: the store stops answering, the lease ends at its deadline; once the store
    // answers again, the same client acquires the name (after the record expired).
    store.set_plan(FaultPlan::hang());
    let cause = third.lost().await;
    assert!(!third.is_valid(), "{cause:?}");
    store.set_plan(FaultPlan::none());
    let fourth = client.acquire_timeout("again", TTL, wait).await.expect("after loss");
    assert_eq!(fourth.token().get(), 4);
    // The guard of the lost lease is still alive: it does not count as held, and
    // dropping it now does not touch the new grant.
    drop(third);
    already_held(client.try_acquire("again", TTL).await, "again", fourth.token());
    tokio::time::sleep(TTL).await;
    assert!(fourth.is_valid(), "dropping the lost guard ended the new grant");
}

#[tokio::test(start_paused = true)]
async fn an_acquire_dropped_while_a_sibling_attempt_runs_leaves_nothing_held() {
    let (mem, _slow, client) = common::slowed(2, Duration::from_millis(100));
    let first = tokio::spawn({
        let client = client.clone();
        async move { client.acquire("sibling", TTL).await }
    });
    tokio::task::yield_now().await;
    // The second waits behind the first attempt's gate; drop it there.
    let second = client.try_acquire("sibling", TTL);
    assert!(tokio::time::timeout(Duration::from_millis(50), second).await.is_err());
    let lease = first.await.expect("task").expect("first granted");
    assert_eq!(lease.token(), FencingToken::FIRST);
    lease.release().await.expect("release");
    // Nothing else was granted behind our back: the next grant is the second token.
    let next = LeaseClient::new(mem.clone())
        .acquire_timeout("sibling", TTL, Duration::from_secs(5))
        .await
        .expect("next");
    assert_eq!(next.token().get(), 2);
}
