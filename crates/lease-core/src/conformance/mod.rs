//! The conformance suite every store runs against its real server (feature
//! `conformance`).
//!
//! Each case is a plain `async fn(&dyn Fixture)` that panics with a clear message when
//! the store breaks the [`CasStore`] contract or the lease semantics built on it. Store
//! crates generate one test per case with [`conformance_tests!`](crate::conformance::conformance_tests):
//!
//! ```text
//! leasehold_core::conformance::conformance_tests!(my_fixture().await);
//! ```
//!
//! Cases use fresh, unique lease names, so they share one server without a reset.
//!
//! The [`fence`] cases check each store's fenced write on its own kind of resource
//! ([`fence_tests!`](crate::conformance::fence_tests)); the [`wake`] cases, that a store
//! that pushes its changes wakes one acquirer per release, and every observer
//! ([`wake_tests!`](crate::conformance::wake_tests)). The [`semaphore`] cases, part of
//! the suite, check a [`crate::Semaphore`] on the store: never more than N holders, and a
//! frozen permit holder fenced off after the takeover of its slot.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;

pub mod admin;
pub mod checks;
pub mod fence;
pub mod listing;
pub mod semaphore;
pub mod wake;

pub use admin::admin_inspects_and_releases_by_force;
pub use checks::{assert_held_by, assert_lost_touch, take_over_after_expiry};
pub use fence::{FenceFixture, FencedResource};
pub use listing::list_names_under_a_prefix;
pub use semaphore::{frozen_permit_holder_is_refused_after_takeover, semaphore_never_exceeds_its_permits};
use tokio::time::Instant;
pub use wake::WakeFixture;

use crate::testing::{CountingStore, FaultPlan, FaultStore};
use crate::{
    AcquireOutcome, ClientConfig, Error, FencingToken, HolderId, LeaseClient, LeaseName, LossCause, Ttl,
    store::{
        CasOutcome, CasStore, ClockSource, Current, DeleteOutcome, ExpireOutcome, LeaseRecord, Precondition, Renewal,
        Version,
    },
};

/// What the suite needs from a store crate's test.
#[async_trait]
pub trait Fixture: Send + Sync {
    /// A store connected to the server under test (may be the same one every call).
    async fn store(&self) -> Arc<dyn CasStore>;

    /// Puts something under `name` that is not a valid lease record, the way a foreign
    /// or buggy writer could (garbage bytes, a wrong type, an out-of-range column).
    async fn corrupt(&self, name: &LeaseName);
}

/// Every case's name, in the order [`run_all`] runs them.
pub const CASES: &[&str] = &[
    "create_is_exclusive",
    "stale_version_conflicts",
    "update_missing_conflicts",
    "delete_checks_version",
    "expire_checks_version_and_changes_nothing_else",
    "concurrent_cas_increments_are_exact",
    "token_sequence_acquire_release_takeover",
    "holder_is_refused_while_held",
    "expired_lease_is_taken_over_with_next_token",
    "non_holder_cannot_renew_or_release",
    "one_stale_version_in_a_batch_fails_that_lease_alone",
    "corrupt_record_is_an_error_never_a_grant",
    "loss_signal_fires_before_deadline_when_store_hangs",
    "round_trips_per_operation",
    "acquire_waits_for_release",
    "own_held_lease_is_refused_at_once",
    "max_hold_ends_the_lease_before_a_takeover",
    "acquire_all_of_overlapping_sets_never_deadlocks",
    "vacant_claims_only_a_free_record",
    "preconditions_not_taken_are_refused",
    "list_names_under_a_prefix",
    "admin_inspects_and_releases_by_force",
    "semaphore_never_exceeds_its_permits",
    "frozen_permit_holder_is_refused_after_takeover",
];

/// Runs every case in turn.
pub async fn run_all(f: &dyn Fixture) {
    create_is_exclusive(f).await;
    stale_version_conflicts(f).await;
    update_missing_conflicts(f).await;
    delete_checks_version(f).await;
    expire_checks_version_and_changes_nothing_else(f).await;
    concurrent_cas_increments_are_exact(f).await;
    token_sequence_acquire_release_takeover(f).await;
    holder_is_refused_while_held(f).await;
    expired_lease_is_taken_over_with_next_token(f).await;
    non_holder_cannot_renew_or_release(f).await;
    one_stale_version_in_a_batch_fails_that_lease_alone(f).await;
    corrupt_record_is_an_error_never_a_grant(f).await;
    loss_signal_fires_before_deadline_when_store_hangs(f).await;
    round_trips_per_operation(f).await;
    acquire_waits_for_release(f).await;
    own_held_lease_is_refused_at_once(f).await;
    max_hold_ends_the_lease_before_a_takeover(f).await;
    acquire_all_of_overlapping_sets_never_deadlocks(f).await;
    vacant_claims_only_a_free_record(f).await;
    preconditions_not_taken_are_refused(f).await;
    list_names_under_a_prefix(f).await;
    admin_inspects_and_releases_by_force(f).await;
    semaphore_never_exceeds_its_permits(f).await;
    frozen_permit_holder_is_refused_after_takeover(f).await;
}

