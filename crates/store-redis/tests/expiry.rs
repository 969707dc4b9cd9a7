//! Native expiry on Redis (`CasStore::expire`): the counter hash, which outlives a record
//! whose `PX` ran out, gets a `PEXPIRE` of its own, so a name nobody takes again leaves
//! nothing behind even when nobody purges it; a stale version changes nothing.
#![allow(missing_docs)]

mod support;

use std::time::Duration;

use leasehold_core::store::{CasStore, Precondition, Stored};
use leasehold_core::testing::CountingStore;
use leasehold_core::testing::process::poll_async;
use leasehold_core::{FencingToken, LeaseName};
use leasehold_testkit::expiry::{
    assert_expire_conflicts, assert_expire_scheduled, assert_stale_expire_conflicts, assert_still_reads,
};
use leasehold_testkit::records::held_record;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

/// A record held by `holder` (token 1, a TTL of `ttl_ms`) written as `name` if `expect`
/// holds.
async fn written<S>(store: &S, name: &LeaseName, expect: &Precondition, (holder, ttl_ms): (&str, u64)) -> Stored
where
    S: CasStore + ?Sized,
{
    leasehold_testkit::write_ok(store, name, expect, &held_record(holder, 1, ttl_ms)).await
}

async fn exists(conn: &mut MultiplexedConnection, key: &str) -> bool {
    let n: u64 = conn.exists(key).await.expect("EXISTS");
    n == 1
}

/// Whether every key is gone within `within` (looked at every 5 ms).
async fn gone(conn: &MultiplexedConnection, keys: &[&str], within: Duration) -> bool {
    poll_async(within, || {
        let mut c = conn.clone();
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        async move {
            for k in &keys {
                if exists(&mut c, k).await {
                    return false;
                }
            }
            true
        }
    })
    .await
}

/// Both keys gone by themselves once `after` has passed, with no purge; the counter's
/// expiry is at least the record's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_and_its_counter_go_by_themselves() {
    let store = support::shared_store("expiry").await;
    let counting = CountingStore::new(store.clone());
    let name = LeaseName::new("slot/1").expect("name");
    let (record_key, meta_key) = (store.keys().record(&name), store.keys().meta(&name));
    let mut admin = support::admin(&support::shared_url()).await;
    let w = written(&counting, &name, &Precondition::Absent, ("done-marker", 500)).await;
    assert!(exists(&mut admin, &meta_key).await, "a grant keeps a counter hash");
    let meta_ttl: i64 = admin.pttl(&meta_key).await.expect("PTTL");
    assert_eq!(meta_ttl, -1, "the counter hash has no expiry before expire");
    counting.reset();
    assert_expire_scheduled(&counting, &name, &w.version, Duration::from_millis(1_200)).await;
    assert_eq!(counting.counts().round_trips(), 1, "expire is one round trip");
    let meta_ttl: i64 = admin.pttl(&meta_key).await.expect("PTTL");
    assert!(
        (500..=1_200).contains(&meta_ttl),
        "the counter hash expires in {meta_ttl} ms, not within 1.2 s"
    );
    assert_still_reads(&store, &name, &w, "expire").await;
    assert!(
        gone(&admin, &[&record_key, &meta_key], Duration::from_secs(10)).await,
        "the record or its counter hash is still there 10 s after its expiry"
    );
}

/// The counter hash is given at least the record's own remaining time, so it never
/// goes first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_counter_outlives_the_record() {
    let store = support::shared_store("expiry-outlives").await;
    let name = LeaseName::new("slot/2").expect("name");
    let mut admin = support::admin(&support::shared_url()).await;
    let w = written(&store, &name, &Precondition::Absent, ("done-marker", 30_000)).await;
    assert_expire_scheduled(&store, &name, &w.version, Duration::from_millis(10)).await;
    let meta_ttl: i64 = admin.pttl(store.keys().meta(&name)).await.expect("PTTL");
    assert!(
        meta_ttl > 20_000,
        "the counter hash expires in {meta_ttl} ms, before the record (30 s)"
    );
    // The expiry is the scripts' own: reads and writes accept the counter hash, and a
    // write under the name takes it off the expiry again.
    let fields = support::hgetall(&mut admin, &store.keys().meta(&name)).await;
    assert_eq!(fields.get("x").map(String::as_str), Some("1"), "{fields:?}");
    let again = written(&store, &name, &Precondition::Version(w.version), ("next", 30_000)).await;
    assert_eq!(again.record.token, FencingToken::new(1));
    let meta_ttl: i64 = admin.pttl(store.keys().meta(&name)).await.expect("PTTL");
    assert_eq!(meta_ttl, -1, "a write left the counter hash expiring");
    let fields = support::hgetall(&mut admin, &store.keys().meta(&name)).await;
    assert!(!fields.contains_key("x"), "{fields:?}");
}

/// A record gone already (its `PX` ran out) leaves the counter hash: expire on the
/// version last written gives the counter its expiry; after a newer write under the
/// name, nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_left_behind_expires_and_a_stale_version_changes_nothing() {
    let store = support::shared_store("expiry-left").await;
    let name = LeaseName::new("slot/3").expect("name");
    let meta_key = store.keys().meta(&name);
    let mut admin = support::admin(&support::shared_url()).await;
    let first = written(&store, &name, &Precondition::Absent, ("a", 30_000)).await;
    let after_first = Precondition::Version(first.version.clone());
    let second = written(&store, &name, &after_first, ("a", 300)).await;
    let stale = Duration::from_millis(100);
    assert_stale_expire_conflicts(&store, &name, (&first.version, &second.version), stale).await;
    let meta_ttl: i64 = admin.pttl(&meta_key).await.expect("PTTL");
    assert_eq!(meta_ttl, -1, "a stale expire gave the counter an expiry");
    assert!(
        gone(&admin, &[&store.keys().record(&name)], Duration::from_secs(5)).await,
        "the record's PX did not run out"
    );
    assert!(
        exists(&mut admin, &meta_key).await,
        "the counter hash outlives its record"
    );
    // Expire on a version older than the last write: the record is gone.
    assert_expire_conflicts(&store, &name, (&first.version, None), stale).await;
    assert_expire_scheduled(&store, &name, &second.version, Duration::from_millis(200)).await;
    assert!(
        gone(&admin, &[&meta_key], Duration::from_secs(5)).await,
        "the counter hash left behind did not expire"
    );
}
