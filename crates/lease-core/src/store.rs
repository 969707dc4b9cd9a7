//! For store implementors: the compare-and-swap contract every backend implements.
//!
//! A store only reads a lease record with its opaque [`Version`], and writes one
//! atomically if a [`Precondition`] still holds; the client does the rest. Its
//! [`Capabilities`] tell the client where expiry is judged ([`ClockSource`]), what the
//! lease may be trusted for ([`Grade`]), and what the store can do in one round trip.
//! Stores that back correctness locks also implement [`Linearizable`]. The
//! [`record_codec`] is the one byte format for stores that keep a record as a blob.
//! [`ErrorClass`] and [`Effect`] are the one classification of a failed call: a write
//! whose answer was lost is "may have applied", never "did not apply". [`WakeHub`] is the one
//! way a store that pushes its changes wakes its waiters: one acquirer per release, every
//! observer per change. [`session`] is
//! the model of stores whose held records live on a liveness session the store keeps
//! alive (etcd, ZooKeeper): its book of held records and the task that expires them.
//! [`counter_codec`] is the text format of a fence counter kept as a value of its own.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

pub use crate::batch::{batch_failure, send_batch};
pub use crate::failure::{Effect, ErrorClass, no_answer};
pub use crate::finish::FinishOnDrop;
pub use crate::record::{EXPIRY_SLACK, LeaseRecord, Stored, Version, expiry_is_possible, record_codec};
pub use crate::wait::Wait;
pub use crate::wake_hub::{BATON_PASS, LINE_LIMIT, WakeHub};
use crate::{LeaseName, NamePrefix, Result};

pub mod counter_codec;
pub mod session;

/// Checks a store's per-request timeout: more than zero and at most an hour (every
/// store's `with_request_timeout`).
///
/// # Errors
/// [`crate::Error::InvalidInput`] otherwise.
pub fn request_timeout(timeout: std::time::Duration) -> Result<std::time::Duration> {
    if timeout.is_zero() || timeout > std::time::Duration::from_secs(3600) {
        return Err(crate::Error::invalid(
            "request timeout",
            format!("{timeout:?} is not between 1 ns and 1 hour"),
        ));
    }
    Ok(timeout)
}

/// Where expiry is judged (rule 2 of docs/DESIGN.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClockSource {
    /// The store keeps time itself (SQL `now()`, Redis `PX`, an etcd lease): reads report
    /// [`Stored::remaining`] and the store evaluates [`Precondition::Claimable`].
    Store,
    /// The store has no clock the client may compare with (S3, DynamoDB): a challenger
    /// takes over only after it has seen the same version unchanged for the full TTL on
    /// its own monotonic clock.
    Observation,
}

/// What a lease on this store may be trusted for (rule 6 of docs/DESIGN.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Grade {
    /// Every write is linearizable: fit for correctness locks (tokens guarding money).
    Linearizable,
    /// Writes can be lost (asynchronous replication, restarts without persistence):
    /// fit for efficiency locks (avoid duplicate work), not for correctness.
    EfficiencyOnly,
}

/// What a store offers; read by the Lease handle to pick its strategy.
///
/// Built with [`Capabilities::new`] and the `with_` methods (a store written outside
/// this crate cannot name every field, so that a new capability, off by default, is
/// not a breaking change):
///
/// ```
/// use leasehold_core::store::{Capabilities, ClockSource, Grade};
/// let caps = Capabilities::new(ClockSource::Store, Grade::Linearizable).with_conflict_returns_current(true);
/// assert!(caps.conflict_returns_current && !caps.notifies_waiters && !caps.claims_vacant);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// Where expiry is judged.
    pub clock: ClockSource,
    /// The store's guarantee grade.
    pub grade: Grade,
    /// Whether a conflict reports the current record in the same round trip.
    pub conflict_returns_current: bool,
    /// Whether [`CasStore::wait_for_change`] is a real push (watch, notify) rather than
    /// a sleep.
    pub notifies_waiters: bool,
    /// Whether [`CasStore::write`] takes [`Precondition::Vacant`].
    pub claims_vacant: bool,
    /// Whether a held record this process wrote lasts its TTL after the process exits.
    /// Not on etcd and ZooKeeper, where it lives on one of the process's sessions: it
    /// goes when that session ends (etcd: its lease's TTL after its last keep-alive;
    /// ZooKeeper: at the session's timeout, or at once when the store is dropped). A
    /// record meant to outlast its writer, as `leasehold run --at-least` keeps one,
    /// needs the writer to stay there.
    pub held_outlives_writer: bool,
}

