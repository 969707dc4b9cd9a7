//! Table 2: each operation through the library next to the bare store operation a
//! hand-written lock would send, interleaved sample by sample on the same server.
//!
//! - **acquire** of a free lease: `LeaseClient::try_acquire` on a released name (a
//!   pool of names, reused), against the floor's acquire of a free key.
//! - **release**: `Lease::release` of that lease, against the floor's release.
//! - For these two (and the takeover) a third side runs in the same rounds: the store
//!   crate's `CasStore::write` called alone (no lease client), which splits the
//!   library's cost into the client's part and the store operation's part.
//! - **renew**: the renewal the client's driver performs, `LeaseRecord::renewed` plus
//!   `CasStore::renew` on the store crate, against the floor's renewal. (The driver's
//!   scheduling around it is measured as CPU in the scale table.)
//! - **takeover** of an expired lease: crashed holders' leases are planted (untimed),
//!   the challenger looks at each once (untimed: on observation stores that starts its
//!   watch), everyone waits for the TTL, then each takeover is timed: `try_acquire`
//!   against the floor's takeover write, and against the store crate's claim of an
//!   expired record of its own planting (`write(Claimable)` where the store judges
//!   expiry, else `write(Version)` on the version it read). An attempt that finds the
//!   lease still held (the store has not expired it yet) is retried and not timed.
//!
//! Each round runs its sides in a random order; the first `warmup` rounds are not
//! recorded. One caller, back to back: ops/s is 1 / mean latency.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_core::testing::CountingStore;
use leasehold_core::{
    AcquireOutcome, ClientConfig, FencingToken, HolderId, LeaseName, Ttl,
    store::{CasOutcome, CasStore, LeaseRecord, Precondition, Version},
};

use serde::{Deserialize, Serialize};

use crate::backends::{Floor, holder_value};
use crate::stats::{Samples, Summary, time};
use crate::{Opened, Plan, Result, StoreKind, client_for, fail};

/// The four operations of table 2 (in the results file: `"acquire"`, `"renew"`,
/// `"release"`, `"takeover"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Acquire of a free (released) lease.
    Acquire,
    /// Renewal of a held lease.
    Renew,
    /// Release.
    Release,
    /// Takeover of an expired lease.
    Takeover,
}

impl Op {
    /// Report order.
    pub const ALL: [Op; 4] = [Op::Acquire, Op::Renew, Op::Release, Op::Takeover];

    /// The row label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Acquire => "acquire (free)",
            Self::Renew => "renew",
            Self::Release => "release",
            Self::Takeover => "takeover (expired)",
        }
    }
}

/// One operation: library against floor.
#[derive(Debug, Clone)]
pub struct OpResult {
    /// Which operation.
    pub op: Op,
    /// Through the library.
    pub library: Summary,
    /// The bare store operation.
    pub floor: Summary,
    /// The store crate's `CasStore` call alone, without the lease client (acquire and
    /// release only): separates the client's cost from the store operation's.
    pub direct: Option<Summary>,
    /// `CasStore` calls per library operation (mean over the recorded samples).
    pub store_calls: f64,
    /// Untimed attempts that found the lease not yet expired (takeover only):
    /// library, floor.
    pub retries: (usize, usize),
}

impl OpResult {
    /// `op` from its library and floor samples and the library's `calls` store calls
    /// in all.
    fn new(op: Op, library: &Samples, floor: &Samples, calls: u64) -> Self {
        Self {
            op,
            library: library.summary(),
            floor: floor.summary(),
            direct: None,
            store_calls: if library.is_empty() {
                0.0
            } else {
                calls as f64 / library.len() as f64
            },
            retries: (0, 0),
        }
    }

    /// With the samples of the store crate's call alone.
    fn with_direct(self, direct: &Samples) -> Self {
        Self {
            direct: Some(direct.summary()),
            ..self
        }
    }
}

/// Table 2 for one store.
#[derive(Debug, Clone)]
pub struct OverheadResult {
    /// The store.
    pub store: StoreKind,
    /// One entry per [`Op`], in [`Op::ALL`] order.
    pub ops: Vec<OpResult>,
    /// TTL of the planted leases in the takeover loop.
    pub takeover_ttl: Duration,
}

