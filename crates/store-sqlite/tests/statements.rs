//! Acquire of a free lease, renew and release are one statement each, counted by the
//! leasehold-core `CountingStore` (calls into the store) and by sqlx's own per-statement
//! events (every statement the SQLite connection executed, below the store; SQLite has
//! no server to ask). A refused acquire and a takeover are one statement too.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::LeaseClient;
use leasehold_core::testing::CountingStore;
use leasehold_core::testing::process::poll;
use leasehold_sql::testing::StatementLog;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_renew_release_are_one_statement_each() {
    let log = StatementLog::install();
    let db = common::db_path("statements");
    let pool = common::pool(db.path()).await;
    let table = "lh_count_statements";
    let store = common::store_on(&pool, table).await;
    let counting = CountingStore::new(store.clone());
    let client = LeaseClient::new(counting.clone());
    let rival = LeaseClient::new(store.clone());
    let name = "count/one-statement";

    // Acquire of a free lease.
    let mark = log.mark();
    let lease = client
        .try_acquire(name, Duration::from_millis(900))
        .await
        .expect("acquire")
        .granted()
        .expect("a free lease is granted");
    let ran = log.since(mark, table);
    assert_eq!(
        counting.counts().round_trips(),
        1,
        "store calls: {:?}",
        counting.counts()
    );
    assert_eq!(ran.len(), 1, "statements sqlx ran: {ran:#?}");
    assert!(ran[0].contains("INSERT INTO") && ran[0].contains("ON CONFLICT (name) DO UPDATE"));

    // A refused acquire: one statement, and the answer names the holder and its time.
    let mark = log.mark();
    let outcome = rival.try_acquire(name, Duration::from_secs(5)).await.expect("rival");
    common::shared::assert_held_by(outcome, &lease, Duration::from_millis(900));
    assert_eq!(log.since(mark, table).len(), 1, "refused acquire");

    // One renewal.
    let mark = log.mark();
    counting.reset();
    let first = lease.valid_until();
    assert!(
        poll(Duration::from_secs(5), || lease.valid_until() > first).await,
        "no renewal"
    );
    let ran = log.since(mark, table);
    let n = counting.counts();
    assert_eq!((n.renews, n.round_trips()), (1, 1), "store calls: {n:?}");
    assert_eq!(ran.len(), 1, "statements sqlx ran: {ran:#?}");

    // Release.
    let mark = log.mark();
    counting.reset();
    lease.release().await.expect("release");
    assert_eq!(
        counting.counts().round_trips(),
        1,
        "store calls: {:?}",
        counting.counts()
    );
    assert_eq!(log.since(mark, table).len(), 1, "release");

    // Takeover of an expired lease whose holder stopped answering.
    let held = common::shared::frozen_holder(store.clone(), "count/expired", Duration::from_millis(300)).await;
    common::shared::take_over(&held, async || {
        let mark = log.mark();
        let granted = client
            .try_acquire("count/expired", Duration::from_secs(5))
            .await
            .expect("takeover")
            .granted();
        assert_eq!(log.since(mark, table).len(), 1, "one statement per attempt");
        granted
    })
    .await;
    println!(
        "statements per operation (CountingStore / sqlx): acquire 1/1, refused 1, renew 1/1, release 1/1, takeover 1"
    );
    pool.close().await;
}
