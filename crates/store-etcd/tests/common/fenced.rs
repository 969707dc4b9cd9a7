//! The resource this crate's tests protect with the store's own fence: an etcd key
//! written through a [`KeyFence`] (`EtcdStore::fenced_put`), its value the decimal
//! bytes of an integer, read back with `EtcdStore::read_fenced`. The fence cases
//! (`conformance.rs`) and the frozen holder (`frozen_holder.rs`) both use it.

use async_trait::async_trait;
use leasehold_core::conformance::FencedResource;
use leasehold_core::fence::FenceMode;
use leasehold_core::{Error, FencingToken, Result};
use leasehold_etcd::{EtcdStats, EtcdStore, KeyFence};
use leasehold_testkit::suite::decimal_value;

/// An etcd key written through a [`KeyFence`].
pub struct FencedKey {
    store: EtcdStore,
    key: Vec<u8>,
}

impl FencedKey {
    /// The key called `name` under `store`'s prefix (`<prefix>fenced/<name>`): the same
    /// prefix and name are the same key in any process. It is created by its first
    /// fenced write.
    pub fn named(store: &EtcdStore, name: &str) -> Self {
        Self {
            store: store.clone(),
            key: format!("{}fenced/{name}", store.config().prefix()).into_bytes(),
        }
    }
}

/// Every request the store sent to etcd, counted in its one send path (every request
/// kind, not only Txns).
fn requests(s: &EtcdStats) -> u64 {
    // `expiry_deletes` are already counted in `txns`.
    s.txns + s.ranges + s.lease_grants + s.keepalives + s.watches
}

#[async_trait]
impl FencedResource for FencedKey {
    async fn write(&self, token: FencingToken, mode: FenceMode, value: i64) -> Result<()> {
        let fence = KeyFence::new(self.key.clone(), token)?.mode(mode);
        let written = self.store.fenced_put(&fence, value.to_string()).await?;
        written
            .or_else(|()| Error::invalid("fenced write", "a key fence has no condition"))
            .map(drop)
    }

    async fn read(&self) -> Option<(FencingToken, i64)> {
        decimal_value(self.store.read_fenced(self.key.clone()).await, "the fenced key")
    }

    fn round_trips(&self) -> u64 {
        requests(&self.store.stats())
    }
}
