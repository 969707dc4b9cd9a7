//! The shared frozen-holder case (`leasehold_testkit::frozen`) on the shared ZooKeeper
//! server: a holder process SIGSTOPped past its TTL (its session expires on the server),
//! a takeover, the holder resumed; its writes to token-marked znodes, made with
//! `NodeFence` (`ZooKeeperStore::fenced_set`), are refused.
//!
//! Both processes build the same store from the environment: the shared server
//! (`LEASEHOLD_ZK_ADDR`) under a directory named after the run, so the lease and every
//! item are the same znodes in the test and in the holder.
#![allow(missing_docs)]

mod common;

use std::process::ExitCode;

use common::fixture::Zk;
use leasehold_testkit::suite::Suite;

fn main() -> ExitCode {
    leasehold_testkit::frozen::main(|run| {
        let dir = format!("/lh-test/store-zookeeper/frozen-holder-{run}");
        async move { Suite::<Zk>(common::store_under(&dir).await) }
    })
}
