//! The shipped `sql/leasehold_leases.sql` is exactly what `provision` runs.
#![allow(missing_docs)]

mod common;

use leasehold_postgres::{PostgresConfig, PostgresStore};

#[test]
fn shipped_sql_file_matches_the_schema() {
    let generated = PostgresStore::schema_sql(&PostgresConfig::new()).expect("schema");
    common::shared::assert_shipped_sql_is(env!("CARGO_MANIFEST_DIR"), &generated);
}