// Exported at the crate root by `macro_export` under a hidden name; users name it
// `conformance::conformance_tests!` (the re-export below).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($fixture:expr) => {
        $crate::__conformance_tests!(@all_but_round_trips $fixture);
        $crate::__conformance_tests!(@cases $fixture; round_trips_per_operation);
    };
    // Every case but `round_trips_per_operation`: for a store mode whose request counts
    // differ by design (DynamoDB without the item in its conflicts).
    (@all_but_round_trips $fixture:expr) => {
        $crate::__conformance_tests!(@cases $fixture;
            create_is_exclusive, stale_version_conflicts, update_missing_conflicts,
            delete_checks_version, expire_checks_version_and_changes_nothing_else,
            concurrent_cas_increments_are_exact,
            token_sequence_acquire_release_takeover, holder_is_refused_while_held,
            expired_lease_is_taken_over_with_next_token, non_holder_cannot_renew_or_release,
            one_stale_version_in_a_batch_fails_that_lease_alone,
            corrupt_record_is_an_error_never_a_grant, loss_signal_fires_before_deadline_when_store_hangs,
            acquire_waits_for_release,
            own_held_lease_is_refused_at_once, max_hold_ends_the_lease_before_a_takeover,
            acquire_all_of_overlapping_sets_never_deadlocks, vacant_claims_only_a_free_record,
            preconditions_not_taken_are_refused, list_names_under_a_prefix,
            admin_inspects_and_releases_by_force, semaphore_never_exceeds_its_permits,
            frozen_permit_holder_is_refused_after_takeover);
    };
    (@cases $fixture:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let fixture = $fixture;
                $crate::conformance::$case(&fixture).await;
            }
        )*
    };
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A lease name no other case or run uses.
pub fn unique_name(case: &str) -> LeaseName {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    LeaseName::new(format!("conformance/{case}/{}-{nanos:x}-{n}", std::process::id()))
        .unwrap_or_else(|e| panic!("unique name: {e}"))
}

fn holder(s: &str) -> HolderId {
    HolderId::new(s).unwrap_or_else(|e| panic!("holder: {e}"))
}

fn ttl(ms: u64) -> Ttl {
    Ttl::from_millis(ms).unwrap_or_else(|e| panic!("ttl: {e}"))
}

fn rec(h: &str, token: u64, ttl_ms: u64) -> LeaseRecord {
    LeaseRecord::held(holder(h), FencingToken::new(token), ttl(ttl_ms))
}

/// Asserts that the corrupt record under `name` still reads as corrupt after `what`.
async fn still_corrupt(store: &dyn CasStore, name: &LeaseName, what: &str) {
    let read = store.read(name).await;
    assert!(
        matches!(read, Err(Error::CorruptRecord { .. })),
        "{what} changed the corrupt record: it now reads {read:?}"
    );
}

fn client(store: Arc<dyn CasStore>) -> LeaseClient {
    LeaseClient::efficiency_only(store, ClientConfig::default()).unwrap_or_else(|e| panic!("client: {e}"))
}

/// The fixture's store, a fresh name for `case`, and two clients on the store.
async fn two_clients(f: &dyn Fixture, case: &str) -> (Arc<dyn CasStore>, LeaseName, LeaseClient, LeaseClient) {
    let store = f.store().await;
    let (a, b) = (client(store.clone()), client(store.clone()));
    (store, unique_name(case), a, b)
}

/// The first write of a name: `Claimable` on store-clock stores, `Absent` otherwise.
fn create_precondition(store: &dyn CasStore) -> Precondition {
    match store.capabilities().clock {
        ClockSource::Store => Precondition::Claimable,
        _ => Precondition::Absent,
    }
}

fn written(o: CasOutcome, what: &str) -> crate::store::Stored {
    match o {
        CasOutcome::Written(s) => s,
        CasOutcome::Conflict(c) => panic!("{what}: expected the write to apply, got conflict {c:?}"),
    }
}

/// `store.write(name, pre, record)`, which must apply.
async fn applied(
    store: &dyn CasStore,
    name: &LeaseName,
    pre: &Precondition,
    record: &crate::store::LeaseRecord,
    what: &str,
) -> crate::store::Stored {
    let outcome = store
        .write(name, pre, record)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    written(outcome, what)
}

fn granted(o: AcquireOutcome, what: &str) -> crate::Lease {
    match o {
        AcquireOutcome::Granted(l) => l,
        AcquireOutcome::Held { holder, token, .. } => {
            panic!("{what}: expected a grant, but {holder:?} holds it with token {token}")
        }
    }
}

/// `c.try_acquire(name)` for `ttl_ms`, which must grant.
async fn taken(c: &LeaseClient, name: &LeaseName, ttl_ms: u64, what: &str) -> crate::Lease {
    let outcome = c
        .try_acquire(name, Duration::from_millis(ttl_ms))
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    granted(outcome, what)
}

async fn poll_until<F: FnMut() -> bool>(what: &str, timeout: Duration, mut cond: F) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Of many concurrent creates of one name, exactly one applies.
pub async fn create_is_exclusive(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique_name("create_is_exclusive");
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = store.clone();
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            store
                .write(&name, &Precondition::Absent, &rec(&format!("w{i}"), 1, 5_000))
                .await
        }));
    }
    let mut wins = 0;
    for t in tasks {
        match t.await.unwrap_or_else(|e| panic!("task: {e}")) {
            Ok(CasOutcome::Written(_)) => wins += 1,
            Ok(CasOutcome::Conflict(Current::Present(s))) => assert!(s.record.holder.is_some()),
            Ok(CasOutcome::Conflict(_)) => {}
            Err(e) => panic!("create failed: {e}"),
        }
    }
    assert_eq!(wins, 1, "exactly one of 8 concurrent creates must win");
}

