//! Bad input and a bad store fail loudly, never grant: keys of the wrong type or
//! shape, a script missing from the cache, connections dropped or refused.

mod support;

use std::time::Duration;

use leasehold_core::{
    AcquireOutcome, ClientConfig, Error, FencingToken, HolderId, LeaseClient, LeaseName, Ttl,
    store::{CasStore, LeaseRecord, Precondition},
};
use leasehold_redis::{HashFence, RedisConfig, RedisStore, read_high_water};
use redis::aio::{ConnectionManagerConfig, MultiplexedConnection};
use support::{OwnRedis, Persistence, ProxyMode};

fn record(holder: &str, token: u64, ttl_ms: u64) -> LeaseRecord {
    LeaseRecord::held(
        HolderId::new(holder).expect("holder"),
        FencingToken::new(token),
        Ttl::from_millis(ttl_ms).expect("ttl"),
    )
}

async fn run(conn: &mut MultiplexedConnection, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd.query_async(conn).await.unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

/// TYPE and content of a key, to show it was left alone.
async fn snapshot(conn: &mut MultiplexedConnection, key: &str) -> (String, redis::Value) {
    let ty: String = redis::cmd("TYPE").arg(key).query_async(conn).await.expect("TYPE");
    let dump: redis::Value = redis::cmd("DUMP").arg(key).query_async(conn).await.expect("DUMP");
    (ty, dump)
}

/// Runs the commands of `setup`, each `placeholder` argument replaced by `key`, and
/// returns the key's [`snapshot`].
async fn set_up(
    conn: &mut MultiplexedConnection,
    setup: &[&[&str]],
    placeholder: &str,
    key: &str,
) -> (String, redis::Value) {
    for cmd in setup {
        let args: Vec<&str> = cmd.iter().map(|a| if *a == placeholder { key } else { *a }).collect();
        run(conn, &args).await;
    }
    snapshot(conn, key).await
}

/// A store over a plain connection to `url`, under `prefix`.
async fn multiplexed_store(url: &str, prefix: &str) -> RedisStore<MultiplexedConnection> {
    RedisStore::new(support::admin(url).await, RedisConfig::default().with_prefix(prefix)).expect("store")
}

/// Whether `r` is `FenceMarkInvalid` for `key`, its reason mentioning `what`.
fn bad_mark_of<T>(r: &leasehold_core::Result<T>, key: &str, what: &str) -> bool {
    matches!(r, Err(Error::FenceMarkInvalid { resource, reason }) if resource == key && reason.contains(what))
}

fn is_corrupt<T: std::fmt::Debug>(r: &leasehold_core::Result<T>) -> bool {
    matches!(r, Err(Error::CorruptRecord { .. }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_key_of_the_wrong_type_or_shape_is_corrupt_never_granted() {
    let store = support::shared_store("bad-record").await;
    let mut admin = support::admin(&support::shared_url()).await;
    let leases = LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client");
    type Setup = &'static [&'static [&'static str]];
    let cases: &[(&str, Setup)] = &[
        ("string", &[&["SET", "K", "hello", "EX", "600"]]),
        ("list", &[&["RPUSH", "K", "a"], &["EXPIRE", "K", "600"]]),
        (
            "unknown field",
            &[
                &["HSET", "K", "h", "", "t", "1", "ttl", "500", "v", "1:1", "x", "?"],
                &["EXPIRE", "K", "600"],
            ],
        ),
        (
            "token not a number",
            &[
                &["HSET", "K", "h", "", "t", "abc", "ttl", "500", "v", "1:1"],
                &["EXPIRE", "K", "600"],
            ],
        ),
        (
            "token zero",
            &[
                &["HSET", "K", "h", "", "t", "0", "ttl", "500", "v", "1:1"],
                &["EXPIRE", "K", "600"],
            ],
        ),
        (
            "token above i64",
            &[
                &[
                    "HSET",
                    "K",
                    "h",
                    "",
                    "t",
                    "9223372036854775808",
                    "ttl",
                    "500",
                    "v",
                    "1:1",
                ],
                &["EXPIRE", "K", "600"],
            ],
        ),
        (
            "holder with a space",
            &[
                &["HSET", "K", "h", "a b", "t", "1", "ttl", "500", "v", "1:1"],
                &["EXPIRE", "K", "600"],
            ],
        ),
        (
            "missing holder",
            &[
                &["HSET", "K", "t", "1", "ttl", "500", "v", "1:1"],
                &["EXPIRE", "K", "600"],
            ],
        ),
        (
            "bad version",
            &[
                &["HSET", "K", "h", "", "t", "1", "ttl", "500", "v", "x"],
                &["EXPIRE", "K", "600"],
            ],
        ),
        // A vacant record without expiry would be claimable forever; a held one would
        // never expire. Either way it was not written by this store.
        (
            "no expiry",
            &[&["HSET", "K", "h", "", "t", "1", "ttl", "500", "v", "1:1"]],
        ),
    ];
    for (what, setup) in cases {
        let name = LeaseName::new(format!("bad/{}", what.replace(' ', "-"))).expect("name");
        let key = store.keys().record(&name);
        let before = set_up(&mut admin, setup, "K", &key).await;
        let read = store.read(&name).await;
        assert!(is_corrupt(&read), "{what}: read gave {read:?}");
        for expect in [
            Precondition::Claimable,
            Precondition::Absent,
            Precondition::Version(leasehold_core::store::Version::new("1:1")),
        ] {
            let w = store.write(&name, &expect, &record("intruder", 9, 5_000)).await;
            assert!(is_corrupt(&w), "{what}: write {expect:?} gave {w:?}");
        }
        let d = store.delete(&name, &leasehold_core::store::Version::new("1:1")).await;
        assert!(is_corrupt(&d), "{what}: delete gave {d:?}");
        match leases.try_acquire(&name, Duration::from_secs(5)).await {
            Err(Error::CorruptRecord { .. }) => {}
            Ok(AcquireOutcome::Granted(l)) => panic!("{what}: granted {l:?}"),
            other => panic!("{what}: acquire gave {other:?}"),
        }
        let seed = store.seed_fence_counter(&name, FencingToken::new(3)).await;
        assert!(is_corrupt(&seed), "{what}: seed gave {seed:?}");
        assert_eq!(snapshot(&mut admin, &key).await, before, "{what}: the key was changed");
        run(&mut admin, &["DEL", &key]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_token_counter_is_corrupt_never_granted() {
    let store = support::shared_store("bad-meta").await;
    let mut admin = support::admin(&support::shared_url()).await;
    let cases: &[(&str, &[&[&str]])] = &[
        ("string", &[&["SET", "M", "7"]]),
        ("bad counter", &[&["HSET", "M", "e", "1", "f", "x", "n", "1"]]),
        ("extra field", &[&["HSET", "M", "e", "1", "f", "1", "n", "1", "z", "1"]]),
        ("missing epoch", &[&["HSET", "M", "f", "1", "n", "1", "z", "1"]]),
        (
            "an expiry",
            &[&["HSET", "M", "e", "1", "f", "1", "n", "1"], &["EXPIRE", "M", "600"]],
        ),
    ];
    for (what, setup) in cases {
        let name = LeaseName::new(format!("bad-meta/{}", what.replace(' ', "-"))).expect("name");
        let meta = store.keys().meta(&name);
        let before = set_up(&mut admin, setup, "M", &meta).await;
        let w = store
            .write(&name, &Precondition::Claimable, &record("w", 1, 5_000))
            .await;
        assert!(is_corrupt(&w), "{what}: claim gave {w:?}");
        assert!(
            store.read(&name).await.expect("read").is_none(),
            "{what}: a record was written"
        );
        assert_eq!(
            snapshot(&mut admin, &meta).await,
            before,
            "{what}: the counter was changed"
        );
        run(&mut admin, &["DEL", &meta]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_on_bad_data_are_refused_whole() {
    let mut admin = support::admin(&support::shared_url()).await;
    let p = support::unique_prefix("bad-resource");
    let t = FencingToken::new(5);

    let string_key = format!("{p}string");
    run(&mut admin, &["SET", &string_key, "x", "EX", "600"]).await;
    // A resource without a valid mark says so, naming the key and what it holds.
    let r = HashFence::new(&string_key).set("a", "1").apply(&mut admin, t).await;
    assert!(bad_mark_of(&r, &string_key, "string"), "{r:?}");
    let r = read_high_water(&mut admin, &string_key, HashFence::DEFAULT_MARK_FIELD).await;
    assert!(bad_mark_of(&r, &string_key, "string"), "{r:?}");

    let bad_mark = format!("{p}bad-mark");
    run(&mut admin, &["HSET", &bad_mark, "_fence_token", "soon", "a", "0"]).await;
    let r = HashFence::new(&bad_mark).set("a", "1").apply(&mut admin, t).await;
    assert!(bad_mark_of(&r, &bad_mark, "soon"), "{r:?}");
    let r = read_high_water(&mut admin, &bad_mark, HashFence::DEFAULT_MARK_FIELD).await;
    assert!(bad_mark_of(&r, &bad_mark, "not a token"), "{r:?}");

    // The set comes first in the list, the bad incr second: nothing at all is written.
    let bad_field = format!("{p}bad-field");
    run(
        &mut admin,
        &["HSET", &bad_field, "_fence_token", "1", "a", "0", "n", "many"],
    )
    .await;
    let before = support::hgetall(&mut admin, &bad_field).await;
    let r = HashFence::new(&bad_field)
        .set("a", "1")
        .incr("n", 1)
        .apply(&mut admin, t)
        .await;
    assert!(is_corrupt(&r), "{r:?}");
    assert_eq!(support::hgetall(&mut admin, &bad_field).await, before);

    // Input refused before sending.
    let r = HashFence::new(&bad_field).apply(&mut admin, FencingToken::ZERO).await;
    assert!(matches!(r, Err(Error::InvalidInput { .. })), "{r:?}");
    let r = HashFence::new(&bad_field)
        .apply(&mut admin, FencingToken::new(u64::MAX))
        .await;
    assert!(matches!(r, Err(Error::InvalidInput { .. })), "{r:?}");
    for k in [string_key, bad_mark, bad_field] {
        run(&mut admin, &["DEL", &k]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_input_out_of_range_is_refused_before_sending() {
    let store = support::shared_store("bad-lease-input").await;
    let name = LeaseName::new("x").expect("name");
    let w = store
        .write(&name, &Precondition::Absent, &record("w", u64::MAX, 5_000))
        .await;
    assert!(matches!(w, Err(Error::InvalidInput { .. })), "{w:?}");
    let w = store.write(&name, &Precondition::Absent, &record("w", 0, 5_000)).await;
    assert!(matches!(w, Err(Error::InvalidInput { .. })), "{w:?}");
    let s = store.seed_fence_counter(&name, FencingToken::new(u64::MAX)).await;
    assert!(matches!(s, Err(Error::InvalidInput { .. })), "{s:?}");
    assert!(store.read(&name).await.expect("read").is_none());
    let bad = RedisStore::new(
        support::admin(&support::shared_url()).await,
        RedisConfig::default().with_prefix("a{b}"),
    );
    assert!(matches!(bad, Err(Error::InvalidInput { .. })), "{bad:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_missing_from_the_cache_is_reloaded_and_runs_once() {
    let redis = OwnRedis::start(56504, Persistence::None).await;
    let url = redis.url();
    let mut admin = support::admin(&url).await;
    let store = RedisStore::new(support::admin(&url).await, RedisConfig::default()).expect("store");
    store.verify().await.expect("load");
    let name = LeaseName::new("noscript").expect("name");

    let flush = |admin: &mut MultiplexedConnection| {
        let mut admin = admin.clone();
        async move { run(&mut admin, &["SCRIPT", "FLUSH"]).await }
    };
    let mut wire = support::Wire::start(&url).await;
    let noscript_path = ["evalsha", "script|load", "evalsha"].map(String::from).to_vec();

    // A write right after SCRIPT FLUSH: EVALSHA -> NOSCRIPT, SCRIPT LOAD, EVALSHA.
    flush(&mut admin).await;
    wire.requests().await;
    // After SCRIPT FLUSH.
    let first = leasehold_testkit::write_ok(&store, &name, &Precondition::Claimable, &record("a", 1, 5_000)).await;
    assert_eq!(
        wire.requests().await,
        noscript_path,
        "EVALSHA refused with NOSCRIPT, SCRIPT LOAD, EVALSHA again: the script ran once"
    );
    assert_eq!(first.record.token, FencingToken::new(1));
    assert_eq!(
        store.read(&name).await.expect("read").expect("present").version,
        first.version,
        "the write applied exactly once"
    );

    // Every other script too.
    flush(&mut admin).await;
    assert!(store.read(&name).await.expect("read after flush").is_some());
    flush(&mut admin).await;
    let renewed = store
        .renew(&name, &first.version, &record("a", 1, 5_000))
        .await
        .expect("renew after flush");
    let renewed = leasehold_testkit::written(renewed, "renew after flush");
    flush(&mut admin).await;
    assert_eq!(support::seed(&store, &name, 10).await, 10, "seed after flush");
    flush(&mut admin).await;
    let out = store
        .fenced_write(&HashFence::new("res").set("a", "1"), FencingToken::new(1))
        .await
        .expect("fenced write after flush");
    assert!(out.is_applied(), "{out:?}");
    flush(&mut admin).await;
    assert_eq!(
        read_high_water(&mut admin, "res", HashFence::DEFAULT_MARK_FIELD)
            .await
            .expect("mark after flush"),
        FencingToken::new(1)
    );
    flush(&mut admin).await;
    assert_eq!(
        store.delete(&name, &renewed.version).await.expect("delete after flush"),
        leasehold_core::store::DeleteOutcome::Deleted
    );
}

/// A server that answers slowly, then not at all (the shared case,
/// `leasehold_testkit::endpoints::slow_then_silent`): each call ends at the store's
/// request timeout, a write as "may have applied", a read as `Unavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_silent_server_ends_each_call_at_the_request_timeout() {
    const BOUND: Duration = Duration::from_millis(300);
    let prefix = support::unique_prefix("slow");
    let direct = multiplexed_store(&support::shared_url(), &prefix).await;
    direct.verify().await.expect("load scripts");
    let proxy = support::proxy(support::shared_port()).await;
    let mut config = RedisConfig::default().with_prefix(&prefix);
    config.request_timeout = Some(BOUND);
    let store = RedisStore::connect(support::client(&support::url_of(&proxy)), config)
        .await
        .expect("connect through the proxy");
    leasehold_testkit::endpoints::slow_then_silent(store, direct, &proxy, BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_after_sending_is_indeterminate_never_a_grant() {
    let url = support::shared_url();
    let redis_port = support::shared_port();
    let prefix = support::unique_prefix("dropped");
    let direct = multiplexed_store(&url, &prefix).await;

    // A store write whose reply is lost: the write applied, the caller cannot know.
    let proxy = support::proxy(redis_port).await;
    let via_proxy = multiplexed_store(&support::url_of(&proxy), &prefix).await;
    let name = LeaseName::new("dropped/write").expect("name");
    // The scripts must be in the server's cache: on a fresh server the first EVALSHA is
    // answered NOSCRIPT without running, and dropping that reply proves nothing.
    direct.verify().await.expect("load scripts");
    proxy.set_mode(ProxyMode::DropReply);
    let w = via_proxy
        .write(&name, &Precondition::Claimable, &record("a", 1, 5_000))
        .await;
    assert!(matches!(w, Err(Error::Indeterminate { .. })), "{w:?}");
    let applied = direct.read(&name).await.expect("read").expect("the write did apply");
    assert_eq!(applied.record.holder.as_ref().map(HolderId::as_str), Some("a"));

    // Through a lease client: never a grant.
    let proxy = support::proxy(redis_port).await;
    let via_proxy = multiplexed_store(&support::url_of(&proxy), &prefix).await;
    let leases = LeaseClient::efficiency_only(via_proxy.clone(), ClientConfig::default()).expect("client");
    proxy.set_mode(ProxyMode::DropReply);
    match leases.try_acquire("dropped/acquire", Duration::from_secs(5)).await {
        Ok(AcquireOutcome::Granted(l)) => panic!("granted over a dropped connection: {l:?}"),
        Ok(held) => panic!("{held:?}"),
        Err(e) => assert!(e.is_retryable() || e.is_indeterminate(), "{e:?}"),
    }

    // A fenced write whose reply is lost.
    let proxy = support::proxy(redis_port).await;
    let mut conn = support::admin(&support::url_of(&proxy)).await;
    let resource = format!("{prefix}resource");
    proxy.set_mode(ProxyMode::DropReply);
    let r = HashFence::new(&resource)
        .incr("n", 1)
        .apply(&mut conn, FencingToken::new(3))
        .await;
    assert!(matches!(r, Err(Error::Indeterminate { .. })), "{r:?}");
    let mut admin = support::admin(&url).await;
    assert_eq!(
        support::hgetall(&mut admin, &resource)
            .await
            .get("n")
            .map(String::as_str),
        Some("1"),
        "the fenced write applied once"
    );
    run(&mut admin, &["DEL", &resource]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_unavailable_and_nothing_is_written() {
    let url = support::shared_url();
    let redis_port = support::shared_port();
    let prefix = support::unique_prefix("refused");
    let proxy = support::proxy(redis_port).await;
    let config = ConnectionManagerConfig::new()
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(50));
    let conn = redis::aio::ConnectionManager::new_with_config(support::client(&support::url_of(&proxy)), config)
        .await
        .expect("connect through the proxy");
    let store = RedisStore::new(conn, RedisConfig::default().with_prefix(&prefix)).expect("store");
    let name = LeaseName::new("refused").expect("name");
    proxy.close();
    let mut unavailable = 0;
    for _ in 0..20 {
        match store
            .write(&name, &Precondition::Claimable, &record("a", 1, 5_000))
            .await
        {
            Ok(o) => panic!("a write through a closed port returned {o:?}"),
            Err(e @ Error::Unavailable { .. }) => {
                assert!(e.is_retryable());
                unavailable += 1;
                if unavailable >= 2 {
                    break;
                }
            }
            Err(Error::Indeterminate { .. }) => {}
            Err(e) => panic!("unexpected error kind: {e:?}"),
        }
    }
    assert!(unavailable >= 2, "connection refused never surfaced as Unavailable");
    let direct = multiplexed_store(&url, &prefix).await;
    assert!(
        direct.read(&name).await.expect("read").is_none(),
        "something was written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grade_is_efficiency_only_also_when_type_erased() {
    let store = support::shared_store("grade").await;
    let caps = store.capabilities();
    assert_eq!(caps.grade, leasehold_core::store::Grade::EfficiencyOnly);
    assert_eq!(caps.clock, leasehold_core::store::ClockSource::Store);
    assert!(caps.conflict_returns_current);
    let erased: std::sync::Arc<dyn CasStore> = std::sync::Arc::new(store.clone());
    match LeaseClient::from_dyn(erased, ClientConfig::default()) {
        Err(Error::InvalidInput { .. }) => {}
        other => panic!("a correctness client accepted Redis: {other:?}"),
    }
    assert!(LeaseClient::efficiency_only(store, ClientConfig::default()).is_ok());
}

/// `list` names record keys only, under its own prefix taken literally: a key prefix
/// holding glob characters (`? * [ ] \`) does not match another store's keys, the
/// counter hash a deleted record leaves and keys that are no record of a valid name
/// are not listed, a record hash written by hand is. A handful of names is one `SCAN`
/// on a small database; on a larger one the cursor is followed to the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_scans_only_record_keys_under_a_literal_prefix() {
    let redis = OwnRedis::start(56505, Persistence::None).await;
    let url = redis.url();
    let mut admin = support::admin(&url).await;
    let glob = r"lh?*[x]\:";
    let store = multiplexed_store(&url, glob).await;
    // Matched by the prefix's text read as a glob (`?` `*` `[x]` `\:`), not literally.
    let sibling = multiplexed_store(&url, "lhQQx:").await;
    let write = |store: &RedisStore<MultiplexedConnection>, n: &str| {
        let store = store.clone();
        let n = LeaseName::new(n).expect("name");
        async move { leasehold_testkit::write_ok(&store, &n, &Precondition::Absent, &record("lister", 1, 60_000)).await }
    };
    write(&store, "jobs/a").await;
    write(&store, "jobs/c").await;
    let gone = write(&store, "jobs/b").await;
    let b = LeaseName::new("jobs/b").expect("name");
    store.delete(&b, &gone.version).await.expect("delete");
    write(&sibling, "jobs/z").await;
    run(&mut admin, &["SET", &format!("{glob}{{jobs/not a name}}"), "x"]).await;
    run(&mut admin, &["SET", &format!("{glob}{{jobs/a}}:other"), "x"]).await;
    run(&mut admin, &["SET", &format!("{glob}jobs/plain"), "x"]).await;
    run(&mut admin, &["HSET", &format!("{glob}{{jobs/hand}}"), "h", "someone"]).await;
    let exists: bool = redis::cmd("EXISTS")
        .arg(store.keys().meta(&b))
        .query_async(&mut admin)
        .await
        .expect("EXISTS");
    assert!(exists, "the deleted record's counter hash is kept");

    let jobs = leasehold_core::NamePrefix::new("jobs/").expect("prefix");
    let expected = ["jobs/a", "jobs/c", "jobs/hand"];
    let mut wire = support::Wire::start(&url).await;
    wire.requests().await;
    let listed = store.list(&jobs).await.expect("list");
    assert_eq!(wire.requests().await, ["scan"], "a handful of names, a small database");
    assert_eq!(listed.iter().map(LeaseName::as_str).collect::<Vec<_>>(), expected);
    let theirs = sibling.list(&jobs).await.expect("list");
    assert_eq!(theirs.iter().map(LeaseName::as_str).collect::<Vec<_>>(), ["jobs/z"]);

    // 5000 more keys: SCAN walks the whole database, and every call is followed.
    for chunk in 0..5 {
        let mut mset = redis::cmd("MSET");
        for i in 0..1000 {
            mset.arg(format!("filler:{chunk}:{i}")).arg("x");
        }
        let () = mset.query_async(&mut admin).await.expect("MSET");
    }
    wire.requests().await;
    let listed = store.list(&jobs).await.expect("list");
    let calls = wire.requests().await;
    assert!(calls.len() >= 3 && calls.iter().all(|c| c == "scan"), "{calls:?}");
    assert_eq!(listed.iter().map(LeaseName::as_str).collect::<Vec<_>>(), expected);
}
