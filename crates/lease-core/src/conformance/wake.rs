//! The wake-up cases, for stores that push their changes
//! ([`crate::store::Capabilities::notifies_waiters`]): one release wakes one claimer of a
//! store, that wake-up reaches a claimer that takes the lease even when the first one
//! woken does not, and every observer is woken by the release.
//!
//! The holder has its own store; the waiters share another (one subscription), as the
//! waiters of one process do. The holder's TTL is 30 s, so a waiter that is neither woken
//! nor handed the wake-up sleeps ~30 s and the 5 s limits fail. A store crate's test
//! implements [`WakeFixture`] and generates one test per case with
//! [`wake_tests!`](crate::conformance::wake_tests).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::store::{CasStore, Wait};
use crate::testing::CountingStore;
use crate::testing::process::poll;
use crate::{ClientConfig, Lease, LeaseClient, LeaseName, Result};

/// What the wake-up cases need from a store crate's test.
#[async_trait]
pub trait WakeFixture: Send + Sync {
    /// Two stores on the same records (a lease namespace no other case uses, for
    /// `tag`): the holder's, and the waiters', each with its own change feed.
    async fn stores(&self, tag: &str) -> (Arc<dyn CasStore>, Arc<dyn CasStore>);
}

/// Every wake-up case's name.
pub const CASES: &[&str] = &[
    "one_release_wakes_one_of_fifty_waiters",
    "a_release_wakes_an_observer_parked_first_and_the_acquirer",
    "every_observer_is_woken_when_the_acquirer_takes_a_release",
    "a_wake_up_whose_waiter_went_away_is_passed_on",
    "fifty_waiters_look_for_an_unreleased_expiry_one_at_a_time",
];

const HOLDER_TTL: Duration = Duration::from_secs(30);
const LIMIT: Duration = Duration::from_secs(5);

struct Setup {
    waiters: CountingStore<Arc<dyn CasStore>>,
    name: LeaseName,
}

/// The setup, and the holder's lease.
async fn held_lease(f: &dyn WakeFixture, tag: &str) -> (Setup, Lease) {
    held_lease_for(f, tag, HOLDER_TTL).await
}

/// The setup, and the holder's lease of `ttl`.
async fn held_lease_for(f: &dyn WakeFixture, tag: &str, ttl: Duration) -> (Setup, Lease) {
    let (holder, waiters) = f.stores(tag).await;
    assert!(
        waiters.capabilities().notifies_waiters,
        "the wake-up cases are for stores that push their changes"
    );
    let waiters = CountingStore::new(waiters);
    let name = super::unique_name(tag);
    let lease = LeaseClient::efficiency_only(holder, ClientConfig::default())
        .unwrap_or_else(|e| panic!("client: {e}"))
        .acquire(name.as_str(), ttl)
        .await
        .unwrap_or_else(|e| panic!("holder: {e}"));
    // Start the waiters' feed (a store may return from its first wait at once, while it
    // subscribes).
    let seen = waiters.read(&name).await.expect("read").map(|s| s.version);
    waiters
        .wait_for_change(&name, seen.as_ref(), Wait::Change(Duration::from_millis(100)))
        .await
        .expect("start the change feed");
    waiters.reset();
    (Setup { waiters, name }, lease)
}

fn acquirer(s: &Setup) -> JoinHandle<Result<Lease>> {
    let config = ClientConfig::builder()
        .max_acquire_backoff(Duration::from_secs(60))
        .build()
        .unwrap_or_else(|e| panic!("client config: {e}"));
    let client = LeaseClient::efficiency_only(s.waiters.clone(), config).unwrap_or_else(|e| panic!("client: {e}"));
    let name = s.name.clone();
    tokio::spawn(async move {
        client
            .acquire_timeout(name.as_str(), HOLDER_TTL, Duration::from_secs(60))
            .await
    })
}

async fn parked(s: &Setup, waits: u64) {
    assert!(
        poll(Duration::from_secs(10), || s.waiters.counts().waits >= waits).await,
        "waiters never parked: {:?}",
        s.waiters.counts()
    );
}

