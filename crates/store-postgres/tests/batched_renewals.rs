//! Renewals that come due together are one statement on Postgres
//! (`CasStore::renew_many`: an `UPDATE … FROM unnest(…)`), counted by the store calls
//! and by the statements sqlx sent; each lease is renewed, none lost.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::LeaseClient;
use leasehold_core::store::CasStore;
use leasehold_core::testing::CountingStore;
use leasehold_core::testing::renewed;
use leasehold_sql::testing::StatementLog;

const LEASES: usize = 40;
const TTL: Duration = Duration::from_millis(900);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_leases_renew_in_a_few_statements() {
    let pool = common::pool().await;
    let table = common::unique_table("lh_batch");
    let store = common::store_on(&pool, &table).await;
    assert!(store.renewal_batch() >= LEASES, "Postgres batches renewals");
    let counting = CountingStore::new(store.clone());
    let client = LeaseClient::new(counting.clone());
    let mut leases = Vec::new();
    for i in 0..LEASES {
        leases.push(client.acquire(&format!("batch/{i}"), TTL).await.expect("acquire"));
    }
    let log = StatementLog::install();
    let mark = log.mark();
    counting.reset();
    assert!(
        renewed(&leases, 1, Duration::from_secs(5)).await,
        "not every lease was renewed within 5 s"
    );
    let calls = counting.counts().renews;
    let statements = log.since(mark, &table);
    let batched = statements.iter().filter(|s| s.contains("unnest(")).count();
    println!(
        "{LEASES} leases, one renewal round: {calls} renewal calls, {} statements ({batched} batched)",
        statements.len()
    );
    assert!(calls <= 4, "{calls} renewal calls for {LEASES} leases");
    assert!(batched >= 1, "no batched statement: {statements:#?}");
    assert!(
        statements.len() <= 4,
        "{} statements for {LEASES} renewals: {statements:#?}",
        statements.len()
    );
    for l in &leases {
        assert!(l.loss_cause().is_none(), "a lease was lost: {:?}", l.loss_cause());
    }
    for l in leases {
        l.release().await.expect("release");
    }
}
