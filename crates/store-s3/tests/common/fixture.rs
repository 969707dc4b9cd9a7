//! The store as the shared suites drive it: one [`LeaseBucket`] is the conformance
//! fixture and the frozen holder's world (each resource a [`ManifestResource`] in the
//! same bucket).

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use leasehold_core::conformance::{FencedResource, Fixture};
use leasehold_core::{LeaseName, store::CasStore};
use leasehold_s3::S3Store;
use leasehold_testkit::frozen::World;

use super::fenced::ManifestResource;

/// A lease store on one bucket; every `store()` is a clone of it (the same client).
pub struct LeaseBucket(pub S3Store);

impl LeaseBucket {
    fn shared(&self) -> Arc<dyn CasStore> {
        Arc::new(self.0.clone())
    }
}

#[async_trait]
impl Fixture for LeaseBucket {
    async fn store(&self) -> Arc<dyn CasStore> {
        self.shared()
    }

    async fn corrupt(&self, name: &LeaseName) {
        self.0
            .client()
            .put_object()
            .bucket(self.0.config().bucket())
            .key(self.0.key_for(name))
            .body(ByteStream::from_static(b"\x00not a lease record"))
            .send()
            .await
            .expect("put a corrupt object");
    }
}

#[async_trait]
impl World for LeaseBucket {
    async fn store(&self) -> Arc<dyn CasStore> {
        self.shared()
    }

    /// The manifest `name` in the store's bucket, on the shared moto.
    async fn resource(&self, name: &str) -> Box<dyn FencedResource> {
        Box::new(ManifestResource::named(self.0.config().bucket(), name))
    }
}
