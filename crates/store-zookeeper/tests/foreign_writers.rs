//! Znodes changed or planted by the real `zkCli.sh` (an operator, a script): a holder
//! whose record was deleted or overwritten notices at its next renewal; garbage, wrong
//! JSON, negative and huge tokens, and counters this store could not have written are
//! `CorruptRecord` on every path, and nothing is granted.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use leasehold_core::store::CasStore;
use leasehold_core::{Error, HolderId, LeaseClient, LossCause};
use leasehold_testkit::foreign::{
    assert_corrupt, assert_deleted_keeps_the_counter, assert_grants_corrupt, cli_with, lost_after,
};
use leasehold_testkit::records::{held_record, lease_name, record_json};
use leasehold_zookeeper::ZooKeeperStore;

/// The lease TTL of these tests, in milliseconds: renewals every third of it.
const TTL_MS: u64 = 3000;
/// The lease TTL of these tests.
const TTL: Duration = Duration::from_millis(TTL_MS);

/// Runs `zkCli.sh` against the shared server with one command; its standard output.
fn zkcli(args: &[&str]) -> String {
    let server = leasehold_testkit::zk_addr();
    cli_with("/usr/share/zookeeper/bin/zkCli.sh", &["-server", &server], args)
}

fn record_path(store: &ZooKeeperStore, name: &str) -> String {
    store.record_path(&lease_name(name))
}

/// The JSON of a record held by `holder` (vacant if `None`) with the token `token`.
fn json(holder: Option<&str>, token: u64) -> String {
    let r = held_record(holder.unwrap_or("x"), token, TTL_MS);
    record_json(&if holder.is_none() { r.vacated() } else { r })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_record_is_noticed_within_one_renewal_interval() {
    let store = common::store("foreign-delete").await;
    let name = "foreign/deleted";
    let path = record_path(&store, name);
    // The token sequence continues: the counter znode is not touched.
    assert_deleted_keeps_the_counter(&store, name, TTL, async {
        zkcli(&["delete", &path]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwritten_record_is_noticed_within_one_renewal_interval() {
    let store = common::store("foreign-set").await;
    let name = "foreign/overwritten";
    let path = record_path(&store, name);
    let cause = lost_after(&store, name, TTL, async {
        zkcli(&["set", &path, &json(Some("operator"), 1)]);
    })
    .await;
    assert!(
        matches!(
            cause,
            LossCause::Expired | LossCause::TakenOver { .. } | LossCause::StoreError(_)
        ),
        "{cause:?}"
    );
    let read = store.read(&lease_name(name)).await.expect("read").expect("present");
    assert_eq!(read.record.holder, Some(HolderId::new("operator").expect("holder")));
}

/// Each planted value, at the record znode or at the counter znode: a read and a grant
/// are `CorruptRecord`, at once, and the znode is left as the operator wrote it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_znodes_are_errors_never_grants() {
    let store = common::store("foreign-corrupt").await;
    let client = LeaseClient::new(store.clone());
    let counter = |t: &str| format!("{t:0>20}");
    let records: [(&str, String); 9] = [
        ("garbage", "not-a-record".to_owned()),
        ("wrong JSON", "{\"holder\":5,\"token\":\"x\"}".to_owned()),
        ("negative token", json(None, 1).replace("\"token\":1", "\"token\":-3")),
        (
            "huge token",
            json(None, 1).replace("\"token\":1", "\"token\":99999999999999999999999"),
        ),
        (
            "token above MAX",
            json(None, 1).replace("\"token\":1", "\"token\":9223372036854775807"),
        ),
        ("a held record in a persistent znode", json(Some("operator"), 1)),
        // The mark of a record `expire` kept is no way to plant a free or corrupt one.
        ("a kept vacant record", format!("kept:{}", json(None, 1))),
        ("a kept record of garbage", "kept:not-a-record".to_owned()),
        ("an empty znode", String::new()),
    ];
    for (i, (what, data)) in records.iter().enumerate() {
        let name = format!("corrupt/record-{i}");
        let path = record_path(&store, &name);
        let fence = store.fence_path(&lease_name(&name));
        zkcli(&["create", &fence, &counter("1")]);
        if data.is_empty() {
            zkcli(&["create", &path]);
        } else {
            zkcli(&["create", &path, data]);
        }
        assert_corrupt(what, "read", store.read(&lease_name(&name)).await);
        assert_grants_corrupt(&client, &name, TTL, what).await;
        let c = store.client().await.expect("client");
        let (now, _) = c.get_data(&path).await.expect("get");
        assert_eq!(String::from_utf8_lossy(&now), *data, "{what}: the znode was changed");
    }
    let counters: [(&str, String); 5] = [
        ("a counter of garbage", "twelve".to_owned()),
        ("a counter with a minus sign", "0000000000000000-001".to_owned()),
        ("a counter at 0", counter("0")),
        ("a counter above MAX", counter("9223372036854775807")),
        ("a counter of 21 digits", counter("000000000000000000001")),
    ];
    for (i, (what, data)) in counters.iter().enumerate() {
        let name = format!("corrupt/counter-{i}");
        let fence = store.fence_path(&lease_name(&name));
        zkcli(&["create", &fence, data]);
        assert_corrupt(what, "read", store.read(&lease_name(&name)).await);
        assert_grants_corrupt(&client, &name, TTL, what).await;
        let c = store.client().await.expect("client");
        assert!(
            c.check_stat(&record_path(&store, &name)).await.expect("stat").is_none(),
            "{what}: a record was created"
        );
    }
    // A record without its counter: nothing this store writes.
    let name = "corrupt/no-counter";
    zkcli(&["create", &record_path(&store, name), &json(None, 4)]);
    assert_corrupt(
        "a record without a counter",
        "read",
        store.read(&lease_name(name)).await,
    );
    assert_grants_corrupt(&client, name, TTL, "a record without a counter").await;
    match store
        .list(&leasehold_core::NamePrefix::new("corrupt/").expect("prefix"))
        .await
    {
        Ok(names) => assert_eq!(
            names.len(),
            records.len() + 1,
            "every record znode is listed, corrupt or not: {names:?}"
        ),
        Err(e) => panic!("list: {e}"),
    }
    let _ = Error::Shutdown;
}

/// The shared token-counter cases of `leasehold_testkit::edits`, edited with `zkCli.sh
/// set` of the record's JSON changed by hand (the znode keeps its owner; its data
/// version moves, so a release on the old version is refused).
async fn editor() -> leasehold_testkit::edits::Editor {
    let store = common::store("edits").await;
    let nodes = store.clone();
    leasehold_testkit::edits::Editor::new(store, move |name, field, value| {
        let nodes = nodes.clone();
        async move {
            let path = record_path(&nodes, &name);
            let c = nodes.client().await.expect("client");
            let (old, _) = c.get_data(&path).await.unwrap_or_else(|e| panic!("get {path}: {e}"));
            let new = field.set_in_json(&String::from_utf8(old).expect("JSON"), &value);
            tokio::task::spawn_blocking(move || zkcli(&["set", &path, &new]))
                .await
                .expect("zkCli");
        }
    })
}

leasehold_testkit::editor_cases!(editor(); all);
