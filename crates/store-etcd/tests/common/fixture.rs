//! This crate's part of the shared suites ([`leasehold_testkit::suite`]): [`Etcd`] opens
//! stores under key prefixes on the shared etcd, protects [`FencedKey`]s and corrupts a
//! record with a raw put; `Suite::<Etcd>` is the conformance fixture, the fence fixture
//! and the frozen holder's world.

use async_trait::async_trait;
use leasehold_core::LeaseName;
use leasehold_core::conformance::FencedResource;
use leasehold_etcd::EtcdStore;
use leasehold_testkit::suite::Backend;

use super::fenced::FencedKey;

/// The etcd store in the shared suites: a place is a key prefix.
pub enum Etcd {}

#[async_trait]
impl Backend for Etcd {
    type Store = EtcdStore;

    fn unique_place(tag: &str) -> String {
        super::unique_prefix(tag)
    }

    async fn open(prefix: &str) -> EtcdStore {
        super::store_under(prefix).await
    }

    /// The fenced key `name` under the store's prefix (created by its first write).
    fn resource(store: &EtcdStore, name: &str) -> Box<dyn FencedResource> {
        Box::new(FencedKey::named(store, name))
    }

    async fn corrupt(store: &EtcdStore, name: &LeaseName) {
        let mut c = store.client().clone();
        c.put(store.record_key(name), b"\x00not a lease record".to_vec(), None)
            .await
            .unwrap_or_else(|e| panic!("put garbage: {e}"));
    }
}
