//! Bad input and a bad store fail loudly and never grant: a missing bucket, access
//! denied (a moto of its own with IAM enforced), objects under the prefix that are not
//! lease records, an unreachable endpoint.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::primitives::ByteStream;
use common::{create_bucket, endpoint, unique_bucket};
use leasehold_core::{
    AcquireOutcome, Error, FencingToken, HolderId, LeaseClient, LeaseName, Ttl,
    store::{CasStore, LeaseRecord, Precondition},
};
use leasehold_s3::{S3Config, S3Store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn rec() -> LeaseRecord {
    LeaseRecord::held(
        HolderId::new("w").expect("holder"),
        FencingToken::FIRST,
        Ttl::from_millis(5_000).expect("ttl"),
    )
}

async fn store_on_new_bucket(tag: &str) -> S3Store {
    let client = leasehold_s3::local_client(&endpoint());
    let bucket = unique_bucket(tag);
    create_bucket(&client, &bucket).await;
    S3Store::new(client, S3Config::new(bucket, "leases").expect("config"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_bucket_is_not_provisioned_and_never_granted() {
    let store = S3Store::new(
        leasehold_s3::local_client(&endpoint()),
        S3Config::new(unique_bucket("nobucket"), "leases").expect("config"),
    );
    let name = LeaseName::new("a").expect("name");
    assert!(matches!(store.read(&name).await, Err(Error::NotProvisioned { .. })));
    assert!(matches!(
        store.write(&name, &Precondition::Absent, &rec()).await,
        Err(Error::NotProvisioned { .. })
    ));
    let client = LeaseClient::new(store.clone());
    match client.try_acquire("a", Duration::from_secs(5)).await {
        Err(Error::NotProvisioned { .. }) => {}
        other => panic!("acquire on a missing bucket: {other:?}"),
    }
    match store.verify().await {
        Err(e @ Error::NotProvisioned { .. }) => assert!(e.to_string().contains("NoSuchBucket"), "{e}"),
        other => panic!("verify on a missing bucket: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_that_are_not_lease_records_are_corrupt_never_granted() {
    let store = store_on_new_bucket("corrupt").await;
    let client = LeaseClient::new(store.clone());
    let oversized = format!(
        "{{\"f\":1,\"holder\":null,\"token\":1,\"ttl_ms\":1000}}{}",
        " ".repeat(5000)
    );
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("binary", b"\x00\xff\x13garbage".to_vec()),
        ("other-json", b"{\"hello\":\"world\"}".to_vec()),
        (
            "unknown-field",
            b"{\"f\":1,\"holder\":null,\"token\":1,\"ttl_ms\":1000,\"x\":1}".to_vec(),
        ),
        (
            "token-zero",
            b"{\"f\":1,\"holder\":null,\"token\":0,\"ttl_ms\":1000}".to_vec(),
        ),
        (
            "future-format",
            b"{\"f\":2,\"holder\":null,\"token\":1,\"ttl_ms\":1000}".to_vec(),
        ),
        (
            "bad-holder",
            b"{\"f\":1,\"holder\":\"a b\",\"token\":1,\"ttl_ms\":1000}".to_vec(),
        ),
        ("oversized", oversized.into_bytes()),
    ];
    for (case, bytes) in cases {
        let name = LeaseName::new(format!("bad/{case}")).expect("name");
        let key = store.key_for(&name);
        let put = store
            .client()
            .put_object()
            .bucket(store.config().bucket())
            .key(&key)
            .body(ByteStream::from(bytes.clone()))
            .send()
            .await
            .expect("put foreign object");
        let etag = put.e_tag().expect("etag").to_owned();
        match store.read(&name).await {
            Err(Error::CorruptRecord { name: n, .. }) => assert_eq!(n, name.as_str()),
            other => panic!("{case}: read gave {other:?}"),
        }
        match client.try_acquire(name.as_str(), Duration::from_secs(5)).await {
            Err(Error::CorruptRecord { .. }) => {}
            Ok(AcquireOutcome::Granted(l)) => panic!("{case}: a corrupt record was granted: {l:?}"),
            other => panic!("{case}: acquire gave {other:?}"),
        }
        let after = store
            .client()
            .get_object()
            .bucket(store.config().bucket())
            .key(&key)
            .send()
            .await
            .expect("object still there");
        assert_eq!(
            after.e_tag(),
            Some(etag.as_str()),
            "{case}: the foreign object was overwritten"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_endpoint_is_unavailable() {
    // Port 55209 is in this crate's range and nothing listens there.
    let store = S3Store::new(
        leasehold_s3::local_client("http://127.0.0.1:55209"),
        S3Config::new("bucket-1", "leases").expect("config"),
    );
    let name = LeaseName::new("a").expect("name");
    match store.write(&name, &Precondition::Absent, &rec()).await {
        Err(e @ Error::Unavailable { .. }) => assert!(e.is_retryable()),
        other => panic!("write to a closed port: {other:?}"),
    }
    assert!(matches!(store.read(&name).await, Err(Error::Unavailable { .. })));
    let client = LeaseClient::new(store);
    match client
        .acquire_timeout("a", Duration::from_secs(5), Duration::from_millis(300))
        .await
    {
        Err(Error::Timeout { .. }) => {}
        other => panic!("acquire against a closed port: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_accepts_moto_and_leaves_nothing_behind() {
    let store = store_on_new_bucket("verify").await;
    store.verify().await.expect("verify");
    let listed = store
        .client()
        .list_objects_v2()
        .bucket(store.config().bucket())
        .send()
        .await
        .expect("list");
    assert_eq!(
        listed.key_count(),
        Some(0),
        "probe left behind: {:?}",
        listed.contents()
    );
}

/// An unsigned IAM query call (allowed while moto's no-auth allowance lasts), routed to
/// IAM by the credential scope of a dummy Authorization header.
async fn iam(port: u16, form: &str) -> String {
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let req = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=setup/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=00\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    );
    conn.write_all(req.as_bytes()).await.expect("send");
    let mut answer = String::new();
    conn.read_to_string(&mut answer).await.expect("answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "IAM call {form}: {answer}");
    answer
}

fn xml_field(xml: &str, tag: &str) -> String {
    let open = format!("<{tag}>");
    let start = xml.find(&open).unwrap_or_else(|| panic!("no {tag} in {xml}")) + open.len();
    let end = xml[start..].find('<').expect("close tag") + start;
    xml[start..end].to_owned()
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_denied_is_misconfigured_and_never_granted() {
    const PORT: u16 = 55201;
    // A moto of its own with IAM enforced after the first four requests.
    let moto = common::own_moto(PORT, &[("INITIAL_NO_AUTH_ACTION_COUNT", "4")]);
    // Four unauthenticated setup calls: a user, its key, a read-only policy, the bucket.
    iam(PORT, "Action=CreateUser&UserName=reader&Version=2010-05-08").await;
    let key = iam(PORT, "Action=CreateAccessKey&UserName=reader&Version=2010-05-08").await;
    let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetObject","s3:ListBucket"],"Resource":"*"}]}"#;
    iam(
        PORT,
        &format!(
            "Action=PutUserPolicy&UserName=reader&PolicyName=read-only&Version=2010-05-08&PolicyDocument={}",
            url_encode(policy)
        ),
    )
    .await;
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            xml_field(&key, "AccessKeyId"),
            xml_field(&key, "SecretAccessKey"),
            None,
            None,
            "moto-iam",
        ))
        .endpoint_url(&moto.endpoint)
        .force_path_style(true)
        .build();
    let client = aws_sdk_s3::Client::from_conf(config);
    create_bucket(&client, "auth-bucket").await;

    let store = S3Store::new(client, S3Config::new("auth-bucket", "leases").expect("config"));
    let name = LeaseName::new("a").expect("name");
    // Reading is allowed (and a missing key is 404 thanks to s3:ListBucket) ...
    assert_eq!(store.read(&name).await.expect("read allowed"), None);
    // ... writing is not.
    match store.write(&name, &Precondition::Absent, &rec()).await {
        Err(e @ Error::Misconfigured { .. }) => assert!(e.to_string().contains("AccessDenied"), "{e}"),
        other => panic!("write without s3:PutObject: {other:?}"),
    }
    match LeaseClient::new(store.clone())
        .try_acquire("a", Duration::from_secs(5))
        .await
    {
        Err(Error::Misconfigured { .. }) => {}
        other => panic!("acquire without s3:PutObject: {other:?}"),
    }
    assert!(matches!(store.verify().await, Err(Error::Misconfigured { .. })));

    // Unknown credentials: refused before anything else, also misconfiguration.
    let stranger = S3Store::new(
        leasehold_s3::local_client(&moto.endpoint),
        S3Config::new("auth-bucket", "leases").expect("config"),
    );
    match stranger.read(&name).await {
        Err(e @ Error::Misconfigured { .. }) => assert!(e.to_string().contains("InvalidAccessKeyId"), "{e}"),
        other => panic!("read with unknown credentials: {other:?}"),
    }
    drop(moto);
}

/// `list` maps keys under `<prefix>/` back to names: a manifest kept under the lease
/// prefix is listed (a `read` of its name reports it corrupt, as every object there is
/// read as a record), objects no lease name maps to (a leftover `verify` probe, a
/// folder marker, keys with `//` or a `.` segment, the prefix itself) and a sibling
/// prefix's objects are not. A handful of names is one ListObjectsV2; more than a page
/// (1000 keys) is followed through its continuation token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_names_only_objects_a_lease_name_maps_to() {
    let http = common::SentRequests::default();
    let client = common::client_with(&endpoint(), Some(http.clone()), None);
    let bucket = unique_bucket("list");
    create_bucket(&client, &bucket).await;
    let store = S3Store::new(client.clone(), S3Config::new(&bucket, "leases").expect("config"));
    for n in ["jobs/a", "jobs/b"] {
        let name = LeaseName::new(n).expect("name");
        store.write(&name, &Precondition::Absent, &rec()).await.expect("write");
    }
    store
        .manifest("leases/jobs/_manifest")
        .expect("manifest")
        .fence(FencingToken::FIRST)
        .await
        .expect("fence the manifest");
    let put = {
        let client = client.clone();
        let bucket = bucket.clone();
        move |key: String| {
            let client = client.clone();
            let bucket = bucket.clone();
            async move {
                client
                    .put_object()
                    .bucket(&bucket)
                    .key(&key)
                    .body(ByteStream::from_static(b"foreign"))
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("put {key}: {e}"));
            }
        }
    };
    for key in [
        "leases/~probe-0123456789abcdef",
        "leases/jobs/",
        "leases/jobs//x",
        "leases/jobs/./x",
        "leases/",
        "leases",
        "leasesx/jobs/c",
    ] {
        put(key.to_owned()).await;
    }
    let prefix = |s: &str| leasehold_core::NamePrefix::new(s).expect("prefix");
    let names = |v: Vec<LeaseName>| v.into_iter().map(|n| n.as_str().to_owned()).collect::<Vec<_>>();
    let expected = ["jobs/_manifest", "jobs/a", "jobs/b"];

    http.reset();
    assert_eq!(names(store.list(&prefix("jobs/")).await.expect("list")), expected);
    assert_eq!((http.get("GET"), http.total()), (1, 1), "one ListObjectsV2");
    assert_eq!(names(store.list(&prefix("")).await.expect("list")), expected);
    let manifest = LeaseName::new("jobs/_manifest").expect("name");
    assert!(matches!(store.read(&manifest).await, Err(Error::CorruptRecord { .. })));

    let mut puts = tokio::task::JoinSet::new();
    for chunk in 0..10 {
        let put = put.clone();
        puts.spawn(async move {
            for i in 0..100 {
                put(format!("leases/many/{chunk}{i:02}")).await;
            }
        });
    }
    while let Some(done) = puts.join_next().await {
        done.expect("puts");
    }
    http.reset();
    let all = names(store.list(&prefix("")).await.expect("list"));
    assert_eq!(http.total(), 2, "1008 keys under leases/, in pages of 1000");
    assert_eq!(all.len(), 1003);
    assert_eq!(&all[..3], expected);
    assert_eq!(all[3], "many/000");
    assert_eq!(all[1002], "many/999");
}
