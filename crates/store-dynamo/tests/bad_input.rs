//! Bad input and a bad store fail loudly with a typed error, and never grant
//! (rule 7 of docs/DESIGN.md): missing table, wrong key schema, corrupt items, an unreachable
//! endpoint, a request that hangs or is cut after sending, and DynamoDB's error codes.
#![allow(missing_docs)]

mod common;
mod fake_http;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use fake_http::{FakeHttp, Script};
use leasehold_core::{
    AcquireOutcome, ClientConfig, Error, FencingToken, HolderId, LeaseClient, LeaseName, Ttl,
    store::{CasOutcome, CasStore, LeaseRecord, Precondition, Version},
};
use leasehold_dynamodb::{
    ATTR_FENCE, ATTR_FORMAT, ATTR_HOLDER, ATTR_TTL_MS, ATTR_VERSION, DEFAULT_KEY_ATTRIBUTE, DynamoConfig, DynamoStore,
    ItemFence,
};

fn name(s: &str) -> LeaseName {
    LeaseName::new(s).expect("name")
}

fn rec() -> LeaseRecord {
    LeaseRecord::held(
        HolderId::new("w1").expect("holder"),
        FencingToken::new(1),
        Ttl::from_millis(1000).expect("ttl"),
    )
}

fn kind(r: &Result<impl std::fmt::Debug, Error>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(Error::Unavailable { .. }) => "unavailable",
        Err(Error::Indeterminate { .. }) => "indeterminate",
        Err(Error::Misconfigured { .. }) => "misconfigured",
        Err(Error::NotProvisioned { .. }) => "not provisioned",
        Err(Error::CorruptRecord { .. }) => "corrupt",
        Err(Error::InvalidInput { .. }) => "invalid",
        Err(Error::FenceRejected { .. }) => "fence-rejected",
        Err(_) => "other",
    }
}

#[tokio::test]
async fn invalid_table_name_is_refused_before_sending() {
    // Refused when the config is built, before any store or client exists.
    for bad in ["ab", "has space", "semi;colon", ""] {
        assert!(
            matches!(DynamoConfig::new(bad), Err(Error::InvalidInput { .. })),
            "{bad:?}"
        );
    }
    assert!(matches!(
        DynamoConfig::new("leases")
            .expect("config")
            .with_key_attribute(ATTR_FENCE),
        Err(Error::InvalidInput { .. })
    ));
}

#[tokio::test]
async fn claimable_is_invalid_input_and_nothing_is_sent() {
    let counter = leasehold_aws::SentRequests::default();
    let store = DynamoStore::new(
        common::client(Some(&counter)),
        DynamoConfig::new("leases").expect("store"),
    );
    let r = store.write(&name("claimable"), &Precondition::Claimable, &rec()).await;
    assert!(
        matches!(r, Err(Error::InvalidInput { .. })),
        "Claimable needs a store clock: {r:?}"
    );
    assert_eq!(counter.total(), 0);
}

#[tokio::test]
async fn missing_table_is_not_provisioned() {
    let table = common::unique_table("never-created");
    let store = DynamoStore::new(common::client(None), DynamoConfig::new(&table).expect("store"));
    let n = name("missing-table");
    assert_eq!(kind(&store.read(&n).await), "not provisioned");
    assert_eq!(
        kind(&store.write(&n, &Precondition::Absent, &rec()).await),
        "not provisioned"
    );
    assert_eq!(kind(&store.delete(&n, &Version::new("x")).await), "not provisioned");
    assert_eq!(kind(&store.verify().await), "not provisioned");
    let client = LeaseClient::new(store);
    let r = client.try_acquire("missing-table", Duration::from_secs(1)).await;
    assert!(
        matches!(r, Err(Error::NotProvisioned { .. })),
        "acquire on a missing table: {r:?}"
    );
}

#[tokio::test]
async fn wrong_key_schema_is_misconfigured() {
    let client = common::client(None);
    let table = common::unique_table("wrong-key");
    common::create_resource_table(&client, &table).await; // keyed by "id", not "lease"
    let store = DynamoStore::new(client.clone(), DynamoConfig::new(&table).expect("store"));
    assert_eq!(kind(&store.verify().await), "misconfigured");
    assert_eq!(
        kind(&DynamoStore::provision(store.client(), store.config()).await),
        "misconfigured"
    );
    assert_eq!(
        kind(&store.write(&name("k"), &Precondition::Absent, &rec()).await),
        "misconfigured"
    );
    // The same table is fine with the right key attribute.
    let right = DynamoStore::new(
        client.clone(),
        DynamoConfig::new(&table)
            .expect("config")
            .with_key_attribute("id")
            .expect("key"),
    );
    right.verify().await.expect("verify with key id");
    assert!(matches!(
        right.write(&name("k"), &Precondition::Absent, &rec()).await,
        Ok(CasOutcome::Written(_))
    ));
    common::delete_table(&client, &table).await;
}

