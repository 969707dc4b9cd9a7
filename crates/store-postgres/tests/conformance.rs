//! The leasehold-core conformance suite against the real Postgres (`LEASEHOLD_PG_URL`),
//! on a lease table of its own (created idempotently; every case uses fresh names).
#![allow(missing_docs)]

mod common;

use common::shared::fixture::SqlFixture;
use leasehold_postgres::PgBackend;

async fn fixture() -> SqlFixture<PgBackend, ()> {
    let pool = common::pool().await;
    // One table, created idempotently by every case (cases use unique lease names).
    let table = "leasehold_conformance";
    SqlFixture {
        store: common::store_on(&pool, table).await,
        // A foreign writer's row: a negative token and a holder with a space, held for
        // an hour (so it is not claimable by expiry either).
        corrupt_row: format!(
            "INSERT INTO \"{table}\" (name, holder, fence_token, version, ttl_ms, acquired_at, expires_at) \
             VALUES ($1, 'not a holder', -3, 1, 3600000, now(), now() + interval '1 hour')"
        ),
        keep: (),
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
