//! Table 4: one process holding many leases on one client while its driver renews
//! them. After every lease was granted, half a renewal interval (a third of the TTL)
//! passes, then two whole intervals are measured: CPU time of the whole process
//! (client, driver, store driver) over wall time, resident memory per held lease, and
//! the leases renewed and the store requests sent per second (counted with
//! `CountingStore`; expected renewals: leases ÷ interval; a store that batches renewals
//! sends fewer requests than renewals).
//!
//! Each configuration runs in a fresh child process (the `leasehold-bench` binary with
//! `--scale-child`) when [`Plan::child_exe`] names one, so its baseline memory and CPU
//! are not those of the benchmarks that ran before it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use leasehold_core::testing::CountingStore;
use leasehold_core::{AcquireOutcome, ClientConfig, Lease, store::CasStore};

use crate::machine::{cpu_between, cpu_now, rss_bytes};
use crate::{Opened, Plan, Result, StoreKind, client_for, fail};

/// One row of table 4.
#[derive(Debug, Clone)]
pub struct ScaleResult {
    /// The store.
    pub store: StoreKind,
    /// Leases held.
    pub leases: usize,
    /// Their TTL.
    pub ttl: Duration,
    /// How long granting them all took.
    pub acquire_time: Duration,
    /// The measured window (two renewal intervals).
    pub window: Duration,
    /// Process CPU time over the window, as a share of one core.
    pub cpu_share: f64,
    /// Resident memory added per held lease (RSS at the end of the renewal window, or
    /// right after granting if larger, minus RSS before granting, ÷ leases).
    pub rss_per_lease: f64,
    /// Store requests per second counted in the window (a batch of renewals is one).
    pub ops_per_sec: f64,
    /// Leases renewed per second in the window.
    pub renewals_per_sec: f64,
    /// leases ÷ renewal interval.
    pub expected_ops_per_sec: f64,
    /// Leases lost during the window (should be zero).
    pub lost: usize,
}

/// Holds `leases` leases on one client of `backend` and measures one renewal interval.
///
/// # Errors
/// Store errors, or a lease that could not be granted.
pub async fn run(plan: &Plan, backend: &Opened, leases: usize) -> Result<ScaleResult> {
    let counting = CountingStore::new(backend.store().await?);
    let store: Arc<dyn CasStore> = Arc::new(counting.clone());
    let client = client_for(store, ClientConfig::default())?;
    let ttl = plan.scale_ttl;
    let rss0 = rss_bytes();
    let started = Instant::now();
    let held: Vec<Result<Lease>> = futures::stream::iter(0..leases)
        .map(|i| {
            let client = client.clone();
            async move {
                match client.try_acquire(format!("scale/{leases}/{i}"), ttl).await? {
                    AcquireOutcome::Granted(l) => Ok(l),
                    AcquireOutcome::Held { .. } => Err(fail(format!("scale lease {i} was not free"))),
                }
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let held = held.into_iter().collect::<Result<Vec<Lease>>>()?;
    let acquire_time = started.elapsed();
    let rss1 = rss_bytes();

    let interval = ttl / 3;
    // Half an interval: the window then starts between two bursts of renewals.
    tokio::time::sleep(interval / 2).await;
    let window = interval * 2;
    let before = counting.counts();
    let (cpu0, t0) = (cpu_now(), Instant::now());
    tokio::time::sleep(window).await;
    let (cpu1, wall) = (cpu_now(), t0.elapsed());
    let after = counting.counts();
    // Memory while renewing: at the end of the window (the larger of the two readings).
    let rss1 = rss1.max(rss_bytes());
    let lost = held.iter().filter(|l| !l.is_valid()).count();

    let ops = (after.round_trips() - before.round_trips()) as f64;
    let result = ScaleResult {
        store: backend.kind(),
        leases,
        ttl,
        acquire_time,
        window: wall,
        cpu_share: cpu_between(cpu0, cpu1).as_secs_f64() / wall.as_secs_f64(),
        rss_per_lease: rss1.saturating_sub(rss0) as f64 / leases as f64,
        ops_per_sec: ops / wall.as_secs_f64(),
        renewals_per_sec: (after.renewals - before.renewals) as f64 / wall.as_secs_f64(),
        expected_ops_per_sec: leases as f64 / interval.as_secs_f64(),
        lost,
    };
    let released: Vec<leasehold_core::Result<()>> = futures::stream::iter(held)
        .map(Lease::release)
        .buffer_unordered(64)
        .collect()
        .await;
    released.into_iter().collect::<leasehold_core::Result<Vec<()>>>()?;
    Ok(result)
}

/// The line a `--scale-child` process prints, read back by [`run_in_child`].
pub const CHILD_PREFIX: &str = "lease-bench-scale:";

/// Formats a result for the parent process.
pub fn to_line(r: &ScaleResult) -> String {
    format!(
        "{CHILD_PREFIX} leases={} ttl_ms={} acquire_us={} window_us={} cpu_share={} rss_per_lease={} ops_per_sec={} \
         renewals_per_sec={} expected={} lost={}",
        r.leases,
        r.ttl.as_millis(),
        r.acquire_time.as_micros(),
        r.window.as_micros(),
        r.cpu_share,
        r.rss_per_lease,
        r.ops_per_sec,
        r.renewals_per_sec,
        r.expected_ops_per_sec,
        r.lost
    )
}

fn from_line(store: StoreKind, line: &str) -> Result<ScaleResult> {
    let rest = line
        .strip_prefix(CHILD_PREFIX)
        .ok_or_else(|| fail(format!("not a scale result: {line:?}")))?;
    let field = |k: &str| -> Result<&str> {
        rest.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
            .ok_or_else(|| fail(format!("scale result without {k}: {line:?}")))
    };
    let num = |k: &str| -> Result<f64> { Ok(field(k)?.parse::<f64>()?) };
    let int = |k: &str| -> Result<u64> { Ok(field(k)?.parse::<u64>()?) };
    Ok(ScaleResult {
        store,
        leases: usize::try_from(int("leases")?)?,
        ttl: Duration::from_millis(int("ttl_ms")?),
        acquire_time: Duration::from_micros(int("acquire_us")?),
        window: Duration::from_micros(int("window_us")?),
        cpu_share: num("cpu_share")?,
        rss_per_lease: num("rss_per_lease")?,
        ops_per_sec: num("ops_per_sec")?,
        renewals_per_sec: num("renewals_per_sec")?,
        expected_ops_per_sec: num("expected")?,
        lost: usize::try_from(int("lost")?)?,
    })
}

/// Runs one configuration in a fresh `exe --scale-child <store> <leases> <ttl ms>`
/// process (same environment) and reads its result line.
///
/// # Errors
/// The child failed or printed no result.
pub async fn run_in_child(exe: &Path, plan: &Plan, store: StoreKind, leases: usize) -> Result<ScaleResult> {
    let out = tokio::process::Command::new(exe)
        .arg("--scale-child")
        .arg(store.key())
        .arg(leases.to_string())
        .arg(plan.scale_ttl.as_millis().to_string())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| fail(format!("cannot run {}: {e}", exe.display())))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(fail(format!(
            "scale child ({} {leases}) failed: {}\n{}",
            store.key(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let line = stdout
        .lines()
        .find(|l| l.starts_with(CHILD_PREFIX))
        .ok_or_else(|| fail(format!("scale child printed no result: {stdout}")))?;
    from_line(store, line)
}
