//! A hard cap on a hold (`max_hold`): past it the driver stops renewing, the loss signal
//! fires with `MaxHoldReached`, and nobody can take the lease over before its TTL from
//! the last renewal has run out, unless its guard is released or dropped (which frees it
//! at once). Paused time: every instant is exact.
#![cfg(feature = "testing")]
#![allow(missing_docs)]

use std::time::Duration;

use leasehold_core::testing::{CountingStore, FaultPlan, FaultStore};
use leasehold_core::{
    AcquireOptions, AcquireOutcome, ClientConfig, Error, LeaseClient, LeaseName, LossCause, MemoryStore,
    store::CasStore,
};
use tokio::time::Instant;

const S: fn(u64) -> Duration = Duration::from_secs;

/// Polls `client.try_acquire(name)` every 100 ms until granted; returns when.
async fn granted_at(client: &LeaseClient, name: &str, ttl: Duration) -> (Instant, leasehold_core::Lease) {
    let deadline = Instant::now() + S(600);
    loop {
        if let AcquireOutcome::Granted(l) = client.try_acquire(name, ttl).await.expect("try") {
            return (Instant::now(), l);
        }
        assert!(Instant::now() < deadline, "never granted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An in-process store that counts its calls, and a client on it.
fn counted() -> (CountingStore<MemoryStore>, LeaseClient) {
    let store = CountingStore::new(MemoryStore::new());
    let client = LeaseClient::new(store.clone());
    (store, client)
}

/// `name` through `client` for `ttl`, held for `cap` at the most.
async fn capped(client: &LeaseClient, name: &str, ttl: Duration, cap: Duration) -> leasehold_core::Lease {
    let options = AcquireOptions::new(ttl).max_hold(cap);
    client
        .acquire_with(name, &options)
        .await
        .unwrap_or_else(|e| panic!("acquire {name}: {e}"))
}

#[tokio::test(start_paused = true)]
async fn a_capped_lease_ends_at_the_cap_and_is_taken_over_only_after_its_ttl() {
    let (store, client) = counted();
    let t0 = Instant::now();
    let lease = capped(&client, "capped", S(9), S(20)).await;
    assert_eq!(lease.hold_until(), Some(t0 + S(20)));
    // Renewed every 3 s while the store answers, validity never past the cap.
    tokio::time::sleep(Duration::from_millis(19_900)).await;
    assert!(lease.is_valid(), "lost before the cap: {:?}", lease.loss_cause());
    assert!(lease.valid_until() <= t0 + S(20));
    let cause = lease.lost().await;
    assert_eq!(cause, LossCause::MaxHoldReached);
    assert_eq!(Instant::now(), t0 + S(20), "the cap must end the lease exactly");
    assert!(!lease.is_valid());
    // Renewals at 3, 6, 9 and 12 s; the one at 12 s keeps the record until 21 s, past
    // the cap, so no more were sent.
    assert_eq!(store.counts().renews, 4, "{:?}", store.counts());
    // The record is left to expire: it still names the capped holder.
    let name = LeaseName::new("capped").expect("name");
    let rec = store.read(&name).await.expect("read").expect("present");
    assert_eq!(rec.record.holder.as_ref(), Some(lease.holder()));
    // Another client gets it once the TTL from the last renewal ran out (21 s), not before.
    let other = LeaseClient::new(store.clone());
    let (at, next) = granted_at(&other, "capped", S(9)).await;
    assert!(
        at >= t0 + S(21) && at <= t0 + S(21) + Duration::from_millis(100),
        "taken over at {:?}",
        at - t0
    );
    assert_eq!(next.token(), lease.token().next());
}

#[tokio::test(start_paused = true)]
async fn on_an_observation_store_the_loss_comes_before_any_takeover() {
    let store = MemoryStore::observation();
    let client = LeaseClient::new(store.clone());
    let lease = capped(&client, "watched", S(6), S(10)).await;
    let other = LeaseClient::new(store.clone());
    let challenger = tokio::spawn(async move { granted_at(&other, "watched", S(6)).await });
    let cause = lease.lost().await;
    let lost_at = Instant::now();
    assert_eq!(cause, LossCause::MaxHoldReached);
    let (taken_at, next) = challenger.await.expect("task");
    assert!(taken_at > lost_at, "taken over before the holder's loss signal fired");
    assert!(
        taken_at - lost_at <= S(6) * 3,
        "took {:?} after the cap",
        taken_at - lost_at
    );
    assert_eq!(next.token(), lease.token().next());
}

#[tokio::test(start_paused = true)]
async fn a_cap_within_the_ttl_needs_no_renewal() {
    let (store, client) = counted();
    // The cap before the grant's own validity: it ends exactly at the cap.
    let t0 = Instant::now();
    let lease = capped(&client, "short", S(30), S(10)).await;
    assert_eq!(lease.valid_until(), t0 + S(10), "validity is cut at the cap");
    assert_eq!(lease.lost().await, LossCause::MaxHoldReached);
    assert_eq!(Instant::now(), t0 + S(10));
    // ShedLock's lock_at_most_for: TTL and cap equal. The grant's validity (TTL less the
    // 5% margin) ends first: the lease ends there, for the cap, and the store frees the
    // name at the cap.
    let t1 = Instant::now();
    let lease = capped(&client, "shedlock", S(10), S(10)).await;
    assert_eq!(lease.lost().await, LossCause::MaxHoldReached);
    assert_eq!(Instant::now(), t1 + Duration::from_millis(9_500));
    assert_eq!(store.counts().renews, 0, "{:?}", store.counts());
    let (at, _) = granted_at(&LeaseClient::new(store.clone()), "shedlock", S(10)).await;
    assert_eq!(at, t1 + S(10));
}

#[tokio::test(start_paused = true)]
async fn the_client_default_applies_and_an_acquire_replaces_it() {
    let config = ClientConfig::builder().max_hold(S(5)).build().expect("config");
    let client = LeaseClient::with_config(MemoryStore::new(), config).expect("client");
    let t0 = Instant::now();
    let a = client.acquire("default", S(30)).await.expect("a");
    assert_eq!(a.hold_until(), Some(t0 + S(5)));
    let b = capped(&client, "own", S(30), S(60)).await;
    assert_eq!(b.hold_until(), Some(t0 + S(60)));
    assert_eq!(a.lost().await, LossCause::MaxHoldReached);
    assert_eq!(Instant::now(), t0 + S(5));
    assert!(b.is_valid());
    // Without a cap anywhere, a lease is held as long as it is renewed.
    let free = LeaseClient::new(MemoryStore::new());
    let c = free.acquire("uncapped", S(3)).await.expect("c");
    assert_eq!(c.hold_until(), None);
    tokio::time::sleep(S(3600)).await;
    assert!(c.is_valid());
}

#[tokio::test(start_paused = true)]
async fn releasing_or_dropping_a_capped_lease_frees_it() {
    let store = MemoryStore::new();
    let client = LeaseClient::new(store.clone());
    // Released before the cap: an ordinary release.
    let lease = capped(&client, "early", S(9), S(20)).await;
    tokio::time::sleep(S(5)).await;
    lease.release().await.expect("release");
    let again = client
        .acquire_with("early", &AcquireOptions::new(S(9)).max_hold(S(20)).timeout(S(1)))
        .await
        .expect("free at once");
    assert_eq!(again.token().get(), 2);
    // Dropped after the cap (the stuck run finally gave up): the record is released
    // then, without waiting for its TTL.
    assert_eq!(again.lost().await, LossCause::MaxHoldReached);
    let capped_at = Instant::now();
    drop(again);
    let (at, next) = granted_at(&LeaseClient::new(store.clone()), "early", S(9)).await;
    assert!(at - capped_at <= Duration::from_millis(100), "{:?}", at - capped_at);
    assert_eq!(next.token().get(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_zero_cap_is_invalid_and_a_timeout_still_applies() {
    assert!(matches!(
        ClientConfig::builder().max_hold(Duration::ZERO).build(),
        Err(Error::InvalidInput { what: "max_hold", .. })
    ));
    let (store, client) = counted();
    let zero = AcquireOptions::new(S(9)).max_hold(Duration::ZERO);
    assert!(matches!(
        client.try_acquire_with("zero", &zero).await,
        Err(Error::InvalidInput { what: "max_hold", .. })
    ));
    assert_eq!(store.counts().round_trips(), 0);
    let _held = LeaseClient::new(store.clone())
        .acquire("taken", S(60))
        .await
        .expect("held");
    let started = Instant::now();
    let err = client
        .acquire_with("taken", &AcquireOptions::new(S(9)).max_hold(S(20)).timeout(S(3)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert_eq!(Instant::now() - started, S(3));
}

#[tokio::test(start_paused = true)]
async fn a_cap_counts_from_the_first_write_when_a_second_confirms_it() {
    let store = FaultStore::new(MemoryStore::new(), 11);
    let client = LeaseClient::new(store.clone());
    // The grant's write is sent at t0 and applies at 100 ms, but its answer is lost; the
    // read that settles it (100 to 200 ms) and the confirming write (200 to 300 ms) go
    // through.
    store.set_plan(FaultPlan {
        apply_then_fail: 1.0,
        delay: Some(Duration::from_millis(100)),
        ..FaultPlan::none()
    });
    let t0 = Instant::now();
    let options = AcquireOptions::new(S(30)).max_hold(S(60));
    let mut attempt = Box::pin(client.try_acquire_with("confirmed", &options));
    assert!(
        futures::poll!(attempt.as_mut()).is_pending(),
        "the first write is in flight"
    );
    store.set_plan(FaultPlan {
        delay: Some(Duration::from_millis(100)),
        ..FaultPlan::none()
    });
    let lease = attempt.await.expect("try").granted().expect("granted");
    assert_eq!(Instant::now(), t0 + Duration::from_millis(300));
    assert_eq!(store.injected(), 1);
    assert_eq!(lease.token().get(), 1, "the first write's grant, confirmed");
    assert_eq!(
        lease.hold_until(),
        Some(t0 + S(60)),
        "the cap counts from the write that made the grant"
    );
    // Validity counts from the confirming write, which renewed the record.
    assert_eq!(
        lease.valid_until(),
        t0 + Duration::from_millis(200) + Duration::from_millis(28_500)
    );
}
