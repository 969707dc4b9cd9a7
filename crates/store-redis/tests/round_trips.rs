//! Round trips counted at the server: `MONITOR` on a dedicated Redis shows every
//! request a client sent (script-internal commands excluded), so each lease operation's
//! requests are counted exactly.

mod support;

use std::time::Duration;

use leasehold_core::testing::process::{poll, poll_async};
use leasehold_core::{AcquireOutcome, ClientConfig, FencingToken, LeaseClient, LeaseName, store::CasStore};
use leasehold_redis::{RedisConfig, RedisStore};
use support::{OwnRedis, Persistence, Wire};

fn one_evalsha() -> Vec<String> {
    vec!["evalsha".to_owned()]
}

/// A dedicated server on `port` (kept while the returned guard lives), a `MONITOR` of
/// it, and a store on one multiplexed connection with its scripts loaded.
async fn watched_store(port: u16) -> (OwnRedis, Wire, RedisStore<redis::aio::MultiplexedConnection>) {
    let redis = OwnRedis::start(port, Persistence::None).await;
    let url = redis.url();
    let wire = Wire::start(&url).await;
    let conn = support::admin(&url).await;
    let store = RedisStore::new(conn, RedisConfig::default()).expect("config");
    store.verify().await.expect("load");
    (redis, wire, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_renew_release_are_one_command_each_at_the_server() {
    let redis = OwnRedis::start(56502, Persistence::None).await;
    let url = redis.url();
    let mut wire = Wire::start(&url).await;
    // No pub/sub client: waiting must not add commands to the count.
    let conn = redis::aio::ConnectionManager::new(support::client(&url))
        .await
        .expect("connect");
    let store = RedisStore::new(conn, RedisConfig::default()).expect("config");
    store.verify().await.expect("load scripts");
    let leases = LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client");
    let name = LeaseName::new("jobs/compaction").expect("name");

    // Acquire of a free lease.
    wire.requests().await;
    let lease = leasehold_testkit::granted(&leases, &name, Duration::from_millis(600), "acquire").await;
    assert_eq!(wire.requests().await, one_evalsha(), "acquire");

    // One renewal (the driver renews every third of the TTL, 200 ms here): wait for a
    // renewal to land, start counting, and count until the next one lands.
    let granted_until = lease.valid_until();
    assert!(
        poll(Duration::from_secs(5), || lease.valid_until() > granted_until).await,
        "no renewal"
    );
    wire.requests().await;
    let first = lease.valid_until();
    assert!(
        poll(Duration::from_secs(5), || lease.valid_until() > first).await,
        "no second renewal"
    );
    assert_eq!(wire.requests().await, one_evalsha(), "renewal");

    // Release.
    wire.requests().await;
    lease.release().await.expect("release");
    assert_eq!(wire.requests().await, one_evalsha(), "release");

    // Re-acquire after release, a read, a refused attempt. (A fenced write's round trip
    // is a fence conformance case: tests/conformance.rs.)
    wire.requests().await;
    let again = leasehold_testkit::granted(&leases, &name, Duration::from_secs(30), "re-acquire").await;
    assert_eq!(wire.requests().await, one_evalsha(), "re-acquire");
    assert_eq!(again.token(), FencingToken::new(2));

    wire.requests().await;
    store.read(&name).await.expect("read").expect("present");
    assert_eq!(wire.requests().await, one_evalsha(), "read");

    let other = LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client");
    wire.requests().await;
    match other
        .try_acquire(&name, Duration::from_secs(30))
        .await
        .expect("refused")
    {
        AcquireOutcome::Held { token, .. } => assert_eq!(token, again.token()),
        AcquireOutcome::Granted(l) => panic!("two holders: {l:?}"),
    }
    assert_eq!(
        wire.requests().await,
        one_evalsha(),
        "a refused attempt learns the holder from the conflict reply"
    );
    again.release().await.expect("release");

    // A new client's (a new process's: every `leasehold run`) first acquire of the
    // released lease: one script call too, the claim judged inside Redis.
    let newcomer = LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client");
    wire.requests().await;
    let third = leasehold_testkit::granted(&newcomer, &name, Duration::from_secs(30), "a new client").await;
    assert_eq!(
        wire.requests().await,
        one_evalsha(),
        "a new client's first acquire of a released lease"
    );
    assert_eq!(third.token(), FencingToken::new(3));
    third.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_of_an_expired_lease_is_one_command() {
    let (_redis, mut wire, store) = watched_store(56503).await;
    let name = LeaseName::new("expired").expect("name");
    // A holder that never renews: its record simply expires on the server.
    let rec = leasehold_core::store::LeaseRecord::held(
        leasehold_core::HolderId::new("gone").expect("holder"),
        FencingToken::new(1),
        leasehold_core::Ttl::from_millis(50).expect("ttl"),
    );
    store
        .write(&name, &leasehold_core::store::Precondition::Claimable, &rec)
        .await
        .expect("write");
    let gone = poll_async(Duration::from_secs(5), || async {
        matches!(store.read(&name).await, Ok(None))
    })
    .await;
    assert!(gone, "the record never expired");
    let leases = LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client");
    wire.requests().await;
    let l = leasehold_testkit::granted(&leases, &name, Duration::from_secs(5), "takeover").await;
    assert_eq!(wire.requests().await, one_evalsha(), "takeover of an expired lease");
    assert_eq!(l.token(), FencingToken::new(2), "the takeover takes the next token");
    l.release().await.expect("release");
}

/// Asserts that the last operation was one `EVALSHA` that ran `want` inside Redis.
async fn inside_is(wire: &mut Wire, want: &[&str], what: &str) {
    let (requests, inside) = wire.requests_and_inside().await;
    assert_eq!(requests, one_evalsha(), "{what}");
    assert_eq!(inside, want, "{what}");
}

/// What the write script runs inside Redis for a first grant: no record, no counter
/// hash (a new epoch).
const FIRST_GRANT: &[&str] = &["hgetall", "hgetall", "time", "hset", "hset", "pexpire"];
/// What it runs for a renewal.
const RENEWAL: &[&str] = &["hgetall", "pttl", "hgetall", "pttl", "hset", "hset", "pexpire"];
/// What it runs for a release, which it publishes to waiters.
const RELEASE: &[&str] = &[
    "hgetall", "pttl", "hgetall", "pttl", "hset", "hset", "pexpire", "publish",
];
/// What it runs for a grant of a released lease.
const GRANT_OF_RELEASED: &[&str] = &["hgetall", "pttl", "hgetall", "pttl", "hset", "hset", "pexpire"];
/// What it runs for a refused attempt, which only reads.
const REFUSED: &[&str] = &["hgetall", "pttl", "hgetall", "pttl"];

/// What the write script runs inside Redis per operation, counted at the server
/// (`MONITOR`'s `[db lua]` lines): the record hash and the name's counter hash are each
/// read (`HGETALL`, `PTTL`), the record rewritten with one `HSET` and its `PX`, the
/// counters raised in the script and written back with one `HSET`. A change to the scripts that adds commands shows here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_each_write_runs_inside_redis_are_counted() {
    use leasehold_core::store::{CasOutcome, Precondition};
    use leasehold_testkit::{records::held_record, write_ok, written};
    let (_redis, mut wire, store) = watched_store(56506).await;
    let name = LeaseName::new("inside").expect("name");

    wire.requests_and_inside().await;
    let first = write_ok(&store, &name, &Precondition::Claimable, &held_record("a", 1, 30_000)).await;
    inside_is(&mut wire, FIRST_GRANT, "a first grant (a new epoch)").await;

    let renewal = store.renew(&name, &first.version, &first.record).await;
    let renewed = written(renewal.expect("renew"), "renewal");
    inside_is(&mut wire, RENEWAL, "renewal").await;

    let release = store.release(&name, &renewed.version, &renewed.record).await;
    written(release.expect("release"), "release");
    inside_is(&mut wire, RELEASE, "release").await;

    let second = write_ok(&store, &name, &Precondition::Claimable, &held_record("b", 1, 30_000)).await;
    assert_eq!(second.record.token, FencingToken::new(2));
    inside_is(&mut wire, GRANT_OF_RELEASED, "a grant of a released lease").await;

    let refused = store
        .write(&name, &Precondition::Claimable, &held_record("c", 1, 30_000))
        .await;
    match refused.expect("refused") {
        CasOutcome::Conflict(_) => {}
        other => panic!("a held lease was claimed: {other:?}"),
    }
    inside_is(&mut wire, REFUSED, "a refused attempt only reads").await;
}
