//! An in-memory store that behaves like the real ones.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::store::{
    Capabilities, CasOutcome, ClockSource, Current, DeleteOutcome, Grade, Precondition, Renewal, Wait, WakeHub,
};
use crate::{
    Error, LeaseName, NamePrefix, Result,
    store::{CasStore, LeaseRecord, Linearizable, Stored, Version, record_codec},
};

#[derive(Debug)]
struct Entry {
    body: Body,
    version: u64,
    expires_at: Instant,
}

/// What an entry holds.
#[derive(Debug)]
enum Body {
    /// A record this store wrote, kept as it is (its encoding would only decode back to
    /// it).
    Record(LeaseRecord),
    /// Bytes another program wrote ([`MemoryStore::put_raw`]), decoded on every look: a
    /// corrupt one is a typed error.
    Raw(Vec<u8>),
}

impl Entry {
    fn record(&self, name: &LeaseName) -> Result<Cow<'_, LeaseRecord>> {
        match &self.body {
            Body::Record(r) => Ok(Cow::Borrowed(r)),
            Body::Raw(bytes) => record_codec::decode(name, bytes).map(Cow::Owned),
        }
    }

    /// Whether `v` is this entry's version (the decimal digits of it, nothing else).
    fn is_at(&self, v: &Version) -> bool {
        let s = v.as_str();
        s.bytes().all(|b| b.is_ascii_digit())
            && (s == "0" || !s.starts_with('0'))
            && s.parse::<u64>().is_ok_and(|n| n == self.version)
    }
}

/// A change to announce to waiters once the state's lock is let go.
struct Announce {
    version: u64,
    vacant: bool,
    renewal: bool,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<LeaseName, Entry>,
    /// Highest token ever stored per name, so `Claimable` never reissues one, even
    /// after an administrative delete.
    issued: HashMap<LeaseName, u64>,
    next_version: u64,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the waiters of a change (a renewal is not one).
    hub: WakeHub,
    clock: ClockSource,
    returns_current: bool,
}

