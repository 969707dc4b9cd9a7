//! The values a lease statement binds, validated before anything is sent.

use leasehold_core::{
    Error, FencingToken, LeaseName, Result,
    store::{LeaseRecord, Precondition, Version},
};
use sqlx::Database;
use sqlx::query::Query;

use crate::row::version_arg;
use crate::statements::{Arg, LeaseStatement, NewVersion, Statements};
use crate::{ColumnLimits, HostClock, RawRow, SqlDatabase, SqlValue};

/// The values of one lease operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseArgs {
    name: String,
    holder: Option<String>,
    token: i64,
    ttl_ms: i64,
    wall_ms: Option<i64>,
    version: i64,
    write_id: i64,
    clock: Option<&'static HostClock>,
}

impl LeaseArgs {
    fn base(name: &LeaseName, limits: &ColumnLimits, holder: Option<&str>) -> Result<Self> {
        limits.check(name.as_str(), holder)?;
        Ok(Self {
            name: name.as_str().to_owned(),
            holder: holder.map(str::to_owned),
            token: 0,
            ttl_ms: 0,
            wall_ms: None,
            version: -1,
            write_id: fresh_write_id(),
            clock: None,
        })
    }

    /// The host clock that [`Arg::NowMs`] and [`Arg::BootId`] are read from when the
    /// values are bound (SQLite's statements; `None` for Postgres). Without one both
    /// bind `NULL`, and the SQLite statements then grant nothing: their writes fail.
    #[must_use]
    pub fn with_clock(mut self, clock: Option<&'static HostClock>) -> Self {
        self.clock = clock;
        self
    }

    /// For a read.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a name longer than the table's column.
    pub fn read(name: &LeaseName, limits: &ColumnLimits) -> Result<Self> {
        Self::base(name, limits, None)
    }

    /// For a conditional write of `record`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a name or holder longer than the table's columns, a
    /// token of 0 (never issued) or above `i64::MAX`, a wall-clock expiry above `i64::MAX`.
    pub fn write(name: &LeaseName, limits: &ColumnLimits, expect: &Precondition, record: &LeaseRecord) -> Result<Self> {
        let mut a = Self::base(name, limits, record.holder.as_ref().map(|h| h.as_str()))?;
        if record.token == FencingToken::ZERO && !matches!(expect, Precondition::Claimable) {
            return Err(Error::invalid("fencing token", "0 is never issued"));
        }
        a.token = record.token.to_i64()?;
        a.ttl_ms = i64::try_from(record.ttl.as_millis()).map_err(|_| Error::invalid("ttl", "out of range"))?;
        a.wall_ms = record
            .wall_expires_at_ms
            .map(|w| i64::try_from(w).map_err(|_| Error::invalid("wall_expires_at_ms", "above i64::MAX")))
            .transpose()?;
        if let Precondition::Version(v) = expect {
            a.version = version_arg(v);
        }
        Ok(a)
    }

    /// For a conditional delete.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a name longer than the table's column.
    pub fn delete(name: &LeaseName, limits: &ColumnLimits, version: &Version) -> Result<Self> {
        let mut a = Self::base(name, limits, None)?;
        a.version = version_arg(version);
        Ok(a)
    }

    /// The token bound as [`Arg::Token`] (0 for a claim: the store issues it).
    pub fn token(&self) -> i64 {
        self.token
    }

    /// The row a write of these values left when it applied, at `version` (MySQL's
    /// statements write [`Arg::WriteId`] as the new version, SQLite's the bound version
    /// plus one) with `token`; a whole TTL left. For a delete (`deleted`), a tombstone.
    pub fn written_row(&self, token: i64, deleted: bool, version: NewVersion) -> RawRow {
        RawRow {
            applied: true,
            stale: Some(false),
            deleted,
            holder: if deleted { None } else { self.holder.clone() },
            fence_token: token,
            version: match version {
                NewVersion::WriteId => self.write_id,
                // The statement matched the row at `self.version`, a valid version
                // (at most `i64::MAX - 1`); `i64::MAX` would read as corrupt.
                NewVersion::Next => self.version.saturating_add(1),
            },
            ttl_ms: self.ttl_ms,
            wall_expires_at_ms: self.wall_ms,
            remaining_ms: Some(self.ttl_ms),
        }
    }

    /// The row a release of these values left when it applied
    /// ([`crate::statements::Reply::Vacates`]): no holder and no wall-clock expiry, the
    /// bound token, at `version`.
    pub fn vacated_row(&self, version: NewVersion) -> RawRow {
        RawRow {
            holder: None,
            wall_expires_at_ms: None,
            ..self.written_row(self.token, false, version)
        }
    }

