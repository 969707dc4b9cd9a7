//! The conformance suite on `MemoryStore`, in each of the behaviours it can copy.
#![cfg(feature = "conformance")]
#![allow(missing_docs)]

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::Fixture;
use leasehold_core::{LeaseName, MemoryStore, store::CasStore};

struct Mem(MemoryStore);

#[async_trait]
impl Fixture for Mem {
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.0.clone())
    }
    async fn corrupt(&self, name: &LeaseName) {
        self.0.put_raw(name, b"\x00not a lease record".to_vec());
    }
}

/// Store clock (like SQL, Redis, etcd), conflicts report the current record.
mod store_clock {
    use super::*;
    leasehold_core::conformance::conformance_tests!(Mem(MemoryStore::new()));
}

/// No clock (like S3, DynamoDB): expiry by observation.
mod observation {
    use super::*;
    leasehold_core::conformance::conformance_tests!(Mem(MemoryStore::observation()));
}

/// Conflicts do not carry the current record: the client must read.
mod no_current_on_conflict {
    use super::*;
    leasehold_core::conformance::conformance_tests!(Mem(MemoryStore::observation().without_current_on_conflict()));
}

/// The fence contract on an in-process resource: the reference the store crates' fences
/// are held to (a mutex stands for the store's atomic guarded write).
mod fence {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    use leasehold_core::conformance::{FenceFixture, FencedResource};
    use leasehold_core::fence::{FenceMode, rejected};
    use leasehold_core::{FencingToken, Result};

    use super::*;

    #[derive(Default)]
    struct Cell {
        state: Mutex<Option<(FencingToken, i64)>>,
        calls: AtomicU64,
    }

    #[async_trait]
    impl FencedResource for Cell {
        async fn write(&self, token: FencingToken, mode: FenceMode, value: i64) -> Result<()> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let mark = state.map_or(FencingToken::ZERO, |(m, _)| m);
            if !mode.admits(mark, token) {
                return Err(rejected(token));
            }
            *state = Some((token, value));
            Ok(())
        }
        async fn read(&self) -> Option<(FencingToken, i64)> {
            *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
        }
        fn round_trips(&self) -> u64 {
            self.calls.load(Ordering::Relaxed)
        }
    }

    struct Cells;

    #[async_trait]
    impl FenceFixture for Cells {
        async fn resource(&self, _case: &str) -> Box<dyn FencedResource> {
            Box::new(Cell::default())
        }
    }

    leasehold_core::conformance::fence_tests!(Cells);
}

/// One release wakes one acquirer (and every observer), on the in-process store's wake-up hub.
mod wake {
    use leasehold_core::conformance::WakeFixture;

    use super::*;

    struct Shared;

    #[async_trait]
    impl WakeFixture for Shared {
        async fn stores(&self, _tag: &str) -> (Arc<dyn CasStore>, Arc<dyn CasStore>) {
            let store = MemoryStore::new();
            (Arc::new(store.clone()), Arc::new(store))
        }
    }

    leasehold_core::conformance::wake_tests!(Shared);
}
