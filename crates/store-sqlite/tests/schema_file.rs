//! The shipped `sql/leasehold_leases.sql` is exactly what `provision` runs.
#![allow(missing_docs)]

mod common;

use leasehold_sqlite::{SqliteConfig, SqliteStore};

#[test]
fn shipped_sql_file_matches_the_schema() {
    let generated = SqliteStore::schema_sql(&SqliteConfig::new()).expect("schema");
    common::shared::assert_shipped_sql_is(env!("CARGO_MANIFEST_DIR"), &generated);
}
