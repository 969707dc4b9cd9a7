//! The leasehold-core conformance suite against a real SQLite file (WAL, shared pool).
#![allow(missing_docs)]

mod common;

use common::shared::fixture::SqlFixture;
use leasehold_sqlite::SqliteBackend;

async fn fixture() -> SqlFixture<SqliteBackend, common::TempDb> {
    let db = common::db_path("conformance");
    let pool = common::pool(db.path()).await;
    let clock = leasehold_sql::HostClock::get().expect("host clock");
    SqlFixture {
        store: common::store_on(&pool, "leasehold_leases").await,
        // A foreign writer's row: a token that is text, a holder with a space, held
        // for an hour in this boot (so it is not claimable by expiry either).
        corrupt_row: format!(
            "INSERT INTO leasehold_leases (name, holder, fence_token, version, ttl_ms, acquired_at_ms, expires_at_ms, boot_id) \
             VALUES (?1, 'not a holder', 'seven', 1, 3600000, 0, {}, '{}')",
            clock.now_ms() + 3_600_000,
            clock.boot_id()
        ),
        keep: db,
    }
}

leasehold_core::conformance::conformance_tests!(fixture().await);

/// Beyond the suite: under contention the store issues each token exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_issue_each_token_once() {
    common::shared::fixture::concurrent_claims_issue_each_token_once(&fixture().await).await;
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
