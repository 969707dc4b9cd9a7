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
//! `mod fence` runs the fence cases on [`leasehold_s3::ManifestFence`], one fresh
//! manifest key per case in one bucket on the shared moto (one writer per manifest, so
//! moto's unlocked conditional PUT cannot race), counting real HTTP requests.
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

/// The fence contract on S3: the resource is a manifest object, its value the manifest's
/// data (the decimal digits of the value), its high-water mark the manifest's token.
mod fence {
    use std::sync::Mutex;

    use leasehold_core::conformance::{FenceFixture, FencedResource};
    use leasehold_core::fence::{FenceMode, FencedOutcome};
    use leasehold_core::{FencingToken, Result};
    use leasehold_s3::{Manifest, ManifestFence};
    use tokio::sync::OnceCell;

    use super::*;
    use crate::common::{RequestCounter, client_with};

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

    struct ManifestResource {
        /// Writes, on a client whose every HTTP request `requests` counts.
        writer: ManifestFence,
        /// Plain reads, on a client of their own (not counted).
        reader: ManifestFence,
        requests: RequestCounter,
        /// The manifest the last applied write returned: the base of the next one.
        base: Mutex<Option<Manifest>>,
    }

    impl ManifestResource {
        fn base(&self) -> std::sync::MutexGuard<'_, Option<Manifest>> {
            self.base.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
        }
    }

    #[async_trait]
    impl FencedResource for ManifestResource {
        async fn write(&self, token: FencingToken, mode: FenceMode, value: i64) -> Result<()> {
            let base = self.base().clone();
            let fence = self.writer.clone().mode(mode);
            match fence.commit(token, base.as_ref(), value.to_string()).await? {
                FencedOutcome::Applied(m) => {
                    *self.base() = Some(m);
                    Ok(())
                }
                FencedOutcome::ConditionFailed(current) => panic!(
                    "manifest {}: a commit on the last applied manifest conflicted, with one writer \
                     (base {base:?}, now {current:?})",
                    fence.key()
                ),
            }
        }

        async fn read(&self) -> Option<(FencingToken, i64)> {
            let key = self.reader.key();
            let m = self
                .reader
                .read()
                .await
                .unwrap_or_else(|e| panic!("reading manifest {key}: {e}"))?;
            let value = std::str::from_utf8(&m.data)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("manifest {key} holds {:?}, not an integer", m.data));
            Some((m.token, value))
        }

        fn round_trips(&self) -> u64 {
            self.requests.total()
        }
    }

    struct ManifestFixture;

    #[async_trait]
    impl FenceFixture for ManifestFixture {
        async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
            let bucket = bucket().await;
            let endpoint = common::endpoint();
            let key = format!("fence/{case}-{}/_manifest", leasehold_testkit::unique_suffix());
            let config = S3Config::new(bucket, "leases").expect("config");
            let requests = RequestCounter::default();
            let writer = ManifestFence::new(
                client_with(&endpoint, Some(requests.clone()), None),
                config.clone(),
                &key,
            )
            .expect("manifest key");
            let reader = ManifestFence::new(leasehold_s3::local_client(&endpoint), config, &key).expect("manifest key");
            Box::new(ManifestResource {
                writer,
                reader,
                requests,
                base: Mutex::new(None),
            })
        }
    }

    leasehold_core::conformance::fence_tests!(ManifestFixture);
}
