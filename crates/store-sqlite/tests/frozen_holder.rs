//! The shared frozen-holder case (`leasehold_testkit::frozen`) on a real SQLite file
//! that two processes share: a holder process SIGSTOPped past its TTL, a takeover, the
//! holder resumed; its writes to rows of a user's table, made with `RowFence`, are
//! refused.
#![allow(missing_docs)]

mod common;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::FencedResource;
use leasehold_core::store::CasStore;
use leasehold_sql::testing::RowFixture;
use leasehold_sqlite::SqliteStore;
use leasehold_testkit::frozen::World;

struct Lite {
    path: PathBuf,
    store: SqliteStore,
    rows: RowFixture<sqlx::Sqlite>,
    /// The test process owns the file (removed at the end); the worker only uses it.
    _owner: Option<common::TempDb>,
}

#[async_trait]
impl World for Lite {
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.store.clone())
    }

    async fn resource(&self, name: &str) -> Box<dyn FencedResource> {
        self.rows.row(name).await
    }

    /// A process frozen inside a write transaction would block every writer: can one
    /// start right now, without waiting?
    async fn quiescent(&self) -> bool {
        leasehold_sqlite::write_lock_is_free(&self.path).await
    }
}

fn main() -> ExitCode {
    leasehold_testkit::frozen::main(|run| {
        let run = run.to_owned();
        async move {
            let is_worker = std::env::args().any(|a| a == "--worker");
            let db = common::db_file("frozen", &run);
            let path = db.path().to_path_buf();
            let owner = if is_worker {
                std::mem::forget(db); // the test process removes it
                None
            } else {
                Some(db)
            };
            let pool = common::pool(&path).await;
            let store = common::store_on(&pool, "leasehold_leases").await;
            Lite {
                path,
                store,
                rows: RowFixture::new(pool),
                _owner: owner,
            }
        }
    })
}
