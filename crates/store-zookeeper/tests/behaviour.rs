//! The ZooKeeper store's own promises, against the shared single server: round trips per
//! operation (the crate docs' table), the TTL a session class gives, the tenure fence,
//! and typed errors for bad input, a missing root and a dead server.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::{
    AcquireOutcome, Error, FencingToken, LeaseClient, NamePrefix,
    store::{CasOutcome, CasStore, Precondition, Version},
};
use leasehold_testkit::foreign::take_and_release;
use leasehold_testkit::records::{acquired, held_record as held, lease_name as name, renewals};
use leasehold_zookeeper::zookeeper_client as zk;
use leasehold_zookeeper::{ZooKeeperConfig, ZooKeeperStats, ZooKeeperStore};

/// `got` is `want`, apart from the heartbeats that sessions holding records send in the
/// background (counted on their own).
fn only(what: &str, got: ZooKeeperStats, want: ZooKeeperStats) {
    assert_eq!(ZooKeeperStats { heartbeats: 0, ..got }, want, "{what}: requests sent");
}

/// `attempt`, a `try_acquire` through `store` (`what` names it), is refused: the lease is
/// held; and it sends `want` (apart from heartbeats).
async fn assert_refused(
    what: &str,
    store: &ZooKeeperStore,
    attempt: impl std::future::Future<Output = Result<AcquireOutcome, Error>>,
    want: ZooKeeperStats,
) {
    let (outcome, n) = common::sent(store, attempt).await;
    assert!(
        matches!(outcome.expect("try_acquire"), AcquireOutcome::Held { .. }),
        "{what}: a held lease was granted twice"
    );
    only(what, n, want);
}

/// Every operation of the docs' table, counted at the store's one send path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_per_operation() {
    let store = common::store("round-trips").await;
    let client = LeaseClient::new(store.clone());
    let ttl = Duration::from_secs(3);
    let multi = ZooKeeperStats {
        multis: 1,
        ..ZooKeeperStats::default()
    };

    // The first held record of a TTL class opens the class's session, once.
    let (warm, first) = common::sent(&store, client.acquire("warm-up", ttl)).await;
    let warm = warm.expect("warm-up");
    only(
        "first grant of a TTL class",
        first,
        ZooKeeperStats {
            multis: 1,
            sessions: 1,
            ..ZooKeeperStats::default()
        },
    );
    warm.release().await.expect("release warm-up");

    let (lease, n) = common::sent(&store, client.acquire("jobs/a", ttl)).await;
    let lease = lease.expect("acquire");
    only("acquire of a new name", n, multi);

    let before = store.stats();
    let waited = std::time::Instant::now();
    renewals(&lease, 1).await;
    let renewal = store.stats().since(&before);
    only(
        "one renewal",
        renewal,
        ZooKeeperStats {
            renewals: 1,
            ..ZooKeeperStats::default()
        },
    );
    // Meanwhile the class session sent a `sync` through the leader every eighth of its
    // timeout (375 ms), one session's whole background cost.
    let waited = waited.elapsed();
    let expected = u64::try_from(waited.as_millis() / 375).unwrap_or(u64::MAX);
    assert!(
        renewal.heartbeats + 1 >= expected && renewal.heartbeats <= expected + 1,
        "{} heartbeats in {waited:?}, every 375 ms",
        renewal.heartbeats
    );

    // Another store (another process) is refused: its first try on a name it never saw
    // is the claim of a new name, which fails; it reads the holder.
    let other = common::store_under(&common::dir_of(&store)).await;
    let other_client = LeaseClient::new(other.clone());
    assert_refused(
        "refused acquire by a store that never saw the name",
        &other,
        other_client.try_acquire("jobs/a", ttl),
        ZooKeeperStats {
            multis: 1,
            reads: 1,
            sessions: 1,
            ..ZooKeeperStats::default()
        },
    )
    .await;

    let (released, n) = common::sent(&store, lease.release()).await;
    released.expect("release");
    only("release", n, multi);

    let (again, n) = common::sent(&store, client.acquire("jobs/a", ttl)).await;
    let again = again.expect("again");
    only("re-acquire after our own release", n, multi);
    again.release().await.expect("release again");

    // The other store last saw the lease held: it reads, finds it vacant, claims.
    let (taken, n) = common::sent(&other, other_client.acquire("jobs/a", ttl)).await;

    let taken = taken.expect("takeover by the other store");
    assert_eq!(taken.token(), FencingToken::new(3));
    only(
        "acquire after others changed the name",
        n,
        ZooKeeperStats {
            multis: 1,
            reads: 1,
            ..ZooKeeperStats::default()
        },
    );
    taken.release().await.expect("release taken");

    // A store that never saw the name (a new process: every `leasehold run`) acquires
    // the released lease: its claim of a new name fails, it reads, and claims on what it
    // read.
    let cold = common::store_under(&common::dir_of(&store)).await;
    let cold_client = LeaseClient::new(cold.clone());
    let (fourth, n) = common::sent(&cold, cold_client.acquire("jobs/a", ttl)).await;
    let fourth = fourth.expect("acquire by a new store");
    assert_eq!(fourth.token(), FencingToken::new(4));
    // Its first claim (the refused one) opens its TTL class's session.
    let opens_session = ZooKeeperStats {
        sessions: 1,
        ..ZooKeeperStats::default()
    };
    only(
        "a new store's first acquire of a released lease",
        n,
        ZooKeeperStats {
            multis: 2,
            reads: 1,
            ..opens_session
        },
    );
    fourth.release().await.expect("release fourth");

    let (read, n) = common::sent(&store, store.read(&name("jobs/a"))).await;
    assert!(read.expect("read").is_some());
    only(
        "read",
        n,
        ZooKeeperStats {
            reads: 1,
            ..ZooKeeperStats::default()
        },
    );
    let (listed, n) = common::sent(&store, store.list(&NamePrefix::new("jobs/").expect("prefix"))).await;
    assert_eq!(listed.expect("list"), vec![name("jobs/a")]);
    only(
        "list",
        n,
        ZooKeeperStats {
            reads: 1,
            ..ZooKeeperStats::default()
        },
    );
}

