//! Fenced manifest commits against moto, in what is particular to S3: the ETag check
//! (first commits with `If-None-Match: *`, conflicts to rebase on), a refusal decided
//! after S3's 412 by the manifest read back, `update`'s retries, `fence` in strict mode,
//! and objects that are not manifests. The fence contract itself (stale tokens, the two
//! modes, raising the mark, one request per write) is checked by the conformance suite's
//! fence cases (`tests/conformance.rs`, `mod fence`).
//!
//! Runs on this binary's own serialized moto (port 55203; see `common::serialized_moto`):
//! on the shared threaded moto two racing `If-Match` PUTs on one ETag can both win, which
//! S3 never allows, and the many-writers test would measure moto's race, not the store.
#![allow(missing_docs)]

mod common;

use aws_sdk_s3::primitives::ByteStream;
use common::{create_bucket, unique_bucket};
use leasehold_core::fence::{FenceMode, FencedOutcome};
use leasehold_core::{Error, FencingToken, Result};
use leasehold_s3::{MAX_MANIFEST_BYTES, Manifest, ManifestFence, S3Config, S3Store};

async fn manifest(tag: &str) -> (S3Store, ManifestFence) {
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

fn applied(c: FencedOutcome<Manifest, Option<Manifest>>) -> Manifest {
    match c {
        FencedOutcome::Applied(m) => m,
        FencedOutcome::ConditionFailed(cur) => panic!("expected a commit, got a conflict with {cur:?}"),
    }
}

/// The manifest a conflicting commit was told about.
fn conflict(c: FencedOutcome<Manifest, Option<Manifest>>) -> Manifest {
    match c {
        FencedOutcome::ConditionFailed(Some(cur)) => cur,
        other => panic!("expected a conflict with the current manifest, got {other:?}"),
    }
}

fn refused<T: std::fmt::Debug>(r: Result<T>, token: u64, what: &str) {
    match r {
        // The refusal names the manifest's token that refused it: at least this one.
        Err(Error::FenceRejected {
            token: got,
            mark: Some(mark),
        }) => {
            assert_eq!(got, t(token), "{what}");
            assert!(mark >= got, "{what}: refused by mark {mark}");
        }
        other => panic!("{what}: expected FenceRejected (with the mark) for token {token}, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_commits_and_conflicts_rebase() {
    let (_, m) = manifest("mf").await;
    assert_eq!(m.read().await.expect("read"), None);
    let v1 = applied(m.commit(t(1), None, b"data/v1".to_vec()).await.expect("v1"));
    // A second "first" commit (If-None-Match: *) loses to the existing manifest.
    assert_eq!(
        conflict(m.commit(t(1), None, b"data/other".to_vec()).await.expect("again")),
        v1
    );
    let v2 = applied(m.commit(t(1), Some(&v1), b"data/v2".to_vec()).await.expect("v2"));
    assert_ne!(v1.version, v2.version);
    // The same tenure on a stale base: a conflict to rebase on, not a fence rejection.
    assert_eq!(
        conflict(
            m.commit(t(1), Some(&v1), b"data/v2b".to_vec())
                .await
                .expect("stale base")
        ),
        v2
    );
    // Strict, a newer grant on a stale base: the manifest that replaced it carries an
    // older token, so it is a conflict too; on the rebase the commit applies.
    let strict = m.clone().strict();
    assert_eq!(
        conflict(
            strict
                .commit(t(2), Some(&v1), b"data/v3".to_vec())
                .await
                .expect("strict on a stale base")
        ),
        v2
    );
    let v3 = applied(strict.commit(t(2), Some(&v2), b"data/v3".to_vec()).await.expect("v3"));
    assert_eq!(m.read().await.expect("read"), Some(v3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_base_is_refused_by_the_manifest_read_after_the_412() {
    let (_, m) = manifest("mfs").await;
    let v1 = applied(m.commit(t(1), None, b"data/v1".to_vec()).await.expect("v1"));
    let v2 = applied(m.commit(t(1), Some(&v1), b"data/v2".to_vec()).await.expect("v2"));
    // A new holder raises the fence.
    let fenced = m.fence(t(2)).await.expect("fence");
    assert_eq!((fenced.token, fenced.data.as_slice()), (t(2), &b"data/v2"[..]));
    // The old holder, on the manifest it read before the fence: its base admits it, so
    // the PUT goes out, S3 refuses it (412), and the manifest read back tells why.
    refused(
        m.commit(t(1), Some(&v2), b"data/v3-stale".to_vec()).await,
        1,
        "old holder, old base",
    );
    // Strict: the same holder's second write, on a base from before its first.
    refused(
        m.clone()
            .strict()
            .commit(t(2), Some(&v2), b"data/v3-again".to_vec())
            .await,
        2,
        "strict, same token, old base",
    );
    // `update` reads first, and refuses without retrying.
    refused(m.update(t(1), |_| b"data/v3-stale".to_vec()).await, 1, "stale update");
    assert_eq!(m.read().await.expect("read"), Some(fenced), "a stale write landed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_fence_is_the_grants_one_write() {
    let (_, m) = manifest("mfn").await;
    let strict = m.clone().strict();
    // On a missing manifest: creates an empty one with the mark.
    let first = strict.fence(t(3)).await.expect("strict fence");
    assert_eq!((first.token, first.data.as_slice()), (t(3), &b""[..]));
    // The grant has had its one write: another strict fence, commit or update is refused.
    refused(strict.fence(t(3)).await, 3, "second strict fence");
    refused(
        strict.commit(t(3), Some(&first), b"data/v1".to_vec()).await,
        3,
        "strict commit after the fence",
    );
    refused(
        strict.update(t(3), |_| b"data/v1".to_vec()).await,
        3,
        "strict update after the fence",
    );
    // The default mode lets the same grant fence and commit on.
    let loose = strict.clone().mode(FenceMode::NotOlder);
    let again = loose.fence(t(3)).await.expect("not-older fence");
    let v1 = applied(loose.commit(t(3), Some(&again), b"data/v1".to_vec()).await.expect("v1"));
    // A later grant, strict, raises the mark and keeps the data.
    let next = strict.fence(t(4)).await.expect("next grant's fence");
    assert_eq!((next.token, next.data), (t(4), v1.data));
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
async fn a_foreign_or_oversized_object_is_a_corrupt_manifest() {
    let (store, m) = manifest("mfx").await;
    let put = |body: Vec<u8>| {
        store
            .client()
            .put_object()
            .bucket(store.config().bucket())
            .key(m.key())
            .body(ByteStream::from(body))
            .send()
    };
    put(b"{\"not\":\"a manifest\"}".to_vec()).await.expect("put");
    assert!(matches!(m.read().await, Err(Error::CorruptRecord { .. })));
    assert!(matches!(m.fence(t(9)).await, Err(Error::CorruptRecord { .. })));
    // A well-formed header, but one byte over the limit.
    let mut big = b"leasehold-manifest/1 token=1\n".to_vec();
    big.resize(usize::try_from(MAX_MANIFEST_BYTES).expect("fits") + 1, b'x');
    put(big).await.expect("put a big manifest");
    assert!(matches!(m.read().await, Err(Error::CorruptRecord { .. })));
    assert!(matches!(m.fence(t(9)).await, Err(Error::CorruptRecord { .. })));
}
