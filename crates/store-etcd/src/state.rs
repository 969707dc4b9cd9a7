//! What a store remembers between requests: the last state it saw of each name (to
//! predict the compares of a claim so it usually costs one transaction), and the held
//! records it wrote itself (renewed without a transaction, deleted when their holder
//! stops renewing them).
//!
//! Everything here is a cache of etcd's truth except the held records' deadlines, which
//! are this process's promise to its own holders. Forgetting any of it is safe: a wrong
//! prediction costs one more transaction, never a wrong grant (etcd's compares decide).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::KeyValue;
use leasehold_core::{
    FencingToken, LeaseName, Result,
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

/// A held record this store wrote, attached to one of its sessions.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    /// Its mod revision; `None` while the write's outcome is unknown.
    pub(crate) version: Option<i64>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) record: LeaseRecord,
    pub(crate) session: Arc<Session>,
    /// When the record expires unless renewed (this process's monotonic clock).
    pub(crate) deadline: Instant,
    /// The revision at which this entry was last confirmed.
    pub(crate) rev: i64,
    /// An expiry delete is in flight.
    pub(crate) reaping: bool,
}

impl Held {
    pub(crate) fn expired(&self, now: Instant) -> bool {
        self.reaping || self.deadline <= now
    }
}

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
    pub(crate) token: FencingToken,
}

/// An expiry delete the reaper must send.
#[derive(Debug, Clone)]
pub(crate) struct Reap {
    pub(crate) name: LeaseName,
    pub(crate) version: Option<i64>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) session: i64,
    /// A record no held entry stands for any more (see [`State::hold`]).
    pub(crate) orphan: bool,
}

/// The store's memory.
#[derive(Debug, Default)]
pub(crate) struct State {
    known: HashMap<LeaseName, Known>,
    held: HashMap<LeaseName, Held>,
    schedule: BTreeSet<(Instant, u64, LeaseName)>,
    /// Records that may exist on this store's sessions although no held entry stands for
    /// them any more, with their deadlines: deleted then (guarded), like abandoned ones.
    orphans: Vec<(Instant, Reap)>,
    seq: u64,
}

/// A decoded snapshot.
#[derive(Debug)]
pub(crate) struct Decoded {
    /// `(version, lease, record)`; the record is an error when it does not decode.
    pub(crate) record: Option<(i64, i64, Result<LeaseRecord>)>,
    pub(crate) fence: Result<FenceSeen>,
}

