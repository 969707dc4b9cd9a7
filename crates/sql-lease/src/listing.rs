//! Listing lease names: one `SELECT` of the `name` column, the prefix its one parameter.

use leasehold_core::fence::Dialect;
use leasehold_core::{Error, LeaseName, Result};

use crate::LeaseTable;

/// The listing query of `table` in `dialect`: the names of the rows that are not
/// tombstones and start with the bound prefix (compared byte for byte: the columns have
/// a binary collation, and no `LIKE`, so `_` and `%` are literal).
pub(crate) fn list_sql(dialect: Dialect, table: &LeaseTable) -> String {
    let t = table.quoted(dialect);
    match dialect {
        Dialect::Postgres => format!("SELECT name FROM {t} WHERE NOT deleted AND starts_with(name, $1)"),
        Dialect::MySql => format!("SELECT name FROM {t} WHERE deleted = 0 AND LOCATE(?, name) = 1"),
        _ => format!("SELECT name FROM {t} WHERE deleted = 0 AND substr(name, 1, length(?1)) = ?1"),
    }
}

/// The listed names, validated and sorted (byte order, whatever the server's collation
/// sorts by). A name that is not a valid [`LeaseName`] (a row a foreign writer put in)
/// is [`Error::CorruptRecord`].
pub(crate) fn names(raw: Vec<String>) -> Result<Vec<LeaseName>> {
    let mut names = raw
        .into_iter()
        .map(|n| LeaseName::new(&n).map_err(|e| Error::corrupt(n.clone(), format!("not a lease name: {e}"))))
        .collect::<Result<Vec<_>>>()?;
    names.sort_unstable();
    names.dedup();
    Ok(names)
}
