//! The leasehold-core conformance suite against a real single ZooKeeper server
//! (`LEASEHOLD_ZK_ADDR`, started by `scripts/stores.sh start zookeeper`).
#![allow(missing_docs)]

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::fixture::Zk;
use leasehold_core::store::CasStore;

leasehold_core::conformance::conformance_tests!(Zk(common::store("conformance").await));

/// The fence cases on a [`leasehold_zookeeper::NodeFence`]: each resource is a fresh
/// token-marked znode beside the store's unique root, written with
/// `ZooKeeperStore::fenced_set`, its value as decimal bytes. Round trips are every
/// request the store sent ([`leasehold_zookeeper::ZooKeeperStats::requests`]).
mod fence {
    use super::*;

    leasehold_core::conformance::fence_tests!(Zk(common::store("fence").await));
}

/// The wake-up cases: the holder's store and the waiters' store are two stores (two sets
/// of sessions and watches) on the same znodes, as two processes are.
mod wake {
    use leasehold_core::conformance::WakeFixture;

    use super::*;

    struct TwoStores;

    #[async_trait]
    impl WakeFixture for TwoStores {
        async fn stores(&self, tag: &str) -> (Arc<dyn CasStore>, Arc<dyn CasStore>) {
            let dir = common::unique_dir(tag);
            let holder = common::store_under(&dir).await;
            let waiters = common::store_under(&dir).await;
            (Arc::new(holder), Arc::new(waiters))
        }
    }

    leasehold_core::conformance::wake_tests!(TwoStores);
}
