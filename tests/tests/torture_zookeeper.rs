//! Torture on ZooKeeper (`leasehold-zookeeper`, linearizable `multi` writes, the
//! ensemble's session clock) on a three-server ensemble of its own: a bounded seeded run
//! with every fault, and a run with skewed and jumping client clocks (no restarts).
//! The store fault is `kill -9` of one server (the leader about half the time), restarted
//! after 1-4 s: the ensemble keeps its quorum and its data, so every rule holds strictly.
//! TTL 1 s (ZooKeeper session classes are whole seconds; the ensemble's tick is 100 ms).
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use common::{Plan, every_fault_run, skew_run};
use leasehold_tests::stores::StoreKind;

const KIND: StoreKind = StoreKind::ZooKeeper;

common::torture_tests! {
    bounded_run_with_every_fault_is_clean => every_fault_run(Plan::new(KIND, 401, 21250, 50), 2);
    skewed_and_jumping_client_clocks_cause_no_early_takeover => skew_run(Plan::new(KIND, 402, 21270, 22));
}
