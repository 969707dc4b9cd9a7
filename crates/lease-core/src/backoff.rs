//! Jittered waits between attempts.

use std::time::Duration;

use rand::Rng;

/// `base` stretched by a random 0–20%, so waiters released together do not retry in step.
pub(crate) fn jittered(base: Duration) -> Duration {
    let extra = rand::rng().random_range(0.0..0.2);
    base + base.mul_f64(extra)
}

/// Exponential backoff with full jitter: a random wait in `[base/2, min(cap, base·2^n)]`.
pub(crate) fn exponential(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let ceiling = base.saturating_mul(1u32 << attempt.min(16)).min(cap);
    let floor = ceiling / 2;
    floor
        + ceiling
            .saturating_sub(floor)
            .mul_f64(rand::rng().random_range(0.0..1.0))
}
