//! Waiting on a release: the release script publishes, waiters wake at once, and
//! their subscriptions go away when they stop waiting.

mod support;

use std::time::Duration;

use leasehold_core::testing::process::poll_async;
use leasehold_core::{
    AcquireOutcome, ClientConfig, FencingToken, LeaseClient, LeaseName,
    store::{CasOutcome, CasStore},
};
use leasehold_redis::RedisStore;
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

async fn subscribers(conn: &mut MultiplexedConnection, channel: &str) -> u64 {
    let reply: (String, u64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(conn)
        .await
        .expect("PUBSUB NUMSUB");
    reply.1
}

fn client(store: &RedisStore) -> LeaseClient {
    LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_a_waiter_at_once_and_the_subscription_is_dropped() {
    let store = support::shared_store("waiting").await;
    assert!(store.capabilities().notifies_waiters);
    let probe = support::admin(&support::shared_url()).await;
    let name = LeaseName::new("reports/daily").expect("name");
    let channel = store.keys().channel(&name);

    let a = client(&store);
    let held = match a.try_acquire(&name, Duration::from_secs(30)).await.expect("a") {
        AcquireOutcome::Granted(l) => l,
        other => panic!("{other:?}"),
    };
    let b = client(&store);
    let waiter = {
        let name = name.clone();
        tokio::spawn(async move {
            b.acquire_timeout(&name, Duration::from_secs(30), Duration::from_secs(20))
                .await
        })
    };
    // The waiter is parked on the channel (without it, it would sleep ~5 s per round).
    let channel_probe = channel.clone();
    assert!(
        poll_async(Duration::from_secs(5), || {
            let mut probe = probe.clone();
            let channel = channel_probe.clone();
            async move { subscribers(&mut probe, &channel).await == 1 }
        })
        .await,
        "the waiter never subscribed"
    );
    assert!(!waiter.is_finished());
    let released_at = Instant::now();
    held.release().await.expect("release");
    let next = waiter.await.expect("task").expect("granted");
    let handoff = released_at.elapsed();
    assert!(handoff < Duration::from_secs(1), "handoff took {handoff:?}");
    assert_eq!(next.token(), FencingToken::new(2));
    assert!(
        poll_async(Duration::from_secs(5), || {
            let mut probe = probe.clone();
            let channel = channel.clone();
            async move { subscribers(&mut probe, &channel).await == 0 }
        })
        .await,
        "the subscription outlived its waiter"
    );
    next.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_before_the_wait_returns_at_once_and_no_change_waits_it_out() {
    let store = support::shared_store("wait-seen").await;
    let name = LeaseName::new("w").expect("name");
    let rec = leasehold_core::store::LeaseRecord::held(
        leasehold_core::HolderId::new("h").expect("holder"),
        FencingToken::new(1),
        leasehold_core::Ttl::from_millis(30_000).expect("ttl"),
    );
    let CasOutcome::Written(v1) = store
        .write(&name, &leasehold_core::store::Precondition::Absent, &rec)
        .await
        .expect("write")
    else {
        panic!("conflict")
    };
    let CasOutcome::Written(v2) = store
        .write(
            &name,
            &leasehold_core::store::Precondition::Version(v1.version.clone()),
            &rec,
        )
        .await
        .expect("write")
    else {
        panic!("conflict")
    };
    // Seen v1, but it is v2 now: no need to wait.
    let started = Instant::now();
    store
        .wait_for_change(&name, Some(&v1.version), Duration::from_secs(10))
        .await
        .expect("wait");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    // Seen absent, but it exists: no need to wait either.
    let started = Instant::now();
    store
        .wait_for_change(&name, None, Duration::from_secs(10))
        .await
        .expect("wait");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    // Seen the current version and nothing happens: the whole wait.
    let started = Instant::now();
    store
        .wait_for_change(&name, Some(&v2.version), Duration::from_millis(300))
        .await
        .expect("wait");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
}
