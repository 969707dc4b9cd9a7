//! The shared leader-kill scenario (`leasehold_testkit::leader_kill`) on the three-server
//! ensemble (`LEASEHOLD_ZK_ENSEMBLE`, started by `scripts/stores.sh start
//! zookeeper-ensemble`): a lease survives `kill -9` of the ZooKeeper leader with no
//! double grant, and a lease whose holder process is killed is taken over after its
//! session expires.
//!
//! The killed server is started again with `scripts/stores.sh start-zookeeper-member`
//! when the test ends, also on failure. (A custom harness: this binary is also the
//! worker process that holds the lease and is killed.)
#![allow(missing_docs)]

mod common;

use std::process::ExitCode;
use std::time::Duration;

use common::ensemble::Ensemble;

fn main() -> ExitCode {
    leasehold_testkit::leader_kill::main(
        Duration::from_secs(120),
        || async { Ensemble::new("leader-kill") },
        |args| async move {
            let [servers, dir] = <[String; 2]>::try_from(args).expect("the holder's servers and directory");
            common::store_on(&servers, &dir).await
        },
    )
}