/// A challenger that last saw a lease held claims it, once the holder's TTL has run out
/// since that look and the record is gone, with one `multi`, as the bare lock's one
/// `create` (not a read and then a `multi`). While the holder lives, the same attempt is
/// refused after that `multi` failed and a read, and the next one, a TTL not yet past
/// that read, reads only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_seen_held_a_ttl_ago_is_claimed_in_one_multi() {
    let holders = common::store("seen-held").await;
    let challenger = common::store_under(&common::dir_of(&holders)).await;
    let client = LeaseClient::new(challenger.clone());
    let ttl = Duration::from_secs(1);
    // The challenger's session for this TTL class, opened once.
    take_and_release(&client, "warm-up", ttl, 1).await;

    let live = acquired(&holders, "live", ttl).await;
    // A holder that froze: its record is never renewed, and its store deletes it at its
    // TTL, as ZooKeeper does when a dead process's session expires.
    leasehold_testkit::write_ok(
        &holders,
        &name("frozen"),
        &Precondition::Claimable,
        &held("frozen-holder", 1, 1000),
    )
    .await;
    for n in ["live", "frozen"] {
        let seen = client.try_acquire(n, ttl).await.expect("first look");
        assert!(matches!(seen, AcquireOutcome::Held { .. }), "{n} granted while held");
    }
    let looked = std::time::Instant::now();
    // Read through the holders' store: the challenger's picture stays the one it saw.
    let gone = leasehold_core::testing::process::poll_async(Duration::from_secs(10), || async {
        looked.elapsed() >= ttl && holders.read(&name("frozen")).await.is_ok_and(|r| r.is_none())
    })
    .await;
    assert!(gone, "the frozen holder's record was not deleted at its TTL");

    let (taken, n) = common::sent(&challenger, client.try_acquire("frozen", ttl)).await;
    match taken.expect("takeover") {
        AcquireOutcome::Granted(lease) => {
            assert_eq!(lease.token(), FencingToken::new(2));
            lease.release().await.expect("release");
        }
        other => panic!("the expired lease was refused: {other:?}"),
    }
    only(
        "takeover of a lease last seen held, a TTL ago",
        n,
        ZooKeeperStats {
            multis: 1,
            ..ZooKeeperStats::default()
        },
    );

    assert_refused(
        "refused acquire, the lease last seen held a TTL ago",
        &challenger,
        client.try_acquire("live", ttl),
        ZooKeeperStats {
            multis: 1,
            reads: 1,
            ..ZooKeeperStats::default()
        },
    )
    .await;
    let (refused, n) = common::sent(
        &challenger,
        challenger.write(&name("live"), &Precondition::Claimable, &held("challenger", 1, 1000)),
    )
    .await;
    assert!(
        matches!(refused.expect("write"), CasOutcome::Conflict(_)),
        "a live holder's lease was granted twice"
    );
    only(
        "refused claim, the lease read just before",
        n,
        ZooKeeperStats {
            reads: 1,
            ..ZooKeeperStats::default()
        },
    );
    live.release().await.expect("release live");
}

