//! What a store's native expiry (`CasStore::expire`) must answer: scheduled on the
//! record's current version, a conflict naming the current record (or its absence) on an
//! older one; and the record as it was until the expiry fires.

use std::time::Duration;

use leasehold_core::LeaseName;
use leasehold_core::store::{CasStore, Current, ExpireOutcome, Stored, Version};

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
    assert_expire_conflicts(store, name, (stale, Some(current)), after).await;
}

/// An expiry of `name` in `after` on `stale`, a version the record no longer has, changes
/// nothing: a conflict naming the current record, of the version `current`, or, if
/// `current` is `None`, saying there is no record.
///
/// # Panics
/// If the call fails or answers anything else.
pub async fn assert_expire_conflicts<S>(
    store: &S,
    name: &LeaseName,
    (stale, current): (&Version, Option<&Version>),
    after: Duration,
) where
    S: CasStore + ?Sized,
{
    match (store.expire(name, stale, after).await.expect("stale"), current) {
        (ExpireOutcome::Conflict(Current::Present(s)), Some(current)) => assert_eq!(&s.version, current),
        (ExpireOutcome::Conflict(Current::Absent), None) => {}
        (other, _) => panic!("a stale expire of {name} gave {other:?}, not a conflict naming {current:?}"),
    }
}

/// `name` still reads as `written` left it, version and record: an expiry scheduled on
/// it changes nothing until it fires (`what` says what came between, in the messages).
///
/// # Panics
/// If the read fails, finds nothing, or finds anything else.
pub async fn assert_still_reads<S>(store: &S, name: &LeaseName, written: &Stored, what: &str)
where
    S: CasStore + ?Sized,
{
    let now = store
        .read(name)
        .await
        .unwrap_or_else(|e| panic!("read {name} after {what}: {e}"))
        .unwrap_or_else(|| panic!("{name} is gone right after {what}"));
    assert_eq!(now.version, written.version, "{what} changed the version of {name}");
    assert_eq!(now.record, written.record, "{what} changed the record of {name}");
}
