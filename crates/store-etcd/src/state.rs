//! What a store remembers between requests: the last state it saw of each name (to
//! predict the compares of a claim so it usually costs one transaction), and the held
//! records it wrote itself (renewed without a transaction, deleted when their holder
//! stops renewing them: the core's [`SessionBook`]).
//!
//! It also knows which names have a held write in flight ([`State::begin_write`]) and
//! what was seen of their records meanwhile, so that a held entry is never registered
//! for a record someone changed between the write and its registration
//! ([`State::hold`]), and which held entries could not be confirmed after the store's
//! held-record watch lost events ([`State::unconfirm`]): their next renewal is a
//! transaction.
//!
//! Everything here is a cache of etcd's truth except the held records' deadlines, which
//! are this process's promise to its own holders. Forgetting any of it is safe: a wrong
//! prediction costs one more transaction, never a wrong grant (etcd's compares decide).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use etcd_client::KeyValue;
use leasehold_core::{
    FencingToken, LeaseName, Result,
    store::session::{Expiry, SessionBook},
    store::{LeaseRecord, Stored, Version, record_codec},
};
use tokio::time::Instant;

use crate::keys::{Keys, decode_fence};
use crate::session::Session;

/// The most names remembered before the cache is cleared.
const MAX_KNOWN: usize = 16_384;

/// A record key as etcd returned it.
#[derive(Debug, Clone)]
pub(crate) struct RecordKv {
    pub(crate) version: i64,
    pub(crate) lease: i64,
    pub(crate) bytes: Vec<u8>,
}

/// Both keys of a name as one response showed them, at store revision `rev`.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) rev: i64,
    pub(crate) record: Option<RecordKv>,
    pub(crate) fence: Option<Vec<u8>>,
}

impl Snapshot {
    /// Picks a name's two keys out of a range answer (other keys are ignored).
    pub(crate) fn from_kvs(keys: &Keys, rev: i64, kvs: &[KeyValue]) -> Self {
        let mut snap = Self {
            rev,
            record: None,
            fence: None,
        };
        for kv in kvs {
            if kv.key() == keys.record.as_slice() {
                snap.record = Some(RecordKv {
                    version: kv.mod_revision(),
                    lease: kv.lease(),
                    bytes: kv.value().to_vec(),
                });
            } else if kv.key() == keys.fence.as_slice() {
                snap.fence = Some(kv.value().to_vec());
            }
        }
        snap
    }
}

/// What a store last saw of a name's fence counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FenceSeen {
    Unknown,
    Absent,
    Value(u64),
}

/// What a store last saw of a name's record.
#[derive(Debug, Clone)]
pub(crate) enum RecordSeen {
    Absent,
    /// `record` is `None` when the value did not decode.
    Present {
        version: i64,
        record: Option<LeaseRecord>,
    },
}

/// The last state seen of one name.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    pub(crate) rev: i64,
    pub(crate) record: RecordSeen,
    pub(crate) fence: FenceSeen,
}

/// A held record this store wrote, attached to one of its sessions (`version`: its mod
/// revision; `seen_at`: the revision at which the entry was last confirmed).
pub(crate) type Held = leasehold_core::store::session::Held<Session, i64>;

/// An expiry delete the store must send.
pub(crate) type Reap = Expiry<i64>;

/// How a claim must find the record key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordCmp {
    /// No record (create revision 0).
    Absent,
    /// This exact record (mod revision): vacant, or held by this store and expired.
    At(i64),
}

/// The compares a claim sends, and the token it then issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claim {
    pub(crate) record: RecordCmp,
    /// `None`: the fence key must not exist.
    pub(crate) fence: Option<u64>,
    /// The token the claim issues; `None` when the counter is exhausted (the fence or
    /// the record is at [`FencingToken::MAX`]).
    pub(crate) token: Option<FencingToken>,
}

