//! `KeyFence` on the shared single-member etcd, beyond the conformance fence cases
//! (which run in `tests/conformance.rs`): the value on etcd is the documented encoding,
//! each fenced write is one Txn, values that are not fence values are `FenceMarkInvalid`
//! and left in place, the extreme tokens, and the tokens of real leases.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use etcd_client::Client;
use leasehold_core::fence::FencedOutcome;
use leasehold_core::{Error, FencingToken, LeaseClient};
use leasehold_etcd::{EtcdStats, EtcdStore, KEY_FENCE_HEADER, KeyFence};

fn t(n: u64) -> FencingToken {
    FencingToken::new(n)
}

fn fence(key: &[u8], token: u64) -> KeyFence {
    KeyFence::new(key.to_vec(), t(token)).unwrap_or_else(|e| panic!("{e}"))
}

fn key(store: &EtcdStore, name: &str) -> Vec<u8> {
    format!("{}fenced/{name}", store.config().prefix()).into_bytes()
}

async fn raw_get(c: &Client, key: &[u8]) -> Option<etcd_client::KeyValue> {
    let mut c = c.clone();
    let r = c.get(key, None).await.unwrap_or_else(|e| panic!("get: {e}"));
    r.kvs().first().cloned()
}

async fn put(store: &EtcdStore, f: &KeyFence, bytes: &str) -> Result<i64, Error> {
    match store.fenced_put(f, bytes).await? {
        FencedOutcome::Applied(revision) => Ok(revision),
        FencedOutcome::ConditionFailed(()) => panic!("a key fence has no condition of its own"),
    }
}

/// The value etcd holds is `leasehold-fence/1 token=<20 digits>\n<bytes>`, the applied
/// outcome is the write's revision, and each fenced write (applied or refused) is
/// exactly one Txn, each plain read one range read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_value_on_etcd_and_the_requests() {
    let store = common::store("key-fence-encoding").await;
    let raw = store.client().clone();
    let k = key(&store, "acct-7");
    let one_txn = EtcdStats {
        txns: 1,
        ..EtcdStats::default()
    };

    let before = store.stats();
    assert_eq!(store.read_fenced(k.clone()).await.expect("read"), None);
    assert_eq!(
        store.stats().since(&before),
        EtcdStats {
            ranges: 1,
            ..EtcdStats::default()
        }
    );

    let before = store.stats();
    let rev = put(&store, &fence(&k, 7), "balance=42").await.expect("create");
    assert_eq!(store.stats().since(&before), one_txn, "creating the key");
    let kv = raw_get(&raw, &k).await.expect("the key exists");
    assert_eq!(kv.value(), b"leasehold-fence/1 token=00000000000000000007\nbalance=42");
    assert!(kv.value().starts_with(KEY_FENCE_HEADER));
    assert_eq!(kv.mod_revision(), rev, "Applied carries the write's revision");
    assert_eq!(kv.lease(), 0, "a fenced key has no etcd lease");

    let before = store.stats();
    let rev2 = put(&store, &fence(&k, 7), "").await.expect("same tenure, empty bytes");
    assert!(rev2 > rev);
    assert_eq!(store.stats().since(&before), one_txn, "guarded write");
    assert_eq!(
        store.read_fenced(k.clone()).await.expect("read"),
        Some((t(7), Vec::new()))
    );

    let before = store.stats();
    match put(&store, &fence(&k, 6), "stale").await {
        Err(Error::FenceRejected { token, mark }) => {
            assert_eq!(token, t(6));
            assert_eq!(mark, Some(t(7)), "the refusal names the mark that refused it");
        }
        other => panic!("a stale token was not refused: {other:?}"),
    }
    assert_eq!(store.stats().since(&before), one_txn, "a refusal is one Txn too");
    assert_eq!(raw_get(&raw, &k).await.expect("kept").mod_revision(), rev2);
    common::cleanup(&store).await;
}

