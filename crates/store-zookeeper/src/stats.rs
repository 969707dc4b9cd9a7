//! Counts of the requests a store sends to ZooKeeper, by kind (the round trips its docs
//! promise are measured with these).

use std::sync::atomic::{AtomicU64, Ordering};

/// Requests a [`ZooKeeperStore`](crate::ZooKeeperStore) has sent to ZooKeeper since it
/// was created.
///
/// ```
/// use leasehold_zookeeper::ZooKeeperStats;
/// let before = ZooKeeperStats { multis: 3, ..ZooKeeperStats::default() };
/// let after = ZooKeeperStats { multis: 4, renewals: 2, ..ZooKeeperStats::default() };
/// assert_eq!(after.since(&before), ZooKeeperStats { multis: 1, renewals: 2, ..ZooKeeperStats::default() });
/// assert_eq!(after.since(&before).requests(), 3);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZooKeeperStats {
    /// `multi` write requests (every conditional write, delete, fenced write and expiry
    /// clean-up).
    pub multis: u64,
    /// Read requests (`multi` reads of a name's two znodes, child listings, fenced-node
    /// reads, the root check).
    pub reads: u64,
    /// Renewals: one `exists` of the lease znode on the holder's session, which also
    /// counts as the session's heartbeat on the server.
    pub renewals: u64,
    /// Sessions opened (one per TTL class, plus the store's main session).
    pub sessions: u64,
    /// Watches set (one `exists` watch per name being waited on, set again after each
    /// event).
    pub watches: u64,
    /// Multis that deleted a held record whose holder stopped renewing it (part of
    /// `multis`).
    pub expiry_deletes: u64,
    /// Heartbeats: a `sync` through the leader every eighth of the session timeout on
    /// each session that holds records (and on a busy one, a report lag after its latest
    /// request, up to one per thirty-second of the timeout), sent in the background (not part of
    /// [`ZooKeeperStats::requests`]); they tell how long the leader keeps the session.
    pub heartbeats: u64,
}

impl ZooKeeperStats {
    /// The requests sent between `earlier` and this snapshot.
    #[must_use]
    pub fn since(&self, earlier: &ZooKeeperStats) -> ZooKeeperStats {
        ZooKeeperStats {
            multis: self.multis.saturating_sub(earlier.multis),
            reads: self.reads.saturating_sub(earlier.reads),
            renewals: self.renewals.saturating_sub(earlier.renewals),
            sessions: self.sessions.saturating_sub(earlier.sessions),
            watches: self.watches.saturating_sub(earlier.watches),
            expiry_deletes: self.expiry_deletes.saturating_sub(earlier.expiry_deletes),
            heartbeats: self.heartbeats.saturating_sub(earlier.heartbeats),
        }
    }

    /// Every request sent for the store's calls (`expiry_deletes` are part of `multis`;
    /// session handshakes are counted as one each; background heartbeats are not).
    pub fn requests(&self) -> u64 {
        self.multis + self.reads + self.renewals + self.sessions + self.watches
    }
}

#[derive(Debug, Default)]
pub(crate) struct Stats {
    multis: AtomicU64,
    reads: AtomicU64,
    renewals: AtomicU64,
    sessions: AtomicU64,
    watches: AtomicU64,
    expiry_deletes: AtomicU64,
    heartbeats: AtomicU64,
}

impl Stats {
    pub(crate) fn multi(&self) {
        self.multis.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn read(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn renewal(&self) {
        self.renewals.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn session(&self) {
        self.sessions.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn watch(&self) {
        self.watches.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn expiry_delete(&self) {
        self.expiry_deletes.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn heartbeat(&self) {
        self.heartbeats.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ZooKeeperStats {
        ZooKeeperStats {
            multis: self.multis.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
            renewals: self.renewals.load(Ordering::Relaxed),
            sessions: self.sessions.load(Ordering::Relaxed),
            watches: self.watches.load(Ordering::Relaxed),
            expiry_deletes: self.expiry_deletes.load(Ordering::Relaxed),
            heartbeats: self.heartbeats.load(Ordering::Relaxed),
        }
    }
}
