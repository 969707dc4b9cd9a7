//! A wall clock driven by Tokio's clock, for tests and simulations.

use leasehold_core::clock::{SystemWallClock, WallClock};
use tokio::time::Instant;

/// A wall clock that starts at a given Unix time and advances with Tokio's monotonic
/// clock: under `#[tokio::test(start_paused = true)]` it moves exactly as paused time
/// does, so schedules fire at exact instants. Two of them started at different times
/// are two machines whose clocks disagree by that difference.
///
/// ```
/// use leasehold_core::clock::WallClock;
/// use leasehold_jobs::TokioWallClock;
/// let clock = TokioWallClock::starting_at(1_000);
/// assert!(clock.now_ms() >= 1_000);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TokioWallClock {
    base_ms: u64,
    base: Instant,
}

impl TokioWallClock {
    /// A clock reading `unix_ms` now.
    pub fn starting_at(unix_ms: u64) -> Self {
        Self {
            base_ms: unix_ms,
            base: Instant::now(),
        }
    }

    /// A clock reading the system time now, shifted by `offset_ms`.
    pub fn system_shifted(offset_ms: i64) -> Self {
        Self::starting_at(SystemWallClock.now_ms().saturating_add_signed(offset_ms))
    }
}

impl WallClock for TokioWallClock {
    fn now_ms(&self) -> u64 {
        let elapsed = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.base_ms.saturating_add(elapsed)
    }
}
