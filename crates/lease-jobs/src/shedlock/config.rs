//! Options of a [`super::ShedlockStore`].

use std::time::Duration;

/// Where the ShedLock table is and how long a call may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShedlockConfig {
    /// The table, optionally schema-qualified (default `shedlock`, as ShedLock's
    /// `JdbcTemplateLockProvider` uses).
    pub table: String,
    /// The optional fence column (`BIGINT`, default `fence`). If the table has it,
    /// tokens live there and the store is linearizable; if not, the store is
    /// efficiency-only (see the module docs).
    pub fence_column: String,
    /// The longest a store call may take before it is abandoned: a read then fails
    /// as unavailable, a write as indeterminate.
    pub timeout: Duration,
}

impl Default for ShedlockConfig {
    fn default() -> Self {
        Self {
            table: "shedlock".to_owned(),
            fence_column: "fence".to_owned(),
            timeout: Duration::from_secs(5),
        }
    }
}

impl ShedlockConfig {
    /// The default options on another table.
    pub fn table(table: impl Into<String>) -> Self {
        Self {
            table: table.into(),
            ..Self::default()
        }
    }
}