impl Capabilities {
    /// A store whose expiry is judged by `clock`, with guarantee `grade`, and none of
    /// the optional abilities (each `with_` method below turns one on).
    pub const fn new(clock: ClockSource, grade: Grade) -> Self {
        Self {
            clock,
            grade,
            conflict_returns_current: false,
            notifies_waiters: false,
            claims_vacant: false,
            held_outlives_writer: true,
        }
    }

    /// Sets [`Capabilities::conflict_returns_current`].
    #[must_use]
    pub const fn with_conflict_returns_current(mut self, yes: bool) -> Self {
        self.conflict_returns_current = yes;
        self
    }

    /// Sets [`Capabilities::notifies_waiters`].
    #[must_use]
    pub const fn with_notifies_waiters(mut self, yes: bool) -> Self {
        self.notifies_waiters = yes;
        self
    }

    /// Sets [`Capabilities::claims_vacant`].
    #[must_use]
    pub const fn with_claims_vacant(mut self, yes: bool) -> Self {
        self.claims_vacant = yes;
        self
    }

    /// Sets [`Capabilities::held_outlives_writer`] (true unless set).
    #[must_use]
    pub const fn with_held_outlives_writer(mut self, yes: bool) -> Self {
        self.held_outlives_writer = yes;
        self
    }

    /// Whether a store with these capabilities takes `expect` in [`CasStore::write`]:
    /// [`Precondition::Absent`] and [`Precondition::Version`] always,
    /// [`Precondition::Claimable`] on a store with its own clock
    /// ([`ClockSource::Store`]), [`Precondition::Vacant`] where
    /// [`Capabilities::claims_vacant`] says so. A store answers any other with
    /// [`not_taken`], before it sends anything.
    ///
    /// ```
    /// use leasehold_core::store::{Capabilities, ClockSource, Grade, Precondition};
    /// let s3 = Capabilities::new(ClockSource::Observation, Grade::Linearizable);
    /// assert!(s3.takes(&Precondition::Absent) && !s3.takes(&Precondition::Claimable));
    /// assert!(!s3.takes(&Precondition::Vacant) && s3.with_claims_vacant(true).takes(&Precondition::Vacant));
    /// ```
    pub fn takes(&self, expect: &Precondition) -> bool {
        match expect {
            Precondition::Absent | Precondition::Version(_) => true,
            Precondition::Claimable => self.clock == ClockSource::Store,
            Precondition::Vacant => self.claims_vacant,
        }
    }
}

/// The condition under which [`CasStore::write`] applies.
///
/// Non-exhaustive: a store written outside this crate answers a condition it does not
/// know with [`crate::Error::InvalidInput`], nothing sent. The client sends a newer
/// one only where the store's [`Capabilities`] say it takes it, as for
/// [`Precondition::Vacant`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Precondition {
    /// Only if no record exists under the name.
    Absent,
    /// Only if the record's version is exactly this.
    Version(Version),
    /// Only on stores with [`ClockSource::Store`]: if no record exists, or it is vacant,
    /// or its TTL has run out on the store's clock. The store then issues the token
    /// itself, strictly greater than any it issued for the name before (the record's
    /// own token is ignored), in the same atomic write.
    Claimable,
    /// Only on stores that say so ([`Capabilities::claims_vacant`]): if no record exists,
    /// or the record is vacant (released), whatever its version. The store then issues
    /// the token itself in the same atomic write: one above the vacant record's, or the
    /// first ([`crate::FencingToken::FIRST`]) when there is none; the record's own token
    /// is ignored. A record that is not a valid lease record is reported
    /// ([`crate::Error::CorruptRecord`], or a conflict without the record where
    /// conflicts do not carry it) and left as it was.
    ///
    /// What a client that knows nothing of a name sends on a store without a clock: a
    /// name released before is claimed in one round trip, where [`Precondition::Absent`]
    /// would need a second, on the version its conflict reported.
    Vacant,
}

