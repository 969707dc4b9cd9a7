//! The leasehold-core conformance suite against a real S3-compatible server: moto, path-style,
//! dummy credentials, one bucket per test.
//!
//! It runs on this binary's own moto (port 55202) whose requests are serialized (see
//! `common::serialized_moto`): the shared threaded moto checks `If-Match` and stores the
//! object in two steps without a lock, so two racing compare-and-swaps on one ETag can
//! both win there (6 of 40 runs of `concurrent_cas_increments_are_exact` lost an
//! increment on it). S3 applies conditional writes atomically; the emulator must too for
//! the suite to test the store rather than the emulator.
#![allow(missing_docs)]

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use leasehold_core::conformance::Fixture;
use leasehold_core::{LeaseName, store::CasStore};
use leasehold_s3::{S3Config, S3Store};

/// This binary's serialized moto.
const CONFORMANCE_MOTO_PORT: u16 = 55202;

struct S3Fixture {
    store: S3Store,
}

impl S3Fixture {
    async fn new() -> Self {
        let client = leasehold_s3::local_client(&common::serialized_moto(CONFORMANCE_MOTO_PORT));
        let bucket = common::unique_bucket("conf");
        common::create_bucket(&client, &bucket).await;
        let config = S3Config::new(bucket, "leases").expect("config");
        Self {
            store: S3Store::new(client, config),
        }
    }
}

#[async_trait]
impl Fixture for S3Fixture {
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.store.clone())
    }

    async fn corrupt(&self, name: &LeaseName) {
        self.store
            .client()
            .put_object()
            .bucket(self.store.config().bucket())
            .key(self.store.key_for(name))
            .body(ByteStream::from_static(b"\x00not a lease record"))
            .send()
            .await
            .expect("put a corrupt object");
    }
}

leasehold_core::conformance::conformance_tests!(S3Fixture::new().await);
