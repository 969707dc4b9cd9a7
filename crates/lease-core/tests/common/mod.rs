//! What the in-process tests share.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use leasehold_core::testing::{FaultPlan, FaultStore};
use leasehold_core::{LeaseClient, MemoryStore};

/// An in-process store, the same store behind a [`FaultStore`] (seeded with `seed`) that
/// delays every call by `delay` and injects nothing else, and a client on the slow one.
pub fn slowed(seed: u64, delay: Duration) -> (MemoryStore, FaultStore<MemoryStore>, LeaseClient) {
    let mem = MemoryStore::new();
    let slow = FaultStore::new(mem.clone(), seed);
    slow.set_plan(FaultPlan {
        delay: Some(delay),
        ..FaultPlan::none()
    });
    let client = LeaseClient::new(slow.clone());
    (mem, slow, client)
}
