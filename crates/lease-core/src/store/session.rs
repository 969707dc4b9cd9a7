//! The session model: for stores whose held records live as long as one liveness
//! session the store keeps alive for all of them (an etcd lease, a ZooKeeper session),
//! not until each record's own TTL runs out.
//!
//! Such a store renews a held record without a request: its session's keep-alive
//! already keeps the record on the server. The price is that the server no longer
//! expires a record whose holder stops renewing while the process (and so the session)
//! lives on; the store must do it, at the record's deadline, with a delete guarded on the
//! record it wrote. [`SessionBook`] is that bookkeeping: the held records a store wrote,
//! their deadlines on this process's monotonic clock, the records whose write outcome was
//! unknown and that may sit on a session with nobody to renew them ("orphans"), and
//! which of them are due. [`expire_due`] is the task that sends the deletes.
//!
//! The deadlines here are the records' lives on the store, `call + ttl` of the write or
//! renewal that set them; they are not the holders' own validity, which the client's
//! renewal driver keeps (`sent + ttl - margin`, shorter). The two stay apart on purpose:
//! a store used without a client (administration, tests) must still expire what nobody
//! renews.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::LeaseName;
use crate::store::LeaseRecord;

/// How long an idle [`expire_due`] task sleeps before it checks that its store lives.
pub const EXPIRY_IDLE: Duration = Duration::from_secs(1);

/// One liveness session of a store (an etcd lease, a ZooKeeper session).
pub trait Session: fmt::Debug + Send + Sync {
    /// The session's id on the server.
    fn id(&self) -> i64;
    /// True once the server said the session is gone (its records with it).
    fn is_dead(&self) -> bool;
}

/// A held record a store wrote, attached to one of its sessions. `V` is the store's
/// record version (a mod revision, a znode version).
#[derive(Debug)]
pub struct Held<S, V> {
    /// Its version; `None` while the write's outcome is unknown.
    pub version: Option<V>,
    /// The record as written, byte for byte (a guard for deletes without a version).
    pub bytes: Vec<u8>,
    /// The record as written.
    pub record: LeaseRecord,
    /// The session it is attached to.
    pub session: Arc<S>,
    /// When the record expires unless renewed (this process's monotonic clock).
    pub deadline: Instant,
    /// The store position (revision) at which this entry was last confirmed.
    pub seen_at: i64,
    expiring: bool,
}

impl<S, V: Clone> Clone for Held<S, V> {
    fn clone(&self) -> Self {
        Self {
            version: self.version.clone(),
            bytes: self.bytes.clone(),
            record: self.record.clone(),
            session: self.session.clone(),
            deadline: self.deadline,
            seen_at: self.seen_at,
            expiring: self.expiring,
        }
    }
}

impl<S: Session, V> Held<S, V> {
    /// A held entry, not yet expiring.
    pub fn new(
        version: Option<V>,
        bytes: Vec<u8>,
        record: LeaseRecord,
        session: Arc<S>,
        deadline: Instant,
        seen_at: i64,
    ) -> Self {
        Self {
            version,
            bytes,
            record,
            session,
            deadline,
            seen_at,
            expiring: false,
        }
    }

    /// True when the record's deadline passed at `now`, or its expiry delete is under way.
    pub fn expired(&self, now: Instant) -> bool {
        self.expiring || self.deadline <= now
    }
}

/// A delete the store must send: the record it wrote under `name`, guarded on `version`
/// when it is known, else on `bytes` and `session`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expiry<V> {
    /// The lease name.
    pub name: LeaseName,
    /// The record's version, when known.
    pub version: Option<V>,
    /// The record as written.
    pub bytes: Vec<u8>,
    /// The id of the session it is (or would be) attached to.
    pub session: i64,
    /// A record no held entry stands for any more (see [`SessionBook::hold`]).
    pub orphan: bool,
}

