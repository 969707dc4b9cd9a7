//! # leasehold-mysql
//!
//! Leases and fencing tokens in a MySQL or MariaDB table, over a [`sqlx::MySqlPool`] you
//! build (your TLS, authentication, pool size), plus fenced writes on your own tables.
//! Every lease operation is one statement on one row of the **primary**, in an InnoDB
//! table: the grant, its fencing token and the expiry are one atomic write
//! ([`leasehold_core::store::Grade::Linearizable`], [`leasehold_core::store::Linearizable`]),
//! fit for correctness locks. Expiry is judged on the server's clock inside each
//! statement ([`leasehold_core::store::ClockSource::Store`]): `UTC_TIMESTAMP(6)`, the
//! statement's start, as Unix milliseconds; no client's clock is ever compared with
//! another's, and the session's `time_zone` does not matter.
//!
//! Tested against MariaDB 10.11 (`scripts/stores.sh start mariadb`). **No MySQL 8 server
//! was run**: what differs there is below, from MySQL's documentation.
//!
//! ## Setup
//! One table ([`MySqlStore::provision`] creates it; the same SQL ships as
//! `sql/leasehold_leases.sql` for your own migrations, or [`MySqlStore::schema_sql`] for
//! another table name):
//!
//! ```sql
#![doc = include_str!("../sql/leasehold_leases.sql")]
//! ```
//!
//! The column types: names and holders are `VARCHAR` in `ascii` with the binary
//! collation `ascii_bin` (every valid one is ASCII; compared byte for byte, never
//! case-folded); tokens, versions, TTLs and the expiry are signed `BIGINT`
//! (milliseconds; the expiry as Unix ms on the server's clock); `deleted` is `BOOLEAN`
//! (`TINYINT(1)`).
//!
//! - **InnoDB is required.** [`MySqlStore::new`] refuses a table of another engine
//!   (MyISAM, MEMORY, …) with [`leasehold_core::Error::Misconfigured`]: without row locks
//!   and transactional writes one statement is not one atomic compare-and-swap.
//! - **The pool must reach the primary.** A server with `read_only` on (a replica) is
//!   refused with [`leasehold_core::Error::Misconfigured`]: at open and by `verify`, and a
//!   store opened before the switch has its writes refused by the server (error 1290),
//!   the same error, nothing written (`tests/read_only.rs`, on a MariaDB of its own).
//! - `name` must be the primary key and the table's only unique key (an
//!   `ON DUPLICATE KEY UPDATE` fires on any unique key).
//! - The user needs `SELECT, INSERT, UPDATE` on the table (a lease's row is never
//!   deleted), and `DELETE` too where scheduled jobs (`leasehold-jobs`) purge their aged
//!   slot rows ([`leasehold_core::store::CasStore::purge`]).
//! - [`MySqlStore::new`] checks the columns, the keys, the engine and `read_only`; a
//!   missing table is [`leasehold_core::Error::NotProvisioned`] and a wrong one
//!   [`leasehold_core::Error::Misconfigured`], never a driver error. [`MySqlStore::verify`] checks again.
//!
//! ## Cost per operation
//! MySQL has no `UPDATE … RETURNING` (MariaDB 10.11 has it for `INSERT` and `DELETE`
//! only), so a write answers with the counters of its reply packet:
//!
//! | operation | statements |
//! |-----------|------------|
//! | acquire a free (new, released, deleted) or expired lease | 1 (`INSERT … ON DUPLICATE KEY UPDATE`; `LAST_INSERT_ID(expr)` carries the issued token back, 0 when it wrote nothing) |
//! | renew, release | 1 (`UPDATE … WHERE version = ?`; one affected row means it wrote) |
//! | renewals that come due together (up to 256, [`leasehold_core::store::CasStore::renew_many`]) | 2 for the batch: an `UPDATE` joined to `JSON_TABLE` of the renewals (one JSON parameter), each row guarded by its own version, holder and token and given the renewal's own write id as its version; then a `SELECT` of the same rows, where a row showing that write id (with the renewal's holder and token) is the renewal applied |
//! | refused acquire | 1, then the client reads the record: 2 ([`leasehold_core::store::Capabilities::conflict_returns_current`] is false) |
//! | refused renewal or release | 2: the write, then a read of the current row |
//! | read | 1 `SELECT`, time left computed by the server |
//!
//! A takeover attempt on an expired lease is one claim; an attempt while the lease is
//! still held is the refused claim and the client's read: 2 statements
//! (`tests/statements.rs` counts them in the server's general log). An attempt whose read
//! finds the lease free again (released meanwhile) decides again and writes once more,
//! so on one name taken in turn by eight workers (round trips per grant − 2) ÷ refused
//! attempts per grant came to 2.2 (docs/PERFORMANCE.md, contention). The
//! first use of each statement on a connection adds a prepare exchange (sqlx caches
//! prepared statements per connection). The row a write leaves is known from what it
//! bound: the new **version is a random 63-bit id chosen by the writer** (bound into the
//! statement), not a counter, so the reply need not carry it; the chance that a write
//! picks the version a stale writer still expects (or the row's own, which would let a
//! refused claim's later assignments through) is 2⁻⁶³ per write.
//! [`MySqlStore::statements`] shows every statement.
//!
//! ## Waiting
//! MySQL has no notifications: a blocked [`leasehold_core::LeaseClient::acquire`] polls
//! with the client's backoff ([`leasehold_core::store::Capabilities::notifies_waiters`]
//! is false).
//!
//! ## Fenced writes
//! [`RowFence`]`::<`[`sqlx::MySql`]`>` generates `UPDATE … WHERE last_token <= ?` (or
//! `< ?`, strict) with backquoted, validated identifiers and `?` placeholders, and the
//! insert-or-update form `INSERT … ON DUPLICATE KEY UPDATE col = IF(last_token <= ?, ?, col)`
//! (the token column assigned last, `LAST_INSERT_ID()` saying whether it wrote). A
//! refused write reads the row's mark on the same connection to say why.
//!
//! ## Example
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use leasehold_core::LeaseClient;
//! use leasehold_core::fence::FencedUpdate;
//! use leasehold_mysql::{MySqlConfig, MySqlStore, RowFence, sqlx::MySql};
//!
//! let pool = sqlx::MySqlPool::connect("mysql://app@db-primary/app").await?;
//! let config = MySqlConfig::new();
//! MySqlStore::provision(&pool, &config).await?; // or run sql/leasehold_leases.sql
//! let store = MySqlStore::new(pool.clone(), config).await?;
//! let client = LeaseClient::new(store);
//!
//! let lease = client.acquire("payouts:2026-11-30", Duration::from_secs(30)).await?;
//! // The protected row keeps the highest token that wrote it (`last_token`, 0 at first).
//! let pay = RowFence::<MySql>::update(&FencedUpdate::new("payouts", "last_token")?.set("status")?.key("id")?)?;
//! match pay.write(lease.token()).value("status", "paid").key("id", 42_i64).execute(&pool).await {
//!     Ok(_) => {}
//!     Err(leasehold_core::Error::FenceRejected { .. }) => { /* a newer holder exists: stop */ }
//!     Err(e) => return Err(e.into()),
//! }
//! lease.release().await?;
//! # Ok(()) }
//! ```
//!
//! ## MySQL 8 (not tested: no MySQL 8 server was run)
//! The statements use nothing MariaDB-only: `INSERT … ON DUPLICATE KEY UPDATE` without
//! `VALUES()` (deprecated in MySQL 8.0.20; every value is bound again instead),
//! `LAST_INSERT_ID(expr)`, `IF()`, `REGEXP`, `TIMESTAMPDIFF(MICROSECOND, …, UTC_TIMESTAMP(6))`,
//! `JSON_TABLE` (MySQL 8.0.4 and later; MariaDB 10.6 and later) for batched renewals,
//! no `RETURNING`, no user variables. What differs:
//! - `information_schema.COLUMNS.COLUMN_TYPE` reads `bigint`, not `bigint(20)` (both are
//!   accepted), and MySQL 8's `REGEXP` is ICU's (the holder class is plain ASCII).
//! - `super_read_only` (MySQL 8) implies `read_only`, so a replica is refused either
//!   way.
//! - Error numbers are MySQL's: `3024` (`max_execution_time`) where MariaDB has `1969`
//!   (`max_statement_time`); both are [`leasehold_core::Error::Unavailable`].
//! - With `binlog_format = STATEMENT`, statements with `LAST_INSERT_ID(expr)` and
//!   `UTC_TIMESTAMP()` replicate as written (both are safe for statement logging); row
//!   or mixed format is the default since MySQL 8.0 anyway.
//!
//! ## Limits
//! - The primary only; an asynchronously replicated replica promoted after a failover
//!   can lose the last acknowledged grants, so a token could be issued twice. Use
//!   semi-synchronous replication or Galera/Group Replication in a mode that acknowledges
//!   only replicated commits if grants must survive failover.
//! - A step of the server's clock moves every lease at once (forward: early expiry, the
//!   fencing token still refuses the old holder's writes; back: longer leases). Slew it.
//! - A name or holder longer than the table's columns is
//!   [`leasehold_core::Error::InvalidInput`], refused before sending.
//! - `innodb_lock_wait_timeout` (50 s by default) bounds how long a statement waits for
//!   a row lock held by a frozen transaction of another client; set it (per session, in
//!   the pool's `after_connect`) below your TTLs. A timeout is
//!   [`leasehold_core::Error::Unavailable`]: the statement was rolled back.
//!
//! Why it is built this way: [docs/STORES.md](https://example.invalid/leasehold/blob/main/docs/STORES.md#mysql--mariadb).

mod store;

pub use leasehold_sql::{ColumnLimits, LeaseTable, RowFence, RowWrite, SqlStore, SqlValue, Statements};
pub use store::{MySqlBackend, MySqlStore};

/// Options of a [`MySqlStore`]: the lease table (default `leasehold_leases` in the
/// connection's default database; `database.table` for another).
///
/// ```
/// use leasehold_mysql::MySqlConfig;
/// let config = MySqlConfig::new().with_table("ops.leases")?;
/// assert_eq!(config.lease_table().display(), "ops.leases");
/// assert!(MySqlConfig::new().with_table("leases`; DROP TABLE users").is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
pub type MySqlConfig = leasehold_sql::SqlConfig;

/// The client crate this store is built on, re-exported so that your client is built
/// with the very version this crate links.
pub use sqlx;
