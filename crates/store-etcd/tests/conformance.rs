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
/// its decimal bytes. Round trips are the requests the store sent to etcd, counted in its
/// one send path ([`leasehold_etcd::EtcdStats`]: every request kind, not only Txns).
mod fence {
    use leasehold_core::conformance::{FenceFixture, FencedResource};
    use leasehold_core::fence::{FenceMode, FencedOutcome};
    use leasehold_core::{Error, FencingToken, Result};
    use leasehold_etcd::{EtcdStats, KeyFence};

    use super::*;

    struct FencedKey {
        store: EtcdStore,
        key: Vec<u8>,
    }

    fn requests(s: &EtcdStats) -> u64 {
        // `expiry_deletes` are already counted in `txns`.
        s.txns + s.ranges + s.lease_grants + s.keepalives + s.watches
    }

    #[async_trait]
    impl FencedResource for FencedKey {
        async fn write(&self, token: FencingToken, mode: FenceMode, value: i64) -> Result<()> {
            let fence = KeyFence::new(self.key.clone(), token)?.mode(mode);
            match self.store.fenced_put(&fence, value.to_string()).await? {
                FencedOutcome::Applied(_revision) => Ok(()),
                FencedOutcome::ConditionFailed(()) => {
                    Err(Error::invalid("fenced write", "a key fence has no condition"))
                }
            }
        }

        async fn read(&self) -> Option<(FencingToken, i64)> {
            let (mark, bytes) = self
                .store
                .read_fenced(self.key.clone())
                .await
                .unwrap_or_else(|e| panic!("read the fenced key: {e}"))?;
            let value = std::str::from_utf8(&bytes)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or_else(|| panic!("the fenced key holds {bytes:?}, not an integer"));
            Some((mark, value))
        }

        fn round_trips(&self) -> u64 {
            requests(&self.store.stats())
        }
    }

    struct FencedKeys(EtcdStore);

    #[async_trait]
    impl FenceFixture for FencedKeys {
        async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
            // The store's prefix is unique to this test and run: the key was never written.
            let key = format!("{}fenced/{case}", self.0.config().prefix()).into_bytes();
            Box::new(FencedKey {
                store: self.0.clone(),
                key,
            })
        }
    }

    leasehold_core::conformance::fence_tests!(FencedKeys(common::store("fence").await));
}
