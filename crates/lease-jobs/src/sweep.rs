//! Keeping the store bounded: the records of slots past their keep time are purged, a
//! bounded number per scheduler pass.
//!
//! A slot's done record must last while any instance may still look at the slot: an
//! instance looks back [`JobSpec::catch_up`] on its clock, which is shorter than
//! [`JobSpec::keep_done_for`] (checked). So once a slot is older than `keep_done_for`
//! plus the worst clock skew between instances (none where slots are due on the
//! store's clock; [`JobSpec::clock_skew`] on the wall clock), and its done record has
//! run out, nobody needs it: it is purged ([`CasStore::purge`], conditional on the
//! version read). So is a failed slot's record (`=failed=`): every instance gives a
//! failed slot up once it leaves the catch-up window, and the run that gives it up
//! keeps the record as long as a done one. Other records stay: a slot whose run is
//! going on, or whose runner died, keeps its record.
//!
//! Which records: the schedule's own slots as they age (no listing), and once per
//! start the job's records already older than that (from the one [`CasStore::list`]
//! of the job's prefix that the scheduler reads at start-up, where the store can list),
//! start records ([`crate::first_start`]) included.
//!
//! Where the store has an expiry of its own ([`CasStore::expire`]: Redis, etcd,
//! DynamoDB), the run that writes a done record (or gives a failed slot up) also asks
//! the store to remove it, with its token counter, once `keep_done_for` plus the skew
//! has passed: the store stays bounded even when no scheduler sweeps any more (all
//! stopped, or behind). The sweep still runs there; it finds fewer records.
//!
//! [`CasStore::purge`]: leasehold_core::store::CasStore::purge
//! [`CasStore::list`]: leasehold_core::store::CasStore::list
//! [`CasStore::expire`]: leasehold_core::store::CasStore::expire

use std::collections::VecDeque;
use std::time::Duration;

use chrono::DateTime;
use leasehold_core::store::{CasStore, DeleteOutcome, Stored, Version};
use leasehold_core::{Error, LeaseName, NamePrefix};
use tokio::time::Instant;

use crate::{JobSpec, Marker, Slot, first_start};

/// The most slot records one pass looks at (one read each, and a purge for those that
/// go).
pub(crate) const MAX_PER_PASS: usize = 32;
/// The most a look comes before a record's keep time ends.
const LOOK_AHEAD: Duration = Duration::from_secs(60);
/// The most done records kept in memory to look at again once they run out.
const MAX_DEFERRED: usize = 4_096;

/// One scheduler's sweep of its job's old slot records.
#[derive(Debug, Default)]
pub(crate) struct Sweeper {
    /// The job's records listed at start-up, until the first pass takes the old ones.
    listed: Vec<LeaseName>,
    /// The schedule's slots up to here were handed out.
    cursor: Option<u64>,
    /// Old records the start-up listing found, not yet looked at.
    backlog: VecDeque<LeaseName>,
    /// Done and failed records that had not run out yet, the version seen, and when
    /// to look again.
    deferred: VecDeque<(LeaseName, Option<Version>, Instant)>,
    /// Records purged so far.
    purged: u64,
}

impl Sweeper {
    /// A sweep that starts with the job's records `listed` at start-up ([`list_job`]).
    pub(crate) fn new(listed: Vec<LeaseName>) -> Self {
        Self {
            listed,
            ..Self::default()
        }
    }

    /// One pass: looks at up to [`MAX_PER_PASS`] records of slots older than
    /// `keep_done_for` plus `skew` at `now_ms`, and purges the done and failed ones
    /// that ran out. A store error ends the pass (the next pass goes on) and is
    /// returned; else `true` if the store was called.
    pub(crate) async fn pass(
        &mut self,
        store: &dyn CasStore,
        spec: &JobSpec,
        now_ms: u64,
        skew: Duration,
    ) -> leasehold_core::Result<bool> {
        // A look a little ahead finds a done record before it runs out, so that what it
        // leaves behind on a store that expires it (Redis's counter hash) goes with it.
        let ahead = (spec.keep_done_for / 2).min(LOOK_AHEAD);
        let keep = spec.keep_done_for.saturating_add(skew).saturating_sub(ahead);
        let cutoff_ms = now_ms.saturating_sub(u64::try_from(keep.as_millis()).unwrap_or(u64::MAX));
        if self.cursor.is_none() {
            self.cursor = Some(cutoff_ms);
            self.backlog = listed_before(spec, std::mem::take(&mut self.listed), cutoff_ms).into();
        }
        let mut budget = MAX_PER_PASS;
        let mut called = false;
        while budget > 0 {
            let Some((name, seen)) = self.next(spec, cutoff_ms) else {
                break;
            };
            budget -= 1;
            called = true;
            match look(store, &name, seen.as_ref(), now_ms, skew).await {
                Ok(Look::Purged) => {
                    self.purged += 1;
                    tracing::trace!(job = %spec.name, %name, purged = self.purged, "sweep: purged an aged slot record");
                }
                Ok(Look::Gone | Look::Kept) => {}
                Ok(Look::NotYet(version, after)) => self.defer(name, Some(version), after),
                Err(e) => {
                    tracing::debug!(job = %spec.name, %name, error = %e, "sweep: store error; trying again later");
                    self.defer(name, seen, Duration::from_secs(1));
                    return Err(e);
                }
            }
        }
        Ok(called)
    }