/// Releases; returns the granted lease and how long after the release it came.
async fn release_and_take(s: &Setup, lease: Lease, acquirer: JoinHandle<Result<Lease>>) -> (Lease, Duration) {
    let released = Instant::now();
    lease.release().await.expect("release");
    match tokio::time::timeout(LIMIT, acquirer).await {
        Ok(joined) => (
            joined.expect("task").unwrap_or_else(|e| panic!("granted: {e}")),
            released.elapsed(),
        ),
        Err(_) => panic!(
            "no acquirer was granted the released lease within {LIMIT:?}: {:?}",
            s.waiters.counts()
        ),
    }
}

/// Fifty waiters in one store, one release: one of them is granted, with a few store
/// calls in all, not fifty.
pub async fn one_release_wakes_one_of_fifty_waiters(f: &dyn WakeFixture) {
    const WAITERS: u64 = 50;
    let (s, lease) = held_lease(f, "wake-herd").await;
    let tasks: Vec<_> = (0..WAITERS).map(|_| acquirer(&s)).collect();
    parked(&s, WAITERS).await;
    let before = s.waiters.counts();
    assert_eq!(
        before.reads + before.writes,
        WAITERS,
        "one attempt each before waiting: {before:?}"
    );
    s.waiters.reset();

    let released = Instant::now();
    lease.release().await.expect("release");
    assert!(
        poll(LIMIT, || tasks.iter().filter(|t| t.is_finished()).count() == 1).await,
        "no waiter was granted the released lease: {:?}",
        s.waiters.counts()
    );
    let took = released.elapsed();
    // Measurement window: twice the time after which an unused wake-up moves on, so a
    // wake-up passed on (or a herd) would show in the counts.
    tokio::time::sleep(crate::store::BATON_PASS * 2).await;
    let calls = s.waiters.counts();
    println!("{WAITERS} waiters, one release: granted after {took:?}; store calls {calls:?}");
    assert_eq!(
        tasks.iter().filter(|t| t.is_finished()).count(),
        1,
        "more than one waiter returned"
    );
    assert!(calls.reads + calls.writes <= 3, "calls after one release: {calls:?}");
    for t in tasks {
        if t.is_finished() {
            let lease = t.await.expect("task").unwrap_or_else(|e| panic!("granted: {e}"));
            lease.release().await.expect("release");
        } else {
            t.abort();
        }
    }
}

/// An election observer of the setup's name on the waiters' store, counting its reads.
fn observer(s: &Setup, reads: Arc<AtomicU64>) -> JoinHandle<()> {
    crate::testing::read_loop(s.waiters.clone(), s.name.clone(), reads)
}

/// An election observer (a read loop) parked before the acquirer: the release wakes
/// both, and the acquirer is granted at once.
pub async fn a_release_wakes_an_observer_parked_first_and_the_acquirer(f: &dyn WakeFixture) {
    let (s, lease) = held_lease(f, "wake-observer").await;
    let reads = Arc::new(AtomicU64::new(0));
    // The observer parks first: it is the longest waiting.
    let observer = observer(&s, reads.clone());
    parked(&s, 1).await;
    let task = acquirer(&s);
    parked(&s, 2).await;
    let (granted, took) = release_and_take(&s, lease, task).await;
    let woken = poll(Duration::from_secs(2), || reads.load(Ordering::SeqCst) >= 2).await;
    observer.abort();
    println!(
        "observer parked first: acquirer granted {took:?} after the release (observer reads: {})",
        reads.load(Ordering::SeqCst)
    );
    assert!(woken, "the observer was never woken by the release");
    granted.release().await.expect("release");
}

