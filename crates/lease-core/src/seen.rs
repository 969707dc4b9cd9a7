//! What a client last saw under each lease name, and since when.
//!
//! Observation stores judge expiry by how long one version stayed unchanged, so the
//! client remembers when it first saw each version. The cache only ever makes a
//! challenger wait longer when it forgets, so it may be cleared at any time.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::time::Instant;

use crate::{HolderId, LeaseName, store::Stored};

/// The most names remembered before the cache is cleared.
const MAX_ENTRIES: usize = 16_384;

/// One name's last known state.
#[derive(Debug, Clone)]
pub(crate) enum Seen {
    /// No record existed.
    Absent,
    /// This record, unchanged since `first_seen`.
    Present { stored: Stored, first_seen: Instant },
}

/// The per-client cache, shared with the renewal driver (which records releases).
#[derive(Debug, Default)]
pub(crate) struct SeenCache {
    map: Mutex<HashMap<LeaseName, Seen>>,
}

impl SeenCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LeaseName, Seen>> {
        self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records what a store answer showed at `at`: when a read's (or a conflict's)
    /// answer arrived, or, for a grant this client wrote, when its write was *sent* (the
    /// version it wrote cannot predate that, and the grant's own validity counts from
    /// then: rule 3 of docs/DESIGN.md). A version already known keeps its `first_seen`.
    pub(crate) fn remember(&self, name: &LeaseName, current: Option<&Stored>, at: Instant) {
        let mut seen = self.lock();
        // One lookup for a name already known (every acquire and release of it).
        if let Some(known) = seen.get_mut(name) {
            *known = match (current, &*known) {
                (None, _) => Seen::Absent,
                (Some(s), Seen::Present { stored, first_seen }) if stored.version == s.version => Seen::Present {
                    stored: s.clone(),
                    first_seen: *first_seen,
                },
                (Some(s), _) => Seen::Present {
                    stored: s.clone(),
                    first_seen: at,
                },
            };
            return;
        }
        if seen.len() >= MAX_ENTRIES {
            seen.clear();
        }
        let entry = match current {
            None => Seen::Absent,
            Some(s) => Seen::Present {
                stored: s.clone(),
                first_seen: at,
            },
        };
        seen.insert(name.clone(), entry);
    }

    /// Whether the last record seen under `name` names a holder other than `me` (a
    /// grant now is a takeover), without copying it out.
    pub(crate) fn held_by_other(&self, name: &LeaseName, me: &HolderId) -> bool {
        matches!(self.lock().get(name), Some(Seen::Present { stored, .. })
            if stored.record.holder.as_ref().is_some_and(|h| h != me))
    }

    /// The last known state of `name`.
    pub(crate) fn get(&self, name: &LeaseName) -> Option<Seen> {
        self.lock().get(name).cloned()
    }
}
