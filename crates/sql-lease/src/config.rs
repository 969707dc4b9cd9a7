//! What a SQL lease store needs to know besides its pool.

use leasehold_core::Result;

use crate::LeaseTable;

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
#[derive(Debug, Clone, Default)]
pub struct SqlConfig {
    table: LeaseTable,
}

impl SqlConfig {
    /// The default: table `leasehold_leases` in the connection's default schema (the
    /// `search_path` on Postgres, the main database on SQLite).
    pub fn new() -> Self {
        Self::default()
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
