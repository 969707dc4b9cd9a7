//! Rows returned by the lease statements, and what they mean for each operation.

use std::time::Duration;

use leasehold_core::{
    Error, FencingToken, HolderId, LeaseName, Result,
    store::{
        CasOutcome, Current, DeleteOutcome, EXPIRY_SLACK, LeaseRecord, Precondition, Stored, Version,
        expiry_is_possible, record_codec,
    },
};
use sqlx::{Database, Decode, Row, Type};

/// One row of [`crate::statements::RESULT_COLUMNS`], as the driver decoded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRow {
    /// The statement's write applied and this is the new row.
    pub applied: bool,
    /// The row is from a snapshot older than the write's check, so not current; `None`:
    /// the statement leaves that to the client (Postgres; see [`Guard`]).
    pub stale: Option<bool>,
    /// A tombstone left by a delete: the record does not exist.
    pub deleted: bool,
    /// The holder column.
    pub holder: Option<String>,
    /// The fence_token column.
    pub fence_token: i64,
    /// The version column.
    pub version: i64,
    /// The ttl_ms column.
    pub ttl_ms: i64,
    /// The wall_expires_at_ms column.
    pub wall_expires_at_ms: Option<i64>,
    /// Time left on the database clock, in ms (`None`: the expiry column is not a time).
    pub remaining_ms: Option<i64>,
}

impl RawRow {
    /// Decodes one row by column name.
    ///
    /// # Errors
    /// The driver's decode error (a column of the wrong type): the store maps it to
    /// [`Error::Misconfigured`] (Postgres: the column's type is wrong) or
    /// [`Error::CorruptRecord`] (SQLite: a value of the wrong type in a row).
    pub fn decode<R>(row: &R) -> std::result::Result<Self, sqlx::Error>
    where
        R: Row,
        for<'c> &'c str: sqlx::ColumnIndex<R>,
        for<'r> bool: Decode<'r, R::Database>,
        bool: Type<R::Database>,
        for<'r> i64: Decode<'r, R::Database>,
        i64: Type<R::Database>,
        for<'r> String: Decode<'r, R::Database>,
        String: Type<R::Database>,
        R::Database: Database,
    {
        Ok(Self {
            applied: row.try_get("applied")?,
            stale: row.try_get("stale")?,
            deleted: row.try_get("deleted")?,
            holder: row.try_get("holder")?,
            fence_token: row.try_get("fence_token")?,
            version: row.try_get("version")?,
            ttl_ms: row.try_get("ttl_ms")?,
            wall_expires_at_ms: row.try_get("wall_expires_at_ms")?,
            remaining_ms: row.try_get("remaining_ms")?,
        })
    }

    /// The record this row holds (not for tombstones).
    ///
    /// # Errors
    /// [`Error::CorruptRecord`] for values that are not a valid record: a negative or zero
    /// token, a bad holder, a TTL out of range, a negative wall-clock expiry, an expiry
    /// that is not a time.
    pub fn stored(&self, name: &LeaseName) -> Result<Stored> {
        let corrupt = |what: &str, v: i64| Error::corrupt(name.as_str(), format!("{what} is {v}"));
        // No write issues i64::MAX (the token's last value, `FencingToken::MAX`, is one
        // below it, and the statements' validity checks stop there, so that the next
        // version cannot overflow): a row showing it was written by someone else (or
        // clamped there by MySQL outside strict mode), and is never claimable.
        if self.fence_token == i64::MAX {
            return Err(corrupt("fence_token", self.fence_token));
        }
        if self.version == i64::MAX {
            return Err(corrupt("version", self.version));
        }
        let token = u64::try_from(self.fence_token).map_err(|_| corrupt("fence_token", self.fence_token))?;
        let ttl = u64::try_from(self.ttl_ms).map_err(|_| corrupt("ttl_ms", self.ttl_ms))?;
        let wall = self
            .wall_expires_at_ms
            .map(|w| u64::try_from(w).map_err(|_| corrupt("wall_expires_at_ms", w)))
            .transpose()?;
        let record = record_codec::from_parts(name, self.holder.as_deref(), token, ttl, wall)?;
        let remaining = self
            .remaining_ms
            .ok_or_else(|| Error::corrupt(name.as_str(), "expiry is not a time"))?;
        let remaining = Duration::from_millis(u64::try_from(remaining).unwrap_or(0));
        if !expiry_is_possible(&record, remaining) {
            return Err(Error::corrupt(
                name.as_str(),
                format!(
                    "its expiry lies {remaining:?} ahead, beyond its TTL of {:?} plus {EXPIRY_SLACK:?}",
                    record.ttl.get()
                ),
            ));
        }
        let version = u64::try_from(self.version)
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| corrupt("version", self.version))?;
        Ok(Stored::new(record, Version::from(version)).with_remaining(Some(remaining)))
    }
}

