//! A store wrapper that counts calls (each store call is one round trip).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use crate::{
    LeaseName, NamePrefix, Result,
    store::{
        Capabilities, CasOutcome, CasStore, DeleteOutcome, ExpireOutcome, LeaseRecord, Precondition, Renewal, Stored,
        Version, Wait,
    },
};

/// Calls made through a [`CountingStore`], by method.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    /// `read` calls.
    pub reads: u64,
    /// `write` calls, and `release` calls (a release is a conditional write).
    pub writes: u64,
    /// `renew` calls, and `renew_many` calls (one request each, however many leases
    /// it renews).
    pub renews: u64,
    /// `delete`, `purge` and `expire` calls.
    pub deletes: u64,
    /// Leases renewed: one per `renew` call, the batch's size per `renew_many` call.
    pub renewals: u64,
    /// `wait_for_change` calls.
    pub waits: u64,
}

impl CallCounts {
    /// Round trips: every call but waits.
    pub fn round_trips(&self) -> u64 {
        self.reads + self.writes + self.renews + self.deletes
    }
}

#[derive(Debug, Default)]
struct Counters {
    reads: AtomicU64,
    writes: AtomicU64,
    renews: AtomicU64,
    deletes: AtomicU64,
    renewals: AtomicU64,
    waits: AtomicU64,
}

/// Wraps a store and counts its calls.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use leasehold_core::{LeaseClient, MemoryStore, testing::CountingStore};
/// let store = CountingStore::new(MemoryStore::new());
/// let client = LeaseClient::new(store.clone());
/// let lease = client.acquire("a", Duration::from_secs(5)).await?;
/// assert_eq!(store.counts().round_trips(), 1);
/// lease.release().await?;
/// assert_eq!(store.counts().writes, 2);
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct CountingStore<S> {
    inner: S,
    counters: Arc<Counters>,
}

impl<S: CasStore> CountingStore<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            counters: Arc::default(),
        }
    }

    /// The counts so far.
    pub fn counts(&self) -> CallCounts {
        let c = &self.counters;
        CallCounts {
            reads: c.reads.load(Ordering::SeqCst),
            writes: c.writes.load(Ordering::SeqCst),
            renews: c.renews.load(Ordering::SeqCst),
            deletes: c.deletes.load(Ordering::SeqCst),
            renewals: c.renewals.load(Ordering::SeqCst),
            waits: c.waits.load(Ordering::SeqCst),
        }
    }

    /// Sets every count back to zero.
    pub fn reset(&self) {
        let c = &self.counters;
        for a in [&c.reads, &c.writes, &c.renews, &c.deletes, &c.renewals, &c.waits] {
            a.store(0, Ordering::SeqCst);
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

#[async_trait]
impl<S: CasStore> CasStore for CountingStore<S> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        self.counters.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read(name).await
    }
    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        self.counters.writes.fetch_add(1, Ordering::SeqCst);
        self.inner.write(name, expect, record).await
    }
    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        self.counters.deletes.fetch_add(1, Ordering::SeqCst);
        self.inner.delete(name, version).await
    }
    async fn purge(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        self.counters.deletes.fetch_add(1, Ordering::SeqCst);
        self.inner.purge(name, version).await
    }
    async fn expire(&self, name: &LeaseName, version: &Version, after: Duration) -> Result<ExpireOutcome> {
        self.counters.deletes.fetch_add(1, Ordering::SeqCst);
        self.inner.expire(name, version, after).await
    }
    async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> Result<CasOutcome> {
        self.counters.renews.fetch_add(1, Ordering::SeqCst);
        self.counters.renewals.fetch_add(1, Ordering::SeqCst);
        self.inner.renew(name, version, record).await
    }
    async fn release(&self, name: &LeaseName, version: &Version, held: &LeaseRecord) -> Result<CasOutcome> {
        self.counters.writes.fetch_add(1, Ordering::SeqCst);
        self.inner.release(name, version, held).await
    }
    fn renewal_batch(&self) -> usize {
        self.inner.renewal_batch()
    }
    async fn renew_many(&self, batch: &[Renewal]) -> Vec<Result<CasOutcome>> {
        if self.inner.renewal_batch() > 1 {
            self.counters.renews.fetch_add(1, Ordering::SeqCst);
            self.counters.renewals.fetch_add(batch.len() as u64, Ordering::SeqCst);
            self.inner.renew_many(batch).await
        } else {
            // Not batched: one `renew` each, counted as such.
            futures::future::join_all(batch.iter().map(|r| self.renew(&r.name, &r.version, &r.record))).await
        }
    }
    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        self.inner.list(prefix).await
    }
    async fn wait_for_change(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) -> Result<()> {
        self.counters.waits.fetch_add(1, Ordering::SeqCst);
        self.inner.wait_for_change(name, seen, wait).await
    }
    async fn store_now_ms(&self) -> Result<Option<u64>> {
        self.inner.store_now_ms().await
    }
}

impl<S: crate::store::Linearizable> crate::store::Linearizable for CountingStore<S> {}