/// The held records of one store and when each must be deleted.
#[derive(Debug)]
pub struct SessionBook<S, V> {
    held: HashMap<LeaseName, Held<S, V>>,
    schedule: BTreeSet<(Instant, u64, LeaseName)>,
    orphans: Vec<(Instant, Expiry<V>)>,
    seq: u64,
}

impl<S, V> Default for SessionBook<S, V> {
    fn default() -> Self {
        Self {
            held: HashMap::new(),
            schedule: BTreeSet::new(),
            orphans: Vec::new(),
            seq: 0,
        }
    }
}

impl<S: Session, V: Copy + Eq + fmt::Debug> SessionBook<S, V> {
    /// The held entry of `name`.
    pub fn get(&self, name: &LeaseName) -> Option<&Held<S, V>> {
        self.held.get(name)
    }

    /// The held entry of `name`, to update what was confirmed of it.
    pub fn get_mut(&mut self, name: &LeaseName) -> Option<&mut Held<S, V>> {
        self.held.get_mut(name)
    }

    /// True when this store holds `name` at `version` and that record has expired.
    pub fn own_expired(&self, name: &LeaseName, version: V, now: Instant) -> bool {
        self.held
            .get(name)
            .is_some_and(|h| h.version == Some(version) && h.expired(now))
    }

    /// Stores a held entry and schedules its expiry.
    ///
    /// An entry it replaces that stands for another record (a write whose outcome is
    /// unknown, replaced by a later attempt's) is kept as an orphan: that record may be on
    /// one of this store's sessions, which live as long as the store, so it is deleted at
    /// its deadline unless it has been replaced by then (the delete compares it).
    pub fn hold(&mut self, name: &LeaseName, held: Held<S, V>) {
        self.seq += 1;
        self.schedule.insert((held.deadline, self.seq, name.clone()));
        // An orphan with these very bytes is this record now (a retried write): it must
        // not be deleted at the old deadline.
        let session = held.session.id();
        self.orphans
            .retain(|(_, r)| !(r.name == *name && r.bytes == held.bytes && r.session == session));
        let replaced = self
            .held
            .get(name)
            .filter(|old| old.bytes != held.bytes || old.session.id() != session)
            .map(|old| {
                let orphan = Expiry {
                    name: name.clone(),
                    version: old.version,
                    bytes: old.bytes.clone(),
                    session: old.session.id(),
                    orphan: true,
                };
                (old.deadline, orphan)
            });
        self.orphans.extend(replaced);
        self.held.insert(name.clone(), held);
    }

    /// Drops the held entry of `name` (released, deleted, replaced by someone else).
    pub fn unhold(&mut self, name: &LeaseName) -> Option<Held<S, V>> {
        self.held.remove(name)
    }

    /// Extends the held entry of `name` at `version` to `deadline`; false if it is gone,
    /// changed, expired, or its session is dead.
    ///
    /// Expired is judged now, not only at `call`: a renewal sent before the deadline
    /// whose answer comes after it extends nothing. Once the deadline has passed, a claim
    /// through this store may already be on its way, planned on the record as expired
    /// ([`Self::own_expired`]), and the record's expiry delete may be too; a renewal
    /// that then extended the entry would leave two holders.
    pub fn extend(&mut self, name: &LeaseName, version: V, call: Instant, deadline: Instant) -> bool {
        let Some(h) = self.held.get_mut(name) else {
            return false;
        };
        if h.version != Some(version) || h.expired(call.max(Instant::now())) || h.session.is_dead() {
            return false;
        }
        if deadline > h.deadline {
            h.deadline = deadline;
            self.seq += 1;
            self.schedule.insert((deadline, self.seq, name.clone()));
        }
        true
    }