/// A write on a version that has since changed conflicts, and reports the current one.
pub async fn stale_version_conflicts(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique_name("stale_version_conflicts");
    let v1 = applied(&*store, &name, &Precondition::Absent, &rec("a", 1, 5_000), "create").await;
    assert_eq!(v1.record.token, FencingToken::new(1));
    let v2 = applied(
        &*store,
        &name,
        &Precondition::Version(v1.version.clone()),
        &rec("a", 1, 6_000),
        "update on current version",
    )
    .await;
    assert_ne!(v1.version, v2.version, "a write must produce a new version");
    let read = store.read(&name).await.expect("read").expect("record present");
    assert_eq!(read.version, v2.version);
    assert_eq!(read.record.ttl, ttl(6_000));
    match store
        .write(&name, &Precondition::Version(v1.version), &rec("b", 2, 5_000))
        .await
        .expect("stale write")
    {
        CasOutcome::Written(_) => panic!("a write on a stale version applied"),
        CasOutcome::Conflict(Current::Present(s)) => {
            assert_eq!(s.version, v2.version, "conflict must report the current record");
            assert_eq!(s.record.holder, Some(holder("a")));
        }
        CasOutcome::Conflict(c) => assert!(
            !store.capabilities().conflict_returns_current,
            "store says conflicts return the current record, but returned {c:?}"
        ),
    }
    let still = store.read(&name).await.expect("read").expect("present");
    assert_eq!(
        still.record.holder,
        Some(holder("a")),
        "a conflicting write changed the record"
    );
}

/// Updating a name that has no record conflicts.
pub async fn update_missing_conflicts(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique_name("update_missing_conflicts");
    let bogus = Version::new("1");
    match store
        .write(&name, &Precondition::Version(bogus.clone()), &rec("a", 1, 5_000))
        .await
        .expect("write")
    {
        CasOutcome::Written(_) => panic!("an update of a missing record applied"),
        CasOutcome::Conflict(Current::Present(s)) => panic!("missing record reported present: {s:?}"),
        CasOutcome::Conflict(_) => {}
    }
    assert!(
        store.read(&name).await.expect("read").is_none(),
        "a refused update created a record"
    );
    match store.delete(&name, &bogus).await.expect("delete") {
        DeleteOutcome::Deleted => panic!("deleting a missing record reported success"),
        DeleteOutcome::Conflict(_) => {}
    }
}

/// [`CasStore::expire`]: a stale version, a missing record and a corrupt one change
/// nothing (a conflict, a typed error, or `Unsupported` on a store without its own
/// expiry); on the current version the store schedules the removal (or says it has no
/// expiry), and the record reads as it was: same holder, same token, still there long
/// before its time. Whether the store then removes it is each store crate's own test.
pub async fn expire_checks_version_and_changes_nothing_else(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique_name("expire");
    let minute = Duration::from_secs(60);
    let v1 = applied(
        &*store,
        &name,
        &Precondition::Absent,
        &rec("expiring", 3, 30_000),
        "create",
    )
    .await;
    let v2 = applied(
        &*store,
        &name,
        &Precondition::Version(v1.version.clone()),
        &rec("expiring", 3, 30_000),
        "update",
    )
    .await;
    match store.expire(&name, &v1.version, minute).await.expect("stale expire") {
        ExpireOutcome::Conflict(Current::Present(s)) => assert_eq!(s.version, v2.version),
        ExpireOutcome::Conflict(other) if !store.capabilities().conflict_returns_current => {
            assert!(!matches!(other, Current::Absent), "a stale expire saw no record");
        }
        ExpireOutcome::Unsupported => {}
        other => panic!("expire on a stale version gave {other:?}"),
    }
    let now = store.read(&name).await.expect("read").expect("present");
    assert_eq!(now.version, v2.version, "a stale expire changed the record");
    let outcome = store.expire(&name, &v2.version, minute).await.expect("expire");
    assert!(
        matches!(
            outcome,
            ExpireOutcome::Scheduled | ExpireOutcome::Kept | ExpireOutcome::Unsupported
        ),
        "expire on the current version gave {outcome:?}"
    );
    let now = store
        .read(&name)
        .await
        .expect("read")
        .expect("an expiry a minute away removed the record at once");
    assert_eq!(now.record.holder, Some(holder("expiring")), "expire changed the holder");
    assert_eq!(now.record.token, FencingToken::new(3), "expire changed the token");
    if outcome == ExpireOutcome::Unsupported {
        assert_eq!(now.version, v2.version, "an unsupported expire changed the record");
    }
    let missing = unique_name("expire-missing");
    match store.expire(&missing, &v2.version, minute).await {
        Ok(ExpireOutcome::Conflict(Current::Absent | Current::Unknown) | ExpireOutcome::Unsupported) => {}
        // A store may refuse a version that is not one of its own for that name.
        Err(Error::InvalidInput { .. }) => {}
        other => panic!("expire of a missing record gave {other:?}"),
    }
    assert!(
        store.read(&missing).await.expect("read").is_none(),
        "expire created a record"
    );
    let corrupt = unique_name("expire-corrupt");
    f.corrupt(&corrupt).await;
    match store.expire(&corrupt, &v2.version, minute).await {
        Err(Error::CorruptRecord { .. } | Error::InvalidInput { .. }) | Ok(ExpireOutcome::Unsupported) => {}
        // Refused by a condition, on a store whose conflicts do not carry the record.
        Ok(ExpireOutcome::Conflict(Current::Unknown)) if !store.capabilities().conflict_returns_current => {}
        other => panic!("expire of a corrupt record gave {other:?}, not CorruptRecord"),
    }
    still_corrupt(&*store, &corrupt, "expire").await;
}

