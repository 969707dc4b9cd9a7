//! The leasehold-core conformance suite against a real SQLite file (WAL, shared pool).
#![allow(missing_docs)]

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::Fixture;
use leasehold_core::{LeaseName, store::CasStore};
use leasehold_sqlite::SqliteStore;
use sqlx::SqlitePool;

struct Lite {
    pool: SqlitePool,
    store: SqliteStore,
    _db: common::TempDb,
}

async fn fixture() -> Lite {
    let db = common::db_path("conformance");
    let pool = common::pool(db.path()).await;
    let store = common::store_on(&pool, "leasehold_leases").await;
    Lite { pool, store, _db: db }
}

#[async_trait]
impl Fixture for Lite {
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.store.clone())
    }

    async fn corrupt(&self, name: &LeaseName) {
        // A foreign writer's row: a token that is text, a holder with a space, held
        // for an hour (so it is not claimable by expiry either).
        sqlx::query(
            "INSERT INTO leasehold_leases (name, holder, fence_token, version, ttl_ms, acquired_at_ms, expires_at_ms) \
             VALUES (?1, 'not a holder', 'seven', 1, 3600000, 0, \
             CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) + 3600000)",
        )
        .bind(name.as_str())
        .execute(&self.pool)
        .await
        .expect("insert corrupt row");
    }
}

leasehold_core::conformance::conformance_tests!(fixture().await);

/// Beyond the suite: under contention the store issues each token exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_issue_each_token_once() {
    let f = fixture().await;
    let name = leasehold_core::conformance::unique_name("claims");
    leasehold_sql::testing::concurrent_claims_issue_each_token_once(Arc::new(f.store.clone()), &name, 6, 10).await;
}

/// The fence cases on a row of a user's table, written with `RowFence`.
mod fence {
    use async_trait::async_trait;
    use leasehold_core::conformance::{FenceFixture, FencedResource};
    use leasehold_sql::testing::RowFixture;

    use super::common;

    /// The fixture, and the database file it lives in (removed when the case ends).
    struct LiteRows {
        rows: RowFixture<sqlx::Sqlite>,
        _db: common::TempDb,
    }

    async fn rows() -> LiteRows {
        let db = common::db_path("fence");
        LiteRows {
            rows: RowFixture::new(common::pool(db.path()).await),
            _db: db,
        }
    }

    #[async_trait]
    impl FenceFixture for LiteRows {
        async fn resource(&self, case: &str) -> Box<dyn FencedResource> {
            self.rows.resource(case).await
        }
    }

    leasehold_core::conformance::fence_tests!(rows().await);
}
