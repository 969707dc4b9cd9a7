//! Shared pieces of this crate's tests: connection settings from the environment,
//! unique key prefixes, clean-up, the fenced resource, the suites' fixture.
#![allow(dead_code, unreachable_pub)]

pub mod fenced;
pub mod fixture;
pub mod worker;

use std::time::Duration;

use etcd_client::{Client, ConnectOptions, DeleteOptions};
use leasehold_etcd::{EtcdConfig, EtcdStats, EtcdStore};

/// The single-member etcd the tests share.
pub fn endpoints() -> Vec<String> {
    leasehold_testkit::etcd_endpoints()
}

/// A client of `endpoints`, checked to answer.
pub async fn connect(endpoints: &[String]) -> Client {
    let opts = ConnectOptions::new().with_connect_timeout(Duration::from_secs(2));
    let mut c = Client::connect(endpoints, Some(opts))
        .await
        .unwrap_or_else(|e| panic!("cannot connect to etcd at {endpoints:?}: {e}"));
    c.status()
        .await
        .unwrap_or_else(|e| panic!("etcd at {endpoints:?} does not answer: {e}"));
    c
}

/// A key prefix no other test or run uses.
pub fn unique_prefix(tag: &str) -> String {
    format!("lh-test/store-etcd/{tag}/{}/", leasehold_testkit::unique_suffix())
}

/// A store on the shared etcd under a fresh prefix.
pub async fn store(tag: &str) -> EtcdStore {
    store_under(&unique_prefix(tag)).await
}

/// A store on the shared etcd under `prefix` (the same keys in every process that
/// passes the same prefix).
pub async fn store_under(prefix: &str) -> EtcdStore {
    let client = connect(&endpoints()).await;
    let config = EtcdConfig::new(prefix).unwrap_or_else(|e| panic!("config: {e}"));
    EtcdStore::new(client, config)
}

/// A store on an etcd port of the crate's range where nothing listens (its client
/// connects lazily, with a 1 s connect timeout).
pub async fn dead_store(tag: &str) -> EtcdStore {
    let client = Client::connect(
        ["http://127.0.0.1:52599"],
        Some(ConnectOptions::new().with_connect_timeout(Duration::from_secs(1))),
    )
    .await
    .expect("a client connects lazily");
    EtcdStore::new(client, EtcdConfig::new(unique_prefix(tag)).expect("config"))
}

/// Runs `op`: its output, and the etcd requests `store` sent meanwhile.
pub async fn sent<T>(store: &EtcdStore, op: impl Future<Output = T>) -> (T, EtcdStats) {
    let before = store.stats();
    let out = op.await;
    (out, store.stats().since(&before))
}

/// Deletes every key under the store's prefix (only this test's keys).
pub async fn cleanup(store: &EtcdStore) {
    let mut c = store.client().clone();
    let _ = c
        .delete(store.config().prefix(), Some(DeleteOptions::new().with_prefix()))
        .await;
}
