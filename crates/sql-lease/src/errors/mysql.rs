//! MySQL and MariaDB errors → [`leasehold_core::Error`] kinds, through named server
//! error numbers (the SQLSTATE of most of them is the catch-all `HY000`, so the number
//! is what says what happened).

use super::{Phase, Target, map_with};
use leasehold_core::Error;
use leasehold_core::store::ErrorClass;

/// Server error numbers this crate gives a meaning to (MySQL's and MariaDB's error
/// reference; MariaDB keeps MySQL's numbers and adds its own above 1900).
pub mod number {
    /// `ER_CON_COUNT_ERROR`: too many connections (nothing ran).
    pub const TOO_MANY_CONNECTIONS: u16 = 1040;
    /// `ER_TOO_MANY_USER_CONNECTIONS`: the user's `max_user_connections` are in use.
    pub const TOO_MANY_USER_CONNECTIONS: u16 = 1203;
    /// `ER_USER_LIMIT_REACHED`: the user's hourly limit of connections or queries.
    pub const USER_LIMIT_REACHED: u16 = 1226;
    /// MySQL `ER_SERVER_OFFLINE_MODE`: the server is in offline mode.
    pub const SERVER_OFFLINE_MODE: u16 = 3032;
    /// `ER_DBACCESS_DENIED_ERROR`: no access to the database.
    pub const DB_ACCESS_DENIED: u16 = 1044;
    /// `ER_ACCESS_DENIED_ERROR`: bad user or password.
    pub const ACCESS_DENIED: u16 = 1045;
    /// `ER_BAD_NULL_ERROR`: `NULL` into a `NOT NULL` column.
    pub const BAD_NULL: u16 = 1048;
    /// `ER_BAD_DB_ERROR`: unknown database.
    pub const BAD_DB: u16 = 1049;
    /// `ER_SERVER_SHUTDOWN`: the server is shutting down, maybe while committing.
    pub const SERVER_SHUTDOWN: u16 = 1053;
    /// `ER_BAD_FIELD_ERROR`: unknown column.
    pub const BAD_FIELD: u16 = 1054;
    /// `ER_DUP_ENTRY`: a unique key already holds the value.
    pub const DUP_ENTRY: u16 = 1062;
    /// `ER_PARSE_ERROR`: a syntax error.
    pub const PARSE_ERROR: u16 = 1064;
    /// `ER_RECORD_FILE_FULL`: the table is full (nothing written).
    pub const TABLE_FULL: u16 = 1114;
    /// `ER_TABLEACCESS_DENIED_ERROR`: no privilege on the table.
    pub const TABLE_ACCESS_DENIED: u16 = 1142;
    /// `ER_COLUMNACCESS_DENIED_ERROR`: no privilege on a column.
    pub const COLUMN_ACCESS_DENIED: u16 = 1143;
    /// `ER_NO_SUCH_TABLE`: the table does not exist.
    pub const NO_SUCH_TABLE: u16 = 1146;
    /// `ER_LOCK_WAIT_TIMEOUT`: `innodb_lock_wait_timeout` ran out; the statement was
    /// rolled back.
    pub const LOCK_WAIT_TIMEOUT: u16 = 1205;
    /// `ER_LOCK_DEADLOCK`: chosen as a deadlock victim; the transaction was rolled back.
    pub const LOCK_DEADLOCK: u16 = 1213;
    /// `ER_WARN_DATA_OUT_OF_RANGE`: a value out of the column's range.
    pub const DATA_OUT_OF_RANGE: u16 = 1264;
    /// `ER_OPTION_PREVENTS_STATEMENT`: `--read-only` (a replica) refuses the write.
    pub const READ_ONLY: u16 = 1290;
    /// `ER_TRUNCATED_WRONG_VALUE`: an incorrect value.
    pub const TRUNCATED_WRONG_VALUE: u16 = 1292;
    /// `ER_QUERY_INTERRUPTED`: the statement was killed.
    pub const QUERY_INTERRUPTED: u16 = 1317;
    /// `ER_TRUNCATED_WRONG_VALUE_FOR_FIELD`: an incorrect value for a column.
    pub const WRONG_VALUE_FOR_FIELD: u16 = 1366;
    /// `ER_DATA_TOO_LONG`: a value longer than its column.
    pub const DATA_TOO_LONG: u16 = 1406;
    /// `ER_ROW_IS_REFERENCED_2`: a foreign key refuses a delete or update.
    pub const ROW_IS_REFERENCED: u16 = 1451;
    /// `ER_NO_REFERENCED_ROW_2`: a foreign key refuses an insert or update.
    pub const NO_REFERENCED_ROW: u16 = 1452;
    /// `ER_DATA_OUT_OF_RANGE`: an arithmetic result outside `BIGINT`.
    pub const ARITHMETIC_OUT_OF_RANGE: u16 = 1690;
    /// `ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION`.
    pub const READ_ONLY_TRANSACTION: u16 = 1792;
    /// MariaDB `ER_CONNECTION_KILLED`: the connection was killed, maybe mid-commit.
    pub const CONNECTION_KILLED: u16 = 1927;
    /// MariaDB `ER_STATEMENT_TIMEOUT`: `max_statement_time` ran out (rolled back).
    pub const MARIADB_STATEMENT_TIMEOUT: u16 = 1969;
    /// MySQL `ER_QUERY_TIMEOUT`: `max_execution_time` ran out (a `SELECT`).
    pub const MYSQL_QUERY_TIMEOUT: u16 = 3024;
}

