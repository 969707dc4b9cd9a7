//! # leasehold-sqlite
//!
//! Leases and fencing tokens in a SQLite file: the zero-setup store for the processes
//! of **one host**, over a [`sqlx::SqlitePool`] (or [`SqliteStore::open_file`]), plus
//! fenced writes on your own tables in the same (or another) SQLite database. Every lease
//! operation is one statement: the grant, its fencing token and the expiry are one atomic
//! write ([`leasehold_core::store::Grade::Linearizable`],
//! [`leasehold_core::store::Linearizable`]), and every process that opens the same file on
//! the same host sees the same records. Expiry is judged on the host's boot clock
//! ([`leasehold_core::store::ClockSource::Store`], [`leasehold_sql::HostClock`]): Linux
//! `CLOCK_BOOTTIME`, which every process of the host shares and no wall-clock step moves,
//! bound into each statement with the boot's id. A record of another boot is expired.
//! Off Linux: the wall clock.
//!
//! ## Setup
//! One table in the file ([`SqliteStore::provision`] or [`SqliteStore::open_file`]
//! create it; the same SQL ships as `sql/leasehold_leases.sql`):
//!
//! ```sql
#![doc = include_str!("../sql/leasehold_leases.sql")]
//! ```
//!
//! A table of an earlier version lacks `boot_id`: [`SqliteStore::provision`] (and
//! [`SqliteStore::open_file`]) add it, and its rows then count as another boot's
//! (expired). Stop the processes of the earlier version first: they judge on the wall
//! clock, and see this version's records as expired.
//!
//! [`SqliteStore::new`] checks the columns and the primary key: a missing table (or a
//! table of an earlier version) is [`leasehold_core::Error::NotProvisioned`] and a wrong
//! one [`leasehold_core::Error::Misconfigured`], never a driver error. A name or holder
//! longer than the declared `VARCHAR(n)` is [`leasehold_core::Error::InvalidInput`], refused
//! before sending. A value of the wrong type in a row (SQLite stores what it is given) is
//! [`leasehold_core::Error::CorruptRecord`].
//!
//! ## Configuration
//! - [`SqliteConfig`]: the lease table (default `leasehold_leases` in the main database).
//! - [`connect_options`] for a pool of your own on the lease file: it uses
//!   `synchronous = FULL`, so a grant survives power loss and no token is issued twice
//!   after a reboot, and waits [`DEFAULT_BUSY_TIMEOUT`] for another process's write.
//!
//! ## Cost per operation
//! | operation | statements |
//! |-----------|------------|
//! | acquire a free, released or expired lease | 1 (`INSERT … ON CONFLICT … DO UPDATE … RETURNING`) |
//! | renew, release | 1 (`UPDATE`, answered by its count of changed rows; a refused one, rare, reads the row after it) |
//! | refused acquire | 1, and it returns the holder and its time left (same statement) |
//! | read | 1 `SELECT`, time left computed by SQLite |
//!
//! A conflicting write still takes the write lock for an instant; see
//! [`leasehold_sql::statements`].
//!
//! ## Waiting
//! SQLite has no notifications, but `PRAGMA data_version` changes whenever another
//! connection, of this process or another, has committed to the file. While a store has
//! waiters, one poller task per store reads it every 5 ms on a connection of its own;
//! at each change it reads the version of each name that has waiters (one `SELECT` per
//! name, not per waiter) and announces it to the core's wake-up hub, as the stores that
//! push do: a release wakes **one** acquirer (and every observer), and waiters to claim wait in line
//! ([`leasehold_core::store::Capabilities::notifies_waiters`] is true). A waiter
//! therefore gets a released lease a few milliseconds after the release, also when
//! another process released it (`tests/handoff.rs`), instead of sleeping out the
//! holder's TTL; 50 waiters and one release cost 1 store call (`cargo test -p
//! leasehold-sqlite --all-features --test conformance wake -- --nocapture`). The poller
//! stops a second after the last waiter left.
//!
//! ## Example
//! Through the `leasehold` facade (feature `sqlite`), `leasehold_sqlite::…` is
//! `leasehold::sqlite::…` (its sqlx: `leasehold::sqlite::sqlx`) and `leasehold_core::…` is
//! `leasehold::…`.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::time::Duration;
//! use leasehold_core::{AcquireOutcome, LeaseClient};
//! use leasehold_core::fence::FencedUpdate;
//! use leasehold_sqlite::{RowFence, SqliteConfig, SqliteStore, sqlx::{self, Sqlite}};
//!
//! let dir = std::env::temp_dir().join(format!("leasehold-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let store = SqliteStore::open_file(dir.join("leases.db"), SqliteConfig::new()).await?;
//! let pool = store.pool().clone();
//! let client = LeaseClient::new(store.clone());
//! let other = LeaseClient::new(store);
//!
//! let lease = client.acquire("nightly-payout", Duration::from_secs(30)).await?;
//! match other.try_acquire("nightly-payout", Duration::from_secs(30)).await? {
//!     AcquireOutcome::Held { token, .. } => assert_eq!(token, lease.token()),
//!     AcquireOutcome::Granted(_) => unreachable!("one holder at a time"),
//! }
//!
//! // A fenced write on our own table: the guard on the token is in the statement.
//! sqlx::query("CREATE TABLE IF NOT EXISTS payouts (id INTEGER PRIMARY KEY, status TEXT, last_token INTEGER NOT NULL DEFAULT 0)")
//!     .execute(&pool).await.unwrap();
//! sqlx::query("INSERT OR IGNORE INTO payouts (id, status) VALUES (42, 'pending')").execute(&pool).await.unwrap();
//! let pay = RowFence::<Sqlite>::update(&FencedUpdate::new("payouts", "last_token")?.set("status")?.key("id")?)?;
//! let outcome = pay.write(lease.token()).value("status", "paid").key("id", 42_i64).execute(&pool).await?;
//! assert!(outcome.is_applied()); // a stale token would be Err(Error::FenceRejected): stop working
//! lease.release().await?;
//! # pool.close().await;
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), leasehold_core::Error>(()) }).unwrap();
//! ```
//!
//! ## Limits
//! - One host only: across hosts, use `leasehold-postgres`.
//! - Not for files on network filesystems (NFS, SMB), whose locking SQLite cannot trust.
//! - One clock assumption: the processes share one kernel and time namespace (so one
//!   `CLOCK_BOOTTIME`); a wall-clock step changes nothing. Off Linux the wall clock
//!   judges, and a step of it expires leases early (the fence still protects the data).
//! - A process frozen inside a write transaction makes the others' operations
//!   [`leasehold_core::Error::Unavailable`] (after the busy timeout) until it resumes.
//! - Waiters learn of a change only on the host that holds the file, and within the
//!   poller's 5 ms period; each commit to the file while someone waits costs that
//!   store's poller one `SELECT` per name waited for, whoever committed.
//!
//! Why it is built this way: [docs/STORES.md](https://example.invalid/leasehold/blob/main/docs/STORES.md#sqlite).

mod config;
mod feed;
mod store;
mod write_lock;

pub use config::{DEFAULT_BUSY_TIMEOUT, SqliteConfig, connect_options};
pub use leasehold_sql::{
    ColumnLimits, DEFAULT_REQUEST_TIMEOUT, LeaseTable, RowFence, RowWrite, SqlStore, SqlValue, Statements,
};
pub use store::{SqliteBackend, SqliteStore};
pub use write_lock::write_lock_is_free;

/// The client crate this store is built on, re-exported so that your client is built
/// with the very version this crate links.
pub use sqlx;
