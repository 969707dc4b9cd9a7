//! The etcd watch behind `wait_for_change`, beyond the conformance wake-up cases
//! (`tests/conformance.rs`, `mod wake`): one watch per name per store and the etcd
//! requests under one release, a record deleted by a session's end (not released), a
//! lost connection, and a dead server.
#![allow(missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use etcd_client::Client;
use leasehold_core::store::{BATON_PASS, CasStore, Version, Wait};
use leasehold_core::testing::process::poll;
use leasehold_core::testing::{CountingStore, read_loop};
use leasehold_core::{ClientConfig, FencingToken, Lease, LeaseClient, LeaseName, Result};
use leasehold_etcd::{EtcdConfig, EtcdStore};
use leasehold_testkit::proxy::Proxy;
use leasehold_testkit::records::lease_name as name;
use leasehold_testkit::waiters::spawn_acquire;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A waiter neither woken nor handed the wake-up sleeps until the holder's TTL is out.
const HOLDER_TTL: Duration = Duration::from_secs(30);
/// Far below `HOLDER_TTL`, far above a read and a write on a loopback etcd.
const LIMIT: Duration = Duration::from_secs(5);

/// The lease `n`, held for [`HOLDER_TTL`] through a client of its own on `store`.
async fn held(store: &EtcdStore, n: &LeaseName) -> Lease {
    leasehold_testkit::records::acquired(store, n.as_str(), HOLDER_TTL).await
}

/// An acquirer on `store` that, once refused, waits up to the holder's remaining TTL.
fn acquirer(store: &CountingStore<EtcdStore>, n: &LeaseName) -> JoinHandle<Result<Lease>> {
    let config = ClientConfig::builder()
        .max_acquire_backoff(Duration::from_secs(60))
        .build()
        .expect("client config");
    let client = LeaseClient::with_config(store.clone(), config).expect("client");
    spawn_acquire(client, n.as_str(), HOLDER_TTL, Duration::from_secs(60))
}

async fn parked(store: &CountingStore<EtcdStore>, waits: u64) {
    leasehold_testkit::waiters::parked(store, waits, Duration::from_secs(10), "waiters").await;
}

async fn granted(task: JoinHandle<Result<Lease>>) -> Lease {
    match tokio::time::timeout(LIMIT, task).await {
        Ok(joined) => joined.expect("task").unwrap_or_else(|e| panic!("granted: {e}")),
        Err(_) => panic!("the acquirer was not granted the lease within {LIMIT:?}"),
    }
}

/// Fifty waiters of one name in one store share one watch; one release costs a few etcd
/// requests in all (the conformance case counts store calls; this counts what they
/// send).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_waiters_share_one_watch() {
    const WAITERS: u64 = 50;
    let store = common::store("herd").await;
    let counting = CountingStore::new(store.clone());
    let n = name("herd");
    let lease = held(&store, &n).await;
    // The grant opens the store's held-record watch (its own task): counted before the
    // waiters come, so that what they open is all the window shows.
    assert!(
        poll(LIMIT, || store.stats().watches >= 1).await,
        "the holder's watch never opened: {:?}",
        store.stats()
    );
    let s0 = store.stats();
    let tasks: Vec<_> = (0..WAITERS).map(|_| acquirer(&counting, &n)).collect();
    parked(&counting, WAITERS).await;
    assert_eq!(store.stats().since(&s0).watches, 1, "one watch for all the waiters");
    counting.reset();
    let s1 = store.stats();

    lease.release().await.expect("release");
    assert!(
        poll(LIMIT, || tasks.iter().filter(|t| t.is_finished()).count() == 1).await,
        "no waiter was granted the released lease: {:?}",
        counting.counts()
    );
    // Measurement window: a wake-up passed on, or a herd, would show in the counts.
    tokio::time::sleep(BATON_PASS * 2).await;
    let calls = counting.counts();
    let sent = store.stats().since(&s1);
    println!("{WAITERS} waiters, one release: store calls {calls:?}; etcd requests {sent:?}");
    assert_eq!(tasks.iter().filter(|t| t.is_finished()).count(), 1);
    assert!(
        sent.ranges <= 2 && sent.txns <= 4 && sent.watches == 0,
        "etcd requests after one release: {sent:?}"
    );
    for t in tasks {
        if t.is_finished() {
            let winner = t.await.expect("task").expect("granted");
            assert_eq!(winner.token(), FencingToken::new(2));
            winner.release().await.expect("release");
        } else {
            t.abort();
        }
    }
    common::cleanup(&store).await;
}

