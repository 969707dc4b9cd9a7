//! Waiters a test watches: a task acquiring a lease that is held, and waiting until the
//! waiters of a counted store have parked in `wait_for_change`.

use std::time::Duration;

use leasehold_core::store::CasStore;
use leasehold_core::testing::CountingStore;
use leasehold_core::testing::process::poll;
use leasehold_core::{Lease, LeaseClient, Result};
use tokio::task::JoinHandle;

/// A task that acquires `name` for `ttl` through `client`, waiting up to `within` while
/// it is held.
pub fn spawn_acquire(client: LeaseClient, name: &str, ttl: Duration, within: Duration) -> JoinHandle<Result<Lease>> {
    let name = name.to_owned();
    tokio::spawn(async move { client.acquire_timeout(&name, ttl, within).await })
}

/// Waits up to `within` until the callers of `counted` have waited for a change `waits`
/// times.
///
/// # Panics
/// If they have not by then (`what` says who, with the counts).
pub async fn parked<S: CasStore>(counted: &CountingStore<S>, waits: u64, within: Duration, what: &str) {
    assert!(
        poll(within, || counted.counts().waits >= waits).await,
        "{what} never parked: {:?}",
        counted.counts()
    );
}
