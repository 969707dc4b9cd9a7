//! Jittered waits between attempts, from a per-client generator (seedable, so a
//! simulation replays exactly).

use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A client's random source: seeded from the OS, or from `ClientConfig::rng_seed`.
#[derive(Debug)]
pub(crate) struct Jitter(Mutex<StdRng>);

impl Jitter {
    pub(crate) fn new(seed: Option<u64>) -> Self {
        Self(Mutex::new(match seed {
            Some(s) => StdRng::seed_from_u64(s),
            None => StdRng::from_os_rng(),
        }))
    }

    fn with<T>(&self, f: impl FnOnce(&mut StdRng) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// A random 32-bit value (holder id nonces).
    pub(crate) fn nonce(&self) -> u32 {
        self.with(|r| r.random())
    }

    /// `base` stretched by a random 0–20%, so waiters released together do not retry in step.
    pub(crate) fn jittered(&self, base: Duration) -> Duration {
        let extra = self.with(|r| r.random_range(0.0..0.2));
        base + base.mul_f64(extra)
    }

    /// Exponential backoff with jitter: a random wait in `[c/2, c]`, `c = min(cap, base·2^n)`.
    pub(crate) fn exponential(&self, attempt: u32, base: Duration, cap: Duration) -> Duration {
        let ceiling = base.saturating_mul(1u32 << attempt.min(16)).min(cap);
        let floor = ceiling / 2;
        let f = self.with(|r| r.random_range(0.0..1.0));
        floor + ceiling.saturating_sub(floor).mul_f64(f)
    }
}
