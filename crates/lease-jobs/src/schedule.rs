//! Schedules (cron expressions, fixed intervals) and the slots they fire.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::errors::CronError;
use croner::parser::CronParser;
use leasehold_core::{Error, Result};

/// One firing of a schedule: its fire time, in Unix milliseconds (UTC).
///
/// Every instance computes the same slots from the same schedule, whatever its start
/// time, so a slot names one run of the job across the whole service.
///
/// ```
/// use leasehold_jobs::Slot;
/// let slot = Slot::from_unix_ms(1_796_005_200_250);
/// assert_eq!(slot.key(), "2026-11-30T02:20:00.250Z");
/// assert_eq!(slot.to_string(), slot.key());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot(u64);

impl Slot {
    /// The slot firing at `ms` milliseconds after the Unix epoch.
    pub const fn from_unix_ms(ms: u64) -> Self {
        Self(ms)
    }

    /// The fire time in Unix milliseconds.
    pub const fn unix_ms(self) -> u64 {
        self.0
    }

    /// The fire time as RFC 3339 UTC with milliseconds (`2026-11-30T02:00:00.000Z`):
    /// the slot's part of its lease name.
    pub fn key(self) -> String {
        i64::try_from(self.0)
            .ok()
            .and_then(DateTime::<Utc>::from_timestamp_millis)
            .map_or_else(
                || format!("ms{}", self.0),
                |t| t.to_rfc3339_opts(SecondsFormat::Millis, true),
            )
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

/// When a job fires.
///
/// A cron expression is read on the wall clock of one time zone: UTC unless
/// [`Schedule::cron_in`] names another. Whatever the zone, a slot is an instant (its key
/// is UTC), so every instance computes the same slots whatever its host's `TZ`.
///
/// ```
/// use std::time::Duration;
/// use leasehold_jobs::{Schedule, Slot};
/// // Every day at 02:00 UTC (five fields: minute granularity; six: seconds first).
/// let nightly = Schedule::cron("0 2 * * *")?;
/// let after = Slot::from_unix_ms(1_796_005_200_000); // 2026-11-30T02:20:00Z
/// assert_eq!(nightly.next_after(after.unix_ms()).map(|s| s.key()).as_deref(), Some("2026-12-01T02:00:00.000Z"));
/// // Every 250 ms, aligned on the Unix epoch so all instances agree on the slots.
/// let fast = Schedule::every(Duration::from_millis(250))?;
/// assert_eq!(fast.next_after(1_000).map(Slot::unix_ms), Some(1_250));
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Schedule(Kind);

#[derive(Clone)]
enum Kind {
    /// A cron expression, read on the wall clock of `zone`.
    Cron {
        cron: Box<Cron>,
        /// The expression as given.
        expr: String,
        zone: Tz,
    },
    /// Every `interval_ms`, at `k * interval_ms + offset_ms` since the Unix epoch.
    Every { interval_ms: u64, offset_ms: u64 },
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Kind::Cron { expr, zone, .. } => f.debug_tuple("Cron").field(expr).field(&zone.name()).finish(),
            Kind::Every { interval_ms, offset_ms } => f
                .debug_struct("Every")
                .field("interval_ms", interval_ms)
                .field("offset_ms", offset_ms)
                .finish(),
        }
    }
}

impl Schedule {
    /// A cron schedule, read on the UTC wall clock ([`Schedule::cron_in`] for another
    /// time zone): five fields (`min hour dom month dow`), or six with seconds first,
    /// plus the usual extensions (`L`, `W`, `#`, `@daily`...), as parsed by the
    /// `croner` crate.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an expression croner rejects, or one that no date
    /// matches (`0 0 30 2 *`): its job would never run.
    pub fn cron(expr: &str) -> Result<Self> {
        Self::cron_zoned(expr, Tz::UTC)
    }

