//! Native expiry on etcd (`CasStore::expire`): the record and its fence counter (which
//! nothing else ever deletes) are attached to an etcd lease of their own, so a name
//! nobody takes again leaves no key behind even when nobody purges it, and even while
//! the store that wrote it lives on; a stale version changes nothing.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use etcd_client::GetOptions;
use leasehold_core::testing::process::poll_async;
use leasehold_core::{
    LeaseName,
    store::{CasStore, ExpireOutcome, Precondition, Stored},
};
use leasehold_etcd::EtcdStore;
use leasehold_testkit::expiry::{assert_expire_scheduled, assert_stale_expire_conflicts};
use leasehold_testkit::records::held_record;

/// A record held by `done-marker` (token 1, TTL 30 s) written as `name` if `expect` holds.
async fn written(store: &EtcdStore, name: &LeaseName, expect: &Precondition) -> Stored {
    leasehold_testkit::write_ok(store, name, expect, &held_record("done-marker", 1, 30_000)).await
}

/// The keys under the store's prefix, and the etcd lease each is attached to.
async fn keys(store: &EtcdStore) -> Vec<(String, i64)> {
    let mut c = store.client().clone();
    let resp = c
        .get(store.config().prefix(), Some(GetOptions::new().with_prefix()))
        .await
        .expect("get");
    resp.kvs()
        .iter()
        .map(|kv| (String::from_utf8_lossy(kv.key()).into_owned(), kv.lease()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_and_its_fence_counter_go_by_themselves() {
    let store = common::store("expiry").await;
    let name = LeaseName::new("slot/1").expect("name");
    let w = written(&store, &name, &Precondition::Absent).await;
    assert_eq!(
        keys(&store).await.len(),
        2,
        "a grant keeps the record and its fence counter"
    );
    let (outcome, sent) = common::sent(&store, store.expire(&name, &w.version, Duration::from_secs(2))).await;
    assert_eq!(outcome.expect("expire"), ExpireOutcome::Scheduled);
    assert_eq!(
        (sent.lease_grants, sent.txns),
        (1, 1),
        "expire: one lease grant, one Txn"
    );
    let attached = keys(&store).await;
    assert_eq!(attached.len(), 2);
    assert!(
        attached[0].1 != 0 && attached[0].1 == attached[1].1,
        "both keys on one etcd lease: {attached:?}"
    );
    let still = store.read(&name).await.expect("read").expect("present right after");
    assert_eq!(still.record.holder, w.record.holder, "expire changed the holder");
    assert_eq!(still.record.token, w.record.token, "expire changed the token");
    // The store lives on (its session keeps being renewed): the keys still go.
    assert!(
        poll_async(Duration::from_secs(15), || {
            let store = store.clone();
            async move { keys(&store).await.is_empty() }
        })
        .await,
        "keys left 15 s after an expiry of 2 s: {:?}",
        keys(&store).await
    );
    common::cleanup(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_version_changes_nothing_and_a_counter_left_behind_expires() {
    let store = common::store("expiry-stale").await;
    let name = LeaseName::new("slot/2").expect("name");
    let first = written(&store, &name, &Precondition::Absent).await;
    let second = written(&store, &name, &Precondition::Version(first.version.clone())).await;
    assert_stale_expire_conflicts(&store, &name, (&first.version, &second.version), Duration::from_secs(1)).await;
    assert!(
        keys(&store)
            .await
            .iter()
            .all(|(k, lease)| !k.ends_with("!fence") || *lease == 0),
        "a stale expire attached the fence counter to a lease"
    );
    // The record deleted (a plain delete keeps the counter): expire on the last
    // version attaches the counter left behind.
    let mut c = store.client().clone();
    c.delete(format!("{}{}", store.config().prefix(), name.as_str()), None)
        .await
        .expect("delete the record");
    assert_eq!(keys(&store).await.len(), 1, "the fence counter outlives its record");
    assert_expire_scheduled(&store, &name, &second.version, Duration::from_secs(1)).await;
    assert!(
        poll_async(Duration::from_secs(15), || {
            let store = store.clone();
            async move { keys(&store).await.is_empty() }
        })
        .await,
        "the fence counter left behind did not expire"
    );
    common::cleanup(&store).await;
}