fn wall_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A pair's two sides in a random order: `true` = library.
fn order() -> [bool; 2] {
    if rand::random::<bool>() {
        [true, false]
    } else {
        [false, true]
    }
}

/// A random order of the sides of one round.
pub(crate) fn shuffle<T>(v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = rand::random_range(0..=i);
        v.swap(i, j);
    }
}

/// How the store crate alone claims a free name of its own: `Claimable` where the
/// store judges expiry (`store_clock`), else on the version its last release left
/// (`Absent` for a name not written yet).
pub(crate) fn free_name_claim(store_clock: bool, released: Option<Version>) -> Precondition {
    match (store_clock, released) {
        (true, _) => Precondition::Claimable,
        (false, None) => Precondition::Absent,
        (false, Some(v)) => Precondition::Version(v),
    }
}

/// Runs table 2 on `backend`.
///
/// # Errors
/// Store errors, or an outcome the loop did not expect (a free name found held).
pub async fn run(plan: &Plan, backend: &Opened) -> Result<OverheadResult> {
    let kind = backend.kind();
    let n = if kind.emulated() {
        plan.overhead_samples_emulated
    } else {
        plan.overhead_samples
    };
    let counting = CountingStore::new(backend.store().await?);
    let store: Arc<dyn CasStore> = Arc::new(counting.clone());
    let client = client_for(store.clone(), ClientConfig::default())?;
    let floor = backend.floor().await?;
    let ttl = plan.latency_ttl;

    // Acquire and release of a free lease: library, the store crate's call alone, floor.
    const POOL: usize = 8;
    let [mut la, mut lr, mut da, mut dr, mut ra, mut rr] = std::array::from_fn(|_| Samples::with_capacity(n));
    let (mut calls_acq, mut calls_rel) = (0u64, 0u64);
    let ttl_t = Ttl::new(ttl)?;
    let direct_holder = HolderId::new("bench-direct")?;
    let mut direct_versions: Vec<Option<Version>> = vec![None; POOL];
    let store_clock = store.capabilities().clock.is_store();
    for i in 0..plan.warmup + n {
        let keep = i >= plan.warmup;
        let mut sides = [0u8, 1, 2];
        shuffle(&mut sides);
        for side in sides {
            match side {
                0 => {
                    let name = format!("ovh/{}", i % POOL);
                    let c0 = counting.counts().round_trips();
                    let (ta, out) = time(client.try_acquire(&name, ttl)).await;
                    let AcquireOutcome::Granted(lease) = out? else {
                        return Err(fail(format!("{}: {name} was not free", kind.label())));
                    };
                    let c1 = counting.counts().round_trips();
                    let (tr, out) = time(lease.release()).await;
                    out?;
                    let c2 = counting.counts().round_trips();
                    if keep {
                        la.push(ta);
                        lr.push(tr);
                        calls_acq += c1 - c0;
                        calls_rel += c2 - c1;
                    }
                }
                1 => {
                    let name = LeaseName::new(format!("ovh-direct/{}", i % POOL))?;
                    let slot = &mut direct_versions[i % POOL];
                    let expect = free_name_claim(store_clock, slot.take());
                    let record = LeaseRecord::held(direct_holder.clone(), FencingToken::FIRST, ttl_t);
                    let (ta, out) = time(store.write(&name, &expect, &record)).await;
                    let CasOutcome::Written(held) = out? else {
                        return Err(fail(format!("{}: direct write on {name} conflicted", kind.label())));
                    };
                    let vacant = held.record.vacated();
                    let (tr, out) = time(store.write(&name, &Precondition::Version(held.version), &vacant)).await;
                    let CasOutcome::Written(released) = out? else {
                        return Err(fail(format!("{}: direct release of {name} conflicted", kind.label())));
                    };
                    *slot = Some(released.version);
                    if keep {
                        da.push(ta);
                        dr.push(tr);
                    }
                }
                _ => {
                    let key = format!("ovh-{}", i % POOL);
                    let (ta, lock) = time(floor.acquire(&key, &holder_value(), ttl)).await;
                    let (tr, out) = time(floor.release(lock?)).await;
                    out?;
                    if keep {
                        ra.push(ta);
                        rr.push(tr);
                    }
                }
            }
        }
    }
    let acquire = OpResult::new(Op::Acquire, &la, &ra, calls_acq).with_direct(&da);
    let release = OpResult::new(Op::Release, &lr, &rr, calls_rel).with_direct(&dr);

    let renew = renewals(plan, n, &counting, &store, floor.as_ref(), ttl).await?;

    // Takeover: the planted leases must outlive planting and observing them all.
    let m = if kind.emulated() {
        plan.takeover_samples_emulated
    } else {
        plan.takeover_samples
    };
    let per_op = acquire.library.p50.max(acquire.floor.p50).max(Duration::from_millis(1));
    let tk_ttl =
        (per_op * u32::try_from(12 * m).unwrap_or(u32::MAX) + Duration::from_millis(300)).min(Duration::from_secs(30));
    let tk_ttl = Duration::from_millis(u64::try_from(tk_ttl.as_millis()).unwrap_or(30_000));
    let takeover = takeovers(backend, &counting, &client, floor.as_ref(), m, tk_ttl, ttl).await?;

    Ok(OverheadResult {
        store: kind,
        ops: vec![acquire, renew, release, takeover],
        takeover_ttl: tk_ttl,
    })
}

