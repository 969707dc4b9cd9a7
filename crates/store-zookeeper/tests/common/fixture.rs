//! The store as the shared suites drive it: one [`Zk`] is the conformance fixture, the
//! fence fixture (each resource a [`FencedNode`]) and the frozen holder's world.

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::{FenceFixture, FencedResource, Fixture};
use leasehold_core::{LeaseName, store::CasStore};
use leasehold_testkit::frozen::World;
use leasehold_zookeeper::ZooKeeperStore;
use leasehold_zookeeper::zookeeper_client as zk;

use super::fenced::FencedNode;

/// One store on the shared server; every `store()` is a clone of it (the same sessions).
pub struct Zk(pub ZooKeeperStore);

impl Zk {
    fn shared(&self) -> Arc<dyn CasStore> {
        Arc::new(self.0.clone())
    }

    fn fenced(&self, name: &str) -> Box<dyn FencedResource> {
        Box::new(FencedNode::named(&self.0, name))
    }
}

#[async_trait]
impl Fixture for Zk {
    async fn store(&self) -> Arc<dyn CasStore> {
        self.shared()
    }

    async fn corrupt(&self, name: &LeaseName) {
        let client = self.0.client().await.unwrap_or_else(|e| panic!("client: {e}"));
        let path = self.0.record_path(name);
        let garbage = b"\x00not a lease record";
        let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        match client.create(&path, garbage, &opts).await {
            Ok(_) => {}
            Err(zk::Error::NodeExists) => {
                client
                    .set_data(&path, garbage, None)
                    .await
                    .unwrap_or_else(|e| panic!("set garbage: {e}"));
            }
            Err(e) => panic!("create garbage: {e}"),
        }
    }
}

#[async_trait]
impl FenceFixture for Zk {
    async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
        // The store's directory is unique to this test and run: the znode was never written.
        self.fenced(case)
    }
}

#[async_trait]
impl World for Zk {
    async fn store(&self) -> Arc<dyn CasStore> {
        self.shared()
    }

    async fn resource(&self, name: &str) -> Box<dyn FencedResource> {
        self.fenced(name)
    }
}
