//! The lease table's name, validated once, and the names derived from it.

use leasehold_core::fence::{Dialect, Ident};
use leasehold_core::{Error, Result};

/// The table name used when none is configured.
pub const DEFAULT_TABLE: &str = "leasehold_leases";

/// The longest Postgres notification channel name (NAMEDATALEN - 1).
const MAX_CHANNEL_LEN: usize = 63;

/// A validated lease table name: `table` or `schema.table`, each part a plain SQL
/// identifier (letters, digits, `_`; at most 63 bytes), always quoted in statements, so
/// no configuration value can change a statement's meaning.
///
/// ```
/// use leasehold_sql::LeaseTable;
/// assert_eq!(LeaseTable::new("ops.leases")?.name(), "leases");
/// assert!(LeaseTable::new("leases; DROP TABLE x").is_err());
/// assert!(LeaseTable::new("a.b.c").is_err());
/// # Ok::<(), leasehold_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseTable {
    ident: Ident,
    schema: Option<String>,
    name: String,
}

impl Default for LeaseTable {
    fn default() -> Self {
        Self::new(DEFAULT_TABLE).unwrap_or_else(|_| unreachable!("the default table name is valid"))
    }
}

impl LeaseTable {
    /// Validates a table name (`table` or `schema.table`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for anything but one or two plain identifiers.
    pub fn new(table: &str) -> Result<Self> {
        let ident = Ident::table(table).map_err(|e| Error::invalid("lease table name", format!("{table:?}: {e}")))?;
        let (schema, name) = match table.split_once('.') {
            Some((s, n)) => (Some(s.to_owned()), n.to_owned()),
            None => (None, table.to_owned()),
        };
        Ok(Self { ident, schema, name })
    }

    /// The unqualified table name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema (Postgres) or attached database (SQLite), if qualified.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The name as written in statements: each part double-quoted.
    pub fn quoted(&self, dialect: Dialect) -> String {
        self.ident.quoted(dialect)
    }

    /// The name as given (`schema.table` or `table`), unquoted.
    pub fn display(&self) -> String {
        match &self.schema {
            Some(s) => format!("{s}.{}", self.name),
            None => self.name.clone(),
        }
    }

    /// The Postgres notification channel releases of this table are announced on:
    /// `leasehold_<table>` (cut to 63 bytes; two tables sharing a channel only cost
    /// spurious wake-ups).
    pub fn channel(&self) -> String {
        let mut c = format!("leasehold_{}", self.name);
        c.truncate(MAX_CHANNEL_LEN);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_and_quoted() {
        let t = LeaseTable::new("ops.my_leases").expect("valid");
        assert_eq!(t.quoted(Dialect::Postgres), r#""ops"."my_leases""#);
        assert_eq!(t.schema(), Some("ops"));
        assert_eq!(t.display(), "ops.my_leases");
        for bad in ["", "1abc", "a-b", "a\"b", "a b", "x.y.z", ".x", "x.", &"a".repeat(64)] {
            assert!(
                matches!(LeaseTable::new(bad), Err(Error::InvalidInput { .. })),
                "{bad:?} accepted"
            );
        }
        assert_eq!(LeaseTable::default().name(), DEFAULT_TABLE);
    }

    #[test]
    fn channel_fits_postgres_limit() {
        let long = LeaseTable::new(&"t".repeat(63)).expect("valid");
        assert_eq!(long.channel().len(), 63);
        assert_eq!(LeaseTable::default().channel(), "leasehold_leasehold_leases");
    }
}
