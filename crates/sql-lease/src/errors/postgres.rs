//! Postgres errors → [`leasehold_core::Error`] kinds, through named SQLSTATE codes.

use super::{Phase, Target, map_with};
use leasehold_core::Error;
use leasehold_core::store::ErrorClass;

/// SQLSTATE codes this crate gives a meaning to (Postgres appendix A).
pub mod sqlstate {
    /// `42P01` undefined_table: the lease table (or a user's table) does not exist.
    pub const UNDEFINED_TABLE: &str = "42P01";
    /// `42P07` duplicate_table: a concurrent `CREATE TABLE IF NOT EXISTS` won.
    pub const DUPLICATE_TABLE: &str = "42P07";
    /// `42710` duplicate_object: a concurrent `CREATE TABLE` made the table's row type.
    pub const DUPLICATE_OBJECT: &str = "42710";
    /// `42701` duplicate_column: a concurrent `ADD COLUMN IF NOT EXISTS` won.
    pub const DUPLICATE_COLUMN: &str = "42701";
    /// `23505` unique_violation (also a concurrent `CREATE TABLE` racing on `pg_type`).
    pub const UNIQUE_VIOLATION: &str = "23505";
    /// `25006` read_only_sql_transaction: connected to a standby (read replica).
    pub const READ_ONLY_SQL_TRANSACTION: &str = "25006";
    /// `57014` query_canceled (statement_timeout, cancel request): rolled back.
    pub const QUERY_CANCELED: &str = "57014";
    /// `57P01` admin_shutdown: the backend was terminated, maybe while committing.
    pub const ADMIN_SHUTDOWN: &str = "57P01";
    /// `57P02` crash_shutdown.
    pub const CRASH_SHUTDOWN: &str = "57P02";
    /// `57P03` cannot_connect_now: the server is starting or stopping.
    pub const CANNOT_CONNECT_NOW: &str = "57P03";
    /// `57P04` database_dropped.
    pub const DATABASE_DROPPED: &str = "57P04";

    /// Class `08`: connection exception.
    pub const CLASS_CONNECTION: &str = "08";
    /// Class `22`: data exception (value too long, out of range).
    pub const CLASS_DATA: &str = "22";
    /// Class `23`: integrity constraint violation.
    pub const CLASS_INTEGRITY: &str = "23";
    /// Class `28`: invalid authorization.
    pub const CLASS_AUTH: &str = "28";
    /// Class `3D`: invalid catalog (database) name.
    pub const CLASS_CATALOG: &str = "3D";
    /// Class `3F`: invalid schema name.
    pub const CLASS_SCHEMA: &str = "3F";
    /// Class `40`: transaction rollback (serialization failure, deadlock): not applied.
    pub const CLASS_ROLLBACK: &str = "40";
    /// Class `42`: syntax error or access rule violation (missing table/column, type
    /// mismatch, no privilege, no unique index for `ON CONFLICT`).
    pub const CLASS_SYNTAX_OR_ACCESS: &str = "42";
    /// Class `53`: insufficient resources (too many connections, disk full): not applied.
    pub const CLASS_RESOURCES: &str = "53";
    /// Class `54`: program limit exceeded.
    pub const CLASS_LIMIT: &str = "54";
    /// Class `55`: object not in prerequisite state (lock not available): not applied.
    pub const CLASS_STATE: &str = "55";
    /// Class `58`: system error (I/O error in the server).
    pub const CLASS_SYSTEM: &str = "58";
    /// Class `XX`: internal error.
    pub const CLASS_INTERNAL: &str = "XX";
}

/// The class of a Postgres error code.
pub fn classify_code(code: &str, target: Target) -> ErrorClass {
    use sqlstate::*;
    match code {
        // The lease table is missing: `provision` creates it. A caller's own table
        // (a fenced write) missing is its to create.
        UNDEFINED_TABLE if target == Target::Lease => return ErrorClass::NotProvisioned,
        READ_ONLY_SQL_TRANSACTION => return ErrorClass::Misconfigured,
        QUERY_CANCELED | CANNOT_CONNECT_NOW => return ErrorClass::Unavailable,
        ADMIN_SHUTDOWN | CRASH_SHUTDOWN => return ErrorClass::Indeterminate,
        DATABASE_DROPPED => return ErrorClass::Misconfigured,
        _ => {}
    }
    match code.get(..2).unwrap_or("") {
        CLASS_CONNECTION | CLASS_ROLLBACK | CLASS_RESOURCES | CLASS_STATE => ErrorClass::Unavailable,
        CLASS_DATA | CLASS_LIMIT => ErrorClass::InvalidInput,
        CLASS_INTEGRITY => target.constraint_violated(),
        CLASS_AUTH | CLASS_CATALOG | CLASS_SCHEMA | CLASS_SYNTAX_OR_ACCESS => ErrorClass::Misconfigured,
        CLASS_SYSTEM | CLASS_INTERNAL => ErrorClass::Indeterminate,
        // Anything else is a refusal the operator must look at; retrying will not help.
        _ => ErrorClass::Misconfigured,
    }
}

/// The SQLSTATE of a database error, if it is one.
pub fn code_of(err: &sqlx::Error) -> Option<String> {
    match err {
        sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()),
        _ => None,
    }
}

/// Maps a driver error from `phase` of an operation on `target`.
pub fn map_error(err: sqlx::Error, phase: Phase, target: Target, context: &str) -> Error {
    let code = code_of(&err).unwrap_or_default();
    let hint = match (code.as_str(), target) {
        (sqlstate::READ_ONLY_SQL_TRANSACTION, _) => Some("connected to a standby: leases need the primary"),
        (sqlstate::UNDEFINED_TABLE, Target::Lease) => {
            Some("the lease table does not exist: run PostgresStore::provision or the shipped .sql")
        }
        _ => None,
    };
    map_with(err, phase, context, || classify_code(&code, target), hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_kinds() {
        use ErrorClass::*;
        let cases = [
            ("42P01", Target::Lease, NotProvisioned),
            ("42P01", Target::User, Misconfigured),
            ("42703", Target::Lease, Misconfigured),
            ("42P10", Target::Lease, Misconfigured),
            ("22001", Target::Lease, InvalidInput),
            ("23505", Target::Lease, Misconfigured),
            ("23505", Target::User, InvalidInput),
            ("25006", Target::Lease, Misconfigured),
            ("40001", Target::Lease, Unavailable),
            ("40P01", Target::User, Unavailable),
            ("53300", Target::Lease, Unavailable),
            ("57014", Target::Lease, Unavailable),
            ("57P01", Target::Lease, Indeterminate),
            ("08006", Target::Lease, Unavailable),
            ("28P01", Target::Lease, Misconfigured),
            ("XX000", Target::Lease, Indeterminate),
        ];
        for (code, target, want) in cases {
            assert_eq!(classify_code(code, target), want, "{code}");
        }
    }
}