/// What a store answers a write on a [`Precondition`] it does not take:
/// [`crate::Error::InvalidInput`], nothing sent. That is [`Precondition::Vacant`] on a
/// store without [`Capabilities::claims_vacant`], [`Precondition::Claimable`] on one
/// without a clock of its own, and a precondition newer than the store (its `match`
/// needs a `_` arm: the enum is non-exhaustive).
///
/// ```
/// use leasehold_core::{Error, store::{not_taken, Precondition}};
/// let e = not_taken("S3", &Precondition::Vacant);
/// assert!(matches!(e, Error::InvalidInput { .. }));
/// assert!(e.to_string().contains("S3 does not take Vacant"), "{e}");
/// ```
pub fn not_taken(store: &str, expect: &Precondition) -> crate::Error {
    let what = match expect {
        Precondition::Vacant => "Vacant (Capabilities::claims_vacant is false)",
        Precondition::Claimable => "Claimable (it has no clock of its own to judge expiry on)",
        Precondition::Absent => "Absent",
        Precondition::Version(_) => "Version",
    };
    crate::Error::invalid("precondition", format!("{store} does not take {what}"))
}

/// What the store knows of the current record after a conflict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Current {
    /// No record exists.
    Absent,
    /// This record exists.
    Present(Stored),
    /// The store did not say (it cannot return the record in the same round trip).
    Unknown,
}

/// The result of a conditional write or delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CasOutcome {
    /// The write applied; this is the record as now stored (with the token the store
    /// issued, for [`Precondition::Claimable`]).
    Written(Stored),
    /// The precondition did not hold; nothing changed.
    Conflict(Current),
}

/// The result of a conditional delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The record was deleted.
    Deleted,
    /// The version did not match (or the record was gone); nothing changed.
    Conflict(Current),
}

/// The outcome of [`CasStore::expire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpireOutcome {
    /// The store will remove the record, and what it keeps for the name's token
    /// sequence, by itself once the time asked for has passed (on its own schedule:
    /// DynamoDB's TTL deletes within days, Redis and etcd on the dot).
    Scheduled,
    /// The store keeps the record past its writer (its session, its process), but has
    /// no expiry of its own to remove it: the caller removes it with
    /// [`CasStore::purge`] when the time comes. ZooKeeper, whose held records are
    /// EPHEMERAL znodes of their writer's session, makes it a PERSISTENT one.
    Kept,
    /// The version did not match (or the record was gone); nothing changed.
    Conflict(Current),
    /// The store has no expiry of its own (the default): the caller removes the
    /// record itself, with [`CasStore::purge`], when the time comes.
    Unsupported,
}

/// One renewal of a batch ([`CasStore::renew_many`]): the arguments of one
/// [`CasStore::renew`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renewal {
    /// The lease renewed.
    pub name: LeaseName,
    /// The version its holder last wrote or read.
    pub version: Version,
    /// The record the renewal writes (same holder and token, the new TTL).
    pub record: LeaseRecord,
}