/// etcd deletes the record when its holder's session ends (no release): an election
/// observer woken by the delete reads the record (absent, or already granted to its
/// process's acquirer, woken by the same delete) and waits again without spinning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_that_saw_the_record_deleted_waits_for_the_next_change() {
    let prefix = common::unique_prefix("deleted");
    let holder = common::store_under(&prefix).await;
    let waiters = CountingStore::new(common::store_under(&prefix).await);
    let n = name("deleted");
    let _held = held(&holder, &n).await;
    let reads = Arc::new(AtomicU64::new(0));
    // The observer parks first: it is the longest waiting.
    let observer = read_loop(waiters.clone(), n.clone(), reads.clone());
    parked(&waiters, 1).await;
    let task = acquirer(&waiters, &n);
    parked(&waiters, 2).await;

    // The session ends as when the holder process dies: etcd deletes its records.
    let mut raw = holder.client().clone();
    let kv = raw.get(holder.record_key(&n), None).await.expect("get");
    let session = kv.kvs().first().expect("record").lease();
    let ended = Instant::now();
    raw.lease_revoke(session).await.expect("revoke");
    let taken = granted(task).await;
    let took = ended.elapsed();
    // Woken by the delete, the observer reads the record absent (then the grant wakes it
    // once more) or already granted: 3 reads or 2. One that spun on the absence it saw
    // would read hundreds of times within the baton's pass time.
    let woken = poll(Duration::from_secs(2), || reads.load(Ordering::SeqCst) >= 2).await;
    let spun = poll(BATON_PASS, || reads.load(Ordering::SeqCst) > 4).await;
    let observer_reads = reads.load(Ordering::SeqCst);
    observer.abort();
    println!(
        "record deleted, observer parked first: acquirer granted {took:?} after the delete (observer reads: {observer_reads})"
    );
    assert!(
        woken,
        "the observer was not woken by the delete ({observer_reads} reads)"
    );
    assert!(
        !spun,
        "the observer read {observer_reads} times: it did not wait after seeing the record absent"
    );
    assert_eq!(taken.token(), FencingToken::new(2));
    taken.release().await.expect("release");
    common::cleanup(&holder).await;
}

/// The waiters' connection is lost, and the lease released meanwhile: the watch reopens
/// after the last revision it saw, so the release still wakes the acquirer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_while_the_watch_is_cut_off_wakes_the_acquirer_on_reconnect() {
    let prefix = common::unique_prefix("cut");
    let holder = common::store_under(&prefix).await;
    let upstream = common::endpoints()[0].trim_start_matches("http://").to_owned();
    let proxy = Proxy::start(&upstream).await;
    let via_proxy = Client::connect([proxy.endpoint()], None)
        .await
        .expect("connect via proxy");
    let store = EtcdStore::new(via_proxy, EtcdConfig::new(prefix.as_str()).expect("config"));
    let waiters = CountingStore::new(store.clone());
    let n = name("cut");
    let lease = held(&holder, &n).await;
    let task = acquirer(&waiters, &n);
    parked(&waiters, 1).await;
    let s0 = store.stats();

    proxy.cut();
    let released = Instant::now();
    lease.release().await.expect("release");
    proxy.reconnect();
    let taken = granted(task).await;
    let took = released.elapsed();
    let reopened = store.stats().since(&s0).watches;
    println!("release while cut off: acquirer granted {took:?} after the release ({reopened} watch reopens)");
    assert!(reopened >= 1, "the watch was never reopened: the cut did not break it");
    taken.release().await.expect("release");
    common::cleanup(&holder).await;
}

/// No etcd to watch: a wait sleeps until its deadline, neither returning at once (a
/// tight loop for its caller) nor longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_degrades_waits_to_sleeping_until_their_deadline() {
    let store = common::dead_store("dead").await;
    let n = name("dead");
    let max_wait = Duration::from_millis(300);
    for seen in [None, Some(Version::new("7"))] {
        let at = Instant::now();
        store
            .wait_for_change(&n, seen.as_ref(), Wait::Change(max_wait))
            .await
            .expect("a wait does not fail");
        let waited = at.elapsed();
        assert!(
            waited >= max_wait && waited < max_wait + Duration::from_secs(2),
            "seen {seen:?}: waited {waited:?} for a max_wait of {max_wait:?}"
        );
    }
}
