//! The databases the SQL stores run on, as a trait of sqlx's own database types: what
//! differs between them is known from the executor's type at compile time.

use leasehold_core::Error;
use leasehold_core::fence::Dialect;

use crate::errors::{self, Phase, Target};

/// A sqlx database that leasehold's SQL code supports: the dialect its statements are
/// generated in, and the meaning of its error codes.
///
/// Implemented for [`sqlx::Postgres`] and [`sqlx::Sqlite`]. A fence built for one
/// database cannot be run on another's executor: the type says which.
pub trait SqlDatabase: sqlx::Database {
    /// The placeholder and quoting style of this database's statements.
    const DIALECT: Dialect;

    /// Classifies a driver error from `phase` of an operation on `target`, keeping the
    /// driver error as the source.
    fn map_error(err: sqlx::Error, phase: Phase, target: Target, context: &str) -> Error;

    /// The rows a statement changed.
    fn rows_affected(result: &Self::QueryResult) -> u64;
}

impl SqlDatabase for sqlx::Postgres {
    const DIALECT: Dialect = Dialect::Postgres;

    fn map_error(err: sqlx::Error, phase: Phase, target: Target, context: &str) -> Error {
        errors::postgres::map_error(err, phase, target, context)
    }

    fn rows_affected(result: &Self::QueryResult) -> u64 {
        result.rows_affected()
    }
}

impl SqlDatabase for sqlx::Sqlite {
    const DIALECT: Dialect = Dialect::Sqlite;

    fn map_error(err: sqlx::Error, phase: Phase, target: Target, context: &str) -> Error {
        errors::sqlite::map_error(err, phase, target, context)
    }

    fn rows_affected(result: &Self::QueryResult) -> u64 {
        result.rows_affected()
    }
}
