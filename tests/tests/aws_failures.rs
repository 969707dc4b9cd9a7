//! The DynamoDB and S3 stores read the same SDK failures the same way (one mapping,
//! `leasehold-aws`): each scripted failure of a scripted HTTP endpoint is given to both
//! stores, for a read and for a write, and both must return the same error kind, the
//! one the shared table promises. A write whose answer was lost is `Indeterminate`
//! ("may have applied"), never `Unavailable` ("did not apply").
#![allow(missing_docs)]

#[path = "../../crates/store-dynamo/tests/fake_http/mod.rs"]
mod fake_http;

use std::sync::Arc;
use std::time::Duration;

use fake_http::{FakeHttp, Script};
use leasehold_core::store::{CasStore, LeaseRecord, Precondition};
use leasehold_core::{Error, FencingToken, HolderId, LeaseName, Ttl};

const CALL_TIMEOUT: Duration = Duration::from_millis(800);

fn stores(endpoint: &str) -> Vec<(&'static str, Arc<dyn CasStore>)> {
    let dynamo = leasehold_dynamodb::DynamoStore::new(
        leasehold_tests::stores::dynamo_client(endpoint, CALL_TIMEOUT),
        leasehold_dynamodb::DynamoConfig::new("leases").expect("dynamo config"),
    );
    let s3_config = leasehold_s3::S3Config::new("leases", "leases")
        .and_then(|c| c.with_request_timeout(CALL_TIMEOUT))
        .expect("s3 config");
    let s3 = leasehold_s3::S3Store::new(leasehold_s3::local_client(endpoint), s3_config);
    vec![("dynamodb", Arc::new(dynamo)), ("s3", Arc::new(s3))]
}

fn kind(r: Result<String, Error>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(Error::Unavailable { .. }) => "unavailable",
        Err(Error::Indeterminate { .. }) => "indeterminate",
        Err(Error::Misconfigured { .. }) => "misconfigured",
        Err(_) => "other",
    }
}

/// The kind of error each store returns for a read and for a write against `endpoint`.
async fn kinds(endpoint: &str) -> Vec<(&'static str, &'static str, &'static str)> {
    let name = LeaseName::new("aws-failures").expect("name");
    let record = LeaseRecord::held(
        HolderId::new("holder").expect("holder"),
        FencingToken::new(1),
        Ttl::new(Duration::from_secs(10)).expect("ttl"),
    );
    let mut out = Vec::new();
    for (store_name, store) in stores(endpoint) {
        let read = store.read(&name).await.map(|r| format!("{r:?}"));
        let write = store
            .write(&name, &Precondition::Absent, &record)
            .await
            .map(|r| format!("{r:?}"));
        out.push((store_name, kind(read), kind(write)));
    }
    out
}

async fn check(what: &str, endpoint: &str, read: &str, write: &str) {
    let got = kinds(endpoint).await;
    for (store, r, w) in &got {
        assert_eq!(
            (*r, *w),
            (read, write),
            "{what}: {store} read/write kinds (all: {got:?})"
        );
    }
}

#[tokio::test]
async fn both_aws_stores_classify_every_failure_alike() {
    // Nothing listens: the request never leaves.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", l.local_addr().expect("addr"))
    };
    check("connection refused", &closed, "unavailable", "unavailable").await;

    let fake = FakeHttp::start(Script::Hang).await;
    check(
        "accepts and never answers",
        &fake.endpoint,
        "unavailable",
        "indeterminate",
    )
    .await;
    fake.set(Script::Drop);
    check(
        "reads the request and hangs up",
        &fake.endpoint,
        "unavailable",
        "indeterminate",
    )
    .await;
    fake.set(Script::Status(500));
    check("500 without a code", &fake.endpoint, "unavailable", "indeterminate").await;
    fake.set(Script::Status(503));
    check("503 without a code", &fake.endpoint, "unavailable", "indeterminate").await;
    fake.set(Script::Status(429));
    check("429 without a code", &fake.endpoint, "unavailable", "unavailable").await;
    fake.set(Script::Status(403));
    check("403 without a code", &fake.endpoint, "misconfigured", "misconfigured").await;
    assert!(
        fake.requests() >= 12,
        "every store call reached the endpoint: {}",
        fake.requests()
    );
}