/// Delete applies only on the current version; versions are not reused after it.
pub async fn delete_checks_version(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique_name("delete_checks_version");
    let v1 = applied(&*store, &name, &Precondition::Absent, &rec("a", 1, 5_000), "create").await;
    let v2 = applied(
        &*store,
        &name,
        &Precondition::Version(v1.version.clone()),
        &rec("a", 1, 5_000),
        "update",
    )
    .await;
    assert!(matches!(
        store.delete(&name, &v1.version).await.expect("stale delete"),
        DeleteOutcome::Conflict(_)
    ));
    assert!(
        store.read(&name).await.expect("read").is_some(),
        "a stale delete removed the record"
    );
    assert_eq!(
        store.delete(&name, &v2.version).await.expect("delete"),
        DeleteOutcome::Deleted
    );
    assert!(store.read(&name).await.expect("read").is_none());
    let v3 = applied(&*store, &name, &Precondition::Absent, &rec("b", 5, 5_000), "recreate").await;
    assert_ne!(v3.version, v1.version, "version reused after delete");
    assert_ne!(v3.version, v2.version, "version reused after delete");
    assert!(
        matches!(
            store
                .write(&name, &Precondition::Version(v2.version), &rec("c", 6, 5_000))
                .await
                .expect("write"),
            CasOutcome::Conflict(_)
        ),
        "a version from before the delete matched the recreated record"
    );
}

/// 5 tasks × 10 compare-and-swap increments end at exactly 50.
pub async fn concurrent_cas_increments_are_exact(f: &dyn Fixture) {
    const TASKS: u64 = 5;
    const INCREMENTS: u64 = 10;
    let store = f.store().await;
    let name = unique_name("concurrent_cas_increments");
    applied(
        &*store,
        &name,
        &Precondition::Absent,
        &rec("counter", 1, 60_000),
        "create",
    )
    .await;
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let store = store.clone();
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = 0;
            let mut conflicts = 0u64;
            while done < INCREMENTS {
                let cur = store.read(&name).await.expect("read").expect("present");
                let next = rec("counter", cur.record.token.get() + 1, 60_000);
                match store
                    .write(&name, &Precondition::Version(cur.version), &next)
                    .await
                    .expect("cas")
                {
                    CasOutcome::Written(_) => done += 1,
                    CasOutcome::Conflict(_) => conflicts += 1,
                }
                assert!(conflicts < 10_000, "livelock");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap_or_else(|e| panic!("task: {e}"));
    }
    let end = store.read(&name).await.expect("read").expect("present");
    assert_eq!(
        end.record.token.get(),
        1 + TASKS * INCREMENTS,
        "lost or duplicated compare-and-swap increments"
    );
}

/// Grants count 1, 2, 3 across acquire / release / acquire by another client, and a
/// renewal keeps the token.
pub async fn token_sequence_acquire_release_takeover(f: &dyn Fixture) {
    let (store, name, a, b) = two_clients(f, "token_sequence").await;
    let la = granted(
        a.try_acquire(&name, Duration::from_millis(600))
            .await
            .expect("a acquire"),
        "a first grant",
    );
    assert_eq!(
        la.token(),
        FencingToken::new(1),
        "first grant of a name carries token 1"
    );
    let first_deadline = la.valid_until();
    poll_until("a renewal", Duration::from_secs(5), || {
        la.valid_until() > first_deadline
    })
    .await;
    let rec_now = store.read(&name).await.expect("read").expect("present");
    assert_eq!(rec_now.record.token, FencingToken::new(1), "renewal changed the token");
    la.release().await.expect("release");
    let read = store.read(&name).await.expect("read");
    if let Some(s) = &read {
        assert!(
            s.record.holder.is_none() || s.remaining == Some(Duration::ZERO),
            "released record still held: {s:?}"
        );
    }
    let lb = granted(
        b.try_acquire(&name, Duration::from_secs(5)).await.expect("b acquire"),
        "b after release",
    );
    assert_eq!(
        lb.token(),
        FencingToken::new(2),
        "grant after a release takes the next token"
    );
    lb.release().await.expect("release b");
    let la2 = granted(
        a.try_acquire(&name, Duration::from_secs(5)).await.expect("a again"),
        "a again",
    );
    assert_eq!(la2.token(), FencingToken::new(3));
    la2.release().await.expect("release");
}

/// While one client holds a lease, another's attempt is refused with the holder,
/// token and a wait, and changes nothing.
pub async fn holder_is_refused_while_held(f: &dyn Fixture) {
    let (store, name, a, b) = two_clients(f, "holder_is_refused").await;
    let la = granted(a.try_acquire(&name, Duration::from_secs(10)).await.expect("a"), "a");
    let before = store.read(&name).await.expect("read").expect("present");
    assert_held_by(
        b.try_acquire(&name, Duration::from_secs(10)).await.expect("b"),
        &la,
        Duration::from_secs(11),
    );
    let after = store.read(&name).await.expect("read").expect("present");
    assert_eq!(before.record, after.record, "a refused attempt changed the record");
    assert!(la.is_valid());
    la.release().await.expect("release");
}

/// A holder that stops renewing loses its lease (signal first), and a challenger takes
/// it over with the next token — never before the holder's validity ended.
pub async fn expired_lease_is_taken_over_with_next_token(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique_name("expired_takeover");
    let frozen = FaultStore::new(store.clone(), 1);
    let a = client(Arc::new(frozen.clone()));
    let b = client(store.clone());
    let la = granted(a.try_acquire(&name, Duration::from_millis(500)).await.expect("a"), "a");
    frozen.set_plan(FaultPlan::hang());
    let lb = take_over_after_expiry(
        &b,
        &name,
        Duration::from_secs(5),
        Duration::from_secs(10),
        &la,
        "b takes over",
    )
    .await;
    assert_eq!(lb.token(), la.token().next(), "takeover takes the next token");
    assert_lost_touch(&la, Duration::from_secs(1)).await;
    lb.release().await.expect("release");
}

