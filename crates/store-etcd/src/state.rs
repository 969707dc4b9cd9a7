//! What a store remembers between requests: the last state it saw of each name (to
//! predict the compares of a claim so it usually costs one transaction), and the held
//! records it wrote itself (renewed without a transaction, deleted when their holder
//! stops renewing them: the core's [`SessionBook`]).
//!
//! Everything here is a cache of etcd's truth except the held records' deadlines, which
//! are this process's promise to its own holders. Forgetting any of it is safe: a wrong
//! prediction costs one more transaction, never a wrong grant (etcd's compares decide).

use std::collections::HashMap;
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

/// The store's memory.
#[derive(Debug, Default)]
pub(crate) struct State {
    known: HashMap<LeaseName, Known>,
    book: SessionBook<Session, i64>,
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
                    self.book.unhold(name);
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
                self.book.unhold(name);
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
        if let Some(h) = self.book.get(name) {
            if h.version.is_some() && rev >= h.seen_at {
                self.book.unhold(name);
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
    pub(crate) fn held(&self, name: &LeaseName) -> Option<&Held> {
        self.book.get(name)
    }

    /// The names this store holds.
    pub(crate) fn held_names(&self) -> Vec<LeaseName> {
        self.book.names().cloned().collect()
    }

    /// True while this store holds any record.
    pub(crate) fn holds_any(&self) -> bool {
        !self.book.is_empty()
    }

    /// Stores a held entry and schedules its expiry ([`SessionBook::hold`]).
    pub(crate) fn hold(&mut self, name: &LeaseName, held: Held) {
        self.book.hold(name, held);
    }

    /// Drops the held entry of `name` (released, deleted, replaced by a vacant record).
    pub(crate) fn unhold(&mut self, name: &LeaseName) {
        self.book.unhold(name);
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
        }
    }

    /// Takes the expiries due at `now` and returns when the next one is due.
    pub(crate) fn take_due(&mut self, now: Instant) -> (Vec<Reap>, Option<Instant>) {
        self.book.take_due(now)
    }

    /// An expiry delete finished: `Some(rev)` if it deleted the record (or found it
    /// already replaced), `None` if it must be retried at `retry_at`.
    pub(crate) fn reaped(&mut self, reap: &Reap, done: Option<i64>, retry_at: Instant) {
        self.book.expired(reap, done.is_some(), retry_at);
        if let (Some(rev), false) = (done, reap.orphan) {
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
