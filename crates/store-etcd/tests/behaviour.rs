//! The etcd store's own promises, against the shared single-member etcd: round trips per
//! operation, session leases, fenced transactions, and typed errors for bad input and
//! faults (waiting: `tests/wake_ups.rs` and the conformance wake-up cases).
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use etcd_client::{Client, TxnOp};
use leasehold_core::testing::CountingStore;
use leasehold_core::{
    Error, FencingToken, LeaseClient, LossCause,
    store::{CasOutcome, CasStore, LeaseRecord, Precondition, Version},
};
use leasehold_etcd::{EtcdConfig, EtcdStats, EtcdStore, KeyFence, TxnFence};
use leasehold_testkit::foreign::take_and_release;
use leasehold_testkit::proxy::{Proxy, ProxyMode};
use leasehold_testkit::records::{acquired, held_record as held, lease_name as name, listed, name_prefix, renewals};
use tokio::time::Instant;

/// Puts `value` at `key` in a transaction `fence` guards, through `store`: it must apply.
async fn fenced_put(store: &EtcdStore, fence: &TxnFence, key: impl Into<Vec<u8>>, value: &str) {
    store
        .fenced_txn(fence, [TxnOp::put(key, value, None)])
        .await
        .unwrap_or_else(|e| panic!("fenced write of {value} while held: {e}"))
        .applied()
        .expect("applied");
}

/// [`fenced_put`] that the fence must refuse: the token the refusal names.
async fn refused_put(store: &EtcdStore, fence: &TxnFence, key: impl Into<Vec<u8>>, value: &str) -> FencingToken {
    match store.fenced_txn(fence, [TxnOp::put(key, value, None)]).await {
        Err(Error::FenceRejected { token, .. }) => token,
        other => panic!("a fenced write of {value} was not refused: {other:?}"),
    }
}

async fn raw_get(c: &Client, key: Vec<u8>) -> Option<etcd_client::KeyValue> {
    let mut c = c.clone();
    let r = c.get(key, None).await.unwrap_or_else(|e| panic!("get: {e}"));
    r.kvs().first().cloned()
}

/// Acquire of a free lease and release are one Txn each; renewals cost no Txn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_per_operation() {
    let store = common::store("round-trips").await;
    let counting = CountingStore::new(store.clone());
    let client = LeaseClient::new(counting.clone());
    let a = name("jobs/a");
    let b = name("jobs/b");
    let ttl = Duration::from_millis(1500);

    let (la, first) = common::sent(&store, client.acquire(a.as_str(), ttl)).await;
    let la = la.expect("acquire a");
    assert_eq!(
        (first.txns, first.ranges, first.lease_grants),
        (1, 0, 1),
        "first acquire (also grants the session): {first:?}"
    );
    let (lb, second) = common::sent(&store, client.acquire(b.as_str(), ttl)).await;
    let lb = lb.expect("acquire b");
    assert_eq!(
        (second.txns, second.ranges, second.lease_grants, second.keepalives),
        (1, 0, 0, 0),
        "acquire of a free lease (the session's last keep-alive covers half its TTL, so no keep-alive waits on the caller's path): {second:?}"
    );

    counting.reset();
    let ((), renewals) = common::sent(&store, renewals(&la, 4)).await;
    let calls = counting.counts();
    assert!(calls.renews >= 4, "{calls:?}");
    assert_eq!(
        (renewals.txns, renewals.ranges),
        (0, 0),
        "renewals sent a Txn or a read: {renewals:?}"
    );
    assert!(
        renewals.keepalives <= calls.renews + 2,
        "keep-alives are shared, not one per lease per renewal: {renewals:?} for {calls:?}"
    );

    let (released, release) = common::sent(&store, la.release()).await;
    released.expect("release");
    let (la2, again) = common::sent(&store, client.acquire(a.as_str(), ttl)).await;
    let la2 = la2.expect("re-acquire");
    // One Txn each, no read: the release, and the re-acquire of the released lease.
    assert_eq!(
        [(release.txns, release.ranges), (again.txns, again.ranges)],
        [(1, 0), (1, 0)],
        "release {release:?}, re-acquire {again:?}"
    );
    assert_eq!(la2.token(), FencingToken::new(2));

    // A store that has never seen the name guesses "absent": one extra Txn, no read.
    la2.release().await.expect("release");
    let cold = EtcdStore::new(store.client().clone(), store.config().clone());
    let cold_client = LeaseClient::new(cold.clone());
    let (la3, cold_cost) = common::sent(&cold, cold_client.acquire(a.as_str(), ttl)).await;
    let la3 = la3.expect("cold acquire");
    assert_eq!(la3.token(), FencingToken::new(3));
    assert_eq!(
        (cold_cost.txns, cold_cost.ranges),
        (2, 0),
        "cold-cache acquire: {cold_cost:?}"
    );

    println!(
        "round trips: first acquire {first:?}\n  acquire {second:?}\n  {} renewals {renewals:?}\n  release {release:?}\n  re-acquire {again:?}\n  cold-cache acquire of a released name {cold_cost:?}",
        calls.renews
    );
    la3.release().await.expect("release");
    lb.release().await.expect("release b");
    common::cleanup(&store).await;
}

