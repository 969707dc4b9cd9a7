//! For tests (feature `testing`): store wrappers that count round trips or inject
//! faults, a wall clock that is wrong on purpose, freezing a process, and waiting for
//! renewals, an observer's read loop.

mod counting;
mod faults;
mod observer;
pub mod process;
mod renewals;
mod skewed_clock;

pub use counting::{CallCounts, CountingStore};
pub use faults::{FaultPlan, FaultStore};
pub use observer::read_loop;
pub use renewals::renewed;
pub use skewed_clock::SkewedWallClock;
