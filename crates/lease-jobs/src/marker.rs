//! Final records: how a finished run keeps its lease name occupied without a live
//! holder (for `lock_at_least_for`, for a done slot, for a failed slot's retry delay).
//!
//! A finished run rewrites its own lease record, in one conditional write on the
//! record's current version, into a record held by a *marker* holder id (the run's
//! holder id behind a reserved prefix) with the same token and the TTL it must last.
//! Nobody renews it; no candidate can be granted the name until it expires on the
//! store's clock (or, on stores without a clock, until a challenger watched it
//! unchanged for that TTL). The run's own lease handle then sees the record taken by
//! another holder and neither renews nor releases it.

use std::time::Duration;

use leasehold_core::{
    HolderId, Lease, LeaseClient, LeaseName, MAX_HOLDER_LEN, Result, Ttl,
    clock::{SystemWallClock, WallClock},
    store::{CasOutcome, Current, LeaseRecord, Precondition, Stored, Version},
};

/// The kinds of final record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// The slot's job completed: the name stays taken for `keep_done_for`, so no
    /// instance runs the slot again.
    Done,
    /// The run ended before `lock_at_least_for` had passed: the name stays taken for
    /// the rest of it.
    Held,
    /// The slot's job failed: the name stays taken for the retry delay, then any
    /// instance may run the slot again.
    Failed,
}

impl Marker {
    /// The reserved prefixes of marker holder ids. Client labels must not start with
    /// `=`.
    pub const PREFIXES: [(&'static str, Marker); 3] = [
        ("=done=", Marker::Done),
        ("=held=", Marker::Held),
        ("=failed=", Marker::Failed),
    ];

    /// The reserved prefix of this marker's holder ids (`=done=`, `=held=`, `=failed=`).
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Done => "=done=",
            Self::Held => "=held=",
            Self::Failed => "=failed=",
        }
    }

    /// The marker holder id for a run held by `holder`.
    pub fn holder_for(self, holder: &HolderId) -> HolderId {
        let prefix = self.prefix();
        let room = MAX_HOLDER_LEN - prefix.len();
        let h = holder.as_str();
        // Holder ids are ASCII, so any byte index is a char boundary.
        let tail = if h.len() > room { &h[h.len() - room..] } else { h };
        HolderId::new(format!("{prefix}{tail}")).unwrap_or_else(|_| holder.clone())
    }

    /// The marker a holder id stands for, if it is one.
    pub fn of(holder: &HolderId) -> Option<Marker> {
        Self::PREFIXES
            .iter()
            .find(|(p, _)| holder.as_str().starts_with(p))
            .map(|(_, m)| *m)
    }
}

/// What [`finish`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Finished {
    /// The final record is in place, at this version.
    Kept(Version),
    /// The record no longer named this run: someone else holds it (or it is gone).
    NotOurs,
}

/// Rounds up to whole milliseconds and into the TTL range.
pub(crate) fn marker_ttl(d: Duration) -> Ttl {
    let ms = u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
    let d = Duration::from_millis(ms).clamp(Ttl::MIN, Ttl::MAX);
    // Whole milliseconds within the range: always valid.
    Ttl::new(d).unwrap_or_else(|_| unreachable_ttl())
}

fn unreachable_ttl() -> Ttl {
    unreachable!("a clamped whole-millisecond duration is a valid TTL")
}

/// Replaces the run's lease record by a `marker` record lasting `ttl`, on the record's
/// current version, then lets the lease handle go. Two round trips (a read for the
/// version, the write), more only if a renewal lands in between.
pub(crate) async fn finish(client: &LeaseClient, lease: Lease, marker: Marker, ttl: Duration) -> Result<Finished> {
    let store = client.store();
    let name = lease.name().clone();
    let me = lease.holder().clone();
    let token = lease.token();
    let ttl = marker_ttl(ttl);
    let marker_holder = marker.holder_for(&me);
    let record = LeaseRecord {
        holder: Some(marker_holder.clone()),
        token,
        ttl,
        wall_expires_at_ms: Some(SystemWallClock.now_ms().saturating_add(ttl.as_millis())),
    };
    let ours = |s: &Stored| s.record.holder.as_ref() == Some(&me) && s.record.token == token;
    let landed = |s: &Stored| s.record.holder.as_ref() == Some(&marker_holder) && s.record.token == token;
    let mut current = store.read(&name).await?;
    for _ in 0..6 {
        let Some(stored) = current.take() else {
            return Ok(Finished::NotOurs);
        };
        if landed(&stored) {
            drop(lease);
            return Ok(Finished::Kept(stored.version));
        }
        if !ours(&stored) {
            return Ok(Finished::NotOurs);
        }
        match store
            .write(&name, &Precondition::Version(stored.version.clone()), &record)
            .await
        {
            Ok(CasOutcome::Written(written)) => {
                // The handle's background release now conflicts with the marker and
                // leaves it alone.
                drop(lease);
                return Ok(Finished::Kept(written.version));
            }
            Ok(CasOutcome::Conflict(Current::Present(s))) => current = Some(s),
            Ok(CasOutcome::Conflict(Current::Absent)) => return Ok(Finished::NotOurs),
            Ok(CasOutcome::Conflict(Current::Unknown)) => current = store.read(&name).await?,
            // The write may have applied: look.
            Err(e) if e.is_indeterminate() || e.is_retryable() => current = store.read(&name).await?,
            Err(e) => return Err(e),
        }
    }
    // A renewal kept landing in between: give up; the lease is released normally and
    // the caller treats the name as not kept.
    Ok(Finished::NotOurs)
}

/// Writes the marker record `stored` of `name` again, at its version, to last `keep`
/// from now (a failed record written to last one retry interval, of a slot given up
/// only later): the new version, or `None` when someone wrote the slot since or the
/// store failed (logged; nothing else to do: the record lasts as it was).
pub(crate) async fn keep_longer(
    client: &LeaseClient,
    name: &LeaseName,
    stored: &Stored,
    keep: Duration,
) -> Option<Version> {
    let ttl = marker_ttl(keep);
    let record = LeaseRecord {
        ttl,
        wall_expires_at_ms: Some(SystemWallClock.now_ms().saturating_add(ttl.as_millis())),
        ..stored.record.clone()
    };
    match client
        .store()
        .write(name, &Precondition::Version(stored.version.clone()), &record)
        .await
    {
        Ok(CasOutcome::Written(written)) => Some(written.version),
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(%name, error = %e, "could not keep a given-up slot's record longer");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_holders_are_valid_and_recognised() {
        let long = HolderId::new("x".repeat(MAX_HOLDER_LEN)).expect("holder");
        for m in [Marker::Done, Marker::Held, Marker::Failed] {
            let h = m.holder_for(&long);
            assert!(h.as_str().len() <= MAX_HOLDER_LEN);
            assert_eq!(Marker::of(&h), Some(m));
            let short = m.holder_for(&HolderId::new("pid-1#a.b.c").expect("holder"));
            assert_eq!(Marker::of(&short), Some(m));
        }
        assert_eq!(Marker::of(&HolderId::new("pid-1#a").expect("holder")), None);
    }

    #[test]
    fn marker_ttls_round_up_into_range() {
        assert_eq!(marker_ttl(Duration::ZERO).get(), Ttl::MIN);
        assert_eq!(
            marker_ttl(Duration::from_micros(10_001)).get(),
            Duration::from_millis(11)
        );
        assert_eq!(marker_ttl(Duration::from_secs(30 * 86_400)).get(), Ttl::MAX);
    }
}
