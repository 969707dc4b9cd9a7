//! An in-memory store that behaves like the real ones.

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
    bytes: Vec<u8>,
    version: u64,
    expires_at: Instant,
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
    /// Wakes one waiter per change (a renewal is not one).
    hub: WakeHub,
    clock: ClockSource,
    returns_current: bool,
}

/// Lease records in process memory, for tests and single-process use.
///
/// It copies the real stores' behaviour so tests on it mean something: versions are
/// never reused, records are kept encoded (so a corrupt one is a typed error), conflicts
/// report the current record (or not, [`MemoryStore::without_current_on_conflict`]),
/// expiry follows Tokio's clock (so paused-time tests are exact), and each change wakes
/// one waiter ([`crate::store::WakeHub`]; a renewal wakes nobody when the store keeps time). Clones share the same
/// records.
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
                bytes: bytes.into(),
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
        let record = record_codec::decode(name, &e.bytes)?;
        Ok(Stored {
            record,
            version: Version::from(e.version),
            remaining: match self.shared.clock {
                ClockSource::Store => Some(e.expires_at.saturating_duration_since(now)),
                _ => None,
            },
        })
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
        Capabilities {
            clock: self.shared.clock,
            grade: Grade::Linearizable,
            conflict_returns_current: self.shared.returns_current,
            notifies_waiters: true,
        }
    }

    async fn read(&self, name: &LeaseName) -> Result<Option<Stored>> {
        let st = self.lock();
        let now = Instant::now();
        st.entries.get(name).map(|e| self.stored(name, e, now)).transpose()
    }

    async fn write(&self, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Result<CasOutcome> {
        let now = Instant::now();
        let mut st = self.lock();
        let existing = st.entries.get(name);
        // A renewal: same holder, same token.
        let renewal = existing
            .and_then(|e| record_codec::decode(name, &e.bytes).ok())
            .is_some_and(|cur| cur.holder.is_some() && cur.holder == record.holder && cur.token == record.token);
        let mut record = record.clone();
        let applies = match (expect, existing) {
            (Precondition::Absent, None) => true,
            (Precondition::Absent, Some(_)) => false,
            (Precondition::Version(v), Some(e)) => v.as_str() == e.version.to_string(),
            (Precondition::Version(_), None) => false,
            (Precondition::Claimable, existing) => {
                if self.shared.clock != ClockSource::Store {
                    return Err(Error::invalid(
                        "precondition",
                        "Claimable needs a store with its own clock",
                    ));
                }
                let claimable = match existing {
                    None => true,
                    Some(e) => {
                        let cur = record_codec::decode(name, &e.bytes)?;
                        cur.is_vacant() || e.expires_at <= now
                    }
                };
                if claimable {
                    let prev = existing
                        .map(|e| record_codec::decode(name, &e.bytes).map(|r| r.token.get()))
                        .transpose()?;
                    let high = st.issued.get(name).copied().unwrap_or(0).max(prev.unwrap_or(0));
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
        };
        if !applies {
            return Ok(CasOutcome::Conflict(self.current(&st, name, now)?));
        }
        st.next_version += 1;
        let version = st.next_version;
        let high = st.issued.entry(name.clone()).or_insert(0);
        *high = (*high).max(record.token.get());
        let entry = Entry {
            bytes: record_codec::encode(&record),
            version,
            expires_at: now + record.ttl.get(),
        };
        let stored = self.stored(name, &entry, now)?;
        st.entries.insert(name.clone(), entry);
        drop(st);
        if renewal && self.shared.clock == ClockSource::Store {
            // Nobody waits for a renewal where the store keeps time: a challenger learns
            // the time left from the store. By observation it must see every new
            // version to time its window from it, so there a renewal is a change.
            self.shared.hub.claimed(name.as_str(), version);
        } else {
            self.shared.hub.announce(name.as_str(), version, record.is_vacant());
        }
        Ok(CasOutcome::Written(stored))
    }

    /// Up to [`MemoryStore::RENEWAL_BATCH`] renewals in one call.
    fn renewal_batch(&self) -> usize {
        Self::RENEWAL_BATCH
    }

    async fn renew_many(&self, batch: &[Renewal]) -> Vec<Result<CasOutcome>> {
        let mut out = Vec::with_capacity(batch.len());
        for r in batch {
            out.push(self.renew(&r.name, &r.version, &r.record).await);
        }
        out
    }

    async fn delete(&self, name: &LeaseName, version: &Version) -> Result<DeleteOutcome> {
        let now = Instant::now();
        let mut st = self.lock();
        match st.entries.get(name) {
            Some(e) if e.version.to_string() == version.as_str() => {
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