    /// A cron schedule read on the wall clock of the IANA time zone `zone`
    /// (`"Europe/Berlin"`, `"America/New_York"`, `"UTC"`): `0 2 * * *` in
    /// `Europe/Berlin` fires at 02:00 Berlin time, 01:00 UTC in winter and 00:00 UTC in
    /// summer.
    ///
    /// Daylight saving time, as the `croner` crate defines it, depends on the pattern:
    /// - a **fixed time of day** (a single value each in the second, minute and hour
    ///   fields, such as `30 2 * * *`) fires once on each day it matches, whatever the
    ///   clock does: a time the spring-forward gap skips (02:30 on the night the clock
    ///   jumps from 02:00 to 03:00) fires at the first instant after the gap (03:00),
    ///   and a time the fall-back hour repeats fires once, at its first occurrence;
    /// - **any other pattern** (more than one value, a step or `*` in one of those
    ///   fields, such as `0 2,14 * * *` or `*/15 * * * *`) follows the wall clock: its
    ///   times inside the gap do not fire that day, and its times inside the repeated
    ///   hour fire in both of its occurrences.
    ///
    /// The zone's rules come from the IANA database built into this crate (`chrono-tz`):
    /// instances built with different versions of it could disagree on a zone whose
    /// rules changed between them. Changing a job's zone, like changing its expression,
    /// changes its slots: instances running both schedules during a rolling deploy run
    /// the slots of each.
    ///
    /// ```
    /// use leasehold_jobs::{Schedule, Slot};
    /// let nightly = Schedule::cron_in("0 2 * * *", "Europe/Berlin")?;
    /// let after = Slot::from_unix_ms(1_796_005_200_000); // 2026-11-30T02:20:00Z
    /// assert_eq!(nightly.next_after(after.unix_ms()).map(|s| s.key()).as_deref(), Some("2026-12-01T01:00:00.000Z"));
    /// assert!(Schedule::cron_in("0 2 * * *", "Europe/Atlantis").is_err());
    /// # Ok::<(), leasehold_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an expression croner rejects or no date matches (as
    /// [`Schedule::cron`]), or a zone the IANA database does not name.
    pub fn cron_in(expr: &str, zone: &str) -> Result<Self> {
        let tz = zone
            .parse::<Tz>()
            .map_err(|_| Error::invalid("time zone", format!("{zone:?} is not an IANA time zone name")))?;
        Self::cron_zoned(expr, tz)
    }

    fn cron_zoned(expr: &str, zone: Tz) -> Result<Self> {
        let cron = CronParser::new()
            .parse(expr)
            .map_err(|e| Error::invalid("cron expression", format!("{expr:?}: {e}")))?;
        // A job that would never run is a mistake to say now, not a silence to find later
        // (`0 0 30 2 *`: February has no 30th). Judged from the Unix epoch, not from now:
        // the answer does not depend on the clock, and a year-bound expression whose
        // last time has just passed stays valid (its slot may still be due, late). croner
        // searches far ahead before it gives up: once here, not on every pass.
        let epoch = DateTime::<Utc>::UNIX_EPOCH.with_timezone(&zone);
        if let Err(CronError::TimeSearchLimitExceeded) = cron.find_next_occurrence(&epoch, false) {
            return Err(Error::invalid(
                "cron expression",
                format!("{expr:?} never fires: no date matches it"),
            ));
        }
        Ok(Self(Kind::Cron {
            cron: Box::new(cron),
            expr: expr.to_owned(),
            zone,
        }))
    }

    /// Every `interval` (whole milliseconds, at least 1 ms), aligned on the Unix epoch.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a zero or sub-millisecond interval.
    pub fn every(interval: Duration) -> Result<Self> {
        Self::every_with_offset(interval, Duration::ZERO)
    }

