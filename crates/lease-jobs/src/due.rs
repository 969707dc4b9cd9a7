//! The clock that says which slots are due: the store's own where it has one, the wall
//! clock elsewhere.

use std::sync::Arc;
use std::time::Duration;

use leasehold_core::{Result, clock::WallClock, store::CasStore};
use tokio::time::Instant;

/// How often the store's clock is read again at most; between reads its time is the
/// last reading carried forward on the monotonic clock.
pub(crate) const RESYNC: Duration = Duration::from_secs(1);

/// What "now" is for the schedule.
///
/// On a store that answers [`CasStore::store_now_ms`] (the SQL stores, Redis), the
/// store's time: read at most once per scheduler pass and at most once per
/// [`RESYNC`], and carried forward on the monotonic clock between reads. A reading is
/// taken while the call is under way, so it is at most the store's time when the
/// answer arrives: slots are never due before their time on the store's clock. On the
/// other stores, the wall clock.
pub(crate) struct DueClock {
    store: Arc<dyn CasStore>,
    wall: Arc<dyn WallClock>,
    /// The last reading of the store's clock and when its answer arrived.
    base: Option<(u64, Instant)>,
    /// `Some(false)` once the store said it has no clock to read.
    store_clock: Option<bool>,
}

impl DueClock {
    pub(crate) fn new(store: Arc<dyn CasStore>, wall: Arc<dyn WallClock>) -> Self {
        Self {
            store,
            wall,
            base: None,
            store_clock: None,
        }
    }

    /// Reads the store's clock if it has one and the last reading is older than
    /// [`RESYNC`]: `true` if the store was asked (and answered). After an error the
    /// last reading stays in use.
    pub(crate) async fn refresh(&mut self) -> Result<bool> {
        if self.store_clock == Some(false) {
            return Ok(false);
        }
        if self.base.is_some_and(|(_, at)| at.elapsed() < RESYNC) {
            return Ok(false);
        }
        match self.store.store_now_ms().await? {
            Some(ms) => {
                self.store_clock = Some(true);
                self.base = Some((ms, Instant::now()));
            }
            None => self.store_clock = Some(false),
        }
        Ok(true)
    }

    /// Now, in Unix ms: `None` while a store with a clock has not been read yet.
    pub(crate) fn now_ms(&self) -> Option<u64> {
        match (self.store_clock, self.base) {
            (Some(true), Some((ms, at))) => {
                Some(ms.saturating_add(u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX)))
            }
            (Some(false), _) => Some(self.wall.now_ms()),
            _ => None,
        }
    }

    /// Whether slots are due on the store's clock (else on the wall clock).
    pub(crate) fn on_store_clock(&self) -> bool {
        self.store_clock == Some(true)
    }

    /// The worst skew between instances' views of which slots are due: none on the
    /// store's clock, [`JobSpec::clock_skew`](crate::JobSpec::clock_skew) on the wall
    /// clock.
    pub(crate) fn skew(&self, clock_skew: Duration) -> Duration {
        if self.on_store_clock() {
            Duration::ZERO
        } else {
            clock_skew
        }
    }
}