/// The record's TTL is its session class's negotiated timeout, and the grant says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ttl_is_the_session_timeout_of_its_class() {
    let store = common::store("ttl-classes").await;
    let client = LeaseClient::new(store.clone());
    for (asked, got) in [(300, 1000), (1000, 1000), (2500, 3000)] {
        let lease = client
            .acquire(format!("ttl-{asked}"), Duration::from_millis(asked))
            .await
            .expect("acquire");
        assert_eq!(lease.ttl(), Duration::from_millis(got), "asked for {asked} ms");
        let stored = store.read(lease.name()).await.expect("read").expect("present");
        assert_eq!(stored.record.ttl.get(), Duration::from_millis(got));
        lease.release().await.expect("release");
    }
}

/// A tenure fence applies while the tenure lasts and refuses the holder after a takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenure_fence_refuses_a_stale_holder() {
    let store = common::store("tenure-fence").await;
    let client = LeaseClient::new(store.clone());
    let dir = common::dir_of(&store);
    let data = format!("{dir}/data");
    let lease = client.acquire("fenced", Duration::from_secs(2)).await.expect("acquire");
    let fence = store.fence(&lease).expect("fence");
    let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let (applied, n) = common::sent(
        &store,
        store.fenced_multi(&fence, |m| m.add_create(&data, b"first", &opts)),
    )
    .await;
    assert!(applied.expect("fenced create").is_applied());
    assert_eq!(n.multis, 1, "guard and effect in one multi: {n:?}");

    // Released and taken again: the old tenure is refused, on the server.
    let old = fence.clone();
    lease.release().await.expect("release");
    let next = client.acquire("fenced", Duration::from_secs(2)).await.expect("next");
    match store
        .fenced_multi(&old, |m| m.add_set_data(&data, b"stale", None))
        .await
    {
        Err(Error::FenceRejected { token, .. }) => assert_eq!(token, FencingToken::new(1)),
        other => panic!("a stale tenure's write was not refused: {other:?}"),
    }
    let c = store.client().await.expect("client");
    assert_eq!(c.get_data(&data).await.expect("get").0, b"first");
    // A failing operation of yours is reported, and nothing applied.
    let fence = store.fence(&next).expect("fence");
    let out = store
        .fenced_multi(&fence, |m| {
            m.add_set_data(&data, b"new", None)?;
            m.add_delete(&format!("{dir}/missing"), None)
        })
        .await
        .expect("fenced multi");
    assert!(!out.is_applied(), "a multi whose operation failed applied");
    assert_eq!(c.get_data(&data).await.expect("get").0, b"first");
    next.release().await.expect("release next");
}

/// Bad versions, tokens and roots are refused before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_anything_is_sent() {
    let store = common::store("bad-input").await;
    let n = name("bad");
    let before = store.stats();
    for v in ["", "x", "-1", "1.0", "18446744073709551616", &(1_u64 << 63).to_string()] {
        let pre = Precondition::Version(Version::new(v));
        assert!(
            matches!(
                store.write(&n, &pre, &held("a", 1, 1000)).await,
                Err(Error::InvalidInput { .. })
            ),
            "version {v:?} accepted"
        );
        assert!(matches!(
            store.delete(&n, &Version::new(v)).await,
            Err(Error::InvalidInput { .. })
        ));
    }
    assert!(matches!(
        store.write(&n, &Precondition::Absent, &held("a", 0, 1000)).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        store
            .write(&n, &Precondition::Absent, &held("a", FencingToken::MAX.get() + 1, 1000))
            .await,
        Err(Error::InvalidInput { .. })
    ));
    assert_eq!(
        store.stats().since(&before),
        ZooKeeperStats::default(),
        "something was sent"
    );
    assert!(
        store.read(&n).await.expect("read").is_none(),
        "bad input wrote something"
    );
    for root in ["", "leases", "/a/", "/a b", "/zookeeper"] {
        assert!(
            matches!(ZooKeeperConfig::new(root), Err(Error::InvalidInput { .. })),
            "root {root:?} accepted"
        );
    }
    let client = LeaseClient::new(store.clone());
    assert!(matches!(
        client.acquire("bad name!", Duration::from_secs(1)).await,
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        client.acquire("ok", Duration::ZERO).await,
        Err(Error::InvalidInput { .. })
    ));
}

