//! Table 3: the library against the lock people use instead, on the same server, in
//! the same run: `rslock` on Redis, etcd's lock RPC with an explicit lease, sqlx's
//! `PgAdvisoryLock` on Postgres. One cycle = acquire a free lock, then release it;
//! the library's and the peer's cycles alternate in a random order per pair. On Redis a
//! third side, the fenced floor (the least a lock with a fencing token sends), runs in
//! the same rounds, so that what the token costs and what the library adds to it are
//! told apart.

use std::time::Duration;

use async_trait::async_trait;
use leasehold_core::{AcquireOutcome, ClientConfig, LeaseClient};

use crate::overhead::shuffle;
use crate::stats::{Samples, Summary, time};
use crate::{Backend, Opened, Plan, Result, StoreKind, client_for, fail};

/// One side of a comparison.
#[async_trait]
pub trait Cycle: Send + Sync {
    /// Acquires a free lock (the `i`-th of the run) and releases it: (acquire, release).
    async fn cycle(&self, i: usize) -> Result<(Duration, Duration)>;
}

/// The library's side: `try_acquire` of a free lease, then `Lease::release`.
#[derive(Debug)]
pub struct LibraryCycle {
    client: LeaseClient,
    names: Vec<String>,
    ttl: Duration,
}

/// Names each side of a comparison cycles over.
pub const POOL: usize = 16;

impl LibraryCycle {
    /// Cycles over `pool` names under `prefix` with leases of `ttl`.
    pub fn new(client: LeaseClient, prefix: &str, pool: usize, ttl: Duration) -> Self {
        Self {
            client,
            names: (0..pool.max(1)).map(|i| format!("{prefix}/{i}")).collect(),
            ttl,
        }
    }

    /// The library's side against a peer on `backend`'s server: a client on a store
    /// instance of its own, [`POOL`] names, leases of the plan's latency TTL.
    ///
    /// # Errors
    /// The store cannot be opened.
    pub async fn on(backend: &dyn Backend, plan: &Plan) -> Result<Self> {
        let client = client_for(backend.store().await?, ClientConfig::default())?;
        Ok(Self::new(client, "peer/lib", POOL, plan.latency_ttl))
    }
}

#[async_trait]
impl Cycle for LibraryCycle {
    async fn cycle(&self, i: usize) -> Result<(Duration, Duration)> {
        let name = &self.names[i % self.names.len()];
        let (acq, out) = time(self.client.try_acquire(name, self.ttl)).await;
        let AcquireOutcome::Granted(lease) = out? else {
            return Err(fail(format!("library: {name} was not free")));
        };
        let (rel, out) = time(lease.release()).await;
        out?;
        Ok((acq, rel))
    }
}

/// The library against one peer.
#[derive(Debug, Clone)]
pub struct PeerResult {
    /// The store both run on.
    pub store: StoreKind,
    /// The peer (crate, version, calls).
    pub peer: String,
    /// Library: acquire, release, whole cycle.
    pub library: [Summary; 3],
    /// Peer: acquire, release, whole cycle.
    pub other: [Summary; 3],
    /// Where the library's writes are durable and the peer's are not (Postgres): one
    /// durable write, then the same write without waiting for its WAL flush, measured
    /// interleaved.
    pub flush: Option<[Summary; 2]>,
    /// Where the library issues a fencing token and the peer does not (Redis): the least
    /// a fenced lock sends (acquire, release, whole cycle), interleaved with both sides.
    pub fenced_floor: Option<[Summary; 3]>,
}

/// Runs the peer comparison of `backend`, if its store has a peer.
///
/// # Errors
/// A store or peer error, or a lock that was not free.
pub async fn run(plan: &Plan, backend: &Opened) -> Result<Option<PeerResult>> {
    backend.peer(plan).await
}

/// Alternates `lib` and `peer` cycles (random order per pair) and summarizes them.
///
/// # Errors
/// The first failing cycle.
pub async fn compare(
    plan: &Plan,
    store: StoreKind,
    peer_name: &str,
    lib: &dyn Cycle,
    peer: &dyn Cycle,
) -> Result<PeerResult> {
    let [library, other] = interleave(plan, [lib, peer]).await?;
    Ok(PeerResult {
        store,
        peer: peer_name.to_owned(),
        library,
        other,
        flush: None,
        fenced_floor: None,
    })
}

/// Runs the `N` sides' cycles in a random order per round, [`Plan::peer_cycles`] rounds
/// after the warm-up, and summarizes each side: acquire, release, whole cycle.
///
/// # Errors
/// The first failing cycle.
pub async fn interleave<const N: usize>(plan: &Plan, sides: [&dyn Cycle; N]) -> Result<[[Summary; 3]; N]> {
    let n = plan.peer_cycles;
    let mut samples: [[Samples; 3]; N] = std::array::from_fn(|_| std::array::from_fn(|_| Samples::with_capacity(n)));
    let mut order: [usize; N] = std::array::from_fn(|k| k);
    for i in 0..plan.warmup + n {
        shuffle(&mut order);
        for &k in &order {
            let (acquire, release) = sides[k].cycle(i).await?;
            if i >= plan.warmup {
                let [a, r, c] = &mut samples[k];
                a.push(acquire);
                r.push(release);
                c.push(acquire + release);
            }
        }
    }
    Ok(samples.map(|[a, r, c]| [a.summary(), r.summary(), c.summary()]))
}
