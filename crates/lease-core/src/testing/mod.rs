//! For tests (feature `testing`): store wrappers that count round trips or inject
//! faults, a wall clock that is wrong on purpose, and freezing a process.

mod counting;
mod faults;
pub mod process;
mod skewed_clock;

pub use counting::{CallCounts, CountingStore};
pub use faults::{FaultPlan, FaultStore};
pub use skewed_clock::SkewedWallClock;
