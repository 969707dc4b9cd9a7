//! When a job began: a job deployed for the first time does not run the slots from
//! before it existed.
//!
//! An instance looks back [`JobSpec::catch_up`] for slots nobody ran. For a new job
//! those slots come from before it existed: nobody missed them. So the instance that
//! starts a job with no record in the store writes down when it started, as a done
//! record named `<job>/@<time>` (the start in whole seconds, UTC, `2026-12-07T20:00:00Z`),
//! and every instance runs no slot from before the earliest such record's second.
//! Where slots are due on the wall clock, that time is on the clock of the instance
//! that wrote it, so the cut comes [`JobSpec::clock_skew`] earlier: a slot due that
//! much before a new job's first start may still run, and none after it is lost to an
//! instance whose clock is behind. The record is kept, and
//! then purged, as a done slot's record is ([`JobSpec::keep_done_for`]); by the time it
//! goes, the catch-up window starts after it anyway.
//!
//! A job counts as new when the listing of its prefix that every scheduler reads at
//! start-up (the sweep's) finds no record of it at all: no slot's and no start's. That
//! is a job never deployed, and also one whose instances were all stopped for longer
//! than `keep_done_for` (its records were purged or ran out): such a job starts afresh
//! too ([`crate::SlotEvent::NewJob`] says so). Where the store cannot list, or the
//! listing fails, nothing is cut: a new job there runs the window's slots late. A job
//! that has slot records and no start record (one run by an earlier version) looks
//! back the whole window.

use chrono::{DateTime, SecondsFormat, Utc};
use leasehold_core::store::Version;
use leasehold_core::{AcquireOutcome, LeaseClient, LeaseName, Result};

use crate::marker::{self, Finished, Marker};
use crate::{JobSpec, Slot};

/// What one listing of the job's prefix tells about when the job began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Began {
    /// At this time (Unix ms): its earliest start record.
    At(u64),
    /// Not known: the store could not list, or the job has slot records and no start
    /// record.
    Unknown,
    /// No record of the job at all: it is new.
    New,
}

/// Judges when the job began from the names listed under its prefix (`None`: the store
/// could not list them).
pub(crate) fn judge(spec: &JobSpec, listed: Option<&[LeaseName]>) -> Began {
    let Some(listed) = listed else {
        return Began::Unknown;
    };
    let prefix = format!("{}/", spec.name);
    let mut slots = false;
    let mut earliest: Option<u64> = None;
    for rest in listed.iter().filter_map(|n| n.as_str().strip_prefix(&prefix)) {
        if let Some(at) = start_of(rest) {
            earliest = Some(earliest.map_or(at, |e| e.min(at)));
        } else if crate::sweep::slot_of(rest).is_some() {
            slots = true;
        }
    }
    match earliest {
        Some(at) => Began::At(at),
        None if slots => Began::Unknown,
        None => Began::New,
    }
}

/// `ms` rounded down to the whole second a start record names.
pub(crate) fn whole_second(ms: u64) -> u64 {
    ms - ms % 1_000
}

/// The start record's name for a job that began at `ms` (rounded down to the second).
pub(crate) fn name(spec: &JobSpec, ms: u64) -> Result<LeaseName> {
    let at = i64::try_from(whole_second(ms))
        .ok()
        .and_then(DateTime::<Utc>::from_timestamp_millis)
        .map_or_else(|| format!("ms{ms}"), |t| t.to_rfc3339_opts(SecondsFormat::Secs, true));
    LeaseName::new(format!("{}/@{at}", spec.name))
}

/// The time a start record's part after the job's prefix names, if it is one.
pub(crate) fn start_of(rest: &str) -> Option<u64> {
    let at = rest.strip_prefix('@')?;
    let t = DateTime::parse_from_rfc3339(at).ok()?;
    let ms = u64::try_from(t.timestamp_millis()).ok()?;
    (Slot::from_unix_ms(ms).key().len() == 24 && at.len() == 20 && ms % 1_000 == 0).then_some(ms)
}

/// Writes the start record of a job that began at `ms`: a done record, kept for
/// `keep_done_for`. Its name and version, or `None` if another instance wrote it first
/// or the store failed (logged: the next start of the job writes one).
pub(crate) async fn write(client: &LeaseClient, spec: &JobSpec, ms: u64) -> Option<(LeaseName, Version)> {
    let name = name(spec, ms).ok()?;
    let options = spec.at_most.options(spec.lock_at_most_for);
    let written = match client.try_acquire_with(&name, &options).await {
        Ok(AcquireOutcome::Granted(lease)) => marker::finish(client, lease, Marker::Done, spec.keep_done_for).await,
        Ok(AcquireOutcome::Held { .. }) => return None,
        Err(e) => Err(e),
    };
    match written {
        Ok(Finished::Kept(version)) => Some((name, version)),
        Ok(Finished::NotOurs) => None,
        Err(e) => {
            tracing::debug!(job = %spec.name, error = %e, "could not write the job's start record");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Schedule;

    fn spec() -> JobSpec {
        JobSpec::new(
            "jobs/report",
            Schedule::every(Duration::from_secs(60)).expect("schedule"),
            Duration::from_secs(10),
        )
    }

    fn names(of: &[&str]) -> Vec<LeaseName> {
        of.iter().map(|n| LeaseName::new(n).expect("name")).collect()
    }

    #[test]
    fn a_start_record_names_its_second_and_reads_back() {
        let n = name(&spec(), 1_796_005_200_250).expect("name");
        assert_eq!(n.as_str(), "jobs/report/@2026-11-30T02:20:00Z");
        assert_eq!(start_of("@2026-11-30T02:20:00Z"), Some(1_796_005_200_000));
        for not in [
            "2026-11-30T02:20:00Z",
            "@2026-11-30T02:20:00.000Z",
            "@x",
            "@2026-11-30T02:20:00+00:00",
        ] {
            assert_eq!(start_of(not), None, "{not}");
        }
        // The longest job name still makes a valid start record name.
        let long = JobSpec {
            name: "j".repeat(JobSpec::MAX_NAME_LEN),
            ..spec()
        };
        assert!(name(&long, 1_796_005_200_250).is_ok());
    }

    #[test]
    fn what_a_listing_says() {
        let s = spec();
        assert_eq!(judge(&s, None), Began::Unknown);
        assert_eq!(judge(&s, Some(&[])), Began::New);
        // Another job's records under this one's prefix are not this job's.
        let other = names(&["jobs/report/daily/2026-11-30T02:20:00.000Z", "jobs/report/x"]);
        assert_eq!(judge(&s, Some(&other)), Began::New);
        let slot = names(&["jobs/report/2026-11-30T02:20:00.000Z"]);
        assert_eq!(judge(&s, Some(&slot)), Began::Unknown);
        let started = names(&[
            "jobs/report/2026-11-30T02:20:00.000Z",
            "jobs/report/@2026-11-30T02:21:00Z",
            "jobs/report/@2026-11-30T02:19:00Z",
        ]);
        assert_eq!(judge(&s, Some(&started)), Began::At(1_796_005_140_000));
    }
}
