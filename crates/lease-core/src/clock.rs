//! Wall-clock readings, injectable for tests.
//!
//! Monotonic time is always `tokio::time::Instant` (so `#[tokio::test(start_paused)]`
//! controls it). The wall clock is read only to write a holder's wall-clock expiry into
//! records and, under an opt-in [`crate::SkewBound`], to judge another holder's.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in Unix milliseconds.
pub trait WallClock: Send + Sync + fmt::Debug + 'static {
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

/// The system clock shifted by an adjustable offset: a machine whose clock is wrong,
/// or jumps.
///
/// ```
/// use leasehold_core::{SkewedWallClock, SystemWallClock, WallClock};
/// let c = SkewedWallClock::new(-60_000);
/// assert!(c.now_ms() + 59_000 < SystemWallClock.now_ms());
/// c.set_offset_ms(0);
/// ```
#[derive(Debug, Default)]
pub struct SkewedWallClock {
    offset_ms: AtomicI64,
}

impl SkewedWallClock {
    /// A clock `offset_ms` ahead (negative: behind) of the system clock.
    pub fn new(offset_ms: i64) -> Self {
        Self {
            offset_ms: AtomicI64::new(offset_ms),
        }
    }

    /// Makes the clock jump to a new offset.
    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::SeqCst);
    }
}

impl WallClock for SkewedWallClock {
    fn now_ms(&self) -> u64 {
        let base = SystemWallClock.now_ms();
        base.saturating_add_signed(self.offset_ms.load(Ordering::SeqCst))
    }
}
