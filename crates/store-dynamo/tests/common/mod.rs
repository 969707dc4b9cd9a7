//! Shared test setup: an SDK client for the moto server the project's script started,
//! unique tables, a counter of the HTTP requests the SDK actually sends, the fenced item
//! the fence tests protect ([`item::FencedItem`]) and the store as the shared suites
//! drive it ([`fixture`]).
#![allow(dead_code, unreachable_pub, missing_docs)]

pub mod fixture;
pub mod item;
pub mod serial;

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::create_table::{CreateTableError, CreateTableOutput};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
};
use leasehold_aws::SentRequests;
use leasehold_core::Lease;
use leasehold_dynamodb::{DynamoConfig, DynamoStore};
use tokio::time::Instant;

/// The moto endpoint (`scripts/stores.sh start moto`; `eval "$(scripts/stores.sh env)"`).
pub fn endpoint() -> String {
    leasehold_testkit::moto_endpoint()
}

/// Timeouts for tests: an unreachable endpoint fails in about a second, a hung
/// request in two.
pub fn timeouts() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(1))
        .operation_attempt_timeout(Duration::from_secs(2))
        .operation_timeout(Duration::from_secs(3))
        .build()
}

/// A client for `endpoint` with static dummy credentials, a fixed region and explicit
/// timeouts: nothing is read from the environment or instance metadata.
pub fn client_for(endpoint: &str, counter: Option<&SentRequests>) -> Client {
    let mut b = leasehold_dynamodb::local_client(endpoint)
        .config()
        .to_builder()
        .timeout_config(timeouts());
    if let Some(c) = counter {
        b = b.interceptor(c.clone());
    }
    Client::from_conf(b.build())
}

/// A client for the moto server, through this process's forwarder that hands moto one
/// request at a time (see `serial.rs` for why).
pub fn client(counter: Option<&SentRequests>) -> Client {
    client_for(&serial::serialized(&endpoint()), counter)
}

/// A table name no other run uses.
pub fn unique_table(purpose: &str) -> String {
    format!("leasehold-dynamo-{purpose}-{}", leasehold_testkit::unique_suffix())
}

/// A lease store on `table`, creating the table (idempotently) first.
pub async fn lease_store(client: Client, table: &str) -> DynamoStore {
    provisioned(client, DynamoConfig::new(table).expect("table name")).await
}

/// A lease store with `config` on `client`, creating its table (idempotently) first.
pub async fn provisioned(client: Client, config: DynamoConfig) -> DynamoStore {
    DynamoStore::provision(&client, &config)
        .await
        .unwrap_or_else(|e| panic!("create lease table {} on {}: {e}", config.table(), endpoint()));
    DynamoStore::new(client, config)
}

/// A fresh lease table: the admin client that created it (and deletes it) and its name.
pub async fn fresh_lease_table(purpose: &str) -> (Client, String) {
    let table = unique_table(purpose);
    let admin = client(None);
    lease_store(admin.clone(), &table).await;
    (admin, table)
}

/// A store on the existing lease table `table`, with a client of its own.
pub fn store_on(table: &str) -> DynamoStore {
    DynamoStore::new(client(None), DynamoConfig::new(table).expect("store"))
}

/// A lease name no other run uses: `<group>/<case>/<pid>-<nanos>`.
pub fn unique_name(group: &str, case: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{group}/{case}/{}-{nanos:x}", std::process::id())
}

/// After a takeover: releases the new holder's `lease`, drops the old holder's `old` (its
/// store may hang) and deletes the lease table.
pub async fn clean_up_takeover(lease: Lease, old: Lease, admin: &Client, table: &str) {
    lease.release().await.expect("release");
    drop(old);
    delete_table(admin, table).await;
}

/// Creates a plain table with a string partition key `id` (a protected resource).
pub async fn create_resource_table(client: &Client, table: &str) {
    try_create_resource_table(client, table)
        .await
        .unwrap_or_else(|e| panic!("create table {table}: {e:?}"));
}

/// Makes sure the resource table `table` (as [`create_resource_table`] makes it) exists
/// and is `ACTIVE`: creates it if it is missing (another process may have created it,
/// or be creating it), then polls until it is `ACTIVE`.
pub async fn ensure_resource_table(client: &Client, table: &str) {
    match try_create_resource_table(client, table).await {
        Ok(_) => {}
        Err(e)
            if e.as_service_error()
                .is_some_and(CreateTableError::is_resource_in_use_exception) => {}
        Err(e) => panic!("create table {table}: {e:?}"),
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .unwrap_or_else(|e| panic!("describe table {table}: {e:?}"))
            .table
            .and_then(|t| t.table_status);
        if status == Some(TableStatus::Active) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "table {table} not ACTIVE within 30 s (status {status:?})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn try_create_resource_table(
    client: &Client,
    table: &str,
) -> Result<CreateTableOutput, SdkError<CreateTableError, aws_sdk_dynamodb::config::http::HttpResponse>> {
    client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("id")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute definition"),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("id")
                .key_type(KeyType::Hash)
                .build()
                .expect("key schema"),
        )
        .send()
        .await
}

/// Deletes a table this test created.
pub async fn delete_table(client: &Client, table: &str) {
    client
        .delete_table()
        .table_name(table)
        .send()
        .await
        .unwrap_or_else(|e| panic!("delete table {table}: {e:?}"));
}

/// Reads an item with a strongly consistent read.
pub async fn get_item(client: &Client, table: &str, key: (&str, &str)) -> Option<HashMap<String, AttributeValue>> {
    client
        .get_item()
        .table_name(table)
        .key(key.0, AttributeValue::S(key.1.to_owned()))
        .consistent_read(true)
        .send()
        .await
        .unwrap_or_else(|e| panic!("get item from {table}: {e:?}"))
        .item
}

pub fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

pub fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}
