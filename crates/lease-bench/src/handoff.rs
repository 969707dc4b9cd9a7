//! Table 5: N waiters blocked in `LeaseClient::acquire` on one lease, handing it on.
//!
//! N + 1 participants, each with its own client, all on one shared store instance (one
//! etcd watch, one Postgres `LISTEN` connection, one Redis subscriber), counted with
//! `CountingStore`. One holds the lease for a moment and releases it; the time from the
//! start of that release until the next participant holds it is one *handoff*. The
//! releaser sits out until someone else was granted the lease, then waits again, so
//! exactly N participants are waiting at every release. Store calls per handoff
//! include everything every participant sent while the handoffs were timed (polling
//! during the holds included).

use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_core::testing::CountingStore;
use leasehold_core::{AcquireOutcome, ClientConfig, store::CasStore};
use tokio::sync::{mpsc, watch};

use crate::stats::{Samples, Summary};
use crate::{Opened, Plan, Result, StoreKind, client_for, fail};

/// One row of table 5.
#[derive(Debug, Clone)]
pub struct HandoffResult {
    /// The store.
    pub store: StoreKind,
    /// Waiters at each release.
    pub waiters: usize,
    /// Whether the store pushes changes to waiters (watch, notify, pub/sub).
    pub notifies: bool,
    /// Release-to-next-grant latencies.
    pub latency: Summary,
    /// `CasStore` round trips (reads, writes, renewals) per handoff.
    pub calls_per_handoff: f64,
    /// `wait_for_change` calls per handoff (watch / notification waits started).
    pub waits_per_handoff: f64,
    /// The lease TTL.
    pub ttl: Duration,
}

enum Event {
    Granted(Instant),
    Releasing(Instant),
    Failed(String),
}

/// Runs the handoff chain with `waiters` waiters on `backend`.
///
/// # Errors
/// Store errors, or a handoff that did not happen within a few TTLs.
pub async fn run(plan: &Plan, backend: &Opened, waiters: usize) -> Result<HandoffResult> {
    let counting = CountingStore::new(backend.store().await?);
    let store: Arc<dyn CasStore> = Arc::new(counting.clone());
    let notifies = store.capabilities().notifies_waiters;
    let ttl = plan.handoff_ttl;
    let hold = plan.handoff_hold;
    let name = format!("handoff/{waiters}");

    // The first holder keeps the lease until every participant has tried once.
    let first = client_for(store.clone(), ClientConfig::default())?;
    let AcquireOutcome::Granted(initial) = first.try_acquire(&name, ttl).await? else {
        return Err(fail(format!("{name} was not free")));
    };
    let (events, mut rx) = mpsc::unbounded_channel::<Event>();
    let (grants_tx, grants) = watch::channel(0u64);
    let grants_tx = Arc::new(grants_tx);
    let before = counting.counts();
    let mut tasks = Vec::with_capacity(waiters + 1);
    for _ in 0..=waiters {
        let client = client_for(store.clone(), ClientConfig::default())?;
        let (events, name, grants_tx, mut grants) = (events.clone(), name.clone(), grants_tx.clone(), grants.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let lease = match client.acquire(&name, ttl).await {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = events.send(Event::Failed(e.to_string()));
                        return;
                    }
                };
                let _ = events.send(Event::Granted(Instant::now()));
                let mine = {
                    let mut n = 0;
                    grants_tx.send_modify(|g| {
                        *g += 1;
                        n = *g;
                    });
                    n
                };
                tokio::time::sleep(hold).await;
                let _ = events.send(Event::Releasing(Instant::now()));
                if let Err(e) = lease.release().await {
                    let _ = events.send(Event::Failed(e.to_string()));
                    return;
                }
                // Sit out until someone else holds it: N stay waiting at each release.
                if grants.wait_for(|g| *g > mine).await.is_err() {
                    return;
                }
            }
        }));
    }
    let settle = Instant::now() + Duration::from_secs(60);
    let participants = u64::try_from(waiters + 1).unwrap_or(u64::MAX);
    while counting.counts().round_trips() - before.round_trips() < participants {
        if Instant::now() > settle {
            return Err(fail(format!("{waiters} waiters did not all try within 60 s")));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;

    let handoffs = plan.handoff_max;
    let mut latency = Samples::with_capacity(handoffs);
    let start = counting.counts();
    let mut released_at = Instant::now();
    initial.release().await?;
    let wait = ttl * 4 + Duration::from_secs(10);
    let outcome: Result<()> = async {
        while latency.len() < handoffs {
            let ev = tokio::time::timeout(wait, rx.recv())
                .await
                .map_err(|_| fail(format!("no handoff of {name} within {wait:?}")))?
                .ok_or_else(|| fail("participants gone"))?;
            match ev {
                Event::Granted(t) => latency.push(t.saturating_duration_since(released_at)),
                Event::Releasing(t) => released_at = t,
                Event::Failed(e) => return Err(fail(format!("participant failed: {e}"))),
            }
        }
        Ok(())
    }
    .await;
    let end = counting.counts();
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    outcome?;
    let h = handoffs as f64;
    Ok(HandoffResult {
        store: backend.kind(),
        waiters,
        notifies,
        latency: latency.summary(),
        calls_per_handoff: (end.round_trips() - start.round_trips()) as f64 / h,
        waits_per_handoff: (end.waits - start.waits) as f64 / h,
        ttl,
    })
}
