//! Locking several names together: `LeaseClient::acquire_all` takes them in one sorted
//! order (no deadlock between callers naming overlapping sets in different orders),
//! gives back all or none, and reports the loss of any through one signal.
#![cfg(feature = "testing")]
#![allow(missing_docs)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::testing::CountingStore;
use leasehold_core::{
    AcquireOptions, AcquireOutcome, Error, FencingToken, HolderId, LeaseClient, LeaseName, LossCause, MemoryStore, Ttl,
    store::{CasOutcome, CasStore, LeaseRecord, Precondition},
};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(30);

fn free(outcome: AcquireOutcome) -> bool {
    matches!(outcome, AcquireOutcome::Granted(_))
}

#[tokio::test(start_paused = true)]
async fn a_set_is_taken_sorted_and_deduplicated_and_released_together() {
    let store = MemoryStore::new();
    let client = LeaseClient::new(store.clone());
    let set = client.acquire_all(["b", "a", "c", "a"], TTL).await.expect("set");
    let names: Vec<&str> = set.names().map(LeaseName::as_str).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert!(set.tokens().all(|(_, t)| t == FencingToken::FIRST));
    assert_eq!(set.token("b"), Some(FencingToken::FIRST));
    assert_eq!(set.token("d"), None);
    assert!(set.is_valid());
    assert!(set.valid_until() > Instant::now());
    let other = LeaseClient::new(store.clone());
    for n in ["a", "b", "c"] {
        assert!(
            !free(other.try_acquire(n, TTL).await.expect("other")),
            "{n} was not held"
        );
    }
    // This client holds them: a second set with any of them is refused at once.
    assert!(matches!(
        client.acquire_all(["z", "c"], TTL).await,
        Err(Error::AlreadyHeld { name, .. }) if name == "c"
    ));
    set.release().await.expect("release");
    for n in ["a", "b", "c", "z"] {
        assert!(free(other.try_acquire(n, TTL).await.expect("other")), "{n} still held");
    }
    assert!(matches!(
        client.acquire_all(Vec::<&str>::new(), TTL).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        client.acquire_all(["ok", "bad name"], TTL).await,
        Err(Error::InvalidInput { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn all_or_none_a_timeout_releases_the_names_already_taken() {
    let store = CountingStore::new(MemoryStore::new());
    let holder = LeaseClient::new(store.clone());
    let _y = holder.acquire("y", TTL).await.expect("y");
    let client = LeaseClient::new(store.clone());
    let started = Instant::now();
    let err = client
        .acquire_all_timeout(["x", "y", "w"], TTL, Duration::from_secs(3))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Timeout { name, last_error: None } if name == "y"),
        "{err:?}"
    );
    assert_eq!(Instant::now() - started, Duration::from_secs(3));
    // "w" and "x" come before "y": they were taken, then released on the timeout.
    let other = LeaseClient::new(store.clone());
    for n in ["w", "x"] {
        assert!(free(other.try_acquire(n, TTL).await.expect("other")), "{n} left held");
    }
    // A name this client holds is refused before anything is sent or held.
    let held = client.acquire("v", TTL).await.expect("v");
    store.reset();
    assert!(matches!(
        client.acquire_all(["u", "v"], TTL).await,
        Err(Error::AlreadyHeld { .. })
    ));
    assert_eq!(store.counts().round_trips(), 0, "{:?}", store.counts());
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn losing_any_lease_of_the_set_fires_the_one_signal() {
    let store = MemoryStore::new();
    let client = LeaseClient::new(store.clone());
    let set = client.acquire_all(["m1", "m2", "m3"], TTL).await.expect("set");
    let cancel = set.cancellation();
    // A foreign writer takes "m2" over (on the record's current version).
    let m2 = set.lease("m2").expect("m2");
    let intruder = LeaseRecord::held(
        HolderId::new("intruder").expect("holder"),
        m2.token().next(),
        Ttl::new(TTL).expect("ttl"),
    );
    let name = LeaseName::new("m2").expect("name");
    assert!(matches!(
        store
            .write(&name, &Precondition::Version(m2.version()), &intruder)
            .await
            .expect("write"),
        CasOutcome::Written(_)
    ));
    let started = Instant::now();
    let (lost, cause) = set.lost().await;
    assert_eq!(lost.as_str(), "m2");
    assert!(matches!(cause, LossCause::TakenOver { .. }), "{cause:?}");
    assert!(
        Instant::now() - started <= TTL / 3,
        "noticed only after {:?}",
        Instant::now() - started
    );
    assert!(!set.is_valid());
    tokio::task::yield_now().await;
    assert!(cancel.is_cancelled(), "the combined cancellation did not fire");
    assert_eq!(
        set.loss_cause().map(|(n, _)| n.as_str().to_owned()).as_deref(),
        Some("m2")
    );
    // The others are still held until the set is released.
    assert!(set.lease("m1").expect("m1").is_valid() && set.lease("m3").expect("m3").is_valid());
    set.release().await.expect("release");
}

/// Contenders ask for overlapping sets of five names, each in its own random order:
/// nobody deadlocks, no name is ever held by two at once (checked by an in-use table
/// and by each name's tokens, which must grow with every grant).
async fn contend(store: MemoryStore, contenders: usize, rounds: usize, seed: u64) {
    const NAMES: [&str; 5] = ["n0", "n1", "n2", "n3", "n4"];
    let in_use: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let last_token: Arc<Mutex<HashMap<String, FencingToken>>> = Arc::default();
    let mut tasks = Vec::new();
    for c in 0..contenders {
        let (store, in_use, last_token) = (store.clone(), in_use.clone(), last_token.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed + c as u64);
            let client = LeaseClient::new(store);
            for _ in 0..rounds {
                let mut names: Vec<&str> = NAMES.to_vec();
                names.shuffle(&mut rng);
                names.truncate(rng.random_range(2..=4));
                let set = client
                    .acquire_all(names.iter().copied(), Duration::from_secs(5))
                    .await
                    .expect("set");
                for (name, token) in set.tokens() {
                    let mut use_ = in_use.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    let holder = use_.entry(name.as_str().to_owned()).or_insert(usize::MAX);
                    assert_eq!(*holder, usize::MAX, "{name} held by {} and {c} at once", *holder);
                    *holder = c;
                    let mut tokens = last_token.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    let last = tokens.entry(name.as_str().to_owned()).or_insert(FencingToken::ZERO);
                    assert!(token > *last, "{name}: token {token} after {last}");
                    *last = token;
                }
                tokio::time::sleep(Duration::from_millis(rng.random_range(1..20))).await;
                assert!(set.is_valid());
                for name in set.names() {
                    in_use
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert(name.as_str().to_owned(), usize::MAX);
                }
                set.release().await.expect("release");
            }
        }));
    }
    for t in tasks {
        t.await.expect("contender");
    }
}

#[tokio::test(start_paused = true)]
async fn overlapping_sets_in_different_orders_never_deadlock_and_exclude_each_other() {
    for seed in 0..5 {
        tokio::time::timeout(Duration::from_secs(600), contend(MemoryStore::new(), 6, 20, seed * 100))
            .await
            .unwrap_or_else(|_| panic!("seed {seed}: contenders deadlocked"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sets_on_real_threads_and_an_observation_store() {
    tokio::time::timeout(Duration::from_secs(120), contend(MemoryStore::observation(), 4, 10, 7))
        .await
        .expect("contenders deadlocked");
}

#[tokio::test(start_paused = true)]
async fn a_capped_set_ends_at_its_cap() {
    let client = LeaseClient::new(MemoryStore::new());
    let t0 = Instant::now();
    let set = client
        .acquire_all_with(
            ["p", "q"],
            &AcquireOptions::new(Duration::from_secs(9)).max_hold(Duration::from_secs(20)),
        )
        .await
        .expect("set");
    let (_, cause) = set.lost().await;
    assert_eq!(cause, LossCause::MaxHoldReached);
    assert_eq!(Instant::now(), t0 + Duration::from_secs(20));
}
