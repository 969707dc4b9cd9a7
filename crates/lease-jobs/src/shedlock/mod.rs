//! ShedLock table interop for Postgres (feature `shedlock-postgres`) and MySQL/MariaDB
//! (feature `shedlock-mysql`: [`ShedlockMySqlStore`], whose docs give its MySQL setup).
//!
//! [`ShedlockStore`] is a [`leasehold_core::store::CasStore`] over ShedLock's own table, so a
//! Rust instance using [`crate::LockingExecutor`] (or a [`crate::Scheduler`] with
//! [`crate::LockNaming::JobName`]) and a Java instance using ShedLock's
//! `JdbcTemplateLockProvider` with the same lock name never hold it at once.
//!
//! ## Setup
//! ShedLock's table, as its documentation gives it for Postgres:
//!
//! ```sql
//! CREATE TABLE shedlock (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL,
//!     locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name));
//! -- Optional, and recommended: the fence column that makes tokens linearizable.
//! ALTER TABLE shedlock ADD COLUMN fence BIGINT;
//! ```
//!
//! ([`ShedlockStore::provision`] runs exactly this.) Java ShedLock names its
//! columns in every statement, so the extra column does not disturb it. Configure
//! the Java side with `.usingDbTime()` so both sides read the database's clock; the
//! Rust side always does. The role needs `SELECT, INSERT, UPDATE` (and `DELETE` for
//! administration) on the table.
//!
//! ## How a Rust lease maps onto a ShedLock row
//! - `name` is the lease name (at most the column's length, 64 by default).
//! - `locked_by` is the holder id; a released lease has `locked_by = ''` and
//!   `lock_until = now`, which ShedLock sees as free.
//! - `lock_until` is `now + ttl` on the database clock at each grant and renewal;
//!   `locked_at` is the time of the last write by a Rust holder (fenced tables) or
//!   of the grant (unfenced).
//! - Expiry is judged by Postgres (`lock_until <= now`), exactly as ShedLock's own
//!   `UPDATE ... WHERE lock_until <= timezone('utc', CURRENT_TIMESTAMP)` does.
//! - The version is the row's content (`locked_at`, `lock_until` in microseconds,
//!   `fence`, `locked_by`): every write, Rust's or Java's, changes `lock_until`.
//!
//! ## Guarantee grade and tokens
//! - **Fenced table** (`fence BIGINT` present): tokens live in `fence`; a Rust grant
//!   sets `fence = COALESCE(fence, 1) + 1` in the same statement that takes the row.
//!   Linearizable (Postgres primary). Java ShedLock grants do not touch the column,
//!   so a Java tenure carries the token of the tenure before it (1 on a row Java
//!   created); Java holders are unfenced, as ShedLock itself is. Passes the
//!   conformance suite.
//! - **Unfenced table**: the token is `locked_at` in microseconds, set by the database
//!   clock in the statement that grants the row (and a grant applies only if it grows).
//!   That depends on the database clock not stepping back, so the store reports
//!   [`leasehold_core::store::Grade::EfficiencyOnly`]: fit to keep Rust and Java instances apart,
//!   not to guard money. [`ShedlockStore::lease_client`] picks the right client.
//!
//! ## Cost
//! Every operation is one statement (one round trip): a read, a conditional write that
//! returns the current row when it does not apply, a claim that inserts or takes over
//! an expired or released row and issues the token.
//!
//! ```no_run
//! # async fn demo() -> leasehold_core::Result<()> {
//! use std::time::Duration;
//! use leasehold_core::ClientConfig;
//! use leasehold_jobs::shedlock::{ShedlockConfig, ShedlockStore};
//! use leasehold_jobs::{LockConfig, LockingExecutor};
//!
//! let store = ShedlockStore::connect("postgres://app@db/app", ShedlockConfig::default()).await?;
//! let executor = LockingExecutor::new(store.lease_client(ClientConfig::default())?);
//! // The same name as the Java side's @SchedulerLock(name = "reportJob").
//! let lock = LockConfig::new("reportJob", Duration::from_secs(300)).lock_at_least_for(Duration::from_secs(30));
//! executor.run(&lock, |ctx| async move { /* the job, fenced with ctx.token() */ }).await?;
//! # Ok(()) }
//! ```

mod columns;
mod config;
#[cfg(feature = "shedlock-postgres")]
mod error;
#[cfg(feature = "shedlock-mysql")]
mod mysql;
mod row;
#[cfg(feature = "shedlock-postgres")]
mod sql;
#[cfg(feature = "shedlock-postgres")]
mod store;

pub use config::ShedlockConfig;
#[cfg(feature = "shedlock-mysql")]
#[cfg_attr(docsrs, doc(cfg(feature = "shedlock-mysql")))]
pub use mysql::ShedlockMySqlStore;
#[cfg(feature = "shedlock-postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "shedlock-postgres")))]
pub use store::ShedlockStore;
