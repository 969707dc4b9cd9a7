//! The resource this crate's tests protect with the store's own fence: a token-marked
//! znode written through a [`NodeFence`] (`ZooKeeperStore::fenced_set`), its bytes the
//! decimal digits of an integer, read back with `ZooKeeperStore::read_fenced`. The fence
//! cases (`conformance.rs`) and the frozen holder (`frozen_holder.rs`) both use it.

use async_trait::async_trait;
use leasehold_core::conformance::FencedResource;
use leasehold_core::fence::{FenceMode, FencedOutcome};
use leasehold_core::{FencingToken, Result};
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
        match self.store.fenced_set(&fence, value.to_string()).await? {
            FencedOutcome::Applied(_version) => Ok(()),
            FencedOutcome::ConditionFailed(()) => Err(leasehold_core::Error::invalid(
                "fenced write",
                "a node fence has no condition",
            )),
        }
    }

    async fn read(&self) -> Option<(FencingToken, i64)> {
        let (mark, bytes) = self
            .store
            .read_fenced(&self.path)
            .await
            .unwrap_or_else(|e| panic!("read the fenced znode: {e}"))?;
        let value = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or_else(|| panic!("the fenced znode holds {bytes:?}, not an integer"));
        Some((mark, value))
    }

    fn round_trips(&self) -> u64 {
        self.store.stats().requests()
    }
}