/// Parses a version this crate issued (a positive integer). Anything else matches no
/// row: the statement still runs, so a conflict reports the current record.
pub fn version_arg(v: &Version) -> i64 {
    v.as_str().parse::<i64>().ok().filter(|v| *v > 0).unwrap_or(-1)
}

/// What the rows of a read mean.
///
/// # Errors
/// [`Error::CorruptRecord`] for a row that is not a valid record.
pub fn read_outcome(name: &LeaseName, rows: &[RawRow]) -> Result<Option<Stored>> {
    match rows.first() {
        None => Ok(None),
        Some(r) if r.deleted => Ok(None),
        Some(r) => r.stored(name).map(Some),
    }
}

/// What a conditional write required of the row, so that the row a refused write
/// returns can be judged. A Postgres write returns, when it did not apply, the row as
/// its statement's snapshot shows it; if that row satisfies the guard (and is a valid
/// record), it predates the check that failed (a concurrent transaction committed while
/// the write waited for its lock) and is no answer: [`Current::Unknown`].
#[derive(Debug, Clone, Copy)]
pub enum Guard<'a> {
    /// A claim: a tombstone, a vacant row or one whose expiry passed, below the last token.
    Claimable,
    /// A create: a tombstone.
    Absent,
    /// A version write of a record with `token`: the row at `version`, not a tombstone,
    /// its token at most `token` (a token never goes backwards).
    Version {
        /// The version written on.
        version: &'a Version,
        /// The written record's token.
        token: FencingToken,
    },
    /// A renewal or release: the row at `version`, not a tombstone, showing `holder`
    /// with `token`.
    Held {
        /// The version written on.
        version: &'a Version,
        /// The holder renewing or releasing.
        holder: Option<&'a HolderId>,
        /// Its token.
        token: FencingToken,
    },
    /// A delete: the row at `version`, not a tombstone.
    Delete {
        /// The version deleted.
        version: &'a Version,
    },
}

impl Guard<'_> {
    /// The guard of a write of a record with `token` on `expect` (a renewal and a
    /// release are [`Guard::Held`] instead).
    ///
    /// # Errors
    /// [`leasehold_core::Error::InvalidInput`] for a precondition a SQL store does not
    /// take, as [`crate::write_statement`] answers it.
    pub fn of(expect: &Precondition, token: FencingToken) -> Result<Guard<'_>> {
        match expect {
            Precondition::Absent => Ok(Guard::Absent),
            Precondition::Version(version) => Ok(Guard::Version { version, token }),
            Precondition::Claimable => Ok(Guard::Claimable),
            _ => Err(leasehold_core::store::not_taken("a SQL store", expect)),
        }
    }

    /// The guard of a renewal or release of `record`, held at `version`.
    pub fn held<'a>(version: &'a Version, record: &'a LeaseRecord) -> Guard<'a> {
        Guard::Held {
            version,
            holder: record.holder.as_ref(),
            token: record.token,
        }
    }

    /// Whether `row` satisfies the guard, as the write's SQL condition would have judged
    /// it (the row's validity is [`RawRow::stored`]'s to say).
    fn admits(&self, row: &RawRow) -> bool {
        let at = |v: &Version| !row.deleted && row.version == version_arg(v);
        let token = |t: FencingToken| i64::try_from(t.get()).unwrap_or(i64::MAX);
        match *self {
            Guard::Claimable => {
                row.fence_token < token(FencingToken::MAX)
                    && (row.deleted || row.holder.is_none() || row.remaining_ms == Some(0))
            }
            Guard::Absent => row.deleted,
            Guard::Version { version, token: t } => at(version) && row.fence_token <= token(t),
            Guard::Held {
                version,
                holder,
                token: t,
            } => {
                at(version)
                    && holder.is_some_and(|h| row.holder.as_deref() == Some(h.as_str()))
                    && row.fence_token == token(t)
            }
            Guard::Delete { version } => at(version),
        }
    }
}

fn current(name: &LeaseName, row: &RawRow, guard: Guard<'_>) -> Result<Current> {
    let stale = row
        .stale
        .unwrap_or_else(|| guard.admits(row) && row.stored(name).is_ok());
    if stale {
        // Read in a snapshot older than the check that failed: not the current record.
        return Ok(Current::Unknown);
    }
    if row.deleted {
        return Ok(Current::Absent);
    }
    Ok(Current::Present(row.stored(name)?))
}

