//! Fenced counting semaphores on `MemoryStore`: waiting without a herd (store calls
//! counted), a client holding several permits, every permit held by the caller's own
//! client, a timeout, and what changing the number of permits does.
#![cfg(feature = "testing")]
#![allow(missing_docs)]

use std::time::Duration;

use leasehold_core::store::BATON_PASS;
use leasehold_core::testing::process::poll;
use leasehold_core::testing::{CountingStore, FaultPlan, FaultStore};
use leasehold_core::{ClientConfig, Error, LeaseClient, MemoryStore, Permit, PermitOutcome, Semaphore};
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(30);

fn semaphore(client: LeaseClient, permits: u32) -> Semaphore {
    Semaphore::new(client, "pool", permits).expect("semaphore")
}

async fn take_all(sem: &Semaphore) -> Vec<Permit> {
    let mut permits = Vec::new();
    for _ in 0..sem.permits() {
        permits.push(sem.acquire(TTL).await.expect("acquire"));
    }
    permits
}

/// Twenty waiters (each its own client, on one store that pushes its changes) on a full
/// semaphore of 3; one release: exactly one waiter is granted, with at most two store calls
/// in all after the release (the grant, and the try of the waiter its write wakes), not one per waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_release_wakes_one_of_twenty_waiters() {
    const WAITERS: u64 = 20;
    const PERMITS: u32 = 3;
    let memory = MemoryStore::new();
    let holder = semaphore(LeaseClient::new(memory.clone()), PERMITS);
    let mut held = take_all(&holder).await;
    let counting = CountingStore::new(memory);
    let tasks: Vec<_> = (0..WAITERS)
        .map(|_| {
            let config = ClientConfig::builder()
                .max_acquire_backoff(Duration::from_secs(60))
                .build()
                .expect("config");
            let sem = semaphore(
                LeaseClient::with_config(counting.clone(), config).expect("client"),
                PERMITS,
            );
            tokio::spawn(async move { sem.acquire_timeout(TTL, Duration::from_secs(60)).await })
        })
        .collect();
    let parked = WAITERS * u64::from(PERMITS);
    assert!(
        poll(Duration::from_secs(10), || counting.counts().waits >= parked).await,
        "waiters never parked on every slot: {:?}",
        counting.counts()
    );
    let before = counting.counts();
    assert_eq!(
        before.reads + before.writes,
        parked,
        "one try of each slot per waiter before waiting: {before:?}"
    );
    counting.reset();

    let released = Instant::now();
    held.pop().expect("a permit").release().await.expect("release");
    assert!(
        poll(Duration::from_secs(5), || tasks
            .iter()
            .filter(|t| t.is_finished())
            .count()
            == 1)
        .await,
        "no waiter was granted the released permit: {:?}",
        counting.counts()
    );
    let took = released.elapsed();
    // Twice the time after which an unused wake-up moves on, so a herd would show.
    tokio::time::sleep(BATON_PASS * 2).await;
    let calls = counting.counts();
    println!("{WAITERS} waiters on {PERMITS} permits, one release: granted after {took:?}; store calls {calls:?}");
    assert_eq!(
        tasks.iter().filter(|t| t.is_finished()).count(),
        1,
        "more than one waiter returned"
    );
    assert!(
        calls.reads + calls.writes <= 2,
        "store calls after one release: {calls:?}"
    );
    for t in tasks {
        if t.is_finished() {
            let permit = t.await.expect("task").expect("granted");
            permit.release().await.expect("release");
        } else {
            t.abort();
        }
    }
}

/// One client may hold several permits (the slots it holds are skipped); holding every
/// one, it is told `AlreadyHeld` at once, without a round trip, naming the semaphore.
#[tokio::test(start_paused = true)]
async fn a_client_holding_every_permit_is_refused_at_once() {
    let store = CountingStore::new(MemoryStore::new());
    let sem = semaphore(LeaseClient::new(store.clone()), 3);
    let permits = take_all(&sem).await;
    let mut slots: Vec<u32> = permits.iter().map(Permit::slot).collect();
    slots.sort_unstable();
    assert_eq!(slots, [0, 1, 2], "one client holds each slot once");
    store.reset();
    let started = Instant::now();
    for r in [
        sem.try_acquire(TTL).await.map(|_| ()),
        sem.acquire(TTL).await.map(|_| ()),
        sem.acquire_timeout(TTL, Duration::from_secs(5)).await.map(|_| ()),
    ] {
        match r {
            Err(Error::AlreadyHeld { name, .. }) => assert_eq!(name, "pool"),
            other => panic!("expected AlreadyHeld, got {other:?}"),
        }
    }
    assert_eq!(Instant::now(), started, "a refusal must not wait");
    assert_eq!(store.counts().round_trips(), 0, "a refusal must not reach the store");
    // Released, a slot is granted again, with its next token.
    let mut permits = permits;
    let first = permits.remove(0);
    let (slot, token) = (first.slot(), first.token());
    first.release().await.expect("release");
    let again = sem.acquire(TTL).await.expect("again");
    assert_eq!((again.slot(), again.token()), (slot, token.next()));
}

