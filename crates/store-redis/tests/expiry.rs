//! Native expiry on Redis (`CasStore::expire`): the counter hash, which outlives a record
//! whose `PX` ran out, gets a `PEXPIRE` of its own, so a name nobody takes again leaves
//! nothing behind even when nobody purges it; a stale version changes nothing.
#![allow(missing_docs)]

mod support;

use std::time::Duration;

use leasehold_core::store::{CasOutcome, CasStore, Current, ExpireOutcome, LeaseRecord, Precondition, Stored};
use leasehold_core::testing::CountingStore;
use leasehold_core::testing::process::poll_async;
use leasehold_core::{FencingToken, HolderId, LeaseName, Ttl};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

fn record(holder: &str, ttl: Duration) -> LeaseRecord {
    LeaseRecord::held(
        HolderId::new(holder).expect("holder"),
        FencingToken::new(1),
        Ttl::new(ttl).expect("ttl"),
    )
}

/// `store.write(name, expect, record)`, which must apply.
async fn applied(store: &dyn CasStore, name: &LeaseName, expect: &Precondition, record: &LeaseRecord) -> Stored {
    match store.write(name, expect, record).await.expect("write") {
        CasOutcome::Written(s) => s,
        other => panic!("write gave {other:?}"),
    }
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
    let written = applied(
        &counting,
        &name,
        &Precondition::Absent,
        &record("done-marker", Duration::from_millis(500)),
    )
    .await;
    assert!(exists(&mut admin, &meta_key).await, "a grant keeps a counter hash");
    let meta_ttl: i64 = admin.pttl(&meta_key).await.expect("PTTL");
    assert_eq!(meta_ttl, -1, "the counter hash has no expiry before expire");
    counting.reset();
    let outcome = counting
        .expire(&name, &written.version, Duration::from_millis(1_200))
        .await
        .expect("expire");
    assert_eq!(outcome, ExpireOutcome::Scheduled);
    assert_eq!(counting.counts().round_trips(), 1, "expire is one round trip");
    let meta_ttl: i64 = admin.pttl(&meta_key).await.expect("PTTL");
    assert!(
        (500..=1_200).contains(&meta_ttl),
        "the counter hash expires in {meta_ttl} ms, not within 1.2 s"
    );
    let still = store.read(&name).await.expect("read").expect("present right after");
    assert_eq!(still.version, written.version, "expire rewrote the record");
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
    let w = applied(
        &store,
        &name,
        &Precondition::Absent,
        &record("done-marker", Duration::from_secs(30)),
    )
    .await;
    let outcome = store
        .expire(&name, &w.version, Duration::from_millis(10))
        .await
        .expect("expire");
    assert_eq!(outcome, ExpireOutcome::Scheduled);
    let meta_ttl: i64 = admin.pttl(store.keys().meta(&name)).await.expect("PTTL");
    assert!(
        meta_ttl > 20_000,
        "the counter hash expires in {meta_ttl} ms, before the record (30 s)"
    );
    // The expiry is the scripts' own: reads and writes accept the counter hash, and a
    // write under the name takes it off the expiry again.
    let fields = support::hgetall(&mut admin, &store.keys().meta(&name)).await;
    assert_eq!(fields.get("x").map(String::as_str), Some("1"), "{fields:?}");
    let again = applied(
        &store,
        &name,
        &Precondition::Version(w.version.clone()),
        &record("next", Duration::from_secs(30)),
    )
    .await;
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
    let first = applied(
        &store,
        &name,
        &Precondition::Absent,
        &record("a", Duration::from_secs(30)),
    )
    .await;
    let second = applied(
        &store,
        &name,
        &Precondition::Version(first.version.clone()),
        &record("a", Duration::from_millis(300)),
    )
    .await;
    match store
        .expire(&name, &first.version, Duration::from_millis(100))
        .await
        .expect("stale")
    {
        ExpireOutcome::Conflict(Current::Present(s)) => assert_eq!(s.version, second.version),
        other => panic!("a stale expire gave {other:?}"),
    }
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
    match store
        .expire(&name, &first.version, Duration::from_millis(100))
        .await
        .expect("stale")
    {
        ExpireOutcome::Conflict(Current::Absent) => {}
        other => panic!("expire on a version older than the last write gave {other:?}"),
    }
    assert_eq!(
        store
            .expire(&name, &second.version, Duration::from_millis(200))
            .await
            .expect("expire"),
        ExpireOutcome::Scheduled
    );
    assert!(
        gone(&admin, &[&meta_key], Duration::from_secs(5)).await,
        "the counter hash left behind did not expire"
    );
}
