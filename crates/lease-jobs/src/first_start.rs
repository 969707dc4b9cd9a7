//! When a job began: a job deployed for the first time does not run the slots from
//! before it existed.
//!
//! An instance looks back [`JobSpec::catch_up`] for slots nobody ran. For a new job
//! those slots come from before it existed: nobody missed them. So the job keeps a
//! *start record*, `<job>/@<time>` (its first start, in whole seconds, UTC:
//! `2026-12-07T20:00:00Z`), a done record that every running instance writes again
//! each quarter of [`JobSpec::keep_done_for`] to last five quarters more (and asks the
//! store to expire then, where it can). It lasts as long as an instance of the job ran
//! within the last `keep_done_for`, however far apart the job's slots are, and no
//! instance runs a slot from before its time (nor from before the instance's own start,
//! if the record's time is later: a writer whose clock ran fast). Where slots are due
//! on the wall clock, that time is on the clock of the instance that wrote it, so the
//! cut comes [`JobSpec::clock_skew`] earlier: a slot due that much before a new job's
//! first start may still run, and none after it is lost to an instance whose clock is
//! behind.
//!
//! At start-up a scheduler lists the job's records (the listing the sweep also uses)
//! and reads its start records, the earliest first:
//! - one that has not run out: the job began at its time;
//! - none that has not run out, but slot records (a job run before start records
//!   existed, or whose start record could not be kept; on the stores whose records do
//!   not go by themselves, also one whose instances all stopped for longer than
//!   `keep_done_for`, until the sweep purges them): the whole window is looked back,
//!   and a start record is written at the window's start, which cuts nothing now;
//! - neither: the job is new (first deployed, or, where records go by themselves, no
//!   instance of it ran for `keep_done_for`): [`crate::SlotEvent::NewJob`], and a start
//!   record at this start;
//! - the store cannot list, or the listing or a read fails: the whole window, and no
//!   start record (logged).

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use leasehold_core::store::Stored;
use leasehold_core::{AcquireOutcome, LeaseClient, LeaseName, Result};
use tokio::time::Instant;

use crate::marker::{self, Finished, Marker};
use crate::sweep;
use crate::{JobSpec, Slot};

/// The most start records read at start-up (more than one exist only after instances
/// of a new job started in different seconds at once, until the sweep purges those
/// nobody keeps).
const MAX_READ: usize = 16;

/// What a scheduler found at start-up about when its job began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Began {
    /// At this time (Unix ms): its earliest start record that has not run out.
    At(u64),
    /// No start record that has not run out, and no slot record: a new job.
    New,
    /// Slot records, and no start record that has not run out: the job ran before it
    /// had one.
    Before,
    /// Not known: the store could not list, or a call failed.
    Unknown,
}

/// Judges when the job began from the names listed under its prefix (`None`: the store
/// could not list them), reading its start records, the earliest first; `now_ms` and
/// `skew` tell whether one has run out, as the sweep tells it.
pub(crate) async fn began(
    client: &LeaseClient,
    spec: &JobSpec,
    listed: Option<&[LeaseName]>,
    now_ms: u64,
    skew: Duration,
) -> Began {
    let Some(listed) = listed else {
        return Began::Unknown;
    };
    let prefix = format!("{}/", spec.name);
    let mut starts: Vec<(u64, &LeaseName)> = Vec::new();
    let mut slots = false;
    for name in listed {
        let Some(rest) = name.as_str().strip_prefix(&prefix) else {
            continue;
        };
        if let Some(at) = start_of(rest) {
            starts.push((at, name));
        } else if sweep::slot_of(rest).is_some() {
            slots = true;
        }
    }
    starts.sort_unstable();
    for (at, name) in starts.iter().take(MAX_READ) {
        match client.store().read(name).await {
            Ok(Some(stored)) if !sweep::time_left(&stored, now_ms, skew).is_zero() => {
                return Began::At(*at);
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(job = %spec.name, %name, error = %e, "could not read the job's start record");
                return Began::Unknown;
            }
        }
    }
    if slots { Began::Before } else { Began::New }
}

