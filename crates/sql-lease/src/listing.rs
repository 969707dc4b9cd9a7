//! Listing lease names: one `SELECT` of the `name` column, the prefix its one parameter.

use leasehold_core::LeaseName;
use leasehold_core::fence::Dialect;

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

/// The statement that removes a row for good (name, then version): a purge.
pub(crate) fn purge_sql(dialect: Dialect, table: &LeaseTable) -> String {
    let t = table.quoted(dialect);
    match dialect {
        Dialect::Postgres => format!("DELETE FROM {t} WHERE name = $1 AND version = $2"),
        _ => format!("DELETE FROM {t} WHERE name = ? AND version = ?"),
    }
}

/// The listed names that are lease names, sorted (byte order, whatever the server's
/// collation sorts by). A row under a name no lease can have (a foreign writer's) is
/// left out, as on every store: no operation of the library can address it.
pub(crate) fn names(raw: Vec<String>) -> Vec<LeaseName> {
    let mut names: Vec<LeaseName> = raw.iter().filter_map(|n| LeaseName::new(n).ok()).collect();
    names.sort_unstable();
    names.dedup();
    names
}
