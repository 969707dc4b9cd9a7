//! The S3 resource of the shared fence cases (`tests/conformance.rs`, `mod fence`) and of
//! the frozen-holder case (`tests/frozen_holder.rs`): a manifest written with
//! [`ManifestFence`] beside a store's lease objects, its value the manifest's data (the
//! decimal digits of the value), its high-water mark the manifest's token.

use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use leasehold_core::conformance::FencedResource;
use leasehold_core::fence::{FenceMode, FencedOutcome};
use leasehold_core::{FencingToken, Result};
use leasehold_s3::{Manifest, ManifestFence, S3Store};

use super::SentRequests;

/// How many times one write rebases on a manifest another writer committed (with a token
/// that also passes the fence) before the test gives up.
const MAX_REBASES: u32 = 8;

/// The manifest `fence/<name>/_manifest` in a store's bucket, written with
/// [`ManifestFence`]. Each write is based on the manifest this resource last committed
/// (`None` at first): the same object, base and all, that a writer of the crate's users
/// keeps.
pub struct ManifestResource {
    /// Writes, on a client whose every HTTP request `requests` counts.
    writer: ManifestFence,
    /// Plain reads, on the store's client (not counted).
    reader: ManifestFence,
    requests: SentRequests,
    /// The manifest the last applied write returned: the base of the next one.
    base: Mutex<Option<Manifest>>,
    /// Whether only this resource writes the manifest (a conflict is then a bug, not a
    /// manifest to rebase on).
    sole_writer: bool,
}

impl ManifestResource {
    /// The resource called `name` in `store`'s bucket, through `store`'s endpoint: the same
    /// object for the same bucket and name in every process. Other writers (another
    /// process) may commit to it too: a write whose base another writer replaced, with a
    /// token that also passes the fence, rebases on the manifest that replaced it and
    /// commits again, as [`ManifestFence::commit`] says.
    ///
    /// # Panics
    /// If `name` does not make a valid object key.
    pub fn beside(store: &S3Store, name: &str) -> Self {
        let key = format!("fence/{name}/_manifest");
        let requests = SentRequests::default();
        let counted = store.client().config().to_builder().interceptor(requests.clone());
        let fence = |client| {
            ManifestFence::new(client, store.config().clone(), &key)
                .unwrap_or_else(|e| panic!("manifest key {key}: {e}"))
        };
        Self {
            writer: fence(aws_sdk_s3::Client::from_conf(counted.build())),
            reader: fence(store.client().clone()),
            requests,
            base: Mutex::new(None),
            sole_writer: false,
        }
    }

    /// The same, for a manifest nobody else writes: a commit on the last applied manifest
    /// that conflicts fails the test.
    pub fn sole_writer(mut self) -> Self {
        self.sole_writer = true;
        self
    }

    fn base(&self) -> MutexGuard<'_, Option<Manifest>> {
        self.base.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl FencedResource for ManifestResource {
    async fn write(&self, token: FencingToken, mode: FenceMode, value: i64) -> Result<()> {
        let fence = self.writer.clone().mode(mode);
        let mut base = self.base().clone();
        for _ in 0..=MAX_REBASES {
            match fence.commit(token, base.as_ref(), value.to_string()).await? {
                FencedOutcome::Applied(m) => {
                    *self.base() = Some(m);
                    return Ok(());
                }
                FencedOutcome::ConditionFailed(current) => {
                    assert!(
                        !self.sole_writer,
                        "manifest {}: a commit on the last applied manifest conflicted, with one writer \
                         (base {base:?}, now {current:?})",
                        fence.key()
                    );
                    base = current;
                }
            }
        }
        panic!(
            "manifest {}: {MAX_REBASES} rebased commits in a row conflicted (last base {base:?})",
            fence.key()
        )
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
