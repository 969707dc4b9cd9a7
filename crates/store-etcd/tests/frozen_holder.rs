//! The shared frozen-holder case (`leasehold_testkit::frozen`) on the shared etcd: a
//! holder process SIGSTOPped past its TTL, a takeover, the holder resumed; its writes to
//! etcd keys, made with `KeyFence` (`EtcdStore::fenced_put`), are refused.
//!
//! Both processes build the same store from the environment: the shared etcd
//! (`LEASEHOLD_ETCD_ENDPOINTS`) under a prefix named after the run, so the lease and every
//! item are the same keys in the test and in the holder.
#![allow(missing_docs)]

mod common;

use std::process::ExitCode;
use std::sync::Arc;

use async_trait::async_trait;
use common::fenced::FencedKey;
use leasehold_core::conformance::FencedResource;
use leasehold_core::store::CasStore;
use leasehold_etcd::EtcdStore;
use leasehold_testkit::frozen::World;

struct Etcd(EtcdStore);

#[async_trait]
impl World for Etcd {
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.0.clone())
    }

    async fn resource(&self, name: &str) -> Box<dyn FencedResource> {
        Box::new(FencedKey::named(&self.0, name))
    }
}

fn main() -> ExitCode {
    leasehold_testkit::frozen::main(|run| {
        let prefix = format!("lh-test/store-etcd/frozen-holder/{run}/");
        async move { Etcd(common::store_under(&prefix).await) }
    })
}