/// After a takeover, the old holder's renewal and release writes conflict and leave the
/// new holder's record alone.
pub async fn non_holder_cannot_renew_or_release(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique_name("non_holder");
    let pre = create_precondition(&*store);
    let a_rec = rec("old-holder", 1, 200);
    let a = written(store.write(&name, &Precondition::Absent, &a_rec).await.expect("a"), "a");
    // The new holder takes over on a version it read.
    let b_rec = rec("new-holder", 2, 10_000);
    let b = applied(&*store, &name, &Precondition::Version(a.version.clone()), &b_rec, "b").await;
    let _ = pre;
    match store.renew(&name, &a.version, &a_rec).await.expect("stale renew") {
        CasOutcome::Written(_) => panic!("a non-holder renewed the lease"),
        CasOutcome::Conflict(_) => {}
    }
    match store
        .write(&name, &Precondition::Version(a.version.clone()), &a_rec.vacated())
        .await
        .expect("stale release")
    {
        CasOutcome::Written(_) => panic!("a non-holder released the lease"),
        CasOutcome::Conflict(_) => {}
    }
    let now = store.read(&name).await.expect("read").expect("present");
    assert_eq!(now.version, b.version, "the new holder's record was touched");
    assert_eq!(now.record.holder, Some(holder("new-holder")));
    assert_eq!(now.record.token, FencingToken::new(2));
}

/// Renewals sent together ([`CasStore::renew_many`], one request on a store that
/// batches them): the one whose version is stale (its lease was taken over) fails alone,
/// changing nothing, and the others are renewed.
pub async fn one_stale_version_in_a_batch_fails_that_lease_alone(f: &dyn Fixture) {
    let store = f.store().await;
    let names: Vec<LeaseName> = (0..3).map(|i| unique_name(&format!("batch-{i}"))).collect();
    let mut held = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let r = rec(&format!("batch-holder-{i}"), 1, 10_000);
        held.push((applied(&*store, n, &Precondition::Absent, &r, "grant").await, r));
    }
    // The middle lease is taken over: the version its old holder knows is stale.
    let taker = rec("batch-taker", 2, 10_000);
    let taken = applied(
        &*store,
        &names[1],
        &Precondition::Version(held[1].0.version.clone()),
        &taker,
        "takeover",
    )
    .await;
    let batch: Vec<Renewal> = names
        .iter()
        .zip(&held)
        .map(|(n, (s, r))| Renewal {
            name: n.clone(),
            version: s.version.clone(),
            record: r.clone(),
        })
        .collect();
    let outcomes = store.renew_many(&batch).await;
    assert_eq!(outcomes.len(), batch.len(), "one outcome per renewal");
    for (i, o) in outcomes.into_iter().enumerate() {
        match (i, o.unwrap_or_else(|e| panic!("renewal {i}: {e}"))) {
            (1, CasOutcome::Written(_)) => panic!("a stale version renewed a lease taken over"),
            (1, CasOutcome::Conflict(_)) => {}
            (_, CasOutcome::Written(s)) => {
                assert_eq!(s.record.holder, held[i].1.holder, "renewal {i} changed the holder");
                assert_eq!(s.record.token, FencingToken::new(1), "renewal {i} changed the token");
            }
            (_, CasOutcome::Conflict(c)) => panic!("renewal {i} failed beside a stale one: {c:?}"),
        }
    }
    let middle = store.read(&names[1]).await.expect("read").expect("present");
    assert_eq!(
        middle.version, taken.version,
        "the stale renewal changed the taker's record"
    );
    assert_eq!(middle.record.holder, Some(holder("batch-taker")));
    for (i, n) in names.iter().enumerate().filter(|(i, _)| *i != 1) {
        let now = store.read(n).await.expect("read").expect("present");
        assert_eq!(
            now.record.holder, held[i].1.holder,
            "lease {i} is no longer its holder's"
        );
    }
}

/// A record that is not a lease record is a typed error for reads and acquires, and is
/// never granted or overwritten.
pub async fn corrupt_record_is_an_error_never_a_grant(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique_name("corrupt");
    f.corrupt(&name).await;
    match store.read(&name).await {
        Err(Error::CorruptRecord { .. }) => {}
        other => panic!("reading a corrupt record gave {other:?}, not CorruptRecord"),
    }
    let c = client(store.clone());
    match c.try_acquire(&name, Duration::from_secs(5)).await {
        Err(Error::CorruptRecord { .. }) => {}
        Ok(AcquireOutcome::Granted(l)) => panic!("a corrupt record was granted: {l:?}"),
        other => panic!("acquiring a corrupt record gave {other:?}, not CorruptRecord"),
    }
    still_corrupt(&*store, &name, "an acquire").await;
}

