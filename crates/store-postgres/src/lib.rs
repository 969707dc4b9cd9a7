//! # leasehold-postgres
//!
//! Leases and fencing tokens in a Postgres table, over a [`sqlx::PgPool`] you build (your
//! TLS, authentication, pool size), plus fenced writes on your own tables.
//!
//! ## Guarantee: linearizable on the primary
//! Every lease operation is one statement on one row, decided under that row's lock by
//! the server: the grant, its fencing token and the expiry are one atomic write
//! ([`leasehold_core::store::Grade::Linearizable`], [`leasehold_core::store::Linearizable`]), fit for
//! correctness locks.
//!
//! **The pool must reach the primary, never a read replica.** A replica applies the
//! primary's changes later: a read there can show a lease as free (or as still held by
//! a holder that has lost it), and its clock judges expiry on rows that are already
//! out of date, so two processes could both conclude they may proceed. Writes on a hot
//! standby fail, and [`PostgresStore::new`] refuses a standby outright
//! ([`leasehold_core::Error::Misconfigured`]). A failover to an *asynchronously* replicated
//! standby can lose the last acknowledged grants, and with them the token sequence
//! (a token could be issued twice); if grants must survive failover, replicate
//! synchronously (`synchronous_standby_names`, `synchronous_commit = on`).
//!
//! ## Clock: the server's
//! Expiry is judged with the server's `now()` inside each statement
//! ([`leasehold_core::store::ClockSource::Store`]): no client's clock is ever compared with
//! another's. `now()` is the start of the statement's transaction (autocommit: when the
//! server began the statement, after the client sent it), one instant for the expiry
//! judgement, the new `expires_at` and the time left reported back. A forward step of the
//! server clock expires leases early (the fence still protects the data); keep it
//! slewed by NTP, not stepped.
//!
//! ## Setup
//! One table ([`PostgresStore::provision`] creates it; the same SQL ships as
//! `sql/leasehold_leases.sql` for your own migrations, or
//! [`PostgresStore::schema_sql`] for another table name):
//!
//! ```sql
#![doc = include_str!("../sql/leasehold_leases.sql")]
//! ```
//!
//! The role needs `SELECT, INSERT, UPDATE` on it (rows are never deleted: a release
//! clears `holder`, [`leasehold_core::store::CasStore::delete`] leaves a tombstone, so a name's
//! tokens and versions never repeat). [`PostgresStore::new`] checks the columns, the
//! primary key, the privileges and that the server is not a standby; a missing or wrong
//! table is [`leasehold_core::Error::Misconfigured`], never a driver error. A name or holder
//! longer than the table's columns is [`leasehold_core::Error::InvalidInput`], refused before
//! sending. Set the pool's `acquire_timeout` (and, if you like, a `statement_timeout`)
//! well below your TTLs: a lease's loss signal does not wait for the database.
//!
//! ## Cost per operation
//! | operation | statements |
//! |-----------|------------|
//! | acquire a free, released or expired lease | 1 (`INSERT … ON CONFLICT … DO UPDATE … WHERE … RETURNING`) |
//! | renew, release | 1 (`UPDATE … WHERE version = $v`) |
//! | refused acquire | 1, and it returns the holder and its time left (same statement) |
//! | read | 1 `SELECT`, time left computed by the server |
//!
//! Each is one round trip once sqlx has prepared the statement on a connection (the
//! first use per connection adds a Parse/Describe exchange, not a statement). The exact
//! statements are in [`leasehold_sql::statements`]; [`PostgresStore::statements`] shows them.
//!
//! ## Waiting
//! A release (or delete) calls `pg_notify` in the same statement; each store keeps one
//! `LISTEN` connection (opened with the pool's connect options, not taken from the pool)
//! feeds each release into the core's wake-up hub ([`leasehold_core::store::WakeHub`]),
//! so a blocked [`leasehold_core::LeaseClient::acquire`] gets a released lease without
//! polling ([`leasehold_core::store::Capabilities::notifies_waiters`]). It wakes **one**
//! waiter per release, not all: the wake-up passes to the next waiter when the woken one
//! waits again without claiming (an election observer) or has not tried to claim 500 ms
//! later (it went away). The price: a waiter that is not woken (an observer behind the
//! acquirer that took the lease) learns of the change at its own `max_wait`. Measured
//! with `cargo test -p leasehold-postgres --test conformance wake -- --nocapture` (the
//! conformance suite's wake-up cases): 50 waiters in one store, one release — 1 store
//! call (the winner's write), granted 11 ms after the release; an acquirer behind an
//! observer granted in 6 ms, behind a waiter that went away in 509 ms.
//!
//! ## Example
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use leasehold_core::LeaseClient;
//! use leasehold_core::fence::FencedUpdate;
//! use leasehold_postgres::{PostgresConfig, PostgresStore, RowFence, sqlx::Postgres};
//!
//! let pool = sqlx::PgPool::connect("postgres://app@db-primary/app").await?;
//! let config = PostgresConfig::new();
//! PostgresStore::provision(&pool, &config).await?; // or run sql/leasehold_leases.sql
//! let store = PostgresStore::new(pool.clone(), config).await?;
//! let client = LeaseClient::new(store);
//!
//! let lease = client.acquire("payouts:2026-11-30", Duration::from_secs(30)).await?;
//! // The protected row keeps the highest token that wrote it (`last_token`, 0 at first).
//! let pay = RowFence::<Postgres>::update(&FencedUpdate::new("payouts", "last_token")?.set("status")?.key("id")?)?;
//! match pay.write(lease.token()).value("status", "paid").key("id", 42_i64).execute(&pool).await {
//!     Ok(_) => {}
//!     Err(leasehold_core::Error::FenceRejected { .. }) => { /* a newer holder exists: stop */ }
//!     Err(e) => return Err(e.into()),
//! }
//! lease.release().await?;
//! # Ok(()) }
//! ```

mod ddl;
mod notify;
mod store;

pub use ddl::run_ddl_serialized;
pub use leasehold_sql::{ColumnLimits, LeaseTable, RowFence, RowWrite, SqlStore, SqlValue, Statements};
pub use store::{PgBackend, PostgresStore};

/// Options of a [`PostgresStore`]: the lease table (default `leasehold_leases` in the
/// connection's `search_path`).
///
/// ```
/// use leasehold_postgres::PostgresConfig;
/// let config = PostgresConfig::new().table("ops.leases")?;
/// assert_eq!(config.lease_table().display(), "ops.leases");
/// assert!(PostgresConfig::new().table("leases; DROP TABLE users").is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
pub type PostgresConfig = leasehold_sql::SqlConfig;

/// The client crate this store is built on, re-exported so that your client is built
/// with the very version this crate links.
pub use sqlx;
