//! S3 answers moto never gives (409 ConditionalRequestConflict, 503 SlowDown, 500), replayed
//! through a scripted HTTP client so the SDK parses them exactly as it parses S3's; and
//! real network faults on the way to moto (the reply lost after the write applied, a
//! server that never answers), through small TCP proxies.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use common::{Reply, ScriptedHttp, client_with, create_bucket, endpoint, unique_bucket};
use leasehold_core::{
    Error, FencingToken, HolderId, LeaseName, Ttl,
    store::{CasOutcome, CasStore, Current, DeleteOutcome, LeaseRecord, Precondition, Version},
};
use leasehold_s3::{S3Config, S3Store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn rec(holder: &str, token: u64) -> LeaseRecord {
    LeaseRecord::held(
        HolderId::new(holder).expect("holder"),
        FencingToken::new(token),
        Ttl::from_millis(5_000).expect("ttl"),
    )
}

fn name() -> LeaseName {
    LeaseName::new("jobs/fault").expect("name")
}

/// `store` creates the lease [`name`] for holder `a` with token 1.
async fn create(store: &S3Store) -> leasehold_core::Result<CasOutcome> {
    store.write(&name(), &Precondition::Absent, &rec("a", 1)).await
}

/// S3's answer to a conditional write that raced another one on the object: sent again.
const CONFLICT: Reply = Reply::Error(409, "ConditionalRequestConflict");
/// S3's answer to a write or delete whose condition failed.
const PRECONDITION_FAILED: Reply = Reply::Error(412, "PreconditionFailed");
/// S3's answer about an object that does not exist.
const NO_SUCH_KEY: Reply = Reply::Error(404, "NoSuchKey");
/// S3's answer when it failed itself (the request may have applied).
const INTERNAL_ERROR: Reply = Reply::Error(500, "InternalError");
/// S3's answer to credentials without the permission.
const ACCESS_DENIED: Reply = Reply::Error(403, "AccessDenied");

/// How many times the stores of these cases send a write again after a [`CONFLICT`],
/// unless a case says otherwise.
const RETRIES: u32 = 4;

/// A store whose HTTP is the script `replies` (the endpoint is never dialled), sending a
/// write again [`RETRIES`] times after a [`CONFLICT`].
fn scripted(replies: &[Reply]) -> (S3Store, ScriptedHttp) {
    scripted_retrying(replies, RETRIES)
}

/// [`scripted`], sending a write again `retries` times after a [`CONFLICT`].
fn scripted_retrying(replies: &[Reply], retries: u32) -> (S3Store, ScriptedHttp) {
    let http = ScriptedHttp::new(replies.to_vec());
    let client = client_with("http://127.0.0.1:9", None, Some(http.clone()));
    let config = S3Config::new("bucket-1", "leases")
        .expect("config")
        .with_conflict_retries(retries, Duration::from_millis(2));
    (S3Store::new(client, config), http)
}

#[tokio::test]
async fn conflict_409_is_resent_with_the_same_condition_then_applies() {
    let (store, http) = scripted(&[CONFLICT, CONFLICT, Reply::PutOk("\"etag-3\"")]);
    let v = Version::new("\"etag-1\"");
    match store
        .write(&name(), &Precondition::Version(v), &rec("a", 1))
        .await
        .expect("write")
    {
        CasOutcome::Written(s) => assert_eq!(s.version.as_str(), "\"etag-3\""),
        other => panic!("{other:?}"),
    }
    let seen = http.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    for s in &seen {
        assert_eq!((s.method.as_str(), s.if_match.as_deref()), ("PUT", Some("\"etag-1\"")));
        assert!(s.uri.contains("/bucket-1/leases/jobs/fault?"), "{}", s.uri);
    }
}

#[tokio::test]
async fn conflict_409_then_412_is_a_conflict() {
    let (store, http) = scripted(&[CONFLICT, PRECONDITION_FAILED]);
    let out = create(&store).await.expect("write");
    assert_eq!(out, CasOutcome::Conflict(Current::Unknown));
    assert!(
        http.seen().iter().all(|s| s.if_none_match.as_deref() == Some("*")),
        "{:?}",
        http.seen()
    );
}

#[tokio::test]
async fn persistent_409_gives_up_as_unavailable_after_the_bound() {
    let (store, http) = scripted_retrying(&[CONFLICT; 10], 2);
    match create(&store).await {
        Err(e @ Error::Unavailable { .. }) => assert!(e.to_string().contains("409"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(http.seen().len(), 3, "one send and two re-sends");
}

#[tokio::test]
async fn slow_down_503_is_unavailable_without_sdk_retries() {
    let (store, http) = scripted(&[Reply::Error(503, "SlowDown"); 4]);
    assert!(matches!(create(&store).await, Err(Error::Unavailable { .. })));
    // The SDK's standard retry mode would have retried a 503 on the write.
    assert_eq!(http.seen().len(), 1);
    // A read changes nothing: it is retried (three attempts in all) before giving up.
    assert!(matches!(store.read(&name()).await, Err(Error::Unavailable { .. })));
    assert_eq!(http.seen().len(), 4);
}

#[tokio::test]
async fn internal_error_is_indeterminate_for_writes_unavailable_for_reads() {
    let (store, http) = scripted(&[INTERNAL_ERROR; 4]);
    assert!(matches!(create(&store).await, Err(Error::Indeterminate { .. })));
    assert_eq!(http.seen().len(), 1, "a write is never re-sent after a 500");
    assert!(matches!(store.read(&name()).await, Err(Error::Unavailable { .. })));
    assert_eq!(http.seen().len(), 4, "a read is retried after a 500");
}

#[tokio::test]
async fn a_read_recovers_from_one_transient_500() {
    let (store, http) = scripted(&[INTERNAL_ERROR, NO_SUCH_KEY]);
    assert_eq!(store.read(&name()).await.expect("read"), None);
    assert_eq!(http.seen().len(), 2);
}

#[tokio::test]
async fn access_denied_is_misconfigured_and_a_missing_bucket_not_provisioned() {
    let (store, _) = scripted(&[
        ACCESS_DENIED,
        ACCESS_DENIED,
        Reply::Error(404, "NoSuchBucket"),
        Reply::Error(301, "PermanentRedirect"),
    ]);
    assert!(matches!(create(&store).await, Err(Error::Misconfigured { .. })));
    assert!(matches!(store.read(&name()).await, Err(Error::Misconfigured { .. })));
    assert!(matches!(store.read(&name()).await, Err(Error::NotProvisioned { .. })));
    assert!(matches!(store.read(&name()).await, Err(Error::Misconfigured { .. })));
}

#[tokio::test]
async fn conditional_delete_outcomes() {
    let (store, http) = scripted(&[PRECONDITION_FAILED, NO_SUCH_KEY, CONFLICT, Reply::NoContent]);
    let v = Version::new("\"e\"");
    assert_eq!(
        store.delete(&name(), &v).await.expect("delete"),
        DeleteOutcome::Conflict(Current::Unknown)
    );
    assert_eq!(
        store.delete(&name(), &v).await.expect("delete"),
        DeleteOutcome::Conflict(Current::Absent)
    );
    assert_eq!(store.delete(&name(), &v).await.expect("delete"), DeleteOutcome::Deleted);
    assert!(
        http.seen()
            .iter()
            .all(|s| s.method == "DELETE" && s.if_match.as_deref() == Some("\"e\""))
    );
    assert_eq!(http.remaining(), 0);
}

#[tokio::test]
async fn manifest_commit_resends_after_409() {
    let (store, http) = scripted(&[CONFLICT, Reply::PutOk("\"m1\"")]);
    let m = store.manifest("tables/t/_manifest").expect("manifest");
    match m
        .commit(FencingToken::new(3), None, b"v1".to_vec())
        .await
        .expect("commit")
    {
        leasehold_core::fence::FencedOutcome::Applied(c) => assert_eq!(c.version.as_str(), "\"m1\""),
        other => panic!("{other:?}"),
    }
    assert_eq!(http.seen().len(), 2);
}

/// Accepts connections, forwards each request to `upstream`, and closes the client's
/// connection as soon as the upstream answer starts, without passing it on: the write
/// reached the server, its answer was lost.
async fn reply_dropping_proxy(upstream: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(mut server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let (mut cr, mut cw) = client.split();
                let (mut sr, mut sw) = server.split();
                let forward = tokio::io::copy(&mut cr, &mut sw);
                let mut first = [0u8; 1];
                tokio::select! {
                    _ = forward => {}
                    _ = sr.read(&mut first) => {}
                }
                let _ = cw.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_reply_after_an_applied_write_is_indeterminate() {
    let direct = leasehold_s3::local_client(&endpoint());
    let bucket = unique_bucket("lost");
    create_bucket(&direct, &bucket).await;
    let config = S3Config::new(&bucket, "leases").expect("config");
    let truth = S3Store::new(direct, config.clone());

    let upstream = endpoint().trim_start_matches("http://").to_owned();
    let proxy = reply_dropping_proxy(upstream).await;
    let store = S3Store::new(leasehold_s3::local_client(&proxy), config);
    match store.write(&name(), &Precondition::Absent, &rec("lost-reply", 1)).await {
        Err(Error::Indeterminate { .. }) => {}
        other => panic!("a write whose answer was lost gave {other:?}"),
    }
    // It did apply: that is why it must not be reported as "did not happen".
    let now = truth.read(&name()).await.expect("read").expect("the write applied");
    assert_eq!(now.record, rec("lost-reply", 1));
    // A read whose answer is lost changed nothing: retry is safe.
    assert!(matches!(store.read(&name()).await, Err(Error::Unavailable { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_server_times_out_indeterminate_for_writes() {
    let endpoint = leasehold_testkit::endpoints::silent_server().await;
    let config = S3Config::new("bucket-1", "leases")
        .expect("config")
        .with_request_timeout(Duration::from_millis(300))
        .expect("timeout");
    let store = S3Store::new(leasehold_s3::local_client(&endpoint), config);
    let started = tokio::time::Instant::now();
    match create(&store).await {
        Err(Error::Indeterminate { .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert!(matches!(store.read(&name()).await, Err(Error::Unavailable { .. })));
    // An acquire sends its PUT, gets no answer, and its GET gets none either: "may have
    // applied", never "did not apply" (before: Unavailable).
    leasehold_testkit::endpoints::assert_acquire_is_in_doubt(store, Duration::from_secs(3)).await;
}

/// An endpoint that answers slowly, then not at all (the shared case,
/// `leasehold_testkit::endpoints::slow_then_silent`, against moto behind a proxy): each
/// request ends at the store's request timeout, a write as "may have applied", a read
/// as `Unavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_silent_endpoint_ends_each_request_at_the_request_timeout() {
    const BOUND: Duration = Duration::from_millis(300);
    let bucket = unique_bucket("slow");
    let admin = client_with(&endpoint(), None, None);
    create_bucket(&admin, &bucket).await;
    let direct = S3Store::new(admin, S3Config::new(&bucket, "leases").expect("config"));
    let proxy = leasehold_testkit::proxy::Proxy::start(endpoint().trim_start_matches("http://")).await;
    let config = S3Config::new(&bucket, "leases")
        .and_then(|c| c.with_request_timeout(BOUND))
        .expect("config");
    let store = S3Store::new(client_with(&proxy.endpoint(), None, None), config);
    leasehold_testkit::endpoints::slow_then_silent(store, direct, &proxy, BOUND).await;
}
