//! This crate's part of the shared suites ([`leasehold_testkit::suite`]): [`S3`] opens
//! stores on buckets of this binary's serialized moto, protects [`ManifestResource`]s in
//! the store's bucket and corrupts a record with a plain `PutObject`; `Suite::<S3>` is
//! the conformance fixture, the fence fixture and the frozen holder's world.

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use leasehold_core::LeaseName;
use leasehold_core::conformance::FencedResource;
use leasehold_s3::S3Store;
use leasehold_testkit::suite::Backend;

use super::fenced::ManifestResource;

/// The port of this binary's serialized moto (see [`super::serialized_moto`]), on which
/// [`S3`] opens its stores.
pub const SUITE_MOTO_PORT: u16 = 55202;

/// The S3 store in the shared suites: a place is a bucket (named as
/// [`Backend::unique_place`] names it by default) on this binary's serialized moto
/// ([`SUITE_MOTO_PORT`]), the same for every store opened in this process. (The
/// frozen holder's two processes share the store the test builds on the shared moto:
/// `tests/frozen_holder.rs`.)
pub enum S3 {}

#[async_trait]
impl Backend for S3 {
    type Store = S3Store;

    async fn open(bucket: &str) -> S3Store {
        super::store_in(&super::serialized_moto(SUITE_MOTO_PORT), bucket).await
    }

    /// The manifest `fence/<name>/_manifest` in the store's bucket (created by its first
    /// commit).
    fn resource(store: &S3Store, name: &str) -> Box<dyn FencedResource> {
        Box::new(ManifestResource::beside(store, name))
    }

    /// The same manifest, on which a commit that conflicts fails the test: only this
    /// value writes it.
    fn sole_resource(store: &S3Store, name: &str) -> Box<dyn FencedResource> {
        Box::new(ManifestResource::beside(store, name).sole_writer())
    }

    async fn corrupt(store: &S3Store, name: &LeaseName) {
        store
            .client()
            .put_object()
            .bucket(store.config().bucket())
            .key(store.key_for(name))
            .body(ByteStream::from_static(b"\x00not a lease record"))
            .send()
            .await
            .expect("put a corrupt object");
    }
}
