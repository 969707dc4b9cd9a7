//! Torture on etcd (`leasehold-etcd`, linearizable, etcd's lease clock) on a three-member
//! cluster of its own: a bounded seeded run with every fault, and a run with skewed and
//! jumping client clocks (no restarts).
//! The store fault is `kill -9` of one member (the leader about half the time), restarted
//! after 1-4 s: the cluster keeps its quorum and its data, so every rule holds strictly.
//! TTL 2 s (etcd sessions are whole seconds, at least 1.5 election timeouts).
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use common::{Plan, every_fault_run, skew_run};
use leasehold_tests::stores::StoreKind;

const KIND: StoreKind = StoreKind::Etcd;

common::torture_tests! {
    bounded_run_with_every_fault_is_clean => every_fault_run(Plan::new(KIND, 301, 21210, 50), 2);
    skewed_and_jumping_client_clocks_cause_no_early_takeover => skew_run(Plan::new(KIND, 302, 21230, 22));
}
