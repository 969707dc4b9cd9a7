//! Fenced manifest commits against moto: the token check and the ETag check together
//! refuse every stale writer, and writers of one tenure never lose an update.
//!
//! Runs on this binary's own serialized moto (port 55203; see `common::serialized_moto`):
//! on the shared threaded moto two racing `If-Match` PUTs on one ETag can both win, which
//! S3 never allows, and the many-writers test would measure moto's race, not the store.
#![allow(missing_docs)]

mod common;

use aws_sdk_s3::primitives::ByteStream;
use common::{create_bucket, unique_bucket};
use leasehold_core::{Error, FencingToken};
use leasehold_s3::{Commit, FencedManifest, S3Config, S3Store};

async fn manifest(tag: &str) -> (S3Store, FencedManifest) {
    let client = leasehold_s3::local_client(&common::serialized_moto(55203));
    let bucket = unique_bucket(tag);
    create_bucket(&client, &bucket).await;
    let store = S3Store::new(client, S3Config::new(bucket, "leases").expect("config"));
    let m = store.manifest("tables/orders/_manifest").expect("manifest");
    (store, m)
}

fn t(n: u64) -> FencingToken {
    FencingToken::new(n)
}

fn committed(c: Commit) -> leasehold_s3::Manifest {
    match c {
        Commit::Committed(m) => m,
        Commit::Conflict(cur) => panic!("expected a commit, got a conflict with {cur:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_chain_and_stale_writers_are_refused() {
    let (_, m) = manifest("mf").await;
    assert_eq!(m.read().await.expect("read"), None);
    let v1 = committed(m.commit(t(1), None, b"data/v1".to_vec()).await.expect("v1"));
    // A second "first" commit loses to the existing manifest.
    match m.commit(t(1), None, b"data/other".to_vec()).await.expect("again") {
        Commit::Conflict(Some(cur)) => assert_eq!(cur, v1),
        other => panic!("{other:?}"),
    }
    let v2 = committed(m.commit(t(1), Some(&v1), b"data/v2".to_vec()).await.expect("v2"));
    assert_ne!(v1.version, v2.version);
    // The same tenure on a stale base: a conflict to rebase on, not a fence rejection.
    match m
        .commit(t(1), Some(&v1), b"data/v2b".to_vec())
        .await
        .expect("stale base")
    {
        Commit::Conflict(Some(cur)) => assert_eq!(cur, v2),
        other => panic!("{other:?}"),
    }
    // A new holder raises the fence.
    let fenced = m.fence(t(2)).await.expect("fence");
    assert_eq!((fenced.token, fenced.data.as_slice()), (t(2), &b"data/v2"[..]));
    // The old holder, on the manifest it read before the fence: refused by S3 (412),
    // classified by the token it then reads.
    match m.commit(t(1), Some(&v2), b"data/v3-stale".to_vec()).await {
        Err(Error::FenceRejected { token }) => assert_eq!(token, t(1)),
        other => panic!("stale holder on an old base: {other:?}"),
    }
    // The old holder on a fresh read: refused before sending.
    let fresh = m.read().await.expect("read").expect("present");
    match m.commit(t(1), Some(&fresh), b"data/v3-stale".to_vec()).await {
        Err(Error::FenceRejected { .. }) => {}
        other => panic!("stale holder on a fresh base: {other:?}"),
    }
    match m.update(t(1), |_| b"data/v3-stale".to_vec()).await {
        Err(Error::FenceRejected { .. }) => {}
        other => panic!("stale update: {other:?}"),
    }
    let now = m.read().await.expect("read").expect("present");
    assert_eq!(
        (now.token, now.data.as_slice()),
        (t(2), &b"data/v2"[..]),
        "a stale write landed"
    );
    // The new holder commits on.
    let v3 = committed(m.commit(t(2), Some(&now), b"data/v3".to_vec()).await.expect("v3"));
    assert_eq!(m.read().await.expect("read"), Some(v3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenure_many_writers_lose_no_update() {
    const TASKS: usize = 5;
    const EACH: usize = 10;
    let (_, m) = manifest("mfc").await;
    m.fence(t(4)).await.expect("fence");
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let m = m.clone();
        tasks.push(tokio::spawn(async move {
            for j in 0..EACH {
                m.update(t(4), |cur| {
                    let mut d = cur.map(|c| c.data.clone()).unwrap_or_default();
                    d.extend_from_slice(format!("{i}.{j}\n").as_bytes());
                    d
                })
                .await
                .expect("update");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let end = m.read().await.expect("read").expect("present");
    let text = String::from_utf8(end.data).expect("utf8");
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), TASKS * EACH, "lost or duplicated updates:\n{text}");
    lines.sort_unstable();
    lines.dedup();
    assert_eq!(lines.len(), TASKS * EACH, "duplicated updates:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_object_is_a_corrupt_manifest() {
    let (store, m) = manifest("mfx").await;
    store
        .client()
        .put_object()
        .bucket(store.config().bucket())
        .key(m.key())
        .body(ByteStream::from_static(b"{\"not\":\"a manifest\"}"))
        .send()
        .await
        .expect("put");
    assert!(matches!(m.read().await, Err(Error::CorruptRecord { .. })));
    assert!(matches!(m.fence(t(9)).await, Err(Error::CorruptRecord { .. })));
}
