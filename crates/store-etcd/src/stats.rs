//! Counts of the requests a store sends to etcd, by kind (the round trips its docs
//! promise are measured with these).

use std::sync::atomic::{AtomicU64, Ordering};

/// Requests an [`EtcdStore`](crate::EtcdStore) has sent to etcd since it was created.
///
/// ```
/// use leasehold_etcd::EtcdStats;
/// let before = EtcdStats { txns: 3, ..EtcdStats::default() };
/// let after = EtcdStats { txns: 4, keepalives: 2, ..EtcdStats::default() };
/// assert_eq!(after.since(&before), EtcdStats { txns: 1, keepalives: 2, ..EtcdStats::default() });
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EtcdStats {
    /// Transactions (every conditional write, delete, fenced write and expiry clean-up).
    pub txns: u64,
    /// Range reads.
    pub ranges: u64,
    /// Session leases granted.
    pub lease_grants: u64,
    /// Keep-alive messages sent on session leases.
    pub keepalives: u64,
    /// Watch streams opened.
    pub watches: u64,
    /// Transactions that deleted a held record whose holder stopped renewing it (part of
    /// `txns`).
    pub expiry_deletes: u64,
}

impl EtcdStats {
    /// The requests sent between `earlier` and this snapshot.
    #[must_use]
    pub fn since(&self, earlier: &EtcdStats) -> EtcdStats {
        EtcdStats {
            txns: self.txns.saturating_sub(earlier.txns),
            ranges: self.ranges.saturating_sub(earlier.ranges),
            lease_grants: self.lease_grants.saturating_sub(earlier.lease_grants),
            keepalives: self.keepalives.saturating_sub(earlier.keepalives),
            watches: self.watches.saturating_sub(earlier.watches),
            expiry_deletes: self.expiry_deletes.saturating_sub(earlier.expiry_deletes),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Stats {
    txns: AtomicU64,
    ranges: AtomicU64,
    lease_grants: AtomicU64,
    keepalives: AtomicU64,
    watches: AtomicU64,
    expiry_deletes: AtomicU64,
}

impl Stats {
    pub(crate) fn txn(&self) {
        self.txns.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn range(&self) {
        self.ranges.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn lease_grant(&self) {
        self.lease_grants.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn keepalive(&self) {
        self.keepalives.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn watch(&self) {
        self.watches.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn expiry_delete(&self) {
        self.expiry_deletes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> EtcdStats {
        EtcdStats {
            txns: self.txns.load(Ordering::Relaxed),
            ranges: self.ranges.load(Ordering::Relaxed),
            lease_grants: self.lease_grants.load(Ordering::Relaxed),
            keepalives: self.keepalives.load(Ordering::Relaxed),
            watches: self.watches.load(Ordering::Relaxed),
            expiry_deletes: self.expiry_deletes.load(Ordering::Relaxed),
        }
    }
}
