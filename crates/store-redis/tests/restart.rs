//! What a Redis restart does to leases and tokens, on dedicated servers this test
//! starts and kills (ports 56500 and 56501), with the fenced resource on the shared
//! Redis (which is not restarted).

mod support;

use std::time::Duration;

use leasehold_core::{AcquireOutcome, ClientConfig, Error, FencingToken, LeaseClient, LeaseName, store::CasStore};
use leasehold_redis::{HashFence, RedisConfig, RedisStore, read_high_water};
use redis::aio::ConnectionManagerConfig;
use support::{OwnRedis, Persistence};

async fn store_on(url: &str) -> RedisStore {
    let client = support::client(url);
    // Reconnect quickly after the restart.
    let config = ConnectionManagerConfig::new()
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(20))
        .set_max_delay(Duration::from_millis(200));
    let conn = redis::aio::ConnectionManager::new_with_config(client.clone(), config)
        .await
        .expect("connect to the dedicated server");
    let store = RedisStore::new(conn, RedisConfig::default().with_notify_client(client)).expect("config");
    store.verify().await.expect("load scripts");
    store
}

fn client(store: &RedisStore) -> LeaseClient {
    LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client")
}

/// A dedicated server on `port`, a store on it and a lease client of that store.
async fn own_server(port: u16, persistence: Persistence) -> (OwnRedis, RedisStore, LeaseClient) {
    let redis = OwnRedis::start(port, persistence).await;
    let store = store_on(&redis.url()).await;
    let leases = client(&store);
    (redis, store, leases)
}

