//! An endpoint that accepts connections and never answers: an acquire sends its
//! `UpdateItem`, gets no answer, and its `GetItem` gets none either. It is "may have
//! applied" (`Indeterminate`), never "did not apply" (before: `Unavailable` after 4 s),
//! and each request ends at the store's own request timeout, whatever the client's.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::Error;
use leasehold_core::store::CasStore;
use leasehold_dynamodb::{DynamoConfig, DynamoStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_against_a_silent_endpoint_is_in_doubt() {
    let endpoint = leasehold_testkit::endpoints::silent_server().await;
    let config = DynamoConfig::new("leasehold-silent").expect("config");
    let store = DynamoStore::new(common::client_for(&endpoint, None), config);
    // Two requests, each bounded by the store's default 3 s request timeout.
    leasehold_testkit::endpoints::assert_acquire_is_in_doubt(store, Duration::from_secs(7)).await;
}

/// The store's request timeout bounds its requests below the client's own timeouts
/// (the tests' client allows 3 s per request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_request_timeout_bounds_each_request() {
    let endpoint = leasehold_testkit::endpoints::silent_server().await;
    assert!(
        DynamoConfig::new("leasehold-silent")
            .expect("config")
            .with_request_timeout(Duration::ZERO)
            .is_err()
    );
    let config = DynamoConfig::new("leasehold-silent")
        .expect("config")
        .with_request_timeout(Duration::from_millis(300))
        .expect("timeout");
    let store = DynamoStore::new(common::client_for(&endpoint, None), config);
    let started = tokio::time::Instant::now();
    let name = leasehold_core::LeaseName::new("silent/read").expect("name");
    assert!(matches!(store.read(&name).await, Err(Error::Unavailable { .. })));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "a read took {took:?}");
    leasehold_testkit::endpoints::assert_acquire_is_in_doubt(store, Duration::from_secs(2)).await;
}

/// An endpoint that answers slowly, then not at all (the shared case,
/// `leasehold_testkit::endpoints::slow_then_silent`, against moto behind a proxy): each
/// request ends at the store's request timeout, a write as "may have applied", a read
/// as `Unavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_silent_endpoint_ends_each_request_at_the_request_timeout() {
    const BOUND: Duration = Duration::from_millis(300);
    let (admin, table) = common::fresh_lease_table("slow").await;
    let direct = DynamoStore::new(admin, DynamoConfig::new(&table).expect("config"));
    let serial = common::serial::serialized(&common::endpoint());
    let proxy = leasehold_testkit::proxy::Proxy::start(serial.trim_start_matches("http://")).await;
    let config = DynamoConfig::new(&table)
        .and_then(|c| c.with_request_timeout(BOUND))
        .expect("config");
    let store = DynamoStore::new(common::client_for(&proxy.endpoint(), None), config);
    leasehold_testkit::endpoints::slow_then_silent(store, direct, &proxy, BOUND).await;
}