#[tokio::test]
async fn create_table_is_idempotent() {
    let client = common::client(None);
    let table = common::unique_table("idempotent");
    let store = DynamoStore::new(client.clone(), DynamoConfig::new(&table).expect("store"));
    DynamoStore::provision(store.client(), store.config())
        .await
        .expect("create");
    DynamoStore::provision(store.client(), store.config())
        .await
        .expect("create again");
    store.verify().await.expect("verify");
    let desc = client
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .expect("describe");
    let billing = desc
        .table()
        .and_then(|t| t.billing_mode_summary())
        .and_then(|b| b.billing_mode())
        .cloned();
    assert_eq!(billing, Some(aws_sdk_dynamodb::types::BillingMode::PayPerRequest));
    common::delete_table(&client, &table).await;
}

/// Turns a good lease item into a corrupt one.
type Mutation = Box<dyn Fn(&mut HashMap<String, AttributeValue>)>;

#[tokio::test]
async fn corrupt_items_are_corrupt_records_never_grants() {
    let client = common::client(None);
    let table = common::unique_table("corrupt");
    let store = common::lease_store(client.clone(), &table).await;
    let good = |key: &str| -> HashMap<String, AttributeValue> {
        HashMap::from([
            (DEFAULT_KEY_ATTRIBUTE.to_owned(), common::s(key)),
            (ATTR_FORMAT.to_owned(), common::n(1)),
            (ATTR_VERSION.to_owned(), common::s("v1")),
            (ATTR_FENCE.to_owned(), common::n(3)),
            (ATTR_TTL_MS.to_owned(), common::n(1000)),
            (ATTR_HOLDER.to_owned(), common::s("someone")),
        ])
    };
    let variants: Vec<(&str, Mutation)> = vec![
        (
            "fence-string",
            Box::new(|i| {
                i.insert(ATTR_FENCE.into(), common::s("abc"));
            }),
        ),
        (
            "fence-zero",
            Box::new(|i| {
                i.insert(ATTR_FENCE.into(), common::n(0));
            }),
        ),
        (
            "no-version",
            Box::new(|i| {
                i.remove(ATTR_VERSION);
            }),
        ),
        (
            "no-format",
            Box::new(|i| {
                i.remove(ATTR_FORMAT);
            }),
        ),
        (
            "future-format",
            Box::new(|i| {
                i.insert(ATTR_FORMAT.into(), common::n(9));
            }),
        ),
        (
            "holder-number",
            Box::new(|i| {
                i.insert(ATTR_HOLDER.into(), common::n(5));
            }),
        ),
        (
            "ttl-zero",
            Box::new(|i| {
                i.insert(ATTR_TTL_MS.into(), common::n(0));
            }),
        ),
        (
            "foreign-item",
            Box::new(|i| {
                i.retain(|k, _| k == DEFAULT_KEY_ATTRIBUTE);
                i.insert("payload".into(), common::s("not a lease"));
            }),
        ),
    ];
    for (label, mutate) in variants {
        let key = format!("corrupt/{label}");
        let mut item = good(&key);
        mutate(&mut item);
        client
            .put_item()
            .table_name(&table)
            .set_item(Some(item.clone()))
            .send()
            .await
            .expect("put raw");
        let n = name(&key);
        assert_eq!(kind(&store.read(&n).await), "corrupt", "{label}: read");
        assert_eq!(
            kind(&store.write(&n, &Precondition::Absent, &rec()).await),
            "corrupt",
            "{label}: create over it (conflict item does not decode)"
        );
        assert_eq!(
            kind(
                &store
                    .write(&n, &Precondition::Version(Version::new("v0")), &rec())
                    .await
            ),
            "corrupt",
            "{label}: stale-version write"
        );
        let c = LeaseClient::new(store.clone());
        match c.try_acquire(&key, Duration::from_secs(1)).await {
            Err(Error::CorruptRecord { .. }) => {}
            Ok(AcquireOutcome::Granted(l)) => panic!("{label}: a corrupt item was granted: {l:?}"),
            other => panic!("{label}: acquire gave {other:?}"),
        }
        let after = common::get_item(&client, &table, (DEFAULT_KEY_ATTRIBUTE, &key)).await;
        assert_eq!(after.as_ref(), Some(&item), "{label}: the corrupt item was changed");
    }
    common::delete_table(&client, &table).await;
}

/// A port nothing listens on.
async fn closed_port_endpoint() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    drop(l);
    format!("http://{addr}")
}

