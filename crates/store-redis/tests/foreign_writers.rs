//! Records changed by other programs (an operator with `redis-cli`, a script): a holder
//! notices within one renewal interval, its renewals and release never write its own
//! token or holder back, and the token sequence continues above every token the record
//! has shown.
#![allow(missing_docs)]

mod support;

use std::time::Duration;

use leasehold_core::{ClientConfig, FencingToken, LeaseClient, LeaseName, LossCause};
use leasehold_redis::RedisStore;

/// The lease TTL of these tests: renewals every third of it.
const TTL: Duration = Duration::from_millis(1500);

/// Runs `redis-cli` against the shared server with `args`; its output.
fn redis_cli(args: &[&str]) -> String {
    let url = support::shared_url();
    let mut all = vec!["-u", url.as_str()];
    all.extend_from_slice(args);
    leasehold_testkit::foreign::cli("redis-cli", &all)
}

fn leases(store: &RedisStore) -> LeaseClient {
    LeaseClient::efficiency_only(store.clone(), ClientConfig::default()).expect("client")
}

fn record_key(store: &RedisStore, name: &str) -> String {
    store.keys().record(&LeaseName::new(name).expect("name"))
}

/// Holds `name`, lets one renewal land, runs `redis-cli` with `change` on the record key,
/// and returns how the holder lost the lease (within one renewal interval).
async fn hold_then(store: &RedisStore, name: &str, change: &[&str]) -> LossCause {
    let key = record_key(store, name);
    let mut args = vec![change[0], key.as_str()];
    args.extend_from_slice(&change[1..]);
    let (cause, _, lease) =
        leasehold_testkit::foreign::hold_then(&leases(store), name, TTL, async { drop(redis_cli(&args)) }).await;
    assert_eq!(lease.token(), FencingToken::new(1));
    cause
}

/// The next grant of `name`, once the changed record has expired.
async fn next_token(store: &RedisStore, name: &str) -> FencingToken {
    let lease = leases(store)
        .acquire_timeout(name, TTL, Duration::from_secs(10))
        .await
        .expect("the next grant");
    let token = lease.token();
    lease.release().await.expect("release");
    token
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_record_is_noticed_and_the_tokens_go_on() {
    let store = support::shared_store("foreign-del").await;
    let cause = hold_then(&store, "foreign/del", &["DEL"]).await;
    assert_eq!(cause, LossCause::Expired);
    assert_eq!(next_token(&store, "foreign/del").await, FencingToken::new(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_token_is_never_written_back() {
    let store = support::shared_store("foreign-token").await;
    let cause = hold_then(&store, "foreign/token", &["HSET", "t", "100"]).await;
    match cause {
        LossCause::TakenOver { token, .. } => assert_eq!(token, FencingToken::new(100)),
        other => panic!("a raised token is someone else's tenure: {other:?}"),
    }
    let t = redis_cli(&["HGET", &record_key(&store, "foreign/token"), "t"]);
    assert_eq!(
        t.trim(),
        "100",
        "the holder wrote its own token back: tokens went backwards"
    );
    assert_eq!(
        next_token(&store, "foreign/token").await,
        FencingToken::new(101),
        "the next grant must be above the raised token, even after the record expired"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_holder_is_noticed() {
    let store = support::shared_store("foreign-holder").await;
    let cause = hold_then(&store, "foreign/holder", &["HSET", "h", "operator"]).await;
    match cause {
        LossCause::TakenOver { holder, .. } => {
            assert_eq!(holder.as_ref().map(|h| h.as_str()), Some("operator"));
        }
        other => panic!("another holder's name is a takeover: {other:?}"),
    }
}

/// A release right after an operator raised the token (before a renewal noticed) must
/// not write the old token back either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_never_writes_a_lower_token_back() {
    let store = support::shared_store("foreign-release").await;
    let name = "foreign/release";
    let lease = leases(&store)
        .acquire(name, Duration::from_secs(30))
        .await
        .expect("acquire");
    redis_cli(&["HSET", &record_key(&store, name), "t", "100"]);
    lease.release().await.expect("release");
    let t = redis_cli(&["HGET", &record_key(&store, name), "t"]);
    assert_eq!(t.trim(), "100", "the release wrote its own token back");
    redis_cli(&["DEL", &record_key(&store, name)]);
    assert_eq!(next_token(&store, name).await, FencingToken::new(101));
}

/// The shared cases of `leasehold_testkit::edits`, edited with `redis-cli HSET` (Redis's
/// version field does not move).
async fn editor() -> leasehold_testkit::edits::Editor {
    let store = support::shared_store("edits").await;
    let (keys, own) = (store.clone(), store.clone());
    leasehold_testkit::edits::Editor::with_client(
        store,
        move || leases(&own),
        move |name, field, value| {
            redis_cli(&["HSET", &record_key(&keys, &name), field.pick("h", "t"), &value]);
            std::future::ready(())
        },
    )
}

leasehold_testkit::editor_cases!(editor(); all);
