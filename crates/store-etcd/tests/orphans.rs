//! No record is held for ever by a process that is alive and trying. A held record lives
//! on one of the store's sessions, which its keep-alive task renews for as long as the
//! store exists; every record a write may have left there must still be expired at its
//! TTL like one its holder stopped renewing: a claim whose caller went away half-way (a
//! `tokio::time::timeout`, a `select!`, a dropped `LeaseClient::acquire`), and a claim
//! whose answer was lost followed by another attempt whose answer was lost too.
#![allow(missing_docs)]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use leasehold_core::testing::process::poll_async;
use leasehold_core::{
    LeaseName,
    store::{CasOutcome, CasStore, LeaseRecord, Precondition},
};
use leasehold_etcd::{EtcdConfig, EtcdStore};
use leasehold_testkit::proxy::{Proxy, ProxyMode};
use leasehold_testkit::records::held_record;
use tokio::time::Instant;

/// A record held by `holder` with token 1 and a TTL of `ttl_ms` milliseconds.
fn held(holder: &str, ttl_ms: u64) -> LeaseRecord {
    held_record(holder, 1, ttl_ms)
}

/// True once another store (its own caches, the same keys) claims `n` within `limit`.
async fn claimable_within(store: &EtcdStore, n: &LeaseName, limit: Duration) -> bool {
    let other = EtcdStore::new(store.client().clone(), store.config().clone());
    poll_async(limit, || async {
        matches!(
            other.write(n, &Precondition::Claimable, &held("next", 1000)).await,
            Ok(CasOutcome::Written(_))
        )
    })
    .await
}

/// Another store's claim of `n`, right now, finds it held.
async fn not_claimable_now(store: &EtcdStore, n: &LeaseName) {
    let other = EtcdStore::new(store.client().clone(), store.config().clone());
    let r = other.write(n, &Precondition::Claimable, &held("early", 1000)).await;
    assert!(
        matches!(r, Ok(CasOutcome::Conflict(_))),
        "claimed before the TTL ran out: {r:?}"
    );
}

/// Polls `fut` once.
async fn poll_once<T>(fut: &mut Pin<Box<dyn Future<Output = T> + Send + '_>>) -> Poll<T> {
    std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_dropped_after_etcd_applied_it_expires_at_its_ttl() {
    let store = common::store("dropped-claim").await;
    let n = LeaseName::new("dropped").unwrap_or_else(|e| panic!("{e}"));
    let record_key = store.record_key(&n);
    let ttl = Duration::from_millis(2000);

    // Drive the claim one poll at a time; between polls, watch etcd directly. Once the
    // record is there, the claim has applied but its caller has not seen the answer
    // (it can only see it in a later poll): drop the call right there.
    let started = Instant::now();
    let record = held("gone", 2000);
    let mut claim: Pin<Box<dyn Future<Output = _> + Send + '_>> =
        Box::pin(store.write(&n, &Precondition::Claimable, &record));
    let mut applied = false;
    while !applied && started.elapsed() < Duration::from_secs(10) {
        if let Poll::Ready(r) = poll_once(&mut claim).await {
            panic!("the claim finished before it could be dropped after applying: {r:?}");
        }
        let window = Instant::now() + Duration::from_millis(200);
        while !applied && Instant::now() < window {
            let mut c = store.client().clone();
            let got = c
                .get(record_key.clone(), None)
                .await
                .unwrap_or_else(|e| panic!("get: {e}"));
            applied = !got.kvs().is_empty();
            if !applied {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    }
    assert!(applied, "the claim never reached etcd");
    let dropped_at = Instant::now();
    drop(claim);
    let mut c = store.client().clone();
    let kv = c
        .get(record_key.clone(), None)
        .await
        .unwrap_or_else(|e| panic!("get: {e}"));
    let lease = kv.kvs().first().map_or(0, etcd_client::KeyValue::lease);
    assert_ne!(lease, 0, "the dropped claim's record is not on a session");

    // Not before its TTL: nobody trusts that record, but its deadline is still its TTL.
    assert!(started.elapsed() < ttl, "too slow to check: {:?}", started.elapsed());
    not_claimable_now(&store, &n).await;
    // The store lives on (and so does its session); another store must be able to claim
    // the name once the dropped claim's TTL has run out.
    let taken = claimable_within(&store, &n, ttl * 4 + Duration::from_secs(2)).await;
    assert!(
        taken,
        "a claim dropped after it applied held the name for {:?} and counting (its session is kept alive)",
        dropped_at.elapsed()
    );
    assert!(store.stats().expiry_deletes >= 1, "{:?}", store.stats());
    common::cleanup(&store).await;
    drop(store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_unanswered_claims_in_a_row_leave_nothing_held_for_ever() {
    let direct = common::connect(&common::endpoints()).await;
    let upstream = common::endpoints()[0].trim_start_matches("http://").to_owned();
    let proxy = Proxy::start(&upstream).await;
    let via_proxy = etcd_client::Client::connect([proxy.endpoint()], None)
        .await
        .unwrap_or_else(|e| panic!("connect via proxy: {e}"));
    let config = EtcdConfig::new(common::unique_prefix("unanswered"))
        .and_then(|c| c.with_request_timeout(Duration::from_millis(500)))
        .unwrap_or_else(|e| panic!("config: {e}"));
    let store = EtcdStore::new(via_proxy, config);
    // The connection and a session for the 3 s class exist before the fault.
    let warm = LeaseName::new("warm").unwrap_or_else(|e| panic!("{e}"));
    let w = store.write(&warm, &Precondition::Claimable, &held("w", 3000)).await;
    assert!(matches!(w, Ok(CasOutcome::Written(_))), "warm-up: {w:?}");

    // Both claims reach etcd, neither answer comes back: the first applies, the second
    // finds the name taken (by the first, which nobody trusts).
    let n = LeaseName::new("unanswered").unwrap_or_else(|e| panic!("{e}"));
    proxy.set_mode(ProxyMode::Withhold);
    let first_sent = Instant::now();
    for holder in ["first", "second"] {
        let r = store.write(&n, &Precondition::Claimable, &held(holder, 3000)).await;
        assert!(
            r.as_ref().is_err_and(leasehold_core::Error::is_indeterminate),
            "{holder}: {r:?}"
        );
    }
    proxy.set_mode(ProxyMode::Forward);
    let mut c = direct.clone();
    let kv = c
        .get(store.record_key(&n), None)
        .await
        .unwrap_or_else(|e| panic!("get: {e}"));
    let kv = kv.kvs().first().cloned().expect("the first unanswered claim applied");
    assert!(String::from_utf8_lossy(kv.value()).contains("first"));
    assert_ne!(kv.lease(), 0, "not on a session");

    assert!(first_sent.elapsed() < Duration::from_secs(3), "too slow to check");
    not_claimable_now(&store, &n).await;
    // The store lives on and so does its session: the first claim's record must still
    // be deleted once its TTL has run out.
    let free = claimable_within(&store, &n, Duration::from_secs(3 * 4 + 2)).await;
    assert!(free, "the first unanswered claim's record is held for ever");
    assert!(store.stats().expiry_deletes >= 1, "{:?}", store.stats());
    common::cleanup(&EtcdStore::new(direct, store.config().clone())).await;
    drop(store);
}