/// A key holding something that is not a fence value (a plain value, binary garbage, a
/// lease record, the header with digits out of range) is `FenceMarkInvalid` for writes
/// of any token and mode and for reads, and is never overwritten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_that_is_not_a_fence_value_is_corrupt_never_overwritten() {
    let store = common::store("key-fence-corrupt").await;
    let mut raw = store.client().clone();
    let header = String::from_utf8(KEY_FENCE_HEADER.to_vec()).expect("ascii");
    let garbage: [Vec<u8>; 6] = [
        b"42".to_vec(),
        b"\x00\xffnot a fence value".to_vec(),
        b"{\"f\":1,\"holder\":null,\"token\":3}".to_vec(),
        Vec::new(),
        format!("{header}00000000000000000000\nmark zero").into_bytes(),
        format!("{header}99999999999999999999\nbeyond u64").into_bytes(),
    ];
    for (i, value) in garbage.iter().enumerate() {
        let k = key(&store, &format!("garbage-{i}"));
        raw.put(k.clone(), value.to_vec(), None).await.expect("put garbage");
        for token in [1, 5, u64::MAX] {
            for strict in [false, true] {
                let f = if strict {
                    fence(&k, token).strict()
                } else {
                    fence(&k, token)
                };
                match put(&store, &f, "overwrite").await {
                    Err(Error::FenceMarkInvalid { resource, reason }) => {
                        assert_eq!(resource.as_bytes(), k.as_slice(), "named by the key");
                        assert!(reason.contains("not a fenced value"), "{reason}");
                    }
                    other => panic!("{value:?}, token {token}, strict {strict}: {other:?}"),
                }
            }
        }
        match store.read_fenced(k.clone()).await {
            Err(Error::FenceMarkInvalid { .. }) => {}
            other => panic!("reading {value:?} gave {other:?}"),
        }
        let kv = raw_get(&raw, &k).await.expect("kept");
        assert_eq!(kv.value(), value.as_slice(), "the corrupt value was overwritten");
    }
    common::cleanup(&store).await;
}

/// The extreme tokens: 1 (the first ever issued) and `u64::MAX` (no token above it, so
/// "not older" must still admit it and strict must refuse it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_smallest_and_the_largest_token() {
    let store = common::store("key-fence-extremes").await;
    let k = key(&store, "extremes");
    put(&store, &fence(&k, 1).strict(), "first")
        .await
        .expect("the fenced write must apply");
    assert!(matches!(
        put(&store, &fence(&k, 1).strict(), "again").await,
        Err(Error::FenceRejected { .. })
    ));
    put(&store, &fence(&k, u64::MAX), "max")
        .await
        .expect("the fenced write must apply");
    put(&store, &fence(&k, u64::MAX), "max again")
        .await
        .expect("the fenced write must apply");
    assert!(matches!(
        put(&store, &fence(&k, u64::MAX).strict(), "strict").await,
        Err(Error::FenceRejected { .. })
    ));
    assert!(matches!(
        put(&store, &fence(&k, u64::MAX - 1), "older").await,
        Err(Error::FenceRejected { .. })
    ));
    assert_eq!(
        store.read_fenced(k.clone()).await.expect("read"),
        Some((t(u64::MAX), b"max again".to_vec()))
    );
    common::cleanup(&store).await;
}

/// With the tokens of real grants: the holder after a takeover raises the mark, and the
/// earlier holder's writes are refused from then on, though it still has its lease
/// object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tokens_of_real_leases() {
    let store = common::store("key-fence-leases").await;
    let k = key(&store, "report");
    let leases = LeaseClient::new(store.clone());
    let first = leases
        .acquire("report", Duration::from_secs(5))
        .await
        .expect("first grant");
    let first_fence = KeyFence::new(k.clone(), first.token()).expect("fence");
    put(&store, &first_fence, "draft")
        .await
        .expect("the fenced write must apply");
    first.release().await.expect("release");

    let second = leases
        .acquire("report", Duration::from_secs(5))
        .await
        .expect("second grant");
    assert!(second.token() > first_fence.token());
    put(
        &store,
        &KeyFence::new(k.clone(), second.token()).expect("fence"),
        "final",
    )
    .await
    .expect("the fenced write must apply");
    match put(&store, &first_fence, "late draft").await {
        Err(Error::FenceRejected { token, .. }) => assert_eq!(token, first_fence.token()),
        other => panic!("the earlier holder's write was not refused: {other:?}"),
    }
    assert_eq!(
        store.read_fenced(k.clone()).await.expect("read"),
        Some((second.token(), b"final".to_vec()))
    );
    second.release().await.expect("release");
    common::cleanup(&store).await;
}

/// Bad input is refused before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_sending() {
    let store = common::store("key-fence-input").await;
    let before = store.stats();
    assert!(matches!(KeyFence::new("", t(1)), Err(Error::InvalidInput { .. })));
    assert!(matches!(
        KeyFence::new(key(&store, "zero"), FencingToken::ZERO),
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(store.read_fenced("").await, Err(Error::InvalidInput { .. })));
    assert_eq!(store.stats().since(&before), EtcdStats::default(), "something was sent");
}