    /// The next record to look at: a deferred one that is due, the listing's, or the
    /// schedule's next aged slot.
    fn next(&mut self, spec: &JobSpec, cutoff_ms: u64) -> Option<(LeaseName, Option<Version>)> {
        if self.deferred.front().is_some_and(|(_, _, at)| *at <= Instant::now()) {
            return self.deferred.pop_front().map(|(n, v, _)| (n, v));
        }
        if let Some(n) = self.backlog.pop_front() {
            return Some((n, None));
        }
        let cursor = self.cursor.unwrap_or(cutoff_ms);
        let slot = spec.schedule.slots_between(cursor, cutoff_ms).next()?;
        self.cursor = Some(slot.unix_ms());
        spec.lease_name(slot).ok().map(|n| (n, None))
    }

    fn defer(&mut self, name: LeaseName, seen: Option<Version>, after: Duration) {
        if self.deferred.len() < MAX_DEFERRED {
            self.deferred.push_back((name, seen, Instant::now() + after));
        }
    }
}

/// Asks the store to remove a done (or given-up failed) slot record (at `version`) by
/// itself `after` from
/// now ([`CasStore::expire`]); a store without its own expiry leaves it to the sweep,
/// and so does a failure (logged). Whether the store answered.
pub(crate) async fn expire(store: &dyn CasStore, name: &LeaseName, version: &Version, after: Duration) -> bool {
    match store.expire(name, version, after).await {
        Ok(outcome) => {
            tracing::trace!(%name, ?outcome, "sweep: asked the store to expire a done slot record");
            true
        }
        Err(e) => {
            tracing::debug!(%name, error = %e, "sweep: could not set the store's expiry; the sweep purges it");
            false
        }
    }
}

/// How long a final record has left: on the store's clock; on a store without one,
/// until the expiry its writer put on its wall clock, plus the skew, from `now_ms`.
pub(crate) fn time_left(stored: &Stored, now_ms: u64, skew: Duration) -> Duration {
    match stored.remaining {
        Some(left) => left,
        None => {
            let until = stored.record.wall_expires_at_ms.map_or(0, |w| {
                w.saturating_add(u64::try_from(skew.as_millis()).unwrap_or(u64::MAX))
            });
            Duration::from_millis(until.saturating_sub(now_ms))
        }
    }
}

/// What looking at one record did.
enum Look {
    /// No record.
    Gone,
    /// Neither a done nor a failed record: left alone.
    Kept,
    /// A done or failed record (at this version) that has not run out: look again
    /// after this long.
    NotYet(Version, Duration),
    /// Purged.
    Purged,
}

/// Looks at one record; `seen` is the version of the done or failed record an earlier
/// look found.
async fn look(
    store: &dyn CasStore,
    name: &LeaseName,
    seen: Option<&Version>,
    now_ms: u64,
    skew: Duration,
) -> leasehold_core::Result<Look> {
    let Some(stored) = store.read(name).await? else {
        // Gone on its own (Redis: its `PX` ran out): what it left behind goes too, if
        // nothing was written under the name since.
        return Ok(match seen {
            Some(v) if store.purge(name, v).await? == DeleteOutcome::Deleted => Look::Purged,
            _ => Look::Gone,
        });
    };
    if !matches!(
        stored.record.holder.as_ref().and_then(Marker::of),
        Some(Marker::Done | Marker::Failed)
    ) {
        return Ok(Look::Kept);
    }
    let left = time_left(&stored, now_ms, skew);
    if !left.is_zero() {
        return Ok(Look::NotYet(stored.version, left));
    }
    match store.purge(name, &stored.version).await? {
        DeleteOutcome::Deleted => Ok(Look::Purged),
        DeleteOutcome::Conflict(_) => Ok(Look::Kept),
    }
}

/// The names of the job's records, from one listing of its prefix; `None` where the
/// store cannot list, or the listing failed (logged).
pub(crate) async fn list_job(store: &dyn CasStore, spec: &JobSpec) -> Option<Vec<LeaseName>> {
    let prefix = NamePrefix::new(format!("{}/", spec.name)).ok()?;
    match store.list(&prefix).await {
        Ok(names) => Some(names),
        Err(Error::Unsupported { .. }) => None,
        Err(e) => {
            tracing::debug!(job = %spec.name, error = %e, "could not list the job's records");
            None
        }
    }
}

/// Of the job's records `listed`, those of slots (and of starts) before `cutoff_ms`.
fn listed_before(spec: &JobSpec, listed: Vec<LeaseName>, cutoff_ms: u64) -> Vec<LeaseName> {
    let prefix = format!("{}/", spec.name);
    listed
        .into_iter()
        .filter(|n| {
            let rest = n.as_str().strip_prefix(prefix.as_str()).unwrap_or_default();
            let at = slot_of(rest)
                .filter(|s| s.key().len() == 24)
                .map(Slot::unix_ms)
                .or_else(|| first_start::start_of(rest));
            at.is_some_and(|ms| ms < cutoff_ms)
        })
        .collect()
}

/// The slot a lease name's slot part names, if it is exactly one ([`Slot::key`]).
pub(crate) fn slot_of(key: &str) -> Option<Slot> {
    let t = DateTime::parse_from_rfc3339(key).ok()?;
    let slot = Slot::from_unix_ms(u64::try_from(t.timestamp_millis()).ok()?);
    (slot.key() == key).then_some(slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exact_slot_keys_are_slots() {
        let slot = Slot::from_unix_ms(1_796_005_200_250);
        assert_eq!(slot_of(&slot.key()), Some(slot));
        for not in [
            "",
            "x",
            "2026-11-30T02:20:00Z",
            "2026-11-30T02:20:00.250+00:00",
            "b/2026-11-30T02:20:00.250Z",
        ] {
            assert_eq!(slot_of(not), None, "{not}");
        }
    }
}
