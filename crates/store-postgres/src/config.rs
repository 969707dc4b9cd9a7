//! What a [`crate::PostgresStore`] needs to know besides its pool.

use lease_core::Result;
use sql_lease::LeaseTable;

/// Options of a [`crate::PostgresStore`].
///
/// ```
/// use store_postgres::PostgresConfig;
/// let config = PostgresConfig::new().table("ops.leases")?;
/// assert_eq!(config.lease_table().display(), "ops.leases");
/// assert!(PostgresConfig::new().table("leases; DROP TABLE users").is_err());
/// # Ok::<(), lease_core::Error>(())
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
    /// [`lease_core::Error::InvalidInput`] for anything else.
    pub fn table(mut self, table: &str) -> Result<Self> {
        self.table = LeaseTable::new(table)?;
        Ok(self)
    }

    /// The lease table.
    pub fn lease_table(&self) -> &LeaseTable {
        &self.table
    }
}
