//! The Lease handle: one renewal driver for many leases, drop safety, unknown outcomes.
#![cfg(feature = "testing")]
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::testing::{CountingStore, FaultPlan, FaultStore, process::poll_async};
use leasehold_core::{AcquireOutcome, Error, Lease, LeaseClient, LeaseName, LossCause, MemoryStore, store::CasStore};
use tokio::time::Instant;

async fn vacant(store: &MemoryStore, name: &str) -> bool {
    let name = LeaseName::new(name).expect("name");
    matches!(store.read(&name).await, Ok(Some(s)) if s.record.holder.is_none())
}

/// The token of the next grant of `name`, which must be free.
async fn next_token(client: &LeaseClient, name: &str) -> u64 {
    let outcome = client
        .try_acquire(name, Duration::from_secs(60))
        .await
        .expect("acquire");
    outcome.granted().expect("the name is free").token().get()
}

/// A lease on `name` for `ttl`, acquired through a store whose faults (seeded with
/// `seed`) the test then turns on.
async fn lease_on_faulty_store(seed: u64, name: &str, ttl: Duration) -> (FaultStore<MemoryStore>, Lease) {
    let store = FaultStore::new(MemoryStore::new(), seed);
    let lease = LeaseClient::new(store.clone())
        .acquire(name, ttl)
        .await
        .expect("acquire");
    (store, lease)
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_leases_are_renewed_by_one_driver_task() {
    let store = CountingStore::new(MemoryStore::new());
    let client = LeaseClient::new(store.clone());
    let ttl = Duration::from_secs(30);
    let mut leases = Vec::with_capacity(10_000);
    for i in 0..10_000 {
        let l = client
            .try_acquire(format!("bulk/{i}"), ttl)
            .await
            .expect("acquire")
            .granted()
            .expect("granted");
        leases.push(l);
    }
    assert_eq!(store.counts().writes, 10_000);
    // Attempts finished; what is left is the test itself and one driver.
    let alive = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    assert!(
        alive <= 1,
        "{alive} tasks alive besides the test while holding 10,000 leases"
    );
    store.reset();
    // Renewal every ttl/3 = 10 s: in 25 s, exactly two rounds, each sent in batches of
    // the store's `renewal_batch` (10,000 / 256: 40 requests a round).
    tokio::time::sleep(Duration::from_secs(25)).await;
    let n = store.counts();
    let per_round = 10_000_usize.div_ceil(MemoryStore::RENEWAL_BATCH) as u64;
    assert_eq!(n.renews, 2 * per_round, "{n:?}");
    assert_eq!(n.round_trips(), 2 * per_round, "{n:?}");
    assert!(leases.iter().all(|l| l.is_valid() && l.token().get() == 1));
    let alive = tokio::runtime::Handle::current().metrics().num_alive_tasks();
    assert!(alive <= 1, "{alive} tasks alive while renewing");
}

#[tokio::test(start_paused = true)]
async fn loss_fires_exactly_at_the_deadline_when_the_store_hangs() {
    let (store, lease) = lease_on_faulty_store(9, "hang", Duration::from_secs(9)).await;
    let deadline = lease.valid_until();
    assert_eq!(
        deadline - Instant::now(),
        Duration::from_millis(8_550),
        "9 s - 5% margin, from the send"
    );
    store.set_plan(FaultPlan::hang());
    let cause = lease.lost().await;
    assert_eq!(Instant::now(), deadline, "loss must fire at the deadline, not later");
    assert_eq!(store.injected(), 0, "a hang is not an injected failure");
    assert_eq!(cause, LossCause::OutcomeUnknown, "a renewal was in flight, unanswered");
    assert!(!lease.is_valid());
}

#[tokio::test(start_paused = true)]
async fn a_store_that_refuses_every_call_ends_the_lease_as_unreachable() {
    let (store, lease) = lease_on_faulty_store(9, "down", Duration::from_secs(3)).await;
    let deadline = lease.valid_until();
    store.set_plan(FaultPlan::down());
    let cause = lease.lost().await;
    assert!(Instant::now() <= deadline);
    assert_eq!(cause, LossCause::StoreUnreachable);
}

#[tokio::test(start_paused = true)]
async fn renewals_whose_outcome_is_unknown_are_retried_not_read_as_loss() {
    let (store, lease) = lease_on_faulty_store(42, "flaky", Duration::from_secs(3)).await;
    // 30% of all calls apply but lose their reply.
    store.set_plan(FaultPlan {
        apply_then_fail: 0.3,
        ..FaultPlan::none()
    });
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(store.injected() >= 5, "only {} faults injected", store.injected());
    assert!(
        lease.is_valid(),
        "lease lost after {} injected faults: {:?}",
        store.injected(),
        lease.loss_cause()
    );
    let name = LeaseName::new("flaky").expect("name");
    store.set_plan(FaultPlan::none());
    let rec = store.read(&name).await.expect("read").expect("present");
    assert_eq!(
        rec.record.token,
        lease.token(),
        "an unknown-outcome renewal changed the token"
    );
    assert_eq!(rec.record.holder.as_ref(), Some(lease.holder()));
}

#[tokio::test(start_paused = true)]
async fn dropping_the_guard_releases_in_the_background() {
    let store = MemoryStore::new();
    let client = LeaseClient::new(store.clone());
    let lease = client
        .acquire("dropped", Duration::from_secs(60))
        .await
        .expect("acquire");
    drop(lease);
    assert!(
        poll_async(Duration::from_secs(1), || vacant(&store, "dropped")).await,
        "not released after drop"
    );
    assert_eq!(next_token(&client, "dropped").await, 2);
}

#[tokio::test(start_paused = true)]
async fn dropping_an_acquire_mid_write_never_leaves_an_unrenewed_lease() {
    let (mem, slow, client) = common::slowed(1, Duration::from_millis(100));
    // Drop the future while its write is in flight (at 50 ms of a 100 ms call).
    let attempt = client.try_acquire("abandoned", Duration::from_secs(60));
    assert!(tokio::time::timeout(Duration::from_millis(50), attempt).await.is_err());
    // The write lands at 100 ms; nobody waits for the grant, so it is released.
    assert!(
        poll_async(Duration::from_secs(2), || vacant(&mem, "abandoned")).await,
        "an abandoned grant was left held"
    );
    // The same for the waiting `acquire` loop, dropped while it waits for a holder
    // (another client's: this one's own second acquire would be refused at once).
    let holder = LeaseClient::new(slow.clone())
        .acquire("busy", Duration::from_secs(60))
        .await
        .expect("holder");
    let waiting = client.acquire("busy", Duration::from_secs(60));
    assert!(tokio::time::timeout(Duration::from_millis(500), waiting).await.is_err());
    holder.release().await.expect("release");
    assert!(
        poll_async(Duration::from_secs(2), || vacant(&mem, "busy")).await,
        "the dropped waiter took the lease"
    );
}

#[tokio::test(start_paused = true)]
async fn an_acquire_dropped_before_its_write_sends_nothing() {
    let (mem, slow, client) = common::slowed(2, Duration::from_millis(100));
    let counting = CountingStore::new(slow);
    let counted = LeaseClient::new(counting.clone());
    // Never polled: nothing is sent, and nothing stays behind (the name is free again).
    drop(counted.try_acquire("never-sent", Duration::from_secs(60)));
    drop(client.acquire("never-sent", Duration::from_secs(60)));
    assert_eq!(
        counting.counts().round_trips(),
        0,
        "a dropped, unpolled acquire sent a call"
    );
    let name = LeaseName::new("never-sent").expect("name");
    assert!(mem.read(&name).await.expect("read").is_none(), "a record was written");
    assert_eq!(next_token(&counted, "never-sent").await, 1);
}

#[tokio::test(start_paused = true)]
async fn a_release_dropped_mid_write_still_releases() {
    let (mem, _slow, client) = common::slowed(3, Duration::from_millis(100));
    let lease = client
        .acquire("let-go", Duration::from_secs(60))
        .await
        .expect("acquire");
    // Dropped while its write is in flight (at 50 ms of a 100 ms call): it finishes on
    // its own, and nobody renews the lease meanwhile.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), lease.release())
            .await
            .is_err()
    );
    assert!(
        poll_async(Duration::from_secs(2), || vacant(&mem, "let-go")).await,
        "a dropped release left the lease held"
    );
    assert_eq!(next_token(&client, "let-go").await, 2);
}

