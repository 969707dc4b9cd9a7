//! The renewal driver sends the renewals that come due together in one request on a
//! store that batches them ([`CasStore::renew_many`]): fifty leases of one client cost a
//! few requests per renewal round, not fifty, and each lease stays valid from when its
//! own renewal was sent.
#![allow(missing_docs)]

use std::time::Duration;

use leasehold_core::store::CasStore;
use leasehold_core::testing::CountingStore;
use leasehold_core::testing::renewed;
use leasehold_core::{LeaseClient, MemoryStore};

const LEASES: usize = 50;
const TTL: Duration = Duration::from_millis(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_leases_renew_in_a_few_requests_per_round() {
    let store = CountingStore::new(MemoryStore::new());
    assert!(store.renewal_batch() >= LEASES, "the memory store batches renewals");
    let client = LeaseClient::new(store.clone());
    let mut leases = Vec::new();
    for i in 0..LEASES {
        leases.push(client.acquire(&format!("batched/{i}"), TTL).await.expect("acquire"));
    }
    store.reset();
    // Two rounds: every lease renewed at least twice (its validity moved past a second
    // renewal's reach: more than a TTL beyond the grant's).
    assert!(
        renewed(&leases, 2, Duration::from_secs(5)).await,
        "not every lease was renewed twice within 5 s"
    );
    let renews = store.counts().renews;
    println!("{LEASES} leases, two renewal rounds: {renews} renewal requests");
    assert!(
        renews <= 8,
        "{renews} renewal requests for two rounds of {LEASES} leases (one each: {})",
        2 * LEASES
    );
    for l in &leases {
        assert!(l.loss_cause().is_none(), "a lease was lost: {:?}", l.loss_cause());
    }
}

/// On a store that does not batch, each lease keeps a request of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_batch_keeps_one_request_per_renewal() {
    // A wrapper that does not forward `renew_many` / `renewal_batch`: the defaults.
    let store = CountingStore::new(leasehold_core::testing::FaultStore::new(MemoryStore::new(), 1));
    assert_eq!(store.renewal_batch(), 1);
    let client = LeaseClient::new(store.clone());
    let mut leases = Vec::new();
    for i in 0..5 {
        leases.push(client.acquire(&format!("unbatched/{i}"), TTL).await.expect("acquire"));
    }
    store.reset();
    assert!(
        renewed(&leases, 1, Duration::from_secs(5)).await,
        "not every lease was renewed within 5 s"
    );
    assert!(store.counts().renews >= 5, "{:?}", store.counts());
}