/// `ms` rounded down to the whole second a start record names.
pub(crate) fn whole_second(ms: u64) -> u64 {
    ms - ms % 1_000
}

/// The part of a start record's name after the job's prefix, for a start at `ms`
/// (rounded down to the second).
fn key(ms: u64) -> String {
    let at = i64::try_from(whole_second(ms))
        .ok()
        .and_then(DateTime::<Utc>::from_timestamp_millis)
        .map_or_else(|| format!("ms{ms}"), |t| t.to_rfc3339_opts(SecondsFormat::Secs, true));
    format!("@{at}")
}

/// The start record's name for a job that began at `ms` (rounded down to the second).
pub(crate) fn name(spec: &JobSpec, ms: u64) -> Result<LeaseName> {
    LeaseName::new(format!("{}/{}", spec.name, key(ms)))
}

/// The time a start record's part after the job's prefix names, if it is exactly one
/// ([`key`]).
pub(crate) fn start_of(rest: &str) -> Option<u64> {
    let t = DateTime::parse_from_rfc3339(rest.strip_prefix('@')?).ok()?;
    let ms = u64::try_from(t.timestamp_millis()).ok()?;
    (key(ms) == rest).then_some(ms)
}

/// The start record a scheduler keeps: written again each quarter of `keep_done_for`.
#[derive(Debug)]
pub(crate) struct StartRecord {
    name: LeaseName,
    /// When the job began (Unix ms).
    since: u64,
    /// When to write it again.
    next: Instant,
}

impl StartRecord {
    /// The start record of a job that began at `since`: written now unless `found`
    /// (read at start-up), then kept from now on.
    pub(crate) async fn keep(client: &LeaseClient, spec: &JobSpec, since: u64, skew: Duration) -> Option<Self> {
        let name = name(spec, since).ok()?;
        let mut kept = Self {
            name,
            since,
            next: Instant::now(),
        };
        kept.refresh(client, spec, skew).await;
        Some(kept)
    }

    /// When [`StartRecord::tick`] next has something to do.
    pub(crate) fn next(&self) -> Instant {
        self.next
    }

    /// Writes the record again if it is time.
    pub(crate) async fn tick(&mut self, client: &LeaseClient, spec: &JobSpec, skew: Duration) {
        if self.next <= Instant::now() {
            self.refresh(client, spec, skew).await;
        }
    }

    /// Awaits `run` while writing the record again on time: a run may last longer
    /// than the record (five quarters of `keep_done_for`), and an instance that stopped
    /// in it would leave a job that looks new, its owed slot skipped. A write under way
    /// when the run ends is finished.
    pub(crate) async fn alongside<T>(
        record: Option<&mut Self>,
        run: impl Future<Output = T>,
        client: &LeaseClient,
        spec: &JobSpec,
        skew: Duration,
    ) -> T {
        let Some(record) = record else {
            return run.await;
        };
        let mut run = std::pin::pin!(run);
        loop {
            let due = record.next;
            let refresh = async {
                tokio::time::sleep_until(due).await;
                record.refresh(client, spec, skew).await;
            };
            let mut refresh = std::pin::pin!(refresh);
            tokio::select! {
                out = &mut run => {
                    if due <= Instant::now() {
                        refresh.await;
                    }
                    return out;
                }
                () = &mut refresh => {}
            }
        }
    }

