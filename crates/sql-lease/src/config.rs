//! What a SQL lease store needs to know besides its pool.

use std::time::Duration;

use leasehold_core::{Error, Result};

use crate::LeaseTable;

/// The default bound on one lease statement (getting a connection, sending the
/// statement, reading its answer): a lease statement takes a millisecond or so, and a
/// renewal that hangs longer than about a quarter of the TTL risks the lease.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Options of a SQL lease store ([`crate::SqlStore`]; `PostgresConfig` and
/// `SqliteConfig` in the store crates).
///
/// ```
/// use leasehold_sql::SqlConfig;
/// let config = SqlConfig::new().with_table("ops.leases")?;
/// assert_eq!(config.lease_table().display(), "ops.leases");
/// assert!(SqlConfig::new().with_table("leases; DROP TABLE users").is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct SqlConfig {
    table: LeaseTable,
    request_timeout: Duration,
}

impl Default for SqlConfig {
    fn default() -> Self {
        Self {
            table: LeaseTable::default(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

impl SqlConfig {
    /// The default: table `leasehold_leases` in the connection's default schema (the
    /// `search_path` on Postgres, the main database on SQLite), and
    /// [`DEFAULT_REQUEST_TIMEOUT`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Bounds each lease statement the store runs, from asking the pool for a
    /// connection to the last row of the answer (default [`DEFAULT_REQUEST_TIMEOUT`]).
    /// A write that runs out of time is [`Error::Indeterminate`] ("may have applied"),
    /// a read [`Error::Unavailable`]. The pool's own `acquire_timeout` still applies
    /// and, when shorter, reports a pool without a free connection as `Unavailable`
    /// (nothing was sent). Keep it well below the lease TTL. Fenced writes run on the
    /// caller's executor and are bounded by the caller (see `RowFence`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for zero.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Result<Self> {
        if timeout.is_zero() {
            return Err(Error::invalid("request timeout", "must be above zero"));
        }
        self.request_timeout = timeout;
        Ok(self)
    }

    /// The bound on one lease statement.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Uses `table` (`name` or `schema.name`, plain identifiers only; on SQLite the
    /// schema is an attached database).
    ///
    /// # Errors
    /// [`leasehold_core::Error::InvalidInput`] for anything else.
    pub fn with_table(mut self, table: &str) -> Result<Self> {
        self.table = LeaseTable::new(table)?;
        Ok(self)
    }

    /// The lease table.
    pub fn lease_table(&self) -> &LeaseTable {
        &self.table
    }
}
