//! # leasehold-postgres
//!
//! Leases and fencing tokens in a Postgres table, over a [`sqlx::PgPool`] you build (your
//! TLS, authentication, pool size), plus fenced writes on your own tables. Every lease
//! operation is one statement on one row of the **primary**: the grant, its fencing token
//! and the expiry are one atomic write ([`leasehold_core::store::Grade::Linearizable`],
//! [`leasehold_core::store::Linearizable`]), fit for correctness locks. Expiry is judged
//! with the server's `now()` inside each statement
//! ([`leasehold_core::store::ClockSource::Store`]): no client's clock is ever compared with
//! another's.
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
//! - **The pool must reach the primary, never a read replica.** [`PostgresStore::new`]
//!   refuses a standby outright ([`leasehold_core::Error::Misconfigured`]).
//! - The role needs `SELECT, INSERT, UPDATE` on the table (a lease's row is never
//!   deleted: a release clears `holder`, [`leasehold_core::store::CasStore::delete`]
//!   leaves a tombstone), and `DELETE` too where scheduled jobs (`leasehold-jobs`) purge
//!   their aged slot rows ([`leasehold_core::store::CasStore::purge`]; without it the
//!   purge fails and the rows stay).
//! - [`PostgresStore::new`] checks the columns, the primary key, the privileges and that
//!   the server is not a standby; a missing table is
//!   [`leasehold_core::Error::NotProvisioned`] and a wrong one
//!   [`leasehold_core::Error::Misconfigured`], never a driver error.
//!   [`PostgresStore::verify`] checks again.
//! - Each store keeps one `LISTEN` connection of its own (opened with the pool's connect
//!   options, not taken from the pool).
//!
//! ## Configuration
//! - [`PostgresConfig`]: the lease table (default `leasehold_leases` in the connection's
//!   `search_path`), and the bound on each lease statement
//!   ([`SqlConfig::with_request_timeout`](leasehold_sql::SqlConfig::with_request_timeout),
//!   default [`DEFAULT_REQUEST_TIMEOUT`], 5 s): a write without an answer by then is
//!   `Indeterminate`, a read `Unavailable`.
//! - Set the pool's `acquire_timeout` well below your TTLs too (sqlx's default is 30 s):
//!   a pool without a free connection waits that long, reported as `Unavailable`. A
//!   lease's loss signal does not wait for the database.
//! - If grants must survive failover, replicate synchronously
//!   (`synchronous_standby_names`, `synchronous_commit = on`).
//!
//! ## Cost per operation
//! | operation | statements |
//! |-----------|------------|
//! | acquire a free, released or expired lease | 1 (`INSERT … ON CONFLICT … DO UPDATE … WHERE … RETURNING`) |
//! | renew, release | 1 (`UPDATE … WHERE version = $v`) |
//! | renewals of up to [`leasehold_sql::RENEWAL_BATCH`] (256) leases of one client that come due together | 1 (`UPDATE … FROM unnest($1::text[], …)`, each row guarded by its own version, holder and token; [`leasehold_core::store::CasStore::renew_many`]; `tests/batched_renewals.rs`: 40 leases, one renewal round, 3 statements) |
//! | refused acquire | 1, and it returns the holder and its time left (same statement) |
//! | read | 1 `SELECT`, time left computed by the server |
//!
//! Each is one round trip once sqlx has prepared the statement on a connection (the
//! first use per connection adds a Parse/Describe exchange, not a statement). The exact
//! statements are in [`leasehold_sql::statements`]; [`PostgresStore::statements`] shows them.
//!
//! ## Waiting
//! A release (or delete) calls `pg_notify` in the same statement, and the store's `LISTEN`
//! connection wakes a blocked [`leasehold_core::LeaseClient::acquire`] without polling
//! ([`leasehold_core::store::Capabilities::notifies_waiters`]). It wakes **one** acquirer
//! per release, not all (and every observer); the wake-up passes to the next acquirer
//! when the woken one does not claim.
//!
//! ## Example
//! Through the `leasehold` facade (feature `postgres`), `leasehold_postgres::…` is
//! `leasehold::postgres::…` (its sqlx: `leasehold::postgres::sqlx`) and `leasehold_core::…`
//! is `leasehold::…`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use leasehold_core::LeaseClient;
//! use leasehold_core::fence::FencedUpdate;
//! use leasehold_postgres::{PostgresConfig, PostgresStore, RowFence};
//! use leasehold_postgres::sqlx::{Postgres, postgres::PgPoolOptions};
//!
//! let pool = PgPoolOptions::new()
//!     .acquire_timeout(Duration::from_secs(3)) // sqlx's default waits 30 s for a connection
//!     .connect("postgres://app@db-primary/app")
//!     .await?;
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
//!
//! ## Limits
//! - The primary only: a read replica's records and clock are out of date, and writes on a
//!   hot standby fail.
//! - A failover to an *asynchronously* replicated standby can lose the last acknowledged
//!   grants, and a token could be issued twice.
//! - A step of the server's clock moves every lease at once. Forward: leases expire early
//!   on the server while their holders still count them valid, so a successor can be
//!   granted while the old holder works (the fencing token still refuses its writes).
//!   Back: leases last longer. In production slew the clock, never step it after boot:
//!   chrony or ntpd, with chrony's `makestep` only at startup (`makestep 1 3`), and leap
//!   seconds smeared.
//! - A name or holder longer than the table's columns is
//!   [`leasehold_core::Error::InvalidInput`], refused before sending.
//! - A grant is not notified: an observer learns of a new holder at its own
//!   [`Wait::after`](leasehold_core::store::Wait::after).
//!
//! Why it is built this way: [docs/STORES.md](https://example.invalid/leasehold/blob/main/docs/STORES.md#postgres).

mod ddl;
mod notify;
mod store;

pub use ddl::run_ddl_serialized;
pub use leasehold_sql::{
    ColumnLimits, DEFAULT_REQUEST_TIMEOUT, LeaseTable, RowFence, RowWrite, SqlStore, SqlValue, Statements,
};
pub use store::{PgBackend, PostgresStore};

/// Options of a [`PostgresStore`]: the lease table (default `leasehold_leases` in the
/// connection's `search_path`) and the bound on each lease statement
/// ([`SqlConfig::with_request_timeout`](leasehold_sql::SqlConfig::with_request_timeout),
/// default [`DEFAULT_REQUEST_TIMEOUT`]).
///
/// ```
/// use leasehold_postgres::PostgresConfig;
/// let config = PostgresConfig::new().with_table("ops.leases")?;
/// assert_eq!(config.lease_table().display(), "ops.leases");
/// assert!(PostgresConfig::new().with_table("leases; DROP TABLE users").is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
pub type PostgresConfig = leasehold_sql::SqlConfig;

/// The client crate this store is built on, re-exported so that your client is built
/// with the very version this crate links.
pub use sqlx;
