//! Fenced writes on real rows of a user's table in MariaDB: the shared SQL cases
//! (`shared/fenced.rs`), and the statements MySQL's dialect generates (backquoted
//! identifiers, `?` placeholders, the guarded `ON DUPLICATE KEY UPDATE`).
#![allow(missing_docs)]

mod common;

use leasehold_mysql::RowFence;
use sqlx::MySql;

common::shared::sql_tests!(fenced, common::My);

#[test]
fn statements_are_in_mysql_dialect() {
    let add = RowFence::<MySql>::update(&common::shared::accounts_update("accounts", false, true)).expect("update");
    assert!(
        add.sql().starts_with("UPDATE `accounts` SET `balance` = `balance` + ?")
            && add.sql().contains("`last_token` <= ?"),
        "{}",
        add.sql()
    );
    let up = RowFence::<MySql>::upsert(&common::shared::accounts_update("accounts", true, false)).expect("upsert");
    assert!(up.sql().contains("ON DUPLICATE KEY UPDATE"), "{}", up.sql());
}
