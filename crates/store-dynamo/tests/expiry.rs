//! Native expiry on DynamoDB (`CasStore::expire`): `provision` turns the table's Time to
//! Live on for `expires_at` (once: a second provision leaves it as it is), and `expire`
//! sets that attribute on the item at the version given, in one request, leaving the
//! record readable and unchanged; a stale version changes nothing. (moto keeps expired
//! items: that DynamoDB then deletes them is its documented behaviour, not tested here.)
#![allow(missing_docs)]

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::{AttributeValue, TimeToLiveStatus};
use leasehold_core::testing::CountingStore;
use leasehold_core::{
    LeaseName,
    store::{Precondition, Stored},
};
use leasehold_dynamodb::{ATTR_EXPIRES_AT, DynamoStore};
use leasehold_testkit::expiry::{assert_expire_scheduled, assert_stale_expire_conflicts, assert_still_reads};
use leasehold_testkit::records::held_record;

/// A record held by `done-marker` (token 7, TTL 30 s) written as `name` if `expect` holds.
async fn written(store: &DynamoStore, name: &LeaseName, expect: &Precondition) -> Stored {
    leasehold_testkit::write_ok(store, name, expect, &held_record("done-marker", 7, 30_000)).await
}

/// The item's `expires_at`, if it has one.
async fn expires_at(admin: &aws_sdk_dynamodb::Client, table: &str, name: &LeaseName) -> Option<u64> {
    let item = admin
        .get_item()
        .table_name(table)
        .key("lease", AttributeValue::S(name.as_str().to_owned()))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem")
        .item
        .expect("the item");
    item.get(ATTR_EXPIRES_AT).map(|v| match v {
        AttributeValue::N(n) => n.parse().expect("a whole number of seconds"),
        other => panic!("expires_at is {other:?}, not a number"),
    })
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_turns_time_to_live_on_once() {
    let (admin, table) = common::fresh_lease_table("ttl-on").await;
    let ttl = |admin: aws_sdk_dynamodb::Client, table: String| async move {
        admin
            .describe_time_to_live()
            .table_name(table)
            .send()
            .await
            .expect("DescribeTimeToLive")
            .time_to_live_description
            .expect("a description")
    };
    let d = ttl(admin.clone(), table.clone()).await;
    assert_eq!(d.attribute_name(), Some(ATTR_EXPIRES_AT));
    assert_eq!(d.time_to_live_status(), Some(&TimeToLiveStatus::Enabled));
    // Provisioning again (every start of a service does) keeps it and does not fail.
    common::lease_store(admin.clone(), &table).await;
    let d = ttl(admin.clone(), table.clone()).await;
    assert_eq!(d.attribute_name(), Some(ATTR_EXPIRES_AT));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expire_sets_the_attribute_in_one_request_and_changes_nothing_else() {
    let (admin, table) = common::fresh_lease_table("expire").await;
    let store = common::store_on(&table);
    let counting = CountingStore::new(store.clone());
    let name = LeaseName::new(common::unique_name("expiry", "set")).expect("name");
    let w = written(&store, &name, &Precondition::Absent).await;
    assert_eq!(expires_at(&admin, &table, &name).await, None, "a write sets no expiry");
    let before = now_s();
    assert_expire_scheduled(&counting, &name, &w.version, Duration::from_secs(90)).await;
    assert_eq!(counting.counts().round_trips(), 1, "expire is one request");
    let at = expires_at(&admin, &table, &name).await.expect("expires_at set");
    assert!(
        (before + 90..=now_s() + 91).contains(&at),
        "expires_at {at} is not 90 s after {before}"
    );
    // A record with expires_at reads, unchanged.
    assert_still_reads(&store, &name, &w, "expire").await;
    // A grant on that version still applies (the attribute is not part of the record),
    // and takes the item off the expiry.
    written(&store, &name, &Precondition::Version(w.version.clone())).await;
    assert_eq!(expires_at(&admin, &table, &name).await, None, "a grant left expires_at");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_version_changes_nothing() {
    let (admin, table) = common::fresh_lease_table("expire-stale").await;
    let store = common::store_on(&table);
    let name = LeaseName::new(common::unique_name("expiry", "stale")).expect("name");
    let first = written(&store, &name, &Precondition::Absent).await;
    let second = written(&store, &name, &Precondition::Version(first.version.clone())).await;
    assert_stale_expire_conflicts(
        &store,
        &name,
        (&first.version, &second.version),
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(
        expires_at(&admin, &table, &name).await,
        None,
        "a stale expire set expires_at"
    );
}
