//! Mapping sqlx errors to `leasehold_core::Error` kinds, through named SQLSTATE codes.

use leasehold_core::Error;
pub(crate) use leasehold_sql::errors::postgres::code_of;

/// `undefined_table`: the ShedLock table does not exist.
pub(crate) const UNDEFINED_TABLE: &str = "42P01";
/// `undefined_column`: the table lacks a column.
pub(crate) const UNDEFINED_COLUMN: &str = "42703";
/// `insufficient_privilege`.
pub(crate) const INSUFFICIENT_PRIVILEGE: &str = "42501";
/// `query_canceled` (statement timeout): the statement may have been running.
pub(crate) const QUERY_CANCELED: &str = "57014";
/// `serialization_failure`: the transaction was rolled back.
pub(crate) const SERIALIZATION_FAILURE: &str = "40001";
/// `deadlock_detected`: the transaction was rolled back.
pub(crate) const DEADLOCK_DETECTED: &str = "40P01";
/// `too_many_connections`: refused before running anything.
pub(crate) const TOO_MANY_CONNECTIONS: &str = "53300";
/// `cannot_connect_now` (starting up or shutting down): refused before running.
pub(crate) const CANNOT_CONNECT_NOW: &str = "57P03";
/// Class 23, integrity constraint violations (an extra `NOT NULL` column, a check).
pub(crate) const INTEGRITY_CLASS: &str = "23";
/// Class 22, data exceptions (a value out of range for the table's types).
pub(crate) const DATA_EXCEPTION_CLASS: &str = "22";

/// Whether the failed call could have changed the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// A read: never changes anything, so every failure is safe to retry.
    Read,
    /// A write: a failure after sending may have applied.
    Write,
}

/// Maps a sqlx error from a call of kind `op`.
pub(crate) fn map(op: Op, e: sqlx::Error) -> Error {
    let lost = |e: sqlx::Error| match op {
        Op::Read => Error::unavailable("postgres read failed", e),
        Op::Write => Error::indeterminate("postgres write outcome unknown", e),
    };
    match &e {
        sqlx::Error::Database(db) => {
            let code = code_of(&e).unwrap_or_default();
            match code.as_str() {
                UNDEFINED_TABLE => {
                    let message = format!(
                        "shedlock table does not exist ({code}: {}): run ShedlockStore::provision or ShedLock's DDL",
                        db.message()
                    );
                    Error::not_provisioned(message, e)
                }
                UNDEFINED_COLUMN | INSUFFICIENT_PRIVILEGE => {
                    let message = format!("shedlock table not usable ({code}: {})", db.message());
                    Error::misconfigured(message, e)
                }
                SERIALIZATION_FAILURE | DEADLOCK_DETECTED | TOO_MANY_CONNECTIONS | CANNOT_CONNECT_NOW => {
                    Error::unavailable(format!("postgres refused the statement ({code})"), e)
                }
                QUERY_CANCELED => lost(e),
                c if c.starts_with(INTEGRITY_CLASS) || c.starts_with(DATA_EXCEPTION_CLASS) => {
                    Error::misconfigured(format!("shedlock table rejected the row ({code})"), e)
                }
                _ => lost(e),
            }
        }
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_) => {
            Error::unavailable("no postgres connection", e)
        }
        sqlx::Error::Configuration(_) => Error::misconfigured("postgres configuration", e),
        _ => lost(e),
    }
}

/// The error for a call that took longer than the configured timeout.
pub(crate) fn timed_out(op: Op) -> Error {
    let msg = "postgres call timed out";
    match op {
        Op::Read => Error::Unavailable {
            message: msg.into(),
            source: None,
        },
        Op::Write => Error::Indeterminate {
            message: msg.into(),
            source: None,
        },
    }
}
