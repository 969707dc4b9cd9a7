//! This crate's part of the shared suites ([`leasehold_testkit::suite`]): [`Zk`] opens
//! stores with their roots under directories on the shared server, protects
//! [`FencedNode`]s and corrupts a record with a raw create or set; `Suite::<Zk>` is the
//! conformance fixture, the fence fixture and the frozen holder's world.

use async_trait::async_trait;
use leasehold_core::LeaseName;
use leasehold_core::conformance::FencedResource;
use leasehold_testkit::suite::Backend;
use leasehold_zookeeper::ZooKeeperStore;
use leasehold_zookeeper::zookeeper_client as zk;

use super::fenced::FencedNode;

/// The ZooKeeper store in the shared suites: a place is the directory of a store's root
/// (`<dir>/leases`); every store opened has sessions of its own.
pub enum Zk {}

#[async_trait]
impl Backend for Zk {
    type Store = ZooKeeperStore;

    fn unique_place(tag: &str) -> String {
        super::unique_dir(tag)
    }

    async fn open(dir: &str) -> ZooKeeperStore {
        super::store_under(dir).await
    }

    /// The znode `<dir>/fenced-<name>` beside the store's root (created by its first
    /// write).
    fn resource(store: &ZooKeeperStore, name: &str) -> Box<dyn FencedResource> {
        Box::new(FencedNode::named(store, name))
    }

    async fn corrupt(store: &ZooKeeperStore, name: &LeaseName) {
        let client = store.client().await.unwrap_or_else(|e| panic!("client: {e}"));
        let path = store.record_path(name);
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