    /// Drops every entry on a session the server says is gone (its records went with
    /// it), orphans included, and returns the names that were held on it.
    pub fn session_gone(&mut self, session: i64) -> Vec<LeaseName> {
        let gone: Vec<LeaseName> = self
            .held
            .iter()
            .filter(|(_, h)| h.session.id() == session)
            .map(|(n, _)| n.clone())
            .collect();
        self.orphans.retain(|(_, r)| r.session != session);
        for name in &gone {
            self.held.remove(name);
        }
        gone
    }

    /// Takes the expiries due at `now` (marking them under way) and returns when the
    /// next one is due.
    pub fn take_due(&mut self, now: Instant) -> (Vec<Expiry<V>>, Option<Instant>) {
        let (ripe, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.orphans)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.orphans = waiting;
        let mut due: Vec<Expiry<V>> = ripe.into_iter().map(|(_, r)| r).collect();
        let next_orphan = self.orphans.iter().map(|(t, _)| *t).min();
        while let Some((t, seq, name)) = self.schedule.first().cloned() {
            if t > now {
                return (due, Some(next_orphan.map_or(t, |o| o.min(t))));
            }
            self.schedule.remove(&(t, seq, name.clone()));
            let Some(h) = self.held.get_mut(&name) else { continue };
            if h.expiring || h.deadline > now {
                continue;
            }
            h.expiring = true;
            due.push(Expiry {
                name,
                version: h.version,
                bytes: h.bytes.clone(),
                session: h.session.id(),
                orphan: false,
            });
        }
        (due, next_orphan)
    }

    /// An expiry delete finished: `done` if it deleted the record or found it already
    /// replaced, otherwise it is retried at `retry_at`.
    pub fn expired(&mut self, expiry: &Expiry<V>, done: bool, retry_at: Instant) {
        if expiry.orphan {
            if !done {
                self.orphans.push((retry_at, expiry.clone()));
            }
            return;
        }
        let ours = |h: &Held<S, V>| h.expiring && h.bytes == expiry.bytes;
        if done {
            if self.held.get(&expiry.name).is_some_and(ours) {
                self.held.remove(&expiry.name);
            }
        } else if let Some(h) = self.held.get_mut(&expiry.name) {
            if ours(h) {
                h.expiring = false;
                self.seq += 1;
                self.schedule.insert((retry_at, self.seq, expiry.name.clone()));
            }
        }
    }

    /// The time left of the record of `name` at `version`, if this store holds it.
    pub fn remaining(&self, name: &LeaseName, version: V, now: Instant) -> Option<Duration> {
        let h = self.held.get(name).filter(|h| h.version == Some(version))?;
        Some(if h.expired(now) {
            Duration::ZERO
        } else {
            h.deadline.saturating_duration_since(now)
        })
    }

    /// True when the store holds no record.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The names the store holds.
    pub fn names(&self) -> impl Iterator<Item = &LeaseName> {
        self.held.keys()
    }

    /// How many orphans wait for their deadline.
    pub fn orphans(&self) -> usize {
        self.orphans.len()
    }
}

/// A store that expires its held records itself, driven by [`expire_due`].
#[async_trait]
pub trait Expire: Send + Sync + 'static {
    /// The store's record version.
    type Version: Send + Sync;
    /// Takes the expiries due at `now` ([`SessionBook::take_due`]).
    fn take_due(&self, now: Instant) -> (Vec<Expiry<Self::Version>>, Option<Instant>);
    /// Sends one guarded delete and reports it ([`SessionBook::expired`]).
    async fn expire(&self, expiry: &Expiry<Self::Version>);
}

/// Wakes [`expire_due`] through `kick` for a deadline just set, unless the task wakes by
/// then anyway: it sleeps at most [`EXPIRY_IDLE`] at a time, so a deadline further off
/// than that (most grants' and renewals') costs no wake-up of another task.
pub fn kick_for(kick: &Notify, deadline: Instant) {
    if deadline < Instant::now() + EXPIRY_IDLE {
        kick.notify_one();
    }
}