pub(crate) fn decode(name: &LeaseName, snap: &Snapshot) -> Decoded {
    Decoded {
        record: snap
            .record
            .as_ref()
            .map(|kv| (kv.version, kv.lease, record_codec::decode(name, &kv.bytes))),
        fence: match &snap.fence {
            None => Ok(FenceSeen::Absent),
            Some(b) => decode_fence(name, b).map(|t| FenceSeen::Value(t.get())),
        },
    }
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
        if let Some(h) = self.held.get_mut(name) {
            match (h.version, &snap.record) {
                (None, Some(kv)) if kv.bytes == h.bytes => {
                    h.version = Some(kv.version);
                    h.rev = snap.rev;
                }
                (Some(v), Some(kv)) if kv.version == v => h.rev = h.rev.max(snap.rev),
                (Some(_), _) if snap.rev >= h.rev => {
                    self.held.remove(name);
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
                record: record_codec::decode(name, &kv.bytes).ok(),
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
        if let Some(h) = self.held.get(name) {
            let replaced = match (h.version, kv) {
                (Some(v), Some(kv)) => kv.version != v,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if replaced && rev >= h.rev {
                self.held.remove(name);
            }
        }
    }

    fn learn(&mut self, name: &LeaseName, rev: i64, record: RecordSeen, fence: FenceSeen) {
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
        if let Some(h) = self.held.get(name) {
            if h.version.is_some() && rev >= h.rev {
                self.held.remove(name);
            }
        }
    }

    /// The compares of a claim on `name` and the token it issues.
    pub(crate) fn claim(&self, name: &LeaseName, now: Instant) -> Claim {
        let Some(k) = self.known.get(name) else {
            return Claim {
                record: RecordCmp::Absent,
                fence: None,
                token: FencingToken::FIRST,
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
            token: FencingToken::new(fence.unwrap_or(0).max(record_token)).next(),
        }
    }

    /// True when this store holds `name` at `version` and that record has expired.
    pub(crate) fn own_expired(&self, name: &LeaseName, version: i64, now: Instant) -> bool {
        self.held
            .get(name)
            .is_some_and(|h| h.version == Some(version) && h.expired(now))
    }

    /// The held entry of `name`.
    pub(crate) fn held(&self, name: &LeaseName) -> Option<&Held> {
        self.held.get(name)
    }

    /// Stores a held entry and schedules its expiry.
    ///
    /// An entry it replaces that stands for another record (a write whose outcome is
    /// unknown, replaced by a later attempt's) is kept as an orphan: that record may be on
    /// one of this store's sessions, which live as long as the store, so it is deleted at
    /// its deadline unless it has been replaced by then (the delete compares it).
    pub(crate) fn hold(&mut self, name: &LeaseName, held: Held) {
        self.seq += 1;
        self.schedule.insert((held.deadline, self.seq, name.clone()));
        // An orphan with these very bytes is this record now (a retried write): it must
        // not be deleted at the old deadline.
        self.orphans
            .retain(|(_, r)| !(r.name == *name && r.bytes == held.bytes && r.session == held.session.id));
        let replaced = self
            .held
            .get(name)
            .filter(|old| old.bytes != held.bytes || old.session.id != held.session.id)
            .map(|old| {
                let reap = Reap {
                    name: name.clone(),
                    version: old.version,
                    bytes: old.bytes.clone(),
                    session: old.session.id,
                    orphan: true,
                };
                (old.deadline, reap)
            });
        self.orphans.extend(replaced);
        self.held.insert(name.clone(), held);
    }

    /// Drops the held entry of `name` (released, deleted, replaced by a vacant record).
    pub(crate) fn unhold(&mut self, name: &LeaseName) {
        self.held.remove(name);
    }

    /// Extends the held entry of `name` at `version` to `deadline`; false if it is gone,
    /// changed or expired.
    pub(crate) fn extend(&mut self, name: &LeaseName, version: i64, call: Instant, deadline: Instant) -> bool {
        let Some(h) = self.held.get_mut(name) else {
            return false;
        };
        if h.version != Some(version) || h.expired(call) || h.session.is_dead() {
            return false;
        }
        if deadline > h.deadline {
            h.deadline = deadline;
            self.seq += 1;
            self.schedule.insert((deadline, self.seq, name.clone()));
        }
        true
    }

    /// Drops every held entry on a session etcd says is gone (its records were deleted).
    pub(crate) fn session_gone(&mut self, session: i64) {
        let gone: Vec<LeaseName> = self
            .held
            .iter()
            .filter(|(_, h)| h.session.id == session)
            .map(|(n, _)| n.clone())
            .collect();
        self.orphans.retain(|(_, r)| r.session != session);
        for name in gone {
            self.held.remove(&name);
            if let Some(k) = self.known.get_mut(&name) {
                k.record = RecordSeen::Absent;
            }
        }
    }

    /// Takes the expiries due at `now` (marking them in flight) and returns when the
    /// next one is due.
    pub(crate) fn take_due(&mut self, now: Instant) -> (Vec<Reap>, Option<Instant>) {
        let (ripe, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.orphans)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.orphans = waiting;
        let mut due: Vec<Reap> = ripe.into_iter().map(|(_, r)| r).collect();
        let next_orphan = self.orphans.iter().map(|(t, _)| *t).min();
        while let Some((t, seq, name)) = self.schedule.first().cloned() {
            if t > now {
                return (due, Some(next_orphan.map_or(t, |o| o.min(t))));
            }
            self.schedule.remove(&(t, seq, name.clone()));
            let Some(h) = self.held.get_mut(&name) else { continue };
            if h.reaping || h.deadline > now {
                continue;
            }
            h.reaping = true;
            due.push(Reap {
                name,
                version: h.version,
                bytes: h.bytes.clone(),
                session: h.session.id,
                orphan: false,
            });
        }
        (due, next_orphan)
    }

    /// An expiry delete finished: `Some(rev)` if it deleted the record (or found it
    /// already replaced), `None` if it must be retried at `retry_at`.
    pub(crate) fn reaped(&mut self, reap: &Reap, done: Option<i64>, retry_at: Instant) {
        if reap.orphan {
            if done.is_none() {
                self.orphans.push((retry_at, reap.clone()));
            }
            return;
        }
        match done {
            Some(rev) => {
                if self
                    .held
                    .get(&reap.name)
                    .is_some_and(|h| h.reaping && h.bytes == reap.bytes)
                {
                    self.held.remove(&reap.name);
                }
                self.learn(&reap.name, rev, RecordSeen::Absent, FenceSeen::Unknown);
            }
            None => {
                if let Some(h) = self.held.get_mut(&reap.name) {
                    if h.reaping && h.bytes == reap.bytes {
                        h.reaping = false;
                        self.seq += 1;
                        self.schedule.insert((retry_at, self.seq, reap.name.clone()));
                    }
                }
            }
        }
    }

    /// The time left of a present record as this store can tell it.
    pub(crate) fn remaining(&self, name: &LeaseName, version: i64, record: &LeaseRecord, now: Instant) -> Duration {
        if record.is_vacant() {
            return Duration::ZERO;
        }
        match self.held.get(name) {
            Some(h) if h.version == Some(version) => {
                if h.expired(now) {
                    Duration::ZERO
                } else {
                    h.deadline.saturating_duration_since(now)
                }
            }
            // Held through another session: a present key means that session is alive
            // (etcd deletes the keys of an expired one). How long it stays alive is not
            // known without a LeaseTimeToLive round trip; the record's TTL is the
            // holder's own renewal horizon, a positive estimate.
            _ => record.ttl.get(),
        }
    }

    /// A present record as a [`Stored`].
    pub(crate) fn stored(&self, name: &LeaseName, version: i64, record: LeaseRecord, now: Instant) -> Stored {
        let remaining = self.remaining(name, version, &record, now);
        Stored {
            record,
            version: version_of(version),
            remaining: Some(remaining),
        }
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
                lease: 0,
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
                token: FencingToken::FIRST
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
                token: FencingToken::new(5)
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
                token: FencingToken::new(6)
            }
        );
        // A watch shows it deleted: still absent, same fence.
        st.observe_event(&n, 12, None);
        assert_eq!(st.claim(&n, now).token, FencingToken::new(6));
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

    #[tokio::test(start_paused = true)]
    async fn a_replaced_entry_is_deleted_at_its_deadline_unless_rewritten() {
        let n = name();
        let t0 = Instant::now();
        let session = Arc::new(Session::new(7, Duration::from_secs(2), t0));
        let pending = |holder: &str, deadline_ms: u64| Held {
            version: None,
            bytes: record_codec::encode(&rec(Some(holder), 1)),
            record: rec(Some(holder), 1),
            session: session.clone(),
            deadline: t0 + Duration::from_millis(deadline_ms),
            rev: 0,
            reaping: false,
        };
        let mut st = State::default();
        st.hold(&n, pending("first", 1000));
        // A second attempt replaces the first: the first's record (if it applied) is an
        // orphan, due at the first's deadline, not before.
        st.hold(&n, pending("second", 1500));
        let (due, next) = st.take_due(t0 + Duration::from_millis(999));
        assert!(due.is_empty());
        assert_eq!(next, Some(t0 + Duration::from_millis(1000)));
        let (due, _) = st.take_due(t0 + Duration::from_millis(1000));
        assert_eq!(due.len(), 1);
        assert!(due[0].orphan && due[0].bytes == pending("first", 0).bytes && due[0].session == 7);
        // A failed delete is retried.
        st.reaped(&due[0], None, t0 + Duration::from_millis(1200));
        assert_eq!(
            st.take_due(t0 + Duration::from_millis(1100)).1,
            Some(t0 + Duration::from_millis(1200))
        );
        // The same bytes written again (a retry that applied) are no orphan any more.
        st.hold(&n, pending("first", 3000));
        let (due, _) = st.take_due(t0 + Duration::from_millis(1200));
        assert!(
            due.iter().all(|r| r.bytes != pending("first", 0).bytes || !r.orphan),
            "{due:?}"
        );
        // Orphans on a session etcd says is gone were deleted by etcd.
        st.hold(&n, pending("third", 4000));
        st.session_gone(7);
        assert!(st.orphans.is_empty());
    }
}
