//! Renewals that come due together are one pipeline of renewal scripts on Redis
//! (`CasStore::renew_many`): one round trip for many leases, each renewal still guarded
//! by its own version, holder and token, and sent again after the server lost its script
//! cache.
#![allow(missing_docs)]

mod support;

use std::time::Duration;

use leasehold_core::store::{CasOutcome, CasStore, Renewal};
use leasehold_core::testing::CountingStore;
use leasehold_core::{ClientConfig, LeaseClient};
use leasehold_testkit::leases::{acquired_all, release_unlost, renewal_calls};

const LEASES: usize = 40;
const TTL: Duration = Duration::from_millis(900);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_leases_renew_in_a_few_round_trips() {
    let store = support::shared_store("batch").await;
    assert!(store.renewal_batch() >= LEASES, "Redis pipelines renewals");
    let counting = CountingStore::new(store.clone());
    let client = LeaseClient::efficiency_only(counting.clone(), ClientConfig::default()).expect("client");
    let leases = acquired_all(&client, "batch", LEASES, TTL).await;
    let calls = renewal_calls(&counting, &leases, 1).await;
    println!("{LEASES} leases, one renewal round: {calls} renewal round trips");
    assert!(calls <= 4, "{calls} renewal round trips for {LEASES} leases");
    release_unlost(leases).await;
}

/// `SCRIPT FLUSH` empties the server's script cache: the pipeline is refused whole
/// (`NOSCRIPT`, nothing ran), the script is loaded and the renewals sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_script_cache_is_reloaded_for_the_pipeline() {
    let store = support::shared_store("batch-flush").await;
    let client = LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client");
    let a = client.acquire("flush/a", Duration::from_secs(30)).await.expect("a");
    let b = client.acquire("flush/b", Duration::from_secs(30)).await.expect("b");
    let mut admin = support::admin(&support::shared_url()).await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut admin)
        .await
        .expect("SCRIPT FLUSH");
    let mut batch = Vec::new();
    for l in [&a, &b] {
        let now = store.read(l.name()).await.expect("read").expect("held");
        batch.push(Renewal {
            name: l.name().clone(),
            version: now.version,
            record: now.record,
        });
    }
    let outcomes = store.renew_many(&batch).await;
    assert_eq!(outcomes.len(), 2);
    for (o, l) in outcomes.into_iter().zip([&a, &b]) {
        match o.unwrap_or_else(|e| panic!("renewal of {} after SCRIPT FLUSH: {e}", l.name())) {
            CasOutcome::Written(s) => assert_eq!(s.record.token, l.token()),
            CasOutcome::Conflict(c) => panic!("renewal of {} refused: {c:?}", l.name()),
        }
    }
    a.release().await.expect("release a");
    b.release().await.expect("release b");
}
