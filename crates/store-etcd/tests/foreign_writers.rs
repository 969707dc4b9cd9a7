//! Records changed by other programs (an operator with `etcdctl`, a script, a restore):
//! a holder whose record was deleted or overwritten notices within one renewal
//! interval, although its renewals send no request.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::store::{LeaseRecord, record_codec};
use leasehold_core::{FencingToken, LeaseClient, LossCause};
use leasehold_etcd::EtcdStore;

/// The lease TTL of these tests: renewals every third of it.
const TTL: Duration = Duration::from_millis(3000);

/// Runs `etcdctl` against the test etcd with `args`; its standard output.
fn etcdctl(args: &[&str]) -> String {
    let endpoints = format!("--endpoints={}", common::endpoints().join(","));
    let mut all = vec![endpoints.as_str(), "--dial-timeout=2s", "--command-timeout=5s"];
    all.extend_from_slice(args);
    leasehold_testkit::foreign::cli("etcdctl", &all)
}

fn record_key(store: &EtcdStore, name: &str) -> String {
    let key = store.record_key(&leasehold_core::LeaseName::new(name).expect("name"));
    String::from_utf8(key).expect("a UTF-8 key")
}

/// Holds `name`, lets one renewal land, runs `change` on the record key with etcdctl,
/// and returns how the holder lost the lease (within one renewal interval).
async fn hold_then(store: &EtcdStore, name: &str, change: impl FnOnce(&str)) -> LossCause {
    let client = LeaseClient::new(store.clone());
    let key = record_key(store, name);
    let (cause, _, _) = leasehold_testkit::foreign::hold_then(&client, name, TTL, async { change(&key) }).await;
    cause
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_record_is_noticed_within_one_renewal_interval() {
    let store = common::store("foreign-delete").await;
    let name = "foreign/deleted";
    let cause = hold_then(&store, name, |key| {
        etcdctl(&["del", key]);
    })
    .await;
    assert!(
        matches!(cause, LossCause::Expired | LossCause::TakenOver { .. }),
        "{cause:?}"
    );
    // The token sequence continues: the next grant is above the deleted holder's token.
    let next = leasehold_testkit::granted(&LeaseClient::new(store.clone()), name, TTL, "after the delete").await;
    assert_eq!(next.token(), FencingToken::new(2));
    next.release().await.expect("release");
    common::cleanup(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwritten_record_is_noticed_within_one_renewal_interval() {
    let store = common::store("foreign-put").await;
    let name = "foreign/overwritten";
    let cause = hold_then(&store, name, |key| {
        // Another holder's record, written the way an operator would: etcdctl put.
        let other = LeaseRecord::held(
            leasehold_core::HolderId::new("operator").expect("holder"),
            FencingToken::new(100),
            leasehold_core::Ttl::new(TTL).expect("ttl"),
        );
        let value = String::from_utf8(record_codec::encode(&other)).expect("JSON");
        let lease = etcdctl(&["lease", "grant", "30"]);
        // "lease 694d7a1f3b2c4e0b granted with TTL(30s)"
        let id = lease.split_whitespace().nth(1).expect("a lease id").to_owned();
        etcdctl(&["put", &format!("--lease={id}"), key, &value]);
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
    let planted = LeaseRecord::held(
        leasehold_core::HolderId::new("operator").expect("holder"),
        FencingToken::new(7),
        leasehold_core::Ttl::new(TTL).expect("ttl"),
    );
    let value = String::from_utf8(record_codec::encode(&planted)).expect("JSON");
    etcdctl(&["put", &record_key(&store, name), &value]);
    let key = leasehold_core::LeaseName::new(name).expect("name");
    match leasehold_core::store::CasStore::read(&store, &key).await {
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
        let old = old.trim();
        // The compact JSON the store writes: `"field":value` up to the next `,` or `}`.
        let (f, v) = field.pick(("\"holder\":", format!("\"{value}\"")), ("\"token\":", value));
        let at = old.find(f).unwrap_or_else(|| panic!("no {f} in {old}")) + f.len();
        let end = at + old[at..].find([',', '}']).unwrap_or_else(|| panic!("{old}"));
        etcdctl(&[
            "put",
            "--ignore-lease",
            &key,
            &format!("{}{v}{}", &old[..at], &old[end..]),
        ]);
        std::future::ready(())
    })
}

leasehold_testkit::editor_cases!(editor();
    a_token_above_max_is_corrupt_on_every_path,
    the_last_token_is_granted_once,
);
