//! Leases a test holds by the dozen: granted one after the other, counted through a
//! renewal round (the renewals of a store that batches them), checked and released.

use std::time::Duration;

use leasehold_core::store::CasStore;
use leasehold_core::testing::{CountingStore, renewed};
use leasehold_core::{Lease, LeaseClient};

/// How long one renewal round of [`renewal_calls`] may take.
const ROUND_WITHIN: Duration = Duration::from_secs(5);

/// The `n` leases `<prefix>/0` … `<prefix>/<n-1>` of `ttl`, each acquired through `client`
/// (waiting while it is held), in order.
///
/// # Panics
/// If an acquire fails.
pub async fn acquired_all(client: &LeaseClient, prefix: &str, n: usize, ttl: Duration) -> Vec<Lease> {
    let mut leases = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("{prefix}/{i}");
        leases.push(
            client
                .acquire(&name, ttl)
                .await
                .unwrap_or_else(|e| panic!("acquire {name}: {e}")),
        );
    }
    leases
}

/// How many renewal calls (`renew` and `renew_many`) `counting` sees while every one of
/// `leases` (held through it) is renewed `rounds` times: its counts are reset first.
///
/// # Panics
/// If some lease is not renewed `rounds` times within 5 s.
pub async fn renewal_calls<S: CasStore>(counting: &CountingStore<S>, leases: &[Lease], rounds: u32) -> u64 {
    counting.reset();
    assert!(
        renewed(leases, rounds, ROUND_WITHIN).await,
        "not every lease was renewed {rounds} time(s) within {ROUND_WITHIN:?}"
    );
    counting.counts().renews
}

/// Checks that none of `leases` was lost, then releases each.
///
/// # Panics
/// If one was lost, or a release fails.
pub async fn release_unlost(leases: Vec<Lease>) {
    for l in &leases {
        assert!(l.loss_cause().is_none(), "{} was lost: {:?}", l.name(), l.loss_cause());
    }
    for l in leases {
        let name = l.name().clone();
        l.release().await.unwrap_or_else(|e| panic!("release {name}: {e}"));
    }
}