/// Lease records in process memory, for tests and single-process use.
///
/// It copies the real stores' behaviour so tests on it mean something: versions are
/// never reused, bytes planted by [`MemoryStore::put_raw`] are decoded on every look (so
/// a corrupt one is a typed error), conflicts report the current record (or not,
/// [`MemoryStore::without_current_on_conflict`]), expiry follows Tokio's clock (so
/// paused-time tests are exact), and each change wakes its waiters: every observer, and
/// one acquirer per release ([`crate::store::WakeHub`]; a renewal wakes nobody when the
/// store keeps time). Clones share the same records.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use leasehold_core::{HolderId, LeaseName, MemoryStore, Ttl, FencingToken, store::{CasOutcome, CasStore, LeaseRecord, Precondition}};
/// let store = MemoryStore::new();
/// let name = LeaseName::new("a")?;
/// let rec = LeaseRecord::held(HolderId::new("w1")?, FencingToken::FIRST, Ttl::from_millis(1000)?);
/// assert!(matches!(store.write(&name, &Precondition::Absent, &rec).await?, CasOutcome::Written(_)));
/// assert!(matches!(store.write(&name, &Precondition::Absent, &rec).await?, CasOutcome::Conflict(_)));
/// # Ok::<(), leasehold_core::Error>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct MemoryStore {
    shared: Arc<Shared>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// How many renewals one [`CasStore::renew_many`] call takes (the driver batches
    /// renewals that come due together, as it does for the SQL stores).
    pub const RENEWAL_BATCH: usize = 256;

    /// A store that keeps time itself, like SQL, Redis and etcd.
    pub fn new() -> Self {
        Self::with(ClockSource::Store, true)
    }

    /// A store without a clock, like S3 and DynamoDB: expiry is judged by observation.
    pub fn observation() -> Self {
        Self::with(ClockSource::Observation, true)
    }

    /// The same records, but conflicts no longer report the current record (like a
    /// store that cannot return it in the same round trip).
    #[must_use]
    pub fn without_current_on_conflict(&self) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                hub: WakeHub::new(),
                clock: self.shared.clock,
                returns_current: false,
            }),
        }
    }

    fn with(clock: ClockSource, returns_current: bool) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                hub: WakeHub::new(),
                clock,
                returns_current,
            }),
        }
    }

    /// Stores raw bytes under `name` as if another program had written them (for
    /// corrupt-record tests). The entry gets a fresh version and a one-minute expiry.
    pub fn put_raw(&self, name: &LeaseName, bytes: impl Into<Vec<u8>>) {
        let mut st = self.lock();
        st.next_version += 1;
        let version = st.next_version;
        st.entries.insert(
            name.clone(),
            Entry {
                body: Body::Raw(bytes.into()),
                version,
                expires_at: Instant::now() + Duration::from_secs(60),
            },
        );
        drop(st);
        self.shared.hub.announce(name.as_str(), version, false);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn stored(&self, name: &LeaseName, e: &Entry, now: Instant) -> Result<Stored> {
        let record = e.record(name)?.into_owned();
        Ok(Stored {
            record,
            version: Version::from(e.version),
            remaining: match self.shared.clock {
                ClockSource::Store => Some(e.expires_at.saturating_duration_since(now)),
                _ => None,
            },
        })
    }

    /// The write of [`CasStore::write`] on the locked state: its outcome, and the change
    /// to announce once the lock is let go.
    fn write_locked(
        &self,
        st: &mut State,
        name: &LeaseName,
        expect: &Precondition,
        record: &LeaseRecord,
        now: Instant,
    ) -> Result<(CasOutcome, Option<Announce>)> {
        let existing = st.entries.get(name);
        // The record there now, if it is one (a corrupt one is an error only where the
        // write depends on it).
        let current = existing.map(|e| e.record(name));
        // A renewal: same holder, same token.
        let renewal = matches!(&current, Some(Ok(cur))
            if cur.holder.is_some() && cur.holder == record.holder && cur.token == record.token);
        let mut record = record.clone();
        let applies = match (expect, existing) {
            (Precondition::Absent, None) => true,
            (Precondition::Absent, Some(_)) => false,
            (Precondition::Version(v), Some(e)) => e.is_at(v),
            (Precondition::Version(_), None) => false,
            (Precondition::Claimable, existing) => {
                if self.shared.clock != ClockSource::Store {
                    return Err(crate::store::not_taken("MemoryStore", expect));
                }
                let prev = match (existing, current) {
                    (Some(e), Some(cur)) => {
                        let cur = cur?;
                        Some((cur.is_vacant() || e.expires_at <= now, cur.token.get()))
                    }
                    _ => None,
                };
                let claimable = prev.is_none_or(|(free, _)| free);
                if claimable {
                    let high = st
                        .issued
                        .get(name)
                        .copied()
                        .unwrap_or(0)
                        .max(prev.map_or(0, |(_, t)| t));
                    // The counter is the store's own: at its end, the store says so.
                    record.token =
                        crate::FencingToken::new(high)
                            .checked_next()
                            .ok_or_else(|| Error::TokensExhausted {
                                name: name.as_str().to_owned(),
                            })?;
                }
                claimable
            }
            (Precondition::Vacant, None) => {
                record.token = crate::FencingToken::FIRST;
                true
            }
            (Precondition::Vacant, Some(_)) => match current {
                // A record that is not one is reported, never written over.
                Some(cur) => {
                    let cur = cur?;
                    if cur.is_vacant() {
                        record.token = cur.token.checked_next().ok_or_else(|| Error::TokensExhausted {
                            name: name.as_str().to_owned(),
                        })?;
                    }
                    cur.is_vacant()
                }
                None => false,
            },
        };
        if !applies {
            return Ok((CasOutcome::Conflict(self.current(st, name, now)?), None));
        }
        st.next_version += 1;
        let version = st.next_version;
        let token = record.token.get();
        match st.issued.get_mut(name) {
            Some(high) => *high = (*high).max(token),
            None => {
                st.issued.insert(name.clone(), token);
            }
        }
        let vacant = record.is_vacant();
        let expires_at = now + record.ttl.get();
        let entry = Entry {
            body: Body::Record(record),
            version,
            expires_at,
        };
        let stored = self.stored(name, &entry, now)?;
        match st.entries.get_mut(name) {
            Some(e) => *e = entry,
            None => {
                st.entries.insert(name.clone(), entry);
            }
        }
        let announce = Announce {
            version,
            vacant,
            renewal,
        };
        Ok((CasOutcome::Written(stored), Some(announce)))
    }

    /// Tells the waiters of a change to `name` ([`WakeHub`]).
    fn announce(&self, name: &LeaseName, a: &Announce) {
        if a.renewal && self.shared.clock == ClockSource::Store {
            // Nobody waits for a renewal where the store keeps time: a challenger learns
            // the time left from the store. By observation it must see every new
            // version to time its window from it, so there a renewal is a change.
            self.shared.hub.claimed(name.as_str(), a.version);
        } else {
            self.shared.hub.announce(name.as_str(), a.version, a.vacant);
        }
    }

    fn current(&self, st: &State, name: &LeaseName, now: Instant) -> Result<Current> {
        if !self.shared.returns_current {
            return Ok(Current::Unknown);
        }
        Ok(match st.entries.get(name) {
            None => Current::Absent,
            Some(e) => Current::Present(self.stored(name, e, now)?),
        })
    }
}