    /// Every `interval`, shifted by `offset` (below the interval): `every(1h)` with
    /// offset 5 min fires at five past each hour.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad interval or an offset not below it.
    pub fn every_with_offset(interval: Duration, offset: Duration) -> Result<Self> {
        let interval_ms = whole_ms(interval, "interval")?;
        if interval_ms == 0 {
            return Err(Error::invalid("interval", "must be at least 1 ms"));
        }
        let offset_ms = whole_ms(offset, "offset")?;
        if offset_ms >= interval_ms {
            return Err(Error::invalid("offset", "must be below the interval"));
        }
        Ok(Self(Kind::Every { interval_ms, offset_ms }))
    }

    /// The first slot strictly after `after_ms` (Unix ms), or `None` if there is none
    /// (a cron expression whose year field has passed, or a time beyond what croner
    /// searches).
    pub fn next_after(&self, after_ms: u64) -> Option<Slot> {
        match &self.0 {
            Kind::Every { interval_ms, offset_ms } => {
                let i = *interval_ms;
                let k = if after_ms < *offset_ms {
                    0
                } else {
                    (after_ms - offset_ms) / i + 1
                };
                k.checked_mul(i)?.checked_add(*offset_ms).map(Slot)
            }
            Kind::Cron { cron, zone, .. } => {
                let t = DateTime::<Utc>::from_timestamp_millis(i64::try_from(after_ms).ok()?)?.with_timezone(zone);
                let next = cron.find_next_occurrence(&t, false).ok()?;
                u64::try_from(next.timestamp_millis()).ok().map(Slot)
            }
        }
    }

    /// The slots in `(after_ms, until_ms]`, oldest first.
    pub fn slots_between(&self, after_ms: u64, until_ms: u64) -> impl Iterator<Item = Slot> + '_ {
        let mut cursor = after_ms;
        std::iter::from_fn(move || {
            let next = self.next_after(cursor)?;
            if next.0 > until_ms {
                return None;
            }
            cursor = next.0;
            Some(next)
        })
    }

    /// The cron expression as given, or `None` for an interval schedule.
    pub fn expression(&self) -> Option<&str> {
        match &self.0 {
            Kind::Cron { expr, .. } => Some(expr),
            Kind::Every { .. } => None,
        }
    }

    /// The IANA name of the time zone a cron expression is read in (`"UTC"` for
    /// [`Schedule::cron`]), or `None` for an interval schedule.
    pub fn zone(&self) -> Option<&'static str> {
        match &self.0 {
            Kind::Cron { zone, .. } => Some(zone.name()),
            Kind::Every { .. } => None,
        }
    }

    /// A short description for logs.
    pub fn describe(&self) -> String {
        match &self.0 {
            Kind::Cron { expr, zone, .. } => format!("cron {expr:?} ({})", zone.name()),
            Kind::Every { interval_ms, offset_ms } => format!("every {interval_ms} ms (offset {offset_ms} ms)"),
        }
    }
}