    /// Writes the record to last five quarters of `keep_done_for` from now (again, or
    /// anew if it is gone), so that it outlasts `keep_done_for` after the last instance
    /// stops however soon before that it was written; and asks the store to remove it
    /// then, plus `skew`. A store error, there too, is logged and tried again sooner.
    async fn refresh(&mut self, client: &LeaseClient, spec: &JobSpec, skew: Duration) {
        let every = (spec.keep_done_for / 4).max(Duration::from_millis(100));
        let keep = spec.keep_done_for + every;
        let written = match client.store().read(&self.name).await {
            Ok(Some(stored)) if is_done(&stored) => marker::keep_longer(client, &self.name, &stored, keep).await,
            // Gone, or a writer died between its grant and its done record: written
            // anew once free.
            Ok(_) => write(client, spec, &self.name, keep).await,
            Err(e) => {
                tracing::debug!(job = %spec.name, name = %self.name, error = %e, "could not read the job's start record");
                None
            }
        };
        let expiring = match written {
            Some(version) => sweep::expire(client.store().as_ref(), &self.name, &version, keep + skew).await,
            None => false,
        };
        self.next = Instant::now() + if expiring { every } else { every / 4 };
        tracing::trace!(job = %spec.name, name = %self.name, since = %Slot::from_unix_ms(self.since), "kept the job's start record");
    }
}

fn is_done(stored: &Stored) -> bool {
    stored.record.holder.as_ref().and_then(Marker::of) == Some(Marker::Done)
}

/// Writes a start record `name`: a done record, lasting `keep`. Its version, or `None`
/// if another instance wrote it first or the store failed (logged).
async fn write(
    client: &LeaseClient,
    spec: &JobSpec,
    name: &LeaseName,
    keep: Duration,
) -> Option<leasehold_core::store::Version> {
    let options = spec.at_most.options(spec.lock_at_most_for);
    let written = match client.try_acquire_with(name, &options).await {
        Ok(AcquireOutcome::Granted(lease)) => marker::finish(client, lease, Marker::Done, keep).await,
        Ok(AcquireOutcome::Held { .. }) => return None,
        Err(e) => Err(e),
    };
    match written {
        Ok(Finished::Kept(version)) => Some(version),
        Ok(Finished::NotOurs) => None,
        Err(e) => {
            tracing::warn!(job = %spec.name, %name, error = %e, "could not write the job's start record; trying again later");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Schedule;
    use leasehold_core::MemoryStore;

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
            "@2026-11-30t02:20:00z",
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

    #[tokio::test]
    async fn what_the_records_say() {
        let s = spec();
        let client = LeaseClient::new(MemoryStore::new());
        let now = 1_796_005_300_000;
        let judge = |listed: Vec<LeaseName>| {
            let (client, s) = (client.clone(), s.clone());
            async move { began(&client, &s, Some(&listed), now, Duration::ZERO).await }
        };
        assert_eq!(began(&client, &s, None, now, Duration::ZERO).await, Began::Unknown);
        assert_eq!(judge(vec![]).await, Began::New);
        // Another job's records under this one's prefix are not this job's.
        assert_eq!(
            judge(names(&["jobs/report/daily/2026-11-30T02:20:00.000Z", "jobs/report/x"])).await,
            Began::New
        );
        assert_eq!(
            judge(names(&["jobs/report/2026-11-30T02:20:00.000Z"])).await,
            Began::Before
        );
        // Listed start records that are gone (or ran out) say nothing; slot records do.
        assert_eq!(judge(names(&["jobs/report/@2026-11-30T02:19:00Z"])).await, Began::New);
        assert_eq!(
            judge(names(&[
                "jobs/report/2026-11-30T02:20:00.000Z",
                "jobs/report/@2026-11-30T02:19:00Z"
            ]))
            .await,
            Began::Before
        );
        // One kept: the earliest that has not run out.
        let kept = StartRecord::keep(&client, &s, 1_796_005_170_000, Duration::ZERO)
            .await
            .expect("kept");
        assert_eq!(
            judge(names(&[
                "jobs/report/@2026-11-30T02:19:00Z",
                "jobs/report/@2026-11-30T02:19:30Z"
            ]))
            .await,
            Began::At(kept.since)
        );
    }
}