#[async_trait]
impl CasStore for MemoryStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities::new(self.shared.clock, Grade::Linearizable)
            .with_conflict_returns_current(self.shared.returns_current)
            .with_notifies_waiters(true)
            .with_claims_vacant(true)
    }

    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        let st = self.lock();
        let now = Instant::now();
        st.entries.get(name).map(|e| self.stored(name, e, now)).transpose()
    }

    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        let now = Instant::now();
        let mut st = self.lock();
        let (outcome, announce) = self.write_locked(&mut st, name, expect, record, now)?;
        drop(st);
        if let Some(a) = announce {
            self.announce(name, &a);
        }
        Ok(outcome)
    }

    /// Up to [`MemoryStore::RENEWAL_BATCH`] renewals in one call.
    fn renewal_batch(&self) -> usize {
        Self::RENEWAL_BATCH
    }

    /// One lock of the state for the whole batch; waiters are told after it.
    async fn renew_many(&self, batch: &[Renewal]) -> Vec<Result<CasOutcome>> {
        let now = Instant::now();
        let mut out = Vec::with_capacity(batch.len());
        let mut announces = Vec::new();
        let mut st = self.lock();
        for r in batch {
            let expect = Precondition::Version(r.version.clone());
            out.push(
                self.write_locked(&mut st, &r.name, &expect, &r.record, now)
                    .map(|(outcome, announce)| {
                        announces.extend(announce.map(|a| (&r.name, a)));
                        outcome
                    }),
            );
        }
        drop(st);
        for (name, a) in &announces {
            self.announce(name, a);
        }
        out
    }

    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        let now = Instant::now();
        let mut st = self.lock();
        match st.entries.get(name) {
            Some(e) if e.is_at(version) => {
                st.entries.remove(name);
                st.next_version += 1;
                let at = st.next_version;
                drop(st);
                self.shared.hub.announce_deleted(name.as_str(), at);
                Ok(DeleteOutcome::Deleted)
            }
            _ => Ok(DeleteOutcome::Conflict(self.current(&st, name, now)?)),
        }
    }

    async fn list(&self, prefix: &NamePrefix) -> Result<Vec<LeaseName>> {
        let mut names: Vec<LeaseName> = self
            .lock()
            .entries
            .keys()
            .filter(|n| prefix.matches(n))
            .cloned()
            .collect();
        names.sort_unstable();
        Ok(names)
    }

    async fn wait_for_change(&self, name: &LeaseName, seen: Option<&Version>, wait: Wait) -> Result<()> {
        let seen = seen.and_then(|v| v.as_str().parse().ok()).unwrap_or(0);
        self.shared.hub.wait(name.as_str(), seen, wait).await;
        Ok(())
    }
}

impl Linearizable for MemoryStore {}
