//! Records written by other programs (an operator with the `mariadb` client, a restore,
//! a script): the lease store never undoes them and never grants on an invalid record.
//! The shared cases (a raised token, a changed holder, a corrupted held row, an
//! impossible expiry or version), and MySQL's own: what the real `mariadb` client can
//! store in the typed columns, in strict mode and with `sql_mode = ''` (where MySQL
//! converts a `NULL` or a word into a number, with only a warning).
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::LeaseClient;

common::shared::foreign_writer_tests!();

/// Each corruption `set` (run by the `mariadb` client in `mode`) of a released lease's
/// row is a `CorruptRecord` on a read and on a grant, and nothing is granted.
async fn corrupt_by_hand(cases: &[(&str, &str, &str)]) {
    let (store, table, ()) = common::foreign_store().await;
    for (what, mode, set) in cases {
        let name = common::shared::released(&store, "foreign/cli").await;
        common::operator_in_mode(mode, &format!("UPDATE `{table}` SET {set} WHERE name = '{name}'"));
        common::shared::assert_corrupt_everywhere(&store, &name, what).await;
    }
}

/// Tokens and other numbers out of the range the library writes, NULLs and wrong types,
/// as the `mariadb` client stores them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_the_cli_writes_are_corrupt_records() {
    corrupt_by_hand(&[
        ("a negative token", "@@sql_mode", "fence_token = -7"),
        ("a zero token", "@@sql_mode", "fence_token = 0"),
        ("the largest token", "@@sql_mode", "fence_token = 9223372036854775807"),
        // Out of range: strict mode refuses it, '' stores the largest BIGINT.
        ("a token beyond BIGINT", "''", "fence_token = 99999999999999999999"),
        ("the smallest token", "@@sql_mode", "fence_token = -9223372036854775808"),
        // Extreme values in the columns the statements compute with: no BIGINT overflow.
        ("the largest TTL", "@@sql_mode", "ttl_ms = 9223372036854775807"),
        ("the smallest TTL", "@@sql_mode", "ttl_ms = -9223372036854775808"),
        (
            "a held row with the smallest expiry and the largest TTL",
            "@@sql_mode",
            "holder = 'someone', expires_at_ms = -9223372036854775808, ttl_ms = 9223372036854775807",
        ),
        ("the largest version", "@@sql_mode", "version = 9223372036854775807"),
        // NOT NULL columns: with sql_mode '' MySQL stores the type's zero instead.
        ("a NULL token", "''", "fence_token = NULL"),
        ("a NULL TTL", "''", "ttl_ms = NULL"),
        ("a NULL version", "''", "version = NULL"),
        // A word in a BIGINT column: stored as 0.
        ("a word as the token", "''", "fence_token = 'junk'"),
        ("a word as the TTL", "''", "ttl_ms = 'junk'"),
        // A holder of bytes that are no holder id (the ascii column stores '?').
        ("a binary holder", "''", "holder = 0xC3BFFE00"),
        (
            "an empty holder",
            "@@sql_mode",
            "holder = '', expires_at_ms = expires_at_ms + 60000",
        ),
        ("a negative wall-clock expiry", "@@sql_mode", "wall_expires_at_ms = -1"),
    ])
    .await;
}

/// What strict mode refuses never reaches the row: the `mariadb` client fails, and the
/// lease is still granted with the next token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_refuses_nulls_and_words() {
    let (store, table, ()) = common::foreign_store().await;
    let name = common::shared::released(&store, "foreign/strict").await;
    for set in [
        "fence_token = NULL",
        "fence_token = 'junk'",
        "ttl_ms = 99999999999999999999",
    ] {
        let update = format!("UPDATE `{table}` SET {set} WHERE name = '{name}'");
        assert!(
            !common::mariadb_succeeds("'STRICT_ALL_TABLES'", &update),
            "strict mode stored {set}"
        );
    }
    let why = "the sequence continues after the released token 1";
    leasehold_testkit::foreign::assert_next_token(&LeaseClient::new(store), &name, Duration::from_millis(600), 2, why)
        .await;
}
