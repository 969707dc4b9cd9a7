//! Table 6: M workers, each with its own client on one shared store instance, loop
//! `try_acquire` + `release` for a fixed time, on K names: K = M (each worker its own
//! name) or K = 1 (one hot name). A refused attempt (`Held`) is retried at once.
//! Grants per second, refused attempts per grant, and store round trips per grant.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use leasehold_core::testing::CountingStore;
use leasehold_core::{AcquireOutcome, ClientConfig, store::CasStore};

use crate::{Opened, Plan, Result, StoreKind, client_for, fail};

/// One row of table 6.
#[derive(Debug, Clone)]
pub struct ContentionResult {
    /// The store.
    pub store: StoreKind,
    /// Workers.
    pub workers: usize,
    /// Lease names (workers, or 1 for the hot name).
    pub names: usize,
    /// Measured time.
    pub elapsed: Duration,
    /// Grants.
    pub grants: u64,
    /// Refused attempts.
    pub refused: u64,
    /// Attempts that failed with a store error (retried).
    pub errors: u64,
    /// `CasStore` round trips in total.
    pub round_trips: u64,
}

impl ContentionResult {
    /// Grants per second.
    pub fn grants_per_sec(&self) -> f64 {
        self.grants as f64 / self.elapsed.as_secs_f64()
    }

    /// Refused attempts per grant.
    pub fn refused_per_grant(&self) -> f64 {
        if self.grants == 0 {
            f64::INFINITY
        } else {
            self.refused as f64 / self.grants as f64
        }
    }

    /// Store round trips per grant.
    pub fn trips_per_grant(&self) -> f64 {
        if self.grants == 0 {
            f64::INFINITY
        } else {
            self.round_trips as f64 / self.grants as f64
        }
    }
}

#[derive(Default)]
struct Tally {
    grants: AtomicU64,
    refused: AtomicU64,
    errors: AtomicU64,
}

/// Runs one configuration (`hot`: one name for all workers).
///
/// # Errors
/// Store errors while setting up, or a run with no grant at all.
pub async fn run(plan: &Plan, backend: &Opened, hot: bool) -> Result<ContentionResult> {
    let counting = CountingStore::new(backend.store().await?);
    let store: Arc<dyn CasStore> = Arc::new(counting.clone());
    let workers = plan.contention_workers;
    let names = if hot { 1 } else { workers };
    let tally = Arc::new(Tally::default());
    let ttl = Duration::from_secs(10);
    let before = counting.counts();
    let started = Instant::now();
    let deadline = started + plan.contention_duration;
    let mut tasks = Vec::with_capacity(workers);
    for w in 0..workers {
        let client = client_for(store.clone(), ClientConfig::default())?;
        let tally = tally.clone();
        let name = format!("contention/{}/{}", if hot { "hot" } else { "cold" }, w % names);
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                match client.try_acquire(&name, ttl).await {
                    Ok(AcquireOutcome::Granted(lease)) => {
                        tally.grants.fetch_add(1, Ordering::Relaxed);
                        if lease.release().await.is_err() {
                            tally.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(AcquireOutcome::Held { .. }) => {
                        tally.refused.fetch_add(1, Ordering::Relaxed);
                        tokio::task::yield_now().await;
                    }
                    Err(_) => {
                        tally.errors.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| fail(format!("contention worker: {e}")))?;
    }
    let elapsed = started.elapsed();
    let after = counting.counts();
    let result = ContentionResult {
        store: backend.kind(),
        workers,
        names,
        elapsed,
        grants: tally.grants.load(Ordering::Relaxed),
        refused: tally.refused.load(Ordering::Relaxed),
        errors: tally.errors.load(Ordering::Relaxed),
        round_trips: after.round_trips() - before.round_trips(),
    };
    if result.grants == 0 {
        return Err(fail(format!("{}: no grant in {elapsed:?}", backend.kind().label())));
    }
    Ok(result)
}