/// Held records carry the session lease, vacant ones none; the fence counter survives
/// the record's deletion when the session ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_leases_and_the_fence_counter() {
    let store = common::store("sessions").await;
    let raw = store.client().clone();
    let n = name("svc/leader");
    let la = acquired(&store, n.as_str(), Duration::from_secs(2)).await;
    let kv = raw_get(&raw, store.record_key(&n)).await.expect("record present");
    assert_ne!(kv.lease(), 0, "a held record must be attached to a session lease");
    let fence = store.fence(&la).expect("fence");
    let data = format!("{}data", store.config().prefix());
    fenced_put(&store, &fence, data.clone(), "1").await;

    // The session ends (as when the holder process dies): etcd deletes the record.
    let mut admin = raw.clone();
    admin.lease_revoke(kv.lease()).await.expect("revoke");
    assert!(
        raw_get(&raw, store.record_key(&n)).await.is_none(),
        "record survived its session"
    );
    let cause = tokio::time::timeout(Duration::from_secs(3), la.lost())
        .await
        .expect("the holder learns its session is gone");
    assert!(matches!(cause, LossCause::Expired), "{cause:?}");
    // A write of the ended tenure is refused.
    assert_eq!(refused_put(&store, &fence, data, "stale").await, FencingToken::new(1));

    // Another store takes it with the next token: the counter outlived the record.
    let other = EtcdStore::new(raw.clone(), store.config().clone());
    let lb = acquired(&other, n.as_str(), Duration::from_secs(2)).await;
    assert_eq!(lb.token(), FencingToken::new(2));
    let f = raw_get(&raw, other.fence_key(&n)).await.expect("fence key");
    assert_eq!(f.value(), b"00000000000000000002");
    assert_eq!(f.lease(), 0, "the fence counter must not expire");
    lb.release().await.expect("release");
    let vacant = raw_get(&raw, store.record_key(&n))
        .await
        .expect("vacant record persists");
    assert_eq!(vacant.lease(), 0, "a vacant record must not be attached to a lease");
    let read = other.read(&n).await.expect("read").expect("present");
    assert!(read.record.is_vacant());
    assert_eq!(read.record.token, FencingToken::new(2));
    assert_eq!(read.remaining, Some(Duration::ZERO));
    common::cleanup(&store).await;
}

/// A held record whose holder stops renewing is deleted at its TTL, not at the end of
/// the session (which lives on for the process's other records).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_record_expires_at_its_ttl() {
    let store = common::store("abandoned").await;
    let n = name("abandoned");
    let written_at = Instant::now();
    let s = leasehold_testkit::write_ok(&store, &n, &Precondition::Absent, &held("h", 1, 400)).await;
    // etcd holds it for its session's whole-second TTL (at least 2 s), and says so.
    let ttl = s.record.ttl.get();
    assert!(ttl >= Duration::from_secs(1) && ttl.subsec_nanos() == 0, "{ttl:?}");
    assert_eq!(s.remaining, Some(ttl));
    let read = store.read(&n).await.expect("read").expect("present");
    assert!(read.remaining.is_some_and(|r| r > Duration::ZERO && r <= ttl));
    assert!(
        leasehold_core::testing::process::poll_async(ttl + Duration::from_secs(3), || async {
            matches!(store.read(&n).await, Ok(None))
        })
        .await,
        "the abandoned record was never deleted"
    );
    let gone_after = written_at.elapsed();
    assert!(gone_after >= ttl, "deleted before its TTL: {gone_after:?}");
    assert!(store.stats().expiry_deletes >= 1);
    // The next claim continues the token sequence.
    let again = leasehold_testkit::write_ok(&store, &n, &Precondition::Claimable, &held("h2", 1, 400)).await;
    assert_eq!(again.record.token, FencingToken::new(2));
    common::cleanup(&store).await;
}