/// What the rows of a conditional write mean.
///
/// # Errors
/// [`Error::CorruptRecord`] when the current (or written) row is not a valid record.
pub fn write_outcome(name: &LeaseName, guard: Guard<'_>, rows: &[RawRow]) -> Result<CasOutcome> {
    match rows.first() {
        Some(r) if r.applied => Ok(CasOutcome::Written(r.stored(name)?)),
        Some(r) => Ok(CasOutcome::Conflict(current(name, r, guard)?)),
        None => Ok(CasOutcome::Conflict(match guard {
            // The insert hit a row the snapshot does not show: committed concurrently.
            Guard::Claimable | Guard::Absent => Current::Unknown,
            // The update matched no row: there is none (in the statement's snapshot).
            Guard::Version { .. } | Guard::Held { .. } | Guard::Delete { .. } => Current::Absent,
        })),
    }
}

/// What the rows of a conditional delete mean.
///
/// # Errors
/// [`Error::CorruptRecord`] when the current row is not a valid record.
pub fn delete_outcome(name: &LeaseName, version: &Version, rows: &[RawRow]) -> Result<DeleteOutcome> {
    match rows.first() {
        Some(r) if r.applied => Ok(DeleteOutcome::Deleted),
        Some(r) => Ok(DeleteOutcome::Conflict(current(name, r, Guard::Delete { version })?)),
        None => Ok(DeleteOutcome::Conflict(Current::Absent)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> RawRow {
        RawRow {
            applied: false,
            stale: Some(false),
            deleted: false,
            holder: Some("w1".into()),
            fence_token: 3,
            version: 7,
            ttl_ms: 1000,
            wall_expires_at_ms: None,
            remaining_ms: Some(250),
        }
    }

    fn name() -> LeaseName {
        LeaseName::new("a").expect("name")
    }

    #[test]
    fn rows_decode_to_records() {
        let s = row().stored(&name()).expect("valid");
        assert_eq!(s.record.token.get(), 3);
        assert_eq!(s.version.as_str(), "7");
        assert_eq!(s.remaining, Some(Duration::from_millis(250)));
    }

    #[test]
    fn corrupt_values_are_corrupt_records() {
        let bad = [
            RawRow {
                fence_token: 0,
                ..row()
            },
            RawRow {
                fence_token: -4,
                ..row()
            },
            RawRow {
                holder: Some("bad holder".into()),
                ..row()
            },
            RawRow {
                holder: Some(String::new()),
                ..row()
            },
            RawRow { ttl_ms: 0, ..row() },
            RawRow {
                fence_token: i64::MAX,
                ..row()
            },
            RawRow {
                version: i64::MAX,
                ..row()
            },
            RawRow { ttl_ms: -1, ..row() },
            RawRow {
                wall_expires_at_ms: Some(-1),
                ..row()
            },
            RawRow {
                remaining_ms: None,
                ..row()
            },
        ];
        for r in bad {
            assert!(
                matches!(
                    read_outcome(&name(), std::slice::from_ref(&r)),
                    Err(Error::CorruptRecord { .. })
                ),
                "{r:?} decoded"
            );
        }
    }

    #[test]
    fn the_last_token_is_a_valid_record() {
        let last = RawRow {
            fence_token: i64::MAX - 1,
            holder: None,
            ..row()
        };
        let s = read_outcome(&name(), &[last]).expect("ok").expect("a record");
        assert_eq!(s.record.token, leasehold_core::FencingToken::MAX);
    }

    #[test]
    fn outcomes_follow_the_rows() {
        let n = name();
        assert_eq!(read_outcome(&n, &[]).expect("ok"), None);
        assert_eq!(
            read_outcome(&n, &[RawRow { deleted: true, ..row() }]).expect("ok"),
            None
        );
        let applied = RawRow { applied: true, ..row() };
        assert!(matches!(
            write_outcome(&n, Guard::Claimable, &[applied]).expect("ok"),
            CasOutcome::Written(_)
        ));
        assert!(matches!(
            write_outcome(&n, Guard::Claimable, &[row()]).expect("ok"),
            CasOutcome::Conflict(Current::Present(_))
        ));
        assert!(matches!(
            write_outcome(
                &n,
                Guard::Claimable,
                &[RawRow {
                    stale: Some(true),
                    ..row()
                }]
            )
            .expect("ok"),
            CasOutcome::Conflict(Current::Unknown)
        ));
        assert!(matches!(
            write_outcome(&n, Guard::Absent, &[]).expect("ok"),
            CasOutcome::Conflict(Current::Unknown)
        ));
        assert!(matches!(
            write_outcome(
                &n,
                Guard::of(&Precondition::Version(Version::new("1")), FencingToken::new(3)).expect("taken"),
                &[]
            )
            .expect("ok"),
            CasOutcome::Conflict(Current::Absent)
        ));
        assert!(matches!(
            delete_outcome(&n, &Version::new("7"), &[RawRow { deleted: true, ..row() }]).expect("ok"),
            DeleteOutcome::Conflict(Current::Absent)
        ));
        assert_eq!(version_arg(&Version::new("12")), 12);
    }

    /// A row the statement left unjudged (`stale` NULL, Postgres) is no answer when it
    /// would have let the write apply, and the current record otherwise.
    #[test]
    fn an_unjudged_row_is_judged_by_the_guard() {
        let n = name();
        let unjudged = RawRow { stale: None, ..row() };
        let judged = |guard: Guard<'_>, r: RawRow| match write_outcome(&n, guard, &[r]).expect("ok") {
            CasOutcome::Conflict(Current::Unknown) => "unknown",
            CasOutcome::Conflict(Current::Present(_)) => "present",
            CasOutcome::Conflict(Current::Absent) => "absent",
            CasOutcome::Written(_) => "written",
        };
        let v7 = Version::new("7");
        let v8 = Version::new("8");
        let w1 = HolderId::new("w1").expect("holder");
        let w2 = HolderId::new("w2").expect("holder");
        let (t3, t2) = (FencingToken::new(3), FencingToken::new(2));
        // Held by w1 with 250 ms left: not claimable; free or expired, it is.
        assert_eq!(judged(Guard::Claimable, unjudged.clone()), "present");
        assert_eq!(
            judged(
                Guard::Claimable,
                RawRow {
                    holder: None,
                    ..unjudged.clone()
                }
            ),
            "unknown"
        );
        assert_eq!(
            judged(
                Guard::Claimable,
                RawRow {
                    remaining_ms: Some(0),
                    ..unjudged.clone()
                }
            ),
            "unknown"
        );
        let last = i64::try_from(FencingToken::MAX.get()).expect("fits");
        assert_eq!(
            judged(
                Guard::Claimable,
                RawRow {
                    holder: None,
                    fence_token: last,
                    ..unjudged.clone()
                }
            ),
            "present"
        );
        // A corrupt row is reported as one, never hidden as "unknown".
        assert!(
            write_outcome(
                &n,
                Guard::Claimable,
                &[RawRow {
                    holder: None,
                    ttl_ms: 0,
                    ..unjudged.clone()
                }]
            )
            .is_err()
        );
        assert_eq!(judged(Guard::Absent, unjudged.clone()), "present");
        assert_eq!(
            judged(
                Guard::Version {
                    version: &v7,
                    token: t3
                },
                unjudged.clone()
            ),
            "unknown"
        );
        assert_eq!(
            judged(
                Guard::Version {
                    version: &v7,
                    token: t2
                },
                unjudged.clone()
            ),
            "present"
        );
        assert_eq!(
            judged(
                Guard::Version {
                    version: &v8,
                    token: t3
                },
                unjudged.clone()
            ),
            "present"
        );
        let held = |holder, version, token| Guard::Held { version, holder, token };
        assert_eq!(judged(held(Some(&w1), &v7, t3), unjudged.clone()), "unknown");
        assert_eq!(judged(held(Some(&w2), &v7, t3), unjudged.clone()), "present");
        assert_eq!(judged(held(Some(&w1), &v7, t2), unjudged.clone()), "present");
        assert_eq!(judged(held(Some(&w1), &v8, t3), unjudged.clone()), "present");
        assert_eq!(
            judged(
                held(Some(&w1), &v7, t3),
                RawRow {
                    deleted: true,
                    ..unjudged.clone()
                }
            ),
            "absent"
        );
        assert!(matches!(
            delete_outcome(&n, &v7, std::slice::from_ref(&unjudged)).expect("ok"),
            DeleteOutcome::Conflict(Current::Unknown)
        ));
        assert!(matches!(
            delete_outcome(&n, &v8, &[unjudged]).expect("ok"),
            DeleteOutcome::Conflict(Current::Present(_))
        ));
        assert_eq!(version_arg(&Version::new("etag-xyz")), -1);
        assert_eq!(version_arg(&Version::new("0")), -1);
    }
}