/// Deletes held records whose holders stopped renewing them, at their deadlines, until
/// the store is dropped. Woken early by `kick` when a deadline is set or moved.
pub async fn expire_due<E: Expire>(store: Weak<E>, kick: Arc<Notify>) {
    loop {
        let next = {
            let Some(store) = store.upgrade() else { return };
            let (due, next) = store.take_due(Instant::now());
            for e in &due {
                store.expire(e).await;
            }
            if due.is_empty() { next } else { Some(Instant::now()) }
        };
        // Wake at least every EXPIRY_IDLE to notice that the store was dropped.
        let wake = next.map_or(EXPIRY_IDLE, |t| {
            t.saturating_duration_since(Instant::now()).min(EXPIRY_IDLE)
        });
        tokio::select! {
            () = tokio::time::sleep(wake) => {}
            () = kick.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::store::record_codec;
    use crate::{FencingToken, HolderId, Ttl};

    #[derive(Debug)]
    struct TestSession(i64, AtomicBool);

    impl Session for TestSession {
        fn id(&self) -> i64 {
            self.0
        }
        fn is_dead(&self) -> bool {
            self.1.load(Ordering::SeqCst)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_deadline_before_the_longest_sleep_wakes_the_expiry_task() {
        let kick = Notify::new();
        kick_for(&kick, Instant::now() + EXPIRY_IDLE);
        let woken = tokio::time::timeout(Duration::from_millis(1), kick.notified()).await;
        assert!(woken.is_err(), "a deadline the task reaches on its own woke it");
        kick_for(&kick, Instant::now() + EXPIRY_IDLE - Duration::from_millis(1));
        let woken = tokio::time::timeout(Duration::from_millis(1), kick.notified()).await;
        assert!(woken.is_ok(), "an earlier deadline did not wake it");
    }

    fn name() -> LeaseName {
        LeaseName::new("n").unwrap_or_else(|e| panic!("{e}"))
    }

    fn rec(holder: &str) -> LeaseRecord {
        LeaseRecord {
            holder: Some(HolderId::new(holder).unwrap_or_else(|e| panic!("{e}"))),
            token: FencingToken::new(1),
            ttl: Ttl::from_millis(1000).unwrap_or_else(|e| panic!("{e}")),
            wall_expires_at_ms: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_replaced_entry_is_deleted_at_its_deadline_unless_rewritten() {
        let n = name();
        let t0 = Instant::now();
        let session = Arc::new(TestSession(7, AtomicBool::new(false)));
        let pending = |holder: &str, deadline_ms: u64| {
            let r = rec(holder);
            Held::<_, i64>::new(
                None,
                record_codec::encode(&r),
                r,
                session.clone(),
                t0 + Duration::from_millis(deadline_ms),
                0,
            )
        };
        let mut book = SessionBook::default();
        book.hold(&n, pending("first", 1000));
        // A second attempt replaces the first: the first's record (if it applied) is an
        // orphan, due at the first's deadline, not before.
        book.hold(&n, pending("second", 1500));
        let (due, next) = book.take_due(t0 + Duration::from_millis(999));
        assert!(due.is_empty());
        assert_eq!(next, Some(t0 + Duration::from_millis(1000)));
        let (due, _) = book.take_due(t0 + Duration::from_millis(1000));
        assert_eq!(due.len(), 1);
        assert!(due[0].orphan && due[0].bytes == pending("first", 0).bytes && due[0].session == 7);
        // A failed delete is retried.
        book.expired(&due[0], false, t0 + Duration::from_millis(1200));
        assert_eq!(
            book.take_due(t0 + Duration::from_millis(1100)).1,
            Some(t0 + Duration::from_millis(1200))
        );
        // The same bytes written again (a retry that applied) are no orphan any more.
        book.hold(&n, pending("first", 3000));
        let (due, _) = book.take_due(t0 + Duration::from_millis(1200));
        assert!(
            due.iter().all(|r| r.bytes != pending("first", 0).bytes || !r.orphan),
            "{due:?}"
        );
        // Orphans on a session the server says is gone went with it.
        book.hold(&n, pending("third", 4000));
        assert_eq!(book.session_gone(7), vec![n.clone()]);
        assert_eq!(book.orphans(), 0);
        assert!(book.get(&n).is_none());
    }

    /// A renewal sent before the deadline but answered after it: by then a claim through
    /// the same store may have planned on the record as expired, so the entry is not
    /// extended (it was, judged at the send time alone).
    #[tokio::test(start_paused = true)]
    async fn a_renewal_answered_after_the_deadline_extends_nothing() {
        let n = name();
        let t0 = Instant::now();
        let session = Arc::new(TestSession(3, AtomicBool::new(false)));
        let r = rec("h");
        let mut book = SessionBook::default();
        let deadline = t0 + Duration::from_secs(1);
        book.hold(
            &n,
            Held::new(Some(5_i64), record_codec::encode(&r), r, session, deadline, 5),
        );
        let call = t0 + Duration::from_millis(900);
        tokio::time::advance(Duration::from_millis(1100)).await;
        assert!(book.own_expired(&n, 5, Instant::now()), "a claim may plan on it now");
        assert!(
            !book.extend(&n, 5, call, call + Duration::from_secs(1)),
            "a late answer extended an entry a claim may already be taking"
        );
        assert!(book.own_expired(&n, 5, Instant::now()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_record_is_due_at_its_deadline_and_a_renewal_moves_it() {
        let n = name();
        let t0 = Instant::now();
        let session = Arc::new(TestSession(3, AtomicBool::new(false)));
        let r = rec("h");
        let mut book = SessionBook::default();
        book.hold(
            &n,
            Held::new(
                Some(5_i64),
                record_codec::encode(&r),
                r,
                session.clone(),
                t0 + Duration::from_secs(1),
                5,
            ),
        );
        assert_eq!(book.remaining(&n, 5, t0), Some(Duration::from_secs(1)));
        assert_eq!(book.remaining(&n, 6, t0), None, "another version is not ours");
        // A renewal at 0.5 s moves the deadline to 1.5 s: nothing is due at 1 s.
        let call = t0 + Duration::from_millis(500);
        assert!(book.extend(&n, 5, call, call + Duration::from_secs(1)));
        assert!(
            !book.extend(&n, 4, call, call + Duration::from_secs(1)),
            "wrong version"
        );
        let (due, next) = book.take_due(t0 + Duration::from_secs(1));
        assert!(due.is_empty());
        assert_eq!(next, Some(t0 + Duration::from_millis(1500)));
        let (due, _) = book.take_due(t0 + Duration::from_millis(1500));
        assert_eq!(due.len(), 1);
        assert!(!due[0].orphan && due[0].version == Some(5));
        // Under way: expired, cannot be renewed, and is not handed out twice.
        assert!(book.own_expired(&n, 5, t0));
        assert!(!book.extend(&n, 5, t0 + Duration::from_millis(1600), t0 + Duration::from_secs(3)));
        assert!(book.take_due(t0 + Duration::from_secs(2)).0.is_empty());
        // A delete that failed is retried; one that succeeded drops the entry.
        book.expired(&due[0], false, t0 + Duration::from_secs(2));
        assert_eq!(book.take_due(t0 + Duration::from_secs(2)).0.len(), 1);
        book.expired(&due[0], true, t0 + Duration::from_secs(3));
        assert!(book.get(&n).is_none());
        // A dead session's entries cannot be renewed.
        let r = rec("h");
        book.hold(
            &n,
            Held::new(
                Some(9),
                record_codec::encode(&r),
                r,
                session.clone(),
                t0 + Duration::from_secs(9),
                9,
            ),
        );
        session.1.store(true, Ordering::SeqCst);
        assert!(!book.extend(&n, 9, t0 + Duration::from_secs(2), t0 + Duration::from_secs(10)));
    }
}
