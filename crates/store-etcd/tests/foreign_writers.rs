//! Records changed by other programs (an operator with `etcdctl`, a script, a restore):
//! a holder whose record was deleted or overwritten notices within one renewal
//! interval, although its renewals send no request.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::{FencingToken, LeaseClient, LossCause};
use leasehold_etcd::EtcdStore;
use leasehold_testkit::foreign::{assert_deleted_keeps_the_counter, cli_with, lost_after};
use leasehold_testkit::records::{held_record, lease_name, record_json};

/// The lease TTL of these tests, in milliseconds: renewals every third of it.
const TTL_MS: u64 = 3000;
/// The lease TTL of these tests.
const TTL: Duration = Duration::from_millis(TTL_MS);

/// Runs `etcdctl` against the test etcd with `args`; its standard output.
fn etcdctl(args: &[&str]) -> String {
    let endpoints = format!("--endpoints={}", common::endpoints().join(","));
    cli_with(
        "etcdctl",
        &[&endpoints, "--dial-timeout=2s", "--command-timeout=5s"],
        args,
    )
}

fn record_key(store: &EtcdStore, name: &str) -> String {
    String::from_utf8(store.record_key(&lease_name(name))).expect("a UTF-8 key")
}

/// A held record by `operator` with the token `token`, as the JSON an operator types.
fn operator_json(token: u64) -> String {
    record_json(&held_record("operator", token, TTL_MS))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_record_is_noticed_within_one_renewal_interval() {
    let store = common::store("foreign-delete").await;
    let name = "foreign/deleted";
    let key = record_key(&store, name);
    assert_deleted_keeps_the_counter(&store, name, TTL, async {
        etcdctl(&["del", &key]);
    })
    .await;
    common::cleanup(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwritten_record_is_noticed_within_one_renewal_interval() {
    let store = common::store("foreign-put").await;
    let name = "foreign/overwritten";
    let key = record_key(&store, name);
    let cause = lost_after(&store, name, TTL, async {
        // Another holder's record, written the way an operator would: etcdctl put.
        let lease = etcdctl(&["lease", "grant", "30"]);
        // "lease 694d7a1f3b2c4e0b granted with TTL(30s)"
        let id = lease.split_whitespace().nth(1).expect("a lease id").to_owned();
        etcdctl(&["put", &format!("--lease={id}"), &key, &operator_json(100)]);
    })
    .await;
    match cause {
        LossCause::TakenOver { token, .. } => assert_eq!(token, FencingToken::new(100)),
        other => panic!("an overwrite by another holder is a takeover: {other:?}"),
    }
    common::cleanup(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_record_without_an_etcd_lease_is_corrupt() {
    let store = common::store("foreign-no-lease").await;
    let name = "foreign/no-lease";
    // A held record put by hand without --lease: nothing would ever expire it.
    etcdctl(&["put", &record_key(&store, name), &operator_json(7)]);
    match leasehold_core::store::CasStore::read(&store, &lease_name(name)).await {
        Err(leasehold_core::Error::CorruptRecord { .. }) => {}
        other => panic!("a read gives {other:?}"),
    }
    let client = LeaseClient::new(store.clone());
    let attempt = client.acquire_timeout(name, TTL, Duration::from_secs(3));
    match tokio::time::timeout(Duration::from_secs(5), attempt).await {
        Ok(Err(leasehold_core::Error::CorruptRecord { .. })) => {}
        Ok(Ok(lease)) => panic!("a corrupt record was granted (token {})", lease.token()),
        Ok(Err(other)) => panic!("a grant gives {other:?}, not CorruptRecord"),
        Err(_) => panic!("a grant still waits on a record that never expires"),
    }
    common::cleanup(&store).await;
}

/// The shared token-counter cases of `leasehold_testkit::edits`, edited with `etcdctl
/// put --ignore-lease` of the record's JSON changed by hand (the record keeps its etcd
/// lease; its revision moves, so a release on the old one is refused anyway).
async fn editor() -> leasehold_testkit::edits::Editor {
    let store = common::store("edits").await;
    let keys = store.clone();
    leasehold_testkit::edits::Editor::new(store, move |name, field, value| {
        let key = record_key(&keys, &name);
        let old = etcdctl(&["get", &key, "--print-value-only"]);
        etcdctl(&["put", "--ignore-lease", &key, &field.set_in_json(old.trim(), &value)]);
        std::future::ready(())
    })
}

leasehold_testkit::editor_cases!(editor();
    a_token_above_max_is_corrupt_on_every_path,
    the_last_token_is_granted_once,
);