/// Calls `f` until the store answers again after a restart (the connection manager
/// reconnects in the background), with a deadline.
async fn until_up<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = leasehold_core::Result<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if e.is_retryable() || e.is_indeterminate() => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{what}: store never came back: {e}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_persistence_loses_the_lease_and_resets_tokens_and_the_fence_holds() {
    let (mut redis, store, leases) = own_server(56500, Persistence::None).await;
    let name = "payouts/2026-11-30";
    let lease_name = LeaseName::new(name).expect("name");

    // The resource lives on the shared Redis, which keeps it across this restart.
    let shared_url = support::shared_url();
    let mut shared = support::admin(&shared_url).await;
    let resource = format!("{}resource", support::unique_prefix("restart"));
    let write = |tag: &str| HashFence::new(&resource).incr("payouts", 1).set("last", tag.to_owned());

    // Tokens 1..3 come and go; token 4 is held and writes.
    for expected in 1..=3 {
        let l = leasehold_testkit::granted(&leases, name, Duration::from_secs(2), "before the restart").await;
        assert_eq!(l.token(), FencingToken::new(expected));
        let out = write(&format!("t{expected}"))
            .apply(&mut shared, l.token())
            .await
            .expect("write");
        assert!(out.is_applied(), "{out:?}");
        l.release().await.expect("release");
    }
    let held = leasehold_testkit::granted(&leases, name, Duration::from_millis(1200), "holder").await;
    assert_eq!(held.token(), FencingToken::new(4));
    assert!(
        write("t4")
            .apply(&mut shared, held.token())
            .await
            .expect("write t4")
            .is_applied()
    );

    // Restart while the lease is held.
    redis.kill9();
    redis.restart_after_kill().await;

    // 1. The lease is gone: the holder learns it at its next renewal at the latest.
    leasehold_core::conformance::assert_lost_touch(&held, Duration::from_secs(5)).await;
    assert_eq!(
        until_up("read", || store.read(&lease_name)).await,
        None,
        "the held record survived a restart without persistence"
    );

    // 2. The counter is gone: the next grant carries token 1 again.
    let again = until_up("acquire after restart", || {
        let leases = leases.clone();
        async move {
            match leases.try_acquire(name, Duration::from_secs(5)).await? {
                AcquireOutcome::Granted(l) => Ok(l),
                AcquireOutcome::Held { holder, token, .. } => panic!("held by {holder:?} ({token}) after restart"),
            }
        }
    })
    .await;
    assert_eq!(
        again.token(),
        FencingToken::new(1),
        "tokens start over after the restart"
    );

    // 3. The resource has seen token 4: it refuses the new holder (stalled, not corrupted).
    let before = support::hgetall(&mut shared, &resource).await;
    match write("after-restart").apply(&mut shared, again.token()).await {
        Err(Error::FenceRejected { token, .. }) => assert_eq!(token, FencingToken::new(1)),
        other => panic!("a token issued again from 1 was accepted: {other:?}"),
    }
    assert_eq!(
        support::hgetall(&mut shared, &resource).await,
        before,
        "a refused write changed data"
    );
    assert_eq!(
        read_high_water(&mut shared, &resource, HashFence::DEFAULT_MARK_FIELD)
            .await
            .expect("mark"),
        FencingToken::new(4)
    );

    // 4. The previous holder's token is still the highest the resource has seen: a
    //    holder that ignores its loss signal still gets through the fence.
    let stale = write("old-holder").apply(&mut shared, held.token()).await;
    assert!(stale.is_ok(), "{stale:?}");

    // The way out: seed the counter from the resource's high-water mark; the next
    // grant is above it and writes again.
    again.release().await.expect("release");
    let mark = read_high_water(&mut shared, &resource, HashFence::DEFAULT_MARK_FIELD)
        .await
        .expect("mark");
    assert_eq!(support::seed(&store, &lease_name, mark.get()).await, 4);
    let next = leasehold_testkit::granted(&leases, name, Duration::from_secs(5), "after the restart").await;
    assert_eq!(
        next.token(),
        FencingToken::new(5),
        "the grant after seeding is above the mark"
    );
    let out = write("after-seed")
        .apply(&mut shared, next.token())
        .await
        .expect("write after seed")
        .applied()
        .expect("a Redis fenced write has no caller condition");
    assert_eq!(out.previous_mark, FencingToken::new(4));
    assert_eq!(
        out.counters,
        vec![("payouts".to_owned(), 6)],
        "t1..t4, the old holder, this one"
    );
    next.release().await.expect("release");

    // Seeding never lowers the counter.
    assert_eq!(support::seed(&store, &lease_name, 2).await, 5);
    let _: () = redis::cmd("DEL")
        .arg(&resource)
        .query_async(&mut shared)
        .await
        .expect("DEL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_appendfsync_always_the_lease_and_the_counter_survive_a_crash() {
    let (mut redis, store, leases) = own_server(56501, Persistence::AofAlways).await;
    let name = "compactor";
    let lease_name = LeaseName::new(name).expect("name");
    for expected in 1..=3 {
        let l = leasehold_testkit::granted(&leases, name, Duration::from_secs(2), "before the crash").await;
        assert_eq!(l.token(), FencingToken::new(expected));
        l.release().await.expect("release");
    }
    let held = leasehold_testkit::granted(&leases, name, Duration::from_secs(30), "holder").await;
    assert_eq!(held.token(), FencingToken::new(4));

    redis.kill9();
    redis.restart_after_kill().await;

    let rec = until_up("read after crash", || store.read(&lease_name))
        .await
        .expect("the record survived the crash");
    assert_eq!(rec.record.token, FencingToken::new(4));
    assert_eq!(rec.record.holder.as_ref(), Some(held.holder()));
    assert!(rec.remaining.is_some_and(|r| r > Duration::ZERO), "{rec:?}");
    // Another client is refused: the lease is still held.
    let other = client(&store);
    match other.try_acquire(name, Duration::from_secs(5)).await.expect("try") {
        AcquireOutcome::Held { token, .. } => assert_eq!(token, FencingToken::new(4)),
        AcquireOutcome::Granted(l) => panic!("granted a held lease after the crash: {l:?}"),
    }
    held.release().await.expect("release after the crash");
    let next = leasehold_testkit::granted(&other, name, Duration::from_secs(5), "after the crash").await;
    assert_eq!(next.token(), FencingToken::new(5), "the counter continued");
    next.release().await.expect("release");
}
