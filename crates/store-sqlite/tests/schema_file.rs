//! The shipped `sql/leasehold_leases.sql` is exactly what `provision` runs.
#![allow(missing_docs)]

use leasehold_sqlite::{SqliteConfig, SqliteStore};

#[test]
fn shipped_sql_file_matches_the_schema() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/sql/leasehold_leases.sql");
    let generated = SqliteStore::schema_sql(&SqliteConfig::new()).expect("schema");
    if std::env::var_os("LEASEHOLD_BLESS").is_some() {
        std::fs::write(path, &generated).expect("write sql file");
    }
    let shipped = std::fs::read_to_string(path).expect("read sql file");
    assert_eq!(
        shipped, generated,
        "sql/leasehold_leases.sql is stale: rerun with LEASEHOLD_BLESS=1"
    );
}