#[tokio::test]
async fn unreachable_endpoint_is_unavailable_and_fast() {
    let endpoint = closed_port_endpoint().await;
    let store = DynamoStore::new(
        common::client_for(&endpoint, None),
        DynamoConfig::new("leases").expect("store"),
    );
    let n = name("unreachable");
    let started = Instant::now();
    assert_eq!(kind(&store.read(&n).await), "unavailable");
    assert_eq!(
        kind(&store.write(&n, &Precondition::Absent, &rec()).await),
        "unavailable",
        "a write that could not connect was never sent"
    );
    assert_eq!(kind(&store.delete(&n, &Version::new("v")).await), "unavailable");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "refused connections took {:?}",
        started.elapsed()
    );
    let c = LeaseClient::new(store);
    let r = c.try_acquire("unreachable", Duration::from_secs(1)).await;
    assert!(matches!(r, Err(Error::Unavailable { .. })), "{r:?}");
}

/// A fake DynamoDB endpoint running `script`, an SDK client on it and a store on that
/// client.
async fn on_fake(script: Script) -> (FakeHttp, Client, DynamoStore) {
    let fake = FakeHttp::start(script).await;
    let client = common::client_for(&fake.endpoint, None);
    let store = DynamoStore::new(client.clone(), DynamoConfig::new("leases").expect("store"));
    (fake, client, store)
}

#[tokio::test]
async fn timeout_after_send_is_indeterminate_for_writes() {
    let (fake, _, store) = on_fake(Script::Hang).await;
    let n = name("hang");
    let started = Instant::now();
    assert_eq!(
        kind(&store.write(&n, &Precondition::Absent, &rec()).await),
        "indeterminate"
    );
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "the attempt timeout did not fire: {took:?}"
    );
    assert_eq!(fake.requests(), 1, "the SDK retried a write that may have applied");
    fake.reset();
    assert_eq!(kind(&store.read(&n).await), "unavailable", "a read changes nothing");
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn connection_cut_after_send_is_indeterminate_for_writes() {
    let (fake, client, store) = on_fake(Script::Drop).await;
    let n = name("dropped");
    assert_eq!(
        kind(&store.write(&n, &Precondition::Absent, &rec()).await),
        "indeterminate"
    );
    assert_eq!(kind(&store.delete(&n, &Version::new("v")).await), "indeterminate");
    assert_eq!(kind(&store.read(&n).await), "unavailable");
    let fence = ItemFence::new("mark", FencingToken::new(1)).expect("fence");
    let put = client.put_item().table_name("resource").item("id", common::s("x"));
    assert_eq!(kind(&fence.put(put).await), "indeterminate");
    assert_eq!(fake.requests(), 4, "one request per operation, no SDK retry");
}

#[tokio::test]
async fn dynamodb_error_codes_map_to_kinds() {
    let (fake, client, store) = on_fake(Script::Hang).await;
    let n = name("codes");
    // (status, code, write kind, read kind)
    let cases = [
        (
            400,
            "ProvisionedThroughputExceededException",
            "unavailable",
            "unavailable",
        ),
        (400, "ThrottlingException", "unavailable", "unavailable"),
        (400, "RequestLimitExceeded", "unavailable", "unavailable"),
        (400, "TransactionConflictException", "unavailable", "unavailable"),
        // A 503 on a write may come after the request was forwarded: may have applied.
        (503, "ServiceUnavailable", "indeterminate", "unavailable"),
        (500, "InternalServerError", "indeterminate", "unavailable"),
        // The lease table missing is what `provision` creates; the caller's own table
        // missing (a fenced write, below) is not.
        (400, "ResourceNotFoundException", "not provisioned", "not provisioned"),
        (400, "AccessDeniedException", "misconfigured", "misconfigured"),
        (400, "UnrecognizedClientException", "misconfigured", "misconfigured"),
        (400, "ValidationException", "misconfigured", "misconfigured"),
    ];
    for (status, code, write_kind, read_kind) in cases {
        fake.set(Script::Error {
            status,
            code: code.to_owned(),
        });
        fake.reset();
        assert_eq!(
            kind(&store.write(&n, &Precondition::Absent, &rec()).await),
            write_kind,
            "{status} {code} on a lease write"
        );
        assert_eq!(kind(&store.read(&n).await), read_kind, "{status} {code} on a read");
        let fence = ItemFence::new("mark", FencingToken::new(1)).expect("fence");
        let put = client.put_item().table_name("resource").item("id", common::s("x"));
        let fenced_kind = match write_kind {
            "not provisioned" => "misconfigured",
            other => other,
        };
        assert_eq!(
            kind(&fence.put(put).await),
            fenced_kind,
            "{status} {code} on a fenced write"
        );
        assert_eq!(
            fake.requests(),
            3,
            "{code}: each operation must be exactly one request (the SDK's retries are off)"
        );
    }
    // A lease client on a throttled store reports unavailability, and grants nothing.
    fake.set(Script::Error {
        status: 400,
        code: "ProvisionedThroughputExceededException".into(),
    });
    let c = LeaseClient::with_config(store, ClientConfig::default()).expect("client");
    let r = c.try_acquire("codes", Duration::from_secs(1)).await;
    assert!(matches!(r, Err(Error::Unavailable { .. })), "{r:?}");
}
