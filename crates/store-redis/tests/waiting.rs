//! Waiting on pub/sub, what is Redis's own (one wake-up per release is the core's wake-up
//! cases, in `tests/conformance.rs`): only releases and deletes publish, with their
//! version; a name is subscribed only while someone waits on it; a message that is not a
//! version wakes nobody; a change before the wait returns at once; and a lost pub/sub
//! connection wakes every waiter, after which waiters sleep until their deadline.

mod support;

use std::time::Duration;

use futures::StreamExt;
use leasehold_core::testing::process::poll_async;
use leasehold_core::{
    AcquireOutcome, ClientConfig, FencingToken, HolderId, LeaseClient, LeaseName, Ttl,
    store::{CasStore, DeleteOutcome, LeaseRecord, Precondition, Version, Wait},
};
use leasehold_redis::{RedisConfig, RedisStore};
use leasehold_testkit::write_ok;
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

async fn subscribers(conn: &MultiplexedConnection, channel: &str) -> u64 {
    let reply: (String, u64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(&mut conn.clone())
        .await
        .expect("PUBSUB NUMSUB");
    reply.1
}

/// Polls until `channel` has `n` subscribers, with a deadline.
async fn until_subscribers(conn: &MultiplexedConnection, channel: &str, n: u64) -> bool {
    poll_async(Duration::from_secs(5), || async move {
        subscribers(conn, channel).await == n
    })
    .await
}

/// How long `store.wait_for_change(name, seen, Wait::Change(max_wait))` took to return.
async fn timed_wait<S: CasStore>(store: &S, name: &LeaseName, seen: Option<&Version>, max_wait: Duration) -> Duration {
    let started = Instant::now();
    store
        .wait_for_change(name, seen, Wait::Change(max_wait))
        .await
        .expect("wait");
    started.elapsed()
}

fn held(holder: &str) -> LeaseRecord {
    LeaseRecord::held(
        HolderId::new(holder).expect("holder"),
        FencingToken::new(1),
        Ttl::from_millis(30_000).expect("ttl"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_releases_and_deletes_publish_and_they_publish_their_version() {
    let store = support::shared_store("publish").await;
    let name = LeaseName::new("publish").expect("name");
    let mut messages = support::client(&support::shared_url())
        .get_async_pubsub()
        .await
        .expect("pub/sub");
    messages
        .subscribe(store.keys().channel(&name))
        .await
        .expect("SUBSCRIBE");
    let mut messages = messages.into_on_message();

    let record = held("h");
    let mut now = write_ok(&store, &name, &Precondition::Claimable, &record).await;
    for _ in 0..3 {
        let renewed = store.renew(&name, &now.version, &now.record).await.expect("renew");
        now = leasehold_testkit::written(renewed, "renew");
    }
    let released = write_ok(&store, &name, &Precondition::Version(now.version), &record.vacated()).await;
    let again = write_ok(
        &store,
        &name,
        &Precondition::Version(released.version.clone()),
        &held("h"),
    )
    .await;
    assert_eq!(
        store.delete(&name, &again.version).await.expect("delete"),
        DeleteOutcome::Deleted
    );

    let mut next = async || {
        let msg = tokio::time::timeout(Duration::from_secs(5), messages.next())
            .await
            .expect("a message")
            .expect("the subscription ended");
        msg.get_payload::<String>().expect("text")
    };
    // A grant and its renewals publish nothing: the first message is the release's.
    assert_eq!(next().await, released.version.as_str());
    let deleted = next().await;
    let (epoch, n) = again.version.as_str().split_once(':').expect("epoch:n");
    assert_eq!(
        deleted,
        format!("{epoch}:{}", n.parse::<u64>().expect("n") + 1),
        "a delete publishes a version of its own, above the deleted record's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_is_subscribed_only_while_someone_waits_on_it() {
    let store = support::shared_store("subscribed").await;
    let probe = support::admin(&support::shared_url()).await;
    let name = LeaseName::new("reports/daily").expect("name");
    let channel = store.keys().channel(&name);
    let leases = LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client");
    let lease = match leases.try_acquire(&name, Duration::from_secs(30)).await.expect("grant") {
        AcquireOutcome::Granted(l) => l,
        other => panic!("{other:?}"),
    };
    assert_eq!(subscribers(&probe, &channel).await, 0);
    // Another client of the same store (a client never waits on a name it holds).
    let other = LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client");
    let waiter = {
        let name = name.clone();
        tokio::spawn(async move {
            other
                .acquire_timeout(&name, Duration::from_secs(30), Duration::from_secs(20))
                .await
        })
    };
    assert!(
        until_subscribers(&probe, &channel, 1).await,
        "the waiter never subscribed"
    );
    lease.release().await.expect("release");
    let woken = "the release did not wake the waiter";
    let next = leasehold_testkit::joined(Duration::from_secs(5), waiter, woken)
        .await
        .expect("granted");
    assert!(
        until_subscribers(&probe, &channel, 0).await,
        "the subscription outlived its waiter"
    );
    next.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_is_not_a_version_wakes_nobody() {
    let store = support::shared_store("foreign").await;
    let mut admin = support::admin(&support::shared_url()).await;
    let name = LeaseName::new("foreign").expect("name");
    let channel = store.keys().channel(&name);
    let now = write_ok(&store, &name, &Precondition::Absent, &held("h")).await;
    let waiter = {
        let (store, name, seen) = (store.clone(), name.clone(), now.version.clone());
        tokio::spawn(async move { timed_wait(&store, &name, Some(&seen), Duration::from_millis(700)).await })
    };
    assert!(until_subscribers(&admin, &channel, 1).await, "never subscribed");
    for foreign in ["deleted", "hello", "17", "x:3", "17:0"] {
        let _: u64 = redis::cmd("PUBLISH")
            .arg(&channel)
            .arg(foreign)
            .query_async(&mut admin)
            .await
            .expect("PUBLISH");
    }
    let waited = waiter.await.expect("task");
    assert!(
        waited >= Duration::from_millis(690),
        "woken after {waited:?} by a foreign message"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_before_the_wait_returns_at_once_and_no_change_waits_it_out() {
    let store = support::shared_store("wait-seen").await;
    let name = LeaseName::new("w").expect("name");
    let v1 = write_ok(&store, &name, &Precondition::Absent, &held("h")).await;
    let v2 = write_ok(&store, &name, &Precondition::Version(v1.version.clone()), &held("h")).await;
    // Seen v1, but it is v2 now: no need to wait.
    let waited = timed_wait(&store, &name, Some(&v1.version), Duration::from_secs(10)).await;
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    // Seen absent, but it exists: no need to wait either.
    let waited = timed_wait(&store, &name, None, Duration::from_secs(10)).await;
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    // Seen the current version and nothing happens: the whole wait.
    let waited = timed_wait(&store, &name, Some(&v2.version), Duration::from_millis(300)).await;
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_pubsub_connection_wakes_every_waiter_then_waiters_sleep_until_their_deadline() {
    let url = support::shared_url();
    let port = support::shared_port();
    // Commands go straight to the server; pub/sub goes through a proxy this test cuts.
    let proxy = support::proxy(port).await;
    let config = RedisConfig::default()
        .with_prefix(support::unique_prefix("lost-pubsub"))
        .with_notify_client(support::client(&support::url_of(&proxy)));
    let store = RedisStore::new(support::admin(&url).await, config).expect("store");
    let probe = support::admin(&url).await;
    let names = [LeaseName::new("a").expect("name"), LeaseName::new("b").expect("name")];
    let mut waiters = Vec::new();
    for name in &names {
        let seen = write_ok(&store, name, &Precondition::Absent, &held("h")).await.version;
        for _ in 0..2 {
            let (store, name, seen) = (store.clone(), name.clone(), seen.clone());
            let (started, running) = tokio::sync::oneshot::channel();
            waiters.push(tokio::spawn(async move {
                let _ = started.send(());
                timed_wait(&store, &name, Some(&seen), Duration::from_secs(30)).await
            }));
            // Every waiter waits before the connection is cut (a task spawned but not yet
            // run would start after the loss and rightly sleep its whole wait).
            running.await.expect("the waiter started");
        }
        assert!(
            until_subscribers(&probe, &store.keys().channel(name), 1).await,
            "never subscribed"
        );
    }
    proxy.close();
    for w in waiters {
        let waited = leasehold_testkit::joined(
            Duration::from_secs(10),
            w,
            "a waiter was not woken by the lost connection",
        )
        .await;
        assert!(waited < Duration::from_secs(10), "{waited:?}");
    }
    // The proxy refuses connections now: a wait cannot subscribe and sleeps it out.
    let seen = store.read(&names[0]).await.expect("read").expect("present").version;
    let waited = timed_wait(&store, &names[0], Some(&seen), Duration::from_millis(300)).await;
    assert!(waited >= Duration::from_millis(300), "returned early after {waited:?}");
}
