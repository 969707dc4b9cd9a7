//! Wall-clock readings, injectable for tests.
//!
//! Monotonic time is always `tokio::time::Instant` (so `#[tokio::test(start_paused)]`
//! controls it). The wall clock is read only to write a holder's wall-clock expiry into
//! records and, under an opt-in [`crate::SkewBound`], to judge another holder's.

use std::fmt;
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
