//! Items written by other programs (an operator with the AWS CLI, a restore, a script):
//! the lease store never undoes them.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use leasehold_core::store::CasStore;
use leasehold_core::{LeaseClient, LeaseName};
use leasehold_dynamodb::{ATTR_FENCE, DEFAULT_KEY_ATTRIBUTE};

/// An operator raises a held lease's token by hand (`update-item … SET fence = 100`, the
/// version untouched). The holder's next renewal must not write its own token back: the
/// holder loses the lease and the item keeps 100.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_token_is_never_written_back() {
    let (admin, table) = common::fresh_lease_table("foreign").await;
    let store = common::store_on(&table);
    let ttl = Duration::from_millis(1_500);
    let name = common::unique_name("foreign", "raised");
    let lease = LeaseClient::new(store.clone())
        .acquire(&name, ttl)
        .await
        .expect("acquire");
    assert_eq!(lease.token().get(), 1);
    admin
        .update_item()
        .table_name(&table)
        .key(DEFAULT_KEY_ATTRIBUTE, AttributeValue::S(name.clone()))
        .update_expression("SET #f = :f")
        .expression_attribute_names("#f", ATTR_FENCE)
        .expression_attribute_values(":f", AttributeValue::N("100".into()))
        .send()
        .await
        .expect("the operator's update");
    let cause = tokio::time::timeout(Duration::from_secs(10), lease.lost())
        .await
        .unwrap_or_else(|_| panic!("the holder never noticed its token was moved"));
    let key = LeaseName::new(&name).expect("name");
    let item = store.read(&key).await.expect("read").expect("the item");
    assert_eq!(
        item.record.token.get(),
        100,
        "a renewal wrote the token back ({cause:?}): tokens went backwards"
    );
}

/// An operator (or a bad restore) leaves a held item invalid: a zero TTL, an empty
/// holder, a token that is not a number. The holder's renewal must not heal it: the
/// holder loses the lease and reads report the item as corrupt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_held_item_is_never_healed() {
    let (admin, table) = common::fresh_lease_table("foreign-corrupt").await;
    let store = common::store_on(&table);
    for (what, attr, value) in [
        (
            "a zero TTL",
            leasehold_dynamodb::ATTR_TTL_MS,
            AttributeValue::N("0".into()),
        ),
        (
            "an empty holder",
            leasehold_dynamodb::ATTR_HOLDER,
            AttributeValue::S(String::new()),
        ),
        (
            "a token that is not a number",
            ATTR_FENCE,
            AttributeValue::S("seven".into()),
        ),
    ] {
        let name = common::unique_name("foreign", "corrupt");
        let change = admin
            .update_item()
            .table_name(&table)
            .key(DEFAULT_KEY_ATTRIBUTE, AttributeValue::S(name.clone()))
            .update_expression("SET #a = :x")
            .expression_attribute_names("#a", attr)
            .expression_attribute_values(":x", value)
            .send();
        let client = LeaseClient::new(store.clone());
        let (cause, _, _) =
            leasehold_testkit::foreign::hold_then(&client, &name, Duration::from_millis(1_500), async {
                change.await.expect("the operator's update");
            })
            .await;
        let key = LeaseName::new(&name).expect("name");
        match store.read(&key).await {
            Err(leasehold_core::Error::CorruptRecord { .. }) => {}
            other => panic!("{what}: a renewal healed the item ({cause:?}): read gives {other:?}"),
        }
    }
}
