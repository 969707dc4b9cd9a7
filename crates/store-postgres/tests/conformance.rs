//! The leasehold-core conformance suite against the real Postgres (`LEASEHOLD_PG_URL`),
//! on a lease table of its own (created idempotently; every case uses fresh names).
#![allow(missing_docs)]

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use leasehold_core::conformance::Fixture;
use leasehold_core::{LeaseName, store::CasStore};
use leasehold_postgres::PostgresStore;
use sqlx::PgPool;

struct Pg {
    pool: PgPool,
    store: PostgresStore,
    table: String,
}

async fn fixture() -> Pg {
    let pool = common::pool().await;
    // One table, created idempotently by every case (cases use unique lease names).
    let table = "leasehold_conformance".to_owned();
    let store = common::store_on(&pool, &table).await;
    Pg { pool, store, table }
}

#[async_trait]
impl Fixture for Pg {
    async fn store(&self) -> Arc<dyn CasStore> {
        Arc::new(self.store.clone())
    }

    async fn corrupt(&self, name: &LeaseName) {
        // A foreign writer's row: a negative token and a holder with a space, held for
        // an hour (so it is not claimable by expiry either).
        let sql = format!(
            "INSERT INTO \"{}\" (name, holder, fence_token, version, ttl_ms, acquired_at, expires_at) \
             VALUES ($1, 'not a holder', -3, 1, 3600000, now(), now() + interval '1 hour')",
            self.table
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
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
    leasehold_core::conformance::fence_tests!(leasehold_sql::testing::RowFixture::new(super::common::pool().await));
}

/// One release wakes one waiter (`LISTEN/NOTIFY` into the core's wake-up hub). The
/// holder's store and the waiters' store each have their own pool and `LISTEN`
/// connection.
mod wake {
    use std::sync::Arc;

    use async_trait::async_trait;
    use leasehold_core::conformance::WakeFixture;
    use leasehold_core::store::CasStore;

    use super::common;

    struct TwoStores;

    #[async_trait]
    impl WakeFixture for TwoStores {
        async fn stores(&self, _tag: &str) -> (Arc<dyn CasStore>, Arc<dyn CasStore>) {
            let table = "leasehold_conformance";
            let holder = common::store_on(&common::pool().await, table).await;
            let waiters = common::store_on(&common::pool().await, table).await;
            (Arc::new(holder), Arc::new(waiters))
        }
    }

    leasehold_core::conformance::wake_tests!(TwoStores);
}
