//! Fenced writes on the caller's own items, against moto: the guard composes with the
//! caller's condition, names, values and update expression; a stale token is
//! `FenceRejected`; the caller's own failed condition is told apart from it.
#![allow(missing_docs)]

mod common;

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use leasehold_core::{Error, FencingToken};
use leasehold_dynamodb::{FencedOutcome, ItemFence, NAME_PLACEHOLDER, TOKEN_PLACEHOLDER};

fn fence(token: u64) -> ItemFence {
    ItemFence::new("mark", FencingToken::new(token)).expect("fence")
}

async fn put(client: &Client, table: &str, token: u64, strict: bool, writer: &str) -> leasehold_core::Result<bool> {
    let f = if strict { fence(token).strict() } else { fence(token) };
    let req = client
        .put_item()
        .table_name(table)
        .item("id", common::s("doc"))
        .item("writer", common::s(writer));
    match f.put(req).await? {
        FencedOutcome::Applied(_) => Ok(true),
        FencedOutcome::ConditionFailed { item } => panic!("no condition of ours, yet ConditionFailed: {item:?}"),
    }
}

async fn item(client: &Client, table: &str, id: &str) -> HashMap<String, AttributeValue> {
    common::get_item(client, table, ("id", id)).await.expect("item exists")
}

#[tokio::test]
async fn put_guard_accepts_same_or_newer_tokens_and_refuses_older() {
    let counter = common::HttpCounter::default();
    let client = common::client(Some(&counter));
    let table = common::unique_table("fenced-put");
    common::create_resource_table(&client, &table).await;

    assert!(put(&client, &table, 1, false, "t1-a").await.expect("first write"));
    assert!(put(&client, &table, 1, false, "t1-b").await.expect("same tenure again"));
    assert!(put(&client, &table, 2, false, "t2").await.expect("newer token"));
    counter.reset();
    match put(&client, &table, 1, false, "stale").await {
        Err(Error::FenceRejected { token }) => assert_eq!(token, FencingToken::new(1)),
        other => panic!("a stale token was not refused: {other:?}"),
    }
    assert_eq!(counter.get(), 1, "a refused fenced write is one request");
    let doc = item(&client, &table, "doc").await;
    assert_eq!(doc["writer"], common::s("t2"));
    assert_eq!(doc["mark"], common::n(2));

    // Strict: once per grant.
    assert!(matches!(
        put(&client, &table, 2, true, "t2-again").await,
        Err(Error::FenceRejected { .. })
    ));
    assert!(put(&client, &table, 3, true, "t3").await.expect("strictly newer"));
    assert_eq!(item(&client, &table, "doc").await["mark"], common::n(3));
    common::delete_table(&client, &table).await;
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

    // Stale token: the fence refuses, balance unchanged.
    assert!(matches!(deposit(1, 100).await, Err(Error::FenceRejected { .. })));

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
        Ok(FencedOutcome::ConditionFailed { item: Some(old) }) => {
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
    let counter = common::HttpCounter::default();
    let client = common::client(Some(&counter));
    let f = fence(3);
    let cases = [
        f.put(
            client
                .put_item()
                .table_name("anything")
                .item("id", common::s("x"))
                .expression_attribute_names(NAME_PLACEHOLDER, "other"),
        )
        .await
        .map(|_| ()),
        f.put(
            client
                .put_item()
                .table_name("anything")
                .item("id", common::s("x"))
                .expression_attribute_values(TOKEN_PLACEHOLDER, common::n(1)),
        )
        .await
        .map(|_| ()),
        f.put(
            client
                .put_item()
                .table_name("anything")
                .item("id", common::s("x"))
                .item("mark", common::n(99)),
        )
        .await
        .map(|_| ()),
        f.update(
            client
                .update_item()
                .table_name("anything")
                .key("id", common::s("x"))
                .update_expression("SET #m = :v")
                .expression_attribute_names("#m", "mark")
                .expression_attribute_values(":v", common::n(1)),
        )
        .await
        .map(|_| ()),
    ];
    for (i, r) in cases.into_iter().enumerate() {
        assert!(matches!(r, Err(Error::InvalidInput { .. })), "case {i}: {r:?}");
    }
    assert_eq!(counter.get(), 0, "refused before sending");
}
