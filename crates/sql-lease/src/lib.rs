//! # leasehold-sql
//!
//! The SQL that `leasehold-postgres` and `leasehold-sqlite` share, written once: the lease
//! table's definition and its check ([`schema`]), the one statement per operation in each
//! dialect ([`statements`]), the values they bind ([`LeaseArgs`]), what their rows mean
//! ([`row`]), the fenced write on a user's own table ([`RowFence`], for a [`SqlDatabase`]), and the
//! classification of driver errors ([`errors`]). The store crates add only what is the
//! driver's: the pool, executing, and their database's error codes.
//!
//! Nothing here talks to a database; it is tested without one. Users normally depend on
//! a store crate, which re-exports what they need.
//!
//! ```
//! use leasehold_core::fence::Dialect;
//! use leasehold_sql::{LeaseTable, Statements};
//! let s = Statements::new(Dialect::Postgres, &LeaseTable::default())?;
//! assert!(s.write_claimable.sql.starts_with("WITH w AS (INSERT INTO \"leasehold_leases\""));
//! assert!(s.write_claimable.sql.contains("ON CONFLICT (name) DO UPDATE"));
//! # Ok::<(), leasehold_core::Error>(())
//! ```

mod args;
mod database;
pub mod errors;
mod fenced;
pub mod row;
pub mod schema;
pub mod statements;
mod table;

#[cfg(feature = "testing")]
pub mod testing;

pub use args::{LeaseArgs, write_statement};
pub use database::SqlDatabase;
pub use fenced::{RowFence, RowWrite, SqlValue};
pub use row::RawRow;
pub use schema::{ColumnInfo, ColumnLimits};
pub use statements::{LeaseStatement, Statements};
pub use table::{DEFAULT_TABLE, LeaseTable};
