//! Calls dropped half-way (a `tokio::time::timeout`, a `select!`, a dropped
//! `LeaseClient::acquire`) leave nothing held for ever. A held record lives on one of
//! the store's sessions, which its keep-alive task renews for as long as the store
//! exists; a claim that reached etcd just before its caller went away must still be
//! expired at its TTL like any record its holder stopped renewing.
#![allow(missing_docs)]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use lease_core::testing::process::poll_async;
use lease_core::{CasOutcome, CasStore, FencingToken, HolderId, LeaseName, LeaseRecord, Precondition, Ttl};
use store_etcd::EtcdStore;
use tokio::time::Instant;

fn held(holder: &str, ttl_ms: u64) -> LeaseRecord {
    LeaseRecord::held(
        HolderId::new(holder).unwrap_or_else(|e| panic!("{e}")),
        FencingToken::new(1),
        Ttl::from_millis(ttl_ms).unwrap_or_else(|e| panic!("{e}")),
    )
}

/// Polls `fut` once.
async fn poll_once<T>(fut: &mut Pin<Box<dyn Future<Output = T> + Send + '_>>) -> Poll<T> {
    std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_dropped_after_etcd_applied_it_expires_at_its_ttl() {
    let store = common::store("dropped-claim").await;
    let record_key = store.record_key(&LeaseName::new("dropped").unwrap_or_else(|e| panic!("{e}")));
    let n = LeaseName::new("dropped").unwrap_or_else(|e| panic!("{e}"));
    let ttl = Duration::from_millis(1000);

    // Drive the claim one poll at a time; between polls, watch etcd directly. Once the
    // record is there, the claim has applied but its caller has not seen the answer
    // (it can only see it in a later poll): drop the call right there.
    let started = Instant::now();
    let record = held("gone", 1000);
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

    // The store lives on (and so does its session); another store must be able to claim
    // the name once the dropped claim's TTL has run out.
    let other = EtcdStore::with_config(store.client().clone(), store.config().clone());
    let taken = poll_async(ttl * 4 + Duration::from_secs(2), || async {
        matches!(
            other.write(&n, &Precondition::Claimable, &held("next", 1000)).await,
            Ok(CasOutcome::Written(_))
        )
    })
    .await;
    assert!(
        taken,
        "a claim dropped after it applied held the name for {:?} and counting (its session is kept alive)",
        dropped_at.elapsed()
    );
    assert!(store.stats().expiry_deletes >= 1, "{:?}", store.stats());
    common::cleanup(&store).await;
    drop(store);
}
