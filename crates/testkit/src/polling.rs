//! The polling stores' waiting case (S3, DynamoDB): a waiter looks again every poll
//! interval, so it sees a release within one, at about one request per interval.

use std::time::Duration;

use leasehold_core::LeaseClient;
use leasehold_core::store::Linearizable;
use leasehold_core::testing::CountingStore;
use tokio::time::Instant;

use crate::waiters::{parked, spawn_acquire};

/// A holder's TTL far above the poll interval: a waiter that only looked at the end of
/// the holder's observation window would miss every bound below.
const TTL: Duration = Duration::from_secs(30);

/// How many intervals the waiter's requests are counted over while the lease is held.
const COUNTED: u32 = 5;

/// `holder` and `waiter` are stores on the same records, the waiter's with a poll
/// interval of `interval`: while the lease is held the waiter costs about one request
/// per interval, and after the release it is granted within about one interval.
pub async fn a_waiter_sees_a_release_within_its_poll_interval<S>(holder: S, waiter: S, name: &str, interval: Duration)
where
    S: Linearizable + Clone + 'static,
{
    let held = LeaseClient::new(holder)
        .acquire(name, TTL)
        .await
        .unwrap_or_else(|e| panic!("holder: {e}"));
    let counted = CountingStore::new(waiter);
    let task = spawn_acquire(LeaseClient::new(counted.clone()), name, TTL, Duration::from_secs(20));
    parked(&counted, 1, Duration::from_secs(10), "the waiter").await;
    counted.reset();
    let window = interval * COUNTED;
    tokio::time::sleep(window).await;
    let looks = counted.counts().reads + counted.counts().writes;
    assert!(!task.is_finished(), "the waiter returned while the lease was held");
    assert!(
        (u64::from(COUNTED) - 2..=u64::from(COUNTED) + 2).contains(&looks),
        "{looks} requests in {COUNTED} poll intervals of {interval:?}: {:?}",
        counted.counts()
    );
    let released = Instant::now();
    held.release().await.expect("release");
    let granted = task
        .await
        .expect("task")
        .unwrap_or_else(|e| panic!("the waiter was not granted the released lease: {e}"));
    let took = released.elapsed();
    println!(
        "poll interval {interval:?}: {looks} requests in {window:?} while held; granted {took:?} after the release"
    );
    assert!(
        took < interval + Duration::from_secs(1),
        "granted {took:?} after the release, with a poll interval of {interval:?}"
    );
    granted.release().await.expect("release");
}
