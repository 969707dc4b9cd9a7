//! The store as the shared suites drive it: one [`Etcd`] is the conformance fixture,
//! the fence fixture (each resource a [`FencedKey`]) and the frozen holder's world.

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::{FenceFixture, FencedResource, Fixture};
use leasehold_core::{LeaseName, store::CasStore};
use leasehold_etcd::EtcdStore;
use leasehold_testkit::frozen::World;

use super::fenced::FencedKey;

/// One store on the shared etcd; every `store()` is a clone of it (the same client).
pub struct Etcd(pub EtcdStore);

impl Etcd {
    fn shared(&self) -> Arc<dyn CasStore> {
        Arc::new(self.0.clone())
    }

    /// The fenced key `name` under the store's prefix (created by its first write).
    fn fenced(&self, name: &str) -> Box<dyn FencedResource> {
        Box::new(FencedKey::named(&self.0, name))
    }
}

#[async_trait]
impl Fixture for Etcd {
    async fn store(&self) -> Arc<dyn CasStore> {
        self.shared()
    }

    async fn corrupt(&self, name: &LeaseName) {
        let mut c = self.0.client().clone();
        c.put(self.0.record_key(name), b"\x00not a lease record".to_vec(), None)
            .await
            .unwrap_or_else(|e| panic!("put garbage: {e}"));
    }
}

#[async_trait]
impl FenceFixture for Etcd {
    async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
        // The store's prefix is unique to this test and run: the key was never written.
        self.fenced(case)
    }
}

#[async_trait]
impl World for Etcd {
    async fn store(&self) -> Arc<dyn CasStore> {
        self.shared()
    }

    async fn resource(&self, name: &str) -> Box<dyn FencedResource> {
        self.fenced(name)
    }
}