/// A full semaphore: `try_acquire` is `Held` with a wait, and `acquire_timeout` gives up
/// with `Timeout` naming the semaphore.
#[tokio::test(start_paused = true)]
async fn a_full_semaphore_is_held_then_times_out() {
    let memory = MemoryStore::new();
    let _held = take_all(&semaphore(LeaseClient::new(memory.clone()), 2)).await;
    let other = semaphore(LeaseClient::new(memory), 2);
    match other.try_acquire(TTL).await.expect("try") {
        PermitOutcome::Held { retry_after } => assert!(retry_after > Duration::ZERO && retry_after <= TTL),
        PermitOutcome::Granted(p) => panic!("granted a third permit of two: {p:?}"),
    }
    let started = Instant::now();
    match other.acquire_timeout(TTL, Duration::from_secs(3)).await {
        // Every permit was held: nothing failed, so the timeout names no error.
        Err(Error::Timeout { name, last_error: None }) => assert_eq!(name, "pool"),
        r => panic!("expected Timeout, got {r:?}"),
    }
    assert!(started.elapsed() >= Duration::from_secs(3));
}

/// Shrinking: a semaphore built with fewer permits stops trying the upper slots, but
/// their holders keep them, so there are more holders than the new number until they
/// release. Growing: the new slots are granted at once.
#[tokio::test(start_paused = true)]
async fn changing_the_number_of_permits() {
    let memory = MemoryStore::new();
    let three = semaphore(LeaseClient::new(memory.clone()), 3);
    let mut held = take_all(&three).await;
    held.sort_by_key(Permit::slot);
    let two = semaphore(LeaseClient::new(memory.clone()), 2);
    assert!(matches!(
        two.try_acquire(TTL).await.expect("try"),
        PermitOutcome::Held { .. }
    ));
    // Slot 2's holder is above the new limit and still holds it: three holders, two permits.
    let upper = held.pop().expect("slot 2");
    assert_eq!(upper.slot(), 2);
    assert!(upper.is_valid());
    // Its release does not make room under the new limit: slots 0 and 1 are still held.
    upper.release().await.expect("release");
    assert!(matches!(
        two.try_acquire(TTL).await.expect("try"),
        PermitOutcome::Held { .. }
    ));
    let lower = held.pop().expect("slot 1");
    lower.release().await.expect("release");
    assert_eq!(two.acquire(TTL).await.expect("room under two").slot(), 1);
    // Growing to four: slots 2 and 3 are free at once.
    let four = semaphore(LeaseClient::new(memory), 4);
    let mut grown: Vec<u32> = Vec::new();
    for _ in 0..2 {
        grown.push(
            four.acquire_timeout(TTL, Duration::from_secs(1))
                .await
                .expect("grown")
                .slot(),
        );
    }
    grown.sort_unstable();
    assert_eq!(grown, [2, 3]);
}

/// A permit holder whose store stops answering loses its permit (the loss signal fires
/// by its deadline, and the validity handed to its work reads `false`) and another client
/// takes the slot with the next token, never before.
#[tokio::test(start_paused = true)]
async fn a_permit_is_lost_like_a_lease_and_taken_over_with_the_next_token() {
    let memory = MemoryStore::new();
    let frozen = FaultStore::new(memory.clone(), 1);
    let a = semaphore(LeaseClient::new(frozen.clone()), 1);
    let permit = a.acquire(Duration::from_secs(2)).await.expect("a");
    let validity = permit.validity();
    assert!(validity.is_valid(), "a fresh permit's validity");
    frozen.set_plan(FaultPlan::hang());
    let b = semaphore(LeaseClient::new(memory), 1);
    let taken = b.acquire_timeout(TTL, Duration::from_secs(30)).await.expect("takeover");
    assert!(Instant::now() >= permit.valid_until(), "taken over while still valid");
    assert_eq!((taken.slot(), taken.token()), (0, permit.token().next()));
    tokio::time::timeout(Duration::from_secs(1), permit.lost())
        .await
        .expect("the loss signal never fired");
    assert!(!permit.is_valid());
    // Cancelled by the loss itself (asked first: a `false` answer cancels it too).
    assert!(validity.cancellation().is_cancelled());
    assert!(
        !validity.is_valid(),
        "the validity handed out outlived the permit's loss"
    );
}

/// A timeout too long for the clock (`Duration::MAX`) means no deadline, as for a
/// lease: it panicked on the `Instant` overflow.
#[tokio::test(start_paused = true)]
async fn a_timeout_too_long_for_the_clock_means_no_deadline() {
    let sem = semaphore(LeaseClient::new(MemoryStore::new()), 1);
    let permit = sem.acquire_timeout(TTL, Duration::MAX).await.expect("acquire_timeout");
    permit.release().await.expect("release");
}
