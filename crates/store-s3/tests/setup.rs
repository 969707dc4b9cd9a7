//! Setup verbs, the same on every store: `provision` creates the bucket (idempotently)
//! and checks it, `verify` checks it, against the real S3-compatible server (moto).
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::{Error, LeaseClient};
use leasehold_s3::{S3Config, S3Store, local_client};

#[tokio::test]
async fn provision_creates_the_bucket_once_and_verify_checks_it() {
    let client = local_client(&common::endpoint());
    let bucket = common::unique_bucket("setup");
    let config = S3Config::new(&bucket, "leases").expect("config");
    let before = S3Store::new(client.clone(), config.clone()).verify().await;
    assert!(
        matches!(before, Err(Error::NotProvisioned { .. })),
        "no bucket yet: {before:?}"
    );

    S3Store::provision(&client, &config).await.expect("provision");
    S3Store::provision(&client, &config).await.expect("provision again");
    let store = S3Store::new(client, config);
    store.verify().await.expect("verify");
    let lease = LeaseClient::new(store)
        .acquire("setup", Duration::from_secs(5))
        .await
        .expect("a lease on the provisioned bucket");
    lease.release().await.expect("release");
}
