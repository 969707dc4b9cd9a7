//! Cross-crate, multi-process and fault-injection test support for leasehold: a TCP fault
//! proxy, the torture workers' history format, and the independent history checker.

pub mod checker;
pub mod history;
pub mod proxy;
