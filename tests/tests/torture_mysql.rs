//! Torture on MySQL (`leasehold-mysql`, linearizable, server clock) on a MariaDB of its
//! own: a bounded seeded run with every fault, and a run with skewed and jumping client
//! clocks (no restarts).
//! The store fault is a crash stop of MariaDB (`kill -9` of mariadbd, down 0.5-2 TTL,
//! started again): InnoDB recovers every committed grant from its redo log
//! (`innodb_flush_log_at_trx_commit=1`), so every rule holds strictly across restarts.
//! The instance is the run's own (never the shared server other tests use).
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use common::{Plan, every_fault_run, skew_run};
use leasehold_tests::stores::StoreKind;

const KIND: StoreKind = StoreKind::MySql;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_run_with_every_fault_is_clean() {
    let r = every_fault_run(Plan::new(KIND, 601, 21610, 40), 3).await;
    assert!(
        r.check.explained.is_empty(),
        "MariaDB's crash restarts keep every grant, yet grant anomalies were excused:\n{r}"
    );
}

common::torture_tests! {
    skewed_and_jumping_client_clocks_cause_no_early_takeover => skew_run(Plan::new(KIND, 602, 21620, 20));
}
