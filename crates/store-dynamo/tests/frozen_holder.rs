//! The frozen-holder test with real processes (rule 4 of docs/DESIGN.md): the shared
//! case every store runs ([`leasehold_testkit::frozen`]), on a lease table of its own
//! and items of a resource table written through [`ItemFence`](leasehold_dynamodb::ItemFence)
//! ([`common::item::FencedItem`]).
//!
//! Both processes build the same world from the run's name and the environment: the
//! tables are named after the run and made idempotently by whichever process comes
//! first. The store expires by observation, so the takeover comes a TTL plus the margin
//! after the holder froze, well within the case's acquire deadline.
#![allow(missing_docs)]

mod common;

use std::process::ExitCode;
use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::FencedResource;
use leasehold_core::store::CasStore;
use leasehold_dynamodb::DynamoStore;
use leasehold_testkit::frozen::World;

use crate::common::item::{FencedItem, Via};

struct Dynamo {
    store: DynamoStore,
    resources: String,
}

/// The world of the run `run`: its lease table and its resource table, created if
/// missing, on the moto server of the environment.
async fn open(run: String) -> Dynamo {
    let client = common::client(None);
    let store = common::lease_store(client.clone(), &format!("leasehold-dynamo-frozen-leases-{run}")).await;
    let resources = format!("leasehold-dynamo-frozen-items-{run}");
    common::ensure_resource_table(&client, &resources).await;
    Dynamo { store, resources }
}

#[async_trait]
impl World for Dynamo {
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.store.clone())
    }

    async fn resource(&self, name: &str) -> Box<dyn FencedResource> {
        Box::new(FencedItem::new(&self.resources, name, Via::Update))
    }
}

fn main() -> ExitCode {
    leasehold_testkit::frozen::main(|run| open(run.to_owned()))
}
