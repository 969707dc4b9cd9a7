//! Waiting on DynamoDB, which cannot push a release: a waiter looks again every
//! [`DynamoConfig::with_poll_interval`](leasehold_dynamodb::DynamoConfig::with_poll_interval),
//! so it sees a release within one interval ([`leasehold_testkit::polling`]).
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_dynamodb::{DynamoConfig, DynamoStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_sees_a_release_within_its_poll_interval() {
    let interval = Duration::from_millis(300);
    let (admin, table) = common::fresh_lease_table("polling").await;
    let config = DynamoConfig::new(&table)
        .expect("config")
        .with_poll_interval(interval)
        .expect("poll interval");
    let holder = DynamoStore::new(admin, config.clone());
    let waiter = DynamoStore::new(common::client(None), config);
    let name = common::unique_name("polling", "release");
    leasehold_testkit::polling::a_waiter_sees_a_release_within_its_poll_interval(holder, waiter, &name, interval).await;
}

#[test]
fn a_zero_poll_interval_is_refused() {
    let err = DynamoConfig::new("leases")
        .expect("config")
        .with_poll_interval(Duration::ZERO)
        .unwrap_err();
    assert!(matches!(err, leasehold_core::Error::InvalidInput { .. }), "{err:?}");
}