/// A store of lease records with compare-and-swap writes.
///
/// Implementations are thin: they read a record with its version and write one only if
/// a [`Precondition`] holds, atomically. All lease logic (who may take, renew, release;
/// which token) lives in the client ([`crate::LeaseClient`]) and its private, pure decision.
///
/// # Contract
/// - Each method is **one round trip** to the store (the conformance suite counts them).
///   A store may send a second only to undo a write it finds it should not have made (a
///   claim on [`Precondition::Vacant`] that replaced a record it cannot read: DynamoDB).
/// - A write that loses its precondition is `Ok(CasOutcome::Conflict(..))`, never an
///   error; stores that can return the current record in the same round trip do, and
///   say so in [`Capabilities::conflict_returns_current`].
/// - Versions are never reused for a name, even across delete and re-create (but after
///   a [`CasStore::purge`], which removes what carries the name's sequence on, for
///   names nobody takes again: tokens and versions may then start again).
/// - A record that cannot be decoded is [`crate::Error::CorruptRecord`], never absent.
/// - Errors distinguish "did not apply" ([`crate::Error::Unavailable`]) from "may have
///   applied" ([`crate::Error::Indeterminate`]).
/// - Stores with [`ClockSource::Store`] fill [`Stored::remaining`] and support
///   [`Precondition::Claimable`]. Likewise [`Precondition::Vacant`], for stores with
///   [`Capabilities::claims_vacant`]. A write on a precondition the store's
///   capabilities rule out ([`Capabilities::takes`]), or on one newer than the store,
///   is [`not_taken`] (`InvalidInput`), nothing sent.
#[async_trait]
pub trait CasStore: Send + Sync + fmt::Debug + 'static {
    /// What this store offers.
    fn capabilities(&self) -> Capabilities;

    /// Reads the record under `name`, or `None` if there is none.
    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>>;

    /// Writes `record` under `name` if `expect` holds.
    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome>;

    /// Deletes the record under `name` if its version is `version`.
    ///
    /// The Lease handle never deletes (a release keeps the token in a vacant record);
    /// this is for administration and tests.
    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome>;

    /// Removes the record under `name` for good if its version is `version`: like
    /// [`CasStore::delete`], but a store that keeps what a delete leaves behind to carry
    /// the name's token sequence on (the SQL stores' tombstone row) removes that too, so
    /// a later record under the name may start its tokens (and versions) again. Only for names
    /// nobody will take again (a scheduled job's slots past their keep time). By default
    /// [`CasStore::delete`]. One round trip.
    async fn purge(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        self.delete(name, version).await
    }

    /// Asks the store to remove the record under `name`, with what it keeps to carry
    /// the name's token sequence on, by itself once `after` has passed, if the record's
    /// version is `version`: native expiry, the store's own [`CasStore::purge`] on a
    /// timer (a Redis `PEXPIRE`, an etcd lease, a DynamoDB TTL attribute). Like
    /// `purge`, only for names nobody will take again: the stores of this workspace take
    /// a name off its expiry when they grant it again, but a store may let a later
    /// record go with it. The record may still be read, with the same holder and token,
    /// until the store removes it (its version may change). A store whose held records
    /// end with their writer's session, and which cannot remove a record by itself,
    /// makes the record outlive that session and answers [`ExpireOutcome::Kept`]
    /// (ZooKeeper). By default [`ExpireOutcome::Unsupported`], and nothing changes. At
    /// most two round trips.
    async fn expire(&self, name: &LeaseName, version: &Version, after: Duration) -> Result<ExpireOutcome> {
        let _ = (name, version, after);
        Ok(ExpireOutcome::Unsupported)
    }

    /// Renews a held lease: by default a conditional write on the holder's version.
    /// Stores whose liveness is kept another way (an etcd session lease) may override
    /// it, and must then keep its meaning: `Written` only if the lease is still this
    /// holder's with this token.
    async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> Result<CasOutcome> {
        self.write(name, &Precondition::Version(version.clone()), record).await
    }

    /// How many renewals this store sends in one request through
    /// [`CasStore::renew_many`]: 1 (the default) for a store that cannot batch them.
    fn renewal_batch(&self) -> usize {
        1
    }

    /// Renews several held leases: one outcome per renewal, in order, each with the
    /// meaning of [`CasStore::renew`] for that lease alone (a stale version fails its own
    /// renewal, never another's). A store whose [`CasStore::renewal_batch`] is above 1
    /// sends up to that many in **one round trip**; the default sends one
    /// [`CasStore::renew`] per renewal, all at once.
    async fn renew_many(&self, batch: &[Renewal]) -> Vec<Result<CasOutcome>> {
        futures::future::join_all(batch.iter().map(|r| self.renew(&r.name, &r.version, &r.record))).await
    }

    /// Releases a held lease: `held` is the record the holder last wrote or read at
    /// `version` (its holder and token), and the write leaves that record vacant
    /// ([`LeaseRecord::vacated`]: no holder, the same token). By default a conditional
    /// write of the vacated record on `version`.
    ///
    /// Stores whose version does not move when another program edits the record (a SQL
    /// `UPDATE` by hand, a DynamoDB `update-item`, a `redis-cli HSET`) override it, and
    /// must then keep its meaning: `Written` only if the record still has `version` and
    /// shows `held`'s holder with `held`'s token, changing nothing but what vacating
    /// needs (never the token); otherwise `Conflict`, with nothing changed, so that a
    /// release never undoes what an operator set. One round trip, like every method.
    async fn release(&self, name: &LeaseName, version: &Version, held: &LeaseRecord) -> Result<CasOutcome> {
        self.write(name, &Precondition::Version(version.clone()), &held.vacated())
            .await
    }

    /// The names of the lease records whose names start with `prefix`, sorted, each
    /// once: held, expired and vacant records alike, as long as the store keeps them (a
    /// record [`CasStore::delete`] removed is not listed; Redis drops a record whose TTL
    /// ran out). A record is listed whatever its value (reading a corrupt one says so);
    /// a key or row under a name no lease can have (another program's) is left out.
    /// For administration (`leasehold list`): the store's own listing is paged through,
    /// so its cost grows with the number of records under the prefix (on Redis, in the
    /// whole database: `SCAN`); what it returns may be stale by the time it is used.
    ///
    /// The default answers [`crate::Error::Unsupported`]; stores that can list override
    /// it.
    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        let _ = prefix;
        Err(crate::Error::Unsupported {
            operation: "listing lease names",
            store: "this store",
        })
    }

    /// Waits until the record under `name` may have changed from `seen` (`None`: from
    /// absent) in the way `wait` asks for, or until it is time to look again
    /// ([`Wait::after`]; for [`Wait::Claim`], only the first in line). Spurious returns
    /// are allowed. Stores with [`Capabilities::notifies_waiters`] push; the default
    /// sleeps for [`Wait::after`].
    async fn wait_for_change(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) -> Result<()> {
        let _ = (name, seen);
        tokio::time::sleep(wait.after()).await;
        Ok(())
    }

    /// The time on the store's own clock, in Unix milliseconds, read in one round trip:
    /// for deciding *when* something is due on one clock every client shares (a
    /// scheduled job's slots), never for expiry. The value was taken while the call was
    /// under way, so it is at most the store's time when the answer arrives.
    ///
    /// The default answers `None`: the store offers no clock to read (etcd, DynamoDB,
    /// S3, the in-process store). The SQL stores answer their server's clock (SQLite:
    /// the host's real-time clock, read past any preloaded fake clock); Redis answers
    /// `TIME`.
    async fn store_now_ms(&self) -> Result<Option<u64>> {
        Ok(None)
    }
}