/// [`Precondition::Vacant`] ([`crate::store::Capabilities::claims_vacant`]) writes where
/// no record is, or over a vacant one with the next token whatever its version; a held
/// record is a conflict and a corrupt one an error (or a conflict without the record,
/// where conflicts do not carry it), both left as they were. A store without it refuses
/// it as `InvalidInput` and writes nothing.
pub async fn vacant_claims_only_a_free_record(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique_name("vacant");
    let claim = |h: &str| rec(h, 1, 5_000);
    if !store.capabilities().claims_vacant {
        match store.write(&name, &Precondition::Vacant, &claim("a")).await {
            Err(Error::InvalidInput { .. }) => {}
            other => panic!("a store without Vacant answered {other:?}, not InvalidInput"),
        }
        assert!(
            store.read(&name).await.expect("read").is_none(),
            "a refused Vacant wrote a record"
        );
        return;
    }
    let first = applied(&*store, &name, &Precondition::Vacant, &claim("a"), "Vacant, no record").await;
    assert_eq!(
        (first.record.holder.clone(), first.record.token),
        (Some(holder("a")), FencingToken::FIRST)
    );
    match store
        .write(&name, &Precondition::Vacant, &claim("b"))
        .await
        .expect("Vacant on a held record")
    {
        CasOutcome::Conflict(Current::Present(cur)) => assert_eq!(cur.version, first.version),
        CasOutcome::Conflict(Current::Unknown) if !store.capabilities().conflict_returns_current => {}
        other => panic!("Vacant on a held record gave {other:?}"),
    }
    let released = store
        .release(&name, &first.version, &first.record)
        .await
        .expect("release");
    written(released, "release");
    let second = applied(&*store, &name, &Precondition::Vacant, &claim("b"), "Vacant, released").await;
    assert_eq!(
        (second.record.holder.clone(), second.record.token),
        (Some(holder("b")), FencingToken::new(2)),
        "a released record is claimed with the next token"
    );
    let now = store.read(&name).await.expect("read").expect("the claimed record");
    assert_eq!(
        (now.record.holder, now.record.token, now.version),
        (Some(holder("b")), FencingToken::new(2), second.version)
    );
    let bad = unique_name("vacant_corrupt");
    f.corrupt(&bad).await;
    match store.write(&bad, &Precondition::Vacant, &claim("a")).await {
        Err(Error::CorruptRecord { .. }) => {}
        // Refused by a condition, on a store whose conflicts do not carry the record.
        Ok(CasOutcome::Conflict(Current::Unknown)) if !store.capabilities().conflict_returns_current => {}
        other => panic!("Vacant on a corrupt record gave {other:?}, not CorruptRecord"),
    }
    still_corrupt(&*store, &bad, "a Vacant claim").await;
}

/// A write on a precondition the store's capabilities rule out
/// ([`crate::store::Capabilities::takes`]: `Claimable` without a clock of its own,
/// `Vacant` without `claims_vacant`) is `InvalidInput`, and writes nothing: no record
/// where there was none, a held record left at its version.
pub async fn preconditions_not_taken_are_refused(f: &dyn Fixture) {
    let store = f.store().await;
    let caps = store.capabilities();
    let held_name = unique_name("not_taken_held");
    let first = rec("a", 1, 5_000);
    let held = applied(&*store, &held_name, &Precondition::Absent, &first, "create").await;
    for expect in [Precondition::Claimable, Precondition::Vacant] {
        if caps.takes(&expect) {
            continue;
        }
        let name = unique_name("not_taken");
        match store.write(&name, &expect, &rec("b", 1, 5_000)).await {
            Err(Error::InvalidInput { .. }) => {}
            other => panic!("{expect:?} on no record, refused by the capabilities, gave {other:?}, not InvalidInput"),
        }
        assert!(
            store.read(&name).await.expect("read").is_none(),
            "a refused {expect:?} wrote a record"
        );
        match store.write(&held_name, &expect, &rec("b", 2, 5_000)).await {
            Err(Error::InvalidInput { .. }) => {}
            other => {
                panic!("{expect:?} on a held record, refused by the capabilities, gave {other:?}, not InvalidInput")
            }
        }
        let now = store.read(&held_name).await.expect("read").expect("the held record");
        assert_eq!(
            (now.record.holder, now.record.token, now.version),
            (Some(holder("a")), FencingToken::FIRST, held.version.clone()),
            "a refused {expect:?} changed the held record"
        );
    }
}

/// When the store stops answering, the loss signal fires no later than the validity
/// deadline (plus scheduling slack).
pub async fn loss_signal_fires_before_deadline_when_store_hangs(f: &dyn Fixture) {
    let store = f.store().await;
    let name = unique_name("loss_signal");
    let faulty = FaultStore::new(store, 2);
    let c = client(Arc::new(faulty.clone()));
    let lease = granted(
        c.try_acquire(&name, Duration::from_millis(400)).await.expect("acquire"),
        "acquire",
    );
    faulty.set_plan(FaultPlan::hang());
    let deadline = lease.valid_until();
    let cause = tokio::time::timeout(Duration::from_secs(3), lease.lost())
        .await
        .expect("loss signal never fired");
    let fired = Instant::now();
    // Real time on a loaded machine: allow timer lateness. The exact bound (fires at the
    // deadline, not a tick later) is asserted with paused time in leasehold-core's own tests.
    assert!(
        fired <= deadline + Duration::from_millis(250),
        "loss signal fired {:?} after the safe deadline",
        fired - deadline
    );
    assert!(
        matches!(cause, LossCause::OutcomeUnknown | LossCause::StoreUnreachable),
        "{cause:?}"
    );
    assert!(!lease.is_valid());
}

