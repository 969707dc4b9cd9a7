//! # leasehold-sql
//!
//! The SQL lease store, written once for every database: [`SqlStore`], generic over a
//! [`SqlBackend`] that a store crate supplies (the catalog check of the lease table, its
//! creation, and, where the database can push, a [`ChangeFeed`] of releases). Beneath it,
//! per [`SqlDatabase`] (a sqlx database type): the lease table's definition and its
//! check ([`schema`]), the one statement per operation in each dialect ([`statements`]),
//! the values they bind ([`LeaseArgs`], with SQLite's boot clock [`HostClock`]), what their rows mean ([`row`]), the
//! classification of driver errors with each database's codes ([`errors`]), and the
//! fenced write on a user's own table ([`RowFence`], whose dialect comes from the
//! database type).
//!
//! `leasehold-postgres` (`PostgresStore = SqlStore<PgBackend>`), `leasehold-mysql`
//! (`MySqlStore = SqlStore<MySqlBackend>`) and `leasehold-sqlite` (`SqliteStore =
//! SqlStore<SqliteBackend>`, with [`SqlStore::open_file`] through [`FileBackend`]) are
//! the three backends; another database is a [`SqlDatabase`] implementation here (its
//! dialect, its error codes) and a small crate with its backend. Users normally depend
//! on a store crate, which re-exports what they need.
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
mod clock;
mod config;
mod database;
pub mod errors;
mod fenced;
mod file;
mod listing;
pub mod row;
pub mod schema;
pub mod statements;
mod store;
mod table;

#[cfg(feature = "testing")]
pub mod testing;

pub use args::{LeaseArgs, RenewalArgs, write_statement};
pub use clock::HostClock;
pub use config::{DEFAULT_REQUEST_TIMEOUT, SqlConfig};
pub use database::{RunError, SqlDatabase};
pub use fenced::{RowFence, RowWrite, SqlValue};
pub use file::FileBackend;
pub use row::{Guard, RawRow};
pub use schema::{ColumnInfo, ColumnLimits};
pub use statements::{LeaseStatement, MYSQL_RENEWAL_FIELDS, RenewBatch, Statements};
pub use store::{ChangeFeed, RENEWAL_BATCH, SqlBackend, SqlStore};
pub use table::{DEFAULT_TABLE, LeaseTable};
