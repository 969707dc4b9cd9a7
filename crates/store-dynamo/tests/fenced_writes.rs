//! Fenced writes on the caller's own items, against moto: what is DynamoDB's own. The
//! guard composes with the caller's condition, names, values and update expression; the
//! caller's own failed condition is told apart from a refused fence; clashes with the
//! guard and the legacy parameters are refused before sending. (The fence contract
//! itself, the modes, the refusals, the raised mark and one request per write, is
//! checked by the conformance fence cases in `tests/conformance.rs`, on `PutItem` and
//! `UpdateItem`.)
#![allow(missing_docs)]

mod common;

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeAction, AttributeValue, AttributeValueUpdate, ConditionalOperator, ExpectedAttributeValue,
};
use leasehold_core::fence::FencedOutcome;
use leasehold_core::{Error, FencingToken};
use leasehold_dynamodb::{ItemFence, NAME_PLACEHOLDER, TOKEN_PLACEHOLDER};

fn fence(token: u64) -> ItemFence {
    ItemFence::new("mark", FencingToken::new(token)).expect("fence")
}

async fn item(client: &Client, table: &str, id: &str) -> HashMap<String, AttributeValue> {
    common::get_item(client, table, ("id", id)).await.expect("item exists")
}

#[tokio::test]
async fn update_guard_composes_with_the_callers_expression() {
    let client = common::client(None);
    let table = common::unique_table("fenced-update");
    common::create_resource_table(&client, &table).await;
    let deposit = |token: u64, amount: u64| {
        let client = client.clone();
        let table = table.clone();
        async move {
            let req = client
                .update_item()
                .table_name(&table)
                .key("id", common::s("acct"))
                .update_expression("SET #bal = if_not_exists(#bal, :zero) + :amt")
                .condition_expression("attribute_not_exists(#frozen)")
                .expression_attribute_names("#bal", "balance")
                .expression_attribute_names("#frozen", "frozen")
                .expression_attribute_values(":zero", common::n(0))
                .expression_attribute_values(":amt", common::n(amount));
            fence(token).update(req).await
        }
    };
    assert!(matches!(deposit(1, 10).await, Ok(FencedOutcome::Applied(_))));
    assert!(matches!(deposit(2, 5).await, Ok(FencedOutcome::Applied(_))));
    let acct = item(&client, &table, "acct").await;
    assert_eq!(acct["balance"], common::n(15));
    assert_eq!(acct["mark"], common::n(2));

    // Stale token: the fence refuses with the item's mark (read in the same request),
    // balance unchanged.
    match deposit(1, 100).await {
        Err(Error::FenceRejected { token, mark }) => {
            assert_eq!((token.get(), mark.map(FencingToken::get)), (1, Some(2)));
        }
        other => panic!("a stale token: {other:?}"),
    }

    // The caller's own condition fails with a good token: not a fence rejection.
    client
        .update_item()
        .table_name(&table)
        .key("id", common::s("acct"))
        .update_expression("SET frozen = :t")
        .expression_attribute_values(":t", AttributeValue::Bool(true))
        .send()
        .await
        .expect("freeze account");
    match deposit(2, 100).await {
        Ok(FencedOutcome::ConditionFailed(Some(old))) => {
            assert_eq!(old["balance"], common::n(15), "the old item comes back");
        }
        other => panic!("expected the caller's condition to fail, got {other:?}"),
    }
    // Both fail: the fence dominates (the writer has lost its lease).
    assert!(matches!(deposit(1, 100).await, Err(Error::FenceRejected { .. })));
    assert_eq!(item(&client, &table, "acct").await["balance"], common::n(15));

    // An expression without a SET clause gets one; a new item passes the guard.
    let req = client
        .update_item()
        .table_name(&table)
        .key("id", common::s("counter"))
        .update_expression("ADD #n :one")
        .expression_attribute_names("#n", "count")
        .expression_attribute_values(":one", common::n(1));
    assert!(matches!(fence(7).update(req).await, Ok(FencedOutcome::Applied(_))));
    let counter = item(&client, &table, "counter").await;
    assert_eq!(
        (counter["count"].clone(), counter["mark"].clone()),
        (common::n(1), common::n(7))
    );
    common::delete_table(&client, &table).await;
}

#[tokio::test]
async fn clashes_with_the_guard_are_refused_before_sending() {
    let counter = leasehold_aws::SentRequests::default();
    let client = common::client(Some(&counter));
    let f = fence(3);
    let put = || client.put_item().table_name("anything").item("id", common::s("x"));
    let update = || client.update_item().table_name("anything").key("id", common::s("x"));
    let cases = [
        f.put(put().expression_attribute_names(NAME_PLACEHOLDER, "other"))
            .await
            .map(|_| ()),
        f.put(put().expression_attribute_values(TOKEN_PLACEHOLDER, common::n(1)))
            .await
            .map(|_| ()),
        f.put(put().item("mark", common::n(99))).await.map(|_| ()),
        f.update(
            update()
                .update_expression("SET #m = :v")
                .expression_attribute_names("#m", "mark")
                .expression_attribute_values(":v", common::n(1)),
        )
        .await
        .map(|_| ()),
        // The legacy parameters cannot be combined with the guard's expressions.
        f.put(put().expected("id", ExpectedAttributeValue::builder().exists(false).build()))
            .await
            .map(|_| ()),
        f.update(
            update().attribute_updates(
                "v",
                AttributeValueUpdate::builder()
                    .action(AttributeAction::Put)
                    .value(common::n(1))
                    .build(),
            ),
        )
        .await
        .map(|_| ()),
        f.update(
            update()
                .update_expression("SET v = :v")
                .expression_attribute_values(":v", common::n(1))
                .conditional_operator(ConditionalOperator::And),
        )
        .await
        .map(|_| ()),
    ];
    for (i, r) in cases.into_iter().enumerate() {
        assert!(matches!(r, Err(Error::InvalidInput { .. })), "case {i}: {r:?}");
    }
    assert_eq!(counter.total(), 0, "refused before sending");
}

/// A mark that is not a token (an operator wrote a fraction) refuses with
/// `FenceMarkInvalid`, naming the table, not "you lost the lease".
#[tokio::test]
async fn a_mark_that_is_not_a_token_says_so() {
    let client = common::client(None);
    let table = common::unique_table("fenced-bad-mark");
    common::create_resource_table(&client, &table).await;
    client
        .put_item()
        .table_name(&table)
        .item("id", common::s("acct"))
        .item("mark", AttributeValue::N("7.5".into()))
        .send()
        .await
        .expect("an operator's mark");
    let req = client
        .update_item()
        .table_name(&table)
        .key("id", common::s("acct"))
        .update_expression("SET note = :v")
        .expression_attribute_values(":v", common::s("x"));
    match fence(3).update(req).await {
        Err(Error::FenceMarkInvalid { resource, reason }) => {
            assert!(resource.contains(&table), "{resource}");
            assert!(reason.contains("7.5"), "{reason}");
        }
        other => panic!("a fractional mark: {other:?}"),
    }
    assert!(
        !item(&client, &table, "acct").await.contains_key("note"),
        "the write applied"
    );
}