/// Marks a store whose writes are linearizable, fit for correctness leases
/// ([`crate::LeaseClient::new`]). Efficiency-only stores (Redis) do not implement it:
/// using them for a correctness lease does not compile; they are used through
/// [`crate::LeaseClient::efficiency_only`] by name.
pub trait Linearizable: CasStore {}

#[async_trait]
impl<S: CasStore + ?Sized> CasStore for std::sync::Arc<S> {
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        (**self).read(name).await
    }
    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        (**self).write(name, expect, record).await
    }
    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        (**self).delete(name, version).await
    }
    async fn purge(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        (**self).purge(name, version).await
    }
    async fn expire(&self, name: &LeaseName, version: &Version, after: Duration) -> Result<ExpireOutcome> {
        (**self).expire(name, version, after).await
    }
    async fn renew(&self, name: &LeaseName, version: &Version, record: &LeaseRecord) -> Result<CasOutcome> {
        (**self).renew(name, version, record).await
    }
    async fn release(&self, name: &LeaseName, version: &Version, held: &LeaseRecord) -> Result<CasOutcome> {
        (**self).release(name, version, held).await
    }
    fn renewal_batch(&self) -> usize {
        (**self).renewal_batch()
    }
    async fn renew_many(&self, batch: &[Renewal]) -> Vec<Result<CasOutcome>> {
        (**self).renew_many(batch).await
    }
    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        (**self).list(prefix).await
    }
    async fn wait_for_change(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) -> Result<()> {
        (**self).wait_for_change(name, seen, wait).await
    }
    async fn store_now_ms(&self) -> Result<Option<u64>> {
        (**self).store_now_ms().await
    }
}

impl<S: Linearizable + ?Sized> Linearizable for std::sync::Arc<S> {}

#[cfg(test)]
fn _object_safe(_: std::sync::Arc<dyn CasStore>) {}
