//! A wall clock that is wrong on purpose.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::clock::{SystemWallClock, WallClock};

/// The system clock shifted by an adjustable offset: a machine whose clock is wrong,
/// or jumps.
///
/// ```
/// use leasehold_core::clock::{SystemWallClock, WallClock};
/// use leasehold_core::testing::SkewedWallClock;
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
