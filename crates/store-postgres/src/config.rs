//! What a [`crate::PostgresStore`] needs to know besides its pool.

use leasehold_core::Result;
use leasehold_sql::LeaseTable;

/// Options of a [`crate::PostgresStore`].
///
/// ```
/// use leasehold_postgres::PostgresConfig;
/// let config = PostgresConfig::new().table("ops.leases")?;
/// assert_eq!(config.lease_table().display(), "ops.leases");
/// assert!(PostgresConfig::new().table("leases; DROP TABLE users").is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct PostgresConfig {
    table: LeaseTable,
}

impl PostgresConfig {
    /// The default: table `leasehold_leases` in the connection's `search_path`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses `table` (`name` or `schema.name`, plain identifiers only).
    ///
    /// # Errors
    /// [`leasehold_core::Error::InvalidInput`] for anything else.
    pub fn table(mut self, table: &str) -> Result<Self> {
        self.table = LeaseTable::new(table)?;
        Ok(self)
    }

    /// The lease table.
    pub fn lease_table(&self) -> &LeaseTable {
        &self.table
    }
}