/// Two election observers parked behind the acquirer that takes the released lease:
/// each is woken and reads the record again, not only the waiter woken to claim it (by
/// the release; on a store that also pushes grants, perhaps by the grant just after).
pub async fn every_observer_is_woken_when_the_acquirer_takes_a_release(f: &dyn WakeFixture) {
    let (s, lease) = held_lease(f, "wake-observers").await;
    let task = acquirer(&s);
    parked(&s, 1).await;
    let reads: Vec<Arc<AtomicU64>> = (0..2).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let observers: Vec<_> = reads.iter().map(|r| observer(&s, r.clone())).collect();
    parked(&s, 3).await;
    let (granted, took) = release_and_take(&s, lease, task).await;
    let heard = poll(LIMIT, || reads.iter().all(|r| r.load(Ordering::SeqCst) >= 2)).await;
    let counts: Vec<u64> = reads.iter().map(|r| r.load(Ordering::SeqCst)).collect();
    for o in observers {
        o.abort();
    }
    println!("two observers behind the acquirer: granted {took:?} after the release; observer reads {counts:?}");
    assert!(
        heard,
        "an observer was not woken within {LIMIT:?} of the release (reads {counts:?})"
    );
    granted.release().await.expect("release");
}

/// A claimer woken by the release that neither claims nor waits again (it went away):
/// the wake-up passes to the next claimer, within the baton's pass time.
pub async fn a_wake_up_whose_waiter_went_away_is_passed_on(f: &dyn WakeFixture) {
    let (s, lease) = held_lease(f, "wake-gone").await;
    let woken = {
        let (store, name) = (s.waiters.clone(), s.name.clone());
        let seen = store.read(&name).await.expect("read").map(|c| c.version);
        tokio::spawn(async move {
            let at = Instant::now();
            let _ = store
                .wait_for_change(&name, seen.as_ref(), Wait::Claim(Duration::from_secs(60)))
                .await;
            at.elapsed()
        })
    };
    parked(&s, 1).await;
    let task = acquirer(&s);
    parked(&s, 2).await;
    let (granted, took) = release_and_take(&s, lease, task).await;
    let first_waited = woken.await.expect("first waiter");
    println!("first claimer gone after its wake-up: acquirer granted {took:?} after the release");
    assert!(
        first_waited < HOLDER_TTL,
        "the first claimer was not woken by the release ({first_waited:?})"
    );
    granted.release().await.expect("release");
}

/// Fifty waiters in one store while the holder keeps renewing a short lease for several
/// TTLs: only the first in line looks whether the lease ran out unreleased (about once
/// per TTL), not every waiter.
pub async fn fifty_waiters_look_for_an_unreleased_expiry_one_at_a_time(f: &dyn WakeFixture) {
    const WAITERS: u64 = 50;
    const TTL: Duration = Duration::from_millis(600);
    const TTLS: u32 = 4;
    let (s, lease) = held_lease_for(f, "wake-line", TTL).await;
    let tasks: Vec<_> = (0..WAITERS).map(|_| acquirer(&s)).collect();
    parked(&s, WAITERS).await;
    s.waiters.reset();
    tokio::time::sleep(TTL * TTLS).await;
    let calls = s.waiters.counts();
    println!("{WAITERS} waiters for {TTLS} TTLs of {TTL:?} while the holder renews: store calls {calls:?}");
    assert!(lease.is_valid(), "the holder lost its lease: the case measured nothing");
    assert!(
        tasks.iter().all(|t| !t.is_finished()),
        "a waiter returned while the lease was held"
    );
    // Every waiter looking at the holder's time left would be ~WAITERS * TTLS calls.
    assert!(
        calls.reads + calls.writes <= 3 * u64::from(TTLS),
        "waiters in line looked {} times in {TTLS} TTLs: {calls:?}",
        calls.reads + calls.writes
    );
    for t in tasks {
        t.abort();
    }
    lease.release().await.expect("release");
}

// Exported at the crate root by `macro_export` under a hidden name; users name it
// `conformance::wake_tests!`.
#[doc(hidden)]
#[macro_export]
macro_rules! __wake_tests {
    ($fixture:expr) => {
        $crate::__wake_tests!(@cases $fixture;
            one_release_wakes_one_of_fifty_waiters,
            a_release_wakes_an_observer_parked_first_and_the_acquirer,
            every_observer_is_woken_when_the_acquirer_takes_a_release,
            a_wake_up_whose_waiter_went_away_is_passed_on,
            fifty_waiters_look_for_an_unreleased_expiry_one_at_a_time);
    };
    (@cases $fixture:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let fixture = $fixture;
                $crate::conformance::wake::$case(&fixture).await;
            }
        )*
    };
}