async fn renewals(
    plan: &Plan,
    n: usize,
    counting: &CountingStore<Arc<dyn CasStore>>,
    store: &Arc<dyn CasStore>,
    floor: &dyn Floor,
    ttl: Duration,
) -> Result<OpResult> {
    let name = LeaseName::new("ovh/renew")?;
    let ttl_t = Ttl::new(ttl)?;
    let record = LeaseRecord::held(HolderId::new("bench-renewer")?, FencingToken::FIRST, ttl_t);
    let expect = if store.capabilities().clock.is_store() {
        Precondition::Claimable
    } else {
        Precondition::Absent
    };
    let CasOutcome::Written(mut held) = store.write(&name, &expect, &record).await? else {
        return Err(fail("the renewal record could not be written"));
    };
    let mut raw = floor.acquire("ovh-renew", &holder_value(), ttl).await?;
    let (mut lib, mut flo) = (Samples::with_capacity(n), Samples::with_capacity(n));
    let mut calls = 0u64;
    for i in 0..plan.warmup + n {
        let keep = i >= plan.warmup;
        for is_lib in order() {
            if is_lib {
                let c0 = counting.counts().round_trips();
                let (t, out) = time(async {
                    let rec = held.record.renewed(ttl_t, wall_now_ms());
                    store.renew(&name, &held.version, &rec).await
                })
                .await;
                let CasOutcome::Written(s) = out? else {
                    return Err(fail("library renewal conflicted"));
                };
                held = s;
                if keep {
                    lib.push(t);
                    calls += counting.counts().round_trips() - c0;
                }
            } else {
                let (t, out) = time(floor.renew(&mut raw, ttl)).await;
                out?;
                if keep {
                    flo.push(t);
                }
            }
        }
    }
    store
        .write(
            &name,
            &Precondition::Version(held.version.clone()),
            &held.record.vacated(),
        )
        .await?;
    floor.release(raw).await?;
    Ok(OpResult::new(Op::Renew, &lib, &flo, calls))
}