/// A challenger that saw a lease held takes it over, once its record expired and was
/// deleted, with one Txn: the claim of a record seen held is sent as for a record gone
/// (a refusal would answer the current state in the same Txn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_seen_held_is_taken_over_in_one_txn() {
    let holders = common::store("seen-held").await;
    let challenger = EtcdStore::new(holders.client().clone(), holders.config().clone());
    let client = LeaseClient::new(challenger.clone());
    let ttl = Duration::from_secs(2);
    // The challenger's session, granted once.
    take_and_release(&client, "warm-up", ttl, 1).await;
    // A holder that froze: its record is never renewed, and its store deletes it at its TTL.
    let n = name("frozen");
    leasehold_testkit::write_ok(&holders, &n, &Precondition::Claimable, &held("frozen-holder", 1, 1000)).await;
    let (seen, look) = common::sent(&challenger, client.try_acquire(n.as_str(), ttl)).await;
    assert!(seen.expect("look").granted().is_none(), "granted while held");
    assert_eq!((look.txns, look.ranges), (1, 0), "a refused attempt: {look:?}");
    let gone = leasehold_core::testing::process::poll_async(Duration::from_secs(10), || async {
        matches!(holders.read(&n).await, Ok(None))
    })
    .await;
    assert!(gone, "the frozen holder's record was not deleted at its TTL");

    let (taken, cost) = common::sent(&challenger, client.try_acquire(n.as_str(), ttl)).await;
    let lease = taken
        .expect("takeover")
        .granted()
        .expect("the expired lease was refused");
    assert_eq!(lease.token(), FencingToken::new(2));
    assert_eq!(
        (cost.txns, cost.ranges),
        (1, 0),
        "takeover of a lease seen held: {cost:?}"
    );
    lease.release().await.expect("release");
    common::cleanup(&holders).await;
}

/// Fenced transactions apply while the tenure lasts and are refused after it, even if
/// the old holder does not know yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_transactions_follow_the_tenure() {
    let store = common::store("fenced").await;
    let raw = store.client().clone();
    let n = name("ledger");
    let data = format!("{}ledger/balance", store.config().prefix()).into_bytes();
    let la = acquired(&store, n.as_str(), Duration::from_secs(5)).await;
    let fa = store.fence(&la).expect("fence a");
    assert_eq!(fa.token(), la.token());
    for v in ["1", "2"] {
        fenced_put(&store, &fa, data.clone(), v).await;
    }
    la.release().await.expect("release");
    refused_put(&store, &fa, data.clone(), "after-release").await;
    let lb = acquired(&store, n.as_str(), Duration::from_secs(5)).await;
    let fb = store.fence(&lb).expect("fence b");
    fenced_put(&store, &fb, data.clone(), "3").await;
    // A stale tenure's write is refused.
    assert_eq!(
        refused_put(&store, &fa, data.clone(), "stale").await,
        FencingToken::new(1)
    );
    assert_eq!(
        raw_get(&raw, data.clone()).await.map(|kv| kv.value().to_vec()),
        Some(b"3".to_vec())
    );
    lb.release().await.expect("release");
    common::cleanup(&store).await;
}

/// A TTL etcd cannot honour (below its minimum lease TTL, or not whole seconds) is not
/// quietly stretched: the lease is held, renewed and reported for the session's TTL
/// (before: `Lease::ttl` said 1 s while the record lived 2 s after its process froze).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_etcd_cannot_honour_is_reported_on_the_grant() {
    let store = common::store("ttl-raised").await;
    let client = LeaseClient::new(store.clone());
    let lease = client
        .acquire("short", Duration::from_millis(1000))
        .await
        .expect("acquire");
    let held = lease.ttl();
    assert!(
        held >= Duration::from_secs(2),
        "etcd's minimum lease TTL is 2 s; the lease says {held:?}"
    );
    assert_eq!(held.subsec_nanos(), 0, "etcd leases are whole seconds: {held:?}");
    let stored = store.read(&name("short")).await.expect("read").expect("held");
    assert_eq!(
        stored.record.ttl.get(),
        held,
        "the record shows the TTL the lease reports"
    );
    let odd = client
        .acquire("odd", Duration::from_millis(2500))
        .await
        .expect("acquire");
    assert_eq!(odd.ttl(), Duration::from_secs(3));
    for held in [lease, odd] {
        held.release().await.expect("release");
    }
    common::cleanup(&store).await;
}

