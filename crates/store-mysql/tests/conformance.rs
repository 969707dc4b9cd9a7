//! The leasehold-core conformance suite against the real MariaDB (`LEASEHOLD_MYSQL_URL`),
//! on a lease table of its own (created idempotently; every case uses fresh names).
#![allow(missing_docs)]

mod common;

use common::shared::fixture::SqlFixture;
use leasehold_mysql::MySqlBackend;

async fn fixture() -> SqlFixture<MySqlBackend, ()> {
    let pool = common::pool().await;
    // One table, created idempotently by every case (cases use unique lease names).
    let table = "leasehold_conformance";
    SqlFixture {
        store: common::store_on(&pool, table).await,
        // A foreign writer's row: a negative token and a holder with a space, held for
        // an hour (so it is not claimable by expiry either).
        corrupt_row: format!(
            "INSERT INTO `{table}` (name, holder, fence_token, version, ttl_ms, acquired_at_ms, expires_at_ms) \
             VALUES (?, 'not a holder', -3, 1, 3600000, 0, \
             (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000) + 3600000)"
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

/// The fence cases on a row of a user's table, written with `RowFence` (the
/// insert-or-update form, `ON DUPLICATE KEY UPDATE`), `<=` and strict `<`.
mod fence {
    leasehold_core::conformance::fence_tests!(leasehold_sql::testing::RowFixture::new(super::common::pool().await));
}
