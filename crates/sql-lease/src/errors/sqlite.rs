//! SQLite errors → [`leasehold_core::Error`] kinds, through named result codes.

use super::{Phase, Target, map_with};
use leasehold_core::Error;
use leasehold_core::store::ErrorClass;

/// SQLite primary result codes this crate gives a meaning to
/// (<https://sqlite.org/rescode.html>; extended codes carry the primary in the low byte).
pub mod code {
    /// Generic error: a missing table or column, a syntax error.
    pub const ERROR: i64 = 1;
    /// Access permission denied.
    pub const PERM: i64 = 3;
    /// Interrupted before completing: rolled back.
    pub const INTERRUPT: i64 = 9;
    /// The database file is locked by another connection (after `busy_timeout`).
    pub const BUSY: i64 = 5;
    /// A table is locked (shared cache).
    pub const LOCKED: i64 = 6;
    /// Out of memory.
    pub const NOMEM: i64 = 7;
    /// Attempt to write a read-only database.
    pub const READONLY: i64 = 8;
    /// A disk I/O error: a commit may or may not have reached the file.
    pub const IOERR: i64 = 10;
    /// The database file is malformed.
    pub const CORRUPT: i64 = 11;
    /// The disk is full: the transaction was rolled back.
    pub const FULL: i64 = 13;
    /// The database file cannot be opened.
    pub const CANTOPEN: i64 = 14;
    /// A locking protocol error.
    pub const PROTOCOL: i64 = 15;
    /// The schema changed under a prepared statement.
    pub const SCHEMA: i64 = 17;
    /// A string or blob too large.
    pub const TOOBIG: i64 = 18;
    /// A constraint (CHECK, NOT NULL, UNIQUE) failed.
    pub const CONSTRAINT: i64 = 19;
    /// A datatype mismatch.
    pub const MISMATCH: i64 = 20;
    /// Authorization denied.
    pub const AUTH: i64 = 23;
    /// Not a database file.
    pub const NOTADB: i64 = 26;
}

/// The class of an (extended) SQLite result code.
pub fn classify_code(extended: i64, phase: Phase, target: Target) -> ErrorClass {
    use code::*;
    match extended & 0xff {
        BUSY | LOCKED | INTERRUPT | NOMEM | FULL | PROTOCOL | SCHEMA => ErrorClass::Unavailable,
        IOERR => phase.interrupted(),
        TOOBIG | MISMATCH => ErrorClass::InvalidInput,
        CONSTRAINT => target.constraint_violated(),
        ERROR | PERM | READONLY | CORRUPT | CANTOPEN | AUTH | NOTADB => ErrorClass::Misconfigured,
        // Anything else is a refusal the operator must look at; retrying will not help.
        _ => ErrorClass::Misconfigured,
    }
}

/// The extended result code of a database error, if it is one.
pub fn code_of(err: &sqlx::Error) -> Option<i64> {
    match err {
        sqlx::Error::Database(db) => db.code().and_then(|c| c.parse().ok()),
        _ => None,
    }
}

/// Maps a driver error from `phase` of an operation on `target`.
pub fn map_error(err: sqlx::Error, phase: Phase, target: Target, context: &str) -> Error {
    let missing = matches!(&err, sqlx::Error::Database(db) if db.message().starts_with("no such table"))
        && target == Target::Lease;
    let hint = missing.then_some("the lease table does not exist: run SqliteStore::provision or the shipped .sql");
    let code = code_of(&err).unwrap_or(code::ERROR);
    let class = || match missing {
        true => ErrorClass::NotProvisioned,
        false => classify_code(code, phase, target),
    };
    map_with(err, phase, context, class, hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_kinds() {
        use ErrorClass::*;
        let cases = [
            (1, Phase::Write, Target::Lease, Misconfigured),
            (5, Phase::Write, Target::Lease, Unavailable),
            (517, Phase::Write, Target::Lease, Unavailable), // SQLITE_BUSY_SNAPSHOT
            (10, Phase::Write, Target::Lease, Indeterminate),
            (10, Phase::Read, Target::Lease, Unavailable),
            (2067, Phase::Write, Target::User, InvalidInput), // SQLITE_CONSTRAINT_UNIQUE
            (275, Phase::Write, Target::Lease, Misconfigured), // SQLITE_CONSTRAINT_CHECK
            (8, Phase::Write, Target::Lease, Misconfigured),
            (26, Phase::Read, Target::Lease, Misconfigured),
        ];
        for (c, phase, target, want) in cases {
            assert_eq!(classify_code(c, phase, target), want, "{c}");
        }
    }
}