/// A fence taken on another store instance (another process's, say) than the one that
/// granted the lease guards the same tenure: it applies while the lease is held and is
/// refused once it is released (before: refused at once, "stale token").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_from_another_store_instance_guards_the_same_tenure() {
    let granting = common::store("fence-elsewhere").await;
    let other = common::store_under(granting.config().prefix()).await;
    let data = format!("{}ledger/balance", granting.config().prefix()).into_bytes();
    let lease = acquired(&granting, "ledger", Duration::from_secs(5)).await;
    let fence = other.fence(&lease).expect("a fence on another instance");
    fenced_put(&other, &fence, data.clone(), "1").await;
    lease.release().await.expect("release");
    refused_put(&other, &fence, data, "after-release").await;
    common::cleanup(&granting).await;
}

/// etcd unreachable: every operation is `Unavailable` (nothing sent), nothing granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_etcd_is_unavailable() {
    let store = common::dead_store("down").await;
    let n = name("down");
    let read = store.read(&n).await;
    assert!(matches!(read, Err(Error::Unavailable { .. })), "read: {read:?}");
    // What failed, and the driver's words on why, without the transport's internals.
    let message = read.expect_err("read").to_string();
    assert!(message.contains("Connection refused"), "{message}");
    assert!(!message.contains("tonic::"), "{message}");
    let vacant = LeaseRecord {
        holder: None,
        ..held("x", 1, 1000)
    };
    let write = store.write(&n, &Precondition::Absent, &vacant).await;
    assert!(matches!(write, Err(Error::Unavailable { .. })), "write: {write:?}");
    let claim = store.write(&n, &Precondition::Claimable, &held("x", 1, 1000)).await;
    assert!(matches!(claim, Err(Error::Unavailable { .. })), "claim: {claim:?}");
    let fence = KeyFence::new("down/fenced", FencingToken::new(1)).expect("fence");
    let fenced = store.fenced_put(&fence, "x").await;
    assert!(
        matches!(fenced, Err(Error::Unavailable { .. })),
        "fenced put: {fenced:?}"
    );
    let c = LeaseClient::new(store.clone());
    match c.try_acquire(n.as_str(), Duration::from_secs(1)).await {
        Err(e) => assert!(e.is_retryable(), "{e:?}"),
        Ok(o) => panic!("acquire with etcd down gave {o:?}"),
    }
}

/// A proxy in front of the first etcd endpoint, and a store (keys under a prefix of
/// its own for `tag`, requests bounded by `timeout`) whose client connects through it.
async fn via_proxy(tag: &str, timeout: Duration) -> (Proxy, EtcdStore) {
    let upstream = common::endpoints()[0].trim_start_matches("http://").to_owned();
    let proxy = Proxy::start(&upstream).await;
    let client = Client::connect([proxy.endpoint()], None)
        .await
        .expect("connect via proxy");
    let config = EtcdConfig::new(common::unique_prefix(tag))
        .and_then(|c| c.with_request_timeout(timeout))
        .expect("config");
    (proxy, EtcdStore::new(client, config))
}

