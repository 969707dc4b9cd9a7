//! Renewals that come due together are one statement on Postgres
//! (`CasStore::renew_many`: an `UPDATE … FROM unnest(…)`), counted by the store calls
//! and by the statements sqlx sent; each lease is renewed, none lost.
#![allow(missing_docs)]

mod common;

use common::shared::batched::leases_renew_in_batches;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_leases_renew_in_a_few_statements() {
    let pool = common::pool().await;
    let table = common::unique_table("lh_batch");
    let store = common::store_on(&pool, &table).await;
    leases_renew_in_batches(store, &table, "unnest(", 1).await;
}
