//! Waiting on S3, which cannot push a release: a waiter looks again every
//! [`S3Config::with_poll_interval`](leasehold_s3::S3Config::with_poll_interval), so it
//! sees a release within one interval ([`leasehold_testkit::polling`]).
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_s3::{S3Config, S3Store};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_sees_a_release_within_its_poll_interval() {
    let interval = Duration::from_millis(300);
    let client = leasehold_s3::local_client(&common::endpoint());
    let bucket = common::unique_bucket("polling");
    common::create_bucket(&client, &bucket).await;
    let config = S3Config::new(bucket, "leases")
        .expect("config")
        .with_poll_interval(interval)
        .expect("poll interval");
    let holder = S3Store::new(client, config.clone());
    let waiter = S3Store::new(leasehold_s3::local_client(&common::endpoint()), config);
    let name = format!("polling/release-{}", leasehold_testkit::unique_suffix());
    leasehold_testkit::polling::a_waiter_sees_a_release_within_its_poll_interval(holder, waiter, &name, interval).await;
}

#[test]
fn a_zero_poll_interval_is_refused() {
    let err = S3Config::new("leases", "p")
        .expect("config")
        .with_poll_interval(Duration::ZERO)
        .unwrap_err();
    assert!(matches!(err, leasehold_core::Error::InvalidInput { .. }), "{err:?}");
}
