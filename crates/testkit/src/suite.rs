//! One store as the shared suites drive it: a store crate's [`Backend`] (how its tests
//! open a store on a place of their own, protect a resource with the store's own fence
//! and corrupt a record) makes [`Suite`], the conformance fixture, the fence fixture and
//! the frozen holder's world at once, and [`TwoStores`], the wake-up fixture.
//!
//! A store crate's `tests/conformance.rs` runs them all with
//! [`suite_tests!`](crate::suite_tests); its frozen-holder test gives [`Suite`] to
//! [`frozen::main`](crate::frozen::main).

use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::{FenceFixture, FencedResource, Fixture, WakeFixture};
use leasehold_core::store::CasStore;
use leasehold_core::{FencingToken, LeaseName, Result};

use crate::frozen::World;

/// A store crate's part of the shared suites. Implemented by a type of the crate's tests
/// (a marker: every method is an associated function).
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The store under test.
    type Store: CasStore + Clone + 'static;

    /// A place for records (a key prefix, a directory, a bucket, a table) that no other
    /// test or run uses, named after `tag`. By default `lh-<tag>-<unique suffix>`
    /// ([`unique_suffix`](crate::unique_suffix)): for a `tag` of lowercase letters,
    /// digits and `-`, a valid bucket, table or key prefix name.
    fn unique_place(tag: &str) -> String {
        format!("lh-{tag}-{}", crate::unique_suffix())
    }

    /// A store on `place`: every store opened on the same place, in any process, reads
    /// and writes the same records.
    async fn open(place: &str) -> Self::Store;

    /// The protected resource called `name` beside `store`'s records, written through the
    /// store's own fence: the same one for every store on the same place (created by its
    /// first fenced write).
    fn resource(store: &Self::Store, name: &str) -> Box<dyn FencedResource>;

    /// [`Backend::resource`] for a fence case: a resource nobody but the returned value
    /// ever writes, so a backend may check that no other writer came between its writes.
    /// By default, [`Backend::resource`].
    fn sole_resource(store: &Self::Store, name: &str) -> Box<dyn FencedResource> {
        Self::resource(store, name)
    }

    /// Writes something that is no lease record where `store` keeps the record of `name`.
    async fn corrupt(store: &Self::Store, name: &LeaseName);
}

/// One store of `B` as the conformance fixture, the fence fixture (each resource
/// [`Backend::resource`], on a place no other test uses) and the frozen holder's world;
/// every `store()` is a clone of it.
pub struct Suite<B: Backend>(pub B::Store);

impl<B: Backend> Suite<B> {
    /// A store of `B` on a place of its own, named after `tag`.
    pub async fn fresh(tag: &str) -> Self {
        Self(B::open(&B::unique_place(tag)).await)
    }

    fn shared(&self) -> Arc<dyn CasStore> {
        Arc::new(self.0.clone())
    }
}

#[async_trait]
impl<B: Backend> Fixture for Suite<B> {
    async fn store(&self) -> Arc<dyn CasStore> {
        self.shared()
    }

    async fn corrupt(&self, name: &LeaseName) {
        B::corrupt(&self.0, name).await;
    }
}

#[async_trait]
impl<B: Backend> FenceFixture for Suite<B> {
    async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
        // The store's place is unique to this test and run: the resource was never written,
        // and only this case writes it.
        B::sole_resource(&self.0, case)
    }
}

#[async_trait]
impl<B: Backend> World for Suite<B> {
    async fn store(&self) -> Arc<dyn CasStore> {
        self.shared()
    }

    async fn resource(&self, name: &str) -> Box<dyn FencedResource> {
        B::resource(&self.0, name)
    }
}

/// The wake-up fixture of `B`: the holder's store and the waiters' store are two stores
/// (two clients, two sets of watches) opened on the same place, as two processes are.
pub struct TwoStores<B>(PhantomData<fn() -> B>);

impl<B: Backend> TwoStores<B> {
    /// The fixture.
    #[must_use]
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<B: Backend> Default for TwoStores<B> {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl<B: Backend> WakeFixture for TwoStores<B> {
    async fn stores(&self, tag: &str) -> (Arc<dyn CasStore>, Arc<dyn CasStore>) {
        let place = B::unique_place(tag);
        let holder = B::open(&place).await;
        let waiters = B::open(&place).await;
        (Arc::new(holder), Arc::new(waiters))
    }
}

/// A fenced resource's value as a store's own fenced read gives it (`what` names the
/// resource in the panic messages): its fence mark, and its bytes read as the decimal
/// digits of an integer. `None` if it was never written.
///
/// # Panics
/// If the read failed, or the bytes are not an integer.
pub fn decimal_value(read: Result<Option<(FencingToken, Vec<u8>)>>, what: &str) -> Option<(FencingToken, i64)> {
    let (mark, bytes) = read.unwrap_or_else(|e| panic!("read {what}: {e}"))?;
    let value = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_else(|| panic!("{what} holds {bytes:?}, not an integer"));
    Some((mark, value))
}

/// The shared suites on the [`Backend`] `$backend` (a type path), each case on stores of
/// a place of its own (one `#[tokio::test]` each, named as in
/// `leasehold_core::conformance`): every conformance case at the top level
/// (`conformance`), the fence cases in `mod fence` (`fence`) and the wake-up cases in
/// `mod wake` (`wake`, for a store that pushes its changes to waiters). Without a list of
/// sections, all three.
///
/// ```text
/// leasehold_testkit::suite_tests!(common::fixture::MyStore);
/// leasehold_testkit::suite_tests!(common::fixture::MyPollingStore; conformance, fence);
/// ```
#[macro_export]
macro_rules! suite_tests {
    (@conformance) => {
        ::leasehold_core::conformance::conformance_tests!(
            $crate::suite::Suite::<SuiteBackend>::fresh("conformance").await
        );
    };
    (@fence) => {
        /// The fence cases: each resource is a fresh one of the backend's, never written.
        mod fence {
            ::leasehold_core::conformance::fence_tests!(
                $crate::suite::Suite::<super::SuiteBackend>::fresh("fence").await
            );
        }
    };
    (@wake) => {
        /// The wake-up cases: the holder's store and the waiters' store are two stores on
        /// the same place, as two processes are.
        mod wake {
            ::leasehold_core::conformance::wake_tests!($crate::suite::TwoStores::<super::SuiteBackend>::new());
        }
    };
    ($backend:ty) => {
        $crate::suite_tests!($backend; conformance, fence, wake);
    };
    ($backend:ty; $($section:ident),+ $(,)?) => {
        /// The store crate's part of the suites.
        type SuiteBackend = $backend;

        $($crate::suite_tests!(@$section);)+
    };
}