/// A name with writes in flight that may make this store its holder, and what was seen
/// of its record meanwhile.
#[derive(Debug, Default)]
struct Pending {
    /// How many such writes are in flight.
    writes: usize,
    /// The newest state of the record seen meanwhile: the store revision it was seen at
    /// and the record's mod revision (`None`: absent).
    newest: Option<(i64, Option<i64>)>,
    /// A re-read after the held-record watch lost events failed: changes may have been
    /// missed.
    unsure: bool,
}

/// How an expiry delete ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reaped {
    /// It deleted the record, at this store revision.
    Deleted(i64),
    /// Its compare failed: the record is no longer the one it was sent for (replaced or
    /// deleted by someone), and what it is now is not known.
    Replaced,
    /// It got no answer; it is retried.
    Failed,
}

/// The store's memory.
#[derive(Debug, Default)]
pub(crate) struct State {
    known: HashMap<LeaseName, Known>,
    book: SessionBook<Session, i64>,
    /// Names with held writes in flight ([`State::begin_write`]).
    pending: HashMap<LeaseName, Pending>,
    /// Held names whose next renewal must be a transaction ([`State::unconfirm`]).
    unconfirmed: HashSet<LeaseName>,
}

/// A decoded snapshot.
#[derive(Debug)]
pub(crate) struct Decoded {
    /// `(version, lease, record)`; the record is an error when it does not decode.
    pub(crate) record: Option<(i64, i64, Result<LeaseRecord>)>,
    pub(crate) fence: Result<FenceSeen>,
}

/// Decodes both keys of a snapshot.
pub(crate) fn decode(name: &LeaseName, snap: &Snapshot) -> Decoded {
    Decoded {
        record: snap
            .record
            .as_ref()
            .map(|kv| (kv.version, kv.lease, decode_record(name, kv))),
        fence: match &snap.fence {
            None => Ok(FenceSeen::Absent),
            Some(b) => decode_fence(name, b).map(|t| FenceSeen::Value(t.get())),
        },
    }
}

/// Decodes a record value. A held record without an etcd lease is corrupt: nothing
/// would ever expire it (this store writes every held record on a session, and only
/// vacant ones without), so it was put by someone else (`etcdctl put` without `--lease`).
fn decode_record(name: &LeaseName, kv: &RecordKv) -> Result<LeaseRecord> {
    let record = record_codec::decode(name, &kv.bytes)?;
    if !record.is_vacant() && kv.lease == 0 {
        return Err(leasehold_core::Error::corrupt(
            name.as_str(),
            "a held record without an etcd lease never expires",
        ));
    }
    Ok(record)
}

impl State {
    /// Records what a response showed; older observations never overwrite newer ones.
    pub(crate) fn observe(&mut self, name: &LeaseName, snap: &Snapshot, decoded: &Decoded) {
        let record = match &decoded.record {
            None => RecordSeen::Absent,
            Some((version, _, r)) => RecordSeen::Present {
                version: *version,
                record: r.as_ref().ok().cloned(),
            },
        };
        let fence = decoded.fence.as_ref().ok().copied().unwrap_or(FenceSeen::Unknown);
        self.learn(name, snap.rev, record, fence);
        // A held entry whose record was replaced or deleted by someone else is gone.
        if let Some(h) = self.book.get_mut(name) {
            match (h.version, &snap.record) {
                (None, Some(kv)) if kv.bytes == h.bytes => {
                    h.version = Some(kv.version);
                    h.seen_at = snap.rev;
                }
                (Some(v), Some(kv)) if kv.version == v => h.seen_at = h.seen_at.max(snap.rev),
                (Some(_), _) if snap.rev >= h.seen_at => {
                    self.unhold(name);
                }
                _ => {}
            }
        }
    }

