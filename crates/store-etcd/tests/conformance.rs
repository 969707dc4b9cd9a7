//! The leasehold-core conformance suite against a real single-member etcd
//! (`LEASEHOLD_ETCD_ENDPOINTS`, started by `scripts/stores.sh start etcd`).
#![allow(missing_docs)]

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::fixture::Etcd;
use leasehold_core::store::CasStore;

leasehold_core::conformance::conformance_tests!(Etcd(common::store("conformance").await));

/// The fence cases on a [`leasehold_etcd::KeyFence`]: each resource is a fresh etcd key
/// (under the store's unique prefix) written with `EtcdStore::fenced_put`, the value as
/// its decimal bytes ([`common::fenced::FencedKey`], the frozen holder's resource too).
/// Round trips are the requests the store sent to etcd, counted in its one send path
/// ([`leasehold_etcd::EtcdStats`]: every request kind, not only Txns).
mod fence {
    use super::*;

    leasehold_core::conformance::fence_tests!(Etcd(common::store("fence").await));
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
