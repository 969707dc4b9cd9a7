//! Which names a client holds, so that it refuses to wait on itself.
//!
//! A client's acquire attempts on one name run one at a time (a per-name gate, held by
//! the attempt; a write the attempt sent and its caller then abandoned keeps it until
//! the write is settled and what it granted released, on a task of its own, so that
//! dropping the caller's future does not open it early). An attempt waiting for the
//! gate has sent nothing, and dropped there, sends nothing. The
//! attempt checks, under the gate, whether this client already holds a live grant of
//! the name, and registers its own grant before it opens the gate. So of two tasks of
//! one client acquiring one name at once, exactly one is granted and the other is told
//! [`Error::AlreadyHeld`] as soon as the first attempt is over: it never waits on a
//! lease its own client holds.
//!
//! A grant leaves the table when its guard is released or dropped, or when the lease is
//! lost (the driver ends it); a grant that ended without leaving (its deadline passed a
//! moment before the driver ran) is never counted as held.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{OwnedMutexGuard, watch};
use tokio::time::Instant;

use crate::lease::LeaseShared;
use crate::{Error, LeaseName, Result};

/// The per-client table of names held or being acquired.
#[derive(Debug)]
pub(crate) struct HeldNames {
    map: Mutex<HashMap<LeaseName, Entry>>,
    /// Bumped by every grant registered: this client's waiters look whether it was
    /// their name.
    grants: watch::Sender<u64>,
}

impl Default for HeldNames {
    fn default() -> Self {
        Self {
            map: Mutex::default(),
            grants: watch::Sender::new(0),
        }
    }
}

#[derive(Debug)]
struct Entry {
    /// Serialises this client's attempts on the name.
    gate: Arc<tokio::sync::Mutex<()>>,
    /// The grant this client holds, by lease id.
    lease: Option<(u64, Weak<LeaseShared>)>,
}

impl Entry {
    /// The grant, while it is live.
    fn live(&self) -> Option<Arc<LeaseShared>> {
        let (_, weak) = self.lease.as_ref()?;
        let shared = weak.upgrade()?;
        let live = !shared.lost.is_cancelled() && Instant::now() < shared.state().valid_until;
        live.then_some(shared)
    }

    /// True when nobody holds or waits for anything under this entry.
    fn idle(&self) -> bool {
        self.lease.is_none() && Arc::strong_count(&self.gate) == 1
    }
}

/// The error for a name this client holds.
fn already_held(shared: &LeaseShared) -> Error {
    Error::AlreadyHeld {
        name: shared.name.as_str().to_owned(),
        token: shared.token,
    }
}

impl HeldNames {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LeaseName, Entry>> {
        self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// [`Error::AlreadyHeld`] if this client holds a live grant of `name` right now
    /// (the quick check before an attempt is started).
    pub(crate) fn check(&self, name: &LeaseName) -> Result<()> {
        match self.lock().get(name).and_then(Entry::live) {
            Some(shared) => Err(already_held(&shared)),
            None => Ok(()),
        }
    }

    /// Returns once this client holds a live grant of `name` (another of its tasks was
    /// granted it while the caller waited for the holder before).
    pub(crate) async fn held_here(&self, name: &LeaseName) {
        let mut grants = self.grants.subscribe();
        while self.check(name).is_ok() {
            if grants.changed().await.is_err() {
                // Never: `self` keeps the sender.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Waits until no other attempt of this client on `name` runs, then checks that the
    /// client does not hold it. The returned gate stays closed until it is dropped.
    pub(crate) async fn enter(self: &Arc<Self>, name: &LeaseName) -> Result<Gate> {
        let gate = {
            let mut map = self.lock();
            let entry = map.entry(name.clone()).or_insert_with(|| Entry {
                gate: Arc::new(tokio::sync::Mutex::new(())),
                lease: None,
            });
            entry.gate.clone()
        };
        let guard = gate.lock_owned().await;
        let gate = Gate {
            names: self.clone(),
            name: name.clone(),
            guard: Some(guard),
        };
        let mut map = self.lock();
        if let Some(entry) = map.get_mut(name) {
            match entry.live() {
                Some(shared) => return Err(already_held(&shared)),
                // An ended grant that did not leave: forget it now.
                None => entry.lease = None,
            }
        }
        drop(map);
        Ok(gate)
    }

    /// Takes the grant `id` of `name` off the table (if it is still the one there).
    pub(crate) fn forget(&self, name: &LeaseName, id: u64) {
        let mut map = self.lock();
        if let Some(entry) = map.get_mut(name) {
            if entry.lease.as_ref().is_some_and(|(held, _)| *held == id) {
                entry.lease = None;
            }
            if entry.idle() {
                map.remove(name);
            }
        }
    }

    /// How many names are on the table (held, or with an attempt running).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// One attempt's turn on a name: registers its grant, and opens the gate when dropped.
#[derive(Debug)]
pub(crate) struct Gate {
    names: Arc<HeldNames>,
    name: LeaseName,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Gate {
    /// Records `shared` as this client's grant of the name.
    pub(crate) fn register(&self, shared: &Arc<LeaseShared>) {
        let mut map = self.names.lock();
        if let Some(entry) = map.get_mut(&self.name) {
            entry.lease = Some((shared.id, Arc::downgrade(shared)));
        }
        drop(map);
        // Only a task of this client waiting in `held_here` listens, and it subscribes
        // before it checks the table under its lock. If that check comes after the
        // update above, it finds the grant; if before, its subscription happened before
        // this lock was taken, so the count below sees it and it is told.
        if self.names.grants.receiver_count() > 0 {
            self.names.grants.send_modify(|n| *n += 1);
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        // Open the gate first, so that the entry's only other reference is the table's.
        drop(self.guard.take());
        let mut map = self.names.lock();
        if map.get(&self.name).is_some_and(Entry::idle) {
            map.remove(&self.name);
        }
    }
}