fn whole_ms(d: Duration, what: &'static str) -> Result<u64> {
    if d.subsec_nanos() % 1_000_000 != 0 {
        return Err(Error::invalid(what, "must be a whole number of milliseconds"));
    }
    u64::try_from(d.as_millis()).map_err(|_| Error::invalid(what, "too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(rfc: &str) -> u64 {
        u64::try_from(DateTime::parse_from_rfc3339(rfc).expect("rfc3339").timestamp_millis()).expect("after epoch")
    }

    #[test]
    fn interval_slots_are_aligned_whatever_the_start() {
        let s = Schedule::every(Duration::from_millis(100)).expect("schedule");
        assert_eq!(s.next_after(0), Some(Slot(100)));
        assert_eq!(s.next_after(99), Some(Slot(100)));
        assert_eq!(s.next_after(100), Some(Slot(200)));
        let between: Vec<u64> = s.slots_between(150, 500).map(Slot::unix_ms).collect();
        assert_eq!(between, vec![200, 300, 400, 500]);
        let off = Schedule::every_with_offset(Duration::from_secs(60), Duration::from_secs(5)).expect("offset");
        assert_eq!(off.next_after(0), Some(Slot(5_000)));
        assert_eq!(off.next_after(5_000), Some(Slot(65_000)));
        assert_eq!(off.next_after(4_999), Some(Slot(5_000)));
    }

    #[test]
    fn cron_in_utc_with_and_without_seconds() {
        let every2s = Schedule::cron("*/2 * * * * *").expect("six fields");
        let t = ms("2026-11-30T09:00:00.500Z");
        assert_eq!(every2s.next_after(t), Some(Slot(ms("2026-11-30T09:00:02Z"))));
        let slots: Vec<String> = every2s
            .slots_between(ms("2026-11-30T09:00:00Z"), ms("2026-11-30T09:00:06Z"))
            .map(Slot::key)
            .collect();
        assert_eq!(
            slots,
            vec![
                "2026-11-30T09:00:02.000Z",
                "2026-11-30T09:00:04.000Z",
                "2026-11-30T09:00:06.000Z"
            ]
        );
        let nightly = Schedule::cron("30 2 * * *").expect("five fields");
        assert_eq!(
            nightly.next_after(ms("2026-11-30T02:30:00Z")).map(Slot::key).as_deref(),
            Some("2026-12-01T02:30:00.000Z")
        );
        assert_eq!(
            nightly
                .next_after(ms("2026-11-30T02:29:59.999Z"))
                .map(Slot::key)
                .as_deref(),
            Some("2026-11-30T02:30:00.000Z")
        );
    }

    fn keys(s: &Schedule, after: &str, until: &str) -> Vec<String> {
        s.slots_between(ms(after), ms(until)).map(Slot::key).collect()
    }

    #[test]
    fn cron_in_a_zone_follows_its_wall_clock_across_daylight_saving() {
        // Europe/Berlin, 2026: 02:00 CET -> 03:00 CEST on 29 March (01:00Z), 03:00 CEST
        // -> 02:00 CET on 25 October (01:00Z).
        let nightly = Schedule::cron_in("30 2 * * *", "Europe/Berlin").expect("zone");
        // (pattern, after, until, the slots between: 2026, UTC, minutes)
        let cases: &[(&str, &str, &str, &[&str])] = &[
            // A fixed time: 02:30 CET, then 03:00 CEST right after the gap (02:30 does
            // not exist), then 02:30 CEST.
            (
                "30 2 * * *",
                "03-27T12:00",
                "03-30T12:00",
                &["03-28T01:30", "03-29T01:00", "03-30T00:30"],
            ),
            // The first 02:30 (CEST) and not the second, then 02:30 CET.
            (
                "30 2 * * *",
                "10-24T12:00",
                "10-26T12:00",
                &["10-25T00:30", "10-26T01:30"],
            ),
            // Any other pattern follows the wall clock: both halves of the repeated hour
            // (02:00, 02:30 CEST, 02:00, 02:30 CET, 03:00 CET) ...
            (
                "*/30 * * * *",
                "10-24T23:59",
                "10-25T02:00",
                &[
                    "10-25T00:00",
                    "10-25T00:30",
                    "10-25T01:00",
                    "10-25T01:30",
                    "10-25T02:00",
                ],
            ),
            (
                "0 2,14 * * *",
                "10-24T23:00",
                "10-25T14:00",
                &["10-25T00:00", "10-25T01:00", "10-25T13:00"],
            ),
            // ... and nothing in the gap: no 02:00 on 29 March (14:00 CEST is 12:00Z) ...
            (
                "0 2,14 * * *",
                "03-28T00:00",
                "03-30T00:00",
                &["03-28T01:00", "03-28T13:00", "03-29T12:00", "03-30T00:00"],
            ),
            // ... nor 02:00-02:45: 01:45 CET, then 03:00 CEST.
            (
                "*/15 * * * *",
                "03-29T00:40",
                "03-29T01:20",
                &["03-29T00:45", "03-29T01:00", "03-29T01:15"],
            ),
        ];
        let utc = |t: &str| format!("2026-{t}:00Z");
        for (expr, after, until, want) in cases {
            let s = Schedule::cron_in(expr, "Europe/Berlin").expect("zone");
            let want: Vec<String> = want.iter().map(|t| format!("2026-{t}:00.000Z")).collect();
            assert_eq!(keys(&s, &utc(after), &utc(until)), want, "{expr} in ({after}, {until}]");
        }
        // Whatever the instant a search starts from, even inside the repeated hour, a
        // fixed time fires once: every instance computes the same slots.
        for start in ["2026-10-25T00:45:00Z", "2026-10-25T01:15:00Z", "2026-10-25T01:45:00Z"] {
            assert_eq!(
                nightly.next_after(ms(start)).map(Slot::key).as_deref(),
                Some("2026-10-26T01:30:00.000Z"),
                "from {start}"
            );
        }
        // Another zone, another offset; UTC named is the default.
        let ny = Schedule::cron_in("0 9 * * 1-5", "America/New_York").expect("zone");
        assert_eq!(
            ny.next_after(ms("2026-11-30T00:00:00Z")).map(Slot::key).as_deref(),
            Some("2026-11-30T14:00:00.000Z")
        );
        let utc = Schedule::cron_in("30 2 * * *", "UTC").expect("zone");
        assert_eq!(
            keys(&utc, "2026-03-28T00:00:00Z", "2026-03-30T00:00:00Z"),
            keys(
                &Schedule::cron("30 2 * * *").expect("utc"),
                "2026-03-28T00:00:00Z",
                "2026-03-30T00:00:00Z"
            )
        );
        assert_eq!(nightly.describe(), "cron \"30 2 * * *\" (Europe/Berlin)");
        assert_eq!(
            Schedule::cron("30 2 * * *").expect("utc").describe(),
            "cron \"30 2 * * *\" (UTC)"
        );
    }

    #[test]
    fn bad_schedules_are_refused() {
        for (expr, zone) in [
            ("0 2 * * *", "Europe/Atlantis"),
            ("0 2 * * *", ""),
            ("0 2 * * *", "+02:00"),
            ("61 * * * *", "UTC"),
        ] {
            match Schedule::cron_in(expr, zone) {
                Err(Error::InvalidInput { .. }) => {}
                other => panic!("{expr:?} in {zone:?}: {other:?}"),
            }
        }
        assert!(Schedule::cron("61 * * * *").is_err());
        // Valid fields that no date matches: the job would never run.
        for never in ["0 0 30 2 *", "0 0 31 4 *", "0 0 0 30 2 * 2030"] {
            match Schedule::cron(never) {
                Err(Error::InvalidInput { reason, .. }) => assert!(reason.contains("never fires"), "{never}: {reason}"),
                other => panic!("{never:?}: {other:?}"),
            }
        }
        // Rare is not never: 29 February, and the 31st or a Monday (either matches).
        assert!(Schedule::cron("0 0 29 2 *").is_ok());
        assert!(Schedule::cron("0 0 31 2 1").is_ok());
        // A year already past is no mistake of the expression: its last slot may still be
        // due late, or taken over; after it, there is no next slot.
        let past = Schedule::cron("0 0 0 1 1 * 2020").expect("a past year");
        assert_eq!(past.next_after(1_796_005_200_000), None);
        assert!(Schedule::cron("not cron").is_err());
        assert!(Schedule::every(Duration::ZERO).is_err());
        assert!(Schedule::every(Duration::from_micros(1500)).is_err());
        assert!(Schedule::every_with_offset(Duration::from_secs(1), Duration::from_secs(1)).is_err());
    }

    #[test]
    fn slot_keys_are_valid_lease_name_parts() {
        for ms in [0, 1, 999, 1_796_005_200_250, 253_402_300_799_999] {
            let key = Slot(ms).key();
            assert!(leasehold_core::LeaseName::new(format!("job/{key}")).is_ok(), "{key}");
        }
        assert_eq!(Slot(0).key(), "1970-01-01T00:00:00.000Z");
    }
}
