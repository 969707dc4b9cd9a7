//! The shared statement counts (`shared/statements.rs`) on SQLite, counted by the
//! leasehold-core `CountingStore` and by sqlx's own per-statement events (SQLite has no
//! server to ask). Every operation, including a refused acquire and a takeover
//! attempt, is one statement.
#![allow(missing_docs)]

mod common;

use common::shared::statements::{Counted, NoServer};

impl Counted for common::Lite {
    type Log = NoServer;
    const CLAIM: &'static str = "ON CONFLICT (name) DO UPDATE";

    async fn logged_pool() -> (sqlx::SqlitePool, Option<NoServer>, common::TempDb) {
        let db = common::db_path("statements");
        (common::pool(db.path()).await, None, db)
    }
}

common::shared::sql_tests!(statements, common::Lite);