/// A request sent but unanswered is `Indeterminate`, and it may indeed have applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_times_out_after_sending_is_indeterminate() {
    let direct = common::connect(&common::endpoints()).await;
    let (proxy, store) = via_proxy("indeterminate", Duration::from_millis(500)).await;
    // Warm up: the connection and the session exist before the fault.
    let warm = store
        .write(&name("warm"), &Precondition::Absent, &held("w", 1, 5_000))
        .await
        .expect("warm-up write");
    assert!(matches!(warm, CasOutcome::Written(_)));

    proxy.set_mode(ProxyMode::Withhold);
    let n = name("lost-reply");
    let sent_at = Instant::now();
    let e = store
        .write(&n, &Precondition::Absent, &held("me", 1, 5_000))
        .await
        .expect_err("no reply can arrive");
    assert!(e.is_indeterminate(), "{e:?}");
    assert!(sent_at.elapsed() < Duration::from_secs(3), "the timeout did not fire");
    // It did apply: the fence exists for exactly this.
    let kv = raw_get(&direct, store.record_key(&n))
        .await
        .expect("the unanswered write applied");
    assert!(String::from_utf8_lossy(kv.value()).contains("\"me\""));
    // A key-fenced write without its answer is indeterminate too: it applied.
    let fenced_key = format!("{}fenced/lost-reply", store.config().prefix()).into_bytes();
    let fence = KeyFence::new(fenced_key.clone(), FencingToken::new(3)).expect("fence");
    let e = store.fenced_put(&fence, "v").await.expect_err("no reply can arrive");
    assert!(e.is_indeterminate(), "{e:?}");
    let kv = raw_get(&direct, fenced_key)
        .await
        .expect("the unanswered fenced write applied");
    assert_eq!(kv.value(), fence.encode(b"v"));
    // A fenced write in the same state is indeterminate too, never a silent success.
    let c = LeaseClient::new(store.clone());
    match c.try_acquire("other", Duration::from_secs(5)).await {
        Err(e) => assert!(e.is_indeterminate() || e.is_retryable(), "{e:?}"),
        Ok(o) => panic!("acquire without answers gave {o:?}"),
    }
    proxy.set_mode(ProxyMode::Forward);
    let cleanup = EtcdStore::new(direct, store.config().clone());
    common::cleanup(&cleanup).await;
}

/// A server that answers slowly, then not at all (the shared case,
/// `leasehold_testkit::endpoints::slow_then_silent`): each request ends at the store's
/// request timeout, a write as "may have applied", a read as `Unavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_silent_server_ends_each_request_at_the_request_timeout() {
    let (proxy, store) = via_proxy("slow", Duration::from_millis(300)).await;
    let direct = common::store_under(store.config().prefix()).await;
    leasehold_testkit::endpoints::slow_then_silent(store, direct.clone(), &proxy, Duration::from_millis(300)).await;
    common::cleanup(&direct).await;
}

/// Garbage in the record or the fence counter is `CorruptRecord`, never a grant, and is
/// left in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_is_corrupt_never_free() {
    let store = common::store("garbage").await;
    let mut raw = store.client().clone();
    let c = LeaseClient::new(store.clone());

    let n = name("bad-record");
    raw.put(store.record_key(&n), "{\"f\":1,\"holder\":null}", None)
        .await
        .expect("put");
    assert!(matches!(store.read(&n).await, Err(Error::CorruptRecord { .. })));
    assert!(matches!(
        store.write(&n, &Precondition::Claimable, &held("x", 1, 1000)).await,
        Err(Error::CorruptRecord { .. })
    ));
    assert!(matches!(
        c.try_acquire(n.as_str(), Duration::from_secs(1)).await,
        Err(Error::CorruptRecord { .. })
    ));

    let f = name("bad-fence");
    raw.put(store.fence_key(&f), "seven", None).await.expect("put");
    match store.write(&f, &Precondition::Claimable, &held("x", 1, 1000)).await {
        Err(Error::CorruptRecord { reason, .. }) => assert!(reason.contains("fence"), "{reason}"),
        other => panic!("a claim over a corrupt fence counter gave {other:?}"),
    }
    assert!(matches!(
        c.try_acquire(f.as_str(), Duration::from_secs(1)).await,
        Err(Error::CorruptRecord { .. })
    ));
    assert!(store.read(&f).await.expect("read").is_none(), "nothing was granted");
    let kv = raw_get(&raw, store.fence_key(&f)).await.expect("fence kept");
    assert_eq!(kv.value(), b"seven");
    common::cleanup(&store).await;
}

/// Bad input is refused before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_sending() {
    let store = common::store("input").await;
    let n = name("input");
    let before = store.stats();
    let bad_version = store
        .write(
            &n,
            &Precondition::Version(Version::new("etag-abc")),
            &held("x", 1, 1000),
        )
        .await;
    assert!(
        matches!(bad_version, Err(Error::InvalidInput { .. })),
        "{bad_version:?}"
    );
    let zero = store.write(&n, &Precondition::Absent, &held("x", 0, 1000)).await;
    assert!(matches!(zero, Err(Error::InvalidInput { .. })), "{zero:?}");
    let delete = store.delete(&n, &Version::new("-3")).await;
    assert!(matches!(delete, Err(Error::InvalidInput { .. })), "{delete:?}");
    assert_eq!(store.stats().since(&before), EtcdStats::default(), "something was sent");
    assert!(EtcdConfig::new("").is_err());
    assert!(EtcdConfig::new("white space/").is_err());
    let c = LeaseClient::new(store.clone());
    assert!(matches!(
        c.try_acquire("../escape", Duration::from_secs(1)).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        c.try_acquire("ok", Duration::from_micros(1500)).await,
        Err(Error::InvalidInput { .. })
    ));
}