    /// Binds these values in `statement`'s order. The host clock is read here, as late
    /// as possible before the statement runs: an earlier "now" only judges expiry later,
    /// and writes an expiry no later than the holder counts from (it counts from before
    /// sending).
    pub fn bind<'q, DB: SqlDatabase>(
        &self,
        statement: &LeaseStatement,
        mut q: Query<'q, DB, <DB as Database>::Arguments>,
    ) -> Query<'q, DB, <DB as Database>::Arguments> {
        for arg in &statement.args {
            q = DB::bind_value(q, self.value(*arg));
        }
        q
    }

    /// The value bound for `arg`.
    fn value(&self, arg: Arg) -> SqlValue {
        match arg {
            Arg::Name => SqlValue::Text(Some(self.name.clone())),
            Arg::Holder => SqlValue::Text(self.holder.clone()),
            Arg::Token => SqlValue::Int(Some(self.token)),
            Arg::TtlMs => SqlValue::Int(Some(self.ttl_ms)),
            Arg::WallMs => SqlValue::Int(self.wall_ms),
            Arg::Version => SqlValue::Int(Some(self.version)),
            Arg::WriteId => SqlValue::Int(Some(self.write_id)),
            Arg::NowMs => SqlValue::Int(self.clock.map(HostClock::now_ms)),
            Arg::BootId => SqlValue::Text(self.clock.map(|c| c.boot_id().to_owned())),
        }
    }
}

/// The statement for a write with `expect`.
///
/// # Errors
/// [`leasehold_core::Error::InvalidInput`] for [`Precondition::Vacant`], which a store
/// with a clock is never sent ([`Precondition::Claimable`] is its claim).
pub fn write_statement<'s>(statements: &'s Statements, expect: &Precondition) -> Result<&'s LeaseStatement> {
    match expect {
        Precondition::Absent => Ok(&statements.write_absent),
        Precondition::Version(_) => Ok(&statements.write_version),
        Precondition::Claimable => Ok(&statements.write_claimable),
        _ => Err(leasehold_core::store::not_taken("a SQL store", expect)),
    }
}

/// A random 63-bit id for one write (SQLite tells its own write from a conflict by it;
/// MySQL writes it as the row's new version); 0 and `i64::MAX` are never used, so a row
/// that was never written by this crate cannot match and every id is a valid version.
pub(crate) fn fresh_write_id() -> i64 {
    i64::try_from(rand::random::<u64>() >> 1)
        .unwrap_or(1)
        .clamp(1, i64::MAX - 1)
}

/// The columns of a batch of renewals ([`crate::RenewBatch`]), one array
/// per column in [`crate::statements::RENEWAL_BATCH_ARRAYS`] order, each renewal validated
/// as [`LeaseArgs::write`] validates one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenewalArgs {
    /// Lease names.
    pub names: Vec<String>,
    /// Holders (a renewal always names its holder).
    pub holders: Vec<String>,
    /// Fencing tokens.
    pub tokens: Vec<i64>,
    /// Expected versions.
    pub versions: Vec<i64>,
    /// TTLs in ms.
    pub ttls_ms: Vec<i64>,
    /// Wall-clock expiries in Unix ms.
    pub walls_ms: Vec<Option<i64>>,
}

impl RenewalArgs {
    /// The values of the renewal of `record` held at `version` under `name`, checked.
    ///
    /// # Errors
    /// As [`LeaseArgs::write`]; [`Error::InvalidInput`] for a vacant record (a renewal
    /// names its holder).
    pub fn check(
        name: &LeaseName,
        limits: &ColumnLimits,
        version: &Version,
        record: &LeaseRecord,
    ) -> Result<LeaseArgs> {
        if record.holder.is_none() {
            return Err(Error::invalid("record", "a renewal names its holder"));
        }
        LeaseArgs::write(name, limits, &Precondition::Version(version.clone()), record)
    }

    /// The arrays of the renewals `each` (as [`RenewalArgs::check`] made them), in order.
    pub fn of<'a>(each: impl IntoIterator<Item = &'a LeaseArgs>) -> Self {
        let mut out = Self::default();
        for a in each {
            out.names.push(a.name.clone());
            out.holders.push(a.holder.clone().unwrap_or_default());
            out.tokens.push(a.token);
            out.versions.push(a.version);
            out.ttls_ms.push(a.ttl_ms);
            out.walls_ms.push(a.wall_ms);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_core::{HolderId, Ttl};

    #[test]
    fn bad_values_are_refused_before_sending() {
        let name = LeaseName::new("a").expect("name");
        let limits = ColumnLimits { name: 10, holder: 4 };
        let rec = |h: &str, t: u64| {
            LeaseRecord::held(
                HolderId::new(h).expect("h"),
                FencingToken::new(t),
                Ttl::from_millis(100).expect("ttl"),
            )
        };
        assert!(LeaseArgs::write(&name, &limits, &Precondition::Absent, &rec("w1", 1)).is_ok());
        assert!(LeaseArgs::write(&name, &limits, &Precondition::Absent, &rec("w1", 0)).is_err());
        assert!(LeaseArgs::write(&name, &limits, &Precondition::Absent, &rec("w1", u64::MAX)).is_err());
        assert!(LeaseArgs::write(&name, &limits, &Precondition::Absent, &rec("long-holder", 1)).is_err());
        let long = LeaseName::new("a".repeat(11)).expect("name");
        assert!(LeaseArgs::read(&long, &limits).is_err());
        // Claimable ignores the record's token: 0 is fine there.
        assert!(LeaseArgs::write(&name, &limits, &Precondition::Claimable, &rec("w1", 0)).is_ok());
    }

    #[test]
    fn write_ids_are_positive_and_differ() {
        let ids: std::collections::HashSet<i64> = (0..1000).map(|_| fresh_write_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|i| *i > 0));
    }
}