/// A store whose root znode was never created says so, on every path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_root_is_not_provisioned() {
    let root = format!("{}/never-created", common::unique_dir("missing-root"));
    let config = ZooKeeperConfig::new(root.clone()).expect("config");
    let store = ZooKeeperStore::connect(&leasehold_testkit::zk_addr(), config)
        .await
        .expect("connect");
    let missing = |what: &str, r: Result<(), Error>| match r {
        Err(Error::NotProvisioned { message, .. }) => assert!(message.contains(&root), "{what}: {message}"),
        other => panic!("{what}: expected NotProvisioned naming the root, got {other:?}"),
    };
    missing("verify", store.verify().await);
    let client = LeaseClient::new(store.clone());
    missing("acquire", client.acquire("a", Duration::from_secs(1)).await.map(drop));
    missing(
        "vacant write",
        store
            .write(&name("b"), &Precondition::Absent, &held("x", 1, 1000).vacated())
            .await
            .map(drop),
    );
    missing("list", store.list(&NamePrefix::all()).await.map(drop));
    let c = store.client().await.expect("client");
    assert_eq!(
        c.check_stat(&root).await.expect("stat"),
        None,
        "something created the root"
    );
}

/// No server: connecting is `Unavailable` within the request timeout, and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_is_unavailable_in_bounded_time() {
    let config = ZooKeeperConfig::default()
        .with_request_timeout(Duration::from_millis(800))
        .expect("config");
    let start = tokio::time::Instant::now();
    // A port of the project's range where nothing listens.
    match ZooKeeperStore::connect("127.0.0.1:52199", config.clone()).await {
        Err(e) => {
            assert!(e.is_retryable(), "expected Unavailable, got {e}");
            // What failed, and why: the server refused the connection.
            let message = e.to_string();
            assert!(message.contains("127.0.0.1:52199: Connection refused"), "{message}");
        }
        Ok(s) => panic!("connected to nothing: {s:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());

    // A server that accepts connections and never answers the handshake is told apart
    // from one that refuses them; the chroot is not taken for a server.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let cluster = format!("127.0.0.1:52199,{}/leasehold", silent.local_addr().expect("addr"));
    let accepting = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = silent.accept().await {
            held.push(conn);
        }
    });
    let start = tokio::time::Instant::now();
    match ZooKeeperStore::connect(&cluster, config).await {
        Err(e) => {
            assert!(e.is_retryable(), "expected Unavailable, got {e}");
            let message = e.to_string();
            assert!(message.contains("127.0.0.1:52199: Connection refused"), "{message}");
            assert!(
                message.contains("accepts connections, no session handshake answered"),
                "{message}"
            );
            assert!(!message.contains("leasehold:"), "{message}");
        }
        Ok(s) => panic!("connected to a silent server: {s:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    accepting.abort();
}

/// An explicit-token write raises the counter: a later claim issues a token above it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_tokens_raise_the_counter() {
    let store = common::store("explicit").await;
    let n = name("explicit");
    let first = match store
        .write(&n, &Precondition::Absent, &held("a", 41, 1000))
        .await
        .expect("write")
    {
        CasOutcome::Written(s) => s,
        other => panic!("not written: {other:?}"),
    };
    match store
        .write(
            &n,
            &Precondition::Version(first.version.clone()),
            &held("a", 41, 1000).vacated(),
        )
        .await
        .expect("vacate")
    {
        CasOutcome::Written(s) => assert!(s.record.is_vacant()),
        other => panic!("not vacated: {other:?}"),
    }
    let lease = LeaseClient::new(store.clone())
        .acquire(n.as_str(), Duration::from_secs(1))
        .await
        .expect("acquire");
    assert_eq!(lease.token(), FencingToken::new(42));
    lease.release().await.expect("release");
}
