//! What the lease client costs the caller's process in CPU, on top of the store crate's
//! own calls: the "lease client" term of table 1 ([`crate::overhead`]) measured as CPU
//! time instead of latency, so that waiting for a time slice does not count.
//!
//! Two sides, each a round of `pairs` acquire + release pairs of a free name, the sides
//! in a random order in every round:
//!
//! - **library**: `LeaseClient::try_acquire`, then `Lease::release`;
//! - **store alone**: what the library sends, without it: `CasStore::write` of the same
//!   grant (`Claimable` where the store judges expiry, else on the version the last
//!   release left), then `CasStore::release`.
//!
//! A round's CPU is the whole process's (the caller, the runtime's workers, the store
//! client's own tasks; not the store server's), read before and after the round
//! ([`crate::machine::cpu_now`]), so nothing else may run in this process meanwhile;
//! other work on the same cores raises it too (on a 2-core machine running a torture
//! run beside it, MemoryStore's library side once took twice its quiet figure), so it
//! is run on a quiet machine.
//!
//! Each acquire and each release is also timed on its own. With an idle time (`--idle-us
//! N`), the caller's thread sleeps that long before each operation, outside the timing
//! and the CPU that counts: the thread parks and its core may idle, as when a caller
//! waits for a store's reply; on MemoryStore this shows what the same code costs when
//! it runs on a core that has just woken, with no store client beside it. CPU time is
//! then not read (the sleeps' own system calls would count in it).
//! Run by `leasehold-bench client-cpu STORE [ROUNDS] [PAIRS] [--idle-us N]`; not part
//! of `scripts/bench.sh`'s results.

use std::time::Duration;

use leasehold_core::store::{CasOutcome, Version};
use leasehold_core::{AcquireOutcome, ClientConfig, FencingToken, HolderId, LeaseName, Ttl, store::LeaseRecord};

use crate::machine::{cpu_between, cpu_now};
use crate::overhead::{free_name_claim, shuffle};
use crate::stats::{Samples, time};
use crate::{Opened, Result, client_for, fail};

/// The names each side cycles through.
const POOL: usize = 8;

/// One side's figures.
#[derive(Debug, Clone)]
pub struct SideCpu {
    /// What the side sends.
    pub label: &'static str,
    /// CPU time of the process per operation (half a pair), µs, one value per round
    /// (none with an idle time: the sleeps' system calls would count).
    pub cpu_per_op_us: Vec<f64>,
    /// Latency of each pair.
    pub pairs: Samples,
    /// Latency of each acquire (the store crate's grant write, on that side).
    pub acquires: Samples,
    /// Latency of each release.
    pub releases: Samples,
}

impl SideCpu {
    fn new(label: &'static str, rounds: usize, pairs: usize) -> Self {
        Self {
            label,
            cpu_per_op_us: Vec::with_capacity(rounds),
            pairs: Samples::with_capacity(rounds * pairs),
            acquires: Samples::with_capacity(rounds * pairs),
            releases: Samples::with_capacity(rounds * pairs),
        }
    }

    /// The median CPU per operation over the rounds, µs.
    pub fn median_cpu_us(&self) -> f64 {
        crate::stats::median(&self.cpu_per_op_us)
    }
}

/// Runs `rounds` rounds of `pairs` pairs per side on `backend`'s store, and returns the
/// library's side, then the store crate's alone. With a non-zero `idle`, the thread
/// sleeps that long before each operation (not timed).
///
/// # Errors
/// Store errors, or a free name found held.
pub async fn measure(backend: &Opened, rounds: usize, pairs: usize, idle: Duration) -> Result<[SideCpu; 2]> {
    let store = backend.store().await?;
    let client = client_for(store.clone(), ClientConfig::default())?;
    let ttl = Duration::from_secs(30);
    let ttl_t = Ttl::new(ttl)?;
    let holder = HolderId::new("bench-cpu-direct")?;
    let store_clock = store.capabilities().clock.is_store();
    let mut versions: Vec<Option<Version>> = vec![None; POOL];
    let mut sides = [
        SideCpu::new("library (try_acquire + release)", rounds, pairs),
        SideCpu::new("store alone (CasStore::write + release)", rounds, pairs),
    ];
    for _ in 0..rounds {
        let mut order = [0usize, 1];
        shuffle(&mut order);
        for side in order {
            let before = cpu_now();
            let pause = || {
                if !idle.is_zero() {
                    std::thread::sleep(idle);
                }
            };
            for i in 0..pairs {
                let (ta, tr) = if side == 0 {
                    let name = format!("cpu/{}", i % POOL);
                    pause();
                    let (ta, out) = time(client.try_acquire(&name, ttl)).await;
                    let AcquireOutcome::Granted(lease) = out? else {
                        return Err(fail(format!("{name} was not free")));
                    };
                    pause();
                    let (tr, out) = time(lease.release()).await;
                    out?;
                    (ta, tr)
                } else {
                    let name = LeaseName::new(format!("cpu-direct/{}", i % POOL))?;
                    let slot = &mut versions[i % POOL];
                    let expect = free_name_claim(store_clock, slot.take());
                    let record = LeaseRecord::held(holder.clone(), FencingToken::FIRST, ttl_t);
                    pause();
                    let (ta, out) = time(store.write(&name, &expect, &record)).await;
                    let CasOutcome::Written(held) = out? else {
                        return Err(fail(format!("{name} was not free")));
                    };
                    pause();
                    let (tr, out) = time(store.release(&name, &held.version, &held.record)).await;
                    let CasOutcome::Written(vacant) = out? else {
                        return Err(fail(format!("the release of {name} conflicted")));
                    };
                    *slot = Some(vacant.version);
                    (ta, tr)
                };
                let side = &mut sides[side];
                side.pairs.push(ta + tr);
                side.acquires.push(ta);
                side.releases.push(tr);
            }
            // The sleeps' own system calls would count: CPU is read without them only.
            if idle.is_zero() {
                let cpu = cpu_between(before, cpu_now());
                sides[side]
                    .cpu_per_op_us
                    .push(cpu.as_secs_f64() * 1e6 / (2 * pairs) as f64);
            }
        }
    }
    backend.cleanup().await?;
    Ok(sides)
}
