//! Store wrappers for tests (feature `testing`): count round trips, inject faults.

mod counting;
mod faults;
pub mod process;

pub use counting::{CallCounts, CountingStore};
pub use faults::{FaultPlan, FaultStore};
