//! The leasehold-core conformance suite against a real S3-compatible server: moto, path-style,
//! dummy credentials, one bucket per test.
//!
//! It runs on this binary's own moto (port 55202) whose requests are serialized (see
//! `common::serialized_moto`): the shared threaded moto checks `If-Match` and stores the
//! object in two steps without a lock, so two racing compare-and-swaps on one ETag can
//! both win there (6 of 40 runs of `concurrent_cas_increments_are_exact` lost an
//! increment on it). S3 applies conditional writes atomically; the emulator must too for
//! the suite to test the store rather than the emulator.
//!
//! `mod fence` runs the fence cases on [`leasehold_s3::ManifestFence`] (the manifest
//! resource `common::fenced::ManifestResource`, which `tests/frozen_holder.rs` uses too),
//! one fresh manifest key per case in one bucket on the shared moto (one writer per
//! manifest, so moto's unlocked conditional PUT cannot race), counting real HTTP requests.
#![allow(missing_docs)]

mod common;

use async_trait::async_trait;
use common::fixture::LeaseBucket;
use leasehold_s3::{S3Config, S3Store};

/// This binary's serialized moto.
const CONFORMANCE_MOTO_PORT: u16 = 55202;

/// A fresh bucket on this binary's serialized moto, with a lease store in it.
async fn fixture() -> LeaseBucket {
    let client = leasehold_s3::local_client(&common::serialized_moto(CONFORMANCE_MOTO_PORT));
    let bucket = common::unique_bucket("conf");
    common::create_bucket(&client, &bucket).await;
    let config = S3Config::new(bucket, "leases").expect("config");
    LeaseBucket(S3Store::new(client, config))
}

leasehold_core::conformance::conformance_tests!(fixture().await);

/// The fence contract on S3: the resource is a manifest object ([`common::fenced`]), its
/// value the manifest's data (the decimal digits of the value), its high-water mark the
/// manifest's token.
mod fence {
    use leasehold_core::conformance::{FenceFixture, FencedResource};
    use tokio::sync::OnceCell;

    use super::*;
    use crate::common::fenced::ManifestResource;

    /// The one bucket of the fence cases on the shared moto, created on first use.
    async fn bucket() -> &'static str {
        static BUCKET: OnceCell<String> = OnceCell::const_new();
        BUCKET
            .get_or_init(|| async {
                let bucket = common::unique_bucket("fence");
                common::create_bucket(&leasehold_s3::local_client(&common::endpoint()), &bucket).await;
                bucket
            })
            .await
    }

    struct ManifestFixture;

    #[async_trait]
    impl FenceFixture for ManifestFixture {
        async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
            let name = format!("{case}-{}", leasehold_testkit::unique_suffix());
            Box::new(ManifestResource::named(bucket().await, &name).sole_writer())
        }
    }

    leasehold_core::conformance::fence_tests!(ManifestFixture);
}
