//! Renewals that come due together are one request (`CasStore::renew_many`) on the SQL
//! stores that batch them (Postgres: one statement; MySQL: an `UPDATE` and its read):
//! counted by the store calls and by the statements sqlx sent; each lease is renewed,
//! none lost.

use std::time::Duration;

use leasehold_core::LeaseClient;
use leasehold_core::store::CasStore;
use leasehold_core::testing::CountingStore;
use leasehold_sql::testing::StatementLog;
use leasehold_sql::{SqlBackend, SqlStore};
use leasehold_testkit::leases;

use super::db::{DbOf, Shell, TestDb, q};

/// Leases held, all granted together.
pub const LEASES: usize = 40;
const TTL: Duration = Duration::from_millis(900);

/// A [`TestDb`] whose store batches renewals, and what its batch sends.
pub trait Batches: TestDb {
    /// Text only the batch's statements carry (`unnest(`, `JSON_TABLE(`).
    const MARKER: &'static str;
    /// The statements one batch sends, at most.
    const STATEMENTS_PER_BATCH: u64;
}

/// The shared case: [`leases_renew_in_batches`] on a lease table of its own, dropped
/// after.
pub async fn forty_leases_renew_in_a_few_statements<T: Batches>() {
    let (pool, table, store, _keep) = super::fresh_store::<T>("lh_batch").await;
    leases_renew_in_batches(store, &table, T::MARKER, T::STATEMENTS_PER_BATCH).await;
    <DbOf<T>>::run(&pool, &format!("DROP TABLE {}", q::<DbOf<T>>(&table))).await;
}

/// Holds [`LEASES`] leases on `store` (lease table `table`) through one renewal round:
/// at most 4 renewal calls, at most `per_batch` statements per call, and at least one
/// batch, told by `marker` in its statement text.
pub async fn leases_renew_in_batches<B: SqlBackend>(store: SqlStore<B>, table: &str, marker: &str, per_batch: u64) {
    assert!(store.renewal_batch() >= LEASES, "the store batches renewals");
    let counting = CountingStore::new(store);
    let client = LeaseClient::new(counting.clone());
    let leases = leases::acquired_all(&client, "batch", LEASES, TTL).await;
    let log = StatementLog::install();
    let mark = log.mark();
    let calls = leases::renewal_calls(&counting, &leases, 1).await;
    let statements = log.since(mark, table);
    let batched = statements.iter().filter(|s| s.contains(marker)).count();
    println!(
        "{LEASES} leases, one renewal round: {calls} renewal calls, {} statements ({batched} batched)",
        statements.len()
    );
    assert!(calls <= 4, "{calls} renewal calls for {LEASES} leases");
    assert!(batched >= 1, "no batched statement: {statements:#?}");
    assert!(
        statements.len() as u64 <= per_batch * calls,
        "{} statements for {calls} renewal calls ({LEASES} renewals), {per_batch} per call at most: {statements:#?}",
        statements.len()
    );
    leases::release_unlost(leases).await;
}
