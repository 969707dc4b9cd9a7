//! Torture on S3 (`leasehold-s3`, linearizable conditional writes, expiry by observation) on moto: a bounded seeded run with every fault, and a run with skewed and
//! jumping client clocks (no restarts).
//! moto runs behind one lock (`scripts/moto_serial.py`): its own threaded server lets two
//! racing conditional PUTs both succeed, which S3 never does. A moto restart (`kill -9`)
//! loses the bucket and every lease object: a real S3 never does that, so the checker
//! treats it as a data-loss epoch, like a Redis restart; the resource must still refuse
//! every regression.
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use common::{Plan, every_fault_run, skew_run};
use leasehold_tests::stores::StoreKind;

const KIND: StoreKind = StoreKind::S3;

common::torture_tests! {
    bounded_run_with_every_fault_is_clean => every_fault_run(Plan::new(KIND, 501, 21410, 40), 3);
    skewed_and_jumping_client_clocks_cause_no_early_takeover => skew_run(Plan::new(KIND, 502, 21420, 25));
}