/// The class of a server error number.
pub fn classify_number(n: u16, phase: Phase, target: Target) -> ErrorClass {
    use number::*;
    match n {
        // The lease table is missing: `provision` creates it. A caller's own table
        // (a fenced write) missing is its to create.
        NO_SUCH_TABLE if target == Target::Lease => ErrorClass::NotProvisioned,
        TOO_MANY_CONNECTIONS
        | TOO_MANY_USER_CONNECTIONS
        | USER_LIMIT_REACHED
        | SERVER_OFFLINE_MODE
        | LOCK_WAIT_TIMEOUT
        | LOCK_DEADLOCK
        | TABLE_FULL
        | MARIADB_STATEMENT_TIMEOUT
        | MYSQL_QUERY_TIMEOUT => ErrorClass::Unavailable,
        SERVER_SHUTDOWN | CONNECTION_KILLED | QUERY_INTERRUPTED => phase.interrupted(),
        BAD_NULL
        | DATA_OUT_OF_RANGE
        | TRUNCATED_WRONG_VALUE
        | WRONG_VALUE_FOR_FIELD
        | DATA_TOO_LONG
        | ARITHMETIC_OUT_OF_RANGE => ErrorClass::InvalidInput,
        DUP_ENTRY | ROW_IS_REFERENCED | NO_REFERENCED_ROW => target.constraint_violated(),
        DB_ACCESS_DENIED
        | ACCESS_DENIED
        | BAD_DB
        | BAD_FIELD
        | PARSE_ERROR
        | TABLE_ACCESS_DENIED
        | COLUMN_ACCESS_DENIED
        | NO_SUCH_TABLE
        | READ_ONLY
        | READ_ONLY_TRANSACTION => ErrorClass::Misconfigured,
        // Anything else is a refusal the operator must look at; retrying will not help.
        _ => ErrorClass::Misconfigured,
    }
}

/// The server error number of a database error, if it is one.
pub fn number_of(err: &sqlx::Error) -> Option<u16> {
    match err {
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .map(sqlx::mysql::MySqlDatabaseError::number),
        _ => None,
    }
}

/// Maps a driver error from `phase` of an operation on `target`, for
/// `leasehold-mysql`'s lease table.
pub fn map_error(err: sqlx::Error, phase: Phase, target: Target, context: &str) -> Error {
    map_error_for(
        err,
        phase,
        target,
        context,
        "run MySqlStore::provision or the shipped .sql",
    )
}

/// [`map_error`] for a store whose lease table is created another way: a missing one
/// is reported with `remedy` (what creates it).
pub fn map_error_for(err: sqlx::Error, phase: Phase, target: Target, context: &str, remedy: &str) -> Error {
    let number = number_of(&err);
    // SQLSTATE class 08, a connection exception (a Galera node not ready: 1047,
    // `08S01`), whatever its number: nothing ran, and it may pass.
    let connection = matches!(&err, sqlx::Error::Database(db) if db.code().is_some_and(|c| c.starts_with("08")));
    let hint = match (number, target) {
        (Some(number::READ_ONLY | number::READ_ONLY_TRANSACTION), _) => {
            Some("the server is read-only, a replica: leases need the primary".to_owned())
        }
        (Some(number::NO_SUCH_TABLE), Target::Lease) => Some(format!("the lease table does not exist: {remedy}")),
        _ => None,
    };
    map_with(
        err,
        phase,
        context,
        || match connection {
            true => ErrorClass::Unavailable,
            false => classify_number(number.unwrap_or(0), phase, target),
        },
        hint.as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_map_to_kinds() {
        use ErrorClass::*;
        let cases = [
            (1146, Phase::Read, Target::Lease, NotProvisioned),
            (1203, Phase::Connect, Target::Lease, Unavailable),
            (1226, Phase::Connect, Target::Lease, Unavailable),
            (3032, Phase::Connect, Target::Lease, Unavailable),
            (1045, Phase::Connect, Target::Lease, Misconfigured),
            (1049, Phase::Connect, Target::Lease, Misconfigured),
            (1146, Phase::Write, Target::User, Misconfigured),
            (1054, Phase::Write, Target::Lease, Misconfigured),
            (1062, Phase::Write, Target::Lease, Misconfigured),
            (1062, Phase::Write, Target::User, InvalidInput),
            (1213, Phase::Write, Target::Lease, Unavailable),
            (1205, Phase::Write, Target::User, Unavailable),
            (1290, Phase::Write, Target::Lease, Misconfigured),
            (1053, Phase::Write, Target::Lease, Indeterminate),
            (1053, Phase::Read, Target::Lease, Unavailable),
            (1927, Phase::Write, Target::Lease, Indeterminate),
            (1406, Phase::Write, Target::User, InvalidInput),
            (1040, Phase::Connect, Target::Lease, Unavailable),
            (1045, Phase::Connect, Target::Lease, Misconfigured),
            (9999, Phase::Write, Target::Lease, Misconfigured),
        ];
        for (n, phase, target, want) in cases {
            assert_eq!(classify_number(n, phase, target), want, "{n}");
        }
    }
}