#[tokio::test(start_paused = true)]
async fn an_acquire_whose_write_outcome_was_unknown_adopts_its_own_grant() {
    let mem = MemoryStore::new();
    let store = FaultStore::new(mem.clone(), 3);
    let client = LeaseClient::new(store.clone());
    // The first write applies but its reply is lost; the client reads, sees itself,
    // and confirms on the record's version with the same token.
    store.set_plan(FaultPlan {
        apply_then_fail: 1.0,
        ..FaultPlan::none()
    });
    let name = "unknown-outcome";
    let first = client.try_acquire(name, Duration::from_secs(10));
    let clear = async {
        // Let the first write (and its lost reply) happen, then heal the store.
        tokio::task::yield_now().await;
        store.set_plan(FaultPlan::none());
    };
    let (outcome, ()) = tokio::join!(first, clear);
    match outcome {
        Ok(AcquireOutcome::Granted(l)) => assert_eq!(l.token().get(), 1),
        Err(Error::Indeterminate { .. }) => {
            // The read also hit the fault: nothing was granted to anyone else, and the
            // record names an abandoned holder that expires on its own.
        }
        other => panic!("unexpected: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn acquire_gives_up_at_its_deadline() {
    let store = MemoryStore::new();
    let _held = LeaseClient::new(store.clone())
        .acquire("taken", Duration::from_secs(60))
        .await
        .expect("holder");
    let client = LeaseClient::new(store);
    let started = Instant::now();
    let err = client
        .acquire_timeout("taken", Duration::from_secs(60), Duration::from_secs(3))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert_eq!(Instant::now() - started, Duration::from_secs(3));
}

#[tokio::test]
async fn bad_input_is_a_typed_error_and_changes_nothing() {
    let store = CountingStore::new(MemoryStore::new());
    let client = LeaseClient::new(store.clone());
    for (name, ttl) in [
        ("", Duration::from_secs(1)),
        ("a//b", Duration::from_secs(1)),
        ("../x", Duration::from_secs(1)),
        ("ok", Duration::ZERO),
        ("ok", Duration::from_secs(8 * 86_400)),
        ("ok", Duration::from_micros(10_500)),
    ] {
        let err = client.try_acquire(name, ttl).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{name:?} {ttl:?}: {err:?}");
    }
    assert_eq!(store.counts().round_trips(), 0, "invalid input reached the store");
}
