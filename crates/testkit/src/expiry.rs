//! What a store's native expiry (`CasStore::expire`) must answer: scheduled on the
//! record's current version, a conflict naming the current record on an older one.

use std::time::Duration;

use leasehold_core::LeaseName;
use leasehold_core::store::{CasStore, Current, ExpireOutcome, Version};

/// An expiry of `name` in `after` on its current version `version` is scheduled.
///
/// # Panics
/// If the call fails or answers anything else.
pub async fn assert_expire_scheduled<S>(store: &S, name: &LeaseName, version: &Version, after: Duration)
where
    S: CasStore + ?Sized,
{
    let outcome = store.expire(name, version, after).await;
    assert_eq!(outcome.expect("expire"), ExpireOutcome::Scheduled, "expire of {name}");
}

/// An expiry of `name` in `after` on `stale`, a version older than the record's current
/// one `current`, changes nothing: a conflict naming the current record.
///
/// # Panics
/// If the call fails or answers anything else.
pub async fn assert_stale_expire_conflicts<S>(
    store: &S,
    name: &LeaseName,
    (stale, current): (&Version, &Version),
    after: Duration,
) where
    S: CasStore + ?Sized,
{
    match store.expire(name, stale, after).await.expect("stale") {
        ExpireOutcome::Conflict(Current::Present(s)) => assert_eq!(&s.version, current),
        other => panic!("a stale expire gave {other:?}"),
    }
}
