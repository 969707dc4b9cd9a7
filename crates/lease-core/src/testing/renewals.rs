//! Waiting for the renewal driver: a deadline, never a guessed sleep.

use std::time::Duration;

use crate::Lease;
use crate::testing::process::poll;

/// Waits until every lease in `leases` was renewed `rounds` times since this call (its
/// validity moved past where `rounds - 1` renewals could take it: more than
/// `rounds - 1` TTLs beyond where it stood), within `timeout`. False at the deadline.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{LeaseClient, MemoryStore, testing::renewed};
/// let client = LeaseClient::new(MemoryStore::new());
/// let leases = vec![client.acquire("a", Duration::from_millis(300)).await?];
/// assert!(renewed(&leases, 1, Duration::from_secs(5)).await);
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
pub async fn renewed(leases: &[Lease], rounds: u32, timeout: Duration) -> bool {
    let from: Vec<_> = leases
        .iter()
        .map(|l| l.valid_until() + l.ttl() * rounds.saturating_sub(1))
        .collect();
    poll(timeout, || leases.iter().zip(&from).all(|(l, f)| l.valid_until() > *f)).await
}
