//! The resource this crate's tests protect with the store's own fence: a token-marked
//! znode written through a [`NodeFence`] (`ZooKeeperStore::fenced_set`), its bytes the
//! decimal digits of an integer, read back with `ZooKeeperStore::read_fenced`. The fence
//! cases (`conformance.rs`) and the frozen holder (`frozen_holder.rs`) both use it.

use async_trait::async_trait;
use leasehold_core::conformance::FencedResource;
use leasehold_core::fence::FenceMode;
use leasehold_core::{Error, FencingToken, Result};
use leasehold_testkit::suite::decimal_value;
use leasehold_zookeeper::{NodeFence, ZooKeeperStore};

/// A znode written through a [`NodeFence`].
pub struct FencedNode {
    store: ZooKeeperStore,
    path: String,
}

impl FencedNode {
    /// The znode `<dir>/fenced-<name>` beside `store`'s root: the same directory and name
    /// are the same znode in any process. It is created by its first fenced write.
    pub fn named(store: &ZooKeeperStore, name: &str) -> Self {
        Self {
            store: store.clone(),
            path: format!("{}/fenced-{name}", super::dir_of(store)),
        }
    }
}

#[async_trait]
impl FencedResource for FencedNode {
    async fn write(&self, token: FencingToken, mode: FenceMode, value: i64) -> Result<()> {
        let fence = NodeFence::new(self.path.clone(), token)?.mode(mode);
        let written = self.store.fenced_set(&fence, value.to_string()).await?;
        written
            .or_else(|()| Error::invalid("fenced write", "a node fence has no condition"))
            .map(drop)
    }

    async fn read(&self) -> Option<(FencingToken, i64)> {
        decimal_value(self.store.read_fenced(&self.path).await, "the fenced znode")
    }

    fn round_trips(&self) -> u64 {
        self.store.stats().requests()
    }
}