/// Acquire of a free lease, a renewal and a release are one round trip each; a
/// takeover costs at most two.
pub async fn round_trips_per_operation(f: &dyn Fixture) {
    let store = f.store().await;
    let counting = CountingStore::new(store.clone());
    let c = client(Arc::new(counting.clone()));
    let name = unique_name("round_trips");

    // A TTL long enough that no renewal falls inside the acquire's count on a loaded
    // machine (the first renewal is due a third of the TTL after the write was sent).
    let lease = granted(
        c.try_acquire(&name, Duration::from_secs(3)).await.expect("acquire"),
        "acquire",
    );
    assert_eq!(
        counting.counts().round_trips(),
        1,
        "acquire of a free lease: {:?}",
        counting.counts()
    );
    counting.reset();
    let first = lease.valid_until();
    poll_until("one renewal landed", Duration::from_secs(5), || {
        lease.valid_until() > first
    })
    .await;
    let n = counting.counts();
    assert_eq!((n.renews, n.round_trips()), (1, 1), "one renewal: {n:?}");
    counting.reset();
    lease.release().await.expect("release");
    assert_eq!(counting.counts().round_trips(), 1, "release: {:?}", counting.counts());

    // Re-acquire after our own release: one write (the client knows the vacant record).
    counting.reset();
    let again = granted(
        c.try_acquire(&name, Duration::from_millis(300)).await.expect("again"),
        "again",
    );
    assert_eq!(
        counting.counts().round_trips(),
        1,
        "re-acquire after release: {:?}",
        counting.counts()
    );
    // Released before counting the takeover, so its renewals are not counted there.
    again.release().await.expect("release again");
    if store.capabilities().claims_vacant {
        // A new client, which knows nothing of the name: one write claims it.
        counting.reset();
        let newcomer = client(Arc::new(counting.clone()));
        let third = taken(&newcomer, &name, 300, "newcomer").await;
        assert_eq!(
            counting.counts().round_trips(),
            1,
            "a new client's acquire of a released lease: {:?}",
            counting.counts()
        );
        assert_eq!(third.token(), FencingToken::new(3));
        third.release().await.expect("release the newcomer's");
    }

    // Takeover of an expired lease held by a frozen holder.
    let frozen_name = unique_name("round_trips_takeover");
    let frozen = FaultStore::new(store.clone(), 3);
    let holder_client = client(Arc::new(frozen.clone()));
    let held = taken(&holder_client, &frozen_name, 300, "holder").await;
    frozen.set_plan(FaultPlan::hang());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        counting.reset();
        match c
            .try_acquire(&frozen_name, Duration::from_secs(5))
            .await
            .expect("takeover attempt")
        {
            AcquireOutcome::Granted(l) => {
                let n = counting.counts();
                assert!(n.round_trips() <= 2, "takeover took {n:?}");
                assert_eq!(l.token(), held.token().next());
                l.release().await.expect("release");
                break;
            }
            AcquireOutcome::Held { retry_after, .. } => {
                assert!(
                    counting.counts().round_trips() <= 2,
                    "refused attempt took {:?}",
                    counting.counts()
                );
                assert!(Instant::now() < deadline, "never took over");
                tokio::time::sleep(retry_after.min(Duration::from_millis(200))).await;
            }
        }
    }
}

/// A waiter blocked in `acquire` gets the lease soon after the holder releases it.
pub async fn acquire_waits_for_release(f: &dyn Fixture) {
    let (_, name, a, b) = two_clients(f, "acquire_waits").await;
    let la = granted(a.try_acquire(&name, Duration::from_secs(30)).await.expect("a"), "a");
    let waiter = {
        let name = name.clone();
        tokio::spawn(async move {
            b.acquire_timeout(&name, Duration::from_secs(30), Duration::from_secs(20))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "the waiter was granted a held lease");
    let released_at = Instant::now();
    la.release().await.expect("release");
    let lb = waiter.await.expect("task").expect("waiter granted");
    assert_eq!(lb.token(), FencingToken::new(2));
    let handoff = released_at.elapsed();
    assert!(handoff < Duration::from_secs(10), "handoff took {handoff:?}");
    lb.release().await.expect("release");
}

/// A client asked for a name it holds answers [`Error::AlreadyHeld`] at once, with no
/// round trip; of two tasks of one client acquiring a free name at once, exactly one is
/// granted and the other refused; once released, the name is granted again.
pub async fn own_held_lease_is_refused_at_once(f: &dyn Fixture) {
    let store = f.store().await;
    let counting = CountingStore::new(store.clone());
    let c = client(Arc::new(counting.clone()));
    let name = unique_name("own_held");
    let ttl = Duration::from_secs(10);
    let lease = c
        .acquire_timeout(&name, ttl, Duration::from_secs(10))
        .await
        .expect("acquire");
    let refused = |what: &str, r: crate::Result<()>| match r {
        Err(Error::AlreadyHeld { name: n, token }) => {
            assert_eq!(n, name.as_str(), "{what}: AlreadyHeld names another lease");
            assert_eq!(token, lease.token(), "{what}: AlreadyHeld carries another token");
        }
        other => panic!("{what} of a name this client holds gave {other:?}, not AlreadyHeld"),
    };
    counting.reset();
    let started = Instant::now();
    refused("try_acquire", c.try_acquire(&name, ttl).await.map(|_| ()));
    refused("acquire", c.acquire(&name, ttl).await.map(|_| ()));
    refused(
        "acquire_timeout",
        c.acquire_timeout(&name, ttl, Duration::from_secs(10)).await.map(|_| ()),
    );
    assert_eq!(counting.counts().round_trips(), 0, "a refusal reached the store");
    assert!(started.elapsed() < Duration::from_secs(1), "a refusal waited");
    let before = store.read(&name).await.expect("read").expect("present");
    assert_eq!(
        before.record.holder.as_ref(),
        Some(lease.holder()),
        "a refusal changed the record"
    );
    lease.release().await.expect("release");
    let again = c
        .acquire_timeout(&name, ttl, Duration::from_secs(10))
        .await
        .expect("after release");
    assert_eq!(
        again.token(),
        FencingToken::new(2),
        "grant after a release takes the next token"
    );
    again.release().await.expect("release again");

    // Two tasks of one client, one free name, at once: one grant, one refusal.
    let raced = unique_name("own_held_race");
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (c, raced) = (c.clone(), raced.clone());
            tokio::spawn(async move { c.acquire_timeout(&raced, ttl, Duration::from_secs(20)).await })
        })
        .collect();
    let mut grants = Vec::new();
    for t in tasks {
        match t.await.unwrap_or_else(|e| panic!("task: {e}")) {
            Ok(l) => grants.push(l),
            Err(Error::AlreadyHeld { .. }) => {}
            Err(e) => panic!("concurrent acquire of one client failed: {e}"),
        }
    }
    assert_eq!(grants.len(), 1, "two tasks of one client were both granted {raced}");
    for l in grants {
        l.release().await.expect("release");
    }
}