/// `renew` answers from the session, truthfully: a record replaced through this store,
/// a different holder or token, or an expired record is refused without a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_is_truthful_without_a_transaction() {
    let store = common::store("renew").await;
    let n = name("renew");
    let a = leasehold_testkit::write_ok(&store, &n, &Precondition::Absent, &held("a", 1, 1500)).await;
    let s0 = store.stats();
    match store.renew(&n, &a.version, &a.record).await.expect("renew") {
        CasOutcome::Written(s) => assert_eq!(s.version, a.version, "renewal rewrote the record"),
        CasOutcome::Conflict(c) => panic!("renewal refused: {c:?}"),
    }
    let other_holder = held("b", 1, 1500);
    assert!(matches!(
        store.renew(&n, &a.version, &other_holder).await.expect("renew"),
        CasOutcome::Conflict(_)
    ));
    let other_token = held("a", 2, 1500);
    assert!(matches!(
        store.renew(&n, &a.version, &other_token).await.expect("renew"),
        CasOutcome::Conflict(_)
    ));
    assert_eq!(store.stats().since(&s0).txns, 0);
    // Replaced through this store: the conflict names the new record.
    let b = leasehold_testkit::write_ok(
        &store,
        &n,
        &Precondition::Version(a.version.clone()),
        &held("b", 2, 1500),
    )
    .await;
    match store.renew(&n, &a.version, &a.record).await.expect("stale renew") {
        CasOutcome::Conflict(leasehold_core::store::Current::Present(s)) => assert_eq!(s.version, b.version),
        other => panic!("{other:?}"),
    }
    // Left to expire: refused once its TTL has passed (the store deleted it).
    assert!(
        leasehold_core::testing::process::poll_async(Duration::from_secs(5), || async {
            matches!(store.read(&n).await, Ok(None))
        })
        .await,
        "never expired"
    );
    assert!(matches!(
        store.renew(&n, &b.version, &b.record).await.expect("late renew"),
        CasOutcome::Conflict(_)
    ));
    common::cleanup(&store).await;
}

/// `list` names only record keys: not the fence counter a deleted record leaves, not a
/// key under the prefix that is no lease name (written by hand); a handful of names is
/// one keys-only range read, and more keys than a page (1000) are paged through, each
/// record once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_names_only_record_keys_and_pages_through() {
    let store = common::store("list").await;
    let p = store.config().prefix().to_owned();
    let mut c = store.client().clone();
    // 1100 record keys written by hand (a listing reads keys only), with their fence
    // counters, in transactions of 100 keys.
    let names: Vec<String> = (0..1100).map(|i| format!("many/{i:04}")).collect();
    for chunk in names.chunks(50) {
        let ops: Vec<TxnOp> = chunk
            .iter()
            .flat_map(|n| {
                [
                    TxnOp::put(format!("{p}{n}"), "record", None),
                    TxnOp::put(format!("{p}{n}!fence"), "00000000000000000001", None),
                ]
            })
            .collect();
        c.txn(etcd_client::Txn::new().and_then(ops))
            .await
            .unwrap_or_else(|e| panic!("raw puts: {e}"));
    }
    for foreign in [
        "many/0005/gone!fence",
        "many/0005 not a name",
        "many/0005//x",
        "many/0005/./x",
    ] {
        c.put(format!("{p}{foreign}"), "foreign", None)
            .await
            .unwrap_or_else(|e| panic!("put {foreign}: {e}"));
    }
    let (few, sent) = common::sent(&store, store.list(&name_prefix("many/000"))).await;
    let expected: Vec<String> = (0..10).map(|i| format!("many/{i:04}")).collect();
    assert_eq!(listed(few.expect("list")), expected);
    assert_eq!(
        sent,
        EtcdStats {
            ranges: 1,
            ..EtcdStats::default()
        },
        "a handful of names is one range read"
    );

    let (all, sent) = common::sent(&store, store.list(&name_prefix("many/"))).await;
    assert_eq!(listed(all.expect("list")), names, "each record once, sorted");
    assert_eq!(sent.ranges, 3, "2204 keys in pages of 1000: {sent:?}");
    assert_eq!(sent.txns, 0);
    common::cleanup(&store).await;
}
