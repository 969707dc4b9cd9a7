//! Cross-crate, multi-process and fault-injection tests for leasehold: the torture
//! harness (real worker processes, real stores, injected faults), the history format its
//! workers write, and the independent checker that judges a run from those histories and
//! the protected resource alone.
//!
//! - [`torture`]: the controller ([`torture::run`]); one run per store in
//!   `tests/torture_<store>.rs`, the long run in `scripts/torture-long.sh`.
//! - [`checker`]: the invariants, one rule each, with unit tests that break each one.
//! - [`permits`]: the semaphore runs' checker: the lease rules per slot, and never more
//!   than N permit holders at once.
//! - [`history`]: the JSONL events workers and the controller record.
//! - [`resource`]: the protected resource (a fenced table pair on the shared Postgres).
//! - [`stores`]: dedicated store instances, their restarts, and the lease stores.
//! - [`proxy`]: the TCP fault proxy.
//! - [`summary`]: several runs of one store added up (the long runs).
//!
//! `docs/RELIABILITY.md` states what the runs show, with their figures.

pub mod checker;
pub mod history;
pub mod permits;
pub mod proxy;
pub mod resource;
pub mod stores;
pub mod summary;
pub mod torture;

#[cfg(test)]
mod test_events;