/// A lease acquired with a `max_hold` ends with [`LossCause::MaxHoldReached`] at the
/// cap although the store answers, and a challenger polling all along is granted it
/// only after that loss fired (and within a few TTLs), with the next token.
pub async fn max_hold_ends_the_lease_before_a_takeover(f: &dyn Fixture) {
    let (_, name, a, b) = two_clients(f, "max_hold").await;
    let options = crate::AcquireOptions::new(Duration::from_millis(800)).max_hold(Duration::from_millis(1_500));
    let lease = a
        .acquire_with(&name, &options.timeout(Duration::from_secs(10)))
        .await
        .expect("acquire");
    let cap = lease.hold_until().expect("a capped lease has a hold_until");
    let ttl = lease.ttl();
    let challenger = {
        let name = name.clone();
        tokio::spawn(async move {
            let give_up = Instant::now() + Duration::from_secs(30);
            loop {
                if let AcquireOutcome::Granted(l) = b.try_acquire(&name, Duration::from_secs(5)).await.expect("b") {
                    return (Instant::now(), l);
                }
                assert!(Instant::now() < give_up, "the capped lease was never free again");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let cause = tokio::time::timeout(Duration::from_secs(10), lease.lost())
        .await
        .expect("the cap never ended the lease");
    let lost_at = Instant::now();
    assert_eq!(cause, LossCause::MaxHoldReached);
    // Real time on a loaded machine: allow timer lateness (exact with paused time in
    // leasehold-core's own tests).
    assert!(
        lost_at <= cap + Duration::from_millis(250),
        "the loss fired {:?} after the cap",
        lost_at - cap
    );
    assert!(!lease.is_valid());
    let (taken_at, next) = challenger.await.unwrap_or_else(|e| panic!("task: {e}"));
    assert!(taken_at >= lost_at, "taken over before the capped holder's loss fired");
    assert!(
        taken_at <= cap + ttl * 3 + Duration::from_secs(3),
        "free only {:?} after the cap (TTL {ttl:?})",
        taken_at - cap
    );
    assert_eq!(next.token(), lease.token().next(), "takeover takes the next token");
    next.release().await.expect("release");
}

/// Three clients each lock two of three names with `acquire_all`, naming them in
/// orders that would form a cycle (a+b, b+c, c+a) if taken as named: none deadlocks,
/// no name is ever held by two at once, and each name's tokens grow with every grant.
pub async fn acquire_all_of_overlapping_sets_never_deadlocks(f: &dyn Fixture) {
    use std::collections::HashMap;
    use std::sync::Mutex;

    let store = f.store().await;
    let base = unique_name("acquire_all");
    let names: Vec<String> = ["a", "b", "c"].iter().map(|n| format!("{base}/{n}")).collect();
    let sets = [
        [names[0].clone(), names[1].clone()],
        [names[1].clone(), names[2].clone()],
        [names[2].clone(), names[0].clone()],
    ];
    let in_use: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let last: Arc<Mutex<HashMap<String, FencingToken>>> = Arc::default();
    let mut tasks = Vec::new();
    for (i, set_names) in sets.into_iter().enumerate() {
        let config = ClientConfig::builder()
            .max_acquire_backoff(Duration::from_millis(200))
            .build()
            .unwrap_or_else(|e| panic!("config: {e}"));
        let c = LeaseClient::efficiency_only(store.clone(), config).unwrap_or_else(|e| panic!("client: {e}"));
        let (in_use, last) = (in_use.clone(), last.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..4 {
                let set = c
                    .acquire_all(&set_names, Duration::from_secs(5))
                    .await
                    .unwrap_or_else(|e| panic!("client {i}: acquire_all: {e}"));
                for (name, token) in set.tokens() {
                    let mut held = in_use.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    if let Some(other) = held.insert(name.as_str().to_owned(), i) {
                        panic!("{name} held by clients {other} and {i} at once");
                    }
                    let mut last = last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    let prev = last
                        .insert(name.as_str().to_owned(), token)
                        .unwrap_or(FencingToken::ZERO);
                    assert!(token > prev, "{name}: token {token} granted after {prev}");
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                assert!(set.is_valid(), "client {i} lost its set: {:?}", set.loss_cause());
                for name in set.names() {
                    in_use
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .remove(name.as_str());
                }
                set.release()
                    .await
                    .unwrap_or_else(|e| panic!("client {i}: release: {e}"));
            }
        }));
    }
    let all = async {
        for t in tasks {
            t.await.unwrap_or_else(|e| panic!("contender: {e}"));
        }
    };
    tokio::time::timeout(Duration::from_secs(90), all)
        .await
        .expect("acquire_all contenders deadlocked (or the store was too slow)");
    let grants: u64 = last
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .values()
        .map(|t| t.get())
        .sum();
    assert_eq!(grants, 3 * 4 * 2, "every grant of every name takes the next token");
}

/// Generates one `#[tokio::test]` per conformance case, each building its fixture with
/// the given expression (which may `.await`).
#[doc(inline)]
pub use crate::__conformance_tests as conformance_tests;
/// Generates one test per [`fence`] case: `fence_tests!(fixture_expression)`.
#[doc(inline)]
pub use crate::__fence_tests as fence_tests;
/// Generates one test per [`wake`] case: `wake_tests!(fixture_expression)`.
#[doc(inline)]
pub use crate::__wake_tests as wake_tests;
