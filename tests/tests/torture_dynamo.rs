//! Torture on DynamoDB (`leasehold-dynamodb`, linearizable, expiry by observation) on moto: a bounded seeded run with every fault, and a run with skewed and
//! jumping client clocks (no restarts).
//! moto runs behind one lock (`scripts/moto_serial.py`): its own threaded server lets two
//! racing conditional writes both succeed, which DynamoDB never does. A moto restart
//! (`kill -9`) loses everything moto holds (the table, every lease, every token): a real
//! DynamoDB never does that, so the checker treats it as a data-loss epoch, like a Redis
//! restart; the resource must still refuse every regression.
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use common::{Plan, every_fault_run, skew_run};
use leasehold_tests::stores::StoreKind;

const KIND: StoreKind = StoreKind::Dynamo;

common::torture_tests! {
    bounded_run_with_every_fault_is_clean => every_fault_run(Plan::new(KIND, 401, 21310, 40), 3);
    skewed_and_jumping_client_clocks_cause_no_early_takeover => skew_run(Plan::new(KIND, 402, 21320, 25));
}
