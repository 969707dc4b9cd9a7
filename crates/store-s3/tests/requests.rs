//! Requests per operation, counted twice: store calls (leasehold-core's `CountingStore`) and
//! real HTTP requests (an SDK interceptor on the client, so re-sends and SDK retries
//! would show). Against moto at `LEASEHOLD_MOTO_ENDPOINT`.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use aws_sdk_s3::Client;
use common::{SentRequests, client_with, create_bucket, endpoint, unique_bucket, wait_until};
use leasehold_core::fence::FencedOutcome;
use leasehold_core::testing::{CountingStore, FaultPlan, FaultStore};
use leasehold_core::{AcquireOutcome, FencingToken, LeaseClient};
use leasehold_s3::{S3Config, S3Store};
use tokio::time::Instant;

fn counts(c: &SentRequests) -> (u64, u64, u64) {
    (c.get("GET"), c.get("PUT"), c.total())
}

/// A fresh bucket (named after `tag`) and a client of it whose HTTP requests are counted.
async fn counted_bucket(tag: &str) -> (SentRequests, Client, String) {
    let http = SentRequests::default();
    let client = client_with(&endpoint(), Some(http.clone()), None);
    let bucket = unique_bucket(tag);
    create_bucket(&client, &bucket).await;
    (http, client, bucket)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_renew_release_takeover_request_counts() {
    let (http, client, bucket) = counted_bucket("req").await;
    let config = S3Config::new(&bucket, "leases").expect("config");
    let calls = CountingStore::new(S3Store::new(client, config.clone()));
    let leases = LeaseClient::new(calls.clone());
    let name = "jobs/counted";

    http.reset();
    let lease = leasehold_testkit::granted(&leases, name, Duration::from_millis(900), "acquire").await;
    eprintln!(
        "acquire of a free lease: store calls {:?}, HTTP {:?}",
        calls.counts(),
        http.snapshot()
    );
    assert_eq!(calls.counts().round_trips(), 1);
    assert_eq!(counts(&http), (0, 1, 1), "acquire of a free lease is one PUT");

    http.reset();
    calls.reset();
    let first = lease.valid_until();
    wait_until("a renewal", Duration::from_secs(5), || lease.valid_until() > first).await;
    eprintln!("renewal: store calls {:?}, HTTP {:?}", calls.counts(), http.snapshot());
    assert_eq!((calls.counts().renews, calls.counts().round_trips()), (1, 1));
    assert_eq!(counts(&http), (0, 1, 1), "a renewal is one PUT");

    http.reset();
    calls.reset();
    lease.release().await.expect("release");
    eprintln!("release: store calls {:?}, HTTP {:?}", calls.counts(), http.snapshot());
    assert_eq!(calls.counts().round_trips(), 1);
    assert_eq!(counts(&http), (0, 1, 1), "a release is one PUT");

    http.reset();
    let again = leasehold_testkit::granted(&leases, name, Duration::from_millis(900), "again").await;
    assert_eq!(again.token(), FencingToken::new(2));
    assert_eq!(counts(&http), (0, 1, 1), "acquire after a release is one PUT");
    again.release().await.expect("release");

    // A new client (a new process: every `leasehold run`) knows nothing of the record:
    // its first acquire of a released lease is written as for an absent one, refused
    // (a 412 carries no record), read, and written again on the ETag read.
    http.reset();
    calls.reset();
    let newcomer = LeaseClient::new(calls.clone());
    let third = leasehold_testkit::granted(&newcomer, name, Duration::from_millis(900), "a new client").await;
    assert_eq!(third.token(), FencingToken::new(3));
    let made = calls.counts();
    assert_eq!((made.writes, made.reads, made.round_trips()), (2, 1, 3), "{made:?}");
    assert_eq!(counts(&http), (1, 2, 3), "PUT (412), GET, PUT: {:?}", http.snapshot());
    third.release().await.expect("release");

    // Takeover from a holder (its own client and connection) that stopped renewing.
    let holder_store = FaultStore::new(S3Store::new(leasehold_s3::local_client(&endpoint()), config), 7);
    let holder = LeaseClient::new(holder_store.clone());
    let held = leasehold_testkit::granted(&holder, "jobs/taken-over", Duration::from_millis(600), "holder").await;
    holder_store.set_plan(FaultPlan::hang());
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut per_attempt = Vec::new();
    let taken = loop {
        http.reset();
        calls.reset();
        let outcome = leases
            .try_acquire("jobs/taken-over", Duration::from_secs(5))
            .await
            .expect("attempt");
        per_attempt.push((calls.counts().round_trips(), http.snapshot()));
        assert!(http.total() <= 2, "a takeover attempt sent {:?}", http.snapshot());
        assert_eq!(
            http.total(),
            calls.counts().round_trips(),
            "HTTP requests = store calls"
        );
        match outcome {
            AcquireOutcome::Granted(l) => break l,
            AcquireOutcome::Held { retry_after, .. } => {
                assert!(Instant::now() < deadline, "never took over");
                // Come back when the observation window has run out: the next attempt
                // decides on what this one saw, without reading again.
                tokio::time::sleep(retry_after + Duration::from_millis(20)).await;
            }
        }
    };
    eprintln!("takeover attempts (store calls, HTTP): {per_attempt:?}");
    assert_eq!(taken.token(), held.token().next());
    let total: u64 = per_attempt.iter().map(|(n, _)| n).sum();
    assert_eq!(
        (per_attempt.len(), total),
        (2, 3),
        "takeover: look (PUT 412 + GET), wait out the TTL, swap (PUT)"
    );
    taken.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifest_and_verify_request_counts() {
    let (http, client, bucket) = counted_bucket("reqm").await;
    let store = S3Store::new(client, S3Config::new(&bucket, "leases").expect("config"));

    http.reset();
    store.verify().await.expect("verify");
    eprintln!("verify: HTTP {:?}", http.snapshot());
    assert_eq!((http.get("PUT"), http.get("GET"), http.get("DELETE")), (3, 1, 2));

    let m = store.manifest("tables/t/_manifest").expect("manifest");
    http.reset();
    let FencedOutcome::Applied(first) = m
        .commit(FencingToken::new(1), None, b"v1".to_vec())
        .await
        .expect("first")
    else {
        panic!("first commit conflicted")
    };
    assert_eq!(counts(&http), (0, 1, 1), "a commit is one PUT");

    http.reset();
    let FencedOutcome::Applied(_) = m
        .commit(FencingToken::new(2), Some(&first), b"v2".to_vec())
        .await
        .expect("second")
    else {
        panic!("second commit conflicted")
    };
    assert_eq!(counts(&http), (0, 1, 1));

    // A stale writer on the old base: its PUT is refused (412), one GET tells why.
    http.reset();
    match m.commit(FencingToken::new(1), Some(&first), b"stale".to_vec()).await {
        Err(leasehold_core::Error::FenceRejected { .. }) => {}
        other => panic!("stale commit: {other:?}"),
    }
    eprintln!("refused stale commit: HTTP {:?}", http.snapshot());
    assert_eq!(counts(&http), (1, 1, 2));

    http.reset();
    let updated = m.update(FencingToken::new(2), |cur| {
        let mut d = cur.map(|c| c.data.clone()).unwrap_or_default();
        d.extend_from_slice(b"+");
        d
    });
    assert_eq!(updated.await.expect("update").data, b"v2+");
    assert_eq!(counts(&http), (1, 1, 2), "an uncontended update is GET + PUT");
}
