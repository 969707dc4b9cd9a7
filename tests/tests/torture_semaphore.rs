//! Torture of fenced semaphores (`leasehold_core::Semaphore`) on Postgres and Redis:
//! five worker processes take permits of a semaphore of 2, each slot fencing its own
//! resource, while the controller pauses permit holders (also between their validity
//! check and their write) and kills them with SIGKILL. The checker judges every slot as
//! a lease (`leasehold_tests::checker`) and counts the permit holders across slots
//! (`leasehold_tests::permits`): never more than 2 at once.
//!
//! Replay a run's fault schedule with `LEASEHOLD_TORTURE_SEED=<seed>`.

mod common;

use common::{Plan, semaphore_run};
use leasehold_tests::stores::StoreKind;

common::torture_tests! {
    postgres_permit_holders_never_exceed_the_permits => semaphore_run(Plan::new(StoreKind::Postgres, 151, 21060, 20));
    redis_permit_holders_never_exceed_the_permits => semaphore_run(Plan::new(StoreKind::Redis, 251, 21160, 20));
}