async fn takeovers(
    backend: &Opened,
    counting: &CountingStore<Arc<dyn CasStore>>,
    client: &leasehold_core::LeaseClient,
    floor: &dyn Floor,
    m: usize,
    planted_ttl: Duration,
    ttl: Duration,
) -> Result<OpResult> {
    // A second store instance plays the crashed holders: it writes and never renews.
    let victim = backend.store().await?;
    let expect = if victim.capabilities().clock.is_store() {
        Precondition::Claimable
    } else {
        Precondition::Absent
    };
    let crashed = LeaseRecord::held(
        HolderId::new("bench-crashed")?,
        FencingToken::FIRST,
        Ttl::new(planted_ttl)?,
    );
    let names: Vec<String> = (0..m).map(|i| format!("tko/{i}")).collect();
    let direct: Vec<LeaseName> = (0..m)
        .map(|i| LeaseName::new(format!("tko-direct/{i}")))
        .collect::<std::result::Result<_, _>>()?;
    let keys: Vec<String> = (0..m).map(|i| format!("tko-{i}")).collect();
    for ((name, direct), key) in names.iter().zip(&direct).zip(&keys) {
        for name in [&LeaseName::new(name)?, direct] {
            let CasOutcome::Written(_) = victim.write(name, &expect, &crashed).await? else {
                return Err(fail(format!("could not plant {name}")));
            };
        }
        floor.plant(key, planted_ttl).await?;
    }
    // The challenger's first look (starts its watch on observation stores).
    let mut seen = Vec::with_capacity(m);
    for (name, key) in names.iter().zip(&keys) {
        match client.try_acquire(name, ttl).await? {
            AcquireOutcome::Held { .. } => {}
            AcquireOutcome::Granted(_) => {
                return Err(fail(format!(
                    "{name} expired before it was observed: planting took longer than its TTL {planted_ttl:?}"
                )));
            }
        }
        seen.push(floor.observe(key).await?);
    }
    // The store crate's own claim: on the version it read where the client judges expiry.
    let mut direct_expect = Vec::with_capacity(m);
    for name in &direct {
        direct_expect.push(if expect == Precondition::Claimable {
            Precondition::Claimable
        } else {
            let Some(stored) = counting.read(name).await? else {
                return Err(fail(format!("{name} vanished after planting")));
            };
            Precondition::Version(stored.version)
        });
    }
    let direct_record = LeaseRecord::held(HolderId::new("bench-direct")?, FencingToken::FIRST, Ttl::new(ttl)?);
    let watched = Instant::now();
    // The observation window is TTL + 5% (the default margin).
    tokio::time::sleep_until((watched + planted_ttl + planted_ttl / 20 + Duration::from_millis(20)).into()).await;

    let [mut lib, mut flo, mut dir] = std::array::from_fn(|_| Samples::with_capacity(m));
    let (mut lib_retries, mut flo_retries) = (0usize, 0usize);
    let mut calls = 0u64;
    let deadline = Instant::now() + planted_ttl + Duration::from_secs(20);
    for i in 0..m {
        let mut sides = [0u8, 1, 2];
        shuffle(&mut sides);
        for side in sides {
            loop {
                if Instant::now() > deadline {
                    return Err(fail(format!(
                        "takeover {i} still refused 20 s after the planted TTL ran out"
                    )));
                }
                if side == 0 {
                    let c0 = counting.counts().round_trips();
                    let (t, out) = time(client.try_acquire(&names[i], ttl)).await;
                    match out? {
                        AcquireOutcome::Granted(lease) => {
                            calls += counting.counts().round_trips() - c0;
                            lib.push(t);
                            lease.release().await?;
                            break;
                        }
                        AcquireOutcome::Held { retry_after, .. } => {
                            lib_retries += 1;
                            tokio::time::sleep(retry_after.clamp(Duration::from_millis(5), Duration::from_millis(50)))
                                .await;
                        }
                    }
                } else if side == 1 {
                    let (t, out) = time(counting.write(&direct[i], &direct_expect[i], &direct_record)).await;
                    match out? {
                        CasOutcome::Written(held) => {
                            dir.push(t);
                            let vacant = held.record.vacated();
                            let CasOutcome::Written(_) = counting
                                .write(&direct[i], &Precondition::Version(held.version), &vacant)
                                .await?
                            else {
                                return Err(fail(format!("direct release of {} conflicted", direct[i])));
                            };
                            break;
                        }
                        // Not expired yet by the store's clock: retried, not timed.
                        CasOutcome::Conflict(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                } else {
                    let (t, out) = time(floor.takeover(&keys[i], &seen[i], &holder_value(), ttl)).await;
                    match out? {
                        Some(lock) => {
                            flo.push(t);
                            floor.release(lock).await?;
                            break;
                        }
                        None => {
                            flo_retries += 1;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
            }
        }
    }
    drop(victim);
    Ok(OpResult {
        retries: (lib_retries, flo_retries),
        ..OpResult::new(Op::Takeover, &lib, &flo, calls).with_direct(&dir)
    })
}
