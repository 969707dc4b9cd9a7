//! The leasehold-core conformance suite against a real single-member etcd
//! (`LEASEHOLD_ETCD_ENDPOINTS`, started by `scripts/stores.sh start etcd`).
#![allow(missing_docs)]

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::Fixture;
use leasehold_core::{LeaseName, store::CasStore};
use leasehold_etcd::EtcdStore;

struct Etcd(EtcdStore);

#[async_trait]
impl Fixture for Etcd {
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.0.clone())
    }

    async fn corrupt(&self, name: &LeaseName) {
        let mut c = self.0.client().clone();
        c.put(self.0.record_key(name), b"\x00not a lease record".to_vec(), None)
            .await
            .unwrap_or_else(|e| panic!("put garbage: {e}"));
    }
}

leasehold_core::conformance::conformance_tests!(Etcd(common::store("conformance").await));

/// The fence cases on a [`leasehold_etcd::KeyFence`]: each resource is a fresh etcd key
/// (under the store's unique prefix) written with `EtcdStore::fenced_put`, the value as
/// its decimal bytes ([`common::fenced::FencedKey`], the frozen holder's resource too).
/// Round trips are the requests the store sent to etcd, counted in its one send path
/// ([`leasehold_etcd::EtcdStats`]: every request kind, not only Txns).
mod fence {
    use leasehold_core::conformance::{FenceFixture, FencedResource};

    use super::*;
    use crate::common::fenced::FencedKey;

    struct FencedKeys(EtcdStore);

    #[async_trait]
    impl FenceFixture for FencedKeys {
        async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
            // The store's prefix is unique to this test and run: the key was never written.
            Box::new(FencedKey::named(&self.0, case))
        }
    }

    leasehold_core::conformance::fence_tests!(FencedKeys(common::store("fence").await));
}

/// The wake-up cases: the holder's store and the waiters' store are two stores (two
/// clients, two sets of watches) on the same keys, as two processes are.
mod wake {
    use leasehold_core::conformance::WakeFixture;

    use super::*;

    struct TwoStores;

    #[async_trait]
    impl WakeFixture for TwoStores {
        async fn stores(&self, tag: &str) -> (Arc<dyn CasStore>, Arc<dyn CasStore>) {
            let prefix = common::unique_prefix(tag);
            let holder = common::store_under(&prefix).await;
            let waiters = common::store_under(&prefix).await;
            (Arc::new(holder), Arc::new(waiters))
        }
    }

    leasehold_core::conformance::wake_tests!(TwoStores);
}
