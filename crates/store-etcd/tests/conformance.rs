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