    /// Records a record-key change seen on a watch at revision `rev` (`None`: deleted).
    pub(crate) fn observe_event(&mut self, name: &LeaseName, rev: i64, kv: Option<&RecordKv>) {
        let record = match kv {
            None => RecordSeen::Absent,
            Some(kv) => RecordSeen::Present {
                version: kv.version,
                record: decode_record(name, kv).ok(),
            },
        };
        // A grant writes the fence with the record's token in the same transaction.
        let fence_floor = match &record {
            RecordSeen::Present { record: Some(r), .. } => Some(r.token.get()),
            _ => None,
        };
        let fence = match (self.known.get(name).map(|k| k.fence), fence_floor) {
            (Some(FenceSeen::Value(f)), Some(t)) => FenceSeen::Value(f.max(t)),
            (Some(FenceSeen::Absent), Some(t)) => FenceSeen::Value(t),
            (Some(f), _) => f,
            (None, _) => FenceSeen::Unknown,
        };
        self.learn(name, rev, record, fence);
        if let Some(h) = self.book.get(name) {
            let replaced = match (h.version, kv) {
                (Some(v), Some(kv)) => kv.version != v,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if replaced && rev >= h.seen_at {
                self.unhold(name);
            }
        }
    }

    fn learn(&mut self, name: &LeaseName, rev: i64, record: RecordSeen, fence: FenceSeen) {
        // Kept apart from `known` (which may be cleared or forgotten): a held write in
        // flight must learn of any change made after it ([`State::hold`]).
        if let Some(p) = self.pending.get_mut(name) {
            if p.newest.is_none_or(|(at, _)| at < rev) {
                let version = match &record {
                    RecordSeen::Absent => None,
                    RecordSeen::Present { version, .. } => Some(*version),
                };
                p.newest = Some((rev, version));
            }
        }
        if self.known.len() >= MAX_KNOWN && !self.known.contains_key(name) {
            self.known.clear();
        }
        match self.known.get_mut(name) {
            Some(k) if k.rev > rev => {}
            Some(k) => {
                k.rev = rev;
                k.record = record;
                if fence != FenceSeen::Unknown {
                    k.fence = fence;
                }
            }
            None => {
                self.known.insert(name.clone(), Known { rev, record, fence });
            }
        }
    }

    /// Forgets what was known of a name (after a write whose outcome is unknown).
    pub(crate) fn forget(&mut self, name: &LeaseName) {
        self.known.remove(name);
    }

    pub(crate) fn known(&self, name: &LeaseName) -> Option<&Known> {
        self.known.get(name)
    }

    /// Records a write this store made at revision `rev`; `issued` when the write was a
    /// claim that set the fence counter to the record's token.
    pub(crate) fn wrote(&mut self, name: &LeaseName, rev: i64, record: &LeaseRecord, issued: bool) {
        let t = record.token.get();
        let fence = if issued {
            FenceSeen::Value(t)
        } else {
            // Explicit-token writes raise the counter to at least their token.
            match self.known.get(name).map(|k| k.fence) {
                Some(FenceSeen::Value(f)) => FenceSeen::Value(f.max(t)),
                Some(FenceSeen::Absent) => FenceSeen::Value(t),
                _ => FenceSeen::Unknown,
            }
        };
        self.learn(
            name,
            rev,
            RecordSeen::Present {
                version: rev,
                record: Some(record.clone()),
            },
            fence,
        );
    }

    /// Records that the record key was deleted at revision `rev`.
    pub(crate) fn deleted(&mut self, name: &LeaseName, rev: i64) {
        self.learn(name, rev, RecordSeen::Absent, FenceSeen::Unknown);
        if let Some(h) = self.book.get(name) {
            if h.version.is_some() && rev >= h.seen_at {
                self.unhold(name);
            }
        }
    }

    /// The compares of a claim on `name` and the token it issues.
    pub(crate) fn claim(&self, name: &LeaseName, now: Instant) -> Claim {
        let Some(k) = self.known.get(name) else {
            return Claim {
                record: RecordCmp::Absent,
                fence: None,
                token: Some(FencingToken::FIRST),
            };
        };
        let (record, record_token) = match &k.record {
            RecordSeen::Present {
                version,
                record: Some(r),
            } if r.is_vacant() || self.own_expired(name, *version, now) => (RecordCmp::At(*version), r.token.get()),
            // Absent, corrupt (the claim then fails and reports it), or held by someone
            // (it may have expired since: try as absent).
            _ => (RecordCmp::Absent, 0),
        };
        let fence = match k.fence {
            FenceSeen::Value(f) => Some(f),
            FenceSeen::Absent | FenceSeen::Unknown => None,
        };
        Claim {
            record,
            fence,
            token: FencingToken::new(fence.unwrap_or(0).max(record_token)).checked_next(),
        }
    }

    /// True when this store holds `name` at `version` and that record has expired.
    pub(crate) fn own_expired(&self, name: &LeaseName, version: i64, now: Instant) -> bool {
        self.book.own_expired(name, version, now)
    }

    /// The held entry of `name`.
    #[cfg(test)]
    pub(crate) fn held(&self, name: &LeaseName) -> Option<&Held> {
        self.book.get(name)
    }

    /// True while this store holds any record.
    pub(crate) fn holds_any(&self) -> bool {
        !self.book.is_empty()
    }

    /// Registers a write in flight on `name` that may make this store its holder, before
    /// it is sent: from now until [`State::end_write`], every change seen of the record
    /// (on the held-record watch too: [`State::watches`]) is kept for [`State::hold`].
    pub(crate) fn begin_write(&mut self, name: &LeaseName) {
        self.pending.entry(name.clone()).or_default().writes += 1;
    }

    /// A write registered with [`State::begin_write`] finished.
    pub(crate) fn end_write(&mut self, name: &LeaseName) {
        if let Some(p) = self.pending.get_mut(name) {
            p.writes = p.writes.saturating_sub(1);
            if p.writes == 0 {
                self.pending.remove(name);
            }
        }
    }

    /// True when the held-record watch's events on `name` matter: the store holds it, or
    /// has a held write on it in flight. Others are ignored.
    pub(crate) fn watches(&self, name: &LeaseName) -> bool {
        self.book.get(name).is_some() || self.pending.contains_key(name)
    }

    /// The names whose changes the held-record watch must not miss ([`State::watches`]).
    pub(crate) fn watched_names(&self) -> Vec<LeaseName> {
        let mut names: Vec<LeaseName> = self.book.names().cloned().collect();
        names.extend(self.pending.keys().filter(|n| self.book.get(n).is_none()).cloned());
        names
    }

    /// `name`'s record may have changed unseen (a re-read after the held-record watch
    /// lost events failed): its held entry, and the one a write in flight registers,
    /// are renewed with a transaction next time. They still expire at their deadlines.
    pub(crate) fn unconfirm(&mut self, name: &LeaseName) {
        if self.book.get(name).is_some() {
            self.unconfirmed.insert(name.clone());
        }
        if let Some(p) = self.pending.get_mut(name) {
            p.unsure = true;
        }
    }

    /// The held entry of `name` if its renewal needs no request: held, and not
    /// [unconfirmed](State::unconfirm).
    pub(crate) fn renewable(&self, name: &LeaseName) -> Option<&Held> {
        self.book.get(name).filter(|_| !self.unconfirmed.contains(name))
    }

    /// Stores a held entry and schedules its expiry ([`SessionBook::hold`]); false when
    /// it was refused.
    ///
    /// A confirmed entry (a write applied at revision `v`) is refused when something
    /// seen of the record at a later revision is not that record (deleted, or another
    /// mod revision): someone changed it after the write, perhaps before the write was
    /// registered here, where the held-record watch ignored the change. The store then
    /// ends as if the change came just after the registration (registered, then dropped:
    /// an entry it replaced is kept as an orphan as usual), and the holder's first
    /// renewal is a transaction that finds the change. An entry registered while a
    /// re-read of the record failed ([`State::unconfirm`]) is registered unconfirmed.
    pub(crate) fn hold(&mut self, name: &LeaseName, held: Held) -> bool {
        let pending = self.pending.get(name);
        let changed = held.version.is_some_and(|v| {
            let after = |seen: Option<(i64, Option<i64>)>| seen.is_some_and(|(at, s)| at > v && s != Some(v));
            let known = self.known.get(name).map(|k| {
                let version = match &k.record {
                    RecordSeen::Absent => None,
                    RecordSeen::Present { version, .. } => Some(*version),
                };
                (k.rev, version)
            });
            after(pending.and_then(|p| p.newest)) || after(known)
        });
        let unsure = pending.is_some_and(|p| p.unsure);
        self.book.hold(name, held);
        if changed {
            self.book.unhold(name);
            self.unconfirmed.remove(name);
            return false;
        }
        if unsure {
            self.unconfirmed.insert(name.clone());
        } else {
            self.unconfirmed.remove(name);
        }
        true
    }

    /// Drops the held entry of `name` (released, deleted, replaced by a vacant record).
    pub(crate) fn unhold(&mut self, name: &LeaseName) {
        self.book.unhold(name);
        self.unconfirmed.remove(name);
    }

    /// Extends the held entry of `name` at `version` to `deadline`; false if it is gone,
    /// changed or expired.
    pub(crate) fn extend(&mut self, name: &LeaseName, version: i64, call: Instant, deadline: Instant) -> bool {
        self.book.extend(name, version, call, deadline)
    }

    /// Drops every held entry on a session etcd says is gone (its records were deleted).
    pub(crate) fn session_gone(&mut self, session: i64) {
        for name in self.book.session_gone(session) {
            if let Some(k) = self.known.get_mut(&name) {
                k.record = RecordSeen::Absent;
            }
            self.unconfirmed.remove(&name);
        }
    }

    /// Takes the expiries due at `now` and returns when the next one is due.
    pub(crate) fn take_due(&mut self, now: Instant) -> (Vec<Reap>, Option<Instant>) {
        self.book.take_due(now)
    }

    /// An expiry delete finished; a failed one is retried at `retry_at`. Only a delete
    /// that applied says the record is absent: one whose compare failed found it
    /// replaced by something it did not read.
    pub(crate) fn reaped(&mut self, reap: &Reap, outcome: Reaped, retry_at: Instant) {
        self.book.expired(reap, outcome != Reaped::Failed, retry_at);
        if self.book.get(&reap.name).is_none() {
            self.unconfirmed.remove(&reap.name);
        }
        if let (Reaped::Deleted(rev), false) = (outcome, reap.orphan) {
            self.learn(&reap.name, rev, RecordSeen::Absent, FenceSeen::Unknown);
        }
    }

    /// The time left of a present record as this store can tell it.
    pub(crate) fn remaining(&self, name: &LeaseName, version: i64, record: &LeaseRecord, now: Instant) -> Duration {
        if record.is_vacant() {
            return Duration::ZERO;
        }
        // Held through another session: a present key means that session is alive
        // (etcd deletes the keys of an expired one). How long it stays alive is not
        // known without a LeaseTimeToLive round trip; the record's TTL is the holder's
        // own renewal horizon, a positive estimate.
        self.book
            .remaining(name, version, now)
            .unwrap_or_else(|| record.ttl.get())
    }

    /// A present record as a [`Stored`].
    pub(crate) fn stored(&self, name: &LeaseName, version: i64, record: LeaseRecord, now: Instant) -> Stored {
        let remaining = self.remaining(name, version, &record, now);
        Stored::new(record, version_of(version)).with_remaining(Some(remaining))
    }
}

/// A revision as a [`Version`].
pub(crate) fn version_of(rev: i64) -> Version {
    Version::new(rev.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_core::{HolderId, Ttl};

    fn name() -> LeaseName {
        LeaseName::new("n").unwrap_or_else(|e| panic!("{e}"))
    }

    fn rec(holder: Option<&str>, token: u64) -> LeaseRecord {
        LeaseRecord {
            holder: holder.map(|h| HolderId::new(h).unwrap_or_else(|e| panic!("{e}"))),
            token: FencingToken::new(token),
            ttl: Ttl::from_millis(1000).unwrap_or_else(|e| panic!("{e}")),
            wall_expires_at_ms: None,
        }
    }

    fn snap(rev: i64, record: Option<(i64, &LeaseRecord)>, fence: Option<u64>) -> Snapshot {
        Snapshot {
            rev,
            record: record.map(|(v, r)| RecordKv {
                version: v,
                lease: i64::from(!r.is_vacant()),
                bytes: record_codec::encode(r),
            }),
            fence: fence.map(|f| crate::keys::encode_fence(FencingToken::new(f))),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn claims_follow_what_was_seen() {
        let n = name();
        let now = Instant::now();
        let mut st = State::default();
        // Never seen: absent record, absent fence, token 1.
        assert_eq!(
            st.claim(&n, now),
            Claim {
                record: RecordCmp::Absent,
                fence: None,
                token: Some(FencingToken::FIRST)
            }
        );
        // A vacant record with token 4 and fence 4: claim it at its version with token 5.
        let vacant = rec(None, 4);
        let s = snap(10, Some((9, &vacant)), Some(4));
        let d = decode(&n, &s);
        st.observe(&n, &s, &d);
        assert_eq!(
            st.claim(&n, now),
            Claim {
                record: RecordCmp::At(9),
                fence: Some(4),
                token: Some(FencingToken::new(5))
            }
        );
        // An older observation does not overwrite it.
        let held = rec(Some("x"), 3);
        let old = snap(8, Some((7, &held)), Some(3));
        st.observe(&n, &old, &decode(&n, &old));
        assert_eq!(st.claim(&n, now).record, RecordCmp::At(9));
        // Held by someone else: try as absent, fence as seen.
        let s = snap(11, Some((11, &rec(Some("y"), 5))), Some(5));
        st.observe(&n, &s, &decode(&n, &s));
        assert_eq!(
            st.claim(&n, now),
            Claim {
                record: RecordCmp::Absent,
                fence: Some(5),
                token: Some(FencingToken::new(6))
            }
        );
        // A watch shows it deleted: still absent, same fence.
        st.observe_event(&n, 12, None);
        assert_eq!(st.claim(&n, now).token, Some(FencingToken::new(6)));
        // A fence at the last token: nothing left to issue.
        let s = snap(13, None, Some(FencingToken::MAX.get()));
        st.observe(&n, &s, &decode(&n, &s));
        assert_eq!(st.claim(&n, now).token, None);
    }

    fn kv(version: i64, r: &LeaseRecord) -> RecordKv {
        RecordKv {
            version,
            lease: i64::from(!r.is_vacant()),
            bytes: record_codec::encode(r),
        }
    }

    /// The held entry a write applied at `rev` registers (a 1 s record).
    fn held_at(rev: i64, r: &LeaseRecord, now: Instant) -> Held {
        let session = std::sync::Arc::new(Session::new(1, Duration::from_secs(1), now));
        Held::new(
            Some(rev),
            record_codec::encode(r),
            r.clone(),
            session,
            now + Duration::from_secs(1),
            rev,
        )
    }

    fn named(n: &str) -> LeaseName {
        LeaseName::new(n).unwrap_or_else(|e| panic!("{e}"))
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_after_a_held_write_keeps_it_from_being_registered() {
        let now = Instant::now();
        let mine = rec(Some("me"), 1);
        let theirs = rec(Some("operator"), 100);
        let mut st = State::default();
        // Names the store never touched: the held-record watch ignores their events.
        let untouched = named("untouched");
        assert!(!st.watches(&untouched));

        // A put seen before the write's own response is handled (at 11, the write
        // applied at 10): refused, and the first renewal is a Txn.
        let a = named("a");
        st.begin_write(&a);
        assert!(st.watches(&a), "a name with a held write in flight is watched");
        st.observe_event(&a, 11, Some(&kv(11, &theirs)));
        st.wrote(&a, 10, &mine, true);
        assert!(!st.hold(&a, held_at(10, &mine, now)));
        assert!(st.held(&a).is_none() && st.renewable(&a).is_none());
        st.end_write(&a);

        // A delete seen after the response but before the registration: refused.
        let b = named("b");
        st.begin_write(&b);
        st.wrote(&b, 10, &mine, true);
        st.observe_event(&b, 11, None);
        assert!(!st.hold(&b, held_at(10, &mine, now)));
        assert!(st.held(&b).is_none());
        st.end_write(&b);

        // Seen even when the cache forgot it since (an unknown write, or a full cache).
        let c = named("c");
        st.begin_write(&c);
        st.observe_event(&c, 11, Some(&kv(11, &theirs)));
        st.forget(&c);
        st.wrote(&c, 10, &mine, true);
        assert!(!st.hold(&c, held_at(10, &mine, now)));
        st.end_write(&c);

        // The write's own event, an older change and a later read of the record: held.
        let d = named("d");
        st.begin_write(&d);
        st.observe_event(&d, 9, None);
        st.observe_event(&d, 10, Some(&kv(10, &mine)));
        st.wrote(&d, 10, &mine, true);
        let s = snap(12, Some((10, &mine)), Some(1));
        st.observe(&d, &s, &decode(&d, &s));
        assert!(st.hold(&d, held_at(10, &mine, now)));
        assert!(st.renewable(&d).is_some());
        st.end_write(&d);
        assert!(st.watches(&d), "a held name is watched");
        assert!(!st.watches(&a), "a name is not watched once its write ended unheld");
    }

    #[tokio::test(start_paused = true)]
    async fn an_unconfirmed_entry_is_renewed_with_a_txn_and_still_expires() {
        let now = Instant::now();
        let mine = rec(Some("me"), 1);
        let mut st = State::default();
        let a = named("a");
        assert!(st.hold(&a, held_at(10, &mine, now)));
        st.unconfirm(&a);
        assert!(st.renewable(&a).is_none(), "an unconfirmed entry is renewed with a Txn");
        assert!(st.held(&a).is_some(), "an unconfirmed entry is still held");
        let (due, _) = st.take_due(now + Duration::from_secs(1));
        assert_eq!(due.len(), 1, "an unconfirmed entry still expires");
        // A write registered while a re-read of its record failed is unconfirmed too.
        let b = named("b");
        st.begin_write(&b);
        st.unconfirm(&b);
        assert!(st.hold(&b, held_at(20, &mine, now)));
        assert!(st.held(&b).is_some() && st.renewable(&b).is_none());
        st.end_write(&b);
        // The Txn that renews it confirms it.
        assert!(st.hold(&b, held_at(21, &mine, now)));
        assert!(st.renewable(&b).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn only_an_expiry_delete_that_applied_says_the_record_is_gone() {
        let now = Instant::now();
        let mine = rec(Some("me"), 1);
        let mut st = State::default();
        let a = named("a");
        st.wrote(&a, 10, &mine, true);
        assert!(st.hold(&a, held_at(10, &mine, now)));
        let (due, _) = st.take_due(now + Duration::from_secs(1));
        let reap = due.first().cloned().unwrap_or_else(|| panic!("nothing due"));
        // Its compare failed at 12: the record is something else, not read.
        st.reaped(&reap, Reaped::Replaced, now);
        assert!(st.held(&a).is_none());
        assert!(
            matches!(
                st.known(&a).map(|k| &k.record),
                Some(RecordSeen::Present { version: 10, .. })
            ),
            "{:?}",
            st.known(&a)
        );
        // One that applied at 12.
        st.reaped(&reap, Reaped::Deleted(12), now);
        assert!(matches!(
            st.known(&a).map(|k| (k.rev, &k.record)),
            Some((12, RecordSeen::Absent))
        ));
    }

    #[test]
    fn corrupt_values_are_errors() {
        let n = name();
        let s = Snapshot {
            rev: 1,
            record: Some(RecordKv {
                version: 1,
                lease: 0,
                bytes: b"garbage".to_vec(),
            }),
            fence: Some(b"x".to_vec()),
        };
        let d = decode(&n, &s);
        assert!(matches!(d.record, Some((1, 0, Err(_)))));
        assert!(d.fence.is_err());
    }
}
