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
